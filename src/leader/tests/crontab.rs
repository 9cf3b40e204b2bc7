//! A fleet crontab (`--crontab`): every partition is a seat, and a seat
//! runs only the job of ours placed on its partition, by that job's own
//! schedule. A seat where none of ours sits leads like any other (so that
//! the group's partitions stay spread), never runs anything, and carries
//! the job its partition holds, as its records say, for the member whose
//! file has it.

use std::collections::BTreeMap;

use super::*;

/// Our job's partition; P (0) holds a job that is not in our file.
const Q: Partition = 1;

/// A member of a crontab whose one job, "billing" (due every second), sits
/// on Q, and which leads both P and Q from 1010 (tokens 7 and 20).
fn leading_both() -> Leader {
    let schedule = Schedule::of(every(1000));
    let job = Job {
        name: "billing".into(),
        schedule: Schedule { line: Some("@every 1s".into()), ..schedule },
        max_runtime: None,
    };
    let settings = Settings { roles: 2, jobs: Some(BTreeMap::from([(Q, job)])), ..settings(Restart::Never) };
    let mut l = Leader::new(settings, started(0));
    l.step(assigned(), ms(1000));
    l.step(Input::Assigned { partition: Q }, ms(1000));
    let out = l.step(hb(7, 1000), ms(1010));
    assert!(!out.iter().any(|a| matches!(a, Spawn { .. })), "no job of ours on P: {out:?}");
    l.step(Input::OwnHeartbeat { partition: Q, offset: 20, sent: ms(1000), more: false }, ms(1010));
    assert_eq!((l.standing(P), l.standing(Q)), (Standing::Leader { token: 7 }, Standing::Leader { token: 20 }));
    l
}

/// Another member's record on `partition` naming `job` (a claim, or a
/// record that carries it).
fn names(partition: Partition, offset: i64, job: &str, claim: bool) -> Input {
    let placed = Placed { job: job.into(), claim };
    Input::OtherHeartbeat(
        partition,
        Other { job: Some(placed), ..record_of("x", offset, None, None, Stance::Released) },
    )
}

/// The job our records on `partition` name, from `out`.
fn carried(out: &[Action], partition: Partition) -> Vec<Option<String>> {
    out.iter()
        .filter_map(|a| match a {
            SendHeartbeat(p, record) if *p == partition => Some(record.job.clone()),
            _ => None,
        })
        .collect()
}

/// Ticks every 100 ms from `from` to `to`, each heartbeat read back and
/// each command ended at once; returns what was asked.
pub(super) fn run(l: &mut Leader, from: u64, to: u64) -> Vec<Action> {
    let mut out = Vec::new();
    let mut offset = 100;
    for t in (from..to).step_by(100) {
        let mut pending = vec![Input::Tick];
        while let Some(input) = pending.pop() {
            for action in l.step(input, ms(t)) {
                match action {
                    SendHeartbeat(partition, _) => {
                        offset += 1;
                        pending.push(Input::OwnHeartbeat { partition, offset, sent: ms(t), more: false });
                    }
                    Spawn { partition, .. } => pending.push(Input::ChildExited(partition, ChildStatus::Exited(0))),
                    _ => {}
                }
                out.push(action);
            }
        }
    }
    out
}

#[test]
fn only_the_seat_of_our_job_runs_it_at_its_due_times_and_the_other_runs_nothing() {
    let mut l = leading_both();
    let out = run(&mut l, 1100, 4100);
    let spawned: Vec<(Partition, Option<u64>)> = out
        .iter()
        .filter_map(|a| match a {
            Spawn { partition, attempt, .. } => Some((*partition, attempt.as_ref().and_then(|a| a.due))),
            _ => None,
        })
        .collect();
    // Due at 2000, 3000 and 4000 ms past WALL's second grid: one run each,
    // none on P; and a seat on a partition of ours names the job.
    assert_eq!(spawned.iter().filter(|(p, _)| *p == P).count(), 0, "{spawned:?}");
    assert!(spawned.len() >= 2 && spawned.iter().all(|(p, due)| *p == Q && due.is_some()), "{spawned:?}");
    assert!(carried(&out, Q).iter().all(|job| job.as_deref() == Some("billing")), "{out:?}");
    assert!(carried(&out, P).iter().all(Option::is_none), "P holds no job it has heard of");
}

#[test]
fn a_seat_with_no_run_under_way_heartbeats_every_third_of_the_deadline_and_a_running_one_as_usual() {
    let mut l = leading_both();
    // Ticks every 50 ms, each record read back; the run never ends.
    let (mut sent, mut offset, mut running_from, mut named) = (Vec::new(), 100, None, None);
    for t in (1050..4000).step_by(50) {
        for action in l.step(Input::Tick, ms(t)) {
            match action {
                SendHeartbeat(partition, record) => {
                    if partition == Q && record.attempt.is_some() {
                        named = named.or(Some(t));
                    }
                    offset += 1;
                    l.step(Input::OwnHeartbeat { partition, offset, sent: ms(t), more: false }, ms(t));
                    sent.push((partition, t));
                }
                Spawn { partition: Q, .. } => running_from = running_from.or(Some(t)),
                _ => {}
            }
        }
    }
    let gaps = |p: Partition, during: &dyn Fn(u64) -> bool| -> Vec<u64> {
        let times: Vec<u64> = sent.iter().filter(|(q, t)| *q == p && during(*t)).map(|(_, t)| *t).collect();
        times.windows(2).map(|w| w[1] - w[0]).collect()
    };
    let third = DEADLINE.as_millis() as u64 / 3;
    let started = running_from.expect("billing ran");
    // On the beat (multiples of the third on the boot clock), met at the
    // next 50 ms tick: each gap within a tick of it.
    let near_third = |g: &u64| g.abs_diff(third) < 50;
    let idle = gaps(P, &|_| true);
    assert!(idle.len() >= 4 && idle.iter().all(near_third), "P, no job of ours: {idle:?}");
    // (The run is named ahead of its start at once, off the beat.)
    let named = named.expect("billing's run named");
    let before = gaps(Q, &|t| t < named);
    assert!(named < started && before.iter().all(near_third), "Q before its run: {before:?}");
    let running = gaps(Q, &|t| t > started);
    assert!(running.len() >= 4 && running.iter().all(|&g| g == HB.as_millis() as u64), "Q while running: {running:?}");
}

#[test]
fn a_seat_carries_the_first_claim_and_then_the_newest_record_that_carries_a_name() {
    let mut l = leading_both();
    l.step(names(P, 30, "report", true), ms(1100));
    l.step(names(P, 31, "late-claim", true), ms(1100));
    assert_eq!(carried(&run(&mut l, 1200, 1500), P).last(), Some(&Some("report".into())), "the first claim counts");
    l.step(names(P, 40, "ping", false), ms(1500));
    assert_eq!(carried(&run(&mut l, 1600, 1900), P).last(), Some(&Some("ping".into())), "a carrying record, newer");
    // Our own job's name stays, whatever another record says.
    l.step(names(Q, 50, "other", false), ms(1900));
    assert!(carried(&run(&mut l, 2000, 2300), Q).iter().all(|j| j.as_deref() == Some("billing")));
}

#[test]
fn a_crontab_member_names_each_seat_in_its_log_and_follows_every_seats_due_times() {
    let l = leading_both();
    assert!(l.settings.names_roles(), "a job's log lines name it, even with one seat");
    assert!(l.settings.scheduled(), "a seat with no job of ours still keeps its partition's newest run");
    assert!(!l.settings.runs_on(P) && l.settings.runs_on(Q));
    assert_eq!((l.job_on(Q), l.job_on(P)), (Some("billing"), None), "the shell's metrics name our job by it");
    assert!(settings(Restart::Never).runs_on(P), "without a crontab every seat runs the one command");
}

#[test]
fn a_crontab_read_again_seats_a_new_job_and_a_removed_one_starts_no_more_runs() {
    let mut l = leading_both();
    run(&mut l, 1100, 2500);
    // "report" comes to P, "billing" goes.
    let schedule = Schedule::of(every(1000));
    let report = Job {
        name: "report".into(),
        schedule: Schedule { line: Some("@every 1s".into()), ..schedule },
        max_runtime: None,
    };
    l.set_jobs(BTreeMap::from([(P, report)]), ms(2500));
    let out = run(&mut l, 2500, 5100);
    let spawned: Vec<Partition> = out
        .iter()
        .filter_map(|a| match a {
            Spawn { partition, .. } => Some(*partition),
            _ => None,
        })
        .collect();
    assert!(spawned.len() >= 2 && spawned.iter().all(|&p| p == P), "{spawned:?}");
    assert!(carried(&out, P).iter().all(|j| j.as_deref() == Some("report")), "{out:?}");
    assert!(carried(&out, Q).iter().all(|j| j.as_deref() == Some("billing")), "Q still holds billing");
    assert_eq!(l.settings.job_on(Q), None);
}

#[test]
fn a_partition_added_for_a_new_job_is_seated_when_named_and_runs_the_job_there_only() {
    let mut l = leading_both();
    run(&mut l, 1100, 2500);
    // The topic grew: "report" was placed on partition 2, which we have no
    // seat on until it is named to us (the shell asks, the first time).
    const R: Partition = 2;
    let schedule = Schedule::of(every(1000));
    let billing = l.settings.jobs.as_ref().unwrap()[&Q].clone();
    let report = Job {
        name: "report".into(),
        schedule: Schedule { line: Some("@every 1s".into()), ..schedule },
        max_runtime: None,
    };
    l.set_jobs(BTreeMap::from([(Q, billing), (R, report)]), ms(2500));
    assert!(l.step(Input::Assigned { partition: R }, ms(2500)).is_empty(), "no seat yet: nothing to do");
    l.seat(R);
    l.seat(R); // a seat we have: nothing changes
    assert_eq!(l.standing(R), Standing::Standby);
    assert!(l.role_span(R).is_some(), "its log lines name its job");
    let out = l.step(Input::Assigned { partition: R }, ms(2500));
    assert!(matches!(out[..], [SendHeartbeat(R, _)]), "a candidate on R: {out:?}");
    l.step(Input::OwnHeartbeat { partition: R, offset: 5, sent: ms(2500), more: false }, ms(2510));
    assert_eq!(l.standing(R), Standing::Leader { token: 5 });
    let out = run(&mut l, 2600, 5100);
    let spawned = |p: Partition| out.iter().filter(|a| matches!(a, Spawn { partition, .. } if *partition == p)).count();
    assert!(spawned(R) >= 2 && spawned(Q) >= 2 && spawned(P) == 0, "{out:?}");
    assert!(carried(&out, R).iter().all(|j| j.as_deref() == Some("report")), "{out:?}");
    // Without a crontab the seats are the roles': none is added.
    let mut single = Leader::new(settings(Restart::Never), started(0));
    single.seat(1);
    assert!(single.step(Input::Assigned { partition: 1 }, ms(10)).is_empty());
}

#[test]
fn a_trigger_runs_the_job_once_now_due_when_asked_and_a_run_due_after_it_answers_it() {
    // billing due every hour: none comes in this test by itself.
    let schedule = Schedule::of(every(3_600_000));
    let job = Job {
        name: "billing".into(),
        schedule: Schedule { line: Some("@every 1s".into()), ..schedule },
        max_runtime: None,
    };
    let settings = Settings { roles: 2, jobs: Some(BTreeMap::from([(Q, job)])), ..settings(Restart::Never) };
    let mut l = Leader::new(settings, started(0));
    l.step(Input::Assigned { partition: Q }, ms(1000));
    l.step(Input::OwnHeartbeat { partition: Q, offset: 20, sent: ms(1000), more: false }, ms(1010));
    assert!(run(&mut l, 1100, 2000).iter().all(|a| !matches!(a, Spawn { .. })), "nothing due yet");
    let trigger = |offset, at| Input::Trigger(Q, Trigger { offset, at_ms: wall(at), by: Asker::default() });
    let spawned = |out: &[Action]| -> Vec<Option<u64>> {
        out.iter()
            .filter_map(|a| match a {
                Spawn { partition: Q, attempt, .. } => Some(attempt.as_ref().and_then(|a| a.due)),
                _ => None,
            })
            .collect()
    };
    // The trigger and what follows it, until `to`.
    let mut answer = |input, at: u64, to| {
        let mut out = l.step(input, ms(at));
        if let Some(Spawn { .. }) = out.iter().find(|a| matches!(a, Spawn { .. })) {
            out.extend(l.step(Input::ChildExited(Q, ChildStatus::Exited(0)), ms(at)));
        }
        out.extend(run(&mut l, at + 100, to));
        spawned(&out)
    };
    // Once, at once, due when asked; read again (a backlog), nothing more.
    assert_eq!(answer(trigger(30, 2000), 2000, 4000), vec![Some(wall(2000))]);
    assert_eq!(answer(trigger(30, 2000), 4000, 5000), vec![]);
    // An older trigger, read late, is answered by the run due after it.
    assert_eq!(answer(trigger(31, 1500), 5000, 6000), vec![]);
    // A newer one runs again.
    assert_eq!(answer(trigger(32, 6000), 6000, 7000), vec![Some(wall(6000))]);
    // One from a clock more than a minute ahead of ours is refused (its
    // due time would hold the job back till then); within a minute, run.
    assert_eq!(answer(trigger(33, 7000 + 60_001), 7000, 8000), vec![]);
    assert_eq!(answer(trigger(34, 8000 + 60_000), 8000, 9000), vec![Some(wall(68_000))]);
}
