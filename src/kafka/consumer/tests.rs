use super::*;

/// A standby serves the group every half coordinator heartbeat, never
/// less often than every 250 ms nor more often than an owner.
#[test]
fn a_standby_serves_the_group_every_half_heartbeat_within_bounds() {
    let ms = Duration::from_millis;
    assert_eq!(standby_serve(ms(500)), ms(250), "the default: S = 6 s");
    assert_eq!(standby_serve(ms(300)), ms(150));
    assert_eq!(standby_serve(ms(100)), STANDBY_POLL, "S = 1 s: as often as an owner");
    assert_eq!(standby_serve(ms(3000)), ms(250), "a long -X heartbeat.interval.ms");
}

/// A request rings the consumer thread's bell, and the wait that it
/// ends empties it.
#[test]
fn a_request_rings_the_consumer_threads_bell() {
    let asks = Asks::default();
    asks.ask(Ask::StandAside);
    assert!(asks.bell.rung_within(Duration::from_secs(30)));
    assert_eq!(asks.take(), [Ask::StandAside]);
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    let mut config = rdkafka::ClientConfig::new();
    config.set("bootstrap.servers", cluster.bootstrap_servers()).set("group.id", "g");
    let consumer: BaseConsumer = config.create().expect("a consumer");
    let rung = Rung::consumer(consumer.client(), &asks.bell).expect("a bell");
    rung.wait(Duration::from_secs(600));
    assert!(!asks.bell.rung_within(Duration::ZERO), "the wait empties the pipe");
}

/// A leave for good asked behind a stand-aside is answered first: the
/// member never watches for another leader (3 session timeouts) nor
/// rejoins on its way out. The consumer never connects (nothing listens
/// at its address): leaving and watching are local to librdkafka.
#[test]
fn a_leave_asked_behind_a_stand_aside_comes_first() {
    let (consumer, _heard) = super::super::context::tests::reader(&[0]);
    let (subscription, me) = (Subscription::default(), Member::this_process("t".into()));
    subscription.subscribe(&consumer, "g.neli").expect("subscribed");
    let writer = super::super::context::WriterContext {
        reach: consumer.context().reach.clone(),
        me: me.clone(),
        reports_for: None,
        recorded: Mutex::default(),
    };
    let producer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", "127.0.0.1:9")
        .create_with_context(writer)
        .expect("a producer");
    let waker = Waker::new(Arc::new(producer), "g.neli".into(), me.clone(), false);
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let asks = Asks::default();
    asks.ask(Ask::StandAside);
    asks.ask(Ask::Leave);
    let (answered, done) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let long = Duration::from_secs(600);
            let mut reader = Reader {
                consumer: &consumer,
                subscription: &subscription,
                me: &me,
                waker: &waker,
                events: &events,
                gaps: BTreeMap::new(),
                slice: STANDBY_POLL,
                rung: None,
                served: None,
                asks: &asks,
                aside_for: AsideFor { yielded: long, handed_over: long },
                out: Out::In,
                leaving: false,
                later: Vec::new(),
            };
            reader.answer();
            let _ = answered.send(());
        });
        let answered = done.recv_timeout(Duration::from_secs(60));
        asks.close();
        assert!(answered.is_ok(), "the member watched for another leader on its way out");
    });
    assert!(!subscription.subscribed(), "left the group");
}

/// A poll on the bell returns the record fetched as soon as it comes,
/// not once the slice has passed (a record polled is never dropped for
/// another poll).
#[test]
fn a_poll_on_the_bell_returns_the_record_fetched() {
    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("t", 1, 1).expect("a topic");
    let mut config = rdkafka::ClientConfig::new();
    config.set("bootstrap.servers", cluster.bootstrap_servers()).set("group.id", "g");
    let consumer: BaseConsumer = config.create().expect("a consumer");
    let bell = Bell::default();
    let rung = Rung::consumer(consumer.client(), &bell).expect("a bell");
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset("t", 0, Offset::Beginning).expect("a partition");
    consumer.assign(&tpl).expect("assigned");
    let producer: rdkafka::producer::BaseProducer = config.create().expect("a producer");
    let record = rdkafka::producer::BaseRecord::<(), _>::to("t").partition(0).payload("x");
    producer.send(record).map_err(|(e, _)| e).expect("queued");
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(30)).expect("written");
    let started = Instant::now();
    let got = loop {
        if let Some(polled) = poll_rung(&rung, &consumer, Duration::from_secs(600)) {
            break polled.ok().map(|m| m.payload().map(<[u8]>::to_vec));
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no record within 60 s");
    };
    assert_eq!(got, Some(Some(b"x".to_vec())));
    // Rung with nothing queued (a request): it returns at once, not at
    // the end of its ten-minute slice.
    bell.ring();
    assert!(poll_rung(&rung, &consumer, Duration::from_secs(600)).is_none());
}

#[test]
fn a_gap_in_own_heartbeats_is_said_once_when_they_are_back() {
    let ms = |n: u64| BootTime::from_nanos(n * 1_000_000);
    let interval = Duration::from_millis(500);
    let mut gap = Gap::default();
    // Steady: each one read back 10 ms after it was written.
    for i in 0..4 {
        let sent = ms(1_000 + i * 500);
        assert_eq!(gap.own(sent, ms(1_010 + i * 500), interval), Some(Duration::from_millis(510)).filter(|_| i > 0));
    }
    // The newest read was sent at 2500; nothing for 3 s, then the
    // records written meanwhile come back at once: the first says how
    // long the fence saw no heartbeat, the rest nothing.
    let back = ms(5_600);
    assert_eq!(gap.own(ms(3_000), back, interval), Some(Duration::from_millis(3_100)));
    for sent in [3_500, 4_000, 4_500, 5_000, 5_500] {
        assert_eq!(gap.own(ms(sent), back, interval), None, "record sent at {sent} ms");
    }
    // Steady again: the next one's age is an interval's, said to no one.
    assert_eq!(gap.own(ms(6_000), ms(6_110), interval), Some(Duration::from_millis(610)));
    // A record read again (a rewind) says nothing.
    assert_eq!(gap.own(ms(4_000), ms(6_700), interval), None);
}
