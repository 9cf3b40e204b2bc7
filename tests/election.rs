//! Several members of one group: exactly one leader, handover, failover and
//! fencing tokens, checked by the independent overlap detector.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{stays_false, wait_until, Group};

#[test]
fn one_leader_among_three() {
    let g = Group::new("one-of-three");
    let members = g.sleepers(&["a", "b", "c"]);
    let t = g.broker.timing;
    wait_until(t.takeover(), "a leader runs its child", || g.lock_held());
    assert!(stays_false(t.session * 2, || g.starts().len() > 1), "a second child started: {:?}", g.starts());
    g.assert_no_overlap();
    drop(members);
}

#[test]
fn graceful_handover_and_increasing_tokens() {
    let g = Group::new("handover");
    let mut members = g.sleepers(&["a", "b", "c"]);
    let t = g.broker.timing;
    for round in 1..=2 {
        wait_until(t.takeover(), "a leader runs its child", || g.starts().len() == round && g.lock_held());
        let i = g.leader_among(&members);
        members[i].signal(Signal::SIGTERM);
        assert_eq!(members[i].wait_exit(t.takeover()).code(), Some(143), "{}", members[i].log());
        members.remove(i);
    }
    wait_until(t.takeover(), "the last member leads", || g.starts().len() == 3);
    let tokens: Vec<i64> = g.starts().iter().map(|s| s.1).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens must increase: {tokens:?}");
    g.assert_no_overlap();
}

#[test]
fn kill_9_of_the_leader_fails_over_within_the_session_timeout() {
    let g = Group::new("failover");
    let mut members = g.sleepers(&["a", "b", "c"]);
    let t = g.broker.timing;
    wait_until(t.takeover(), "a leader runs its child", || g.lock_held());
    let i = g.leader_among(&members);
    members[i].signal(Signal::SIGKILL);
    members[i].wait_exit(t.takeover());
    // The shim kills the child at once: no orphan holds the lock.
    wait_until(Duration::from_secs(30), "the dead leader's child is gone", || !g.lock_held());
    wait_until(t.takeover(), "a standby takes over", || g.starts().len() == 2 && g.lock_held());
    assert_ne!(g.starts()[1].0, members[i].name);
    g.assert_no_overlap();
}

#[test]
fn a_standby_gives_up_at_acquire_timeout() {
    let g = Group::new("acquire-timeout");
    let leader = g.member("a", &[], &["sleep", "1000"]);
    let t = g.broker.timing;
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let mut standby = g.member("b", &["--acquire-timeout", "2s"], &["sleep", "1000"]);
    assert_eq!(standby.wait_exit(t.takeover()).code(), Some(75), "{}", standby.log());
    assert!(standby.log().contains("--acquire-timeout"), "{}", standby.log());
    assert_eq!(g.starts().len(), 1);
    drop(leader);
}

/// A graceful handover does not wait out the old leader's claim: its
/// disclaimer lands before partition 0 moves (the shell holds the release
/// of the revoke, and the leave, until the disclaimer is flushed). With a
/// 20 s heartbeat deadline, a newcomer that read the old leader's last claim
/// without the disclaimer after it would wait about 20 s; under Kafka's
/// group timing the handover itself takes a coordinator heartbeat.
#[test]
fn a_graceful_handover_does_not_wait_out_the_old_leaders_claim() {
    let broker = crate::util::Broker::dev_with("127.0.0.1", &["--group-coordinator", "kafka"]);
    let g = Group::on(broker, "disclaimer");
    let long = ["--session-timeout", "30s", "--heartbeat-deadline", "20s", "-X", "heartbeat.interval.ms=500"];
    let mut a = g.member("a", &long, &["sleep", "1000"]);
    wait_until(Duration::from_secs(60), "a leads", || g.starts().len() == 1);
    let b = g.member("b", &long, &["sleep", "1000"]);
    wait_until(Duration::from_secs(60), "b is a standby", || b.joined_as_standby());
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(60)).code(), Some(143), "{}", a.log());
    let gone = std::time::Instant::now();
    wait_until(Duration::from_secs(60), "b leads", || g.starts().len() == 2);
    assert!(
        gone.elapsed() < Duration::from_secs(10),
        "b waited {:?} for a's claim to run out (20 s deadline): {}",
        gone.elapsed(),
        b.log()
    );
    g.assert_no_overlap();
}
