//! The scenarios of once per wave and of a schedule: which attempt runs,
//! which is never run again, and what the records say of them.

use crate::leader::fixtures::*;
use crate::leader::promote::HEAD_START;
use crate::leader::*;
use Action::*;

mod waves;

// Once per wave (`--restart never` with --once-within).

const WITHIN: Duration = Duration::from_millis(30_000);

fn waves(retry_failed: bool) -> Settings {
    Settings { waves: Some(Waves { within: WITHIN, retry_failed }), ..settings(Restart::Never) }
}

/// An attempt of the wave that began at `wave`, run by member "x".
fn x_ran(wave: u64, number: u32, token: i64, code: Option<u8>) -> Attempt {
    let by = Some(Runner { name: "x".into(), host: "h".into() });
    Attempt { wave_ms: wall(wave), wave_token: 0, number, token, code, by, due: None, ended: None, line: None }
}

/// The attempt this member starts: number `number` of the wave that began
/// at `wave` (with the token `wave_token`), under its own `token`.
fn ours(wave: u64, wave_token: i64, number: u32, token: i64) -> Attempt {
    Attempt { wave_ms: wall(wave), wave_token, number, token, code: None, by: None, due: None, ended: None, line: None }
}

/// Member x's record at `offset` carrying `attempt`: a claim with `token`, or
/// its disclaimer.
fn carrying(offset: i64, token: Option<i64>, attempt: Attempt) -> Input {
    let stance = token.map_or(Stance::Released, |token| Stance::Leading { token });
    Input::OtherHeartbeat(P, Other { attempt: Some(attempt), ..record_of("x", offset, Some(1), Some(0), stance) })
}

/// A member started at 0 that has read `read` (at 900, before its
/// assignment at 1000) and its own first record back at 1010 (offset 7),
/// then the record that names its run (`lead_and_name`).
fn wave_member(settings: Settings, read: Vec<Input>) -> (Leader, Vec<Action>) {
    let mut l = Leader::new(settings, started(0));
    for input in read {
        l.step(input, ms(900));
    }
    l.step(assigned(), ms(1000));
    let actions = lead_and_name(&mut l, 7, 1000, 1010);
    (l, actions)
}

/// Reads our record at `offset`, sent at `sent`, back at `at`: we lead.
/// Once per wave, unless that ends our wave (a run of it ended), the
/// record announcing our leadership names the wave's run, which starts
/// once that record (the next offset) is read back (C-10). Every action of
/// both steps.
fn lead_and_name(l: &mut Leader, offset: i64, sent: u64, at: u64) -> Vec<Action> {
    let led = l.step(hb(offset, sent), ms(at));
    let names = |a: &Action| matches!(a, SendHeartbeat(P, r) if r.attempt.as_ref().is_some_and(|j| j.token == offset && j.code.is_none()));
    if !led.iter().any(names) {
        return led;
    }
    let named = read_naming(l, &led, at, offset + 1);
    [led, named].concat()
}

fn spawned(actions: &[Action]) -> Option<Attempt> {
    actions.iter().find_map(|a| match a {
        Spawn { partition: P, attempt, .. } => {
            Some(attempt.clone().expect("once per wave: every spawn names its attempt"))
        }
        _ => None,
    })
}

fn disclaimed(actions: &[Action]) -> Option<Attempt> {
    actions.iter().find_map(|a| match a {
        Disclaim(P, record) => record.attempt.clone(),
        _ => None,
    })
}

// A schedule of its own (`--every`, `--cron`).

/// Due every `period_ms` of the wall clock, the missed ones run once.
fn scheduled(period_ms: u64) -> Settings {
    let calendar = every(period_ms);
    Settings { schedule: Some(Schedule::of(calendar)), ..settings(Restart::Never) }
}

/// As `scheduled(period_ms)`, its schedule changed by `with`.
fn scheduled_with(period_ms: u64, with: impl FnOnce(Schedule) -> Schedule) -> Settings {
    let settings = scheduled(period_ms);
    Settings { schedule: settings.schedule.clone().map(with), ..settings }
}

/// A leader due every 10 s with one retry a second after a failure, whose
/// first run failed (status 3) 300 ms after it started at `at`: the
/// leader, `at`, that run, and the next free offset.
fn failed_once() -> (Leader, u64, Attempt, i64) {
    let retry = Some(Retry { times: 1, delay: Duration::from_secs(1) });
    let mut l = Leader::new(scheduled_with(10_000, |s| Schedule { retry, ..s }), started(0));
    l.step(assigned(), ms(1000));
    let (actions, offset) = live(&mut l, 1000, 12_000, 6);
    let (at, first) = spawns(&actions)[0].clone();
    l.step(exited(ChildStatus::Exited(3)), ms(at + 300));
    (l, at, first, offset)
}

/// A leader's life from `from` to `to` (ms): its timer fires every 50 ms
/// and each record it writes is read back 5 ms later. Returns every action
/// with when it came, and the next free offset.
fn live(l: &mut Leader, from: u64, to: u64, mut offset: i64) -> (Vec<(u64, Action)>, i64) {
    let mut out = Vec::new();
    let mut t = from;
    while t < to {
        let mut pending = vec![(t, Input::Tick)];
        while let Some((at, input)) = pending.pop() {
            for action in l.step(input, ms(at)) {
                if let SendHeartbeat(P, _) = action {
                    offset += 1;
                    pending.push((at + 5, hb(offset, at)));
                }
                out.push((at, action));
            }
        }
        t += 50;
    }
    (out, offset)
}

/// Each run spawned: when its command starts (at its spawn, or at the
/// `begin` its shim waits for), and the run.
fn spawns(actions: &[(u64, Action)]) -> Vec<(u64, Attempt)> {
    actions
        .iter()
        .filter_map(|(t, a)| match a {
            Spawn { partition: P, attempt, begin, .. } => {
                let starts = begin.map_or(*t, |begin| begin.since(ms(0)).as_millis() as u64);
                Some((starts, attempt.clone().expect("a scheduled spawn names its run")))
            }
            _ => None,
        })
        .collect()
}

/// Reads back the record naming a run that `actions`, the step at `at`,
/// sent (`offset` its place): a schedule's run starts only then (C-10).
fn read_naming(l: &mut Leader, actions: &[Action], at: u64, offset: i64) -> Vec<Action> {
    let names = |a: &Action| matches!(a, SendHeartbeat(P, r) if r.attempt.as_ref().is_some_and(|j| j.code.is_none()));
    assert!(!actions.iter().any(|a| matches!(a, Spawn { .. })), "not started before it is read back: {actions:?}");
    if !actions.iter().any(names) {
        // A record of ours went out at `at` already: it is sent a
        // millisecond later, told apart from that one by its send time.
        let next = l.step(Input::Tick, ms(at + 1));
        assert!(next.iter().any(names), "a record names the run first: {actions:?} {next:?}");
    }
    l.step(hb(offset, at + 1), ms(at + 3))
}

#[test]
fn a_scheduled_leader_runs_each_due_time_and_leads_on_between_runs() {
    let mut l = Leader::new(scheduled(2000), started(0));
    l.step(assigned(), ms(1000));
    let (actions, offset) = live(&mut l, 1000, 7000, 6);
    let first_due = (wall(1000) / 2000 + 1) * 2000;
    // Not when it came to lead: at its first due time, on time.
    let starts = spawns(&actions);
    let (at, attempt) = starts.first().cloned().expect("a run");
    assert_eq!((starts.len(), attempt.due, attempt.number, attempt.code), (1, Some(first_due), 1, None), "{starts:?}");
    assert!(wall(at) >= first_due && wall(at) < first_due + 50, "{starts:?}");
    // Its shim spawned the head start ahead, to start the command at the
    // due time itself.
    let spawned = actions.iter().find(|(_, a)| matches!(a, Spawn { partition: P, .. })).map(|(t, _)| *t);
    assert_eq!(spawned, Some(at - HEAD_START.as_millis() as u64), "{actions:?}");
    // Named on the topic first (C-10): a record naming it was sent, and
    // read back (5 ms later here), before its shim was spawned.
    let named = actions.iter().find_map(|(t, a)| match a {
        SendHeartbeat(P, r) if r.attempt.as_ref().and_then(|j| j.due) == Some(first_due) => Some(*t),
        _ => None,
    });
    assert!(named.is_some_and(|t| t + 5 <= spawned.unwrap_or(0)), "{actions:?}");
    assert!(l.child_alive(P), "a run is counted only once it is over");
    assert_eq!(l.last_run(P).map(|j| (j.due, j.code)), Some((Some(first_due), None)), "metrics read the run");
    assert_eq!(l.next_due(P), planned(first_due + 2000), "while it runs, its records plan the next due time");
    // It ends by itself: the record says so at once, and plans the next.
    let ended = l.step(exited(ChildStatus::Exited(3)), ms(at + 300));
    assert!(!l.child_alive(P));
    let record = ended.iter().find_map(|a| match a {
        SendHeartbeat(P, r) => Some(r.clone()),
        _ => None,
    });
    let record = record.expect("the ending is written at once");
    let attempt = record.attempt.expect("it names the run");
    assert_eq!((attempt.code, attempt.ended), (Some(3), Some(wall(at + 300))), "{ended:?}");
    assert_eq!(record.next, planned(first_due + 2000), "and the next due time");
    assert!(!ended.iter().any(|a| matches!(a, Exit(_))), "a schedule leads on: {ended:?}");
    let (more, _) = live(&mut l, at + 300, 9000, offset + 100);
    let next = spawns(&more);
    assert_eq!(next.first().map(|(_, j)| j.due), Some(Some(first_due + 2000)), "{next:?}");
    assert!(wall(next[0].0) < first_due + 2050, "on time: {next:?}");
}

#[test]
fn a_failed_run_is_retried_after_its_delay_as_the_next_attempt_and_no_more_than_asked() {
    let (mut l, at, first, offset) = failed_once();
    assert_eq!(l.next_due(P), retrying(wall(at + 1300)), "the retry is what comes next");
    let (actions, offset) = live(&mut l, at + 300, at + 3000, offset + 100);
    let retries = spawns(&actions);
    let [(retried_at, retry)] = &retries[..] else { panic!("one retry: {retries:?}") };
    assert_eq!((retry.due, retry.number), (first.due, 2), "the same due time, attempt 2");
    assert!(*retried_at >= at + 1300 && *retried_at < at + 1400, "after the delay: {retries:?}");
    // It fails again: one retry was asked for, so the next due time is next.
    l.step(exited(ChildStatus::Exited(3)), ms(retried_at + 100));
    let next_due = first.due.unwrap() + 10_000;
    assert_eq!(l.next_due(P), planned(next_due));
    let (actions, _) = live(&mut l, retried_at + 100, at + 10_100, offset + 100);
    let next = spawns(&actions);
    assert_eq!(next.iter().map(|(_, j)| (j.due, j.number)).collect::<Vec<_>>(), [(Some(next_due), 1)]);
}

#[test]
fn a_retry_under_way_stays_ours_when_a_late_copy_of_the_failure_it_retries_comes() {
    let (mut l, at, first, offset) = failed_once();
    let (actions, offset) = live(&mut l, at + 300, at + 1500, offset + 100);
    let [(_, retry)] = &spawns(&actions)[..] else { panic!("one retry: {actions:?}") };
    // Another member's record carries attempt 1's failure (a late copy).
    let failure =
        Attempt { due: first.due, number: 1, code: Some(3), ended: Some(wall(at + 300)), ..x_ran(0, 1, 5, None) };
    l.step(carrying(offset + 1, None, failure), ms(at + 1500));
    // The retry succeeds: that is what the records say, and nothing runs
    // its due time again.
    l.step(exited(ChildStatus::Exited(0)), ms(at + 1600));
    assert_eq!(l.last_run(P).map(|j| (j.due, j.number, j.code)), Some((retry.due, 2, Some(0))));
    let (actions, _) = live(&mut l, at + 1600, at + 9000, offset + 200);
    assert_eq!(spawns(&actions), vec![], "not before the next due time");
}

#[test]
fn a_retry_another_member_ran_and_recorded_is_not_run_again() {
    let (mut l, at, first, offset) = failed_once();
    // While our retry waits, a record says attempt 2 ran and failed too.
    let second =
        Attempt { due: first.due, number: 2, code: Some(3), ended: Some(wall(at + 500)), ..x_ran(0, 2, 5, None) };
    l.step(carrying(offset + 1, None, second), ms(at + 600));
    let (actions, _) = live(&mut l, at + 600, at + 9000, offset + 100);
    assert_eq!(spawns(&actions), vec![], "its one retry was run: nothing before the next due time");
}

#[test]
fn overlap_replace_stops_a_run_at_its_next_due_time_and_runs_that_one() {
    // (A period off the heartbeats' 200 ms grid: woken for the due time.)
    let settings = scheduled_with(2050, |s| Schedule { overlap: Some(Overlap::Replace), ..s });
    let mut l = Leader::new(settings, started(0));
    l.step(assigned(), ms(1000));
    let (actions, offset) = live(&mut l, 1000, 4000, 6);
    let (at, first) = spawns(&actions)[0].clone();
    let next_due = first.due.unwrap() + 2050;
    // The run goes on past its next due time: stopped then, not before
    // (the shell is woken for it, between heartbeats).
    let replace_at = at + next_due - wall(at);
    let (_, mut offset) = live(&mut l, at + 50, replace_at - 600, offset + 100);
    for t in (replace_at - 600..replace_at).step_by(50) {
        (_, offset) = live(&mut l, t, t + 50, offset);
        assert!(l.next_deadline().is_some_and(|d| d <= ms(replace_at)), "at {t}: {:?}", l.next_deadline());
    }
    let (actions, offset) = live(&mut l, replace_at, at + 2500, offset + 100);
    let stops: Vec<u64> =
        actions.iter().filter(|(_, a)| matches!(a, SignalGroup(P, _))).map(|(t, _)| wall(*t)).collect();
    assert!(matches!(stops[..], [t] if t >= next_due && t < next_due + 50), "{stops:?} (due {next_due})");
    assert_eq!(spawns(&actions), vec![], "not while the run lives");
    // Its exit ends it (not a run cut short: not run again), and the due
    // time that replaced it runs at once.
    l.step(exited(ChildStatus::Exited(143)), ms(at + 2500));
    assert_eq!(l.last_run(P).map(|j| (j.due, j.code)), Some((first.due, Some(143))));
    // (At once: once a heartbeat sent after the ending is read back.)
    let (actions, _) = live(&mut l, at + 2500, at + 3100, offset + 100);
    let next = spawns(&actions);
    assert_eq!(next.iter().map(|(_, j)| (j.due, j.number)).collect::<Vec<_>>(), [(Some(next_due), 1)]);
}

#[test]
fn overlap_replace_lets_a_run_that_catches_up_live_until_a_due_time_after_its_start() {
    // x ran a due time three periods ago (ended), and nobody ran the two
    // since: missed, so ours runs the older at once, its next due time past.
    let period = 2050;
    let settings = scheduled_with(period, |s| Schedule { overlap: Some(Overlap::Replace), missed: Missed::All, ..s });
    let last_due = wall(900) / period * period - 3 * period;
    let ended = Attempt { due: Some(last_due), ended: Some(last_due + 10), ..x_ran(0, 1, 3, Some(0)) };
    let (mut l, actions) = wave_member(settings, vec![carrying(4, None, ended)]);
    let run = spawned(&actions).expect("the missed due time runs at once");
    assert_eq!(run.due, Some(last_due + period), "{actions:?}");
    assert!(!actions.iter().any(|a| matches!(a, SignalGroup(P, _))), "not stopped at birth: {actions:?}");
    // Stopped at the first due time after it started, not before.
    let (actions, _) = live(&mut l, 1010, 1010 + period + 100, 8);
    let stops: Vec<u64> =
        actions.iter().filter(|(_, a)| matches!(a, SignalGroup(P, _))).map(|(t, _)| wall(*t)).collect();
    let next = (wall(1010) / period + 1) * period;
    assert!(matches!(stops[..], [t] if t >= next && t < next + 50), "{stops:?} (next due {next})");
}

#[test]
fn a_due_time_missed_during_a_run_starts_once_its_ending_is_read_back() {
    let mut l = Leader::new(scheduled(2000), started(0));
    l.step(assigned(), ms(1000));
    let (actions, _) = live(&mut l, 1000, 4000, 6);
    let (at, attempt) = spawns(&actions)[0].clone();
    // The run takes 2.5 s: the next due time passes meanwhile.
    let end = at + 2500;
    for t in (at + 50..end).step_by(50) {
        for a in l.step(Input::Tick, ms(t)) {
            if let SendHeartbeat(P, _) = a {
                l.step(hb(100 + t as i64, t), ms(t + 5));
            }
        }
    }
    let ended = l.step(exited(ChildStatus::Exited(0)), ms(end));
    assert!(ended.iter().any(|a| matches!(a, SendHeartbeat(P, _))), "{ended:?}");
    assert!(
        !ended.iter().any(|a| matches!(a, Spawn { partition: P, .. })),
        "not before the ending is on the partition: {ended:?}"
    );
    // A record sent before the ending (or in the same step, before it)
    // proves nothing; one sent after it does.
    assert_eq!(l.step(hb(1000, end), ms(end + 2)), vec![]);
    let read = l.step(hb(1001, end + 1), ms(end + 5));
    let read = read_naming(&mut l, &read, end + 5, 1002);
    let missed = spawns(&read.into_iter().map(|a| (end + 8, a)).collect::<Vec<_>>());
    assert_eq!(missed.len(), 1, "the missed due time runs at once");
    assert_eq!(missed[0].1.due, Some(attempt.due.unwrap() + 2000));
}

/// A member that read x's record naming the run of due time `due`, cut
/// short (`code` None) or ended, and came to lead at 1010.
fn next_leader(due: u64, code: Option<u8>) -> (Leader, Vec<Action>) {
    let run = Attempt { due: Some(due), ..x_ran(500, 1, 3, code) };
    wave_member(scheduled(60_000), vec![carrying(5, None, run)])
}

#[test]
fn the_next_leader_runs_a_cut_short_run_again_and_an_ended_one_never() {
    let due = wall(1010) / 60_000 * 60_000;
    let (_, actions) = next_leader(due, None);
    let retry = spawned(&actions).expect("the cut-short run starts again at once");
    assert_eq!((retry.due, retry.number, retry.wave_ms), (Some(due), 2, wall(1010)), "{retry:?}");
    let (mut l, actions) = next_leader(due, Some(0));
    assert_eq!(spawned(&actions), None, "{actions:?}");
    assert_eq!(l.next_deadline(), Some(ms(1210)), "only its heartbeat is due before the next run");
    let next = actions.iter().find_map(|a| match a {
        SendHeartbeat(P, r) => r.next,
        _ => None,
    });
    assert_eq!(next, planned(due + 60_000), "its records plan the next due time");
    assert!(!l.step(Input::Tick, ms(1210)).iter().any(|a| matches!(a, Spawn { partition: P, .. })));
}

/// Found by neli-soak on tansu: a member whose run of a due time ended
/// (its ending delivered late, after a cut) then read another member's
/// record naming a later attempt at the same due time, started before the
/// ending landed and cut short. The ending is final: the due time must not
/// run again.
#[test]
fn a_due_time_that_ended_stays_ended_whatever_later_attempt_is_read() {
    let due = wall(1010) / 60_000 * 60_000;
    let ended = Attempt { due: Some(due), ended: Some(due + 500), ..x_ran(500, 1, 3, Some(0)) };
    let cut = Attempt { due: Some(due), ..x_ran(900, 2, 5, None) };
    for order in [[ended.clone(), cut.clone()], [cut, ended]] {
        let read = order.into_iter().enumerate().map(|(i, attempt)| carrying(6 + i as i64, None, attempt)).collect();
        let (l, actions) = wave_member(scheduled(60_000), read);
        assert_eq!(spawned(&actions), None, "the due time ended: not run again: {actions:?}");
        assert_eq!(l.last_run(P).map(|j| (j.token, j.code)), Some((3, Some(0))), "the ending is kept");
    }
}

#[test]
fn which_run_says_more() {
    let (d, later) = (Some(60_000u64), Some(120_000u64));
    // The same run read again says nothing new (our own copy, naming no
    // runner, stays ours, whatever copy another member carries).
    assert!(!supersedes((3, d, 1, Some(0)), (3, d, 1, Some(0))));
    assert!(!supersedes((3, d, 1, None), (3, d, 1, None)));
    // Its ending does, and a later due time does, whatever the tokens.
    assert!(supersedes((3, d, 1, Some(0)), (3, d, 1, None)));
    assert!(supersedes((3, later, 1, None), (4, d, 2, Some(0))));
    // A success is final for its due time, even over a later attempt
    // begun before it landed; so is any ending over an attempt that did
    // not end; of two attempts, the later, then the newer.
    assert!(!supersedes((5, d, 2, None), (3, d, 1, Some(0))));
    assert!(!supersedes((5, d, 2, Some(1)), (3, d, 1, Some(0))));
    assert!(!supersedes((5, d, 3, None), (3, d, 2, Some(143))));
    assert!(supersedes((5, d, 1, None), (3, d, 1, None)));
    assert!(supersedes((5, d, 3, None), (3, d, 2, None)));
    // A failure's retry (under one token, or the next owner's) over it
    // once it ended, and a late copy of an earlier ending never over a
    // later one.
    assert!(!supersedes((3, d, 2, None), (3, d, 1, Some(1))));
    assert!(supersedes((3, d, 2, Some(1)), (3, d, 1, Some(1))));
    assert!(supersedes((5, d, 3, Some(0)), (3, d, 2, Some(1))));
    assert!(!supersedes((2, d, 1, Some(1)), (5, d, 3, Some(1))));
    // A wave's run and a schedule's (members started with other flags):
    // the newer token, as for waves.
    assert!(!supersedes((5, d, 1, Some(0)), (9, None, 1, Some(0))));
    assert!(supersedes((9, None, 1, None), (5, d, 1, Some(0))));
    // Waves: the newer attempt, even over a success (a failure is retried).
    assert!(supersedes((4, None::<u64>, 2, None), (3, None, 1, Some(1))));
    assert!(!supersedes((3, None::<u64>, 1, None), (3, None, 1, Some(0))));
}

#[test]
fn due_times_that_pass_while_paused_are_missed_and_run_once_on_resume() {
    let pause = |offset, paused| Pause { offset, paused, stop: false, at_ms: 0, by: Asker::default() };
    let mut l = Leader::new(scheduled(2000), started(0));
    l.step(assigned(), ms(1000));
    let (actions, offset) = live(&mut l, 1000, 2100, 6);
    assert_eq!(spawns(&actions).iter().map(|(at, _)| *at).collect::<Vec<_>>(), vec![2000]);
    l.step(exited(ChildStatus::Exited(0)), ms(2100));
    let (_, offset) = live(&mut l, 2100, 2500, offset + 1);
    l.step(Input::Pause(P, pause(offset + 1, true)), ms(2500));
    // Three due times pass: none starts, the leader leads on.
    let (actions, offset) = live(&mut l, 2500, 8100, offset + 2);
    assert!(spawns(&actions).is_empty(), "{actions:?}");
    assert!(matches!(l.standing(P), Standing::Leader { .. }));
    // Resumed: --missed once runs the latest of them at once, then the
    // next one on time.
    let resumed = l.step(Input::Pause(P, pause(offset + 1, false)), ms(8100));
    let resumed = read_naming(&mut l, &resumed, 8100, offset + 2);
    let begins: Vec<_> =
        resumed.iter().filter_map(|a| if let Spawn { begin, .. } = a { Some(*begin) } else { None }).collect();
    assert_eq!(begins, [None], "a missed run's command starts with its shim, at once: {resumed:?}");
    let runs = spawns(&resumed.into_iter().map(|a| (8100, a)).collect::<Vec<_>>());
    assert_eq!(runs.iter().map(|(_, j)| j.due).collect::<Vec<_>>(), vec![Some(wall(8000))], "{runs:?}");
    l.step(exited(ChildStatus::Exited(0)), ms(8200));
    let (actions, _) = live(&mut l, 8200, 10_100, offset + 2);
    let runs = spawns(&actions);
    assert_eq!(runs.iter().map(|(at, j)| (*at, j.due)).collect::<Vec<_>>(), vec![(10_000, Some(wall(10_000)))]);
}

/// Both clocks read at `boot` ms after boot, the wall clock `step` ms off
/// the one we started with (`started(0)`).
fn read(boot: u64, step: i64) -> Anchor {
    Anchor { boot: ms(boot), wall_ms: wall(boot).checked_add_signed(step).unwrap() }
}

#[test]
fn due_times_follow_the_wall_clock_when_it_steps_forward_or_back_and_none_runs_twice() {
    let mut l = Leader::new(scheduled(2000), started(0));
    l.step(assigned(), ms(1000));
    let (actions, offset) = live(&mut l, 1000, 2300, 6);
    assert_eq!(spawns(&actions).iter().map(|(at, j)| (*at, j.due)).collect::<Vec<_>>(), vec![(2000, Some(wall(2000)))]);
    l.step(exited(ChildStatus::Exited(0)), ms(2300));
    let (_, offset) = live(&mut l, 2300, 2500, offset + 1);
    // A reading within 100 ms of our frame is no step.
    l.wall_clock(read(2500, 99));
    assert_eq!(l.wall_ms_at(ms(2500)), wall(2500));
    // The wall clock steps 1 s forward at 2500: the due time 4000 (by the
    // wall clock we started with) comes at 3000.
    l.wall_clock(read(2500, 1000));
    assert_eq!(l.next_due(P), planned(wall(4000)), "the same due time, on the wall clock");
    let (actions, offset) = live(&mut l, 2500, 3300, offset + 1);
    let runs = spawns(&actions);
    assert_eq!(runs.iter().map(|(at, j)| (*at, j.due)).collect::<Vec<_>>(), vec![(3000, Some(wall(4000)))]);
    // Written in the new frame: it started at its due time (the send time
    // beside it says the same), and ended 300 ms later.
    assert_eq!(runs[0].1.wave_ms, wall(4000));
    let ended = l.step(exited(ChildStatus::Exited(0)), ms(3300));
    // (The step's newest record: a heartbeat due then may come first.)
    let ending = ended.iter().rev().find_map(|a| match a {
        SendHeartbeat(P, r) => r.attempt.clone(),
        _ => None,
    });
    assert_eq!(ending.and_then(|j| j.ended), Some(wall(4300)));
    let (_, offset) = live(&mut l, 3300, 3500, offset + 1);
    // Then 3 s back at 3500 (the wall clock reads 1500 of our start's
    // frame): the due time 4000 it already ran lies ahead again, and does
    // not run again; nor does 2000. The next is 6000, at 8000.
    l.wall_clock(read(3500, -2000));
    assert_eq!(l.next_due(P), planned(wall(6000)));
    let (actions, _) = live(&mut l, 3500, 8100, offset + 1);
    let runs = spawns(&actions);
    assert_eq!(runs.iter().map(|(at, j)| (*at, j.due)).collect::<Vec<_>>(), vec![(8000, Some(wall(6000)))]);
}

#[test]
fn due_times_a_forward_step_passes_over_are_missed_and_follow_missed() {
    // The run of 2000 ended at 2300; at 2500 the wall clock steps 5 s
    // forward: 4000 and 6000 passed while we were ready to run them.
    let run = |missed| {
        let settings = Settings {
            schedule: Some(Schedule {
                calendar: every(2000),
                missed,
                starting_deadline: None,
                retry: None,
                overlap: None,
                since: None,
                line: None,
            }),
            ..settings(Restart::Never)
        };
        let mut l = Leader::new(settings, started(0));
        l.step(assigned(), ms(1000));
        let (_, offset) = live(&mut l, 1000, 2300, 6);
        l.step(exited(ChildStatus::Exited(0)), ms(2300));
        let (_, offset) = live(&mut l, 2300, 2500, offset + 1);
        l.wall_clock(read(2500, 5000));
        let (actions, _) = live(&mut l, 2500, 2600, offset + 1);
        spawns(&actions).iter().map(|(at, j)| (*at, j.due.map(|d| d - WALL))).collect::<Vec<_>>()
    };
    // (At once: as soon as a record sent after the last run's ending is
    // read back, at 2505, and then the one naming the run, at 2510.)
    assert_eq!(run(Missed::Once), vec![(2510, Some(6000))], "the latest, at once");
    assert_eq!(run(Missed::All), vec![(2510, Some(4000))], "the oldest first, at once");
    assert_eq!(run(Missed::Skip), vec![], "the next, 8000, at 3000");
}

#[test]
fn a_member_started_before_its_clock_was_set_places_waves_by_the_clock_as_set() {
    // Started with the wall clock an hour behind (before NTP's first sync),
    // which is set right at 500; then it reads a success of a wave begun at
    // 300 by a host whose clock was right. It started before that wave (by
    // the clocks as set): the wave is its own, and covered.
    let wave = || carrying(4, None, x_ran(300, 1, 3, Some(0)));
    let behind = Anchor { boot: ms(0), wall_ms: wall(0) - 3_600_000 };
    let mut l = Leader::new(waves(false), behind);
    l.wall_clock(read(500, 0));
    l.step(wave(), ms(900));
    l.step(assigned(), ms(1000));
    assert_eq!(l.step(hb(7, 1000), ms(1010)).last(), Some(&Exit(0)));
    // Without the step, the wave would seem to begin an hour in its future
    // (a clock ahead's), and it would run a wave of its own.
    let mut l = Leader::new(waves(false), behind);
    l.step(wave(), ms(900));
    l.step(assigned(), ms(1000));
    assert_eq!(spawned(&lead_and_name(&mut l, 7, 1000, 1010)).map(|j| j.number), Some(1));
}

#[test]
fn a_wave_read_under_a_schedule_does_not_make_it_forget_its_newest_due_time() {
    // The run of due time `due` ended on a host whose clock is ahead of
    // ours (or ours stepped back); then a member started with other flags
    // writes a wave's attempt, under a newer token. The due time stays
    // run: the next is the one after it, not `due` again.
    let due = (wall(1010) / 60_000 + 1) * 60_000;
    let ran = Attempt { due: Some(due), ended: Some(due + 500), ..x_ran(500, 1, 3, Some(0)) };
    let wave = x_ran(900, 1, 4, Some(0));
    let (l, actions) = wave_member(scheduled(60_000), vec![carrying(5, None, ran), carrying(6, None, wave)]);
    assert_eq!(spawned(&actions), None, "{actions:?}");
    assert_eq!(l.last_run(P).map(|j| j.due), Some(Some(due)));
    assert_eq!(l.next_due(P), planned(due + 60_000));
}

#[test]
fn a_run_asked_to_stop_that_exits_0_has_ended_and_any_other_ending_runs_again() {
    for (status, ended) in
        [(ChildStatus::Exited(0), true), (ChildStatus::Exited(143), false), (ChildStatus::Signaled(15), false)]
    {
        let mut l = Leader::new(scheduled(2000), started(0));
        l.step(assigned(), ms(1000));
        let (actions, _) = live(&mut l, 1000, 3500, 6);
        let (at, _) = spawns(&actions).first().cloned().expect("a run");
        // A rebalance takes the partition mid-run; the command's exit is
        // heard after the stop signal went (it may have come before).
        assert_eq!(l.step(revoked(false), ms(at + 100)), vec![SignalGroup(P, SIGTERM)]);
        let out = l.step(exited(status), ms(at + 120));
        let said = out.iter().find_map(|a| match a {
            Disclaim(P, r) => r.attempt.clone(),
            _ => None,
        });
        let said = said.expect("the disclaimer names the run");
        assert_eq!(said.code.is_some(), ended, "{status:?}: {out:?}");
        assert!(out.contains(&ReleaseRevoke(P)), "{out:?}");
    }
}

/// A next run at `at_ms` (wall clock), of a due time.
fn planned(at_ms: u64) -> Option<NextRun> {
    Some(NextRun { at_ms, retry: false })
}

/// A next run at `at_ms` (wall clock), a failed run's retry.
fn retrying(at_ms: u64) -> Option<NextRun> {
    Some(NextRun { at_ms, retry: true })
}

/// Whether `action` is a record naming the run due `due`, not ended.
fn names_run(action: &Action, due: u64) -> bool {
    matches!(action, SendHeartbeat(P, r) if r.attempt.as_ref().is_some_and(|j| j.due == Some(due) && j.code.is_none()))
}

#[test]
fn regression_a_run_whose_naming_never_reaches_the_topic_never_starts() {
    // C-10, on the dev broker's cluster: a member cut off from its job's
    // partition leader still held a lease, started the run due 1.9 s after
    // the cut, and neither its start nor its end reached the topic: the
    // next owner ran it again. Here our records stop coming back at 1700,
    // with the lease good until 2600 and the run due at 2000.
    let mut l = Leader::new(scheduled(2000), started(0));
    l.step(assigned(), ms(1000));
    let due = (wall(1000) / 2000 + 1) * 2000;
    let (mut out, mut offset) = (Vec::new(), 6);
    for t in (1000..3000).step_by(50) {
        for action in l.step(Input::Tick, ms(t)) {
            if let (SendHeartbeat(P, _), true) = (&action, t < 1700) {
                offset += 1;
                out.extend(l.step(hb(offset, t), ms(t + 5)));
            }
            out.push(action);
        }
    }
    assert!(out.iter().any(|a| names_run(a, due)), "named: {out:?}");
    assert!(!out.iter().any(|a| matches!(a, Spawn { .. })), "never started: {out:?}");
    assert_eq!(l.standing(P), Standing::Fenced, "and fenced at its lease's end");
}

#[test]
fn a_record_sent_in_the_step_before_a_run_was_named_does_not_start_it() {
    // A resume writes a record at once (4100), and in the same step the run
    // missed while paused is decided: the record naming it goes out a
    // millisecond later, and only it starts the run.
    let pause = |offset, paused| Pause { offset, paused, stop: false, at_ms: 0, by: Asker::default() };
    let mut l = Leader::new(scheduled(2000), started(0));
    l.step(assigned(), ms(1000));
    let (_, offset) = live(&mut l, 1000, 2100, 6);
    l.step(exited(ChildStatus::Exited(0)), ms(2100));
    let (_, offset) = live(&mut l, 2100, 2500, offset + 1);
    l.step(Input::Pause(P, pause(offset + 1, true)), ms(2500));
    let (_, offset) = live(&mut l, 2500, 4100, offset + 2);
    let due = wall(4000);
    let resumed = l.step(Input::Pause(P, pause(offset + 1, false)), ms(4100));
    assert!(resumed.iter().any(|a| matches!(a, SendHeartbeat(P, _))), "{resumed:?}");
    assert!(!resumed.iter().any(|a| names_run(a, due)), "{resumed:?}");
    let named = l.step(Input::Tick, ms(4101));
    assert!(named.iter().any(|a| names_run(a, due)), "{named:?}");
    let early = l.step(hb(offset + 2, 4100), ms(4102));
    assert!(!early.iter().any(|a| matches!(a, Spawn { .. })), "the record before the naming: {early:?}");
    let read = l.step(hb(offset + 3, 4101), ms(4103));
    assert_eq!(spawned(&read).map(|j| j.due), Some(Some(due)), "{read:?}");
}
