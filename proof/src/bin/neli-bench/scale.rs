//! The scale scenario: a group of --scale waiters and a holder, what it
//! costs once settled (the broker's CPU and requests, every member's CPU
//! and memory), then graceful handovers, kill -9s and `yield`s in it.

use std::fs;
use std::time::{Duration, Instant};

use neli_proof::brokers::Requests;
use neli_proof::wait_for;

use crate::candidates::{handover, Contender, Group, Stop};
use crate::report::Results;
use crate::scenarios::{idle_usage, usage, yield_once};
use crate::{ms, Bench};

/// How long the settled group is watched: the broker and every member over
/// the same window.
const WINDOW: Duration = Duration::from_secs(10);

/// How long the group is left alone once its cold members have left the
/// group, before the window: each cold member makes its watcher a new
/// client as it goes cold (ApiVersions, Metadata, FindCoordinator), a
/// one-off the settled group does not pay. 20 s, and a fifth of a second
/// a member past 100 (a group of 500 takes minutes to settle on 2 cores).
fn settle_for(n: usize) -> Duration {
    Duration::from_secs(20) + Duration::from_millis(200) * n.saturating_sub(100) as u32
}

/// Between two members' starts: the group starts as a fleet's hosts would,
/// not 500 processes in one instant on 2 cores.
const STAGGER: Duration = Duration::from_millis(50);

/// neli-run's default `--hot-standbys`: a group of a holder and N waiters
/// settles with N - 2 of them cold.
const HOT_STANDBYS: usize = 2;

/// Graceful handovers, `yield`s and crashes with --scale waiters.
pub fn scale(bench: &Bench, c: &mut Contender, results: &mut Results) {
    let cname = c.name;
    for &n in &bench.args.scale {
        let mut g = Group::new(c, &bench.work);
        for _ in 0..=n {
            g.spawn();
            std::thread::sleep(STAGGER);
        }
        let big = bench.within * 4 + Duration::from_secs(n as u64);
        if g.wait_start(1, big).is_none() || !g.settle(big, false) {
            results.notes.push(format!("{cname}: scale {n}: the group never settled"));
            continue;
        }
        settled_load(&g, n, big, results);
        // Up to 10 (issue 68 compares the handover with 200 to the one
        // with 2: three a side was too few to tell 1.4x from 1.9x).
        for _ in 0..bench.args.reps.min(10) {
            match handover(&mut g, Stop::Graceful, big, false) {
                Some((took, _)) => results.add(&format!("scale {n}"), cname, ms(took)),
                None => results.notes.push(format!("{cname}: scale {n}: no new holder")),
            }
        }
        // kill -9 of the holder's neli-run, in the same group: a crash
        // fails over within the session timeout and a second (issue 68),
        // whatever the group's size.
        for _ in 0..bench.args.reps.min(3) {
            match handover(&mut g, Stop::Crash, big, false) {
                Some((took, overlap)) => {
                    results.add(&format!("scale {n} crash"), cname, ms(took));
                    results.add(&format!("scale {n} crash overlaps"), cname, f64::from(u8::from(overlap)));
                }
                None => results.notes.push(format!("{cname}: scale {n} crash: no new holder")),
            }
        }
        if c.is_etcd() {
            continue;
        }
        // A `yield` in the same group, from the old child's exit: --reps
        // of them (issue 68 asks for 20 under 100 ms), where a handover
        // and a crash, which replace a member, are capped at 10 and 3.
        for _ in 0..bench.args.reps {
            match yield_once(&g, None, big) {
                Ok((took, _)) => results.add(&format!("scale {n} yield"), cname, ms(took)),
                Err(why) => results.notes.push(format!("{cname}: scale {n} yield: {why}")),
            }
            g.settle(big, false);
        }
    }
}

/// What the settled group of `n` waiters costs, over [`WINDOW`], once all
/// but the hot standbys have gone cold and [`settle_for`] has passed: the
/// broker's CPU (% of a core: the process, and librdkafka's mock thread
/// alone, which on a dev broker serves every forwarded request) and the
/// requests it answered a second (a dev broker's count, all clients, and by
/// API); every member's CPU (% of a core), peak RSS and PSS (MiB, neli-run
/// with its shim), one sample each, and their CPU summed.
fn settled_load(g: &Group, n: usize, within: Duration, results: &mut Results) {
    let c = g.contender;
    if !c.is_etcd() {
        let cold = || g.candidates.iter().filter(|m| went_cold(g, m.name())).count();
        if !wait_for(within, || cold() >= n.saturating_sub(HOT_STANDBYS)) {
            results.notes.push(format!("{}: scale {n}: {} of {n} waiters went cold", c.name, cold()));
        }
        std::thread::sleep(settle_for(n));
    }
    let broker = c.broker.pid().as_raw();
    let (before, cpu) = (c.broker.requests(), (usage(broker).map(|u| u.0), mock_thread_cpu(broker)));
    let from = Instant::now();
    let members = idle_usage(WINDOW, &g.candidates.iter().map(|m| m.pid()).collect::<Vec<_>>());
    let (after, secs) = (c.broker.requests(), from.elapsed().as_secs_f64());
    let pct = |from: Option<f64>, to: Option<f64>| Some(100.0 * (to? - from?) / secs);
    let prefix = format!("scale {n} idle");
    if let Some(p) = pct(cpu.0, usage(broker).map(|u| u.0)) {
        results.add(&format!("{prefix} broker cpu%"), c.name, p);
    }
    if let Some(p) = pct(cpu.1, mock_thread_cpu(broker)) {
        results.add(&format!("{prefix} broker mock thread cpu%"), c.name, p);
    }
    if let (Ok(before), Ok(after)) = (before, after) {
        for (api, count) in by_api(&before, &after) {
            results.add(&format!("{prefix} broker req/s {api}"), c.name, count as f64 / secs);
        }
    }
    for used in &members {
        results.add(&format!("{prefix} member cpu%"), c.name, 100.0 * used.cpu / secs);
        results.add(&format!("{prefix} member rss"), c.name, used.rss);
        results.add(&format!("{prefix} member pss"), c.name, used.pss);
    }
    let all: f64 = members.iter().map(|u| u.cpu).sum();
    results.add(&format!("{prefix} members summed cpu%"), c.name, 100.0 * all / secs);
}

/// Whether member `name` has gone cold at least once (its log says so).
fn went_cold(g: &Group, name: &str) -> bool {
    let log = fs::read_to_string(g.dir.join(format!("{name}.log"))).unwrap_or_default();
    log.contains("a cold standby: leaving")
}

/// The requests between two readings of a dev broker's counts, by API
/// (every client summed), and `all`.
fn by_api(before: &Requests, after: &Requests) -> Vec<(String, u64)> {
    let mut apis = std::collections::BTreeMap::<String, u64>::new();
    for ((client, api), n) in after {
        let was = before.get(&(client.clone(), api.clone())).copied().unwrap_or(0);
        *apis.entry(api.clone()).or_default() += n.saturating_sub(was);
    }
    let all = apis.values().sum();
    apis.retain(|_, n| *n > 0);
    apis.into_iter().chain([("all".to_string(), all)]).collect()
}

/// CPU seconds of `pid`'s librdkafka mock thread (`rdk:mock`), from
/// schedstat; None if it has none (not a dev broker).
fn mock_thread_cpu(pid: i32) -> Option<f64> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mock =
        tasks.flatten().find(|t| fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "rdk:mock"))?;
    let ns: u64 = fs::read_to_string(mock.path().join("schedstat")).ok()?.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}
