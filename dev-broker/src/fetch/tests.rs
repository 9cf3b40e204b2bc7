use super::rewind::{self, Asked};
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
pub(crate) fn request(version: i16, max_wait: i32, min_bytes: i32, partitions: usize) -> Vec<u8> {
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

/// The topic's key in `version`'s requests and responses (`key_bytes`).
fn key(version: i16) -> Vec<u8> {
    let mut out = Vec::new();
    topic(&mut out, version);
    out
}

#[test]
fn a_fetch_says_which_partitions_it_asks_for_from_which_offsets() {
    for version in VERSIONS_READ {
        let frame = request(version, 500, 1, 2);
        let asked = rewind::asked(&Header::parse(&frame).unwrap()).unwrap_or_else(|| panic!("v{version} read"));
        let topic = match version {
            13.. => rewind::Topic::Id(TOPIC_ID),
            _ => rewind::Topic::Name("t".into()),
        };
        let want: Vec<Asked> = (0..2)
            .map(|p| Asked { topic: topic.clone(), partition: p, offset: i64::from(p), key: (key(version), p) })
            .collect();
        assert_eq!(asked, want, "v{version}");
        // MaxWaitMs 0 (a fetch not parked) is read all the same.
        assert_eq!(rewind::asked(&Header::parse(&request(version, 0, 1, 2)).unwrap()), Some(want), "v{version}");
        assert_eq!(rewind::asked(&Header::parse(&frame[..frame.len() - 1]).unwrap()), None, "v{version}: cut short");
    }
}

#[test]
fn a_rewound_partition_is_answered_out_of_range_as_kafka_answers_and_the_others_as_they_were() {
    for version in VERSIONS_READ {
        let (first, second) = (batch(0, 3, 70), batch(5, 2, 61));
        let parts = [
            Part { error: 0, high_watermark: 3, records: Some(&first) },
            Part { error: 0, high_watermark: 7, records: Some(&second) },
        ];
        let frame = response(version, 0, &parts);
        let out = out_of_range(&frame, version, &[(key(version), 1)]).unwrap_or_else(|| panic!("v{version}"));
        let read = Response::read(&out, version).unwrap_or_else(|| panic!("v{version}: the answer reads whole"));
        assert!(read.at_once, "v{version}: an error is answered at once");
        let [kept, rewound] = &read.parts[..] else { panic!("v{version}: two partitions") };
        assert_eq!(&out[kept.records.clone()], &first[..], "v{version}: partition 0 as it was");
        assert_eq!(&out[..rewound.entry], &frame[..rewound.entry], "v{version}: all before partition 1 as it was");
        let mut r = Reader { buf: &out, at: rewound.entry };
        assert_eq!((r.i16(), r.i64()), (Some(1), Some(-1)), "v{version}: OFFSET_OUT_OF_RANGE, high watermark -1");
        if version >= 4 {
            assert_eq!(r.i64(), Some(-1), "v{version}: last stable offset");
        }
        if version >= 5 {
            assert_eq!(r.i64(), Some(-1), "v{version}: log start offset");
        }
        if version >= 4 {
            let null = if version >= 12 { r.uvarint() == Some(0) } else { r.i32() == Some(-1) };
            assert!(null, "v{version}: no aborted transactions");
        }
        if version >= 11 {
            assert_eq!(r.i32(), Some(-1), "v{version}: no preferred read replica");
        }
        assert_eq!((rewound.field.start, rewound.records.len()), (r.at, 0), "v{version}: no records");
        assert_eq!(out[rewound.field.clone()], if version >= 12 { vec![1] } else { vec![0; 4] }, "v{version}: empty");
        let twice = out_of_range(&frame, version, &[(key(version), 0), (key(version), 1)]).unwrap();
        assert!(Response::read(&twice, version).unwrap().parts.iter().all(|p| p.records.is_empty()), "v{version}");
        assert_eq!(out_of_range(&frame, version, &[(key(version), 2)]), None, "v{version}: not asked for");
        assert_eq!(out_of_range(&frame[..frame.len() - 1], version, &[(key(version), 1)]), None, "v{version}");
    }
}
