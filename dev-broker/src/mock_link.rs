//! How a client connection's requests reach the mock. librdkafka's mock
//! serves every connection on one thread and polls all of them at each
//! wake-up (`rd_kafka_mock_cluster_io_poll`), so its cost per request grows
//! with the connections it holds: with one mock connection per client
//! connection (five per member), a settled group of 200 cost the dev broker
//! 5 to 7 % of a core, most of it in `poll(2)`, where Kafka's epoll costs nothing
//! per idle connection. When the forwarder coordinates the groups itself
//! (the default), nothing left for the mock depends on which connection
//! carries it, so the clients of a broker share a few mock connections
//! ([`Pool`]), one request on each at a time. When the mock coordinates
//! (`--group-coordinator mock`), it keys members by connection and holds a
//! JoinGroup's answer on it: each client then keeps a mock connection of its
//! own ([`Link::Own`]).

use std::sync::Mutex;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::cluster::{BrokerId, Cluster};
use crate::mock::{Backend, Inner};
use crate::relay::{read_frame, write_frame};

/// A connection to one of the mock's brokers, over TCP or its back door.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// One mock connection, buffered for reading frames.
pub type MockConn = BufReader<Box<dyn Stream>>;

/// How long a client's relay tries to reach the mock's full listener.
const CONNECT_TRIES: std::time::Duration = std::time::Duration::from_secs(10);

/// Connects to the mock's `broker`, trying again while its unix listener's
/// backlog is full: librdkafka's mock listens with a backlog of 5 and
/// accepts on its one thread, so a burst of clients (a group of hundreds
/// started together) finds it full, where Kafka's would take them. Gives
/// up (None) if the broker goes down meanwhile or the mock refuses.
pub async fn connect(backend: &Mutex<Backend>, broker: BrokerId, cluster: &Cluster) -> Option<MockConn> {
    let inner = backend.lock().unwrap_or_else(|e| e.into_inner()).inner.clone();
    let stream: Box<dyn Stream> = match inner {
        Inner::Tcp(addr) => {
            let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
            let _ = stream.set_nodelay(true);
            Box::new(stream)
        }
        Inner::Unix(path) => {
            let until = tokio::time::Instant::now() + CONNECT_TRIES;
            loop {
                match tokio::net::UnixStream::connect(&path).await {
                    Ok(stream) => break Box::new(stream),
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock && tokio::time::Instant::now() < until => {
                        if !cluster.is_up(broker) {
                            return None;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    }
                    Err(err) => {
                        tracing::debug!(%err, broker, "the mock refused a connection");
                        return None;
                    }
                }
            }
        }
    };
    Some(BufReader::new(stream))
}

/// The mock connections the clients of one broker share, at most
/// [`POOL_SIZE`]: each call takes an idle one (or opens one) for its request
/// and its answer, and waits its turn while all are busy, as the mock serves
/// one request at a time on its one thread anyway (a call to the cold
/// members wakes every one's parked fetch at once: 200 probes, which would
/// otherwise open 200 connections and close them). Those opened before the
/// broker last went down are dead (the mock closed them) and are dropped
/// unused.
pub struct Pool {
    /// Idle connections, with the broker's count of downs when each opened.
    idle: Mutex<Vec<(u64, MockConn)>>,
    /// One per connection in use or idle.
    turns: tokio::sync::Semaphore,
}

/// The mock connections a broker's clients share.
const POOL_SIZE: usize = 8;

impl Default for Pool {
    fn default() -> Pool {
        Pool { idle: Mutex::default(), turns: tokio::sync::Semaphore::new(POOL_SIZE) }
    }
}

impl Pool {
    /// Sends one request to the mock's `broker` and returns its answer
    /// (the mock answers every request, a Produce with acks 0 too). An
    /// error if the mock could not be reached or closed the connection
    /// (its broker went down).
    pub async fn call(
        &self,
        frame: &[u8],
        backend: &Mutex<Backend>,
        broker: BrokerId,
        cluster: &Cluster,
    ) -> std::io::Result<Vec<u8>> {
        let _turn = self.turns.acquire().await.map_err(|_| unreachable())?;
        let downs = cluster.downs(broker);
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|(opened, _)| *opened == downs);
            idle.pop().map(|(_, conn)| conn)
        };
        let mut conn = match reused {
            Some(conn) => conn,
            None => connect(backend, broker, cluster).await.ok_or_else(unreachable)?,
        };
        let answer = exchange(&mut conn, frame).await?;
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).push((downs, conn));
        Ok(answer)
    }
}

/// Where one client connection's requests to the mock go.
pub enum Link<'a> {
    /// A mock connection of its own (the mock coordinates the groups).
    Own(MockConn),
    /// Its broker's shared connections, and the count of the broker's downs
    /// when the client connected.
    Shared { pool: &'a Pool, backend: &'a Mutex<Backend>, downs: u64 },
}

impl Link<'_> {
    /// Sends one request and returns the mock's answer.
    pub async fn call(&mut self, frame: &[u8], broker: BrokerId, cluster: &Cluster) -> std::io::Result<Vec<u8>> {
        match self {
            Link::Own(conn) => exchange(conn, frame).await,
            Link::Shared { pool, backend, downs } => {
                // Its broker went down since: the connection is closed, not
                // served by the broker's next life.
                if cluster.downs(broker) != *downs {
                    return Err(unreachable());
                }
                pool.call(frame, backend, broker, cluster).await
            }
        }
    }

    /// Returns once the mock's side of this link is gone, as a broker that
    /// went down closes its clients' connections: its own connection closed,
    /// or its broker went down since the client connected. Between requests
    /// only: nothing else comes on a link while none is in flight.
    pub async fn gone(&mut self, broker: BrokerId, cluster: &Cluster) {
        match self {
            // Data unasked for is not the mock's way: wait for the close.
            Link::Own(conn) => closed(conn).await,
            Link::Shared { downs, .. } => cluster.went_down(broker, *downs).await,
        }
    }
}

fn unreachable() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, "the mock's broker is down")
}

/// Writes one request frame and reads one answer frame on `conn`.
async fn exchange(conn: &mut MockConn, frame: &[u8]) -> std::io::Result<Vec<u8>> {
    write_frame(conn.get_mut(), frame).await?;
    read_frame(conn, usize::MAX).await?.ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into())
}

/// Returns once the other side of `rx` has closed (or the connection
/// failed); never once it has sent more, which waits to be read in its turn.
pub async fn closed(rx: &mut (impl tokio::io::AsyncBufRead + Unpin)) {
    if matches!(rx.fill_buf().await, Ok(buf) if !buf.is_empty()) {
        std::future::pending::<()>().await;
    }
}
