//! The mock cluster behind the forwarder: librdkafka's in-memory brokers,
//! each advertising one of the dev broker's addresses, its topics made as
//! Kafka makes them, and each broker's own listener moved where only the
//! forwarder reaches it ([`BackDoor`]).

use std::ffi::CString;
use std::net::{SocketAddr, ToSocketAddrs};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, Producer};
use tracing::{debug, info, warn};

use crate::Error;

/// A context for the dev broker's own client: its librdkafka chatter goes to
/// debug level, where -v shows it.
pub struct Quiet;

impl rdkafka::ClientContext for Quiet {
    fn log(&self, _: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        debug!(target: "librdkafka", "{fac} {message}");
    }

    fn error(&self, err: KafkaError, reason: &str) {
        debug!(target: "librdkafka", %err, "{reason}");
    }
}

impl rdkafka::producer::ProducerContext for Quiet {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::producer::DeliveryResult<'_>, _: ()) {}
}

/// The mock cluster, through the client that made it and ends it when
/// dropped (librdkafka's `test.mock.num.brokers`).
pub struct Mock {
    owner: BaseProducer<Quiet>,
    /// How many brokers clients reach (ids 1 to N); every topic is
    /// replicated on all of them.
    brokers: i32,
    /// A spare broker N + 1, always down and never shown to clients
    /// ([`crate::topics::hide_broker`]), that leads the partitions that
    /// have no leader: the mock cannot leave one leaderless (its Metadata
    /// answer would read a null leader and crash). None under the mock's
    /// own coordinator, which could pick it to coordinate a group.
    pub spare: Option<i32>,
    /// --partitions: how many partitions every topic gets, whatever its
    /// creator asked for.
    partitions: Option<i32>,
    /// --deny-topic: topics nobody may read, write or create (exact names,
    /// or prefixes ending in `*`: [`crate::topics::denies`]).
    pub denied: Vec<String>,
}

impl Mock {
    /// Creates the mock cluster: a broker for each of `advertised` (ids 1
    /// to N, in order) and, if `spare`, a spare, with `denied` topics
    /// refused and every topic given `partitions`.
    pub fn start(
        advertised: &[(String, u16)],
        spare: bool,
        denied: &[String],
        partitions: Option<u16>,
    ) -> Result<Mock, String> {
        let brokers = advertised.len() as i32;
        let spare = spare.then_some(brokers + 1);
        let owner: BaseProducer<Quiet> = ClientConfig::new()
            .set("test.mock.num.brokers", spare.unwrap_or(brokers).to_string())
            .create_with_context(Quiet)
            .map_err(|e| e.to_string())?;
        let Some(cluster) = owner.client().mock_cluster() else {
            return Err("librdkafka created no mock cluster".into());
        };
        // rdkafka's MockCluster does not wrap these two calls.
        // SAFETY: the producer was created with a mock cluster, which it owns
        // and keeps while it lives; brokers 1 to N exist; the hosts are C
        // strings.
        unsafe {
            let raw = rdkafka_sys::rd_kafka_handle_mock_cluster(owner.client().native_ptr());
            for (id, (host, port)) in (1..).zip(advertised) {
                let host = CString::new(host.trim_matches(['[', ']'])).map_err(|_| "bad host")?;
                rdkafka_sys::rd_kafka_mock_broker_set_host_port(raw, id, host.as_ptr(), i32::from(*port));
            }
            // Real brokers wait 3s for more members before the first rebalance;
            // for trying things out, starting at once is nicer.
            rdkafka_sys::rd_kafka_mock_group_initial_rebalance_delay_ms(raw, 0);
        }
        // Prefixes (`name*`) are refused by the forwarder alone
        // (`topics::deny_topics`): the mock takes exact names only.
        for topic in denied {
            if topic.ends_with('*') {
                info!(prefix = topic.trim_end_matches('*'), "denying access to every topic with this prefix");
                continue;
            }
            cluster
                .topic_error(topic, rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
                .map_err(|e| format!("--deny-topic {topic}: {e}"))?;
            info!(topic, "denying access to topic");
        }
        drop(cluster);
        let mock = Mock { owner, brokers, spare, partitions: partitions.map(i32::from), denied: denied.to_vec() };
        if let Some(spare) = spare {
            // Down for good: its listener closed, so nothing reaches it.
            mock.set_up(spare, false);
        }
        Ok(mock)
    }

    /// rdkafka's safe handle on the mock, borrowed from its owner each
    /// time, so that nothing outlives the owner and Mock stays Send and Sync.
    fn cluster(&self) -> MockCluster<'_, Quiet> {
        self.owner.client().mock_cluster().expect("made with test.mock.num.brokers (checked in Mock::start)")
    }

    /// Takes a broker down (closing every connection) or brings it up.
    pub fn set_up(&self, broker: i32, up: bool) {
        let done = if up { self.cluster().broker_up(broker) } else { self.cluster().broker_down(broker) };
        if let Err(err) = done {
            warn!(%err, broker, up, "the mock cluster did not change its broker's state");
        }
    }

    /// Makes `leader` lead a partition (None: nobody, through the spare).
    pub fn set_leader(&self, topic: &str, partition: i32, leader: Option<i32>) -> Result<(), String> {
        let Some(leader) = leader.or(self.spare) else {
            return Err("a partition can have no leader only under --group-coordinator kafka".into());
        };
        self.cluster().partition_leader(topic, partition, Some(leader)).map_err(|e| e.to_string())
    }

    /// How many partitions a topic asked with `asked` gets: --partitions,
    /// if given.
    pub fn partitions(&self, asked: i32) -> i32 {
        self.partitions.unwrap_or(asked)
    }

    /// Creates a topic with `partitions` (unless --partitions says
    /// otherwise), replicated on every broker, answering as Kafka would.
    /// The mock's topic has room for more ([`crate::partitions::ROOM`]),
    /// which clients are not shown.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), (i16, String)> {
        let partitions = self.partitions(partitions);
        let room = partitions.max(crate::partitions::ROOM);
        match self.cluster().create_topic(topic, room, self.brokers) {
            Ok(()) => {
                info!(topic, partitions, "created topic");
                Ok(())
            }
            Err(KafkaError::MockCluster(code)) => {
                let message = match code {
                    RDKafkaErrorCode::TopicAlreadyExists => format!("Topic '{topic}' already exists."),
                    code => code.to_string(),
                };
                // librdkafka's own codes are negative; Kafka's -1 is "unknown".
                Err((i16::try_from(code as i32).unwrap_or(-1).max(-1), message))
            }
            Err(err) => Err((-1, err.to_string())),
        }
    }
}

/// The mock cluster listens on a random 127.0.0.1 port, where it answers
/// anyone without a login: a back door around `--sasl-user` and around the
/// forwarder's one-partition topics. librdkafka has no option to bind it
/// elsewhere, so while it is down (its listener closed, a new one bound but
/// not listening) the bound socket's descriptor is replaced (dup3) with a
/// unix socket in a directory only this user may enter; the mock then
/// listens and accepts there, and the forwarder connects there. The TCP
/// socket itself is kept bound, not listening, so that the port stays ours
/// for the mock to bind again on its next down (SO_REUSEADDR), and nothing
/// answers on it.
struct BackDoor {
    dir: std::path::PathBuf,
    port: u16,
    /// The first TCP socket the mock bound, kept to hold the port.
    holder: Option<std::os::fd::OwnedFd>,
}

impl BackDoor {
    /// Takes the mock's `broker` down, moves its listener, and brings it up.
    fn close(mock: &Mock, broker: i32, port: u16) -> std::io::Result<BackDoor> {
        use std::os::unix::fs::DirBuilderExt;
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "neli-dev-broker-{}-{broker}-{:x}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let mut door = BackDoor { dir, port, holder: None };
        mock.set_up(broker, false);
        let swapped = door.swap();
        mock.set_up(broker, true);
        swapped.map(|()| door)
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.join("mock.sock")
    }

    /// While the mock is down: puts a fresh unix listener where its new,
    /// bound TCP socket was.
    fn swap(&mut self) -> std::io::Result<()> {
        use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
        let skip = self.holder.as_ref().map(|h| h.as_raw_fd());
        let fd = bound_not_listening(self.port, skip)?;
        let path = self.path();
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        // The mock's accept must not block its thread on a spurious wake-up.
        listener.set_nonblocking(true)?;
        if self.holder.is_none() {
            // SAFETY: fd is open (just found), and the mock, which owns it,
            // does not close it while down.
            let mock_fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let held = nix::fcntl::fcntl(mock_fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(0))?;
            // SAFETY: `held` is a fresh descriptor owned by nobody else.
            self.holder = Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(held) });
        }
        // SAFETY: both descriptors are open; dup3 atomically closes the
        // mock's TCP socket at `fd` (the holder keeps it alive) and puts the
        // unix listener there. The mock does not use `fd` while down. libc's
        // dup3, not nix's: nix's wants the target as an `OwnedFd` of ours,
        // and `fd` is the mock's.
        if unsafe { libc::dup3(listener.as_raw_fd(), fd, libc::O_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for BackDoor {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes the directories of dev brokers that were killed (SIGKILL leaves
/// them behind): those whose process no longer exists. Others' directories
/// are not ours to remove (and /tmp's sticky bit says so too).
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("neli-dev-broker-"))
            .and_then(|rest| rest.split('-').next()?.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The descriptor of this process's TCP socket bound to 127.0.0.1:`port`
/// and not listening (other than `skip`).
fn bound_not_listening(port: u16, skip: Option<i32>) -> std::io::Result<i32> {
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let Some(fd) = entry?.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if Some(fd) == skip {
            continue;
        }
        // SAFETY: plain out-parameters of the right sizes; a descriptor
        // that is not a socket (or was closed meanwhile) only fails.
        let (addr, accepting) = unsafe {
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            if libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len) != 0 {
                continue;
            }
            let mut accepting: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            if libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ACCEPTCONN,
                (&mut accepting as *mut libc::c_int).cast(),
                &mut len,
            ) != 0
            {
                continue;
            }
            (addr, accepting)
        };
        if addr.sin_family == libc::AF_INET as libc::sa_family_t
            && u16::from_be(addr.sin_port) == port
            && u32::from_be(addr.sin_addr.s_addr) == u32::from(std::net::Ipv4Addr::LOCALHOST)
            && accepting == 0
        {
            return Ok(fd);
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no bound socket of the mock cluster found"))
}

/// Where the forwarder reaches the mock.
#[derive(Clone, Debug)]
pub enum Inner {
    /// The mock's own TCP port (when it could not be moved).
    Tcp(SocketAddr),
    /// The unix socket it was moved to ([`BackDoor`]).
    Unix(std::path::PathBuf),
}

/// One of the mock's brokers as the forwarder reaches it: its address, and
/// the back door closed behind it while that could be done (dropping it
/// removes the private directory).
pub struct Backend {
    /// Its id (1 to N).
    broker: i32,
    /// Where each new connection goes.
    pub inner: Inner,
    door: Option<BackDoor>,
}

impl Backend {
    /// Finds the mock's `broker` (1 to N) and moves its listener off
    /// 127.0.0.1, so that only the forwarder may reach it; left there (with a
    /// warning) if that cannot be done.
    pub fn hide(mock: &Mock, broker: i32) -> Result<Backend, Error> {
        // The mock lists its brokers' addresses in the order of their ids.
        let inner = mock.cluster().bootstrap_servers();
        let found = inner.split(',').nth(broker as usize - 1).and_then(|a| a.to_socket_addrs().ok()?.next());
        let Some(inner) = found else {
            return Err(Error::Internal(format!(
                "the mock cluster gave no usable address for broker {broker} ({inner})"
            )));
        };
        Ok(match BackDoor::close(mock, broker, inner.port()) {
            Ok(closed) => {
                let path = closed.path();
                debug!(broker, path = %path.display(), "the mock broker listens on a private unix socket only");
                Backend { broker, inner: Inner::Unix(path), door: Some(closed) }
            }
            Err(err) => {
                warn!(broker, %inner, %err, "cannot move the mock broker off its TCP port: it answers there without a login");
                Backend { broker, inner: Inner::Tcp(inner), door: None }
            }
        })
    }

    /// Takes the broker down (closing every connection), and closes the back
    /// door again behind the new TCP listener the mock made (not listening
    /// while down).
    pub fn down(&mut self, mock: &Mock) {
        mock.set_up(self.broker, false);
        if let Some(closed) = self.door.as_mut() {
            if let Err(err) = closed.swap() {
                warn!(%err, "cannot move the mock cluster off its TCP port again: it answers there without a login");
                self.inner = Inner::Tcp(SocketAddr::from(([127, 0, 0, 1], closed.port)));
                self.door = None;
            }
        }
    }
}
