//! The forwarder's side of one client connection: each request read, looked
//! at once (its header parsed, then handed by API key to whichever part
//! serves it) and answered here or passed on to the mock as it is; each of
//! the mock's responses edited where the forwarder changed what the mock
//! appears to serve, and passed back. A request is read only once the one
//! before is answered, as Kafka mutes a connection until its request is
//! answered; a Fetch is parked here as Kafka parks it ([`fetch`]). What goes
//! to the mock goes over the client's link ([`crate::mock_link`]).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::cluster::{BrokerId, Cluster};
use crate::mock::{Backend, Inner, Mock};
use crate::mock_groups::Pending;
use crate::mock_link::{self, Link, Pool};
use crate::requests::Requests;
use crate::rewinds::Rewinds;
use crate::wire::{self, Header, API_VERSIONS, CREATE_TOPICS, FETCH, METADATA, PRODUCE};
use crate::{fetch, group, partitions, sasl, topics};

/// What every forwarded connection shares.
pub struct Shared {
    pub mock: Mock,
    /// Which brokers are up, who leads, who coordinates, who is cut off.
    pub cluster: Cluster,
    /// Each broker's address as clients know it, by id - 1.
    pub advertised: Vec<(String, u16)>,
    /// Each broker's way into the mock, by id - 1.
    pub backends: Vec<std::sync::Mutex<Backend>>,
    /// Each broker's mock connections that its clients share, by id - 1
    /// (when the forwarder coordinates the groups: [`mock_link`]).
    pub pools: Vec<Pool>,
    pub pending: Pending,
    /// With --sasl-user: the users who may log in; nobody else gets through.
    pub users: Option<sasl::Users>,
    /// With --group-coordinator kafka: where group requests go instead of
    /// the mock.
    pub coordinator: Option<group::CoordinatorTx>,
    /// What wakes the parked fetches: writes, and leaders moved.
    pub wakes: fetch::Wakes,
    /// The record batches the mock has shown the parked fetches.
    pub shown: fetch::Shown,
    /// Every request received, by client.id and API (`requests` on the
    /// control socket).
    pub requests: Requests,
    /// The fetches to answer out of range (`rewind` on the control socket).
    pub rewinds: Rewinds,
}

impl Shared {
    /// Creates a topic in the mock, its partitions' leaders spread over the
    /// brokers up.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), (i16, String)> {
        self.mock_awake(|| {
            let partitions = self.mock.partitions(partitions);
            let leaders = self.cluster.create(topic, partitions, || self.mock.create_topic(topic, partitions))?;
            // The mock would place some on the spare broker.
            for (p, leader) in (0..).zip(leaders) {
                if let Err(err) = self.mock.set_leader(topic, p, Some(leader).filter(|l| *l > 0)) {
                    warn!(topic, partition = p, leader, %err, "the mock did not take the partition's leader");
                }
            }
            Ok(())
        })
    }

    /// Raises a topic's partitions to `count` (checked by the caller: more
    /// than it has, within the mock's room), their leaders spread as a new
    /// topic's are.
    pub fn add_partitions(&self, topic: &str, count: i32) -> Result<(), (i16, String)> {
        self.mock_awake(|| {
            for (p, leader) in self.cluster.grow(topic, count) {
                if let Err(err) = self.mock.set_leader(topic, p, Some(leader).filter(|l| *l > 0)) {
                    warn!(topic, partition = p, leader, %err, "the mock did not take the partition's leader");
                }
            }
        });
        tracing::info!(topic, partitions = count, "added partitions");
        Ok(())
    }

    /// Runs `ops` (calls into the mock, each an operation its thread
    /// serves, one after the other) while knocking on the mock every few
    /// milliseconds: the mock loses the wake-up of an operation queued
    /// while it serves the one before (rd_kafka_mock_cluster_io_poll serves
    /// its queue, then empties its wake-up pipe), and serves it at its next
    /// poll, up to a second later (seen: one CreateTopics in 20 answered
    /// after 1.0 s, a member's start with it). A connection to one of its
    /// brokers ends that poll.
    fn mock_awake<T: Send>(&self, ops: impl FnOnce() -> T + Send) -> T {
        let (done, result) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(move || done.send(ops()));
            loop {
                match result.recv_timeout(KNOCK) {
                    Ok(result) => return result,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => self.knock(),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        panic!("the mock's operations panicked")
                    }
                }
            }
        })
    }

    /// Connects to the first of the mock's brokers that answers, and
    /// leaves: its poll wakes to accept.
    fn knock(&self) {
        for backend in &self.backends {
            let inner = backend.lock().unwrap_or_else(|e| e.into_inner()).inner.clone();
            let knocked = match inner {
                Inner::Tcp(addr) => std::net::TcpStream::connect_timeout(&addr, KNOCK).is_ok(),
                Inner::Unix(path) => std::os::unix::net::UnixStream::connect(path).is_ok(),
            };
            if knocked {
                return;
            }
        }
    }
}

/// How long an operation of the mock's may take before it is knocked on
/// (`Shared::mock_awake`).
const KNOCK: std::time::Duration = std::time::Duration::from_millis(5);

/// Relays one client connection to the mock's `broker` until either side
/// closes.
pub async fn forward(client: TcpStream, peer: SocketAddr, broker: BrokerId, shared: Arc<Shared>) {
    let at = broker as usize - 1;
    let link = if shared.coordinator.is_some() {
        let downs = shared.cluster.downs(broker);
        Link::Shared { pool: &shared.pools[at], backend: &shared.backends[at], downs }
    } else {
        match mock_link::connect(&shared.backends[at], broker, &shared.cluster).await {
            Some(conn) => Link::Own(conn),
            None => return,
        }
    };
    relay(client, peer, broker, link, &shared).await
}

/// Serves one client connection as Kafka does, one request at a time: a
/// request is read only once the one before is answered (Kafka mutes a
/// connection meanwhile).
async fn relay(mut client: TcpStream, peer: SocketAddr, broker: BrokerId, mut link: Link<'_>, shared: &Shared) {
    let edits = Edits::default();
    // Its client.id, once its first request says it: a cut holds both ways.
    let client_id = std::sync::Mutex::new(None::<String>);
    let mut conn = Connection {
        shared,
        peer,
        broker,
        client_id: &client_id,
        id: shared.pending.connection(),
        login: Default::default(),
    };
    let id = conn.id;
    let _ = client.set_nodelay(true);
    let (client_rx, mut client_tx) = client.split();
    let mut client_rx = tokio::io::BufReader::new(client_rx);
    let cluster = &shared.cluster;
    let served = async {
        loop {
            let read = tokio::select! {
                read = read_frame(&mut client_rx, conn.limit()) => read,
                // A broker that goes down closes its connections.
                () = link.gone(broker, cluster) => return Ok(()),
            };
            let frame = match read {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    warn!(%peer, "closing the connection: the client {e}");
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let asked = match conn.route(&frame, &edits).await {
                Route::Forward => frame,
                Route::ForwardAs(other) => other,
                Route::Park(fetch) => {
                    let calls = Calls { link: &mut link, broker, cluster, client_id: &client_id };
                    match park(&fetch, calls, &shared.wakes, &shared.shown).await? {
                        Some(answer) => write_frame(&mut client_tx, &answer).await?,
                        None => return Ok(()),
                    }
                    continue;
                }
                Route::Answer(answer) => {
                    write_frame(&mut client_tx, &answer).await?;
                    continue;
                }
                Route::Refuse(answer) => return write_frame(&mut client_tx, &answer).await,
                Route::Close => return Ok(()),
            };
            // A client that hangs up meanwhile is not waited for: the mock
            // must see the close before the client's next connection (with
            // a JoinGroup answer still pending on the old one, a JoinGroup on
            // the new one fails an assertion in the mock).
            let answer = tokio::select! {
                answer = link.call(&asked, broker, cluster) => answer?,
                () = mock_link::closed(&mut client_rx) => return Ok(()),
            };
            let correlation = answer.get(..4).map(|c| i32::from_be_bytes(c.try_into().expect("4 bytes")));
            pass(cluster, &client_id, broker).await;
            write_frame(&mut client_tx, &edits.edit(shared, answer, correlation)).await?;
            if let Some(correlation) = correlation {
                if let Some(bytes) = edits.produces.lock().expect("lock").remove(&correlation) {
                    shared.wakes.wrote(bytes);
                }
                shared.pending.leave(id, Some(correlation));
            }
        }
    };
    let _: std::io::Result<()> = served.await;
    // Close the mock's side before a waiting request of the same member may
    // go out on another connection, and give the mock a moment to see the
    // close: its thread serves both sockets, and a request read before the
    // close aborts it just the same (seen in the soak, 1 in ~300 faults).
    drop(link);
    if shared.pending.holds(id) {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    shared.pending.leave(id, None);
}

/// Holds the mock's answer while a cut between the client and its broker
/// lasts, as the network would hold it.
async fn pass(cluster: &Cluster, client_id: &std::sync::Mutex<Option<String>>, broker: BrokerId) {
    let client = client_id.lock().expect("lock").clone();
    if let Some(client) = client {
        cluster.pass(&client, broker).await;
    }
}

/// What a parked fetch's probes go through: the client's link to the mock.
struct Calls<'l, 'a> {
    link: &'l mut Link<'a>,
    broker: BrokerId,
    cluster: &'l Cluster,
    client_id: &'l std::sync::Mutex<Option<String>>,
}

impl Calls<'_, '_> {
    /// The mock's answer to one probe, held while a cut lasts.
    async fn ask(&mut self, probe: &[u8]) -> std::io::Result<Vec<u8>> {
        let answer = self.link.call(probe, self.broker, self.cluster).await?;
        pass(self.cluster, self.client_id, self.broker).await;
        Ok(answer)
    }
}

/// Answers a parked Fetch as Kafka would ([`fetch`]): probes the mock (the
/// same request with MaxWaitMs 0) until what it has shown since the fetch
/// came is an answer Kafka would give now, probing again once the writes
/// since may have brought MinBytes (or a leader moved) and once more at the
/// deadline, MaxWaitMs from now (when Kafka would have the request: a cut
/// held it until now). The mock shows one batch of a partition a time:
/// each round probes past what it showed, and past the batches after it
/// that it showed before (`shown`), until it has shown everything there
/// ([`fetch::Gathered`]). The answer for the client; None if the mock's
/// side went away while it waited.
async fn park(
    fetch: &fetch::Parked,
    mut calls: Calls<'_, '_>,
    wakes: &fetch::Wakes,
    shown: &fetch::Shown,
) -> std::io::Result<Option<Vec<u8>>> {
    let deadline = Instant::now() + fetch.max_wait;
    let mut gathered = fetch.gathered();
    loop {
        // Read before the probes: a write or a move after them is one they
        // may have missed, and ends the wait at once.
        let mark = wakes.mark();
        let last = loop {
            let answer = calls.ask(&gathered.probe).await?;
            match fetch.take(&mut gathered, &answer, shown) {
                fetch::Step::AsItIs => return Ok(Some(answer)),
                fetch::Step::More if gathered.bytes < fetch::GATHER_BYTES => {}
                _ => break answer,
            }
        };
        if gathered.bytes >= fetch.wants || Instant::now() >= deadline {
            return Ok(Some(fetch.answer(&gathered, &last).unwrap_or(last)));
        }
        // Until the writes since may have brought MinBytes, a leader
        // moved, or the deadline; or the broker went down.
        let mut seen = mark;
        loop {
            tokio::select! {
                () = wakes.wait_past(seen, deadline) => {}
                () = calls.link.gone(calls.broker, calls.cluster) => return Ok(None),
            }
            seen = wakes.mark();
            if Instant::now() >= deadline || wakes.worth_a_look(mark, gathered.bytes, fetch.wants) {
                break;
            }
        }
    }
}

/// What to do with one request.
enum Route {
    /// Pass it on to the mock as it is.
    Forward,
    /// Pass this on to the mock instead.
    ForwardAs(Vec<u8>),
    /// Park it (a Fetch): see [`park`].
    Park(fetch::Parked),
    /// Answer it here.
    Answer(Vec<u8>),
    /// Answer it here, then close the connection (a refused login).
    Refuse(Vec<u8>),
    /// Close the connection without an answer.
    Close,
}

/// One client connection, as its requests see it.
struct Connection<'a> {
    shared: &'a Shared,
    peer: SocketAddr,
    /// The broker it reached.
    broker: BrokerId,
    /// Its client.id, from its first request on.
    client_id: &'a std::sync::Mutex<Option<String>>,
    /// Its number, for [`Pending`].
    id: u64,
    login: sasl::Login,
}

impl Connection<'_> {
    /// The largest request frame taken now.
    fn limit(&self) -> usize {
        match &self.shared.users {
            Some(_) if !self.login.done() => MAX_FRAME_BEFORE_LOGIN,
            _ => MAX_FRAME,
        }
    }

    /// Decides what to do with a request: its header read once, then the
    /// login, the ApiVersions fallback, and the part that serves its API.
    async fn route(&mut self, frame: &[u8], edits: &Edits) -> Route {
        let header = Header::parse(frame);
        if let Some(header) = &header {
            // Counted as received, before a cut holds it.
            self.shared.requests.count(&header.client_id, header.api_key);
            // A cut armed to fall at this request (`cut-at`).
            self.shared.cluster.cut_if_carries(&header.client_id, self.broker, frame);
            // Held while a cut lasts, as the network would hold it.
            self.shared.cluster.pass(&header.client_id, self.broker).await;
            self.client_id.lock().expect("lock").get_or_insert_with(|| header.client_id.clone());
        }
        if let Some(users) = self.shared.users.as_ref().filter(|_| !self.login.done()) {
            let Some(header) = &header else { return Route::Close };
            match self.login.step(users, header) {
                sasl::Step::Forward => {}
                sasl::Step::Reply(answer) => return Route::Answer(answer),
                sasl::Step::Refuse(answer) => {
                    debug!("SASL login refused; closing the connection");
                    return Route::Refuse(answer);
                }
                sasl::Step::Close => return Route::Close,
            }
        }
        // Read from the first 8 bytes alone: a version not known here may
        // lay out the rest of its header otherwise.
        if let Some(answer) = wire::api_versions_fallback(frame) {
            // KIP-511: the client retries with a version served here.
            debug!(peer = %self.peer, "ApiVersions above v{} answered UNSUPPORTED_VERSION", wire::API_VERSIONS_MAX);
            return Route::Answer(answer);
        }
        let Some(header) = header else { return Route::Forward };
        let mock = &self.shared.mock;
        match header.api_key {
            FETCH => {
                if let Some(rewound) = self.shared.rewinds.take(&header) {
                    return self.rewind(&header, rewound, edits);
                }
                if let Some(parked) = fetch::Parked::parse(&header) {
                    // A fetch for any record at all (MinBytes 1): a read-back.
                    if parked.wants == 1 {
                        let wait = i32::try_from(parked.max_wait.as_millis()).unwrap_or(i32::MAX);
                        self.shared.requests.fetch_wait(&header.client_id, wait);
                    }
                    return Route::Park(parked);
                }
            }
            PRODUCE => {
                _ = edits.produces.lock().expect("lock").insert(header.correlation, header.body.buf.len() as u64)
            }
            API_VERSIONS => *edits.api_versions.lock().expect("lock") = Some((header.correlation, header.version)),
            METADATA => {
                edits.metadata.lock().expect("lock").insert(header.correlation, header.version);
                // A denied topic is not created (Kafka checks CREATE first).
                for topic in topics::auto_created(&header).iter().filter(|t| !topics::denies(&mock.denied, t)) {
                    let _ = self.shared.create_topic(topic, 1);
                }
            }
            partitions::CREATE_PARTITIONS => {
                if let Some(request) = partitions::CreatePartitions::parse(&header) {
                    let cluster = &self.shared.cluster;
                    // --deny-topic, or an ALTER revoked (`deny-alter`).
                    let denied = |topic: &str| topics::denies(&mock.denied, topic) || cluster.alter_denied(topic);
                    let count = |topic: &str| cluster.partitions(topic);
                    let grow = |topic: &str, n| self.shared.add_partitions(topic, n);
                    return Route::Answer(request.answer(denied, count, grow));
                }
            }
            CREATE_TOPICS => {
                if let Some(request) = topics::CreateTopics::parse(&header) {
                    let create = |topic: &str, partitions| self.shared.create_topic(topic, partitions);
                    return Route::Answer(request.answer(&mock.denied, 1, self.shared.cluster.size, create));
                }
            }
            _ => {}
        }
        let Some(coordinator) = &self.shared.coordinator else {
            return match self.shared.pending.before_mock(&header, self.id).await {
                Some(answer) => Route::Answer(answer),
                None => Route::Forward,
            };
        };
        // One broker coordinates every group: it is the one named.
        let at = self.shared.cluster.coordinator();
        let (host, port) = &self.shared.advertised[at as usize - 1];
        if let Some(answer) = group::find_coordinator(&header, at, host, *port) {
            return Route::Answer(answer);
        }
        if let Some(mut request) = group::Request::parse(&header) {
            if at != self.broker {
                return Route::Answer(request.elsewhere());
            }
            request.host = format!("/{}", self.peer.ip());
            // As Kafka does, the connection takes its next request only
            // once this one is answered (a JoinGroup waits for the join).
            return group::ask(coordinator, request).await.map_or(Route::Close, Route::Answer);
        }
        Route::Forward
    }

    /// A Fetch some of whose partitions are answered out of range
    /// ([`crate::rewinds`]): Kafka answers an error at once, so the mock
    /// is asked with MaxWaitMs 0 (its answer for the others stands), and
    /// its answer is rewritten for those partitions.
    fn rewind(&self, header: &Header, rewound: Vec<fetch::Asked>, edits: &Edits) -> Route {
        for asked in &rewound {
            let topic = self.shared.rewinds.name(&asked.topic);
            let (partition, offset, client) = (asked.partition, asked.offset, &header.client_id);
            info!(
                "rewind: {client}'s fetch of partition {partition} of {topic} from offset {offset} answered OFFSET_OUT_OF_RANGE"
            );
        }
        let keys = rewound.into_iter().map(|a| a.key).collect();
        edits.rewound.lock().expect("lock").insert(header.correlation, (header.version, keys));
        match fetch::Parked::parse(header) {
            Some(parked) => Route::ForwardAs(parked.probe),
            None => Route::Forward,
        }
    }
}

/// The requests of one connection whose responses the forwarder edits, by
/// correlation id: noted as the requests go out, taken as the responses
/// come back.
#[derive(Default)]
struct Edits {
    /// The ApiVersions request (correlation id, version): its response
    /// offers SASL, CreateTopics and the group APIs served here.
    api_versions: std::sync::Mutex<Option<(i32, i16)>>,
    /// The Metadata requests (correlation id -> version): their responses
    /// must name the controller, and refuse the denied topics.
    metadata: std::sync::Mutex<std::collections::HashMap<i32, i16>>,
    /// The Produce requests, with their sizes: their responses wake the
    /// parked fetches (the mock has the records by then). The mock answers
    /// every Produce, one with acks 0 too (to which Kafka sends nothing).
    produces: std::sync::Mutex<std::collections::HashMap<i32, u64>>,
    /// The Fetch requests answered out of range for some partitions
    /// (correlation id -> version, partitions).
    rewound: std::sync::Mutex<std::collections::HashMap<i32, (i16, Vec<fetch::PartitionKey>)>>,
}

impl Edits {
    /// A response of the mock's, as the client gets it.
    fn edit(&self, shared: &Shared, mut frame: Vec<u8>, correlation: Option<i32>) -> Vec<u8> {
        let offer = self.api_versions.lock().expect("lock").filter(|(c, _)| Some(*c) == correlation);
        if let Some((_, version)) = offer {
            if shared.users.is_some() {
                frame = sasl::advertise(&frame, version).unwrap_or(frame);
            }
            let added = [topics::CREATE_TOPICS_VERSIONS, partitions::CREATE_PARTITIONS_VERSIONS];
            frame = wire::add_apis(&frame, version, &added).unwrap_or(frame);
            if shared.coordinator.is_some() {
                frame = group::cap_api_versions(&frame, version).unwrap_or(frame);
                frame = wire::add_apis(&frame, version, &group::ADDED).unwrap_or(frame);
            }
        }
        if let Some(version) = correlation.and_then(|c| self.metadata.lock().expect("lock").remove(&c)) {
            shared.rewinds.learn(&frame, version);
            frame = topics::name_controller(&frame, version).unwrap_or(frame);
            if let Some(spare) = shared.mock.spare {
                frame = topics::hide_broker(&frame, version, spare).unwrap_or(frame);
            }
            frame = topics::deny_topics(&frame, version, &shared.mock.denied).unwrap_or(frame);
            frame = partitions::trim(&frame, version, |topic| shared.cluster.partitions(topic)).unwrap_or(frame);
        }
        if let Some((version, keys)) = correlation.and_then(|c| self.rewound.lock().expect("lock").remove(&c)) {
            frame = fetch::out_of_range(&frame, version, &keys).unwrap_or(frame);
        }
        frame
    }
}

/// Writes one length-prefixed Kafka frame.
pub(crate) async fn write_frame(tx: &mut (impl AsyncWriteExt + Unpin), frame: &[u8]) -> std::io::Result<()> {
    tx.write_all(&(frame.len() as u32).to_be_bytes()).await?;
    tx.write_all(frame).await
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
pub(crate) async fn read_frame(rx: &mut (impl AsyncReadExt + Unpin), limit: usize) -> std::io::Result<Option<Vec<u8>>> {
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
