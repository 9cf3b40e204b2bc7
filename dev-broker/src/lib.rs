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
//! SIGUSR1 and SIGUSR2 take the broker down and up again, as a Kafka broker
//! restarting over its log: while down every connection is closed and new
//! ones are refused; once up, topics, offsets and groups are as they were.
//!
//! The parts: [`mock`] (the mock cluster and its hidden listener), [`relay`]
//! (one client connection: requests routed, responses edited),
//! [`mock_groups`] (what group requests to the mock need), [`group`]
//! (Kafka's group coordinator, with Kafka's timing), [`topics`] (topic
//! creation as Kafka does it), [`sasl`] (the login) and [`wire`] (the few
//! pieces of the wire format they read and write).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::{debug, info};

mod group;
mod mock;
mod mock_groups;
mod relay;
mod sasl;
mod topics;
mod wire;

use mock::{Backend, Mock};
use relay::{forward, Shared};

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

/// Serves on `listen` until SIGINT or SIGTERM: the listener (accepting
/// while the broker is up) and the signals that take it down and up.
async fn serve(listen: SocketAddr, advertised: &str, args: &Options, users: Option<sasl::Users>) -> Result<(), Error> {
    let listener = TcpListener::bind(listen).await.map_err(|err| {
        Error::Usage(format!("cannot listen on {listen}: {err} (another dev broker running? pick another --listen)"))
    })?;
    let mock = Mock::start(advertised, &args.deny_topic, args.partitions)
        .map_err(|err| Error::Internal(format!("cannot start the mock cluster: {err}")))?;
    let mut backend = Backend::hide(&mock)?;
    info!(%listen, "dev broker ready: use --brokers {advertised} (in memory, one broker; Ctrl-C stops it)");
    if let Some(users) = &users {
        let names: Vec<&str> = users.0.keys().map(String::as_str).collect();
        info!(users = ?names, mechanisms = ?sasl::MECHANISMS, "SASL required (security.protocol=SASL_PLAINTEXT)");
    }
    let coordinator = (args.group_coordinator == GroupCoordinator::Kafka).then(|| {
        let tx = group::spawn(args.initial_rebalance_delay);
        info!(initial_rebalance_delay = ?args.initial_rebalance_delay, "group coordinator with Kafka's timing");
        tx
    });
    let shared = Arc::new(Shared { mock, pending: Default::default(), users, coordinator });

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
                    tokio::spawn(forward(client, peer, backend.inner.clone(), shared.clone()));
                }
                Err(err) => debug!(%err, "accept failed"),
            },
            _ = down.recv() => if std::mem::replace(&mut is_up, false) {
                backend.down(&shared.mock);
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
    drop(backend);
    info!("dev broker stopped");
    Ok(())
}
