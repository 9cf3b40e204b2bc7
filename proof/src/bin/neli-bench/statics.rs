//! Static membership (KIP-345: `-X group.instance.id`), measured before it
//! is adopted (issue 29). The graceful and crash scenarios run on the
//! `dev-static` contender as on `dev`; these two add what only static
//! membership changes:
//!
//! - restart-in-place: the holder's neli-run stopped (SIGKILL, or SIGTERM)
//!   and started again under the same name (and instance id) the moment it
//!   has exited, as systemd's `Restart=always` does: the command's downtime
//!   (from the old child gone to the next child started), whether the
//!   restarted member ran it next (`kept`), how many JoinGroups the group
//!   sent meanwhile (1: the restarted member's alone, no rebalance), and
//!   whether the old child still ran when the next one started. On `dev`
//!   too, for comparison (a dynamic member restarted is a new member);
//! - duplicate-instance: a second, live neli-run started with the holder's
//!   instance id (a configuration mistake): when the holder's command
//!   stopped, when the newcomer's started, whether the holder's neli-run
//!   exited and how (its log's last error), and how long two commands of
//!   the group ran at once. Static contenders only. Then the same mistake
//!   with both twins under a service manager that restarts a neli-run that
//!   failed 1 s later (the contrib unit's `Restart=on-failure`,
//!   `RestartSec=1s`), for five sessions: how long a command of the group
//!   ran, how often one started, how often a twin was fenced, and how long
//!   two commands ran at once.

use std::fs;
use std::time::{Duration, Instant, SystemTime};

use crate::candidates::{alive, Contender, Group, Stop};
use crate::report::Results;
use crate::{ms, Bench};

/// Runs the scenarios asked for against `c`.
pub fn measure(bench: &Bench, c: &mut Contender, results: &mut Results) {
    let run = |s: &str| bench.args.scenarios.iter().any(|x| x == s);
    if c.is_etcd() {
        return;
    }
    if run("restart-in-place") {
        restart_in_place(bench, c, results, Stop::Crash);
        restart_in_place(bench, c, results, Stop::Graceful);
    }
    if run("duplicate-instance") && c.static_members {
        duplicate_instance(bench, c, results);
        duplicate_restarted(bench, c, results);
    }
}

/// A holder and two standbys, settled.
fn settled<'a>(bench: &Bench, c: &'a mut Contender) -> Option<Group<'a>> {
    let mut g = Group::new(c, &bench.work);
    for _ in 0..3 {
        g.spawn();
    }
    (g.wait_start(1, bench.within).is_some() && g.settle(bench.within, false)).then_some(g)
}

/// JoinGroup requests of `group` in the dev broker's log so far (it logs
/// every group request at debug level, with `group=NAME`).
fn joins(log: &std::path::Path, group: &str) -> usize {
    let tag = format!("group={group}");
    let text = fs::read_to_string(log).unwrap_or_default();
    text.lines().filter(|l| l.contains("Join(JoinGroup") && l.split_whitespace().any(|w| w == tag)).count()
}

/// The holder stopped and started again at once under its own name, --reps
/// times.
fn restart_in_place(bench: &Bench, c: &mut Contender, results: &mut Results, stop: Stop) {
    let scenario = match stop {
        Stop::Crash => "restart-in-place (SIGKILL)",
        Stop::Graceful => "restart-in-place (SIGTERM)",
    };
    let (cname, within, log) = (c.name, bench.within, c.broker_log.clone());
    let Some(mut g) = settled(bench, c) else {
        results.notes.push(format!("{cname}: {scenario}: the group never settled"));
        return;
    };
    for _ in 0..bench.args.reps {
        let (Some(holder), Some(old)) = (g.holder(), g.starts().pop()) else { return };
        let (count, name) = (g.starts().len(), g.candidate_name(holder).to_string());
        let joined_before = joins(&log, g.name());
        // Kept until its child is gone: dropping it kills its process group.
        let mut stopped = g.candidates.remove(holder);
        stop.send(stopped.pid());
        // Its command may be gone before it exits (SIGTERM: it stops the
        // command, then leaves) or after (SIGKILL: the shim ends it).
        let (until, mut gone) = (Instant::now() + within, None);
        let watch = |gone: &mut Option<SystemTime>| {
            if gone.is_none() && !alive(old.pid) {
                *gone = Some(SystemTime::now());
            }
            std::thread::sleep(Duration::from_millis(1));
            Instant::now() < until
        };
        while stopped.exited().is_none() && watch(&mut gone) {}
        g.spawn_as(&name, &name);
        while gone.is_none() && watch(&mut gone) {}
        drop(stopped);
        let Some(gone) = gone else {
            results.notes.push(format!("{cname}: {scenario}: the old command still ran after {within:?}"));
            return;
        };
        let Some(next) = g.wait_start(count + 1, within) else {
            results.notes.push(format!("{cname}: {scenario}: no child within {within:?}"));
            return;
        };
        let joined = joins(&log, g.name()) - joined_before;
        let overlap = next.at < gone;
        let downtime = next.at.duration_since(gone).unwrap_or_default();
        let kept = next.name == name;
        eprintln!(
            "neli-bench: {cname}: {scenario}: downtime {downtime:.2?}, next run by {} ({}), {joined} JoinGroups, overlap {overlap}",
            next.name,
            if kept { "kept" } else { "another member" },
        );
        results.add(&format!("{scenario} downtime"), cname, ms(downtime));
        results.add(&format!("{scenario} kept"), cname, f64::from(u8::from(kept)));
        results.add(&format!("{scenario} joins"), cname, joined as f64);
        results.add(&format!("{scenario} overlaps"), cname, f64::from(u8::from(overlap)));
        g.settle(within, false);
    }
}

/// A second live member with the holder's instance id, --reps times (a
/// fresh group each).
fn duplicate_instance(bench: &Bench, c: &mut Contender, results: &mut Results) {
    const SCENARIO: &str = "duplicate-instance";
    let (cname, session) = (c.name, c.session);
    for _ in 0..bench.args.reps {
        let Some(mut g) = settled(bench, c) else {
            results.notes.push(format!("{cname}: {SCENARIO}: the group never settled"));
            return;
        };
        let (Some(holder), Some(old)) = (g.holder(), g.starts().pop()) else { return };
        let name = g.candidate_name(holder).to_string();
        let twin = format!("{name}-twin");
        let count = g.starts().len();
        let spawned = SystemTime::now();
        g.spawn_as(&twin, &name);
        // Watch three sessions: every child's life, and the holder's exit.
        let (mut gone, mut exited, mut both) = (None, None, Duration::ZERO);
        let mut last = Instant::now();
        let begun = Instant::now();
        while begun.elapsed() < session * 3 {
            let now = Instant::now();
            let running = g.starts().iter().filter(|s| alive(s.pid)).count();
            if running > 1 {
                both += now - last;
            }
            last = now;
            if gone.is_none() && !alive(old.pid) {
                gone = Some(SystemTime::now());
            }
            if exited.is_none() {
                exited = g.candidates[holder].exited().map(|status| (SystemTime::now(), status));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let after = |t: Option<SystemTime>| t.and_then(|t| t.duration_since(spawned).ok());
        let starts = g.starts();
        let twin_start = starts[count..].iter().find(|s| s.name == twin).map(|s| s.at);
        let holder_log = fs::read_to_string(g.log_path(holder)).unwrap_or_default();
        let said = holder_log.lines().rev().find(|l| l.contains("ERROR") || l.contains("fenced")).unwrap_or("");
        eprintln!(
            "neli-bench: {cname}: {SCENARIO}: holder's command stopped after {:.0?}, twin's started after {:.0?}, \
             holder exited after {:.0?} ({:?}), two commands at once for {both:.0?}, starts {}; holder said: {said}",
            after(gone),
            after(twin_start),
            after(exited.map(|e| e.0)),
            exited.map(|e| e.1),
            starts.len() - count,
        );
        if let Some(d) = after(gone) {
            results.add(&format!("{SCENARIO}: holder's command stopped after"), cname, ms(d));
        }
        if let Some(d) = after(twin_start) {
            results.add(&format!("{SCENARIO}: twin's command started after"), cname, ms(d));
        }
        if let Some(d) = after(exited.map(|e| e.0)) {
            results.add(&format!("{SCENARIO}: holder's neli-run exited after"), cname, ms(d));
        }
        results.add(&format!("{SCENARIO}: two commands at once"), cname, ms(both));
        results.add(&format!("{SCENARIO} overlaps"), cname, f64::from(u8::from(both > Duration::ZERO)));
        results.add(&format!("{SCENARIO} starts"), cname, (starts.len() - count) as f64);
    }
}

/// How long the service manager waits before it restarts a neli-run that
/// failed (contrib/neli-run@.service: `RestartSec=1s`).
const RESTART_SEC: Duration = Duration::from_secs(1);

/// The holder and its twin (the holder's instance id) both restarted
/// `RESTART_SEC` after they exit, over five sessions, --reps times.
fn duplicate_restarted(bench: &Bench, c: &mut Contender, results: &mut Results) {
    const SCENARIO: &str = "duplicate-instance restarted on failure";
    let (cname, session) = (c.name, c.session);
    for _ in 0..bench.args.reps.min(3) {
        let Some(mut g) = settled(bench, c) else {
            results.notes.push(format!("{cname}: {SCENARIO}: the group never settled"));
            return;
        };
        let Some(holder) = g.holder() else { return };
        let name = g.candidate_name(holder).to_string();
        let twins = [name.clone(), format!("{name}-twin")];
        let count = g.starts().len();
        g.spawn_as(&twins[1], &name);
        let (mut up, mut both, mut exits) = (Duration::ZERO, Duration::ZERO, 0);
        let mut restarts: Vec<(Instant, String)> = Vec::new();
        let (begun, mut last) = (Instant::now(), Instant::now());
        while begun.elapsed() < session * 5 {
            let now = Instant::now();
            let running = g.starts().iter().filter(|s| alive(s.pid)).count();
            if running > 0 {
                up += now - last;
            }
            if running > 1 {
                both += now - last;
            }
            last = now;
            for twin in &twins {
                let at = g.candidates.iter().position(|c| c.name() == twin.as_str());
                if let Some(i) = at.filter(|i| g.candidates[*i].exited().is_some()) {
                    exits += 1;
                    drop(g.candidates.remove(i));
                    restarts.push((now + RESTART_SEC, twin.clone()));
                }
            }
            while let Some(i) = restarts.iter().position(|(at, _)| *at <= now) {
                let (_, twin) = restarts.remove(i);
                g.spawn_as(&twin, &name);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let starts = g.starts().len() - count;
        let window = begun.elapsed();
        eprintln!(
            "neli-bench: {cname}: {SCENARIO}: over {window:.0?}: a command ran {up:.0?}, {starts} starts, \
             {exits} exits, two commands at once for {both:.0?}"
        );
        results.add(&format!("{SCENARIO}: command ran (of 5 sessions)"), cname, ms(up));
        results.add(&format!("{SCENARIO} starts"), cname, starts as f64);
        results.add(&format!("{SCENARIO}: neli-run exits"), cname, exits as f64);
        results.add(&format!("{SCENARIO}: two commands at once"), cname, ms(both));
    }
}
