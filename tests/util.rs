//! Test harness: real `neli-run` processes against a real Kafka-protocol
//! broker over TCP, with an overlap detector that does not trust neli-run.
//!
//! The broker is a fresh `neli-run dev-broker` per test, unless
//! `NELI_TEST_BROKERS` names another (tansu in CI, or any Kafka); then each
//! test uses a group and topic of its own.

use std::fs;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_neli-run")
}

/// The overlap-detecting wrapper (see the script's header).
pub fn guarded() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/guarded.sh")
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
                timing: Timing {
                    session,
                    coordinator_heartbeat: hb,
                    heartbeat: hb,
                    deadline: session / 2,
                    grace: session / 4,
                },
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

    /// Our own dev broker on `ip` with extra dev-broker options.
    pub fn dev_with(ip: &str, extra: &[&str]) -> Broker {
        // A port found free can be taken by another test before the broker
        // binds it; then the broker exits and something else answers there.
        // So a broker counts as up only while its own process lives.
        let (address, process) = (0..5)
            .find_map(|_| {
                let port = TcpListener::bind((ip, 0)).unwrap().local_addr().unwrap().port();
                let address = format!("{ip}:{port}");
                let mut process = Command::new(bin())
                    .args(["dev-broker", "--listen", &address])
                    .args(extra)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start the dev broker");
                let mut exited = false;
                wait_until(Duration::from_secs(20), "the dev broker accepts connections or exits", || {
                    exited = process.try_wait().unwrap().is_some();
                    exited || TcpStream::connect(&address).is_ok()
                });
                (!exited && process.try_wait().unwrap().is_none()).then_some((address, process))
            })
            .expect("a dev broker on a free port");
        Broker {
            address,
            process: Some(process),
            // Short, for fast tests, yet with a deadline that a loaded
            // two-core CI machine running many tests at once still meets.
            timing: Timing {
                session: Duration::from_millis(3000),
                coordinator_heartbeat: Duration::from_millis(300),
                heartbeat: Duration::from_millis(250),
                deadline: Duration::from_millis(1500),
                grace: Duration::from_millis(1000),
            },
        }
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
    }
}

static GROUPS: AtomicU32 = AtomicU32::new(0);

/// A group of members sharing a broker, a group name and an overlap detector.
pub struct Group {
    pub broker: Broker,
    pub name: String,
    pub dir: tempdir::Dir,
}

impl Group {
    pub fn new(test: &str) -> Group {
        Group::on(Broker::start(), test)
    }

    pub fn on(broker: Broker, test: &str) -> Group {
        let n = GROUPS.fetch_add(1, Ordering::Relaxed);
        let name = format!("t-{test}-{}-{n}", std::process::id());
        let dir = tempdir::Dir::new(&name);
        Group { broker, name, dir }
    }

    /// A member running `command` under the overlap detector.
    pub fn member(&self, name: &str, extra: &[&str], command: &[&str]) -> Member {
        self.member_in(None, name, extra, command)
    }

    /// A guarded member started behind `prefix` (e.g. `ip netns exec NS`).
    pub fn member_in(&self, prefix: Option<Vec<String>>, name: &str, extra: &[&str], command: &[&str]) -> Member {
        let dir = self.dir.path().display().to_string();
        let guarded = guarded().display().to_string();
        let mut wrapped = vec![guarded.as_str(), dir.as_str()];
        wrapped.extend_from_slice(command);
        self.spawn(prefix, name, extra, &wrapped)
    }

    /// A member running `command` as it is (for tests where the detector's
    /// own processes would get in the way, e.g. signals sent to the group).
    pub fn member_unguarded(&self, name: &str, extra: &[&str], command: &[&str]) -> Member {
        self.spawn(None, name, extra, command)
    }

    fn spawn(&self, prefix: Option<Vec<String>>, name: &str, extra: &[&str], command: &[&str]) -> Member {
        let mut argv: Vec<String> = vec!["-b".into(), self.broker.address.clone(), "-g".into(), self.name.clone()];
        argv.extend(["--name".into(), name.into()]);
        argv.extend(self.broker.timing.args());
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv.push("--".into());
        argv.extend(command.iter().map(|s| s.to_string()));
        Member::spawn(name, &prefix.unwrap_or_default(), &argv, &self.dir.path().join(format!("{name}.log")))
    }

    /// Names and tokens of every child start, in order.
    pub fn starts(&self) -> Vec<(String, i64)> {
        read_lines(&self.dir.path().join("starts"))
            .iter()
            .filter_map(|l| {
                let (name, token) = l.split_once(' ')?;
                Some((name.to_string(), token.parse().ok()?))
            })
            .collect()
    }

    /// Guarded members with these names, each running `sleep 1000`.
    pub fn sleepers(&self, names: &[&str]) -> Vec<Member> {
        names.iter().map(|n| self.member(n, &[], &["sleep", "1000"])).collect()
    }

    /// Which of `members` started the latest child.
    pub fn leader_among(&self, members: &[Member]) -> usize {
        let (name, _) = self.starts().last().cloned().expect("someone started");
        members.iter().position(|m| m.name == name).expect("a member of ours leads")
    }

    /// Overlaps the detector saw (must stay empty).
    pub fn overlaps(&self) -> Vec<String> {
        read_lines(&self.dir.path().join("overlaps"))
    }

    /// Whether some child (or a descendant of one) holds the lock now.
    pub fn lock_held(&self) -> bool {
        let lock = self.dir.path().join("lock");
        if !lock.exists() {
            return false;
        }
        !Command::new("flock").args(["-n", "-E", "99"]).arg(&lock).arg("true").status().unwrap().success()
    }

    /// Asserts no overlap happened and, once every member has exited, that
    /// no orphan holds the lock.
    pub fn assert_no_overlap(&self) {
        assert_eq!(self.overlaps(), Vec::<String>::new(), "two children ran at once");
    }

    pub fn assert_no_orphan(&self) {
        wait_until(Duration::from_secs(5), "no process holds the lock after every member exited", || !self.lock_held());
    }
}

fn read_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

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
    pub fn spawn(name: &str, prefix: &[String], argv: &[String], log: &Path) -> Member {
        let file = fs::File::create(log).unwrap();
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        let child = command
            .args(argv)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
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
        if !self.exited() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("---- log of {} ----\n{}", self.name, self.log());
        }
    }
}

/// A temporary directory removed on drop (kept when the test fails).
pub mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!("neli-run-tests/{name}"));
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

/// Runs neli-run to completion with `args` (for command-line checks).
pub fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(bin()).args(args).stdin(Stdio::null()).output().expect("run neli-run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

static NETNS: AtomicU32 = AtomicU32::new(0);

/// A test host: a network namespace joined to this one by a veth pair, whose
/// link we can cut by dropping its packets (sockets stay open, as in a real
/// partition). Needs root, `ip` and `nft`.
pub struct NetNs {
    name: String,
    host_if: String,
    /// The host side's address: where a broker for the namespace listens.
    pub host_ip: String,
}

impl NetNs {
    /// The namespace, or None with a note when this machine cannot make one
    /// (unless NELI_REQUIRE_NETNS is set, as in CI: then that is a failure).
    pub fn create() -> Option<NetNs> {
        let n = (std::process::id() % 50) * 5 + NETNS.fetch_add(1, Ordering::Relaxed) % 5;
        let ns = NetNs { name: format!("neli-t{n}"), host_if: format!("nrh{n}"), host_ip: format!("10.231.{n}.1") };
        let peer = format!("nrn{n}");
        let _ = Command::new("ip").args(["netns", "del", &ns.name]).stderr(Stdio::null()).status();
        let _ = Command::new("ip").args(["link", "del", &ns.host_if]).stderr(Stdio::null()).status();
        let steps: Vec<Vec<String>> = vec![
            vec!["netns".into(), "add".into(), ns.name.clone()],
            vec![
                "link".into(),
                "add".into(),
                ns.host_if.clone(),
                "type".into(),
                "veth".into(),
                "peer".into(),
                "name".into(),
                peer.clone(),
            ],
            vec!["link".into(), "set".into(), peer.clone(), "netns".into(), ns.name.clone()],
            vec!["addr".into(), "add".into(), format!("{}/24", ns.host_ip), "dev".into(), ns.host_if.clone()],
            vec!["link".into(), "set".into(), ns.host_if.clone(), "up".into()],
            vec![
                "-n".into(),
                ns.name.clone(),
                "addr".into(),
                "add".into(),
                format!("10.231.{n}.2/24"),
                "dev".into(),
                peer.clone(),
            ],
            vec!["-n".into(), ns.name.clone(), "link".into(), "set".into(), peer, "up".into()],
            vec!["-n".into(), ns.name.clone(), "link".into(), "set".into(), "lo".into(), "up".into()],
        ];
        for step in steps {
            let ok = Command::new("ip").args(&step).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
            if !ok {
                let why = format!(
                    "cannot create a network namespace (`ip {}` failed; needs root and iproute2)",
                    step.join(" ")
                );
                assert!(std::env::var_os("NELI_REQUIRE_NETNS").is_none(), "{why}");
                eprintln!("SKIPPED: {why}");
                return None;
            }
        }
        let nft = Command::new("nft").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
        if !nft {
            assert!(std::env::var_os("NELI_REQUIRE_NETNS").is_none(), "nft (nftables) is not installed");
            eprintln!("SKIPPED: nft (nftables) is not installed");
            return None;
        }
        Some(ns)
    }

    /// Runs a command inside the namespace (`ip netns exec` execs it).
    pub fn exec_prefix(&self) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.name.clone()]
    }

    fn table(&self) -> String {
        format!("neli_cut_{}", self.host_if)
    }

    /// Drops every packet between the namespace and the host, both ways.
    pub fn cut(&self) {
        let t = self.table();
        let rules = format!(
            "table inet {t} {{\n chain input {{ type filter hook input priority -300; iifname \"{i}\" drop; }}\n \
             chain output {{ type filter hook output priority -300; oifname \"{i}\" drop; }}\n}}\n",
            i = self.host_if
        );
        let mut nft = Command::new("nft").args(["-f", "-"]).stdin(Stdio::piped()).spawn().expect("run nft");
        use std::io::Write;
        nft.stdin.take().unwrap().write_all(rules.as_bytes()).unwrap();
        assert!(nft.wait().unwrap().success(), "nft could not install the cut");
    }

    /// Lets packets through again.
    pub fn heal(&self) {
        let _ = Command::new("nft").args(["delete", "table", "inet", &self.table()]).stderr(Stdio::null()).status();
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        self.heal();
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
        let _ = Command::new("ip").args(["link", "del", &self.host_if]).stderr(Stdio::null()).status();
    }
}
