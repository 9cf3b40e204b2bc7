//! neli-soak: a chaos soak of the real `neli-run` binary.
//!
//! Starts N candidates in one group against a broker it starts itself (the
//! dev broker or tansu; or an external one with --brokers) and, until the
//! requested number of leadership transitions, injects a random fault into
//! the current leader or the broker. When run as root each candidate lives in
//! a network namespace of its own, so a network cut is a real one: packets
//! dropped, sockets left open.
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
//! member logs that a run's ending is on the topic, a start of that due time
//! after that moment is a *rerun*; a due time between the first and the
//! last started that never started is *skipped*. Both fail the soak. A due
//! time that ran to its end twice with no ending recorded between is the
//! at-least-once the README states (its leader was cut off or frozen as its
//! run ended), counted and shown.
//!
//! Prints one summary and exits 1 on any overlap, orphan, rerun, skipped
//! due time or fencing token that did not increase.
//!
//! usage: cargo build --release && cargo run --release -p neli-proof --bin neli-soak -- --transitions 500 [--broker tansu]

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use neli_proof::brokers::Broker;
use neli_proof::detector::{read_lines, Detector};
use neli_proof::netns::NetNs;
use neli_proof::{die_with_runner, percentile, timing_args, Rng};

/// The child: what it does is chosen by the soak before each start.
const CHILD: &str = r#"mode=$(cat "$0/mode" 2>/dev/null || echo normal)
echo "$NELI_FENCING_TOKEN $mode" >> "$0/modes"
echo "$NELI_FENCING_TOKEN $NELI_WAVE $NELI_ATTEMPT" >> "$0/waves"
case $mode in
  finish) sleep 0.5; exit 0 ;;
  ignore-term) trap '' TERM; while :; do sleep 0.2; done ;;
  grandchildren) sleep 100000 & sleep 100000 & wait ;;
  daemonize) (setsid sh -c 'trap "" TERM; exec sleep 100000' &); setsid sleep 100000 & exec sleep 100000 ;;
  *) exec sleep 100000 ;;
esac"#;

/// The child under --schedule: its run takes RUN seconds, unless its mode
/// never ends.
const SCHEDULED: &str = r#"mode=$(cat "$0/mode" 2>/dev/null || echo scheduled)
echo "$NELI_FENCING_TOKEN $mode" >> "$0/modes"
echo "start $NELI_DUE $NELI_ATTEMPT $NELI_FENCING_TOKEN $(date +%s%3N)" >> "$0/runs"
case $mode in
  ignore-term) trap '' TERM; while :; do sleep 0.2; done ;;
  grandchildren) sleep 100000 & sleep 100000 & wait ;;
  daemonize) (setsid sh -c 'trap "" TERM; exec sleep 100000' &); setsid sleep 100000 & exec sleep 100000 ;;
  *) sleep "$RUN"; echo "end $NELI_DUE $NELI_FENCING_TOKEN" >> "$0/runs" ;;
esac"#;

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
    /// Members keep a schedule (--every, --missed all) instead of running
    /// the command once per wave.
    #[arg(long)]
    schedule: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BrokerKind {
    /// `neli-run dev-broker` with Kafka's group timing (its own
    /// coordinator).
    Dev,
    /// `neli-run dev-broker` with librdkafka's mock coordinator: an
    /// independent implementation of the group protocol.
    DevMock,
    /// tansu, found on PATH or in ~/.cargo/bin.
    Tansu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// kill -9 of the leader's neli-run.
    Kill9,
    /// A graceful stop of the leader's neli-run.
    Sigterm,
    /// The leader's neli-run frozen until another leads, then thawed.
    SigstopCont,
    /// The child's whole process tree killed (the shim survives).
    ChildCrash,
    /// The leader's network cut until another leads, then healed.
    NetCut,
    /// The leader's network cut for 0.2-0.8 session timeouts.
    NetBlip,
    /// The broker frozen for 0.2-1.5 session timeouts.
    BrokerPause,
    /// The broker down (connections closed, new ones refused) for 0.2-1.5
    /// session timeouts, then back with its state, as a Kafka broker
    /// restarting over its log.
    BrokerRestart,
    /// The leader's log reader dies or stalls (at random), then the leader
    /// gets kill -9: its shim must kill the command all the same.
    BrokenLogKill9,
    /// The leader's log reader dies or stalls, then the leader is frozen
    /// until another leads, then thawed: the shim's lease must fence, and
    /// neli-run must carry on.
    BrokenLogStop,
    /// No fault: a command in mode `finish` ends its wave by itself (drawn
    /// for half of those).
    Finish,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill9 => "kill-9",
            Fault::Sigterm => "sigterm",
            Fault::SigstopCont => "sigstop-cont",
            Fault::ChildCrash => "child-crash",
            Fault::NetCut => "net-cut",
            Fault::NetBlip => "net-blip",
            Fault::BrokerPause => "broker-pause",
            Fault::BrokerRestart => "broker-restart",
            Fault::BrokenLogKill9 => "broken-log-kill-9",
            Fault::BrokenLogStop => "broken-log-sigstop",
            Fault::Finish => "none (finish)",
        }
    }

    /// How long a timed disruption lasts; None for faults that last until
    /// another member leads.
    fn length(self, rng: &mut Rng, session: Duration) -> Option<Duration> {
        match self {
            Fault::NetBlip => Some(rng.between(session / 5, session * 4 / 5)),
            Fault::BrokerPause | Fault::BrokerRestart => Some(rng.between(session / 5, session * 3 / 2)),
            _ => None,
        }
    }
}

/// How the next child behaves; weighted towards the plain one. `daemonize`
/// leaves a setsid'd sleep and a double-forked, setsid'd one that ignores
/// SIGTERM: both hold the detector's lock. `finish` exits 0 after half a
/// second, which ends its wave.
const MODES: [&str; 6] = ["normal", "normal", "ignore-term", "grandchildren", "daemonize", "finish"];

/// How the next scheduled child behaves: mostly a run that ends by itself.
const SCHEDULED_MODES: [&str; 6] = ["scheduled", "scheduled", "scheduled", "ignore-term", "grandchildren", "daemonize"];

/// Every member's --once-within: members that wait through a run belong to
/// its wave whatever this is; refilled ones belong to it only this long.
const WAVE: Duration = Duration::from_secs(2);

/// How much later than the soak's record of its start a neli-run may note
/// its own start (a rerun is judged only outside that doubt).
const START_DOUBT: Duration = Duration::from_millis(500);

/// One candidate slot: its namespace (if any), its current process and the
/// reader of that process's stdout and stderr.
struct Slot {
    ns: Option<NetNs>,
    member: Option<(String, Child)>,
    log: Option<LogReader>,
}

/// Copies a member's output from a pipe into its log file, until told to
/// stall (stop reading, keep the pipe: a slow journald) or die (close it).
struct LogReader(Arc<AtomicU8>);

impl LogReader {
    const READING: u8 = 0;
    const STALLED: u8 = 1;
    const DEAD: u8 = 2;

    /// The pipe's write end for the member, and its reader.
    fn start(mut log: fs::File) -> (std::os::fd::OwnedFd, LogReader) {
        use std::io::{Read, Write};
        // Close-on-exec: no other member may hold this reader's pipe.
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("a pipe");
        let state = Arc::new(AtomicU8::new(LogReader::READING));
        let seen = state.clone();
        std::thread::spawn(move || {
            let mut read = fs::File::from(read);
            let mut buf = [0u8; 8192];
            loop {
                match seen.load(Ordering::Relaxed) {
                    LogReader::DEAD => return,
                    LogReader::STALLED => std::thread::sleep(Duration::from_millis(100)),
                    _ => {
                        let mut fds =
                            [nix::poll::PollFd::new(std::os::fd::AsFd::as_fd(&read), nix::poll::PollFlags::POLLIN)];
                        if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u8)).unwrap_or(0) == 0 {
                            continue;
                        }
                        match read.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => drop(log.write_all(&buf[..n])),
                        }
                    }
                }
            }
        });
        (write, LogReader(state))
    }

    fn set(&self, state: u8) {
        self.0.store(state, Ordering::Relaxed);
    }
}

struct Soak {
    neli: PathBuf,
    detector: Detector,
    group: String,
    brokers: String,
    broker: Option<Broker>,
    session: Duration,
    slots: Vec<Slot>,
    started: usize,
    /// When each member was started, by name.
    births: BTreeMap<String, std::time::SystemTime>,
    /// With --schedule: how long a run takes, and the schedule's period.
    schedule: Option<(Duration, Duration)>,
}

impl Soak {
    /// Starts a candidate in every slot whose neli-run has exited.
    fn fill(&mut self) {
        for i in 0..self.slots.len() {
            if let Some((_, child)) = self.slots[i].member.as_mut() {
                if child.try_wait().ok().flatten().is_none() {
                    continue;
                }
            }
            self.started += 1;
            let name = format!("c{}-{}", i, self.started);
            let log = fs::File::create(self.detector.dir.join(format!("{name}.log"))).expect("log file");
            let (pipe, reader) = LogReader::start(log);
            if let Some(old) = self.slots[i].log.replace(reader) {
                old.set(LogReader::DEAD);
            }
            let mut argv = self.slots[i].ns.as_ref().map(NetNs::exec_prefix).unwrap_or_default();
            argv.push(self.neli.display().to_string());
            let (flags, child, run) = match self.schedule {
                Some((run, every)) => {
                    let every = format!("{}ms", every.as_millis());
                    (vec!["--every".into(), every, "--missed".into(), "all".into()], SCHEDULED, run)
                }
                None => (vec!["--once-within".into(), format!("{}ms", WAVE.as_millis())], CHILD, Duration::ZERO),
            };
            let child = die_with_runner(&mut Command::new(&argv[0]))
                .args(&argv[1..])
                .args(["-b", &self.brokers, "-g", &self.group, "--name", &name])
                .args(timing_args(self.session))
                .args(flags)
                .arg("--")
                .args(self.detector.wrap())
                .args(["sh", "-c", child])
                .arg(&self.detector.dir)
                .env("RUN", format!("{:.1}", run.as_secs_f64()))
                .stdin(Stdio::null())
                .stdout(pipe.try_clone().expect("a pipe"))
                .stderr(pipe)
                .spawn()
                .expect("start neli-run");
            self.births.insert(name.clone(), std::time::SystemTime::now());
            self.slots[i].member = Some((name, child));
        }
    }

    /// The slot of the member whose child started last.
    fn leader_slot(&self) -> Option<usize> {
        let (name, _) = self.detector.starts().pop()?;
        self.slots.iter().position(|s| s.member.as_ref().is_some_and(|(n, _)| *n == name))
    }

    fn pid(&self, slot: usize) -> Pid {
        Pid::from_raw(self.slots[slot].member.as_ref().expect("a member").1.id() as i32)
    }

    /// Leadership transitions so far: starts on a member other than the
    /// previous start's (a fenced leader resuming is not one).
    fn transitions(&self) -> usize {
        self.detector.starts().windows(2).filter(|w| w[0].0 != w[1].0).count()
    }

    fn inject(&self, fault: Fault, slot: usize, rng: &mut Rng) {
        let pid = self.pid(slot);
        match fault {
            Fault::Kill9 => drop(kill(pid, Signal::SIGKILL)),
            Fault::Sigterm => drop(kill(pid, Signal::SIGTERM)),
            Fault::SigstopCont => drop(kill(pid, Signal::SIGSTOP)),
            Fault::ChildCrash => {
                // Everything below the shim, daemons that left its group too.
                for p in shim_of(pid).map(below).unwrap_or_default() {
                    let _ = kill(p, Signal::SIGKILL);
                }
            }
            Fault::BrokenLogKill9 | Fault::BrokenLogStop => {
                let log = self.slots[slot].log.as_ref().expect("every member has a log reader");
                log.set(rng.pick(&[LogReader::STALLED, LogReader::DEAD]));
                // Let neli-run and its child meet the broken pipe first.
                std::thread::sleep(Duration::from_millis(300));
                let sig = if fault == Fault::BrokenLogKill9 { Signal::SIGKILL } else { Signal::SIGSTOP };
                let _ = kill(pid, sig);
            }
            Fault::NetCut | Fault::NetBlip => self.slots[slot].ns.as_ref().expect("a namespace").cut(),
            Fault::BrokerPause => self.broker.as_ref().expect("our broker").signal(Signal::SIGSTOP),
            Fault::BrokerRestart => self.broker.as_ref().expect("our broker").signal(Signal::SIGUSR1),
            Fault::Finish => {}
        }
    }

    /// Ends a fault's disruption (a no-op for the one-shot faults).
    fn end(&self, fault: Fault, slot: usize) {
        match fault {
            Fault::SigstopCont | Fault::BrokenLogStop => drop(kill(self.pid(slot), Signal::SIGCONT)),
            Fault::NetCut | Fault::NetBlip => self.slots[slot].ns.as_ref().expect("a namespace").heal(),
            Fault::BrokerPause => self.broker.as_ref().expect("our broker").signal(Signal::SIGCONT),
            Fault::BrokerRestart => self.broker.as_ref().expect("our broker").signal(Signal::SIGUSR2),
            _ => {}
        }
    }

    fn stop_all(&mut self) {
        for slot in &mut self.slots {
            if let Some(ns) = &slot.ns {
                ns.heal();
            }
            if let Some((_, child)) = &slot.member {
                let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
                let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for (_, child) in self.slots.iter_mut().filter_map(|s| s.member.as_mut()) {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The shim: neli-run's only child.
fn shim_of(neli: Pid) -> Option<i32> {
    let children = fs::read_to_string(format!("/proc/{0}/task/{0}/children", neli)).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// Every process below `root`, parents before their children. The shim is a
/// child subreaper, so whatever the command started, daemons too, stays
/// below it until reaped.
fn below(root: i32) -> Vec<Pid> {
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        for task in fs::read_dir(format!("/proc/{parent}/task")).into_iter().flatten().flatten() {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                next.push(child);
                found.push(Pid::from_raw(child));
            }
        }
    }
    found
}

/// The mode the child with fencing token `token` started in.
fn mode_of(detector: &Detector, token: i64) -> String {
    read_lines(&detector.dir.join("modes"))
        .iter()
        .rev()
        .find_map(|l| l.split_once(' ').filter(|(t, _)| t.parse() == Ok(token)).map(|(_, m)| m.to_string()))
        .unwrap_or_else(|| "normal".into())
}

/// The tokens of runs whose success is on the topic, as their members
/// logged it (a log lost to a broken-log fault only means fewer checks).
fn recorded_successes(dir: &std::path::Path) -> Vec<i64> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|e| e != "log") {
            continue;
        }
        for line in read_lines(&entry.path()).iter().filter(|l| l.contains("the run's ending is on the group's topic"))
        {
            let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse::<i64>().ok());
            if let (Some(token), Some(0)) = (field("token="), field("code=")) {
                found.push(token);
            }
        }
    }
    found
}

/// Starts after a wave's recorded success that ran it again, or that began
/// a new wave on a member of it: (name, token, the succeeded token). A
/// member counts as one of the wave only if surely started within WAVE of
/// its beginning.
fn reruns(detector: &Detector, births: &BTreeMap<String, std::time::SystemTime>) -> Vec<(String, i64, i64)> {
    // By token: the wave it ran for, and whether it began that wave.
    let waves: BTreeMap<i64, (std::time::SystemTime, bool)> = read_lines(&detector.dir.join("waves"))
        .iter()
        .filter_map(|l| {
            let mut fields = l.split(' ');
            let token = fields.next()?.parse().ok()?;
            let wave = humantime::parse_rfc3339(fields.next()?).ok()?;
            Some((token, (wave, fields.next()? == "1")))
        })
        .collect();
    let mut found = Vec::new();
    for done in recorded_successes(&detector.dir) {
        let Some(&(wave, _)) = waves.get(&done) else { continue };
        for (name, token) in detector.starts().into_iter().filter(|s| s.1 > done) {
            let Some(&(ran, began)) = waves.get(&token) else { continue };
            let member = births.get(&name).is_some_and(|&born| born + START_DOUBT < wave + WAVE);
            if ran == wave || (began && member) {
                found.push((name, token, done));
            }
        }
    }
    found
}

/// What the scheduled runs did, from the command's own side.
#[derive(Default)]
struct ScheduleCheck {
    /// Due times started (at least once), and those that ran to their end.
    started: usize,
    ended: usize,
    /// Due times between the first and the last started that never started
    /// and whose run no member recorded as ended.
    skipped: Vec<String>,
    /// Starts of a due time after a member logged its run's ending as on
    /// the topic: (due time, token of the start, token of the recorded run).
    /// (An ending delivered late, after a cut, is logged late: a start before
    /// that moment is the at-least-once the README states, not a rerun.)
    reruns: Vec<(String, i64, i64)>,
    /// Due times that ran to their end twice, no ending recorded between.
    at_least_once: usize,
}

/// Judges the runs file and the members' logs (see the module doc).
fn check_schedule(dir: &std::path::Path, every: Duration) -> ScheduleCheck {
    let ms = |rfc: &str| {
        humantime::parse_rfc3339(rfc).ok().map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64)
    };
    // Due time -> (token, wall ms) of each start.
    let mut starts: BTreeMap<u64, Vec<(i64, u64)>> = BTreeMap::new();
    let mut ends: BTreeMap<u64, usize> = BTreeMap::new();
    for line in read_lines(&dir.join("runs")) {
        let w: Vec<&str> = line.split(' ').collect();
        match (w.first(), w.get(1).and_then(|d| ms(d))) {
            (Some(&"start"), Some(due)) => {
                let token = w.get(3).and_then(|t| t.parse().ok()).unwrap_or(-1);
                starts.entry(due).or_default().push((token, w.get(4).and_then(|t| t.parse().ok()).unwrap_or(0)));
            }
            (Some(&"end"), Some(due)) => *ends.entry(due).or_default() += 1,
            _ => {}
        }
    }
    // The endings the members saw delivered: due time -> (token, the wall
    // ms of the first such log line); and the due times they started.
    let mut recorded: BTreeMap<u64, (i64, u64)> = BTreeMap::new();
    let mut started: std::collections::BTreeSet<u64> = Default::default();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|e| e != "log") {
            continue;
        }
        for line in read_lines(&entry.path()) {
            let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse::<u64>().ok());
            if line.contains("starting the run of a due time") {
                started.extend(field("due_ms="));
                continue;
            }
            if !line.contains("the run's ending is on the group's topic") {
                continue;
            }
            let at = line.split_whitespace().next().and_then(ms);
            if let (Some(token), Some(due), Some(at)) = (field("token="), field("due_ms="), at) {
                let first = recorded.entry(due).or_insert((token as i64, at));
                if at < first.1 {
                    *first = (token as i64, at);
                }
            }
        }
    }
    let name =
        |due: u64| humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(due)).to_string();
    let mut check = ScheduleCheck { started: starts.len(), ended: ends.len(), ..Default::default() };
    for (&due, started) in &starts {
        if let Some(&(done, at)) = recorded.get(&due) {
            check.reruns.extend(started.iter().filter(|&&(_, ms)| ms > at).map(|&(t, _)| (name(due), t, done)));
        }
    }
    check.at_least_once = ends.iter().filter(|(due, &n)| n > 1 && !recorded.contains_key(due)).count();
    if let (Some(&first), Some(&last)) = (starts.keys().next(), starts.keys().last()) {
        let period = every.as_millis() as u64;
        // A run killed before its first line (child-crash strikes once the
        // detector's lock is held) ends as a failure, not retried: its due
        // time was run, as its member's log (its start, or its ending) says.
        let run = |d: &u64| starts.contains_key(d) || started.contains(d) || recorded.contains_key(d);
        check.skipped = (first..=last).step_by(period as usize).filter(|d| !run(d)).map(name).collect();
    }
    check
}

/// A wall-clock time as the candidates' logs print it (UTC, HH:MM:SS.mmm).
fn wall(t: std::time::SystemTime) -> String {
    let ms = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() % 86_400_000;
    format!("{:02}:{:02}:{:02}.{:03}Z", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

/// What one fault did.
#[derive(Default)]
struct Outcome {
    /// Leaderless times, one per injection.
    leaderless: Vec<Duration>,
    /// Injections after which another member led.
    handovers: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    let mut rng = Rng(seed);
    let neli = std::env::current_exe().expect("own path").with_file_name("neli-run");
    if !neli.exists() {
        eprintln!("neli-soak: {} not found: build it first (cargo build --release -p neli-run)", neli.display());
        return ExitCode::FAILURE;
    }
    let dir = std::env::temp_dir().join(format!("neli-soak-{}", std::process::id()));
    let detector = Detector::new(dir.clone()).expect("work dir");

    let mut slots: Vec<Slot> = (0..args.candidates).map(|_| Slot { ns: None, member: None, log: None }).collect();
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
    // With namespaces, the broker listens everywhere and is reached through
    // the first namespace's host address (routed from every namespace).
    let (listen, advertise) = match slots[0].ns.as_ref() {
        Some(ns) => ("0.0.0.0", ns.host_ip.clone()),
        None => ("127.0.0.1", "127.0.0.1".to_string()),
    };
    let broker = match (&args.brokers, args.broker) {
        (Some(_), _) => None,
        (None, BrokerKind::Dev) => Some(Broker::dev(&neli, "kafka", listen, &advertise, &dir.join("broker.log"))),
        (None, BrokerKind::DevMock) => Some(Broker::dev(&neli, "mock", listen, &advertise, &dir.join("broker.log"))),
        (None, BrokerKind::Tansu) => Some(Broker::tansu(listen, &advertise, &dir.join("broker.log"))),
    };
    let broker = match broker.transpose() {
        Ok(b) => b,
        Err(why) => {
            eprintln!("neli-soak: {why}");
            return ExitCode::FAILURE;
        }
    };
    let brokers = args.brokers.clone().unwrap_or_else(|| broker.as_ref().expect("started").address.clone());
    let mut faults = vec![
        Fault::Kill9,
        Fault::Sigterm,
        Fault::SigstopCont,
        Fault::ChildCrash,
        Fault::BrokenLogKill9,
        Fault::BrokenLogStop,
    ];
    if slots[0].ns.is_some() {
        faults.extend([Fault::NetCut, Fault::NetBlip]);
    }
    if broker.is_some() {
        faults.push(Fault::BrokerPause);
    }
    // A restart must keep the broker's log, as Kafka's does. The dev broker
    // goes down and up in place (SIGUSR1, SIGUSR2); tansu's in-memory
    // storage would be wiped by a restart, so tansu gets no restarts.
    if broker.is_some() && args.broker != BrokerKind::Tansu {
        faults.push(Fault::BrokerRestart);
    }
    let mut soak = Soak {
        neli,
        detector,
        group: format!("soak-{}", std::process::id()),
        brokers,
        broker,
        session: args.session_timeout.into(),
        slots,
        started: 0,
        births: BTreeMap::new(),
        // A run outlasts the heartbeat deadline (S/2) by a second, so a
        // frozen leader's lease cuts it short; the period leaves room to
        // catch up after a failover.
        schedule: args.schedule.then(|| {
            let session: Duration = args.session_timeout.into();
            let run = session / 2 + Duration::from_secs(1);
            (run, Duration::from_secs((run * 2).as_secs_f64().ceil() as u64))
        }),
    };
    println!(
        "neli-soak: seed {seed}, {} candidates, broker {}, session {}, faults: {}, work dir {}",
        args.candidates,
        args.brokers.as_deref().unwrap_or(match args.broker {
            BrokerKind::Dev => "dev",
            BrokerKind::DevMock => "dev-mock",
            BrokerKind::Tansu => "tansu",
        }),
        args.session_timeout,
        faults.iter().map(|f| f.name()).collect::<Vec<_>>().join(" "),
        dir.display()
    );

    // Ctrl-C ends the soak early with a summary, and still cleans up
    // (namespaces, cuts, candidates, broker).
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone()).expect("signal handler");
    }
    let stall: Duration = args.stall.into();
    let mut outcomes: BTreeMap<(Fault, String), Outcome> = BTreeMap::new();
    let mut stalls = 0;
    let mut reported = 0;
    soak.fill();
    while soak.transitions() < args.transitions && !interrupted.load(Ordering::Relaxed) {
        // Wait for a leader whose child runs.
        let waited = Instant::now();
        while !(soak.detector.lock_held() && soak.leader_slot().is_some())
            && waited.elapsed() < stall
            && !interrupted.load(Ordering::Relaxed)
        {
            soak.fill();
            std::thread::sleep(Duration::from_millis(10));
        }
        let Some(slot) = soak.leader_slot() else {
            stalls += 1;
            eprintln!("neli-soak: no leader for {stall:?}");
            continue;
        };
        let before = soak.detector.starts();
        let token = before.last().map_or(-1, |s| s.1);
        // Under a schedule one token runs many times: the newest run's mode
        // is the last line once every start has written its own.
        let modes = dir.join("modes");
        let _ = neli_proof::wait_for(Duration::from_secs(2), || read_lines(&modes).len() >= before.len());
        let mode = match soak.schedule {
            Some(_) => {
                read_lines(&modes).last().and_then(|l| l.split(' ').nth(1).map(str::to_string)).unwrap_or_default()
            }
            None => mode_of(&soak.detector, token),
        };
        let finishing = matches!(mode.as_str(), "finish" | "scheduled");
        let fault = if finishing && rng.pick(&[true, false]) { Fault::Finish } else { rng.pick(&faults) };
        let length = fault.length(&mut rng, soak.session);
        // How the next child will behave (renamed into place, so a child
        // starting now never reads a half-written file).
        let modes: &[&str] = if soak.schedule.is_some() { &SCHEDULED_MODES } else { &MODES };
        let _ = fs::write(dir.join("mode.new"), rng.pick(modes));
        let _ = fs::rename(dir.join("mode.new"), dir.join("mode"));

        let injected = Instant::now();
        let injected_at = std::time::SystemTime::now();
        soak.inject(fault, slot, &mut rng);
        let (mut lost, mut ended, mut moved) = (None, false, false);
        let leaderless = loop {
            let now = Instant::now();
            let held = soak.detector.lock_held();
            if !held && lost.is_none() {
                lost = Some(now);
            }
            let starts = soak.detector.starts();
            moved |=
                starts.len() > before.len() && starts[before.len()..].iter().any(|s| s.0 != before[before.len() - 1].0);
            if !ended && length.is_some_and(|d| now >= injected + d) {
                soak.end(fault, slot);
                ended = true;
            }
            // A one-shot fault is over once a child started after it runs
            // (another member's, or the same leader's after a fence it had
            // been resuming from when the fault struck); a timed one once it
            // has ended and some child runs again.
            let restarted = starts.len() > before.len();
            let over = held && if length.is_some() { ended } else { restarted };
            if over {
                if !ended {
                    soak.end(fault, slot);
                }
                // A fault that never cost the command (a blip shorter than
                // the deadline) left nobody leaderless.
                break Some(lost.map_or(Duration::ZERO, |l| now - l));
            }
            if interrupted.load(Ordering::Relaxed) {
                if !ended {
                    soak.end(fault, slot);
                }
                break None; // not judged: the soak was stopped
            }
            if injected.elapsed() > stall {
                if !ended {
                    soak.end(fault, slot);
                }
                stalls += 1;
                eprintln!(
                    "neli-soak: no child running {stall:?} after {} injected at {} into {} (held {held}, new leader {moved})",
                    fault.name(),
                    wall(injected_at),
                    before[before.len() - 1].0
                );
                break Some(stall);
            }
            soak.fill();
            std::thread::sleep(Duration::from_millis(10));
        };
        let Some(leaderless) = leaderless else { break };
        let outcome = outcomes.entry((fault, mode)).or_default();
        outcome.handovers += usize::from(moved);
        outcome.leaderless.push(leaderless);
        let done = soak.transitions();
        if done >= reported + 25 {
            reported = done;
            println!("neli-soak: {done} transitions, {} overlaps", soak.detector.overlaps().len());
        }
    }
    soak.stop_all();
    drop(soak.broker.take());
    let orphans = {
        let deadline = Instant::now() + Duration::from_secs(5);
        while soak.detector.lock_held() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        usize::from(soak.detector.lock_held())
    };
    let overlaps = soak.detector.overlaps();
    let starts = soak.detector.starts();
    // (A schedule runs many due times under one leadership: one token.)
    let same_leadership = |a: &(String, i64), b: &(String, i64)| soak.schedule.is_some() && a == b;
    let tokens_increase = starts.windows(2).all(|w| w[0].1 < w[1].1 || same_leadership(&w[0], &w[1]));
    let (reruns, succeeded) = match soak.schedule {
        Some(_) => (Vec::new(), 0),
        None => (reruns(&soak.detector, &soak.births), recorded_successes(&soak.detector.dir).len()),
    };
    let scheduled = soak.schedule.map(|(_, every)| check_schedule(&soak.detector.dir, every));

    println!("\n## neli-soak summary (seed {seed})\n");
    println!("transitions: {} ({} child starts)", soak.transitions(), starts.len());
    println!("faults injected: {}", outcomes.values().map(|o| o.leaderless.len()).sum::<usize>());
    println!("overlaps: {}", overlaps.len());
    println!("orphans left: {orphans}");
    match &scheduled {
        None => {
            println!("waves whose success was recorded: {succeeded}; reruns after one: {}", reruns.len());
            for (name, token, done) in &reruns {
                println!("  {name} ran token {token} after its wave's run (token {done}) had succeeded");
            }
        }
        Some(c) => {
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
    }
    println!("fencing tokens strictly increasing: {tokens_increase}");
    println!("stalls (no child running {} after a fault; liveness): {stalls}", args.stall);
    println!("\nLeaderless: from the moment no child held the lock until one held it again.\n");
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
    let schedule_kept = scheduled.as_ref().is_none_or(|c| c.reruns.is_empty() && c.skipped.is_empty());
    let safe = overlaps.is_empty() && orphans == 0 && tokens_increase && reruns.is_empty() && schedule_kept;
    if safe && stalls == 0 {
        let _ = fs::remove_dir_all(&dir);
    } else {
        println!("\n{}: logs kept in {}", if safe { "STALLED" } else { "FAILED" }, dir.display());
    }
    if safe {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
