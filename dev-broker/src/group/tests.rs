//! The coordinator's state machine, driven request by request.

use super::*;
use crate::wire::Reader;

const PROTO: &str = "cooperative-sticky";
/// The generation `stable_pair` leaves its group in.
const G: i32 = 2;

fn req(version: i16, body: Body) -> Request {
    Request { version, correlation: 7, client_id: "c".into(), host: "/h".into(), group: "g".into(), body }
}

fn join(member: &str) -> Request {
    join_as(member, None)
}

/// A JoinGroup v5, of a static member with `instance`.
fn join_as(member: &str, instance: Option<&str>) -> Request {
    req(
        5,
        Body::Join(JoinGroup {
            session: 3000,
            rebalance: 10_000,
            member: member.into(),
            instance: instance.map(Into::into),
            protocol_type: "consumer".into(),
            protocols: vec![(PROTO.into(), member.as_bytes().to_vec())],
        }),
    )
}

fn sync(generation: i32, member: &str, assignments: &[(&str, &[u8])]) -> Request {
    sync_as(generation, (member, None), assignments)
}

fn sync_as(generation: i32, (member, instance): (&str, Option<&str>), assignments: &[(&str, &[u8])]) -> Request {
    let assignments = assignments.iter().map(|(m, a)| (m.to_string(), a.to_vec())).collect();
    let instance = instance.map(Into::into);
    req(3, Body::Sync(SyncGroup { generation, member: member.into(), instance, assignments }))
}

fn heartbeat(generation: i32, member: &str) -> Request {
    heartbeat_as(generation, member, None)
}

fn heartbeat_as(generation: i32, member: &str, instance: Option<&str>) -> Request {
    req(3, Body::Heartbeat { generation, member: member.into(), instance: instance.map(Into::into) })
}

fn leave(member: &str) -> Request {
    req(1, Body::Leave { members: vec![(member.into(), None)] })
}

/// The error code of a response frame (after correlation id and
/// throttle time).
fn code(frame: &[u8]) -> i16 {
    i16::from_be_bytes([frame[8], frame[9]])
}

/// A JoinGroup v5 response: (error, generation, leader, member, how
/// many members are listed).
fn joined(frame: &[u8]) -> (i16, i32, String, String, i32) {
    let mut r = Reader { buf: frame, at: 8 };
    let (code, generation) = (r.i16().unwrap(), r.i32().unwrap());
    r.string().unwrap();
    let (leader, member) = (r.string().unwrap(), r.string().unwrap());
    (code, generation, leader, member, r.i32().unwrap())
}

fn reply_to(out: &[Reply], to: ReplyTo) -> &[u8] {
    &out.iter().find(|r| r.to == to).unwrap_or_else(|| panic!("no reply to {to} in {out:?}")).frame
}

/// A group with two members (ids given by the coordinator), stable in
/// generation 2 at time 0: m1 joined alone first (no initial delay),
/// then m2, which made m1 rejoin.
fn stable_pair(c: &mut Coordinator) -> (String, String) {
    let id = |c: &mut Coordinator, to| joined(&c.handle(to, join(""), 0)[0].frame).3;
    let m1 = id(c, 1);
    assert_eq!(joined(&c.handle(2, join(&m1), 0)[0].frame), (0, 1, m1.clone(), m1.clone(), 1), "alone at once");
    assert_eq!(c.handle(3, sync(1, &m1, &[(&m1, b"p0")]), 0)[0].frame[10..], [0, 0, 0, 2, b'p', b'0']);
    let m2 = id(c, 4);
    assert!(c.handle(5, join(&m2), 0).is_empty(), "the join waits for m1");
    assert_eq!(code(&c.handle(6, heartbeat(1, &m1), 0)[0].frame), REBALANCE_IN_PROGRESS);
    let out = c.handle(7, join(&m1), 0);
    assert_eq!(joined(reply_to(&out, 7)), (0, 2, m1.clone(), m1.clone(), 2), "m1 still leads, with both");
    assert_eq!(joined(reply_to(&out, 5)), (0, 2, m1.clone(), m2.clone(), 0));
    assert!(c.handle(8, sync(2, &m2, &[]), 0).is_empty(), "a follower waits for the leader's sync");
    let out = c.handle(9, sync(2, &m1, &[(&m1, b"p0"), (&m2, b"p1")]), 0);
    assert_eq!(reply_to(&out, 9)[10..], [0, 0, 0, 2, b'p', b'0']);
    assert_eq!(reply_to(&out, 8)[10..], [0, 0, 0, 2, b'p', b'1']);
    (m1, m2)
}

#[test]
fn a_first_join_gets_member_id_required_and_a_unique_id() {
    let mut c = Coordinator::new(0);
    let out = c.handle(1, join(""), 0);
    let (code, generation, _, id, _) = joined(&out[0].frame);
    assert_eq!((code, generation), (MEMBER_ID_REQUIRED, -1));
    assert_ne!(id, joined(&c.handle(2, join(""), 0)[0].frame).3);
    assert_eq!(joined(&c.handle(3, join("stranger"), 0)[0].frame).0, UNKNOWN_MEMBER_ID);
}

#[test]
fn a_join_ends_as_soon_as_every_member_has_rejoined() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    assert_eq!(code(&c.handle(7, heartbeat(G, &m2), 100)[0].frame), NONE);
    // m1 rejoins (as after a revoke): m2 hears of it at its next heartbeat.
    assert!(c.handle(8, join(&m1), 200).is_empty());
    assert_eq!(code(&c.handle(9, heartbeat(G, &m2), 300)[0].frame), REBALANCE_IN_PROGRESS);
    let out = c.handle(10, join(&m2), 310);
    assert_eq!(joined(reply_to(&out, 8)).1, 3, "no fixed wait: the join ends with the last member's");
    assert_eq!(joined(reply_to(&out, 10)).1, 3);
    assert_eq!(code(&c.handle(11, heartbeat(G, &m2), 320)[0].frame), ILLEGAL_GENERATION);
    assert_eq!(code(&c.handle(12, heartbeat(G + 1, &m2), 320)[0].frame), NONE, "completing: heartbeats are fine");
}

/// A JoinGroup v5 response's protocol and listed members (id, metadata).
fn listed(frame: &[u8]) -> (String, Vec<(String, Vec<u8>)>) {
    let mut r = Reader { buf: frame, at: 14 }; // after the error and generation
    let protocol = r.string().unwrap();
    let (_leader, _member) = (r.string(), r.string());
    let members = (0..r.i32().unwrap()).map(|_| {
        let id = r.string().unwrap();
        r.string_in(false).unwrap(); // instance id
        (id, r.bytes().unwrap())
    });
    let members = members.collect();
    assert!(r.rest().is_empty(), "nothing after the members");
    (protocol, members)
}

/// A JoinGroup v5 of `member` (static with `instance`) with protocols
/// other than `join_as`'s.
fn join_with(member: &str, instance: Option<&str>, protocols: &[(&str, &[u8])]) -> Request {
    let mut r = join_as(member, instance);
    if let Body::Join(j) = &mut r.body {
        j.protocols = protocols.iter().map(|(p, d)| (p.to_string(), d.to_vec())).collect();
    }
    r
}

#[test]
fn a_follower_that_rejoins_a_stable_group_unchanged_gets_the_current_generation_and_no_rebalance() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    // Kafka (classicGroupJoinExistingMember, STABLE): a follower whose
    // protocols are unchanged is answered at once, in the current
    // generation, with no members; nobody else hears of it.
    let out = c.handle(7, join(&m2), 100);
    assert_eq!(out.len(), 1, "answered at once, and only it: {out:?}");
    assert_eq!(joined(reply_to(&out, 7)), (NONE, G, m1.clone(), m2.clone(), 0));
    assert_eq!(listed(reply_to(&out, 7)), (PROTO.into(), vec![]));
    assert_eq!(c.next_deadline(), Some(3000), "a join is no heartbeat: sessions as at the last sync (0)");
    assert_eq!(code(&c.handle(8, heartbeat(G, &m1), 200)[0].frame), NONE, "no rebalance");
    assert_eq!(code(&c.handle(9, heartbeat(G, &m2), 200)[0].frame), NONE);
    assert_eq!(described(&mut c, 200), ("Stable".into(), PROTO.into(), vec![b"p0".to_vec(), b"p1".to_vec()]));
    // It syncs as a follower and gets its assignment back at once.
    assert_eq!(reply_to(&c.handle(10, sync(G, &m2, &[]), 300), 10)[10..], [0, 0, 0, 2, b'p', b'1']);
    // A leave after it starts the rebalance the join did not.
    c.handle(11, leave(&m1), 400);
    assert_eq!(code(&c.handle(12, heartbeat(G, &m2), 500)[0].frame), REBALANCE_IN_PROGRESS);
    assert_eq!(joined(reply_to(&c.handle(13, join(&m2), 600), 13)), (NONE, G + 1, m2.clone(), m2.clone(), 1));
}

#[test]
fn the_leader_that_rejoins_a_stable_group_unchanged_starts_a_rebalance() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    // The leader's join always rebalances (what it assigns may have
    // changed with no member's metadata changing).
    assert!(c.handle(7, join(&m1), 100).is_empty(), "waits for m2");
    assert_eq!(code(&c.handle(8, heartbeat(G, &m2), 200)[0].frame), REBALANCE_IN_PROGRESS);
    assert_eq!(described(&mut c, 200).0, "PreparingRebalance");
    let out = c.handle(9, join(&m2), 300);
    assert_eq!(joined(reply_to(&out, 7)), (NONE, G + 1, m1.clone(), m1.clone(), 2));
    assert_eq!(joined(reply_to(&out, 9)), (NONE, G + 1, m1.clone(), m2.clone(), 0));
}

#[test]
fn a_follower_whose_protocols_changed_starts_a_rebalance() {
    // What changes them, as Kafka's `matches` compares them (names and
    // metadata bytes, in order): the metadata, a protocol added, the same
    // protocols in another order.
    for change in ["the metadata", "a protocol added", "the order"] {
        let mut c = Coordinator::new(0);
        let (m1, m2) = stable_pair(&mut c);
        let same = m2.as_bytes();
        let protocols: Vec<(&str, &[u8])> = match change {
            "the metadata" => vec![(PROTO, b"more")],
            "a protocol added" => vec![(PROTO, same), ("range", same)],
            _ => vec![("range", same), (PROTO, same)],
        };
        assert!(c.handle(7, join_with(&m2, None, &protocols), 100).is_empty(), "{change}: waits for m1");
        assert_eq!(code(&c.handle(8, heartbeat(G, &m1), 200)[0].frame), REBALANCE_IN_PROGRESS, "{change}");
        let out = c.handle(9, join(&m1), 300);
        let metadata = protocols.iter().find(|(p, _)| *p == PROTO).unwrap().1.to_vec();
        let want = vec![(m1.clone(), m1.as_bytes().to_vec()), (m2.clone(), metadata)];
        assert_eq!(listed(reply_to(&out, 9)), (PROTO.into(), want), "{change}: the leader gets m2's new metadata");
        assert_eq!(joined(reply_to(&out, 7)).1, G + 1, "{change}");
    }
}

#[test]
fn a_static_follower_is_answered_as_a_dynamic_one() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    // Static b joins (its metadata empty: `join_as` sends its member id,
    // "" the first time), and the group is stable again in generation 3.
    assert!(c.handle(7, join_as("", Some("b")), 100).is_empty());
    c.handle(8, join(&m1), 100);
    let b = joined(reply_to(&c.handle(9, join(&m2), 100), 7)).3;
    c.handle(10, sync(G + 1, &m1, &[]), 100);
    // Unchanged, under its member id: the current generation at once.
    let out = c.handle(11, join_with(&b, Some("b"), &[(PROTO, b"")]), 200);
    assert_eq!(joined(reply_to(&out, 11)), (NONE, G + 1, m1.clone(), b.clone(), 0));
    assert_eq!(code(&c.handle(12, heartbeat(G + 1, &m2), 300)[0].frame), NONE);
    // Changed: a rebalance.
    assert!(c.handle(13, join_with(&b, Some("b"), &[(PROTO, b"more")]), 400).is_empty());
    assert_eq!(code(&c.handle(14, heartbeat(G + 1, &m2), 500)[0].frame), REBALANCE_IN_PROGRESS);
}

#[test]
fn an_unchanged_join_after_the_join_phase_gets_the_current_generation_and_a_changed_one_rebalances() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    c.handle(7, join(&m1), 100);
    assert_eq!(joined(reply_to(&c.handle(8, join(&m2), 100), 8)).1, G + 1);
    // Completing (the join answered, the leader's sync not in): a member
    // that rejoins unchanged, as one that missed its join answer, gets
    // that answer again: the follower with no members, the leader with
    // them all. The group stays where it was.
    let out = c.handle(9, join(&m2), 200);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(joined(reply_to(&out, 9)), (NONE, G + 1, m1.clone(), m2.clone(), 0));
    let out = c.handle(10, join(&m1), 200);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(joined(reply_to(&out, 10)), (NONE, G + 1, m1.clone(), m1.clone(), 2));
    let want = vec![(m1.clone(), m1.as_bytes().to_vec()), (m2.clone(), m2.as_bytes().to_vec())];
    assert_eq!(listed(reply_to(&out, 10)), (PROTO.into(), want));
    assert_eq!(described(&mut c, 200).0, "CompletingRebalance");
    assert_eq!(code(&c.handle(11, heartbeat(G + 1, &m2), 300)[0].frame), NONE);
    // A changed one starts a rebalance: a sync waiting is sent to rejoin.
    assert!(c.handle(12, sync(G + 1, &m2, &[]), 400).is_empty(), "waits for the leader's");
    let out = c.handle(13, join_with(&m2, None, &[(PROTO, b"more")]), 500);
    assert_eq!(code(reply_to(&out, 12)), REBALANCE_IN_PROGRESS);
    assert!(out.iter().all(|r| r.to != 13), "the join waits for m1's: {out:?}");
    assert_eq!(code(&c.handle(14, heartbeat(G + 1, &m1), 600)[0].frame), REBALANCE_IN_PROGRESS);
    assert_eq!(joined(reply_to(&c.handle(15, join(&m1), 700), 13)), (NONE, G + 2, m1.clone(), m2.clone(), 0));
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_when_the_rebalance_timeout_ends() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    assert!(c.handle(7, join(&m1), 1000).is_empty());
    // m2 keeps heartbeating but never rejoins: it holds the join up
    // until the rebalance timeout (10 s), as a barrier on Kafka does.
    for t in (1500..11_000).step_by(1000) {
        assert_eq!(code(&c.handle(8, heartbeat(G, &m2), t)[0].frame), REBALANCE_IN_PROGRESS);
    }
    assert_eq!(c.next_deadline(), Some(11_000));
    assert!(c.tick(10_999).is_empty());
    let out = c.tick(11_000);
    assert_eq!(joined(reply_to(&out, 7)), (0, 3, m1.clone(), m1.clone(), 1), "m1 alone in generation 3");
    assert_eq!(code(&c.handle(9, heartbeat(G + 1, &m2), 11_001)[0].frame), UNKNOWN_MEMBER_ID);
}

#[test]
fn a_session_ends_at_exactly_its_last_heartbeat_plus_the_timeout() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    c.handle(7, heartbeat(G, &m1), 2000);
    c.handle(8, heartbeat(G, &m2), 2500);
    assert_eq!(c.next_deadline(), Some(5000), "m1's session: 2000 + 3000");
    assert!(c.tick(4999).is_empty());
    c.tick(5000);
    assert_eq!(code(&c.handle(9, heartbeat(G, &m1), 5001)[0].frame), UNKNOWN_MEMBER_ID);
    assert_eq!(code(&c.handle(10, heartbeat(G, &m2), 5001)[0].frame), REBALANCE_IN_PROGRESS);
    let out = c.handle(11, join(&m2), 5002);
    assert_eq!(joined(reply_to(&out, 11)), (0, 3, m2.clone(), m2.clone(), 1), "m2 leads at once");
}

#[test]
fn a_leave_starts_a_rebalance_that_ends_with_the_others_rejoining() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    assert_eq!(code(&c.handle(7, leave(&m1), 100)[0].frame), NONE);
    assert_eq!(code(&c.handle(8, heartbeat(G, &m2), 200)[0].frame), REBALANCE_IN_PROGRESS);
    let out = c.handle(9, join(&m2), 210);
    assert_eq!(joined(reply_to(&out, 9)).0, NONE);
    assert_eq!(code(&c.handle(10, leave(&m1), 220)[0].frame), UNKNOWN_MEMBER_ID);
    // The last member leaving empties the group.
    c.handle(11, leave(&m2), 230);
    assert_eq!(code(&c.handle(12, heartbeat(G + 1, &m2), 240)[0].frame), UNKNOWN_MEMBER_ID);
}

/// A LeaveGroup v3 answer: (group error, [(member, instance id, error)]).
fn left(frame: &[u8]) -> (i16, Vec<(String, Option<String>, i16)>) {
    let mut r = Reader { buf: frame, at: 8 };
    let code = r.i16().unwrap();
    let members = (0..r.i32().unwrap()).map(|_| (r.string().unwrap(), r.string_in(false).unwrap(), r.i16().unwrap()));
    let members = members.collect();
    assert!(r.rest().is_empty(), "nothing after the members");
    (code, members)
}

#[test]
fn leave_group_v3_answers_each_member_listed() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    let leave3 =
        |members: &[&str]| req(3, Body::Leave { members: members.iter().map(|m| (m.to_string(), None)).collect() });
    // One member leaving, as kafkajs and kafka-python do: the others
    // hear of the rebalance at their next heartbeat.
    let out = c.handle(7, leave3(&[&m1]), 100);
    assert_eq!(left(&out[0].frame), (NONE, vec![(m1.clone(), None, NONE)]));
    assert_eq!(code(&c.handle(8, heartbeat(G, &m2), 200)[0].frame), REBALANCE_IN_PROGRESS);
    assert_eq!(joined(reply_to(&c.handle(9, join(&m2), 210), 9)).0, NONE);
    // An unknown member among known ones: its own error, the group's is
    // NONE, and the known one still leaves (the group is then empty).
    let out = c.handle(10, leave3(&["stranger", &m2]), 300);
    let want = vec![("stranger".into(), None, UNKNOWN_MEMBER_ID), (m2.clone(), None, NONE)];
    assert_eq!(left(&out[0].frame), (NONE, want));
    assert_eq!(described(&mut c, 300).0, "Empty");
    // The instance id is echoed; no static member has this one.
    let static_leave = req(3, Body::Leave { members: vec![("".into(), Some("i-1".into()))] });
    let out = c.handle(11, static_leave, 400);
    assert_eq!(left(&out[0].frame), (NONE, vec![("".into(), Some("i-1".into()), UNKNOWN_MEMBER_ID)]));
    // Before v3 the one member's error is the answer's.
    assert_eq!(c.handle(12, leave(&m1), 500)[0].frame[8..], UNKNOWN_MEMBER_ID.to_be_bytes());
}

#[test]
fn leaving_a_group_never_heard_of_creates_none() {
    let mut c = Coordinator::new(0);
    let out = c.handle(1, req(3, Body::Leave { members: vec![("m".into(), None)] }), 0);
    assert_eq!(left(&out[0].frame), (NONE, vec![("m".into(), None, UNKNOWN_MEMBER_ID)]));
    assert_eq!(c.handle(2, leave("m"), 0)[0].frame[8..], UNKNOWN_MEMBER_ID.to_be_bytes());
    assert!(c.groups.is_empty());
}

#[test]
fn a_group_that_starts_empty_waits_the_initial_delay_whoever_joined() {
    let mut c = Coordinator::new(3000);
    let m1 = joined(&c.handle(1, join(""), 0)[0].frame).3;
    assert!(c.handle(2, join(&m1), 10).is_empty());
    assert_eq!(c.next_deadline(), Some(3010));
    assert!(c.tick(3009).is_empty());
    assert_eq!(joined(reply_to(&c.tick(3010), 2)).1, 1);
}

#[test]
fn syncs_in_another_generation_or_during_a_join_are_refused() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    assert_eq!(code(&c.handle(7, sync(G - 1, &m2, &[]), 10)[0].frame), ILLEGAL_GENERATION);
    assert_eq!(reply_to(&c.handle(8, sync(G, &m2, &[]), 10), 8)[10..], [0, 0, 0, 2, b'p', b'1'], "stable: its own");
    c.handle(9, join(&m1), 20);
    assert_eq!(code(&c.handle(10, sync(G, &m2, &[]), 30)[0].frame), REBALANCE_IN_PROGRESS);
}

fn commit(generation: i32, member: &str, offset: i64) -> Request {
    let topics = vec![("t".into(), vec![(0, Committed { offset, leader_epoch: -1, metadata: Some("m".into()) })])];
    req(7, Body::Commit(OffsetCommit { generation, member: member.into(), instance: None, topics }))
}

/// The error of a one-partition OffsetCommit v7 answer.
fn committed(frame: &[u8]) -> i16 {
    let mut r = Reader { buf: frame, at: 8 };
    assert_eq!((r.i32(), r.string(), r.i32(), r.i32()), (Some(1), Some("t".into()), Some(1), Some(0)));
    r.i16().unwrap()
}

/// The offset an OffsetFetch v5 answer gives for t/0.
fn fetched(c: &mut Coordinator, to: ReplyTo, now: Millis) -> i64 {
    let out = c.handle(to, req(5, Body::Fetch { topics: Some(vec![("t".into(), vec![0])]) }), now);
    let mut r = Reader { buf: &out[0].frame, at: 8 };
    assert_eq!((r.i32(), r.string(), r.i32(), r.i32()), (Some(1), Some("t".into()), Some(1), Some(0)));
    r.i64().unwrap()
}

#[test]
fn a_commit_is_kept_only_from_a_member_of_the_current_generation() {
    let mut c = Coordinator::new(0);
    assert_eq!(fetched(&mut c, 1, 0), -1, "nothing committed");
    assert!(c.groups.is_empty(), "looking creates no group");
    assert_eq!(committed(&c.handle(2, commit(1, "m", 5), 0)[0].frame), ILLEGAL_GENERATION, "an unknown group");
    let (m1, m2) = stable_pair(&mut c);
    assert_eq!(committed(&c.handle(3, commit(G, &m1, 10), 0)[0].frame), NONE);
    assert_eq!(fetched(&mut c, 4, 0), 10);
    assert_eq!(committed(&c.handle(5, commit(G - 1, &m2, 11), 0)[0].frame), ILLEGAL_GENERATION);
    assert_eq!(committed(&c.handle(6, commit(G, "stranger", 12), 0)[0].frame), UNKNOWN_MEMBER_ID);
    assert_eq!(committed(&c.handle(7, commit(-1, "", 13), 0)[0].frame), UNKNOWN_MEMBER_ID, "the group is managed");
    assert_eq!(fetched(&mut c, 8, 0), 10, "none of those was kept");
    // While the join is answered but not yet synced: rebalancing.
    c.handle(9, join(&m1), 100);
    let out = c.handle(10, join(&m2), 100);
    assert_eq!(joined(reply_to(&out, 10)).1, G + 1);
    assert_eq!(committed(&c.handle(11, commit(G + 1, &m2, 14), 100)[0].frame), REBALANCE_IN_PROGRESS);
    // A commit counts as a heartbeat: m2 outlives its last heartbeat.
    c.handle(12, sync(G + 1, &m1, &[]), 200);
    c.handle(13, sync(G + 1, &m2, &[]), 200);
    assert_eq!(committed(&c.handle(14, commit(G + 1, &m2, 15), 2900)[0].frame), NONE);
    c.handle(15, heartbeat(G + 1, &m1), 2900);
    assert!(c.tick(3200).is_empty(), "m2's session runs until 5900");
    assert_eq!(fetched(&mut c, 16, 3200), 15);
    // Outside group management, once the group is empty.
    c.handle(17, leave(&m1), 3300);
    c.handle(18, leave(&m2), 3300);
    assert_eq!(committed(&c.handle(19, commit(-1, "", 16), 3400)[0].frame), NONE);
    assert_eq!(fetched(&mut c, 20, 3400), 16);
}

/// (state, protocol, members' assignments) of group g in a DescribeGroups v4 answer.
fn described(c: &mut Coordinator, now: Millis) -> (String, String, Vec<Vec<u8>>) {
    let out = c.handle(99, req(4, Body::Describe { groups: vec!["g".into()] }), now);
    let mut r = Reader { buf: &out[0].frame, at: 8 };
    assert_eq!((r.i32(), r.i16(), r.string()), (Some(1), Some(NONE), Some("g".into())));
    let (state, _, protocol) = (r.string().unwrap(), r.string(), r.string().unwrap());
    let assignments = (0..r.i32().unwrap())
        .map(|_| {
            let (_, _, client, host, _) = (r.string(), r.string_in(false), r.string(), r.string(), r.bytes());
            assert_eq!((client.as_deref(), host.as_deref()), (Some("c"), Some("/h")));
            r.bytes().unwrap()
        })
        .collect();
    (state, protocol, assignments)
}

#[test]
fn describes_a_group_as_kafka_does_with_assignments_only_while_stable() {
    let mut c = Coordinator::new(0);
    assert_eq!(described(&mut c, 0), ("Dead".into(), "".into(), vec![]), "never heard of");
    let (m1, _) = stable_pair(&mut c);
    assert_eq!(described(&mut c, 0), ("Stable".into(), PROTO.into(), vec![b"p0".to_vec(), b"p1".to_vec()]));
    c.handle(7, join(&m1), 100);
    assert_eq!(described(&mut c, 100), ("PreparingRebalance".into(), "".into(), vec![vec![], vec![]]));
}

#[test]
fn a_group_loaded_on_a_new_coordinator_keeps_its_members_with_fresh_sessions() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    c.handle(7, heartbeat(G, &m1), 1000);
    assert!(c.unload().is_empty(), "nobody was waiting");
    // Unloaded for longer than a session: loading starts every session
    // afresh, as Kafka's coordinator does when it loads a group.
    assert!(c.load(9000).is_empty());
    assert_eq!(c.next_deadline(), Some(12_000), "sessions from the load: 9000 + 3000");
    assert_eq!(code(&c.handle(8, heartbeat(G, &m1), 9001)[0].frame), NONE, "same generation, no rebalance");
    assert_eq!(code(&c.handle(9, heartbeat(G, &m2), 9001)[0].frame), NONE);
}

#[test]
fn an_unload_answers_waiting_joins_not_coordinator_and_the_load_restarts_their_rebalance() {
    let mut c = Coordinator::new(0);
    let (m1, m2) = stable_pair(&mut c);
    assert!(c.handle(7, join(&m1), 1000).is_empty(), "waits for m2");
    let pending = joined(&c.handle(8, join(""), 1000)[0].frame).3;
    let out = c.unload();
    assert_eq!(joined(reply_to(&out, 7)).0, NOT_COORDINATOR, "m1 looks the coordinator up again");
    assert!(c.load(2000).is_empty());
    // The rebalance starts again: both must rejoin, and an id handed out
    // before the load is not known to the new coordinator.
    assert_eq!(code(&c.handle(9, heartbeat(G, &m2), 2001)[0].frame), REBALANCE_IN_PROGRESS);
    assert_eq!(joined(&c.handle(10, join(&pending), 2001)[0].frame).0, UNKNOWN_MEMBER_ID);
    assert!(c.handle(11, join(&m1), 2002).is_empty());
    let out = c.handle(12, join(&m2), 2003);
    assert_eq!(joined(reply_to(&out, 11)).1, G + 1, "a new generation once both rejoined");
}

/// A stable group in generation 2 of static member "a" (the leader, with
/// p0; its member id returned first) and dynamic m2 (p1).
fn static_pair(c: &mut Coordinator) -> (String, String) {
    let (error, generation, leader, a, listed) = joined(&c.handle(1, join_as("", Some("a")), 0)[0].frame);
    assert_eq!((error, generation, leader.as_str(), listed), (NONE, 1, a.as_str(), 1), "no MEMBER_ID_REQUIRED");
    assert!(a.starts_with("a-"), "named after its instance id, as Kafka does: {a}");
    c.handle(2, sync_as(1, (&a, Some("a")), &[(&a, b"p0")]), 0);
    let m2 = joined(&c.handle(3, join(""), 0)[0].frame).3;
    assert!(c.handle(4, join(&m2), 0).is_empty(), "the join waits for a");
    let out = c.handle(5, join_as(&a, Some("a")), 0);
    assert_eq!(joined(reply_to(&out, 5)), (0, 2, a.clone(), a.clone(), 2));
    c.handle(6, sync(2, &m2, &[]), 0);
    let out = c.handle(7, sync_as(2, (&a, Some("a")), &[(&a, b"p0"), (&m2, b"p1")]), 0);
    assert_eq!(reply_to(&out, 6)[10..], [0, 0, 0, 2, b'p', b'1']);
    (a, m2)
}

#[test]
fn a_restarted_static_member_takes_its_place_with_its_assignment_and_no_rebalance() {
    let mut c = Coordinator::new(0);
    let (a, m2) = static_pair(&mut c);
    // Restarted: no member id, the same instance id, while the group is
    // stable. Answered at once, in the same generation, with the leader as
    // it was (its own old id: it syncs as a follower) and no members.
    let out = c.handle(10, join_as("", Some("a")), 1000);
    let (error, generation, leader, new, listed) = joined(reply_to(&out, 10));
    assert_eq!((error, generation, leader.as_str(), listed), (NONE, G, a.as_str(), 0));
    assert!(new != a && new.starts_with("a-"), "a new member id: {new}");
    assert_eq!(out.len(), 1, "nobody else is answered");
    assert_eq!(reply_to(&c.handle(11, sync_as(G, (&new, Some("a")), &[]), 1010), 11)[10..], [0, 0, 0, 2, b'p', b'0']);
    assert_eq!(code(&c.handle(12, heartbeat(G, &m2), 1100)[0].frame), NONE, "no rebalance for the others");
    assert_eq!(described(&mut c, 1100), ("Stable".into(), PROTO.into(), vec![b"p0".to_vec(), b"p1".to_vec()]));
    // It leads under its new id: its join starts the next generation.
    assert!(c.handle(13, join_as(&new, Some("a")), 1200).is_empty(), "the leader's join: a rebalance");
    let out = c.handle(14, join(&m2), 1200);
    assert_eq!(joined(reply_to(&out, 13)), (0, G + 1, new.clone(), new.clone(), 2));
}

#[test]
fn the_old_incarnation_of_a_static_member_is_fenced_everywhere() {
    let mut c = Coordinator::new(0);
    let (a, _) = static_pair(&mut c);
    let new = joined(&c.handle(10, join_as("", Some("a")), 1000)[0].frame).3;
    let old = (a.as_str(), Some("a"));
    assert_eq!(code(&c.handle(11, heartbeat_as(G, &a, Some("a")), 1100)[0].frame), FENCED_INSTANCE_ID);
    assert_eq!(code(&c.handle(12, sync_as(G, old, &[]), 1100)[0].frame), FENCED_INSTANCE_ID);
    assert_eq!(joined(&c.handle(13, join_as(&a, Some("a")), 1100)[0].frame).0, FENCED_INSTANCE_ID);
    let mut commit = commit(G, &a, 5);
    if let Body::Commit(c) = &mut commit.body {
        c.instance = Some("a".into());
    }
    assert_eq!(committed(&c.handle(14, commit, 1100)[0].frame), FENCED_INSTANCE_ID);
    let leaving = req(3, Body::Leave { members: vec![(a.clone(), Some("a".into()))] });
    assert_eq!(
        left(&c.handle(15, leaving, 1100)[0].frame),
        (NONE, vec![(a.clone(), Some("a".into()), FENCED_INSTANCE_ID)])
    );
    // None of that touched the new incarnation, nor the group.
    assert_eq!(code(&c.handle(16, heartbeat_as(G, &new, Some("a")), 1200)[0].frame), NONE);
    assert_eq!(described(&mut c, 1200).0, "Stable");
}

#[test]
fn a_restart_during_a_rebalance_fences_the_old_join_and_joins_in_its_place() {
    let mut c = Coordinator::new(0);
    let (a, m2) = static_pair(&mut c);
    assert!(c.handle(10, join_as(&a, Some("a")), 1000).is_empty(), "waits for m2");
    let out = c.handle(11, join_as("", Some("a")), 1100);
    assert_eq!(joined(reply_to(&out, 10)).0, FENCED_INSTANCE_ID, "the old one's waiting join");
    assert!(out.iter().all(|r| r.to != 11), "the new one waits in the rebalance");
    let out = c.handle(12, join(&m2), 1200);
    let new = joined(reply_to(&out, 11)).3;
    assert_eq!(joined(reply_to(&out, 11)), (0, G + 1, new.clone(), new.clone(), 2), "it leads, under its new id");
}

#[test]
fn a_static_member_that_stops_without_leaving_holds_its_place_until_its_session_ends() {
    let mut c = Coordinator::new(0);
    let (a, m2) = static_pair(&mut c);
    // a stops (no LeaveGroup, as a static member closing sends none);
    // m2 heartbeats on. Nothing happens until a's session ends.
    for t in (500..3000).step_by(500) {
        assert_eq!(code(&c.handle(t, heartbeat(G, &m2), t)[0].frame), NONE);
    }
    assert!(c.tick(2999).is_empty());
    c.tick(3000);
    assert_eq!(code(&c.handle(20, heartbeat(G, &m2), 3001)[0].frame), REBALANCE_IN_PROGRESS);
    assert_eq!(joined(reply_to(&c.handle(21, join(&m2), 3002), 21)), (0, G + 1, m2.clone(), m2.clone(), 1));
    // Its instance id is free again: a restart now is a new member.
    assert_eq!(code(&c.handle(22, heartbeat_as(G, &a, Some("a")), 3003)[0].frame), UNKNOWN_MEMBER_ID);
}

#[test]
fn a_static_member_that_misses_a_rebalance_is_dropped_when_its_session_ends() {
    let mut c = Coordinator::new(0);
    let (a, m2) = static_pair(&mut c);
    // m2's rebalance timeout (1 s) is shorter than a's session (3 s); its
    // metadata changed, so its join (a follower's) starts a rebalance.
    let mut rejoin = join(&m2);
    if let Body::Join(j) = &mut rejoin.body {
        j.rebalance = 1000;
        j.protocols = vec![(PROTO.into(), b"changed".to_vec())];
    }
    c.handle(10, heartbeat_as(G, &a, Some("a")), 500);
    assert!(c.handle(11, rejoin, 600).is_empty());
    // a never rejoins: its session (500 + 3000) ends before the
    // rebalance timeout (its own 10 s, the longest), and drops it.
    assert_eq!(c.next_deadline(), Some(3500));
    let out = c.tick(3500);
    assert_eq!(joined(reply_to(&out, 11)), (0, G + 1, m2.clone(), m2.clone(), 1));
}

#[test]
fn a_static_member_that_has_not_rejoined_when_the_join_times_out_is_kept() {
    let mut c = Coordinator::new(0);
    // A static member whose session (3 s) outlasts the rebalance timeout
    // (1 s) of every member: m2's and its own.
    let short = |member: &str, instance: Option<&str>| {
        let mut r = join_as(member, instance);
        if let Body::Join(j) = &mut r.body {
            j.rebalance = 1000;
        }
        r
    };
    let a = joined(&c.handle(1, short("", Some("a")), 0)[0].frame).3;
    c.handle(2, sync_as(1, (&a, Some("a")), &[(&a, b"p0")]), 0);
    let m2 = joined(&c.handle(3, short("", None), 100)[0].frame).3;
    assert!(c.handle(4, short(&m2, None), 100).is_empty(), "waits for a");
    assert_eq!(c.next_deadline(), Some(1100), "the rebalance timeout, before a's session (3000)");
    let out = c.tick(1100);
    // m2 leads generation 2 and is told of a, which stays a member.
    assert_eq!(joined(reply_to(&out, 4)), (0, 2, m2.clone(), m2.clone(), 2));
    assert_eq!(code(&c.handle(5, heartbeat_as(2, &a, Some("a")), 1200)[0].frame), NONE, "still a member");
}

#[test]
fn leave_group_v3_removes_a_static_member_named_by_its_instance_id() {
    let mut c = Coordinator::new(0);
    let (a, m2) = static_pair(&mut c);
    let by_instance = req(3, Body::Leave { members: vec![("".into(), Some("a".into()))] });
    assert_eq!(left(&c.handle(10, by_instance, 100)[0].frame), (NONE, vec![("".into(), Some("a".into()), NONE)]));
    assert_eq!(code(&c.handle(11, heartbeat(G, &m2), 200)[0].frame), REBALANCE_IN_PROGRESS);
    assert_eq!(joined(reply_to(&c.handle(12, join(&m2), 210), 12)), (0, G + 1, m2.clone(), m2.clone(), 1));
    // Its own LeaveGroup (v1, as librdkafka sends on unsubscribe) too.
    c.handle(13, sync(G + 1, &m2, &[(&m2, b"p0")]), 220);
    assert!(c.handle(14, join_as("", Some("b")), 300).is_empty(), "a new static member: a rebalance");
    let b = joined(reply_to(&c.handle(15, join(&m2), 300), 14)).3;
    assert_eq!(c.handle(16, leave(&b), 400)[0].frame[8..], NONE.to_be_bytes());
    assert_eq!(code(&c.handle(17, heartbeat_as(G + 2, &b, Some("b")), 500)[0].frame), UNKNOWN_MEMBER_ID);
    assert_eq!(code(&c.handle(18, heartbeat_as(G + 2, &a, Some("a")), 500)[0].frame), UNKNOWN_MEMBER_ID);
}

#[test]
fn a_leave_pause_holds_the_joins_its_length_then_completes_with_those_that_joined() {
    let mut c = Coordinator::new(0).pausing_after_leaves(4000);
    let (m1, m2) = stable_pair(&mut c);
    c.handle(11, leave(&m1), 400);
    // m2 rejoins at once, alone in the group: held until the pause ends
    // (without it, answered at once, as above).
    assert!(c.handle(13, join(&m2), 600).is_empty(), "held");
    assert_eq!(c.next_deadline(), Some(4400));
    assert!(c.tick(4399).is_empty(), "held to the pause's end");
    let out = c.tick(4400);
    assert_eq!(joined(reply_to(&out, 13)), (NONE, G + 1, m2.clone(), m2.clone(), 1));
}
