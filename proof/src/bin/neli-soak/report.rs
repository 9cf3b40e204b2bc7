//! The summary: what the soak injected and found, a table of leaderless
//! times by fault and child mode, and the exit code.

use std::collections::BTreeMap;
use std::fs;
use std::process::ExitCode;
use std::time::Duration;

use neli_proof::percentile;

use crate::faults::{Fault, Outcome, Run};
use crate::judge::{ScheduleCheck, Verdict};
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
    match &verdict.scheduled {
        None => waves(verdict),
        Some(c) => schedule(c),
    }
    println!("fencing tokens strictly increasing: {}", verdict.tokens_increase);
    println!("stalls (no child running {} after a fault; liveness): {}", args.stall, run.stalls);
    println!("\nLeaderless: from the moment no child held the lock until one held it again.\n");
    table(run.outcomes);
    let dir = &soak.detector.dir;
    let safe = verdict.safe();
    if safe && run.stalls == 0 {
        let _ = fs::remove_dir_all(dir);
    } else {
        println!("\n{}: logs kept in {}", if safe { "STALLED" } else { "FAILED" }, dir.display());
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

/// One row per fault and child mode: how often, how often another member
/// took over, and the leaderless times.
fn table(outcomes: BTreeMap<(Fault, String), Outcome>) {
    println!("| fault | child | count | new leader | leaderless p50 | p99 | max |\n|---|---|---|---|---|---|---|");
    for ((fault, mode), mut o) in outcomes {
        o.leaderless.sort();
        let f = |d: Duration| format!("{:.2}s", d.as_secs_f64());
        println!(
            "| {} | {mode} | {} | {} | {} | {} | {} |",
            fault.name(),
            o.leaderless.len(),
            o.handovers,
            f(percentile(&o.leaderless, 0.5)),
            f(percentile(&o.leaderless, 0.99)),
            f(*o.leaderless.last().expect("one sample"))
        );
    }
}
