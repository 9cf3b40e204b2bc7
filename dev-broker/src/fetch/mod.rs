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
pub type PartitionKey = (Vec<u8>, i32);

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
        let read = Request::read(header)?;
        if read.max_wait <= 0 {
            return None;
        }
        let mut probe = header.body.buf.to_vec();
        probe[read.max_wait_at..read.max_wait_at + 4].copy_from_slice(&0i32.to_be_bytes());
        // Kafka answers at once when it has MinBytes, 0 included, or when
        // nothing is asked for (ReplicaManager.fetchMessages).
        let wants = if read.offsets.is_empty() { 0 } else { u64::try_from(read.min_bytes).unwrap_or(0) };
        let max_wait = Duration::from_millis(read.max_wait as u64);
        let (version, correlation, offsets) = (header.version, header.correlation, read.offsets);
        Some(Parked { version, correlation, max_wait, wants, probe, offsets })
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

/// What the forwarder reads of a Fetch request.
struct Request {
    /// Where MaxWaitMs is in the frame.
    max_wait_at: usize,
    max_wait: i32,
    min_bytes: i32,
    /// Each partition asked for, and where its FetchOffset is in the frame.
    offsets: Vec<(PartitionKey, usize)>,
}

impl Request {
    /// A Fetch of a version read here, whose whole body reads; None for
    /// anything else.
    fn read(header: &Header) -> Option<Request> {
        let v = header.version;
        if header.api_key != FETCH || !VERSIONS.contains(&v) {
            return None;
        }
        let flexible = v >= 12;
        let mut r = header.body.clone();
        if v <= 14 {
            r.i32()?; // ReplicaId (a field of ReplicaState, tagged, from v15)
        }
        let max_wait_at = r.at;
        let (max_wait, min_bytes) = (r.i32()?, r.i32()?);
        // MaxBytes (v3+), IsolationLevel (v4+), SessionId and SessionEpoch (v7+).
        r.skip(if v >= 3 { 4 } else { 0 } + if v >= 4 { 1 } else { 0 } + if v >= 7 { 8 } else { 0 })?;
        // Partition, CurrentLeaderEpoch (v9+), FetchOffset,
        // LastFetchedEpoch (v12+), LogStartOffset (v5+), PartitionMaxBytes.
        let partition =
            4 + if v >= 9 { 4 } else { 0 } + 8 + if v >= 12 { 4 } else { 0 } + if v >= 5 { 8 } else { 0 } + 4;
        let mut offsets = Vec::new();
        for _ in 0..array_len(&mut r, flexible)? {
            let key = key_bytes(&mut r, v)?;
            for _ in 0..array_len(&mut r, flexible)? {
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
        r.rest().is_empty().then_some(Request { max_wait_at, max_wait, min_bytes, offsets })
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
    /// Where its fields after its index start (its ErrorCode).
    entry: usize,
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
                let entry = r.at;
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
                read.parts.push(Part { partition, held_back, entry, field: field..r.at, records: at..r.at, end });
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

mod rewind;
#[cfg(test)]
pub(crate) mod tests;

pub use rewind::{asked, out_of_range, Asked, Topic};
