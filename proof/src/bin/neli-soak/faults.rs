//! The faults, and the loop that injects them one at a time into the
//! current leader (or the broker) until enough leadership transitions.

use std::collections::BTreeMap;
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use neli_proof::detector::{read_lines, Detector};
use neli_proof::{wait_for, Rng};

use crate::judge;
use crate::members::{LogReader, Soak};
use crate::Args;

/// A fault the soak injects, drawn at random from those this run can do
/// (no network cuts without namespaces, no broker faults on an external one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// kill -9 of the leader's neli-run.
    Kill9,
    /// A graceful stop of the leader's neli-run.
    Sigterm,
    /// The leader's neli-run frozen until another leads, then thawed.
    SigstopCont,
    /// As `SigstopCont`, then half a session later (the frozen member back
    /// in the group) a graceful stop of the new leader: the handover timed
    /// is that one (issue 28: it waited out what was left of a session).
    SigtermAfterThaw,
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
    /// Every broker of the cluster stopped the controlled way and started
    /// again, one after the other (`--cluster`).
    RollingRestart,
    /// Partition 0's leadership moved to another broker.
    LeaderMove,
    /// The group coordinator moved to another broker.
    CoordinatorMove,
    /// A broker crashed (what it led moves after KRaft's 9 s), started
    /// again after 0.2-4 session timeouts.
    BrokerCrash,
    /// Partition 0 left without a leader for 0.2-2 session timeouts.
    PartitionOffline,
    /// The leader cut off from the coordinator's broker only, for 0.2-2
    /// session timeouts.
    CoordinatorCut,
    /// The leader cut off from partition 0's leader broker only (the
    /// coordinator still hears it), for 0.2-2 session timeouts.
    LeaderCut,
    /// The next fetch of a partition (with --roles, any role's) answered
    /// out of range: its reader reads it again from the start (findings
    /// Planned: it stops nothing.
    Rewind,
    /// The leader's health check (--health-cmd) fails until another
    /// member leads: it hands over.
    Unhealthy,
    /// No fault: a command in mode `finish` ends its wave by itself (drawn
    /// for half of those).
    Finish,
    /// `neli-run pause --stop`, then 2-4 faults at the leader (or the
    /// broker) while paused, during which no child may start; then
    /// `neli-run resume` (see `pause_episode`).
    Pause,
    /// With --roles: a new member joins the group (see `roles`).
    Join,
    /// With --roles: a member holding a role drained by its health check
    /// (its file `drain-NAME`): it stops every role's command, leaves the
    /// group and stays alive, a standby; its roles move to the others.
    Drain,
    /// With --roles: a drained member's file removed once the group settled
    /// without it: it rejoins and takes its share back (drawn by no one:
    /// it follows each drain).
    Undrain,
    /// With --crontab: a job added to the members' crontab (the file
    /// renamed over), on a topic with no free partition: one is added for
    /// it, and no other job may move (drawn by no one: once, a third of
    /// the way in).
    AddJob,
    /// With --crontab: a job's holder cut off (its network namespace, as
    /// `NetCut`) 0.2-2 s before one of that job's due times, for 0.2-2
    /// session timeouts (findings C-10): it must not start that run, and
    /// the next owner runs it once.
    CutBeforeDue,
    /// With --crontab: one job's line changed (its `@every`) in the
    /// members' files, rolled out one member at a time with a SIGHUP each
    /// (findings C-1): no due time of the new line that passed before its
    /// member read it runs, and none runs twice.
    Reschedule,
    /// With --hot-standbys and cold members: kill -9 of a hot standby the
    /// owner's list names, restarted (cold, a new name) after 0.2-2
    /// session timeouts; a cold member must be named in its place.
    /// Planned: leadership stays (see `hot`).
    HotKill9,
    /// As `HotKill9`, the hot standby's health check failed instead, until
    /// the list names another in its place; then it heals.
    HotUnhealthy,
    /// The leader and every hot standby the list names killed with -9 at
    /// once, kept down until a cold member's command runs (the bound:
    /// docs/how-it-works.md, "When every hot member is gone at once").
    HotSetKill9,
}

impl Fault {
    /// The fault's name in the summary and the first line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill9 => "kill-9",
            Fault::Sigterm => "sigterm",
            Fault::SigstopCont => "sigstop-cont",
            Fault::SigtermAfterThaw => "sigterm-after-thaw",
            Fault::ChildCrash => "child-crash",
            Fault::NetCut => "net-cut",
            Fault::NetBlip => "net-blip",
            Fault::BrokerPause => "broker-pause",
            Fault::BrokerRestart => "broker-restart",
            Fault::BrokenLogKill9 => "broken-log-kill-9",
            Fault::BrokenLogStop => "broken-log-sigstop",
            Fault::RollingRestart => "rolling-restart",
            Fault::LeaderMove => "leader-move",
            Fault::CoordinatorMove => "coordinator-move",
            Fault::BrokerCrash => "broker-crash",
            Fault::PartitionOffline => "partition-offline",
            Fault::CoordinatorCut => "coordinator-cut",
            Fault::LeaderCut => "leader-cut",
            Fault::Rewind => "rewind",
            Fault::Unhealthy => "unhealthy",
            Fault::Finish => "none (finish)",
            Fault::Pause => "pause",
            Fault::Join => "join",
            Fault::Drain => "drain",
            Fault::Undrain => "undrain",
            Fault::AddJob => "add-job",
            Fault::CutBeforeDue => "cut-before-due",
            Fault::Reschedule => "reschedule",
            Fault::HotKill9 => "hot-kill-9",
            Fault::HotUnhealthy => "hot-unhealthy",
            Fault::HotSetKill9 => "hot-set-kill-9",
        }
    }

    /// Whether the fault is one of the cluster's own life (`--cluster`),
    /// made through the dev broker's control socket.
    pub fn is_cluster_event(self) -> bool {
        matches!(
            self,
            Fault::RollingRestart
                | Fault::LeaderMove
                | Fault::CoordinatorMove
                | Fault::BrokerCrash
                | Fault::PartitionOffline
                | Fault::CoordinatorCut
                | Fault::LeaderCut
                | Fault::Rewind
        )
    }

    /// Whether the fault itself ends the command (its tree killed, or its
    /// run finished): a stop then is no stop of neli-run's.
    pub fn ends_the_command(self) -> bool {
        matches!(self, Fault::ChildCrash | Fault::Finish | Fault::Pause)
    }

    /// How long a timed disruption lasts; None for faults that last until
    /// another member leads (a cluster fault's length is its script's).
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

impl Soak {
    /// Strikes the member in `slot` (or the broker: any slot) with `fault`.
    pub fn strike(&self, fault: Fault, slot: usize, rng: &mut Rng) {
        let pid = || self.pid(slot);
        match fault {
            Fault::Kill9 => drop(kill(pid(), Signal::SIGKILL)),
            Fault::Sigterm | Fault::SigtermAfterThaw => drop(kill(pid(), Signal::SIGTERM)),
            Fault::SigstopCont => drop(kill(pid(), Signal::SIGSTOP)),
            Fault::ChildCrash => {
                // Everything below the shim, daemons that left its group too.
                for p in shim_of(pid()).map(below).unwrap_or_default() {
                    let _ = kill(p, Signal::SIGKILL);
                }
            }
            Fault::BrokenLogKill9 | Fault::BrokenLogStop => {
                let log = self.slots[slot].log.as_ref().expect("every member has a log reader");
                log.set(rng.pick(&[LogReader::STALLED, LogReader::DEAD]));
                // Let neli-run and its child meet the broken pipe first.
                std::thread::sleep(Duration::from_millis(300));
                let sig = if fault == Fault::BrokenLogKill9 { Signal::SIGKILL } else { Signal::SIGSTOP };
                let _ = kill(pid(), sig);
            }
            Fault::NetCut | Fault::NetBlip => self.slots[slot].ns.as_ref().expect("a namespace").cut(),
            Fault::Unhealthy | Fault::Drain => drop(fs::write(self.slot_health_file(fault, slot), "")),
            Fault::HotSetKill9 => self.kill_hot_set(slot),
            Fault::BrokerPause => self.broker.as_ref().expect("our broker").signal(Signal::SIGSTOP),
            Fault::BrokerRestart => self.broker.as_ref().expect("our broker").signal(Signal::SIGUSR1),
            // Cluster events are scripted (see `watch`).
            Fault::RollingRestart
            | Fault::LeaderMove
            | Fault::CoordinatorMove
            | Fault::BrokerCrash
            | Fault::PartitionOffline
            | Fault::CoordinatorCut
            | Fault::LeaderCut
            | Fault::Rewind
            | Fault::Finish
            | Fault::Pause
            | Fault::Join
            | Fault::Undrain
            | Fault::AddJob
            | Fault::CutBeforeDue
            | Fault::Reschedule
            | Fault::HotKill9
            | Fault::HotUnhealthy => {}
        }
    }

    /// The file whose presence fails the health check of the member named
    /// `name`: `sick-NAME` for `Unhealthy`, `drain-NAME` for `Drain`.
    pub fn health_file(&self, fault: Fault, name: &str) -> std::path::PathBuf {
        let what = if fault == Fault::Drain { "drain" } else { "sick" };
        self.detector.dir.join(format!("{what}-{name}"))
    }

    /// That file of the member in `slot`.
    fn slot_health_file(&self, fault: Fault, slot: usize) -> std::path::PathBuf {
        self.health_file(fault, self.slots[slot].member.as_ref().map_or("", |(n, _)| n.as_str()))
    }

    /// Ends a fault's disruption (a no-op for the one-shot faults).
    pub fn end(&self, fault: Fault, slot: usize) {
        match fault {
            Fault::SigstopCont | Fault::BrokenLogStop => drop(kill(self.pid(slot), Signal::SIGCONT)),
            Fault::NetCut | Fault::NetBlip => self.slots[slot].ns.as_ref().expect("a namespace").heal(),
            Fault::Unhealthy | Fault::Drain => drop(fs::remove_file(self.slot_health_file(fault, slot))),
            Fault::BrokerPause => self.broker.as_ref().expect("our broker").signal(Signal::SIGCONT),
            Fault::BrokerRestart => self.broker.as_ref().expect("our broker").signal(Signal::SIGUSR2),
            Fault::HotSetKill9 => self.slots.iter().for_each(|s| s.hold.set(None)),
            _ => {}
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
pub fn below(root: i32) -> Vec<Pid> {
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

/// A wall-clock time as the candidates' logs print it (UTC, HH:MM:SS.mmm).
pub fn wall(t: std::time::SystemTime) -> String {
    let ms = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() % 86_400_000;
    format!("{:02}:{:02}:{:02}.{:03}Z", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

/// What one fault did.
#[derive(Default)]
pub struct Outcome {
    /// Leaderless times, one per injection.
    pub leaderless: Vec<Duration>,
    /// Injections after which another member led.
    pub handovers: usize,
    /// Injections after which no command ran for a while.
    pub stops: usize,
    /// Stops after which the same member led again: nobody else needed
    /// the command stopped (see `Fault::ends_the_command` for stops that
    /// were the fault's own).
    pub needless: usize,
}

/// What the fault loop saw.
#[derive(Default)]
pub struct Run {
    /// By fault and the mode of the child it struck.
    pub outcomes: BTreeMap<(Fault, String), Outcome>,
    /// Faults (or waits for a leader) after which no child ran within --stall.
    pub stalls: usize,
    /// Faults struck while paused (`Fault::Pause`).
    pub paused_faults: usize,
    /// A child started, or one ran, while paused: unsafe.
    pub paused_starts: Vec<String>,
    /// `pause` or `resume` that exited other than 0 (nobody acknowledged).
    pub unacknowledged: usize,
    /// Faults that struck a leader whose command had already stopped (a
    /// fence or revoke under way): not charged to the fault.
    pub struck_stopped: usize,
    /// A hot standby's fault: how long until the owner's list named K
    /// others (a cold member in its place), by fault.
    pub refills: BTreeMap<Fault, Vec<Duration>>,
}

/// One fault about to be injected.
pub struct Injection {
    pub fault: Fault,
    /// The leader's slot.
    pub slot: usize,
    /// How long a timed disruption lasts (see `Fault::length`).
    pub length: Option<Duration>,
    /// The child starts before it (at least the leader's).
    pub before: Vec<(String, i64)>,
    /// A cluster fault's events, in order of their offsets.
    script: Vec<(Duration, String)>,
}

/// How one fault ended.
pub enum End {
    /// A child ran again, after `leaderless` without one (zero: never
    /// stopped); `moved`: another member's child; `struck_stopped`: no
    /// child ran when it struck, so what followed is not its doing.
    Over { leaderless: Duration, moved: bool, struck_stopped: bool },
    /// No child ran within --stall of it (counted as leaderless that long).
    Stalled { moved: bool },
    /// The soak was stopped: not judged.
    Interrupted,
}

/// The fault loop: until `--transitions` leadership transitions (or a
/// stop), waits for a leader, draws a fault for it and the next child's
/// mode, injects the fault and times how long nobody led.
pub fn inject(soak: &mut Soak, args: &Args, faults: &[Fault], rng: &mut Rng, interrupted: &AtomicBool) -> Run {
    let stall: Duration = args.stall.into();
    let mut run = Run::default();
    let mut reported = 0;
    soak.fill();
    while soak.transitions() < args.transitions && !interrupted.load(Ordering::Relaxed) {
        let Some(mut slot) = await_leader(soak, stall, interrupted) else {
            run.stalls += 1;
            eprintln!("neli-soak: no leader for {stall:?}");
            continue;
        };
        let mut before = soak.detector.starts();
        let mut mode = leader_mode(soak, &before);
        let finishing = matches!(mode.as_str(), "finish" | "scheduled");
        let fault = if finishing && rng.pick(&[true, false]) { Fault::Finish } else { rng.pick(faults) };
        let script = soak.script(fault, slot, rng);
        let length = script.as_ref().map(|s| s.length).or_else(|| fault.length(rng, soak.session));
        let script = script.map(|s| s.events).unwrap_or_default();
        if fault == Fault::SigtermAfterThaw {
            // Its freeze first; the row is the mode of the child stopped.
            match freeze_first(soak, slot, &before, rng, stall, interrupted) {
                Ok((leader, starts)) => (slot, before, mode) = (leader, starts.clone(), leader_mode(soak, &starts)),
                Err(End::Interrupted) => break,
                Err(_) => {
                    run.stalls += 1;
                    continue;
                }
            }
        }
        next_mode(soak, rng);
        let leader = injection_leader(&before);
        let injection = Injection { fault, slot, length, before, script };
        let injected_at = SystemTime::now();
        let watched = match fault {
            Fault::Pause => pause_episode(soak, faults, rng, stall, interrupted, &mut run),
            Fault::HotKill9 | Fault::HotUnhealthy | Fault::HotSetKill9 => {
                match crate::hot::episode(soak, &injection, rng, stall, interrupted, &mut run) {
                    Some(end) => end,
                    // No hot standby known (a list not yet written).
                    None => continue,
                }
            }
            _ => watch(soak, &injection, rng, stall, interrupted),
        };
        let (leaderless, moved) = match watched {
            End::Over { struck_stopped: true, .. } => {
                eprintln!(
                    "neli-soak: {} injected at {} found {leader}'s command already stopped: not counted",
                    fault.name(),
                    wall(injected_at)
                );
                run.struck_stopped += 1;
                continue;
            }
            End::Over { leaderless, moved, .. } => (leaderless, moved),
            End::Stalled { moved } => {
                run.stalls += 1;
                (stall, moved)
            }
            End::Interrupted => break,
        };
        let stopped = !leaderless.is_zero();
        if fault == Fault::NetBlip && !(stopped || moved) {
            // Each blip's length, to count those within the promise.
            eprintln!(
                "neli-soak: {} of {:.2?} injected at {} rode through",
                fault.name(),
                length.unwrap_or_default(),
                wall(injected_at)
            );
        }
        if (fault.is_cluster_event() || matches!(fault, Fault::NetBlip | Fault::HotSetKill9)) && (stopped || moved) {
            // Where to look in the members' logs (--keep-logs).
            eprintln!(
                "neli-soak: {}{} injected at {} stopped {leader}'s command ({mode}): leaderless {leaderless:.2?}, {}",
                fault.name(),
                length.map(|l| format!(" of {l:.2?}")).unwrap_or_default(),
                wall(injected_at),
                if moved { "another member led next" } else { "the same member led next" }
            );
        }
        let outcome = run.outcomes.entry((fault, mode)).or_default();
        outcome.handovers += usize::from(moved);
        outcome.stops += usize::from(stopped || moved);
        outcome.needless += usize::from(stopped && !moved);
        outcome.leaderless.push(leaderless);
        let done = soak.transitions();
        if done >= reported + 25 {
            reported = done;
            println!("neli-soak: {done} transitions, {} overlaps", soak.detector.overlaps().len());
        }
    }
    run
}

/// How long a warm leader's command may take to act on the unlead signal
/// of `pause --stop` (the soak's warm script takes milliseconds).
const WARM_HONOUR: Duration = Duration::from_secs(1);

/// Runs `neli-run WHAT` (`pause`, `resume`) with `extra` on the soak's
/// group, waiting up to `stall` for its acknowledgement: what it said if
/// it exited 0 (why not is said).
pub fn ask(soak: &Soak, what: &str, extra: &[&str], stall: Duration) -> Option<String> {
    let timeout = format!("{}s", stall.as_secs().max(1));
    let out = std::process::Command::new(&soak.neli)
        .args([what, "-b", &soak.brokers, "-g", &soak.group, "--timeout", &timeout])
        .args(extra)
        .output();
    match out {
        Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => {
            eprintln!("neli-soak: {what}: {}", String::from_utf8_lossy(&out.stderr).trim());
            None
        }
        Err(e) => {
            eprintln!("neli-soak: cannot run {what}: {e}");
            None
        }
    }
}

/// `Fault::Pause`: `neli-run pause --stop`; once acknowledged, 2-4 faults
/// (kill -9, a graceful stop, a freeze or a network cut for a session, a
/// blip, the broker down or frozen) each at the leader (or the broker),
/// each given two sessions to play out (failovers happen) while no child
/// may start or run; then
/// `neli-run resume`, and the time from it until a child runs again (the
/// one leaderless time counted: the pause itself is the operator's).
fn pause_episode(
    soak: &mut Soak,
    faults: &[Fault],
    rng: &mut Rng,
    stall: Duration,
    interrupted: &AtomicBool,
    run: &mut Run,
) -> End {
    let before = soak.detector.starts();
    let warm = soak.leader_slot().is_some_and(|slot| soak.is_warm(slot));
    let said = ask(soak, "pause", &["--stop"], stall);
    let paused_at = SystemTime::now();
    if warm {
        // A warm leader acknowledges once its command is told (the file
        // emptied, the unlead signal sent): the command then has a moment
        // to honour it (docs/operations.md, warm standbys).
        let until = Instant::now() + WARM_HONOUR;
        while soak.detector.lock_held() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Acknowledged: the leader's command is gone, and none may start. (No
    // pause unacknowledged is judged: it may never have been written.)
    let acked = soak.detector.starts().len();
    let offset = said.as_deref().map_or(i64::MIN, judge::pause_offset);
    let violated = |soak: &Soak, run: &mut Run, when: &str| {
        let new = judge::paused_starts(&soak.detector.starts(), before.len(), acked, offset);
        if !new.is_empty() || soak.detector.lock_held() {
            run.paused_starts.push(format!("{when}: lock held {}, starts {new:?}", soak.detector.lock_held()));
            return true;
        }
        false
    };
    let kinds = [
        Fault::Kill9,
        Fault::Sigterm,
        Fault::SigstopCont,
        Fault::NetCut,
        Fault::NetBlip,
        Fault::BrokerRestart,
        Fault::BrokerPause,
    ];
    let kinds: Vec<Fault> = kinds.into_iter().filter(|k| faults.contains(k)).collect();
    let (mut broken, rounds) = match said {
        Some(_) => (violated(soak, run, "at the acknowledgement"), rng.pick(&[2, 3, 4])),
        None => {
            run.unacknowledged += 1;
            (false, 0)
        }
    };
    for _ in 0..rounds {
        if broken || interrupted.load(Ordering::Relaxed) || kinds.is_empty() {
            break;
        }
        let fault = rng.pick(&kinds);
        // The leader as `status` names it (it runs nothing), else anyone: a
        // failover late in the pause finds the request itself out of the
        // new owner's backlog, and only the records that carried it say so.
        let alive: Vec<usize> = (0..soak.slots.len()).filter(|&i| soak.slots[i].member.is_some()).collect();
        let slot = status_leader(soak).and_then(|n| soak.slot_named(&n)).unwrap_or_else(|| rng.pick(&alive));
        soak.strike(fault, slot, rng);
        run.paused_faults += 1;
        for (i, length) in
            [fault.length(rng, soak.session).unwrap_or(soak.session), soak.session * 2].iter().enumerate()
        {
            let until = Instant::now() + *length;
            while Instant::now() < until && !broken {
                broken = violated(soak, run, fault.name());
                soak.fill();
                std::thread::sleep(Duration::from_millis(10));
            }
            if i == 0 {
                soak.end(fault, slot);
            }
        }
    }
    if broken {
        eprintln!("neli-soak: a child ran while paused (paused at {})", wall(paused_at));
    }
    let resumed = Instant::now();
    soak.resumes += 1;
    // As an operator would: again until acknowledged (`resume` gives up
    // reading a topic it cannot catch up with in 10 s, on a loaded broker).
    while ask(soak, "resume", &[], stall).is_none() && resumed.elapsed() < stall {
        run.unacknowledged += 1;
        std::thread::sleep(Duration::from_secs(1));
    }
    while !soak.detector.lock_held() {
        if interrupted.load(Ordering::Relaxed) {
            return End::Interrupted;
        }
        if resumed.elapsed() > stall {
            eprintln!("neli-soak: no child running {stall:?} after the resume (paused at {})", wall(paused_at));
            return End::Stalled { moved: false };
        }
        soak.fill();
        std::thread::sleep(Duration::from_millis(10));
    }
    let starts = soak.detector.starts();
    let moved = starts.last().map(|s| &s.0) != before.last().map(|s| &s.0);
    End::Over { leaderless: resumed.elapsed(), moved, struck_stopped: false }
}

/// The fresh leader `neli-run status` names, if any.
fn status_leader(soak: &Soak) -> Option<String> {
    let out = std::process::Command::new(&soak.neli)
        .args(["status", "-b", &soak.brokers, "-g", &soak.group])
        .output()
        .ok()?;
    // "group G: leader NAME (host H, pid P), token T"
    let text = String::from_utf8_lossy(&out.stdout);
    let (_, rest) = text.lines().next()?.split_once(": leader ")?;
    Some(rest.split_once(" (")?.0.to_string())
}

/// The member whose child started last.
fn injection_leader(starts: &[(String, i64)]) -> String {
    starts.last().map_or_else(String::new, |s| s.0.clone())
}

/// Waits (up to `stall`, starting members meanwhile) for a leader whose
/// child runs; its slot.
fn await_leader(soak: &mut Soak, stall: Duration, interrupted: &AtomicBool) -> Option<usize> {
    let waited = Instant::now();
    while !(soak.detector.lock_held() && soak.leader_slot().is_some())
        && waited.elapsed() < stall
        && !interrupted.load(Ordering::Relaxed)
    {
        soak.fill();
        std::thread::sleep(Duration::from_millis(10));
    }
    soak.leader_slot()
}

/// The mode the leader's child runs in.
fn leader_mode(soak: &Soak, before: &[(String, i64)]) -> String {
    let token = before.last().map_or(-1, |s| s.1);
    // Under a schedule one token runs many times: the newest run's mode
    // is the last line once every start has written its own.
    let modes = soak.detector.dir.join("modes");
    let _ = wait_for(Duration::from_secs(2), || read_lines(&modes).len() >= before.len());
    match soak.schedule {
        Some(_) => read_lines(&modes).last().and_then(|l| l.split(' ').nth(1).map(str::to_string)).unwrap_or_default(),
        None => mode_of(&soak.detector, token),
    }
}

/// The first half of `Fault::SigtermAfterThaw`: the leader in `slot` frozen
/// until another leads, thawed, and left half a session to come back (the
/// issue's 3 s at S = 6 s), while the new leader's child runs in a mode that
/// does not end by itself (the stop must find it running). The new
/// leader's slot and the starts so far; or a stall or the soak's stop.
fn freeze_first(
    soak: &mut Soak,
    slot: usize,
    before: &[(String, i64)],
    rng: &mut Rng,
    stall: Duration,
    interrupted: &AtomicBool,
) -> Result<(usize, Vec<(String, i64)>), End> {
    let modes: &[&str] = if soak.schedule.is_some() { &SCHEDULED_MODES } else { &MODES };
    let lasting: Vec<&str> = modes.iter().copied().filter(|m| !matches!(*m, "finish" | "scheduled")).collect();
    let dir = &soak.detector.dir;
    let _ = fs::write(dir.join("mode.new"), rng.pick(&lasting));
    let _ = fs::rename(dir.join("mode.new"), dir.join("mode"));
    let freeze =
        Injection { fault: Fault::SigstopCont, slot, length: None, before: before.to_vec(), script: Vec::new() };
    match watch(soak, &freeze, rng, stall, interrupted) {
        End::Over { .. } => {}
        ended => return Err(ended),
    }
    let back = Instant::now() + soak.session / 2;
    while Instant::now() < back && !interrupted.load(Ordering::Relaxed) {
        soak.fill();
        std::thread::sleep(Duration::from_millis(10));
    }
    let Some(leader) = await_leader(soak, stall, interrupted) else {
        eprintln!("neli-soak: no leader for {stall:?} after a thaw");
        return Err(End::Stalled { moved: true });
    };
    Ok((leader, soak.detector.starts()))
}

/// Draws how the next child will behave (renamed into place, so a child
/// starting now never reads a half-written file).
fn next_mode(soak: &Soak, rng: &mut Rng) {
    let dir = &soak.detector.dir;
    let modes: &[&str] = if soak.schedule.is_some() { &SCHEDULED_MODES } else { &MODES };
    let _ = fs::write(dir.join("mode.new"), rng.pick(modes));
    let _ = fs::rename(dir.join("mode.new"), dir.join("mode"));
}

/// How long no child held the lock since a fault struck: every while it
/// was free, summed.
#[derive(Default)]
pub struct Leaderless {
    lost: Option<Instant>,
    pub total: Duration,
}

impl Leaderless {
    /// Notes whether a child holds the lock `now`.
    pub fn note(&mut self, held: bool, now: Instant) {
        match (held, self.lost) {
            (false, None) => self.lost = Some(now),
            (true, Some(since)) => {
                self.total += now - since;
                self.lost = None;
            }
            _ => {}
        }
    }
}

/// Injects one fault and watches the lock until a child runs again (ending
/// a timed disruption when its time is up), the soak is stopped, or
/// `stall` passes.
pub fn watch(soak: &mut Soak, f: &Injection, rng: &mut Rng, stall: Duration, interrupted: &AtomicBool) -> End {
    let before = &f.before;
    let injected = Instant::now();
    let injected_at = SystemTime::now();
    let struck_stopped = !soak.detector.lock_held();
    soak.strike(f.fault, f.slot, rng);
    // Leaderless: every while no child held the lock since the strike.
    let (mut leaderless, mut ended, mut moved) = (Leaderless::default(), false, false);
    let mut script = f.script.iter().peekable();
    loop {
        let now = Instant::now();
        // A cluster fault's events as their time comes; the rest at once
        // once the fault is over.
        while let Some((_, event)) = script.next_if(|(at, _)| injected + *at <= now) {
            soak.cluster_event(event);
        }
        let held = soak.detector.lock_held();
        leaderless.note(held, now);
        let starts = soak.detector.starts();
        moved |=
            starts.len() > before.len() && starts[before.len()..].iter().any(|s| s.0 != before[before.len() - 1].0);
        if !ended && f.length.is_some_and(|d| now >= injected + d) {
            soak.end(f.fault, f.slot);
            ended = true;
        }
        // A one-shot fault is over once a child started after it runs
        // (another member's, or the same leader's after a fence it had
        // been resuming from when the fault struck); a timed one once it
        // has ended and some child runs again.
        let restarted = starts.len() > before.len();
        let over = held && if f.length.is_some() { ended } else { restarted };
        let stopped = interrupted.load(Ordering::Relaxed);
        let stalled = injected.elapsed() > stall;
        if !(over || stopped || stalled) {
            soak.fill();
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        if !ended {
            soak.end(f.fault, f.slot);
        }
        script.for_each(|(_, event)| soak.cluster_event(event));
        if over {
            // A fault that never cost the command (a blip shorter than
            // the deadline) left nobody leaderless.
            return End::Over { leaderless: leaderless.total, moved, struck_stopped };
        }
        if stopped {
            return End::Interrupted;
        }
        eprintln!(
            "neli-soak: no child running {stall:?} after {} injected at {} into {} (held {held}, new leader {moved})",
            f.fault.name(),
            wall(injected_at),
            before[before.len() - 1].0
        );
        return End::Stalled { moved };
    }
}
