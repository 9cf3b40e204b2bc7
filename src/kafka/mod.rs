//! The Kafka adapter: group membership and heartbeats for the shell's loop.
//! (`config` builds rdkafka's client configuration; `status` and the dev
//! broker have clients of their own.)
//!
//! - A consumer joins the group on a thread of its own (`neli-kafka`,
//!   consumer.rs). Its rebalance hooks (context.rs) turn assignments of the
//!   seats' partitions into events; on revoke the hook *blocks* until the
//!   shell's loop says each revoked seat's child is gone (barrier.rs). That
//!   block inside librdkafka's rebalance callback is the barrier that keeps
//!   the next leader from starting early: the group cannot finish the
//!   rebalance while we have not given the partitions up. librdkafka keeps
//!   heartbeating the coordinator meanwhile (join state WAIT_UNASSIGN_CALL),
//!   and config/timing.rs bounds the barrier by the session timeout for
//!   brokers that ignore that.
//! - The same thread reads the seats' partitions and the control partition,
//!   and reports every record that concerns us (decode.rs).
//! - A producer writes our heartbeats. It is separate from the consumer so
//!   that a blocked poll cannot delay them: librdkafka's own threads send
//!   them. A thread of ours serves its delivery reports and errors every
//!   100 ms (rdkafka's ThreadedProducer polls in a loop that spins out the
//!   last millisecond of every 100 ms: 0.9 % of a core, idle), and a flush
//!   serves them itself.
//!
//! Fencing does not live here: the timer of the shell's loop and the shim's lease do
//! it, so nothing stuck inside librdkafka can delay it.

mod agree;
mod barrier;
mod bell;
pub mod candidacy;
mod cold;
mod consumer;
mod context;
mod decode;
pub mod heartbeat;
mod nudge;
pub mod placement;
pub mod roster;
mod standby;
pub mod topic;
mod wake;
pub mod yield_request;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use tokio::sync::mpsc::UnboundedSender;
use tracing::debug;

use crate::clock::BootTime;
use crate::config::creation_error;
use crate::config::timing::Timing;
use crate::config::{Config, Target};
use crate::exit::{Failure, Kind};
use crate::leader::{Candidacy, Other, Pause, Record};
pub use barrier::Seats;
use bell::{Bell, Rung};
pub use consumer::Out;
use consumer::{AsideFor, Ask, Asks};
use context::{Reach, ReaderContext, WriterContext};
use heartbeat::{Content, Heartbeat, Member, WireTiming};

use crate::leader::HotList;
pub use crate::leader::{Partition, CONTROL_PARTITION};
pub use agree::CrontabSaid;

/// What the Kafka side reports to the shell's loop. Events about a seat
/// carry its partition; those about the member (standby, yield, pause,
/// candidacy, fatal) do not.
// A record is a few hundred bytes and comes a few times a second: moved,
// not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event {
    /// We are in the group, but another member holds every seat's partition.
    Standby,
    /// A seat's partition is ours.
    Assigned { partition: Partition },
    /// A seat's partition is being taken away. The rebalance callback is
    /// blocked until `release` is sent to (or dropped), and until the
    /// releases of the other seats revoked with it are too.
    Revoked { partition: Partition, lost: bool, release: mpsc::SyncSender<()> },
    /// One of our own heartbeats, read back from a seat's partition;
    /// `more`: records fetched after it are still to be sent (`CaughtUp`
    /// follows them).
    OwnHeartbeat { partition: Partition, offset: i64, sent: BootTime, more: bool },
    /// One of our own heartbeats was written to a seat's partition (a
    /// delivery report): said with several seats, for a session after the
    /// group revoked one, while the seats kept read nothing back.
    Delivered { partition: Partition, offset: i64, sent: BootTime },
    /// Every record fetched so far has been sent, after an own heartbeat
    /// of this seat that said `more`.
    CaughtUp { partition: Partition },
    /// Another member's heartbeat, on a seat's partition.
    OtherHeartbeat(Partition, Other),
    /// `neli-run yield` asked us (while we own the control partition) to
    /// hand over (to the member named, with `yield --to`).
    Yield { to: Option<String> },
    /// A pause or resume request on a seat's partition (`neli-run pause` on
    /// partition 0, `cron pause JOB` on the job's), in the backlog too: the
    /// newest is the seat's state whenever it was written.
    Pause(Partition, Pause),
    /// A `cron trigger JOB` request on the job's partition, in the backlog
    /// too: whether it was answered is the records' to say.
    Trigger(Partition, crate::leader::Trigger),
    /// Another member's candidacy record.
    Candidacy(Candidacy),
    /// A live record of the control partition's owner, read by the
    /// watcher, and the hot standbys it names (`leader::Input::Hot`).
    Hot(Option<crate::leader::HotList>),
    /// The watcher read back a candidacy of ours (`leader::Input::Echo`).
    Echo,
    /// Our reader of the roster has read it to its end as the control
    /// partition's owner (`leader::Input::RosterRead`).
    RosterRead,
    /// The watcher read a disclaimer handing the control partition to us,
    /// written this long ago (`leader::Input::HandedTo`).
    HandedTo(Duration),
    /// `neli-run drain` (`drained`) or `undrain` named us, at `offset` of
    /// the control partition (heard by the watcher and by the consumer
    /// alike: the shell takes the newest); `by` says who asked.
    Drain { drained: bool, offset: i64, by: String },
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

/// Waits until every record `producer` holds is delivered or refused (its
/// delivery report served), for up to `within`. rdkafka's `flush` serves
/// the reports in slices of 100 ms that each run to their end, so a write
/// acknowledged in a millisecond took 100 ms to be known: a fleet crontab
/// placing its jobs, a claim at a time, paid that per job.
pub(crate) fn flush<C: ProducerContext>(
    producer: &BaseProducer<C>,
    within: Duration,
) -> rdkafka::error::KafkaResult<()> {
    let until = Instant::now() + within;
    while producer.in_flight_count() > 0 {
        if Instant::now() >= until {
            return Err(rdkafka::error::KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut));
        }
        producer.poll(Duration::from_millis(1));
    }
    Ok(())
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
    /// Per seat: the token we last wrote, and since when (wall clock) we
    /// hold it.
    leading: BTreeMap<Partition, (i64, u64)>,
    /// Whether Kafka answers, as both clients last heard.
    reach: Reach,
    asks: Arc<Asks>,
    /// Whether we stay out of the group, as last asked (`keep_out`,
    /// `cold`), and the hot standbys we last named (cold.rs).
    outs: cold::Outs,
    /// The consumer thread: it says whether its close left the group.
    consumer: Option<JoinHandle<bool>>,
    /// The group's consumer and its subscription, to close it from here.
    group: Arc<BaseConsumer<ReaderContext>>,
    subscription: Arc<wake::Subscription>,
    /// Watches for other members' wakes (wake.rs); stopped and joined when
    /// we leave, once our own wake is written.
    watcher: Option<Joined>,
    waker: wake::Waker,
    /// Serves the producer; stopped and joined when we leave.
    _serving: Joined,
    /// Drops the admin client that created the topic, if we did.
    _admin: Option<Joined>,
    /// The end of each seat's partition when we joined, where Kafka said.
    born: BTreeMap<Partition, i64>,
    /// What our candidacy records say besides who we are.
    priority: u8,
    candidacy_interval: Duration,
    /// Wall clock (ms) since when we have been a standby: our first
    /// candidacy record since our last heartbeat.
    standby_since: Option<u64>,
    /// Our --roles above 1, said in every heartbeat (`Heartbeat::roles`).
    /// (`status` counts a crontab group's seats from the topic: a partition
    /// added since we started is not in it.)
    roles: Option<u32>,
    /// Under a crontab, what each heartbeat says of our file.
    crontab: Option<CrontabSaid>,
    /// The other members' live candidacies, as our watcher reads them, and
    /// our last candidacy: how often we write the next.
    census: Arc<Mutex<candidacy::Census>>,
    candidacy_written: Option<roster::Written>,
    /// Where cold members' candidacies go (roster.rs).
    roster: Arc<roster::Roster>,
}

/// A helper thread that must end before neli-run does: dropping this asks
/// it to stop (its flag, then its bell rung and an unpark, for a thread
/// waiting on either between turns) and joins it. A librdkafka client
/// destroyed on a thread that outlives `main` races exit's handlers, which
/// free what librdkafka's threads use: CI saw the heap corrupted and an
/// abort at exit, in place of the exit status due.
struct Joined {
    stop: Arc<(AtomicBool, Bell)>,
    handle: Option<JoinHandle<()>>,
}

impl Joined {
    fn spawn(name: &str, work: impl FnOnce(&AtomicBool, &Bell) + Send + 'static) -> Result<Joined, Failure> {
        let stop = Arc::new((AtomicBool::new(false), Bell::default()));
        let asked = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(&asked.0, &asked.1))
            .map_err(|e| Failure::new(Kind::Internal, format!("cannot start the {name} thread: {e}")))?;
        Ok(Joined { stop, handle: Some(handle) })
    }
}

impl Drop for Joined {
    fn drop(&mut self) {
        self.stop.0.store(true, Ordering::Relaxed);
        self.stop.1.ring();
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
        let asks = Arc::new(Asks::default());
        // A member with a health check joins once it passes.
        let outs = cold::Outs::new(if s.health_checked { Out::Unhealthy } else { Out::In });
        let reach = Reach::new(events.clone(), s.target.topic.clone(), s.target.group.clone());
        let config = consumer_config(s);
        // The user's -X wins here too.
        let request_timeout = config.get("socket.timeout.ms").and_then(|v| v.parse().ok()).map(Duration::from_millis);
        let reader = ReaderContext {
            reach: reach.clone(),
            asks: asks.clone(),
            seats: s.seats.clone(),
            standby: Default::default(),
            joined: AtomicBool::new(false),
            backlog: s.backlog,
            deadline: s.timing.heartbeat_deadline,
            standby_serve: consumer::standby_serve(s.timing.coordinator_heartbeat),
            interval: s.idle_heartbeat,
            assigned: Default::default(),
            assigned_at: Default::default(),
            drains_from: Default::default(),
            control_unread: AtomicI64::new(-1),
            kept: Mutex::default(),
            request_timeout: request_timeout.unwrap_or_else(|| s.timing.request_timeout()),
            passed: Mutex::default(),
            join_watch: Mutex::new(nudge::JoinWatch::new(s.timing.max_poll_interval, s.timing.session_timeout)),
            ends_from: Default::default(),
            nudge_config: s.target.client_config(&[
                ("client.id", &format!("{}-nudge", s.client_id)),
                ("group.id", &s.target.group),
                ("enable.auto.commit", "false"),
                // A commit that goes unanswered ends the nudge's client soon.
                ("socket.timeout.ms", "3000"),
            ]),
        };
        let writer = WriterContext {
            reach: reach.clone(),
            me: member.clone(),
            reports_for: (s.seats.known.len() > 1).then_some(s.timing.session_timeout),
            recorded: Default::default(),
        };

        let consumer: Arc<BaseConsumer<ReaderContext>> =
            Arc::new(config.create_with_context(reader).map_err(|e| creation_error(e, &s.target))?);
        let producer: Arc<BaseProducer<WriterContext>> =
            Arc::new(producer_config(s).create_with_context(writer).map_err(|e| creation_error(e, &s.target))?);

        let _ = consumer.context().ends_from.set(Arc::downgrade(&producer));
        let served = producer.clone();
        let serving = Joined::spawn("neli-produce", move |stop, bell| serve_producer(&served, stop, bell))?;
        let admin = topic::ensure_topic(s, &consumer)?;
        let roster = roster::ensure(s, &consumer, &reach.roster);
        let born: BTreeMap<Partition, i64> = s
            .seats
            .known
            .iter()
            .filter_map(|&p| Some((p, consumer.fetch_watermarks(&s.target.topic, p, Duration::from_secs(2)).ok()?.1)))
            .collect();
        if let Some(&end) = born.get(&CONTROL_PARTITION) {
            let _ = consumer.context().drains_from.set(end);
        }
        let subscription = Arc::new(wake::Subscription::default());
        if !s.health_checked {
            subscription
                .subscribe(&consumer, &s.target.topic)
                .map_err(|e| Failure::new(Kind::Internal, format!("cannot subscribe to {}: {e}", s.target.topic)))?;
        }
        let waker = wake::Waker::new(producer.clone(), s.target.topic.clone(), member.clone(), s.wake);
        let census = Arc::new(Mutex::new(candidacy::Census::default()));
        // Watching with --no-wake too: drains are read there.
        let watcher = {
            let client = wake::Client::of(s).map_err(|e| creation_error(e, &s.target))?;
            let (group, watched, counted) = (consumer.clone(), subscription.clone(), census.clone());
            let (from, me, heard) = (born.get(&CONTROL_PARTITION).copied(), member.clone(), events.clone());
            let (roster, cold) = (roster::watching(s, &roster), outs.watched());
            let watching = wake::Watching { from, wakes: s.wake, me, events: heard, roster, cold };
            Some(Joined::spawn("neli-watch", move |stop, _| {
                wake::watch(client, &watching, &group, &watched, &counted, stop)
            })?)
        };
        let (reader_member, reader_asks) = (member.clone(), asks.clone());
        let (group, subscribed, reader_waker) = (consumer.clone(), subscription.clone(), waker.clone());
        let aside_for = AsideFor {
            yielded: 3 * s.timing.session_timeout,
            handed_over: candidacy::LIVE_INTERVALS * s.candidacy_interval,
        };
        let thread = std::thread::Builder::new()
            .name("neli-kafka".into())
            .spawn(move || {
                consumer::consume(
                    consumer,
                    &subscription,
                    &reader_member,
                    (&reader_asks, outs.out),
                    aside_for,
                    &reader_waker,
                    &events,
                )
            })
            .map_err(|e| Failure::new(Kind::Internal, format!("cannot start the Kafka thread: {e}")))?;

        Ok(Kafka {
            producer,
            member,
            topic: s.target.topic.clone(),
            seq: 0,
            timing: WireTiming::from(&s.timing),
            leading: BTreeMap::new(),
            reach,
            asks,
            outs,
            consumer: Some(thread),
            group,
            subscription: subscribed,
            watcher,
            waker,
            _serving: serving,
            _admin: admin,
            born,
            priority: s.priority,
            candidacy_interval: s.candidacy_interval,
            standby_since: None,
            roles: u32::try_from(s.seats.known.len()).ok().filter(|&n| n > 1),
            crontab: None,
            census,
            candidacy_written: None,
            roster,
        })
    }

    /// Says `said` of our crontab in every heartbeat from now on: at start
    /// and whenever the file is read again.
    pub fn say_crontab(&mut self, said: Option<CrontabSaid>) {
        CrontabSaid::ours(said.as_ref());
        self.crontab = said;
    }

    /// The end of the seat's `partition` when we joined: every record from
    /// there on was written after we started, whatever the writers' clocks
    /// say.
    pub fn born(&self, partition: Partition) -> Option<i64> {
        self.born.get(&partition).copied()
    }

    /// Queues `record` as one heartbeat of the seat on `partition`, stamped
    /// with `now`, to that partition, naming the hot standbys `hot` (the
    /// control partition's owner's word). Never blocks.
    pub fn send_heartbeat(&mut self, partition: Partition, now: BootTime, (record, hot): (Record, Option<HotList>)) {
        // One sequence per writer: increasing on every partition too.
        self.seq += 1;
        self.standby_since = None;
        self.candidacy_written = None;
        let at_ms = crate::clock::wall_ms();
        let leading = match (record.stance.token(), self.leading.get(&partition)) {
            (Some(t), Some(&(held, since))) if t == held => Some((held, since)),
            (Some(t), _) => Some((t, at_ms)),
            (None, _) => None,
        };
        match leading {
            Some(held) => self.leading.insert(partition, held),
            None => self.leading.remove(&partition),
        };
        let owner = !matches!(record.stance, crate::leader::Stance::Released);
        let to = record.to.clone();
        self.roster.heartbeat(partition, owner, Duration::from_millis(self.timing.heartbeat_deadline_ms));
        let content = Content {
            record,
            since_ms: leading.map(|(_, since)| since),
            deadline_ms: self.timing.heartbeat_deadline_ms.max(1),
        };
        let heartbeat = Heartbeat {
            timing: Some(self.timing),
            // Out of the group, drained or not (a drained leader stands
            // aside as an unhealthy one does); a cold one may lead.
            unhealthy: matches!(self.outs.out, Out::Unhealthy | Out::Drained),
            roles: self.roles,
            crontab: self.crontab.as_ref().map(|c| c.digest.clone()),
            jobs_on: self.crontab.as_ref().map(|c| c.jobs_on.clone()),
            pad: self.pad(partition, hot.as_ref(), to.as_deref()),
            hot,
            ..Heartbeat::new(&self.member, self.seq, now, at_ms, content)
        };
        let value = heartbeat.encode();
        let record = BaseRecord::to(&self.topic).partition(partition).key(self.member.name.as_bytes()).payload(&value);
        if let Err((err, _)) = self.producer.send(record) {
            debug!(%err, "heartbeat not queued");
        }
    }

    /// Waits, when called, up to `timeout` for the heartbeats queued by
    /// then to be written (blocking: run it off the loop), serving the
    /// delivery reports itself (`flush`), since the consumer thread may be
    /// held in the revoke barrier meanwhile.
    pub fn flusher(&self, timeout: Duration) -> impl FnOnce() + Send + 'static {
        let producer = self.producer.clone();
        move || {
            if flush(&producer, timeout).is_err() {
                debug!("heartbeats not flushed within {timeout:?}");
            }
        }
    }

    /// Has both clients look at the topic's partitions now, not at their
    /// next periodic refresh (`topic.metadata.refresh.interval.ms`, 5
    /// minutes): partitions added for a fleet crontab's new jobs are then
    /// assigned as soon as the group's leader sees them, which rebalances
    /// the group incrementally (nobody's partitions move), and the producer
    /// writes to them (before, it refuses a partition it does not know).
    /// Only a request for every topic updates the group's view (librdkafka:
    /// a partial one could make a subscribed topic seem gone), so it is
    /// asked on a thread of its own, and only when the topic grew.
    pub fn look_for_partitions(&self) {
        let (group, producer) = (Arc::downgrade(&self.group), Arc::downgrade(&self.producer));
        let (topic, wait) = (self.topic.clone(), Duration::from_secs(10));
        let looked = std::thread::Builder::new().name("neli-metadata".into()).spawn(move || {
            let looked = [
                producer.upgrade().map(|p| p.client().fetch_metadata(Some(&topic), wait).map(drop)),
                group.upgrade().map(|g| g.fetch_metadata(None, wait).map(drop)),
            ];
            if let Some(Err(err)) = looked.into_iter().flatten().find(Result::is_err) {
                debug!(%err, "asked for the topic's partitions: no answer; librdkafka's own refresh will see them");
            }
        });
        if let Err(err) = looked {
            debug!(%err, "no thread to look for new partitions: librdkafka's own refresh will see them");
        }
    }

    /// Leaves the group and joins again, for a fresh assignment.
    pub fn rejoin(&self) {
        self.asks.ask(Ask::Rejoin);
    }

    /// Leaves the group for good, ahead of exiting: the consumer thread
    /// reads nothing more, and what it still owned is revoked
    /// (`Action::LeaveGroup`).
    pub fn leave_group(&self) {
        self.asks.ask(Ask::Leave);
    }

    /// Leaves the group and rejoins once another member leads (the end of
    /// a yield).
    pub fn stand_aside(&self) {
        self.asks.ask(Ask::StandAside);
    }

    /// Stays out of the group while `out` says so (this member is
    /// unhealthy, or drained: what our records say), and joins it again
    /// once `Out::In`: a
    /// standby leaves at once; a member that owns a seat's partition leaves
    /// as the core says (it stands aside), and rejoins only once back.
    pub fn keep_out(&mut self, out: Out) {
        self.outs.kept = out;
        self.ask_out();
    }

    /// As `stand_aside`, but for `to`, the member our disclaimer names:
    /// out of the group while it is live and does not lead yet (a broker
    /// may take seconds to hand it partition 0: tansu pauses 3 s, Kafka
    /// waits for its slowest member), and back at once if it dies. Back
    /// sooner, partition 0 could come back to us and be handed on again.
    pub fn hand_over(&self, to: String) {
        self.asks.ask(Ask::HandOver(to));
    }

    /// Whether Kafka answered last time we tried.
    pub fn reachable(&self) -> bool {
        self.reach.is_reachable()
    }

    /// Leaves the group so that a standby takes over at once, wakes the
    /// others once the group has answered (wake.rs), then closes the
    /// clients. Call only once the child is gone.
    pub fn leave(mut self) {
        // `closing` first: the revoke the leave causes must not block. The
        // leave at once, here, rather than on the consumer thread's next
        // turn; that thread closes the consumer once librdkafka has taken
        // it in (`consumer::consume`).
        self.asks.close();
        self.subscription.leave(&self.group);
        let left = self.consumer.take().is_some_and(|thread| thread.join().unwrap_or(false));
        if left && self.waker.send() {
            self.flusher(WAKE_WAIT)();
        }
        self.watcher.take();
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
    /// The seats' partitions (`leader::Settings::seats`, one per role;
    /// every partition under a fleet crontab): what elects a command here.
    pub seats: Seats,
    /// A health check gates leadership: stay out of the group until it
    /// says healthy (`Kafka::keep_out`).
    pub health_checked: bool,
    /// Wake the others when leaving, and watch for their wakes (wake.rs;
    /// `--no-wake` says no).
    pub wake: bool,
    /// What our candidacy records say, and how often we write them.
    pub priority: u8,
    pub candidacy_interval: Duration,
    /// `leader::Settings::idle_heartbeat`: what a gap in our own
    /// heartbeats is measured against.
    pub idle_heartbeat: Duration,
    /// `leader::Settings::owner_silence`: after it, a cold member's watcher
    /// checks that it has read every record of the control partition.
    pub owner_silence: Duration,
}

impl Settings {
    /// The adapter's share of `cfg`.
    pub fn of(cfg: &Config) -> Settings {
        Settings {
            target: cfg.kafka.clone(),
            client_id: cfg.name.clone(),
            timing: cfg.timing,
            backlog: backlog(&cfg.leader),
            seats: Seats { known: cfg.leader.seats().collect(), every: cfg.crontab.is_some() },
            health_checked: cfg.health.is_some(),
            wake: !cfg.no_wake,
            priority: cfg.leader.priority,
            candidacy_interval: cfg.leader.candidacy_interval,
            idle_heartbeat: cfg.leader.idle_heartbeat(),
            owner_silence: cfg.leader.owner_silence,
        }
    }
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

/// How long the broker may hold the owner's fetch of its own partitions
/// (`Timing::read_back_wait`), and at most `SEATS_READ_BACK_WAIT` for a
/// member of several seats: their heartbeats land together once an
/// interval (on one beat), and between beats a held fetch holds what its
/// connection asks behind it (a broker answers a connection's requests in
/// order): a newly assigned partition's first read and a rejoin's
/// metadata waited up to the whole interval, and a role moved in twice
/// the time.
fn read_back_wait(s: &Settings) -> Duration {
    let wait = s.timing.read_back_wait();
    if s.seats.known.len() > 1 {
        wait.min(SEATS_READ_BACK_WAIT)
    } else {
        wait
    }
}

/// `read_back_wait` of a member of several seats.
const SEATS_READ_BACK_WAIT: Duration = Duration::from_millis(100);

/// The consumer's configuration: it joins the group and reads the seats'
/// partitions and the control partition.
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
        ("fetch.wait.max.ms", &ms(read_back_wait(s))),
        // A fetch or a coordinator heartbeat stuck after a network blip is
        // sent again on a new connection, not waited out while TCP backs
        // off (Timing::request_timeout; a fetch is given its wait on top:
        // Timing::read_back_timeout).
        ("socket.timeout.ms", &ms(s.timing.read_back_timeout(read_back_wait(s)))),
        // Partition 0's leader moved (a rolling restart): the read-back
        // goes on at the new leader after 100 ms, not librdkafka's 500.
        ("fetch.error.backoff.ms", "100"),
        // The join state, for the join watchdog (nudge.rs).
        ("statistics.interval.ms", &ms(nudge::STATS_EVERY)),
    ])
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

/// How long leaving waits for our wake to be written: the others take over
/// at their next coordinator heartbeat without it.
const WAKE_WAIT: Duration = Duration::from_secs(1);

/// How many standbys a new owner is sure to know of (`backlog`): a larger
/// group still works, but its owner may miss a member of higher priority.
const STANDBYS: i64 = 64;

/// Serves the producer's delivery reports and errors (reachability, a
/// fatal error such as a refused login, which connecting waits for, and
/// our own records delivered while a revoke holds the consumer thread) as
/// librdkafka queues them (its bell), or every 100 ms without one, until
/// asked to stop. Not rdkafka's `poll(100ms)`: it spins through the last
/// millisecond of each wait.
///
/// A poll that does not wait serves one event, and each partition's
/// acknowledged batch is an event of its own: twelve roles write 24 records
/// a second, and one poll per wake left the reports further behind each
/// second (seen: seconds late, and their records held in memory
/// meanwhile). So each wake polls once more than there are messages not yet
/// served, which bounds the events queued: the queue is empty after it.
fn serve_producer<C: ProducerContext>(producer: &BaseProducer<C>, stop: &AtomicBool, bell: &Bell) {
    let rung = Rung::main(producer.client(), bell);
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..=producer.in_flight_count().max(0) {
            producer.poll(Duration::ZERO);
        }
        match &rung {
            Some(rung) => rung.wait(PRODUCER_IDLE),
            None => std::thread::park_timeout(Duration::from_millis(100)),
        }
    }
}

/// How long the producer thread waits for a delivery report or its stop
/// before it polls anyway (only a bound: both ring its bell).
const PRODUCER_IDLE: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests;
