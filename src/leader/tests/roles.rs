//! NELI's roles: a member with several seats, one per role. Each seat's
//! rules hold on its own (its token, its fence, its revoke); the member
//! exits as a whole, once every seat's command is gone.

use super::*;

/// The second role's partition.
const Q: Partition = 1;

/// A member of two roles that leads both: role 0 (P) with token 7, role 1
/// (Q) with token 20, both commands running.
fn leading_both() -> Leader {
    let mut l = Leader::new(Settings { roles: 2, ..settings(Restart::Always) }, started(0));
    assert_eq!(l.step(assigned(), ms(1000)), vec![says(1, None, None)]);
    let on_q = |stance| SendHeartbeat(Q, Record { stance, ..record(1, None) });
    assert_eq!(l.step(Input::Assigned { partition: Q }, ms(1000)), vec![on_q(Stance::Contending)]);
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![spawn(7, ms(2000)), led()]);
    let out = l.step(Input::OwnHeartbeat { partition: Q, offset: 20, sent: ms(1000), more: false }, ms(1010));
    let spawn_q = Spawn { partition: Q, token: 20, lease: ms(2000), attempt: None, begin: None };
    assert_eq!(out, vec![spawn_q, SendHeartbeat(Q, Record { start: Some(20), ..record(1, Some(20)) })]);
    assert_eq!((l.standing(P), l.standing(Q)), (Standing::Leader { token: 7 }, Standing::Leader { token: 20 }));
    l
}

/// Our record in term `term` on a seat's partition, leading with `token` or
/// contending.
fn record(term: u64, token: Option<i64>) -> Record {
    let stance = token.map_or(Stance::Contending, |token| Stance::Leading { token });
    Record { start: token, ..Record::saying(term, stance) }
}

/// Our disclaimer on `partition`, ending term 1.
fn gone_on(partition: Partition) -> Action {
    Disclaim(partition, Record { stance: Stance::Released, start: None, ..record(1, None) })
}

#[test]
fn each_role_leads_on_its_own_partition_with_its_own_token() {
    let l = leading_both();
    assert!(l.child_alive(P) && l.child_alive(Q));
}

#[test]
fn a_revoke_stops_only_the_roles_it_takes() {
    let mut l = leading_both();
    assert_eq!(l.step(Input::Revoked { partition: Q, lost: false }, ms(1100)), vec![SignalGroup(Q, SIGTERM)]);
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    assert_eq!(l.step(Input::ChildExited(Q, ChildStatus::Signaled(15)), ms(1190)), vec![gone_on(Q), ReleaseRevoke(Q)]);
    assert!(l.child_alive(P), "role 0's command runs on");
    // A lost role is killed at once, the other still untouched.
    let mut l = leading_both();
    assert_eq!(l.step(Input::Revoked { partition: P, lost: true }, ms(1100)), vec![KillGroup(P)]);
    assert!(l.child_alive(Q));
}

#[test]
fn a_fence_kills_only_its_roles_command() {
    let mut l = leading_both();
    // Role 1's heartbeats keep coming back; role 0's stop.
    let q_hb = |offset, sent| Input::OwnHeartbeat { partition: Q, offset, sent: ms(sent), more: false };
    let out = l.step(q_hb(21, 1800), ms(1810));
    assert!(out.contains(&Lease(Q, ms(2800))), "{out:?}");
    let out = l.step(Input::Tick, ms(2000));
    assert!(out.contains(&KillGroup(P)), "{out:?}");
    assert!(!out.contains(&KillGroup(Q)), "{out:?}");
    assert_eq!((l.standing(P), l.standing(Q)), (Standing::Fenced, Standing::Leader { token: 20 }));
}

#[test]
fn the_member_exits_once_every_roles_command_is_gone_and_a_stop_exits_0() {
    let mut l = leading_both();
    // Each command is asked once; nothing exits while one still runs.
    assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(P, SIGTERM), SignalGroup(Q, SIGTERM)]);
    let out = l.step(Input::ChildExited(P, ChildStatus::Signaled(15)), ms(1150));
    assert_eq!(out, vec![gone(1)]);
    assert_eq!(l.step(Input::ChildExited(Q, ChildStatus::Exited(3)), ms(1160)), vec![gone_on(Q), Exit(0)]);
    assert_eq!(l.next_deadline(), None);
}

#[test]
fn a_second_shutdown_kills_every_command_still_running() {
    let mut l = leading_both();
    l.step(Input::Shutdown, ms(1100));
    assert_eq!(l.step(Input::ChildExited(P, ChildStatus::Signaled(15)), ms(1150)), vec![gone(1)]);
    assert_eq!(l.step(Input::Shutdown, ms(1160)), vec![KillGroup(Q)]);
    assert_eq!(l.step(Input::ChildExited(Q, ChildStatus::Signaled(9)), ms(1170)), vec![gone_on(Q), Exit(0)]);
}

#[test]
fn a_stop_with_one_role_idle_asks_the_running_one_once() {
    let mut l = leading_both();
    l.step(Input::Revoked { partition: P, lost: false }, ms(1100));
    l.step(Input::ChildExited(P, ChildStatus::Signaled(15)), ms(1110));
    // Role 0 is idle and exits at once: that must not count as a second
    // ask for role 1, whose command gets its stop signal and its grace.
    assert_eq!(l.step(Input::Shutdown, ms(1120)), vec![SignalGroup(Q, SIGTERM)]);
    assert_eq!(l.next_deadline(), Some(ms(1200)), "role 1's heartbeat (on the beat); its grace ends at 1620");
    let out = l.step(Input::Tick, ms(1620));
    assert!(out.contains(&KillGroup(Q)), "the grace ran out: {out:?}");
}

#[test]
fn a_fatal_error_exits_with_its_code_once_every_command_is_gone() {
    let mut l = leading_both();
    assert_eq!(l.step(Input::Fatal(77), ms(1100)), vec![SignalGroup(P, SIGTERM), SignalGroup(Q, SIGTERM)]);
    l.step(Input::ChildExited(Q, ChildStatus::Exited(0)), ms(1110));
    let out = l.step(Input::ChildExited(P, ChildStatus::Exited(0)), ms(1120));
    assert_eq!(out.last(), Some(&Exit(77)));
}

#[test]
fn a_retired_role_does_not_lead_again_while_the_member_waits_for_another() {
    let mut l = leading_both();
    l.step(Input::Shutdown, ms(1100));
    l.step(Input::ChildExited(P, ChildStatus::Signaled(15)), ms(1150));
    assert_eq!(l.step(revoked(false), ms(1160)), vec![ReleaseRevoke(P)]);
    assert_eq!(l.step(assigned(), ms(1170)), vec![], "no tenure, no heartbeat for a role that is done");
    assert_eq!(l.standing(P), Standing::Standby);
}

#[test]
fn one_roles_exit_stops_the_others_first() {
    // What only a policy of one run can ask (config refuses it with
    // roles): a role whose run is over exits the member, and the member
    // stops every other role's command before it does.
    let mut l = leading_both();
    l.seat_mut(P).plan = seat::Plan::Exit(Some(5));
    let out = l.step(Input::ChildExited(P, ChildStatus::Exited(0)), ms(1100));
    assert_eq!(out, vec![gone(1), SignalGroup(Q, SIGTERM)]);
    let out = l.step(Input::ChildExited(Q, ChildStatus::Exited(0)), ms(1110));
    assert_eq!(out, vec![gone_on(Q), Exit(5)]);
}

/// `--overlap`: a graceful revoke is released at once while the command
/// stops (a lost one still waits for the kill), and a new owner starts
/// without waiting out the old owner's claim.
#[test]
fn with_overlap_a_revoke_does_not_wait_and_a_claim_does_not_hold_back() {
    let overlapping = || Leader::new(Settings { overlap: true, ..settings(Restart::Always) }, started(0));
    let mut l = overlapping();
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.step(revoked(false), ms(1100)), vec![SignalGroup(P, SIGTERM), ReleaseRevoke(P)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1200)), vec![], "released already, not restarted");
    let mut l = overlapping();
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.step(revoked(true), ms(1100)), vec![KillGroup(P)], "lost: it waits for the kill");
    // A stop leaves the group first: the revoke that follows is released
    // while the command stops, and the member exits once it is gone.
    let mut l = overlapping();
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![LeaveGroup, SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(revoked(false), ms(1150)), vec![ReleaseRevoke(P)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1200)), vec![gone(1), Exit(143)]);
    // Another member's fresh claim, read before our first record.
    let claim = Input::OtherHeartbeat(P, record_of("x", 3, Some(1), Some(3), Stance::Leading { token: 3 }));
    for (overlap, starts) in [(true, true), (false, false)] {
        let mut l = Leader::new(Settings { overlap, ..settings(Restart::Always) }, started(0));
        l.step(assigned(), ms(1000));
        l.step(claim.clone(), ms(1001));
        let out = l.step(hb(7, 1000), ms(1010));
        assert_eq!(out.contains(&spawn(7, ms(2000))), starts, "overlap {overlap}: {out:?}");
    }
}

/// What a seat logs names its role when there are several (a span), and
/// the single leader's lines stay as they were.
#[test]
fn a_seats_log_lines_name_its_role_when_there_are_several() {
    assert!(!settings(Restart::Always).names_roles());
    assert!(Settings { roles: 2, ..settings(Restart::Always) }.names_roles());
}

/// Our record on `partition` at `offset`, sent at `sent`, as its delivery
/// report tells it.
fn delivered(partition: Partition, offset: i64, sent: u64) -> Input {
    Input::Delivered { partition, offset, sent: ms(sent) }
}

#[test]
fn a_kept_role_stays_fresh_on_its_delivered_records_while_a_revoke_holds_the_reader() {
    let mut l = leading_both();
    // Role 1 is revoked at 1100: its command ignores SIGTERM for the whole
    // grace, and the barrier blocks the reader, so role 0 reads nothing back.
    assert_eq!(l.step(Input::Revoked { partition: Q, lost: false }, ms(1100)), vec![SignalGroup(Q, SIGTERM)]);
    let out = l.step(delivered(P, 8, 1500), ms(1510));
    assert!(out.contains(&Lease(P, ms(2500))), "{out:?}");
    // A record heard already, or an older one, says nothing new.
    for (offset, sent) in [(8, 1500), (7, 1400)] {
        let out = l.step(delivered(P, offset, sent), ms(1520));
        assert!(!out.iter().any(|a| matches!(a, Lease(P, _))), "{out:?}");
    }
    let out = l.step(Input::Tick, ms(2000));
    assert!(!out.contains(&KillGroup(P)), "fenced on records written: {out:?}");
    // Fresh up to a resume window (2.2 s) after the revoke began, not past.
    let out = l.step(delivered(P, 9, 2250), ms(2260));
    assert!(out.contains(&Lease(P, ms(3250))), "{out:?}");
    // A record written later leases no further than the bound.
    let out = l.step(delivered(P, 10, 2400), ms(2410));
    assert!(out.contains(&Lease(P, ms(3300))), "past the session's bound: {out:?}");
    let out = l.step(delivered(P, 11, 2500), ms(2510));
    assert!(!out.iter().any(|a| matches!(a, Lease(P, _))), "past the session's bound: {out:?}");
    let out = l.step(Input::Tick, ms(3300));
    assert!(out.contains(&KillGroup(P)), "{out:?}");
    assert_eq!(l.standing(P), Standing::Fenced);
    // A delivery never resumes a fenced role: only a record read back does.
    let out = l.step(delivered(P, 12, 3200), ms(3210));
    assert!(!out.iter().any(|a| matches!(a, Lease(P, _) | Spawn { .. })), "{out:?}");
    assert_eq!(l.standing(P), Standing::Fenced);
}

#[test]
fn a_delivery_says_nothing_without_a_graceful_revoke_or_long_after_one() {
    let no_lease = |out: &[Action]| !out.iter().any(|a| matches!(a, Lease(P, _)));
    // No revoke yet: the coordinator's word is no nearer than our records
    // read back.
    let mut l = leading_both();
    assert!(no_lease(&l.step(delivered(P, 8, 1500), ms(1510))));
    assert!(l.step(Input::Tick, ms(2000)).contains(&KillGroup(P)));
    // A lost revoke: the session is gone.
    let mut l = leading_both();
    l.step(Input::Revoked { partition: Q, lost: true }, ms(1100));
    assert!(no_lease(&l.step(delivered(P, 8, 1500), ms(1510))));
    assert!(l.step(Input::Tick, ms(2000)).contains(&KillGroup(P)));
    // Once the revoke's barrier is released, the rebalance goes on (the
    // records kept are read back only after it): its word still holds, up
    // to a resume window after it.
    let mut l = leading_both();
    l.step(Input::Revoked { partition: Q, lost: false }, ms(1100));
    l.step(Input::ChildExited(Q, ChildStatus::Signaled(15)), ms(1200));
    assert!(l.step(delivered(P, 8, 1500), ms(1510)).contains(&Lease(P, ms(2500))));
    // Long after it, our records read back say more than a delivery can.
    l.step(hb(9, 2400), ms(2410));
    assert!(no_lease(&l.step(delivered(P, 10, 2600), ms(2610))));
    assert!(l.step(Input::Tick, ms(3400)).contains(&KillGroup(P)));
}

#[test]
fn a_pause_read_on_one_seats_partition_holds_that_seat_only() {
    let mut l = leading_both();
    // `cron pause JOB --stop`: written on the job's partition (Q).
    let stop = Pause { offset: 30, paused: true, stop: true, at_ms: wall(1100), by: Asker::default() };
    let out = l.step(Input::Pause(Q, stop.clone()), ms(1100));
    assert!(out.contains(&SignalGroup(Q, SIGTERM)) && !out.contains(&SignalGroup(P, SIGTERM)), "{out:?}");
    assert_eq!((l.paused(Q), l.paused(P)), (Some(&stop), None));
    // Q's records carry it, P's do not.
    let out = l.step(Input::ChildExited(Q, ChildStatus::Signaled(15)), ms(1150));
    let carried = |p: Partition| {
        out.iter()
            .any(|a| matches!(a, SendHeartbeat(q, r) if *q == p && r.pause.as_ref().is_some_and(|n| n.request == stop)))
    };
    assert!(carried(Q) && !carried(P), "{out:?}");
    assert!(l.child_alive(P) && !l.child_alive(Q));
}

/// The seats of a member of several heartbeat in the same step, whenever
/// each was assigned (on the boot clock's multiples of the interval): the
/// member's loop and librdkafka's threads wake once for them all. A
/// single leader's keep their own phase (`now + interval`).
#[test]
fn the_roles_heartbeats_fall_in_one_step() {
    let mut l = Leader::new(Settings { roles: 2, ..settings(Restart::Always) }, started(0));
    assert_eq!(l.step(assigned(), ms(1050)), vec![says(1, None, None)]);
    let on_q = |stance| SendHeartbeat(Q, Record { stance, ..record(1, None) });
    assert_eq!(l.step(Input::Assigned { partition: Q }, ms(1130)), vec![on_q(Stance::Contending)]);
    assert_eq!(l.next_deadline(), Some(ms(1200)));
    let beats = |out: Vec<Action>| -> Vec<Partition> {
        out.iter().filter_map(|a| if let SendHeartbeat(p, _) = a { Some(*p) } else { None }).collect()
    };
    assert_eq!(beats(l.step(Input::Tick, ms(1200))), [P, Q]);
    assert_eq!(l.next_deadline(), Some(ms(1400)));

    let mut one = Leader::new(settings(Restart::Always), started(0));
    assert_eq!(one.step(assigned(), ms(1050)), vec![says(1, None, None)]);
    assert_eq!(one.next_deadline(), Some(ms(1250)));
}
