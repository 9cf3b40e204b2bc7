//! `neli-run dev-broker`: librdkafka's in-memory mock cluster behind a fixed
//! address, so neli-run can be tried and tested with nothing installed.
//!
//! The mock binds a random port; we create it with one broker, advertise the
//! `--listen` address for that broker, and forward the listen port to the
//! mock's. The forwarder also reads the Metadata requests passing through
//! and creates each topic they name with ONE partition first: the mock does
//! not implement CreateTopics and would auto-create four partitions, and a
//! member joining a four-partition group can take partition 0 from a leader.

use std::ffi::{CStr, CString};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;

use rdkafka::config::ClientConfig;
use rdkafka::producer::BaseProducer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, error, info};

use crate::cli::DevBrokerArgs;
use crate::exit;
use crate::kafka::Quiet;

/// The raw mock cluster handle. The mock's API posts operations to its own
/// thread, so calling it from any thread is safe.
struct Mock {
    raw: *mut rdkafka_sys::rd_kafka_mock_cluster_t,
    _owner: BaseProducer<Quiet>,
}
unsafe impl Send for Mock {}
unsafe impl Sync for Mock {}

impl Mock {
    fn create_topic(&self, topic: &str) {
        let Ok(name) = CString::new(topic) else {
            return;
        };
        // SAFETY: `raw` lives as long as `_owner`; the name is a valid C string.
        let err = unsafe { rdkafka_sys::rd_kafka_mock_topic_create(self.raw, name.as_ptr(), 1, 1) };
        if err == rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            info!(topic, "created topic (1 partition)");
        }
    }
}

/// Runs the dev broker until SIGINT or SIGTERM.
pub fn main(args: DevBrokerArgs) -> ExitCode {
    let listen = match args.listen.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(addr)) => addr,
        _ => {
            error!(listen = %args.listen, "--listen must be HOST:PORT, e.g. 127.0.0.1:9092");
            return ExitCode::from(exit::USAGE);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(err) => {
            error!(%err, "cannot start the runtime");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let advertised = args.advertise.as_deref().unwrap_or(&args.listen);
    runtime.block_on(serve(listen, advertised, &args.deny_topic))
}

async fn serve(listen: SocketAddr, advertised: &str, denied: &[String]) -> ExitCode {
    let listener = match TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(err) => {
            error!(%listen, %err, "cannot listen (another dev broker running? pick another --listen)");
            return ExitCode::from(exit::USAGE);
        }
    };
    let mock = match start_mock(advertised, denied) {
        Ok(mock) => Arc::new(mock),
        Err(err) => {
            error!(%err, "cannot start the mock cluster");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    // SAFETY: the handle is valid; the returned string is owned by the mock.
    let inner = unsafe { CStr::from_ptr(rdkafka_sys::rd_kafka_mock_cluster_bootstraps(mock.raw)) }
        .to_string_lossy()
        .into_owned();
    let Some(inner) = inner.split(',').next().and_then(|a| a.to_socket_addrs().ok()?.next()) else {
        error!(%inner, "the mock cluster gave no usable address");
        return ExitCode::from(exit::INTERNAL);
    };
    info!(%listen, "dev broker ready: use --brokers {advertised} (in memory, one broker; Ctrl-C stops it)");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    debug!(%peer, "client connected");
                    tokio::spawn(forward(client, inner, mock.clone()));
                }
                Err(err) => debug!(%err, "accept failed"),
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => break,
        }
    }
    info!("dev broker stopped");
    ExitCode::SUCCESS
}

fn start_mock(advertised: &str, denied: &[String]) -> Result<Mock, String> {
    let (host, port) = advertised.rsplit_once(':').ok_or("no port")?;
    let port: i32 = port.parse().map_err(|_| "bad port")?;
    let owner: BaseProducer<Quiet> =
        ClientConfig::new().set("test.mock.num.brokers", "1").create_with_context(Quiet).map_err(|e| e.to_string())?;
    // SAFETY: the producer was created with a mock cluster, which it owns.
    let raw =
        unsafe { rdkafka_sys::rd_kafka_handle_mock_cluster(rdkafka::producer::Producer::client(&owner).native_ptr()) };
    if raw.is_null() {
        return Err("librdkafka created no mock cluster".into());
    }
    let host = CString::new(host.trim_matches(['[', ']'])).map_err(|_| "bad host")?;
    // SAFETY: valid handle and C string; broker 1 exists.
    unsafe {
        rdkafka_sys::rd_kafka_mock_broker_set_host_port(raw, 1, host.as_ptr(), port);
        // Real brokers wait 3s for more members before the first rebalance;
        // for trying things out, starting at once is nicer.
        rdkafka_sys::rd_kafka_mock_group_initial_rebalance_delay_ms(raw, 0);
    }
    for topic in denied {
        let name = CString::new(topic.as_str()).map_err(|_| "bad topic name")?;
        // SAFETY: valid handle and C string.
        unsafe {
            rdkafka_sys::rd_kafka_mock_topic_set_error(
                raw,
                name.as_ptr(),
                rdkafka_sys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
            );
        }
        info!(topic, "denying access to topic");
    }
    Ok(Mock { raw, _owner: owner })
}

async fn forward(mut client: TcpStream, inner: SocketAddr, mock: Arc<Mock>) {
    let Ok(mut broker) = TcpStream::connect(inner).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = broker.set_nodelay(true);
    let (mut client_rx, mut client_tx) = client.split();
    let (mut broker_rx, mut broker_tx) = broker.split();
    let requests = async {
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = client_rx.read(&mut chunk).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
            buf.extend_from_slice(&chunk[..n]);
            // Look at each complete request, then pass the bytes on as they are.
            let mut at = 0;
            while let Some(len) = buf.get(at..at + 4).map(|b| u32::from_be_bytes(b.try_into().unwrap()) as usize) {
                let Some(frame) = buf.get(at + 4..at + 4 + len) else {
                    break;
                };
                for topic in metadata_topics(frame) {
                    mock.create_topic(&topic);
                }
                at += 4 + len;
            }
            broker_tx.write_all(&buf[..at]).await?;
            buf.drain(..at);
        }
    };
    let responses = tokio::io::copy(&mut broker_rx, &mut client_tx);
    // Whichever side closes first closes both. A client that hung up gets
    // no more responses, and the mock must see the close before the client's
    // next connection: with a JoinGroup response still pending on the old
    // one, a JoinGroup on the new one fails an assertion in the mock.
    tokio::select! {
        _ = requests => {}
        _ = responses => {}
    }
}

/// The topic names of a Metadata request frame (without its length), or
/// nothing for any other request. Kafka's Metadata request is flexible
/// (compact strings, tagged fields) from version 9 and carries topic ids
/// from version 10.
fn metadata_topics(frame: &[u8]) -> Vec<String> {
    let mut r = Reader { buf: frame, at: 0 };
    (|| {
        let api_key = r.i16()?;
        let version = r.i16()?;
        if api_key != 3 {
            return None;
        }
        r.skip(4)?; // correlation id
        let client_id = r.i16()?;
        r.skip(client_id.max(0) as usize)?;
        let flexible = version >= 9;
        if flexible {
            r.tagged_fields()?;
        }
        let count = if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i32()?) };
        let mut topics = Vec::new();
        for _ in 0..count.max(0) {
            if version >= 10 {
                r.skip(16)?;
            }
            let len = if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i16()?) };
            if len >= 0 {
                topics.push(String::from_utf8_lossy(r.take(len as usize)?).into_owned());
            }
            if flexible {
                r.tagged_fields()?;
            }
        }
        Some(topics)
    })()
    .unwrap_or_default()
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.buf.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }
    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn uvarint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.take(1)?.first()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    fn tagged_fields(&mut self) -> Option<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.skip(size as usize)?;
        }
        Some(())
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
    fn reads_topics_of_a_flexible_metadata_request() {
        let mut f = header(12);
        f.push(0); // header tagged fields
        f.push(3); // two topics
        for name in ["a.neli", "b"] {
            f.extend_from_slice(&[0u8; 16]);
            f.push(name.len() as u8 + 1);
            f.extend_from_slice(name.as_bytes());
            f.push(0);
        }
        f.extend_from_slice(&[1, 0, 0]); // allow auto create, tagged fields
        assert_eq!(metadata_topics(&f), vec!["a.neli", "b"]);
    }

    #[test]
    fn reads_topics_of_a_classic_metadata_request() {
        let mut f = header(1);
        f.extend_from_slice(&1i32.to_be_bytes());
        f.extend_from_slice(&6i16.to_be_bytes());
        f.extend_from_slice(b"g.neli");
        assert_eq!(metadata_topics(&f), vec!["g.neli"]);
    }

    #[test]
    fn ignores_other_requests_all_topics_and_garbage() {
        let mut f = header(1);
        f[1] = 18; // ApiVersions
        assert!(metadata_topics(&f).is_empty());
        let mut all = header(12);
        all.extend_from_slice(&[0, 0]); // null array = all topics
        assert!(metadata_topics(&all).is_empty());
        assert!(metadata_topics(&[0, 3, 0]).is_empty());
    }
}
