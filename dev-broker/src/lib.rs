//! `neli-run dev-broker`: librdkafka's in-memory mock cluster behind a fixed
//! address, so neli-run can be tried and tested with nothing installed.
//!
//! The mock binds a random 127.0.0.1 port; we create it with one broker,
//! advertise the `--listen` address for that broker, move the mock's
//! listener to a unix socket in a private directory (see `mock::BackDoor`: on
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
//! With `--brokers N` it is a cluster: N listeners on consecutive ports,
//! each one broker of a mock with N brokers, every topic replicated on all,
//! partition leaders spread, and the Kafka-timed coordinator on one broker
//! (the others answer NOT_COORDINATOR). `--control PATH` takes cluster
//! events on demand ([`cluster::Event`]: move a leader or the coordinator,
//! stop or crash a broker and start it, cut one client from one broker,
//! answer a partition's next fetch out of range), with one broker too.
//!
//! SIGUSR1 and SIGUSR2 take every broker down and up again, as Kafka brokers
//! restarting over their logs: while down every connection is closed and new
//! ones are refused, nothing moves, and the groups' sessions stand still;
//! once up, topics, offsets and groups are as they were, every session
//! started afresh (as a coordinator loading its groups starts them).
//!
//! A Fetch waits as on Kafka: until MinBytes of records are there or
//! MaxWaitMs has passed, answered as soon as a write brings them. The mock
//! alone holds an empty one for MaxWaitMs whatever is written meanwhile.
//!
//! A client connection is served as Kafka serves one, a request at a time.
//! The requests left for the mock go over a few connections that a broker's
//! clients share, not one each: the mock polls every connection it holds on
//! its one thread, so a fleet's idle connections would cost it CPU that a
//! Kafka broker does not spend ([`mock_link`]).
//!
//! The parts: [`mock`] (the mock cluster and its hidden listeners), [`relay`]
//! (one client connection: requests routed, responses edited), [`mock_link`]
//! (the way to the mock: shared, or the client's own), [`fetch`]
//! (fetches parked as Kafka parks them),
//! [`cluster`] (brokers up, leaders, coordinator, cuts) and [`control`]
//! (events on demand), [`mock_groups`] (what group requests to the mock
//! need), [`group`] (Kafka's group coordinator, with Kafka's timing),
//! [`rewinds`] (fetches answered out of range on demand),
//! [`topics`] (topic creation as Kafka does it), [`sasl`] (the login),
//! [`requests`] (every request counted by client and API, for `requests`
//! on the control socket) and [`wire`] (the few pieces of the wire format
//! they read and write).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::{debug, info};

pub mod cluster;
mod control;
mod fetch;
mod group;
mod mock;
mod mock_groups;
mod mock_link;
mod partitions;
mod relay;
mod requests;
mod rewinds;
mod sasl;
mod topics;
mod wire;

use cluster::{BrokerId, Cluster};
use mock::{Backend, Mock};
use relay::{forward, Shared};

pub use control::send as event;

/// What `neli-run dev-broker` was asked for: its command line's options
/// (the product's `DevBrokerArgs` documents each), free of the parser.
#[derive(Debug)]
pub struct Options {
    /// HOST:PORT to listen on (and advertise, without `advertise`): broker
    /// 1's; broker i listens on PORT + i - 1.
    pub listen: String,
    /// HOST:PORT to advertise to clients, when it differs from `listen`.
    pub advertise: Option<String>,
    /// How many brokers (1 to 9).
    pub brokers: u16,
    /// Where to take cluster events ([`cluster::Event`]), if anywhere.
    pub control: Option<std::path::PathBuf>,
    /// Topics nobody may read, write or create: exact names, or prefixes
    /// ending in `*`.
    pub deny_topic: Vec<String>,
    /// How many partitions every topic gets, whatever its creator asks for.
    pub partitions: Option<u16>,
    /// Who answers the group APIs.
    pub group_coordinator: GroupCoordinator,
    /// Kafka's group.initial.rebalance.delay.ms, for [`GroupCoordinator::Kafka`].
    pub initial_rebalance_delay: std::time::Duration,
    /// How long a rebalance a leave began holds the joins (tansu's pause),
    /// for [`GroupCoordinator::Kafka`]; zero: none.
    pub leave_pause: std::time::Duration,
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
    if let Some(bad) = args.deny_topic.iter().find(|t| t.trim_end_matches('*').contains('*')) {
        return Err(Error::Usage(format!(
            "--deny-topic {bad}: takes a topic name, or a prefix ending in '*' (no '*' elsewhere)"
        )));
    }
    let advertised = args.advertise.as_deref().unwrap_or(&args.listen);
    let bad_advertise = || Error::Usage(format!("--advertise {advertised}: must be HOST:PORT"));
    let (host, port) = advertised.rsplit_once(':').ok_or_else(bad_advertise)?;
    let port: u16 = port.parse().map_err(|_| bad_advertise())?;
    let n = args.brokers;
    if !(1..=9).contains(&n) || u32::from(port.max(listen.port())) + u32::from(n) > 65536 {
        return Err(Error::Usage(format!(
            "--brokers {n}: takes 1 to 9 brokers, on consecutive ports from --listen's and --advertise's"
        )));
    }
    let advertised: Vec<(String, u16)> = (0..n).map(|i| (host.to_string(), port + i)).collect();
    runtime.block_on(serve(listen, advertised, &args, users))
}

/// Serves on `listen` (and the next ports, one per broker) until SIGINT or
/// SIGTERM: the listeners (accepting while their broker is up), the control
/// socket, and the signals that take every broker down and up.
async fn serve(
    listen: SocketAddr,
    advertised: Vec<(String, u16)>,
    args: &Options,
    users: Option<sasl::Users>,
) -> Result<(), Error> {
    // The control socket first: a broker's port takes connections once
    // bound, and whoever waits for it (a script, the tests) may send an
    // event right after (seen: "cannot reach a dev broker at --control").
    let control = args.control.as_deref().map(control::Control::bind).transpose()?;
    let mut listeners = Vec::new();
    for i in 0..args.brokers {
        let at = SocketAddr::new(listen.ip(), listen.port() + i);
        listeners.push(TcpListener::bind(at).await.map_err(|err| {
            Error::Usage(format!("cannot listen on {at}: {err} (another dev broker running? pick another --listen)"))
        })?);
    }
    let kafka_timed = args.group_coordinator == GroupCoordinator::Kafka;
    let mock = Mock::start(&advertised, kafka_timed, &args.deny_topic, args.partitions)
        .map_err(|err| Error::Internal(format!("cannot start the mock cluster: {err}")))?;
    let backends = (1..=BrokerId::from(args.brokers))
        .map(|b| Backend::hide(&mock, b).map(std::sync::Mutex::new))
        .collect::<Result<Vec<_>, Error>>()?;
    let bootstrap: Vec<String> = advertised.iter().map(|(h, p)| format!("{h}:{p}")).collect();
    let bootstrap = bootstrap.join(",");
    let size = if args.brokers == 1 { "one broker".to_string() } else { format!("{} brokers", args.brokers) };
    info!(%listen, "dev broker ready: use --brokers {bootstrap} (in memory, {size}; Ctrl-C stops it)");
    if let Some(path) = &args.control {
        info!(control = %path.display(), "cluster events: neli-run dev-broker event --control {} EVENT", path.display());
    }
    if let Some(users) = &users {
        let names: Vec<&str> = users.0.keys().map(String::as_str).collect();
        info!(users = ?names, mechanisms = ?sasl::MECHANISMS, "SASL required (security.protocol=SASL_PLAINTEXT)");
    }
    let coordinator = (args.group_coordinator == GroupCoordinator::Kafka).then(|| {
        let tx = group::spawn(args.initial_rebalance_delay, args.leave_pause);
        info!(initial_rebalance_delay = ?args.initial_rebalance_delay, "group coordinator with Kafka's timing");
        tx
    });
    let cluster = Cluster::new(BrokerId::from(args.brokers));
    let (pending, wakes) = Default::default();
    let requests = Default::default();
    let (shown, rewinds) = (fetch::Shown::default(), Default::default());
    let shared = Arc::new(Shared {
        mock,
        cluster,
        advertised,
        pools: (0..args.brokers).map(|_| Default::default()).collect(),
        backends,
        pending,
        users,
        coordinator,
        wakes,
        shown,
        requests,
        rewinds,
    });
    for (broker, listener) in (1..).zip(listeners) {
        tokio::spawn(accept(listener, broker, shared.clone()));
    }
    if let Some(control) = control {
        let shared = shared.clone();
        tokio::spawn(async move { control.serve(shared).await });
    }

    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut down), Ok(mut up)) =
        (signal(SignalKind::terminate()), signal(SignalKind::user_defined1()), signal(SignalKind::user_defined2()))
    else {
        return Err(Error::Internal("cannot install signal handlers".into()));
    };
    loop {
        tokio::select! {
            _ = down.recv() => {
                for broker in (1..=shared.cluster.size).filter(|b| shared.cluster.is_up(*b)) {
                    control::down(&shared, broker);
                }
                info!("every broker down (SIGUSR1): connections closed, new ones refused until SIGUSR2");
            }
            _ = up.recv() => {
                let down: Vec<BrokerId> = (1..=shared.cluster.size).filter(|b| !shared.cluster.is_up(*b)).collect();
                for &broker in &down {
                    shared.mock.set_up(broker, true);
                    shared.cluster.set_up(broker, true);
                }
                if down.contains(&shared.cluster.coordinator()) {
                    if let Some(tx) = &shared.coordinator {
                        let _ = tx.send(group::Message::Load);
                    }
                }
                if !down.is_empty() {
                    info!("every broker up again (SIGUSR2), with their topics, offsets and groups");
                }
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
    info!("dev broker stopped");
    Ok(())
}

/// Accepts broker `broker`'s connections, refused while it is down (the
/// client sees the connection close).
async fn accept(listener: TcpListener, broker: BrokerId, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((_, peer)) if !shared.cluster.is_up(broker) => debug!(%peer, broker, "client refused: broker down"),
            Ok((client, peer)) => {
                debug!(%peer, broker, "client connected");
                tokio::spawn(forward(client, peer, broker, shared.clone()));
            }
            Err(err) => debug!(%err, "accept failed"),
        }
    }
}
