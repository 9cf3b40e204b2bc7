//! The adapter's tests against librdkafka's mock cluster (in-process,
//! over TCP): the consumer thread, the barrier and the clients' settings.

use super::*;
use clap::Parser;
use rdkafka::mocking::MockCluster;
use rdkafka::{Message, Offset, TopicPartitionList};
use yield_request::PauseRequest;

/// A member of group `g` on the broker at `brokers`, and its events.
fn connect(brokers: &str) -> (Kafka, tokio::sync::mpsc::UnboundedReceiver<Event>) {
    connect_as(brokers, Member::this_process("t".into()))
}

/// `connect`, as `member`.
fn connect_as(brokers: &str, member: Member) -> (Kafka, tokio::sync::mpsc::UnboundedReceiver<Event>) {
    let (tx, events) = tokio::sync::mpsc::unbounded_channel();
    let kafka = Kafka::connect(&settings(brokers), member, tx).expect("connects");
    (kafka, events)
}

/// A mock cluster of one broker with the group's topic, `g.neli`, of
/// `partitions`, and its address: the cluster lives as long as it is held.
fn mock_with_topic(partitions: i32) -> (MockCluster<'static, rdkafka::producer::DefaultProducerContext>, String) {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("g.neli", partitions, 1).expect("topic");
    let brokers = cluster.bootstrap_servers();
    (cluster, brokers)
}

/// The adapter's settings for a member of group `g` at `brokers`.
fn settings(brokers: &str) -> Settings {
    let cli = crate::cli::Cli::try_parse_from(["neli-run", "--group", "g", "--brokers", brokers, "--", "true"])
        .expect("valid arguments");
    Settings::of(&Config::from_args(cli.run, None).expect("valid configuration"))
}

/// `member`'s heartbeat, contending.
fn heartbeat_of(member: &Member, seq: u64) -> Vec<u8> {
    let content = Content { record: Record::contending(1), since_ms: None, deadline_ms: 5000 };
    Heartbeat::new(member, seq, BootTime::now(), crate::clock::wall_ms(), content).encode()
}

/// A new owner pins its read position a backlog before the end of the
/// seat's partition (not its beginning), and a yield in that backlog was
/// meant for an earlier owner: only one written once it owns the partition
/// is its own.
#[test]
fn a_new_owner_reads_a_backlog_before_the_end_and_only_later_yields_are_its_own() {
    let (_cluster, brokers) = mock_with_topic(1);
    let backlog = settings(&brokers).backlog;
    let p1 = Member::this_process("p1".into());
    let early = 5;
    let mut before: Vec<Vec<u8>> = (0..backlog + early).map(|i| heartbeat_of(&p1, i as u64)).collect();
    before.push(yield_request::Yield::new(None, None).encode());
    produce(&brokers, &before);
    let end = backlog + early + 1;
    let (_kafka, mut events) = connect(&brokers);
    let first = next(&mut events, |e| match e {
        Event::Yield { .. } => panic!("a yield from before we owned partition 0 was heard as ours"),
        Event::OtherHeartbeat(0, other) => Some(other.offset),
        _ => None,
    });
    assert_eq!(first, end - backlog, "the first record read is a backlog before the end");
    // Once a heartbeat written after the backlog yield is read, that yield
    // has been passed over.
    produce(&brokers, &[heartbeat_of(&p1, 1_000)]);
    next(&mut events, |e| match e {
        Event::Yield { .. } => panic!("a yield from before we owned partition 0 was heard as ours"),
        Event::OtherHeartbeat(0, other) => (other.offset == end).then_some(()),
        _ => None,
    });
    produce(&brokers, &[yield_request::Yield::new(None, Some("b".into())).encode()]);
    let to = next(&mut events, |e| match e {
        Event::Yield { to } => Some(to),
        _ => None,
    });
    assert_eq!(to.as_deref(), Some("b"));
}

/// Writes `values` to partition 0 of g.neli, and waits until they are on it.
fn produce(brokers: &str, values: &[Vec<u8>]) {
    produce_to(brokers, 0, values);
}

/// `produce`, to `partition`.
fn produce_to(brokers: &str, partition: i32, values: &[Vec<u8>]) {
    let producer: BaseProducer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("a producer");
    for value in values {
        producer.send(BaseRecord::<(), _>::to("g.neli").partition(partition).payload(value)).expect("queued");
    }
    producer.flush(Duration::from_secs(20)).expect("written");
}

/// A fetch answered out of range makes librdkafka read the partition again
/// from its beginning (`auto.offset.reset=earliest`): the records read
/// already are not heard again (R-1: an older record of the previous owner
/// heard after our own first one fenced a new leader, and on tansu
/// withdrew a live claim). The next record is heard once the read passes.
#[test]
fn a_partition_read_again_from_an_earlier_offset_is_not_heard_again() {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let (cluster, brokers) = mock_with_topic(1);
    let p1 = Member::this_process("p1".into());
    produce(&brokers, &(0..3).map(|seq| heartbeat_of(&p1, seq)).collect::<Vec<_>>());
    let (_kafka, mut events) = connect(&brokers);
    let mut heard = Vec::new();
    let hear_until = |events: &mut _, last: i64, heard: &mut Vec<i64>| {
        next(events, |e| match e {
            Event::OtherHeartbeat(0, other) => {
                heard.push(other.offset);
                (other.offset == last).then_some(())
            }
            _ => None,
        })
    };
    hear_until(&mut events, 2, &mut heard);
    // The next fetch is answered out of range; the record written now is
    // fetched either before it (and then read again after) or after it.
    cluster.request_errors(RDKafkaApiKey::Fetch, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE]);
    produce(&brokers, &[heartbeat_of(&p1, 3)]);
    hear_until(&mut events, 3, &mut heard);
    produce(&brokers, &[heartbeat_of(&p1, 4)]);
    hear_until(&mut events, 4, &mut heard);
    assert_eq!(heard, [0, 1, 2, 3, 4], "each record heard once, in order");
}

/// Only partition 0 is the group's: a member given other partitions of
/// a topic of several (Kafka assigns them too) reads nothing there.
#[test]
fn records_of_other_partitions_are_not_heard() {
    let (_cluster, brokers) = mock_with_topic(2);
    produce_to(&brokers, 1, &[candidacy_of(&Member::this_process("p9".into()))]);
    produce(&brokers, &[candidacy_of(&Member::this_process("p1".into()))]);
    let (_kafka, mut events) = connect(&brokers);
    let mut heard = Vec::new();
    next(&mut events, |e| match e {
        Event::Candidacy(c) => {
            heard.push(c.name.clone());
            (c.name == "p1").then_some(())
        }
        _ => None,
    });
    // A claim of absence needs a period (as `stays_false` in the
    // integration tests): partition 1 is read from its start, in the
    // same fetches as partition 0.
    std::thread::sleep(Duration::from_millis(500));
    while let Ok(event) = events.try_recv() {
        if let Event::Candidacy(c) = event {
            heard.push(c.name);
        }
    }
    assert_eq!(heard, ["p1"]);
}

/// `member`'s candidacy of priority 2, written now.
fn candidacy_of(member: &Member) -> Vec<u8> {
    candidacy::Record::new(member, 2, false, 0, Duration::from_secs(1), false, false).encode()
}

/// Regression (audit D11): a candidacy written just after a new owner's
/// first heartbeat came in the same fetch, and the core, hearing the
/// heartbeat first, started the command before it heard of the member
/// it should have let lead. The heartbeat now says records are behind
/// it, and `CaughtUp` comes once they are all sent.
#[test]
fn records_fetched_behind_an_own_heartbeat_come_before_caught_up() {
    let (_cluster, brokers) = mock_with_topic(1);
    let (me, p1) = (Member::this_process("t".into()), Member::this_process("p1".into()));
    let record = Record::contending(1);
    let content = Content { record, since_ms: None, deadline_ms: 5000 };
    let ours = Heartbeat::new(&me, 1, BootTime::now(), crate::clock::wall_ms(), content).encode();
    // All before we join: the backlog we read back is one fetch.
    let p2 = Member::this_process("p2".into());
    produce(&brokers, &[ours, candidacy_of(&p1), candidacy_of(&p2)]);
    let (_kafka, mut events) = connect_as(&brokers, me);
    let mut heard = Vec::new();
    next(&mut events, |e| {
        let done = matches!(e, Event::CaughtUp { .. });
        match e {
            Event::OwnHeartbeat { more, .. } => heard.push(format!("own heartbeat, more: {more}")),
            Event::Candidacy(c) => heard.push(format!("candidacy of {}", c.name)),
            Event::CaughtUp { .. } => heard.push("caught up".into()),
            _ => {}
        }
        done.then_some(())
    });
    assert_eq!(heard, ["own heartbeat, more: true", "candidacy of p1", "candidacy of p2", "caught up"]);
}

/// Regression (H6): a member standing aside read partition 0 only to
/// see whether another led, and dropped the pauses and candidacies it
/// read meanwhile. They reach the core while it stands aside now.
#[test]
fn records_read_while_standing_aside_reach_the_core() {
    let (_cluster, brokers) = mock_with_topic(1);
    let (kafka, mut events) = connect(&brokers);
    next(&mut events, |e| matches!(e, Event::Assigned { .. }).then_some(()));
    kafka.stand_aside();
    // It watches from the end once it has left: written until read
    // (the watch lasts 3 session timeouts, 18 s, without another leader).
    let p1 = Member::this_process("p1".into());
    let pause = PauseRequest::new(true, false).encode();
    let until = Instant::now() + Duration::from_secs(15);
    let (mut left, mut paused, mut candidate) = (false, false, false);
    while !(left && paused && candidate) {
        assert!(Instant::now() < until, "nothing read while standing aside reached the core");
        produce(&brokers, &[pause.clone(), candidacy_of(&p1)]);
        std::thread::sleep(Duration::from_millis(200));
        while let Ok(event) = events.try_recv() {
            match event {
                Event::Assigned { .. } => panic!("rejoined before the records came"),
                // It left the group: partition 0 goes (the release is
                // dropped here, which ends the barrier).
                Event::Revoked { .. } => left = true,
                Event::Pause(_, p) => paused |= p.paused,
                Event::Candidacy(c) => candidate |= c.name == "p1",
                _ => {}
            }
        }
    }
}

/// A member standing aside reads the control partition on from the first
/// record it has not read, not from its end, so that one written as it
/// left reaches the core (from the end, `standbys.rs`'s drain written then
/// was lost in 4 runs of 10). Here a record read is marked unread again, as
/// one fetched and not yet handed on when the member stood aside would be;
/// before anything is read, there is no such record, and readers start at
/// the end.
#[test]
fn a_member_standing_aside_reads_on_from_the_first_control_record_not_read() {
    let (_cluster, brokers) = mock_with_topic(1);
    let (kafka, mut events) = connect(&brokers);
    let ctx = kafka.group.context();
    assert_eq!(ctx.resume(), Offset::End, "nothing read yet");
    next(&mut events, |e| matches!(e, Event::Assigned { .. }).then_some(()));
    let p1 = Member::this_process("p1".into());
    produce(&brokers, &[candidacy_of(&p1)]);
    next(&mut events, |e| matches!(e, Event::Candidacy(c) if c.name == "p1").then_some(()));
    assert_eq!(ctx.resume(), Offset::Offset(1), "read: the first record, at offset 0");
    ctx.control_unread.store(0, std::sync::atomic::Ordering::Relaxed);
    ctx.passed.lock().expect("passed lock").remove(&0);
    kafka.stand_aside();
    // The revoke's release is dropped by `next`, which ends the barrier.
    // Read again while standing aside: before it rejoins (after 18 s),
    // when it would read it as a new owner does.
    next(&mut events, |e| match e {
        Event::Assigned { .. } => panic!("rejoined before the record was read again"),
        Event::Candidacy(c) => (c.name == "p1").then_some(()),
        _ => None,
    });
}

/// How long a test waits for an event: generous, as the mock cluster's
/// rebalances take seconds of their own, and lib tests share two cores with
/// a build or the rest of the suite (one failed waiting 30 s at load 8).
const EVENT_WAIT: Duration = Duration::from_secs(90);

/// Waits up to `EVENT_WAIT` for the next event that `want` accepts.
fn next<T>(events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>, mut want: impl FnMut(Event) -> Option<T>) -> T {
    let until = std::time::Instant::now() + EVENT_WAIT;
    while std::time::Instant::now() < until {
        match events.try_recv() {
            Ok(event) => {
                if let Some(found) = want(event) {
                    return found;
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    panic!("no such event within {EVENT_WAIT:?}");
}

/// Regression (the exit hang): leaving joins the consumer thread, which
/// may sit in the revoke barrier waiting for a release that the shell's loop
/// never sends (the revoke event is queued behind a child exit that led
/// to the exit). Leaving must end the barrier, or neli-run never exits.
/// librdkafka's mock cluster is the broker (in-process, over TCP).
#[test]
fn leaving_ends_a_revoke_barrier_the_shell_loop_never_released() {
    let (_cluster, brokers) = mock_with_topic(1);
    let (kafka, mut events) = connect(&brokers);
    next(&mut events, |e| matches!(e, Event::Assigned { .. }).then_some(()));
    kafka.rejoin();
    // Held, never sent to: the barrier stays closed.
    let _release = next(&mut events, |e| match e {
        Event::Revoked { release, .. } => Some(release),
        _ => None,
    });
    let (left, leaving) = mpsc::channel();
    std::thread::spawn(move || {
        kafka.leave();
        let _ = left.send(());
    });
    assert!(leaving.recv_timeout(EVENT_WAIT).is_ok(), "leaving the group hangs in the revoke barrier");
}

/// Both clients replace a connection silent for the request timeout
/// (what lets a network blip pass: docs/operations.md, "Network
/// blips"), unless the user says otherwise.
#[test]
fn both_clients_replace_a_connection_stuck_after_a_blip_unless_the_user_says() {
    let settings = |extra: &[&str]| {
        let args = ["neli-run", "--group", "g"].iter().chain(extra).chain(&["--", "true"]);
        let cli = crate::cli::Cli::try_parse_from(args).expect("valid arguments");
        Settings::of(&Config::from_args(cli.run, None).expect("valid configuration"))
    };
    let s = settings(&[]);
    assert_eq!(s.timing.request_timeout(), Duration::from_millis(3000));
    // The consumer's fetch gets its wait on top (librdkafka): 2.75 s + 0.25 s.
    let (consumer, producer) = (consumer_config(&s), producer_config(&s));
    assert_eq!(consumer.get("socket.timeout.ms"), Some("2750"));
    assert_eq!(consumer.get("fetch.wait.max.ms"), Some("250"));
    assert_eq!(producer.get("socket.timeout.ms"), Some("3000"));
    for config in [consumer, producer] {
        // Where partition 0 moved is not asked on a timer (librdkafka asks
        // when a write or a fetch fails): an idle member sends no Metadata.
        assert_eq!(config.get("topic.metadata.refresh.interval.ms"), None);
        // A new client connects to the broker at once, not up to 50 ms
        // after its bootstrap connection (librdkafka's sparse connections).
        assert_eq!(config.get("reconnect.backoff.ms"), Some("10"));
    }
    let s = settings(&["-X", "socket.timeout.ms=20000"]);
    for config in [consumer_config(&s), producer_config(&s)] {
        assert_eq!(config.get("socket.timeout.ms"), Some("20000"));
    }
}

/// The owner's read-back waits 250 ms at the broker whatever the session
/// (a broker that holds every fetch for its wait, such as tansu, reads it
/// back that late: `Timing::read_back_wait`), and as the user says with -X.
#[test]
fn the_read_back_waits_250ms_at_the_broker_unless_the_user_says() {
    let wait = |extra: &[&str]| {
        let args = ["neli-run", "--group", "g"].iter().chain(extra).chain(&["--", "true"]);
        let cli = crate::cli::Cli::try_parse_from(args).expect("valid arguments");
        let s = Settings::of(&Config::from_args(cli.run, None).expect("valid configuration"));
        consumer_config(&s).get("fetch.wait.max.ms").map(str::to_string)
    };
    assert_eq!(wait(&[]).as_deref(), Some("250"));
    assert_eq!(wait(&["--session-timeout", "30s"]).as_deref(), Some("250"));
    assert_eq!(wait(&["--roles", "3"]).as_deref(), Some("100"), "several seats: their heartbeats land together");
    assert_eq!(wait(&["-X", "fetch.wait.max.ms=500"]).as_deref(), Some("500"));
}

/// Counts the delivery reports served.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl rdkafka::ClientContext for Counting {}

impl rdkafka::producer::ProducerContext for Counting {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Each partition's acknowledged batch is a delivery report event of its
/// own, and a poll serves one: a member of twelve roles writes more than the
/// ten a second one poll per wake served. Every wake serves all of them:
/// 600 reports queued (50 rounds of one record on each of 12 partitions,
/// each round acknowledged before the next) are served within a few wakes,
/// where one poll per wake took a minute.
#[test]
fn the_producer_serves_every_delivery_report_queued_at_each_wake() {
    let (_cluster, brokers) = mock_with_topic(12);
    let producer: Arc<BaseProducer<Counting>> = Arc::new(
        rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .create_with_context(Counting::default())
            .unwrap(),
    );
    let reader: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", &brokers).create().unwrap();
    let acknowledged = |round: i64| {
        (0..12).all(|p| reader.fetch_watermarks("g.neli", p, Duration::from_secs(5)).is_ok_and(|(_, end)| end > round))
    };
    for round in 0..50 {
        for p in 0..12 {
            producer.send(BaseRecord::<(), _>::to("g.neli").partition(p).payload("x")).expect("queued");
        }
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while !acknowledged(round) {
            assert!(std::time::Instant::now() < until, "round {round} not acknowledged");
        }
    }
    assert_eq!(producer.context().0.load(Ordering::Relaxed), 0, "nothing served yet");
    let served = producer.clone();
    let serving = Joined::spawn("neli-produce", move |stop, bell| serve_producer(&served, stop, bell)).unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while producer.context().0.load(Ordering::Relaxed) < 600 {
        assert!(std::time::Instant::now() < until, "served {} of 600", producer.context().0.load(Ordering::Relaxed));
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(serving);
}

/// Dropping a helper thread's handle stops it (its bell rung: it was
/// waiting on it for ten minutes) and joins it: its work has ended when the
/// drop returns.
#[test]
fn dropping_a_joined_thread_stops_and_joins_it() {
    let ended = Arc::new(AtomicBool::new(false));
    let ending = ended.clone();
    let joined = Joined::spawn("neli-test", move |stop, bell| {
        while !stop.load(Ordering::Relaxed) {
            bell.rung_within(Duration::from_secs(600));
        }
        ending.store(true, Ordering::Relaxed);
    })
    .unwrap();
    drop(joined);
    assert!(ended.load(Ordering::Relaxed), "the drop returned before the thread ended");
}

/// A gap in our own heartbeats is measured against how far apart our seats
/// write them: a crontab's idle seat writes every third of the deadline,
/// and each of its records read back was said as a gap ("own heartbeats
/// back after a gap", every 1.7 s per job at the defaults); every other
/// member's seats write every interval.
#[test]
fn gaps_in_own_heartbeats_are_measured_against_the_seats_slowest_cadence() {
    let dir = std::env::temp_dir().join(format!("neli-run-gap-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join("fleet.crontab");
    std::fs::write(&file, "@every 1m a true\n").expect("a crontab");
    let cli = crate::cli::Cli::try_parse_from(["neli-run", "-g", "g", "--crontab", file.to_str().expect("utf-8")]);
    let mut cfg = Config::from_args(cli.expect("valid arguments").run, None).expect("valid configuration");
    cfg.place(&BTreeMap::from([("a".to_string(), 0)]), 1);
    let _ = std::fs::remove_dir_all(&dir);
    let t = cfg.timing;
    assert_eq!((t.heartbeat_interval, t.heartbeat_deadline), (Duration::from_millis(500), Duration::from_secs(5)));
    assert_eq!(Settings::of(&cfg).idle_heartbeat, t.heartbeat_deadline / 3);
    assert_eq!(settings("localhost:9092").idle_heartbeat, Duration::from_millis(500));
}

/// A standby whose watcher counts 29 other live candidacies writes its
/// own every 3 base intervals (saying so in the record), and at once when
/// it has something new to say (unhealthy, leaving).
#[test]
fn a_standby_of_a_large_group_writes_its_candidacy_less_often() {
    let (_cluster, brokers) = mock_with_topic(1);
    let (mut kafka, mut events) = connect(&brokers);
    next(&mut events, |e| matches!(e, Event::Assigned { .. }).then_some(()));
    // A standby's watcher reads from the end, once it has left.
    kafka.stand_aside();
    next(&mut events, |e| matches!(e, Event::Revoked { .. }).then_some(()));
    let others: Vec<Vec<u8>> = (0..29)
        .map(|i| {
            let member = Member::this_process(format!("p{i}"));
            candidacy::Record::new(&member, 0, false, 0, Duration::from_secs(10), false, false).encode()
        })
        .collect();
    let live = |kafka: &Kafka| kafka.census.lock().unwrap().live(crate::clock::wall_ms());
    let until = Instant::now() + Duration::from_secs(15);
    while live(&kafka) < 29 {
        assert!(Instant::now() < until, "the watcher counted {} of 29 candidacies", live(&kafka));
        produce(&brokers, &others);
        std::thread::sleep(Duration::from_millis(200));
    }
    let base = kafka.candidacy_interval;
    let t0 = Instant::now();
    kafka.send_candidacy(false);
    kafka.send_candidacy(false);
    std::thread::sleep(base * 3 / 2);
    let skipped_late = t0.elapsed() < base * 12 / 5;
    kafka.send_candidacy(false);
    std::thread::sleep((base * 13 / 5).saturating_sub(t0.elapsed()));
    kafka.send_candidacy(false);
    kafka.outs.out = Out::Unhealthy;
    kafka.send_candidacy(false);
    kafka.send_candidacy(true);
    flush(&kafka.producer, Duration::from_secs(20)).expect("written");

    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", "reader")
        .create()
        .expect("a reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("g.neli", 0, Offset::Beginning).unwrap();
    reader.assign(&tpl).unwrap();
    let mut ours = Vec::new();
    let until = Instant::now() + Duration::from_secs(30);
    while !ours.last().is_some_and(|c: &candidacy::Record| c.leaving) {
        assert!(Instant::now() < until, "our withdrawal was not read back: {ours:?}");
        if let Some(Ok(msg)) = reader.poll(Duration::from_millis(100)) {
            ours.extend(msg.payload().and_then(candidacy::Record::decode).filter(|c| c.is_from(&kafka.member)));
        }
    }
    let said: Vec<_> = ours.iter().map(|c| (c.live_ms, c.unhealthy, c.leaving)).collect();
    let live_ms = (candidacy::LIVE_INTERVALS * 3 * base).as_millis() as u64;
    let expected = [(live_ms, false, false), (live_ms, false, false), (live_ms, true, false), (live_ms, true, true)];
    if skipped_late {
        assert_eq!(said, expected, "written: the first, after nearly 3 intervals, unhealthy, the withdrawal");
    } else {
        assert!(said.len() == 4 || said.len() == 5, "{said:?}");
    }
}

/// A new seat's end is asked on the producer's connection: on the
/// consumer's own, a fetch the broker holds (nothing new to read, held for
/// fetch.wait.max.ms) holds the request behind it, as Kafka answers a
/// connection's requests in order. There the pin waited out the fetch
/// (250 ms at the defaults, one yield in 25), and here, where the fetch
/// waits 30 s, it gives up (PIN_WAIT) and reads from the beginning.
#[test]
fn a_new_seat_is_pinned_while_a_fetch_of_ours_is_held_at_the_broker() {
    let (_cluster, brokers) = mock_with_topic(1);
    let p1 = Member::this_process("p1".into());
    produce(&brokers, &(0..3).map(|seq| heartbeat_of(&p1, seq)).collect::<Vec<_>>());
    let (consumer, _heard) = context::tests::reader_on(
        &[0],
        rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .set("group.id", "g")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "30000")
            .set("socket.timeout.ms", "60000"),
    );
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("g.neli", 0, Offset::Offset(3)).expect("a partition");
    consumer.assign(&tpl).expect("assigned");
    // Held: the fetch from the end is out, and a request behind it waits.
    let ask = || consumer.fetch_watermarks("g.neli", 0, Duration::from_secs(2));
    let answered = std::time::Instant::now();
    while ask().is_ok() {
        assert!(answered.elapsed() < Duration::from_secs(30), "the consumer's fetch is never held");
        assert!(consumer.poll(Duration::from_millis(10)).is_none(), "nothing past the end to read");
    }
    let writer = WriterContext {
        reach: Reach::new(tokio::sync::mpsc::unbounded_channel().0, "g.neli".into(), "g".into()),
        me: p1,
        reports_for: None,
        recorded: Mutex::default(),
    };
    let producer: Arc<BaseProducer<WriterContext>> = Arc::new(
        rdkafka::ClientConfig::new().set("bootstrap.servers", &brokers).create_with_context(writer).expect("producer"),
    );
    // The producer knows the topic once it has written to it.
    producer
        .send(BaseRecord::<(), _>::to("g.neli").partition(0).payload(&heartbeat_of(&producer.context().me, 3)))
        .expect("queued");
    producer.flush(Duration::from_secs(20)).expect("written");
    let ctx = consumer.context();
    ctx.ends_from.set(Arc::downgrade(&producer)).expect("set once");
    ctx.start_near_end(&consumer, 0);
    assert_eq!(ctx.assigned_at(0), 4, "pinned at the partition's end, not given up");
}
