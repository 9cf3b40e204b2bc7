//! The wake's topic name never fails a member, with ACLs or without. A wake
//! subscribes to `<group>.neli.wake-<incarnation>-<n>`, a name that does not
//! exist; on a Kafka with ACLs a principal may not describe it, and its
//! Metadata answer is TOPIC_AUTHORIZATION_FAILED, which neli-run takes for
//! fatal (exit 77) about its own topic. Here the dev broker denies every
//! such name, as a PREFIXED ACL would (`--deny-topic 'PREFIX*'`), and a
//! graceful handover still goes through the wake with no member failing.

use nix::sys::signal::Signal;

use crate::util::{wait_until, Broker, Group, Member};

const STANDBY: &str = crate::util::STANDBY_JOINED;
const WOKEN: &str = "a member left the group: rejoining now";
/// What a member logs (at debug level) for an error about its wake's topic
/// (here, that the broker refused it).
const FILTERED: &str = "about the topic a wake subscribed to: not ours";

/// The lines of `log` that say something failed: any at ERROR level, and
/// any at WARN level about permissions.
fn failures(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            let lower = l.to_lowercase();
            l.contains("ERROR") || (l.contains("WARN") && (lower.contains("authoriz") || lower.contains("permission")))
        })
        .collect()
}

#[test]
fn a_wake_denied_its_topic_by_an_acl_fails_no_member() {
    // The group's name is ours to choose (the broker is too), so that the
    // broker can deny its wakes' topics from the start.
    let name = format!("t-wake-acl-{}", std::process::id());
    let denied = format!("{name}.neli.wake-*");
    let mut g = Group::on(Broker::dev_with("127.0.0.1", &["--deny-topic", &denied]), "wake-acl");
    g.name = name;
    let topic = format!("{}.neli", g.name);
    assert!(!topic.starts_with(denied.trim_end_matches('*')), "{denied} must not deny the group's own topic");
    let t = g.broker.timing;
    // -v: the debug line that says a wake's error was set aside.
    let mut members: Vec<Member> = ["a", "b", "c"].iter().map(|n| g.member(n, &["-v"], &["sleep", "1000"])).collect();
    wait_until(t.takeover(), "a leader runs its command", || g.lock_held());
    let i = g.leader_among(&members);
    let mut leader = members.remove(i);
    for standby in &members {
        wait_until(t.takeover(), &format!("{} stands by", standby.name), || standby.log().contains(STANDBY));
    }
    leader.signal(Signal::SIGTERM);
    assert_eq!(leader.wait_exit(t.takeover()).code(), Some(143), "{}", leader.log());
    wait_until(t.takeover(), "the next leader runs its command", || g.starts().len() == 2 && g.lock_held());
    for standby in &members {
        wait_until(t.takeover(), &format!("{} is woken", standby.name), || standby.log().contains(WOKEN));
    }
    // The wake's hold (a second) and its errors' window (4 s) are over: a
    // member that took the denied name for its own topic's has exited 77.
    wait_until(t.takeover(), "a denied wake topic is answered and set aside", || {
        members.iter().any(|m| m.log().lines().any(|l| l.contains(FILTERED) && l.contains("authorization failed")))
    });
    std::thread::sleep(std::time::Duration::from_secs(5));
    for standby in &mut members {
        assert!(!standby.exited(), "{} exited: {}", standby.name, standby.log());
        let log = standby.log();
        assert_eq!(failures(&log), Vec::<&str>::new(), "{}: {log}", standby.name);
    }
    assert_eq!(failures(&leader.log()), Vec::<&str>::new(), "{}", leader.log());
    assert_eq!(g.starts().len(), 2, "one takeover, no more");
    assert!(g.lock_held(), "the new leader's command runs on");
    drop(members);
    g.assert_no_overlap();
}
