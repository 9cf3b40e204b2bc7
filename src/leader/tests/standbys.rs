//! Who else may lead: candidacies, hand-overs, --priority and --preempt, and
//! the records fetched with our heartbeat.

use super::*;

/// Member `name`'s candidacy of `priority`, written `age` ms ago, counting
/// for 3 s.
fn candidacy(name: &str, priority: u8, age: u64) -> Input {
    Input::Candidacy(Candidacy { age: Duration::from_millis(age), ..candidacy_of(name, priority) })
}

/// A disclaimer by `writer` handing partition 0 over to `to`.
fn handing(writer: &str, to: &str, age: u64) -> Input {
    let record = record_of(&format!("{writer}/1"), 3, Some(1), None, Stance::Released);
    Input::OtherHeartbeat(P, Other { age: Duration::from_millis(age), to: Some(to.into()), ..record })
}

/// Our disclaimer handing partition 0 over to `to`, ending term `term`.
fn gone_to(term: u64, to: &str) -> Action {
    Disclaim(P, Record { to: Some(to.into()), ..Record::saying(term, Stance::Released) })
}

/// Out of the group while `to` is live.
fn hand_over(to: &str) -> Action {
    HandOver { to: to.into() }
}

#[test]
fn a_standby_in_the_group_says_so_every_interval_and_withdraws_when_it_exits() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(Input::Tick, ms(100)), vec![], "not in the group yet: nothing to say");
    assert_eq!(l.step(Input::Standby, ms(500)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.next_deadline(), Some(ms(1500)));
    // Told again (another rebalance): the next one stays an interval after
    // the last, not at once.
    assert_eq!(l.step(Input::Standby, ms(600)), vec![]);
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
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![gone_to(1, "b"), hand_over("b")]);
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

    // A stale hand-over (three candidacy intervals), or a target whose
    // newest record says it may not lead, is no reason to wait.
    let sick = Input::Candidacy(Candidacy { unhealthy: true, ..candidacy_of("b", 0) });
    for (handed_at, b) in [(900, candidacy("b", 0, 0)), (9500, sick)] {
        let mut l = Leader::new(settings(Restart::Never), started(0));
        l.step(b, ms(5000));
        l.step(handing("a", "b", 0), ms(handed_at));
        l.step(assigned(), ms(10_000));
        let actions = l.step(hb(7, 10_000), ms(10_010));
        assert!(actions.contains(&spawn(7, ms(11_000))), "{actions:?}");
    }

    // A target whose newest record here lapsed, or that we never read, is
    // let lead: a cold member writes to the roster, which only the owner
    // that handed over reads (docs/hot-set.md, slice 3). One that does not
    // take it costs one hand-over: partition 0 back to us, we lead (below).
    for seen in [Some(5000), None] {
        let mut l = Leader::new(settings(Restart::Never), started(0));
        if let Some(seen) = seen {
            l.step(candidacy("b", 0, 0), ms(seen));
        }
        l.step(handing("a", "b", 0), ms(9500));
        l.step(assigned(), ms(10_000));
        assert_eq!(l.step(hb(7, 10_000), ms(10_010)), vec![gone_to(1, "b"), hand_over("b")], "{seen:?}");
    }

    // Handed over once, and partition 0 came back before b led: b could
    // not take it (its records get through, its membership does not). We
    // lead rather than hand over again and again.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 0, 0), ms(900));
    l.step(handing("a", "b", 0), ms(900));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![gone_to(1, "b"), hand_over("b")]);
    l.step(Input::Standby, ms(1500));
    l.step(candidacy("b", 0, 0), ms(1600));
    l.step(assigned(), ms(1700));
    let actions = l.step(hb(9, 1700), ms(1710));
    assert!(actions.contains(&spawn(9, ms(2700))), "{actions:?}");

    // Let lead in vain, a member of higher priority than ours (1), and
    // partition 0 came back before anyone led (tansu's rebalance outlasts
    // the hand-over's watch): we lead, rather than hand over to the next
    // of higher priority, and the next, round and round (a soak on tansu
    // saw no command run for a minute so).
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 3, 0), ms(900));
    l.step(candidacy("c", 2, 0), ms(900));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![gone_to(1, "b"), hand_over("b")]);
    l.step(Input::Standby, ms(1500));
    l.step(candidacy("b", 3, 0), ms(1600));
    l.step(candidacy("c", 2, 0), ms(1600));
    l.step(assigned(), ms(1700));
    // The records before ours read again, an old leader's among them:
    // written before we handed over, no sign that anyone took it since.
    l.step(contender("x/1", 3, 1, Some(3), Stance::Leading { token: 3 }, 9000), ms(1705));
    let actions = l.step(hb(9, 1700), ms(1710));
    assert!(actions.contains(&spawn(9, ms(2700))), "{actions:?}");
    // A leader since (a record past the one we handed over on): the next
    // time we own partition 0 unled, we hand over again.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    l.step(candidacy("b", 3, 0), ms(900));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![gone_to(1, "b"), hand_over("b")]);
    l.step(Input::Standby, ms(1500));
    l.step(contender("b/1", 8, 1, Some(8), Stance::Leading { token: 8 }, 0), ms(1600));
    l.step(contender("b/1", 10, 1, Some(8), Stance::Released, 0), ms(3000));
    l.step(candidacy("b", 3, 0), ms(3100));
    l.step(assigned(), ms(3200));
    assert_eq!(l.step(hb(11, 3200), ms(3210)), vec![gone_to(2, "b"), hand_over("b")]);

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
        vec![gone_to(1, "c"), hand_over("c")]
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

#[test]
fn yield_to_a_member_hands_over_to_it_once_the_command_is_gone() {
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(Input::Yield { to: Some("me".into()) }, ms(1100)), vec![], "we lead already");
    assert_eq!(l.step(Input::Yield { to: Some("b".into()) }, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1150)), vec![gone_to(1, "b"), hand_over("b")]);
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
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1150)), vec![gone_to(1, "b"), hand_over("b")]);
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
    let actions = l.step(Input::Pause(P, asked(9, false, false)), ms(1110));
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
            drained: false,
            age: Duration::ZERO,
            live_for: Duration::from_millis(3000),
            cold: false,
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
        assert_eq!(l.step(caught_up(), ms(1010)), vec![gone_to(1, "p2"), hand_over("p2")]);
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

#[test]
fn a_member_that_stops_its_command_to_exit_or_stand_aside_is_no_candidate_meanwhile() {
    // Shutting down, the partition taken while the command stops: told it
    // is a standby, it says nothing (it exits once the command is gone).
    let mut l = leading(Restart::Never);
    assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(revoked(false), ms(1150)), vec![]);
    assert_eq!(l.step(Input::Standby, ms(1160)), vec![], "it exits: no candidacy");
    assert_eq!(l.step(exited(ChildStatus::Signaled(15)), ms(1200)), vec![gone(1), ReleaseRevoke(P), Exit(143)]);
    // Yielding the same way: it stands aside, no candidate until another leads.
    let mut l = leading(Restart::Always);
    assert_eq!(l.step(Input::Yield { to: None }, ms(1100)), vec![SignalGroup(P, SIGTERM)]);
    assert_eq!(l.step(revoked(false), ms(1150)), vec![]);
    assert_eq!(l.step(Input::Standby, ms(1160)), vec![], "it stands aside: no candidacy");
}
