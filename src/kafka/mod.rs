//! The Kafka adapter: group membership and heartbeats for the shell's loop.
//! (`config` builds rdkafka's client configuration; `status` and the dev
//! broker have clients of their own.)
//!
//! - A consumer joins the group on a thread of its own (`neli-kafka`). Its
//!   rebalance hooks turn assignments of partition 0 into events; on revoke
//!   the hook *blocks* until the shell's loop says the child is gone. That block
//!   inside librdkafka's rebalance callback is the barrier that keeps the next
//!   leader from starting early: the group cannot finish the rebalance while
//!   we have not given the partition up. librdkafka keeps heartbeating the
//!   coordinator meanwhile (join state WAIT_UNASSIGN_CALL), and config/timing.rs
//!   bounds the barrier by the session timeout for brokers that ignore that.
//! - The same thread reads partition 0 and reports every heartbeat record.
//! - A producer writes our heartbeats. It is separate from the consumer so
//!   that a blocked poll cannot delay them: librdkafka's own threads send
//!   them. A thread of ours serves its delivery reports and errors every
//!   100 ms (rdkafka's ThreadedProducer polls in a loop that spins out the
//!   last millisecond of every 100 ms: 0.9 % of a core, idle), and a flush
//!   serves them itself.
//!
//! Fencing does not live here: the timer of the shell's loop and the shim's lease do
//! it, so nothing stuck inside librdkafka can delay it.

pub mod candidacy;
mod context;
pub mod heartbeat;
mod topic;
pub mod yield_request;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::Offset;
use tokio::sync::mpsc::UnboundedSender;
use tracing::{debug, info, warn};

use crate::clock::BootTime;
use crate::config::creation_error;
use crate::config::timing::Timing;
use crate::config::{Config, Target};
use crate::exit::{Failure, Kind};
use crate::leader::{Candidacy, Other, Pause, Record, Stance};
use context::{Reach, ReaderContext, WriterContext};
use heartbeat::{Content, Heartbeat, Member, WireTiming};
use yield_request::{PauseRequest, Yield};

/// What the Kafka side reports to the shell's loop.
// A record is a few hundred bytes and comes a few times a second: moved,
// not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event {
    /// We are in the group, but another member holds partition 0.
    Standby,
    Assigned,
    /// Partition 0 is being taken away. The rebalance callback is blocked
    /// until `release` is sent to (or dropped).
    Revoked {
        lost: bool,
        release: mpsc::SyncSender<()>,
    },
    /// One of our own heartbeats, read back; `more`: records fetched
    /// after it are still to be sent (`CaughtUp` follows them).
    OwnHeartbeat {
        offset: i64,
        sent: BootTime,
        more: bool,
    },
    /// Every record fetched so far has been sent, after an own heartbeat
    /// that said `more`.
    CaughtUp,
    /// Another member's heartbeat.
    OtherHeartbeat(Other),
    /// `neli-run yield` asked us (while we own partition 0) to hand over
    /// (to the member named, with `yield --to`).
    Yield {
        to: Option<String>,
    },
    /// A `neli-run pause` or `resume` request, in the backlog too: the
    /// newest is the group's state whenever it was written.
    Pause(Pause),
    /// Another member's candidacy record.
    Candidacy(Candidacy),
    /// Kafka refused us for good: a problem no retry will fix.
    Fatal(Failure),
}

/// Classifies errors that no retry will fix.
fn fatal_kind(code: RDKafkaErrorCode) -> Option<Kind> {
    use RDKafkaErrorCode::*;
    match code {
        Authentication
        | SaslAuthenticationFailed
        | TopicAuthorizationFailed
        | GroupAuthorizationFailed
        | ClusterAuthorizationFailed => Some(Kind::Denied),
        Fatal | InvalidSessionTimeout | InconsistentGroupProtocol => Some(Kind::KafkaConfig),
        _ => None,
    }
}

/// What the user can do about a fatal error.
fn advice(code: RDKafkaErrorCode, topic: &str, group: &str) -> String {
    use RDKafkaErrorCode::*;
    match code {
        TopicAuthorizationFailed | GroupAuthorizationFailed | ClusterAuthorizationFailed => format!(
            "neli-run needs, on topic {topic}: DESCRIBE, READ and WRITE (and CREATE while it does not exist); on \
             group {group}: READ. Grant them (kafka-acls.sh --add --allow-principal User:... --operation Read \
             --operation Write --operation Describe --topic {topic}; --operation Read --group {group}) or use \
             other credentials."
        ),
        Authentication | SaslAuthenticationFailed => {
            "Check the credentials and mechanism (-X sasl.mechanism, sasl.username, sasl.password) and \
             -X security.protocol."
                .into()
        }
        InvalidSessionTimeout => "The broker refuses this --session-timeout: it must lie within the broker's \
             group.min.session.timeout.ms and group.max.session.timeout.ms (6s and 30m by default)."
            .into(),
        _ => String::new(),
    }
}

/// `Some` when `code` is fatal: `what` happened, plus what to do about it.
/// (`status` and `yield` classify their errors with it too.)
pub(crate) fn fatal(code: RDKafkaErrorCode, what: String, topic: &str, group: &str) -> Option<Failure> {
    let kind = fatal_kind(code)?;
    Some(Failure::new(kind, format!("{what}. {}", advice(code, topic, group)).trim()))
}

/// The connection to Kafka: a producer we write heartbeats with and a
/// consumer thread that reports events.
pub struct Kafka {
    producer: Arc<BaseProducer<WriterContext>>,
    member: Member,
    topic: String,
    seq: u64,
    /// The timing in force, said in every record (a deadline of 0 would
    /// read as a record from before deadlines: at least 1 ms).
    timing: WireTiming,
    /// The token we last wrote, and since when (wall clock) we hold it.
    leading: Option<(i64, u64)>,
    /// Whether Kafka answers, as both clients last heard.
    reach: Reach,
    requests: Arc<Requests>,
    consumer: Option<JoinHandle<()>>,
    /// Serves the producer; stopped and joined when we leave.
    _serving: Joined,
    /// Drops the admin client that created the topic, if we did.
    _admin: Option<Joined>,
    /// The end of partition 0 when we joined, if Kafka said.
    born: Option<i64>,
    /// What our candidacy records say besides who we are.
    priority: u8,
    candidacy_interval: Duration,
    /// Wall clock (ms) since when we have been a standby: our first
    /// candidacy record since our last heartbeat.
    standby_since: Option<u64>,
}

/// A helper thread that must end before neli-run does: dropping this asks
/// it to stop (its flag, and an unpark for a thread parked between turns)
/// and joins it. A librdkafka client destroyed on a thread that outlives
/// `main` races exit's handlers, which free what librdkafka's threads use:
/// CI saw the heap corrupted and an abort at exit, in place of the exit
/// status due.
struct Joined {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Joined {
    fn spawn(name: &str, work: impl FnOnce(&AtomicBool) + Send + 'static) -> Result<Joined, Failure> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(&flag))
            .map_err(|e| Failure::new(Kind::Internal, format!("cannot start the {name} thread: {e}")))?;
        Ok(Joined { stop, handle: Some(handle) })
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

impl Kafka {
    /// Creates both clients, makes sure the topic exists, and joins the
    /// group. Retries while Kafka is unreachable (logging once); fails only
    /// on errors that retrying cannot fix. Blocking: run it on a blocking
    /// thread so that signals and --acquire-timeout are answered meanwhile.
    pub fn connect(s: &Settings, member: Member, events: UnboundedSender<Event>) -> Result<Kafka, Failure> {
        let requests = Arc::new(Requests::default());
        let reach = Reach::new(events.clone(), s.target.topic.clone(), s.target.group.clone());
        let reader = ReaderContext {
            reach: reach.clone(),
            requests: requests.clone(),
            standby: AtomicBool::new(false),
            backlog: s.backlog,
            deadline: s.timing.heartbeat_deadline,
            interval: s.timing.heartbeat_interval,
            assigned: Default::default(),
            assigned_at: Default::default(),
        };
        let writer = WriterContext { reach: reach.clone(), recorded: Default::default() };

        let consumer: BaseConsumer<ReaderContext> =
            consumer_config(s).create_with_context(reader).map_err(|e| creation_error(e, &s.target))?;
        let producer: Arc<BaseProducer<WriterContext>> =
            Arc::new(producer_config(s).create_with_context(writer).map_err(|e| creation_error(e, &s.target))?);

        let served = producer.clone();
        let serving = Joined::spawn("neli-produce", move |stop| serve_producer(&served, stop))?;
        let admin = topic::ensure_topic(s, &consumer)?;
        let born = consumer.fetch_watermarks(&s.target.topic, 0, Duration::from_secs(2)).ok().map(|(_, end)| end);
        if !s.health_checked {
            consumer.subscribe(&[&s.target.topic]).map_err(|e| creation_error(e, &s.target))?;
        }
        requests.keep_out.store(s.health_checked, Ordering::Relaxed);

        let reader_member = member.clone();
        let reader_requests = requests.clone();
        let health_checked = s.health_checked;
        let watch = Watch {
            yielded: 3 * s.timing.session_timeout,
            handed_over: candidacy::LIVE_INTERVALS * s.candidacy_interval,
        };
        let thread = std::thread::Builder::new()
            .name("neli-kafka".into())
            .spawn(move || consume(consumer, !health_checked, &reader_member, &reader_requests, watch, &events))
            .map_err(|e| Failure::new(Kind::Internal, format!("cannot start the Kafka thread: {e}")))?;

        Ok(Kafka {
            producer,
            member,
            topic: s.target.topic.clone(),
            seq: 0,
            timing: WireTiming::from(&s.timing),
            leading: None,
            reach,
            requests,
            consumer: Some(thread),
            _serving: serving,
            _admin: admin,
            born,
            priority: s.priority,
            candidacy_interval: s.candidacy_interval,
            standby_since: None,
        })
    }

    /// Queues our candidacy record (the withdrawal when `leaving`). Never
    /// blocks.
    pub fn send_candidacy(&mut self, leaving: bool) {
        let since_ms = *self.standby_since.get_or_insert_with(crate::clock::wall_ms);
        let unhealthy = self.requests.keep_out.load(Ordering::Relaxed);
        let record = candidacy::Record::new(
            &self.member,
            self.priority,
            false,
            since_ms,
            self.candidacy_interval,
            leaving,
            unhealthy,
        );
        let value = record.encode();
        let record = BaseRecord::to(&self.topic).partition(0).key(self.member.name.as_bytes()).payload(&value);
        if let Err((err, _)) = self.producer.send(record) {
            debug!(%err, "candidacy not queued");
        }
    }

    /// The end of partition 0 when we joined: every record from there on
    /// was written after we started, whatever the writers' clocks say.
    pub fn born(&self) -> Option<i64> {
        self.born
    }

    /// Queues `record` as one heartbeat stamped with `now`. Never blocks.
    pub fn send_heartbeat(&mut self, now: BootTime, record: Record) {
        self.seq += 1;
        self.standby_since = None;
        let at_ms = crate::clock::wall_ms();
        let token = record.stance.token();
        self.leading = match (token, self.leading) {
            (Some(t), Some((held, since))) if t == held => Some((held, since)),
            (Some(t), _) => Some((t, at_ms)),
            (None, _) => None,
        };
        let content = Content {
            record,
            since_ms: self.leading.map(|(_, since)| since),
            deadline_ms: self.timing.heartbeat_deadline_ms.max(1),
        };
        let heartbeat = Heartbeat {
            timing: Some(self.timing),
            unhealthy: self.requests.keep_out.load(Ordering::Relaxed),
            ..Heartbeat::new(&self.member, self.seq, now, at_ms, content)
        };
        let value = heartbeat.encode();
        let record = BaseRecord::to(&self.topic).partition(0).key(self.member.name.as_bytes()).payload(&value);
        if let Err((err, _)) = self.producer.send(record) {
            debug!(%err, "heartbeat not queued");
        }
    }

    /// Waits, when called, up to `timeout` for the heartbeats queued by
    /// then to be written (blocking: run it off the loop). Not rdkafka's
    /// `flush`, which waits in 100 ms steps: every graceful handover paid
    /// one. It serves the delivery reports itself, since the consumer
    /// thread may be held in the revoke barrier meanwhile.
    pub fn flusher(&self, timeout: Duration) -> impl FnOnce() + Send + 'static {
        let producer = self.producer.clone();
        move || {
            let start = Instant::now();
            loop {
                producer.poll(Duration::ZERO);
                if producer.in_flight_count() == 0 {
                    return;
                }
                if start.elapsed() >= timeout {
                    debug!("heartbeats not flushed within {timeout:?}");
                    return;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// Leaves the group and joins again, for a fresh assignment.
    pub fn rejoin(&self) {
        self.requests.rejoin.store(true, Ordering::Relaxed);
    }

    /// Leaves the group and rejoins once another member leads (the end of
    /// a yield).
    pub fn stand_aside(&self) {
        self.requests.stand_aside.store(true, Ordering::Relaxed);
    }

    /// Stays out of the group while `out` (this member is unhealthy), and
    /// joins it again once not: a standby leaves at once; a member that
    /// owns partition 0 leaves as the core says (it stands aside), and
    /// rejoins only once healthy.
    pub fn keep_out(&self, out: bool) {
        self.requests.keep_out.store(out, Ordering::Relaxed);
    }

    /// As `stand_aside`, but rejoins at the latest once the hand-over our
    /// disclaimer names has gone stale (its target may have died).
    pub fn hand_over(&self) {
        self.requests.hand_over.store(true, Ordering::Relaxed);
    }

    /// Whether Kafka answered last time we tried.
    pub fn reachable(&self) -> bool {
        self.reach.is_reachable()
    }

    /// Leaves the group so that a standby takes over at once, then closes
    /// both clients. Call only once the child is gone.
    pub fn leave(mut self) {
        self.requests.closing.store(true, Ordering::Relaxed);
        if let Some(thread) = self.consumer.take() {
            let _ = thread.join();
        }
    }
}

/// What the adapter needs of the configuration: where the topic is, who we
/// are, and the timing.
#[derive(Clone, Debug)]
pub struct Settings {
    pub target: Target,
    /// The client.id of both clients: the member's name.
    pub client_id: String,
    pub timing: Timing,
    /// Records a new owner reads back before the end (`backlog`).
    pub backlog: i64,
    /// A health check gates leadership: stay out of the group until it
    /// says healthy (`Kafka::keep_out`).
    pub health_checked: bool,
    /// What our candidacy records say, and how often we write them.
    pub priority: u8,
    pub candidacy_interval: Duration,
}

impl Settings {
    /// The adapter's share of `cfg`.
    pub fn of(cfg: &Config) -> Settings {
        Settings {
            target: cfg.kafka.clone(),
            client_id: cfg.name.clone(),
            timing: cfg.timing,
            backlog: backlog(&cfg.leader),
            health_checked: cfg.health.is_some(),
            priority: cfg.leader.priority,
            candidacy_interval: cfg.leader.candidacy_interval,
        }
    }
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

/// The consumer's configuration: it joins the group and reads partition 0.
/// The user's properties win (`Target::client_config`).
fn consumer_config(s: &Settings) -> rdkafka::ClientConfig {
    s.target.client_config(&[
        ("client.id", &s.client_id),
        ("group.id", &s.target.group),
        ("session.timeout.ms", &ms(s.timing.session_timeout)),
        ("heartbeat.interval.ms", &ms(s.timing.coordinator_heartbeat)),
        ("max.poll.interval.ms", &ms(s.timing.max_poll_interval)),
        // Sticky: a member joining never takes partition 0 from a leader.
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("enable.auto.commit", "false"),
        // Only if the pin in `start_near_end` fails: skip nothing.
        ("auto.offset.reset", "earliest"),
        ("allow.auto.create.topics", "false"),
        ("enable.partition.eof", "false"),
        // Brokers that do not answer a fetch when data arrives (the mock,
        // tansu) would otherwise delay every heartbeat read-back by 500ms.
        ("fetch.wait.max.ms", "100"),
        // A fetch or a coordinator heartbeat stuck after a network blip is
        // sent again on a new connection, not waited out while TCP backs
        // off (Timing::request_timeout).
        ("socket.timeout.ms", &ms(s.timing.request_timeout())),
        // Partition 0's leader moved (a rolling restart): the read-back
        // goes on at the new leader after 100 ms, not librdkafka's 500.
        ("fetch.error.backoff.ms", "100"),
        ("topic.metadata.refresh.interval.ms", &metadata_refresh(s)),
    ])
}

/// How often both clients ask where partition 0 is led: every heartbeat
/// interval, not librdkafka's 5 minutes. librdkafka asks by itself when a
/// broker goes down or answers that it no longer leads, but a broker that
/// leaves Metadata after a controlled stop is decommissioned, and that
/// parks partition 0 on librdkafka's internal broker until the next refresh
/// (in a rolling restart, a heartbeat gap of 1.3-1.7 s at librdkafka's
/// default, 0.8-0.9 s at 0.5 s; Java clients refresh on every failed send
/// instead). A small Metadata request per client and interval.
fn metadata_refresh(s: &Settings) -> String {
    ms(s.timing.heartbeat_interval)
}

/// The producer's configuration: it writes our heartbeats. The user's
/// properties win (`Target::client_config`).
fn producer_config(s: &Settings) -> rdkafka::ClientConfig {
    let deadline = ms(s.timing.heartbeat_deadline.max(Duration::from_millis(1)));
    s.target.client_config(&[
        ("client.id", &s.client_id),
        ("acks", "all"),
        ("linger.ms", "0"),
        // A heartbeat delivered after the deadline proves nothing.
        ("message.timeout.ms", &deadline),
        ("request.timeout.ms", &deadline),
        // A heartbeat stuck after a network blip is sent again on a new
        // connection, not waited out while TCP backs off
        // (Timing::request_timeout).
        ("socket.timeout.ms", &ms(s.timing.request_timeout())),
        ("topic.metadata.refresh.interval.ms", &metadata_refresh(s)),
    ])
}

/// Records a new owner reads back: four times those two writers produce
/// in a heartbeat deadline and the margin, at least 64; and, so that it
/// knows every member that may lead, room for the candidacies of
/// `STANDBYS` standbys over the time one counts (`LIVE_INTERVALS` records
/// each, one more for the margin). A few tens of kilobytes, read once.
fn backlog(s: &crate::leader::Settings) -> i64 {
    let per_writer = (s.heartbeat_deadline + s.claim_margin).as_nanos() / s.heartbeat_interval.as_nanos().max(1);
    (4 * per_writer as i64).max(64) + STANDBYS * (i64::from(candidacy::LIVE_INTERVALS) + 1)
}

/// How many standbys a new owner is sure to know of (`backlog`): a larger
/// group still works, but its owner may miss a member of higher priority.
const STANDBYS: i64 = 64;

/// Serves the producer's delivery reports and errors (reachability, and a
/// fatal error such as a refused login, which connecting waits for) every
/// 100 ms until asked to stop. Not rdkafka's `poll(100ms)`: it spins through
/// the last millisecond of each wait.
fn serve_producer(producer: &BaseProducer<WriterContext>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        producer.poll(Duration::ZERO);
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// Makes librdkafka serve the group now: send a coordinator heartbeat that
/// is due, or the JoinGroup of a rejoin. librdkafka does both only when its
/// main thread wakes (rd_kafka_cgrp_serve, after each batch of operations
/// in rd_kafka_thread_main), and with nothing else to do that thread wakes
/// every 500 ms: measured here, `heartbeat.interval.ms` 100 gave one
/// heartbeat every 500 ms, and a standby learnt of a leader's leave up to
/// half a second late. Asking for the assignment is an operation on the
/// group's queue, so it wakes that thread; called every poll (100 ms at
/// most), heartbeats go out within 100 ms of falling due. Returns whether
/// we own partition 0.
fn serve_group(consumer: &BaseConsumer<ReaderContext>) -> bool {
    consumer.assignment().is_ok_and(|a| a.find_partition(&consumer.context().reach.topic, 0).is_some())
}

/// How long one poll of the consumer thread lasts: a request of the shell's
/// loop (stand aside, hand over, rejoin) waits for its end, since a poll
/// cannot be woken. Only an owner of partition 0 makes such requests, and
/// they hold up a handover: it polls in short slices (measured: a yield
/// waited 97 ms for the end of a 100 ms poll, of a 300 ms handover; at 10
/// ms, an idle leader took 0.87 % of a core instead of 0.35 %). A
/// standby's loop wakes less often.
const OWNER_POLL: Duration = Duration::from_millis(20);
const STANDBY_POLL: Duration = Duration::from_millis(100);

/// `ReaderContext::assigned`: partition 0 is ours (and was newly added).
const ASSIGNED: u8 = 1;
const ASSIGNED_NEW: u8 = 2;

/// What the shell's loop asks of the consumer thread.
#[derive(Default)]
pub(super) struct Requests {
    pub(super) closing: AtomicBool,
    rejoin: AtomicBool,
    stand_aside: AtomicBool,
    /// Unhealthy: not in the group (see `Kafka::keep_out`).
    keep_out: AtomicBool,
    hand_over: AtomicBool,
}

/// How long a member that stood aside watches for another to lead before
/// it rejoins anyway.
#[derive(Clone, Copy)]
struct Watch {
    /// After a yield: it may be alone.
    yielded: Duration,
    /// After a hand-over: as long as one holds.
    handed_over: Duration,
}

/// The consumer thread: polls until asked to close, then closes the consumer
/// (which sends LeaveGroup).
fn consume(
    consumer: BaseConsumer<ReaderContext>,
    subscribed: bool,
    me: &Member,
    asks: &Requests,
    watch: Watch,
    events: &UnboundedSender<Event>,
) {
    let ctx = consumer.context();
    let mut gap = Gap::default();
    // Whether we subscribed before this thread began (not read from
    // `keep_out`, which the loop may have cleared by now).
    let mut subscribed = subscribed;
    let mut slice = STANDBY_POLL;
    'polling: while !asks.closing.load(Ordering::Relaxed) {
        let out = asks.keep_out.load(Ordering::Relaxed);
        if out && subscribed && !holds_partition_0(&consumer) {
            info!("unhealthy: leaving the group until the health check passes");
            leave_group(&consumer);
            subscribed = false;
        } else if !out && !subscribed {
            info!("healthy: joining the group");
            subscribe(&consumer, events);
            subscribed = true;
        }
        if asks.rejoin.swap(false, Ordering::Relaxed) {
            if holds_partition_0(&consumer) {
                // The revoke this causes goes through the barrier as any other.
                consumer.unsubscribe();
                subscribe(&consumer, events);
            } else {
                debug!("partition 0 is no longer ours: nothing to give back, and librdkafka rejoins by itself");
            }
        }
        let aside =
            match (asks.stand_aside.swap(false, Ordering::Relaxed), asks.hand_over.swap(false, Ordering::Relaxed)) {
                (_, true) => Some(watch.handed_over),
                (true, false) => Some(watch.yielded),
                (false, false) => None,
            };
        if let Some(watch) = aside {
            leave_until_another_leads(&consumer, me, asks, watch, events);
            if asks.keep_out.load(Ordering::Relaxed) {
                info!("unhealthy: staying out of the group until the health check passes");
                subscribed = false;
            } else {
                subscribe(&consumer, events);
            }
        }
        let polled = consumer.poll(slice);
        slice = if serve_group(&consumer) { OWNER_POLL } else { STANDBY_POLL };
        match ctx.assigned.swap(0, Ordering::Relaxed) {
            0 => {}
            added => {
                if added == ASSIGNED_NEW {
                    ctx.start_near_end(&consumer);
                    gap = Gap::default();
                }
                if events.send(Event::Assigned).is_err() {
                    break;
                }
            }
        }
        // Records fetched behind one of our own heartbeats are heard
        // before the core may lead on it: it says `more`, and `CaughtUp`
        // follows once the fetched records are all sent (audit D11), or a
        // backlog's worth of them (a flood of records must not hold the
        // requests above back).
        let (mut polled, mut owed, mut left) = (polled, false, ctx.backlog);
        while let Some(result) = polled.take() {
            match result {
                Ok(msg) => {
                    ctx.reach.reachable();
                    let event = match event_of(&msg, ctx, me, true) {
                        Some(Event::OwnHeartbeat { offset, sent, .. }) => {
                            if let Some(said) = gap.own(sent, BootTime::now(), ctx.interval) {
                                Gap::say(said, ctx);
                            }
                            polled = consumer.poll(Duration::ZERO);
                            let more = polled.is_some();
                            owed |= more;
                            Some(Event::OwnHeartbeat { offset, sent, more })
                        }
                        event => event,
                    };
                    if event.is_some_and(|event| events.send(event).is_err()) {
                        break 'polling;
                    }
                }
                Err(err) => {
                    match err
                        .rdkafka_error_code()
                        .and_then(|c| fatal(c, err.to_string(), &ctx.reach.topic, &ctx.reach.group))
                    {
                        Some(fatal) => {
                            let _ = events.send(Event::Fatal(fatal));
                        }
                        None => debug!(%err, "consumer error"),
                    }
                }
            }
            if polled.is_none() && owed && left > 0 {
                left -= 1;
                polled = consumer.poll(Duration::ZERO);
            }
        }
        if owed && events.send(Event::CaughtUp).is_err() {
            break;
        }
    }
    // Dropping closes the consumer: it leaves the group and waits for that.
    drop(consumer);
}

/// What a record of partition 0 tells the core, if anything: another
/// member's heartbeat or candidacy, a pause or resume, one of our own
/// heartbeats (`more` false: the caller says whether records are queued
/// behind it), and, when `yields` (we own partition 0: it is meant for us),
/// a yield.
fn event_of(msg: &BorrowedMessage<'_>, ctx: &ReaderContext, me: &Member, yields: bool) -> Option<Event> {
    if msg.topic() != ctx.reach.topic || msg.partition() != 0 {
        return None;
    }
    let payload = msg.payload()?;
    if let Some(c) = candidacy::Record::decode(payload) {
        return (!c.is_from(me)).then(|| Event::Candidacy(c.as_core(crate::clock::wall_ms())));
    }
    match (Heartbeat::decode(payload), Yield::decode(payload)) {
        (Some(hb), _) if hb.is_from(me) => {
            Some(Event::OwnHeartbeat { offset: msg.offset(), sent: BootTime::from_nanos(hb.sent_ns), more: false })
        }
        (Some(hb), _) => Some(Event::OtherHeartbeat(hb.as_other(msg.offset(), ctx.deadline, crate::clock::wall_ms()))),
        (None, Some(y))
            if yields && y.applies_to(&me.name) && msg.offset() >= ctx.assigned_at.load(Ordering::Relaxed) =>
        {
            // Anyone who may write to the topic can ask: say who did
            // (escaped: every field is the writer's choice).
            info!(offset = msg.offset(), "yield requested by {}", y.asker());
            Some(Event::Yield { to: y.to })
        }
        // The core logs who asked, once it is news to it.
        (None, None) => PauseRequest::decode(payload).map(|request| Event::Pause(request.at(msg.offset()))),
        _ => None,
    }
}

/// The newest of our own heartbeats read back in this tenure, to say how
/// long a gap in them was once they are back: how close a network blip
/// came to the fence (docs/operations.md, "Network blips").
#[derive(Default)]
struct Gap {
    newest: Option<BootTime>,
    /// When the last of them was read back.
    read: Option<BootTime>,
}

impl Gap {
    /// Our heartbeat sent at `sent` is read back at `now`, our heartbeats
    /// being written every `interval`: the gap to say, if any. The age the
    /// fence saw just before is `now` less the newest one's send time. Said
    /// once a gap: the records written meanwhile, read back at once behind
    /// the first, would each say a gap of their own.
    fn own(&mut self, sent: BootTime, now: BootTime, interval: Duration) -> Option<Duration> {
        let reads_paused = self.read.is_none_or(|read| now.since(read) >= interval);
        let gap = self.newest.filter(|n| *n < sent && reads_paused).map(|newest| now.since(newest));
        self.newest = self.newest.max(Some(sent));
        self.read = Some(now);
        gap
    }

    /// Says `gap` when it spans two heartbeat intervals (rule 1 of
    /// config/timing.rs: at least one record was missed or late), at debug
    /// level from one and a half (neli-bench reads those).
    fn say(gap: Duration, ctx: &ReaderContext) {
        if gap >= 2 * ctx.interval {
            info!(gap = ?gap, deadline = ?ctx.deadline, "own heartbeats back after a gap");
        } else if gap > ctx.interval * 3 / 2 {
            debug!(gap = ?gap, deadline = ?ctx.deadline, "own heartbeats back after a gap");
        }
    }
}

/// Whether partition 0 is still in our assignment (yes if librdkafka cannot
/// say), i.e. whether a rejoin has anything to give back.
///
/// Without it a rejoin could cost the whole group a session timeout. After
/// a freeze longer than the session, librdkafka notices on its own: it
/// reports the assignment lost, forgets its member id and, once our
/// callback has unassigned, sends JoinGroup with no member id. The core,
/// seeing its own heartbeats stale, asks for a rejoin at the same moment.
/// Unsubscribing then drops that JoinGroup's answer ("discarding outdated
/// request", rd_kafka_cgrp_handle_JoinGroup) and the next one asks for a
/// new id; but the coordinator keeps the id it handed out in that answer
/// (MEMBER_ID_REQUIRED, KIP-394) as a pending member for a whole session
/// timeout (Kafka's addPendingMemberExpiration), and ends no join phase
/// while a pending member is out (hasAllMembersJoined). Every member's
/// JoinGroup was parked that long, and so was a leaving leader's
/// LeaveGroup behind its own JoinGroup on the same connection: a graceful
/// handover took up to the session timeout (issue 28). librdkafka's lost
/// assignment already did what the rejoin is for.
fn holds_partition_0(consumer: &BaseConsumer<ReaderContext>) -> bool {
    consumer.assignment().map_or(true, |a| a.find_partition(&consumer.context().reach.topic, 0).is_some())
}

/// Leaves the group until `subscribe`. Out of it we are no standby: the
/// next assignment without partition 0 says "standby" again, which the
/// core waits for to write our candidacy (a standby healthy again after a
/// failed check wrote none, and `status` lost it: audit D2).
fn leave_group(consumer: &BaseConsumer<ReaderContext>) {
    consumer.unsubscribe();
    consumer.context().standby.store(false, Ordering::Relaxed);
}

fn subscribe(consumer: &BaseConsumer<ReaderContext>, events: &UnboundedSender<Event>) {
    if let Err(err) = consumer.subscribe(&[&consumer.context().reach.topic]) {
        let _ = events.send(Event::Fatal(Failure::new(Kind::Internal, format!("rejoining: {err}"))));
    }
}

/// Leaves the group and watches partition 0 from outside it until another
/// member's heartbeat carries a token (it leads), or `watch` passes (we may
/// be alone). Rejoining at once would let the sticky assignor hand the
/// partition straight back to us. A member that stood aside unhealthy
/// stops watching once healthy again: if none other is healthy, the group
/// waits for it, not for `watch`. The records read meanwhile reach the
/// core as ever (others' heartbeats and candidacies, pauses), so that what
/// it knows of the group is current when it rejoins; a yield read now was
/// meant for whoever leads, and our own records say nothing new.
fn leave_until_another_leads(
    consumer: &BaseConsumer<ReaderContext>,
    me: &Member,
    asks: &Requests,
    watch: Duration,
    events: &UnboundedSender<Event>,
) {
    let (closing, unhealthy) = (&asks.closing, asks.keep_out.load(Ordering::Relaxed));
    let topic = consumer.context().reach.topic.clone();
    leave_group(consumer);
    // The cooperative protocol takes only incremental assignments, and
    // librdkafka refuses them until the revoke this causes has been served:
    // poll until then.
    let mut tpl = rdkafka::TopicPartitionList::new();
    if tpl.add_partition_offset(&topic, 0, Offset::End).is_err() {
        return;
    }
    let until = Instant::now() + Duration::from_secs(10);
    while let Err(err) = consumer.incremental_assign(&tpl) {
        if std::time::Instant::now() > until {
            warn!(%err, "cannot watch partition 0 from outside the group; rejoining at once");
            return;
        }
        consumer.poll(Duration::from_millis(50));
    }
    let until = std::time::Instant::now() + watch;
    while !closing.load(Ordering::Relaxed) && std::time::Instant::now() < until {
        if unhealthy && !asks.keep_out.load(Ordering::Relaxed) {
            info!("healthy again: done standing aside");
            break;
        }
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            let event = event_of(&msg, consumer.context(), me, false);
            let other_leads =
                matches!(&event, Some(Event::OtherHeartbeat(other)) if matches!(other.stance, Stance::Leading { .. }));
            if let Some(event) = event.filter(|e| !matches!(e, Event::OwnHeartbeat { .. })) {
                if events.send(event).is_err() {
                    break;
                }
            }
            if other_leads {
                info!("another member leads now; done standing aside");
                break;
            }
        }
    }
    let _ = consumer.incremental_unassign(&tpl);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use rdkafka::mocking::MockCluster;

    /// A member of group `g` on the broker at `brokers`, and its events.
    fn connect(brokers: &str) -> (Kafka, tokio::sync::mpsc::UnboundedReceiver<Event>) {
        connect_as(brokers, Member::this_process("t".into()))
    }

    /// `connect`, as `member`.
    fn connect_as(brokers: &str, member: Member) -> (Kafka, tokio::sync::mpsc::UnboundedReceiver<Event>) {
        let cli = crate::cli::Cli::try_parse_from(["neli-run", "--group", "g", "--brokers", brokers, "--", "true"])
            .expect("valid arguments");
        let cfg = Config::from_args(cli.run, None).expect("valid configuration");
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        let kafka = Kafka::connect(&Settings::of(&cfg), member, tx).expect("connects");
        (kafka, events)
    }

    /// Writes `values` to partition 0 of g.neli, and waits until they are on it.
    fn produce(brokers: &str, values: &[Vec<u8>]) {
        produce_to(brokers, 0, values);
    }

    /// `produce`, to `partition`.
    fn produce_to(brokers: &str, partition: i32, values: &[Vec<u8>]) {
        let producer: BaseProducer =
            rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("a producer");
        for value in values {
            producer.send(BaseRecord::<(), _>::to("g.neli").partition(partition).payload(value)).expect("queued");
        }
        producer.flush(Duration::from_secs(20)).expect("written");
    }

    /// Only partition 0 is the group's: a member given other partitions of
    /// a topic of several (Kafka assigns them too) reads nothing there.
    #[test]
    fn records_of_other_partitions_are_not_heard() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("g.neli", 2, 1).expect("topic");
        let brokers = cluster.bootstrap_servers();
        produce_to(&brokers, 1, &[candidacy_of(&Member::this_process("p9".into()))]);
        produce(&brokers, &[candidacy_of(&Member::this_process("p1".into()))]);
        let (_kafka, mut events) = connect(&brokers);
        let mut heard = Vec::new();
        next(&mut events, |e| match e {
            Event::Candidacy(c) => {
                heard.push(c.name.clone());
                (c.name == "p1").then_some(())
            }
            _ => None,
        });
        // A claim of absence needs a period (as `stays_false` in the
        // integration tests): partition 1 is read from its start, in the
        // same fetches as partition 0.
        std::thread::sleep(Duration::from_millis(500));
        while let Ok(event) = events.try_recv() {
            if let Event::Candidacy(c) = event {
                heard.push(c.name);
            }
        }
        assert_eq!(heard, ["p1"]);
    }

    /// `member`'s candidacy of priority 2, written now.
    fn candidacy_of(member: &Member) -> Vec<u8> {
        candidacy::Record::new(member, 2, false, 0, Duration::from_secs(1), false, false).encode()
    }

    /// Regression (audit D11): a candidacy written just after a new owner's
    /// first heartbeat came in the same fetch, and the core, hearing the
    /// heartbeat first, started the command before it heard of the member
    /// it should have let lead. The heartbeat now says records are behind
    /// it, and `CaughtUp` comes once they are all sent.
    #[test]
    fn records_fetched_behind_an_own_heartbeat_come_before_caught_up() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("g.neli", 1, 1).expect("topic");
        let brokers = cluster.bootstrap_servers();
        let (me, p1) = (Member::this_process("t".into()), Member::this_process("p1".into()));
        let record = Record::contending(1);
        let content = Content { record, since_ms: None, deadline_ms: 5000 };
        let ours = Heartbeat::new(&me, 1, BootTime::now(), crate::clock::wall_ms(), content).encode();
        // All before we join: the backlog we read back is one fetch.
        let p2 = Member::this_process("p2".into());
        produce(&brokers, &[ours, candidacy_of(&p1), candidacy_of(&p2)]);
        let (_kafka, mut events) = connect_as(&brokers, me);
        let mut heard = Vec::new();
        next(&mut events, |e| {
            let done = matches!(e, Event::CaughtUp);
            match e {
                Event::OwnHeartbeat { more, .. } => heard.push(format!("own heartbeat, more: {more}")),
                Event::Candidacy(c) => heard.push(format!("candidacy of {}", c.name)),
                Event::CaughtUp => heard.push("caught up".into()),
                _ => {}
            }
            done.then_some(())
        });
        assert_eq!(heard, ["own heartbeat, more: true", "candidacy of p1", "candidacy of p2", "caught up"]);
    }

    /// Regression (H6): a member standing aside read partition 0 only to
    /// see whether another led, and dropped the pauses and candidacies it
    /// read meanwhile. They reach the core while it stands aside now.
    #[test]
    fn records_read_while_standing_aside_reach_the_core() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("g.neli", 1, 1).expect("topic");
        let brokers = cluster.bootstrap_servers();
        let (kafka, mut events) = connect(&brokers);
        next(&mut events, |e| matches!(e, Event::Assigned).then_some(()));
        kafka.stand_aside();
        // It watches from the end once it has left: written until read
        // (the watch lasts 3 session timeouts, 18 s, without another leader).
        let p1 = Member::this_process("p1".into());
        let pause = PauseRequest::new(true, false).encode();
        let until = Instant::now() + Duration::from_secs(15);
        let (mut left, mut paused, mut candidate) = (false, false, false);
        while !(left && paused && candidate) {
            assert!(Instant::now() < until, "nothing read while standing aside reached the core");
            produce(&brokers, &[pause.clone(), candidacy_of(&p1)]);
            std::thread::sleep(Duration::from_millis(200));
            while let Ok(event) = events.try_recv() {
                match event {
                    Event::Assigned => panic!("rejoined before the records came"),
                    // It left the group: partition 0 goes (the release is
                    // dropped here, which ends the barrier).
                    Event::Revoked { .. } => left = true,
                    Event::Pause(p) => paused |= p.paused,
                    Event::Candidacy(c) => candidate |= c.name == "p1",
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn a_gap_in_own_heartbeats_is_said_once_when_they_are_back() {
        let ms = |n: u64| BootTime::from_nanos(n * 1_000_000);
        let interval = Duration::from_millis(500);
        let mut gap = Gap::default();
        // Steady: each one read back 10 ms after it was written.
        for i in 0..4 {
            let sent = ms(1_000 + i * 500);
            assert_eq!(
                gap.own(sent, ms(1_010 + i * 500), interval),
                Some(Duration::from_millis(510)).filter(|_| i > 0)
            );
        }
        // The newest read was sent at 2500; nothing for 3 s, then the
        // records written meanwhile come back at once: the first says how
        // long the fence saw no heartbeat, the rest nothing.
        let back = ms(5_600);
        assert_eq!(gap.own(ms(3_000), back, interval), Some(Duration::from_millis(3_100)));
        for sent in [3_500, 4_000, 4_500, 5_000, 5_500] {
            assert_eq!(gap.own(ms(sent), back, interval), None, "record sent at {sent} ms");
        }
        // Steady again: the next one's age is an interval's, said to no one.
        assert_eq!(gap.own(ms(6_000), ms(6_110), interval), Some(Duration::from_millis(610)));
        // A record read again (a rewind) says nothing.
        assert_eq!(gap.own(ms(4_000), ms(6_700), interval), None);
    }

    /// Waits up to 30 s for the next event that `want` accepts.
    fn next<T>(
        events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
        mut want: impl FnMut(Event) -> Option<T>,
    ) -> T {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < until {
            match events.try_recv() {
                Ok(event) => {
                    if let Some(found) = want(event) {
                        return found;
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        panic!("no such event within 30 s");
    }

    /// Regression (the exit hang): leaving joins the consumer thread, which
    /// may sit in the revoke barrier waiting for a release that the shell's loop
    /// never sends (the revoke event is queued behind a child exit that led
    /// to the exit). Leaving must end the barrier, or neli-run never exits.
    /// librdkafka's mock cluster is the broker (in-process, over TCP).
    #[test]
    fn leaving_ends_a_revoke_barrier_the_shell_loop_never_released() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("g.neli", 1, 1).expect("topic");
        let (kafka, mut events) = connect(&cluster.bootstrap_servers());
        next(&mut events, |e| matches!(e, Event::Assigned).then_some(()));
        kafka.rejoin();
        // Held, never sent to: the barrier stays closed.
        let _release = next(&mut events, |e| match e {
            Event::Revoked { release, .. } => Some(release),
            _ => None,
        });
        let (left, leaving) = mpsc::channel();
        std::thread::spawn(move || {
            kafka.leave();
            let _ = left.send(());
        });
        assert!(leaving.recv_timeout(Duration::from_secs(30)).is_ok(), "leaving the group hangs in the revoke barrier");
    }

    /// Both clients replace a connection silent for the request timeout
    /// (what lets a network blip pass: docs/operations.md, "Network
    /// blips"), unless the user says otherwise.
    #[test]
    fn both_clients_replace_a_connection_stuck_after_a_blip_unless_the_user_says() {
        let settings = |extra: &[&str]| {
            let args = ["neli-run", "--group", "g"].iter().chain(extra).chain(&["--", "true"]);
            let cli = crate::cli::Cli::try_parse_from(args).expect("valid arguments");
            Settings::of(&Config::from_args(cli.run, None).expect("valid configuration"))
        };
        let s = settings(&[]);
        assert_eq!(s.timing.request_timeout(), Duration::from_millis(3300));
        for config in [consumer_config(&s), producer_config(&s)] {
            assert_eq!(config.get("socket.timeout.ms"), Some("3300"));
            // Where partition 0 moved is asked every heartbeat interval.
            assert_eq!(config.get("topic.metadata.refresh.interval.ms"), Some("500"));
        }
        let s = settings(&["-X", "socket.timeout.ms=20000"]);
        for config in [consumer_config(&s), producer_config(&s)] {
            assert_eq!(config.get("socket.timeout.ms"), Some("20000"));
        }
    }
}
