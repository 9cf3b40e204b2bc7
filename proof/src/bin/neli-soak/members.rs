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

/// Every member's --once-within: members that wait through a run belong to
/// its wave whatever this is; refilled ones belong to it only this long.
pub const WAVE: Duration = Duration::from_secs(2);

/// One candidate slot: its namespace (if any), its current process and the
/// reader of that process's stdout and stderr.
pub struct Slot {
    pub ns: Option<NetNs>,
    pub member: Option<(String, Child)>,
    pub log: Option<LogReader>,
}

/// Copies a member's output from a pipe into its log file, until told to
/// stall (stop reading, keep the pipe: a slow journald) or die (close it).
pub struct LogReader(Arc<AtomicU8>);

impl LogReader {
    const READING: u8 = 0;
    pub const STALLED: u8 = 1;
    pub const DEAD: u8 = 2;

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
    pub slots: Vec<Slot>,
    pub started: usize,
    /// When each member was started, by name.
    pub births: BTreeMap<String, std::time::SystemTime>,
    /// With --schedule: how long a run takes, and the schedule's period.
    pub schedule: Option<(Duration, Duration)>,
}

impl Soak {
    /// Starts a candidate in every slot whose neli-run has exited.
    pub fn fill(&mut self) {
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
                .args(&self.timing)
                .args(flags)
                // Priorities 0 to 2 by slot: an owner hands partition 0 to a
                // live member of higher priority before it leads.
                .args(["--priority", &(i % 3).to_string()])
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
    pub fn leader_slot(&self) -> Option<usize> {
        let (name, _) = self.detector.starts().pop()?;
        self.slots.iter().position(|s| s.member.as_ref().is_some_and(|(n, _)| *n == name))
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
