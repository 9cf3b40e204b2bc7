//! neli-bench: how long is nobody running the job, and what does waiting
//! cost? The real `neli-run` binary against the dev broker and tansu, side by
//! side with `etcdctl lock --ttl` on etcd (all started by the runner, on
//! loopback), in the same run and on the same machine.
//!
//! Scenarios (each repeated; figures are medians):
//! - graceful: SIGTERM to the holder's supervisor until the next child runs,
//!   in a group quiet for a second;
//! - graceful-after-join: the same, right after a member joined (a rolling
//!   restart): librdkafka sends at most one JoinGroup a second;
//! - graceful-after-freeze: the same, half a session after another member
//!   came back from a freeze of 1.5 sessions (neli-run only);
//! - crash: kill -9 of the holder's supervisor until the next child runs,
//!   and the excess over the session timeout (etcd: the lease TTL);
//! - fence: the holder's network cut until its child is dead;
//! - blip: the holder's network cut for 1/6 to 1 session timeout, then
//!   healed: did the command stop, and how long were its heartbeats away
//!   (not in the default list: `--scenarios blip`);
//! - sweep: kill -9 of the holder's neli-run until everything its command
//!   left behind (2 and 200 setsid'd processes, one ignoring SIGTERM) is
//!   gone: the shim's own sweep, not the lease (neli-run only);
//! - yield-to: `neli-run yield --to` a waiter, from the old child's exit
//!   until the waiter's child runs (the target alternates between the two
//!   waiters, so Kafka gives partition 0 to the other one first about
//!   half the time: neli-run only; not in the default list);
//! - startup: process start until the child runs, one candidate; and
//!   "startup again": the same member stopped and another started in its
//!   group (its topic there, as a service's restart finds it);
//! - idle: CPU seconds, peak RSS and PSS of a holder and of a waiter, and
//!   (on a dev broker) the requests per second each sends, by API, as the
//!   broker counts them;
//! - scale: graceful handover, kill -9 (from the kill) and `yield` (from the old child's exit)
//!   with 10, 50 and 200 waiters, and what the settled group costs (see
//!   `scale.rs`): the broker's CPU (and its mock thread's), the requests it
//!   answered by API, every member's CPU, peak RSS and PSS;
//! - rolling-restart, leader-move, coordinator-move, leader-crash,
//!   coordinator-crash, cut: the Kafka cluster's own life, on the `cluster`
//!   contender only (a dev broker of three brokers; see `cluster.rs`);
//! - restart-in-place, duplicate-instance: static membership (KIP-345) put
//!   to the test, on the `-static` contenders (see `statics.rs`; not in the
//!   default list);
//! - roles-leave, roles-crash, roles-scale: NELI's roles (`--roles N`): a
//!   member's SIGTERM or kill -9 until each of its roles runs elsewhere,
//!   whether any other member's role stopped, and the idle cost per role
//!   owned (neli-run only; see `roles.rs`; not in the default list).
//! - crontab-lateness, crontab-crash, crontab-spread: a fleet crontab
//!   (`--crontab`): each run's start after its due time on a settled fleet,
//!   after its owner's kill -9, and how the jobs spread (neli-run only; see
//!   `crontab.rs`; not in the default list).
//!
//! Every child writes its own start time (CLOCK_REALTIME, ns) and pid, so
//! latencies are measured from the child's side. A handover where the old
//! child was still alive when the new one started is counted as an overlap.
//!
//! usage: cargo build --release && cargo run --release -p neli-proof --bin neli-bench -- [--reps 5] [--out target/bench]

mod candidates;
mod cluster;
mod crontab;
mod report;
mod roles;
mod scale;
mod scenarios;
mod statics;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use neli_proof::brokers::{find, Broker};
use neli_proof::netns::NetNs;
use neli_proof::timing_args;

use candidates::{on_interrupt, Contender};
use report::Results;

/// Side-by-side benchmarks of neli-run and etcdctl lock.
#[derive(Debug, Parser)]
struct Args {
    /// Repetitions of each latency scenario (medians are reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Session timeout for neli-run, and the lease TTL for etcdctl lock
    /// (whole seconds for etcd). neli-run's other timings scale with it
    /// (deadline S/2, grace S/3, heartbeats S/12, coordinator heartbeats
    /// S/10), unless --product-defaults.
    #[arg(long, default_value = "3s")]
    session_timeout: humantime::Duration,
    /// Run neli-run with no timing flags at all: the product's defaults
    /// (session timeout 6s, which the etcd lease TTL then matches), as a
    /// user who changed nothing gets them.
    #[arg(long, conflicts_with = "session_timeout")]
    product_defaults: bool,
    /// How long the idle scenario measures.
    #[arg(long, default_value = "60s")]
    idle: humantime::Duration,
    /// Waiter counts for the scale scenario.
    #[arg(long, value_delimiter = ',', default_value = "10,50,200")]
    scale: Vec<usize>,
    /// Scenarios to run. Not in the default list: blip, yield-to,
    /// restart-in-place, duplicate-instance, and NELI's roles: roles-leave
    /// and roles-crash (3 members of 12 roles: at --reps 5 and the
    /// product's defaults about 1.5 minutes each on the dev broker, 2.5 on
    /// tansu), roles-scale (10 members of 100 roles: about 1.5 minutes
    /// plus --idle on the dev broker, 4.5 on tansu).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "startup,graceful,graceful-after-join,graceful-after-freeze,crash,fence,sweep,idle,scale,\
                         rolling-restart,leader-move,coordinator-move,leader-crash,coordinator-crash,cut"
    )]
    scenarios: Vec<String>,
    /// Contenders: dev (neli-run on the dev broker with Kafka's group
    /// timing), dev-static (the same, each member static: its name as its
    /// group.instance.id), dev-mock (on the dev broker with librdkafka's mock
    /// coordinator), cluster (on a dev broker of three brokers: the only one
    /// the cluster scenarios run on), tansu (neli-run on tansu), etcd (etcdctl lock), base
    /// (the --baseline binary on the dev broker with Kafka's timing),
    /// base-static (the --baseline binary, static), base-cluster (the
    /// --baseline binary on a cluster), base-broker (this build's members
    /// on the --baseline binary's dev broker: a change to the dev broker,
    /// before and after).
    /// Missing tools are skipped with a note.
    #[arg(long, value_delimiter = ',', default_value = "dev,dev-mock,tansu,etcd")]
    contenders: Vec<String>,
    /// A neli-run built from another commit, for the `base` contender: a
    /// change measured before and after, side by side in one run (e.g.
    /// `git worktree add ../base HEAD~1 && cargo build --release
    /// --manifest-path ../base/Cargo.toml`).
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
    /// Where the CSV, the SVG chart and the markdown report go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
}

/// What every scenario runs with.
struct Bench {
    args: Args,
    /// The groups' directories (kept if anything went wrong).
    work: PathBuf,
    /// The fence and blip scenarios' namespace (none: neither runs).
    ns: Option<NetNs>,
    /// How long a scenario waits for a child to start.
    within: Duration,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let neli = std::env::current_exe().expect("own path").with_file_name("neli-run");
    if !neli.exists() {
        eprintln!("neli-bench: {} not found: build it first (cargo build --release -p neli-run)", neli.display());
        return ExitCode::FAILURE;
    }
    let (session, timing) = match args.product_defaults {
        // The product's default session timeout (src/cli/run.rs).
        true => (Duration::from_secs(6), Vec::new()),
        false => (args.session_timeout.into(), timing_args(args.session_timeout.into())),
    };
    let work = std::env::temp_dir().join(format!("neli-bench-{}", std::process::id()));
    fs::create_dir_all(&work).expect("work dir");
    fs::create_dir_all(&args.out).expect("--out dir");
    let ns = fence_namespace(&args, &work);
    let bench = Bench { args, work, ns, within: session * 6 + Duration::from_secs(20) };
    let mut results = Results::default();
    let mut contenders = setup(&bench, &neli, (session, timing), &mut results);
    for c in &mut contenders {
        eprintln!("neli-bench: {}", c.name);
        scenarios::measure(&bench, c, &mut results);
    }
    let names: Vec<&str> = contenders.iter().map(|c| c.name).collect();
    report::report(&bench.args, &results, &names);
    drop(contenders);
    if results.notes.is_empty() {
        let _ = fs::remove_dir_all(&bench.work);
    } else {
        eprintln!("neli-bench: logs kept in {}", bench.work.display());
    }
    ExitCode::SUCCESS
}

/// One namespace for the fence and blip scenarios (if asked for), and the handler
/// that cleans up if the runner is stopped.
fn fence_namespace(args: &Args, work: &Path) -> Option<NetNs> {
    let ns = if args.scenarios.iter().any(|s| s == "fence" || s == "blip") {
        NetNs::create().map_err(|why| eprintln!("neli-bench: {why}; skipping the fence and blip scenarios")).ok()
    } else {
        None
    };
    let delete_ns = ns.as_ref().map(NetNs::deleter);
    let work_dir = work.to_path_buf();
    on_interrupt(move || {
        delete_ns.into_iter().for_each(|delete| delete());
        eprintln!("neli-bench: logs kept in {}", work_dir.display());
    });
    ns
}

/// Starts each contender's broker (etcd for etcdctl); a contender whose
/// broker or tool is missing is skipped with a note. `timing` is the
/// session timeout and neli-run's timing flags.
fn setup(bench: &Bench, neli: &Path, timing: (Duration, Vec<String>), results: &mut Results) -> Vec<Contender> {
    let (args, work) = (&bench.args, &bench.work);
    // The brokers listen everywhere and are reached through the fence
    // namespace's host address, from the host too.
    let (listen, ip) = match &bench.ns {
        Some(ns) => ("0.0.0.0", ns.host_ip.clone()),
        None => ("127.0.0.1", "127.0.0.1".to_string()),
    };
    let mut contenders = Vec::new();
    for name in &args.contenders {
        let log = work.join(format!("{name}-broker.log"));
        // Every dev broker counts the requests it receives (the idle
        // scenario's requests per second), read through this socket.
        let control = work.join(format!("{name}.ctl"));
        let control = Some(control.as_path());
        let (broker, etcdctl) = match name.as_str() {
            "dev" | "dev-static" => (Broker::dev(neli, "kafka", listen, &ip, &log, control), None),
            "cluster" => (Broker::dev_cluster(neli, 3, listen, &ip, &log, &work.join("cluster.ctl")), None),
            "dev-mock" => (Broker::dev(neli, "mock", listen, &ip, &log, control), None),
            "tansu" => (Broker::tansu(listen, &ip, &log), None),
            // The same dev broker (this build's) for both: only the members differ.
            "base" | "base-static" | "base-cluster" => match &args.baseline {
                Some(path) if path.exists() && name != "base-cluster" => {
                    (Broker::dev(neli, "kafka", listen, &ip, &log, control), None)
                }
                Some(path) if path.exists() => {
                    (Broker::dev_cluster(neli, 3, listen, &ip, &log, &work.join("base-cluster.ctl")), None)
                }
                _ => (Err("give the baseline binary with --baseline PATH".into()), None),
            },
            "base-broker" => match &args.baseline {
                Some(path) if path.exists() => (Broker::dev(path, "kafka", listen, &ip, &log, control), None),
                _ => (Err("give the baseline binary with --baseline PATH".into()), None),
            },
            "etcd" => match find("etcdctl") {
                Some(etcdctl) => (Broker::etcd(&work.join("etcd-data"), listen, &ip, &log), Some(etcdctl)),
                None => (Err("etcdctl not found: apt-get install etcd-client".into()), None),
            },
            other => {
                let known =
                    "dev, dev-static, dev-mock, cluster, tansu, etcd, base, base-static, base-cluster, base-broker";
                (Err(format!("unknown contender {other} ({known})")), None)
            }
        };
        match broker {
            Ok(broker) => contenders.push(Contender {
                name: match name.as_str() {
                    "dev" => "neli-run/dev",
                    "dev-static" => "neli-run/dev-static",
                    "cluster" => "neli-run/cluster",
                    "dev-mock" => "neli-run/dev-mock",
                    "tansu" => "neli-run/tansu",
                    "base" => "baseline/dev",
                    "base-static" => "baseline/dev-static",
                    "base-cluster" => "baseline/cluster",
                    "base-broker" => "neli-run/base-broker",
                    _ => "etcdctl-lock",
                },
                neli: match name.as_str() {
                    "base" | "base-static" | "base-cluster" => args.baseline.clone().expect("checked above"),
                    _ => neli.to_path_buf(),
                },
                etcdctl,
                broker,
                session: timing.0,
                timing: timing.1.clone(),
                groups: Default::default(),
                static_members: name.ends_with("-static"),
                broker_log: log,
            }),
            Err(why) => {
                eprintln!("neli-bench: skipping {name}: {why}");
                results.notes.push(format!("{name} skipped: {why}"));
            }
        }
    }
    contenders
}

// What the scenarios' modules (scenarios.rs, cluster.rs, statics.rs) share.

/// A duration in (fractional) milliseconds, as the rows count them.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The gap a "own heartbeats back after a gap" line says (`gap=3.35s`,
/// `gap=850ms`: Rust's Debug of a Duration).
fn gap_of(line: &str) -> Option<Duration> {
    let value = line.split_whitespace().find_map(|w| w.strip_prefix("gap="))?;
    let digits = value.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (n, unit) = value.split_at(digits);
    let n: f64 = n.parse().ok()?;
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(n * scale))
}
