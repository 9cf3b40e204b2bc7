//! tansu 0.6 keeps a group's leader when that leader leaves while the group
//! is forming: every later join is answered naming the departed leader,
//! and no member is ever assigned a partition (src/kafka/nudge.rs). Found
//! by the roles soak on tansu (roles running nowhere for 418 s). Run
//! against tansu itself, since the bug is tansu's: a raw client of the
//! Kafka protocol leaves the group as its leader while a second member's
//! first join has it forming, as two members of any client can.

use std::time::Duration;

use crate::raw::{bytes, i16_at, i32_at, read_string, string, Raw};

use crate::util::{skip, tempdir::Dir, wait_until, Member};

/// A member whose join tansu never ends nudges the coordinator once the
/// join has lasted the rebalance timeout and a session (9 s here), and
/// leads. Without the nudge it waits for good (tried for 45 s).
#[test]
fn a_member_whose_join_tansu_never_ends_nudges_the_coordinator_and_leads() {
    if neli_proof::brokers::find("tansu").is_none() {
        skip("tansu 0.6.0 is not installed (.ci/run shows how)");
        return;
    }
    let dir = Dir::new("tansu-ghost");
    let broker = neli_proof::brokers::Broker::tansu("127.0.0.1", "127.0.0.1", &dir.path().join("tansu.log"))
        .expect("tansu starts");
    let ghost = make_a_ghost_leader(&broker.address, "ghost");

    let argv: Vec<String> = ["-b", &broker.address, "-g", "ghost", "--session-timeout", "3s", "--", "sleep", "100000"]
        .map(String::from)
        .into();
    let mut member = Member::spawn("a", &[], &argv, &dir.path().join("a.log"), None);
    wait_until(Duration::from_secs(60), "the member leads", || member.log().contains("child started"));
    let log = member.log();
    assert!(log.contains("the group's rebalance has not ended: nudging its coordinator"), "{ghost}: {log}");
    member.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(member.wait_exit(Duration::from_secs(20)).code(), Some(143), "{}", member.log());
}

/// Makes tansu's ghost in `group`: member A forms the group and leads it,
/// C's first join sets it forming, and A leaves. Returns A's member id.
fn make_a_ghost_leader(address: &str, group: &str) -> String {
    let mut a = Raw::connect(address, "A");
    let mut c = Raw::connect(address, "C");
    let mut id = String::new();
    let (generation, leader) = loop {
        let (error, generation, leader, me) = a.join(group, &id);
        id = me;
        match error {
            0 => break (generation, leader),
            // MEMBER_ID_REQUIRED (KIP-394): join again with the id given.
            79 => continue,
            other => panic!("A's JoinGroup failed with error {other}"),
        }
    };
    assert_eq!(leader, id, "A leads the group it formed");
    assert_eq!(a.sync(group, generation, &id), 0, "A's SyncGroup");
    let (error, _, _, _) = c.join(group, "");
    assert_eq!(error, 79, "C's first join asks for a member id, and the group is forming");
    assert_eq!(a.leave(group, &id), 0, "A's LeaveGroup");
    id
}

/// The group requests of a member, by hand: enough to join, sync and leave.
trait GroupRequests {
    fn join(&mut self, group: &str, member: &str) -> (i16, i32, String, String);
    fn sync(&mut self, group: &str, generation: i32, member: &str) -> i16;
    fn leave(&mut self, group: &str, member: &str) -> i16;
}

impl GroupRequests for Raw {
    /// JoinGroup v5, as librdkafka's cooperative-sticky consumer sends it:
    /// (error, generation, leader, our member id).
    fn join(&mut self, group: &str, member: &str) -> (i16, i32, String, String) {
        let mut body = string(group);
        body.extend(6000i32.to_be_bytes());
        body.extend(12000i32.to_be_bytes());
        body.extend(string(member));
        body.extend((-1i16).to_be_bytes());
        body.extend(string("consumer"));
        body.extend(1i32.to_be_bytes());
        body.extend(string("cooperative-sticky"));
        body.extend(bytes(b"raw"));
        let r = self.ask(11, 5, false, &body);
        let (error, generation) = (i16_at(&r, 4), i32_at(&r, 6)); // after the throttle
        let mut at = 10;
        let _protocol = read_string(&r, &mut at);
        let leader = read_string(&r, &mut at);
        let me = read_string(&r, &mut at);
        (error, generation, leader, me)
    }

    /// SyncGroup v3 of the group's leader, assigning itself some bytes
    /// (tansu holds a sync whose assignment is empty).
    fn sync(&mut self, group: &str, generation: i32, member: &str) -> i16 {
        let mut body = string(group);
        body.extend(generation.to_be_bytes());
        body.extend(string(member));
        body.extend((-1i16).to_be_bytes());
        body.extend(1i32.to_be_bytes());
        body.extend(string(member));
        body.extend(bytes(b"raw"));
        i16_at(&self.ask(14, 3, false, &body), 4)
    }

    /// LeaveGroup v1.
    fn leave(&mut self, group: &str, member: &str) -> i16 {
        let mut body = string(group);
        body.extend(string(member));
        i16_at(&self.ask(13, 1, false, &body), 4)
    }
}
