//! The roles soak's verdict, per role from its own detector, and its
//! summary (see `roles`).

use std::fs;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use neli_proof::detector::{locks_held, Detector};
use neli_proof::percentile;

use super::{Figures, Needless, KINDS};
use crate::faults::wall;
use crate::judge::{check_roles_schedule, failures, RolesSchedule, ScheduleCheck};
use crate::members::Soak;
use crate::Args;

/// One role's record once every member exited.
pub struct Role {
    pub starts: Vec<(String, i64)>,
    pub overlaps: Vec<String>,
    /// Its lock still held once every member exited.
    pub orphan: bool,
    /// Consecutive starts whose token did not increase (one member
    /// restarting its command under the same token aside).
    pub tokens: Vec<String>,
    /// Starts again on the same member under the same token (a command
    /// restarted after it died: `child-crash`).
    pub same_token: usize,
}

impl Role {
    fn transitions(&self) -> usize {
        self.starts.windows(2).filter(|w| w[0].0 != w[1].0).count()
    }
}

/// Waits up to 5 s for every role's lock to be free (the members are
/// gone), stops the broker, and reads each role's records.
pub fn judge(soak: &mut Soak, detectors: &[Detector]) -> Vec<Role> {
    drop(soak.broker.take());
    let ids: Vec<Option<String>> = detectors.iter().map(Detector::lock_id).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while locks_held(&ids).iter().any(|h| *h) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = locks_held(&ids);
    detectors
        .iter()
        .zip(held)
        .map(|(d, orphan)| {
            let starts = d.starts();
            let mut tokens = Vec::new();
            let mut same_token = 0;
            for w in starts.windows(2) {
                match w[0].1.cmp(&w[1].1) {
                    std::cmp::Ordering::Less => {}
                    std::cmp::Ordering::Equal if w[0].0 == w[1].0 => same_token += 1,
                    _ => tokens.push(format!("{} {} then {} {}", w[0].0, w[0].1, w[1].0, w[1].1)),
                }
            }
            Role { overlaps: d.overlaps(), starts, orphan, tokens, same_token }
        })
        .collect()
}

/// Prints the summary; keeps the work directory unless the soak passed,
/// never stalled and every member exited as asked. Fails on an overlap, an
/// orphan, a token that did not increase or a needless move; on a
/// schedule, also on a rerun or a skipped due time of any role.
pub fn report(seed: u64, args: &Args, soak: &Soak, figures: &Figures, roles: &[Role]) -> ExitCode {
    let scheduled = soak.schedule.map(|(_, every)| check_roles_schedule(&soak.detector.dir, roles.len(), every));
    println!("\n## neli-soak summary (seed {seed}, {} roles over {} candidates)\n", roles.len(), args.candidates);
    let transitions: usize = roles.iter().map(Role::transitions).sum();
    let starts: usize = roles.iter().map(|r| r.starts.len()).sum();
    println!(
        "transitions: {transitions} ({starts} role starts), in {}",
        humantime::format_duration(secs(figures.wall))
    );
    faults(figures);
    let (overlaps, orphans, tokens) = safety(roles, scheduled.is_some());
    if let Some(s) = &scheduled {
        schedule(s);
    }
    let needless = needless(figures);
    let paths = super::paths::judge(&soak.detector.dir, roles.len());
    issue_65(&paths, scheduled.is_some());
    timings(args, figures);
    table(roles, figures, scheduled.as_ref());
    let sum = |f: fn(&ScheduleCheck) -> usize| scheduled.as_ref().map_or(0, |s| s.sum(f));
    let failed = failures(&[
        ("overlaps", overlaps),
        ("orphans", orphans),
        ("tokens that did not increase", tokens),
        ("needless moves", needless),
        ("reruns", sum(|r| r.reruns.len())),
        ("skipped due times", sum(|r| r.skipped.len())),
        ("paused roles' commands that ran", figures.paused_starts.len()),
        ("commands begun while their member was cut off, named after the cut", paths.after_cut.len()),
        ("due times of a changed line run before their member read it", paths.early.len()),
        ("fences of a leader within its first second", paths.fences.iter().map(Vec::len).sum()),
    ]);
    let safe = failed.is_empty();
    let dir = &soak.detector.dir;
    if safe && figures.stalls == 0 && figures.exits.is_empty() && !args.keep_logs {
        let _ = fs::remove_dir_all(dir);
    } else {
        let why = match (safe, figures.stalls > 0 || !figures.exits.is_empty()) {
            (false, _) => format!("FAILED ({})", failed.join(", ")),
            (true, true) => "STALLED or a member exited unexpectedly".into(),
            (true, false) => "--keep-logs".into(),
        };
        println!("\n{why}: logs kept in {}", dir.display());
    }
    if safe {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The faults struck, of each kind, and how many while another was in
/// flight.
fn faults(figures: &Figures) {
    let struck: usize = figures.faults.values().map(|c| c.0).sum();
    let concurrent: usize = figures.faults.values().map(|c| c.1).sum();
    let each: Vec<String> = figures
        .faults
        .iter()
        .map(|(fault, (n, _))| format!("{} {n} ({} clean)", fault.name(), figures.clean.get(fault).unwrap_or(&0)))
        .collect();
    println!("faults: {struck}, {concurrent} of them while another was in flight: {}", each.join(", "));
}

/// The safety figures (overlaps, orphans, fencing tokens that did not
/// increase), each named; their counts.
fn safety(roles: &[Role], scheduled: bool) -> (usize, usize, usize) {
    let overlaps: usize = roles.iter().map(|r| r.overlaps.len()).sum();
    let orphans = roles.iter().filter(|r| r.orphan).count();
    let tokens: usize = roles.iter().map(|r| r.tokens.len()).sum();
    let same: usize = roles.iter().map(|r| r.same_token).sum();
    println!("overlaps: {overlaps}");
    println!("orphans left: {orphans}");
    println!(
        "fencing tokens strictly increasing per role: {} ({} on the same member under the same token: {same})",
        tokens == 0,
        if scheduled { "runs" } else { "restarts" }
    );
    for (j, r) in roles.iter().enumerate() {
        r.tokens.iter().for_each(|t| println!("  role {j}: token did not increase: {t}"));
        r.overlaps.iter().for_each(|o| println!("  role {j}: overlap: {o}"));
    }
    (overlaps, orphans, tokens)
}

/// The needless moves after each kind of fault, each named; their count.
fn needless(figures: &Figures) -> usize {
    let kinds: [(&str, &Needless); 7] = [
        ("joins", &figures.joins),
        ("leaves", &figures.leaves),
        ("crashes", &figures.crashes),
        ("drains", &figures.drains),
        ("undrains", &figures.undrains),
        ("jobs added", &figures.adds),
        ("reloads", &figures.reloads),
    ];
    let needless: usize = kinds.iter().map(|(_, n)| n.moves.len()).sum();
    let judged: Vec<String> =
        kinds.iter().map(|(what, n)| format!("{what} {} in {} clean", n.moves.len(), n.judged)).collect();
    println!("needless moves: {needless} ({}; episodes with another fault in flight not judged)", judged.join(", "));
    kinds.iter().flat_map(|(_, n)| &n.moves).for_each(|m| println!("  {m}"));
    needless
}

/// What the paths of issue 65 did (see `paths`): due times run twice by
/// what their first run met, runs of a changed line, and fences of a fresh
/// leader, each named.
fn issue_65(p: &super::paths::Paths, scheduled: bool) {
    let list = |what: &[String]| what.iter().take(20).for_each(|w| println!("  {w}"));
    if !scheduled {
        return fences(p);
    }
    println!(
        "commands begun while their member was cut off ({} cuts): named after the cut began {}, named (and read \
         back) before it {}",
        p.cuts,
        p.after_cut.len(),
        p.named_before
    );
    list(&p.after_cut);
    println!(
        "due times run twice: {} ({} ran to their end twice); the first run started after its member's cut: {}; \
         already started when the cut came: named before it and begun during it {} (the least time from naming \
         to cut: {}), under way {}; with no cut of its member (a freeze, a crash, a revoke, a cluster's partial \
         cut): {} ran to their end twice, {} cut short and run again",
        p.doubled_after_cut + p.begun_cut_off + p.under_way + p.other.len() + p.cut_short,
        p.ended_twice,
        p.doubled_after_cut,
        p.begun_cut_off,
        p.margin.map_or("-".into(), |m| format!("{m} ms")),
        p.under_way,
        p.other.len(),
        p.cut_short
    );
    list(&p.other);
    println!(
        "crontab files given (starts and rollout steps): {}, SIGHUPs with no reading logged after: {}; runs of a \
         changed line: {}, of a due time that passed before the line took over the job: {}",
        p.reloads,
        p.unconfirmed,
        p.changed_runs,
        p.early.len()
    );
    list(&p.early);
    fences(p);
}

/// The fences of a leader within its first second, per role, each named.
fn fences(p: &super::paths::Paths) {
    let list = |what: &[String]| what.iter().take(20).for_each(|w| println!("  {w}"));
    let fences: Vec<String> = p
        .fences
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.is_empty())
        .map(|(j, f)| format!("role {j}: {}", f.len()))
        .collect();
    println!(
        "fences of a leader within its first second of leading: {}{}",
        p.fences.iter().map(Vec::len).sum::<usize>(),
        if fences.is_empty() { String::new() } else { format!(" ({})", fences.join(", ")) }
    );
    p.fences.iter().for_each(|f| list(f));
}

/// How long the roles took to move, the drains, pauses and stalls, and the
/// members that exited unasked.
fn timings(args: &Args, figures: &Figures) {
    let moves = |what: &str, samples: &[Duration]| {
        let mut s = samples.to_vec();
        s.sort();
        let max = s.last().copied().unwrap_or_default();
        println!(
            "role moves after {what}: {} moves, p50 {}, p99 {}, max {}",
            s.len(),
            f(percentile(&s, 0.5)),
            f(percentile(&s, 0.99)),
            f(max)
        );
    };
    moves("a SIGTERM (graceful leave; to the role's new start)", &figures.graceful);
    moves("a kill -9", &figures.crash);
    moves("a drain (its drain file created, or `neli-run drain`)", &figures.drain);
    println!(
        "drains and undrains by `neli-run drain` and `undrain` (the others by the drain file): {}",
        figures.drain_commands
    );
    if figures.pauses > 0 {
        println!(
            "roles paused (pause --role J --stop, its holder leaving meanwhile): {}, a paused role's command that \
             ran: {}",
            figures.pauses,
            figures.paused_starts.len(),
        );
        figures.paused_starts.iter().for_each(|p| println!("  {p}"));
    }
    println!("pause, resume, drain or undrain not acknowledged: {}", figures.unacknowledged);
    println!("stalls (the group did not settle within {}): {}", args.stall, figures.stalls);
    println!("members that exited unasked, or other than 0 after a SIGTERM: {}", figures.exits.len());
    figures.exits.iter().for_each(|e| println!("  {e}"));
}

/// Per role: its starts, moves, overlaps, orphan and longest time with no
/// command (on a schedule, its latest start after a due time).
fn table(roles: &[Role], figures: &Figures, scheduled: Option<&RolesSchedule>) {
    println!(
        "\nLongest without a command: per role, the longest time its lock was free (from the kernel's lock), \
         when it began and the faults in flight meanwhile{}.\n",
        if scheduled.is_some() {
            " (on a schedule, between runs too); and the latest a due time first started after it was due"
        } else {
            ""
        }
    );
    let late = match scheduled {
        Some(_) => (" latest start after its due time |", "---|"),
        None => ("", ""),
    };
    println!(
        "| role | command | starts | transitions | overlaps | orphan | longest without a command | from | during |{}\n\
         |---|---|---|---|---|---|---|---|---|{}",
        late.0, late.1
    );
    for (j, r) in roles.iter().enumerate() {
        let gap = &figures.gaps[j];
        let late = scheduled.map(|s| match &s.roles[j].latest {
            Some((late, due)) => format!(" {} ({due}) |", f(*late)),
            None => " - |".into(),
        });
        println!(
            "| {j} | {} | {} | {} | {} | {} | {} | {} | {} |{}",
            KINDS[j % 4],
            r.starts.len(),
            r.transitions(),
            r.overlaps.len(),
            if r.orphan { "yes" } else { "no" },
            f(gap.length),
            gap.from.map(wall).unwrap_or_else(|| "-".into()),
            if gap.from.is_some() { gap.during.as_str() } else { "-" },
            late.unwrap_or_default()
        );
    }
}

/// A duration as the summary shows it: seconds, to the hundredth.
fn f(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// On a schedule: each role's due times judged by the schedule's rules
/// (`judge::check_roles_schedule`), summed, with every rerun and skipped
/// due time named.
fn schedule(s: &RolesSchedule) {
    println!(
        "scheduled due times over every role: started {}, ran to their end {}, started again as a later attempt \
         (cut short) {}; flaky jobs' failures {}, retried {}",
        s.sum(|r| r.started),
        s.sum(|r| r.ended),
        s.sum(|r| r.retried),
        s.sum(|r| r.failed),
        s.sum(|r| r.retries)
    );
    println!(
        "reruns after a recorded ending: {} (due times whose ending was recorded: {}, {} of them known only by \
         their member's next run; log lines of an ending told to no single role: {})",
        s.sum(|r| r.reruns.len()),
        s.sum(|r| r.recorded),
        s.next_run,
        s.unattributed
    );
    for (j, r) in s.roles.iter().enumerate() {
        for (due, token, done) in &r.reruns {
            println!(
                "  role {j}: due time {due} started under token {token} after its run (token {done}) was recorded"
            );
        }
    }
    println!(
        "skipped due times (--missed all): {} (an overlap=replace job's superseded by its newest: {})",
        s.sum(|r| r.skipped.len()),
        s.sum(|r| r.superseded)
    );
    for (j, r) in s.roles.iter().enumerate() {
        r.skipped.iter().for_each(|due| println!("  role {j}: due time {due} never started"));
    }
    println!("ran to their end twice, no ending recorded (at least once): {}", s.sum(|r| r.at_least_once));
}

/// A duration to the second, for humans.
fn secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}
