//! The member's controls: pause and resume (with and without --stop), and the
//! health check.

use super::*;

/// `said` (a heartbeat or disclaimer) carrying `pause`, its writer's
/// command `running` or not.
fn carrying(said: Action, pause: &Pause, running: bool) -> Action {
    let note = Some(PauseNote { request: pause.clone(), running });
    match said {
        SendHeartbeat(P, record) => SendHeartbeat(P, Record { pause: note, ..record }),
        Disclaim(P, record) => Disclaim(P, Record { pause: note, ..record }),
        other => other,
    }
}

/// Member x's record at `offset`, released, carrying `pause`.
fn carried(offset: i64, pause: Pause) -> Input {
    Input::OtherHeartbeat(P, Other { pause: Some(pause), ..record_of("x", offset, Some(1), Some(0), Stance::Released) })
}

#[test]
fn a_paused_group_leads_without_starting_and_a_resume_starts_at_once() {
    let pause = asked(3, true, false);
    let mut l = Leader::new(settings(Restart::Never), started(0));
    // Read in the backlog before our first record: a standby keeps it.
    assert_eq!(l.step(Input::Pause(P, pause.clone()), ms(900)), vec![]);
    assert_eq!(l.step(assigned(), ms(1000)), vec![carrying(says(1, None, None), &pause, false)]);
    // We lead (and keep partition 0), but the command does not start.
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![carrying(led(), &pause, false)]);
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    assert_eq!(l.paused(P), Some(&pause));
    assert_eq!(l.next_deadline(), Some(ms(1210)), "the next heartbeat, no start");
    l.step(hb(8, 1210), ms(1220));
    // Resumed: the command starts at once, and our record says so.
    let resume = asked(9, false, false);
    assert_eq!(
        l.step(Input::Pause(P, resume.clone()), ms(1300)),
        vec![spawn(7, ms(2210)), carrying(led(), &resume, true)]
    );
    assert_eq!(l.paused(P), None);
    // An older request, read again or carried late, changes nothing.
    assert_eq!(l.step(Input::Pause(P, pause), ms(1310)), vec![]);
    assert!(l.child_alive(P));
}

#[test]
fn pause_stop_stops_the_command_and_the_leader_keeps_partition_0_until_resumed() {
    let mut l = leading(Restart::Never);
    let pause = asked(8, true, true);
    assert_eq!(
        l.step(Input::Pause(P, pause.clone()), ms(1100)),
        vec![SignalGroup(P, SIGTERM), carrying(led(), &pause, true)]
    );
    // Its exit is not the run's end (no exit under --restart never): it is
    // said at once, and we lead on without it.
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1150)), vec![carrying(led(), &pause, false)]);
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    l.step(hb(9, 1150), ms(1160));
    // Grace and SIGKILL as for any stop: none is due now.
    assert_eq!(l.step(Input::Tick, ms(1400)), vec![carrying(led(), &pause, false)]);
    let resume = asked(10, false, false);
    assert_eq!(
        l.step(Input::Pause(P, resume.clone()), ms(1500)),
        vec![spawn(7, ms(2150)), carrying(led(), &resume, true)]
    );
}

#[test]
fn a_pause_without_stop_lets_the_command_run_but_not_restart() {
    let mut l = leading(Restart::Always);
    let pause = asked(8, true, false);
    assert_eq!(l.step(Input::Pause(P, pause.clone()), ms(1100)), vec![carrying(led(), &pause, true)]);
    l.step(hb(9, 1100), ms(1110));
    // Still running: nothing is stopped. Once it ends, --restart waits.
    assert_eq!(l.step(exited(ChildStatus::Exited(0)), ms(1200)), vec![carrying(led(), &pause, false)]);
    assert_eq!(l.step(Input::Tick, ms(1400)), vec![carrying(led(), &pause, false)]);
    assert!(!l.child_alive(P));
    // A stop asked later has nothing to stop.
    let stop = asked(10, true, true);
    assert_eq!(l.step(Input::Pause(P, stop.clone()), ms(1450)), vec![carrying(led(), &stop, false)]);
}

#[test]
fn a_new_owner_learns_the_pause_from_records_that_carried_it_before_its_own_first_one() {
    // The request itself is long gone from the backlog; the last leader's
    // records carried it.
    let pause = asked(3, true, false);
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(carried(5, pause.clone()), ms(1005));
    // A record cannot name a request at or after its own offset (a forged
    // resume that would outrank every real one to come): ignored.
    l.step(carried(6, asked(6, false, false)), ms(1006));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![carrying(led(), &pause, false)]);
    assert_eq!(l.paused(P), Some(&pause));
    // An older resume carried by a late record does not undo it.
    l.step(carried(8, asked(2, false, false)), ms(1020));
    assert_eq!(l.paused(P), Some(&pause));
    assert_eq!(l.step(Input::Tick, ms(1210)), vec![carrying(led(), &pause, false)]);
    // Our disclaimer carries it on to whoever comes next.
    assert_eq!(l.step(revoked(false), ms(1300)), vec![carrying(gone(1), &pause, false), ReleaseRevoke(P)]);
}

#[test]
fn a_drained_leader_hands_over_and_starts_nothing_until_undrained_and_healthy() {
    // Drained: it stops its command, then stands aside (why: drained), and
    // says so at once once out of the group.
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(Input::Drain(true), ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    let aside = vec![gone(1), StandAside, SendCandidacy { leaving: false }];
    assert_eq!(l.step(exited(ChildStatus::Exited(143)), ms(1150)), aside);
    assert_eq!((l.standing(P), l.why_standby(P)), (Standing::Standby, Reason::Drained));
    assert_eq!(l.step(revoked(false), ms(1160)), vec![ReleaseRevoke(P)]);
    assert_eq!(l.step(assigned(), ms(2000)), vec![StandAside], "drained: no heartbeat, no tenure");
    l.step(revoked(false), ms(2010));
    // Drained and unhealthy: undrained, it says so at once (its candidacy
    // now unhealthy only), and starts nothing until its check passes.
    l.step(Input::Health(false), ms(2050));
    assert_eq!(l.step(Input::Drain(false), ms(2100)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.step(assigned(), ms(2200)), vec![StandAside], "still unhealthy");
    l.step(revoked(false), ms(2210));
    l.step(Input::Health(true), ms(2300));
    l.step(assigned(), ms(3000));
    assert!(l.step(hb(20, 3000), ms(3010)).iter().any(|a| matches!(a, Spawn { partition: P, token: 20, .. })));
    // A drained standby writes its candidacy at once, and an undrained one
    // only once back in the group (Standby).
    let mut l = Leader::new(settings(Restart::Always), started(0));
    assert_eq!(l.step(Input::Drain(true), ms(100)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.step(Input::Drain(false), ms(200)), vec![]);
    assert_eq!(l.step(Input::Standby, ms(300)), vec![SendCandidacy { leaving: false }]);
}

#[test]
fn an_unhealthy_leader_hands_over_and_an_unhealthy_member_never_starts_the_command() {
    // The leader's check fails: it stops its command, then stands aside
    // (why: unhealthy), and nothing restarts it.
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(Input::Health(false), ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    // Out of the group, it says at once that it is unhealthy.
    let aside = vec![gone(1), StandAside, SendCandidacy { leaving: false }];
    assert_eq!(l.step(exited(ChildStatus::Exited(143)), ms(1150)), aside);
    assert_eq!((l.standing(P), l.why_standby(P)), (Standing::Standby, Reason::Unhealthy));
    assert_eq!(l.step(revoked(false), ms(1160)), vec![ReleaseRevoke(P)]);
    // Given partition 0 while unhealthy (the assignment raced the shell's
    // leave): it stands aside at once, having written nothing.
    assert_eq!(l.step(assigned(), ms(2000)), vec![StandAside]);
    assert_eq!(l.standing(P), Standing::Standby);
    l.step(revoked(false), ms(2010));
    // Healthy again, it leads as any member does.
    assert_eq!(l.step(Input::Health(true), ms(2100)), vec![]);
    l.step(assigned(), ms(3000));
    assert!(l.step(hb(20, 3000), ms(3010)).iter().any(|a| matches!(a, Spawn { partition: P, token: 20, .. })));

    // With a health check, a member is unhealthy until its first check
    // passes: a candidate that confirms leads, but starts nothing.
    let mut l = Leader::new(Settings { health_checked: true, ..settings(Restart::Never) }, started(0));
    assert_eq!(l.step(Input::Tick, ms(10)), vec![SendCandidacy { leaving: false }], "unhealthy, out of the group");
    assert_eq!(l.step(assigned(), ms(1000)), vec![StandAside], "unhealthy: no heartbeat, no tenure");
    let mut l = Leader::new(Settings { health_checked: true, ..settings(Restart::Never) }, started(0));
    l.step(Input::Health(true), ms(500));
    l.step(assigned(), ms(1000));
    // Unhealthy while it confirms: it stands aside before it leads.
    assert_eq!(l.step(Input::Health(false), ms(1005)), vec![gone(1), StandAside, SendCandidacy { leaving: false }]);
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "a record read back after it stood aside");
    // A health change while exiting changes nothing: the exit goes on.
    let mut l = leading(Restart::Never);
    l.step(Input::Shutdown, ms(1100));
    assert_eq!(l.step(Input::Health(false), ms(1110)), vec![]);
    assert_eq!(l.step(exited(ChildStatus::Exited(0)), ms(1200)), vec![gone(1), Exit(0)]);
}
