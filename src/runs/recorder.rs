//! The recorder: a thread of its own that makes the runs topic and writes
//! the records the shell's loop queues for it.
//!
//! The loop's side is a bounded queue (`QUEUE` records) and `try_send`: a
//! full queue drops the record, counted, and the loop never waits. The
//! thread makes the topic as a member makes the group's (metadata first,
//! CreateTopics when missing, replication by the broker's default, one
//! partition, `RETENTION_MS`), keeps the queue waiting while Kafka is
//! unreachable, and writes with a producer of its own, never the
//! heartbeats' (a slow write here cannot hold up a heartbeat). A record
//! lost (queue full, write refused or timed out, topic not creatable) is
//! counted and logged once, with what to do about it; the next record
//! written says how many were lost meanwhile.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use tracing::{debug, error, info, warn};

use super::{topic_of, RunRecord, RETENTION_MS};
use crate::config::Target;
use crate::kafka::heartbeat::Member;
use crate::kafka::topic::{self, Created};
use crate::printable::printable;

/// How many records may wait for the recorder: a crontab's jobs due
/// together start and end together, and a broker down for a while holds
/// them all. Past it, records are dropped and counted.
const QUEUE: usize = 1024;

/// The loop's handle on the recorder's thread.
pub struct Recorder {
    queue: Option<SyncSender<RunRecord>>,
    shared: Arc<Shared>,
    /// Said by the thread when it has written (or given up on) everything.
    done: Option<Receiver<()>>,
}

/// What the loop and the thread both see.
struct Shared {
    /// Records lost since the member started (/metrics shows it).
    lost: Arc<AtomicU64>,
    /// Whether the last record's fate was a loss: a loss is logged when
    /// this turns true, a write when it turns false again.
    failing: AtomicBool,
    /// Records queued and not yet written or lost.
    pending: AtomicU64,
    /// The member is done: the thread writes what it holds and ends.
    closed: AtomicBool,
}

impl Shared {
    /// One record is lost, because `why`: said once per stretch of losses.
    fn lose(&self, why: &str) {
        let lost = self.lost.fetch_add(1, Ordering::Relaxed) + 1;
        self.settle();
        if !self.failing.swap(true, Ordering::Relaxed) {
            warn!(lost, "a run's record could not be written to the runs topic: {why}. The run itself is not affected (recording is best effort); further losses are counted, not logged, until a record is written again");
        }
    }

    /// One record is on the topic.
    fn written(&self) {
        self.settle();
        if self.failing.swap(false, Ordering::Relaxed) {
            info!(lost = self.lost.load(Ordering::Relaxed), "runs are recorded again");
        }
    }

    fn settle(&self) {
        let _ = self.pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

impl Recorder {
    /// Starts the thread that records the runs of `member` in `target`'s
    /// group. It makes the runs topic first; until then records wait.
    pub fn start(target: &Target, member: &Member, lost: Arc<AtomicU64>) -> Recorder {
        let (queue, records) = sync_channel(QUEUE);
        let (done_tx, done) = sync_channel(1);
        let shared = Arc::new(Shared {
            lost,
            failing: AtomicBool::new(false),
            pending: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        });
        let thread = Thread {
            target: target.clone(),
            topic: topic_of(&target.topic),
            client_id: format!("{}-runs", member.name),
            shared: shared.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        };
        let started = std::thread::Builder::new().name("neli-runs".into()).spawn(move || {
            thread.serve(&records);
            let _ = done_tx.send(());
        });
        match started {
            Ok(_) => Recorder { queue: Some(queue), shared, done: Some(done) },
            Err(err) => {
                error!(%err, "cannot start the thread that records runs; runs go unrecorded");
                Recorder { queue: None, shared, done: None }
            }
        }
    }

    /// Queues `record` for the thread; never waits (a full queue loses it).
    pub fn record(&self, record: RunRecord) {
        self.shared.pending.fetch_add(1, Ordering::Relaxed);
        let Some(queue) = &self.queue else { return self.shared.lose("the recorder's thread did not start") };
        match queue.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.shared.lose(&format!("{QUEUE} records already wait to be written")),
            Err(TrySendError::Disconnected(_)) => self.shared.lose("the recorder's thread has stopped"),
        }
    }

    /// Closes the queue and waits up to `within` for the thread to write
    /// what it holds and end, its producer destroyed with it: librdkafka's
    /// threads must be gone before the member exits (a client destroyed
    /// while exit's handlers run can corrupt the heap), even when nothing
    /// is left to write.
    pub async fn finish(mut self, within: Duration) {
        self.queue = None;
        let lost = self.shared.lost.load(Ordering::Relaxed);
        if lost > 0 {
            warn!(lost, "run records lost since this member started (not on the runs topic)");
        }
        // Said once the wait is over, not before: a thread still making
        // the topic goes on until then.
        let _closed = Closed(&self.shared);
        let Some(done) = self.done.take() else { return };
        let waited = tokio::task::spawn_blocking(move || done.recv_timeout(within).is_ok()).await;
        let pending = self.shared.pending.load(Ordering::Relaxed);
        if !matches!(waited, Ok(true)) && pending > 0 {
            warn!(pending, wait = ?within, "exiting with run records not yet written to the runs topic");
        }
    }
}

/// Tells the thread, when dropped, that the member is done waiting for it.
struct Closed<'a>(&'a Shared);

impl Drop for Closed<'_> {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Relaxed);
    }
}

/// The recorder's thread: its own producer, and the topic it writes.
struct Thread {
    target: Target,
    topic: String,
    client_id: String,
    shared: Arc<Shared>,
    /// The runtime the member runs on, for the admin client's one request.
    runtime: Option<tokio::runtime::Handle>,
}

/// What a look at the runs topic found.
enum Look {
    Ready,
    /// Made just now (by us or another member).
    Created,
    NotYet,
}

/// How long one look at the topic's metadata may take, and the pause
/// between two while Kafka does not answer.
const LOOK: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_secs(1);

/// How long the thread writes what it holds once the member is done.
const FLUSH: Duration = Duration::from_secs(3);

impl Thread {
    fn serve(self, records: &Receiver<RunRecord>) {
        let config = self.target.client_config(&[
            ("client.id", &self.client_id),
            // The topic is made here, with its retention, not by the broker.
            ("allow.auto.create.topics", "false"),
            ("linger.ms", "5"),
            ("message.timeout.ms", "60000"),
            ("queue.buffering.max.messages", "10000"),
        ]);
        let producer: BaseProducer<Context> = match config.create_with_context(Context { shared: self.shared.clone() })
        {
            Ok(producer) => producer,
            Err(err) => return self.give_up(records, &format!("no producer for the runs topic: {err}")),
        };
        loop {
            match self.ensure_topic(&producer) {
                Ok(Look::Ready) => break,
                Ok(_) if self.shared.closed.load(Ordering::Relaxed) => {
                    return self.give_up(records, "Kafka did not answer before the member exited")
                }
                // Made just now: there in a moment.
                Ok(Look::Created) => std::thread::sleep(Duration::from_millis(50)),
                Ok(Look::NotYet) => std::thread::sleep(RETRY),
                Err(why) => {
                    error!("{why}");
                    return self.give_up(records, &why);
                }
            }
        }
        loop {
            // Idle, the thread sleeps until a record comes; while records
            // are in flight it wakes every 10 ms for their delivery reports.
            let next = match producer.in_flight_count() {
                0 => records.recv().map_err(|_| RecvTimeoutError::Disconnected),
                _ => records.recv_timeout(Duration::from_millis(10)),
            };
            match next {
                Ok(record) => self.send(&producer, &record),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            producer.poll(Duration::ZERO);
        }
        if crate::kafka::flush(&producer, FLUSH).is_err() {
            warn!(in_flight = producer.in_flight_count(), "run records still unwritten at exit");
        }
    }

    /// Writes one record, keyed by its run's id.
    fn send(&self, producer: &BaseProducer<Context>, record: &RunRecord) {
        let payload = match serde_json::to_vec(record) {
            Ok(payload) => payload,
            Err(err) => return self.shared.lose(&format!("cannot encode it: {err}")),
        };
        let sent = producer.send(BaseRecord::<str, [u8]>::to(&self.topic).key(&record.run).payload(&payload));
        if let Err((err, _)) = sent {
            self.shared.lose(&format!("the producer refused it: {err}"));
        }
    }

    /// Counts every record still to come as lost, `why`, until the member
    /// is done.
    fn give_up(&self, records: &Receiver<RunRecord>, why: &str) {
        // Said already, once: the losses to come are counted only.
        self.shared.failing.store(true, Ordering::Relaxed);
        for _ in records.iter() {
            self.shared.lose(why);
        }
    }

    /// Whether the runs topic is there; creates it when missing. Err says
    /// why it never will be.
    fn ensure_topic(&self, producer: &BaseProducer<Context>) -> Result<Look, String> {
        let metadata = match producer.client().fetch_metadata(Some(&self.topic), LOOK) {
            Ok(metadata) => metadata,
            Err(err) => {
                if let Some(fatal) = err.rdkafka_error_code().and_then(|code| self.fatal(code)) {
                    return Err(fatal);
                }
                debug!(%err, "runs topic: Kafka does not answer yet");
                return Ok(Look::NotYet);
            }
        };
        let Some(topic) = metadata.topics().iter().find(|t| t.name() == self.topic) else { return Ok(Look::NotYet) };
        match topic.error().map(RDKafkaErrorCode::from) {
            None if !topic.partitions().is_empty() => Ok(Look::Ready),
            None | Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::LeaderNotAvailable) => {
                self.create()
            }
            Some(code) => self.fatal(code).map_or(Ok(Look::NotYet), Err),
        }
    }

    /// Creates the runs topic: one partition, `RETENTION_MS`.
    fn create(&self) -> Result<Look, String> {
        let Some(runtime) = &self.runtime else { return Err("no runtime to create the runs topic on".into()) };
        info!(topic = %self.topic, "creating the runs topic (7 days retention)");
        let admin: AdminClient<rdkafka::client::DefaultClientContext> =
            self.target.client_config(&[("client.id", &self.client_id)]).create().map_err(|e| e.to_string())?;
        let retention = RETENTION_MS.to_string();
        let configs = [("retention.ms", retention.as_str()), ("segment.ms", "86400000")];
        match topic::create(&admin, runtime, &self.topic, 1, &configs) {
            Created::Made => Ok(Look::Created),
            Created::Denied(code) => Err(format!(
                "runs are not recorded: {}; the command runs as before",
                topic::may_not_create(&self.topic, code, 1, RETENTION_MS)
            )),
            Created::Refused(code) => {
                // Kafka may answer for a moment (a controller moving): the
                // next look tries again.
                warn!(topic = %self.topic, %code, "could not create the runs topic; trying again");
                Ok(Look::NotYet)
            }
        }
    }

    /// What to say when `code` means the runs topic can never be used.
    fn fatal(&self, code: RDKafkaErrorCode) -> Option<String> {
        is_denied(code).then(|| denied(&self.topic, code))
    }
}

/// Whether `code` is an authentication or authorization failure.
fn is_denied(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode::*;
    matches!(
        code,
        Authentication
            | SaslAuthenticationFailed
            | TopicAuthorizationFailed
            | ClusterAuthorizationFailed
            | GroupAuthorizationFailed
    )
}

/// Kafka refused us the runs topic, and the ACL that lets a member use it.
fn denied(topic: &str, code: RDKafkaErrorCode) -> String {
    format!(
        "runs are not recorded: Kafka denied access to topic {t} ({code}). A member needs DESCRIBE and WRITE on it \
         (and CREATE while it does not exist): kafka-acls.sh --add --allow-principal User:... --operation Write \
         --operation Describe --topic {t}; the command runs as before",
        t = printable(topic)
    )
}

/// The recorder's producer's context: librdkafka's chatter at debug level,
/// each record's fate counted.
struct Context {
    shared: Arc<Shared>,
}

impl ClientContext for Context {
    fn log(&self, _: RDKafkaLogLevel, fac: &str, message: &str) {
        debug!(target: "librdkafka", "runs: {fac} {message}");
    }

    fn error(&self, err: KafkaError, reason: &str) {
        debug!(target: "librdkafka", %err, "runs: {reason}");
    }
}

impl ProducerContext for Context {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => self.shared.written(),
            Err((err, msg)) => {
                let topic = rdkafka::message::Message::topic(msg);
                match err.rdkafka_error_code().filter(|&code| is_denied(code)) {
                    Some(code) => self.shared.lose(&denied(topic, code)),
                    None => self.shared.lose(&format!("{err}")),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: u64) -> RunRecord {
        let json = format!(
            r#"{{"v":1,"run":"t-{n}","event":"start","group":"g","topic":"g.neli","role":0,"member":"m","host":"h","pid":1,"token":1,"start_ms":1}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    /// Kafka never answers (a closed port): the recorder's thread keeps
    /// looking for the topic, the queue fills, and the record past it is
    /// dropped and counted, with no wait on the caller's side.
    #[test]
    fn a_full_queue_drops_and_counts_and_the_caller_never_waits() {
        let target = Target {
            brokers: "127.0.0.1:9".into(),
            group: "g".into(),
            topic: "g.neli".into(),
            properties: Vec::new(),
            origins: Vec::new(),
        };
        let recorder = Recorder::start(&target, &Member::this_process("m".into()), Default::default());
        let began = std::time::Instant::now();
        for n in 0..=QUEUE as u64 {
            recorder.record(record(n));
        }
        assert!(began.elapsed() < Duration::from_secs(1), "queuing took {:?}", began.elapsed());
        assert_eq!(recorder.shared.lost.load(Ordering::Relaxed), 1);
        assert!(recorder.shared.failing.load(Ordering::Relaxed), "the loss is said");
        assert_eq!(recorder.shared.pending.load(Ordering::Relaxed), QUEUE as u64);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let began = std::time::Instant::now();
        runtime.block_on(recorder.finish(Duration::from_millis(200)));
        assert!(began.elapsed() < Duration::from_secs(2), "finish is bounded: {:?}", began.elapsed());
    }
}
