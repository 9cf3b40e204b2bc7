//! The leadership state machine: the pure core of neli-run.
//!
//! Events go in through [`Leader::step`] with the time they happened; actions
//! come out as data for the shell to carry out. The core never reads a clock,
//! a socket or a process: that is what lets the tests below walk through
//! every interleaving of rebalances, heartbeats, child exits and signals.
//!
//! Theory of operation (Fast NELI):
//! - Owning partition 0 makes us a *candidate*. A candidate produces a
//!   heartbeat record every `heartbeat_interval` and reads partition 0 back.
//! - The first of its own heartbeats read back while fresh makes it *leader*;
//!   that record's offset is the fencing token, and only now is the child
//!   spawned.
//! - Freshness is `now - sent` of the newest own heartbeat read back, where
//!   `sent` is the instant the record was produced (our own clock). A backlog
//!   read after a pause is old by that measure, so it cannot extend anything.
//! - When freshness exceeds `heartbeat_deadline`, the leader is *fenced*: the
//!   child's group is killed at once. A fresh heartbeat while we still own the
//!   partition resumes leadership with a new token.
//! - On revoke, the child is stopped (stop signal, grace, SIGKILL) and the
//!   rebalance callback is released only once the child is gone.

use std::time::Duration;

use nix::sys::signal::Signal;
use tracing::{info, warn};

use crate::clock::BootTime;
use crate::exit::{self, ChildStatus};

/// What to do when the child exits on its own while we lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Restart {
    /// Exit with the child's status (and leave the group).
    Never,
    /// Start it again unless it exited with status 0.
    OnFailure,
    /// Start it again whatever its status.
    Always,
}

/// The timing and policy the core needs; validated by `config`.
#[derive(Clone, Debug)]
pub struct Settings {
    pub heartbeat_interval: Duration,
    pub heartbeat_deadline: Duration,
    pub grace: Duration,
    pub stop_signal: Signal,
    pub restart: Restart,
    pub restart_delay: Duration,
    pub acquire_timeout: Option<Duration>,
    /// The longest gap in our own heartbeats after which we may still
    /// trust that the group kept partition 0 for us: session timeout minus
    /// a coordinator heartbeat and the margin. After a longer gap the
    /// coordinator may already have given the partition to another member,
    /// so we rejoin the group instead of resuming.
    pub resume_window: Duration,
    /// How long a new owner of partition 0 watches it before leading: long
    /// enough to read one heartbeat of a member that still claims it. Some
    /// brokers (tansu) have been seen giving the partition to a second member
    /// while the first still held it.
    pub observe: Duration,
    /// How long past its writer's deadline another member's claim still
    /// holds us back: room for the writers' wall clocks to disagree and for
    /// a kill to land.
    pub claim_margin: Duration,
}

/// What one of our heartbeat records says. The core decides it, so that a
/// record never claims less than is true.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Which of our runs it belongs to: a run is one stretch of ownership
    /// whose records others can have counted without a break.
    pub run: u64,
    /// The offset of the run's first record, once read back: the run's
    /// place in the one order every member reads.
    pub start: Option<i64>,
    pub stance: Stance,
}

/// A record writer's part in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stance {
    /// Its command may be running, under this fencing token.
    Leading { token: i64 },
    /// It owns partition 0 and may lead soon: a candidate, or a fenced
    /// leader that may resume.
    Contending,
    /// It runs no command and contends for nothing: the disclaimer (and
    /// any record of a version that did not say more).
    Released,
}

impl Stance {
    /// The fencing token it claims, if any.
    pub fn token(self) -> Option<i64> {
        match self {
            Stance::Leading { token } => Some(token),
            Stance::Contending | Stance::Released => None,
        }
    }
}

/// Another member's heartbeat record, as the core needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Other {
    /// Its name and incarnation.
    pub writer: String,
    /// Where it sits on partition 0.
    pub offset: i64,
    /// The writer's run; None from versions that did not say, whose
    /// records never contend.
    pub run: Option<u64>,
    /// The offset of that run's first record, if the writer had read it
    /// back when it wrote this one.
    pub start: Option<i64>,
    pub stance: Stance,
    /// How long ago it was written: our wall clock against the writer's.
    pub age: Duration,
    /// The writer's heartbeat deadline: its command is dead this long after
    /// its newest record was written, unless it writes another.
    pub deadline: Duration,
}

/// Something that happened, as the shell reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The group assigned us partition 0.
    Assigned,
    /// Partition 0 was taken from us. `lost` means the group already moved
    /// on without us (session expired), so there is no time for grace.
    Revoked { lost: bool },
    /// One of our own heartbeat records (this very incarnation) was read
    /// back from partition 0; `sent` is when we produced it.
    OwnHeartbeat { offset: i64, sent: BootTime },
    /// Another member's heartbeat record was read from partition 0.
    OtherHeartbeat(Other),
    /// The child's whole process group is gone.
    ChildExited(ChildStatus),
    /// SIGTERM or SIGINT: stop the child, leave the group, exit. A second
    /// one kills the child at once.
    Shutdown,
    /// Kafka said something we cannot recover from; exit with this code
    /// after stopping the child.
    Fatal(u8),
    /// A signal to pass on to the child's group.
    Forward(Signal),
    /// `neli-run yield` asked us to hand leadership over.
    Yield,
    /// Nothing but the passing of time (the shell's timer fired).
    Tick,
}

/// Something for the shell to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Produce this heartbeat record now.
    SendHeartbeat(Record),
    /// Start the child with this fencing token; the shim must kill it by
    /// itself at `lease` unless the lease is extended.
    Spawn { token: i64, lease: BootTime },
    /// Move the running child's lease forward.
    Lease(BootTime),
    /// Send a signal to the child's process group.
    SignalGroup(Signal),
    /// SIGKILL the child's process group.
    KillGroup,
    /// Let the blocked rebalance callback return: the child is gone.
    ReleaseRevoke,
    /// Leave the group and join it again: our claim on partition 0 is
    /// too old to trust, so get a fresh assignment from the coordinator.
    Rejoin,
    /// Leave the group and rejoin only once another member leads (or after
    /// a while, if none does): the end of a yield, once the child is gone.
    StandAside,
    /// Leave the group and exit with this status.
    Exit(u8),
    /// Write this record (it claims nothing), and give it a moment to
    /// land: the next owner then reads that our command is gone instead of
    /// waiting out our last record. Comes before giving partition 0 up.
    Disclaim(Record),
}

/// Where we stand in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Standby,
    Candidate,
    Leader { token: i64 },
    Fenced,
}

/// A tenure's phase: what `Role` is while we own partition 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Candidate,
    Leader { token: i64 },
    Fenced,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Child {
    Idle,
    Running,
    /// Stop requested; `kill_at` is when grace runs out (None once killed).
    Stopping {
        kill_at: Option<BootTime>,
    },
}

/// Our ownership of partition 0, from assignment to revoke.
#[derive(Clone, Copy, Debug)]
struct Tenure {
    since: BootTime,
    /// Since when the current role holds (for "took X" in logs).
    role_since: BootTime,
    next_heartbeat: BootTime,
    /// When the current run began (see [`Record::run`]).
    run_since: BootTime,
    /// The offset of the run's first own record read back.
    start: Option<i64>,
    /// Send time of the newest own heartbeat of this run read back.
    fresh: Option<BootTime>,
    /// The offset of that heartbeat: the token if it makes us leader.
    fresh_offset: i64,
    role: Phase,
}

/// Another member's run, as far as we have read it.
#[derive(Clone, Copy, Debug)]
struct Run {
    id: u64,
    /// Its first offset: the earliest we read or the writer declared.
    start: i64,
    /// Until when its newest record counts: written + its deadline + margin.
    until: BootTime,
    /// Its newest record said "contending" (a leading one is a claim).
    contending: bool,
}

/// How long an expired run is remembered: a record of it that arrives late
/// keeps its place in the order instead of looking new.
const FORGET_RUNS: Duration = Duration::from_secs(60);

/// The state machine. One per neli-run process.
#[derive(Debug)]
pub struct Leader {
    settings: Settings,
    started: BootTime,
    tenure: Option<Tenure>,
    child: Child,
    restart_at: Option<BootTime>,
    revoke_pending: bool,
    /// A yield is stopping the child; stand aside once it is gone.
    yielding: bool,
    /// Shutting down: exit once the child is gone. `Some(code)` overrides
    /// the child's status (fatal errors, acquire timeout).
    shutdown: Option<Option<u8>>,
    ever_led: bool,
    /// Our current run; counts up with each new one.
    run: u64,
    /// The token our child was started with: our records claim it while
    /// the child may live, leader or not.
    child_token: i64,
    /// We have written records since we last disclaimed.
    spoke: bool,
    /// Other members' claims on partition 0, by writer: until when each may
    /// still be running its command. A broker can hand the partition to a
    /// second member while the first still leads (tansu does: caught by
    /// neli-soak), so we lead only once every such claim has run out. Kept
    /// whether or not we own the partition: a claim read just before our
    /// tenure matters as much as one read during it.
    claims: std::collections::BTreeMap<String, BootTime>,
    /// Other members' runs, by writer. Of two members that own partition 0
    /// at once (tansu does that: caught by neli-soak), the one whose run
    /// started first on the partition leads; every member reads the same
    /// order, so both agree without racing on time.
    runs: std::collections::BTreeMap<String, Run>,
    done: bool,
    /// The time of the latest step: a deadline at or before it has been
    /// handled, and returning it from `next_deadline` would spin the shell.
    now: BootTime,
    out: Vec<Action>,
}

impl Leader {
    /// A standby that has just started at `now`.
    pub fn new(settings: Settings, now: BootTime) -> Leader {
        Leader {
            settings,
            started: now,
            tenure: None,
            child: Child::Idle,
            restart_at: None,
            revoke_pending: false,
            yielding: false,
            shutdown: None,
            ever_led: false,
            run: 0,
            child_token: 0,
            spoke: false,
            claims: Default::default(),
            runs: Default::default(),
            done: false,
            now,
            out: Vec::new(),
        }
    }

    /// Our role now (for logs, status and tests).
    pub fn role(&self) -> Role {
        match self.tenure.map(|t| t.role) {
            None => Role::Standby,
            Some(Phase::Candidate) => Role::Candidate,
            Some(Phase::Leader { token }) => Role::Leader { token },
            Some(Phase::Fenced) => Role::Fenced,
        }
    }

    /// Send time of the newest own heartbeat read back, while we own
    /// partition 0 (for the heartbeat-age metric).
    pub fn fresh(&self) -> Option<BootTime> {
        self.tenure.and_then(|t| t.fresh)
    }

    /// Feeds one event; returns what to do, in order.
    pub fn step(&mut self, input: Input, now: BootTime) -> Vec<Action> {
        if self.done {
            // After Exit the shell only tears down; a revoke from closing the
            // consumer must still be released.
            if let Input::Revoked { .. } = input {
                return vec![Action::ReleaseRevoke];
            }
            return Vec::new();
        }
        self.now = self.now.max(now);
        // Deadlines that passed before this event come first: a child that
        // died after its lease ran out was fenced, not exiting by itself.
        self.on_time(now);
        match input {
            Input::Assigned => self.on_assigned(now),
            Input::Revoked { lost } => self.on_revoked(lost, now),
            Input::OwnHeartbeat { offset, sent } => self.on_heartbeat(offset, sent, now),
            Input::OtherHeartbeat(other) => self.on_other(other, now),
            Input::ChildExited(status) => self.on_child_exited(status, now),
            Input::Shutdown => self.on_shutdown(None, now),
            Input::Fatal(code) => self.on_shutdown(Some(code), now),
            Input::Forward(sig) => {
                if self.child != Child::Idle {
                    self.out.push(Action::SignalGroup(sig));
                }
            }
            Input::Yield => self.on_yield(now),
            Input::Tick => {}
        }
        self.on_time(now);
        std::mem::take(&mut self.out)
    }

    /// When the shell must call `step(Input::Tick, ..)` next, at the latest.
    pub fn next_deadline(&self) -> Option<BootTime> {
        if self.done {
            return None;
        }
        let mut next: Option<BootTime> = None;
        let mut consider = |t: Option<BootTime>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if let Some(t) = self.tenure {
            consider(Some(t.next_heartbeat));
            match t.role {
                Phase::Leader { .. } => consider(t.fresh.map(|f| f + self.settings.heartbeat_deadline)),
                Phase::Candidate | Phase::Fenced => consider(Some(self.give_back_at(&t))),
            }
        }
        if let Child::Stopping { kill_at } = self.child {
            consider(kill_at);
        }
        consider(self.restart_at);
        consider(self.acquire_deadline());
        // A promotion moment already passed was tried then and failed (the
        // heartbeat was stale); only a new heartbeat can change that.
        consider(self.promotion_at().filter(|&at| at > self.now));
        next
    }

    /// When an owner of partition 0 that does not lead gives it back: once
    /// its own heartbeats have been gone for the resume window. After that
    /// the coordinator may have expired our session and moved the partition
    /// on without its verdict reaching us, so resuming would be unsafe; and
    /// holding on (data path broken, coordinator reachable) would leave the
    /// group leaderless for as long as the fault lasts. Found by neli-soak.
    fn give_back_at(&self, tenure: &Tenure) -> BootTime {
        tenure.fresh.unwrap_or(tenure.since) + self.settings.resume_window
    }

    fn acquire_deadline(&self) -> Option<BootTime> {
        match (self.ever_led, self.shutdown, self.settings.acquire_timeout) {
            (false, None, Some(t)) => Some(self.started + t),
            _ => None,
        }
    }

    fn on_assigned(&mut self, now: BootTime) {
        if self.tenure.is_some() {
            return;
        }
        info!(after = ?now.since(self.started), "candidate: assigned partition 0, confirming with a heartbeat");
        self.run += 1;
        self.tenure = Some(Tenure {
            since: now,
            role_since: now,
            next_heartbeat: now,
            run_since: now,
            start: None,
            fresh: None,
            fresh_offset: -1,
            role: Phase::Candidate,
        });
    }

    fn on_revoked(&mut self, lost: bool, now: BootTime) {
        if let Some(tenure) = self.tenure.take() {
            self.restart_at = None;
            info!(role = ?tenure.role, held = ?now.since(tenure.since), lost, "revoked: partition 0 taken away");
        }
        // Whatever our role was, the partition goes only once the child has.
        match self.child {
            Child::Idle => self.release(),
            Child::Running | Child::Stopping { .. } => {
                self.revoke_pending = true;
                if lost {
                    self.kill();
                } else {
                    self.stop(now);
                }
            }
        }
    }

    fn on_heartbeat(&mut self, offset: i64, sent: BootTime, now: BootTime) {
        let deadline = self.settings.heartbeat_deadline;
        let Some(tenure) = self.tenure.as_mut() else {
            return;
        };
        if sent < tenure.run_since {
            return; // an earlier run's record: it says nothing about this one
        }
        if tenure.fresh.is_some_and(|f| f >= sent) {
            return;
        }
        if tenure.start.is_none() {
            tenure.start = Some(offset);
            say::earlier_contenders(&self.runs, offset, now);
        }
        // (A gap longer than the resume window never gets here: `on_time`
        // gave the partition back first.)
        tenure.fresh = Some(sent);
        tenure.fresh_offset = offset;
        if now.since(sent) >= deadline {
            return; // read back too late: it proves nothing about now
        }
        match tenure.role {
            Phase::Candidate | Phase::Fenced => self.try_promote(now),
            // While the child stops (a shutdown or a yield) too: we still
            // own the partition and heartbeat, so the lease may run as long
            // as our claims do, and `--grace` is not cut short by it.
            Phase::Leader { .. } => {
                if self.child != Child::Idle {
                    self.out.push(Action::Lease(sent + deadline));
                }
            }
        }
    }

    /// When a candidate (or fenced leader) may lead: its newest own heartbeat
    /// is fresh, it has watched the partition for `observe`, every other
    /// member's claim has run out, and so has every run that contends from
    /// an earlier place on the partition.
    fn promotion_at(&self) -> Option<BootTime> {
        let tenure = self.tenure?;
        if tenure.role == Phase::Candidate || tenure.role == Phase::Fenced {
            let (fresh, start) = (tenure.fresh?, tenure.start?);
            let earlier = self.runs.values().filter(|r| r.contending && r.start < start).map(|r| r.until);
            let quiet = self.claims.values().copied().chain(earlier).max().unwrap_or(tenure.since);
            let at = (tenure.since + self.settings.observe).max(quiet);
            return (at < fresh + self.settings.heartbeat_deadline).then_some(at);
        }
        None
    }

    fn try_promote(&mut self, now: BootTime) {
        if self.promotion_at().is_none_or(|at| now < at) {
            return;
        }
        let deadline = self.settings.heartbeat_deadline;
        let Some(tenure) = self.tenure.as_mut() else { return };
        let (Some(fresh), offset) = (tenure.fresh, tenure.fresh_offset) else { return };
        if now.since(fresh) >= deadline {
            return;
        }
        let was = tenure.role;
        let took = now.since(tenure.role_since);
        tenure.role = Phase::Leader { token: offset };
        tenure.role_since = now;
        // Announce the token at once (for `neli-run status`).
        tenure.next_heartbeat = now;
        self.ever_led = true;
        say::promoted(was, offset, took);
        if self.child == Child::Idle && self.shutdown.is_none() {
            self.spawn(offset, fresh + deadline);
        }
    }

    /// Another member's record. A claim holds us back until its writer's
    /// command must be dead: its deadline after it was written, with the
    /// margin. Its writer's later record without a claim withdraws it. Of
    /// two leaders the newer leadership (larger token) is the coordinator's
    /// latest word: the older one fences. A leader also fences when a run
    /// that started before its own still contends: the group gave partition
    /// 0 to both, and the earlier one is the one both sides let lead.
    fn on_other(&mut self, other: Other, now: BootTime) {
        let until = (now - other.age) + other.deadline + self.settings.claim_margin;
        let leading = matches!(self.role(), Role::Leader { .. });
        match other.stance {
            Stance::Leading { token } => {
                self.claims.retain(|_, held| *held > now);
                say::held_back(&other, token, until, now, leading, self.claims.contains_key(&other.writer));
                let held = self.claims.entry(other.writer.clone()).or_insert(until);
                *held = (*held).max(until);
            }
            Stance::Contending | Stance::Released => {
                self.claims.remove(&other.writer);
            }
        }
        let run = match (other.run, other.stance) {
            (Some(id), Stance::Leading { .. } | Stance::Contending) => {
                self.runs.retain(|_, r| r.until + FORGET_RUNS > now);
                let start = other.start.unwrap_or(other.offset).min(other.offset);
                let fresh = Run { id, start, until, contending: false };
                let run = self.runs.entry(other.writer.clone()).or_insert(fresh);
                let before = *run;
                if run.id != id {
                    *run = fresh;
                }
                run.start = run.start.min(start);
                run.until = run.until.max(until);
                run.contending = other.stance == Stance::Contending;
                say::goes_first(&other.writer, &before, run, self.tenure.and_then(|t| t.start), leading);
                Some(*run)
            }
            _ => {
                self.runs.remove(&other.writer);
                None
            }
        };
        let Some(tenure) = self.tenure.as_mut() else { return };
        let Phase::Leader { token: mine } = tenure.role else { return };
        let earlier = |r: &Run| r.contending && r.until > now && tenure.start.is_some_and(|s| r.start < s);
        match other.stance {
            Stance::Leading { token } if token > mine => {
                warn!(mine, theirs = token, "another member claims partition 0 with a newer token; fencing");
            }
            Stance::Contending if run.as_ref().is_some_and(earlier) => {
                warn!(writer = %other.writer, "another member has contended for partition 0 since before our leadership began; fencing");
            }
            _ => return,
        }
        tenure.role = Phase::Fenced;
        tenure.role_since = now;
        self.restart_at = None;
        if self.child != Child::Idle {
            self.kill();
        }
    }

    fn on_child_exited(&mut self, status: ChildStatus, now: BootTime) {
        let was = self.child;
        self.child = Child::Idle;
        if self.revoke_pending {
            self.revoke_pending = false;
            info!("child stopped; releasing partition 0 to the group");
            self.release();
        }
        if let Some(code) = self.shutdown {
            self.exit(code.unwrap_or(status.code()));
            return;
        }
        if self.yielding {
            self.stand_aside();
            return;
        }
        let Some(tenure) = self.tenure else { return };
        let Phase::Leader { token } = tenure.role else {
            return; // fenced: we wait for our heartbeats to resume
        };
        if was != Child::Running {
            // We stopped it (fence) and have since resumed: start it again.
            self.spawn(token, tenure.fresh.expect("a leader has read a heartbeat") + self.settings.heartbeat_deadline);
            return;
        }
        let again = match self.settings.restart {
            Restart::Never => false,
            Restart::OnFailure => !status.success(),
            Restart::Always => true,
        };
        if again {
            info!(%status, delay = ?self.settings.restart_delay, "restarting the child (--restart)");
            self.restart_at = Some(now + self.settings.restart_delay);
        } else {
            info!(%status, "the child's run is over; leaving the group");
            self.shutdown = Some(None);
            self.exit(status.code());
        }
    }

    fn on_yield(&mut self, now: BootTime) {
        let Some(tenure) = self.tenure else { return };
        if self.yielding || self.shutdown.is_some() {
            return;
        }
        info!(role = ?tenure.role, "yielding: stopping the child, then standing aside for another member");
        self.yielding = true;
        self.restart_at = None;
        match self.child {
            Child::Idle => self.stand_aside(),
            Child::Running => self.stop(now),
            Child::Stopping { .. } => {}
        }
    }

    fn stand_aside(&mut self) {
        self.yielding = false;
        self.tenure = None;
        self.disclaim();
        self.out.push(Action::StandAside);
    }

    /// Lets the revoke go: our command is gone.
    fn release(&mut self) {
        self.disclaim();
        self.out.push(Action::ReleaseRevoke);
    }

    /// Says, before giving partition 0 up, that our command is gone and
    /// that we contend no more.
    fn disclaim(&mut self) {
        if std::mem::take(&mut self.spoke) {
            self.out.push(Action::Disclaim(Record { run: self.run, start: None, stance: Stance::Released }));
        }
    }

    /// Queues our next heartbeat. A run ends once we have gone a deadline
    /// without reading one of its records back: other members may have
    /// counted it out by then, so what follows must not keep its place.
    fn send_heartbeat(&mut self, now: BootTime) {
        let Some(tenure) = self.tenure.as_mut() else { return };
        let confirmed = tenure.fresh.map_or(tenure.run_since, |f| f.max(tenure.run_since));
        if now.since(confirmed) >= self.settings.heartbeat_deadline {
            self.run += 1;
            tenure.run_since = now;
            tenure.start = None;
        }
        tenure.next_heartbeat = now + self.settings.heartbeat_interval;
        let stance = match (tenure.role, self.child) {
            (Phase::Leader { token }, _) => Stance::Leading { token },
            (_, Child::Running | Child::Stopping { .. }) => Stance::Leading { token: self.child_token },
            _ => Stance::Contending,
        };
        let record = Record { run: self.run, start: tenure.start, stance };
        self.spoke = true;
        self.out.push(Action::SendHeartbeat(record));
    }

    fn on_shutdown(&mut self, code: Option<u8>, now: BootTime) {
        if self.shutdown.is_some() {
            if self.child != Child::Idle {
                warn!("asked again: killing the child now");
                self.kill();
            }
            return;
        }
        self.shutdown = Some(code);
        self.restart_at = None;
        match self.child {
            Child::Idle => self.exit(code.unwrap_or(0)),
            Child::Running => self.stop(now),
            Child::Stopping { .. } => {}
        }
    }

    /// Deadlines that have passed by `now`.
    fn on_time(&mut self, now: BootTime) {
        if self.done {
            return;
        }
        let deadline = self.settings.heartbeat_deadline;
        self.try_promote(now);
        // Heartbeats go on while a shutdown stops the child: we still own
        // the partition, and a cut network must still fence.
        if self.tenure.is_some_and(|t| now >= t.next_heartbeat) {
            self.send_heartbeat(now);
        }
        if let Some(tenure) = self.tenure.as_mut() {
            if let (Phase::Leader { .. }, Some(fresh)) = (tenure.role, tenure.fresh) {
                if now >= fresh + deadline {
                    warn!(age = ?now.since(fresh), deadline = ?deadline, "fenced: own heartbeats stopped arriving; killing the child");
                    tenure.role = Phase::Fenced;
                    tenure.role_since = now;
                    self.restart_at = None;
                    if self.child != Child::Idle {
                        self.kill();
                    }
                }
            }
        }
        if let Some(tenure) = self.tenure.filter(|t| !matches!(t.role, Phase::Leader { .. })) {
            if now >= self.give_back_at(&tenure) {
                warn!(role = ?tenure.role, window = ?self.settings.resume_window, "no own heartbeat read back for the whole resume window; giving partition 0 back to the group");
                self.tenure = None;
                self.restart_at = None;
                self.disclaim();
                self.out.push(Action::Rejoin);
            }
        }
        if let Child::Stopping { kill_at: Some(t) } = self.child {
            if now >= t {
                warn!(grace = ?self.settings.grace, "child still running after the grace period; sending SIGKILL");
                self.kill();
            }
        }
        if self.restart_at.is_some_and(|t| now >= t) {
            self.restart_at = None;
            if let Some(Tenure { role: Phase::Leader { token }, fresh: Some(fresh), .. }) = self.tenure {
                if self.child == Child::Idle {
                    self.spawn(token, fresh + deadline);
                }
            }
        }
        if self.acquire_deadline().is_some_and(|t| now >= t) && self.child == Child::Idle {
            warn!(timeout = ?self.settings.acquire_timeout.unwrap_or_default(), "not leader within --acquire-timeout; giving up");
            self.shutdown = Some(Some(exit::ACQUIRE_TIMEOUT));
            self.exit(exit::ACQUIRE_TIMEOUT);
        }
    }

    fn spawn(&mut self, token: i64, lease: BootTime) {
        self.child = Child::Running;
        self.child_token = token;
        self.out.push(Action::Spawn { token, lease });
    }

    fn stop(&mut self, now: BootTime) {
        if self.child == Child::Running {
            self.out.push(Action::SignalGroup(self.settings.stop_signal));
            self.child = Child::Stopping { kill_at: Some(now + self.settings.grace) };
        }
    }

    fn kill(&mut self) {
        self.out.push(Action::KillGroup);
        self.child = Child::Stopping { kill_at: None };
    }

    fn exit(&mut self, code: u8) {
        self.done = true;
        self.tenure = None;
        self.disclaim();
        self.out.push(Action::Exit(code));
    }
}

/// What the core tells the operator about its decisions, apart from the
/// decisions: these functions only log (cargo-mutants leaves them alone,
/// see .cargo/mutants.toml; no test pins a log line's condition).
mod say {
    use super::*;

    /// Our run's first record is on the partition: who contended before it.
    pub(super) fn earlier_contenders(runs: &std::collections::BTreeMap<String, Run>, offset: i64, now: BootTime) {
        for (writer, run) in runs {
            if run.contending && run.until > now && run.start < offset {
                info!(%writer, "another member has contended for partition 0 since before us; it goes first");
            }
        }
    }

    pub(super) fn promoted(was: Phase, token: i64, took: Duration) {
        if was == Phase::Fenced {
            info!(token, fenced_for = ?took, "resumed: own heartbeats are back");
        } else {
            info!(token, took = ?took, "leader: read own heartbeat back");
        }
    }

    /// A claim we had not known of holds us back (said only if we do not
    /// lead and did not know of it).
    pub(super) fn held_back(other: &Other, token: i64, until: BootTime, now: BootTime, leading: bool, known: bool) {
        if until > now && !leading && !known {
            info!(writer = %other.writer, token, age = ?other.age, holds_until = ?until.since(now), "another member claims partition 0; waiting until its command must be gone");
        }
    }

    /// A run (`before` and `now` its entry before and after its newest
    /// record) has just become one that contends from before ours.
    /// (Not said while we lead: then it fences, and says so.)
    pub(super) fn goes_first(writer: &str, before: &Run, now: &Run, ours: Option<i64>, leading: bool) {
        let was = (before.id == now.id && before.contending).then_some(before.start);
        if now.contending && ours.is_some_and(|s| now.start < s && was.is_none_or(|w| w >= s)) && !leading {
            info!(%writer, "another member has contended for partition 0 since before us; it goes first");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;

    const HB: Duration = Duration::from_millis(200);
    const DEADLINE: Duration = Duration::from_millis(1000);
    const GRACE: Duration = Duration::from_millis(500);

    fn ms(n: u64) -> BootTime {
        BootTime::from_nanos(n * 1_000_000)
    }

    fn settings(restart: Restart) -> Settings {
        Settings {
            heartbeat_interval: HB,
            heartbeat_deadline: DEADLINE,
            grace: GRACE,
            stop_signal: Signal::SIGTERM,
            restart,
            restart_delay: Duration::from_millis(100),
            acquire_timeout: None,
            resume_window: Duration::from_millis(2200),
            observe: Duration::ZERO,
            claim_margin: Duration::ZERO,
        }
    }

    fn hb(offset: i64, sent: u64) -> Input {
        Input::OwnHeartbeat { offset, sent: ms(sent) }
    }

    /// Member `writer`'s record as a version 1 writer put it: written `age`
    /// ms ago, claiming `token` or nothing.
    fn other(writer: &str, token: Option<i64>, age: u64) -> Input {
        let stance = token.map_or(Stance::Released, |token| Stance::Leading { token });
        Input::OtherHeartbeat(Other {
            writer: writer.into(),
            offset: 0,
            run: None,
            start: None,
            stance,
            age: Duration::from_millis(age),
            deadline: DEADLINE,
        })
    }

    /// Member `writer`'s record at `offset` in its run `run` (which it says
    /// began at `start`), written `age` ms ago.
    fn contender(writer: &str, offset: i64, run: u64, start: Option<i64>, stance: Stance, age: u64) -> Input {
        Input::OtherHeartbeat(Other {
            writer: writer.into(),
            offset,
            run: Some(run),
            start,
            stance,
            age: Duration::from_millis(age),
            deadline: DEADLINE,
        })
    }

    /// Our heartbeat in run `run` (begun at `start`): leading with `token`,
    /// or contending.
    fn says(run: u64, start: Option<i64>, token: Option<i64>) -> Action {
        let stance = token.map_or(Stance::Contending, |token| Stance::Leading { token });
        SendHeartbeat(Record { run, start, stance })
    }

    /// Our disclaimer, ending run `run`.
    fn gone(run: u64) -> Action {
        Disclaim(Record { run, start: None, stance: Stance::Released })
    }

    /// What the leader made by `leading` says.
    fn led() -> Action {
        says(1, Some(7), Some(7))
    }

    /// A leader with a running child: assigned at 1000, own heartbeat sent
    /// at 1000 read back at 1010 with offset 7.
    fn leading(restart: Restart) -> Leader {
        let mut l = Leader::new(settings(restart), ms(0));
        assert_eq!(l.step(Input::Assigned, ms(1000)), vec![says(1, None, None)]);
        assert_eq!(l.role(), Role::Candidate);
        // The new leader announces its token with a heartbeat at once.
        assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![Spawn { token: 7, lease: ms(2000) }, led()]);
        assert_eq!(l.role(), Role::Leader { token: 7 });
        l
    }

    #[test]
    fn standby_does_nothing_and_has_no_deadline() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        assert_eq!(l.step(Input::Tick, ms(50_000)), vec![]);
        assert_eq!(l.next_deadline(), None);
        assert_eq!(l.role(), Role::Standby);
    }

    #[test]
    fn candidate_heartbeats_on_its_interval_until_it_reads_one_back() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        assert_eq!(l.next_deadline(), Some(ms(1200)));
        assert_eq!(l.step(Input::Tick, ms(1100)), vec![]);
        assert_eq!(l.step(Input::Tick, ms(1200)), vec![says(1, None, None)]);
        // A candidate never fences: it has no child. (Without a heartbeat
        // for the resume window it gives the partition back: tested below.)
        // A deadline without reading one back ends its run: others may
        // have counted it out.
        assert_eq!(l.step(Input::Tick, ms(3000)), vec![says(2, None, None)]);
        assert_eq!(l.role(), Role::Candidate);
    }

    #[test]
    fn records_of_others_or_from_before_the_tenure_never_count() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        assert_eq!(l.step(other("x", None, 0), ms(1002)), vec![]);
        assert_eq!(l.step(hb(4, 999), ms(1003)), vec![], "sent before we were assigned");
        assert_eq!(l.role(), Role::Candidate);
    }

    #[test]
    fn a_heartbeat_read_back_after_the_deadline_does_not_elect() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        assert_eq!(l.step(hb(5, 1000), ms(2000)), vec![says(2, None, None)]);
        assert_eq!(l.role(), Role::Candidate);
    }

    #[test]
    fn fresh_heartbeats_extend_the_lease_and_the_fence_deadline() {
        let mut l = leading(Restart::Never);
        assert_eq!(l.step(hb(8, 1200), ms(1210)), vec![led(), Lease(ms(2200))]);
        assert_eq!(l.next_deadline(), Some(ms(1410)));
        // An older record arriving late changes nothing.
        assert_eq!(l.step(hb(6, 1100), ms(1300)), vec![]);
    }

    #[test]
    fn stale_heartbeats_fence_with_sigkill_and_fresh_ones_resume_with_a_new_token() {
        let mut l = leading(Restart::Never);
        // Freshness is measured from the send instant, so deadline = 2000.
        assert!(!l.step(Input::Tick, ms(1999)).contains(&KillGroup));
        assert_eq!(l.step(Input::Tick, ms(2000)), vec![KillGroup]);
        assert_eq!(l.role(), Role::Fenced);
        assert_eq!(l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2005)), vec![]);
        // A backlog: old own heartbeats read now do not resume. A deadline
        // has passed since the last one read back: a new run.
        assert_eq!(l.step(hb(9, 1500), ms(2600)), vec![says(2, None, None)]);
        assert_eq!(l.role(), Role::Fenced);
        assert_eq!(
            l.step(hb(12, 2600), ms(2610)),
            vec![Spawn { token: 12, lease: ms(3600) }, says(2, Some(12), Some(12))]
        );
        assert_eq!(l.role(), Role::Leader { token: 12 });
    }

    #[test]
    fn a_fenced_leader_whose_child_still_dies_goes_on_claiming_its_token() {
        let mut l = leading(Restart::Never);
        assert_eq!(l.fresh(), Some(ms(1000)), "the newest own heartbeat read back (for the heartbeat-age metric)");
        assert!(l.step(Input::Tick, ms(2000)).contains(&KillGroup));
        assert_eq!(l.role(), Role::Fenced);
        // Until the child is gone, others must still wait: our record
        // claims partition 0 with the dying child's token, not a contention.
        let claims = l.step(Input::Tick, ms(2200));
        assert!(
            claims.iter().any(|a| matches!(a, SendHeartbeat(Record { stance: Stance::Leading { token: 7 }, .. }))),
            "{claims:?}"
        );
        l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2300));
        let after = l.step(Input::Tick, ms(2400));
        assert!(
            after.iter().all(|a| !matches!(a, SendHeartbeat(Record { stance: Stance::Leading { .. }, .. }))),
            "{after:?}"
        );
    }

    #[test]
    fn a_record_of_one_writer_never_drops_the_live_claim_of_another() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(other("x", Some(3), 0), ms(1000)); // x holds us back until 2000
        l.step(other("y", Some(4), 900), ms(1001)); // y only until 1101
        assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "x's claim still holds");
        assert_eq!(l.step(hb(8, 1900), ms(1910)), vec![says(1, Some(7), None)]);
        assert!(!l.step(Input::Tick, ms(1999)).iter().any(|a| matches!(a, Spawn { .. })));
        assert!(l.step(Input::Tick, ms(2000)).iter().any(|a| matches!(a, Spawn { token: 8, .. })));
    }

    #[test]
    fn a_child_dying_after_its_lease_ran_out_was_fenced_not_exiting() {
        // neli-run was frozen (SIGSTOP) while the shim enforced the lease;
        // on waking, the expired deadline is handled before the exit.
        let mut l = leading(Restart::Never);
        let out = l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2500));
        assert_eq!(out, vec![says(2, None, Some(7)), KillGroup]);
        assert_eq!(l.role(), Role::Fenced);
    }

    #[test]
    fn heartbeats_returning_after_the_resume_window_rejoin_instead_of_resuming() {
        // Found by neli-soak: the broker paused for a whole session timeout;
        // on its return our backlog heartbeat was fresh, but the group had
        // expired our session and handed partition 0 to another member.
        let mut l = leading(Restart::Never);
        l.step(Input::Tick, ms(2000)); // fenced: last fresh heartbeat sent at 1000
        l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2001));
        assert_eq!(
            l.step(Input::Tick, ms(3300)),
            vec![says(3, None, None), gone(3), Rejoin],
            "a 2.3s gap > the 2.2s window"
        );
        assert_eq!(l.step(hb(30, 3300), ms(3310)), vec![]);
        assert_eq!(l.role(), Role::Standby);
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(3320)), vec![ReleaseRevoke]);
        // Within the window, the same return resumes.
        let mut l = leading(Restart::Never);
        l.step(Input::Tick, ms(2000));
        l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2001));
        assert_eq!(l.step(Input::Tick, ms(3100)), vec![says(3, None, None)]);
        assert_eq!(
            l.step(hb(30, 3100), ms(3110)),
            vec![Spawn { token: 30, lease: ms(4100) }, says(3, Some(30), Some(30))]
        );
    }

    #[test]
    fn a_fenced_owner_gives_partition_0_back_after_the_resume_window_without_any_heartbeat() {
        // Found by neli-soak: after a broker restart the leader's fetches hung
        // while its coordinator heartbeats went through; it stayed fenced,
        // holding partition 0, and the group had no leader for a minute.
        let mut l = leading(Restart::Never);
        l.step(Input::Tick, ms(2000)); // fenced: last fresh heartbeat sent at 1000
        l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2001));
        // Not the promotion moment that passed at 1000 (that would spin).
        assert_eq!(l.next_deadline(), Some(ms(2200)), "the next heartbeat comes first");
        l.step(Input::Tick, ms(3000));
        assert_eq!(l.next_deadline(), Some(ms(3200)), "1000 + the 2.2s resume window");
        assert_eq!(l.step(Input::Tick, ms(3199)), vec![]);
        assert_eq!(l.step(Input::Tick, ms(3200)), vec![says(3, None, None), gone(3), Rejoin]);
        assert_eq!(l.role(), Role::Standby);
        assert_eq!(l.next_deadline(), None);
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(3300)), vec![ReleaseRevoke]);
    }

    #[test]
    fn a_candidate_that_never_reads_its_heartbeat_back_gives_partition_0_back() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(Input::Tick, ms(3100));
        assert_eq!(l.step(Input::Tick, ms(3200)), vec![gone(2), Rejoin], "its contending records withdrawn");
        assert_eq!(l.role(), Role::Standby);
        // Assigned again later: a new tenure, a new window.
        assert_eq!(l.step(Input::Assigned, ms(4000)), vec![says(3, None, None)]);
        assert_eq!(
            l.step(hb(40, 4000), ms(4010)),
            vec![Spawn { token: 40, lease: ms(5000) }, says(3, Some(40), Some(40))]
        );
    }

    #[test]
    fn a_revoke_while_the_child_still_stops_waits_for_it_even_without_a_tenure() {
        let mut l = leading(Restart::Never);
        l.step(Input::Tick, ms(2000)); // fenced, child being killed
        l.step(hb(30, 3300), ms(3310)); // rejoin: tenure dropped, child not yet reaped
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(3320)), vec![]);
        assert_eq!(l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(3330)), vec![ReleaseRevoke]);
    }

    #[test]
    fn yield_stops_the_child_then_stands_aside_without_restart_or_exit() {
        let mut l = leading(Restart::Always);
        assert_eq!(l.step(Input::Yield, ms(1100)), vec![SignalGroup(Signal::SIGTERM)]);
        assert_eq!(l.step(Input::ChildExited(ChildStatus::Signaled(15)), ms(1150)), vec![gone(1), StandAside]);
        assert_eq!(l.role(), Role::Standby);
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(1160)), vec![ReleaseRevoke]);
        assert_eq!(l.next_deadline(), None, "no restart pending");
        // A standby has nothing to yield.
        assert_eq!(l.step(Input::Yield, ms(1200)), vec![]);
        // A fenced leader has no child: it stands aside at once.
        let mut l = leading(Restart::Never);
        l.step(Input::Tick, ms(2000));
        l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2001));
        assert_eq!(l.step(Input::Yield, ms(2002)), vec![gone(2), StandAside]);
    }

    fn claim(token: i64) -> Input {
        other("x", Some(token), 0)
    }

    #[test]
    fn a_candidate_waits_until_other_claims_have_been_quiet_for_a_deadline() {
        // Found in CI on tansu: the broker assigned partition 0 to a second
        // member while the first still held it and went on heartbeating.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(claim(5), ms(1005));
        assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "contested: no leadership");
        assert_eq!(l.role(), Role::Candidate);
        assert_eq!(l.step(claim(5), ms(1200)), vec![says(1, Some(7), None)]);
        l.step(Input::Tick, ms(1400));
        assert_eq!(l.step(hb(9, 1400), ms(1900)), vec![says(1, Some(7), None)], "still within a deadline of the claim");
        // The claims stop (the other member fenced or left): a deadline after
        // the last one we lead, on the newest own heartbeat (offset 9).
        l.step(Input::Tick, ms(2100));
        assert_eq!(l.next_deadline(), Some(ms(2200)));
        assert_eq!(l.step(Input::Tick, ms(2200)), vec![Spawn { token: 9, lease: ms(2400) }, says(1, Some(7), Some(9))]);
    }

    #[test]
    fn regression_a_claim_written_just_before_our_assignment_holds_us_back_until_it_runs_out() {
        // Found by neli-soak on tansu: the broker gave partition 0 to c2-31
        // 0.26 s after c1-59 had resumed and written a claim, c1-59's
        // heartbeats were stalled, and c2-31 (reading from the end) led while
        // c1-59's command still ran. Now the new owner reads the tail of the
        // partition: a claim written 300 ms ago by a member whose deadline is
        // 1000 ms holds us back until 700 ms from now, plus the margin.
        let mut s = settings(Restart::Never);
        s.claim_margin = Duration::from_millis(100);
        let mut l = Leader::new(s, ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(other("c1", Some(5), 300), ms(1001));
        assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "c1's command may still run");
        l.step(Input::Tick, ms(1200));
        assert_eq!(l.step(hb(9, 1700), ms(1710)), vec![says(1, Some(7), None)]);
        assert_eq!(l.next_deadline(), Some(ms(1801)), "300 ms old at 1001, deadline 1000, margin 100");
        assert_eq!(l.step(Input::Tick, ms(1801)), vec![Spawn { token: 9, lease: ms(2700) }, says(1, Some(7), Some(9))]);
    }

    #[test]
    fn regression_a_claim_read_before_our_tenure_still_holds_us_back() {
        // Found by neli-soak on tansu, after the fix above: a member whose
        // give-back was merged into a join kept reading partition 0 without
        // a tenure, read another member's fresh claim then, and, assigned
        // again a moment later, led while that member's command still ran.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(other("c1", Some(5), 0), ms(1000));
        l.step(Input::Assigned, ms(1500));
        assert_eq!(l.step(hb(7, 1500), ms(1510)), vec![], "c1's claim runs until 2000");
        l.step(Input::Tick, ms(1700));
        assert_eq!(l.step(Input::Tick, ms(2000)), vec![Spawn { token: 7, lease: ms(2500) }, led()]);
    }

    #[test]
    fn old_claims_and_withdrawn_claims_do_not_hold_us_back() {
        // A crashed leader's last claim, read long after: its command is gone.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(5000));
        l.step(other("dead", Some(5), 4000), ms(5001));
        assert_eq!(l.step(hb(7, 5000), ms(5010)), vec![Spawn { token: 7, lease: ms(6000) }, led()]);
        // A leader that stopped gracefully disclaimed after its claim.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(other("old", Some(5), 100), ms(1001));
        l.step(other("old", None, 50), ms(1002));
        assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![Spawn { token: 7, lease: ms(2000) }, led()]);
        // Each writer counts on its own: another's disclaimer withdraws nothing.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(other("a", Some(5), 0), ms(1001));
        l.step(other("b", None, 0), ms(1002));
        assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![]);
    }

    #[test]
    fn a_leader_disclaims_once_before_giving_partition_0_up() {
        let mut l = leading(Restart::Never);
        assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(Signal::SIGTERM)]);
        assert_eq!(l.step(Input::ChildExited(ChildStatus::Signaled(15)), ms(1150)), vec![gone(1), Exit(143)]);
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(1160)), vec![ReleaseRevoke], "said once");
        // A candidate withdraws its contention the same way.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(1100)), vec![gone(1), ReleaseRevoke]);
        // A member that never wrote a record has nothing to take back.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(1100)), vec![ReleaseRevoke]);
    }

    #[test]
    fn a_leader_keeps_renewing_its_lease_while_an_older_claim_arrives() {
        // Found in CI: a cut-off old leader's buffered heartbeats arrive
        // after the heal; the new leader must not stop renewing its lease.
        let mut l = leading(Restart::Never);
        l.step(claim(3), ms(1020));
        assert_eq!(l.step(hb(8, 1200), ms(1210)), vec![led(), Lease(ms(2200))]);
    }

    #[test]
    fn a_new_owner_watches_the_partition_before_leading() {
        let mut s = settings(Restart::Never);
        s.observe = Duration::from_millis(450);
        let mut l = Leader::new(s, ms(0));
        l.step(Input::Assigned, ms(1000));
        assert_eq!(l.step(hb(7, 1000), ms(1100)), vec![], "still watching");
        assert_eq!(l.next_deadline(), Some(ms(1200)), "the next heartbeat comes first");
        l.step(Input::Tick, ms(1200));
        assert_eq!(l.next_deadline(), Some(ms(1400)));
        assert_eq!(l.step(Input::Tick, ms(1450)), vec![Spawn { token: 7, lease: ms(2000) }, led()]);
        // A claim seen while watching keeps us waiting a whole deadline.
        let mut s = settings(Restart::Never);
        s.observe = Duration::from_millis(450);
        let mut l = Leader::new(s, ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(hb(7, 1000), ms(1100));
        l.step(claim(3), ms(1300));
        assert_eq!(l.step(Input::Tick, ms(1450)), vec![]);
        assert_eq!(l.role(), Role::Candidate);
    }

    #[test]
    fn of_two_leaders_the_older_token_fences() {
        let mut l = leading(Restart::Never); // token 7
        assert_eq!(l.step(claim(3), ms(1020)), vec![], "an older claim: the other one must yield");
        assert_eq!(l.role(), Role::Leader { token: 7 });
        assert_eq!(l.step(claim(12), ms(1030)), vec![KillGroup]);
        assert_eq!(l.role(), Role::Fenced);
        l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(1040));
        assert_eq!(l.step(hb(13, 1100), ms(1110)), vec![], "no resume while the other claims");
    }

    #[test]
    fn resuming_while_the_fenced_child_still_dies_spawns_once_it_is_gone() {
        let mut l = leading(Restart::Never);
        assert_eq!(l.step(Input::Tick, ms(2000)), vec![says(2, None, Some(7)), KillGroup]);
        assert_eq!(
            l.step(hb(12, 2000), ms(2020)),
            vec![says(2, Some(12), Some(12))],
            "no spawn while the old child lives"
        );
        assert_eq!(
            l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(2030)),
            vec![Spawn { token: 12, lease: ms(3000) }]
        );
    }

    #[test]
    fn graceful_revoke_holds_the_callback_until_the_child_is_gone() {
        let mut l = leading(Restart::Always);
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(1100)), vec![SignalGroup(Signal::SIGTERM)]);
        assert_eq!(l.role(), Role::Standby);
        assert_eq!(l.next_deadline(), Some(ms(1600)));
        assert_eq!(l.step(Input::Tick, ms(1600)), vec![KillGroup]);
        assert_eq!(
            l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(1601)),
            vec![gone(1), ReleaseRevoke],
            "released, and no restart: we are no longer leader"
        );
        assert_eq!(l.next_deadline(), None);
    }

    #[test]
    fn lost_partition_kills_without_grace() {
        let mut l = leading(Restart::Never);
        assert_eq!(l.step(Input::Revoked { lost: true }, ms(1100)), vec![KillGroup]);
        assert_eq!(l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(1101)), vec![gone(1), ReleaseRevoke]);
    }

    #[test]
    fn revoke_without_a_child_releases_at_once() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(5)), vec![ReleaseRevoke]);
        l.step(Input::Assigned, ms(10));
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(20)), vec![gone(1), ReleaseRevoke]);
    }

    /// Two members, a and b, that own partition 0 at once, fed the same
    /// partition: each reads its own records and the other's, in log order.
    /// Returns the tokens each spawned with.
    fn two_owners(a_first_on_the_log: bool) -> [Vec<i64>; 2] {
        let mut s = settings(Restart::Never);
        s.observe = Duration::from_millis(450);
        let mut m = [Leader::new(s.clone(), ms(0)), Leader::new(s, ms(0))];
        let mut spawned: [Vec<i64>; 2] = Default::default();
        let names = ["a", "b"];
        let mut step = |m: &mut [Leader; 2], i: usize, input: Input, t: u64| {
            for action in m[i].step(input, ms(t)) {
                if let Spawn { token, .. } = action {
                    spawned[i].push(token);
                }
            }
        };
        // a is assigned at 1000, b 70 ms later; whose first record lands
        // first on the partition is up to the broker.
        step(&mut m, 0, Input::Assigned, 1000);
        step(&mut m, 1, Input::Assigned, 1070);
        let sent = [1000, 1070];
        let order = if a_first_on_the_log { [0, 1] } else { [1, 0] };
        for (offset, writer) in [(10, order[0]), (11, order[1])] {
            for reader in order {
                let input = if reader == writer {
                    hb(offset, sent[writer])
                } else {
                    contender(names[writer], offset, 1, None, Stance::Contending, 5)
                };
                step(&mut m, reader, input, 1080 + offset as u64);
            }
        }
        // Then every 100 ms each writes a record and both read it: leading
        // while its writer leads, contending otherwise.
        let mut offset = 20;
        for t in (1100..4000).step_by(100) {
            for i in 0..2 {
                step(&mut m, i, Input::Tick, t);
                step(&mut m, i, hb(offset, t), t + 5);
                let (start, stance) = match m[i].role() {
                    Role::Leader { token } => (None, Stance::Leading { token }),
                    _ => (None, Stance::Contending),
                };
                step(&mut m, 1 - i, contender(names[i], offset, 1, start, stance, 5), t + 6);
                offset += 1;
            }
        }
        spawned
    }

    #[test]
    fn regression_of_two_owners_at_once_only_the_earlier_run_on_the_partition_leads() {
        // Found by neli-soak on tansu (seed 48): the broker gave partition 0
        // to two members 73 ms apart; both were candidates, neither had a
        // claim to read before its watch ended, and both led. Now the run
        // whose first record comes first on the partition goes first: both
        // read the same order, so both agree, whatever the timing.
        let [a, b] = two_owners(true);
        assert_eq!((a.len(), b.len()), (1, 0), "a first on the log: a leads, b waits ({a:?} {b:?})");
        let [a, b] = two_owners(false);
        assert_eq!((a.len(), b.len()), (0, 1), "b first on the log: b leads though assigned later ({a:?} {b:?})");
    }

    #[test]
    fn an_earlier_contender_holds_a_candidate_back_until_it_withdraws_or_goes_quiet() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(contender("x", 5, 1, None, Stance::Contending, 0), ms(1001));
        assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![], "x's run began at 5, ours at 7");
        l.step(Input::Tick, ms(1200));
        l.step(hb(8, 1200), ms(1210));
        assert_eq!(l.next_deadline(), Some(ms(1400)), "the next heartbeat; x's record counts until 2001");
        // Withdrawn: we lead at once, on our newest record.
        assert_eq!(
            l.step(contender("x", 9, 1, Some(5), Stance::Released, 0), ms(1220)),
            vec![Spawn { token: 8, lease: ms(2200) }, says(1, Some(7), Some(8))]
        );
        // Gone quiet (crashed): we lead once its last record has run out.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(contender("x", 5, 1, None, Stance::Contending, 0), ms(1001));
        l.step(hb(7, 1000), ms(1010));
        for t in (1200..2000).step_by(200) {
            l.step(Input::Tick, ms(t));
            assert_eq!(l.step(hb(7 + t as i64 / 200, t), ms(t + 5)), vec![]);
        }
        assert_eq!(
            l.step(Input::Tick, ms(2001)),
            vec![Spawn { token: 16, lease: ms(2800) }, says(1, Some(7), Some(16))]
        );
        // A later contender, or one of an older version, holds nobody back.
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(other("old", None, 0), ms(1001));
        l.step(hb(7, 1000), ms(1010));
        assert_eq!(l.step(contender("y", 9, 1, None, Stance::Contending, 0), ms(1011)), vec![]);
        assert_eq!(l.role(), Role::Leader { token: 7 });
    }

    #[test]
    fn a_leader_fences_when_a_run_that_began_before_its_own_still_contends() {
        // The group gave partition 0 to both and we led without seeing the
        // other (its records were late): the earlier one is the one both
        // sides let lead, so we stop.
        let mut l = leading(Restart::Never); // our run began at 7
        assert_eq!(l.step(contender("late", 9, 1, None, Stance::Contending, 0), ms(1015)), vec![]);
        assert_eq!(l.step(contender("stale", 3, 1, None, Stance::Contending, 1500), ms(1016)), vec![], "ran out");
        assert_eq!(l.role(), Role::Leader { token: 7 });
        // Read at 12, but its writer says its run began at 5.
        assert_eq!(l.step(contender("early", 12, 1, Some(5), Stance::Contending, 0), ms(1020)), vec![KillGroup]);
        assert_eq!(l.role(), Role::Fenced);
        l.step(Input::ChildExited(ChildStatus::Signaled(9)), ms(1030));
        assert_eq!(l.step(hb(13, 1200), ms(1210)), vec![says(1, Some(7), None)], "no resume while it contends");
        // It leads now: a claim from a run that began before ours.
        l.step(contender("early", 14, 1, Some(5), Stance::Leading { token: 13 }, 0), ms(1220));
        assert_eq!(l.step(Input::Tick, ms(1250)), vec![], "its claim holds us back");
        assert_eq!(
            l.step(contender("early", 20, 1, Some(5), Stance::Released, 0), ms(1300)),
            vec![Spawn { token: 13, lease: ms(2200) }, says(1, Some(7), Some(13))],
            "withdrawn: we resume at once"
        );
    }

    #[test]
    fn restart_policies_decide_what_a_child_exit_means() {
        let cases = [
            (Restart::Never, ChildStatus::Exited(0), Some(0)),
            (Restart::Never, ChildStatus::Exited(3), Some(3)),
            (Restart::Never, ChildStatus::Signaled(11), Some(139)),
            (Restart::OnFailure, ChildStatus::Exited(0), Some(0)),
            (Restart::OnFailure, ChildStatus::Exited(1), None),
            (Restart::Always, ChildStatus::Exited(0), None),
            (Restart::Always, ChildStatus::Exited(1), None),
        ];
        for (restart, status, exit) in cases {
            let mut l = leading(restart);
            let out = l.step(Input::ChildExited(status), ms(1100));
            match exit {
                Some(code) => assert_eq!(out, vec![gone(1), Exit(code)], "{restart:?} {status:?}"),
                None => {
                    assert_eq!(out, vec![], "{restart:?} {status:?}");
                    assert_eq!(l.next_deadline(), Some(ms(1200)));
                    // Restarts keep the token: it is the same leadership.
                    l.step(hb(8, 1150), ms(1160));
                    assert_eq!(l.step(Input::Tick, ms(1200)), vec![Spawn { token: 7, lease: ms(2150) }]);
                }
            }
        }
    }

    #[test]
    fn a_pending_restart_waits_for_a_fresh_heartbeat_and_is_dropped_on_revoke() {
        let mut l = leading(Restart::Always);
        l.step(Input::ChildExited(ChildStatus::Exited(1)), ms(1100));
        l.step(Input::Revoked { lost: false }, ms(1150));
        assert_eq!(l.step(Input::Tick, ms(1300)), vec![]);
        assert_eq!(l.next_deadline(), None);
    }

    #[test]
    fn shutdown_stops_the_child_and_exits_with_its_status() {
        let mut l = leading(Restart::Always);
        assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(Signal::SIGTERM)]);
        // Heartbeats go on while the child stops: we still own the partition.
        assert_eq!(l.step(Input::ChildExited(ChildStatus::Signaled(15)), ms(1210)), vec![led(), gone(1), Exit(143)]);
        assert_eq!(l.step(Input::Tick, ms(5000)), vec![]);
        assert_eq!(l.step(Input::Revoked { lost: false }, ms(5000)), vec![ReleaseRevoke]);
    }

    /// Found by hand: with the defaults (--grace 3s, --heartbeat-deadline
    /// 3s) the shim's lease ran out while a shutdown waited for the child,
    /// which was SIGKILLed before its grace was up.
    #[test]
    fn regression_the_lease_is_renewed_while_a_shutdown_waits_out_the_grace() {
        let mut l = leading(Restart::Never);
        assert_eq!(l.step(Input::Shutdown, ms(1100)), vec![SignalGroup(Signal::SIGTERM)]);
        assert_eq!(l.step(hb(8, 1100), ms(1110)), vec![Lease(ms(2100))]);
    }

    #[test]
    fn a_second_shutdown_kills_at_once() {
        let mut l = leading(Restart::Never);
        l.step(Input::Shutdown, ms(1100));
        assert_eq!(l.step(Input::Shutdown, ms(1150)), vec![KillGroup]);
    }

    #[test]
    fn shutdown_of_a_standby_exits_zero_and_fatal_uses_its_code() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        assert_eq!(l.step(Input::Shutdown, ms(10)), vec![Exit(0)]);
        let mut l = leading(Restart::Never);
        l.step(Input::Fatal(exit::KAFKA_DENIED), ms(1100));
        assert_eq!(
            l.step(Input::ChildExited(ChildStatus::Exited(0)), ms(1100)),
            vec![gone(1), Exit(exit::KAFKA_DENIED)]
        );
    }

    #[test]
    fn signals_are_forwarded_only_to_a_live_child() {
        let mut l = Leader::new(settings(Restart::Never), ms(0));
        assert_eq!(l.step(Input::Forward(Signal::SIGHUP), ms(1)), vec![]);
        let mut l = leading(Restart::Never);
        assert_eq!(l.step(Input::Forward(Signal::SIGHUP), ms(1020)), vec![SignalGroup(Signal::SIGHUP)]);
    }

    #[test]
    fn acquire_timeout_exits_only_if_never_leader() {
        let mut s = settings(Restart::Never);
        s.acquire_timeout = Some(Duration::from_secs(5));
        let mut l = Leader::new(s.clone(), ms(0));
        assert_eq!(l.next_deadline(), Some(ms(5000)));
        assert_eq!(l.step(Input::Tick, ms(5000)), vec![Exit(exit::ACQUIRE_TIMEOUT)]);

        let mut l = Leader::new(s, ms(0));
        l.step(Input::Assigned, ms(1000));
        l.step(hb(1, 1000), ms(1010));
        assert!(!l.step(Input::Tick, ms(5000)).iter().any(|a| matches!(a, Exit(_))));
    }

    #[test]
    fn tokens_increase_across_leaderships() {
        let mut l = leading(Restart::Never);
        l.step(Input::Revoked { lost: false }, ms(1100));
        l.step(Input::ChildExited(ChildStatus::Signaled(15)), ms(1200));
        l.step(Input::Assigned, ms(3000));
        assert_eq!(
            l.step(hb(40, 3000), ms(3010)),
            vec![Spawn { token: 40, lease: ms(4000) }, says(2, Some(40), Some(40))]
        );
    }
}
