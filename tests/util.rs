//! Test harness: real `neli-run` processes against a real Kafka-protocol
//! broker over TCP, with an overlap detector that does not trust neli-run.
//!
//! The broker is a fresh `neli-run dev-broker` per test, unless
//! `NELI_TEST_BROKERS` names another (tansu in CI, or any Kafka); then each
//! test uses a group and topic of its own.

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub use neli_proof::detector::Detector;
use neli_proof::die_with_runner;
pub use neli_proof::netns::NetNs;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_neli-run")
}

/// Polls `cond` every 20 ms until it holds; panics with `what` after
/// `within`. Tests wait on events this way, never on a fixed sleep.
pub fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "timed out after {within:?} waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `cond` holds within `within` (polled every 200 ms): for a
/// condition whose last reading the test then shows when it never held.
pub fn wait_for(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Whether the condition stays false for all of `window`. Used only for the
/// claims that need a period ("no second leader appears").
pub fn stays_false(window: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < window {
        if cond() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The processes running `sleep MARKER` (a duration no other test uses, such
/// as `773` and this test process's id): a hook's or check's leftover,
/// found by its command line alone. Each as (pid, parent pid).
pub fn sleeping(marker: &str) -> Vec<(i32, i32)> {
    let wanted = format!("sleep\0{marker}\0");
    let procs = fs::read_dir("/proc").into_iter().flatten().flatten();
    let pids = procs.filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()));
    pids.filter(|pid| fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes()))
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect()
}

/// The parent of process `pid` (its /proc/PID/stat), while it lives.
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// Every process below `pid` (by their parents in /proc): a hook's keeper
/// and all below it (a subreaper, it keeps them), the shim and its command.
pub fn descendants(pid: i32) -> Vec<i32> {
    let procs = fs::read_dir("/proc").into_iter().flatten().flatten();
    let all: Vec<(i32, i32)> = procs
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter_map(|p| Some((p, parent_of(p)?)))
        .collect();
    let mut below = vec![pid];
    let mut i = 0;
    while i < below.len() {
        let parent = below[i];
        below.extend(all.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    below.split_off(1)
}

/// SIGKILLs `pids` and their process groups (each hook's keeper leads one,
/// and what the hook's shell forks next is in it), except this test
/// process's own group.
pub fn kill_all(pids: &[i32]) {
    let ours = nix::unistd::getpgrp();
    for &pid in pids {
        let pid = Pid::from_raw(pid);
        if let Ok(group) = nix::unistd::getpgid(Some(pid)) {
            if group != ours {
                let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
            }
        }
        let _ = kill(pid, Signal::SIGKILL);
    }
}

/// Kills, when dropped, whatever still runs `sleep MARKER` (see `sleeping`):
/// a failing test leaves none behind.
pub struct KillSleeping(pub String);

impl Drop for KillSleeping {
    fn drop(&mut self) {
        for (pid, _) in sleeping(&self.0) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// A heartbeat deadline (the shim's lease) far longer than `SHIM_BOUND`, for
/// tests of a kill that must come from something else: a command gone
/// within that bound was not killed by the lease running out. The session
/// timeout must exceed the deadline.
/// A generous bound for anything a test waits on that should take seconds.
pub const LONG: Duration = Duration::from_secs(60);
pub const LONG_LEASE: [&str; 4] = ["--session-timeout", "10s", "--heartbeat-deadline", "8s"];
pub const SHIM_BOUND: Duration = Duration::from_secs(4);

/// How long past the heartbeat deadline a fence (or the shim's lease) may
/// take to kill the command on a loaded machine: neli-run's timer, the
/// shim's kill, the detector's lock let go. (3 s was a tight bound on a
/// two-core machine at load 30.) A fence that did not come would not come
/// at all, or only at a hook's --hook-timeout, minutes.
pub const FENCE_ROOM: Duration = Duration::from_secs(15);

/// Timing used by every member in tests. The dev broker accepts any session
/// timeout; real brokers usually refuse less than 6 s, so with
/// NELI_TEST_BROKERS the defaults are scaled up.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub session: Duration,
    pub coordinator_heartbeat: Duration,
    pub heartbeat: Duration,
    pub deadline: Duration,
    pub grace: Duration,
}

impl Timing {
    /// The timing of a session `session` long, with the longest heartbeat
    /// deadline the rules allow (as neli-run derives it: the session less
    /// the coordinator heartbeat and a 500 ms margin): a leader is fenced
    /// only by a heartbeat gap the group would not forgive either. A
    /// shorter deadline fenced leaders in the middle of tests on a loaded
    /// two-core machine (a 1.64 s gap against a 1.5 s deadline), which no
    /// test but the fence tests expects.
    pub fn of_session(
        session: Duration,
        coordinator_heartbeat: Duration,
        heartbeat: Duration,
        grace: Duration,
    ) -> Timing {
        let deadline = session.saturating_sub(coordinator_heartbeat + Duration::from_millis(500));
        Timing { session, coordinator_heartbeat, heartbeat, deadline, grace }
    }

    /// The same timing with another session (and its deadline).
    pub fn with_session(self, session: Duration) -> Timing {
        Timing::of_session(session, self.coordinator_heartbeat, self.heartbeat, self.grace)
    }

    pub fn args(&self) -> Vec<String> {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        vec![
            "--session-timeout".into(),
            ms(self.session),
            "--heartbeat-interval".into(),
            ms(self.heartbeat),
            "--heartbeat-deadline".into(),
            ms(self.deadline),
            "--grace".into(),
            ms(self.grace),
            "-X".into(),
            format!("heartbeat.interval.ms={}", self.coordinator_heartbeat.as_millis()),
        ]
    }

    /// A generous bound for one takeover: a full session expiry, a rebalance
    /// and a heartbeat round trip, with room for a loaded CI machine.
    pub fn takeover(&self) -> Duration {
        self.session * 4 + Duration::from_secs(10)
    }
}

/// A broker for one test.
pub struct Broker {
    pub address: String,
    /// Our own dev broker, if we started one (None for NELI_TEST_BROKERS).
    process: Option<Child>,
    /// Its control socket, if it takes cluster events.
    control: Option<PathBuf>,
    /// Our dev broker's stderr (what says it is ready).
    log: PathBuf,
    pub timing: Timing,
}

impl Broker {
    /// A dev broker of our own, or the external one.
    pub fn start() -> Broker {
        if let Ok(address) = std::env::var("NELI_TEST_BROKERS") {
            let session = std::env::var("NELI_TEST_SESSION_TIMEOUT")
                .ok()
                .and_then(|s| humantime::parse_duration(&s).ok())
                .unwrap_or(Duration::from_secs(6));
            let hb = session / 10;
            return Broker {
                address,
                process: None,
                control: None,
                log: PathBuf::new(),
                timing: Timing::of_session(session, hb, hb, session / 4),
            };
        }
        Broker::dev()
    }

    /// Always our own dev broker (for tests that pause or kill it).
    pub fn dev() -> Broker {
        Broker::dev_at("127.0.0.1")
    }

    /// Our own dev broker listening on `ip` (e.g. a veth address).
    pub fn dev_at(ip: &str) -> Broker {
        Broker::dev_with(ip, &[])
    }

    /// Our own dev broker as a cluster of `n` brokers, taking events on a
    /// control socket ([`Broker::event`]); `address` lists every broker.
    pub fn cluster(n: u16) -> Broker {
        static CONTROLS: AtomicU32 = AtomicU32::new(0);
        let control = std::env::temp_dir().join(format!(
            "neli-test-{}-{}.ctl",
            std::process::id(),
            CONTROLS.fetch_add(1, Ordering::Relaxed)
        ));
        let control_arg = control.to_str().expect("a UTF-8 temp dir").to_string();
        let n_arg = n.to_string();
        let mut broker = Broker::dev_with("127.0.0.1", &["--brokers", &n_arg, "--control", &control_arg]);
        let (host, port) = broker.address.rsplit_once(':').unwrap();
        let port: u16 = port.parse().unwrap();
        broker.address = (0..n).map(|i| format!("{host}:{}", port + i)).collect::<Vec<_>>().join(",");
        broker.control = Some(control);
        broker
    }

    /// Its control socket's path (a dev broker started with [`Broker::cluster`]).
    pub fn control_path(&self) -> &str {
        self.control.as_deref().and_then(Path::to_str).expect("a dev broker started with Broker::cluster")
    }

    /// Makes a cluster event ("stop 2", "leader TOPIC 0 2": see `neli-run
    /// dev-broker event --help`) and returns what the broker did; panics
    /// if it refused.
    pub fn event(&self, event: &str) -> String {
        use std::io::Write;
        use std::os::unix::net::UnixStream;
        let control = self.control.as_ref().expect("a dev broker started with Broker::cluster");
        let mut stream = UnixStream::connect(control).expect("reach the dev broker's control socket");
        writeln!(stream, "{event}").unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let said = answer.trim_end().strip_prefix("ok ").unwrap_or_else(|| panic!("{event}: {answer}"));
        said.to_string()
    }

    /// Our own dev broker on `ip` with extra dev-broker options.
    pub fn dev_with(ip: &str, extra: &[&str]) -> Broker {
        // A port found free can be taken by another test before the broker
        // binds it (another test's broker, given the same free port); then
        // the broker exits and something else answers there. So a broker
        // is up once it says so itself, having bound the port, and not when
        // the port answers: a test that took another's broker for its own
        // would lose it when that test ended (the likely cause of a CI
        // run's member that never connected within 30 s).
        static LOGS: AtomicU32 = AtomicU32::new(0);
        let log = std::env::temp_dir().join(format!(
            "neli-test-broker-{}-{}.log",
            std::process::id(),
            LOGS.fetch_add(1, Ordering::Relaxed)
        ));
        let (address, process) = (0..5)
            .find_map(|_| {
                let port = TcpListener::bind((ip, 0)).unwrap().local_addr().unwrap().port();
                let address = format!("{ip}:{port}");
                let mut process = die_with_runner(&mut Command::new(bin()))
                    .args(["dev-broker", "--listen", &address])
                    .args(extra)
                    .stdout(Stdio::null())
                    .stderr(fs::File::create(&log).expect("the dev broker's log"))
                    .spawn()
                    .expect("start the dev broker");
                let mut exited = false;
                wait_until(LONG, "the dev broker says it is ready, or exits", || {
                    exited = process.try_wait().unwrap().is_some();
                    exited || fs::read_to_string(&log).is_ok_and(|l| l.contains("dev broker ready"))
                });
                (!exited).then_some((address, process))
            })
            .expect("a dev broker on a free port");
        Broker {
            address,
            process: Some(process),
            control: None,
            log,
            // Short, for fast tests (a crash is noticed within 3 s).
            timing: Timing::of_session(
                Duration::from_millis(3000),
                Duration::from_millis(300),
                Duration::from_millis(250),
                Duration::from_millis(1000),
            ),
        }
    }

    /// Our dev broker's process id.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("only our own dev broker").id()
    }

    /// Whether our dev broker still runs.
    pub fn running(&mut self) -> bool {
        let child = self.process.as_mut().expect("only our own dev broker");
        child.try_wait().unwrap().is_none()
    }

    /// Sends a signal to our dev broker.
    pub fn signal(&self, sig: Signal) {
        let child = self.process.as_ref().expect("only our own dev broker can be signalled");
        kill(Pid::from_raw(child.id() as i32), sig).expect("signal the dev broker");
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(child) = self.process.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(control) = &self.control {
            let _ = fs::remove_file(control);
        }
        let _ = fs::remove_file(&self.log);
    }
}

static GROUPS: AtomicU32 = AtomicU32::new(0);

/// A group of members sharing a broker, a group name and an overlap detector.
pub struct Group {
    pub broker: Broker,
    pub name: String,
    pub dir: tempdir::Dir,
    /// The overlap detector, in `dir` (see `neli_proof::detector`).
    pub detector: Detector,
}

impl Group {
    pub fn new(test: &str) -> Group {
        Group::on(Broker::start(), test)
    }

    pub fn on(broker: Broker, test: &str) -> Group {
        let n = GROUPS.fetch_add(1, Ordering::Relaxed);
        let name = format!("t-{test}-{}-{n}", std::process::id());
        let dir = tempdir::Dir::new(&format!("t-{test}-{n}"));
        let detector = Detector::new(dir.path().to_path_buf()).expect("the detector's work dir");
        Group { broker, name, dir, detector }
    }

    /// A member running `command` under the overlap detector.
    pub fn member(&self, name: &str, extra: &[&str], command: &[&str]) -> Member {
        self.member_in(None, name, extra, command)
    }

    /// A guarded member started behind `prefix` (e.g. `ip netns exec NS`).
    pub fn member_in(&self, prefix: Option<Vec<String>>, name: &str, extra: &[&str], command: &[&str]) -> Member {
        self.spawn(prefix, name, extra, &self.guarded(command), None)
    }

    /// A guarded member whose stderr (neli-run's log, the shim's reports
    /// and the command's stderr) is `stderr` instead of the log file.
    pub fn member_with_stderr(&self, name: &str, extra: &[&str], command: &[&str], stderr: Stdio) -> Member {
        self.spawn(None, name, extra, &self.guarded(command), Some(stderr))
    }

    /// A member running `command` as it is (for tests where the detector's
    /// own processes would get in the way, e.g. signals sent to the group).
    pub fn member_unguarded(&self, name: &str, extra: &[&str], command: &[&str]) -> Member {
        self.spawn(None, name, extra, command, None)
    }

    /// `member_unguarded` behind `prefix` (e.g. a shell that hands
    /// neli-run a descriptor of its own first).
    pub fn member_unguarded_in(&self, prefix: Vec<String>, name: &str, extra: &[&str], command: &[&str]) -> Member {
        self.spawn(Some(prefix), name, extra, command, None)
    }

    /// A guarded member given no timing flags but `extra`'s: the timing
    /// neli-run derives (or defaults to).
    pub fn member_untimed(&self, name: &str, extra: &[&str], command: &[&str]) -> Member {
        let argv = ["-b", &self.broker.address, "-g", &self.name, "--name", name].map(String::from);
        let argv = argv.into_iter().chain(extra.iter().map(|s| s.to_string())).chain(["--".to_string()]);
        let argv: Vec<String> = argv.chain(self.guarded(command)).collect();
        Member::spawn(name, &[], &argv, &self.dir.path().join(format!("{name}.log")), None)
    }

    /// `member_untimed` behind `prefix` (e.g. `ip netns exec NS`): the
    /// product's own timing, in a network namespace.
    pub fn member_untimed_in(&self, prefix: Vec<String>, name: &str, command: &[&str]) -> Member {
        let argv = ["-b", &self.broker.address, "-g", &self.name, "--name", name].map(String::from);
        let argv: Vec<String> = argv.into_iter().chain(["--".to_string()]).chain(self.guarded(command)).collect();
        Member::spawn(name, &prefix, &argv, &self.dir.path().join(format!("{name}.log")), None)
    }

    fn guarded(&self, command: &[&str]) -> Vec<String> {
        self.detector.wrap().into_iter().chain(command.iter().map(|s| s.to_string())).collect()
    }

    fn spawn(
        &self,
        prefix: Option<Vec<String>>,
        name: &str,
        extra: &[&str],
        command: &[impl AsRef<str>],
        stderr: Option<Stdio>,
    ) -> Member {
        let mut argv: Vec<String> = vec!["-b".into(), self.broker.address.clone(), "-g".into(), self.name.clone()];
        argv.extend(["--name".into(), name.into()]);
        argv.extend(self.broker.timing.args());
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv.push("--".into());
        argv.extend(command.iter().map(|s| s.as_ref().to_string()));
        Member::spawn(name, &prefix.unwrap_or_default(), &argv, &self.dir.path().join(format!("{name}.log")), stderr)
    }

    /// Writes `value` to partition 0 of the group's topic, as another
    /// writer would (a forged or foreign record), and waits until it is on it.
    pub fn produce(&self, value: &[u8]) {
        use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
        let producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext> =
            rdkafka::ClientConfig::new().set("bootstrap.servers", &self.broker.address).create().unwrap();
        let topic = format!("{}.neli", self.name);
        producer.send(BaseRecord::<(), _>::to(&topic).partition(0).payload(value)).unwrap();
        producer.flush(Duration::from_secs(20)).unwrap();
    }

    /// Names and tokens of every child start, in order.
    pub fn starts(&self) -> Vec<(String, i64)> {
        self.detector.starts()
    }

    /// Guarded members with these names, each running `sleep 1000`.
    pub fn sleepers(&self, names: &[&str]) -> Vec<Member> {
        names.iter().map(|n| self.member(n, &[], &["sleep", "1000"])).collect()
    }

    /// Which of `members` started the latest child. The wrapper records a
    /// start just after taking the lock, so a caller that saw the lock held
    /// may be a moment early: wait for the record.
    pub fn leader_among(&self, members: &[Member]) -> usize {
        wait_until(Duration::from_secs(30), "the child's start is recorded", || !self.starts().is_empty());
        let (name, _) = self.starts().last().cloned().expect("someone started");
        members.iter().position(|m| m.name == name).expect("a member of ours leads")
    }

    /// Overlaps the detector saw (must stay empty).
    pub fn overlaps(&self) -> Vec<String> {
        self.detector.overlaps()
    }

    /// Whether some child (or a descendant of one) holds the lock now, and
    /// a start has been recorded: the wrapper records it just after taking
    /// the lock, and a test that stops the child at once (a SIGTERM the
    /// instant it runs) would otherwise find no start to check.
    pub fn lock_held(&self) -> bool {
        self.detector.lock_held() && !self.starts().is_empty()
    }

    /// Asserts no overlap happened. A missing overlap file means none, so
    /// it also asserts that the detector ran at all (some child started).
    pub fn assert_no_overlap(&self) {
        assert!(!self.starts().is_empty(), "no child ever started under the detector: nothing was checked");
        assert_eq!(self.overlaps(), Vec::<String>::new(), "two children ran at once");
    }

    /// An orphan would hold the lock for good: the bound is for a loaded
    /// machine's last kills and exits.
    pub fn assert_no_orphan(&self) {
        wait_until(Duration::from_secs(30), "no process holds the lock after every member exited", || {
            !self.lock_held()
        });
    }
}

/// The line a member logs once it has joined the group as a standby.
pub const STANDBY_JOINED: &str = "standby: in the group";

/// One neli-run process.
pub struct Member {
    pub name: String,
    child: Child,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Member {
    /// Starts neli-run with `argv`, behind `prefix` (e.g. `ip netns exec`,
    /// which execs, so the pid is still neli-run's).
    /// stderr goes to `stderr` if given, else to the log file too.
    pub fn spawn(name: &str, prefix: &[String], argv: &[String], log: &Path, stderr: Option<Stdio>) -> Member {
        let file = fs::File::create(log).unwrap();
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        // A test killed mid-way (a timeout, a mutation run) leaves nothing
        // running behind it.
        let child = die_with_runner(&mut command)
            .args(argv)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(stderr.unwrap_or_else(|| file.into()))
            .spawn()
            .expect("start neli-run");
        Member { name: name.to_string(), child, log: log.to_path_buf(), status: None }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// The first child of the process we started (neli-run, when a prefix
    /// such as `unshare --fork` runs it as a child).
    pub fn forked_pid(&self) -> Option<Pid> {
        let children = fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.child.id())).ok()?;
        Some(Pid::from_raw(children.split_whitespace().next()?.parse().ok()?))
    }

    pub fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).expect("signal neli-run");
    }

    /// Whether it has joined the group as a standby: its log says so in
    /// this line, not merely "standby" (the hot list's "a cold standby"
    /// comes as soon as it reads partition 0, before its join).
    pub fn joined_as_standby(&self) -> bool {
        self.log().contains(STANDBY_JOINED)
    }

    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Waits for the process to exit and returns its status.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let mut status = self.status;
        wait_until(within, &format!("{} exits", self.name), || {
            if status.is_none() {
                status = self.child.try_wait().unwrap();
            }
            status.is_some()
        });
        self.status = status;
        status.unwrap()
    }

    pub fn exited(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().unwrap();
        }
        self.status.is_some()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // A failing test may stop anywhere: what neli-run started (a hook
        // that hangs, the shim and its command) goes with it. A passing one
        // drops a member as kill -9 would, and may check what follows.
        let below = match std::thread::panicking() && !self.exited() {
            true => descendants(self.child.id() as i32),
            false => Vec::new(),
        };
        let exited = match self.exited() {
            true => format!(", which exited: {}", self.status.expect("exited")),
            false => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                String::new()
            }
        };
        kill_all(&below);
        if std::thread::panicking() {
            eprintln!("---- log of {}{exited} ----\n{}", self.name, self.log());
        }
    }
}

/// A temporary directory removed on drop (kept when the test fails).
pub mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        /// A directory for `name`, of this test process only: two test runs
        /// at once (two checkouts, or a mutation run beside a test run) must
        /// not remove each other's files.
        pub fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!("neli-run-tests/{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}

/// `status --json`'s standbys, as (name, priority).
pub fn standbys(g: &Group) -> Vec<(String, u64)> {
    let (_, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    json["standbys"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|s| (s["name"].as_str().unwrap_or("?").to_string(), s["priority"].as_u64().unwrap_or(999)))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs neli-run to completion with `args` (for command-line checks).
pub fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(bin()).args(args).stdin(Stdio::null()).output().expect("run neli-run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// A test that cannot run on this machine (a tool is missing, or a
/// permission) passes without having run, unless NELI_NO_SKIP is set (CI
/// sets it): then a skip is a failure, so that no test passes there without
/// having run. cargo test counts a skip as passed, so each is listed again
/// after its summary (`say_skipped`): a newcomer sees what did not run and
/// what to install.
pub fn skip(why: &str) {
    assert!(std::env::var_os("NELI_NO_SKIP").is_none(), "cannot run here (NELI_NO_SKIP is set): {why}");
    eprintln!("SKIPPED: {why}");
    // libtest names each test's thread after the test (not with one thread).
    let test = std::thread::current().name().filter(|n| *n != "main").unwrap_or("a test").to_string();
    let mut skipped = SKIPPED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if skipped.is_empty() {
        // SAFETY: registers a plain function, which touches only a static
        // and stderr, to run when the test binary exits.
        unsafe { libc::atexit(say_skipped) };
    }
    skipped.push(format!("{test}: {why}"));
}

/// The tests that skipped, each with why (see `skip`).
static SKIPPED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Lists the skipped tests below cargo test's summary, which counted them
/// as passed. Written to stderr as is: libtest captures only print! and
/// eprint!, and has exited its run by now.
extern "C" fn say_skipped() {
    use std::io::Write;
    let skipped = SKIPPED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut text = format!(
        "\nSKIPPED: {} of the tests counted as passed above did not run here, each for want of what it names:\n",
        skipped.len()
    );
    for line in skipped.iter() {
        text += &format!("  {line}\n");
    }
    text += "Install what they name (CONTRIBUTING.md lists it all), or set NELI_NO_SKIP=1 to make a skip fail.\n";
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// A network namespace for a test, or None (see `skip`) when this machine
/// cannot make one.
pub fn netns() -> Option<NetNs> {
    match NetNs::create() {
        Ok(ns) => Some(ns),
        Err(why) => {
            skip(&why);
            None
        }
    }
}
