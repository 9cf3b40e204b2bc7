//! The candidates: what runs the job (a contender), a group of its
//! candidates with the children's own start log, and a forced handover.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use neli_proof::brokers::Broker;
use neli_proof::detector::read_lines;
use neli_proof::{die_with_runner, wait_for};

/// How long a group is left quiet after its last member joined, before a
/// handover is timed: more than librdkafka's one JoinGroup a second, plus
/// up to a second drawn anew each time, so that the stop falls at any phase
/// of the members' coordinator heartbeats (which a join aligns).
const JOIN_QUIET: Duration = Duration::from_millis(1200);

/// The child: records "NAME PID START_NS [ROLE]" (the role under `--roles`,
/// which sets NELI_ROLE) and sleeps. $0 = name, $1 = dir.
const CHILD: &str = r#"echo "$0 $$ $(date +%s%N) ${NELI_ROLE:-}" >> "$1/starts"; exec sleep 100000"#;

/// What runs the job: neli-run on a Kafka-protocol broker, or etcdctl lock.
pub struct Contender {
    /// As the report names it (e.g. `neli-run/dev`, `etcdctl-lock`).
    pub name: &'static str,
    /// The neli-run binary (this build's, or --baseline's).
    pub neli: PathBuf,
    /// etcdctl, for the etcd contender (then `neli` is unused).
    pub etcdctl: Option<PathBuf>,
    /// The broker of this contender, reachable from the host and from
    /// network namespaces (it listens on 0.0.0.0).
    pub broker: Broker,
    /// neli-run's session timeout, or etcd's lease TTL.
    pub session: Duration,
    /// neli-run's timing flags (none: the product's defaults).
    pub timing: Vec<String>,
    /// Groups made so far (each gets a fresh name); shared, so that two
    /// groups of one contender can run at once.
    pub groups: AtomicUsize,
    /// Static members (KIP-345): each candidate gives its name as its
    /// group.instance.id (`-X group.instance.id=NAME`).
    pub static_members: bool,
    /// The broker's log (the dev broker's, at debug level, has every group
    /// request).
    pub broker_log: PathBuf,
}

impl Contender {
    /// etcdctl lock, not neli-run: no join to wait for, no shim.
    pub fn is_etcd(&self) -> bool {
        self.etcdctl.is_some()
    }

    pub fn new_group(&self) -> String {
        let n = self.groups.fetch_add(1, Ordering::Relaxed) + 1;
        // The whole name: `baseline/dev` and `neli-run/dev` share a broker kind.
        let kind = self.name.replace('/', "-");
        format!("bench-{kind}-{}-{n}", std::process::id())
    }

    /// The timeout after which a crashed holder's claim expires.
    pub fn expiry(&self) -> Duration {
        self.session
    }

    /// The command line of one candidate named `name` in `group`, up to its
    /// command, with `options` (its timing flags and the group's others)
    /// and, for static members, `instance` as its group.instance.id.
    fn argv(&self, group: &str, (name, instance): (&str, &str), options: &[String]) -> Vec<String> {
        match &self.etcdctl {
            Some(etcdctl) => vec![
                etcdctl.display().to_string(),
                format!("--endpoints=http://{}", self.broker.address),
                "lock".into(),
                format!("--ttl={}", self.session.as_secs().max(1)),
                group.into(),
                "--".into(),
            ],
            None => {
                let mut argv = vec![self.neli.display().to_string(), "-b".into(), self.broker.address.clone()];
                argv.extend(["-g".into(), group.into(), "--name".into(), name.into()]);
                argv.extend(options.iter().cloned());
                if self.static_members {
                    argv.extend(["-X".into(), format!("group.instance.id={instance}")]);
                }
                argv.push("--".into());
                argv
            }
        }
    }
}

/// The process groups of live candidates: killed if the runner itself is
/// stopped (^C), since an etcdctl command outlives a killed etcdctl and
/// would go on running. (Brokers and candidates die with the runner anyway.)
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// On SIGINT, SIGTERM or SIGHUP: kill every candidate's group, run
/// `cleanup`, and exit as the signal would have.
pub fn on_interrupt(cleanup: impl FnOnce() + Send + 'static) {
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
pub struct Candidate {
    /// Its --name, and its log's name (NAME.log).
    name: String,
    process: Child,
}

impl Candidate {
    /// The supervisor's (neli-run's or etcdctl's) pid.
    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.id() as i32)
    }

    /// Its --name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its exit status, once it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.process.try_wait().ok().flatten()
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
pub struct Group<'a> {
    pub contender: &'a Contender,
    name: String,
    /// The children's start log and the candidates' logs.
    pub dir: PathBuf,
    pub candidates: Vec<Candidate>,
    /// Before each candidate's command line (e.g. a network namespace's
    /// `ip netns exec`).
    pub prefix: Vec<String>,
    /// Each candidate's command, to which its name and the group's
    /// directory are appended: by default `CHILD`.
    pub child: Vec<String>,
    /// Each candidate's timing flags instead of the contender's.
    pub timing: Option<Vec<String>>,
    /// Each candidate's other options (e.g. `--roles N`); not etcdctl's.
    pub options: Vec<String>,
    /// Variables set for each candidate.
    pub env: Vec<(String, String)>,
    spawned: usize,
}

/// A child start, as the child recorded it.
#[derive(Clone, Debug)]
pub struct Start {
    pub name: String,
    pub pid: i32,
    pub at: SystemTime,
    /// Its role (NELI_ROLE), under `--roles`.
    pub role: Option<usize>,
}

impl<'a> Group<'a> {
    /// A new group (a fresh name) with no candidate yet, its directory in
    /// `work`.
    pub fn new(contender: &'a Contender, work: &Path) -> Group<'a> {
        let name = contender.new_group();
        let dir = work.join(&name);
        fs::create_dir_all(&dir).expect("work dir");
        let child = vec!["sh".into(), "-c".into(), CHILD.into()];
        Group {
            contender,
            name,
            dir,
            candidates: Vec::new(),
            prefix: Vec::new(),
            child,
            timing: None,
            options: Vec::new(),
            env: Vec::new(),
            spawned: 0,
        }
    }

    /// The group's name (its topic is NAME.neli).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The --name of candidate `i`.
    pub fn candidate_name(&self, i: usize) -> &str {
        &self.candidates[i].name
    }

    /// The log of candidate `i`.
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.log", self.candidates[i].name))
    }

    /// Starts one more candidate (its output goes to NAME.log).
    pub fn spawn(&mut self) -> Instant {
        self.spawned += 1;
        let name = format!("m{}", self.spawned);
        self.spawn_as(&name, &name)
    }

    /// Starts a candidate named `name` (again, if one was; its log goes on
    /// in NAME.log) with `instance` as its group.instance.id if the
    /// contender's members are static.
    pub fn spawn_as(&mut self, name: &str, instance: &str) -> Instant {
        let name = name.to_string();
        let log = fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("{name}.log")));
        let log = log.expect("log");
        let mut argv = self.prefix.clone();
        let timing = self.timing.as_deref().unwrap_or(&self.contender.timing);
        let options: Vec<String> = timing.iter().chain(&self.options).cloned().collect();
        argv.extend(self.contender.argv(&self.name, (&name, instance), &options));
        argv.extend(self.child.iter().cloned());
        argv.extend([name.clone(), self.dir.display().to_string()]);
        let at = Instant::now();
        // A process group of its own, as a service manager gives each unit:
        // a graceful stop signals the whole group.
        let process = die_with_runner(&mut Command::new(&argv[0]))
            .args(&argv[1..])
            .process_group(0)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start a candidate");
        LIVE.lock().expect("candidates").push(process.id() as i32);
        self.candidates.push(Candidate { name, process });
        at
    }

    /// Every child start so far, in order.
    pub fn starts(&self) -> Vec<Start> {
        read_lines(&self.dir.join("starts"))
            .iter()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (name, pid, ns) = (f.next()?, f.next()?.parse().ok()?, f.next()?.parse::<u64>().ok()?);
                let role = f.next().and_then(|r| r.parse().ok());
                Some(Start { name: name.into(), pid, at: UNIX_EPOCH + Duration::from_nanos(ns), role })
            })
            .collect()
    }

    /// Waits until `count` children have started; the last one.
    pub fn wait_start(&self, count: usize, within: Duration) -> Option<Start> {
        let mut last = None;
        wait_for(within, || {
            let s = self.starts();
            last = s.get(count - 1).cloned();
            last.is_some()
        });
        last
    }

    /// The candidate whose child started last.
    pub fn holder(&self) -> Option<usize> {
        let name = self.starts().pop()?.name;
        self.candidates.iter().position(|c| c.name == name)
    }

    /// Waits until every neli-run candidate has joined (its log says so,
    /// after it last stood aside: one that yielded rejoins a second or so
    /// after another leads, and a `yield` during that join met a second
    /// rebalance, docs/proof.md "Where a read-back of 250 ms came from");
    /// etcdctl waiters queue at once. Then, unless `at_once`, lets the
    /// group be quiet for `JOIN_QUIET`: librdkafka sends a member's
    /// JoinGroup at most once a second, so a stop within a second of the
    /// last rebalance waits out the rest of that second (the scenario
    /// `graceful-after-join` measures exactly that).
    pub fn settle(&self, within: Duration, at_once: bool) -> bool {
        if self.contender.is_etcd() {
            std::thread::sleep(Duration::from_millis(500));
            return true;
        }
        let joined = wait_for(within, || {
            self.candidates.iter().all(|c| {
                let log = fs::read_to_string(self.dir.join(format!("{}.log", c.name))).unwrap_or_default();
                let joined = log.rfind("standby:").max(log.rfind("child started"));
                joined.is_some() && joined > log.rfind("standing aside")
            })
        });
        if joined && !at_once {
            let jitter = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_millis();
            std::thread::sleep(JOIN_QUIET + Duration::from_millis(u64::from(jitter)));
        }
        joined
    }
}

/// Whether `pid` runs (a child outliving its handover is an overlap).
pub fn alive(pid: i32) -> bool {
    // A zombie is dead for our purposes: it runs no code and holds no lock.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, t)| !t.starts_with('Z')))
        .unwrap_or(false)
}

/// How a handover is forced.
#[derive(Clone, Copy)]
pub enum Stop {
    /// SIGTERM to the holder's process group, as systemd stops a unit
    /// (etcdctl ignores a SIGTERM sent to it alone and keeps the lock).
    Graceful,
    /// SIGKILL to the supervisor process only: a crash.
    Crash,
}

impl Stop {
    /// Stops the candidate whose supervisor is `pid`.
    pub fn send(self, pid: Pid) {
        let _ = match self {
            Stop::Graceful => nix::sys::signal::killpg(pid, Signal::SIGTERM),
            Stop::Crash => kill(pid, Signal::SIGKILL),
        };
    }
}

/// One handover until the next child starts. Returns the latency and
/// whether the old child was still alive at that moment.
pub fn handover(group: &mut Group, stop: Stop, within: Duration, at_once: bool) -> Option<(Duration, bool)> {
    let holder = group.holder()?;
    let before = group.starts();
    let old = before.last()?.clone();
    let pid = group.candidates[holder].pid();
    let sent = SystemTime::now();
    stop.send(pid);
    let new = group.wait_start(before.len() + 1, within)?;
    let overlap = alive(old.pid);
    // The stopped candidate is replaced, so the group keeps its size.
    let _ = group.candidates.remove(holder);
    group.spawn();
    group.settle(within, at_once);
    Some((new.at.duration_since(sent).unwrap_or_default(), overlap))
}
