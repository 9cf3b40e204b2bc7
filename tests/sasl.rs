//! SASL against a broker that requires it: `neli-run dev-broker
//! --sasl-user`, whose forwarder implements Kafka's SASL exchange (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512). The client side is librdkafka's own, as
//! neli-run configures it from -X and from a Java properties file. (Neither
//! broker here logs in otherwise: the mock has no SASL, and tansu 0.6 keeps
//! no users in its memory storage.)

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{run, wait_until, Broker, Group};

fn sasl_group(test: &str) -> Group {
    Group::on(Broker::dev_with("127.0.0.1", &["--sasl-user", "alice:s3cret", "--sasl-user", "bob:other"]), test)
}

fn sasl(mechanism: &str, password: &str) -> Vec<String> {
    ["security.protocol=SASL_PLAINTEXT", &format!("sasl.mechanism={mechanism}"), "sasl.username=alice"]
        .into_iter()
        .map(String::from)
        .chain([format!("sasl.password={password}")])
        .flat_map(|p| ["-X".to_string(), p])
        .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// One member per mechanism in one group (the last one configured from a
/// Java client properties file): each logs in and joins, one leads, and
/// after a graceful stop another takes over.
#[test]
fn each_mechanism_logs_in_and_the_group_elects_and_hands_over() {
    let g = sasl_group("sasl");
    let props = g.dir.path().join("client.properties");
    std::fs::write(
        &props,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=\
         org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"s3cret\";\n",
    )
    .unwrap();
    let (plain, sha256) = (sasl("PLAIN", "s3cret"), sasl("SCRAM-SHA-256", "s3cret"));
    let members = [
        g.member("plain", &strs(&plain), &["sleep", "1000"]),
        g.member("sha256", &strs(&sha256), &["sleep", "1000"]),
        g.member("sha512", &["--kafka-config", &props.display().to_string()], &["sleep", "1000"]),
    ];
    let t = g.broker.timing;
    let joined = |m: &crate::util::Member| m.joined_as_standby() || m.log().contains("child started");
    wait_until(t.takeover(), "every member has logged in and joined", || members.iter().all(joined));
    wait_until(t.takeover(), "one leads", || g.lock_held());
    let leader = g.leader_among(&members);
    members[leader].signal(Signal::SIGTERM);
    wait_until(t.takeover(), "another member takes over", || g.starts().len() == 2 && g.lock_held());
    assert_ne!(g.starts()[1].0, members[leader].name);
    g.assert_no_overlap();
}

#[test]
fn a_wrong_password_exits_77_naming_what_to_check_and_never_the_password() {
    let g = sasl_group("sasl-wrong");
    let wrong = sasl("SCRAM-SHA-256", "n0pe-p4ss");
    let mut m = g.member_unguarded("m", &strs(&wrong), &["true"]);
    let status = m.wait_exit(Duration::from_secs(30));
    let log = m.log();
    assert_eq!(status.code(), Some(77), "{log}");
    assert!(log.contains("SASL authentication error"), "names the failure: {log}");
    assert!(log.contains("sasl.username") && log.contains("sasl.mechanism"), "names what to check: {log}");
    assert!(!log.contains("n0pe-p4ss"), "the password reached the log: {log}");
    assert!(g.starts().is_empty());
}

#[test]
fn dev_broker_refuses_a_sasl_user_without_a_password() {
    let (code, out) = run(&["dev-broker", "--listen", "127.0.0.1:0", "--sasl-user", "alice"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("USER:PASSWORD"), "{out}");
}

/// `status` and `yield` with a wrong password say so and exit 77, as the
/// run mode does; never "all brokers down", which is 69 (unreachable).
#[test]
fn status_and_yield_with_a_wrong_password_exit_77_saying_authentication_failed() {
    let g = sasl_group("sasl-status");
    let wrong = sasl("SCRAM-SHA-256", "n0pe-p4ss");
    for sub in ["status", "yield", "pause", "resume"] {
        let mut args = vec![sub, "-b", &g.broker.address, "-g", &g.name];
        args.extend(strs(&wrong));
        let (code, out) = run(&args);
        assert_eq!(code, 77, "{sub}: {out}");
        assert!(out.contains("authentication failed"), "{sub} names the failure: {out}");
        assert!(out.contains("sasl.username"), "{sub} names what to check: {out}");
        assert!(!out.contains("n0pe-p4ss") && !out.contains("AllBrokersDown"), "{sub}: {out}");
        // Besides the warning that -X shows the password to every local
        // user (tests/cli.rs has it).
        let said = out.trim().lines().filter(|l| !l.contains("every local user can read"));
        assert_eq!(said.count(), 1, "{sub} says it in one line: {out}");
    }
    // The right password reads the group (no member ran, so no topic): 1,
    // not an error.
    let right = sasl("PLAIN", "s3cret");
    let mut args = vec!["status", "-b", &g.broker.address, "-g", &g.name];
    args.extend(strs(&right));
    let (code, out) = run(&args);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no member of group") && out.contains("has run yet"), "{out}");
}

/// A dev broker of this test's own, with its pid and log (the shared
/// helper keeps neither).
struct OwnBroker {
    child: std::process::Child,
    address: String,
    log: std::path::PathBuf,
}

impl OwnBroker {
    fn start(test: &str, extra: &[&str]) -> OwnBroker {
        let log = std::env::temp_dir().join(format!("neli-run-{test}-{}.log", std::process::id()));
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let address = format!("127.0.0.1:{port}");
            let mut child = std::process::Command::new(crate::util::bin())
                .args(["dev-broker", "--listen", &address])
                .args(extra)
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            let mut exited = false;
            wait_until(Duration::from_secs(20), "the dev broker listens or exits", || {
                exited = child.try_wait().unwrap().is_some();
                exited || std::fs::read_to_string(&log).unwrap_or_default().contains("dev broker ready")
            });
            if !exited {
                return OwnBroker { child, address, log };
            }
        }
        panic!("no dev broker started");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The TCP ports the broker process listens on (from /proc).
    fn listening_ports(&self) -> Vec<u16> {
        let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(String::from))
            .collect();
        let mut ports = Vec::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                // local_address is HEXIP:HEXPORT, st 0A is LISTEN, inode is field 9.
                if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                    let port = f[1].rsplit(':').next().unwrap();
                    ports.push(u16::from_str_radix(port, 16).unwrap());
                }
            }
        }
        ports.sort();
        ports
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- dev broker log ----\n{}", self.log());
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The mock behind the forwarder used to listen on a second, random
/// 127.0.0.1 port that answered without a login (S14): the only TCP port
/// now is the front one, also after the broker went down and up again.
#[test]
fn dev_broker_with_sasl_listens_on_its_front_port_only() {
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    let broker = OwnBroker::start("sasl-one-port", &["--sasl-user", "alice:s3cret"]);
    let front: u16 = broker.address.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(broker.listening_ports(), vec![front], "{}", broker.log());
    let pid = Pid::from_raw(broker.child.id() as i32);
    kill(pid, Signal::SIGUSR1).unwrap();
    wait_until(Duration::from_secs(10), "the broker is down", || broker.log().contains("broker down"));
    kill(pid, Signal::SIGUSR2).unwrap();
    wait_until(Duration::from_secs(10), "the broker is up", || broker.log().contains("broker up again"));
    assert_eq!(broker.listening_ports(), vec![front], "{}", broker.log());
    // And it still serves a client that logs in.
    let right = sasl("PLAIN", "s3cret");
    let mut args = vec!["status", "-b", &broker.address, "-g", "one-port"];
    args.extend(strs(&right));
    let (code, out) = run(&args);
    assert_eq!(code, 1, "served, no leader: {out}\n{}", broker.log());
}

/// A client announcing a frame larger than Kafka takes (0xFFFFFFF0 bytes
/// before any login) is cut off with a log line, before anything is
/// reserved for it; the broker keeps serving others.
#[test]
fn dev_broker_cuts_off_a_client_announcing_an_oversized_frame() {
    use std::io::{Read, Write};
    for (extra, len) in [(&[][..], 104_857_601u32), (&["--sasl-user", "alice:s3cret"][..], 0xFFFF_FFF0)] {
        let broker = OwnBroker::start("frame-cap", extra);
        let mut raw = std::net::TcpStream::connect(&broker.address).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        raw.write_all(&len.to_be_bytes()).unwrap();
        let mut buf = [0u8; 16];
        let n = raw.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "the connection is closed without an answer");
        wait_until(Duration::from_secs(10), "the broker logs the cut", || {
            broker.log().contains(&format!("announced a frame of {len} bytes"))
        });
        let mut args = vec!["status", "-b", &broker.address, "-g", "frame-cap"];
        let right = sasl("PLAIN", "s3cret");
        if !extra.is_empty() {
            args.extend(strs(&right));
        }
        let (code, out) = run(&args);
        assert_eq!(code, 1, "the broker still serves others: {out}\n{}", broker.log());
    }
}
