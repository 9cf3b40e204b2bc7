//! What follows the command's exit: restart policies, shutdown, signals,
//! --acquire-timeout, tokens across leaderships, the standings reported and
//! why the command ended.

use super::*;

#[test]
fn restart_policies_decide_what_a_child_exit_means() {
    let cases = [
        (Restart::Never, ChildStatus::Exited(0), Some(0)),
        (Restart::Never, ChildStatus::Exited(3), Some(3)),
        (Restart::Never, ChildStatus::Signaled(11), Some(139)),
        (Restart::OnFailure, ChildStatus::Exited(0), Some(0)),
        (Restart::OnFailure, ChildStatus::Exited(1), None),
        (Restart::Always, ChildStatus::Exited(0), None),
        (Restart::Always, ChildStatus::Exited(1), None),
    ];
    for (restart, status, exit) in cases {
        let mut l = leading(restart);
        let out = l.step(exited(status), ms(1100));
        match exit {
            Some(code) => assert_eq!(out, vec![gone(1), Exit(code)], "{restart:?} {status:?}"),
            None => {
                assert_eq!(out, vec![], "{restart:?} {status:?}");
                assert_eq!(l.next_deadline(), Some(ms(1200)));
                // Restarts keep the token: it is the same leadership.
                l.step(hb(8, 1150), ms(1160));
                assert_eq!(l.step(Input::Tick, ms(1200)), vec![spawn(7, ms(2150))]);
            }
        }
    }
}

#[test]
fn a_pending_restart_waits_for_a_fresh_heartbeat_and_is_dropped_on_revoke() {
    let mut l = leading(Restart::Always);
    l.step(exited(ChildStatus::Exited(1)), ms(1100));
    l.step(revoked(false), ms(1150));
    assert_eq!(l.step(Input::Tick, ms(1300)), vec![]);
    assert_eq!(l.next_deadline(), None);
}

#[test]
fn shutdown_stops_the_child_and_exits_with_its_status() {
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    // Heartbeats go on while the child stops: we still own the partition.
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1210)), vec![led(), gone(1), Exit(143)]);
    assert_eq!(l.step(Input::Tick, ms(5000)), vec![]);
    assert_eq!(l.step(revoked(false), ms(5000)), vec![ReleaseRevoke(P)]);
}

/// Found by hand: with the defaults (--grace 3s, --heartbeat-deadline
/// 3s) the shim's lease ran out while a shutdown waited for the child,
/// which was SIGKILLed before its grace was up.
#[test]
fn regression_the_lease_is_renewed_while_a_shutdown_waits_out_the_grace() {
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(hb(8, 1100), ms(1110)), vec![Lease(P, ms(2100))]);
}

#[test]
fn a_second_shutdown_kills_at_once() {
    let mut l = leading(Restart::Never);
    l.step(Input::Shutdown, ms(1100));
    assert_eq!(l.step(Input::Shutdown, ms(1150)), vec![KillGroup(P)]);
}

#[test]
fn shutdown_of_a_standby_exits_zero_and_fatal_uses_its_code() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(Input::Shutdown, ms(10)), vec![Exit(0)]);
    let mut l = leading(Restart::Never);
    l.step(Input::Fatal(exit::Kind::Denied.code()), ms(1100));
    assert_eq!(l.step(exited(ChildStatus::Exited(0)), ms(1100)), vec![gone(1), Exit(exit::Kind::Denied.code())]);
}

#[test]
fn signals_are_forwarded_only_to_a_live_child() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(Input::Forward(SIGHUP), ms(1)), vec![]);
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(Input::Forward(SIGHUP), ms(1020)), vec![SignalGroup(P, SIGHUP)]);
}

#[test]
fn acquire_timeout_exits_only_if_never_leader() {
    let mut s = settings(Restart::Never);
    s.acquire_timeout = Some(Duration::from_secs(5));
    let mut l = Leader::new(s.clone(), started(0));
    assert_eq!(l.next_deadline(), Some(ms(5000)));
    assert_eq!(l.step(Input::Tick, ms(5000)), vec![Exit(exit::Kind::AcquireTimeout.code())]);

    let mut l = Leader::new(s, started(0));
    l.step(assigned(), ms(1000));
    l.step(hb(1, 1000), ms(1010));
    assert!(!l.step(Input::Tick, ms(5000)).iter().any(|a| matches!(a, Exit(_))));
}

#[test]
fn tokens_increase_across_leaderships() {
    let mut l = leading(Restart::Never);
    l.step(revoked(false), ms(1100));
    l.step(exited(ChildStatus::Signaled(15)), ms(1200));
    l.step(assigned(), ms(3000));
    assert_eq!(l.step(hb(40, 3000), ms(3010)), vec![spawn(40, ms(4000)), says(2, Some(40), Some(40))]);
}

#[test]
fn every_standing_taken_within_one_step_is_reported() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(other("x", Some(3), 700), ms(1000)); // holds until 1300
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.standings_taken(P), vec![Standing::Candidate]);
    // The timer fires late, with a revoke: led (and started the command),
    // then revoked, in one step. Both count.
    let actions = l.step(revoked(false), ms(1350));
    assert_eq!(actions[0], spawn(7, ms(2000)));
    assert_eq!(l.standings_taken(P), vec![Standing::Leader { token: 7 }, Standing::Standby]);
    assert_eq!(l.standings_taken(P), vec![], "each change is reported once");
}

#[test]
fn a_restart_due_before_the_fence_does_not_start_at_the_fence_instant() {
    let mut l = leading(Restart::Always);
    // Restart due at 1950 (100 ms after the exit); the timer fires late,
    // exactly when the newest heartbeat (sent at 1000) runs out.
    l.step(exited(ChildStatus::Exited(1)), ms(1850));
    let actions = l.step(Input::Tick, ms(2000));
    assert!(
        !actions.iter().any(|a| matches!(a, Spawn { partition: P, .. })),
        "started with a stale heartbeat: {actions:?}"
    );
    assert_eq!(l.standing(P), Standing::Fenced);
}

#[test]
fn the_core_says_why_its_leader_stopped_leading_and_why_its_command_ended() {
    // A fence: the command is killed, and its exit is the fence's.
    let mut l = leading(Restart::Always);
    l.step(Input::Tick, ms(2000));
    assert_eq!(l.standing(P), Standing::Fenced);
    // Resumed before the killed command's exit is reported: still the fence's.
    l.step(hb(9, 2001), ms(2005));
    assert_eq!(l.standing(P), Standing::Leader { token: 9 });
    l.step(exited(ChildStatus::Signaled(9)), ms(2100));
    assert_eq!(l.why_child_ended(P), Reason::Fenced);
    // The shim's lease killed it a moment before our own fence was due to be
    // checked: its exit, heard first, is the fence's all the same.
    let mut l = leading(Restart::Always);
    l.step(exited(ChildStatus::Signaled(9)), ms(2001));
    assert_eq!((l.standing(P), l.why_child_ended(P)), (Standing::Fenced, Reason::Fenced));
    // A revoke, a lost partition, a yield, an exit: each says which.
    for (input, standby) in
        [(revoked(false), Reason::Revoked), (revoked(true), Reason::Lost), (Input::Yield { to: None }, Reason::Yielded)]
    {
        let mut l = leading(Restart::Always);
        l.step(input, ms(1100));
        l.step(exited(ChildStatus::Exited(143)), ms(1200));
        assert_eq!(
            (l.standing(P), l.why_standby(P), l.why_child_ended(P)),
            (Standing::Standby, standby, Reason::Stopped)
        );
    }
    let mut l = leading(Restart::Always);
    l.step(Input::Shutdown, ms(1100));
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    l.step(exited(ChildStatus::Exited(143)), ms(1200));
    assert_eq!(
        (l.standing(P), l.why_standby(P), l.why_child_ended(P)),
        (Standing::Standby, Reason::Exiting, Reason::Stopped)
    );
    // A command that exits by itself, before its lease runs out.
    let mut l = leading(Restart::Always);
    l.step(exited(ChildStatus::Exited(3)), ms(1999));
    assert_eq!((l.standing(P), l.why_child_ended(P)), (Standing::Leader { token: 7 }, Reason::Exited));
}
