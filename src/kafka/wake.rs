//! The wake: a member that left the group gracefully writes a record to the
//! control partition, and every other member watches for it and rejoins at
//! once, instead of learning of the rebalance from the answer to its next
//! coordinator heartbeat (up to `heartbeat.interval.ms` later). A graceful
//! handover then takes a few round trips (docs/how-it-works.md, "How long a
//! handover takes").
//!
//! - Written after the leave: a member woken before it rejoins the group as
//!   it is and hears of the leave only at its next heartbeat. An exit waits
//!   for the group's answer (the consumer's close, `Kafka::leave`); a
//!   stand-aside (a yield, a hand-over, a drain) cannot see the answer, and
//!   writes it once librdkafka has given its partitions up, which is when
//!   it sends the LeaveGroup (`Waker`).
//! - Read by a client of its own (`watch`, on the `neli-watch` thread), not
//!   in the group: the group's consumer owns no partition while a standby.
//!   Its fetch waits for `WATCH_MIN_BYTES`, which one wake record passes
//!   and a few heartbeats do not, so a broker that holds fetches open
//!   (Kafka, the dev broker) answers it at a wake or at its wait's end;
//!   tansu answers it at its wait's end.
//! - The rejoin: librdkafka has no call for it. Subscribing to the group's
//!   topic plus a name that does not exist makes it ask for metadata and
//!   rejoin with the same member id and nothing revoked; the subscription
//!   is put back afterwards (`Subscription`), and the errors that name is
//!   answered with are not ours (`Reach::wake_error`), with ACLs or without.
//! - A record of its own type: older versions ignore it, and a standby of
//!   an older version takes over at its next coordinator heartbeat as
//!   before (the join waits for it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use super::candidacy;
use super::context::{ReaderContext, WriterContext};
use super::heartbeat::Member;
use super::CONTROL_PARTITION;

/// How large a wake record is (its padding): more than the watchers'
/// `fetch.min.bytes`, which the heartbeats and candidacies written in one
/// fetch wait do not reach in a small group.
pub(super) const WAKE_BYTES: usize = 16 * 1024;
/// The watchers' `fetch.min.bytes`, in the group (hot standbys, seat
/// holders): one wake passes it.
const WATCH_MIN_BYTES: usize = WAKE_BYTES / 2;
/// A cold member's watcher's `fetch.min.bytes`: more than a wake and the
/// hot set's records of one cold wait (`cold_wait`) hold, so that a
/// handover, which a cold member has no part in, does not answer the
/// parked fetch of every cold member (and bring every one back for the
/// next): only a record padded to `CALL_BYTES` does, one naming a cold
/// member (an invite, a hand-over to it).
const COLD_MIN_BYTES: usize = 4 * WAKE_BYTES;
/// How large a record that calls a cold member in is (its padding): past
/// `COLD_MIN_BYTES` with its own fields.
pub(super) const CALL_BYTES: usize = COLD_MIN_BYTES;
/// How long the subscription with the name that does not exist stays:
/// long enough for librdkafka to have asked for its metadata and rejoined.
const WAKE_HOLD: Duration = Duration::from_secs(1);
/// How long after a wake errors about a missing or forbidden topic are
/// taken for the wake's (`Reach::wake_error`): its hold, and metadata
/// answered late.
pub(super) const WAKE_ERRORS: Duration = Duration::from_secs(4);

/// One wake record's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Always "wake": what tells it from the other records.
    #[serde(rename = "type")]
    kind: String,
    v: u32,
    name: String,
    incarnation: String,
    /// Wall clock (ms since the epoch) when written.
    at_ms: u64,
    /// Spaces up to `WAKE_BYTES`.
    #[serde(default)]
    pad: String,
}

impl Record {
    /// `member`'s wake, now.
    pub fn new(member: &Member) -> Record {
        Record {
            kind: "wake".into(),
            v: 1,
            name: member.name.clone(),
            incarnation: member.incarnation.clone(),
            at_ms: crate::clock::wall_ms(),
            pad: String::new(),
        }
    }

    /// Serialized, padded to `WAKE_BYTES`.
    pub fn encode(&self) -> Vec<u8> {
        let bare = serde_json::to_vec(self).expect("a wake always serializes").len();
        let pad = " ".repeat(WAKE_BYTES.saturating_sub(bare));
        serde_json::to_vec(&Record { pad, ..self.clone() }).expect("a wake always serializes")
    }

    /// Parses a record value that is a wake.
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice::<Record>(bytes).ok().filter(|w| w.kind == "wake")
    }

    fn is_from(&self, member: &Member) -> bool {
        self.name == member.name && self.incarnation == member.incarnation
    }
}

/// Writes this member's wake, from whichever thread left the group: the
/// exit (`Kafka::leave`, once the close is answered) or the consumer thread
/// standing aside (a yield, a hand-over, a drain: once librdkafka has
/// given the partitions up, which is when it sends the LeaveGroup; the
/// wake takes a write, a fetch and a metadata request more to reach a
/// standby, behind it).
#[derive(Clone)]
pub(super) struct Waker {
    producer: Arc<BaseProducer<WriterContext>>,
    topic: String,
    me: Member,
    /// False with `--no-wake`.
    on: bool,
}

impl Waker {
    pub(super) fn new(producer: Arc<BaseProducer<WriterContext>>, topic: String, me: Member, on: bool) -> Waker {
        Waker { producer, topic, me, on }
    }

    /// Queues our wake (said first: a member may read it before the next
    /// line); never blocks. False if none was queued.
    pub(super) fn send(&self) -> bool {
        if !self.on {
            return false;
        }
        info!("left the group; waking the others");
        let value = Record::new(&self.me).encode();
        let record =
            BaseRecord::to(&self.topic).partition(CONTROL_PARTITION).key(self.me.name.as_bytes()).payload(&value);
        match self.producer.send(record) {
            Ok(()) => true,
            Err((err, _)) => {
                debug!(%err, "wake not queued");
                false
            }
        }
    }
}

/// The group consumer's subscription, shared by the consumer thread (which
/// joins and leaves) and the watcher (which may only make it rejoin, while
/// it is in the group): one lock, so that a wake never lands after a leave
/// and rejoins a member that meant to stay out.
#[derive(Default)]
pub(super) struct Subscription {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Subscribed (in the group, or joining it).
    subscribed: bool,
    /// The consumer is closing or closed: nothing more may be asked of it.
    closed: bool,
    /// It was in the group when it left for good.
    left: bool,
    /// Left for good (`leave`): nothing rejoins it any more.
    leaving: bool,
    /// When a wake last subscribed to the name that does not exist too.
    woken: Option<Instant>,
    /// Wakes so far, for a fresh name each.
    wakes: u64,
}

impl Subscription {
    /// Subscribes `consumer` to `topic` alone (joining, or putting the
    /// subscription back after a wake). Err: what librdkafka said.
    pub(super) fn subscribe(&self, consumer: &BaseConsumer<ReaderContext>, topic: &str) -> Result<(), String> {
        let mut state = self.lock();
        if state.closed || state.leaving {
            return Ok(());
        }
        state.subscribed = true;
        state.woken = None;
        consumer.context().joined.store(false, Ordering::Relaxed);
        consumer.context().standby.joining();
        consumer.subscribe(&[topic]).map_err(|e| e.to_string())
    }

    /// Unsubscribes (leaves the group).
    pub(super) fn unsubscribe(&self, consumer: &BaseConsumer<ReaderContext>) {
        let mut state = self.lock();
        if state.closed || state.leaving {
            return;
        }
        state.subscribed = false;
        state.woken = None;
        consumer.context().joined.store(false, Ordering::Relaxed);
        consumer.context().standby.left();
        consumer.unsubscribe();
    }

    /// Whether we are subscribed.
    pub(super) fn subscribed(&self) -> bool {
        self.lock().subscribed
    }

    /// Leaves the group for good, once, ahead of the close: unsubscribes,
    /// which sends the LeaveGroup, and which librdkafka postpones while a
    /// rebalance is in flight until it is over (`left_yet`). A close alone
    /// sent none for a standby, nor for any member whose join was in
    /// flight, and the group waited out its session before its next
    /// rebalance (issue 65: a standby joining then was listed 4 to 6 s
    /// after its check passed). Any thread may call it, so that leaving
    /// does not wait for the consumer thread's poll to end.
    pub(super) fn leave(&self, consumer: &BaseConsumer<ReaderContext>) {
        let mut state = self.lock();
        if state.leaving || state.closed {
            return;
        }
        state.leaving = true;
        state.left = state.subscribed;
        if state.subscribed {
            consumer.unsubscribe();
        }
    }

    /// Whether librdkafka has sent our LeaveGroup (it forgets our member id
    /// then; it has none out of the group), or cannot be asked any more.
    pub(super) fn left_yet(&self, consumer: &BaseConsumer<ReaderContext>) -> bool {
        let state = self.lock();
        state.closed || member_id(consumer).is_empty()
    }

    /// Closes `consumer` (leaving the group first if it has not: `leave`),
    /// once: from then on nothing changes its subscription. Returns whether
    /// we were in the group when we left it.
    pub(super) fn close(&self, consumer: &BaseConsumer<ReaderContext>) -> bool {
        self.leave(consumer);
        let mut state = self.lock();
        if !state.closed {
            state.closed = true;
            if let Err(err) = consumer.close_queue() {
                debug!(%err, "closing the consumer");
            }
        }
        state.left
    }

    /// `consumer`'s assignment, unless it has begun to close: librdkafka
    /// drops a request made of a group it has terminated without an answer,
    /// and the caller waited for it for ever (an exit then took
    /// `LEAVE_WAIT`). Under the lock, so that the close cannot begin
    /// meanwhile.
    pub(super) fn assignment(&self, consumer: &BaseConsumer<ReaderContext>) -> Option<TopicPartitionList> {
        let state = self.lock();
        if state.closed {
            return None;
        }
        consumer.assignment().ok()
    }

    /// Makes `consumer` rejoin now, if it is in the group and has joined
    /// it (`ReaderContext::joined`): the group's topic and a fresh name that
    /// does not exist (a miss in librdkafka's metadata cache, which rejoins
    /// once the metadata is in).
    ///
    /// Not while librdkafka has no member id (`in_a_membership`).
    fn wake(&self, consumer: &BaseConsumer<ReaderContext>, topic: &str, me: &Member) -> bool {
        let mut state = self.lock();
        if !state.subscribed || state.closed || state.leaving || !consumer.context().joined.load(Ordering::Relaxed) {
            return false;
        }
        if !in_a_membership(consumer) {
            return false;
        }
        state.wakes += 1;
        let missing = format!("{topic}.wake-{}-{}", me.incarnation, state.wakes);
        // The window for the missing topic's errors opens first: librdkafka
        // may answer the subscription (its Metadata) and the consumer thread
        // hear the error before subscribe() has even returned here (seen: a
        // member exited 77 for a wake's TOPIC_AUTHORIZATION_FAILED).
        consumer.context().reach.woken();
        match consumer.subscribe(&[topic, &missing]) {
            Ok(()) => {
                state.woken = Some(Instant::now());
                true
            }
            Err(err) => {
                debug!(%err, "cannot rejoin for a wake");
                false
            }
        }
    }

    /// Puts the subscription back to the group's topic alone once a wake's
    /// rejoin has had its time (`WAKE_HOLD`) and librdkafka has a member id
    /// again (`in_a_membership`).
    pub(super) fn settle(&self, consumer: &BaseConsumer<ReaderContext>, topic: &str) {
        let mut state = self.lock();
        if state.closed || state.leaving || state.woken.is_none_or(|at| at.elapsed() < WAKE_HOLD) {
            return;
        }
        if !in_a_membership(consumer) {
            return;
        }
        state.woken = None;
        if let Err(err) = consumer.subscribe(&[topic]) {
            debug!(%err, "cannot put the subscription back after a wake");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The watcher's client configuration: the control partition alone, a
/// fetch that waits for a wake's size, or while the member is `cold` for a
/// call's (`COLD_MIN_BYTES`) and up to `cold_wait`. It names the group
/// (librdkafka assigns partitions only to a consumer of a group, and the
/// group's ACLs cover it) but never joins it: it subscribes to nothing.
pub(super) fn watcher_config(s: &super::Settings, cold: bool) -> rdkafka::ClientConfig {
    let hot_wait = s.timing.request_timeout().saturating_sub(Duration::from_secs(1)).max(Duration::from_millis(100));
    let (wait, min_bytes) = match cold {
        true => (cold_wait(s).max(hot_wait), COLD_MIN_BYTES),
        false => (hot_wait, WATCH_MIN_BYTES),
    };
    // A fetch is given `socket.timeout.ms` on top of its wait; librdkafka
    // warns of a wait within a second of the socket timeout, since the
    // requests behind the fetch on its connection wait for it (Kafka
    // answers a connection's requests in order).
    let socket = (wait + Duration::from_secs(1)).max(s.timing.request_timeout());
    s.target.client_config(&[
        ("client.id", &s.client_id),
        ("group.id", &s.target.group),
        ("enable.auto.commit", "false"),
        ("allow.auto.create.topics", "false"),
        ("enable.partition.eof", "false"),
        ("fetch.wait.max.ms", &super::ms(wait)),
        ("fetch.min.bytes", &min_bytes.to_string()),
        ("socket.timeout.ms", &super::ms(socket)),
    ])
}

/// How long a cold member's watcher's fetch waits: a second less than the
/// owner's silence (`leader::Settings::owner_silence`), so that a live
/// owner's records, which only its wait's end brings, are read before the
/// member would look for the silence (5 s at the defaults).
fn cold_wait(s: &super::Settings) -> Duration {
    s.owner_silence.saturating_sub(Duration::from_secs(1))
}

/// What the watcher is told: where to read from, whether to act on wakes
/// (not with `--no-wake`), who we are, and where drains naming us go.
pub(super) struct Watching {
    /// The control partition's end when we joined, where known.
    pub(super) from: Option<i64>,
    pub(super) wakes: bool,
    pub(super) me: Member,
    pub(super) events: tokio::sync::mpsc::UnboundedSender<super::Event>,
    /// The roster, the client configuration its reader takes, the owner's
    /// silence and the candidacy interval (`super::roster::Echo`).
    pub(super) roster: (Arc<super::roster::Roster>, rdkafka::ClientConfig, Duration, Duration),
    /// Whether we are a cold standby now (`cold::Outs`): the watcher
    /// takes a client of the configuration for it (`Client::follow`).
    pub(super) cold: Arc<AtomicBool>,
}

/// The watcher's client, of the configuration for the standing it was
/// made for (`watcher_config`), and both configurations.
pub(super) struct Client {
    consumer: BaseConsumer,
    cold: bool,
    configs: [rdkafka::ClientConfig; 2],
}

impl Client {
    /// The watcher's first client, of the group's configuration.
    pub(super) fn of(s: &super::Settings) -> rdkafka::error::KafkaResult<Client> {
        let configs = [watcher_config(s, false), watcher_config(s, true)];
        Ok(Client { consumer: configs[0].create()?, cold: false, configs })
    }

    /// Takes a client of the other configuration when our standing has
    /// changed (cold, or back in the group), reading on from the first
    /// record not read yet if `reading`. A fetch's wait and MinBytes are
    /// fixed for a client's life in librdkafka; a member's standing
    /// changes seldom. If the new one cannot be made, the old one stays.
    fn follow(&mut self, watching: &Watching, context: &ReaderContext, topic: &str, reading: bool) {
        let cold = watching.cold.load(Ordering::Relaxed);
        if cold == self.cold {
            return;
        }
        let consumer: BaseConsumer = match self.configs[usize::from(cold)].create() {
            Ok(consumer) => consumer,
            Err(err) => {
                debug!(%err, cold, "the watcher keeps its client");
                return;
            }
        };
        let from = match context.resume() {
            Offset::End => watching.from.map_or(Offset::End, Offset::Offset),
            unread => unread,
        };
        let mut tpl = TopicPartitionList::new();
        let assigned = !reading
            || tpl.add_partition_offset(topic, CONTROL_PARTITION, from).and_then(|()| consumer.assign(&tpl)).is_ok();
        if assigned {
            debug!(cold, "the watcher's fetch follows our standing");
            (self.consumer, self.cold) = (consumer, cold);
        }
    }
}

/// The `neli-watch` thread: reads the control partition from `from` (its
/// end when we joined, where known), and on another member's wake makes
/// the group's consumer rejoin, until `stop`; a drain or undrain naming us
/// goes to the shell. Not from the end as the watcher finds it: in a group
/// starting together the topic may not exist yet, and by the time it does
/// a wake may be in it. The holder of the one role has nothing to take on a
/// wake, and reads the control partition itself: while it holds it the
/// watcher reads nothing (no fetch), and it reads again once the member is
/// a standby, from the first record neither has read (a drain or a wake
/// written as the member left is heard; a drain heard twice counts once).
pub(super) fn watch(
    mut client: Client,
    watching: &Watching,
    group: &Arc<BaseConsumer<ReaderContext>>,
    subscription: &Subscription,
    census: &Mutex<candidacy::Census>,
    stop: &AtomicBool,
) {
    let Watching { from, wakes, me, events, roster: (roster, reader_config, silence, every), .. } = watching;
    let mut reader = super::roster::Reader::default();
    let mut echo = super::roster::Echo::new(*silence, *every);
    let topic = group.context().reach.topic.clone();
    let mut tpl = TopicPartitionList::new();
    let start = from.map_or(Offset::End, Offset::Offset);
    if let Err(err) =
        tpl.add_partition_offset(&topic, CONTROL_PARTITION, start).and_then(|()| client.consumer.assign(&tpl))
    {
        warn!(%err, "cannot watch for wakes and drains: a handover here waits for the next coordinator heartbeat");
        return;
    }
    debug!("watching for wakes");
    let context = group.context();
    let one_role = context.seats.known.len() == 1 && !context.seats.every;
    let mut reading = true;
    // What the owner last said of the hot standbys, and when; and the
    // list in force.
    let mut hot: Option<(Option<crate::leader::HotList>, Instant)> = None;
    let mut in_force: Option<crate::leader::HotList> = None;
    while !stop.load(Ordering::Relaxed) {
        // Out of the group (unhealthy, drained) we hold nothing: watch, so
        // that an undrain is heard.
        let holder =
            one_role && !context.standby.said() && context.joined.load(Ordering::Relaxed) && subscription.subscribed();
        if holder == reading {
            reading = !holder;
            let read = if reading {
                let mut resumed = TopicPartitionList::new();
                resumed
                    .add_partition_offset(&topic, CONTROL_PARTITION, context.resume())
                    .and_then(|()| client.consumer.assign(&resumed))
            } else {
                client.consumer.unassign()
            };
            match read {
                Ok(()) => debug!(watching = reading, "the watcher follows our standing"),
                Err(err) => debug!(%err, watching = reading, "the watcher cannot follow our standing"),
            }
        }
        client.follow(watching, context, &topic, reading);
        let watcher = &client.consumer;
        let read = reader.read(reader_config, roster);
        for c in read.candidacies.into_iter().filter(|c| !c.is_from(me)) {
            let c = crate::leader::Candidacy { cold: true, ..c.as_core(crate::clock::wall_ms()) };
            let _ = events.send(super::Event::Candidacy(c));
        }
        if read.to_end {
            let _ = events.send(super::Event::RosterRead);
        }
        if reading && !subscription.subscribed() && roster.usable() && echo.caught_up(watcher, group, &topic) {
            let _ = events.send(super::Event::Echo);
        }
        let msg = match watcher.poll(WATCH_POLL) {
            Some(Ok(msg)) => msg,
            Some(Err(err)) => {
                debug!(%err, "watching for wakes");
                continue;
            }
            None => continue,
        };
        debug!(offset = msg.offset(), "watcher read a record");
        context.read(CONTROL_PARTITION, msg.offset());
        let Some(payload) = msg.payload() else { continue };
        let candidacy = candidacy::Record::decode(payload);
        if candidacy.as_ref().is_some_and(|c| c.is_from(me)) {
            let _ = events.send(super::Event::Echo);
            continue;
        }
        if let Some(c) = candidacy {
            let now_ms = crate::clock::wall_ms();
            census.lock().unwrap_or_else(PoisonError::into_inner).note(&c, now_ms);
            // A hot standby's says the hot set is alive while the owner
            // may be dead and not yet replaced (leader::cold).
            if in_force.as_ref().is_some_and(|list| list.named(&c.name)) {
                let _ = events.send(super::Event::Candidacy(c.as_core(now_ms)));
            }
            continue;
        }
        if let Some(drain) = super::decode::drain_event(payload, me, msg.offset(), *from) {
            let _ = events.send(drain);
            continue;
        }
        // A cold member's group consumer reads nothing: what other members'
        // records say (a run's ending, claims, pauses) reaches its core
        // through us, as a yielding member's does from outside the group.
        // A cold member of a wave heard of its end only once it owned this
        // partition and read the records behind its first heartbeat, and a
        // 100-member soak saw one do so 1,800 records later and run the
        // wave again.
        if watching.cold.load(Ordering::Relaxed) {
            if let Some(hb) = super::heartbeat::Heartbeat::decode(payload).filter(|hb| !hb.is_from(me)) {
                let other = hb.as_other(msg.offset(), context.deadline, crate::clock::wall_ms());
                let _ = events.send(super::Event::OtherHeartbeat(CONTROL_PARTITION, other));
            }
        }
        if let Some(list) = owner_said(payload, me, crate::clock::wall_ms()) {
            echo.heard();
            // A change at once; the same again once in a while, so that a
            // cold member hears that its owner is alive.
            let news = hot.as_ref().is_none_or(|(said, at)| *said != list || at.elapsed() >= HOT_REPEAT);
            if news {
                hot = Some((list.clone(), Instant::now()));
                // A record that names none leaves the list in force.
                in_force = list.clone().or(in_force);
                let _ = events.send(super::Event::Hot(list));
            }
            continue;
        }
        if let Some(age) = super::roster::handed_to(payload, me, crate::clock::wall_ms()) {
            if !subscription.subscribed() {
                let _ = events.send(super::Event::HandedTo(age));
            }
            continue;
        }
        let Some(wake) = Record::decode(payload).filter(|w| *wakes && !w.is_from(me)) else { continue };
        if subscription.wake(group, &topic, me) {
            info!(from = %crate::printable::printable(&wake.name), "a member left the group: rejoining now");
        }
    }
}

/// What another member's heartbeat on the control partition says, if it
/// is a live owner's (no disclaimer, younger at `now_ms`, our wall clock,
/// than its writer's heartbeat deadline): the hot standbys it names (None
/// from a new owner that has not chosen yet, or an older version). An
/// older record is no word of a live owner: a cold member must neither
/// leave nor stay out by it.
fn owner_said(payload: &[u8], me: &Member, now_ms: u64) -> Option<Option<crate::leader::HotList>> {
    use super::heartbeat::{Heartbeat, WireStance};
    let live = |hb: &Heartbeat| now_ms.saturating_sub(hb.at_ms) < hb.deadline_ms;
    let owner = |hb: &Heartbeat| hb.stance != Some(WireStance::Released) && !hb.is_from(me) && live(hb);
    Heartbeat::decode(payload).filter(owner).map(|hb| hb.hot)
}

/// How often the watcher hands the core a list it already said, while
/// the owner writes it: well within `leader::Settings::owner_silence`.
const HOT_REPEAT: Duration = Duration::from_millis(500);

/// How long one poll of the watcher lasts: how long neli-run's exit may
/// wait for the watcher, after it has left the group and woken the others.
const WATCH_POLL: Duration = Duration::from_millis(250);

/// Whether librdkafka has a member id for us, so that a change of our
/// subscription is safe: with one, it postpones the change during any step
/// of a join (`RD_KAFKA_CGRP_REBALANCING`, rdkafka_cgrp.c); without one, a
/// join in flight (a member whose id a broker's restart dropped, joining
/// anew) takes it at once, and librdkafka 2.12.1 aborts the process in
/// `rd_kafka_cgrp_modify_subscription` (its join state neither INIT nor
/// STEADY): three standbys of a 100-member soak died so after broker
/// restarts. A member without an id is joining anyway: a wake has nothing
/// to add.
fn in_a_membership(consumer: &BaseConsumer<ReaderContext>) -> bool {
    !member_id(consumer).is_empty()
}

/// Our member id as librdkafka holds it: empty before the coordinator gave
/// us one, and once librdkafka has sent our LeaveGroup.
fn member_id(consumer: &BaseConsumer<ReaderContext>) -> String {
    let rk = consumer.client().native_ptr();
    // SAFETY: `rk` lives as long as `consumer`; rd_kafka_memberid returns
    // null or a string of librdkafka's allocation, copied and then freed
    // with rd_kafka_mem_free as its documentation asks.
    unsafe {
        let id = rdkafka_sys::rd_kafka_memberid(rk);
        if id.is_null() {
            return String::new();
        }
        let copied = std::ffi::CStr::from_ptr(id).to_string_lossy().into_owned();
        rdkafka_sys::rd_kafka_mem_free(rk, id.cast());
        copied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::Heartbeat;
    use crate::kafka::yield_request::{PauseRequest, Yield};

    fn member() -> Member {
        Member { name: "a".into(), incarnation: "0123456789abcdef".into(), host: "h".into(), pid: 1 }
    }

    /// A member that joined once and has lost its member id (a broker's
    /// restart forgot the group) is not woken: changing the subscription
    /// of a join in flight without an id aborts librdkafka 2.12.1
    /// (`in_a_membership`). The consumer here never reaches a broker, so
    /// it has no id, as such a member has none.
    #[test]
    fn a_member_without_a_member_id_is_not_woken() {
        let (consumer, _heard) = crate::kafka::context::tests::reader(&[0]);
        let subscription = Subscription::default();
        subscription.subscribe(&consumer, "g.neli").unwrap();
        consumer.context().joined.store(true, Ordering::Relaxed);
        assert!(!subscription.wake(&consumer, "g.neli", &member()), "woken without a member id");
        let topics: Vec<String> =
            consumer.subscription().unwrap().elements().iter().map(|e| e.topic().to_string()).collect();
        assert_eq!(topics, ["g.neli"]);
    }

    #[test]
    fn the_watcher_hears_the_hot_list_of_another_members_live_heartbeat_only() {
        let hot_list = |p: &[u8], me: &Member, now: u64| owner_said(p, me, now).flatten();
        use crate::kafka::heartbeat::Content;
        use crate::leader::{HotList, Record as Said, Stance};
        let me = member();
        // Written at 1,000 ms on the wall clock, live for 5 s.
        let of = |m: &Member, hot: Option<HotList>| {
            let content = Content { record: Said::saying(1, Stance::Contending), since_ms: None, deadline_ms: 5000 };
            Heartbeat { hot, ..Heartbeat::new(m, 1, crate::clock::BootTime::from_nanos(1), 1000, content) }.encode()
        };
        let list = HotList { k: 2, names: vec!["a".into()] };
        let owner = Member::this_process("owner".into());
        assert_eq!(hot_list(&of(&owner, Some(list.clone())), &me, 5999), Some(list.clone()));
        assert_eq!(hot_list(&of(&owner, Some(list.clone())), &me, 6000), None, "past its deadline: no live owner's");
        assert_eq!(hot_list(&of(&owner, None), &me, 2000), None, "an older owner's names none");
        assert_eq!(hot_list(&of(&me, Some(list)), &me, 2000), None, "our own is ours already");
        assert_eq!(hot_list(&Record::new(&owner).encode(), &me, 2000), None, "a wake is no heartbeat");
    }

    #[test]
    fn a_wake_is_padded_past_the_watchers_minimum_and_read_as_nothing_else() {
        let bytes = Record::new(&member()).encode();
        assert!(bytes.len() >= WAKE_BYTES && bytes.len() < WAKE_BYTES + 64, "{}", bytes.len());
        assert!(WATCH_MIN_BYTES < bytes.len());
        // Two wakes in one cold wait leave a cold watcher's fetch parked.
        assert!(COLD_MIN_BYTES > 2 * bytes.len() && CALL_BYTES >= COLD_MIN_BYTES);
        let wake = Record::decode(&bytes).expect("a wake");
        assert!(wake.is_from(&member()));
        assert!(!wake.is_from(&Member { incarnation: "other".into(), ..member() }));
        assert!(Heartbeat::decode(&bytes).is_none());
        assert!(candidacy::Record::decode(&bytes).is_none());
        assert!(Yield::decode(&bytes).is_none());
        assert!(PauseRequest::decode(&bytes).is_none());
        let candidacy = candidacy::Record::new(&member(), 0, false, 0, Duration::from_secs(1), false, false);
        assert!(Record::decode(&candidacy.encode()).is_none());
    }
}
