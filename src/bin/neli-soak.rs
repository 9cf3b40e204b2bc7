//! neli-soak: a chaos soak of the real `neli-run` binary.
//!
//! Starts N candidates in one group against a broker (a fresh
//! `neli-run dev-broker` unless --brokers is given) and, until the requested
//! number of leadership transitions, injects a random fault into the current
//! leader. The overlap detector is independent of neli-run: every child runs
//! under `flock -n` on one shared file (tests/fixtures/guarded.sh), so two
//! children at once, or a child that outlives its neli-run, is caught by the
//! kernel's lock, not by neli-run's opinion of itself.
//!
//! Prints one summary and exits 1 on any overlap or orphan.
//!
//! usage: cargo run --release --bin neli-soak -- --transitions 500

use std::collections::BTreeMap;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const GUARDED: &str = include_str!("../../tests/fixtures/guarded.sh");

/// The child: what it does is chosen by the soak before each start.
const CHILD: &str = r#"mode=$(cat "$0/mode" 2>/dev/null || echo normal)
echo "$NELI_FENCING_TOKEN $mode" >> "$0/modes"
case $mode in
  ignore-term) trap '' TERM; while :; do sleep 0.2; done ;;
  grandchildren) sleep 100000 & sleep 100000 & wait ;;
  *) exec sleep 100000 ;;
esac"#;

/// Chaos soak of neli-run: random faults until N leadership transitions.
#[derive(Debug, Parser)]
struct Args {
    /// Leadership transitions to reach.
    #[arg(long, default_value_t = 500)]
    transitions: usize,
    /// Candidates in the group.
    #[arg(long, default_value_t = 5)]
    candidates: usize,
    /// An external broker (e.g. tansu); default: a fresh dev broker.
    #[arg(long)]
    brokers: Option<String>,
    /// Group session timeout for every candidate.
    #[arg(long, default_value = "3s")]
    session_timeout: humantime::Duration,
    /// Seed for the fault sequence (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Give up waiting for any one transition after this long.
    #[arg(long, default_value = "60s")]
    stall: humantime::Duration,
}

/// The faults, injected into the current leader.
const FAULTS: [&str; 5] = ["kill-9", "sigterm", "sigstop-cont", "child-crash", "broker-pause"];
/// How the next child behaves; weighted towards the plain one.
const MODES: [&str; 4] = ["normal", "normal", "ignore-term", "grandchildren"];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: plenty for picking faults reproducibly.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }
}

struct Soak {
    neli: PathBuf,
    dir: PathBuf,
    brokers: String,
    broker: Option<Child>,
    session: Duration,
    slots: Vec<Option<(String, Child)>>,
    started: usize,
}

impl Soak {
    fn timing(&self) -> Vec<String> {
        let s = self.session;
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        vec![
            "--session-timeout".into(),
            ms(s),
            "--heartbeat-interval".into(),
            ms(s / 12),
            "--heartbeat-deadline".into(),
            ms(s / 2),
            "--grace".into(),
            ms(s / 3),
            "-X".into(),
            format!("heartbeat.interval.ms={}", (s / 10).as_millis()),
        ]
    }

    /// Starts a candidate in every empty slot (and reaps exited ones).
    fn fill(&mut self) {
        for i in 0..self.slots.len() {
            if let Some((_, child)) = self.slots[i].as_mut() {
                if child.try_wait().ok().flatten().is_none() {
                    continue;
                }
            }
            self.started += 1;
            let name = format!("c{}-{}", i, self.started);
            let log = fs::File::create(self.dir.join(format!("{name}.log"))).expect("log file");
            let child = Command::new(&self.neli)
                .args(["-b", &self.brokers, "-g", "soak", "--name", &name])
                .args(self.timing())
                .arg("--")
                .arg(self.dir.join("guarded.sh"))
                .arg(&self.dir)
                .args(["sh", "-c", CHILD])
                .arg(&self.dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log)
                .spawn()
                .expect("start neli-run");
            self.slots[i] = Some((name, child));
        }
    }

    fn starts(&self) -> Vec<(String, i64)> {
        read_lines(&self.dir.join("starts"))
            .iter()
            .filter_map(|l| {
                let (n, t) = l.split_once(' ')?;
                Some((n.to_string(), t.parse().ok()?))
            })
            .collect()
    }

    fn lock_held(&self) -> bool {
        !Command::new("flock")
            .args(["-n", "-E", "99"])
            .arg(self.dir.join("lock"))
            .arg("true")
            .status()
            .is_ok_and(|s| s.success())
    }

    fn leader_pid(&self) -> Option<Pid> {
        let (name, _) = self.starts().pop()?;
        self.slots.iter().flatten().find(|(n, _)| *n == name).map(|(_, c)| Pid::from_raw(c.id() as i32))
    }

    fn signal_broker(&self, sig: Signal) {
        if let Some(b) = &self.broker {
            let _ = kill(Pid::from_raw(b.id() as i32), sig);
        }
    }

    fn stop_all(&mut self) {
        for (_, child) in self.slots.iter_mut().flatten() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for (_, child) in self.slots.iter_mut().flatten() {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn read_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Every process of group `pgid` but its leader (the shim): the child's
/// whole tree, which a "crash" kills without touching the shim.
fn child_tree(pgid: i32) -> Vec<Pid> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((_, tail)) = stat.rsplit_once(") ") else { continue };
        let pgrp = tail.split_whitespace().nth(2).and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(pgid) && pid != pgid {
            found.push(Pid::from_raw(pid));
        }
    }
    found
}

/// The mode the child with fencing token `token` started in.
fn mode_of(dir: &Path, token: i64) -> String {
    read_lines(&dir.join("modes"))
        .iter()
        .rev()
        .find_map(|l| l.split_once(' ').filter(|(t, _)| t.parse() == Ok(token)).map(|(_, m)| m.to_string()))
        .unwrap_or_else(|| "normal".into())
}

fn shim_of(neli: Pid) -> Option<i32> {
    let children = fs::read_to_string(format!("/proc/{0}/task/{0}/children", neli)).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    let mut rng = Rng(seed);
    let neli = std::env::current_exe().expect("own path").with_file_name("neli-run");
    assert!(neli.exists(), "{} not found: build it (cargo build --release)", neli.display());
    let dir = std::env::temp_dir().join(format!("neli-soak-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("work dir");
    fs::write(dir.join("guarded.sh"), GUARDED).expect("write the detector");
    let _ = Command::new("chmod").arg("+x").arg(dir.join("guarded.sh")).status();

    let (brokers, broker) = match &args.brokers {
        Some(b) => (b.clone(), None),
        None => {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let addr = format!("127.0.0.1:{port}");
            let child = Command::new(&neli)
                .args(["dev-broker", "--listen", &addr])
                .stderr(Stdio::null())
                .spawn()
                .expect("start the dev broker");
            while TcpStream::connect(&addr).is_err() {
                std::thread::sleep(Duration::from_millis(20));
            }
            (addr, Some(child))
        }
    };
    let external = broker.is_none();
    let mut soak = Soak {
        neli,
        dir: dir.clone(),
        brokers,
        broker,
        session: args.session_timeout.into(),
        slots: (0..args.candidates).map(|_| None).collect(),
        started: 0,
    };
    println!(
        "neli-soak: seed {seed}, {} candidates, session {}, work dir {}",
        args.candidates,
        args.session_timeout,
        dir.display()
    );

    let stall: Duration = args.stall.into();
    let mut faults: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let mut stalls = 0;
    soak.fill();
    while soak.starts().len() < args.transitions + 1 {
        // Wait for a leader whose child runs.
        let waited = Instant::now();
        while !(soak.lock_held() && soak.leader_pid().is_some()) && waited.elapsed() < stall {
            soak.fill();
            std::thread::sleep(Duration::from_millis(20));
        }
        let Some(leader) = soak.leader_pid() else {
            stalls += 1;
            continue;
        };
        let before = soak.starts().len();
        let token = soak.starts().last().map_or(-1, |s| s.1);
        let mut fault = rng.pick(&FAULTS);
        if external && fault == "broker-pause" {
            fault = "kill-9";
        }
        // How the next leader's child will behave (renamed into place, so a
        // child starting now never reads a half-written file).
        let _ = fs::write(dir.join("mode.new"), rng.pick(&MODES));
        let _ = fs::rename(dir.join("mode.new"), dir.join("mode"));
        let injected = Instant::now();
        let mut stopped = None;
        match fault {
            "kill-9" => {
                let _ = kill(leader, Signal::SIGKILL);
            }
            "sigterm" => {
                let _ = kill(leader, Signal::SIGTERM);
            }
            "sigstop-cont" => {
                let _ = kill(leader, Signal::SIGSTOP);
                stopped = Some(leader);
            }
            "child-crash" => {
                for pid in shim_of(leader).map(child_tree).unwrap_or_default() {
                    let _ = kill(pid, Signal::SIGKILL);
                }
            }
            "broker-pause" => {
                soak.signal_broker(Signal::SIGSTOP);
                std::thread::sleep(soak.session);
                soak.signal_broker(Signal::SIGCONT);
            }
            _ => unreachable!(),
        }
        let label = format!("{fault} ({} child)", mode_of(&dir, token));
        while soak.starts().len() == before && injected.elapsed() < stall {
            soak.fill();
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(pid) = stopped {
            let _ = kill(pid, Signal::SIGCONT);
        }
        if soak.starts().len() == before {
            stalls += 1;
            eprintln!("neli-soak: no new leader {stall:?} after {fault}");
            continue;
        }
        faults.entry(label).or_default().push(injected.elapsed());
        let done = soak.starts().len() - 1;
        if done % 10 == 0 {
            println!("neli-soak: {done} transitions");
        }
    }
    soak.stop_all();
    soak.signal_broker(Signal::SIGKILL);
    let orphans = {
        let deadline = Instant::now() + Duration::from_secs(5);
        while soak.lock_held() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        usize::from(soak.lock_held())
    };
    let overlaps = read_lines(&dir.join("overlaps"));
    let starts = soak.starts();
    let tokens_increase = starts.windows(2).all(|w| w[0].1 < w[1].1) || external;

    println!("\n## neli-soak summary (seed {seed})\n");
    println!("transitions: {}", starts.len().saturating_sub(1));
    println!("overlaps: {}", overlaps.len());
    println!("orphans left: {orphans}");
    println!("stalls (no new leader within {}): {stalls}", args.stall);
    println!("fencing tokens strictly increasing: {tokens_increase}");
    println!("\n| fault | count | leaderless p50 | p99 | max |\n|---|---|---|---|---|");
    for (fault, mut times) in faults {
        times.sort();
        let f = |d: Duration| format!("{:.2}s", d.as_secs_f64());
        println!(
            "| {fault} | {} | {} | {} | {} |",
            times.len(),
            f(percentile(&times, 0.5)),
            f(percentile(&times, 0.99)),
            f(*times.last().unwrap())
        );
    }
    if overlaps.is_empty() && orphans == 0 && tokens_increase {
        let _ = fs::remove_dir_all(&dir);
        ExitCode::SUCCESS
    } else {
        println!("\nFAILED: logs kept in {}", dir.display());
        ExitCode::FAILURE
    }
}
