//! Brokers started by the harness on a free port: neli-run's dev broker,
//! tansu (a separate Kafka-compatible broker, `cargo install tansu`), and
//! etcd for the side-by-side comparison. Each is killed on drop.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A broker process of ours.
pub struct Broker {
    /// What clients connect to (HOST:PORT, or every broker's, comma-separated).
    pub address: String,
    process: Child,
    /// A dev broker's control socket, if it was given one: events on a
    /// cluster, and the requests it counted ([`Broker::requests`]).
    control: Option<PathBuf>,
    /// Whether it is a dev broker cluster (`--brokers N`).
    cluster: bool,
}

impl Broker {
    /// `neli-run dev-broker` listening on `listen_ip`, advertising
    /// `advertise_ip` (the same, unless clients sit in other namespaces).
    /// `coordinator` names who answers its group APIs: `kafka` (Kafka's
    /// timing) or `mock` (librdkafka's). With `control`, its control socket
    /// there: what it counted ([`Broker::requests`]).
    pub fn dev(
        neli: &Path,
        coordinator: &str,
        listen_ip: &str,
        advertise_ip: &str,
        log: &Path,
        control: Option<&Path>,
    ) -> Result<Broker, String> {
        let mut broker = Broker::start("dev broker", listen_ip, advertise_ip, log, |listen, advertise| {
            let mut c = Command::new(neli);
            c.args(["dev-broker", "-v", "--listen", listen, "--advertise", advertise]);
            c.args(["--group-coordinator", coordinator]);
            if let Some(control) = control {
                c.arg("--control").arg(control);
            }
            c
        })?;
        broker.control = control.map(Path::to_path_buf);
        Ok(broker)
    }

    /// `neli-run dev-broker --brokers n` with Kafka's group timing: a
    /// cluster whose events ([`Broker::event`]) go through a control socket
    /// at `control`. `address` lists every broker.
    pub fn dev_cluster(
        neli: &Path,
        n: u16,
        listen_ip: &str,
        advertise_ip: &str,
        log: &Path,
        control: &Path,
    ) -> Result<Broker, String> {
        let mut broker = Broker::start("dev broker", listen_ip, advertise_ip, log, |listen, advertise| {
            let mut c = Command::new(neli);
            c.args(["dev-broker", "-v", "--listen", listen, "--advertise", advertise]);
            c.args(["--brokers", &n.to_string()]).arg("--control").arg(control);
            c
        })?;
        let (host, port) = broker.address.rsplit_once(':').expect("HOST:PORT");
        let port: u16 = port.parse().expect("a port");
        broker.address = (0..n).map(|i| format!("{host}:{}", port + i)).collect::<Vec<_>>().join(",");
        broker.control = Some(control.to_path_buf());
        broker.cluster = true;
        Ok(broker)
    }

    /// Makes one cluster event ("stop 2", "leader TOPIC 0 3", "describe":
    /// `neli-run dev-broker event --help`) on a [`Broker::dev_cluster`];
    /// what the broker did, or why it refused. A broker that does not answer
    /// within `EVENT_WAIT` (frozen by a soak's broker-pause fault: seen
    /// hanging a soak for good) refused.
    pub fn event(&self, event: &str) -> Result<String, String> {
        use std::io::{Read, Write};
        const EVENT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
        let control = self.control.as_ref().ok_or("not a dev broker with a control socket")?;
        let mut stream = std::os::unix::net::UnixStream::connect(control).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(EVENT_WAIT)).map_err(|e| e.to_string())?;
        writeln!(stream, "{event}").map_err(|e| e.to_string())?;
        stream.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                format!("{event}: no answer within {EVENT_WAIT:?} (the broker frozen?)")
            }
            _ => e.to_string(),
        })?;
        let answer = answer.trim_end();
        if answer == "ok" {
            return Ok(String::new());
        }
        answer.strip_prefix("ok ").map(str::to_string).ok_or_else(|| format!("{event}: {answer}"))
    }

    /// The requests a dev broker with a control socket has received since
    /// it started, by client.id and API: what its clients cost it, from its
    /// side (`neli-run dev-broker event --help`, `requests`). Err for any
    /// other broker.
    pub fn requests(&self) -> Result<Requests, String> {
        let said = self.event("requests")?;
        let mut counts = Requests::new();
        for line in said.lines() {
            // CLIENT API COUNT, CLIENT having no whitespace.
            let (rest, n) = line.rsplit_once(' ').ok_or_else(|| format!("requests: {line:?}"))?;
            let (client, api) = rest.rsplit_once(' ').ok_or_else(|| format!("requests: {line:?}"))?;
            let n = n.parse().map_err(|_| format!("requests: {line:?}"))?;
            counts.insert((client.to_string(), api.to_string()), n);
        }
        Ok(counts)
    }

    /// Whether it is a dev broker cluster that takes events.
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// tansu with in-memory storage (found on PATH or in ~/.cargo/bin).
    pub fn tansu(listen_ip: &str, advertise_ip: &str, log: &Path) -> Result<Broker, String> {
        Broker::tansu_on("memory://tansu/", "dynostore", listen_ip, advertise_ip, log)
    }

    /// tansu storing in SQLite (`tansu.db` beside `log`): its memory
    /// storage lists every batch of a partition on each fetch (tansu 0.6.0,
    /// dynostore.rs `fetch`) and deletes none, so a soak's group slows it
    /// down by the hour; SQLite fetches by offset and applies retention.
    pub fn tansu_sqlite(listen_ip: &str, advertise_ip: &str, log: &Path) -> Result<Broker, String> {
        Broker::tansu_on("sqlite://tansu.db", "libsql", listen_ip, advertise_ip, log)
    }

    /// tansu storing at `storage`, which needs its build's `feature`.
    fn tansu_on(
        storage: &str,
        feature: &str,
        listen_ip: &str,
        advertise_ip: &str,
        log: &Path,
    ) -> Result<Broker, String> {
        let install = format!("cargo install tansu --version 0.6.0 --features {feature}");
        let tansu = find("tansu").ok_or(format!("tansu not found: {install}"))?;
        let dir = log.parent().unwrap_or(Path::new(".")).to_path_buf();
        Broker::start("tansu", listen_ip, advertise_ip, log, |listen, advertise| {
            let mut c = Command::new(&tansu);
            c.args(["broker", "--listener-url", &format!("tcp://{listen}")])
                .args(["--advertised-listener-url", &format!("tcp://{advertise}")])
                .args(["--storage-engine", storage])
                // Set for the members, RUST_LOG=info has tansu log every
                // request: gigabytes a minute, and a broker slowed by it.
                .env_remove("RUST_LOG")
                .current_dir(&dir);
            c
        })
        .map_err(|e| format!("{e} (see {}; {install})", log.display()))
    }

    /// A single-node etcd with its data in `data_dir`, its peer port on
    /// loopback.
    pub fn etcd(data_dir: &Path, listen_ip: &str, advertise_ip: &str, log: &Path) -> Result<Broker, String> {
        let etcd = find("etcd").ok_or("etcd not found: apt-get install etcd-server etcd-client")?;
        let peer = free_port("127.0.0.1");
        Broker::start("etcd", listen_ip, advertise_ip, log, |listen, advertise| {
            let mut c = Command::new(&etcd);
            c.arg("--data-dir")
                .arg(data_dir)
                .args(["--listen-client-urls", &format!("http://{listen}")])
                .args(["--advertise-client-urls", &format!("http://{advertise}")])
                .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
                .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer}")])
                .args(["--initial-cluster", &format!("default=http://127.0.0.1:{peer}")]);
            c
        })
    }

    /// Starts `command(listen, advertise)` on a free port, its output going
    /// to `log`. A port found free
    /// can be taken before the broker binds it, so a broker counts as up only
    /// while its own process lives; five tries.
    fn start(
        what: &str,
        listen_ip: &str,
        advertise_ip: &str,
        log: &Path,
        command: impl Fn(&str, &str) -> Command,
    ) -> Result<Broker, String> {
        for _ in 0..5 {
            let port = free_port(listen_ip);
            let (listen, advertise) = (format!("{listen_ip}:{port}"), format!("{advertise_ip}:{port}"));
            let connect = format!("{}:{port}", if listen_ip == "0.0.0.0" { "127.0.0.1" } else { listen_ip });
            let out = std::fs::File::create(log).map_err(|e| format!("cannot write {}: {e}", log.display()))?;
            let mut process = super::die_with_runner(&mut command(&listen, &advertise))
                .stdin(Stdio::null())
                .stdout(out.try_clone().map_err(|e| e.to_string())?)
                .stderr(out)
                .spawn()
                .map_err(|e| format!("cannot start {what}: {e}"))?;
            let up = super::wait_for(Duration::from_secs(30), || {
                process.try_wait().ok().flatten().is_some() || TcpStream::connect(&connect).is_ok()
            });
            if up && process.try_wait().ok().flatten().is_none() {
                return Ok(Broker { address: advertise, process, control: None, cluster: false });
            }
            let _ = process.kill();
            let _ = process.wait();
        }
        Err(format!("{what} did not come up on a free port in five tries"))
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.id() as i32)
    }

    pub fn signal(&self, sig: Signal) {
        let _ = kill(self.pid(), sig);
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A dev broker's request counts since it started, by (client.id, API
/// name): [`Broker::requests`].
pub type Requests = std::collections::BTreeMap<(String, String), u64>;

/// Partition 0's leader of `topic` in a dev broker cluster's `describe`
/// answer ("brokers 1:up 2:up; coordinator 2; leaders T/0:1; cuts none").
pub fn leader_of(describe: &str, topic: &str) -> Option<i32> {
    let key = format!("{topic}/0:");
    describe.split([' ', ';']).find_map(|w| w.strip_prefix(&key)?.parse().ok())
}

/// The group coordinator in a `describe` answer.
pub fn coordinator_of(describe: &str) -> Option<i32> {
    describe.split("; ").find_map(|part| part.strip_prefix("coordinator ")?.parse().ok())
}

fn free_port(ip: &str) -> u16 {
    TcpListener::bind((ip, 0)).and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

/// `name` on PATH, else in ~/.cargo/bin.
pub fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cargo = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|c| c.join("bin"));
    std::env::split_paths(&path).chain(cargo).map(|d| d.join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_answers_are_read() {
        let d = "brokers 1:up 2:up 3:down; coordinator 3; leaders g.neli/0:2 g.neli/1:3 h.neli/0:1; cuts none";
        assert_eq!(leader_of(d, "g.neli"), Some(2));
        assert_eq!(leader_of(d, "h.neli"), Some(1));
        assert_eq!(leader_of(d, "x.neli"), None);
        assert_eq!(leader_of("brokers 1:up; coordinator 1; leaders g.neli/0:1; cuts none", "g.neli"), Some(1));
        assert_eq!(coordinator_of(d), Some(3));
    }
}
