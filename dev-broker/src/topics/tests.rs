use super::super::wire::put_uvarint;
use super::*;

/// A frame's topics to create, read as the forwarder reads them.
fn auto_created(frame: &[u8]) -> Vec<String> {
    Header::parse(frame).map(|h| super::auto_created(&h)).unwrap_or_default()
}

/// A frame's CreateTopics request, read as the forwarder reads it.
fn create_topics_request(frame: &[u8]) -> Option<CreateTopics> {
    CreateTopics::parse(&Header::parse(frame)?)
}

pub(crate) fn header(api_key: i16, version: i16) -> Vec<u8> {
    let mut f = api_key.to_be_bytes().to_vec();
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&7i32.to_be_bytes());
    put_string(&mut f, Some("c"));
    f
}

fn metadata(version: i16, topics: &[&str], allow: bool) -> Vec<u8> {
    let mut f = header(METADATA, version);
    let flexible = version >= 9;
    if flexible {
        f.push(0); // header tagged fields
        put_uvarint(&mut f, topics.len() as u64 + 1);
    } else {
        f.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    }
    for t in topics {
        if version >= 10 {
            f.extend_from_slice(&[0; 16]); // topic id
        }
        if flexible {
            put_uvarint(&mut f, t.len() as u64 + 1);
            f.extend_from_slice(t.as_bytes());
            f.push(0);
        } else {
            put_string(&mut f, Some(t));
        }
    }
    if version >= 4 {
        f.push(allow as u8);
    }
    if version >= 8 {
        f.extend_from_slice(&[0, 0]); // include authorized operations
    }
    if flexible {
        f.push(0);
    }
    f
}

#[test]
fn a_metadata_request_creates_what_it_names_only_when_it_allows_creation() {
    for version in [1, 4, 8, 9, 12] {
        assert_eq!(auto_created(&metadata(version, &["a.neli", "b"], true)), ["a.neli", "b"], "v{version}");
        let looking = auto_created(&metadata(version, &["a.neli", "b"], false));
        // Before v4 the request cannot say: Kafka creates (if its config does).
        assert_eq!(looking.is_empty(), version >= 4, "v{version}: {looking:?}");
    }
    // All topics (a null array), other requests and garbage create nothing.
    let mut all = header(METADATA, 4);
    all.extend_from_slice(&(-1i32).to_be_bytes());
    all.push(1);
    assert!(auto_created(&all).is_empty());
    assert!(auto_created(&header(CREATE_TOPICS, 4)).is_empty());
    assert!(auto_created(&[0, 3, 0]).is_empty());
    let cut = metadata(9, &["a.neli"], true);
    assert!(auto_created(&cut[..cut.len() - 4]).is_empty(), "a frame cut before its flag");
}

/// A Metadata response as the mock writes it: one broker, controller 0.
fn metadata_response(version: i16) -> Vec<u8> {
    let flexible = version >= 9;
    let string = |f: &mut Vec<u8>, s: Option<&str>| match (flexible, s) {
        (true, Some(s)) => {
            put_uvarint(f, s.len() as u64 + 1);
            f.extend_from_slice(s.as_bytes());
        }
        (true, None) => f.push(0),
        (false, s) => put_string(f, s),
    };
    let mut f = 7i32.to_be_bytes().to_vec();
    if flexible {
        f.push(0);
    }
    if version >= 3 {
        f.extend_from_slice(&0i32.to_be_bytes());
    }
    if flexible {
        f.push(2);
    } else {
        f.extend_from_slice(&1i32.to_be_bytes());
    }
    f.extend_from_slice(&1i32.to_be_bytes());
    string(&mut f, Some("127.0.0.1"));
    f.extend_from_slice(&9092i32.to_be_bytes());
    if version >= 1 {
        string(&mut f, None); // rack
    }
    if flexible {
        f.push(0);
    }
    if version >= 2 {
        string(&mut f, Some("mockCluster"));
    }
    if version >= 1 {
        f.extend_from_slice(&0i32.to_be_bytes()); // controller
    }
    f.extend_from_slice(&[0, 0, 0, 0]); // the topics that follow are kept
    f
}

#[test]
fn metadata_responses_hide_the_spare_broker() {
    for version in 1..=12 {
        let before = metadata_response(version);
        assert_eq!(hide_broker(&before, version, 2), None, "v{version}: no broker 2 to hide");
        let after = hide_broker(&before, version, 1).expect("parsed");
        let head = if version >= 3 { 8 } else { 4 } + usize::from(version >= 9);
        let (count, entry) = if version >= 9 { (1, 4 + 10 + 4 + 1 + 1) } else { (4, 4 + 11 + 4 + 2) };
        assert_eq!(after.len(), before.len() - entry, "v{version}: one entry fewer");
        let empty: &[u8] = if version >= 9 { &[1] } else { &[0, 0, 0, 0] };
        assert_eq!(&after[head..head + count], empty, "v{version}: no brokers listed");
        assert_eq!(after[head + count..], before[head + count + entry..], "v{version}: the rest kept");
    }
    assert_eq!(hide_broker(&metadata_response(0), 0, 1), None, "v0 is not read");
}

#[test]
fn metadata_responses_name_the_one_broker_as_controller() {
    for version in 1..=12 {
        let before = metadata_response(version);
        let after = name_controller(&before, version).expect("parsed");
        let at = before.len() - 8;
        assert_eq!(after[at..at + 4], 1i32.to_be_bytes(), "v{version}");
        assert_eq!((&after[..at], &after[at + 4..]), (&before[..at], &before[at + 4..]), "nothing else changed");
    }
    assert_eq!(name_controller(&metadata_response(0), 0), None, "v0 names no controller");
    let cut = metadata_response(12);
    assert_eq!(name_controller(&cut[..cut.len() - 6], 12), None, "a cut frame");
    // The forwarder edits the responses to Metadata requests: it knows
    // them by their header's API key, correlation id and version.
    let request = metadata(12, &["g"], false);
    let h = Header::parse(&request).expect("a header");
    assert_eq!((h.api_key, h.correlation, h.version), (METADATA, 7, 12));
    assert_ne!(Header::parse(&create_topics(4, &[], false)).map(|h| h.api_key), Some(METADATA));
}

#[test]
fn deny_topic_takes_exact_names_and_prefixes() {
    let denied = ["secret.neli".to_string(), "g.neli.wake-*".to_string()];
    for (topic, refused) in [
        ("secret.neli", true),
        ("secret.neli2", false),
        ("g.neli.wake-abc-1", true),
        ("g.neli.wake-", true),
        ("g.neli", false),
        ("g.neli.wake", false),
        ("h.neli.wake-abc-1", false),
    ] {
        assert_eq!(denies(&denied, topic), refused, "{topic}");
    }
    assert!(denies(&["*".to_string()], "anything"), "'*' alone refuses every topic");
    assert!(!denies(&[], "g.neli"));
}

/// A Metadata response as the mock writes it, with `topics`: (name,
/// error code, partitions, each led by broker 1 with one replica).
pub(crate) fn metadata_response_with(version: i16, topics: &[(&str, i16, i32)]) -> Vec<u8> {
    let flexible = version >= 9;
    let array = |f: &mut Vec<u8>, n: usize| {
        if flexible {
            put_uvarint(f, n as u64 + 1);
        } else {
            f.extend_from_slice(&(n as i32).to_be_bytes());
        }
    };
    let mut f = metadata_response(version);
    f.truncate(f.len() - 4);
    array(&mut f, topics.len());
    for &(name, code, partitions) in topics {
        f.extend_from_slice(&code.to_be_bytes());
        if flexible {
            put_uvarint(&mut f, name.len() as u64 + 1);
            f.extend_from_slice(name.as_bytes());
        } else {
            put_string(&mut f, Some(name));
        }
        if version >= 10 {
            f.extend_from_slice(&[7; 16]); // topic id
        }
        f.push(0); // is internal
        array(&mut f, partitions as usize);
        for p in 0..partitions {
            f.extend_from_slice(&NONE.to_be_bytes());
            f.extend_from_slice(&p.to_be_bytes());
            f.extend_from_slice(&BROKER.to_be_bytes());
            if version >= 7 {
                f.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
            }
            // Replicas, in-sync replicas, from v5 offline replicas.
            for _ in 0..2 + usize::from(version >= 5) {
                array(&mut f, 1);
                f.extend_from_slice(&BROKER.to_be_bytes());
            }
            if flexible {
                f.push(0);
            }
        }
        if version >= 8 {
            f.extend_from_slice(&i32::MIN.to_be_bytes());
        }
        if flexible {
            f.push(0);
        }
    }
    if (8..=10).contains(&version) {
        f.extend_from_slice(&i32::MIN.to_be_bytes()); // cluster authorized operations
    }
    if flexible {
        f.push(0);
    }
    f
}

#[test]
fn metadata_responses_refuse_the_denied_topics_whether_they_exist_or_not() {
    let denied = ["g.neli.wake-*".to_string(), "secret".to_string()];
    for version in 1..=12 {
        let topics = [
            ("g.neli", NONE, 1),
            ("g.neli.wake-x-1", 3, 0), // UNKNOWN_TOPIC_OR_PARTITION: it does not exist
            ("g.neli.wake-x-2", NONE, 2),
            ("secret", TOPIC_AUTHORIZATION_FAILED, 0), // the mock's own topic error
        ];
        let before = metadata_response_with(version, &topics);
        let after = deny_topics(&before, version, &denied).expect("a denied topic named");
        let want = metadata_response_with(
            version,
            &[
                ("g.neli", NONE, 1),
                ("g.neli.wake-x-1", TOPIC_AUTHORIZATION_FAILED, 0),
                ("g.neli.wake-x-2", TOPIC_AUTHORIZATION_FAILED, 0),
                ("secret", TOPIC_AUTHORIZATION_FAILED, 0),
            ],
        );
        // Kafka's answer has a zero topic id (the mock's is kept for the others).
        let want = if version >= 10 { zero_ids_after(&want, 1) } else { want };
        assert_eq!(after, want, "v{version}");
        let allowed = metadata_response_with(version, &topics[..1]);
        assert_eq!(deny_topics(&allowed, version, &denied), None, "v{version}: nothing to refuse");
        assert_eq!(deny_topics(&before, version, &[]), None, "v{version}: nothing denied");
        assert_eq!(deny_topics(&before[..before.len() - 12], version, &denied), None, "v{version}: a cut frame");
    }
    assert_eq!(deny_topics(&metadata_response(0), 0, &denied), None, "v0 is not read");
}

/// `frame` with the topic ids of every topic after the first `keep`
/// zeroed: they are the 16 bytes of 7s.
fn zero_ids_after(frame: &[u8], keep: usize) -> Vec<u8> {
    let mut out = frame.to_vec();
    let ids: Vec<usize> = (0..out.len() - 15).filter(|&i| out[i..i + 16] == [7; 16]).collect();
    for &i in &ids[keep..] {
        out[i..i + 16].fill(0);
    }
    out
}

/// A CreateTopics request: (name, partitions, replication, assigned
/// partitions, configs).
fn create_topics(version: i16, topics: &[(&str, i32, i16, usize, usize)], validate_only: bool) -> Vec<u8> {
    let mut f = header(CREATE_TOPICS, version);
    f.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for &(name, partitions, replication, assigned, configs) in topics {
        put_string(&mut f, Some(name));
        f.extend_from_slice(&partitions.to_be_bytes());
        f.extend_from_slice(&replication.to_be_bytes());
        f.extend_from_slice(&(assigned as i32).to_be_bytes());
        for i in 0..assigned as i32 {
            f.extend_from_slice(&i.to_be_bytes());
            f.extend_from_slice(&1i32.to_be_bytes());
            f.extend_from_slice(&1i32.to_be_bytes()); // broker 1
        }
        f.extend_from_slice(&(configs as i32).to_be_bytes());
        for _ in 0..configs {
            put_string(&mut f, Some("retention.ms"));
            put_string(&mut f, Some("3600000"));
        }
    }
    f.extend_from_slice(&10_000i32.to_be_bytes());
    if version >= 1 {
        f.push(validate_only as u8);
    }
    f
}

/// The response's topics: (name, error code, message).
fn read_answer(version: i16, frame: &[u8]) -> Vec<(String, i16, Option<String>)> {
    let mut r = Reader { buf: frame, at: 0 };
    assert_eq!(r.i32(), Some(7), "the request's correlation id");
    if version >= 2 {
        assert_eq!(r.i32(), Some(0), "throttle time");
    }
    let topics = (0..r.i32().unwrap())
        .map(|_| {
            let (name, code) = (r.string().unwrap(), r.i16().unwrap());
            (name, code, if version >= 1 { r.string_in(false).unwrap() } else { None })
        })
        .collect();
    assert!(r.rest().is_empty(), "nothing after the topics");
    topics
}

#[test]
fn create_topics_reads_every_version_answered_here_and_nothing_else() {
    for version in 0..=4 {
        let frame = create_topics(version, &[("g.neli", 1, -1, 0, 2), ("h", -1, -1, 2, 0)], true);
        let req = create_topics_request(&frame).expect("parsed");
        assert_eq!((req.version, req.correlation, req.validate_only), (version, 7, version >= 1));
        let named: Vec<_> = req.topics.iter().map(|t| (t.name.as_str(), t.partitions, t.assigned)).collect();
        assert_eq!(named, [("g.neli", 1, 0), ("h", -1, 2)]);
    }
    assert_eq!(create_topics_request(&create_topics(5, &[("g", 1, 1, 0, 0)], false)), None, "flexible v5");
    assert_eq!(create_topics_request(&metadata(4, &["g"], true)), None);
    let frame = create_topics(4, &[("g", 1, 1, 0, 1)], false);
    assert_eq!(create_topics_request(&frame[..frame.len() - 6]), None, "a cut frame");
}

#[test]
fn create_topics_creates_the_valid_topics_and_answers_each_as_kafka_does() {
    let topics = [
        ("ok", -1, -1, 0, 0),      // the defaults: --partitions
        ("three", 3, 1, 0, 1),     // as asked
        ("by-hand", -1, -1, 2, 0), // two partitions assigned by hand
        ("exists", 1, 1, 0, 0),
        ("denied", 1, 1, 0, 0),
        ("bad name!", 1, 1, 0, 0),
        ("zero", 0, 1, 0, 0),
        ("rf3", 1, 3, 0, 0),
        ("twice", 1, 1, 0, 0),
        ("twice", 1, 1, 0, 0),
    ];
    for version in [0, 1, 2, 4] {
        let req = create_topics_request(&create_topics(version, &topics, false)).unwrap();
        let mut created = Vec::new();
        let answer = req.answer(&["denied".to_string()], 5, 1, |name, partitions| {
            if name == "exists" {
                return Err((36, "Topic 'exists' already exists.".into()));
            }
            created.push((name.to_string(), partitions));
            Ok(())
        });
        let want: Vec<(String, i32)> = [("ok", 5), ("three", 3), ("by-hand", 2)].map(|(n, p)| (n.into(), p)).into();
        assert_eq!(created, want, "v{version}");
        let codes: Vec<(String, i16)> = read_answer(version, &answer).into_iter().map(|(n, c, _)| (n, c)).collect();
        let want = [
            ("ok", 0),
            ("three", 0),
            ("by-hand", 0),
            ("exists", 36),
            ("denied", 29),
            ("bad name!", INVALID_TOPIC),
            ("zero", INVALID_PARTITIONS),
            ("rf3", INVALID_REPLICATION_FACTOR),
            ("twice", INVALID_REQUEST),
            ("twice", INVALID_REQUEST),
        ];
        assert_eq!(codes, want.map(|(n, c)| (n.to_string(), c)), "v{version}");
    }
    // Messages from v1: none on success, Kafka's words otherwise.
    let req = create_topics_request(&create_topics(1, &[("ok", 1, 1, 0, 0), ("zero", 0, 1, 0, 0)], false)).unwrap();
    let answer = read_answer(1, &req.answer(&[], 1, 1, |_, _| Ok(())));
    assert_eq!(answer[0].2, None);
    assert_eq!(answer[1].2.as_deref(), Some("Number of partitions must be larger than 0."));
}

#[test]
fn validate_only_checks_and_creates_nothing() {
    let req = create_topics_request(&create_topics(3, &[("ok", 1, 1, 0, 0), ("zero", 0, 1, 0, 0)], true)).unwrap();
    let answer = req.answer(&[], 1, 1, |name, _| panic!("created {name} while only validating"));
    let codes: Vec<i16> = read_answer(3, &answer).into_iter().map(|(_, c, _)| c).collect();
    assert_eq!(codes, [NONE, INVALID_PARTITIONS]);
}

#[test]
fn kafkas_topic_name_rules() {
    for ok in ["a", "g.neli", "A_b-9", &"x".repeat(249)] {
        assert_eq!(invalid_name(ok), None, "{ok}");
    }
    for bad in ["", ".", "..", "a b", "a/b", "ä", &"x".repeat(250)] {
        assert!(invalid_name(bad).is_some(), "{bad}");
    }
}
