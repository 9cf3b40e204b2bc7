//! Other members: claims that hold us back, newer tokens and earlier terms
//! that fence, two owners at once, and the revoke barrier.

use super::*;

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

/// Member `writer`'s record `record` read again `later` ms after it was
/// first read, as a consumer whose position went back reads it.
fn read_again(record: &Input, later: u64) -> Input {
    let Input::OtherHeartbeat(p, other) = record.clone() else { panic!("not another's record: {record:?}") };
    Input::OtherHeartbeat(p, Other { age: other.age + Duration::from_millis(later), ..other })
}

#[test]
fn regression_a_record_read_again_after_our_own_does_not_fence_a_new_leader() {
    // R-1, seen on the dev broker's cluster: the previous owner x contended
    // (5), led (6) and released (8); we read our first record back (9) and
    // led; then its contending record was read again (the partition read
    // from an earlier offset), young enough to count: we fenced ourselves
    // and SIGKILLed our fresh command. Another writer's record in between
    // makes the member tidy up whom it remembers.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    let contends = contender("x", 5, 1, None, Stance::Contending, 300);
    l.step(contends.clone(), ms(1001));
    l.step(contender("x", 6, 1, Some(5), Stance::Leading { token: 5 }, 200), ms(1002));
    l.step(contender("x", 8, 1, Some(5), Stance::Released, 20), ms(1003));
    l.step(other("y", None, 0), ms(1004));
    assert_eq!(l.step(hb(9, 1000), ms(1010)), vec![spawn(9, ms(2000)), says(1, Some(9), Some(9))]);
    assert_eq!(l.step(read_again(&contends, 20), ms(1030)), vec![], "read before: it says nothing new");
    assert_eq!(l.standing(P), Standing::Leader { token: 9 });
}

#[test]
fn regression_a_record_read_again_does_not_withdraw_a_claim_that_holds() {
    // R-1, seen on tansu as two commands at once: a second owner read the
    // first's claim, then the first's older contending record again, took
    // the claim as withdrawn and started beside it.
    // x's contending record of an earlier term, then its claims in this one.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(assigned(), ms(1000));
    let contends = contender("x", 2, 1, None, Stance::Contending, 1500);
    l.step(contends.clone(), ms(1001));
    l.step(contender("x", 6, 2, Some(5), Stance::Leading { token: 5 }, 0), ms(1002));
    l.step(other("y", None, 0), ms(1003));
    l.step(read_again(&contends, 5), ms(1006));
    assert_eq!(l.step(hb(9, 1000), ms(1010)), vec![], "x's claim holds until 2002");
    assert_eq!(l.standing(P), Standing::Candidate);
}
