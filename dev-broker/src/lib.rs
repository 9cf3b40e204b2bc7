//! `neli-run dev-broker`: librdkafka's in-memory mock cluster behind a fixed
//! address, so neli-run can be tried and tested with nothing installed.
//!
//! The mock binds a random 127.0.0.1 port; we create it with one broker,
//! advertise the `--listen` address for that broker, move the mock's
//! listener to a unix socket in a private directory (see [`BackDoor`]: on
//! its TCP port it would answer anyone without a login), and forward the
//! listen port to it. Request frames are capped as Kafka caps them. The
//! forwarder also creates topics as Kafka does (see [`topics`]): it answers
//! CreateTopics, which the mock does not serve, and creates a topic that a
//! Metadata request allows to be created, before the mock would give it four
//! partitions.
//!
//! ApiVersions requests above the mock's v2 are answered here, as Kafka
//! answers a version it does not serve (KIP-511): the mock's own answer is
//! one that kafka-python cannot read, so it could not even bootstrap.
//!
//! SIGUSR1 and SIGUSR2 take the broker down and up again, as a Kafka broker
//! restarting over its log: while down every connection is closed and new
//! ones are refused; once up, topics, offsets and groups are as they were.

use std::ffi::CString;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, Producer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info, warn};

mod group;
mod sasl;
mod topics;
mod wire;

use wire::Header;

/// What `neli-run dev-broker` was asked for: its command line's options
/// (the product's `DevBrokerArgs` documents each), free of the parser.
#[derive(Debug)]
pub struct Options {
    /// HOST:PORT to listen on (and advertise, without `advertise`).
    pub listen: String,
    /// HOST:PORT to advertise to clients, when it differs from `listen`.
    pub advertise: Option<String>,
    /// Topics nobody may read, write or create.
    pub deny_topic: Vec<String>,
    /// How many partitions every topic gets, whatever its creator asks for.
    pub partitions: Option<u16>,
    /// Who answers the group APIs.
    pub group_coordinator: GroupCoordinator,
    /// Kafka's group.initial.rebalance.delay.ms, for [`GroupCoordinator::Kafka`].
    pub initial_rebalance_delay: std::time::Duration,
    /// USER:PASSWORD entries: with any, a SASL login is required.
    pub sasl_user: Vec<String>,
}

/// Who answers a dev broker's group APIs (`--group-coordinator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupCoordinator {
    /// Kafka's timing, answered by the dev broker itself ([`group`]).
    Kafka,
    /// librdkafka's mock cluster.
    Mock,
}

/// Why the dev broker could not run, sorted as neli-run's exit statuses
/// sort it: the caller maps each to its status.
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    /// The options are wrong (a bad address, one already in use).
    Usage(String),
    /// The machine could not give what it needs (a runtime, the mock).
    Internal(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (Error::Usage(message) | Error::Internal(message)) = self;
        f.write_str(message)
    }
}

impl std::error::Error for Error {}

/// A context for the dev broker's own client: its librdkafka chatter goes to
/// debug level, where -v shows it.
struct Quiet;

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

/// What every forwarded connection shares.
struct Shared {
    mock: Mock,
    pending: Pending,
    /// With --sasl-user: the users who may log in; nobody else gets through.
    users: Option<sasl::Users>,
    /// With --group-coordinator kafka: where group requests go instead of
    /// the mock, each with where its response goes.
    coordinator: Option<Coordinator>,
}

/// A group request, with where its response goes.
type Asked = (group::Request, tokio::sync::oneshot::Sender<Vec<u8>>);
type Coordinator = tokio::sync::mpsc::UnboundedSender<Asked>;

/// Runs the Kafka-timed group coordinator: requests in, responses out as
/// they fall due, and its timer (joins that time out, sessions that end).
async fn coordinate(mut requests: tokio::sync::mpsc::UnboundedReceiver<Asked>, initial_delay: std::time::Duration) {
    let start = tokio::time::Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    let mut core = group::Coordinator::new(initial_delay.as_millis() as u64);
    let mut waiting = std::collections::HashMap::new();
    for id in 0u64.. {
        let due = core.next_deadline().map(|at| start + std::time::Duration::from_millis(at));
        let replies = tokio::select! {
            request = requests.recv() => {
                let Some((request, reply)) = request else { return };
                debug!(at_ms = now(), group = %request.group, "{:?}", request.body);
                waiting.insert(id, reply);
                core.handle(id, request, now())
            }
            _ = async { tokio::time::sleep_until(due.expect("guarded")).await }, if due.is_some() => core.tick(now()),
        };
        for group::Reply { to, frame } in replies {
            if let Some(reply) = waiting.remove(&to) {
                let _ = reply.send(frame); // a closed connection no longer waits
            }
        }
    }
}

/// The mock cluster, through the client that made it and ends it when
/// dropped (librdkafka's `test.mock.num.brokers`).
struct Mock {
    owner: BaseProducer<Quiet>,
    /// --partitions: how many partitions every topic gets, whatever its
    /// creator asked for.
    partitions: Option<i32>,
    /// --deny-topic: topics nobody may read, write or create.
    denied: Vec<String>,
}

impl Mock {
    /// rdkafka's safe handle on the mock, borrowed from its owner each
    /// time, so that nothing outlives the owner and Mock stays Send and Sync.
    fn cluster(&self) -> MockCluster<'_, Quiet> {
        self.owner.client().mock_cluster().expect("made with test.mock.num.brokers (checked in start_mock)")
    }

    /// Takes the broker down (closing every connection) or brings it up.
    fn set_up(&self, up: bool) {
        let done = if up { self.cluster().broker_up(1) } else { self.cluster().broker_down(1) };
        if let Err(err) = done {
            warn!(%err, up, "the mock cluster did not change its broker's state");
        }
    }

    /// Creates a topic with `partitions` (unless --partitions says
    /// otherwise), answering as Kafka would.
    fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), (i16, String)> {
        let partitions = self.partitions.unwrap_or(partitions);
        match self.cluster().create_topic(topic, partitions, 1) {
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

/// Runs the dev broker until SIGINT or SIGTERM.
pub fn main(args: Options) -> Result<(), Error> {
    let Ok(Some(listen)) = args.listen.to_socket_addrs().map(|mut a| a.next()) else {
        return Err(Error::Usage(format!("--listen {}: must be HOST:PORT, e.g. 127.0.0.1:9092", args.listen)));
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| Error::Internal(format!("cannot start the runtime: {err}")))?;
    let mut users = sasl::Users::default();
    for entry in &args.sasl_user {
        let Some((user, password)) = entry.split_once(':').filter(|(u, _)| !u.is_empty()) else {
            return Err(Error::Usage(
                "--sasl-user takes USER:PASSWORD (got a value without a user and a colon)".into(),
            ));
        };
        users.0.insert(user.to_string(), password.to_string());
    }
    let users = (!users.0.is_empty()).then_some(users);
    let advertised = args.advertise.as_deref().unwrap_or(&args.listen);
    runtime.block_on(serve(listen, advertised, &args, users))
}

async fn serve(listen: SocketAddr, advertised: &str, args: &Options, users: Option<sasl::Users>) -> Result<(), Error> {
    let listener = TcpListener::bind(listen).await.map_err(|err| {
        Error::Usage(format!("cannot listen on {listen}: {err} (another dev broker running? pick another --listen)"))
    })?;
    let mock = start_mock(advertised, &args.deny_topic, args.partitions)
        .map_err(|err| Error::Internal(format!("cannot start the mock cluster: {err}")))?;
    let inner = mock.cluster().bootstrap_servers();
    let Some(inner) = inner.split(',').next().and_then(|a| a.to_socket_addrs().ok()?.next()) else {
        return Err(Error::Internal(format!("the mock cluster gave no usable address ({inner})")));
    };
    // Only the forwarder may reach the mock: move its listener off 127.0.0.1.
    let mut door = None;
    let mut inner = match BackDoor::close(&mock, inner.port()) {
        Ok(closed) => {
            let path = closed.path();
            debug!(path = %path.display(), "the mock cluster listens on a private unix socket only");
            door = Some(closed);
            Inner::Unix(path)
        }
        Err(err) => {
            warn!(%inner, %err, "cannot move the mock cluster off its TCP port: it answers there without a login");
            Inner::Tcp(inner)
        }
    };
    info!(%listen, "dev broker ready: use --brokers {advertised} (in memory, one broker; Ctrl-C stops it)");
    if let Some(users) = &users {
        let names: Vec<&str> = users.0.keys().map(String::as_str).collect();
        info!(users = ?names, mechanisms = ?sasl::MECHANISMS, "SASL required (security.protocol=SASL_PLAINTEXT)");
    }
    let coordinator = (args.group_coordinator == GroupCoordinator::Kafka).then(|| {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(coordinate(rx, args.initial_rebalance_delay));
        info!(initial_rebalance_delay = ?args.initial_rebalance_delay, "group coordinator with Kafka's timing");
        tx
    });
    let shared = Arc::new(Shared { mock, pending: Pending::default(), users, coordinator });

    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut down), Ok(mut up)) =
        (signal(SignalKind::terminate()), signal(SignalKind::user_defined1()), signal(SignalKind::user_defined2()))
    else {
        return Err(Error::Internal("cannot install signal handlers".into()));
    };
    let mut is_up = true;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                // Refused while down: the client sees the connection close.
                Ok((_, peer)) if !is_up => debug!(%peer, "client refused: broker down"),
                Ok((client, peer)) => {
                    debug!(%peer, "client connected");
                    tokio::spawn(forward(client, peer, inner.clone(), shared.clone()));
                }
                Err(err) => debug!(%err, "accept failed"),
            },
            _ = down.recv() => if std::mem::replace(&mut is_up, false) {
                shared.mock.set_up(false);
                // The mock made a new TCP listener (not listening while down).
                if let Some(closed) = door.as_mut() {
                    if let Err(err) = closed.swap() {
                        warn!(%err, "cannot move the mock cluster off its TCP port again: it answers there without a login");
                        inner = Inner::Tcp(SocketAddr::from(([127, 0, 0, 1], closed.port)));
                        door = None;
                    }
                }
                info!("broker down (SIGUSR1): connections closed, new ones refused until SIGUSR2");
            },
            _ = up.recv() => if !std::mem::replace(&mut is_up, true) {
                shared.mock.set_up(true);
                info!("broker up again (SIGUSR2), with its topics, offsets and groups");
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
    drop(door);
    info!("dev broker stopped");
    Ok(())
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
    /// Takes the mock down, moves its listener, and brings it up.
    fn close(mock: &Mock, port: u16) -> std::io::Result<BackDoor> {
        use std::os::unix::fs::DirBuilderExt;
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "neli-dev-broker-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let mut door = BackDoor { dir, port, holder: None };
        mock.set_up(false);
        let swapped = door.swap();
        mock.set_up(true);
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

fn start_mock(advertised: &str, denied: &[String], partitions: Option<u16>) -> Result<Mock, String> {
    let (host, port) = advertised.rsplit_once(':').ok_or("no port")?;
    let port: i32 = port.parse().map_err(|_| "bad port")?;
    let owner: BaseProducer<Quiet> =
        ClientConfig::new().set("test.mock.num.brokers", "1").create_with_context(Quiet).map_err(|e| e.to_string())?;
    let Some(cluster) = owner.client().mock_cluster() else {
        return Err("librdkafka created no mock cluster".into());
    };
    let host = CString::new(host.trim_matches(['[', ']'])).map_err(|_| "bad host")?;
    // rdkafka's MockCluster does not wrap these two calls.
    // SAFETY: the producer was created with a mock cluster, which it owns
    // and keeps while it lives; broker 1 exists; the host is a C string.
    unsafe {
        let raw = rdkafka_sys::rd_kafka_handle_mock_cluster(owner.client().native_ptr());
        rdkafka_sys::rd_kafka_mock_broker_set_host_port(raw, 1, host.as_ptr(), port);
        // Real brokers wait 3s for more members before the first rebalance;
        // for trying things out, starting at once is nicer.
        rdkafka_sys::rd_kafka_mock_group_initial_rebalance_delay_ms(raw, 0);
    }
    for topic in denied {
        cluster
            .topic_error(topic, rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
            .map_err(|e| format!("--deny-topic {topic}: {e}"))?;
        info!(topic, "denying access to topic");
    }
    drop(cluster);
    Ok(Mock { owner, partitions: partitions.map(i32::from), denied: denied.to_vec() })
}

/// Group requests (JoinGroup, SyncGroup) the mock is still answering, by
/// member id: the mock fails an assertion and aborts when a member sends
/// another while one is pending, which clients do when they rejoin quickly
/// or reconnect (Kafka itself answers the older one). So a member's next
/// group request waits here until the mock has answered the previous one.
#[derive(Default)]
struct Pending {
    /// member id -> (connection, correlation id) of its request in flight.
    by_member: std::sync::Mutex<std::collections::HashMap<String, (u64, i32)>>,
    changed: tokio::sync::Notify,
    connections: std::sync::atomic::AtomicU64,
}

impl Pending {
    /// Waits until `member` has no group request in flight, then records
    /// this one.
    async fn enter(&self, member: &str, conn: u64, correlation: i32) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut map = self.by_member.lock().expect("pending lock");
                if !map.contains_key(member) {
                    map.insert(member.to_string(), (conn, correlation));
                    return;
                }
            }
            changed.await;
        }
    }

    /// Whether a group request sent on `conn` is still unanswered.
    fn holds(&self, conn: u64) -> bool {
        self.by_member.lock().expect("pending lock").values().any(|(c, _)| *c == conn)
    }

    /// The response to (`conn`, `correlation`) has passed: or, with None,
    /// the connection is gone and so is everything it had in flight.
    fn leave(&self, conn: u64, correlation: Option<i32>) {
        let mut map = self.by_member.lock().expect("pending lock");
        let before = map.len();
        map.retain(|_, (c, corr)| !(*c == conn && correlation.is_none_or(|x| x == *corr)));
        if map.len() != before {
            self.changed.notify_waiters();
        }
    }
}

/// The largest request frame taken, as Kafka's `socket.request.max.bytes`
/// (100 MiB): a client that announces more is cut off before anything is
/// allocated for it.
const MAX_FRAME: usize = 104_857_600;
/// Before a SASL login, as Kafka's `sasl.server.max.receive.size` (512 KiB):
/// login requests are small, and nobody unknown reserves more.
const MAX_FRAME_BEFORE_LOGIN: usize = 524_288;

/// A frame longer than the limit was announced.
#[derive(Debug)]
struct TooLong {
    len: usize,
    limit: usize,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let setting = if self.limit == MAX_FRAME_BEFORE_LOGIN {
            "sasl.server.max.receive.size, before a login"
        } else {
            "socket.request.max.bytes"
        };
        write!(f, "announced a frame of {} bytes, over the limit of {} (as Kafka's {setting})", self.len, self.limit)
    }
}

impl std::error::Error for TooLong {}

/// Reads one length-prefixed Kafka frame (without its length), or None at
/// the end of the stream. A length over `limit` is an error ([`TooLong`]).
async fn read_frame(rx: &mut (impl AsyncReadExt + Unpin), limit: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match rx.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > limit {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, TooLong { len, limit }));
    }
    let mut frame = vec![0u8; len];
    rx.read_exact(&mut frame).await?;
    Ok(Some(frame))
}

/// Where the forwarder reaches the mock.
#[derive(Clone, Debug)]
enum Inner {
    /// The mock's own TCP port (when it could not be moved).
    Tcp(SocketAddr),
    /// The unix socket it was moved to ([`BackDoor`]).
    Unix(std::path::PathBuf),
}

async fn forward(client: TcpStream, peer: SocketAddr, inner: Inner, shared: Arc<Shared>) {
    match inner {
        Inner::Tcp(addr) => {
            let Ok(broker) = TcpStream::connect(addr).await else { return };
            let _ = broker.set_nodelay(true);
            relay(client, peer, broker, shared).await
        }
        Inner::Unix(path) => {
            let Ok(broker) = tokio::net::UnixStream::connect(&path).await else { return };
            relay(client, peer, broker, shared).await
        }
    }
}

async fn relay<S>(mut client: TcpStream, peer: SocketAddr, broker: S, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mock, pending) = (&shared.mock, &shared.pending);
    let mut login = sasl::Login::default();
    // The ApiVersions request whose response must offer SASL: (correlation
    // id, version).
    let api_versions = &std::sync::Mutex::new(None);
    // The Metadata requests whose responses must name the controller, by
    // correlation id: their versions.
    let metadata = &std::sync::Mutex::new(std::collections::HashMap::new());
    let conn = pending.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let _ = client.set_nodelay(true);
    let (client_rx, client_tx) = client.split();
    let (broker_rx, mut broker_tx) = tokio::io::split(broker);
    let (mut client_rx, mut broker_rx) = (tokio::io::BufReader::new(client_rx), tokio::io::BufReader::new(broker_rx));
    // Responses come from the mock and from us: one frame at a time.
    let client_tx = &tokio::sync::Mutex::new(client_tx);
    let respond = |frame: Vec<u8>| async move {
        let mut tx = client_tx.lock().await;
        tx.write_all(&(frame.len() as u32).to_be_bytes()).await?;
        tx.write_all(&frame).await
    };
    // Each request is looked at, then passed on as it is.
    let requests = async {
        loop {
            let limit = match &shared.users {
                Some(_) if !login.done() => MAX_FRAME_BEFORE_LOGIN,
                _ => MAX_FRAME,
            };
            let frame = match read_frame(&mut client_rx, limit).await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    warn!(%peer, "closing the connection: the client {e}");
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if let Some(users) = shared.users.as_ref().filter(|_| !login.done()) {
                match login.step(users, &frame) {
                    sasl::Step::Forward => {}
                    sasl::Step::Reply(answer) => {
                        respond(answer).await?;
                        continue;
                    }
                    sasl::Step::Refuse(answer) => {
                        debug!("SASL login refused; closing the connection");
                        return respond(answer).await;
                    }
                    sasl::Step::Close => return Ok(()),
                }
            }
            if let Some(answer) = wire::api_versions_fallback(&frame) {
                // KIP-511: the client retries with a version served here.
                debug!(%peer, "ApiVersions above v{} answered UNSUPPORTED_VERSION", wire::API_VERSIONS_MAX);
                respond(answer).await?;
                continue;
            }
            if let Some(request) = wire::api_versions_request(&frame) {
                *api_versions.lock().expect("lock") = Some(request);
            }
            if let Some((correlation, version)) = topics::metadata_version(&frame) {
                metadata.lock().expect("lock").insert(correlation, version);
            }
            if let Some(request) = topics::CreateTopics::parse(&frame) {
                let answer = request.answer(&mock.denied, 1, |topic, partitions| mock.create_topic(topic, partitions));
                respond(answer).await?;
                continue;
            }
            for topic in topics::auto_created(&frame) {
                let _ = mock.create_topic(&topic, 1);
            }
            let coordinated = shared.coordinator.as_ref().and_then(|c| Some((c, group::Request::parse(&frame)?)));
            if let Some((coordinator, mut request)) = coordinated {
                request.host = format!("/{}", peer.ip());
                let (tx, rx) = tokio::sync::oneshot::channel();
                // As Kafka does, the connection takes its next request only
                // once this one is answered (a JoinGroup waits for the join).
                if coordinator.send((request, tx)).is_err() {
                    return Ok(());
                }
                match rx.await {
                    Ok(answer) => respond(answer).await?,
                    Err(_) => return Ok(()),
                }
                continue;
            }
            match GroupRequest::parse(&frame) {
                Some(first) if first.member.is_empty() => {
                    if let Some(answer) = first.member_id_required(&next_member_id(&first.client_id)) {
                        respond(answer).await?;
                        continue;
                    }
                }
                Some(req) => pending.enter(&req.member, conn, req.correlation).await,
                None => {}
            }
            broker_tx.write_all(&(frame.len() as u32).to_be_bytes()).await?;
            broker_tx.write_all(&frame).await?;
        }
        Ok::<(), std::io::Error>(())
    };
    let responses = async {
        while let Some(mut frame) = read_frame(&mut broker_rx, usize::MAX).await? {
            let correlation = frame.get(..4).map(|c| i32::from_be_bytes(c.try_into().expect("4 bytes")));
            let offer = api_versions.lock().expect("lock").filter(|(c, _)| Some(*c) == correlation);
            if let Some((_, version)) = offer {
                if shared.users.is_some() {
                    frame = sasl::advertise(&frame, version).unwrap_or(frame);
                }
                frame = wire::add_apis(&frame, version, &[topics::CREATE_TOPICS_VERSIONS]).unwrap_or(frame);
                if shared.coordinator.is_some() {
                    frame = group::cap_api_versions(&frame, version).unwrap_or(frame);
                    frame = wire::add_apis(&frame, version, &group::ADDED).unwrap_or(frame);
                }
            }
            if let Some(version) = correlation.and_then(|c| metadata.lock().expect("lock").remove(&c)) {
                frame = topics::name_controller(&frame, version).unwrap_or(frame);
            }
            respond(frame).await?;
            if let Some(correlation) = correlation {
                pending.leave(conn, Some(correlation));
            }
        }
        Ok::<(), std::io::Error>(())
    };
    // Whichever side closes first closes both. A client that hung up gets
    // no more responses, and the mock must see the close before the client's
    // next connection: with a JoinGroup response still pending on the old
    // one, a JoinGroup on the new one fails an assertion in the mock.
    tokio::select! {
        _ = requests => {}
        _ = responses => {}
    }
    // Close the mock's side before a waiting request of the same member may
    // go out on another connection, and give the mock a moment to see the
    // close: its thread serves both sockets, and a request read before the
    // close aborts it just the same (seen in the soak, 1 in ~300 faults).
    drop((broker_rx, broker_tx));
    if pending.holds(conn) {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    pending.leave(conn, None);
}

/// A unique member id, as Kafka makes them (client id and a suffix). The
/// mock would name a member after its address in memory, which the next
/// member to join reuses as soon as one is expelled: the expelled client's
/// next request then lands on the new member's state (and a JoinGroup on
/// one still joining fails an assertion and aborts the mock).
fn next_member_id(client_id: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!("{client_id}-dev-{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// What the forwarder needs of a JoinGroup or SyncGroup request frame.
/// Both are flexible (compact strings, tagged fields) from JoinGroup v6 /
/// SyncGroup v4.
struct GroupRequest {
    api_key: i16,
    version: i16,
    correlation: i32,
    client_id: String,
    /// Empty on a member's first JoinGroup.
    member: String,
}

impl GroupRequest {
    fn parse(frame: &[u8]) -> Option<GroupRequest> {
        let Header { api_key, version, correlation, client_id, flexible, body: mut r } = Header::parse(frame)?;
        if api_key != wire::JOIN_GROUP && api_key != wire::SYNC_GROUP {
            return None;
        }
        r.string_in(flexible)?; // group id
        if api_key == wire::JOIN_GROUP {
            r.skip(if version >= 1 { 8 } else { 4 })?; // session (and rebalance) timeout
        } else {
            r.skip(4)?; // generation id
        }
        let member = r.string_in(flexible)?.unwrap_or_default();
        Some(GroupRequest { api_key, version, correlation, client_id, member })
    }

    /// For a first JoinGroup (v4 to v6, the mock's range), the answer Kafka
    /// gives since KIP-394: MEMBER_ID_REQUIRED with the id to join with.
    fn member_id_required(&self, member: &str) -> Option<Vec<u8>> {
        if self.api_key != wire::JOIN_GROUP || !(4..=6).contains(&self.version) {
            return None;
        }
        let flexible = self.version >= 6;
        let mut f = self.correlation.to_be_bytes().to_vec();
        let string = |f: &mut Vec<u8>, s: &str| {
            if flexible {
                f.push(s.len() as u8 + 1); // a uvarint: member ids stay short
            } else {
                f.extend_from_slice(&(s.len() as i16).to_be_bytes());
            }
            f.extend_from_slice(s.as_bytes());
        };
        if flexible {
            f.push(0); // response header tagged fields
        }
        f.extend_from_slice(&0i32.to_be_bytes()); // throttle time
        f.extend_from_slice(&wire::MEMBER_ID_REQUIRED.to_be_bytes());
        f.extend_from_slice(&(-1i32).to_be_bytes()); // generation
        string(&mut f, ""); // protocol name
        string(&mut f, ""); // leader
        string(&mut f, member);
        if flexible {
            f.extend_from_slice(&[1, 0]); // no members; tagged fields
        } else {
            f.extend_from_slice(&0i32.to_be_bytes()); // no members
        }
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: i16) -> Vec<u8> {
        let mut f = vec![0, 3];
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        f.extend_from_slice(&3i16.to_be_bytes());
        f.extend_from_slice(b"cli");
        f
    }

    #[test]
    fn reads_the_member_of_join_and_sync_group_requests() {
        // JoinGroup v5 (classic strings): group, session, rebalance, member.
        let mut join = vec![0, 11, 0, 5];
        join.extend_from_slice(&42i32.to_be_bytes());
        join.extend_from_slice(&3i16.to_be_bytes());
        join.extend_from_slice(b"cli");
        join.extend_from_slice(&1i16.to_be_bytes());
        join.extend_from_slice(b"g");
        join.extend_from_slice(&[0u8; 8]);
        join.extend_from_slice(&2i16.to_be_bytes());
        join.extend_from_slice(b"m1");
        let parsed = |f: &[u8]| GroupRequest::parse(f).map(|r| (r.member, r.correlation));
        assert_eq!(parsed(&join), Some(("m1".into(), 42)));
        // SyncGroup v4 (flexible): compact strings and tagged fields.
        let mut sync = vec![0, 14, 0, 4];
        sync.extend_from_slice(&7i32.to_be_bytes());
        sync.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
        sync.push(0); // header tagged fields
        sync.extend_from_slice(&[2, b'g']);
        sync.extend_from_slice(&[0u8; 4]);
        sync.extend_from_slice(&[3, b'm', b'2']);
        assert_eq!(parsed(&sync), Some(("m2".into(), 7)));
        // A first join has no member id; other requests are not looked at.
        let mut first = join.clone();
        first.truncate(join.len() - 4);
        first.extend_from_slice(&0i16.to_be_bytes());
        assert_eq!(parsed(&first), Some((String::new(), 42)));
        assert!(GroupRequest::parse(&header(1)).is_none());
    }

    #[test]
    fn a_first_join_is_answered_member_id_required_with_a_unique_id() {
        let first = GroupRequest { api_key: 11, version: 5, correlation: 9, client_id: "a".into(), member: "".into() };
        let mut want = 9i32.to_be_bytes().to_vec();
        want.extend_from_slice(&[0, 0, 0, 0, 0, 79, 255, 255, 255, 255, 0, 0, 0, 0, 0, 3]);
        want.extend_from_slice(b"a-1");
        want.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(first.member_id_required("a-1"), Some(want));
        let flexible = GroupRequest { version: 6, ..first };
        let answer = flexible.member_id_required("a-1").unwrap();
        assert_eq!(&answer[4..], &[0, 0, 0, 0, 0, 0, 79, 255, 255, 255, 255, 1, 1, 4, b'a', b'-', b'1', 1, 0]);
        // Versions the mock does not serve are left to it.
        assert!(GroupRequest { version: 3, ..flexible }.member_id_required("x").is_none());
        assert_ne!(next_member_id("a"), next_member_id("a"));
    }
}
