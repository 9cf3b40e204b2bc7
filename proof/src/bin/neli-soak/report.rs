//! The summary: what the soak injected and found, a table of leaderless
//! times by fault and child mode, and the exit code.

use std::collections::BTreeMap;
use std::fs;
use std::process::ExitCode;
use std::time::Duration;

use neli_proof::percentile;

use crate::faults::{Fault, Outcome, Run};
use crate::judge::{failures, ScheduleCheck, Verdict};
use crate::members::Soak;
use crate::Args;

/// Prints the summary; keeps the work directory (logs) unless the soak was
/// safe and never stalled. Fails on anything unsafe (a stall alone does not).
pub fn report(seed: u64, args: &Args, soak: &Soak, run: Run, verdict: &Verdict) -> ExitCode {
    println!("\n## neli-soak summary (seed {seed})\n");
    println!("transitions: {} ({} child starts)", soak.transitions(), verdict.starts.len());
    println!("faults injected: {}", run.outcomes.values().map(|o| o.leaderless.len()).sum::<usize>());
    println!("overlaps: {}", verdict.overlaps.len());
    println!("orphans left: {}", verdict.orphans);
    println!("starts by a member whose health check never passed: {:?}", verdict.sick_starts);
    match &verdict.scheduled {
        None => waves(verdict),
        Some(c) => schedule(c),
    }
    println!("fencing tokens strictly increasing: {}", verdict.tokens_increase);
    let pauses =
        run.outcomes.iter().filter(|((f, _), _)| *f == Fault::Pause).map(|(_, o)| o.leaderless.len()).sum::<usize>();
    println!(
        "pauses: {pauses}, faults while paused: {}, children while paused: {}, pause or resume not acknowledged: {}",
        run.paused_faults,
        run.paused_starts.len(),
        run.unacknowledged
    );
    for why in &run.paused_starts {
        println!("  while paused, {why}");
    }
    println!("stalls (no child running {} after a fault; liveness): {}", args.stall, run.stalls);
    println!("faults that found the command already stopped (not counted): {}", run.struck_stopped);
    needless(&run.outcomes);
    if soak.hot_standbys.is_some() {
        hot_set(soak, &run);
    }
    println!("\nLeaderless: how long no child held the lock after the fault struck, until the fault was over.\n");
    table(run.outcomes);
    let dir = &soak.detector.dir;
    let mut failed = verdict.failures();
    failed.extend(failures(&[("children while paused", run.paused_starts.len())]));
    let safe = failed.is_empty();
    if safe && run.stalls == 0 && !args.keep_logs {
        let _ = fs::remove_dir_all(dir);
    } else {
        let why = if !safe {
            format!("FAILED ({})", failed.join(", "))
        } else if run.stalls > 0 {
            "STALLED".into()
        } else {
            "--keep-logs".into()
        };
        println!("\n{why}: logs kept in {}", dir.display());
    }
    if safe {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Once per wave: the recorded successes, and every rerun after one.
fn waves(verdict: &Verdict) {
    println!("waves whose success was recorded: {}; reruns after one: {}", verdict.succeeded, verdict.reruns.len());
    for (name, token, done) in &verdict.reruns {
        println!("  {name} ran token {token} after its wave's run (token {done}) had succeeded");
    }
}

/// Under --schedule: reruns, skipped due times and the at-least-once count.
fn schedule(c: &ScheduleCheck) {
    println!("scheduled due times started: {}; ran to their end: {}", c.started, c.ended);
    println!("reruns after a recorded ending: {}", c.reruns.len());
    for (due, token, done) in &c.reruns {
        println!("  due time {due} started under token {token} after its run (token {done}) was recorded");
    }
    println!("skipped due times (--missed all): {}", c.skipped.len());
    for due in &c.skipped {
        println!("  due time {due} never started");
    }
    println!("ran to their end twice, no ending recorded (at least once): {}", c.at_least_once);
}

/// With --hot-standbys: the hot set's churn, its refills and the longest
/// time without a command after any fault.
fn hot_set(soak: &Soak, run: &Run) {
    let (joins, cold) = crate::hot::churn(&soak.detector.dir);
    let each: Vec<String> = joins.iter().map(|(why, n)| format!("{why} {n}")).collect();
    let total: usize = joins.iter().map(|(_, n)| n).sum();
    println!("cold members that joined the group: {total} ({}); members that went cold: {cold}", each.join(", "));
    for (fault, took) in &run.refills {
        let mut took = took.clone();
        took.sort();
        println!(
            "{}: the list named K others in {} cases, p50 {:.2}s, max {:.2}s",
            fault.name(),
            took.len(),
            percentile(&took, 0.5).as_secs_f64(),
            took.last().copied().unwrap_or_default().as_secs_f64()
        );
    }
    let longest = run
        .outcomes
        .iter()
        .filter_map(|((f, _), o)| Some((*o.leaderless.iter().max()?, f.name())))
        .max()
        .map_or("none".into(), |(d, f)| format!("{:.2}s (after {f})", d.as_secs_f64()));
    println!("longest time without a command after a fault: {longest}");
}

/// Needless stops (the command stopped, and the same member led next), by
/// fault; stops the fault made itself (its command killed or finished)
/// aside.
fn needless(outcomes: &BTreeMap<(Fault, String), Outcome>) {
    let mut by_fault: BTreeMap<&str, usize> = BTreeMap::new();
    for ((fault, _), o) in outcomes.iter().filter(|((f, _), o)| !f.ends_the_command() && o.needless > 0) {
        *by_fault.entry(fault.name()).or_default() += o.needless;
    }
    let each: Vec<String> = by_fault.iter().map(|(f, n)| format!("{f} {n}")).collect();
    println!(
        "needless stops (stopped, and the same member led next): {}{}",
        by_fault.values().sum::<usize>(),
        if each.is_empty() { String::new() } else { format!(" ({})", each.join(", ")) }
    );
}

/// One row per fault and child mode: how often, how often the command
/// stopped, how often another member took over, the needless stops and the
/// leaderless times.
fn table(outcomes: BTreeMap<(Fault, String), Outcome>) {
    println!(
        "| fault | child | count | stopped | new leader | needless | leaderless p50 | p99 | max |\n\
         |---|---|---|---|---|---|---|---|---|"
    );
    for ((fault, mode), mut o) in outcomes {
        o.leaderless.sort();
        let f = |d: Duration| format!("{:.2}s", d.as_secs_f64());
        let needless = if fault.ends_the_command() { "-".to_string() } else { o.needless.to_string() };
        println!(
            "| {} | {mode} | {} | {} | {} | {needless} | {} | {} | {} |",
            fault.name(),
            o.leaderless.len(),
            o.stops,
            o.handovers,
            f(percentile(&o.leaderless, 0.5)),
            f(percentile(&o.leaderless, 0.99)),
            f(*o.leaderless.last().expect("one sample"))
        );
    }
}
