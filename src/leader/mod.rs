//! The leadership state machine: the pure core of neli-run.
//!
//! Events go in through [`Leader::step`] with the time they happened (and
//! the wall clock once, as the [`Anchor`] of [`Leader::new`]); actions come
//! out as data for the shell to carry out. The core never reads a clock, a
//! socket or a process: that is what lets its tests (`tests.rs`, the
//! scenarios; `invariants.rs`, the random walks) go through every
//! interleaving of rebalances, heartbeats, child exits and signals.
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
//!
//! Beyond Fast NELI, `peers` holds what other members' records say, the
//! defence against brokers that give partition 0 to two members at once;
//! every start of the command passes one gate (`start_at`) that asks it.
//! `Plan` says what follows the command's exit (restart, stand aside, exit).
//!
//! Once per wave (`--restart never`, the cron wrapper): every record also
//! carries the newest [`Job`] its writer knows, so that a member that comes
//! to lead after a run of its wave ended exits with that run's status
//! instead of running the command again (see [`Waves`]).
//!
//! A schedule of its own (`--every`, `--cron`): the leader stays leader and
//! runs the command at each due time; the same [`Job`] carried in every
//! record names the newest due time run and how it ended, so that the next
//! leader neither repeats a run that ended nor forgets one that was due
//! (see [`Schedule`]).

use std::time::Duration;

use tracing::{info, warn};

use crate::clock::{Anchor, BootTime};
use crate::exit::{self, ChildStatus};
use peers::Peers;
pub use schedule::{Calendar, Missed, Schedule};

mod peers;
mod schedule;

/// What to do when the child exits on its own while we lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Exit with the child's status (and leave the group).
    Never,
    /// Start it again unless it exited with status 0.
    OnFailure,
    /// Start it again whatever its status.
    Always,
}

/// A signal, by number: the core decides when one goes to the command's
/// group, the supervisor sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal(pub i32);

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
    /// How long one run may take before it is stopped (stop signal, grace,
    /// SIGKILL) and counts as ended with the status that gives.
    pub max_runtime: Option<Duration>,
    /// The longest gap in our own heartbeats after which we may still
    /// trust that the group kept partition 0 for us: session timeout minus
    /// a coordinator heartbeat and the margin. After a longer gap the
    /// coordinator may already have given the partition to another member,
    /// so we rejoin the group instead of resuming.
    pub resume_window: Duration,
    /// How long past its writer's deadline another member's claim still
    /// holds us back: room for the writers' wall clocks to disagree and for
    /// a kill to land.
    pub claim_margin: Duration,
    /// Once per wave, or None to run the command whenever we come to lead.
    pub waves: Option<Waves>,
    /// Run the command at due times while we lead, instead of once when we
    /// come to lead (never with waves).
    pub schedule: Option<Schedule>,
}

/// Once per wave: members started for the same tick (cron on every host)
/// run the command once between them, where each would otherwise run it in
/// turn as leadership passes on. A wave begins when its first attempt
/// starts; a member started within `within` of that belongs to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waves {
    /// How long after a wave began a member started still belongs to it;
    /// one started later begins a wave of its own (the next tick).
    pub within: Duration,
    /// Whether a run that failed is tried again by the next member; if not,
    /// every member of its wave exits with its status.
    pub retry_failed: bool,
}

/// One attempt at a wave's run. An attempt that did not end on its own
/// (its leader crashed, was fenced or was stopped) is tried again by the
/// next leader of the wave: at least once, never twice after a success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// When the wave's first attempt started, in wall-clock ms (what other
    /// machines can compare). A schedule's attempts share their due time
    /// instead: each is a wave of its own, and this is its own start.
    pub wave_ms: u64,
    /// The first attempt's token: where the wave began on partition 0, which
    /// every member reads alike, whatever its clock.
    pub wave_token: i64,
    /// 1 for the first attempt, 2 for the first retry ...
    pub attempt: u32,
    /// The attempt's fencing token: the newer attempt has the larger one.
    pub token: i64,
    /// Its exit status, once it ended on its own.
    pub code: Option<u8>,
    /// Who ran it; None for this member.
    pub by: Option<Runner>,
    /// The due time it runs, in wall-clock ms since the epoch (a schedule's
    /// run; None for a wave's). Not a `BootTime`: it may lie before this
    /// machine booted.
    pub due: Option<u64>,
    /// When it ended on its own (with `code`), in wall-clock ms.
    pub ended: Option<u64>,
}

/// Whether an attempt (its token, due time and ending) says more than a
/// `known` one. Records carry attempts forward, so the same one is read
/// many times, ended or not.
/// - A wave's (no due time): the newer attempt (the larger token), or the
///   same attempt telling how it ended. A failed run is tried again, so a
///   later attempt's word is the one that counts.
/// - A schedule's: the later due time (one leadership runs due times one
///   after another under one token); of one due time, a run that ended over
///   any attempt that did not, since an ending is final and an attempt
///   begun before it landed (then cut short) must not undo it (found by
///   neli-soak on tansu); else the newer attempt.
pub fn supersedes<D: Ord>(
    (token, due, code): (i64, Option<D>, Option<u8>),
    (known, known_due, known_code): (i64, Option<D>, Option<u8>),
) -> bool {
    if due.is_some() && known_due.is_some() {
        return (&due, code.is_some(), token) > (&known_due, known_code.is_some(), known);
    }
    let (new, old) = ((token, due), (known, known_due));
    new > old || (new == old && known_code.is_none() && code.is_some())
}

/// A member that ran an attempt, as its records name it (the writer chose
/// these strings: log them escaped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runner {
    pub name: String,
    pub host: String,
}

/// What one of our heartbeat records says. The core decides it, so that a
/// record never claims less than is true.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Which of our terms it belongs to: a term is one stretch of ownership
    /// whose records others can have counted without a break (raft's word).
    pub term: u64,
    /// The offset of the term's first record, once read back: the term's
    /// place in the one order every member reads.
    pub start: Option<i64>,
    pub stance: Stance,
    /// The newest attempt of a wave, or run of the schedule, we know of.
    pub job: Option<Job>,
    /// When the schedule's next run is due, as its writer plans it
    /// (wall-clock ms).
    pub next: Option<u64>,
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
    /// The writer's term; None from versions that did not say, whose
    /// records never contend.
    pub term: Option<u64>,
    /// The offset of that term's first record, if the writer had read it
    /// back when it wrote this one.
    pub start: Option<i64>,
    pub stance: Stance,
    /// How long ago it was written: our wall clock against the writer's.
    pub age: Duration,
    /// The writer's heartbeat deadline: its command is dead this long after
    /// its newest record was written, unless it writes another.
    pub deadline: Duration,
    /// The newest attempt of a wave its writer knew of.
    pub job: Option<Job>,
}

/// Something that happened, as the shell reports it.
// A record is a few hundred bytes and comes a few times a second: moved,
// not boxed.
#[allow(clippy::large_enum_variant)]
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
    /// itself at `lease` unless the lease is extended. `job` says which
    /// attempt of which wave it is (once per wave).
    Spawn { token: i64, lease: BootTime, job: Option<Job> },
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

/// What this member means to do with its command, whatever the group does:
/// the one place that says what follows the command's exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Run the command while we lead; nothing is due.
    Serve,
    /// Start the command from this time on, once we lead with a fresh
    /// heartbeat, it is gone, and no claim or earlier term holds us back:
    /// after a promotion, a resume, or by `--restart`. (Kept through a
    /// revoke or a fence: only a promotion, which sets it anew, leads on.)
    Start(BootTime),
    /// A yield: stop the command, then stand aside for another member.
    StandAside,
    /// Stop the command, then exit with this code, or with its status.
    Exit(Option<u8>),
    /// Exit was asked of the shell: only a revoke from closing is answered.
    Done,
}

/// Whether to run the command now (as which attempt of which wave), or to
/// exit with the status of a run of our wave that already ended.
enum Turn {
    Run(Option<Job>),
    Covered(u8),
}

/// Our newest own heartbeat read back.
#[derive(Clone, Copy, Debug)]
struct Fresh {
    /// When we produced it (our own clock).
    sent: BootTime,
    /// Where it landed: the fencing token if it makes us leader.
    offset: i64,
}

/// Our ownership of partition 0, from assignment to revoke.
#[derive(Clone, Copy, Debug)]
struct Tenure {
    since: BootTime,
    /// Since when the current role holds (for "took X" in logs).
    role_since: BootTime,
    next_heartbeat: BootTime,
    /// When the current term began (see [`Record::term`]).
    term_since: BootTime,
    /// The offset of the term's first own record read back.
    start: Option<i64>,
    /// The newest own heartbeat of this term read back.
    fresh: Option<Fresh>,
    role: Phase,
}

/// The state machine. One per neli-run process.
#[derive(Debug)]
pub struct Leader {
    settings: Settings,
    started: BootTime,
    /// Our start on both clocks: every conversion between boot time and
    /// the wall clock of the records goes through it.
    anchor: Anchor,
    tenure: Option<Tenure>,
    child: Child,
    plan: Plan,
    /// A revoke waits in the rebalance callback until the command is gone.
    revoke_waits: bool,
    ever_led: bool,
    /// Our current term; counts up with each new one.
    term: u64,
    /// The token our child was started with: our records claim it while
    /// the child may live, leader or not.
    child_token: i64,
    /// We have written records since we last disclaimed.
    spoke: bool,
    /// When the running command overruns --max-runtime.
    run_until: Option<BootTime>,
    /// The end of partition 0 when we started: a wave that began at or after
    /// it began after us, on the log's word rather than a clock's.
    born: Option<i64>,
    /// We stopped the command for overrunning: its exit ends its run as if
    /// it had exited by itself (the restart policy and its wave apply).
    overran: bool,
    /// When our latest scheduled run ended: the next one starts only once a
    /// record that says so is read back, or a crash could run it twice.
    run_ended: Option<BootTime>,
    /// What the other members' records say (see `peers`).
    peers: Peers,
    /// The newest attempt of a wave we know of, ours or read (once per wave).
    job: Option<Job>,
    /// The time of the latest step: a deadline at or before it has been
    /// handled, and returning it from `next_deadline` would spin the shell.
    now: BootTime,
    out: Vec<Action>,
    /// Every role taken since the shell last asked, in order: a fence and a
    /// resume within one step are two changes, not none.
    roles: Vec<Role>,
    last_role: Role,
}

impl Leader {
    /// A standby that has just started at `now` (read on both clocks once,
    /// by the shell: the core reads none).
    pub fn new(settings: Settings, now: Anchor) -> Leader {
        Leader {
            settings,
            started: now.boot,
            anchor: now,
            tenure: None,
            child: Child::Idle,
            plan: Plan::Serve,
            revoke_waits: false,
            ever_led: false,
            term: 0,
            child_token: 0,
            spoke: false,
            run_until: None,
            born: None,
            overran: false,
            run_ended: None,
            peers: Peers::default(),
            job: None,
            now: now.boot,
            out: Vec::new(),
            roles: Vec::new(),
            last_role: Role::Standby,
        }
    }

    /// Notes the end of partition 0 as it was when we started (once per wave:
    /// members started before a wave began belong to it, whatever the
    /// clocks of its hosts say).
    pub fn born_at(&mut self, end: i64) {
        self.born = Some(end);
    }

    /// The roles taken since the last call, in order (for metrics and
    /// systemd's status line).
    pub fn roles_taken(&mut self) -> Vec<Role> {
        std::mem::take(&mut self.roles)
    }

    /// Notes the current role if it changed.
    fn note_role(&mut self) {
        let role = self.role();
        if role != self.last_role {
            self.last_role = role;
            self.roles.push(role);
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

    /// The newest run we know of, ours or read (for metrics).
    pub fn last_run(&self) -> Option<&Job> {
        self.job.as_ref()
    }

    /// Whether our command may still run: until its exit is reported, a
    /// run has not ended (for metrics).
    pub fn child_alive(&self) -> bool {
        self.child != Child::Idle
    }

    /// Send time of the newest own heartbeat read back, while we own
    /// partition 0 (for the heartbeat-age metric).
    pub fn fresh(&self) -> Option<BootTime> {
        self.tenure.and_then(|t| t.fresh).map(|f| f.sent)
    }

    /// Feeds one event; returns what to do, in order.
    pub fn step(&mut self, input: Input, now: BootTime) -> Vec<Action> {
        if self.plan == Plan::Done {
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
        self.note_role();
        std::mem::take(&mut self.out)
    }

    /// When the shell must call `step(Input::Tick, ..)` next, at the latest.
    pub fn next_deadline(&self) -> Option<BootTime> {
        if self.plan == Plan::Done {
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
                Phase::Leader { .. } => consider(t.fresh.map(|f| f.sent + self.settings.heartbeat_deadline)),
                Phase::Candidate | Phase::Fenced => consider(Some(self.give_back_at(&t))),
            }
        }
        if let Child::Stopping { kill_at } = self.child {
            consider(kill_at);
        }
        if self.child == Child::Running {
            consider(self.run_until);
        }
        consider(self.acquire_deadline());
        // A moment already passed was tried then and failed (the heartbeat
        // was stale); only a new heartbeat can change that.
        consider(self.promotion_at().filter(|&at| at > self.now));
        consider(self.start_at().filter(|&at| at > self.now));
        next
    }

    /// When an owner of partition 0 that does not lead gives it back: once
    /// its own heartbeats have been gone for the resume window. After that
    /// the coordinator may have expired our session and moved the partition
    /// on without its verdict reaching us, so resuming would be unsafe; and
    /// holding on (data path broken, coordinator reachable) would leave the
    /// group leaderless for as long as the fault lasts. Found by neli-soak.
    fn give_back_at(&self, tenure: &Tenure) -> BootTime {
        tenure.fresh.map_or(tenure.since, |f| f.sent) + self.settings.resume_window
    }

    fn acquire_deadline(&self) -> Option<BootTime> {
        match (self.ever_led, self.plan, self.settings.acquire_timeout) {
            (false, Plan::Serve | Plan::Start(_) | Plan::StandAside, Some(t)) => Some(self.started + t),
            _ => None,
        }
    }

    fn on_assigned(&mut self, now: BootTime) {
        if self.tenure.is_some() {
            return;
        }
        info!(after = ?now.since(self.started), "candidate: assigned partition 0, confirming with a heartbeat");
        self.term += 1;
        self.tenure = Some(Tenure {
            since: now,
            role_since: now,
            next_heartbeat: now,
            term_since: now,
            start: None,
            fresh: None,
            role: Phase::Candidate,
        });
        self.note_role();
    }

    fn on_revoked(&mut self, lost: bool, now: BootTime) {
        if let Some(tenure) = self.tenure.take() {
            info!(role = ?tenure.role, held = ?now.since(tenure.since), lost, "revoked: partition 0 taken away");
        }
        self.note_role();
        // Whatever our role was, the partition goes only once the child has.
        match self.child {
            Child::Idle => self.release(),
            Child::Running | Child::Stopping { .. } => {
                self.revoke_waits = true;
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
        if sent < tenure.term_since {
            return; // an earlier term's record: it says nothing about this one
        }
        if tenure.fresh.is_some_and(|f| f.sent >= sent) {
            return;
        }
        if tenure.start.is_none() {
            tenure.start = Some(offset);
            say::earlier_contenders(&self.peers, offset, now);
        }
        // (A gap longer than the resume window never gets here: `on_time`
        // gave the partition back first.)
        tenure.fresh = Some(Fresh { sent, offset });
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
    /// is fresh, and no other member's claim or earlier term holds it back.
    ///
    /// No fixed wait: the log itself is the proof. Everything written to
    /// partition 0 before our first record of this term (from the backlog
    /// the adapter pins before that record is sent) has been read by the
    /// time that record comes back, since a partition is read in order; so
    /// a claim that may still hold, or a term that began before ours, is
    /// known. A record that lands after ours comes from a writer whose
    /// earlier records we read (so its claim was known), or from a term that
    /// began after ours, which yields to us, or fences us (`on_other`) if
    /// its writer says it began earlier. A graceful handover, whose
    /// disclaimer is the newest record, so leads one produce and fetch after
    /// the assignment.
    fn promotion_at(&self) -> Option<BootTime> {
        let tenure = self.tenure?;
        if tenure.role == Phase::Candidate || tenure.role == Phase::Fenced {
            let (fresh, start) = (tenure.fresh?, tenure.start?);
            if self.peers.newest_token().is_some_and(|t| fresh.offset <= t) {
                // Our token must be newer than any we have read (a fence by
                // a newer token is resumed from a later record), or tokens
                // would not grow across the group. Found by the invariant test.
                return None;
            }
            let at = self.peers.held_until(start).unwrap_or(tenure.since);
            return (at < fresh.sent + self.settings.heartbeat_deadline).then_some(at);
        }
        None
    }

    fn try_promote(&mut self, now: BootTime) {
        if self.promotion_at().is_none_or(|at| now < at) {
            return;
        }
        let Some(tenure) = self.tenure.as_mut() else { return };
        let Some(fresh) = tenure.fresh else { return };
        if now.since(fresh.sent) >= self.settings.heartbeat_deadline {
            return;
        }
        let was = tenure.role;
        let took = now.since(tenure.role_since);
        tenure.role = Phase::Leader { token: fresh.offset };
        tenure.role_since = now;
        // Announce the token at once (for `neli-run status`).
        tenure.next_heartbeat = now;
        self.ever_led = true;
        say::promoted(was, fresh.offset, took);
        self.note_role();
        if let Plan::Serve | Plan::Start(_) = self.plan {
            self.plan = Plan::Start(now);
        }
    }

    /// When the command may start: it is due, we lead, it is gone, and no
    /// claim or earlier term holds us back; None if that cannot come
    /// before our newest heartbeat runs out. Every start goes through here:
    /// a restart too waits for a claim read while we led.
    fn start_at(&self) -> Option<BootTime> {
        let Plan::Start(ready) = self.plan else { return None };
        let tenure = self.tenure?;
        let (Phase::Leader { .. }, Some(fresh), Some(start)) = (tenure.role, tenure.fresh, tenure.start) else {
            return None;
        };
        if self.child != Child::Idle {
            return None;
        }
        let due = match &self.settings.schedule {
            None => ready,
            // Not before our last run's ending is on the partition.
            // (A record sent as it ended, in the same step, is later.)
            Some(_) if self.run_ended.is_some_and(|ended| fresh.sent <= ended) => return None,
            Some(_) => {
                let next = self.next_run(ready, self.now)?;
                if next.missed {
                    ready
                } else {
                    self.anchor.boot_at(next.due)
                }
            }
        };
        let at = self.peers.held_until(start).map_or(due, |quiet| quiet.max(due));
        (at < fresh.sent + self.settings.heartbeat_deadline).then_some(at)
    }

    /// Starts the command once `start_at` has come, under the lease our
    /// newest heartbeat gives (and not at or past its end); or, once per
    /// wave, exits if a run of our wave already ended.
    fn start_if_due(&mut self, now: BootTime) {
        let Some(Tenure { role: Phase::Leader { token }, fresh: Some(fresh), .. }) = self.tenure else { return };
        let lease = fresh.sent + self.settings.heartbeat_deadline;
        if self.start_at().is_some_and(|at| now >= at) && now < lease {
            let job = match (&self.settings.schedule, self.plan) {
                (Some(_), Plan::Start(ready)) => {
                    let Some(next) = self.next_run(ready, now) else { return };
                    Some(self.scheduled(next, token, now))
                }
                _ => match self.turn(token, now) {
                    Turn::Run(job) => job,
                    Turn::Covered(code) => {
                        say::covered(self.job.as_ref(), code);
                        return self.exit(code);
                    }
                },
            };
            self.job = job.clone();
            self.plan = Plan::Serve;
            self.child = Child::Running;
            self.child_token = token;
            self.run_until = self.settings.max_runtime.map(|d| now + d);
            if self.settings.schedule.is_some() {
                // Name the run on the topic at once: a crash before a record
                // names it leaves the next leader no trace of it (it runs
                // it again, as attempt 1).
                if let Some(tenure) = self.tenure.as_mut() {
                    tenure.next_heartbeat = now;
                }
            }
            self.out.push(Action::Spawn { token, lease, job });
        }
    }

    /// The schedule's next run for us, ready since `ready`, at `now`, after
    /// the newest run we know of.
    fn next_run(&self, ready: BootTime, now: BootTime) -> Option<schedule::Next> {
        let wall = |t| self.anchor.wall_ms_at(t);
        self.settings.schedule.as_ref()?.next(self.job.as_ref(), wall(ready), wall(now))
    }

    /// The run of a schedule's due time that we start now under `token`
    /// (its wave is this attempt alone: the due time is what attempts
    /// share).
    fn scheduled(&self, next: schedule::Next, token: i64, now: BootTime) -> Job {
        let wave_ms = self.anchor.wall_ms_at(now);
        say::due(next.due, wave_ms);
        let attempt = self.job.as_ref().filter(|_| next.retry).map_or(1, |last| last.attempt + 1);
        Job { wave_ms, wave_token: token, attempt, token, code: None, by: None, due: Some(next.due), ended: None }
    }

    /// When the schedule's next run is due, as we plan it now (for our
    /// records, `neli-run status` and metrics).
    pub fn next_due(&self) -> Option<u64> {
        let schedule = self.settings.schedule.as_ref()?;
        match (self.plan, self.child, &self.job) {
            (Plan::Start(ready), Child::Idle, _) => self.next_run(ready, self.now).map(|n| n.due),
            (_, Child::Running, Some(Job { due: Some(due), .. })) => schedule.calendar.after(*due),
            _ => None,
        }
    }

    /// Whether our turn to run the command has come, under once per wave:
    /// everything written before our term's first record has been read by
    /// now (see `promotion_at`), so the newest attempt we know of is the
    /// newest of the wave, or was carried forward by a later record.
    fn turn(&self, token: i64, now: BootTime) -> Turn {
        let Some(waves) = self.settings.waves else { return Turn::Run(None) };
        let wave_ms = self.anchor.wall_ms_at(now);
        let fresh = Job { wave_ms, wave_token: token, attempt: 1, token, code: None, by: None, due: None, ended: None };
        // Started before the wave began (by the log), or within the window
        // after (by the clocks; a wave that seems to begin in our future
        // comes from a clock ahead of ours and cannot be placed).
        let ours = |j: &&Job| {
            let wave = self.anchor.boot_at(j.wave_ms);
            self.born.is_some_and(|end| end <= j.wave_token) || (wave <= now && self.started < wave + waves.within)
        };
        say::wave_from_the_future(self.job.as_ref(), wave_ms);
        let Some(last) = self.job.as_ref().filter(ours) else {
            return Turn::Run(Some(fresh));
        };
        match last.code {
            Some(code) if code == 0 || !waves.retry_failed => Turn::Covered(code),
            _ => Turn::Run(Some(Job {
                wave_ms: last.wave_ms,
                wave_token: last.wave_token,
                attempt: last.attempt + 1,
                ..fresh
            })),
        }
    }

    /// Takes in an attempt another member's record names, if it is newer
    /// than what we know.
    fn learn(&mut self, job: Job) {
        let newer = |known: &Job| supersedes((job.token, job.due, job.code), (known.token, known.due, known.code));
        if self.job.as_ref().is_none_or(newer) {
            self.job = Some(job);
        }
    }

    /// Another member's record. A claim holds us back until its writer's
    /// command must be dead: its deadline after it was written, with the
    /// margin. Its writer's later record without a claim withdraws it. Of
    /// two leaders the newer leadership (larger token) is the coordinator's
    /// latest word: the older one fences. A leader also fences when a term
    /// that started before its own still contends: the group gave partition
    /// 0 to both, and the earlier one is the one both sides let lead.
    fn on_other(&mut self, other: Other, now: BootTime) {
        let runs = self.settings.waves.is_some() || self.settings.schedule.is_some();
        if let (true, Some(job)) = (runs, other.job.as_ref()) {
            // A token is the offset of an earlier record (as in `peers`).
            if job.token < other.offset {
                self.learn(job.clone());
            }
        }
        let until = (now - other.age) + other.deadline + self.settings.claim_margin;
        let leading = matches!(self.role(), Role::Leader { .. });
        let (before, after) = self.peers.read(&other, until, now);
        say::held_back(&other, until, now, leading, before.claim.is_some());
        say::goes_first(&other.writer, before.term, after.term, self.tenure.and_then(|t| t.start), leading);
        let Some(tenure) = self.tenure else { return };
        let Phase::Leader { token: mine } = tenure.role else { return };
        match other.stance {
            Stance::Leading { token } if token > mine => {
                warn!(mine, theirs = token, "another member claims partition 0 with a newer token; fencing");
            }
            Stance::Contending if after.term.is_some_and(|t| t.goes_first(tenure.start, now)) => {
                warn!(writer = %other.writer, "another member has contended for partition 0 since before our leadership began; fencing");
            }
            _ => return,
        }
        self.fence(now);
    }

    /// Stops leading at once: the command is killed, not asked to stop.
    fn fence(&mut self, now: BootTime) {
        if let Some(tenure) = self.tenure.as_mut() {
            tenure.role = Phase::Fenced;
            tenure.role_since = now;
        }
        self.note_role();
        if self.child != Child::Idle {
            self.kill();
        }
    }

    fn on_child_exited(&mut self, status: ChildStatus, now: BootTime) {
        let was = self.child;
        let overran = std::mem::take(&mut self.overran);
        self.child = Child::Idle;
        if std::mem::take(&mut self.revoke_waits) {
            info!("child stopped; releasing partition 0 to the group");
            self.release();
        }
        match self.plan {
            Plan::Exit(code) => return self.exit(code.unwrap_or(status.code())),
            Plan::StandAside => return self.stand_aside(),
            // Fenced and since resumed: it starts again once nothing holds us back.
            Plan::Start(_) | Plan::Done => return,
            Plan::Serve => {}
        }
        // We stopped it (a fence, a revoke): no restart policy applies. (A
        // running command means we lead: every way out of leading stops it.)
        // Stopped for overrunning, its run is over as if it had ended itself.
        if was != Child::Running && !overran {
            return;
        }
        if self.settings.schedule.is_some() {
            return self.scheduled_run_ended(status, now);
        }
        let again = match self.settings.restart {
            Restart::Never => false,
            Restart::OnFailure => !status.success(),
            Restart::Always => true,
        };
        if again {
            info!(%status, delay = ?self.settings.restart_delay, "restarting the child (--restart)");
            self.plan = Plan::Start(now + self.settings.restart_delay);
        } else {
            info!(%status, "the child's run is over; leaving the group");
            // The attempt ended on its own: our last record says so, and the
            // rest of its wave exits on reading it.
            let token = self.child_token;
            if let Some(job) = self.job.as_mut().filter(|j| j.token == token) {
                job.code = Some(status.code());
            }
            self.exit(status.code());
        }
    }

    /// A scheduled run ended on its own: we say so at once, and lead on to
    /// the next due time.
    fn scheduled_run_ended(&mut self, status: ChildStatus, now: BootTime) {
        let token = self.child_token;
        if let Some(job) = self.job.as_mut().filter(|j| j.token == token) {
            job.code = Some(status.code());
            job.ended = Some(self.anchor.wall_ms_at(now));
        }
        self.run_ended = Some(now);
        self.plan = Plan::Start(now);
        if let Some(tenure) = self.tenure.as_mut() {
            tenure.next_heartbeat = now;
        }
        let next = self.next_due();
        let next_due_in = next.map(|ms| Duration::from_millis(ms.saturating_sub(self.anchor.wall_ms_at(now))));
        info!(%status, ?next_due_in, "the scheduled run ended");
    }

    fn on_yield(&mut self, now: BootTime) {
        let Some(tenure) = self.tenure else { return };
        if let Plan::StandAside | Plan::Exit(_) | Plan::Done = self.plan {
            return;
        }
        info!(role = ?tenure.role, "yielding: stopping the child, then standing aside for another member");
        self.plan = Plan::StandAside;
        match self.child {
            Child::Idle => self.stand_aside(),
            Child::Running => self.stop(now),
            Child::Stopping { .. } => {}
        }
    }

    fn stand_aside(&mut self) {
        self.plan = Plan::Serve;
        self.tenure = None;
        self.note_role();
        self.disclaim();
        self.out.push(Action::StandAside);
    }

    /// Lets the revoke go: our command is gone.
    fn release(&mut self) {
        self.disclaim();
        self.out.push(Action::ReleaseRevoke);
    }

    /// Says, before giving partition 0 up, that our command is gone and
    /// that we contend no more. Not while it may still live (giving the
    /// partition back after a long freeze kills it in the same step): our
    /// last claim then runs out by itself, and the disclaimer follows the
    /// revoke once the command is gone. Found by the invariant test.
    fn disclaim(&mut self) {
        if self.child == Child::Idle && std::mem::take(&mut self.spoke) {
            let record =
                Record { term: self.term, start: None, stance: Stance::Released, job: self.job.clone(), next: None };
            self.out.push(Action::Disclaim(record));
        }
    }

    /// Queues our next heartbeat. A term ends once we have gone a deadline
    /// without reading one of its records back: other members may have
    /// counted it out by then, so what follows must not keep its place.
    fn send_heartbeat(&mut self, now: BootTime) {
        let next = self.next_due();
        let Some(tenure) = self.tenure.as_mut() else { return };
        let confirmed = tenure.fresh.map_or(tenure.term_since, |f| f.sent.max(tenure.term_since));
        if now.since(confirmed) >= self.settings.heartbeat_deadline {
            self.term += 1;
            tenure.term_since = now;
            tenure.start = None;
        }
        tenure.next_heartbeat = now + self.settings.heartbeat_interval;
        let stance = match (tenure.role, self.child) {
            (Phase::Leader { token }, _) => Stance::Leading { token },
            (_, Child::Running | Child::Stopping { .. }) => Stance::Leading { token: self.child_token },
            _ => Stance::Contending,
        };
        let record = Record { term: self.term, start: tenure.start, stance, job: self.job.clone(), next };
        self.spoke = true;
        self.out.push(Action::SendHeartbeat(record));
    }

    fn on_shutdown(&mut self, code: Option<u8>, now: BootTime) {
        if let Plan::Exit(_) = self.plan {
            if self.child != Child::Idle {
                warn!("asked again: killing the child now");
                self.kill();
            }
            return;
        }
        self.plan = Plan::Exit(code);
        match self.child {
            Child::Idle => self.exit(code.unwrap_or(0)),
            Child::Running => self.stop(now),
            Child::Stopping { .. } => {}
        }
    }

    /// Deadlines that have passed by `now`.
    fn on_time(&mut self, now: BootTime) {
        if self.plan == Plan::Done {
            return;
        }
        let deadline = self.settings.heartbeat_deadline;
        self.try_promote(now);
        self.start_if_due(now);
        // Heartbeats go on while a shutdown stops the child: we still own
        // the partition, and a cut network must still fence.
        if self.tenure.is_some_and(|t| now >= t.next_heartbeat) {
            self.send_heartbeat(now);
        }
        if let Some(Tenure { role: Phase::Leader { .. }, fresh: Some(fresh), .. }) = self.tenure {
            if now >= fresh.sent + deadline {
                warn!(age = ?now.since(fresh.sent), deadline = ?deadline, "fenced: own heartbeats stopped arriving; killing the child");
                self.fence(now);
            }
        }
        if let Some(tenure) = self.tenure.filter(|t| !matches!(t.role, Phase::Leader { .. })) {
            if now >= self.give_back_at(&tenure) {
                warn!(role = ?tenure.role, window = ?self.settings.resume_window, "no own heartbeat read back for the whole resume window; giving partition 0 back to the group");
                self.tenure = None;
                self.note_role();
                self.disclaim();
                self.out.push(Action::Rejoin);
            }
        }
        if self.child == Child::Running && self.run_until.is_some_and(|t| now >= t) {
            warn!(max_runtime = ?self.settings.max_runtime.unwrap_or_default(), "the run exceeded --max-runtime; stopping it");
            self.overran = true;
            self.stop(now);
        }
        if let Child::Stopping { kill_at: Some(t) } = self.child {
            if now >= t {
                warn!(grace = ?self.settings.grace, "child still running after the grace period; sending SIGKILL");
                self.kill();
            }
        }
        if self.acquire_deadline().is_some_and(|t| now >= t) && self.child == Child::Idle {
            warn!(timeout = ?self.settings.acquire_timeout.unwrap_or_default(), "not leader within --acquire-timeout; giving up");
            self.exit(exit::Kind::AcquireTimeout.code());
        }
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
        self.plan = Plan::Done;
        self.tenure = None;
        self.note_role();
        self.disclaim();
        self.out.push(Action::Exit(code));
    }
}

/// What the core tells the operator about its decisions, apart from the
/// decisions: these functions only log (cargo-mutants leaves them alone,
/// see .cargo/mutants.toml; no test pins a log line's condition).
mod say {
    use super::*;
    use peers::Term;

    /// Our term's first record is on the partition: who contended before it.
    pub(super) fn earlier_contenders(peers: &Peers, offset: i64, now: BootTime) {
        for (writer, term) in peers.terms() {
            if term.goes_first(Some(offset), now) {
                info!(%writer, "another member has contended for partition 0 since before us; it goes first");
            }
        }
    }

    /// Who ran `job`, for a log line (Debug-formatted there: the writer
    /// chose these strings).
    fn runner(job: &Job) -> (&str, &str) {
        job.by.as_ref().map_or(("this member", ""), |r| (r.name.as_str(), r.host.as_str()))
    }

    /// A wave's start lies in our future (`now`, wall ms): its host's
    /// clock is ahead.
    pub(super) fn wave_from_the_future(job: Option<&Job>, now: u64) {
        let Some(job) = job.filter(|j| j.wave_ms > now) else { return };
        let (name, host) = runner(job);
        warn!(name = ?name, host = ?host, ahead = ?Duration::from_millis(job.wave_ms - now), "a wave's start lies in our future: that host's clock is ahead of ours, so only the log says who belongs to it (fix the clocks: NTP)");
    }

    /// A scheduled run starts (`now`, wall ms): said with how late it is
    /// (a missed one).
    pub(super) fn due(due: u64, now: u64) {
        let late = Duration::from_millis(now.saturating_sub(due));
        info!(due_ms = due, ?late, "starting the run of a due time");
    }

    /// A run of our wave already ended: we exit with its status.
    pub(super) fn covered(job: Option<&Job>, code: u8) {
        if let Some(job) = job {
            let (name, host) = runner(job);
            info!(name = ?name, host = ?host, token = job.token, attempt = job.attempt, code, "this wave's run already ended; not running the command again (--once-within)");
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
    pub(super) fn held_back(other: &Other, until: BootTime, now: BootTime, leading: bool, known: bool) {
        if let (Some(token), true, false, false) = (other.stance.token(), until > now, leading, known) {
            info!(writer = %other.writer, token, age = ?other.age, holds_until = ?until.since(now), "another member claims partition 0; waiting until its command must be gone");
        }
    }

    /// A term (`before` and `now` its entry before and after its newest
    /// record) has just become one that contends from before ours.
    /// (Not said while we lead: then it fences, and says so.)
    pub(super) fn goes_first(writer: &str, before: Option<Term>, now: Option<Term>, ours: Option<i64>, leading: bool) {
        let Some(now) = now else { return };
        let was = before.filter(|b| b.id == now.id && b.contending).map(|b| b.start);
        if now.contending && ours.is_some_and(|s| now.start < s && was.is_none_or(|w| w >= s)) && !leading {
            info!(%writer, "another member has contended for partition 0 since before us; it goes first");
        }
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod invariants;

#[cfg(test)]
mod tests;
