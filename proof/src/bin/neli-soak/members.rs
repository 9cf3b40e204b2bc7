//! The candidates: one slot per member, each started (and restarted once
//! its neli-run exits) with the soak's child, its output copied into a log
//! file by a reader a fault can break.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use neli_proof::brokers::Broker;
use neli_proof::detector::Detector;
use neli_proof::die_with_runner;
use neli_proof::netns::NetNs;

/// The child: what it does is chosen by the soak before each start.
const CHILD: &str = r#"mode=$(cat "$0/mode" 2>/dev/null || echo normal)
[ -e "$0/born-sick-$NELI_NAME" ] && echo "$NELI_NAME $NELI_FENCING_TOKEN" >> "$0/sick-starts"
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
[ -e "$0/born-sick-$NELI_NAME" ] && echo "$NELI_NAME $NELI_FENCING_TOKEN" >> "$0/sick-starts"
echo "$NELI_FENCING_TOKEN $mode" >> "$0/modes"
echo "start $NELI_DUE $NELI_ATTEMPT $NELI_FENCING_TOKEN $(date +%s%3N)" >> "$0/runs"
case $mode in
  ignore-term) trap '' TERM; while :; do sleep 0.2; done ;;
  grandchildren) sleep 100000 & sleep 100000 & wait ;;
  daemonize) (setsid sh -c 'trap "" TERM; exec sleep 100000' &); setsid sleep 100000 & exec sleep 100000 ;;
  *) sleep "$RUN"; echo "end $NELI_DUE $NELI_FENCING_TOKEN" >> "$0/runs" ;;
esac"#;

/// A warm member's command (--warm): it runs all the time and holds the
/// detector's lock only while its token file holds a token: a child under
/// the detector, in a process group of its own (set -m), started on the
/// lead signal and killed, group and all, on the unlead signal. The
/// overlap detector then counts *leading* commands. It writes nothing:
/// bash's job notifications ("[1]+ Done ...", every 0.2 s under set -m)
/// blocked it on a full pipe once a broken-log fault stalled its reader,
/// and a bash blocked in a write runs no trap, so it held on to its lead
/// (two pauses of seed 4244 flagged it). It reads the token file with
/// `read`, not `$(cat ...)`: bash 5.2 fails to parse a command substitution
/// in a trap that runs while it parses another, and `check` runs both ways.
const WARM: &str = r#"exec >/dev/null 2>&1
set -m
dir=$0; guard=
check() {
  t=; read -r t < "$NELI_TOKEN_FILE"
  if [ -n "$t" ] && [ -z "$guard" ]; then
    NELI_FENCING_TOKEN=$t "$dir/guarded.sh" "$dir" sleep 100000 & guard=$!
  elif [ -z "$t" ] && [ -n "$guard" ]; then
    kill -TERM -- -$guard; wait $guard; guard=
  fi
}
trap check USR1 USR2
trap '[ -n "$guard" ] && kill -TERM -- -$guard; exit 0' TERM
check
while :; do sleep 0.2 & wait $!; done"#;

/// Every other member's hooks: each hangs past --hook-timeout, so that
/// its process group is killed, and none may delay a fence, a revoke or a
/// handover (the judge's stalls and leaderless times would show it). A
/// bounded sleep: a member killed with -9 leaves its hook behind.
const HANGING_HOOKS: [&str; 8] =
    ["--on-lead", "sleep 30", "--on-unlead", "sleep 30", "--on-exit", "sleep 30", "--hook-timeout", "2s"];

/// Every member's health check: it fails while `sick-NAME` (the fault
/// `unhealthy`) or `born-sick-NAME` exists in the work directory. Every
/// fourth member is born sick, healed `SICK_FOR` later: a command started
/// while that file exists was started by a member whose check never
/// passed (the judge's `sick_starts`). A healthy member that turns sick
/// may still start in the moment before its failures are counted, so the
/// fault's file is not judged that way.
const HEALTH: &str = r#"test ! -e "$DIR/sick-$NELI_NAME" -a ! -e "$DIR/born-sick-$NELI_NAME""#;

/// How long a member born sick stays so, in session timeouts.
const SICK_FOR: u32 = 3;

/// Every member's --once-within: members that wait through a run belong to
/// its wave whatever this is; refilled ones belong to it only this long.
pub const WAVE: Duration = Duration::from_secs(2);

/// One candidate slot: its namespace (if any), its current process and the
/// reader of that process's stdout and stderr.
pub struct Slot {
    pub ns: Option<NetNs>,
    pub member: Option<(String, Child)>,
    pub log: Option<LogReader>,
    /// Until when a member killed here stays down (a hot-set fault's):
    /// `fill` starts no other before.
    pub hold: std::cell::Cell<Option<Instant>>,
}

/// Copies a member's output from a pipe into its log file, until told to
/// stall (stop reading, keep the pipe: a slow journald) or die (close it).
pub struct LogReader(Arc<AtomicU8>);

impl LogReader {
    pub const READING: u8 = 0;
    pub const STALLED: u8 = 1;
    pub const DEAD: u8 = 2;

    /// The pipe's write end for the member, and its reader.
    pub fn start(mut log: fs::File) -> (std::os::fd::OwnedFd, LogReader) {
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

    /// Breaks (or mends) the member's log, as a fault does.
    pub fn set(&self, state: u8) {
        self.0.store(state, Ordering::Relaxed);
    }
}

/// The soak's members and what they run against: what a fault strikes and
/// the judge reads.
pub struct Soak {
    pub neli: PathBuf,
    pub detector: Detector,
    pub group: String,
    pub brokers: String,
    pub broker: Option<Broker>,
    pub session: Duration,
    /// Every member's timing flags.
    pub timing: Vec<String>,
    /// Brokers in the cluster (1: a single broker, no cluster faults).
    pub cluster: u16,
    /// The topic's partitions: `--roles`, else 1.
    pub partitions: u16,
    pub slots: Vec<Slot>,
    pub started: usize,
    /// When each member was started, by name.
    pub births: BTreeMap<String, std::time::SystemTime>,
    /// With --schedule: how long a run takes, and the schedule's period.
    pub schedule: Option<(Duration, Duration)>,
    /// Resumes after `pause --stop`: each may start the stopped command
    /// again under the same leadership, so under the same token.
    pub resumes: usize,
    /// Every member's `--hot-standbys` (`--hot-standbys`; None: neli-run's
    /// default, and no hot-set faults).
    pub hot_standbys: Option<u32>,
}

impl Soak {
    /// Starts a candidate in every slot whose neli-run has exited.
    pub fn fill(&mut self) {
        self.heal_born_sick();
        for i in 0..self.slots.len() {
            if let Some((_, child)) = self.slots[i].member.as_mut() {
                if child.try_wait().ok().flatten().is_none() {
                    continue;
                }
            }
            if self.slots[i].hold.get().is_some_and(|until| Instant::now() < until) {
                continue;
            }
            self.started += 1;
            let name = format!("c{}-{}", i, self.started);
            if self.started % 4 == 0 {
                let _ = fs::write(self.detector.dir.join(format!("born-sick-{name}")), "");
            }
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
                None if self.is_warm(i) => (
                    ["--warm", "--restart", "on-failure", "--restart-delay", "200ms"].map(String::from).to_vec(),
                    WARM,
                    Duration::ZERO,
                ),
                None => (vec!["--once-within".into(), format!("{}ms", WAVE.as_millis())], CHILD, Duration::ZERO),
            };
            let (wrap, shell) = match self.is_warm(i) {
                true => (Vec::new(), "bash"),
                false => (self.detector.wrap(), "sh"),
            };
            let child = die_with_runner(&mut Command::new(&argv[0]))
                .args(&argv[1..])
                .args(["-b", &self.brokers, "-g", &self.group, "--name", &name])
                .args(&self.timing)
                .args(flags)
                .args(if i % 2 == 1 { &HANGING_HOOKS[..] } else { &[] })
                .args(["--health-cmd", HEALTH, "--health-interval", self.health_interval(), "--health-retries", "1"])
                .args(self.hot_standbys.iter().flat_map(|k| ["--hot-standbys".to_string(), k.to_string()]))
                .env("DIR", &self.detector.dir)
                // Priorities 0 to 2 by slot: an owner hands partition 0 to a
                // live member of higher priority before it leads.
                .args(["--priority", &(i % 3).to_string()])
                .arg("--")
                .args(wrap)
                .args([shell, "-c", child])
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

    /// Every member's --health-interval: 300 ms, 1 s in a group of more
    /// than ten (a hundred checks every 300 ms are 330 shells a second on
    /// the soak's two cores).
    fn health_interval(&self) -> &'static str {
        if self.slots.len() > 10 {
            "1s"
        } else {
            "300ms"
        }
    }

    /// Heals the members born sick `SICK_FOR` sessions ago.
    pub fn heal_born_sick(&self) {
        for (name, born) in &self.births {
            let file = self.detector.dir.join(format!("born-sick-{name}"));
            if born.elapsed().unwrap_or_default() > self.session * SICK_FOR && file.exists() {
                let _ = fs::remove_file(file);
            }
        }
    }

    /// Whether the member in `slot` runs with --warm: every third, unless
    /// the members keep a schedule.
    pub fn is_warm(&self, slot: usize) -> bool {
        slot % 3 == 2 && self.schedule.is_none()
    }

    /// The slot of the member whose child started last.
    pub fn leader_slot(&self) -> Option<usize> {
        let (name, _) = self.detector.starts().pop()?;
        self.slot_named(&name)
    }

    /// The slot of the running member named `name`.
    pub fn slot_named(&self, name: &str) -> Option<usize> {
        self.slots.iter().position(|s| s.member.as_ref().is_some_and(|(n, _)| n == name))
    }

    /// The neli-run of the member in `slot`.
    pub fn pid(&self, slot: usize) -> Pid {
        Pid::from_raw(self.slots[slot].member.as_ref().expect("a member").1.id() as i32)
    }

    /// Leadership transitions so far: starts on a member other than the
    /// previous start's (a fenced leader resuming is not one).
    pub fn transitions(&self) -> usize {
        self.detector.starts().windows(2).filter(|w| w[0].0 != w[1].0).count()
    }

    /// Stops every member (thawed and healed first), kill -9 for any still
    /// up after 30 s.
    pub fn stop_all(&mut self) {
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
