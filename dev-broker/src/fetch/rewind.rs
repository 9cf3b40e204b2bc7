//! A Fetch answered OFFSET_OUT_OF_RANGE for some of its partitions (the
//! control socket's `rewind`, [`crate::rewinds`]), as a broker answers a
//! fetch past the log end it knows: a new partition leader whose log lags,
//! brokers over a shared store that answer from different views of it.
//! The client then resets its position (`auto.offset.reset`), and with
//! `earliest` reads the partition again from its start.

use super::{PartitionKey, Request, Response};
use crate::wire::{put_uvarint, Header, Reader};

/// Kafka's OFFSET_OUT_OF_RANGE.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;

/// A topic as a Fetch names it: by name to v12, by id from v13.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topic {
    Name(String),
    Id([u8; 16]),
}

/// One partition a Fetch request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    pub topic: Topic,
    pub partition: i32,
    /// Its FetchOffset.
    pub offset: i64,
    /// As the request and its response name it.
    pub key: PartitionKey,
}

/// The partitions a Fetch request of a version read here asks for; None
/// for anything else.
pub fn asked(header: &Header) -> Option<Vec<Asked>> {
    let read = Request::read(header)?;
    let buf = header.body.buf;
    let version = header.version;
    read.offsets
        .into_iter()
        .map(|((topic, partition), at)| {
            let offset = i64::from_be_bytes(buf.get(at..at + 8)?.try_into().ok()?);
            let named = match version {
                13.. => Topic::Id(topic.as_slice().try_into().ok()?),
                _ => Topic::Name(Reader { buf: &topic, at: 0 }.string_in(version >= 12)??),
            };
            Some(Asked { topic: named, partition, offset, key: (topic, partition) })
        })
        .collect()
}

/// `frame`, a Fetch response of `version` (without its length), with each
/// partition of `keys` answered as Kafka answers one out of range
/// (`FetchResponse.partitionResponse`): error OFFSET_OUT_OF_RANGE, no
/// records, high watermark, last stable offset and log start offset -1,
/// no aborted transactions, no preferred read replica; the partition's
/// tagged fields kept. None if it cannot be read or has none of them.
pub fn out_of_range(frame: &[u8], version: i16, keys: &[PartitionKey]) -> Option<Vec<u8>> {
    let v = version;
    let flexible = v >= 12;
    let read = Response::read(frame, v)?;
    let mut fields = OFFSET_OUT_OF_RANGE.to_be_bytes().to_vec();
    fields.extend_from_slice(&(-1i64).to_be_bytes()); // HighWatermark
    if v >= 4 {
        fields.extend_from_slice(&(-1i64).to_be_bytes()); // LastStableOffset
    }
    if v >= 5 {
        fields.extend_from_slice(&(-1i64).to_be_bytes()); // LogStartOffset
    }
    if v >= 4 {
        // AbortedTransactions: null.
        match flexible {
            true => put_uvarint(&mut fields, 0),
            false => fields.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    if v >= 11 {
        fields.extend_from_slice(&(-1i32).to_be_bytes()); // PreferredReadReplica
    }
    // Records: empty, not null.
    match flexible {
        true => put_uvarint(&mut fields, 1),
        false => fields.extend_from_slice(&0i32.to_be_bytes()),
    }
    let mut out = frame.to_vec();
    let mut rewritten = false;
    // From the back, so that the fields before keep their place.
    for part in read.parts.iter().rev().filter(|p| keys.contains(&p.partition)) {
        out.splice(part.entry..part.field.end, fields.iter().copied());
        rewritten = true;
    }
    rewritten.then_some(out)
}
