//! The core's scenarios: each test tells one story of rebalances, records,
//! child exits and signals, and asserts the exact actions.

use super::fixtures::*;
use super::*;
use Action::*;

/// Member `writer`'s record as a version 1 writer put it: written `age`
/// ms ago, claiming `token` or nothing.
fn other(writer: &str, token: Option<i64>, age: u64) -> Input {
    let stance = token.map_or(Stance::Released, |token| Stance::Leading { token });
    Input::OtherHeartbeat(
        P,
        Other {
            writer: writer.into(),
            offset: 0,
            term: None,
            start: None,
            stance,
            age: Duration::from_millis(age),
            deadline: DEADLINE,
            attempt: None,
            pause: None,
            to: None,
        },
    )
}

/// Member `writer`'s record at `offset` in its term `term` (which it says
/// began at `start`), written `age` ms ago.
fn contender(writer: &str, offset: i64, term: u64, start: Option<i64>, stance: Stance, age: u64) -> Input {
    Input::OtherHeartbeat(
        P,
        Other {
            writer: writer.into(),
            offset,
            term: Some(term),
            start,
            stance,
            age: Duration::from_millis(age),
            deadline: DEADLINE,
            attempt: None,
            pause: None,
            to: None,
        },
    )
}

/// Our disclaimer, ending term `term`.
fn gone(term: u64) -> Action {
    Disclaim(
        P,
        Record { term, start: None, stance: Stance::Released, attempt: None, next: None, pause: None, to: None },
    )
}

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

fn claim(token: i64) -> Input {
    other("x", Some(token), 0)
}

#[test]
fn a_candidate_waits_until_other_claims_have_been_quiet_for_a_deadline() {
    // Found in CI on tansu: the broker assigned partition 0 to a second
    // member while the first still held it and went on heartbeating.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(claim(5), ms(1005));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "contested: no leadership");
    assert_eq!(l.standing(P), Standing::Candidate);
    assert_eq!(l.step(claim(5), ms(1200)), vec![says(1, Some(7), None)]);
    l.step(Input::Tick, ms(1400));
    assert_eq!(l.step(hb(9, 1400), ms(1900)), vec![says(1, Some(7), None)], "still within a deadline of the claim");
    // The claims stop (the other member fenced or left): a deadline after
    // the last one we lead, on the newest own heartbeat (offset 9).
    l.step(Input::Tick, ms(2100));
    assert_eq!(l.next_deadline(), Some(ms(2200)));
    assert_eq!(l.step(Input::Tick, ms(2200)), vec![spawn(9, ms(2400)), says(1, Some(7), Some(9))]);
}

#[test]
fn regression_a_claim_written_just_before_our_assignment_holds_us_back_until_it_runs_out() {
    // Found by neli-soak on tansu: the broker gave partition 0 to c2-31
    // 0.26 s after c1-59 had resumed and written a claim, c1-59's
    // heartbeats were stalled, and c2-31 (reading from the end) led while
    // c1-59's command still ran. Now the new owner reads the tail of the
    // partition: a claim written 300 ms ago by a member whose deadline is
    // 1000 ms holds us back until 700 ms from now, plus the margin.
    let mut s = settings(Restart::Never);
    s.claim_margin = Duration::from_millis(100);
    let mut l = Leader::new(s, started(0));
    l.step(assigned(), ms(1000));
    l.step(other("c1", Some(5), 300), ms(1001));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "c1's command may still run");
    l.step(Input::Tick, ms(1200));
    assert_eq!(l.step(hb(9, 1700), ms(1710)), vec![says(1, Some(7), None)]);
    assert_eq!(l.next_deadline(), Some(ms(1801)), "300 ms old at 1001, deadline 1000, margin 100");
    assert_eq!(l.step(Input::Tick, ms(1801)), vec![spawn(9, ms(2700)), says(1, Some(7), Some(9))]);
}

#[test]
fn regression_a_claim_read_before_our_tenure_still_holds_us_back() {
    // Found by neli-soak on tansu, after the fix above: a member whose
    // give-back was merged into a join kept reading partition 0 without
    // a tenure, read another member's fresh claim then, and, assigned
    // again a moment later, led while that member's command still ran.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(other("c1", Some(5), 0), ms(1000));
    l.step(assigned(), ms(1500));
    assert_eq!(l.step(hb(7, 1500), ms(1510)), vec![], "c1's claim runs until 2000");
    l.step(Input::Tick, ms(1700));
    assert_eq!(l.step(Input::Tick, ms(2000)), vec![spawn(7, ms(2500)), led()]);
}

#[test]
fn old_claims_and_withdrawn_claims_do_not_hold_us_back() {
    // A crashed leader's last claim, read long after: its command is gone.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(5000));
    l.step(other("dead", Some(5), 4000), ms(5001));
    assert_eq!(l.step(hb(7, 5000), ms(5010)), vec![spawn(7, ms(6000)), led()]);
    // A leader that stopped gracefully disclaimed after its claim.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(other("old", Some(5), 100), ms(1001));
    l.step(other("old", None, 50), ms(1002));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![spawn(7, ms(2000)), led()]);
    // Each writer counts on its own: another's disclaimer withdraws nothing.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(other("a", Some(5), 0), ms(1001));
    l.step(other("b", None, 0), ms(1002));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![]);
}

#[test]
fn a_leader_disclaims_once_before_giving_partition_0_up() {
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1150)), vec![gone(1), Exit(143)]);
    assert_eq!(l.step(revoked(false), ms(1160)), vec![ReleaseRevoke(P)], "said once");
    // A candidate withdraws its contention the same way.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(revoked(false), ms(1100)), vec![gone(1), ReleaseRevoke(P)]);
    // A member that never wrote a record has nothing to take back.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(revoked(false), ms(1100)), vec![ReleaseRevoke(P)]);
}

#[test]
fn a_leader_keeps_renewing_its_lease_while_an_older_claim_arrives() {
    // Found in CI: a cut-off old leader's buffered heartbeats arrive
    // after the heal; the new leader must not stop renewing its lease.
    let mut l = leading(Restart::Never);
    l.step(claim(3), ms(1020));
    assert_eq!(l.step(hb(8, 1200), ms(1210)), vec![led(), Lease(P, ms(2200))]);
}

#[test]
fn a_new_owner_leads_on_its_first_record_read_back_once_the_last_leader_disclaimed() {
    // The previous leader's claim, then its disclaimer, both read before
    // our first record: the log proves its command gone, so no wait.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(claim(3), ms(990));
    l.step(other("x", None, 0), ms(995));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![spawn(7, ms(2000)), led()]);
    // Without the disclaimer its claim holds us back until it runs out
    // (written at 990, the writer's deadline 1000 ms).
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(claim(3), ms(990));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![]);
    assert_eq!(l.standing(P), Standing::Candidate);
    for t in (1200..1990).step_by(200) {
        l.step(Input::Tick, ms(t));
        assert_eq!(l.step(hb(7 + t as i64 / 200, t), ms(t + 5)), vec![]);
    }
    assert_eq!(l.next_deadline(), Some(ms(1990)));
    assert_eq!(l.step(Input::Tick, ms(1990)), vec![spawn(16, ms(2800)), says(1, Some(7), Some(16))]);
}

#[test]
fn of_two_leaders_the_older_token_fences() {
    let mut l = leading(Restart::Never); // token 7
    assert_eq!(l.step(claim(3), ms(1020)), vec![], "an older claim: the other one must yield");
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    assert_eq!(l.step(claim(12), ms(1030)), vec![KillGroup(P)]);
    assert_eq!(l.standing(P), Standing::Fenced);
    l.step(exited(ChildStatus::Signaled(9)), ms(1040));
    assert_eq!(l.step(hb(13, 1100), ms(1110)), vec![], "no resume while the other claims");
}

#[test]
fn resuming_while_the_fenced_child_still_dies_spawns_once_it_is_gone() {
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(Input::Tick, ms(2000)), vec![says(2, None, Some(7)), KillGroup(P)]);
    assert_eq!(l.step(hb(12, 2000), ms(2020)), vec![says(2, Some(12), Some(12))], "no spawn while the old child lives");
    assert_eq!(l.step(exited(ChildStatus::Signaled(9)), ms(2030)), vec![spawn(12, ms(3000))]);
}

#[test]
fn graceful_revoke_holds_the_callback_until_the_child_is_gone() {
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(revoked(false), ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.standing(P), Standing::Standby);
    assert_eq!(l.next_deadline(), Some(ms(1600)));
    assert_eq!(l.step(Input::Tick, ms(1600)), vec![KillGroup(P)]);
    assert_eq!(
        l.step(exited(ChildStatus::Signaled(9)), ms(1601)),
        vec![gone(1), ReleaseRevoke(P)],
        "released, and no restart: we are no longer leader"
    );
    assert_eq!(l.next_deadline(), None);
}

#[test]
fn lost_partition_kills_without_grace() {
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(revoked(true), ms(1100)), vec![KillGroup(P)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(9)), ms(1101)), vec![gone(1), ReleaseRevoke(P)]);
}

#[test]
fn revoke_without_a_child_releases_at_once() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(revoked(false), ms(5)), vec![ReleaseRevoke(P)]);
    l.step(assigned(), ms(10));
    assert_eq!(l.step(revoked(false), ms(20)), vec![gone(1), ReleaseRevoke(P)]);
}

/// Two members, a and b, that own partition 0 at once, fed the same
/// partition: each reads its own records and the other's, in log order.
/// Returns the tokens each spawned with.
fn two_owners(a_first_on_the_log: bool) -> [Vec<i64>; 2] {
    let s = settings(Restart::Never);
    let mut m = [Leader::new(s.clone(), started(0)), Leader::new(s, started(0))];
    let mut spawned: [Vec<i64>; 2] = Default::default();
    let names = ["a", "b"];
    let mut step = |m: &mut [Leader; 2], i: usize, input: Input, t: u64| {
        for action in m[i].step(input, ms(t)) {
            if let Spawn { partition: P, token, .. } = action {
                spawned[i].push(token);
            }
        }
    };
    // a is assigned at 1000, b 70 ms later; whose first record lands
    // first on the partition is up to the broker.
    step(&mut m, 0, assigned(), 1000);
    step(&mut m, 1, assigned(), 1070);
    let sent = [1000, 1070];
    let order = if a_first_on_the_log { [0, 1] } else { [1, 0] };
    for (offset, writer) in [(10, order[0]), (11, order[1])] {
        for reader in order {
            let input = if reader == writer {
                hb(offset, sent[writer])
            } else {
                contender(names[writer], offset, 1, None, Stance::Contending, 5)
            };
            step(&mut m, reader, input, 1080 + offset as u64);
        }
    }
    // Then every 100 ms each writes a record and both read it: leading
    // while its writer leads, contending otherwise.
    let mut offset = 20;
    for t in (1100..4000).step_by(100) {
        for i in 0..2 {
            step(&mut m, i, Input::Tick, t);
            step(&mut m, i, hb(offset, t), t + 5);
            let (start, stance) = match m[i].standing(P) {
                Standing::Leader { token } => (None, Stance::Leading { token }),
                _ => (None, Stance::Contending),
            };
            step(&mut m, 1 - i, contender(names[i], offset, 1, start, stance, 5), t + 6);
            offset += 1;
        }
    }
    spawned
}

#[test]
fn regression_of_two_owners_at_once_only_the_earlier_term_on_the_partition_leads() {
    // Found by neli-soak on tansu (seed 48): the broker gave partition 0
    // to two members 73 ms apart; both were candidates, neither had a
    // claim to read before its watch ended, and both led. Now the term
    // whose first record comes first on the partition goes first: both
    // read the same order, so both agree, whatever the timing.
    let [a, b] = two_owners(true);
    assert_eq!((a.len(), b.len()), (1, 0), "a first on the log: a leads, b waits ({a:?} {b:?})");
    let [a, b] = two_owners(false);
    assert_eq!((a.len(), b.len()), (0, 1), "b first on the log: b leads though assigned later ({a:?} {b:?})");
}

#[test]
fn an_earlier_contender_holds_a_candidate_back_until_it_withdraws_or_goes_quiet() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(contender("x", 5, 1, None, Stance::Contending, 0), ms(1001));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "x's term began at 5, ours at 7");
    l.step(Input::Tick, ms(1200));
    l.step(hb(8, 1200), ms(1210));
    assert_eq!(l.next_deadline(), Some(ms(1400)), "the next heartbeat; x's record counts until 2001");
    // Withdrawn: we lead at once, on our newest record.
    assert_eq!(
        l.step(contender("x", 9, 1, Some(5), Stance::Released, 0), ms(1220)),
        vec![spawn(8, ms(2200)), says(1, Some(7), Some(8))]
    );
    // Gone quiet (crashed): we lead once its last record has run out.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(contender("x", 5, 1, None, Stance::Contending, 0), ms(1001));
    l.step(hb(7, 1000), ms(1010));
    for t in (1200..2000).step_by(200) {
        l.step(Input::Tick, ms(t));
        assert_eq!(l.step(hb(7 + t as i64 / 200, t), ms(t + 5)), vec![]);
    }
    assert_eq!(l.step(Input::Tick, ms(2001)), vec![spawn(16, ms(2800)), says(1, Some(7), Some(16))]);
    // A later contender, or one of an older version, holds nobody back.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    l.step(other("old", None, 0), ms(1001));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.step(contender("y", 9, 1, None, Stance::Contending, 0), ms(1011)), vec![]);
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
}

#[test]
fn a_leader_fences_when_a_term_that_began_before_its_own_still_contends() {
    // The group gave partition 0 to both and we led without seeing the
    // other (its records were late): the earlier one is the one both
    // sides let lead, so we stop.
    let mut l = leading(Restart::Never); // our term began at 7
    assert_eq!(l.step(contender("late", 9, 1, None, Stance::Contending, 0), ms(1015)), vec![]);
    assert_eq!(l.step(contender("stale", 3, 1, None, Stance::Contending, 1500), ms(1016)), vec![], "ran out");
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    // Read at 12, but its writer says its term began at 5.
    assert_eq!(l.step(contender("early", 12, 1, Some(5), Stance::Contending, 0), ms(1020)), vec![KillGroup(P)]);
    assert_eq!(l.standing(P), Standing::Fenced);
    l.step(exited(ChildStatus::Signaled(9)), ms(1030));
    assert_eq!(l.step(hb(13, 1200), ms(1210)), vec![says(1, Some(7), None)], "no resume while it contends");
    // It leads now: a claim from a term that began before ours.
    l.step(contender("early", 14, 1, Some(5), Stance::Leading { token: 12 }, 0), ms(1220));
    assert_eq!(l.step(Input::Tick, ms(1250)), vec![], "its claim holds us back");
    assert_eq!(
        l.step(contender("early", 20, 1, Some(5), Stance::Released, 0), ms(1300)),
        vec![spawn(13, ms(2200)), says(1, Some(7), Some(13))],
        "withdrawn: we resume at once"
    );
}

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
fn every_role_taken_within_one_step_is_reported() {
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
    assert_eq!(l.why_child_ends(P), "exited", "running: if it ends now, it ended by itself");
    l.step(Input::Tick, ms(2000));
    assert_eq!(l.standing(P), Standing::Fenced);
    assert_eq!(l.why_child_ends(P), "fenced");
    // Resumed before the killed command's exit is reported: still the fence's.
    l.step(hb(9, 2001), ms(2005));
    assert_eq!((l.standing(P), l.why_child_ends(P)), (Standing::Leader { token: 9 }, "fenced"));
    l.step(exited(ChildStatus::Signaled(9)), ms(2100));
    assert_eq!(l.why_child_ends(P), "exited", "the next run starts afresh");
    // A revoke, a lost partition, a yield, an exit: each says which.
    let mut l = leading(Restart::Always);
    l.step(revoked(false), ms(1100));
    assert_eq!((l.standing(P), l.why_standby(P), l.why_child_ends(P)), (Standing::Standby, "revoked", "stopped"));
    let mut l = leading(Restart::Always);
    l.step(revoked(true), ms(1100));
    assert_eq!((l.why_standby(P), l.why_child_ends(P)), ("lost", "stopped"));
    let mut l = leading(Restart::Always);
    l.step(Input::Yield { to: None }, ms(1100));
    assert_eq!(l.why_child_ends(P), "stopped");
    l.step(exited(ChildStatus::Exited(143)), ms(1200));
    assert_eq!((l.standing(P), l.why_standby(P)), (Standing::Standby, "yielded"));
    let mut l = leading(Restart::Always);
    l.step(Input::Shutdown, ms(1100));
    assert_eq!((l.standing(P), l.why_child_ends(P)), (Standing::Leader { token: 7 }, "stopped"));
    l.step(exited(ChildStatus::Exited(143)), ms(1200));
    assert_eq!((l.standing(P), l.why_standby(P)), (Standing::Standby, "exiting"));
    // A command that exits by itself (restarted under --restart always).
    let mut l = leading(Restart::Always);
    assert_eq!(l.why_child_ends(P), "exited");
    l.step(exited(ChildStatus::Exited(3)), ms(1100));
    assert_eq!(l.why_child_ends(P), "exited");
}

/// A pause (`paused`) or resume asked at `offset`.
fn asked(offset: i64, paused: bool, stop: bool) -> Pause {
    Pause { offset, paused, stop, at_ms: wall(0), by: Asker::default() }
}

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
    Input::OtherHeartbeat(
        P,
        Other {
            writer: "x".into(),
            offset,
            term: Some(1),
            start: Some(0),
            stance: Stance::Released,
            age: Duration::ZERO,
            deadline: DEADLINE,
            attempt: None,
            pause: Some(pause),
            to: None,
        },
    )
}

#[test]
fn a_paused_group_leads_without_starting_and_a_resume_starts_at_once() {
    let pause = asked(3, true, false);
    let mut l = Leader::new(settings(Restart::Never), started(0));
    // Read in the backlog before our first record: a standby keeps it.
    assert_eq!(l.step(Input::Pause(pause.clone()), ms(900)), vec![]);
    assert_eq!(l.step(assigned(), ms(1000)), vec![carrying(says(1, None, None), &pause, false)]);
    // We lead (and keep partition 0), but the command does not start.
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![carrying(led(), &pause, false)]);
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    assert_eq!(l.paused(), Some(&pause));
    assert_eq!(l.next_deadline(), Some(ms(1210)), "the next heartbeat, no start");
    l.step(hb(8, 1210), ms(1220));
    // Resumed: the command starts at once, and our record says so.
    let resume = asked(9, false, false);
    assert_eq!(
        l.step(Input::Pause(resume.clone()), ms(1300)),
        vec![spawn(7, ms(2210)), carrying(led(), &resume, true)]
    );
    assert_eq!(l.paused(), None);
    // An older request, read again or carried late, changes nothing.
    assert_eq!(l.step(Input::Pause(pause), ms(1310)), vec![]);
    assert!(l.child_alive(P));
}

#[test]
fn pause_stop_stops_the_command_and_the_leader_keeps_partition_0_until_resumed() {
    let mut l = leading(Restart::Never);
    let pause = asked(8, true, true);
    assert_eq!(
        l.step(Input::Pause(pause.clone()), ms(1100)),
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
        l.step(Input::Pause(resume.clone()), ms(1500)),
        vec![spawn(7, ms(2150)), carrying(led(), &resume, true)]
    );
}

#[test]
fn a_pause_without_stop_lets_the_command_run_but_not_restart() {
    let mut l = leading(Restart::Always);
    let pause = asked(8, true, false);
    assert_eq!(l.step(Input::Pause(pause.clone()), ms(1100)), vec![carrying(led(), &pause, true)]);
    l.step(hb(9, 1100), ms(1110));
    // Still running: nothing is stopped. Once it ends, --restart waits.
    assert_eq!(l.step(exited(ChildStatus::Exited(0)), ms(1200)), vec![carrying(led(), &pause, false)]);
    assert_eq!(l.step(Input::Tick, ms(1400)), vec![carrying(led(), &pause, false)]);
    assert!(!l.child_alive(P));
    // A stop asked later has nothing to stop.
    let stop = asked(10, true, true);
    assert_eq!(l.step(Input::Pause(stop.clone()), ms(1450)), vec![carrying(led(), &stop, false)]);
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
    assert_eq!(l.paused(), Some(&pause));
    // An older resume carried by a late record does not undo it.
    l.step(carried(8, asked(2, false, false)), ms(1020));
    assert_eq!(l.paused(), Some(&pause));
    assert_eq!(l.step(Input::Tick, ms(1210)), vec![carrying(led(), &pause, false)]);
    // Our disclaimer carries it on to whoever comes next.
    assert_eq!(l.step(revoked(false), ms(1300)), vec![carrying(gone(1), &pause, false), ReleaseRevoke(P)]);
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
    assert_eq!((l.standing(P), l.why_standby(P)), (Standing::Standby, "unhealthy"));
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

/// Member `name`'s candidacy of `priority`, written `age` ms ago, counting
/// for 3 s.
fn candidacy(name: &str, priority: u8, age: u64) -> Input {
    Input::Candidacy(Candidacy {
        writer: format!("{name}/1"),
        name: name.into(),
        priority,
        never_lead: false,
        leaving: false,
        unhealthy: false,
        age: Duration::from_millis(age),
        live_for: Duration::from_millis(3000),
    })
}

/// A disclaimer by `writer` handing partition 0 over to `to`.
fn handing(writer: &str, to: &str, age: u64) -> Input {
    Input::OtherHeartbeat(
        P,
        Other {
            writer: format!("{writer}/1"),
            offset: 3,
            term: Some(1),
            start: None,
            stance: Stance::Released,
            age: Duration::from_millis(age),
            deadline: DEADLINE,
            attempt: None,
            pause: None,
            to: Some(to.into()),
        },
    )
}

/// Our disclaimer handing partition 0 over to `to`, ending term `term`.
fn gone_to(term: u64, to: &str) -> Action {
    Disclaim(
        P,
        Record {
            term,
            start: None,
            stance: Stance::Released,
            attempt: None,
            next: None,
            pause: None,
            to: Some(to.into()),
        },
    )
}

#[test]
fn a_standby_in_the_group_says_so_every_interval_and_withdraws_when_it_exits() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(Input::Tick, ms(100)), vec![], "not in the group yet: nothing to say");
    assert_eq!(l.step(Input::Standby, ms(500)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.next_deadline(), Some(ms(1500)));
    assert_eq!(l.step(Input::Tick, ms(1499)), vec![]);
    assert_eq!(l.step(Input::Tick, ms(1500)), vec![SendCandidacy { leaving: false }]);
    // Owning partition 0, it heartbeats instead.
    assert_eq!(l.step(assigned(), ms(1600)), vec![says(1, None, None)]);
    assert_eq!(l.step(Input::Tick, ms(2500)), vec![says(1, None, None)]);
    // A standby again (its candidacy was due meanwhile).
    let standby = vec![gone(1), ReleaseRevoke(P), SendCandidacy { leaving: false }];
    assert_eq!(l.step(revoked(false), ms(2550)), standby);
    assert_eq!(l.step(Input::Shutdown, ms(2800)), vec![SendCandidacy { leaving: true }, Exit(0)]);
}

#[test]
fn an_unhealthy_standby_says_so_at_once_and_every_interval_and_is_a_candidate_again_once_back() {
    // Unhealthy from the start (its first check not passed yet), out of
    // the group: it says so at once (the shell marks the record unhealthy),
    // so that status shows it.
    let mut l = Leader::new(Settings { health_checked: true, ..settings(Restart::Never) }, started(0));
    assert_eq!(l.step(Input::Tick, ms(10)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.step(Input::Tick, ms(500)), vec![], "within the interval");
    assert_eq!(l.step(Input::Tick, ms(1010)), vec![SendCandidacy { leaving: false }]);
    // Healthy: a candidate again only once back in the group.
    assert_eq!(l.step(Input::Health(true), ms(1100)), vec![]);
    assert_eq!(l.step(Input::Tick, ms(2100)), vec![], "not at the unhealthy records' interval");
    assert_eq!(l.step(Input::Tick, ms(3000)), vec![], "healthy, not in the group yet");
    assert_eq!(l.step(Input::Standby, ms(3100)), vec![SendCandidacy { leaving: false }]);
    // No owner may hand partition 0 to a member its check keeps out: it
    // says so at once, and every interval while it lasts.
    assert_eq!(l.step(Input::Health(false), ms(3700)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.step(Input::Standby, ms(3800)), vec![], "not again when the group says we are in it");
    assert_eq!(l.step(Input::Tick, ms(4700)), vec![SendCandidacy { leaving: false }]);
    // Healthy again and back in the group: it says so again.
    assert_eq!(l.step(Input::Health(true), ms(5000)), vec![]);
    assert_eq!(l.step(Input::Standby, ms(6100)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.step(Input::Shutdown, ms(6200)), vec![SendCandidacy { leaving: true }, Exit(0)]);
}

#[test]
fn an_owner_lets_the_member_a_fresh_hand_over_names_lead_while_it_is_live() {
    // b is live and named: we hand over to it before leading.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 0, 100), ms(900));
    l.step(handing("a", "b", 50), ms(950));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![gone_to(1, "b"), HandOver]);
    assert_eq!(l.standing(P), Standing::Standby);
    // No candidacy while out of the group: only once back in it.
    assert_eq!(l.step(Input::Tick, ms(5000)), vec![]);
    assert_eq!(l.step(Input::Standby, ms(5001)), vec![SendCandidacy { leaving: false }]);

    // Named ourselves, we lead, whatever the priorities.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("c", 9, 100), ms(900));
    l.step(handing("a", "me", 50), ms(950));
    l.step(assigned(), ms(1000));
    assert!(l.step(hb(7, 1000), ms(1010)).contains(&spawn(7, ms(2000))));

    // A stale hand-over (three candidacy intervals), or a dead target, is
    // no reason to wait.
    for (handed_at, b_seen) in [(900, 900), (9500, 5000)] {
        let mut l = Leader::new(settings(Restart::Never), started(0));
        l.step(candidacy("b", 0, 0), ms(b_seen));
        l.step(handing("a", "b", 0), ms(handed_at));
        l.step(assigned(), ms(10_000));
        let actions = l.step(hb(7, 10_000), ms(10_010));
        assert!(actions.contains(&spawn(7, ms(11_000))), "{actions:?}");
    }

    // Handed over once, and partition 0 came back before b led: b could
    // not take it (its records get through, its membership does not). We
    // lead rather than hand over again and again.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 0, 0), ms(900));
    l.step(handing("a", "b", 0), ms(900));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![gone_to(1, "b"), HandOver]);
    l.step(Input::Standby, ms(1500));
    l.step(candidacy("b", 0, 0), ms(1600));
    l.step(assigned(), ms(1700));
    let actions = l.step(hb(9, 1700), ms(1710));
    assert!(actions.contains(&spawn(9, ms(2700))), "{actions:?}");

    // Someone led since the hand-over: it happened.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 0, 0), ms(900));
    l.step(handing("a", "b", 0), ms(900));
    l.step(other("b/1", Some(4), 0), ms(920));
    l.step(other("b/1", None, 0), ms(930));
    l.step(assigned(), ms(1000));
    assert!(l.step(hb(7, 1000), ms(1010)).iter().any(|a| matches!(a, Spawn { partition: P, .. })));
}

#[test]
fn an_owner_hands_over_to_the_live_member_of_highest_priority_above_its_own() {
    // We are priority 1.
    let lead = |inputs: Vec<Input>| {
        let mut l = Leader::new(settings(Restart::Never), started(0));
        for input in inputs {
            l.step(input, ms(5000));
        }
        l.step(assigned(), ms(6000));
        l.step(hb(7, 6000), ms(6010))
    };
    assert_eq!(
        lead(vec![candidacy("b", 2, 0), candidacy("c", 3, 0), candidacy("d", 0, 0)]),
        vec![gone_to(1, "c"), HandOver]
    );
    let spawned = |actions: Vec<Action>| actions.iter().any(|a| matches!(a, Spawn { partition: P, .. }));
    assert!(spawned(lead(vec![candidacy("b", 1, 0)])), "equal priority: no hand-over");
    assert!(spawned(lead(vec![candidacy("b", 2, 3000)])), "gone for three intervals");
    let withdrawn = Input::Candidacy(Candidacy { leaving: true, ..candidacy_of("b", 2) });
    assert!(spawned(lead(vec![candidacy("b", 2, 0), withdrawn])), "withdrawn");
    let watcher = Input::Candidacy(Candidacy { never_lead: true, ..candidacy_of("b", 2) });
    assert!(spawned(lead(vec![watcher])), "a member that never leads");
    let sick = Input::Candidacy(Candidacy { unhealthy: true, ..candidacy_of("b", 2) });
    assert!(spawned(lead(vec![sick.clone()])), "a member whose health check fails");
    assert!(spawned(lead(vec![candidacy("b", 2, 0), sick])), "one whose health check fails now");
    assert!(spawned(lead(vec![candidacy("b", 2, 0), other("b/1", None, 0)])), "its disclaimer: it left the group");
    // A leader does not hand over when one of higher priority joins.
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(candidacy("b", 2, 0), ms(1100)), vec![]);
}

fn candidacy_of(name: &str, priority: u8) -> Candidacy {
    let Input::Candidacy(c) = candidacy(name, priority, 0) else { unreachable!() };
    c
}

#[test]
fn yield_to_a_member_hands_over_to_it_once_the_command_is_gone() {
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(Input::Yield { to: Some("me".into()) }, ms(1100)), vec![], "we lead already");
    assert_eq!(l.step(Input::Yield { to: Some("b".into()) }, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1150)), vec![gone_to(1, "b"), HandOver]);
    assert_eq!(l.step(revoked(false), ms(1160)), vec![ReleaseRevoke(P)]);
}

#[test]
fn preempt_hands_over_to_a_member_of_higher_priority_only_when_asked() {
    let preempting = Settings { preempt: true, ..settings(Restart::Always) };
    let mut l = Leader::new(preempting, started(0));
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.step(candidacy("b", 1, 0), ms(1100)), vec![], "equal priority");
    let sick = Input::Candidacy(Candidacy { unhealthy: true, ..candidacy_of("b", 2) });
    assert_eq!(l.step(sick, ms(1100)), vec![], "its health check fails");
    assert_eq!(l.step(candidacy("b", 2, 0), ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1150)), vec![gone_to(1, "b"), HandOver]);
}

#[test]
fn a_fenced_leader_resumes_though_a_member_of_higher_priority_is_live() {
    // Only a candidate that has not started the command hands over to a
    // member of higher priority; a fenced leader whose heartbeats come back
    // resumes its leadership (without --preempt).
    let mut l = leading(Restart::Always);
    l.step(Input::Tick, ms(2000));
    assert_eq!(l.standing(P), Standing::Fenced);
    l.step(exited(ChildStatus::Signaled(9)), ms(2001));
    l.step(candidacy("b", 2, 0), ms(2002));
    l.step(hb(9, 2001), ms(2005));
    assert_eq!(l.standing(P), Standing::Leader { token: 9 });
}

#[test]
fn a_resume_while_not_paused_does_not_cut_the_restart_delay_short() {
    // The command exits: --restart starts it again after the delay (100 ms).
    let mut l = leading(Restart::Always);
    l.step(exited(ChildStatus::Exited(1)), ms(1100));
    assert_eq!(l.next_deadline(), Some(ms(1200)), "the restart, after the delay");
    // A resume of a group that was not paused changes nothing: no start
    // before the delay is over.
    let actions = l.step(Input::Pause(asked(9, false, false)), ms(1110));
    assert!(!actions.iter().any(|a| matches!(a, Spawn { partition: P, .. })), "{actions:?}");
    assert!(!l.child_alive(P));
}

#[test]
fn a_restarted_member_replaces_its_old_candidacy_and_its_withdrawal_ends_both() {
    // b restarted (a new incarnation), then stopped: nobody named b is
    // live, so we lead instead of handing partition 0 to b's ghost.
    let b2 = |leaving| {
        Input::Candidacy(Candidacy {
            writer: "b/2".into(),
            name: "b".into(),
            priority: 2,
            never_lead: false,
            leaving,
            unhealthy: false,
            age: Duration::ZERO,
            live_for: Duration::from_millis(3000),
        })
    };
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 2, 0), ms(900));
    l.step(b2(false), ms(910));
    l.step(b2(true), ms(920));
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
}

#[test]
fn a_hand_over_written_longer_ago_than_its_window_is_stale() {
    // a handed partition 0 to b 3.5 s ago (the window is 3 s): b is live
    // but of lower priority, so we lead.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 0, 0), ms(4900));
    l.step(handing("a", "b", 3500), ms(4950));
    l.step(assigned(), ms(5000));
    l.step(hb(7, 5000), ms(5010));
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
}

/// Our heartbeat read back with records fetched behind it, still to come.
fn hb_more(offset: i64, sent: u64) -> Input {
    Input::OwnHeartbeat { partition: P, offset, sent: ms(sent), more: true }
}

#[test]
fn a_new_owner_hears_the_records_fetched_with_its_heartbeat_before_it_leads() {
    // Audit D11, in the order the storm fed it: our first record read back,
    // then, from the same fetch, the candidacy of a member of higher
    // priority (we are 1). The command started, then was stopped 0.1 ms
    // later; now we hand over without starting it, with --preempt or not.
    for preempt in [false, true] {
        let mut l = Leader::new(Settings { preempt, ..settings(Restart::Always) }, started(0));
        l.step(assigned(), ms(1000));
        assert_eq!(l.step(hb_more(7, 1000), ms(1010)), vec![], "not before the records behind it");
        assert_eq!(l.standing(P), Standing::Candidate);
        assert_eq!(l.next_deadline(), Some(ms(1200)), "the next heartbeat: nothing else to wait for");
        assert_eq!(l.step(candidacy("p2", 2, 0), ms(1010)), vec![]);
        assert_eq!(l.step(caught_up(), ms(1010)), vec![gone_to(1, "p2"), HandOver]);
        assert_eq!(l.standing(P), Standing::Standby);
    }
    // Nobody to let lead: it leads once it has heard them, in the same
    // lease (the heartbeat read back at 1010).
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb_more(7, 1000), ms(1010)), vec![]);
    assert_eq!(l.step(candidacy("p0", 0, 0), ms(1011)), vec![]);
    assert_eq!(l.step(caught_up(), ms(1012)), vec![spawn(7, ms(2000)), led()]);
    // A later heartbeat with nothing behind it says as much (a CaughtUp
    // lost on the way holds nothing back for long).
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb_more(7, 1000), ms(1010)), vec![]);
    assert_eq!(l.step(Input::Tick, ms(1200)), vec![says(1, Some(7), None)]);
    assert_eq!(l.step(hb(8, 1200), ms(1210)), vec![spawn(8, ms(2200)), says(1, Some(7), Some(8))]);
}

#[test]
fn a_fenced_leader_resumes_on_a_heartbeat_with_records_behind_it() {
    // Only a candidate may let another member lead, so only a candidate
    // waits to hear the records behind its heartbeat.
    let mut l = leading(Restart::Always);
    l.step(Input::Tick, ms(2000));
    assert_eq!(l.standing(P), Standing::Fenced);
    l.step(exited(ChildStatus::Signaled(9)), ms(2001));
    l.step(hb_more(9, 2001), ms(2005));
    assert_eq!(l.standing(P), Standing::Leader { token: 9 });
}
