//! The dev broker as a Kafka client other than neli-run sees it: librdkafka
//! through rdkafka, as a user's own consumer would use it.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, ClientContext, Message, Offset, TopicPartitionList};

use crate::raw::{i16_at, i32_at, string, Raw};
use crate::util::{run, stays_false, wait_until, Broker, Group, LONG};

fn consumer(broker: &Broker, group: &str) -> BaseConsumer {
    config(broker, group).create().expect("a consumer")
}

fn config(broker: &Broker, group: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &broker.address)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000");
    config
}

/// Keeps what librdkafka logs, to show it when a wait fails: the one time a
/// member of this file was not assigned within 30 s (a CI run under load),
/// nothing said why.
#[derive(Default)]
struct Logged(std::sync::Mutex<Vec<String>>);

impl ClientContext for Logged {
    fn log(&self, _: rdkafka::config::RDKafkaLogLevel, fac: &str, line: &str) {
        if let Ok(mut lines) = self.0.lock() {
            lines.push(format!("{:?} {fac} {line}", std::time::SystemTime::now()));
        }
    }
}

impl ConsumerContext for Logged {}

fn at(topic: &str, offset: i64) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset)).unwrap();
    tpl
}

fn committed<C: ConsumerContext>(c: &BaseConsumer<C>, topic: &str) -> Offset {
    let tpl = c.committed_offsets(at(topic, 0), Duration::from_secs(10)).expect("OffsetFetch answered");
    tpl.find_partition(topic, 0).expect("the partition asked for").offset()
}

/// The group as Kafka describes it; offsets belong to the coordinator, as
/// on Kafka: a member commits and reads back; a client outside the group may
/// not commit while the group has members (Kafka answers UNKNOWN_MEMBER_ID),
/// and may once it is empty.
#[test]
fn the_coordinator_describes_the_group_keeps_a_members_commits_and_refuses_an_outsiders() {
    let broker = Broker::dev();
    let (topic, group) = ("offsets-t", "offsets-g");
    // As on Kafka, a consumer does not create the topic it subscribes to.
    assert_eq!(create(&admin_of(&broker), topic, 1), Ok(topic.to_string()));
    let member: BaseConsumer<Logged> =
        config(&broker, group).set("debug", "cgrp,topic,metadata").create_with_context(Logged::default()).unwrap();
    member.subscribe(&[topic]).unwrap();
    let unassigned = stays_false(LONG, || {
        let _ = member.poll(Duration::from_millis(50));
        member.assignment().is_ok_and(|a| a.count() == 1)
    });
    if unassigned {
        let said = member.context().0.lock().map(|l| l.join("\n")).unwrap_or_default();
        panic!("the member was not assigned partition 0 within {LONG:?}; librdkafka said:\n{said}");
    }
    // As `kafka-consumer-groups --describe` shows it (ListGroups, then
    // DescribeGroups: neither is the mock's).
    let listed = member.fetch_group_list(Some(group), Duration::from_secs(10)).expect("groups listed");
    let [described] = listed.groups() else { panic!("one group, got {}", listed.groups().len()) };
    assert_eq!((described.name(), described.state(), described.protocol_type()), (group, "Stable", "consumer"));
    let [m] = described.members() else { panic!("one member, got {}", described.members().len()) };
    assert_eq!((m.client_id(), m.client_host()), ("rdkafka", "/127.0.0.1"));
    assert!(m.assignment().is_some_and(|a| !a.is_empty()), "its assignment is shown");

    member.commit(&at(topic, 42), CommitMode::Sync).expect("a member's commit");
    assert_eq!(committed(&member, topic), Offset::Offset(42));

    let outsider = consumer(&broker, group);
    let refused = outsider.commit(&at(topic, 7), CommitMode::Sync);
    assert!(refused.is_err(), "an outsider committed into a group with members");
    assert_eq!(committed(&outsider, topic), Offset::Offset(42), "and nothing of it was kept");

    drop(member); // closes: LeaveGroup, the group is empty
    wait_until(LONG, "an outsider may commit into the empty group", || {
        outsider.commit(&at(topic, 7), CommitMode::Sync).is_ok()
    });
    assert_eq!(committed(&outsider, topic), Offset::Offset(7));
}

fn topics(broker: &Broker) -> Vec<(String, usize)> {
    let md = consumer(broker, "lister").fetch_metadata(None, Duration::from_secs(10)).expect("all topics");
    md.topics().iter().map(|t| (t.name().to_string(), t.partitions().len())).collect()
}

pub(crate) fn admin_of(broker: &Broker) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", &broker.address).create().expect("an admin client")
}

pub(crate) fn create(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    partitions: i32,
) -> Result<String, RDKafkaErrorCode> {
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let mut results = block_on(admin.create_topics([&topic], &opts)).expect("CreateTopics answered");
    results.pop().expect("one result").map_err(|(_, code)| code)
}

/// A future polled on a one-off runtime (the admin client answers through futures).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// Topics come into being as on Kafka: CreateTopics makes what it asks for
/// (which needs the controller the mock does not name), a producer's
/// Metadata request may create a topic (with one partition, not the mock's
/// four), and a client that only looks creates nothing. --partitions gives
/// every topic its count, as a topic made by hand with more than one.
#[test]
fn topics_are_created_by_create_topics_and_producers_never_by_looking() {
    let broker = Broker::dev();
    let admin = admin_of(&broker);
    assert_eq!(create(&admin, "three", 3), Ok("three".to_string()));
    assert_eq!(create(&admin, "three", 3), Err(RDKafkaErrorCode::TopicAlreadyExists));
    assert_eq!(create(&admin, "no/slash", 1), Err(RDKafkaErrorCode::InvalidTopic));

    let looked = consumer(&broker, "looker").fetch_metadata(Some("looked-at"), Duration::from_secs(10)).unwrap();
    assert_eq!(looked.topics()[0].error().map(RDKafkaErrorCode::from), Some(RDKafkaErrorCode::UnknownTopicOrPartition));

    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &broker.address).create().unwrap();
    producer.send(BaseRecord::<(), _>::to("produced").payload("x")).expect("queued");
    producer.flush(Duration::from_secs(10)).expect("delivered");

    let mut all = topics(&broker);
    all.sort();
    assert_eq!(all, [("produced".to_string(), 1), ("three".to_string(), 3)]);

    let broker = Broker::dev_with("127.0.0.1", &["--partitions", "2"]);
    let admin = admin_of(&broker);
    assert_eq!(create(&admin, "asked-one", 1), Ok("asked-one".to_string()));
    assert_eq!(topics(&broker), [("asked-one".to_string(), 2)]);
}

/// KIP-511, as kafka-python 3 meets it (it asks ApiVersions v4 first): an
/// ApiVersions version above what the broker serves is answered
/// UNSUPPORTED_VERSION in version 0's shape, naming the versions it serves,
/// and the client's retry with one of them gets the full list.
#[test]
fn an_api_versions_version_not_served_is_answered_in_v0_shape_and_the_retry_works() {
    let broker = Broker::dev();
    let mut raw = Raw::connect(&broker.address, "raw");
    // v4: client software name and version (compact strings), tagged fields.
    let answer = raw.ask(18, 4, true, &[4, b'r', b'a', b'w', 2, b'1', 0]);
    assert_eq!(answer, [0, 35, 0, 0, 0, 1, 0, 18, 0, 0, 0, 2], "UNSUPPORTED_VERSION; ApiVersions 0-2; nothing more");
    // The retry, on the same connection: every API, as version 2 lays them out.
    let answer = raw.ask(18, 2, false, &[]);
    assert_eq!(i16_at(&answer, 0), 0, "no error");
    let count = i32_at(&answer, 2) as usize;
    assert_eq!(answer.len(), 6 + 6 * count + 4, "the APIs and the throttle time");
    let max = |key: i16| {
        (0..count).map(|i| 6 + 6 * i).find(|&at| i16_at(&answer, at) == key).map(|at| i16_at(&answer, at + 4))
    };
    assert_eq!(max(18), Some(2), "ApiVersions");
    assert_eq!(max(13), Some(3), "LeaveGroup, up to its members array");
    assert_eq!(max(15), Some(4), "DescribeGroups, served by the dev broker");
}

/// KIP-345, as kafkajs and kafka-python leave a group: LeaveGroup v3 lists
/// the members leaving, and its answer lists each one's error. A reply
/// without that list (the mock's) cannot be read by either client.
#[test]
fn leave_group_v3_is_answered_with_each_members_error() {
    let broker = Broker::dev();
    let mut raw = Raw::connect(&broker.address, "raw");
    // JoinGroup v5: group, session and rebalance timeouts, member id, no
    // instance id, protocol type, one protocol.
    let join = |member: &str| {
        let mut b = string("raw-g");
        b.extend_from_slice(&6000i32.to_be_bytes());
        b.extend_from_slice(&6000i32.to_be_bytes());
        b.extend(string(member));
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend(string("consumer"));
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend(string("range"));
        b.extend_from_slice(&0i32.to_be_bytes());
        b
    };
    // Answer: throttle, error, generation, protocol, leader, member id.
    let first = raw.ask(11, 5, false, &join(""));
    assert_eq!(i16_at(&first, 4), 79, "MEMBER_ID_REQUIRED");
    let (protocol, leader) = (i16_at(&first, 10) as usize, i16_at(&first, 12) as usize);
    let at = 14 + protocol + leader;
    let id = String::from_utf8(first[at + 2..at + 2 + i16_at(&first, at) as usize].to_vec()).unwrap();
    let joined = raw.ask(11, 5, false, &join(&id));
    assert_eq!((i16_at(&joined, 4), i32_at(&joined, 6)), (0, 1), "joined generation 1");

    let leave = |member: &str| {
        let mut b = string("raw-g");
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend(string(member));
        b.extend_from_slice(&(-1i16).to_be_bytes()); // no instance id
        b
    };
    // throttle, error, members [id, instance id, error].
    let answer_for = |code: i16| {
        let mut a = vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        a.extend(string(&id));
        a.extend_from_slice(&[255, 255]);
        a.extend_from_slice(&code.to_be_bytes());
        a
    };
    assert_eq!(raw.ask(13, 3, false, &leave(&id)), answer_for(0), "left");
    assert_eq!(raw.ask(13, 3, false, &leave(&id)), answer_for(25), "then unknown: UNKNOWN_MEMBER_ID");
}

/// What an idle member costs the broker, from the broker's side: `requests`
/// counts every request by client.id (a member's --name, for each of its
/// clients) and API, one line `CLIENT API COUNT` each (neli-bench's idle
/// scenario reads it at both ends of its window). A leader's heartbeats
/// (Produce), their read-back (Fetch) and its coordinator heartbeats
/// (Heartbeat) are there, and grow while it leads.
#[test]
fn requests_are_counted_by_client_id_and_api_and_grow_while_a_member_leads() {
    let g = Group::on(Broker::cluster(1), "requests");
    let _a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "a leads", || g.lock_held());
    let control = g.broker.control_path().to_string();
    let counts = || {
        let (code, out) = run(&["dev-broker", "event", "--control", &control, "requests"]);
        assert_eq!(code, 0, "{out}");
        let lines = out.lines().map(|line| match line.split(' ').collect::<Vec<_>>()[..] {
            [client, api, n] => (client.to_string(), api.to_string(), n.parse::<u64>().expect(line)),
            _ => panic!("not CLIENT API COUNT: {line:?}"),
        });
        let of_a = lines.filter(|(client, ..)| client == "a");
        of_a.map(|(_, api, n)| (api, n)).collect::<std::collections::HashMap<String, u64>>()
    };
    let first = counts();
    let apis = ["Produce", "Fetch", "Heartbeat", "Metadata", "JoinGroup"];
    for api in apis {
        assert!(first.get(api).is_some_and(|n| *n > 0), "no {api} counted for a: {first:?}");
    }
    wait_until(g.broker.timing.takeover(), "a's Produce, Fetch and Heartbeat counts grow", || {
        let now = counts();
        apis[..3].iter().all(|api| now.get(*api) > first.get(*api))
    });
}

/// A burst of clients connecting at once (a group of hundreds started
/// together) is relayed whole. librdkafka's mock listens with a backlog of
/// 5 and accepts on its one thread: a relay that gave up on the first
/// refused connect dropped the client, which reconnected into the same
/// burst, and 200 members started together never settled.
#[test]
fn a_burst_of_connections_is_relayed_whole() {
    let broker = Broker::dev();
    let mut clients: Vec<Raw> = (0..300).map(|_| Raw::connect(&broker.address, "raw")).collect();
    for (i, raw) in clients.iter_mut().enumerate() {
        let answer = raw.ask(18, 2, false, &[]);
        assert_eq!(i16_at(&answer, 0), 0, "client {i}: ApiVersions answered");
    }
}

/// A fleet's idle connections cost the mock nothing: librdkafka's mock
/// polls every connection it holds at each wake-up on its one thread, so
/// the forwarder's clients of a broker share a few mock connections
/// instead of one each (a settled group of 200 held 1,008 and cost the
/// dev broker 7 % of a core). Counted in the broker's own process: the
/// unix sockets between the forwarder and the mock (both ends are its own).
#[test]
fn many_clients_share_a_few_connections_to_the_mock() {
    let broker = Broker::dev();
    let mut clients: Vec<Raw> = (0..200).map(|_| Raw::connect(&broker.address, "raw")).collect();
    // All at once, as a call to the cold members wakes every parked fetch.
    std::thread::scope(|s| {
        for (i, raw) in clients.iter_mut().enumerate() {
            s.spawn(move || {
                let answer = raw.ask(18, 2, false, &[]);
                assert_eq!(i16_at(&answer, 0), 0, "client {i}: ApiVersions answered");
            });
        }
    });
    let unix = unix_sockets(broker.pid());
    // The mock's listener and the shared connections (both ends of each).
    assert!(unix <= 20, "{unix} unix sockets in the dev broker for 200 clients, a few expected");
}

/// The unix sockets process `pid` holds open.
fn unix_sockets(pid: u32) -> usize {
    let unix = std::fs::read_to_string("/proc/net/unix").expect("/proc/net/unix");
    let inodes: std::collections::HashSet<&str> =
        unix.lines().skip(1).filter_map(|l| l.split_whitespace().nth(6)).collect();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the dev broker's descriptors")
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|link| {
            let link = link.to_string_lossy();
            link.strip_prefix("socket:[").and_then(|l| l.strip_suffix(']')).is_some_and(|i| inodes.contains(i))
        })
        .count()
}

/// A broker that goes down closes its clients' connections at once, the
/// idle ones too, as Kafka's would (its process gone): a client learns it
/// from the close, not from its next request timing out. The forwarder's
/// clients share the mock's connections, so the forwarder closes them; and
/// once the broker is up again, new clients are served.
#[test]
fn a_broker_going_down_closes_its_idle_connections_and_serves_new_ones_once_up() {
    let broker = Broker::cluster(2);
    let second = broker.address.split(',').nth(1).expect("broker 2's address").to_string();
    let mut raw = Raw::connect(&second, "raw");
    assert_eq!(i16_at(&raw.ask(18, 2, false, &[]), 0), 0, "ApiVersions answered");
    broker.event("stop 2");
    assert!(raw.closed(), "broker 2's client connection closed when it went down");
    // Started again: a new client is answered (the mock connections opened
    // before the stop, which the mock closed, are not used for it).
    broker.event("start 2");
    let mut again = Raw::connect(&second, "raw");
    assert_eq!(i16_at(&again.ask(18, 2, false, &[]), 0), 0, "ApiVersions answered after the start");
}

/// `rewind TOPIC P` answers the next fetch of the partition
/// OFFSET_OUT_OF_RANGE, as a broker whose log lags the client's position
/// answers it: librdkafka with `auto.offset.reset=earliest` (neli-run's)
/// resets its position and gives again records it gave before, from the
/// partition's start. With one broker and with three (the fetch by topic
/// id, librdkafka's Fetch v16, as by name).
#[test]
fn a_rewind_makes_a_consumer_read_records_it_was_given_again_from_the_partitions_start() {
    for brokers in [1, 3] {
        let broker = Broker::cluster(brokers);
        let topic = "rewound";
        let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &broker.address).create().unwrap();
        for i in 0..5 {
            producer.send(BaseRecord::<(), _>::to(topic).partition(0).payload(&format!("r{i}"))).unwrap();
        }
        producer.flush(Duration::from_secs(20)).unwrap();
        let reader: BaseConsumer<Logged> = config(&broker, "rewound-g")
            .set("auto.offset.reset", "earliest")
            .create_with_context(Logged::default())
            .unwrap();
        reader.assign(&at(topic, 3)).unwrap();
        let mut given = Vec::new();
        let mut read_until = |what: &str, done: &dyn Fn(&[i64]) -> bool| {
            let read = stays_false(Duration::from_secs(30), || {
                if let Some(Ok(m)) = reader.poll(Duration::from_millis(50)) {
                    given.push(m.offset());
                }
                done(&given)
            });
            let said = reader.context().0.lock().map(|l| l.join("\n")).unwrap_or_default();
            assert!(!read, "{brokers} broker(s): {what} within 30 s; given {given:?}; librdkafka said:\n{said}");
        };
        read_until("offsets 3 and 4 given", &|g| g == [3, 4]);
        // Paused, the reader sends no fetch that could take the rewind
        // before `describe` shows it pending (seen under load).
        reader.pause(&at(topic, 5)).unwrap();
        let said = broker.event(&format!("rewind {topic} 0"));
        assert_eq!(said, format!("the next fetch of partition 0 of {topic} is answered OFFSET_OUT_OF_RANGE"));
        assert!(broker.event("describe").ends_with(&format!("; rewinds {topic}/0")));
        reader.resume(&at(topic, 5)).unwrap();
        read_until("the partition given again from its start", &|g| g.len() >= 7);
        assert_eq!(given, [3, 4, 0, 1, 2, 3, 4], "{brokers} broker(s)");
        assert!(!broker.event("describe").contains("rewinds"), "served once");
        let refused = |event: &str| {
            let (code, out) = run(&["dev-broker", "event", "--control", broker.control_path(), event]);
            assert_ne!(code, 0, "{event}: {out}");
            out
        };
        assert!(refused(&format!("rewind {topic} 9")).contains("no partition 9"));
        assert!(refused("rewind nowhere 0").contains("no partition 0 of topic \"nowhere\""));
        assert!(refused(&format!("rewind {topic}")).contains("rewind needs TOPIC PARTITION"));
    }
}

/// `--control PATH` replaces only a dead dev broker's socket: a file, a
/// link or a directory at PATH is refused and left as it is (audit E2: a
/// file there was deleted).
#[test]
fn control_refuses_a_path_that_holds_anything_but_a_socket_and_leaves_it() {
    use std::os::unix::net::UnixListener;
    use std::process::{Command, Stdio};
    let dir = crate::util::tempdir::Dir::new("control-path");
    let file = dir.path().join("victim.txt");
    std::fs::write(&file, "IMPORTANT USER DATA").unwrap();
    let link = dir.path().join("vlink");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let sub = dir.path().join("vdir");
    std::fs::create_dir(&sub).unwrap();
    // A socket nobody answers on: a killed dev broker's, replaced.
    let dead = dir.path().join("dead.sock");
    drop(UnixListener::bind(&dead).unwrap());
    let start = |path: &std::path::Path| {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen = format!("127.0.0.1:{port}");
        let args = ["dev-broker", "--listen", &listen, "--control", path.to_str().unwrap()];
        Command::new(crate::util::bin()).args(args).stderr(Stdio::piped()).spawn().unwrap()
    };
    for (path, what) in [(&file, "a file that is not a socket"), (&link, "a symbolic link"), (&sub, "a directory")] {
        let mut broker = start(path);
        let mut exited = None;
        // A dev broker that took the path runs on: it is stopped, and fails.
        let refused = !stays_false(Duration::from_secs(20), || {
            exited = broker.try_wait().unwrap();
            exited.is_some()
        });
        if !refused {
            let _ = broker.kill();
        }
        let out = broker.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(refused && exited.and_then(|s| s.code()) == Some(2), "{what}: {said}");
        assert!(said.contains(&format!("{what} is there, left as it is")), "{said}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "IMPORTANT USER DATA");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(sub.is_dir());
    let mut broker = start(&dead);
    wait_until(Duration::from_secs(20), "the dev broker answers on the dead socket's path", || {
        std::os::unix::net::UnixStream::connect(&dead).is_ok()
    });
    let _ = broker.kill();
    let _ = broker.wait();
}
