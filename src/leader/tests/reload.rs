//! A fleet crontab read again (`Leader::set_jobs`): a job whose line
//! changed runs by the new line from its first due time after the reload,
//! whatever `missed=` says; none of the new line's due times before the
//! reload runs, on the member that read it nor on a member that takes the
//! job over after it, nor on one started with the new file (each run's
//! records name the line it ran by). A job whose line stayed keeps its due
//! times exactly.

use std::collections::BTreeMap;

use super::*;

/// Our job's partition ("billing"); P holds "steady" when a test gives it one.
const Q: Partition = 1;

/// A day of 10 s whose due time is `at` ms into it (on the wall clock,
/// from the epoch: WALL is a multiple of the day): a daily job, shortened.
#[derive(Debug)]
struct Daily {
    at: u64,
}

const DAY: u64 = 10_000;

impl Calendar for Daily {
    fn after(&self, ms: u64) -> Option<u64> {
        let today = ms - ms % DAY + self.at;
        Some(if today > ms { today } else { today + DAY })
    }

    fn at_or_before(&self, ms: u64) -> Option<u64> {
        let today = ms - ms % DAY + self.at;
        Some(if today <= ms { today } else { today - DAY })
    }
}

fn daily(at: u64) -> std::sync::Arc<dyn Calendar> {
    std::sync::Arc::new(Daily { at })
}

/// Job `name` due by `calendar` (written `when`), missed ones by `missed`.
fn job(name: &str, when: &str, calendar: std::sync::Arc<dyn Calendar>, missed: Missed) -> Job {
    let schedule =
        Schedule { calendar, missed, starting_deadline: None, retry: None, overlap: None, since: None, line: None };
    Job { name: name.into(), schedule: Schedule { line: Some(when.into()), ..schedule }, max_runtime: None }
}

/// A member of a crontab of `jobs`, which leads P and Q from 1010 (tokens
/// 7 and 20).
fn leading(jobs: &[(Partition, Job)]) -> Leader {
    let jobs: BTreeMap<Partition, Job> = jobs.iter().cloned().collect();
    let settings = Settings { roles: 2, jobs: Some(jobs), ..settings(Restart::Never) };
    let mut l = Leader::new(settings, started(0));
    for partition in [P, Q] {
        l.step(Input::Assigned { partition }, ms(1000));
        l.step(
            Input::OwnHeartbeat { partition, offset: 7 + 13 * i64::from(partition), sent: ms(1000), more: false },
            ms(1010),
        );
    }
    assert_eq!((l.standing(P), l.standing(Q)), (Standing::Leader { token: 7 }, Standing::Leader { token: 20 }));
    l
}

/// A run started: its partition, its due time and when its command began
/// (ms after boot, as `wall` counts).
type Started = (Partition, u64, u64);

/// `crontab::run`: the runs started.
fn run(l: &mut Leader, from: u64, to: u64) -> Vec<Started> {
    let spawned = super::crontab::run(l, from, to).into_iter().filter_map(|action| match action {
        Spawn { partition, attempt: Some(attempt), .. } => Some((partition, attempt)),
        _ => None,
    });
    spawned.map(|(p, attempt)| (p, attempt.due.expect("a due time") - WALL, attempt.wave_ms - WALL)).collect()
}

/// The due times of the runs on `partition`, each checked to have begun
/// at its due time (none caught up late).
fn on_time(started: &[Started], partition: Partition) -> Vec<u64> {
    let on = started.iter().filter(|(p, _, _)| *p == partition);
    on.inspect(|(_, due, began)| assert_eq!(due, began, "late: {started:?}")).map(|(_, due, _)| *due).collect()
}

#[test]
fn a_line_changed_to_a_shorter_period_runs_from_its_first_due_time_after_the_reload_whatever_missed_says() {
    for missed in [Missed::Once, Missed::Skip, Missed::All] {
        // Every 4 s: due at 4000 and 8000; at 7500 it becomes every second,
        // whose 5000, 6000 and 7000 passed before the reload.
        let mut l = leading(&[(Q, job("billing", "@every 4s", every(4000), missed))]);
        assert_eq!(on_time(&run(&mut l, 1100, 7500), Q), vec![4000], "{missed:?}");
        l.set_jobs(BTreeMap::from([(Q, job("billing", "@every 1s", every(1000), missed))]), ms(7500));
        assert_eq!(l.next_due(Q).map(|n| n.at_ms), Some(wall(8000)), "{missed:?}: planned and recorded");
        assert_eq!(on_time(&run(&mut l, 7500, 10_100), Q), vec![8000, 9000, 10_000], "{missed:?}");
    }
}

#[test]
fn a_daily_time_moved_earlier_past_the_reload_waits_for_the_next_day_and_one_moved_later_runs_that_day() {
    for missed in [Missed::Once, Missed::Skip, Missed::All] {
        // Daily at 3000; on day 1, at 12500, moved to 2000 (12000 passed):
        // next 22000. Read again unchanged at 12600: still not 12000.
        let mut l = leading(&[(Q, job("billing", "0 3 * * *", daily(3000), missed))]);
        assert_eq!(on_time(&run(&mut l, 1100, 5000), Q), vec![3000], "{missed:?}");
        assert!(run(&mut l, 5000, 12_500).is_empty());
        l.set_jobs(BTreeMap::from([(Q, job("billing", "0 2 * * *", daily(2000), missed))]), ms(12_500));
        l.set_jobs(BTreeMap::from([(Q, job("billing", "0 2 * * *", daily(2000), missed))]), ms(12_600));
        assert_eq!(on_time(&run(&mut l, 12_500, 22_100), Q), vec![22_000], "{missed:?}: earlier");
        // Moved to 4000 at 12500: 14000 that day, once (not 4000 of day 0,
        // nor 13000 of the old line).
        let mut l = leading(&[(Q, job("billing", "0 3 * * *", daily(3000), missed))]);
        assert_eq!(on_time(&run(&mut l, 1100, 12_500), Q), vec![3000], "{missed:?}");
        l.set_jobs(BTreeMap::from([(Q, job("billing", "0 4 * * *", daily(4000), missed))]), ms(12_500));
        assert_eq!(on_time(&run(&mut l, 12_500, 23_800), Q), vec![14_000], "{missed:?}: later");
    }
}

#[test]
fn a_job_whose_line_stayed_keeps_every_due_time_across_the_reload_and_still_runs_one_missed_before_it() {
    // "steady" on P, every second, unchanged; "billing" on Q changes.
    let steady = || job("steady", "@every 1s", every(1000), Missed::Once);
    let mut l = leading(&[(P, steady()), (Q, job("billing", "@every 4s", every(4000), Missed::Once))]);
    let mut runs = run(&mut l, 1100, 7500);
    l.set_jobs(BTreeMap::from([(P, steady()), (Q, job("billing", "@every 1s", every(1000), Missed::Once))]), ms(7500));
    runs.extend(run(&mut l, 7500, 10_100));
    assert_eq!(on_time(&runs, P), (2..=10).map(|s| s * 1000).collect::<Vec<u64>>(), "each once, none skipped");
    assert_eq!(on_time(&runs, Q), vec![4000, 8000, 9000, 10_000]);
    // A member that read the same file again takes "steady" over at 7800,
    // its records' newest run due 5000: 6000 and 7000 were missed by
    // nobody's change, and the latest runs at once (`missed=latest`).
    let settings = Settings { roles: 2, jobs: Some(BTreeMap::from([(P, steady())])), ..settings(Restart::Never) };
    let mut next = Leader::new(settings, started(0));
    next.set_jobs(BTreeMap::from([(P, steady())]), ms(7500));
    let out = take_over(&mut next, P, (5000, Some("@every 1s")), 7800);
    assert_eq!(out, vec![(P, 7000, 7810)], "the missed one, at once");
}

/// `l` reads on `partition`, 100 ms before `at`, another member's record
/// naming the run due `due` (ended) by `line` (None: a record of before
/// lines), then is assigned the partition at `at` and leads; returns the
/// runs started then.
fn take_over(l: &mut Leader, partition: Partition, (due, line): (u64, Option<&str>), at: u64) -> Vec<Started> {
    let ran = Attempt {
        wave_ms: wall(due),
        wave_token: 3,
        number: 1,
        token: 3,
        code: Some(0),
        by: Some(Runner { name: "old".into(), host: "h".into() }),
        due: Some(wall(due)),
        ended: Some(wall(due + 50)),
        line: line.map(str::to_owned),
    };
    let record = Other { attempt: Some(ran), ..record_of("old/1", 5, Some(1), Some(3), Stance::Released) };
    l.step(Input::OtherHeartbeat(partition, record), ms(at - 100));
    l.step(Input::Assigned { partition }, ms(at));
    let mut started = Vec::new();
    let mut actions = l.step(Input::OwnHeartbeat { partition, offset: 40, sent: ms(at), more: false }, ms(at + 10));
    // A run due at once is named first (a millisecond later: a record went
    // out as we led), and starts once that record is read back.
    actions.extend(l.step(Input::Tick, ms(at + 11)));
    if actions.iter().any(|a| matches!(a, SendHeartbeat(..))) {
        actions
            .extend(l.step(Input::OwnHeartbeat { partition, offset: 41, sent: ms(at + 11), more: false }, ms(at + 12)));
    }
    for action in actions {
        if let Spawn { partition, attempt: Some(attempt), .. } = action {
            started.push((partition, attempt.due.expect("a due time") - WALL, attempt.wave_ms - WALL));
            l.step(Input::ChildExited(partition, ChildStatus::Exited(0)), ms(at + 12));
        }
    }
    started
}

#[test]
fn a_member_that_takes_a_changed_job_over_after_the_reload_counts_from_the_reload_too() {
    let old_line = Some("@every 4s");
    for (missed, at, line, first) in [
        (Missed::Once, 7600, old_line, 8000),
        (Missed::Skip, 7600, old_line, 8000),
        (Missed::All, 7600, old_line, 8000),
        (Missed::Once, 9500, None, 9000),
        (Missed::Once, 9500, old_line, 10_000),
    ] {
        // The old owner ran 4000 by "@every 4s"; we read the file again at
        // 7500 ("@every 1s") and take the job over at `at`: not 5000 to
        // 7000, which were no due times when they passed. 9000 passed after
        // the reload with nobody to run it: `missed=latest` runs it, unless
        // the record we read at 9400 says its run was the old line's (its
        // owner may have run that line until then): we count from then.
        let old = BTreeMap::from([(Q, job("billing", "@every 4s", every(4000), missed))]);
        let settings = Settings { roles: 2, jobs: Some(old), ..settings(Restart::Never) };
        let mut l = Leader::new(settings, started(0));
        l.set_jobs(BTreeMap::from([(Q, job("billing", "@every 1s", every(1000), missed))]), ms(7500));
        let mut runs = take_over(&mut l, Q, (4000, line), at);
        runs.extend(run(&mut l, at + 100, 11_100));
        let dues: Vec<u64> = runs.iter().map(|(_, due, _)| *due).collect();
        assert_eq!(dues.first(), Some(&first), "{missed:?} at {at} {line:?}: {runs:?}");
        assert!(dues.iter().all(|&due| due > 7500) && dues.windows(2).all(|w| w[0] < w[1]), "{runs:?}");
        assert_eq!(dues.last(), Some(&11_000));
    }
}

#[test]
fn a_member_started_with_another_line_than_the_newest_run_on_record_counts_its_own_from_reading_that_run() {
    // "@every 4s" ran 4000 (its owner stopped); the file then said "@every
    // 1s", and we start with it: we read that run at 7700 and lead at 7800.
    // C-1 for a fresh member: 5000 to 7000 were no due times when they
    // passed, and none runs, whatever `missed=` says. A run of our own line
    // keeps every due time (the missed ones are the policy's), and so does
    // one of a record of before lines, which says nothing of it.
    // The same for a schedule of flags (`--every 1s` after `--every 4s`).
    for (missed, flags) in [Missed::Once, Missed::Skip, Missed::All].into_iter().flat_map(|m| [(m, false), (m, true)]) {
        let dues = |line: Option<&str>| {
            let job = job("billing", "@every 1s", every(1000), missed);
            let settings = match flags {
                false => Settings { roles: 2, jobs: Some(BTreeMap::from([(Q, job)])), ..settings(Restart::Never) },
                true => Settings { roles: 2, schedule: Some(job.schedule), ..settings(Restart::Never) },
            };
            let mut l = Leader::new(settings, started(0));
            let mut runs = take_over(&mut l, Q, (4000, line), 7800);
            runs.extend(run(&mut l, 7900, 10_100));
            runs.iter().map(|(_, due, _)| *due).collect::<Vec<u64>>()
        };
        assert_eq!(dues(Some("@every 4s")), [8000, 9000, 10_000], "{missed:?} {flags}: another line");
        let kept = match missed {
            Missed::Once => vec![7000, 8000, 9000, 10_000],
            Missed::Skip => vec![8000, 9000, 10_000],
            Missed::All => vec![5000, 6000, 7000, 8000, 9000, 10_000],
        };
        assert_eq!(dues(Some("@every 1s")), kept, "{missed:?} {flags}: our line");
        assert_eq!(dues(None), kept, "{missed:?} {flags}: a record that does not say");
    }
    // A newer run of our line read after (a member with our file ran 2000
    // by it): its due times count from that run again, and the latest
    // missed since it runs at once.
    let jobs = BTreeMap::from([(Q, job("billing", "@every 1s", every(1000), Missed::Once))]);
    let mut l = Leader::new(Settings { roles: 2, jobs: Some(jobs), ..settings(Restart::Never) }, started(0));
    let older = Attempt {
        wave_ms: wall(1000),
        wave_token: 2,
        number: 1,
        token: 2,
        code: Some(0),
        by: None,
        due: Some(wall(1000)),
        ended: Some(wall(1050)),
        line: Some("@every 4s".into()),
    };
    let record = Other { attempt: Some(older), ..record_of("older/1", 4, Some(1), Some(2), Stance::Released) };
    l.step(Input::OtherHeartbeat(Q, record), ms(7600));
    assert_eq!(take_over(&mut l, Q, (2000, Some("@every 1s")), 7800), [(Q, 7000, 7810)]);
}

#[test]
fn a_job_added_runs_from_its_next_due_time_even_where_its_partition_names_an_old_run_of_it() {
    // P names a run of "report" due 2000 (the job was removed, and is now
    // added back): nothing before the reload at 7500 is its to run.
    let mut l = leading(&[(Q, job("billing", "@every 4s", every(4000), Missed::Once))]);
    l.step(
        Input::OtherHeartbeat(
            P,
            Other {
                attempt: Some(Attempt {
                    wave_ms: wall(2000),
                    wave_token: 3,
                    number: 1,
                    token: 3,
                    code: Some(0),
                    by: Some(Runner { name: "old".into(), host: "h".into() }),
                    due: Some(wall(2000)),
                    ended: Some(wall(2050)),
                    line: None,
                }),
                ..record_of("old/1", 50, Some(1), Some(3), Stance::Released)
            },
        ),
        ms(2100),
    );
    let before = run(&mut l, 2100, 7500);
    let jobs = [
        (Q, job("billing", "@every 4s", every(4000), Missed::Once)),
        (P, job("report", "@every 1s", every(1000), Missed::Once)),
    ];
    l.set_jobs(jobs.into_iter().collect(), ms(7500));
    let after = run(&mut l, 7500, 10_100);
    assert_eq!(on_time(&before, Q), vec![4000]);
    assert_eq!(on_time(&after, P), vec![8000, 9000, 10_000], "{after:?}");
    assert_eq!(on_time(&after, Q), vec![8000], "billing unchanged");
}

#[test]
fn a_run_named_before_a_reload_that_moves_it_is_named_again_for_its_new_due_time() {
    // Named for 3000 (250 ms ahead) and not read back yet when the reload
    // moves it to 2900: the run that starts is 2900's, never 3000's.
    let mut l = leading(&[(Q, job("billing", "0 3 * * *", daily(3000), Missed::Once))]);
    let names = |out: &[Action], due: u64| {
        out.iter()
            .any(|a| matches!(a, SendHeartbeat(Q, r) if r.attempt.as_ref().and_then(|j| j.due) == Some(wall(due))))
    };
    assert_eq!(run(&mut l, 1100, 2700), vec![], "nothing due yet");
    let named = l.step(Input::Tick, ms(2750));
    assert!(names(&named, 3000), "{named:?}");
    l.set_jobs(BTreeMap::from([(Q, job("billing", "54 2 * * *", daily(2900), Missed::Once))]), ms(2800));
    let renamed = l.step(Input::Tick, ms(2850));
    assert!(names(&renamed, 2900), "{renamed:?}");
    let read = l.step(Input::OwnHeartbeat { partition: Q, offset: 50, sent: ms(2850), more: false }, ms(2860));
    let dues: Vec<_> = read
        .iter()
        .filter_map(|a| match a {
            Spawn { partition: Q, attempt: Some(j), .. } => j.due,
            _ => None,
        })
        .collect();
    assert_eq!(dues, [wall(2900)], "{read:?}");
}
