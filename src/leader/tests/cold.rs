//! Cold standbys (docs/hot-set.md, slice 2; the rule is `cold.rs`'s): a
//! member with no seat that a live owner's full list leaves out stays out
//! of the group, and comes back when a list names it, when the owner goes
//! silent, or when it is handed partition 0. `owner_silence` is 3 s in the
//! fixture's settings.

use super::*;
use crate::leader::cold::{stays_cold, Heard, Us};

fn list(k: u32, names: &[&str]) -> HotList {
    HotList { k, names: names.iter().map(|n| n.to_string()).collect() }
}

fn hot(k: u32, names: &[&str]) -> Input {
    Input::Hot(Some(list(k, names)))
}

/// A standby in the group since 0 that has said it is there.
fn standby() -> Leader {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(Input::Standby, ms(0)), vec![SendCandidacy { leaving: false }]);
    l
}

#[test]
fn the_rule_weighs_the_seat_the_hand_over_the_list_and_the_owners_silence() {
    let free = Us { name: "me", seated: false, target: false };
    let full = list(2, &["a", "b"]);
    // Alive until 4000; two of our own candidacies read back since its last word.
    let heard = Heard { until: Some(ms(4000)), echoes: 2 };
    assert!(stays_cold(free, Some(&full), heard, ms(3999)), "a full list of a live hot set, naming others");
    assert!(!stays_cold(free, Some(&full), heard, ms(4000)), "the hot set silent");
    let slow = Heard { echoes: 1, ..heard };
    assert!(stays_cold(free, Some(&full), slow, ms(9000)), "silent, but we may not be reading what is written");
    assert!(!stays_cold(free, Some(&full), Heard { until: None, echoes: 0 }, ms(1000)), "no owner heard");
    assert!(!stays_cold(free, None, heard, ms(1000)), "no list");
    assert!(!stays_cold(free, Some(&list(2, &["a"])), heard, ms(1000)), "a short list: everyone may be needed");
    assert!(!stays_cold(free, Some(&list(2, &["a", "me"])), heard, ms(1000)), "named");
    assert!(!stays_cold(Us { seated: true, ..free }, Some(&full), heard, ms(1000)), "a seat");
    assert!(!stays_cold(Us { target: true, ..free }, Some(&full), heard, ms(1000)), "handed to");
    assert!(stays_cold(free, Some(&list(0, &[])), heard, ms(1000)), "--hot-standbys 0: every standby is cold");
    assert!(stays_cold(free, Some(&list(1, &["a", "b"])), heard, ms(1000)), "K others or more");
}

#[test]
fn a_standby_goes_cold_on_a_full_list_that_names_others_and_comes_back_when_named() {
    let mut l = standby();
    assert_eq!(l.step(hot(2, &["a"]), ms(100)), vec![], "a short list: stays in the group");
    assert_eq!(l.step(hot(2, &["a", "me"]), ms(200)), vec![], "named: stays in");
    assert_eq!(l.step(hot(2, &["a", "b"]), ms(300)), vec![Cold(true)]);
    assert_eq!(l.step(hot(2, &["a", "b"]), ms(400)), vec![], "said once");
    // Cold, it still says it is there: the owner chooses among those it reads.
    assert_eq!(l.step(Input::Tick, ms(1000)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.step(hot(2, &["me", "a"]), ms(1100)), vec![Cold(false)], "invited");
    assert_eq!(l.step(hot(1, &["a"]), ms(1200)), vec![Cold(true)], "K 1, another named");
}

#[test]
fn a_cold_standby_joins_once_the_owner_goes_silent_and_leaves_again_when_one_is_heard() {
    let mut l = standby();
    assert_eq!(colds(l.step(hot(2, &["a", "b"]), ms(100))), vec![Cold(true)]);
    l.step(Input::Tick, ms(1000));
    assert_eq!(colds(l.step(Input::Echo, ms(1100))), vec![], "our candidacy read back");
    assert_eq!(colds(l.step(hot(2, &["a", "b"]), ms(1500))), vec![], "heard again: cold still");
    assert_eq!(colds(l.step(Input::Echo, ms(2100))), vec![]);
    assert_eq!(l.next_deadline(), Some(ms(3100)), "one echo since the owner spoke: our next candidacy, no silence yet");
    assert_eq!(colds(l.step(Input::Tick, ms(4600))), vec![], "silent since 1500, but we may not read what is written");
    assert_eq!(colds(l.step(Input::Echo, ms(4700))), vec![Cold(false)], "we do: every hot member may be gone");
    // A new owner, or the old one back: cold again by its list.
    assert_eq!(colds(l.step(hot(2, &["a", "c"]), ms(4800))), vec![Cold(true)]);
    // Silent 3 s with two echoes since: the deadline is the owner's silence.
    l.step(Input::Echo, ms(4900));
    l.step(Input::Echo, ms(4950));
    l.step(Input::Tick, ms(7000));
    assert_eq!(l.next_deadline(), Some(ms(7800)));
    assert_eq!(colds(l.step(Input::Tick, ms(7799))), vec![]);
    assert_eq!(colds(l.step(Input::Tick, ms(7800))), vec![Cold(false)]);
}

/// The Cold actions of a step's.
fn colds(out: Vec<Action>) -> Vec<Action> {
    out.into_iter().filter(|a| matches!(a, Cold(_))).collect()
}

#[test]
fn a_list_in_a_record_past_its_deadline_is_no_live_owners_word() {
    let mut l = standby();
    let old = Other {
        hot: Some(list(2, &["a", "b"])),
        age: DEADLINE,
        ..record_of("x/1", 5, Some(1), None, Stance::Leading { token: 5 })
    };
    assert_eq!(l.step(Input::OtherHeartbeat(P, old.clone()), ms(100)), vec![], "read late: stays in");
    let live = Other { age: Duration::ZERO, offset: 6, seq: old.seq + 1, ..old };
    assert_eq!(l.step(Input::OtherHeartbeat(P, live), ms(200)), vec![Cold(true)]);
}

#[test]
fn a_member_with_a_seat_never_goes_cold() {
    let mut l = leading(Restart::Never);
    l.step(hot(2, &["a", "b"]), ms(1100));
    let out = l.step(hot(2, &["a", "b"]), ms(1200));
    assert!(!out.contains(&Cold(true)), "{out:?}");
    // Revoked, its command still stopping: a seat until it is gone.
    let out = l.step(Input::Revoked { partition: P, lost: false }, ms(1300));
    assert!(!out.contains(&Cold(true)), "{out:?}");
    let out = l.step(hot(2, &["a", "b"]), ms(1400));
    assert!(!out.contains(&Cold(true)), "the command still runs: {out:?}");
    let out = l.step(Input::ChildExited(P, ChildStatus::Exited(0)), ms(1500));
    assert!(out.contains(&Cold(true)), "no seat left: {out:?}");
    // A candidate, its command not started: the partition is a seat.
    let mut c = Leader::new(settings(Restart::Never), started(0));
    c.step(assigned(), ms(1000));
    assert_eq!(c.standing(P), Standing::Candidate);
    assert_eq!(colds(c.step(hot(2, &["a", "b"]), ms(1100))), vec![]);
}

#[test]
fn the_target_of_a_hand_over_stays_in_the_group_while_it_holds() {
    let mut l = standby();
    let handing = Other { to: Some("me".into()), ..record_of("x/1", 3, Some(1), None, Stance::Released) };
    l.step(Input::OtherHeartbeat(P, handing), ms(100));
    assert_eq!(l.step(hot(2, &["a", "b"]), ms(200)), vec![], "handed partition 0: it must be in the group");
    // The hand-over holds 3 candidacy intervals (3 s) from its writing.
    assert!(!l.step(hot(2, &["a", "b"]), ms(3099)).contains(&Cold(true)));
    assert_eq!(l.step(hot(2, &["a", "b"]), ms(3100)), vec![Cold(true)], "stale: cold by the list");
}

#[test]
fn a_named_hot_standbys_candidacy_keeps_a_cold_member_out_while_a_dead_owner_is_replaced() {
    let mut l = standby();
    assert_eq!(l.step(hot(2, &["a", "b"]), ms(100)), vec![Cold(true)]);
    // b, hot, says it is there at 2000 (counting 3 s); c, not named, at 2500.
    l.step(Input::Candidacy(Candidacy { live_for: Duration::from_millis(3000), ..candidacy_of("b", 1) }), ms(2000));
    l.step(Input::Candidacy(Candidacy { live_for: Duration::from_millis(9000), ..candidacy_of("c", 1) }), ms(2500));
    l.step(Input::Echo, ms(2600));
    l.step(Input::Echo, ms(2700));
    assert_eq!(l.next_deadline(), Some(ms(3000)), "the next candidacy of ours");
    l.step(Input::Tick, ms(3000));
    assert!(!l.step(Input::Tick, ms(4000)).contains(&Cold(false)), "the owner is silent, b is not");
    assert_eq!(l.next_deadline(), Some(ms(5000)));
    assert!(l.step(Input::Tick, ms(5000)).contains(&Cold(false)), "b's lapsed too: the hot set is gone");
}

#[test]
fn an_owners_record_that_names_no_list_is_heard_and_leaves_the_list_in_force() {
    let mut l = standby();
    assert_eq!(l.step(hot(1, &["d"]), ms(100)), vec![Cold(true)]);
    l.step(Input::Tick, ms(1000));
    l.step(Input::Tick, ms(2000));
    // d took over: its first records name none yet.
    assert_eq!(l.step(Input::Hot(None), ms(2900)), vec![]);
    assert_eq!(l.next_deadline(), Some(ms(3000)), "our candidacy; the owner was heard at 2900");
    l.step(Input::Tick, ms(3000));
    l.step(Input::Echo, ms(3100));
    l.step(Input::Echo, ms(3200));
    assert_eq!(l.next_deadline(), Some(ms(4000)));
    assert_eq!(l.step(Input::Tick, ms(5899)), vec![SendCandidacy { leaving: false }]);
    assert_eq!(l.step(Input::Tick, ms(5900)), vec![Cold(false)], "silent 3 s since");
}

#[test]
fn a_new_owner_names_no_list_until_it_has_owned_partition_0_for_three_candidacy_intervals() {
    // Candidacies every 100 ms: 300 ms owned.
    let quick = Settings { candidacy_interval: Duration::from_millis(100), ..settings(Restart::Never) };
    let mut l = Leader::new(quick, started(0));
    l.step(Input::Candidacy(candidacy_of("b", 1)), ms(500));
    l.step(Input::Candidacy(candidacy_of("c", 1)), ms(500));
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    l.step(Input::RosterRead, ms(1020));
    l.step(Input::Tick, ms(1299));
    assert_eq!(l.hot_list(), None, "it may not have read every candidacy yet: the list in force stays");
    l.step(Input::Tick, ms(1300));
    assert_eq!(l.hot_list(), Some(list(2, &["b", "c"])));
}

/// The cold members' candidacies are on the roster, which only the owner
/// reads: a list made before it has read the roster names only the hot
/// members, short of K, and a short list calls every cold member in (a
/// 100-member soak: 98 joined at once after a broker restart, and the
/// group rebalanced for minutes). So a new owner names none until its
/// reader has read the roster to its end since it came to own partition 0
/// (one read before does not count), or 30 candidacy intervals passed.
#[test]
fn a_new_owner_names_no_list_until_it_has_read_the_roster_or_a_roster_writers_period_passed() {
    let quick = Settings { candidacy_interval: Duration::from_millis(100), ..settings(Restart::Never) };
    let owner = || {
        let mut l = Leader::new(quick.clone(), started(0));
        l.step(Input::RosterRead, ms(500));
        l.step(Input::Candidacy(candidacy_of("b", 1)), ms(500));
        l.step(assigned(), ms(1000));
        l.step(hb(7, 1000), ms(1010));
        l
    };
    let mut l = owner();
    l.step(Input::Tick, ms(1300));
    assert_eq!(l.hot_list(), None, "a read before it owned partition 0 is not this tenure's");
    // It leads on, reading its heartbeats back.
    for (offset, t) in (1100..4000).step_by(200).enumerate() {
        l.step(hb(8 + offset as i64, t), ms(t + 5));
    }
    l.step(Input::Candidacy(candidacy_of("b", 1)), ms(3900));
    l.step(Input::Candidacy(candidacy_of("c", 1)), ms(3900));
    l.step(Input::Tick, ms(3999));
    assert_eq!(l.hot_list(), None, "29.9 intervals");
    l.step(Input::Tick, ms(4000));
    assert_eq!(l.hot_list(), Some(list(2, &["b", "c"])), "30: named anyway");
    let mut l = owner();
    l.step(Input::Tick, ms(1499));
    assert_eq!(l.hot_list(), None);
    l.step(Input::RosterRead, ms(1500));
    assert_eq!(l.hot_list(), Some(list(2, &["b"])), "read: named at once");
}

#[test]
fn a_hot_standbys_candidacy_is_the_hot_set_speaking_and_our_echoes_count_from_it() {
    let mut l = standby();
    assert_eq!(l.step(hot(2, &["a", "b"]), ms(100)), vec![Cold(true)]);
    l.step(Input::Echo, ms(200));
    l.step(Input::Candidacy(Candidacy { live_for: Duration::from_millis(100), ..candidacy_of("b", 1) }), ms(300));
    l.step(Input::Echo, ms(400));
    assert_eq!(l.next_deadline(), Some(ms(1000)), "one echo since b spoke: the silence does not count yet");
    l.step(Input::Tick, ms(1000));
    assert_eq!(colds(l.step(Input::Tick, ms(3100))), vec![], "silent, and one echo since b spoke");
    assert_eq!(colds(l.step(Input::Echo, ms(3200))), vec![Cold(false)], "silent since 300 (owner heard at 100, +3 s)");
}

#[test]
fn a_member_that_goes_cold_before_it_joined_says_it_is_there_at_once_and_every_interval() {
    // Its watcher read the list before the group let it in: no Standby
    // yet, and without a candidacy the owner would never invite it.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(hot(2, &["a", "b"]), ms(100)), vec![Cold(true), SendCandidacy { leaving: false }]);
    assert_eq!(l.next_deadline(), Some(ms(1100)));
    assert_eq!(l.step(Input::Tick, ms(1100)), vec![SendCandidacy { leaving: false }]);
}

#[test]
fn an_unhealthy_hot_standbys_candidacy_does_not_keep_the_hot_set_alive() {
    let mut l = standby();
    assert_eq!(colds(l.step(hot(2, &["a", "b"]), ms(100))), vec![Cold(true)]);
    // b, named hot, says it fails its health check: it will not take over.
    // It says so every interval, between our own candidacies read back.
    let sick = Candidacy { unhealthy: true, live_for: Duration::from_millis(9000), ..candidacy_of("b", 1) };
    l.step(Input::Candidacy(sick.clone()), ms(2000));
    l.step(Input::Echo, ms(2100));
    l.step(Input::Candidacy(sick.clone()), ms(2150));
    l.step(Input::Echo, ms(2200));
    l.step(Input::Candidacy(sick), ms(2250));
    assert_eq!(colds(l.step(Input::Tick, ms(3100))), vec![Cold(false)], "the owner silent since 100, b of no help");
}

/// Nor does a named member's that says it will never lead, is drained, or
/// leaves: none of them takes over from a dead owner.
#[test]
fn a_named_members_candidacy_that_will_not_lead_does_not_undo_our_echoes() {
    let cases = [
        ("never leads", Candidacy { never_lead: true, ..candidacy_of("b", 1) }),
        ("drained", Candidacy { unhealthy: true, drained: true, ..candidacy_of("b", 1) }),
        ("leaving", Candidacy { leaving: true, ..candidacy_of("b", 1) }),
    ];
    for (what, candidacy) in cases {
        let mut l = standby();
        assert_eq!(colds(l.step(hot(2, &["a", "b"]), ms(100))), vec![Cold(true)]);
        l.step(Input::Echo, ms(2100));
        l.step(Input::Echo, ms(2200));
        l.step(Input::Candidacy(candidacy), ms(2250));
        assert_eq!(colds(l.step(Input::Tick, ms(3100))), vec![Cold(false)], "{what}: the owner silent since 100");
    }
}

/// A disclaimer that hands partition 0 to us, read by our watcher while we
/// are cold (our consumer reads nothing then; slice 3): we join to take it,
/// and go cold again once the hand-over is stale (three candidacy
/// intervals after it was written) if no one named us meanwhile.
#[test]
fn a_cold_standby_handed_partition_0_joins_until_the_hand_over_is_stale() {
    let mut l = standby();
    assert_eq!(l.step(hot(1, &["a"]), ms(300)), vec![Cold(true)]);
    // Written 100 ms ago; the fixture's candidacy interval is 1 s.
    assert_eq!(colds(l.step(Input::HandedTo(Duration::from_millis(100)), ms(1000))), vec![Cold(false)]);
    let kept = colds(l.step(hot(1, &["a"]), ms(1500)));
    assert_eq!(kept, vec![], "handed to: a list that leaves us out does not send us out");
    assert_eq!(colds(l.step(hot(1, &["a"]), ms(3950))), vec![Cold(true)], "stale: cold again");
}
