//! The dev broker as a Kafka client other than neli-run sees it: librdkafka
//! through rdkafka, as a user's own consumer would use it.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::util::{wait_until, Broker};

fn consumer(broker: &Broker, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .expect("a consumer")
}

fn at(topic: &str, offset: i64) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset)).unwrap();
    tpl
}

fn committed(c: &BaseConsumer, topic: &str) -> Offset {
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
    let member = consumer(&broker, group);
    member.subscribe(&[topic]).unwrap();
    wait_until(Duration::from_secs(30), "the member is assigned partition 0", || {
        let _ = member.poll(Duration::from_millis(50));
        member.assignment().is_ok_and(|a| a.count() == 1)
    });
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
    wait_until(Duration::from_secs(20), "an outsider may commit into the empty group", || {
        outsider.commit(&at(topic, 7), CommitMode::Sync).is_ok()
    });
    assert_eq!(committed(&outsider, topic), Offset::Offset(7));
}
