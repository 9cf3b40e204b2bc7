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
//! - crash: kill -9 of the holder's supervisor until the next child runs,
//!   and the excess over the session timeout (etcd: the lease TTL);
//! - fence: the holder's network cut until its child is dead;
//! - startup: process start until the child runs, one candidate;
//! - idle: CPU seconds, peak RSS and PSS of a holder and of a waiter;
//! - scale: graceful handover with 10, 50 and 200 waiters.
//!
//! Every child writes its own start time (CLOCK_REALTIME, ns) and pid, so
//! latencies are measured from the child's side. A handover where the old
//! child was still alive when the new one started is counted as an overlap.
//!
//! usage: cargo build --release && cargo run --release -p neli-proof --bin neli-bench -- [--reps 5] [--out target/bench]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use neli_proof::brokers::{find, Broker};
use neli_proof::detector::read_lines;
use neli_proof::netns::NetNs;
use neli_proof::{die_with_runner, timing_args, wait_for};

/// How long a group is left quiet after its last member joined, before a
/// handover is timed: more than librdkafka's one JoinGroup a second, plus
/// up to a second drawn anew each time, so that the stop falls at any phase
/// of the members' coordinator heartbeats (which a join aligns).
const JOIN_QUIET: Duration = Duration::from_millis(1200);

/// The child: records "NAME PID START_NS" and sleeps. $0 = name, $1 = dir.
const CHILD: &str = r#"echo "$0 $$ $(date +%s%N)" >> "$1/starts"; exec sleep 100000"#;

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
    /// Scenarios to run.
    #[arg(long, value_delimiter = ',', default_value = "startup,graceful,graceful-after-join,crash,fence,idle,scale")]
    scenarios: Vec<String>,
    /// Contenders: dev (neli-run on the dev broker with Kafka's group
    /// timing), dev-mock (on the dev broker with librdkafka's mock
    /// coordinator), tansu (neli-run on tansu), etcd (etcdctl lock), base
    /// (the --baseline binary on the dev broker with Kafka's timing).
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

/// What runs the job: neli-run on a Kafka-protocol broker, or etcdctl lock.
struct Contender {
    name: &'static str,
    neli: PathBuf,
    etcdctl: Option<PathBuf>,
    /// The broker of this contender, reachable from the host and from
    /// network namespaces (it listens on 0.0.0.0).
    broker: Broker,
    session: Duration,
    /// neli-run's timing flags (none: the product's defaults).
    timing: Vec<String>,
    groups: usize,
}

impl Contender {
    fn is_etcd(&self) -> bool {
        self.etcdctl.is_some()
    }

    fn new_group(&mut self) -> String {
        self.groups += 1;
        // The whole name: `baseline/dev` and `neli-run/dev` share a broker kind.
        let kind = self.name.replace('/', "-");
        format!("bench-{kind}-{}-{}", std::process::id(), self.groups)
    }

    /// The timeout after which a crashed holder's claim expires.
    fn expiry(&self) -> Duration {
        self.session
    }

    /// The command line of one candidate in `group` whose child is named
    /// `name` and records into `dir`.
    fn argv(&self, group: &str, name: &str, dir: &Path) -> Vec<String> {
        let s = self.session;
        let mut argv: Vec<String> = match &self.etcdctl {
            Some(etcdctl) => vec![
                etcdctl.display().to_string(),
                format!("--endpoints=http://{}", self.broker.address),
                "lock".into(),
                format!("--ttl={}", s.as_secs().max(1)),
                group.into(),
                "--".into(),
            ],
            None => {
                let mut argv = vec![self.neli.display().to_string(), "-b".into(), self.broker.address.clone()];
                argv.extend(["-g".into(), group.into(), "--name".into(), name.into()]);
                argv.extend(self.timing.iter().cloned());
                argv.push("--".into());
                argv
            }
        };
        argv.extend(["sh".into(), "-c".into(), CHILD.into(), name.into(), dir.display().to_string()]);
        argv
    }
}

/// The process groups of live candidates: killed if the runner itself is
/// stopped (^C), since an etcdctl command outlives a killed etcdctl and
/// would go on running. (Brokers and candidates die with the runner anyway.)
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// On SIGINT, SIGTERM or SIGHUP: kill every candidate's group, run
/// `cleanup`, and exit as the signal would have.
fn on_interrupt(cleanup: impl FnOnce() + Send + 'static) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]).expect("signal handler");
    std::thread::spawn(move || {
        let Some(sig) = signals.forever().next() else { return };
        for &pgid in LIVE.lock().expect("candidates").iter() {
            let _ = nix::sys::signal::killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
        cleanup();
        eprintln!("neli-bench: interrupted; every candidate killed");
        std::process::exit(128 + sig);
    });
}

/// One candidate process.
struct Candidate {
    name: String,
    process: Child,
}

impl Candidate {
    fn pid(&self) -> Pid {
        Pid::from_raw(self.process.id() as i32)
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        // The whole group: etcdctl's command outlives etcdctl when it is
        // killed (that is the crash scenario's overlap).
        let _ = nix::sys::signal::killpg(self.pid(), Signal::SIGKILL);
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.process.kill();
        let _ = self.process.wait();
        LIVE.lock().expect("candidates").retain(|&p| p != self.pid().as_raw());
    }
}

/// A group of candidates of one contender, with their start log.
struct Group<'a> {
    contender: &'a Contender,
    name: String,
    dir: PathBuf,
    candidates: Vec<Candidate>,
    prefix: Vec<String>,
    spawned: usize,
}

/// A child start, as the child recorded it.
#[derive(Clone, Debug)]
struct Start {
    name: String,
    pid: i32,
    at: SystemTime,
}

impl<'a> Group<'a> {
    fn new(contender: &'a mut Contender, work: &Path) -> Group<'a> {
        let name = contender.new_group();
        let dir = work.join(&name);
        fs::create_dir_all(&dir).expect("work dir");
        Group { contender, name, dir, candidates: Vec::new(), prefix: Vec::new(), spawned: 0 }
    }

    /// Starts one more candidate (its output goes to NAME.log).
    fn spawn(&mut self) -> Instant {
        self.spawned += 1;
        let name = format!("m{}", self.spawned);
        let log = fs::File::create(self.dir.join(format!("{name}.log"))).expect("log");
        let mut argv = self.prefix.clone();
        argv.extend(self.contender.argv(&self.name, &name, &self.dir));
        let at = Instant::now();
        // A process group of its own, as a service manager gives each unit:
        // a graceful stop signals the whole group.
        let process = die_with_runner(&mut Command::new(&argv[0]))
            .args(&argv[1..])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start a candidate");
        LIVE.lock().expect("candidates").push(process.id() as i32);
        self.candidates.push(Candidate { name, process });
        at
    }

    fn starts(&self) -> Vec<Start> {
        read_lines(&self.dir.join("starts"))
            .iter()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (name, pid, ns) = (f.next()?, f.next()?.parse().ok()?, f.next()?.parse::<u64>().ok()?);
                Some(Start { name: name.into(), pid, at: UNIX_EPOCH + Duration::from_nanos(ns) })
            })
            .collect()
    }

    /// Waits until `count` children have started; the last one.
    fn wait_start(&self, count: usize, within: Duration) -> Option<Start> {
        let mut last = None;
        wait_for(within, || {
            let s = self.starts();
            last = s.get(count - 1).cloned();
            last.is_some()
        });
        last
    }

    /// The candidate whose child started last.
    fn holder(&self) -> Option<usize> {
        let name = self.starts().pop()?.name;
        self.candidates.iter().position(|c| c.name == name)
    }

    /// Waits until every neli-run candidate has joined (its log says so);
    /// etcdctl waiters queue at once. Then, unless `at_once`, lets the
    /// group be quiet for `JOIN_QUIET`: librdkafka sends a member's
    /// JoinGroup at most once a second, so a stop within a second of the
    /// last rebalance waits out the rest of that second (the scenario
    /// `graceful-after-join` measures exactly that).
    fn settle(&self, within: Duration, at_once: bool) -> bool {
        if self.contender.is_etcd() {
            std::thread::sleep(Duration::from_millis(500));
            return true;
        }
        let joined = wait_for(within, || {
            self.candidates.iter().all(|c| {
                let log = fs::read_to_string(self.dir.join(format!("{}.log", c.name))).unwrap_or_default();
                log.contains("standby:") || log.contains("child started")
            })
        });
        if joined && !at_once {
            let jitter = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_millis();
            std::thread::sleep(JOIN_QUIET + Duration::from_millis(u64::from(jitter)));
        }
        joined
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is dead for our purposes: it runs no code and holds no lock.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, t)| !t.starts_with('Z')))
        .unwrap_or(false)
}

/// How a handover is forced.
#[derive(Clone, Copy)]
enum Stop {
    /// SIGTERM to the holder's process group, as systemd stops a unit
    /// (etcdctl ignores a SIGTERM sent to it alone and keeps the lock).
    Graceful,
    /// SIGKILL to the supervisor process only: a crash.
    Crash,
}

/// One handover until the next child starts. Returns the latency and
/// whether the old child was still alive at that moment.
fn handover(group: &mut Group, stop: Stop, within: Duration, at_once: bool) -> Option<(Duration, bool)> {
    let holder = group.holder()?;
    let before = group.starts();
    let old = before.last()?.clone();
    let pid = group.candidates[holder].pid();
    let sent = SystemTime::now();
    let _ = match stop {
        Stop::Graceful => nix::sys::signal::killpg(pid, Signal::SIGTERM),
        Stop::Crash => kill(pid, Signal::SIGKILL),
    };
    let new = group.wait_start(before.len() + 1, within)?;
    let overlap = alive(old.pid);
    // The stopped candidate is replaced, so the group keeps its size.
    let _ = group.candidates.remove(holder);
    group.spawn();
    group.settle(within, at_once);
    Some((new.at.duration_since(sent).unwrap_or_default(), overlap))
}

/// CPU seconds (every thread's time on CPU, from schedstat, in ns), peak
/// RSS and PSS now (KiB) of `pid`. RSS counts in full every shared library
/// page the process touched (libssl, libcrypto, libsasl2: most of neli-run's
/// RSS); PSS divides each shared page among the processes that map it.
fn usage(pid: i32) -> Option<(f64, u64, u64)> {
    let mut ns = 0u64;
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let stat = fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        ns += stat.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
    }
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |text: &str, key: &str| -> Option<u64> {
        text.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
    };
    let hwm = kib(&status, "VmHWM:")?;
    let pss = kib(&fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default(), "Pss:").unwrap_or(0);
    Some((ns as f64 / 1e9, hwm, pss))
}

/// The supervisor's own processes: neli-run and its shim (the child's
/// parent), or etcdctl alone. The shim is neli-run re-executed through
/// /proc/self/exe (so its comm is "exe") with argv[0] `neli-run-shim`, and
/// a child of whichever of neli-run's threads spawned it.
fn supervisor_pids(pid: Pid) -> Vec<i32> {
    let mut pids = vec![pid.as_raw()];
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    for task in tasks {
        let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for c in children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
            let argv0 = fs::read(format!("/proc/{c}/cmdline")).unwrap_or_default();
            if argv0.split(|b| *b == 0).next() == Some(b"neli-run-shim") {
                pids.push(c);
            }
        }
    }
    pids
}

/// Samples, by (scenario, contender).
#[derive(Default)]
struct Results {
    samples: BTreeMap<(String, String), Vec<f64>>,
    notes: Vec<String>,
}

impl Results {
    fn add(&mut self, scenario: &str, contender: &str, value: f64) {
        self.samples.entry((scenario.into(), contender.into())).or_default().push(value);
    }

    fn median(&self, scenario: &str, contender: &str) -> Option<f64> {
        let mut v = self.samples.get(&(scenario.to_string(), contender.to_string()))?.clone();
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }

    fn p99(&self, scenario: &str, contender: &str) -> Option<f64> {
        let mut v = self.samples.get(&(scenario.to_string(), contender.to_string()))?.clone();
        v.sort_by(f64::total_cmp);
        Some(v[((v.len() - 1) as f64 * 0.99).round() as usize])
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let neli = std::env::current_exe().expect("own path").with_file_name("neli-run");
    if !neli.exists() {
        eprintln!("neli-bench: {} not found: build it first (cargo build --release -p neli-run)", neli.display());
        return ExitCode::FAILURE;
    }
    let (session, timing) = match args.product_defaults {
        // The product's default session timeout (src/cli.rs).
        true => (Duration::from_secs(6), Vec::new()),
        false => (args.session_timeout.into(), timing_args(args.session_timeout.into())),
    };
    let work = std::env::temp_dir().join(format!("neli-bench-{}", std::process::id()));
    fs::create_dir_all(&work).expect("work dir");
    fs::create_dir_all(&args.out).expect("--out dir");

    // One namespace for the fence scenario; the brokers listen everywhere
    // and are reached through its host address, from the host too.
    let ns = if args.scenarios.iter().any(|s| s == "fence") {
        NetNs::create().map_err(|why| eprintln!("neli-bench: {why}; skipping the fence scenario")).ok()
    } else {
        None
    };
    let delete_ns = ns.as_ref().map(NetNs::deleter);
    let work_dir = work.clone();
    on_interrupt(move || {
        delete_ns.into_iter().for_each(|delete| delete());
        eprintln!("neli-bench: logs kept in {}", work_dir.display());
    });
    let (listen, ip) = match &ns {
        Some(ns) => ("0.0.0.0", ns.host_ip.clone()),
        None => ("127.0.0.1", "127.0.0.1".to_string()),
    };

    let mut results = Results::default();
    let mut contenders = Vec::new();
    for name in &args.contenders {
        let log = work.join(format!("{name}-broker.log"));
        let (broker, etcdctl) = match name.as_str() {
            "dev" => (Broker::dev(&neli, "kafka", listen, &ip, &log), None),
            "dev-mock" => (Broker::dev(&neli, "mock", listen, &ip, &log), None),
            "tansu" => (Broker::tansu(listen, &ip, &log), None),
            // The same dev broker (this build's) for both: only the members differ.
            "base" => match &args.baseline {
                Some(path) if path.exists() => (Broker::dev(&neli, "kafka", listen, &ip, &log), None),
                _ => (Err("give the baseline binary with --baseline PATH".into()), None),
            },
            "etcd" => match find("etcdctl") {
                Some(etcdctl) => (Broker::etcd(&work.join("etcd-data"), listen, &ip, &log), Some(etcdctl)),
                None => (Err("etcdctl not found: apt-get install etcd-client".into()), None),
            },
            other => (Err(format!("unknown contender {other} (dev, dev-mock, tansu, etcd, base)")), None),
        };
        match broker {
            Ok(broker) => contenders.push(Contender {
                name: match name.as_str() {
                    "dev" => "neli-run/dev",
                    "dev-mock" => "neli-run/dev-mock",
                    "tansu" => "neli-run/tansu",
                    "base" => "baseline/dev",
                    _ => "etcdctl-lock",
                },
                neli: match name.as_str() {
                    "base" => args.baseline.clone().expect("checked above"),
                    _ => neli.clone(),
                },
                etcdctl,
                broker,
                session,
                timing: timing.clone(),
                groups: 0,
            }),
            Err(why) => {
                eprintln!("neli-bench: skipping {name}: {why}");
                results.notes.push(format!("{name} skipped: {why}"));
            }
        }
    }
    let within = session * 6 + Duration::from_secs(20);
    let run = |s: &str| args.scenarios.iter().any(|x| x == s);

    for c in &mut contenders {
        let cname = c.name;
        eprintln!("neli-bench: {cname}");
        if run("startup") {
            for _ in 0..args.reps {
                let mut g = Group::new(c, &work);
                let spawned = SystemTime::now();
                g.spawn();
                match g.wait_start(1, within) {
                    Some(s) => results.add("startup", cname, ms(s.at.duration_since(spawned).unwrap_or_default())),
                    None => results.notes.push(format!("{cname}: startup: no child within {within:?}")),
                }
            }
        }
        let kinds = [
            ("graceful", Stop::Graceful, false),
            ("graceful-after-join", Stop::Graceful, true),
            ("crash", Stop::Crash, false),
        ];
        for (scenario, stop, at_once) in kinds {
            let waiters = 2;
            if !run(scenario) {
                continue;
            }
            let mut g = Group::new(c, &work);
            for _ in 0..=waiters {
                g.spawn();
            }
            if g.wait_start(1, within).is_none() || !g.settle(within, at_once) {
                results.notes.push(format!("{cname}: {scenario}: the group never settled"));
                continue;
            }
            for _ in 0..args.reps {
                match handover(&mut g, stop, within, at_once) {
                    Some((took, overlap)) => {
                        results.add(scenario, cname, ms(took));
                        if scenario == "crash" {
                            results.add("crash excess", cname, ms(took) - ms(g.contender.expiry()));
                        }
                        results.add(&format!("{scenario} overlaps"), cname, f64::from(u8::from(overlap)));
                    }
                    None => results.notes.push(format!("{cname}: {scenario}: no new holder within {within:?}")),
                }
            }
        }
        if run("fence") {
            if let Some(ns) = &ns {
                for _ in 0..args.reps {
                    let mut g = Group::new(c, &work);
                    g.prefix = ns.exec_prefix();
                    g.spawn();
                    let Some(start) = g.wait_start(1, within) else {
                        results.notes.push(format!("{cname}: fence: no child in the namespace"));
                        continue;
                    };
                    // Let the holder settle into steady heartbeats first.
                    std::thread::sleep(session / 2);
                    let cut = Instant::now();
                    ns.cut();
                    let fenced = wait_for(session * 3, || !alive(start.pid));
                    ns.heal();
                    if fenced {
                        results.add("fence", cname, ms(cut.elapsed()));
                    } else {
                        results.add("fence (still running after 3 timeouts)", cname, 1.0);
                    }
                }
            }
        }
        if run("idle") {
            let mut g = Group::new(c, &work);
            g.spawn();
            g.spawn();
            if g.wait_start(1, within).is_some() && g.settle(within, false) {
                let holder = g.holder().expect("a holder");
                let roles = [("holder", holder), ("waiter", 1 - holder)];
                let before: Vec<_> =
                    roles.iter().map(|(_, i)| supervisor_pids(g.candidates[*i].pid())).collect::<Vec<_>>();
                // Summed over a role's processes: CPU seconds, peak RSS, PSS.
                let sum = |pids: &[i32]| {
                    pids.iter().filter_map(|p| usage(*p)).fold((0.0, 0, 0), |a, u| (a.0 + u.0, a.1 + u.1, a.2 + u.2))
                };
                let start: Vec<f64> = before.iter().map(|p| sum(p).0).collect();
                std::thread::sleep(args.idle.into());
                for (((role, _), pids), start) in roles.iter().zip(&before).zip(start) {
                    let (cpu, rss, pss) = sum(pids);
                    results.add(&format!("idle {role} cpu"), cname, cpu - start);
                    results.add(&format!("idle {role} rss"), cname, rss as f64 / 1024.0);
                    results.add(&format!("idle {role} pss"), cname, pss as f64 / 1024.0);
                }
            }
        }
        if run("scale") {
            for &n in &args.scale {
                let mut g = Group::new(c, &work);
                for _ in 0..=n {
                    g.spawn();
                }
                let big = within * 4 + Duration::from_secs(n as u64);
                if g.wait_start(1, big).is_none() || !g.settle(big, false) {
                    results.notes.push(format!("{cname}: scale {n}: the group never settled"));
                    continue;
                }
                for _ in 0..args.reps.min(3) {
                    match handover(&mut g, Stop::Graceful, big, false) {
                        Some((took, _)) => results.add(&format!("scale {n}"), cname, ms(took)),
                        None => results.notes.push(format!("{cname}: scale {n}: no new holder")),
                    }
                }
            }
        }
    }
    let names: Vec<&str> = contenders.iter().map(|c| c.name).collect();
    report(&args, &results, &names);
    drop(contenders);
    if results.notes.is_empty() {
        let _ = fs::remove_dir_all(&work);
    } else {
        eprintln!("neli-bench: logs kept in {}", work.display());
    }
    ExitCode::SUCCESS
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The unit of a row, from its scenario name.
fn unit(scenario: &str) -> &'static str {
    if scenario.ends_with("cpu") {
        "s"
    } else if scenario.ends_with("rss") || scenario.ends_with("pss") {
        "MiB"
    } else if scenario.contains("overlaps") || scenario.contains("still running") {
        "count"
    } else {
        "ms"
    }
}

fn report(args: &Args, results: &Results, contenders: &[&str]) {
    let mut md = String::new();
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(md, "## neli-bench\n");
    let _ = writeln!(
        md,
        "Machine: {cores} cores ({cpu}), Linux {}. Session timeout / TTL {}, {} repetitions, medians (p99 in brackets).\n",
        kernel.trim(),
        match args.product_defaults {
            true => "6s (neli-run's defaults, no timing flags)".to_string(),
            false => format!("{} (other timings scaled)", args.session_timeout),
        },
        args.reps
    );
    let _ = write!(md, "| scenario | unit |");
    for c in contenders {
        let _ = write!(md, " {c} |");
    }
    let etcd = contenders.iter().position(|c| *c == "etcdctl-lock");
    if etcd.is_some() {
        let _ = write!(md, " neli-run/etcd |");
    }
    let _ = writeln!(md);
    let _ = writeln!(md, "|---|---|{}{}", "---|".repeat(contenders.len()), if etcd.is_some() { "---|" } else { "" });
    let mut scenarios: Vec<&String> = results.samples.keys().map(|(s, _)| s).collect();
    scenarios.dedup();
    let order = ["startup", "graceful", "crash", "fence", "idle", "scale"];
    scenarios.sort_by_key(|s| (order.iter().position(|o| s.starts_with(o)).unwrap_or(9), s.len(), s.to_string()));
    scenarios.dedup();
    for s in &scenarios {
        let u = unit(s);
        let _ = write!(md, "| {s} | {u} |");
        for c in contenders {
            let cell = match (results.median(s, c), results.p99(s, c)) {
                (Some(m), Some(p)) if u == "ms" => format!("{m:.0} ({p:.0})"),
                (Some(_), _) if u == "count" => {
                    let total: f64 = results.samples[&(s.to_string(), c.to_string())].iter().sum();
                    format!("{total:.0} of {}", results.samples[&(s.to_string(), c.to_string())].len())
                }
                (Some(m), _) => format!("{m:.3}"),
                _ => "-".into(),
            };
            let _ = write!(md, " {cell} |");
        }
        if etcd.is_some() {
            let e = results.median(s, "etcdctl-lock");
            let ratios: Vec<String> = contenders
                .iter()
                .filter(|c| c.starts_with("neli-run"))
                .filter_map(|c| Some(format!("{:.2}", results.median(s, c)? / e.filter(|e| *e > 0.0)?)))
                .collect();
            let _ =
                write!(md, " {} |", if u == "count" || ratios.is_empty() { "-".into() } else { ratios.join(" / ") });
        }
        let _ = writeln!(md);
    }
    for n in &results.notes {
        let _ = writeln!(md, "\nNote: {n}");
    }
    println!("{md}");
    let _ = fs::write(args.out.join("report.md"), &md);

    let mut csv = String::from("scenario,unit,contender,sample,value\n");
    for ((s, c), v) in &results.samples {
        for (i, x) in v.iter().enumerate() {
            let _ = writeln!(csv, "{s},{},{c},{i},{x:.3}", unit(s));
        }
    }
    let _ = fs::write(args.out.join("bench.csv"), csv);
    let _ = fs::write(args.out.join("latency.svg"), svg(results, contenders));
    eprintln!("neli-bench: wrote {0}/report.md, {0}/bench.csv, {0}/latency.svg", args.out.display());
}

/// A strip chart of every latency sample (log scale), one row per scenario
/// and contender, with the median marked.
fn svg(results: &Results, contenders: &[&str]) -> String {
    let rows: Vec<(&String, &str, &Vec<f64>)> = results
        .samples
        .iter()
        .filter(|((s, _), _)| unit(s) == "ms" && !s.contains("excess"))
        .map(|((s, c), v)| (s, c.as_str(), v))
        .collect();
    let (left, width, row_h) = (260.0, 600.0, 22.0);
    let height = 60.0 + row_h * rows.len() as f64;
    let (lo, hi) = (1.0f64, 100_000.0f64);
    let x = |v: f64| left + (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln()) * width;
    let colour = |c: &str| match contenders.iter().position(|x| *x == c) {
        Some(0) => "#1f77b4",
        Some(1) => "#2ca02c",
        _ => "#d62728",
    };
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"18\" font-size=\"14\">neli-bench: latency samples (ms, log scale; bar = median)</text>\n",
        left + width + 40.0
    );
    for t in [1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0] {
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"30\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{t}</text>",
            x(t),
            height - 25.0,
            height - 10.0
        );
    }
    for (i, (s, c, v)) in rows.iter().enumerate() {
        let y = 40.0 + row_h * i as f64;
        let _ = writeln!(out, "<text x=\"10\" y=\"{:.1}\" fill=\"{}\">{s} · {c}</text>", y + 4.0, colour(c));
        for val in v.iter() {
            let _ = writeln!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{}\" fill-opacity=\"0.6\"/>",
                x(*val),
                colour(c)
            );
        }
        let mut sorted = (*v).clone();
        sorted.sort_by(f64::total_cmp);
        let m = x(sorted[sorted.len() / 2]);
        let _ = writeln!(
            out,
            "<line x1=\"{m:.1}\" y1=\"{:.1}\" x2=\"{m:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-width=\"2\"/>",
            y - 8.0,
            y + 8.0
        );
    }
    out.push_str("</svg>\n");
    out
}
