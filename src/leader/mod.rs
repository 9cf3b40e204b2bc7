//! The leadership state machine: the pure core of neli-run.
//!
//! Events go in through [`Leader::step`] with the time they happened (and
//! the wall clock as an [`Anchor`]: at [`Leader::new`], and anew through
//! [`Leader::wall_clock`] before each step); actions come
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
//! carries the newest [`Attempt`] its writer knows, so that a member that comes
//! to lead after a run of its wave ended exits with that run's status
//! instead of running the command again (see [`Waves`]).
//!
//! A schedule of its own (`--every`, `--cron`): the leader stays leader and
//! runs the command at each due time; the same [`Attempt`] carried in every
//! record names the newest due time run and how it ended, so that the next
//! leader neither repeats a run that ended nor forgets one that was due
//! (see [`Schedule`]).
//!
//! Files: `io.rs` is the contract with the shell and `config` (settings,
//! inputs, actions, records); this one the leadership policy; `peers.rs`
//! the other members; `attempts.rs` and `schedule.rs` what once per wave
//! and a schedule add; `say.rs` what is only logged.

use std::time::Duration;

use tracing::{info, warn};

use crate::clock::{Anchor, BootTime};
use crate::exit::{self, ChildStatus};
use attempts::Turn;
pub use attempts::{supersedes, Attempt, Runner, Waves};
pub use io::{
    Action, Asker, Candidacy, Input, Other, Partition, Pause, PauseNote, Record, Restart, Settings, Signal, Stance,
    SEATS,
};
use peers::Peers;
pub use schedule::{Calendar, Missed, Schedule};
use standbys::Standbys;

mod attempts;
mod io;
mod peers;
mod say;
mod schedule;
mod standbys;

/// Where we stand in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Standby,
    Candidate,
    Leader { token: i64 },
    Fenced,
}

/// A tenure's phase: what `Standing` is while we own partition 0.
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
    /// A yield: stop the command, then stand aside for another member;
    /// why ("yielded", "unhealthy") is what --on-unlead is told.
    StandAside(&'static str),
    /// Stop the command, then exit with this code, or with its status.
    Exit(Option<u8>),
    /// Exit was asked of the shell: only a revoke from closing is answered.
    Done,
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
    /// Since when the current phase holds (for "took X" in logs).
    phase_since: BootTime,
    next_heartbeat: BootTime,
    /// When the current term began (see [`Record::term`]).
    term_since: BootTime,
    /// The offset of the term's first own record read back.
    start: Option<i64>,
    /// The newest own heartbeat of this term read back.
    fresh: Option<Fresh>,
    phase: Phase,
}

/// The state machine. One per neli-run process.
#[derive(Debug)]
pub struct Leader {
    settings: Settings,
    /// The seat's partition.
    partition: Partition,
    started: BootTime,
    /// Our start on both clocks, or the reading after the wall clock's
    /// latest step: every conversion between boot time and the wall clock
    /// of the records goes through it.
    anchor: Anchor,
    tenure: Option<Tenure>,
    child: Child,
    plan: Plan,
    /// A revoke waits in the rebalance callback until the command is gone.
    revoke_waits: bool,
    ever_led: bool,
    /// Our last tenure gave partition 0 back without reading one of its
    /// heartbeats back, and none has come back since: the next such tenure
    /// stands aside instead of rejoining (see `give_back`).
    gave_back: bool,
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
    attempt: Option<Attempt>,
    /// The group's newest pause or resume we know of (see `on_pause`).
    pause: Option<Pause>,
    /// Who else may lead, and the newest hand-over (see `standbys`).
    standbys: Standbys,
    /// Whom our next disclaimer hands partition 0 over to.
    hand_to: Option<String>,
    /// When our next candidacy record is due: set while we are in the group
    /// without partition 0 (from the first Standby), None while we stand
    /// aside, out of it; out of it for our health check, we say so anyway
    /// (see `announce_due`).
    announce_at: Option<BootTime>,
    /// We have written a candidacy record: we withdraw it when we exit.
    announced: bool,
    /// The time of the latest step: a deadline at or before it has been
    /// handled, and returning it from `next_deadline` would spin the shell.
    now: BootTime,
    out: Vec<Action>,
    /// Every standing taken since the shell last asked, in order: a fence and a
    /// resume within one step are two changes, not none.
    standings: Vec<Standing>,
    last_standing: Standing,
    /// Why we last became a standby (see `why_standby`).
    stood_down: &'static str,
    /// A fence killed the command whose exit is due (see `why_child_ends`).
    fenced_child: bool,
    /// The health check's word (`--health-cmd`): no command starts while
    /// it is false, and a member that owns partition 0 stands aside.
    healthy: bool,
    /// Records fetched after our newest own heartbeat are still to come
    /// (`Input::CaughtUp` ends it): a candidate does not lead on that
    /// heartbeat until it has heard them, so that it knows of a member it
    /// should let lead before it starts the command. A candidacy written
    /// just after our record once arrived in the same fetch, and the
    /// command started 0.1 ms before the member of higher priority was
    /// known (audit D11).
    catching_up: bool,
}

impl Leader {
    /// A standby that has just started at `now` (read on both clocks once,
    /// by the shell: the core reads none).
    pub fn new(settings: Settings, now: Anchor) -> Leader {
        let gated = settings.health_checked;
        Leader {
            settings,
            partition: SEATS[0],
            started: now.boot,
            anchor: now,
            tenure: None,
            child: Child::Idle,
            plan: Plan::Serve,
            revoke_waits: false,
            ever_led: false,
            gave_back: false,
            term: 0,
            child_token: 0,
            spoke: false,
            run_until: None,
            born: None,
            overran: false,
            run_ended: None,
            peers: Peers::default(),
            attempt: None,
            pause: None,
            standbys: Standbys::default(),
            hand_to: None,
            announce_at: None,
            announced: false,
            now: now.boot,
            out: Vec::new(),
            standings: Vec::new(),
            last_standing: Standing::Standby,
            stood_down: "started",
            fenced_child: false,
            healthy: !gated,
            catching_up: false,
        }
    }

    /// Notes the end of partition 0 as it was when we started (once per wave:
    /// members started before a wave began belong to it, whatever the
    /// clocks of its hosts say).
    pub fn born_at(&mut self, end: i64) {
        self.born = Some(end);
    }

    /// The standings taken since the last call, in order (for metrics and
    /// systemd's status line).
    pub fn standings_taken(&mut self) -> Vec<Standing> {
        std::mem::take(&mut self.standings)
    }

    /// Notes the current standing if it changed.
    fn note_standing(&mut self) {
        let standing = self.standing();
        if standing != self.last_standing {
            self.last_standing = standing;
            self.standings.push(standing);
        }
    }

    /// Why we last became a standby: "revoked" (partition 0 taken away),
    /// "lost" (taken without a rebalance's warning), "yielded", "unhealthy"
    /// (its health check failed), "gave back"
    /// (a tenure that could not confirm), "exiting" or "started". For
    /// --on-unlead, which says why a leader stopped leading.
    pub fn why_standby(&self) -> &'static str {
        self.stood_down
    }

    /// Why the command ends if it ends now: "exited" (by itself, as far as
    /// we know), "fenced" (killed by a fence), or "stopped" (we stopped or
    /// killed it: a revoke, a yield, a shutdown, --max-runtime). For
    /// --on-exit.
    pub fn why_child_ends(&self) -> &'static str {
        match self.child {
            _ if self.fenced_child => "fenced",
            Child::Stopping { .. } => "stopped",
            _ => "exited",
        }
    }

    /// Our standing now (for logs, status and tests).
    pub fn standing(&self) -> Standing {
        match self.tenure.map(|t| t.phase) {
            None => Standing::Standby,
            Some(Phase::Candidate) => Standing::Candidate,
            Some(Phase::Leader { token }) => Standing::Leader { token },
            Some(Phase::Fenced) => Standing::Fenced,
        }
    }

    /// The newest run we know of, ours or read (for metrics).
    pub fn last_run(&self) -> Option<&Attempt> {
        self.attempt.as_ref()
    }

    /// Whether our command may still run: until its exit is reported, a
    /// run has not ended (for metrics).
    pub fn child_alive(&self) -> bool {
        self.child != Child::Idle
    }

    /// The pause in force, as far as we know (for metrics): current while
    /// we own partition 0, which is read only then.
    pub fn paused(&self) -> Option<&Pause> {
        self.pause.as_ref().filter(|p| p.paused)
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
            if let Input::Revoked { partition, .. } = input {
                return vec![Action::ReleaseRevoke(partition)];
            }
            return Vec::new();
        }
        self.now = self.now.max(now);
        // Deadlines that passed before this event come first: a child that
        // died after its lease ran out was fenced, not exiting by itself.
        self.on_time(now);
        match input {
            Input::Assigned { partition } if partition == self.partition => self.on_assigned(now),
            Input::Revoked { partition, lost } if partition == self.partition => self.on_revoked(lost, now),
            Input::OwnHeartbeat { partition, offset, sent, more } if partition == self.partition => {
                self.catching_up = more;
                self.on_heartbeat(offset, sent, now)
            }
            Input::CaughtUp { partition } if partition == self.partition => self.catching_up = false,
            Input::OtherHeartbeat(partition, other) if partition == self.partition => self.on_other(other, now),
            Input::ChildExited(partition, status) if partition == self.partition => self.on_child_exited(status, now),
            Input::Assigned { .. }
            | Input::Revoked { .. }
            | Input::OwnHeartbeat { .. }
            | Input::CaughtUp { .. }
            | Input::OtherHeartbeat(..)
            | Input::ChildExited(..) => {}
            Input::Shutdown => self.on_shutdown(None, now),
            Input::Fatal(code) => self.on_shutdown(Some(code), now),
            Input::Forward(sig) => {
                if self.child != Child::Idle {
                    self.out.push(Action::SignalGroup(self.partition, sig));
                }
            }
            Input::Yield { to } => self.on_yield("yielded", to, now),
            Input::Pause(pause) => self.on_pause(pause, now),
            Input::Health(healthy) => self.on_health(healthy, now),
            Input::Standby => {
                if self.tenure.is_none() && self.announce_at.is_none() && self.healthy {
                    self.announce_at = Some(now);
                }
            }
            Input::Candidacy(candidacy) => self.on_candidacy(candidacy, now),
            Input::Tick => {}
        }
        self.on_time(now);
        self.note_standing();
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
        consider(self.announce_due());
        if let Some(t) = self.tenure {
            consider(Some(t.next_heartbeat));
            match t.phase {
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
            (false, Plan::Serve | Plan::Start(_) | Plan::StandAside(_), Some(t)) => Some(self.started + t),
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
            phase_since: now,
            next_heartbeat: now,
            term_since: now,
            start: None,
            fresh: None,
            phase: Phase::Candidate,
        });
        self.note_standing();
        if !self.healthy {
            self.on_yield("unhealthy", None, now);
        }
    }

    fn on_revoked(&mut self, lost: bool, now: BootTime) {
        if let Some(tenure) = self.tenure.take() {
            info!(role = ?tenure.phase, held = ?now.since(tenure.since), lost, "revoked: partition 0 taken away");
            self.stood_down = if lost { "lost" } else { "revoked" };
        }
        self.note_standing();
        // Whatever our standing was, the partition goes only once the child has.
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
        self.gave_back = false;
        match tenure.phase {
            Phase::Candidate | Phase::Fenced => {
                say::waiting(&self.peers, tenure.start, offset, now);
                self.try_promote(now)
            }
            // While the child stops (a shutdown or a yield) too: we still
            // own the partition and heartbeat, so the lease may run as long
            // as our claims do, and `--grace` is not cut short by it.
            Phase::Leader { .. } => {
                if self.child != Child::Idle {
                    self.out.push(Action::Lease(self.partition, sent + deadline));
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
    /// its writer says it began earlier. So after a graceful handover, whose
    /// disclaimer is the newest record, the next owner leads one produce and
    /// fetch after its assignment.
    ///
    /// A candidate also waits until it has heard the records fetched with
    /// its heartbeat (`catching_up`): they may name a member to let lead.
    fn promotion_at(&self) -> Option<BootTime> {
        let tenure = self.tenure?;
        if tenure.phase == Phase::Candidate && self.catching_up {
            return None;
        }
        if tenure.phase == Phase::Candidate || tenure.phase == Phase::Fenced {
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
        // A candidate that has not started the command yet may let another
        // member lead instead: one a hand-over names, or of higher priority.
        if tenure.phase == Phase::Candidate && self.child == Child::Idle {
            if let Some(to) = self.standbys.defer_to(&self.settings.name, self.settings.priority, now) {
                say::defers(&to);
                self.standbys.deferring(&to);
                self.hand_to = Some(to);
                return self.stand_aside("handed over");
            }
        }
        let Some(tenure) = self.tenure.as_mut() else { return };
        let was = tenure.phase;
        let took = now.since(tenure.phase_since);
        tenure.phase = Phase::Leader { token: fresh.offset };
        tenure.phase_since = now;
        // Announce the token at once (for `neli-run status`).
        tenure.next_heartbeat = now;
        self.ever_led = true;
        say::promoted(was, fresh.offset, took);
        self.note_standing();
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
        if self.paused().is_some() || !self.healthy {
            return None;
        }
        let tenure = self.tenure?;
        let (Phase::Leader { .. }, Some(fresh), Some(start)) = (tenure.phase, tenure.fresh, tenure.start) else {
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
        let Some(Tenure { phase: Phase::Leader { token }, fresh: Some(fresh), .. }) = self.tenure else { return };
        let lease = fresh.sent + self.settings.heartbeat_deadline;
        if self.start_at().is_some_and(|at| now >= at) && now < lease {
            let attempt = match (&self.settings.schedule, self.plan) {
                (Some(_), Plan::Start(ready)) => {
                    let Some(next) = self.next_run(ready, now) else { return };
                    Some(self.scheduled(next, token, now))
                }
                _ => match self.turn(token, now) {
                    Turn::Run(attempt) => attempt,
                    Turn::Covered(code) => {
                        say::covered(self.attempt.as_ref(), code);
                        return self.exit(code);
                    }
                },
            };
            self.attempt = attempt.clone();
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
            self.out.push(Action::Spawn { partition: self.partition, token, lease, attempt });
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
        // A pause it names is an earlier record (as a token is): a later
        // offset would outrank every real request to come.
        if let Some(pause) = other.pause.clone().filter(|p| p.offset < other.offset) {
            self.on_pause(pause, now);
        }
        let runs = self.settings.waves.is_some() || self.settings.schedule.is_some();
        if let (true, Some(attempt)) = (runs, other.attempt.as_ref()) {
            // A token is the offset of an earlier record (as in `peers`).
            if attempt.token < other.offset {
                self.learn(attempt.clone());
            }
        }
        let until = (now - other.age) + other.deadline + self.settings.claim_margin;
        self.standbys.other(&other, self.handover_window(), now);
        let leading = matches!(self.standing(), Standing::Leader { .. });
        let (before, after) = self.peers.read(&other, until, now);
        say::held_back(&other, until, now, leading, before.claim.is_some());
        say::goes_first(&other.writer, before.term, after.term, self.tenure.and_then(|t| t.start), leading);
        let Some(tenure) = self.tenure else { return };
        let Phase::Leader { token: mine } = tenure.phase else { return };
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
            tenure.phase = Phase::Fenced;
            tenure.phase_since = now;
        }
        self.note_standing();
        if self.child != Child::Idle {
            self.fenced_child = true;
            self.kill();
        }
    }

    fn on_child_exited(&mut self, status: ChildStatus, now: BootTime) {
        if let (Some(tenure), Some(_)) = (self.tenure.as_mut(), self.pause.as_ref().filter(|p| p.paused)) {
            // Say at once that it is gone: `pause --stop` waits for that.
            tenure.next_heartbeat = now;
        }
        let was = self.child;
        let overran = std::mem::take(&mut self.overran);
        self.child = Child::Idle;
        self.fenced_child = false;
        if std::mem::take(&mut self.revoke_waits) {
            info!("child stopped; releasing partition 0 to the group");
            self.release();
        }
        match self.plan {
            Plan::Exit(code) => return self.exit(code.unwrap_or(status.code())),
            Plan::StandAside(why) => return self.stand_aside(why),
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
        if self.settings.restart.again(status) {
            info!(%status, delay = ?self.settings.restart_delay, "restarting the child (--restart)");
            self.plan = Plan::Start(now + self.settings.restart_delay);
        } else {
            info!(%status, "the child's run is over; leaving the group");
            // The attempt ended on its own: our last record says so, and the
            // rest of its wave exits on reading it.
            let token = self.child_token;
            if let Some(attempt) = self.attempt.as_mut().filter(|j| j.token == token) {
                attempt.code = Some(status.code());
            }
            self.exit(status.code());
        }
    }

    /// When our next candidacy record is due: while we are in the group
    /// without partition 0, and mean to lead when asked (not while we stop
    /// to stand aside or exit); and while our health check keeps us out of
    /// it, at once and then every interval, so that `status` shows why we
    /// do not lead (the shell marks those records unhealthy: no owner lets
    /// us lead on them).
    fn announce_due(&self) -> Option<BootTime> {
        let serving = matches!(self.plan, Plan::Serve | Plan::Start(_));
        let due = if self.healthy { self.announce_at } else { self.announce_at.or(Some(self.now)) };
        due.filter(|_| self.tenure.is_none() && serving)
    }

    /// How long a hand-over holds: three candidacy intervals, as a
    /// candidacy does. Its target leads well within it, or has died.
    fn handover_window(&self) -> Duration {
        3 * self.settings.candidacy_interval
    }

    /// Another member's candidacy. A leader with --preempt hands over to a
    /// live one of higher priority.
    fn on_candidacy(&mut self, candidacy: Candidacy, now: BootTime) {
        let Some((name, priority)) = self.standbys.read(&candidacy, now) else { return };
        if self.settings.preempt
            && priority > self.settings.priority
            && matches!(self.standing(), Standing::Leader { .. })
            && matches!(self.plan, Plan::Serve | Plan::Start(_))
        {
            say::preempted(&name, priority, self.settings.priority);
            self.on_yield("preempted", Some(name), now);
        }
    }

    /// Hands over (`why`: "yielded" when asked, "unhealthy" when the
    /// health check failed, "preempted" for a member of higher priority;
    /// `to` the member named, if any): stops the command, then stands aside.
    fn on_yield(&mut self, why: &'static str, to: Option<String>, now: BootTime) {
        let Some(tenure) = self.tenure else { return };
        if let Plan::StandAside(_) | Plan::Exit(_) | Plan::Done = self.plan {
            return;
        }
        if to.as_deref() == Some(self.settings.name.as_str()) {
            info!("asked to hand over to this member, which owns partition 0 already: nothing to do");
            return;
        }
        say::yielding(tenure.phase, to.as_deref(), why);
        self.hand_to = to;
        self.plan = Plan::StandAside(why);
        match self.child {
            Child::Idle => self.stand_aside(why),
            Child::Running => self.stop(now),
            Child::Stopping { .. } => {}
        }
    }

    /// A pause or resume, read as the request or carried by a record: the
    /// newest by offset is the group's state. While paused no command
    /// starts (`start_at`), whoever leads; `--stop` also stops a running
    /// one, and the plan to start it again waits for the resume (a run it
    /// cut short counts as one a fence cut short). Our next
    /// record says it at once: the asker waits for that.
    fn on_pause(&mut self, pause: Pause, now: BootTime) {
        if self.pause.as_ref().is_some_and(|known| known.offset >= pause.offset) {
            return;
        }
        say::pause(&pause, self.child == Child::Running);
        let stop = pause.paused && pause.stop;
        let resumed = !pause.paused && self.paused().is_some();
        self.pause = Some(pause);
        if let (true, Plan::Start(_)) = (resumed, self.plan) {
            // A schedule's due times that passed while paused are missed,
            // as when nobody led: --missed decides.
            self.plan = Plan::Start(now);
        }
        if let Some(tenure) = self.tenure.as_mut() {
            tenure.next_heartbeat = now;
        }
        if stop && self.child == Child::Running {
            if let Plan::Serve | Plan::Start(_) = self.plan {
                self.plan = Plan::Start(now);
            }
            self.stop(now);
        }
    }

    /// The pause as our records carry it.
    fn pause_note(&self) -> Option<PauseNote> {
        let running = self.child != Child::Idle;
        self.pause.clone().map(|request| PauseNote { request, running })
    }

    /// The health check's verdict changed (the shell says only changes,
    /// after its thresholds). Unhealthy, a member that owns partition 0
    /// hands over as a yield does; a standby is kept out of the group by
    /// the shell meanwhile, and says at once that it is unhealthy (no owner
    /// may hand partition 0 to it), and `start_at` starts nothing. Healthy
    /// again, it says so once it is back in the group (Standby).
    fn on_health(&mut self, healthy: bool, now: BootTime) {
        self.healthy = healthy;
        self.announce_at = None;
        if !healthy {
            self.on_yield("unhealthy", None, now);
        }
    }

    /// Gives partition 0 back after a tenure that could not confirm. The
    /// first time, by rejoining: the fault may be the partition's (no
    /// leader), and whoever the group gives it to, us again most likely,
    /// confirms as soon as it is back. The second time in a row the fault
    /// is likely ours (cut off from partition 0's leader while the
    /// coordinator still hears us), and the sticky assignor would hand the
    /// partition straight back to us for as long as it lasts: we stand
    /// aside so that another member can lead. Not while the command may
    /// still live: standing aside leaves without the revoke barrier.
    fn give_back(&mut self) {
        let again = std::mem::replace(&mut self.gave_back, true);
        if again && self.child == Child::Idle && matches!(self.plan, Plan::Serve | Plan::Start(_)) {
            warn!("partition 0 came back to us twice and we could not use it: standing aside for another member");
            return self.stand_aside("yielded");
        }
        self.tenure = None;
        self.stood_down = "gave back";
        self.note_standing();
        self.disclaim();
        self.out.push(Action::Rejoin);
    }

    /// Leaves the group until another member leads: the one our
    /// disclaimer hands over to, if it names one.
    fn stand_aside(&mut self, why: &'static str) {
        self.plan = Plan::Serve;
        self.tenure = None;
        self.stood_down = why;
        if self.healthy {
            // Out of the group until another member leads: we say we are a
            // candidate again once back in it.
            self.announce_at = None;
        }
        self.note_standing();
        let handing = self.hand_to.is_some();
        self.disclaim();
        self.out.push(if handing { Action::HandOver } else { Action::StandAside });
    }

    /// Lets the revoke go: our command is gone.
    fn release(&mut self) {
        self.disclaim();
        self.out.push(Action::ReleaseRevoke(self.partition));
    }

    /// Says, before giving partition 0 up, that our command is gone and
    /// that we contend no more. Not while it may still live (giving the
    /// partition back after a long freeze kills it in the same step): our
    /// last claim then runs out by itself, and the disclaimer follows the
    /// revoke once the command is gone. Found by the invariant test.
    fn disclaim(&mut self) {
        let to = self.hand_to.take();
        if self.child == Child::Idle && std::mem::take(&mut self.spoke) {
            let record = Record {
                term: self.term,
                start: None,
                stance: Stance::Released,
                attempt: self.attempt.clone(),
                next: None,
                pause: self.pause_note(),
                to,
            };
            self.out.push(Action::Disclaim(self.partition, record));
        }
    }

    /// Queues our next heartbeat. A term ends once we have gone a deadline
    /// without reading one of its records back: other members may have
    /// counted it out by then, so what follows must not keep its place.
    fn send_heartbeat(&mut self, now: BootTime) {
        let (next, attempt, pause) = (self.next_due(), self.attempt.clone(), self.pause_note());
        let Some(tenure) = self.tenure.as_mut() else { return };
        let confirmed = tenure.fresh.map_or(tenure.term_since, |f| f.sent.max(tenure.term_since));
        if now.since(confirmed) >= self.settings.heartbeat_deadline {
            self.term += 1;
            tenure.term_since = now;
            tenure.start = None;
        }
        tenure.next_heartbeat = now + self.settings.heartbeat_interval;
        let stance = match (tenure.phase, self.child) {
            (Phase::Leader { token }, _) => Stance::Leading { token },
            (_, Child::Running | Child::Stopping { .. }) => Stance::Leading { token: self.child_token },
            _ => Stance::Contending,
        };
        let record = Record { term: self.term, start: tenure.start, stance, attempt, next, pause, to: None };
        self.spoke = true;
        self.out.push(Action::SendHeartbeat(self.partition, record));
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
        if self.announce_due().is_some_and(|t| now >= t) {
            self.announce_at = Some(now + self.settings.candidacy_interval);
            self.announced = true;
            self.out.push(Action::SendCandidacy { leaving: false });
        }
        // Heartbeats go on while a shutdown stops the child: we still own
        // the partition, and a cut network must still fence.
        if self.tenure.is_some_and(|t| now >= t.next_heartbeat) {
            self.send_heartbeat(now);
        }
        if let Some(Tenure { phase: Phase::Leader { .. }, fresh: Some(fresh), .. }) = self.tenure {
            if now >= fresh.sent + deadline {
                warn!(age = ?now.since(fresh.sent), deadline = ?deadline, "fenced: own heartbeats stopped arriving; killing the child");
                self.fence(now);
            }
        }
        if let Some(tenure) = self.tenure.filter(|t| !matches!(t.phase, Phase::Leader { .. })) {
            if now >= self.give_back_at(&tenure) {
                warn!(role = ?tenure.phase, window = ?self.settings.resume_window, "no own heartbeat read back for the whole resume window; giving partition 0 back to the group");
                self.give_back();
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
            self.out.push(Action::SignalGroup(self.partition, self.settings.stop_signal));
            self.child = Child::Stopping { kill_at: Some(now + self.settings.grace) };
        }
    }

    fn kill(&mut self) {
        self.out.push(Action::KillGroup(self.partition));
        self.child = Child::Stopping { kill_at: None };
    }

    fn exit(&mut self, code: u8) {
        self.plan = Plan::Done;
        self.tenure = None;
        self.stood_down = "exiting";
        self.note_standing();
        self.disclaim();
        if std::mem::take(&mut self.announced) {
            self.out.push(Action::SendCandidacy { leaving: true });
        }
        self.out.push(Action::Exit(code));
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod invariants;

#[cfg(test)]
mod tests;
