//! The hot set's list (docs/hot-set.md, slice 1): what the control
//! partition's owner names, and what a member keeps of the list it reads.
//! The choice itself is `hot_set`'s, tested on its own.

use super::*;

/// Member `name`'s candidacy of `priority`, written just now, counting
/// for 3 s; `unhealthy` or `drained` as `out` says.
fn candidacy(name: &str, priority: u8, out: (bool, bool)) -> Input {
    written(name, priority, out, 3000)
}

/// As `candidacy`, counting for `live_for` ms.
fn written(name: &str, priority: u8, (unhealthy, drained): (bool, bool), live_for: u64) -> Input {
    Input::Candidacy(Candidacy {
        unhealthy: unhealthy || drained,
        drained,
        live_for: Duration::from_millis(live_for),
        ..candidacy_of(name, priority)
    })
}

fn list(k: u32, names: &[&str]) -> HotList {
    HotList { k, names: names.iter().map(|n| n.to_string()).collect() }
}

#[test]
fn the_owner_of_the_control_partition_names_the_best_standbys_and_no_one_else_names_any() {
    let mut standby = Leader::new(settings(Restart::Never), started(0));
    standby.step(candidacy("a", 1, (false, false)), ms(100));
    assert_eq!(standby.hot_list(), None, "a standby names none: only the owner decides");
    // Candidacies every 100 ms: a new owner names its list once it has
    // owned partition 0 for 300 ms (it leads from 1010).
    let mut l = quick_leader(2);
    assert_eq!(l.hot_list(), None, "a new owner names none yet: it may not have read every candidacy");
    // a's and c's records count until 1450.
    l.step(written("a", 1, (false, false), 50), ms(1400));
    l.step(written("c", 2, (false, false), 50), ms(1400));
    l.step(candidacy("sick", 9, (true, false)), ms(1400));
    l.step(candidacy("drained", 9, (false, true)), ms(1400));
    l.step(candidacy("b", 3, (false, false)), ms(1400));
    assert_eq!(l.hot_list(), Some(list(2, &["b", "c"])), "K 2 (the fixture's): the best that may lead");
    l.step(Input::Tick, ms(1450));
    assert_eq!(l.hot_list(), Some(list(2, &["b"])), "a and c lapsed: a list short of K");
    l.step(candidacy("d", 0, (false, false)), ms(1500));
    assert_eq!(l.hot_list(), Some(list(2, &["b", "d"])));
    // yield --to d: d first, whatever its rank.
    let out = l.step(Input::Yield { to: Some("d".into()) }, ms(1600));
    assert_eq!(out.last(), Some(&SignalGroup(P, SIGTERM)), "{out:?}");
    assert_eq!(l.hot_list(), Some(list(2, &["d", "b"])));
    let mut one = quick_leader(1);
    one.step(candidacy("a", 1, (false, false)), ms(1100));
    one.step(candidacy("b", 3, (false, false)), ms(1100));
    one.step(Input::Tick, ms(1300));
    assert_eq!(one.hot_list(), Some(list(1, &["b"])), "K is --hot-standbys");
}

/// A leader on partition 0 from 1010 with `--hot-standbys k`, writing
/// candidacies every 100 ms when it is a standby (hand-overs hold 300 ms).
fn quick_leader(k: u32) -> Leader {
    let quick =
        Settings { hot_standbys: k, candidacy_interval: Duration::from_millis(100), ..settings(Restart::Never) };
    let mut l = Leader::new(quick, started(0));
    l.step(assigned(), ms(1000));
    l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    // Its reader of the roster has read it: every cold member is known.
    l.step(Input::RosterRead, ms(1010));
    l
}

#[test]
fn a_member_keeps_the_newest_list_read_from_the_watcher_or_the_owners_records() {
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.standbys.hot_read(), None, "none read yet: an older owner names none");
    assert_eq!(l.step(Input::Hot(Some(list(2, &["a", "me"]))), ms(100)), vec![], "kept; it names us: in the group");
    assert_eq!(l.standbys.hot_read(), Some(&list(2, &["a", "me"])));
    // The owner's heartbeat on the control partition names one too.
    let named = Other { hot: Some(list(2, &["a", "b"])), ..record_of("x/1", 5, Some(1), None, Stance::Contending) };
    l.step(Input::OtherHeartbeat(P, named), ms(200));
    assert_eq!(l.standbys.hot_read(), Some(&list(2, &["a", "b"])));
    // One without a list (an older owner's) leaves the newest one read.
    l.step(Input::OtherHeartbeat(P, record_of("y/1", 6, Some(1), None, Stance::Contending)), ms(300));
    assert_eq!(l.standbys.hot_read(), Some(&list(2, &["a", "b"])));
}

#[test]
fn a_fresh_hand_overs_target_goes_first_until_the_hand_over_goes_stale() {
    // Hand-overs hold for 3 candidacy intervals: 300 ms here.
    let mut l = quick_leader(1);
    l.step(candidacy("a", 9, (false, false)), ms(1350));
    l.step(candidacy("low", 0, (false, false)), ms(1350));
    assert_eq!(l.hot_list(), Some(list(1, &["a"])));
    // An earlier owner's disclaimer, read late, handed partition 0 to low.
    let handing = record_of("x/1", 3, Some(1), None, Stance::Released);
    l.step(Input::OtherHeartbeat(P, Other { to: Some("low".into()), ..handing }), ms(1400));
    l.step(Input::Tick, ms(1699));
    assert_eq!(l.hot_list(), Some(list(1, &["low"])), "the hand-over's target first while it holds");
    l.step(Input::Tick, ms(1700));
    assert_eq!(l.hot_list(), Some(list(1, &["a"])), "stale: by rank again");
}

/// A cold member's record (the roster's) counts for 90 s; named, its
/// writer writes to partition 0 at once. One that does not within a
/// candidacy's life (300 ms here), killed just after its roster record,
/// is passed over and stays out until it writes again: a 100-member soak
/// (seed 7376) saw a list name a dead member for a minute.
#[test]
fn a_named_cold_member_that_does_not_answer_is_passed_over_until_it_writes_again() {
    let roster = |name: &str, priority: u8| {
        Input::Candidacy(Candidacy { cold: true, live_for: Duration::from_secs(90), ..candidacy_of(name, priority) })
    };
    let mut l = quick_leader(1);
    l.step(roster("b", 3), ms(1300));
    l.step(roster("c", 2), ms(1300));
    assert_eq!(l.hot_list(), Some(list(1, &["b"])), "the best, cold, named at 1300");
    l.step(Input::Tick, ms(1599));
    assert_eq!(l.hot_list(), Some(list(1, &["b"])), "within a candidacy's life of being named");
    l.step(Input::Tick, ms(1600));
    assert_eq!(l.hot_list(), Some(list(1, &["c"])), "b did not answer: passed over, c named");
    // c answers at once, on partition 0: that record counts, for 3 s.
    l.step(candidacy("c", 2, (false, false)), ms(1620));
    l.step(Input::Tick, ms(2500));
    assert_eq!(l.hot_list(), Some(list(1, &["c"])), "c kept; b stays passed over, its roster record notwithstanding");
    l.step(candidacy("b", 3, (false, false)), ms(2600));
    assert_eq!(l.hot_list(), Some(list(1, &["b"])), "b heard again: named by rank");
}

/// A member's records come from two places (the roster while it is cold,
/// partition 0 while hot, read by two clients in no common order): an
/// older one read after a newer one is old news, and a newer one counts.
#[test]
fn a_candidacy_written_before_the_one_known_of_its_writer_is_old_news() {
    let mut l = quick_leader(2);
    let aged = |name: &str, unhealthy: bool, age: u64, live_for: u64| {
        Input::Candidacy(Candidacy {
            unhealthy,
            age: Duration::from_millis(age),
            live_for: Duration::from_millis(live_for),
            ..candidacy_of(name, 5)
        })
    };
    l.step(candidacy("a", 1, (false, false)), ms(1400));
    // c, hot, says on partition 0 that its check fails; its roster record
    // from when it was cold (healthy, counting 90 s) is read after.
    l.step(aged("c", true, 0, 3000), ms(1400));
    l.step(aged("c", false, 1000, 90_000), ms(1450));
    assert_eq!(l.hot_list(), Some(list(2, &["a"])), "c's older roster record does not undo its newer word");
    // c's newer record (healthy again) counts.
    l.step(aged("c", false, 0, 3000), ms(1500));
    assert_eq!(l.hot_list(), Some(list(2, &["c", "a"])));
}

/// A member gone (its withdrawal read, or its disclaimer) stays gone to an
/// older record of it read after: the owner reads the roster and partition
/// 0 with two clients, and a cold-era roster record counts for 90 s. The
/// 100-member soak saw a list name a member 23 s after it had left, and
/// the cold members wait on a live list's members.
#[test]
fn a_withdrawal_or_a_disclaimer_is_not_undone_by_an_older_record_read_after() {
    let aged = |name: &str, leaving: bool, age: u64, live_for: u64| {
        Input::Candidacy(Candidacy {
            leaving,
            age: Duration::from_millis(age),
            live_for: Duration::from_millis(live_for),
            ..candidacy_of(name, 5)
        })
    };
    let mut l = quick_leader(2);
    l.step(aged("a", false, 0, 3000), ms(1400));
    l.step(aged("c", false, 0, 3000), ms(1400));
    assert_eq!(l.hot_list(), Some(list(2, &["a", "c"])));
    // c leaves for good; its roster record from when it was cold (written
    // 2 s before, counting 90 s) is read after.
    l.step(aged("c", true, 0, 3000), ms(1500));
    l.step(aged("c", false, 2000, 90_000), ms(1510));
    assert_eq!(l.hot_list(), Some(list(2, &["a"])), "c is gone");
    // a's disclaimer (it stood aside), then its older roster record.
    l.step(Input::OtherHeartbeat(P, record_of("a/1", 9, Some(1), None, Stance::Released)), ms(1600));
    l.step(aged("a", false, 1000, 90_000), ms(1610));
    assert_eq!(l.hot_list(), Some(list(2, &[])), "a's older record is old news");
    // Its next candidacy counts again.
    l.step(aged("a", false, 0, 3000), ms(1700));
    assert_eq!(l.hot_list(), Some(list(2, &["a"])));
    // A disclaimer read late (written 0.6 s before it was read, behind a
    // slow broker) lapses what came before it, not what its writer wrote
    // after (here 0.5 s after it).
    let late = Other { age: Duration::from_millis(600), ..record_of("a/1", 10, Some(1), None, Stance::Released) };
    l.step(Input::OtherHeartbeat(P, late), ms(1800));
    l.step(aged("a", false, 100, 3000), ms(1810));
    // Past the moment the disclaimer was read plus its age.
    l.step(Input::Tick, ms(2500));
    assert_eq!(l.hot_list(), Some(list(2, &["a"])), "written after the disclaimer");
}
