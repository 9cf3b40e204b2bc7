//! The two clients' contexts: what librdkafka calls back into. The
//! consumer's (`ReaderContext`) turns rebalances into events and holds the
//! revoke barrier (barrier.rs); the producer's (`WriterContext`) serves
//! delivery reports. Both route librdkafka's log and errors through `Reach`, which they share,
//! so that a change of reachability is logged once, not once per client.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, Producer, ProducerContext};
use rdkafka::Offset;
use tokio::sync::mpsc::UnboundedSender;
use tracing::{debug, info, warn};

use super::barrier::{seats_revoked, Barrier, Seats};
use super::consumer::Asks;
use super::heartbeat::{Heartbeat, Member};
use super::standby::Standby;
use super::{fatal, Event, Partition};
use crate::clock::BootTime;
use crate::exit::Failure;

/// What both clients report to: the events of the shell's loop, and whether Kafka
/// answers.
#[derive(Clone)]
pub(super) struct Reach {
    pub(super) events: UnboundedSender<Event>,
    pub(super) topic: String,
    pub(super) group: String,
    /// Shared by both clients, so that each change is logged once.
    unreachable: Arc<AtomicBool>,
    /// The first fatal error either client saw: connecting reads it here,
    /// since the shell's loop reads events only once connected (a wrong
    /// password would otherwise look like an unreachable broker forever).
    pub(super) fatal: Arc<Mutex<Option<Failure>>>,
    /// When the group last revoked a seat of ours, not lost (`BootTime`
    /// nanoseconds, 0 never): the rebalance that follows holds the reader.
    revoked_at: Arc<AtomicU64>,
    /// When a wake last made us subscribe to a topic that does not exist
    /// (`BootTime` nanoseconds, 0 never): the errors about it are not ours.
    woken_at: Arc<AtomicU64>,
    /// Where cold members' candidacies go: its errors are no member's end.
    pub(super) roster: Arc<super::roster::Roster>,
}

impl Reach {
    pub(super) fn new(events: UnboundedSender<Event>, topic: String, group: String) -> Reach {
        Reach {
            roster: Arc::new(super::roster::Roster::new(&topic)),
            events,
            topic,
            group,
            unreachable: Arc::default(),
            fatal: Arc::default(),
            revoked_at: Arc::default(),
            woken_at: Arc::default(),
        }
    }

    /// A wake subscribed us to a topic that does not exist, now.
    pub(super) fn woken(&self) {
        self.woken_at.store(BootTime::now().as_nanos(), Ordering::Relaxed);
    }

    /// Whether an error with `code` is about the topic a wake subscribed
    /// us to (librdkafka does not always say which topic an error is
    /// about): a missing or forbidden topic, while that subscription lasts
    /// and a little after. A true error about the group's topic recurs
    /// at the next write or fetch of it, and is heard then.
    pub(super) fn wake_error(&self, code: RDKafkaErrorCode) -> bool {
        use RDKafkaErrorCode::*;
        let woken = BootTime::from_nanos(self.woken_at.load(Ordering::Relaxed));
        matches!(code, UnknownTopicOrPartition | UnknownTopic | TopicAuthorizationFailed)
            && woken.as_nanos() != 0
            && BootTime::now().since(woken) < super::wake::WAKE_ERRORS
    }

    /// Whether Kafka answers, as the clients last heard.
    pub(super) fn is_reachable(&self) -> bool {
        !self.unreachable.load(Ordering::Relaxed)
    }

    pub(super) fn reachable(&self) {
        if self.unreachable.swap(false, Ordering::Relaxed) {
            info!("Kafka is reachable again");
        }
    }

    pub(super) fn unreachable(&self, reason: &str) {
        if !self.unreachable.swap(true, Ordering::Relaxed) {
            warn!(%reason, "Kafka unreachable; retrying (the command runs only with fresh heartbeats)");
        }
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str, quiet_conf_warnings: bool) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                debug!(target: "librdkafka", "{fac} {message}")
            }
            RDKafkaLogLevel::Warning if fac == "CONFWARN" && quiet_conf_warnings => {}
            RDKafkaLogLevel::Warning if fac == "CONFWARN" => {
                warn!(target: "librdkafka", "{message}")
            }
            _ => debug!(target: "librdkafka", "{fac} {message}"),
        }
    }

    fn error(&self, err: KafkaError, reason: &str) {
        let code = err.rdkafka_error_code();
        if code.is_some_and(|c| self.wake_error(c)) {
            debug!(%err, %reason, "about the topic a wake subscribed to: not ours");
            return;
        }
        if code.is_some_and(|c| self.roster.denied(c, reason)) {
            return;
        }
        if let Some(fatal) = code.and_then(|c| fatal(c, format!("{err}: {reason}"), &self.topic, &self.group)) {
            self.fatal.lock().expect("fatal lock").get_or_insert_with(|| fatal.clone());
            let _ = self.events.send(Event::Fatal(fatal));
            return;
        }
        match code {
            Some(RDKafkaErrorCode::AllBrokersDown)
            | Some(RDKafkaErrorCode::BrokerTransportFailure)
            | Some(RDKafkaErrorCode::Resolve) => self.unreachable(reason),
            // librdkafka's reason names the cause and the setting to fix
            // (e.g. "certificate verify failed ... ssl.ca.location").
            Some(RDKafkaErrorCode::SSL) => self.unreachable(&format!("TLS handshake failed: {reason}")),
            _ => debug!(%err, %reason, "librdkafka error"),
        }
    }
}

/// The consumer's context: it joins the group and reads the seats'
/// partitions.
pub(super) struct ReaderContext {
    pub(super) reach: Reach,
    /// `closing` is set when we leave: the revoke on close must not block.
    pub(super) asks: Arc<Asks>,
    /// The seats' partitions (`Settings::seats`).
    pub(super) seats: Seats,
    /// Whether "standby" was said in our current membership of the group
    /// since we last owned a seat's partition (standby.rs).
    pub(super) standby: Standby,
    /// A join has been done since we last subscribed (an assignment came):
    /// we are in a generation of the group. A wake is for such a member
    /// only: one still joining joins the rebalance anyway, and tansu
    /// wedged the first join of one whose subscription changed meanwhile.
    pub(super) joined: AtomicBool,
    /// How many records before the end a new owner starts reading: enough
    /// for every record of two writers over a heartbeat deadline and more.
    pub(super) backlog: i64,
    /// Our --heartbeat-deadline: assumed for records that do not carry one.
    pub(super) deadline: Duration,
    /// How often a member that owns no seat's partition asks librdkafka to
    /// serve the group (`consumer::standby_serve`).
    pub(super) standby_serve: Duration,
    /// The longest our seats write their heartbeats apart
    /// (`leader::Settings::idle_heartbeat`): a gap of two in our own
    /// heartbeats read back is said (`Gap`). A crontab's idle seat writes
    /// every third of the deadline, and each of its records read back was
    /// said as a gap, at every seat's every write.
    pub(super) interval: Duration,
    /// The seats' partitions whose assignment the consumer loop has yet to
    /// report, each true when it was newly added (its read position is
    /// then pinned first). Filled and emptied on the consumer thread (the
    /// callbacks run inside its polls): the lock is never contended.
    pub(super) assigned: Mutex<BTreeMap<Partition, bool>>,
    /// The end of each seat's partition when it was last assigned to us:
    /// records before it are the backlog, read for the claims in it, and a
    /// yield among the control partition's was meant for an earlier owner.
    pub(super) assigned_at: Mutex<BTreeMap<Partition, i64>>,
    /// The control partition's end when we started: a drain written from
    /// there on may name this process (`Decoder::drains_from`).
    pub(super) drains_from: std::sync::OnceLock<i64>,
    /// The control partition's first offset that neither the group's
    /// consumer nor the watcher has read (-1 before either has read one):
    /// where a reader that takes over from the other starts (`resume`), so
    /// that a drain or a wake written as the member leaves the group is
    /// read. From the end, one written in that moment was lost.
    pub(super) control_unread: AtomicI64,
    /// The seats' partitions a rebalance left us, whose fetchers the
    /// consumer loop has yet to wake (`wake_fetchers`). Consumer thread
    /// only, as `assigned`.
    pub(super) kept: Mutex<BTreeSet<Partition>>,
    /// The clients' `socket.timeout.ms`: how long a request of ours may go
    /// unanswered before librdkafka takes its connection down.
    pub(super) request_timeout: Duration,
    /// Per partition, the newest offset the group's consumer read since its
    /// read position was last pinned (`start_near_end`), and whether a read
    /// from before it was said: see `first_read`. Consumer thread only.
    pub(super) passed: Mutex<BTreeMap<Partition, (i64, bool)>>,
    /// The producer, once made: a new seat's end is asked on its
    /// connection (`start_near_end`), not ours, where a fetch the broker
    /// parks holds every later request for up to fetch.wait.max.ms.
    pub(super) ends_from: std::sync::OnceLock<std::sync::Weak<rdkafka::producer::BaseProducer<WriterContext>>>,
    /// How long our join has lasted, from librdkafka's statistics: one
    /// that never ends is nudged (nudge.rs).
    pub(super) join_watch: Mutex<super::nudge::JoinWatch>,
    /// The nudge's clients' configuration: of the group, never joining it.
    pub(super) nudge_config: rdkafka::ClientConfig,
}

/// How long pinning a new seat's read position may take, each step.
const PIN_WAIT: Duration = Duration::from_secs(2);

impl ReaderContext {
    /// Pins the read position of the seat's `partition` a little before its
    /// current end, before our first heartbeat there is written: far enough
    /// back to read the newest records of any other member that may still
    /// lead (a broker can hand the partition over while it does), near
    /// enough to lead after one fetch. The core leads on what it has read before its own first
    /// record, so a start past a claim would be unsafe: if the pin fails,
    /// reading starts at the beginning (`auto.offset.reset=earliest`), which
    /// is slower but skips nothing.
    ///
    /// librdkafka refuses a seek ("Erroneous state") until its own thread
    /// has taken the assignment in, which on a loaded machine can come after
    /// the rebalance callback returned (seen: one start in four with both
    /// cores busy): the seek is tried again meanwhile,
    /// for as long as the pin may take (a seek purges whatever was fetched
    /// from the beginning before it).
    ///
    /// The end is asked on the producer's connection: librdkafka may have
    /// sent our first fetch already, which finds nothing new and is parked
    /// by the broker for fetch.wait.max.ms, and a broker answers a
    /// connection's requests in order (Kafka mutes it meanwhile): asked on
    /// ours, the end came that late (250 ms, one yield in 25).
    pub(super) fn start_near_end(&self, consumer: &BaseConsumer<Self>, partition: Partition) {
        let topic = &self.reach.topic;
        let until = std::time::Instant::now() + PIN_WAIT;
        let left = || until.saturating_duration_since(std::time::Instant::now());
        let writer = self.ends_from.get().and_then(std::sync::Weak::upgrade);
        // A partition the producer does not know yet (a crontab's new
        // job's) is asked on ours, in what is left of the wait.
        let ends = writer
            .and_then(|producer| producer.client().fetch_watermarks(topic, partition, left()).ok())
            .map_or_else(|| consumer.fetch_watermarks(topic, partition, left()), Ok);
        let pinned = ends.and_then(|(low, end)| {
            self.assigned_at.lock().expect("assigned_at lock").insert(partition, end);
            let start = Offset::Offset((end - self.backlog).max(low));
            loop {
                match consumer.seek(topic, partition, start, PIN_WAIT) {
                    // rdkafka says the code in words only ("Erroneous state").
                    Err(KafkaError::Seek(_)) if std::time::Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    done => return done,
                }
            }
        });
        if let Err(err) = pinned {
            debug!(%err, partition, "could not pin the partition's start; reading it from the beginning");
        }
        // The backlog before the end is read again on purpose: the core
        // tells the records it has read already by their writers' counts.
        self.passed.lock().expect("passed lock").remove(&partition);
    }

    /// The seats' partitions in our assignment now (none if librdkafka
    /// cannot say).
    fn owned_seats(&self, consumer: &BaseConsumer<Self>) -> Vec<Partition> {
        let Ok(assignment) = consumer.assignment() else {
            return Vec::new();
        };
        self.seats.among(&assignment, &self.reach.topic)
    }

    /// Wakes the fetchers of the seats' partitions a rebalance kept ours.
    ///
    /// librdkafka pauses every partition we own while a rebalance callback
    /// is ours to serve and resumes them when it returns, but does not wake
    /// the thread of the partition's leader, which fetches again only once
    /// something else wakes it: a request of its own or its 1 s idle tick
    /// (`rd_kafka_max_block_ms`). On one broker the coordinator's traffic
    /// shares that thread; on a cluster a partition led elsewhere went
    /// unread for up to a second after each rebalance, and a role kept
    /// through a join whose revoked command took its whole `--grace` was
    /// fenced for nothing (the cluster soak's needless moves). A request
    /// for each one's end (ListOffsets, to its leader) is such a wake. It
    /// goes from a thread of its own: the broker answers it only after a
    /// fetch it holds on the same connection, and one that timed out would
    /// take the connection down (`socket.max.fails`), so it is given the
    /// clients' request timeout, which the consumer thread cannot wait.
    pub(super) fn wake_fetchers(&self, consumer: &Arc<BaseConsumer<Self>>) {
        let kept = std::mem::take(&mut *self.kept.lock().expect("kept lock"));
        if kept.is_empty() {
            return;
        }
        let mut ends = rdkafka::TopicPartitionList::new();
        for partition in kept {
            // Offset::End: the latest offset, as a timestamp of -1 asks.
            let _ = ends.add_partition_offset(&self.reach.topic, partition, Offset::End);
        }
        let (consumer, wait) = (Arc::downgrade(consumer), self.request_timeout);
        let woken = std::thread::Builder::new().name("neli-fetch-wake".into()).spawn(move || {
            // Not kept alive for this: a consumer gone has nothing to wake.
            if let Some(consumer) = consumer.upgrade() {
                if let Err(err) = consumer.offsets_for_times(ends, wait) {
                    debug!(%err, "asked for the kept partitions' ends to wake their fetchers: no answer");
                }
            }
        });
        if let Err(err) = woken {
            debug!(%err, "no thread to wake the kept partitions' fetchers: they fetch at librdkafka's next tick");
        }
    }

    /// The end of `partition` when it was last assigned to us (0 if never
    /// pinned: every record is then new).
    pub(super) fn assigned_at(&self, partition: Partition) -> i64 {
        self.assigned_at.lock().expect("assigned_at lock").get(&partition).copied().unwrap_or(0)
    }

    /// Notes that the record at `offset` of `partition` has been read (by
    /// the group's consumer or the watcher).
    pub(super) fn read(&self, partition: Partition, offset: i64) {
        if partition == super::CONTROL_PARTITION {
            self.control_unread.fetch_max(offset + 1, Ordering::Relaxed);
        }
    }

    /// Whether the group's consumer, reading the record at `offset` of
    /// `partition`, reads it for the first time: not at or before one it
    /// read since the partition's position was pinned. The core's safety
    /// rests on reading a partition in order (a new owner knows every claim
    /// written before its own first record once it reads that record back),
    /// so the read never goes back: a fetch answered out of range makes
    /// librdkafka start the partition over from its beginning
    /// (`auto.offset.reset`), and a broker may serve records out of order
    /// (R-1, on tansu). The records read again are skipped until the read
    /// passes the newest one; a log cut shorter meanwhile (a broker that
    /// lost it) then reads as silence, which fences a leader and gives the
    /// partition back, and the next assignment's pin reads it afresh.
    pub(super) fn first_read(&self, partition: Partition, offset: i64) -> bool {
        self.read(partition, offset);
        let mut passed = self.passed.lock().expect("passed lock");
        let (newest, said) = passed.entry(partition).or_insert((offset - 1, false));
        if offset > *newest {
            *newest = offset;
            return true;
        }
        if !std::mem::replace(said, true) {
            warn!(partition, offset, newest = *newest, "the partition is read again from an earlier offset (its read position was reset): the records read already are skipped");
        }
        false
    }

    /// Where a reader of the control partition starts: at the first record
    /// not read yet, or at the end before any was.
    pub(super) fn resume(&self) -> Offset {
        match self.control_unread.load(Ordering::Relaxed) {
            unread if unread >= 0 => Offset::Offset(unread),
            _ => Offset::End,
        }
    }

    /// Whether `assignment` holds a seat's partition.
    pub(super) fn holds_a_seat(&self, assignment: &rdkafka::TopicPartitionList) -> bool {
        !self.seats.among(assignment, &self.reach.topic).is_empty()
    }
}

impl ClientContext for ReaderContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.reach.log(level, fac, message, false);
    }

    fn error(&self, err: KafkaError, reason: &str) {
        self.reach.error(err, reason);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        if let (Some(state), Ok(mut watch)) = (super::nudge::join_state(statistics), self.join_watch.lock()) {
            watch.state(state, std::time::Instant::now());
        }
    }
}

impl ConsumerContext for ReaderContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            return;
        };
        let closing = || self.asks.closing();
        let revoked = seats_revoked(tpl, &self.reach.topic, &self.seats, closing());
        if revoked.is_empty() {
            return;
        }
        self.standby.owner();
        // An assignment made earlier in the same poll, not yet reported by
        // the consumer loop, is reported first: events keep their order.
        let mut assigned = self.assigned.lock().expect("assigned lock");
        for partition in &revoked {
            if assigned.remove(partition).is_some() {
                let _ = self.reach.events.send(Event::Assigned { partition: *partition });
            }
        }
        drop(assigned);
        let lost = consumer.assignment_lost();
        if !lost {
            self.reach.revoked_at.store(BootTime::now().as_nanos(), Ordering::Relaxed);
        }
        let mut barrier = Barrier::default();
        for partition in revoked {
            // Not sent: the event and its release are dropped, which
            // releases (the shell's loop is gone, and nothing runs).
            let release = barrier.hold(partition);
            let _ = self.reach.events.send(Event::Revoked { partition, lost, release });
        }
        // The barrier. It ends when the shell's loop says each revoked
        // seat's command is gone, or is gone itself, or when we leave.
        barrier.wait(closing);
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // A join whose rounds assign or revoke is moving, however long the
        // rebalance as a whole (tansu's, under load: 20 s and more). Never
        // a panic here: the lock is only ever held for a step of arithmetic.
        if let Ok(mut watch) = self.join_watch.lock() {
            watch.moved(std::time::Instant::now());
        }
        let owned = self.owned_seats(consumer);
        // For `wake_fetchers`: a new one's too, whose pin wakes its fetcher
        // anyway (one request more does no harm).
        self.kept.lock().expect("kept lock").extend(owned.iter().copied());
        match rebalance {
            Rebalance::Assign(added) => {
                self.reach.reachable();
                self.joined.store(true, Ordering::Relaxed);
                // Ownership is judged on the whole assignment, which the
                // coordinator has just confirmed, not on what this rebalance
                // added: a rejoin asked for while librdkafka was already
                // joining is merged into that join, and we come out of it
                // still owning the partition with nothing newly added. The
                // core ignores Assigned while it holds a tenure. (Found by the
                // broker-restart fault: nobody led again.)
                if !owned.is_empty() {
                    self.standby.owner();
                    // Reported by the consumer loop once this callback has
                    // returned: pinning the read position takes two broker
                    // round trips, which the rebalance must not wait for.
                    let mut assigned = self.assigned.lock().expect("assigned lock");
                    for partition in owned {
                        let pin = added.find_partition(&self.reach.topic, partition).is_some();
                        assigned.insert(partition, pin);
                    }
                } else if self.standby.assigned() {
                    info!("standby: in the group, another member holds every seat's partition");
                    let _ = self.reach.events.send(Event::Standby);
                } else if self.standby.out() {
                    debug!("an assignment of the join in flight when we left the group: no standby of ours");
                }
            }
            Rebalance::Error(err) => debug!(%err, "rebalance error"),
            _ => {}
        }
    }
}

/// The producer's context: it writes our heartbeats.
pub(super) struct WriterContext {
    pub(super) reach: Reach,
    /// Who we are, and with several seats, how long after a graceful revoke
    /// each of our own heartbeats is reported written (`Event::Delivered`):
    /// the rebalance that follows holds the reader that reads them back,
    /// and the seats kept meanwhile need that word (a session: the core
    /// counts it within a resume window of the revoke, and never later).
    pub(super) me: Member,
    pub(super) reports_for: Option<Duration>,
    /// Per seat's partition, the last run of ours whose ending was logged
    /// as delivered: (token, due time). Every record after it carries the
    /// same ending.
    pub(super) recorded: Mutex<BTreeMap<Partition, (i64, Option<u64>)>>,
}

impl ClientContext for WriterContext {
    /// The producer's librdkafka warns about every consumer-only property.
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.reach.log(level, fac, message, true);
    }

    fn error(&self, err: KafkaError, reason: &str) {
        self.reach.error(err, reason);
    }
}

impl ProducerContext for WriterContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(msg) => {
                self.reach.reachable();
                self.reach.roster.delivered(msg.topic());
                let Some(hb) = msg.payload().and_then(Heartbeat::decode) else { return };
                self.ended_run_recorded(msg.partition(), msg.offset(), &hb);
                let revoked = BootTime::from_nanos(self.reach.revoked_at.load(Ordering::Relaxed));
                let rebalancing = self.reports_for.is_some_and(|d| BootTime::now().since(revoked) < d);
                if rebalancing && hb.is_from(&self.me) {
                    let (partition, offset, sent) = (msg.partition(), msg.offset(), BootTime::from_nanos(hb.sent_ns));
                    let _ = self.reach.events.send(Event::Delivered { partition, offset, sent });
                }
            }
            Err((err, msg)) => {
                let roster = msg.topic() == self.reach.roster.topic;
                if err.rdkafka_error_code().is_some_and(|c| roster && self.reach.roster.denied(c, msg.topic())) {
                    return;
                }
                if roster {
                    debug!(%err, "candidacy not written to the roster");
                    return;
                }
                let what = format!("writing heartbeats: {err}");
                match err.rdkafka_error_code().and_then(|c| fatal(c, what, &self.reach.topic, &self.reach.group)) {
                    Some(fatal) => {
                        let _ = self.reach.events.send(Event::Fatal(fatal));
                    }
                    None => debug!(%err, "heartbeat not delivered"),
                }
            }
        }
    }
}

impl WriterContext {
    /// Says so when the record just written is the first to tell how our
    /// own run ended (a wave's, in the disclaimer before we exit; a
    /// schedule's, in the heartbeat right after it): from now on no member
    /// runs it again. Until then a crash makes it run again.
    /// With several seats, the line names the role (the seat's partition):
    /// two roles of one member may run under one token. The record's
    /// offset tells which leaders read it before they led: those whose
    /// token (their first record's offset) is greater.
    fn ended_run_recorded(&self, partition: Partition, offset: i64, hb: &Heartbeat) {
        let Some(job) = hb.attempt.as_ref().filter(|j| j.name == hb.name && j.host == hb.host) else { return };
        let Some(code) = job.code else { return };
        let Ok(mut last) = self.recorded.lock() else { return };
        if last.insert(partition, (job.token, job.due_ms)) == Some((job.token, job.due_ms)) {
            return;
        }
        let (token, attempt, role) = (job.token, job.attempt, self.reports_for.map(|_| partition));
        let said = "the run's ending is on the group's topic: no member will run it again";
        match (job.due_ms, role) {
            (None, None) => info!(token, attempt, code, offset, "{said}"),
            (None, Some(role)) => info!(role, token, attempt, code, offset, "{said}"),
            (Some(due_ms), None) => info!(token, attempt, code, due_ms, offset, "{said}"),
            (Some(due_ms), Some(role)) => info!(role, token, attempt, code, due_ms, offset, "{said}"),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::mpsc as std_mpsc;

    use rdkafka::TopicPartitionList;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    use super::super::wake::Subscription;
    use super::*;

    /// A consumer of seats `seats` on g.neli that never connects (nothing
    /// listens at its address): the callbacks are called by hand.
    pub(in crate::kafka) fn reader(
        seats: &[Partition],
    ) -> (Arc<BaseConsumer<ReaderContext>>, UnboundedReceiver<Event>) {
        reader_on(seats, rdkafka::ClientConfig::new().set("bootstrap.servers", "127.0.0.1:9").set("group.id", "g"))
    }

    /// `reader`, with the client's configuration `config`.
    pub(in crate::kafka) fn reader_on(
        seats: &[Partition],
        config: &rdkafka::ClientConfig,
    ) -> (Arc<BaseConsumer<ReaderContext>>, UnboundedReceiver<Event>) {
        let (events, heard) = unbounded_channel();
        let ctx = ReaderContext {
            reach: Reach::new(events, "g.neli".into(), "g".into()),
            asks: Arc::default(),
            seats: Seats { known: seats.to_vec(), every: false },
            standby: Standby::default(),
            joined: AtomicBool::new(false),
            backlog: 64,
            deadline: Duration::from_secs(5),
            standby_serve: Duration::from_millis(250),
            interval: Duration::from_millis(500),
            assigned: Mutex::default(),
            assigned_at: Mutex::default(),
            drains_from: Default::default(),
            control_unread: AtomicI64::new(-1),
            kept: Mutex::default(),
            request_timeout: Duration::from_secs(3),
            passed: Mutex::default(),
            join_watch: Mutex::new(super::super::nudge::JoinWatch::new(Duration::from_secs(6), Duration::from_secs(3))),
            ends_from: Default::default(),
            nudge_config: rdkafka::ClientConfig::new(),
        };
        let consumer = config.create_with_context(ctx).expect("a consumer");
        (Arc::new(consumer), heard)
    }

    /// Calls the revoke callback for `partitions` on a thread: its end.
    fn revoke(consumer: &Arc<BaseConsumer<ReaderContext>>, partitions: &[Partition]) -> std_mpsc::Receiver<()> {
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition("g.neli", p);
        }
        let (consumer, (done, returned)) = (consumer.clone(), std_mpsc::channel());
        std::thread::spawn(move || {
            consumer.context().pre_rebalance(&consumer, &Rebalance::Revoke(&tpl));
            let _ = done.send(());
        });
        returned
    }

    /// The next event, within 5 s.
    fn next(heard: &mut UnboundedReceiver<Event>) -> Event {
        let until = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match heard.try_recv() {
                Ok(event) => return event,
                Err(_) if std::time::Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
                Err(err) => panic!("no event: {err}"),
            }
        }
    }

    const A_WHILE: Duration = Duration::from_millis(300);

    /// A reader of the control partition that takes over from the other
    /// starts at the first record neither has read: the end before any
    /// was, and never back at one already read; other partitions' records
    /// do not count.
    #[test]
    fn a_reader_of_the_control_partition_resumes_after_the_newest_record_read() {
        let (consumer, _heard) = reader(&[0, 1]);
        let ctx = consumer.context();
        assert_eq!(ctx.resume(), Offset::End);
        ctx.read(1, 40);
        assert_eq!(ctx.resume(), Offset::End, "another partition's record");
        ctx.read(0, 0);
        assert_eq!(ctx.resume(), Offset::Offset(1));
        ctx.read(0, 7);
        ctx.read(0, 5);
        assert_eq!(ctx.resume(), Offset::Offset(8), "a record read late by the other reader");
    }

    /// The group's consumer hears a partition's records once each, in
    /// order: one at or before the newest it read is skipped (the read
    /// went back), whatever the watcher read of the control partition.
    #[test]
    fn the_group_consumer_reads_each_record_once_and_never_back() {
        let (consumer, _heard) = reader(&[0, 1]);
        let ctx = consumer.context();
        ctx.read(0, 9); // the watcher's
        assert!(ctx.first_read(0, 3), "the watcher's reads are its own");
        assert!(ctx.first_read(0, 4));
        assert!(!ctx.first_read(0, 4), "read again");
        assert!(!ctx.first_read(0, 0), "from the start again");
        assert!(ctx.first_read(1, 0), "each partition on its own");
        assert!(ctx.first_read(0, 5), "passed the newest: new again");
        assert_eq!(ctx.resume(), Offset::Offset(10), "the control partition's first unread, for either reader");
    }

    /// The callback returns only once every revoked seat is released, each
    /// by its own sender (the barrier's unit tests try the other orders).
    #[test]
    fn a_revoke_of_two_seats_returns_once_both_are_released() {
        let (consumer, mut heard) = reader(&[0, 1]);
        let returned = revoke(&consumer, &[1, 0, 5]);
        let mut releases = BTreeMap::new();
        for _ in 0..2 {
            let Event::Revoked { partition, lost: false, release } = next(&mut heard) else { panic!("not a revoke") };
            releases.insert(partition, release);
        }
        assert_eq!(releases.keys().copied().collect::<Vec<_>>(), [0, 1], "one event per revoked seat, 5 is none");
        assert!(returned.recv_timeout(A_WHILE).is_err(), "returned with nothing released");
        releases[&0].send(()).unwrap();
        assert!(returned.recv_timeout(A_WHILE).is_err(), "returned with seat 1 still held");
        drop(releases.remove(&0));
        assert!(returned.recv_timeout(A_WHILE).is_err(), "returned with seat 1 still held");
        releases[&1].send(()).unwrap();
        assert!(returned.recv_timeout(Duration::from_secs(5)).is_ok(), "both released, still held");
    }

    /// The shell's loop gone (its end of the channel dropped): nothing runs,
    /// nothing holds.
    #[test]
    fn a_revoke_the_shell_loop_cannot_hear_does_not_hold() {
        let (consumer, heard) = reader(&[0]);
        drop(heard);
        assert!(revoke(&consumer, &[0]).recv_timeout(Duration::from_secs(5)).is_ok());
    }

    /// Revokes of partitions that are no seat's, and any revoke while we
    /// leave, return at once and say nothing.
    #[test]
    fn a_revoke_of_no_seat_or_while_leaving_does_not_hold() {
        let (consumer, mut heard) = reader(&[0]);
        assert!(revoke(&consumer, &[1, 2]).recv_timeout(Duration::from_secs(5)).is_ok());
        consumer.context().asks.close();
        assert!(revoke(&consumer, &[0]).recv_timeout(Duration::from_secs(5)).is_ok());
        assert!(heard.try_recv().is_err(), "no event");
    }

    /// An assignment the consumer loop has not reported yet is reported
    /// before the revoke of the same seat, and only that seat's.
    #[test]
    fn an_unreported_assignment_comes_before_its_revoke() {
        let (consumer, mut heard) = reader(&[0, 1]);
        consumer.context().assigned.lock().unwrap().extend([(0, true), (1, true)]);
        let returned = revoke(&consumer, &[0]);
        assert!(matches!(next(&mut heard), Event::Assigned { partition: 0 }));
        let Event::Revoked { partition: 0, release, .. } = next(&mut heard) else { panic!("not a revoke of 0") };
        assert_eq!(*consumer.context().assigned.lock().unwrap(), BTreeMap::from([(1, true)]), "seat 1's pin kept");
        drop(release);
        assert!(returned.recv_timeout(Duration::from_secs(5)).is_ok());
    }

    /// Only the seats' partitions of our topic count as holding a seat.
    #[test]
    fn a_seat_is_held_by_its_partition_of_our_topic_only() {
        let (consumer, _heard) = reader(&[0, 2]);
        let holds = |topic: &str, partitions: &[Partition]| {
            let mut tpl = TopicPartitionList::new();
            for &p in partitions {
                tpl.add_partition(topic, p);
            }
            consumer.context().holds_a_seat(&tpl)
        };
        assert!(holds("g.neli", &[0]));
        assert!(holds("g.neli", &[1, 2]));
        assert!(!holds("g.neli", &[1, 3]), "no seat's partition");
        assert!(!holds("other.neli", &[0, 2]), "another topic's");
        assert!(!holds("g.neli", &[]));
    }

    /// An assignment without a seat's partition says "standby" once a
    /// membership (leaving the group and joining again makes it say so
    /// again), and never out of the group.
    #[test]
    fn standby_is_said_once_a_membership() {
        // Not in a group: the whole assignment is empty, no seat is ours.
        let (consumer, mut heard) = reader(&[0]);
        let subscription = Subscription::default();
        let assign = || consumer.context().post_rebalance(&consumer, &Rebalance::Assign(&TopicPartitionList::new()));
        subscription.subscribe(&consumer, "g.neli").unwrap();
        assign();
        assert!(matches!(heard.try_recv(), Ok(Event::Standby)));
        assign();
        assert!(heard.try_recv().is_err(), "said twice");
        subscription.unsubscribe(&consumer);
        subscription.subscribe(&consumer, "g.neli").unwrap();
        assign();
        assert!(matches!(heard.try_recv(), Ok(Event::Standby)), "not said again after leaving");
        assert!(consumer.context().assigned.lock().unwrap().is_empty());
    }

    /// Regression (findings O-1): the health check fails while the first
    /// join is in flight and passes just after. librdkafka completes that
    /// join after our unsubscribe (it postpones the unsubscribe) and its
    /// assignment comes after the leave: it said "standby" to a core that
    /// ignored it (unhealthy), and left the rejoin's assignment silent, so
    /// that no candidacy was written.
    #[test]
    fn the_assignment_of_a_join_left_in_flight_does_not_silence_the_rejoin() {
        let (consumer, mut heard) = reader(&[0]);
        let subscription = Subscription::default();
        let assign = || consumer.context().post_rebalance(&consumer, &Rebalance::Assign(&TopicPartitionList::new()));
        subscription.subscribe(&consumer, "g.neli").unwrap();
        subscription.unsubscribe(&consumer);
        assign();
        assert!(heard.try_recv().is_err(), "standby said out of the group");
        subscription.subscribe(&consumer, "g.neli").unwrap();
        assign();
        assert!(matches!(heard.try_recv(), Ok(Event::Standby)), "the rejoin's assignment said nothing");
    }
}
