//! Tenures: from standby to candidate, leader and fenced, and back;
//! heartbeats, leases, the resume window, giving the partition back, revokes
//! and a yield.

use super::*;

#[test]
fn standby_does_nothing_and_has_no_deadline() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(Input::Tick, ms(50_000)), vec![]);
    assert_eq!(l.next_deadline(), None);
    assert_eq!(l.standing(P), Standing::Standby);
}

#[test]
fn candidate_heartbeats_on_its_interval_until_it_reads_one_back() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    assert_eq!(l.next_deadline(), Some(ms(1200)));
    assert_eq!(l.step(Input::Tick, ms(1100)), vec![]);
    assert_eq!(l.step(Input::Tick, ms(1200)), vec![says(1, None, None)]);
    // A candidate never fences: it has no child. (Without a heartbeat
    // for the resume window it gives the partition back: tested below.)
    // A deadline without reading one back ends its term: others may
    // have counted it out.
    assert_eq!(l.step(Input::Tick, ms(3000)), vec![says(2, None, None)]);
    assert_eq!(l.standing(P), Standing::Candidate);
}

#[test]
fn records_of_others_or_from_before_the_tenure_never_count() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(other("x", None, 0), ms(1002)), vec![]);
    assert_eq!(l.step(hb(4, 999), ms(1003)), vec![], "sent before we were assigned");
    assert_eq!(l.standing(P), Standing::Candidate);
}

#[test]
fn a_heartbeat_read_back_after_the_deadline_does_not_elect() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(5, 1000), ms(2000)), vec![says(2, None, None)]);
    assert_eq!(l.standing(P), Standing::Candidate);
}

#[test]
fn fresh_heartbeats_extend_the_lease_and_the_fence_deadline() {
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(hb(8, 1200), ms(1210)), vec![led(), Lease(P, ms(2200))]);
    assert_eq!(l.next_deadline(), Some(ms(1410)));
    // An older record arriving late changes nothing.
    assert_eq!(l.step(hb(6, 1100), ms(1300)), vec![]);
}

#[test]
fn stale_heartbeats_fence_with_sigkill_and_fresh_ones_resume_with_a_new_token() {
    let mut l = leading(Restart::Never);
    // Freshness is measured from the send instant, so deadline = 2000.
    assert!(!l.step(Input::Tick, ms(1999)).contains(&KillGroup(P)));
    assert_eq!(l.step(Input::Tick, ms(2000)), vec![KillGroup(P)]);
    assert_eq!(l.standing(P), Standing::Fenced);
    assert_eq!(l.step(exited(ChildStatus::Signaled(9)), ms(2005)), vec![]);
    // A backlog: old own heartbeats read now do not resume. A deadline
    // has passed since the last one read back: a new term.
    assert_eq!(l.step(hb(9, 1500), ms(2600)), vec![says(2, None, None)]);
    assert_eq!(l.standing(P), Standing::Fenced);
    assert_eq!(l.step(hb(12, 2600), ms(2610)), vec![spawn(12, ms(3600)), says(2, Some(12), Some(12))]);
    assert_eq!(l.standing(P), Standing::Leader { token: 12 });
}

#[test]
fn a_fenced_leader_whose_child_still_dies_goes_on_claiming_its_token() {
    let mut l = leading(Restart::Never);
    assert_eq!(l.fresh(P), Some(ms(1000)), "the newest own heartbeat read back (for the heartbeat-age metric)");
    assert!(l.step(Input::Tick, ms(2000)).contains(&KillGroup(P)));
    assert_eq!(l.standing(P), Standing::Fenced);
    // Until the child is gone, others must still wait: our record
    // claims partition 0 with the dying child's token, not a contention.
    let claims = l.step(Input::Tick, ms(2200));
    assert!(
        claims.iter().any(|a| matches!(a, SendHeartbeat(P, Record { stance: Stance::Leading { token: 7 }, .. }))),
        "{claims:?}"
    );
    l.step(exited(ChildStatus::Signaled(9)), ms(2300));
    let after = l.step(Input::Tick, ms(2400));
    assert!(
        after.iter().all(|a| !matches!(a, SendHeartbeat(P, Record { stance: Stance::Leading { .. }, .. }))),
        "{after:?}"
    );
}

#[test]
fn a_record_of_one_writer_never_drops_the_live_claim_of_another() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(other("x", Some(3), 0), ms(1000)); // x holds us back until 2000
    l.step(other("y", Some(4), 900), ms(1001)); // y only until 1101
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "x's claim still holds");
    assert_eq!(l.step(hb(8, 1900), ms(1910)), vec![says(1, Some(7), None)]);
    assert!(!l.step(Input::Tick, ms(1999)).iter().any(|a| matches!(a, Spawn { partition: P, .. })));
    assert!(l.step(Input::Tick, ms(2000)).iter().any(|a| matches!(a, Spawn { partition: P, token: 8, .. })));
}

#[test]
fn a_child_dying_after_its_lease_ran_out_was_fenced_not_exiting() {
    // neli-run was frozen (SIGSTOP) while the shim enforced the lease;
    // on waking, the expired deadline is handled before the exit.
    let mut l = leading(Restart::Never);
    let out = l.step(exited(ChildStatus::Signaled(9)), ms(2500));
    assert_eq!(out, vec![says(2, None, Some(7)), KillGroup(P)]);
    assert_eq!(l.standing(P), Standing::Fenced);
}

#[test]
fn heartbeats_returning_after_the_resume_window_rejoin_instead_of_resuming() {
    // Found by neli-soak: the broker paused for a whole session timeout;
    // on its return our backlog heartbeat was fresh, but the group had
    // expired our session and handed partition 0 to another member.
    let mut l = leading(Restart::Never);
    l.step(Input::Tick, ms(2000)); // fenced: last fresh heartbeat sent at 1000
    l.step(exited(ChildStatus::Signaled(9)), ms(2001));
    assert_eq!(
        l.step(Input::Tick, ms(3300)),
        vec![says(3, None, None), gone(3), Rejoin],
        "a 2.3s gap > the 2.2s window"
    );
    assert_eq!(l.step(hb(30, 3300), ms(3310)), vec![]);
    assert_eq!(l.standing(P), Standing::Standby);
    assert_eq!(l.step(revoked(false), ms(3320)), vec![ReleaseRevoke(P)]);
    // Within the window, the same return resumes.
    let mut l = leading(Restart::Never);
    l.step(Input::Tick, ms(2000));
    l.step(exited(ChildStatus::Signaled(9)), ms(2001));
    assert_eq!(l.step(Input::Tick, ms(3100)), vec![says(3, None, None)]);
    assert_eq!(l.step(hb(30, 3100), ms(3110)), vec![spawn(30, ms(4100)), says(3, Some(30), Some(30))]);
}

#[test]
fn a_fenced_owner_gives_partition_0_back_after_the_resume_window_without_any_heartbeat() {
    // Found by neli-soak: after a broker restart the leader's fetches hung
    // while its coordinator heartbeats went through; it stayed fenced,
    // holding partition 0, and the group had no leader for a minute.
    let mut l = leading(Restart::Never);
    l.step(Input::Tick, ms(2000)); // fenced: last fresh heartbeat sent at 1000
    l.step(exited(ChildStatus::Signaled(9)), ms(2001));
    // Not the promotion moment that passed at 1000 (that would spin).
    assert_eq!(l.next_deadline(), Some(ms(2200)), "the next heartbeat comes first");
    l.step(Input::Tick, ms(3000));
    assert_eq!(l.next_deadline(), Some(ms(3200)), "1000 + the 2.2s resume window");
    assert_eq!(l.step(Input::Tick, ms(3199)), vec![]);
    assert_eq!(l.step(Input::Tick, ms(3200)), vec![says(3, None, None), gone(3), Rejoin]);
    assert_eq!(l.standing(P), Standing::Standby);
    assert_eq!(l.next_deadline(), None);
    assert_eq!(l.step(revoked(false), ms(3300)), vec![ReleaseRevoke(P)]);
}

#[test]
fn a_candidate_that_never_reads_its_heartbeat_back_gives_partition_0_back() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(Input::Tick, ms(3100));
    assert_eq!(l.step(Input::Tick, ms(3200)), vec![gone(2), Rejoin], "its contending records withdrawn");
    assert_eq!(l.standing(P), Standing::Standby);
    // Assigned again later: a new tenure, a new window.
    assert_eq!(l.step(assigned(), ms(4000)), vec![says(3, None, None)]);
    assert_eq!(l.step(hb(40, 4000), ms(4010)), vec![spawn(40, ms(5000)), says(3, Some(40), Some(40))]);
}

#[test]
fn a_second_tenure_in_a_row_that_cannot_confirm_stands_aside_instead_of_rejoining() {
    // Found by tests/cluster.rs: a member cut off from partition 0's leader
    // but not from the coordinator was given partition 0 back by the
    // sticky assignor on every rejoin, and nobody led while the cut lasted.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(Input::Tick, ms(3100));
    assert_eq!(l.step(Input::Tick, ms(3200)), vec![gone(2), Rejoin], "the first time: the partition's fault, maybe");
    l.step(revoked(false), ms(3300));
    l.step(assigned(), ms(4000));
    l.step(Input::Tick, ms(6100));
    assert_eq!(l.step(Input::Tick, ms(6200)), vec![gone(4), StandAside], "the second time: ours, likely");
    assert_eq!(l.standing(P), Standing::Standby);
    // Our own heartbeat read back in between: the next failure rejoins.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(Input::Tick, ms(3200));
    l.step(assigned(), ms(4000));
    l.step(hb(40, 4000), ms(4010));
    l.step(Input::Tick, ms(5500)); // fenced: the heartbeat at 4000 ran out
    l.step(exited(ChildStatus::Signaled(9)), ms(5510));
    l.step(Input::Tick, ms(6100));
    assert_eq!(l.step(Input::Tick, ms(6200)), vec![gone(4), Rejoin]);
    // Never while the command may live: that leave holds no barrier.
    let mut l = leading(Restart::Never);
    l.step(Input::Tick, ms(2000)); // fenced; the killed child not reaped yet
    l.seat_mut(P).gave_back = true;
    assert_eq!(l.step(Input::Tick, ms(3200)), vec![says(3, None, Some(7)), Rejoin]);
}

#[test]
fn a_revoke_while_the_child_still_stops_waits_for_it_even_without_a_tenure() {
    let mut l = leading(Restart::Never);
    l.step(Input::Tick, ms(2000)); // fenced, child being killed
                                   // Rejoin: tenure dropped, child not yet reaped. No disclaimer while
                                   // the command may live: our last claim runs out by itself.
    assert_eq!(l.step(hb(30, 3300), ms(3310)), vec![says(3, None, Some(7)), Rejoin]);
    assert_eq!(l.step(revoked(false), ms(3320)), vec![]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(9)), ms(3330)), vec![gone(3), ReleaseRevoke(P)]);
}

#[test]
fn yield_stops_the_child_then_stands_aside_without_restart_or_exit() {
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(Input::Yield { to: None }, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1150)), vec![gone(1), StandAside]);
    assert_eq!(l.standing(P), Standing::Standby);
    assert_eq!(l.step(revoked(false), ms(1160)), vec![ReleaseRevoke(P)]);
    assert_eq!(l.next_deadline(), None, "no restart pending");
    // A standby has nothing to yield.
    assert_eq!(l.step(Input::Yield { to: None }, ms(1200)), vec![]);
    // A fenced leader has no child: it stands aside at once.
    let mut l = leading(Restart::Never);
    l.step(Input::Tick, ms(2000));
    l.step(exited(ChildStatus::Signaled(9)), ms(2001));
    assert_eq!(l.step(Input::Yield { to: None }, ms(2002)), vec![gone(2), StandAside]);
}
