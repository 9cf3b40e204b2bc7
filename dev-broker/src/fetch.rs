//! Fetch as Kafka answers it: parked until MinBytes of records are there
//! or MaxWaitMs has passed (Kafka's DelayedFetch), not held for MaxWaitMs
//! whatever is produced meanwhile, as librdkafka's mock holds an empty one
//! (rdkafka_mock_handlers.c, the end of `rd_kafka_mock_handle_Fetch`: the
//! response is computed at once and only its sending is delayed).
//!
//! The forwarder parks a Fetch itself ([`Parked`]): it asks the mock the
//! same request with MaxWaitMs 0 (a probe, answered at once), passes the
//! answer on if Kafka would ([`Parked::take`]), and otherwise probes
//! again once something is produced ([`Wakes`]) or at the deadline. The
//! mock shows at most one batch of each partition where Kafka counts every
//! byte there towards MinBytes and answers with them all: the forwarder
//! gathers the rest by probing past what each probe showed ([`Gathered`]),
//! and answers with every batch gathered. Each probe is a round trip to the
//! mock, so the batches shown are kept ([`Shown`]): a fetch from an offset
//! they cover takes them from there, and probes only past them.
//!
//! The mock keeps no fetch sessions (KIP-227): it reads SessionId and
//! SessionEpoch, echoes the SessionId and remembers nothing, so every probe
//! is a full fetch from the offsets in the request, and sending the same
//! probe again is answered as the first was, with whatever is there now.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::wire::{put_uvarint, Header, Reader, FETCH};

/// The Fetch versions whose layout is read here: those the mock serves
/// (librdkafka 2.12.1: 0 to 16). Others go to the mock as they are.
const VERSIONS: std::ops::RangeInclusive<i16> = 0..=16;

/// A Fetch the forwarder parks.
#[derive(Debug, PartialEq, Eq)]
pub struct Parked {
    pub version: i16,
    pub correlation: i32,
    pub max_wait: Duration,
    /// The record bytes to wait for: MinBytes, or 0 when Kafka answers at
    /// once whatever there is (MinBytes 0, or no partition asked for).
    pub wants: u64,
    /// The request with MaxWaitMs 0, which the mock answers at once.
    pub probe: Vec<u8>,
    /// Where each partition's FetchOffset is in `probe`: to probe past the
    /// records shown.
    offsets: Vec<(PartitionKey, usize)>,
}

/// What a parked fetch has gathered of the records there: every complete
/// batch of each partition from the offset asked for on, and the probe
/// that asks past them. Records stay where they are written, so what was
/// gathered holds until the fetch is answered.
pub struct Gathered {
    /// The probe asking past what was gathered, partition by partition.
    pub probe: Vec<u8>,
    /// Record bytes gathered, summed over the partitions.
    pub bytes: u64,
    /// Complete record batches, by partition.
    records: Vec<(PartitionKey, Vec<u8>)>,
}

/// A partition as a fetch names it: its topic's key (`topic_key`, as its
/// bytes) and its index.
type PartitionKey = (Vec<u8>, i32);

/// What one probe's answer says about the gathering.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Kafka answers with this response as it is, at once: an error (top
    /// level or a partition's), a preferred read replica, a batch larger
    /// than the fetch's room, or a response not read here.
    AsItIs,
    /// A partition has records past those gathered: probe again.
    More,
    /// Everything there is was gathered.
    Done,
}

impl Parked {
    /// A Fetch to park: of a version read here, whose whole body reads, with
    /// MaxWaitMs > 0 (Kafka answers one of 0 at once, and so does the
    /// mock). None for anything else, which goes to the mock as it is.
    pub fn parse(header: &Header) -> Option<Parked> {
        let v = header.version;
        if header.api_key != FETCH || !VERSIONS.contains(&v) {
            return None;
        }
        let flexible = v >= 12;
        let mut r = header.body.clone();
        if v <= 14 {
            r.i32()?; // ReplicaId (a field of ReplicaState, tagged, from v15)
        }
        let at = r.at;
        let (max_wait, min_bytes) = (r.i32()?, r.i32()?);
        // MaxBytes (v3+), IsolationLevel (v4+), SessionId and SessionEpoch (v7+).
        r.skip(if v >= 3 { 4 } else { 0 } + if v >= 4 { 1 } else { 0 } + if v >= 7 { 8 } else { 0 })?;
        // Partition, CurrentLeaderEpoch (v9+), FetchOffset,
        // LastFetchedEpoch (v12+), LogStartOffset (v5+), PartitionMaxBytes.
        let partition =
            4 + if v >= 9 { 4 } else { 0 } + 8 + if v >= 12 { 4 } else { 0 } + if v >= 5 { 8 } else { 0 } + 4;
        let mut partitions = 0;
        let mut offsets = Vec::new();
        for _ in 0..array_len(&mut r, flexible)? {
            let key = key_bytes(&mut r, v)?;
            let n = array_len(&mut r, flexible)?;
            partitions += n;
            for _ in 0..n {
                let index = r.clone().i32()?;
                offsets.push(((key.clone(), index), r.at + 4 + if v >= 9 { 4 } else { 0 }));
                r.skip(partition)?;
                tags(&mut r, flexible)?;
            }
            tags(&mut r, flexible)?;
        }
        if v >= 7 {
            // ForgottenTopicsData: a topic and its partitions' indexes.
            for _ in 0..array_len(&mut r, flexible)? {
                topic_key(&mut r, v)?;
                let n = array_len(&mut r, flexible)?;
                r.skip(usize::try_from(n).ok()?.checked_mul(4)?)?;
                tags(&mut r, flexible)?;
            }
        }
        if v >= 11 {
            r.string_in(flexible)?; // RackId
        }
        tags(&mut r, flexible)?;
        if max_wait <= 0 || !r.rest().is_empty() {
            return None;
        }
        let mut probe = header.body.buf.to_vec();
        probe[at..at + 4].copy_from_slice(&0i32.to_be_bytes());
        // Kafka answers at once when it has MinBytes, 0 included, or when
        // nothing is asked for (ReplicaManager.fetchMessages).
        let wants = if partitions == 0 { 0 } else { u64::try_from(min_bytes).unwrap_or(0) };
        let max_wait = Duration::from_millis(max_wait as u64);
        Some(Parked { version: v, correlation: header.correlation, max_wait, wants, probe, offsets })
    }

    /// Nothing gathered yet: the first probe asks from the fetch's offsets.
    pub fn gathered(&self) -> Gathered {
        Gathered { probe: self.probe.clone(), bytes: 0, records: Vec::new() }
    }

    /// Takes the complete batches of the mock's `response` to
    /// `gathered.probe` into `gathered` (and keeps them in `shown`), then
    /// those `shown` holds after them where the partition has more, and
    /// moves its probe past them all.
    pub fn take(&self, gathered: &mut Gathered, response: &[u8], shown: &Shown) -> Step {
        let Some(read) = Response::read(response, self.version) else { return Step::AsItIs };
        if read.at_once {
            return Step::AsItIs;
        }
        let mut moved = false;
        for part in read.parts {
            let records = &response[part.records.clone()];
            let Some((end, complete)) = part.end else {
                if records.is_empty() {
                    continue;
                }
                // One batch larger than the room asked for: Kafka gives it
                // cut short, and the client asks again with more room.
                return Step::AsItIs;
            };
            let Some(&(_, at)) = self.offsets.iter().find(|(k, _)| *k == part.partition) else {
                return Step::AsItIs;
            };
            let Some(offset) = gathered.probe.get_mut(at..at + 8) else { return Step::AsItIs };
            let key = (self.version, part.partition);
            shown.keep(&key, records);
            let mut taken = records[..complete].to_vec();
            let end = match part.held_back {
                true => shown.after(&key, end, &mut taken, GATHER_BYTES.saturating_sub(gathered.bytes)),
                false => end,
            };
            offset.copy_from_slice(&end.to_be_bytes());
            gathered.bytes += taken.len() as u64;
            match gathered.records.iter_mut().find(|(k, _)| *k == key.1) {
                Some((_, batches)) => batches.extend_from_slice(&taken),
                None => gathered.records.push((key.1, taken)),
            }
            moved = true;
        }
        if read.held_back && moved {
            Step::More
        } else {
            Step::Done
        }
    }

    /// The answer Kafka gives with what was gathered: `last` (the mock's
    /// latest answer, whose high watermarks are the newest) with each
    /// partition's records replaced by those gathered of it. None if
    /// `last` cannot be read.
    pub fn answer(&self, gathered: &Gathered, last: &[u8]) -> Option<Vec<u8>> {
        let read = Response::read(last, self.version)?;
        let mut frame = last.to_vec();
        // From the back, so that the fields before keep their place.
        for part in read.parts.iter().rev() {
            let Some((_, records)) = gathered.records.iter().find(|(k, _)| *k == part.partition) else {
                continue;
            };
            let mut field = Vec::with_capacity(records.len() + 5);
            if self.version >= 12 {
                put_uvarint(&mut field, records.len() as u64 + 1);
            } else {
                field.extend_from_slice(&i32::try_from(records.len()).ok()?.to_be_bytes());
            }
            field.extend_from_slice(records);
            frame.splice(part.field.clone(), field);
        }
        Some(frame)
    }
}

/// What the forwarder reads of a Fetch response.
#[derive(Debug, Default, PartialEq, Eq)]
struct Response {
    /// An error (top level or a partition's) or a preferred read replica:
    /// Kafka answers those at once.
    at_once: bool,
    /// A partition has records past the last one returned (below its high
    /// watermark).
    held_back: bool,
    /// Each partition, in the order of the response.
    parts: Vec<Part>,
}

/// One partition of a Fetch response.
#[derive(Debug, PartialEq, Eq)]
struct Part {
    partition: PartitionKey,
    /// It has records past the last one returned.
    held_back: bool,
    /// Where its Records field is in the frame, its length included.
    field: std::ops::Range<usize>,
    /// Where its record bytes are in the frame.
    records: std::ops::Range<usize>,
    /// Its records' end (`records_end`).
    end: Option<(i64, usize)>,
}

impl Response {
    /// Reads a Fetch response frame of `version` (without its length): the
    /// correlation id, then the body as FetchResponse.json lays it out.
    fn read(frame: &[u8], version: i16) -> Option<Response> {
        let v = version;
        let flexible = v >= 12;
        let mut r = Reader { buf: frame, at: 4 };
        tags(&mut r, flexible)?; // the response header's, from v12
        if v >= 1 {
            r.i32()?; // ThrottleTimeMs
        }
        let mut read = Response::default();
        if v >= 7 {
            read.at_once |= r.i16()? != 0; // ErrorCode
            r.i32()?; // SessionId
        }
        for _ in 0..array_len(&mut r, flexible)? {
            let key = key_bytes(&mut r, v)?;
            for _ in 0..array_len(&mut r, flexible)? {
                let index = r.i32()?;
                read.at_once |= r.i16()? != 0;
                let high_watermark = r.i64()?;
                // LastStableOffset (v4+), LogStartOffset (v5+).
                r.skip(if v >= 4 { 8 } else { 0 } + if v >= 5 { 8 } else { 0 })?;
                if v >= 4 {
                    // AbortedTransactions: ProducerId, FirstOffset (nullable).
                    for _ in 0..nullable_array_len(&mut r, flexible)? {
                        r.skip(16)?;
                        tags(&mut r, flexible)?;
                    }
                }
                if v >= 11 {
                    read.at_once |= r.i32()? >= 0; // PreferredReadReplica
                }
                let field = r.at;
                let records = nullable_bytes(&mut r, flexible)?.unwrap_or_default();
                let end = records_end(records);
                let held_back = end.is_some_and(|(end, _)| end < high_watermark);
                read.held_back |= held_back;
                let at = r.at - records.len();
                let partition = (key.clone(), index);
                read.parts.push(Part { partition, held_back, field: field..r.at, records: at..r.at, end });
                tags(&mut r, flexible)?;
            }
            tags(&mut r, flexible)?;
        }
        tags(&mut r, flexible)?;
        r.rest().is_empty().then_some(read)
    }
}

/// The offset after the last record of `records` (complete batches only)
/// and the bytes of those batches, or None if none is complete. Record
/// batches (magic 2) and the older message sets both start with the offset
/// (the batch's base, a message's own) and the size of the rest, and have
/// the magic byte at 16; a v2 batch's last offset is base +
/// lastOffsetDelta (at 23).
fn records_end(records: &[u8]) -> Option<(i64, usize)> {
    batches(records).last().map(|b| (b.end, b.bytes.end))
}

/// One complete batch (or older message) of a partition's records.
struct Batch {
    /// Its first offset: a v2 batch's base (None for an older message,
    /// whose own offset is its last inner one when compressed).
    base: Option<i64>,
    /// The offset after its last record.
    end: i64,
    /// Where it is in the records.
    bytes: std::ops::Range<usize>,
}

/// The complete batches of `records`, in order, up to the first that is
/// cut short or cannot be read.
fn batches(records: &[u8]) -> Vec<Batch> {
    let mut r = Reader { buf: records, at: 0 };
    let mut all = Vec::new();
    let mut next = || {
        let head = r.clone().take(12)?;
        let offset = i64::from_be_bytes(head[..8].try_into().ok()?);
        let size = usize::try_from(i32::from_be_bytes(head[8..].try_into().ok()?)).ok()?;
        let from = r.at;
        let entry = r.take(size.checked_add(12)?)?;
        let (base, last) = match entry.get(16) {
            Some(2) => (Some(offset), offset + i64::from(i32::from_be_bytes(entry.get(23..27)?.try_into().ok()?))),
            _ => (None, offset),
        };
        Some(Batch { base, end: last + 1, bytes: from..r.at })
    };
    while let Some(batch) = next() {
        all.push(batch);
    }
    all
}

/// The most record bytes a parked fetch gathers: librdkafka's default room
/// for a partition (`fetch.message.max.bytes`).
pub const GATHER_BYTES: u64 = 1024 * 1024;

/// The record batches the mock has shown, the newest of each partition: a fetch
/// gathers those after the offset the mock showed it from here rather
/// than one probe each (a new owner reading the backlog of a group that has
/// run for a while, 300 batches and more: 16 ms). Records stay where they
/// are written, so a batch once shown holds; the mock still answers each
/// fetch's first probe (an offset out of range, an error, a moved leader),
/// and the probe past what was taken here (the high watermark). Only v2
/// batches (an older compressed message does not say its first offset),
/// at most `GATHER_BYTES` of each partition (what one fetch takes), and
/// all forgotten past `SHOWN_BYTES`.
#[derive(Default)]
pub struct Shown {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    batches: HashMap<ShownKey, Batches>,
    bytes: usize,
}

/// A partition as a fetch of one version names it.
type ShownKey = (i16, PartitionKey);

/// A partition's batches by base offset, each with its end offset and
/// bytes, and their bytes summed (kept within `GATHER_BYTES` without
/// adding them up again at every fetch).
#[derive(Default)]
struct Batches {
    by_base: BTreeMap<i64, (i64, Vec<u8>)>,
    bytes: usize,
}

/// The most bytes of batches kept, all partitions together.
const SHOWN_BYTES: usize = 64 * 1024 * 1024;

impl Shown {
    /// Keeps the complete v2 batches of `records`, shown for `key`.
    fn keep(&self, key: &ShownKey, records: &[u8]) {
        let mut kept = self.kept.lock().expect("shown lock");
        let kept = &mut *kept;
        if kept.bytes > SHOWN_BYTES {
            (kept.batches, kept.bytes) = Default::default();
        }
        let partition = kept.batches.entry(key.clone()).or_default();
        for batch in batches(records) {
            let Some(base) = batch.base else { continue };
            let bytes = &records[batch.bytes];
            // Every fetch from its offset shows a batch again: kept as it
            // is, it is not copied again (a topic made anew may show other
            // bytes at the same offset, which replace it).
            if partition.by_base.get(&base).is_some_and(|(end, old)| *end == batch.end && old[..] == bytes[..]) {
                continue;
            }
            (kept.bytes, partition.bytes) = (kept.bytes + bytes.len(), partition.bytes + bytes.len());
            if let Some((_, old)) = partition.by_base.insert(base, (batch.end, bytes.to_vec())) {
                (kept.bytes, partition.bytes) = (kept.bytes - old.len(), partition.bytes - old.len());
            }
        }
        while partition.bytes > GATHER_BYTES as usize {
            let Some((_, (_, oldest))) = partition.by_base.pop_first() else { break };
            (kept.bytes, partition.bytes) = (kept.bytes - oldest.len(), partition.bytes - oldest.len());
        }
    }

    /// Appends to `taken` the batches kept for `key` from `from` on, while
    /// they follow each other and `room` lasts: the offset after them.
    fn after(&self, key: &ShownKey, from: i64, taken: &mut Vec<u8>, room: u64) -> i64 {
        let kept = self.kept.lock().expect("shown lock");
        let Some(partition) = kept.batches.get(key) else { return from };
        let (mut at, mut left) = (from, room.saturating_sub(taken.len() as u64));
        while let Some((_, (end, bytes))) = partition.by_base.range(..=at).next_back().filter(|(_, (end, _))| *end > at)
        {
            if bytes.len() as u64 > left {
                break;
            }
            taken.extend_from_slice(bytes);
            left -= bytes.len() as u64;
            at = *end;
        }
        at
    }
}

/// A topic's key, as its bytes (`topic_key`).
fn key_bytes(r: &mut Reader, version: i16) -> Option<Vec<u8>> {
    let from = r.at;
    topic_key(r, version)?;
    r.buf.get(from..r.at).map(<[u8]>::to_vec)
}

/// A topic's key in a Fetch request or response: its name to v12, its id
/// (a UUID) from v13.
fn topic_key(r: &mut Reader, version: i16) -> Option<()> {
    if version >= 13 {
        r.skip(16)
    } else {
        r.string_in(version >= 12)?.map(|_| ())
    }
}

/// An array's length: an i32, or from the flexible versions a uvarint of
/// length + 1. None for a null one, which a Fetch request never has.
fn array_len(r: &mut Reader, flexible: bool) -> Option<u64> {
    if flexible {
        r.uvarint()?.checked_sub(1)
    } else {
        u64::try_from(r.i32()?).ok()
    }
}

/// A nullable array's length, null read as empty.
fn nullable_array_len(r: &mut Reader, flexible: bool) -> Option<u64> {
    if flexible {
        Some(r.uvarint()?.saturating_sub(1))
    } else {
        Some(u64::try_from(r.i32()?).unwrap_or(0))
    }
}

/// Nullable bytes (Records): an i32 length, or a uvarint of length + 1.
fn nullable_bytes<'a>(r: &mut Reader<'a>, flexible: bool) -> Option<Option<&'a [u8]>> {
    let len = if flexible { r.uvarint()?.checked_sub(1) } else { u64::try_from(r.i32()?).ok() };
    match len {
        None => Some(None),
        Some(len) => r.take(usize::try_from(len).ok()?).map(Some),
    }
}

/// The tagged fields that end a structure in the flexible versions.
fn tags(r: &mut Reader, flexible: bool) -> Option<()> {
    if flexible {
        r.tagged_fields()
    } else {
        Some(())
    }
}

/// What a parked fetch waits on: the bytes written, as each Produce
/// response goes back to its client (the mock has stored the records by
/// then), the leaders moved (Kafka answers a parked fetch then), and a
/// [`tokio::sync::Notify`] for the waiters. The bytes, so that a fetch
/// waiting for more than were written since it looked does not look again
/// (Kafka keeps the same count: with 200 fetches waiting on one partition,
/// probing the mock at every write took a core).
#[derive(Default)]
pub struct Wakes {
    /// The Produce requests' sizes, summed: at least the record bytes they
    /// brought (a request is never empty, so each write changes it).
    written: AtomicU64,
    /// Leaders moved.
    moves: AtomicU64,
    notify: tokio::sync::Notify,
}

/// Where the writes and moves stood when a parked fetch looked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    written: u64,
    moves: u64,
}

impl Wakes {
    /// What was written and moved so far: read before a probe, to know
    /// whether a write or a move came after it.
    pub fn mark(&self) -> Mark {
        Mark { written: self.written.load(Ordering::SeqCst), moves: self.moves.load(Ordering::SeqCst) }
    }

    /// A Produce request of `bytes` was stored: every parked fetch that
    /// may now have its MinBytes looks again.
    pub fn wrote(&self, bytes: u64) {
        self.written.fetch_add(bytes.max(1), Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// A leader moved: every parked fetch looks again.
    pub fn moved(&self) {
        self.moves.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether a fetch that looked at `mark`, having `gathered` of the
    /// `wants` bytes it waits for, should look again: a leader moved
    /// since, or the writes since may have brought the rest.
    pub fn worth_a_look(&self, mark: Mark, gathered: u64, wants: u64) -> bool {
        let now = self.mark();
        now.moves != mark.moves || gathered.saturating_add(now.written - mark.written) >= wants
    }

    /// Returns once something was written or moved after [`Wakes::mark`]
    /// said `seen` (at once if it was already), or at `deadline`. None is
    /// lost: the waiter is registered before the mark is read again.
    pub async fn wait_past(&self, seen: Mark, deadline: Instant) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.mark() == seen {
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{put_string, put_uvarint};

    const TOPIC_ID: [u8; 16] = [7; 16];
    /// v4 (kafka-python), v11, v16 (librdkafka 2.12), and each version
    /// where the layout changes.
    const VERSIONS_READ: [i16; 10] = [0, 3, 4, 5, 7, 9, 11, 12, 13, 16];

    fn array(out: &mut Vec<u8>, n: usize, flexible: bool) {
        if flexible {
            put_uvarint(out, n as u64 + 1);
        } else {
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
    }

    fn topic(out: &mut Vec<u8>, version: i16) {
        match version {
            13.. => out.extend_from_slice(&TOPIC_ID),
            12 => out.extend_from_slice(&[2, b't']),
            _ => put_string(out, Some("t")),
        }
    }

    /// A Fetch request as a client writes it: one topic, `partitions`
    /// partitions (fetch offsets 0, 1, ...), a forgotten topic from v7 and
    /// a rack from v11.
    fn request(version: i16, max_wait: i32, min_bytes: i32, partitions: usize) -> Vec<u8> {
        let v = version;
        let flexible = v >= 12;
        let mut f = FETCH.to_be_bytes().to_vec();
        f.extend_from_slice(&v.to_be_bytes());
        f.extend_from_slice(&42i32.to_be_bytes());
        put_string(&mut f, Some("rdkafka"));
        if flexible {
            f.push(0);
        }
        if v <= 14 {
            f.extend_from_slice(&(-1i32).to_be_bytes());
        }
        f.extend_from_slice(&max_wait.to_be_bytes());
        f.extend_from_slice(&min_bytes.to_be_bytes());
        if v >= 3 {
            f.extend_from_slice(&52_428_800i32.to_be_bytes());
        }
        if v >= 4 {
            f.push(0);
        }
        if v >= 7 {
            f.extend_from_slice(&0i32.to_be_bytes());
            f.extend_from_slice(&(-1i32).to_be_bytes());
        }
        array(&mut f, 1, flexible);
        topic(&mut f, v);
        array(&mut f, partitions, flexible);
        for p in 0..partitions as i32 {
            f.extend_from_slice(&p.to_be_bytes());
            if v >= 9 {
                f.extend_from_slice(&(-1i32).to_be_bytes());
            }
            f.extend_from_slice(&i64::from(p).to_be_bytes());
            if v >= 12 {
                f.extend_from_slice(&(-1i32).to_be_bytes());
            }
            if v >= 5 {
                f.extend_from_slice(&(-1i64).to_be_bytes());
            }
            f.extend_from_slice(&1_048_576i32.to_be_bytes());
            if flexible {
                f.push(0);
            }
        }
        if flexible {
            f.push(0);
        }
        if v >= 7 {
            array(&mut f, 1, flexible);
            topic(&mut f, v);
            array(&mut f, 2, flexible);
            f.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 6]);
            if flexible {
                f.push(0);
            }
        }
        if v >= 11 {
            if flexible {
                f.push(1); // an empty compact string
            } else {
                put_string(&mut f, Some(""));
            }
        }
        if flexible {
            f.push(0);
        }
        f
    }

    /// A record batch (magic 2) of `count` records from `base`, `size`
    /// bytes in all.
    fn batch(base: i64, count: i32, size: usize) -> Vec<u8> {
        let mut b = base.to_be_bytes().to_vec();
        b.extend_from_slice(&(size as i32 - 12).to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes()); // partitionLeaderEpoch
        b.push(2); // magic
        b.extend_from_slice(&0u32.to_be_bytes()); // crc
        b.extend_from_slice(&0i16.to_be_bytes()); // attributes
        b.extend_from_slice(&(count - 1).to_be_bytes()); // lastOffsetDelta
        b.resize(size, 0);
        b
    }

    /// One partition of a response: its error, high watermark and records
    /// (None: null).
    struct Part<'a> {
        error: i16,
        high_watermark: i64,
        records: Option<&'a [u8]>,
    }

    /// A Fetch response as the mock writes it (with one aborted transaction
    /// per partition, which the mock never writes, to be read past).
    fn response(version: i16, error: i16, parts: &[Part]) -> Vec<u8> {
        let v = version;
        let flexible = v >= 12;
        let mut f = 42i32.to_be_bytes().to_vec();
        if flexible {
            f.push(0);
        }
        if v >= 1 {
            f.extend_from_slice(&0i32.to_be_bytes());
        }
        if v >= 7 {
            f.extend_from_slice(&error.to_be_bytes());
            f.extend_from_slice(&0i32.to_be_bytes());
        }
        array(&mut f, 1, flexible);
        topic(&mut f, v);
        array(&mut f, parts.len(), flexible);
        for (i, part) in (0..).zip(parts) {
            f.extend_from_slice(&i32::to_be_bytes(i));
            f.extend_from_slice(&part.error.to_be_bytes());
            f.extend_from_slice(&part.high_watermark.to_be_bytes());
            if v >= 4 {
                f.extend_from_slice(&part.high_watermark.to_be_bytes());
            }
            if v >= 5 {
                f.extend_from_slice(&0i64.to_be_bytes());
            }
            if v >= 4 {
                array(&mut f, 1, flexible);
                f.extend_from_slice(&[1; 16]);
                if flexible {
                    f.push(0);
                }
            }
            if v >= 11 {
                f.extend_from_slice(&(-1i32).to_be_bytes());
            }
            match (part.records, flexible) {
                (None, true) => f.push(0),
                (None, false) => f.extend_from_slice(&(-1i32).to_be_bytes()),
                (Some(records), true) => {
                    put_uvarint(&mut f, records.len() as u64 + 1);
                    f.extend_from_slice(records);
                }
                (Some(records), false) => crate::wire::put_bytes(&mut f, records),
            }
            if flexible {
                // A tagged field (CurrentLeader, tag 1), to be read past.
                f.extend_from_slice(&[1, 1, 8, 0, 0, 0, 1, 0, 0, 0, 3]);
            }
        }
        if flexible {
            f.extend_from_slice(&[0, 0]); // the topic's tags, then the top level's
        }
        f
    }

    fn parked(frame: &[u8]) -> Option<Parked> {
        Parked::parse(&Header::parse(frame).expect("a header"))
    }

    #[test]
    fn a_fetch_request_is_parked_with_its_wait_and_min_bytes_and_probed_with_max_wait_0() {
        for version in VERSIONS_READ {
            let frame = request(version, 30_000, 1024, 2);
            let p = parked(&frame).unwrap_or_else(|| panic!("v{version} parked"));
            assert_eq!((p.version, p.correlation), (version, 42));
            assert_eq!((p.max_wait, p.wants), (Duration::from_secs(30), 1024), "v{version}");
            // The same frame but MaxWaitMs: after ReplicaId to v14, first from v15.
            let at = Header::parse(&frame).unwrap().body.at + if version <= 14 { 4 } else { 0 };
            let mut expected = frame.clone();
            expected[at..at + 4].copy_from_slice(&[0; 4]);
            assert_eq!(p.probe, expected, "v{version}");
            assert_eq!(parked(&p.probe), None, "v{version}: a probe is not parked again");
        }
    }

    #[test]
    fn fetches_kafka_answers_at_once_wait_for_nothing_and_others_go_on_as_they_are() {
        for version in VERSIONS_READ {
            // MinBytes 0, or no partition: a probe's answer is the answer.
            assert_eq!(parked(&request(version, 500, 0, 1)).map(|p| p.wants), Some(0), "v{version}");
            assert_eq!(parked(&request(version, 500, 1, 0)).map(|p| p.wants), Some(0), "v{version}");
            assert_eq!(parked(&request(version, 0, 1, 1)), None, "v{version}: MaxWaitMs 0");
            let mut truncated = request(version, 500, 1, 1);
            truncated.pop();
            assert_eq!(parked(&truncated), None, "v{version}: truncated");
            let mut longer = request(version, 500, 1, 1);
            longer.push(0);
            assert_eq!(parked(&longer), None, "v{version}: something after the body");
        }
        let mut v17 = request(16, 500, 1, 1);
        v17[3] = 17;
        assert_eq!(parked(&v17), None, "a version the mock does not serve");
    }

    #[test]
    fn records_are_gathered_past_what_the_mock_shows_and_errors_go_as_they_are() {
        let one = batch(0, 1, 80);
        let next_two = batch(1, 2, 90);
        for version in VERSIONS_READ {
            let p = parked(&request(version, 30_000, 100, 2)).unwrap();
            let ok = |high_watermark, records| Part { error: 0, high_watermark, records };
            let take = |parts: &[Part]| {
                let mut g = p.gathered();
                let step = p.take(&mut g, &response(version, 0, parts), &Shown::default());
                (step, g)
            };
            let offset = |g: &Gathered, partition: usize| {
                let at = p.offsets[partition].1;
                i64::from_be_bytes(g.probe[at..at + 8].try_into().unwrap())
            };
            // Nothing yet (records empty, or null): nothing gathered, and
            // the answer is the mock's as it is.
            let empty = [ok(0, Some(&[][..])), ok(0, None)];
            let (step, g) = take(&empty);
            assert_eq!((step, g.bytes, &g.probe), (Step::Done, 0, &p.probe), "v{version}");
            assert_eq!(p.answer(&g, &response(version, 0, &empty)), Some(response(version, 0, &empty)), "v{version}");
            // 80 bytes, all the partition has: gathered, and the probe asks
            // partition 0 past them, partition 1 where it was (offset 1).
            let (step, g) = take(&[ok(1, Some(&one[..])), ok(0, None)]);
            assert_eq!((step, g.bytes, offset(&g, 0), offset(&g, 1)), (Step::Done, 80, 1, 1), "v{version}");
            // Summed over the partitions.
            let (step, g) = take(&[ok(1, Some(&one[..])), ok(2, Some(&next_two[..]))]);
            assert_eq!((step, g.bytes, offset(&g, 0), offset(&g, 1)), (Step::Done, 170, 1, 3), "v{version}");
            // The partition has 2 more records than shown: probe again, and
            // the answer holds both batches, with the newest high watermark.
            let (step, mut g) = take(&[ok(3, Some(&one[..])), ok(0, None)]);
            assert_eq!((step, offset(&g, 0)), (Step::More, 1), "v{version}");
            let last = response(version, 0, &[ok(3, Some(&next_two[..])), ok(0, None)]);
            assert_eq!(p.take(&mut g, &last, &Shown::default()), Step::Done, "v{version}");
            assert_eq!((g.bytes, offset(&g, 0)), (170, 3), "v{version}");
            let both = [one.clone(), next_two.clone()].concat();
            let expected = response(version, 0, &[ok(3, Some(&both[..])), ok(0, None)]);
            assert_eq!(p.answer(&g, &last), Some(expected), "v{version}");
            // A partition's error, with nothing (null records): as it is.
            let error = [Part { error: 6, high_watermark: -1, records: None }, ok(0, None)];
            assert_eq!(take(&error).0, Step::AsItIs, "v{version}");
            // A batch larger than the room (cut short, none complete): as
            // it is, as Kafka gives it.
            assert_eq!(take(&[ok(3, Some(&one[..40])), ok(0, None)]).0, Step::AsItIs, "v{version}");
            // One the forwarder cannot read goes on.
            let mut cut = response(version, 0, &empty);
            cut.pop();
            assert_eq!(p.take(&mut p.gathered(), &cut, &Shown::default()), Step::AsItIs, "v{version}");
        }
        // The top-level error (v7+).
        for version in VERSIONS_READ.into_iter().filter(|v| *v >= 7) {
            let p = parked(&request(version, 30_000, 1, 1)).unwrap();
            let frame = response(version, 7, &[Part { error: 0, high_watermark: 0, records: None }]);
            assert_eq!(Response::read(&frame, version).map(|r| r.at_once), Some(true));
            assert_eq!(p.take(&mut p.gathered(), &frame, &Shown::default()), Step::AsItIs, "v{version}");
        }
    }

    /// A batch the mock showed once is taken from what it showed: a fetch
    /// from an offset before it gathers it, and every batch shown after it,
    /// on its first probe, and probes past them; one cut off by the room
    /// left, a gap, or another partition or version is not taken.
    #[test]
    fn batches_shown_before_are_gathered_without_a_probe_each() {
        let (one, two, three) = (batch(0, 1, 80), batch(1, 2, 90), batch(3, 1, 70));
        fn ok(high_watermark: i64, records: Option<&[u8]>) -> Part<'_> {
            Part { error: 0, high_watermark, records }
        }
        for version in [4, 11, 16] {
            let p = parked(&request(version, 30_000, 1, 1)).unwrap();
            let offset = |g: &Gathered| {
                let at = p.offsets[0].1;
                i64::from_be_bytes(g.probe[at..at + 8].try_into().unwrap())
            };
            let shown = Shown::default();
            // Shown to an earlier fetch, one probe each: 1-2, then 3.
            for (records, hwm) in [(&two, 3), (&three, 4)] {
                p.take(&mut p.gathered(), &response(version, 0, &[ok(hwm, Some(&records[..]))]), &shown);
            }
            // A fetch from 0: the mock shows 0, the rest comes from what it
            // showed, and the next probe asks from 4.
            let mut g = p.gathered();
            assert_eq!(p.take(&mut g, &response(version, 0, &[ok(4, Some(&one[..]))]), &shown), Step::More);
            assert_eq!((g.bytes, offset(&g)), (240, 4), "v{version}");
            let last = response(version, 0, &[ok(4, Some(&[][..]))]);
            assert_eq!(p.take(&mut g, &last, &shown), Step::Done, "v{version}");
            let all = [one.clone(), two.clone(), three.clone()].concat();
            assert_eq!(p.answer(&g, &last), Some(response(version, 0, &[ok(4, Some(&all[..]))])), "v{version}");
            // All the partition has, shown at once: nothing more is taken.
            let mut g = p.gathered();
            assert_eq!(p.take(&mut g, &response(version, 0, &[ok(1, Some(&one[..]))]), &shown), Step::Done);
            assert_eq!((g.bytes, offset(&g)), (80, 1), "v{version}");
            // Another version's fetch does not take them.
            let other = parked(&request(version - 1, 30_000, 1, 1)).unwrap();
            let mut g = other.gathered();
            let shown_one = response(version - 1, 0, &[ok(4, Some(&one[..]))]);
            assert_eq!((other.take(&mut g, &shown_one, &shown), g.bytes), (Step::More, 80), "v{version}");
            // Nor a gap: kept 3, not 1-2.
            let gap = Shown::default();
            p.take(&mut p.gathered(), &response(version, 0, &[ok(4, Some(&three[..]))]), &gap);
            let mut g = p.gathered();
            assert_eq!(p.take(&mut g, &response(version, 0, &[ok(4, Some(&one[..]))]), &gap), Step::More);
            assert_eq!((g.bytes, offset(&g)), (80, 1), "v{version}");
        }
        // The room left: a batch that does not fit stays for the next probe.
        let (shown, key) = (Shown::default(), (16, (TOPIC_ID.to_vec(), 0)));
        shown.keep(&key, &[two.clone(), three.clone()].concat());
        let mut taken = one.clone();
        assert_eq!(shown.after(&key, 1, &mut taken, 80 + 90 + 69), 3, "three does not fit");
        assert_eq!(taken.len(), 170);
        // From the middle of a batch: that batch, as the mock gives it.
        let mut taken = Vec::new();
        assert_eq!(shown.after(&key, 2, &mut taken, u64::MAX), 4);
        assert_eq!(taken, [two.clone(), three.clone()].concat());
    }

    /// What is kept is bounded: a partition's newest `GATHER_BYTES`, and
    /// everything is forgotten past `SHOWN_BYTES`.
    #[test]
    fn what_is_kept_of_the_batches_shown_is_bounded() {
        let shown = Shown::default();
        let key = |p| (16, (TOPIC_ID.to_vec(), p));
        let size = 64 * 1024;
        let per_partition = GATHER_BYTES as usize / size;
        for base in 0..2 * per_partition as i64 {
            shown.keep(&key(0), &batch(base, 1, size));
        }
        let mut taken = Vec::new();
        assert_eq!(shown.after(&key(0), 0, &mut taken, u64::MAX), 0, "the oldest went");
        let first = per_partition as i64;
        assert_eq!(shown.after(&key(0), first, &mut taken, u64::MAX), 2 * first);
        assert_eq!(taken.len(), GATHER_BYTES as usize);
        for p in 1..=(SHOWN_BYTES / GATHER_BYTES as usize) as i32 {
            for base in 0..per_partition as i64 {
                shown.keep(&key(p), &batch(base, 1, size));
            }
        }
        assert!(shown.kept.lock().unwrap().bytes <= SHOWN_BYTES + GATHER_BYTES as usize);
        assert_eq!(shown.after(&key(0), first, &mut Vec::new(), u64::MAX), first, "forgotten");
    }

    /// A batch shown again is counted once; one shown with other bytes at
    /// the same offset (its topic made anew) replaces what was kept.
    #[test]
    fn a_batch_shown_again_is_kept_once_and_other_bytes_replace_it() {
        let (shown, key) = (Shown::default(), (16, (TOPIC_ID.to_vec(), 0)));
        let (old, new) = (batch(0, 1, 80), batch(0, 1, 100));
        for _ in 0..3 {
            shown.keep(&key, &old);
        }
        let bytes = |shown: &Shown| {
            let kept = shown.kept.lock().unwrap();
            (kept.bytes, kept.batches[&key].bytes)
        };
        assert_eq!(bytes(&shown), (80, 80));
        shown.keep(&key, &new);
        assert_eq!(bytes(&shown), (100, 100));
        let mut taken = Vec::new();
        assert_eq!(shown.after(&key, 0, &mut taken, u64::MAX), 1);
        assert_eq!(taken, new);
    }

    #[test]
    fn the_end_of_records_is_read_from_the_last_complete_batch() {
        let mut records = batch(5, 3, 90);
        records.extend(batch(8, 2, 70));
        assert_eq!(records_end(&records), Some((10, 160)));
        records.truncate(100); // the second batch cut short, as MaxBytes cuts it
        assert_eq!(records_end(&records), Some((8, 90)));
        assert_eq!(records_end(&[]), None);
        // A magic 1 message: its own offset.
        let mut legacy = 4i64.to_be_bytes().to_vec();
        legacy.extend_from_slice(&14i32.to_be_bytes());
        legacy.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(records_end(&legacy), Some((5, 26)));
    }

    #[test]
    fn a_fetch_looks_again_once_the_bytes_written_since_may_bring_its_min_bytes_or_a_leader_moved() {
        let wakes = Wakes::default();
        let mark = wakes.mark();
        assert!(!wakes.worth_a_look(mark, 0, 1), "nothing written");
        assert!(wakes.worth_a_look(mark, 0, 0), "MinBytes 0");
        wakes.wrote(300);
        assert!(wakes.worth_a_look(mark, 0, 1), "one byte wanted");
        assert!(!wakes.worth_a_look(mark, 100, 8192), "400 of 8192");
        wakes.wrote(7800);
        assert!(!wakes.worth_a_look(mark, 0, 8192), "8100 of 8192");
        assert!(wakes.worth_a_look(mark, 100, 8192), "100 gathered and 8100 written");
        let mark = wakes.mark();
        assert!(!wakes.worth_a_look(mark, 100, 8192), "counted from the new mark");
        wakes.moved();
        assert!(wakes.worth_a_look(mark, 0, 8192), "a leader moved");
    }

    #[tokio::test]
    async fn a_write_before_or_while_waiting_ends_the_wait() {
        let produced = std::sync::Arc::new(Wakes::default());
        let far = Instant::now() + Duration::from_secs(3600);
        let seen = produced.mark();
        produced.wrote(10);
        // Written after `seen` was read, before the wait: at once.
        tokio::time::timeout(Duration::from_secs(10), produced.wait_past(seen, far)).await.expect("at once");
        let seen = produced.mark();
        let waiter = tokio::spawn({
            let produced = produced.clone();
            async move { produced.wait_past(seen, far).await }
        });
        tokio::task::yield_now().await;
        produced.moved();
        tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("woken").unwrap();
        // Nothing written: the deadline ends it.
        let seen = produced.mark();
        let soon = Instant::now() + Duration::from_millis(10);
        tokio::time::timeout(Duration::from_secs(10), produced.wait_past(seen, soon)).await.expect("at the deadline");
    }
}
