//! A consumer's fetch on the dev broker waits as on Kafka: answered as soon
//! as a write brings MinBytes of records, not held for its whole
//! fetch.wait.max.ms as librdkafka's mock alone holds an empty one. Real
//! clients (librdkafka through rdkafka) over TCP.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};

use crate::util::{stays_false, wait_until, Broker, Group};

/// How long the consumers' fetches may wait: far longer than the bound a
/// record must arrive within, so that a fetch held for all of it fails.
const FETCH_WAIT: Duration = Duration::from_secs(30);
/// How soon a record written must reach a waiting consumer: generous, for a
/// loaded machine; the fetch waits twice as long.
const WITHIN: Duration = Duration::from_secs(15);

/// Counts the Fetch requests a consumer has sent, from its statistics.
#[derive(Default)]
struct Fetches(std::sync::atomic::AtomicI64);

impl ClientContext for Fetches {
    fn stats(&self, stats: Statistics) {
        let sent = stats.brokers.values().filter_map(|b| b.req.get("Fetch")).sum();
        self.0.store(sent, std::sync::atomic::Ordering::SeqCst);
    }
}

impl ConsumerContext for Fetches {}

/// Writes `payload` to partition 0 of `topic` (creating the topic, with
/// one partition, the first time) with `acks`, and waits until it is sent.
fn produce(broker: &Broker, topic: &str, acks: &str, payload: &[u8]) {
    let producer: BaseProducer =
        ClientConfig::new().set("bootstrap.servers", &broker.address).set("acks", acks).create().expect("a producer");
    producer.send(BaseRecord::<(), _>::to(topic).partition(0).payload(payload)).expect("queued");
    producer.flush(Duration::from_secs(20)).expect("delivered");
}

/// A consumer of partition 0 of `topic` from offset `from` (its end), its
/// fetches waiting up to [`FETCH_WAIT`] for `min_bytes`; returned once its
/// first Fetch is sent, and so waiting.
fn waiting_consumer(broker: &Broker, topic: &str, from: i64, min_bytes: usize) -> BaseConsumer<Fetches> {
    let consumer: BaseConsumer<Fetches> = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("group.id", format!("{topic}-reader"))
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", FETCH_WAIT.as_millis().to_string())
        .set("fetch.min.bytes", min_bytes.to_string())
        // Above the fetch's wait, so that librdkafka waits for its answer.
        .set("socket.timeout.ms", "60000")
        .set("statistics.interval.ms", "100")
        .create_with_context(Fetches::default())
        .expect("a consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(from)).unwrap();
    consumer.assign(&tpl).expect("assigned");
    wait_until(Duration::from_secs(30), "the consumer sends its first Fetch", || {
        assert!(consumer.poll(Duration::from_millis(50)).is_none(), "nothing to read yet");
        consumer.context().0.load(std::sync::atomic::Ordering::SeqCst) >= 1
    });
    consumer
}

/// The payload of the next record `consumer` gets within `within`.
fn next(consumer: &BaseConsumer<Fetches>, within: Duration, what: &str) -> Vec<u8> {
    let start = Instant::now();
    loop {
        let left = within.checked_sub(start.elapsed()).unwrap_or_else(|| panic!("{what}: none within {within:?}"));
        if let Some(got) = consumer.poll(left.min(Duration::from_millis(200))) {
            let message = got.expect("a record, not an error");
            return message.payload().unwrap_or_default().to_vec();
        }
    }
}

/// A record written while a consumer's fetch waits reaches it at once, as
/// on Kafka (librdkafka's mock alone answered the fetch after its 30 s),
/// whether its producer waits for an answer or not (acks 0).
#[test]
fn a_waiting_fetch_is_answered_as_soon_as_a_record_is_written() {
    let broker = Broker::dev();
    for acks in ["all", "0"] {
        let topic = format!("fetch-wait-acks-{acks}");
        produce(&broker, &topic, "all", b"first");
        let consumer = waiting_consumer(&broker, &topic, 1, 1);
        produce(&broker, &topic, acks, b"second");
        assert_eq!(next(&consumer, WITHIN, &format!("the record written with acks {acks}")), b"second");
    }
}

/// fetch.min.bytes as on Kafka: records smaller than it, together too, are
/// held while the fetch waits; once enough bytes are written the consumer
/// gets them. librdkafka's mock shows one batch a fetch: the dev broker
/// gathers the batches past it and counts their bytes as Kafka does (it
/// answered at the second small record with the first alone, as if the two
/// were enough: a neli-run standby's wake watcher was answered at nearly
/// every record).
#[test]
fn a_fetch_waits_for_its_min_bytes() {
    const MIN_BYTES: usize = 4000;
    let broker = Broker::dev();
    let topic = "fetch-min-bytes";
    produce(&broker, topic, "all", b"first");
    let consumer = waiting_consumer(&broker, topic, 1, MIN_BYTES);
    // Small records (a batch of their own each, some 80 bytes): not enough.
    let small = ["small 1", "small 2", "small 3"];
    for record in small {
        produce(&broker, topic, "all", record.as_bytes());
    }
    assert!(
        stays_false(Duration::from_secs(2), || consumer.poll(Duration::from_millis(50)).is_some()),
        "records under fetch.min.bytes together were answered before the fetch's wait"
    );
    // Then more than enough: the consumer gets them all, in order.
    let big = vec![b'x'; MIN_BYTES + 1000];
    produce(&broker, topic, "all", &big);
    for record in small {
        assert_eq!(next(&consumer, WITHIN, "a small record, once enough bytes are there"), record.as_bytes());
    }
    assert_eq!(next(&consumer, WITHIN, "the big record"), big);
}

/// A consumer behind gets every record from its offset on, once each and in
/// order, from a partition of many batches that the dev broker has shown
/// before (it keeps them, and answers a fetch from them past the batch the
/// mock shows: `dev-broker/src/fetch.rs`, `Shown`): from the start, from the
/// middle, from inside a batch of three, and with another Fetch version.
#[test]
fn a_consumer_behind_gets_every_record_from_its_offset_once_and_in_order() {
    let broker = Broker::dev();
    let topic = "fetch-behind";
    let payload = |i: i64| format!("record {i}").into_bytes();
    // 300 batches of one record, then one of three (written together).
    for (records, per_batch) in [(0..300, "1"), (300..303, "3")] {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &broker.address)
            .set("batch.num.messages", per_batch)
            .set("linger.ms", "50")
            .create()
            .expect("a producer");
        for i in records {
            producer.send(BaseRecord::<(), _>::to(topic).partition(0).payload(&payload(i))).expect("queued");
        }
        producer.flush(Duration::from_secs(20)).expect("delivered");
    }
    let read_from = |from: i64, fetch_version: Option<&str>| {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &broker.address)
            .set("group.id", format!("{topic}-reader"))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "100");
        if let Some(version) = fetch_version {
            config.set("api.version.request", "false").set("broker.version.fallback", version);
        }
        let consumer: BaseConsumer = config.create().expect("a consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(from)).unwrap();
        consumer.assign(&tpl).expect("assigned");
        let mut got = Vec::new();
        let start = Instant::now();
        while got.len() < (303 - from) as usize {
            assert!(start.elapsed() < WITHIN, "from {from}: {} of {} records", got.len(), 303 - from);
            if let Some(message) = consumer.poll(Duration::from_millis(100)) {
                let message = message.expect("a record, not an error");
                got.push((message.offset(), message.payload().unwrap_or_default().to_vec()));
            }
        }
        let expected: Vec<_> = (from..303).map(|i| (i, payload(i))).collect();
        assert!(got == expected, "from {from} ({fetch_version:?}): {:?}", got.iter().map(|g| g.0).collect::<Vec<_>>());
    };
    for from in [0, 0, 150, 301] {
        read_from(from, None);
    }
    read_from(100, Some("0.11.0"));
}

/// A leader's read-back asks the broker to hold it at most 250 ms, at the
/// product's timing: a broker that holds every fetch whatever arrives
/// (tansu 0.6) reads the leader's heartbeats back about that late at most
/// (`Timing::read_back_wait`). At the former wait of a heartbeat interval (500 ms) they came back
/// on tansu 0.5-0.9 s late under load, and network blips of 0.8 s and
/// 1.3 s fenced the leader (issue 65). Asked of the dev broker, which notes
/// the longest wait of each client's fetches for any record (MinBytes 1;
/// a standby's wake watcher waits for a wake's size, and longer).
#[test]
fn a_leader_s_read_back_asks_to_be_held_at_most_250ms() {
    let group = Group::on(Broker::cluster(1), "read-back-wait");
    let leader = group.member_untimed("rb", &[], &["sleep", "600"]);
    wait_until(Duration::from_secs(60), "the member leads", || leader.log().contains("child started"));
    // Many read-backs while it leads, not only the first.
    wait_until(Duration::from_secs(30), "the leader has fetched 20 times", || {
        let requests = group.broker.event("requests");
        let fetches = requests.lines().find_map(|l| l.strip_prefix("rb Fetch ").and_then(|n| n.parse().ok()));
        fetches.unwrap_or(0u64) >= 20
    });
    let waits = group.broker.event("fetch-waits");
    let longest: u64 = waits
        .lines()
        .find_map(|l| l.strip_prefix("rb ").and_then(|ms| ms.parse().ok()))
        .unwrap_or_else(|| panic!("no fetch of the leader noted: {waits:?}"));
    assert!(longest <= 250, "the leader asked the broker to hold its read-back {longest} ms:\n{}", leader.log());
}
