//! neli-soak: a chaos soak of the real `neli-run` binary.
//!
//! Starts N candidates in one group against a broker it starts itself (the
//! dev broker or tansu; or an external one with --brokers) and, until the
//! requested number of leadership transitions, injects a random fault into
//! the current leader or the broker. When run as root each candidate lives in
//! a network namespace of its own, so a network cut is a real one: packets
//! dropped, sockets left open.
//!
//! Members have priorities 0 to 2 by slot (`--priority`): a new owner of
//! partition 0 that knows of a live member of higher priority hands it
//! over before it leads, so handovers also go through hand-overs.
//!
//! The overlap detector is independent of neli-run (see `neli_proof::detector`):
//! two children at once, or a child that outlives its neli-run, is caught by
//! the kernel's lock. "Leaderless" is measured on that lock too: the time
//! from the moment no child held it until one held it again.
//!
//! Once per wave: every member runs with `--once-within` (WAVE), and some
//! children finish on their own (mode `finish`). Once the record saying a
//! run succeeded is on the topic (its member logs the delivery), that wave
//! must never run again, and no member of it (started before it began or
//! within WAVE after) may begin a new wave: either is a *rerun*. (A member
//! of it may still run a later wave's retry: that wave began after it, so it
//! belongs to that one too. A success whose record never landed, its member
//! killed or frozen first, is run again: at least once.) The waves are the
//! children's own word: each writes its token, NELI_WAVE and NELI_ATTEMPT.
//!
//! A schedule (`--schedule`): every member runs with `--every` and
//! `--missed all`, and the command logs "start DUE ATTEMPT TOKEN MS" and, if
//! it gets to its end (it takes longer than the heartbeat deadline, so a
//! frozen leader's run is cut short by its lease), "end DUE TOKEN". Once a
//! member logs that a run's ending is on the topic (with the record's
//! offset), a start of that due time by a leader whose token is above that
//! offset (it read the record before it led), or begun half a second after
//! that moment, is a *rerun*; a due time between the first and the
//! last started that never started is *skipped*. Both fail the soak. A due
//! time that ran to its end twice with no ending recorded between is the
//! at-least-once the README states (its leader was cut off or frozen as its
//! run ended), counted and shown.
//!
//! A pause (`pause`): `neli-run pause --stop`, faults at the leader while paused (kill -9,
//! graceful stops, freezes, the broker down), during which a child that
//! starts or runs is unsafe, then `neli-run resume`.
//!
//! Every member has a health check (--health-cmd) that a file fails: the
//! fault `unhealthy` fails the leader's, and every fourth member starts
//! with its check failing for a few sessions; a command started by a member
//! whose check had never passed (the child sees the file) is a *sick
//! start*.
//!
//! Prints one summary and exits 1 on any overlap, orphan, rerun, skipped
//! due time, sick start, fencing token that did not increase, or child
//! while paused.
//!
//! Roles (`--roles R`): every member runs `neli-run --roles R`, each role's
//! command under an overlap detector of its own, and the faults strike
//! random members (kill -9, SIGTERM, a freeze, a cut, a join, a drain by
//! the member's health check and its undrain), the broker or the cluster;
//! a transition is a role starting on another member than its last start.
//! Judged per role: overlaps, orphans, tokens; and the needless moves of a
//! join, a leave, a crash, a drain or an undrain (see `roles`). With
//! `--schedule` too, each role's command runs once per due time, and each
//! role's runs are judged as the schedule's: no rerun, no skipped due time.
//!
//! usage: cargo build --release && cargo run --release -p neli-proof --bin neli-soak -- --transitions 500 [--broker tansu | tansu-sqlite]
//!        ... --roles 12 --candidates 3 --transitions 500 [--cluster 3 | --broker tansu]
//!        ... --roles 6 --candidates 3 --schedule --transitions 150
//!        ... --flaps 200   (health flaps during standbys' joins: flaps.rs)
//!        ... --candidates 100 --hot-standbys 2 --product-timing --session-timeout 6s --transitions 300
//!            (a fleet: hot and cold churn, hot.rs)

mod cluster;
mod faults;
mod flaps;
mod hot;
mod judge;
mod members;
mod report;
mod roles;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use neli_proof::brokers::Broker;
use neli_proof::detector::Detector;
use neli_proof::netns::NetNs;
use neli_proof::{timing_args, Rng};

use faults::Fault;
use members::{Slot, Soak};

/// Chaos soak of neli-run: random faults until N leadership transitions.
#[derive(Debug, Parser)]
struct Args {
    /// Leadership transitions (a child starting on another member) to reach.
    #[arg(long, default_value_t = 500)]
    transitions: usize,
    /// Candidates in the group.
    #[arg(long, default_value_t = 5)]
    candidates: usize,
    /// The broker the soak starts (and pauses and restarts).
    #[arg(long, value_enum, default_value_t = BrokerKind::Dev)]
    broker: BrokerKind,
    /// An external broker instead (no broker faults, no network cuts).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "broker")]
    brokers: Option<String>,
    /// No network namespaces (and so no network cuts), e.g. when not root.
    #[arg(long)]
    no_netns: bool,
    /// Group session timeout for every candidate; the other timings scale
    /// with it.
    #[arg(long, default_value = "3s")]
    session_timeout: humantime::Duration,
    /// Seed for the fault sequence (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Give up waiting for a leader after one fault after this long.
    #[arg(long, default_value = "60s")]
    stall: humantime::Duration,
    /// A dev broker of N brokers, whose own life joins the faults: rolling
    /// restarts, leader and coordinator moves, broker crashes, partition 0
    /// offline, the leader cut off from the coordinator or from partition
    /// 0's leader. Implies
    /// --product-timing.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=9))]
    cluster: u16,
    /// Give members --session-timeout alone, so that they run the timing
    /// neli-run derives from it, as users do (by default the soak sets
    /// every timing flag: deadline S/2, grace S/3, heartbeats every S/12).
    #[arg(long)]
    product_timing: bool,
    /// Only these faults (names as the summary prints them, e.g.
    /// sigterm,rolling-restart): to look at one kind closely. At least one
    /// must move leadership (kill-9, sigterm ...), or no transition comes.
    #[arg(long, value_delimiter = ',', value_name = "FAULT,...")]
    faults: Vec<String>,
    /// Keep the work directory (every member's log) even when the soak was
    /// safe and never stalled.
    #[arg(long)]
    keep_logs: bool,
    /// Members keep a schedule (--every, --missed all) instead of running
    /// the command once per wave; with --roles, each role's command once
    /// per due time.
    #[arg(long)]
    schedule: bool,
    /// Members run NELI's roles (`neli-run --roles R`): one command per
    /// role, each role on one member at a time; faults strike random
    /// members. At least --candidates, so that every member holds a role.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u16).range(2..=1000))]
    roles: Option<u16>,
    /// With --roles R and --schedule: members run a fleet crontab of R jobs
    /// (`neli-run --crontab FILE`, job jNN's runs judged as role NN's), in
    /// place of `--roles R --every`. The file starts a job short; the last
    /// is added a third of the way in (the `add-job` event), which adds a
    /// partition to the topic while the members run. Its own faults: a
    /// job's holder cut off just before a due time (`cut-before-due`, with
    /// namespaces: a fifth of the faults), and a job's line changed and
    /// rolled out member by member (`reschedule`).
    #[arg(long, requires_all = ["roles", "schedule"])]
    crontab: bool,
    /// Instead of faults until transitions: N health flaps at random
    /// moments of a standby's join, each timed to its listing by `status`
    /// (see flaps.rs); on a dev broker of its own.
    #[arg(long, value_name = "N", conflicts_with_all = ["roles", "schedule", "brokers"])]
    flaps: Option<usize>,
    /// Every member runs with `--hot-standbys K`; with more than 1 + K
    /// candidates (so cold members), the hot set's faults join the draw:
    /// `hot-kill-9`, `hot-unhealthy`, `hot-set-kill-9` (see hot.rs).
    #[arg(long, value_name = "K", conflicts_with_all = ["roles", "schedule", "flaps"])]
    hot_standbys: Option<u32>,
}

/// The broker the soak starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BrokerKind {
    /// `neli-run dev-broker` with Kafka's group timing (its own
    /// coordinator).
    Dev,
    /// `neli-run dev-broker` with librdkafka's mock coordinator: an
    /// independent implementation of the group protocol.
    DevMock,
    /// tansu, found on PATH or in ~/.cargo/bin, storing in memory (it
    /// slows down as the topic grows: a soak of hours wants tansu-sqlite).
    Tansu,
    /// tansu storing in SQLite (a build with the libsql feature).
    TansuSqlite,
}

impl BrokerKind {
    /// tansu 0.6, in either storage: no CreatePartitions, and no restart
    /// in place.
    fn is_tansu(self) -> bool {
        matches!(self, BrokerKind::Tansu | BrokerKind::TansuSqlite)
    }
}

impl Args {
    /// Whether the broker adds partitions to a topic (CreatePartitions):
    /// the dev broker does, tansu 0.6 does not (an external one: unknown).
    fn adds_partitions(&self) -> bool {
        self.brokers.is_none() && !self.broker.is_tansu()
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    if let Some(flaps) = args.flaps {
        return flaps::soak(flaps, seed);
    }
    let (mut soak, faults) = match setup(&args) {
        Ok(set) => set,
        Err(why) => {
            eprintln!("neli-soak: {why}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "neli-soak: seed {seed}, {} candidates{}, broker {}{}, session {}{}, faults: {}, work dir {}",
        args.candidates,
        args.roles.map(|r| format!(", {r} roles each")).unwrap_or_default(),
        args.brokers.as_deref().unwrap_or(match args.broker {
            BrokerKind::Dev => "dev",
            BrokerKind::DevMock => "dev-mock",
            BrokerKind::Tansu => "tansu",
            BrokerKind::TansuSqlite => "tansu-sqlite",
        }),
        if args.cluster > 1 { format!(" (a cluster of {})", args.cluster) } else { String::new() },
        args.session_timeout,
        if soak.timing.len() == 2 { " (the product's derived timing)" } else { "" },
        faults.iter().map(|f| f.name()).collect::<Vec<_>>().join(" "),
        soak.detector.dir.display()
    );
    // Ctrl-C ends the soak early with a summary, and still cleans up
    // (namespaces, cuts, candidates, broker).
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone()).expect("signal handler");
    }
    if let Some(roles) = args.roles {
        return roles::soak(&mut soak, &args, roles.into(), &faults, seed, &interrupted);
    }
    let run = faults::inject(&mut soak, &args, &faults, &mut Rng(seed), &interrupted);
    let verdict = judge::judge(&mut soak);
    report::report(seed, &args, &soak, run, &verdict)
}

/// The work directory, the members' namespaces, the broker, and the faults
/// this run can inject; no member started yet.
fn setup(args: &Args) -> Result<(Soak, Vec<Fault>), String> {
    let neli = std::env::current_exe().expect("own path").with_file_name("neli-run");
    if !neli.exists() {
        return Err(format!("{} not found: build it first (cargo build --release -p neli-run)", neli.display()));
    }
    let dir = std::env::temp_dir().join(format!("neli-soak-{}", std::process::id()));
    let detector = Detector::new(dir.clone()).expect("work dir");
    let slots = slots(args);
    // With namespaces, the broker listens everywhere and is reached through
    // the first namespace's host address (routed from every namespace).
    let (listen, advertise) = match slots[0].ns.as_ref() {
        Some(ns) => ("0.0.0.0", ns.host_ip.clone()),
        None => ("127.0.0.1", "127.0.0.1".to_string()),
    };
    let log = dir.join("broker.log");
    if args.cluster > 1 && (args.brokers.is_some() || args.broker != BrokerKind::Dev) {
        return Err("--cluster runs on the dev broker with Kafka's timing (--broker dev), not with --brokers".into());
    }
    if let Some(roles) = args.roles {
        roles::check(args, roles.into())?;
    }
    let broker = match (&args.brokers, args.broker) {
        (Some(_), _) => None,
        (None, BrokerKind::Dev) if args.cluster > 1 => {
            Some(Broker::dev_cluster(&neli, args.cluster, listen, &advertise, &log, &dir.join("broker.ctl")))
        }
        (None, BrokerKind::Dev) => Some(Broker::dev(&neli, "kafka", listen, &advertise, &log, None)),
        (None, BrokerKind::DevMock) => Some(Broker::dev(&neli, "mock", listen, &advertise, &log, None)),
        (None, BrokerKind::Tansu) => Some(Broker::tansu(listen, &advertise, &log)),
        (None, BrokerKind::TansuSqlite) => Some(Broker::tansu_sqlite(listen, &advertise, &log)),
    };
    let broker = broker.transpose()?;
    let brokers = args.brokers.clone().unwrap_or_else(|| broker.as_ref().expect("started").address.clone());
    let mut faults = match args.roles {
        Some(_) => roles::faults(args, slots[0].ns.is_some(), broker.is_some()),
        None => faults(args, slots[0].ns.is_some(), broker.is_some()),
    };
    if !args.faults.is_empty() {
        if let Some(unknown) = args.faults.iter().find(|f| !faults.iter().any(|k| k.name() == f.as_str())) {
            if let Some(why) = args.roles.and_then(|_| roles::refused(unknown)) {
                return Err(format!("--faults: {unknown} is not a fault of --roles: {why}"));
            }
            let known: Vec<&str> = faults.iter().map(|f| f.name()).collect();
            return Err(format!("--faults: {unknown} is not a fault of this run ({})", known.join(", ")));
        }
        faults.retain(|f| args.faults.iter().any(|n| n == f.name()));
    }
    let session: Duration = args.session_timeout.into();
    let timing = match args.product_timing || args.cluster > 1 {
        true => vec!["--session-timeout".to_string(), format!("{}ms", session.as_millis())],
        false => timing_args(session),
    };
    let soak = Soak {
        neli,
        detector,
        group: format!("soak-{}", std::process::id()),
        brokers,
        broker,
        session,
        timing,
        cluster: args.cluster,
        partitions: args.roles.unwrap_or(1),
        slots,
        started: 0,
        births: BTreeMap::new(),
        // A run outlasts the heartbeat deadline (S/2) by a second, so a
        // frozen leader's lease cuts it short; the period leaves room to
        // catch up after a failover.
        schedule: args.schedule.then(|| {
            let run = session / 2 + Duration::from_secs(1);
            (run, Duration::from_secs((run * 2).as_secs_f64().ceil() as u64))
        }),
        resumes: 0,
        hot_standbys: args.hot_standbys,
    };
    Ok((soak, faults))
}

/// One empty slot per candidate, each in a network namespace of its own
/// when it can be (none at all if one fails).
fn slots(args: &Args) -> Vec<Slot> {
    let mut slots: Vec<Slot> =
        (0..args.candidates).map(|_| Slot { ns: None, member: None, log: None, hold: Default::default() }).collect();
    if args.brokers.is_none() && !args.no_netns {
        for slot in &mut slots {
            match NetNs::create() {
                Ok(ns) => slot.ns = Some(ns),
                Err(why) => {
                    eprintln!("neli-soak: {why}; no network cuts in this run (--no-netns silences this)");
                    slots.iter_mut().for_each(|s| s.ns = None);
                    break;
                }
            }
        }
    }
    slots
}

/// The faults of the network, the broker and the cluster this run can
/// inject, whatever the members run: network ones only with namespaces,
/// broker ones only on a broker of its own, the cluster's with --cluster.
fn environment_faults(args: &Args, netns: bool, own_broker: bool) -> Vec<Fault> {
    let mut faults = Vec::new();
    if netns {
        faults.extend([Fault::NetCut, Fault::NetBlip]);
    }
    if own_broker {
        faults.push(Fault::BrokerPause);
    }
    // A restart must keep the broker's log, as Kafka's does. The dev broker
    // goes down and up in place (SIGUSR1, SIGUSR2); tansu has no such
    // signals (and its memory storage a restart wipes), so gets none.
    if own_broker && !args.broker.is_tansu() {
        faults.push(Fault::BrokerRestart);
    }
    if own_broker && args.cluster > 1 {
        faults.extend([
            Fault::RollingRestart,
            Fault::LeaderMove,
            Fault::CoordinatorMove,
            Fault::BrokerCrash,
            Fault::PartitionOffline,
            Fault::CoordinatorCut,
            Fault::LeaderCut,
            Fault::Rewind,
        ]);
    }
    faults
}

/// The faults this run can inject: network ones only with namespaces,
/// broker ones only on a broker of its own.
fn faults(args: &Args, netns: bool, own_broker: bool) -> Vec<Fault> {
    let mut faults = vec![
        Fault::Kill9,
        Fault::Sigterm,
        Fault::SigstopCont,
        Fault::SigtermAfterThaw,
        Fault::ChildCrash,
        Fault::BrokenLogKill9,
        Fault::BrokenLogStop,
        Fault::Pause,
        Fault::Unhealthy,
    ];
    if args.hot_standbys.is_some_and(|k| args.candidates > 1 + k as usize) {
        faults.extend([Fault::HotKill9, Fault::HotUnhealthy, Fault::HotSetKill9]);
    }
    faults.extend(environment_faults(args, netns, own_broker));
    faults
}
