//! The roster (docs/hot-set.md, slice 3): cold members write their
//! candidacies to a topic of their own, `<topic>.roster`, that only the
//! owner of the control partition reads, so that what every other member
//! reads (partition 0: the hot set's records and the list) no longer grows
//! with the group. Hot members (seat holders, the hot standbys the list
//! names) and members out for health or a drain write to partition 0 as
//! before. A member that may not use the roster (an ACL, a broker that
//! will not create it) writes to partition 0 as before, and says once
//! which ACL to add.
//!
//! - Written every `ROSTER_INTERVALS` candidacy intervals (30 s at the
//!   defaults): one reader, so no group budget (`candidacy::GROUP_BUDGET`
//!   bounds what every member reads of partition 0). Each record says how
//!   long it counts (three of its writer's intervals), so its reader's
//!   judgement of liveness follows the writer's interval with no setting.
//! - Read by the owner of the control partition (while it writes
//!   heartbeats there) on the watcher's thread, with a client of its own,
//!   from the last `TAIL` records (at most the retention's), and handed to
//!   the core as every candidacy is (`Event::Candidacy`).
//! - Retention of ten minutes: a record counts at most three roster
//!   intervals, so older ones are of no use, and a new owner reads at most
//!   ten minutes of the fleet's records.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::admin::AdminClient;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::BaseRecord;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, info, warn};

use super::candidacy;
use super::consumer::Out;
use super::{Kafka, Settings, CONTROL_PARTITION};
use crate::clock::BootTime;

/// How many candidacy intervals a cold member's roster record is written
/// apart (30 s at the default timing).
pub(super) const ROSTER_INTERVALS: u32 = 30;

/// How many of the roster's newest records a new owner reads: three roster
/// intervals of a fleet of 20,000 members.
pub const TAIL: i64 = 65_536;

/// The roster's retention and segment, in ms.
const RETENTION_MS: &str = "600000";
const SEGMENT_MS: &str = "60000";

/// The roster topic of the group's `topic`.
pub fn topic_of(topic: &str) -> String {
    format!("{topic}.roster")
}

/// What the adapter, the producer's context and the watcher share of the
/// roster.
#[derive(Debug)]
pub(super) struct Roster {
    pub(super) topic: String,
    /// The group's topic: what a denial's advice names beside it.
    group_topic: String,
    /// Whether our candidacies go to it while we are cold (false once
    /// denied, and until we know it exists).
    usable: AtomicBool,
    /// Known to be out of use for us: denied, or refused by the broker.
    /// Not when we could not look (a broker that did not answer at our
    /// start): other members may use it, and as the owner of partition 0
    /// we read it all the same.
    off: AtomicBool,
    /// A record of ours has been written to it: a denial heard after that
    /// without the roster's name is the group topic's.
    proven: AtomicBool,
    /// Until when (boot clock, ns) we read it: while we write heartbeats
    /// on the control partition as its owner, and a deadline after.
    owner_until: AtomicU64,
}

impl Roster {
    pub(super) fn new(group_topic: &str) -> Roster {
        Roster {
            topic: topic_of(group_topic),
            group_topic: group_topic.to_string(),
            usable: AtomicBool::new(false),
            off: AtomicBool::new(false),
            proven: AtomicBool::new(false),
            owner_until: AtomicU64::new(0),
        }
    }

    pub(super) fn usable(&self) -> bool {
        self.usable.load(Ordering::Relaxed)
    }

    /// A record of ours was written to `topic`.
    pub(super) fn delivered(&self, topic: &str) {
        if topic == self.topic {
            self.proven.store(true, Ordering::Relaxed);
        }
    }

    /// Whether an error with `code` that `what` describes is the roster's
    /// (then it is off, said once, and the error is no member's end): a
    /// denial that names it, or one heard before any record of ours was
    /// written to it (librdkafka does not always name the topic; a true
    /// denial of the group's topic recurs at its next write, and is heard
    /// then).
    pub(super) fn denied(&self, code: RDKafkaErrorCode, what: &str) -> bool {
        let denial = matches!(code, RDKafkaErrorCode::TopicAuthorizationFailed);
        let ours = what.contains(&self.topic) || (self.usable() && !self.proven.load(Ordering::Relaxed));
        if !denial || !ours {
            return false;
        }
        self.off.store(true, Ordering::Relaxed);
        if self.usable.swap(false, Ordering::Relaxed) {
            warn!(topic = %self.topic, advice = %self.advice(), "denied the roster topic: cold standbys' candidacies go to partition 0 of the group's topic, which every member reads");
        }
        true
    }

    /// The ACL that lets a member use the roster.
    fn advice(&self) -> String {
        format!(
            "grant DESCRIBE, READ and WRITE (and CREATE while it does not exist) on topic {roster} (kafka-acls.sh \
             --add --allow-principal User:... --operation Read --operation Write --operation Describe --topic \
             {roster}), or one PREFIXED ACL on {topic} that covers both (--resource-pattern-type prefixed --topic \
             {topic})",
            roster = self.topic,
            topic = self.group_topic
        )
    }

    /// We wrote a heartbeat on `partition` (`owner`: not a disclaimer):
    /// the owner of the control partition reads the roster for the next
    /// `deadline`.
    pub(super) fn heartbeat(&self, partition: super::Partition, owner: bool, deadline: Duration) {
        if partition != CONTROL_PARTITION {
            return;
        }
        let until = if owner { (BootTime::now() + deadline).as_nanos() } else { 0 };
        self.owner_until.store(until, Ordering::Relaxed);
    }

    /// Whether we own the control partition (as our heartbeats on it say).
    fn owning(&self) -> bool {
        BootTime::now().as_nanos() < self.owner_until.load(Ordering::Relaxed)
    }

    /// Whether we read the roster now: we own the control partition, and
    /// the roster is not known to be out of use. A member that could not
    /// look at it when it started reads it too: a 100-member soak saw one
    /// (its broker storming) own partition 0, read no roster, name a short
    /// list from what partition 0 held, and 75 cold members join at once.
    pub(super) fn reading(&self) -> bool {
        self.owning() && !self.off.load(Ordering::Relaxed)
    }
}

/// Makes sure the roster exists (created as the group's topic is: one
/// partition, a short retention) and turns it on; a denial or any other
/// failure leaves it off for our writes (our candidacies while cold go to
/// partition 0, as before the roster), said once. Only a denial or a
/// refusal turns it off for our reads too: a broker that did not answer
/// says nothing of it, and is asked again (`look_again`).
pub(super) fn ensure(
    s: &Settings,
    consumer: &std::sync::Arc<BaseConsumer<super::context::ReaderContext>>,
    roster: &std::sync::Arc<Roster>,
) -> std::sync::Arc<Roster> {
    if look(s, consumer, roster, false) {
        look_again(s, consumer, roster);
    }
    roster.clone()
}

/// Looks at the roster again every roster interval while it went
/// unanswered, on a thread of its own, until it answers or the consumer is
/// gone: a broker that did not answer at our start (storming, restarting)
/// left our cold candidacies on partition 0, read by every member, for as
/// long as we ran.
fn look_again(
    s: &Settings,
    consumer: &std::sync::Arc<BaseConsumer<super::context::ReaderContext>>,
    roster: &std::sync::Arc<Roster>,
) {
    let (s, consumer, roster) = (s.clone(), std::sync::Arc::downgrade(consumer), roster.clone());
    let every = s.candidacy_interval * ROSTER_INTERVALS;
    let looking = std::thread::Builder::new().name("neli-roster".into()).spawn(move || loop {
        std::thread::sleep(every);
        match consumer.upgrade() {
            Some(consumer) if look(&s, &consumer, &roster, true) => {}
            _ => return,
        }
    });
    if let Err(err) = looking {
        debug!(%err, "no thread to look at the roster topic again: our candidacies while cold stay on partition 0");
    }
}

/// `ensure`'s one look (`again`: not the first); true if it went
/// unanswered.
fn look(s: &Settings, consumer: &BaseConsumer<super::context::ReaderContext>, roster: &Roster, again: bool) -> bool {
    let code = match consumer.fetch_metadata(Some(&roster.topic), Duration::from_secs(5)) {
        Ok(md) => md.topics().iter().find(|t| t.name() == roster.topic).map_or(
            Some(RDKafkaErrorCode::UnknownTopicOrPartition),
            |t| match t.error().map(RDKafkaErrorCode::from) {
                None if t.partitions().is_empty() => Some(RDKafkaErrorCode::UnknownTopicOrPartition),
                code => code,
            },
        ),
        Err(err) => Some(err.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
    };
    let code = match code {
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::LeaderNotAvailable) => create(s, roster),
        code => code,
    };
    match code {
        None => {
            roster.usable.store(true, Ordering::Relaxed);
            if again {
                info!(topic = %roster.topic, "the roster topic answers now: our candidacies while cold go to it");
            }
        }
        Some(code) if super::fatal_kind(code) == Some(crate::exit::Kind::Denied) => {
            roster.off.store(true, Ordering::Relaxed);
            warn!(topic = %roster.topic, %code, advice = %roster.advice(), "denied the roster topic: cold standbys' candidacies go to partition 0 of the group's topic, which every member reads");
        }
        // Said once: a look again that goes unanswered says nothing new.
        Some(code) if unanswered(code) => {
            if !again {
                warn!(topic = %roster.topic, %code, "cannot look at the roster topic now: our candidacies while cold go to partition 0 of the group's topic, which every member reads, until it answers; as the owner of partition 0 we read the roster all the same");
            }
            return true;
        }
        Some(code) => {
            roster.off.store(true, Ordering::Relaxed);
            warn!(topic = %roster.topic, %code, "no roster topic: cold standbys' candidacies go to partition 0 of the group's topic, which every member reads");
        }
    }
    false
}

/// Whether `code` says the broker did not answer (down, slow, moving),
/// not that the roster is refused: nothing is known of it yet.
fn unanswered(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode::*;
    matches!(
        code,
        BrokerTransportFailure
            | OperationTimedOut
            | RequestTimedOut
            | AllBrokersDown
            | NetworkException
            | LeaderNotAvailable
            | NotController
            | BrokerNotAvailable
            | Fail
    )
}

/// Creates the roster topic as a member makes its topics
/// (`topic::create`); None when it exists now. On one of tokio's blocking
/// threads (Kafka::connect's), as the group's topic is created; on a
/// runtime of its own elsewhere.
fn create(s: &Settings, roster: &Roster) -> Option<RDKafkaErrorCode> {
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        match s.target.client_config(&[("client.id", &s.client_id)]).create() {
            Ok(admin) => admin,
            Err(err) => return Some(err.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
        };
    let own = match tokio::runtime::Handle::try_current() {
        Ok(_) => None,
        Err(_) => match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
            Ok(runtime) => Some(runtime),
            Err(_) => return Some(RDKafkaErrorCode::Fail),
        },
    };
    let runtime = own.as_ref().map_or_else(tokio::runtime::Handle::current, |r| r.handle().clone());
    let configs = [("retention.ms", RETENTION_MS), ("segment.ms", SEGMENT_MS)];
    match super::topic::create(&admin, &runtime, &roster.topic, 1, &configs) {
        super::topic::Created::Made => None,
        super::topic::Created::Denied(code) | super::topic::Created::Refused(code) => Some(code),
    }
}

/// Our last candidacy record since our last heartbeat: when, the interval
/// it gave, whether it said we are unhealthy or drained, and whether it
/// went to the roster.
#[derive(Clone, Copy, Debug)]
pub(super) struct Written {
    at: std::time::Instant,
    interval: Duration,
    unhealthy: bool,
    drained: bool,
    roster: bool,
}

impl Kafka {
    /// Queues our candidacy record (the withdrawal when `leaving`). Never
    /// blocks. A cold member writes it to the roster every
    /// `ROSTER_INTERVALS` candidacy intervals; any other to partition 0,
    /// and in a group past `candidacy::GROUP_BUDGET` members, one that says
    /// nothing new is skipped until the interval our last one gave
    /// (`candidacy::interval`) has nearly run.
    pub fn send_candidacy(&mut self, leaving: bool) {
        let since_ms = *self.standby_since.get_or_insert_with(crate::clock::wall_ms);
        let (drained, unhealthy) = (self.outs.out == Out::Drained, self.outs.out == Out::Unhealthy);
        let to_roster = self.outs.out == Out::Cold && self.roster.usable();
        let now = std::time::Instant::now();
        // Half a base interval early: the core asks every base interval,
        // and a few microseconds late for this one must not skip a turn.
        let early = self.candidacy_interval / 2;
        let said = (unhealthy, drained, to_roster);
        if let Some(last) = self.candidacy_written.filter(|l| !leaving && (l.unhealthy, l.drained, l.roster) == said) {
            if now + early < last.at + last.interval {
                return;
            }
        }
        let interval = if to_roster {
            self.candidacy_interval * ROSTER_INTERVALS
        } else {
            let others =
                self.census.lock().unwrap_or_else(std::sync::PoisonError::into_inner).live(crate::clock::wall_ms());
            candidacy::interval(self.candidacy_interval, others)
        };
        self.candidacy_written = Some(Written { at: now, interval, unhealthy, drained, roster: to_roster });
        let record = candidacy::Record {
            drained,
            crontab: self.crontab.as_ref().map(|c| c.digest.clone()),
            jobs_on: self.crontab.as_ref().map(|c| c.jobs_on.clone()),
            roles: self.roles,
            ..candidacy::Record::new(&self.member, self.priority, false, since_ms, interval, leaving, unhealthy)
        };
        let value = record.encode();
        let topic = if to_roster { &self.roster.topic } else { &self.topic };
        let record =
            BaseRecord::to(topic).partition(CONTROL_PARTITION).key(self.member.name.as_bytes()).payload(&value);
        if let Err((err, _)) = self.producer.send(record) {
            debug!(%err, "candidacy not queued");
        }
    }
}

/// The owner's reader of the roster, on the watcher's thread: a client of
/// its own, made the first time we own the control partition, reading
/// while we do.
#[derive(Default)]
pub(super) struct Reader {
    client: Option<BaseConsumer>,
    reading: bool,
    /// Whether we owned the control partition at the last turn.
    owning: bool,
    /// The roster's end when we came to own the control partition (None:
    /// not known yet: asked again each second, a broker just restarted
    /// may not answer at once), when we last asked, and the offset we
    /// read next.
    end: Option<i64>,
    asked: Option<Instant>,
    next: i64,
    /// Said (`Read::to_end`) since we came to own it.
    said: bool,
}

/// One turn of the roster's reader.
pub(super) struct Read {
    /// The candidacies read since the last turn.
    pub(super) candidacies: Vec<candidacy::Record>,
    /// Once each time we come to own the control partition: the roster is
    /// read to its end as it was then, or there is none to read (not in
    /// use: cold members write to partition 0). The owner names its hot
    /// list only after (`leader::Input::RosterRead`), or a while after.
    pub(super) to_end: bool,
}

impl Reader {
    /// Follows `roster.reading()`: assigns the roster from its last `TAIL`
    /// records when we come to own the control partition, and unassigns it
    /// when we no longer do. Then the candidacies read since last time.
    pub(super) fn read(&mut self, config: &rdkafka::ClientConfig, roster: &Roster) -> Read {
        let owning = roster.owning();
        if owning != self.owning {
            (self.owning, self.said) = (owning, false);
        }
        let reading = roster.reading();
        if reading != self.reading {
            self.reading = reading;
            self.follow(config, roster);
        }
        let ask = self.asked.is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
        if self.reading && self.end.is_none() && ask {
            self.end = self.ends(roster, Duration::from_secs(1)).map(|(_, high)| high);
        }
        let mut candidacies = Vec::new();
        if let Some(client) = self.client.as_ref().filter(|_| self.reading) {
            // A bounded turn: the watcher has partition 0 to read too.
            for _ in 0..1024 {
                match client.poll(Duration::ZERO) {
                    Some(Ok(msg)) => {
                        self.next = self.next.max(msg.offset() + 1);
                        candidacies.extend(msg.payload().and_then(candidacy::Record::decode));
                    }
                    Some(Err(err)) => debug!(%err, "reading the roster"),
                    None => break,
                }
            }
        }
        let read = !self.reading || self.end.is_some_and(|end| self.next >= end);
        let to_end = self.owning && !self.said && read;
        if to_end {
            self.said = true;
            debug!(offset = self.next, "the roster read to its end: the cold members are known");
        }
        Read { candidacies, to_end }
    }

    /// The roster's first and next offsets, if its broker answers within
    /// `timeout` (on the watcher's thread).
    fn ends(&mut self, roster: &Roster, timeout: Duration) -> Option<(i64, i64)> {
        self.asked = Some(Instant::now());
        let client = self.client.as_ref()?;
        client
            .fetch_watermarks(&roster.topic, 0, timeout)
            .map_err(|err| debug!(%err, "the roster's ends: reading its last records"))
            .ok()
    }

    fn follow(&mut self, config: &rdkafka::ClientConfig, roster: &Roster) {
        if self.client.is_none() && self.reading {
            match config.create() {
                Ok(client) => self.client = Some(client),
                Err(err) => warn!(%err, "no client to read the roster with: cold standbys are not known"),
            }
        }
        let ends = if self.reading { self.ends(roster, Duration::from_secs(5)) } else { None };
        self.end = ends.map(|(_, high)| high);
        let Some(client) = &self.client else { return };
        let result = if self.reading {
            let from = match ends {
                Some((low, high)) => {
                    self.next = low.max(high - TAIL);
                    Offset::Offset(self.next)
                }
                None => {
                    self.next = 0;
                    Offset::OffsetTail(TAIL)
                }
            };
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&roster.topic, 0, from).and_then(|()| client.assign(&tpl))
        } else {
            client.unassign()
        };
        match result {
            Ok(()) => debug!(reading = self.reading, "the roster reader follows our ownership of partition 0"),
            Err(err) => warn!(%err, "cannot read the roster: cold standbys are not known"),
        }
    }
}

/// What the watcher is told of the roster (`wake::Watching::roster`).
pub(super) fn watching(
    s: &Settings,
    roster: &std::sync::Arc<Roster>,
) -> (std::sync::Arc<Roster>, rdkafka::ClientConfig, Duration, Duration) {
    (roster.clone(), reader_config(s), s.owner_silence, s.candidacy_interval)
}

/// The roster reader's configuration: as the watcher's, but answered at
/// once (it reads what cold members write, a record an interval each).
pub(super) fn reader_config(s: &Settings) -> rdkafka::ClientConfig {
    let mut config = super::wake::watcher_config(s, false);
    config.set("fetch.min.bytes", "1").set("client.id", format!("{}-roster", s.client_id));
    config
}

/// A cold member's evidence that it reads what is written to the control
/// partition (`leader::cold::ECHOES`), now that its own candidacies go to
/// the roster, which it does not read: once no live owner's record has
/// been read for the owner's silence, at most once a candidacy interval,
/// the watcher asks the partition's end (ListOffsets) and counts an echo
/// when it has read up to it. A broker too slow to answer our fetches
/// leaves records unread (no echo); one that answers them finds nothing
/// of the hot set because it wrote nothing. Costs nothing while the owner
/// is heard.
pub(super) struct Echo {
    silence: Duration,
    every: Duration,
    heard: std::time::Instant,
    asked: Option<std::time::Instant>,
}

impl Echo {
    pub(super) fn new(silence: Duration, every: Duration) -> Echo {
        Echo { silence, every, heard: std::time::Instant::now(), asked: None }
    }

    /// A live owner's record was read.
    pub(super) fn heard(&mut self) {
        self.heard = std::time::Instant::now();
        self.asked = None;
    }

    /// Whether, asked now (when due), the watcher has read every record of
    /// the control partition of `topic`. The end is asked through `ends`
    /// (the group's consumer, which a cold member does not fetch with):
    /// on the watcher's own connection it would wait behind its parked
    /// fetch, since Kafka answers a connection's requests in order.
    pub(super) fn caught_up(
        &mut self,
        watcher: &BaseConsumer,
        ends: &BaseConsumer<super::context::ReaderContext>,
        topic: &str,
    ) -> bool {
        if self.heard.elapsed() < self.silence || self.asked.is_some_and(|at| at.elapsed() < self.every) {
            return false;
        }
        self.asked = Some(std::time::Instant::now());
        let Ok((_, end)) = ends.fetch_watermarks(topic, CONTROL_PARTITION, self.every.max(Duration::from_secs(1)))
        else {
            return false;
        };
        let read =
            watcher.position().ok().and_then(|tpl| tpl.find_partition(topic, CONTROL_PARTITION)?.offset().to_raw());
        read.is_some_and(|read| read >= end)
    }
}

/// How long ago a live disclaimer in `payload` (younger at `now_ms`, our
/// wall clock, than its writer's heartbeat deadline) was written, if it
/// hands the control partition to `me`: a cold member's watcher hears it
/// so that it joins to take over (`leader::Input::HandedTo`).
pub(super) fn handed_to(payload: &[u8], me: &super::heartbeat::Member, now_ms: u64) -> Option<Duration> {
    use super::heartbeat::{Heartbeat, WireStance};
    let hb = Heartbeat::decode(payload)?;
    let age = now_ms.saturating_sub(hb.at_ms);
    let ours = hb.stance == Some(WireStance::Released) && hb.to.as_deref() == Some(me.name.as_str());
    (ours && !hb.is_from(me) && age < hb.deadline_ms).then(|| Duration::from_millis(age))
}
