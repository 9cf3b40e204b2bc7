//! Once per wave (`--restart never` with --once-within): which attempt of
//! a wave runs, which is never run again, and what the records say.

use super::*;

#[test]
fn the_first_leader_of_a_wave_runs_it_and_its_last_record_says_how_it_ended() {
    let (mut l, actions) = wave_member(waves(false), vec![]);
    let attempt = spawned(&actions).unwrap();
    assert_eq!(
        attempt,
        Attempt {
            wave_ms: wall(1010),
            wave_token: 7,
            number: 1,
            token: 7,
            code: None,
            by: None,
            due: None,
            ended: None,
            line: None,
        }
    );
    // Its heartbeats carry the attempt, so a later leader knows it was begun.
    assert!(actions.contains(&SendHeartbeat(P, Record { attempt: Some(attempt.clone()), ..record(led()) })));
    let actions = l.step(exited(ChildStatus::Exited(0)), ms(1500));
    assert_eq!(disclaimed(&actions), Some(Attempt { code: Some(0), ..attempt }));
    assert_eq!(actions.last(), Some(&Exit(0)));
}

/// The record of an action that writes one.
fn record(action: Action) -> Record {
    match action {
        SendHeartbeat(P, r) | Disclaim(P, r) => r,
        other => panic!("{other:?} writes no record"),
    }
}

#[test]
fn a_member_of_a_wave_whose_run_succeeded_exits_0_without_running_it_and_passes_the_word_on() {
    let done = x_ran(500, 1, 3, Some(0));
    let (_, actions) = wave_member(waves(false), vec![carrying(4, None, done.clone())]);
    assert_eq!(spawned(&actions), None);
    assert_eq!(disclaimed(&actions), Some(done), "the next member reads it from our record");
    assert_eq!(actions.last(), Some(&Exit(0)));
}

#[test]
fn a_run_that_failed_ends_the_wave_with_its_status_unless_failed_runs_are_retried() {
    let failed = x_ran(500, 1, 3, Some(4));
    let (_, actions) = wave_member(waves(false), vec![carrying(4, None, failed.clone())]);
    assert_eq!((spawned(&actions), actions.last()), (None, Some(&Exit(4))));
    let (_, actions) = wave_member(waves(true), vec![carrying(4, None, failed)]);
    assert_eq!(spawned(&actions), Some(ours(500, 0, 2, 7)));
}

#[test]
fn an_attempt_that_never_ended_is_run_again_as_the_next_attempt_of_its_wave() {
    // Its leader crashed (its last record a claim, long run out) or was
    // stopped (its disclaimer names the attempt without an ending).
    let begun = x_ran(500, 2, 3, None);
    for last in [carrying(4, Some(3), begun.clone()), carrying(4, None, begun.clone())] {
        let mut l = Leader::new(waves(false), started(0));
        l.step(last, ms(5)); // a claim run out by 1010
        l.step(assigned(), ms(1000));
        let actions = lead_and_name(&mut l, 7, 1000, 1010);
        assert_eq!(spawned(&actions), Some(ours(500, 0, 3, 7)));
    }
}

#[test]
fn a_member_started_after_the_window_runs_a_wave_of_its_own() {
    let mut l = Leader::new(waves(false), started(40_000));
    l.step(carrying(4, None, x_ran(500, 1, 3, Some(0))), ms(40_900));
    l.step(assigned(), ms(41_000));
    let actions = lead_and_name(&mut l, 7, 41_000, 41_010);
    assert_eq!(spawned(&actions), Some(ours(41_010, 7, 1, 7)));
    // Just inside the window (started 29.999 s after the wave began), it
    // belongs to the wave; at 30 s, it does not.
    for (start, belongs) in [(30_499, true), (30_500, false)] {
        let mut l = Leader::new(waves(false), started(start));
        l.step(carrying(4, None, x_ran(500, 1, 3, Some(0))), ms(40_900));
        l.step(assigned(), ms(41_000));
        let actions = lead_and_name(&mut l, 7, 41_000, 41_010);
        assert_eq!(actions.last() == Some(&Exit(0)), belongs, "started at {start}: {actions:?}");
    }
}

#[test]
fn the_newest_attempt_counts_and_an_ending_beats_none_of_the_same_attempt() {
    // The first attempt, the second (begun, then ended), and both again as
    // members that had not read further carry them forward.
    // (All before our own first record, at offset 7.)
    let ended = x_ran(500, 2, 3, Some(0));
    let read = vec![
        carrying(2, Some(1), x_ran(500, 1, 1, None)),
        carrying(4, Some(3), x_ran(500, 2, 3, None)),
        carrying(5, None, ended.clone()),
        carrying(6, None, x_ran(500, 2, 3, None)),
        carrying(6, None, x_ran(500, 1, 1, None)),
    ];
    let (_, actions) = wave_member(waves(false), read);
    assert_eq!((disclaimed(&actions), actions.last()), (Some(ended), Some(&Exit(0))));
    // Without the ending, the newest attempt is run again, even when a
    // member that lags behind still carries an older one's failure.
    let read = vec![
        carrying(2, Some(1), x_ran(500, 1, 1, None)),
        carrying(5, None, x_ran(500, 2, 3, None)),
        carrying(6, None, x_ran(500, 1, 1, Some(4))),
    ];
    let (_, actions) = wave_member(waves(true), read);
    assert_eq!(spawned(&actions).map(|j| j.number), Some(3));
    // A token is the offset of an earlier record: one that is not is
    // nonsense and must not end a wave that never ran.
    let (_, actions) = wave_member(waves(false), vec![carrying(4, None, x_ran(500, 1, 4, Some(0)))]);
    assert_eq!(spawned(&actions).map(|j| j.number), Some(1));
}

#[test]
fn a_fenced_attempt_resumes_as_the_next_attempt_and_a_stopped_one_stays_unended() {
    let (mut l, _) = wave_member(waves(false), vec![]);
    // Fenced: no heartbeat back for the deadline since the one sent at
    // 1011 (the record naming its run).
    l.step(Input::Tick, ms(2020));
    l.step(exited(ChildStatus::Signaled(9)), ms(2021));
    l.step(Input::Tick, ms(2600)); // the record read back at 2610
    let actions = lead_and_name(&mut l, 12, 2600, 2610);
    assert_eq!(spawned(&actions), Some(ours(1010, 7, 2, 12)), "{actions:?}");
    // SIGTERM stops it: the attempt did not end on its own.
    l.step(Input::Shutdown, ms(2700));
    let actions = l.step(exited(ChildStatus::Signaled(15)), ms(2800));
    assert_eq!(disclaimed(&actions).map(|j| j.code), Some(None));
    assert_eq!(actions.last(), Some(&Exit(143)));
}

#[test]
fn without_waves_records_carry_no_attempt_and_read_ones_are_ignored() {
    let (_, actions) = wave_member(settings(Restart::Never), vec![carrying(4, None, x_ran(500, 1, 3, Some(0)))]);
    assert_eq!(actions, vec![spawn(7, ms(2000)), led()]);
}

#[test]
fn a_run_past_max_runtime_is_stopped_and_ends_as_if_by_itself() {
    let max = Duration::from_millis(3000);
    let run = |restart| {
        let mut l = Leader::new(Settings { max_runtime: Some(max), ..settings(restart) }, started(0));
        l.step(assigned(), ms(1000));
        l.step(hb(7, 1000), ms(1010));
        // Heartbeats keep the lease up; the run started at 1010 overruns at 4010.
        for t in (1200..4000).step_by(200) {
            l.step(Input::Tick, ms(t));
            l.step(hb(7 + t as i64 / 200, t), ms(t + 5));
        }
        assert_eq!(l.next_deadline(), Some(ms(4000)), "the next heartbeat");
        l.step(Input::Tick, ms(4000));
        l.step(hb(30, 4000), ms(4005));
        assert_eq!(l.next_deadline(), Some(ms(4010)), "the overrun");
        assert_eq!(l.step(Input::Tick, ms(4009)), vec![]);
        assert_eq!(l.step(Input::Tick, ms(4010)), vec![SignalGroup(P, SIGTERM)]);
        // Grace, then SIGKILL, as for any stop.
        assert!(l.step(Input::Tick, ms(4510)).contains(&KillGroup(P)));
        let ended = l.step(exited(ChildStatus::Signaled(9)), ms(4520));
        // Stopped by us, but for overrunning: --on-failure hears of it.
        assert_eq!(l.why_child_ended(P), crate::leader::Reason::Overran);
        ended
    };
    assert_eq!(run(Restart::Never).last(), Some(&Exit(137)), "its status, as a run that ended");
    let again = run(Restart::Always);
    assert!(!again.iter().any(|a| matches!(a, Exit(_))), "--restart applies: {again:?}");
    // Without a limit, nothing stops it.
    let mut l = leading(Restart::Never);
    for t in (1200..10_000).step_by(200) {
        let actions = [l.step(Input::Tick, ms(t)), l.step(hb(7 + t as i64 / 200, t), ms(t + 5))].concat();
        assert!(!actions.iter().any(|a| matches!(a, SignalGroup(P, _) | KillGroup(P))), "at {t}: {actions:?}");
    }
}

#[test]
fn who_began_before_a_wave_is_read_from_the_log_whatever_the_clocks_say() {
    // A success from a host whose clock is a day ahead: its wave seems to
    // begin in our future. Members started before it began on the log (the
    // partition ended at 4, the wave began at offset 5) belong to it; one
    // started after (the partition ended at 6) runs a wave of its own,
    // where the clocks alone would have had it wait out the day.
    let ahead = |born| {
        let mut l = Leader::new(waves(false), started(40_000));
        l.born_at(P, born);
        l.step(carrying(6, None, Attempt { wave_token: 5, ..x_ran(86_400_000, 1, 5, Some(0)) }), ms(40_900));
        l.step(assigned(), ms(41_000));
        lead_and_name(&mut l, 7, 41_000, 41_010)
    };
    assert_eq!(ahead(4).last(), Some(&Exit(0)));
    assert_eq!(ahead(5).last(), Some(&Exit(0)), "began at the end we saw: after us");
    assert_eq!(spawned(&ahead(6)).map(|j| (j.number, j.wave_token)), Some((1, 7)));
    // Born before the wave by the log, though the clocks put our start long
    // after it (a wave from a clock behind ours): ours all the same.
    let mut l = Leader::new(waves(false), started(40_000));
    l.born_at(P, 2);
    l.step(carrying(4, None, Attempt { wave_token: 3, ..x_ran(500, 1, 3, Some(0)) }), ms(40_900));
    l.step(assigned(), ms(41_000));
    assert_eq!(l.step(hb(7, 41_000), ms(41_010)).last(), Some(&Exit(0)));
}

// A wave's run is named on the topic before it starts (C-10).

/// The run `actions` name in our records, not ended.
fn named(actions: &[Action]) -> Option<Attempt> {
    actions.iter().find_map(|a| match a {
        SendHeartbeat(P, r) => r.attempt.clone().filter(|j| j.code.is_none() && j.by.is_none()),
        _ => None,
    })
}

#[test]
fn a_waves_run_starts_once_the_record_naming_it_is_read_back_and_not_before() {
    let mut l = Leader::new(waves(false), started(0));
    l.step(assigned(), ms(1000));
    // It leads on its first record; the record announcing that names the
    // run (no record more than before), which does not start yet.
    let led = l.step(hb(7, 1000), ms(1010));
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    assert_eq!(named(&led), Some(ours(1010, 7, 1, 7)), "{led:?}");
    assert_eq!(spawned(&led), None, "{led:?}");
    // Not while that record is out, however much of the lease is left.
    for t in (1050..1990).step_by(50) {
        let actions = l.step(Input::Tick, ms(t));
        assert_eq!(spawned(&actions), None, "at {t}: {actions:?}");
    }
    // Read back: it starts, under the lease that record gives.
    let read = l.step(hb(8, 1010), ms(1990));
    assert!(
        read.contains(&Spawn {
            partition: P,
            token: 7,
            lease: ms(2010),
            attempt: Some(ours(1010, 7, 1, 7)),
            begin: None
        }),
        "{read:?}"
    );
}

#[test]
fn regression_a_waves_run_whose_naming_never_comes_back_runs_once_on_the_next_owner() {
    // C-10 for a wave: x leads at 1010 on its first record, and the record
    // naming its run never comes back (cut off from its partition's leader,
    // the group still its own). The run never starts there: x fences at its
    // lease's end (2000), not a run begun.
    let mut x = Leader::new(waves(false), started(0));
    x.step(assigned(), ms(1000));
    let mut out = x.step(hb(7, 1000), ms(1010));
    for t in (1050..2200).step_by(50) {
        out.extend(x.step(Input::Tick, ms(t)));
    }
    assert_eq!(named(&out), Some(ours(1010, 7, 1, 7)));
    assert_eq!(spawned(&out), None, "{out:?}");
    assert_eq!(x.standing(P), Standing::Fenced);
    // The next owner, of the same wave, runs it once: as its first attempt
    // if the naming never reached the topic (x's first record is all there
    // is), as its second if it did (x's run reads as cut short).
    let contending = record_of("x", 7, Some(1), None, Stance::Contending);
    let naming = Other {
        attempt: Some(ours(1010, 7, 1, 7)),
        ..record_of("x", 8, Some(1), Some(7), Stance::Leading { token: 7 })
    };
    for (read, runs) in
        [(vec![contending.clone()], ours(3010, 10, 1, 10)), (vec![contending, naming], ours(1010, 7, 2, 10))]
    {
        let mut next = Leader::new(waves(false), started(0));
        for other in read {
            next.step(Input::OtherHeartbeat(P, other), ms(1010));
        }
        next.step(assigned(), ms(3000));
        let actions = lead_and_name(&mut next, 10, 3000, 3010);
        let spawns: Vec<_> = actions.iter().filter(|a| matches!(a, Spawn { .. })).collect();
        assert_eq!((spawns.len(), spawned(&actions)), (1, Some(runs)), "{actions:?}");
    }
}

#[test]
fn a_member_whose_wave_already_ended_exits_as_it_comes_to_lead_naming_no_run() {
    // Its run succeeded, or failed under --failed-run exit: the member
    // exits with its status at once, with no record of its own naming a
    // run to wait for (nor for the next member to run again).
    for (code, retry_failed) in [(0, false), (0, true), (4, false)] {
        let ended = x_ran(500, 1, 3, Some(code));
        let mut l = Leader::new(waves(retry_failed), started(0));
        l.step(carrying(4, None, ended.clone()), ms(900));
        l.step(assigned(), ms(1000));
        let actions = l.step(hb(7, 1000), ms(1010));
        assert_eq!(actions.last(), Some(&Exit(code)), "{actions:?}");
        assert_eq!((named(&actions), spawned(&actions)), (None, None), "{actions:?}");
        assert_eq!(disclaimed(&actions), Some(ended), "it passes the ending on");
    }
}
