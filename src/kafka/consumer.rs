//! The consumer thread (`neli-kafka`): it answers the shell loop's
//! requests (stay out, rejoin, stand aside), polls, reports assignments
//! (pinning each new seat's read position first) and every record that
//! concerns us (decode.rs), until asked to close.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::Offset;
use tokio::sync::mpsc::UnboundedSender;
use tracing::{debug, info, warn};

use super::bell::{Bell, Rung};
use super::context::ReaderContext;
use super::decode::{Decoder, Read};
use super::heartbeat::Member;
use super::wake::{Subscription, Waker};
use super::{fatal, Event, Partition, CONTROL_PARTITION};
use crate::clock::BootTime;
use crate::exit::{Failure, Kind};
use crate::leader::Stance;

/// Whether we stay out of the group, and why: one value, said in our
/// records too (`Kafka::send_heartbeat`, `Kafka::send_candidacy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Out {
    #[default]
    In,
    /// The health check fails.
    Unhealthy,
    /// `neli-run drain`: whatever the health check says.
    Drained,
    /// A cold standby: the owner of the control partition names others
    /// hot (`leader::cold`). It holds no seat when asked.
    Cold,
}

impl Out {
    /// What keeps us out of the group, for the log.
    fn why(self) -> &'static str {
        match self {
            Out::Drained => "drained",
            Out::Cold => "a cold standby",
            Out::In | Out::Unhealthy => "unhealthy",
        }
    }

    /// What ends it.
    fn until(self) -> &'static str {
        match self {
            Out::Drained => "`neli-run undrain`",
            Out::Cold => "the owner of partition 0 names this member hot, or goes silent",
            Out::In | Out::Unhealthy => "the health check passes",
        }
    }
}

/// One request of the shell's loop, answered by the consumer thread in the
/// order asked. A new request is one variant and one arm of
/// `Reader::answer`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Ask {
    /// Stay out of the group (`Out::Unhealthy`, `Out::Drained`) or join it
    /// again (`Out::In`).
    Out(Out),
    /// Leave the group and join again, for a fresh assignment.
    Rejoin,
    /// Leave until another member leads (a yield).
    StandAside,
    /// As `StandAside`, for as long as the member a hand-over names is
    /// live.
    HandOver(String),
    /// Out of the group for good, ahead of exiting (`Kafka::leave_group`).
    Leave,
}

/// What the shell's loop asks of the consumer thread: requests in order,
/// and whether we close (a state the rebalance callback reads, which must
/// never wait).
#[derive(Default)]
pub(super) struct Asks {
    asked: Mutex<Vec<Ask>>,
    closing: AtomicBool,
    /// Rung with each request, so that the thread answers it now rather
    /// than at the end of its wait.
    bell: Bell,
}

impl Asks {
    /// Queues `ask` and wakes the consumer thread to answer it.
    pub(super) fn ask(&self, ask: Ask) {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner).push(ask);
        self.bell.ring();
    }

    /// We leave: the revoke this causes must not block, and the thread
    /// stops.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.bell.ring();
    }

    pub(super) fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// What was asked since the last take, in order.
    fn take(&self) -> Vec<Ask> {
        std::mem::take(&mut *self.asked.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Waits up to `slice` on the bell (a request, or an event for the
/// consumer) unless an event is queued already, then polls: the next
/// message or error, or None once the queue is empty. The events a poll
/// serves itself (a log line, a rebalance) return nothing, and the next poll
/// may queue more (librdkafka's debug logging says something of every
/// poll): it polls on while the queue holds any, for up to a slice.
fn poll_rung<'c, C: ConsumerContext>(rung: &Rung<'_>, consumer: &'c BaseConsumer<C>, slice: Duration) -> Polled<'c> {
    rung.wait(slice);
    let until = Instant::now() + slice;
    loop {
        let polled = consumer.poll(Duration::ZERO);
        if polled.is_some() || rung.queued() == 0 || Instant::now() >= until {
            return polled;
        }
    }
}

/// What a poll of the consumer returns.
type Polled<'c> = Option<rdkafka::error::KafkaResult<BorrowedMessage<'c>>>;

/// How long a member stays aside, watching for another to lead, before
/// it rejoins anyway.
#[derive(Clone, Copy)]
pub(super) struct AsideFor {
    /// After a yield: it may be alone.
    pub(super) yielded: Duration,
    /// After a hand-over, until the first candidacy of the member it names
    /// is read (each one read then says how long it is live for).
    pub(super) handed_over: Duration,
}

/// The consumer thread: polls until asked to close, then closes the consumer
/// (which sends LeaveGroup, and waits for its answer). Returns whether it
/// left the group then (it was in it): the others may be woken now
/// (wake.rs).
pub(super) fn consume(
    consumer: Arc<BaseConsumer<ReaderContext>>,
    subscription: &Subscription,
    me: &Member,
    (asks, out): (&Asks, Out),
    aside_for: AsideFor,
    waker: &Waker,
    events: &UnboundedSender<Event>,
) -> bool {
    let rung = Rung::consumer(consumer.client(), &asks.bell);
    let mut reader = Reader {
        consumer: &consumer,
        subscription,
        me,
        waker,
        events,
        gaps: BTreeMap::new(),
        slice: STANDBY_POLL,
        rung: rung.as_ref(),
        served: None,
        asks,
        aside_for,
        out,
        leaving: false,
        later: Vec::new(),
    };
    while !asks.closing() {
        reader.answer();
        if reader.poll_once().is_break() {
            break;
        }
    }
    drop(reader);
    drop(rung);
    // Closes the group's consumer (`Kafka::leave` began to) and waits for
    // the group's answer to our leave, as dropping it would, but in short
    // polls, so that the wake follows the answer closely. The watcher holds
    // the consumer too: the drop that destroys it comes later, and finds it
    // closed.
    // Left first, and closed once librdkafka has taken the leave in (a
    // rebalance in flight postpones it), for as long as a request may take:
    // a close alone sent no LeaveGroup then (`Subscription::leave`).
    subscription.leave(&consumer);
    let until = Instant::now() + consumer.context().request_timeout;
    while !subscription.left_yet(&consumer) && Instant::now() < until {
        consumer.poll(Duration::from_millis(10));
    }
    let left = subscription.close(&consumer);
    while !consumer.closed() {
        consumer.poll(Duration::from_millis(1));
    }
    left
}

/// The consumer thread's state between two polls.
struct Reader<'a> {
    consumer: &'a Arc<BaseConsumer<ReaderContext>>,
    /// Whether we are in the group, shared with the watcher.
    subscription: &'a Subscription,
    me: &'a Member,
    /// Writes our wake once a stand-aside has left the group.
    waker: &'a Waker,
    events: &'a UnboundedSender<Event>,
    /// Per seat's partition: the gap in our own heartbeats read back.
    gaps: BTreeMap<Partition, Gap>,
    /// How long the next wait lasts at most (`OWNER_POLL`, `STANDBY_POLL`,
    /// `standby_serve`).
    slice: Duration,
    /// What the wait between polls listens to, if anything.
    rung: Option<&'a Rung<'a>>,
    /// When `serve_group` last asked, and whether we owned a seat then.
    served: Option<(Instant, bool)>,
    asks: &'a Asks,
    aside_for: AsideFor,
    /// Whether we stay out of the group, as last asked.
    out: Out,
    /// Out of the group for good (`Ask::Leave`): nothing more is answered.
    leaving: bool,
    /// Asked while we stood aside: answered on the next turn.
    later: Vec<Ask>,
}

impl Reader<'_> {
    /// Answers what the shell's loop asked since the last poll, in the
    /// order asked, then keeps us in or out of the group as last asked (a
    /// member kept out that owns a seat's partition leaves only once the
    /// core has stood aside from it).
    fn answer(&mut self) {
        let (consumer, subscription) = (self.consumer, self.subscription);
        subscription.settle(consumer, &consumer.context().reach.topic);
        let mut asked = std::mem::take(&mut self.later);
        asked.extend(self.asks.take());
        // For good, and before all else: a stand-aside asked before it
        // would keep us watching, and the exit waiting.
        self.leaving |= asked.contains(&Ask::Leave);
        let mut asked = asked.into_iter().peekable();
        while let Some(ask) = asked.next() {
            match ask {
                _ if self.leaving => break,
                Ask::Leave => self.leaving = true,
                Ask::Out(out) => {
                    self.out = out;
                    self.keep_in_or_out();
                }
                Ask::Rejoin if holds_a_seat(consumer, subscription) => {
                    // The revoke this causes goes through the barrier as any other.
                    subscription.unsubscribe(consumer);
                    subscribe(consumer, subscription, self.events);
                }
                Ask::Rejoin => {
                    debug!(
                        "no seat's partition is ours any more: nothing to give back, and librdkafka rejoins by itself"
                    );
                }
                Ask::StandAside | Ask::HandOver(_) => {
                    // Asked twice in a row: one stand-aside, for as long
                    // as the last hand-over holds if either was one.
                    let mut to = match ask {
                        Ask::HandOver(to) => Some(to),
                        _ => None,
                    };
                    while let Some(next) = asked.next_if(|a| matches!(a, Ask::StandAside | Ask::HandOver(_))) {
                        if let Ask::HandOver(next) = next {
                            to = Some(next);
                        }
                    }
                    // Out of the group already (unhealthy, and the
                    // stand-aside of another seat of ours came first):
                    // there is nothing to leave.
                    if subscription.subscribed() {
                        self.leave_until_another_leads(to);
                        if self.out != Out::In {
                            info!("{}: staying out of the group until {}", self.out.why(), self.out.until());
                        } else if !self.leaving {
                            subscribe(consumer, subscription, self.events);
                        }
                    }
                }
            }
        }
        if self.leaving {
            if subscription.subscribed() {
                info!("leaving the group ahead of exiting (--overlap): the next owners start now");
                leave_group(consumer, subscription);
            }
            return;
        }
        self.keep_in_or_out();
    }

    /// Leaves the group while kept out, unless we own a seat's partition;
    /// joins it again once not.
    fn keep_in_or_out(&self) {
        let (consumer, subscription) = (self.consumer, self.subscription);
        let subscribed = subscription.subscribed();
        if self.out != Out::In && subscribed && !holds_a_seat(consumer, subscription) {
            info!("{}: leaving the group until {}", self.out.why(), self.out.until());
            leave_group(consumer, subscription);
        } else if self.out == Out::In && !subscribed {
            info!("healthy: joining the group");
            subscribe(consumer, subscription, self.events);
        }
    }

    /// Leaves the group and watches the seats' partitions and the control
    /// partition from outside it until another member's heartbeat carries a
    /// token (it leads), or a while passes (we may be alone): after a yield
    /// (`to` None) `AsideFor::yielded`; after a hand-over to `to` while
    /// that member is live (its candidacies say how long each
    /// counts; `AsideFor::handed_over` for the first, and `yielded` at
    /// most). Rejoining at once
    /// would let the sticky assignor hand the partitions straight back to us. A
    /// member that stood aside unhealthy stops watching once healthy again: if
    /// none other is healthy, the group waits for it, not for `aside`. The
    /// records read meanwhile reach the core as ever (others' heartbeats and
    /// candidacies, pauses), so that what it knows of the group is current when
    /// it rejoins; a yield read now was meant for whoever leads, and our own
    /// records say nothing new.
    fn leave_until_another_leads(&mut self, to: Option<String>) {
        let (consumer, subscription, events) = (self.consumer, self.subscription, self.events);
        let out_before = self.out != Out::In;
        let ctx = consumer.context();
        leave_group(consumer, subscription);
        // The cooperative protocol takes only incremental assignments, and
        // librdkafka refuses them until the revoke this causes has been served:
        // poll until then.
        let mut tpl = rdkafka::TopicPartitionList::new();
        let mut watched = ctx.seats.known.clone();
        watched.push(CONTROL_PARTITION);
        watched.sort_unstable();
        watched.dedup();
        for partition in watched {
            // The control partition from the first record we have not read: a
            // drain written as we left is ours to hear.
            let from = if partition == CONTROL_PARTITION { ctx.resume() } else { Offset::End };
            if tpl.add_partition_offset(&ctx.reach.topic, partition, from).is_err() {
                return;
            }
        }
        let until = Instant::now() + Duration::from_secs(10);
        while let Err(err) = consumer.incremental_assign(&tpl) {
            if Instant::now() > until {
                warn!(%err, "cannot watch the group's partitions from outside it; rejoining at once");
                return;
            }
            consumer.poll(Duration::from_millis(5));
        }
        // The partitions are given up: librdkafka sent the LeaveGroup as it
        // did (wake.rs: why the wake may follow now).
        self.waker.send();
        let began = Instant::now();
        let at_most = began + self.aside_for.yielded;
        let mut until = match to {
            Some(_) => began + self.aside_for.handed_over,
            None => at_most,
        };
        while !self.asks.closing() && Instant::now() < until.min(at_most) {
            // What is asked meanwhile waits for the next turn, but for being
            // kept out or let in, and a leave for good, which ends the watch.
            for ask in self.asks.take() {
                match ask {
                    Ask::Out(out) => self.out = out,
                    Ask::Leave => self.leaving = true,
                    ask => self.later.push(ask),
                }
            }
            if self.leaving {
                break;
            }
            if out_before && self.out == Out::In {
                info!("healthy again: done standing aside");
                break;
            }
            if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
                let event = event_of(&msg, ctx, self.me, false);
                // Any seat's leader: at one seat, the one we stood aside for.
                let other_leads =
                    matches!(&event, Some(Event::OtherHeartbeat(_, o)) if matches!(o.stance, Stance::Leading { .. }));
                if let Some(Event::Candidacy(c)) = &event {
                    if to.as_deref() == Some(c.name.as_str()) && !c.leaving && !c.unhealthy {
                        // It waits for the group to give it partition 0.
                        until = until.max(Instant::now() + c.live_for.saturating_sub(c.age));
                    }
                }
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

    /// One poll: the assignments the rebalance callbacks left to report,
    /// then every record fetched. Break once the shell's loop is gone.
    fn poll_once(&mut self) -> ControlFlow<()> {
        let (consumer, events) = (self.consumer, self.events);
        let ctx = consumer.context();
        let polled = match self.rung {
            Some(rung) => poll_rung(rung, consumer, self.slice),
            None => consumer.poll(self.slice),
        };
        // With the bell, a request or an event ends the wait at once: the
        // slice only bounds how long the group goes unserved.
        let owner = self.serve_group();
        self.slice = match (owner, self.rung.is_some()) {
            (true, false) => OWNER_POLL,
            (true, true) | (false, false) => STANDBY_POLL,
            (false, true) => ctx.standby_serve,
        };
        self.report_assigned()?;
        self.watch_the_join();
        ctx.wake_fetchers(consumer);
        // Records fetched behind one of our own heartbeats are heard
        // before the core may lead on it: it says `more`, and `CaughtUp`
        // follows once the fetched records are all sent (audit D11), or a
        // backlog's worth of them (a flood of records must not hold the
        // requests above back). Owed per seat.
        let (mut polled, mut owed, mut left) = (polled, Vec::<Partition>::new(), ctx.backlog);
        while let Some(result) = polled.take() {
            match result {
                Ok(msg) => {
                    ctx.reach.reachable();
                    let event = match event_of(&msg, ctx, self.me, true) {
                        Some(Event::OwnHeartbeat { partition, offset, sent, .. }) => {
                            let gap = self.gaps.entry(partition).or_default();
                            tracing::trace!(partition, offset, lag = ?BootTime::now().since(sent), "own heartbeat read back");
                            if let Some(said) = gap.own(sent, BootTime::now(), ctx.interval) {
                                Gap::say(said, ctx);
                            }
                            polled = consumer.poll(Duration::ZERO);
                            let more = polled.is_some();
                            if more && !owed.contains(&partition) {
                                owed.push(partition);
                            }
                            Some(Event::OwnHeartbeat { partition, offset, sent, more })
                        }
                        event => event,
                    };
                    if event.is_some_and(|event| events.send(event).is_err()) {
                        return ControlFlow::Break(());
                    }
                }
                Err(err) => {
                    match err
                        .rdkafka_error_code()
                        .filter(|&c| !ctx.reach.wake_error(c))
                        .and_then(|c| fatal(c, err.to_string(), &ctx.reach.topic, &ctx.reach.group))
                    {
                        Some(fatal) => {
                            let _ = events.send(Event::Fatal(fatal));
                        }
                        None => debug!(%err, "consumer error"),
                    }
                }
            }
            if polled.is_none() && !owed.is_empty() && left > 0 {
                left -= 1;
                polled = consumer.poll(Duration::ZERO);
            }
        }
        for partition in owed {
            if events.send(Event::CaughtUp { partition }).is_err() {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// Nudges the coordinator if our join in the group is stuck
    /// (nudge.rs): not while we are out of it, leaving, or Kafka is
    /// unreachable (there is nothing a nudge could reach then).
    fn watch_the_join(&self) {
        let ctx = self.consumer.context();
        if self.leaving || !self.subscription.subscribed() || !ctx.reach.is_reachable() {
            return;
        }
        let due = ctx.join_watch.lock().ok().and_then(|mut watch| watch.due(Instant::now()));
        if let Some(waited) = due {
            super::nudge::nudge(&ctx.nudge_config, waited);
        }
    }

    /// `serve_group`, at most every `SERVE_EVERY` (what it said last
    /// meanwhile). With librdkafka's debug logging on (`-X debug=cgrp`),
    /// asking for the assignment logs a line, whose event rang the bell for
    /// the next ask: the consumer thread and librdkafka's spun a core each.
    fn serve_group(&mut self) -> bool {
        if self.served.is_none_or(|(at, _)| at.elapsed() >= SERVE_EVERY) {
            self.served = Some((Instant::now(), serve_group(self.consumer, self.subscription)));
        }
        self.served.is_some_and(|(_, owner)| owner)
    }

    /// Reports the seats' partitions the last poll assigned us, pinning
    /// the read position of each newly added one first (and starting its
    /// gap afresh). Break once the shell's loop is gone.
    fn report_assigned(&mut self) -> ControlFlow<()> {
        let ctx = self.consumer.context();
        let assigned = std::mem::take(&mut *ctx.assigned.lock().expect("assigned lock"));
        for (partition, new) in assigned {
            if new {
                ctx.start_near_end(self.consumer, partition);
                self.gaps.insert(partition, Gap::default());
            }
            if self.events.send(Event::Assigned { partition }).is_err() {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// What a record read tells the core, if anything (`Decoder::event`); a
/// yield only when `yields` (we are in the group: what we read we own, and
/// a yield on the control partition is meant for us from its assignment on).
fn event_of(msg: &BorrowedMessage<'_>, ctx: &ReaderContext, me: &Member, yields: bool) -> Option<Event> {
    if !ctx.first_read(msg.partition(), msg.offset()) {
        debug!(partition = msg.partition(), offset = msg.offset(), "a record read already: skipped");
        return None;
    }
    let decoder = Decoder {
        topic: &ctx.reach.topic,
        seats: &ctx.seats,
        me,
        deadline: ctx.deadline,
        yields_from: yields.then(|| ctx.assigned_at(CONTROL_PARTITION)),
        drains_from: ctx.drains_from.get().copied(),
        wall_ms: crate::clock::wall_ms(),
    };
    let event = decoder.event(Read {
        topic: msg.topic(),
        partition: msg.partition(),
        offset: msg.offset(),
        payload: msg.payload(),
    });
    match event {
        // With roles, only role 0's owner reads the control partition: a
        // yield it took in would move only its own roles. `yield` refuses a
        // group of roles (`status::control`); one written anyway, by an
        // older version, is dropped here. (A pause holds the seat whose
        // partition it is on: `cron pause JOB` writes one per job.)
        Some(Event::Yield { .. }) if ctx.seats.known.len() > 1 => {
            debug!("a yield on a group of roles: not supported yet, ignored");
            None
        }
        event => event,
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
/// we own a seat's partition.
fn serve_group(consumer: &BaseConsumer<ReaderContext>, subscription: &Subscription) -> bool {
    subscription.assignment(consumer).is_some_and(|a| consumer.context().holds_a_seat(&a))
}

/// How long one wait of the consumer thread lasts, at most: the bell (a
/// request, an event) ends it at once. Without the bell a request of the
/// shell's loop (stand aside, hand over, rejoin) waits for the end of a
/// poll, which cannot be woken, and an owner of a seat's partition, which
/// makes such requests, polls in short slices (measured: a yield waited 97
/// ms for the end of a 100 ms poll, of a 300 ms handover; at 10 ms, an idle
/// leader took 0.87 % of a core instead of 0.35 %).
const OWNER_POLL: Duration = Duration::from_millis(20);
const STANDBY_POLL: Duration = Duration::from_millis(100);

/// How long the bell's wait lasts at most for a member that owns no seat's
/// partition: half its coordinator heartbeat interval, between
/// `STANDBY_POLL` and 250 ms. No fence depends on its heartbeats; they say
/// how soon it hears that a crashed leader's session ran out (a graceful
/// leave wakes it at once), up to this much later than an owner would.
/// Each ask wakes two threads (ours and librdkafka's main one): every
/// 100 ms, that was half of an idle standby's CPU.
pub(super) fn standby_serve(coordinator_heartbeat: Duration) -> Duration {
    (coordinator_heartbeat / 2).clamp(STANDBY_POLL, Duration::from_millis(250))
}

/// How often the consumer loop asks librdkafka to serve the group at most
/// (`Reader::serve_group`): well within the 100 ms it must.
const SERVE_EVERY: Duration = Duration::from_millis(10);

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

/// Whether a seat's partition is still in our assignment (yes if librdkafka
/// cannot say), i.e. whether a rejoin has anything to give back.
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
fn holds_a_seat(consumer: &BaseConsumer<ReaderContext>, subscription: &Subscription) -> bool {
    subscription.assignment(consumer).is_none_or(|a| consumer.context().holds_a_seat(&a))
}

/// Leaves the group until `subscribe`. Out of it we are no standby: the
/// first assignment without a seat's partition after the next subscribe
/// says "standby" again, which the core waits for to write our candidacy (a
/// standby healthy again after a failed check wrote none, and `status` lost
/// it: audit D2, and findings O-1 for the join in flight; standby.rs).
fn leave_group(consumer: &BaseConsumer<ReaderContext>, subscription: &Subscription) {
    subscription.unsubscribe(consumer);
}

fn subscribe(consumer: &BaseConsumer<ReaderContext>, subscription: &Subscription, events: &UnboundedSender<Event>) {
    if let Err(err) = subscription.subscribe(consumer, &consumer.context().reach.topic) {
        let _ = events.send(Event::Fatal(Failure::new(Kind::Internal, format!("rejoining: {err}"))));
    }
}

#[cfg(test)]
mod tests;
