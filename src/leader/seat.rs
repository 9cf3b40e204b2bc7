//! A seat: one command on one partition, from its assignment to its
//! revoke, through every tenure (candidate, leader, fenced), its term and
//! its claims, its fence and lease, the plan after its command's exit, and
//! its attempts. Everything here is once per seat: with twelve seats there
//! are twelve of each. What is once per member (the settings, the clocks,
//! health, who else may lead, leaving the group, exiting) is in
//! `mod.rs`; a seat sees it through a [`View`] and acts on it through a
//! [`Ctx`], never by reaching into the member. When a seat leads and starts
//! its command is `promote.rs`; its pause, `pause.rs`.

use std::time::Duration;

use tracing::{info, warn};

use super::leaving::Leave;
use super::peers::Peers;
use super::standbys::Standbys;
use super::{
    say, Action, Attempt, Other, Overlap, Partition, Pause, Reason, Record, Settings, Stance, Standing, Whose,
};
use crate::clock::{Anchor, BootTime};
use crate::exit::ChildStatus;

/// A tenure's phase: what `Standing` is while we own the seat's partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Candidate,
    Leader { token: i64 },
    Fenced,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Child {
    Idle,
    Running,
    /// Stop requested; `kill_at` is when grace runs out (None once killed).
    Stopping {
        kill_at: Option<BootTime>,
    },
}

/// What this seat means to do with its command, whatever the group does:
/// the one place that says what follows the command's exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// Run the command while we lead; nothing is due.
    Serve,
    /// Start the command from this time on, once we lead with a fresh
    /// heartbeat, it is gone, and no claim or earlier term holds us back:
    /// after a promotion, a resume, or by `--restart`. (Kept through a
    /// revoke or a fence: only a promotion, which sets it anew, leads on.)
    Start(BootTime),
    /// A yield: stop the command, then stand aside for another member;
    /// why (yielded, unhealthy ...) is what --on-unlead is told.
    StandAside(Reason),
    /// Stop the command, then exit with this code, or with its status.
    Exit(Option<u8>),
    /// Exit was asked of the shell: only a revoke from closing is answered.
    Done,
}

/// Our newest own heartbeat read back.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fresh {
    /// When we produced it (our own clock).
    pub sent: BootTime,
    /// Where it landed: the fencing token if it makes us leader.
    pub offset: i64,
}

/// Our ownership of the seat's partition, from assignment to revoke.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tenure {
    pub since: BootTime,
    /// Since when the current phase holds (for "took X" in logs).
    pub phase_since: BootTime,
    pub next_heartbeat: BootTime,
    /// When the current term began (see [`Record::term`]).
    pub term_since: BootTime,
    /// The offset of the term's first own record read back.
    pub start: Option<i64>,
    /// The newest own heartbeat of this term read back.
    pub fresh: Option<Fresh>,
    pub phase: Phase,
    /// When we last sent a heartbeat.
    pub last_sent: Option<BootTime>,
}

/// What a seat sees of its member in one step: the settings, the clocks,
/// and the member-wide word on health and the pause. Read only.
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    pub settings: &'a Settings,
    /// Our start on both clocks, or the reading after the wall clock's
    /// latest step.
    pub anchor: Anchor,
    /// When this neli-run started (boot clock).
    pub started: BootTime,
    /// The time of the latest step (see `Leader::now`).
    pub latest: BootTime,
    pub healthy: bool,
}

/// What a seat may change of its member while it takes an input: the
/// choice of who else may lead, whom a disclaimer hands over to, and the
/// actions of the step.
pub(super) struct Ctx<'a> {
    pub v: View<'a>,
    pub standbys: &'a mut Standbys,
    /// Whom our next disclaimer hands the partition over to (member-wide:
    /// a yield names one member, whichever seat writes the disclaimer).
    pub hand_to: &'a mut Option<String>,
    pub out: &'a mut Vec<Action>,
}

/// One command on one partition: its core state.
#[derive(Debug)]
pub struct Seat {
    pub(super) partition: Partition,
    pub(super) tenure: Option<Tenure>,
    pub(super) child: Child,
    pub(super) plan: Plan,
    /// A revoke waits in the rebalance callback until the command is gone.
    pub(super) revoke_waits: bool,
    pub(super) ever_led: bool,
    /// Our last tenure gave the partition back without reading one of its
    /// heartbeats back, and none has come back since: the next such tenure
    /// stands aside instead of rejoining (see `give_back`).
    pub(super) gave_back: bool,
    /// Our current term; counts up with each new one.
    pub(super) term: u64,
    /// The token our child was started with: our records claim it while
    /// the child may live, leader or not.
    pub(super) child_token: i64,
    /// We have written records since we last disclaimed.
    pub(super) spoke: bool,
    /// When the running command overruns --max-runtime.
    pub(super) run_until: Option<BootTime>,
    /// The end of the partition when we started: a wave that began at or
    /// after it began after us, on the log's word rather than a clock's.
    pub(super) born: Option<i64>,
    /// We stopped the command for overrunning: its exit ends its run as if
    /// it had exited by itself (the restart policy and its wave apply).
    pub(super) overran: bool,
    /// When our latest scheduled run ended: the next one starts only once a
    /// record that says so is read back, or a crash could run it twice.
    pub(super) run_ended: Option<BootTime>,
    /// What the other members' records on this partition say (see `peers`).
    pub(super) peers: Peers,
    /// Under a crontab, the job placed on this partition: ours, or the one
    /// its records name (see `Placed`), carried in our records.
    pub(super) job: Option<String>,
    /// The newest pause or resume read on this partition (see `on_pause`).
    pub(super) pause: Option<Pause>,
    /// The newest `cron trigger` read on this partition (see `on_trigger`).
    pub(super) trigger: Option<super::Trigger>,
    /// The newest attempt of a wave we know of, ours or read (once per wave).
    pub(super) attempt: Option<Attempt>,
    /// When (wall-clock ms) we read that the newest run on record ran by
    /// another line of our job than ours: our line counts from then (see
    /// `learn`).
    pub(super) line_read: Option<u64>,
    /// A run decided, named in our records before it starts (see `Naming`).
    pub(super) naming: Option<super::promote::Naming>,
    /// Every standing taken since the shell last asked, in order: a fence
    /// and a resume within one step are two changes, not none.
    pub(super) standings: Vec<Standing>,
    pub(super) last_standing: Standing,
    /// Why we last became a standby (see `why_standby`).
    pub(super) stood_down: Reason,
    /// A fence killed the command whose exit is due (see `why_child_ends`).
    pub(super) fenced_child: bool,
    /// Why the last run ended, judged at its exit (see `Leader::why_child_ended`).
    pub(super) ended: Reason,
    /// Records fetched after our newest own heartbeat are still to come
    /// (`Input::CaughtUp` ends it): a candidate does not lead on that
    /// heartbeat until it has heard them, so that it knows of a member it
    /// should let lead before it starts the command. A candidacy written
    /// just after our record once arrived in the same fetch, and the
    /// command started 0.1 ms before the member of higher priority was
    /// known (audit D11).
    pub(super) catching_up: bool,
    /// What the seat asks of the member after this input (see [`Leave`]).
    pub(super) leaving: Option<Leave>,
    /// Failed runs in a row: how long `--restart` waits (see `backoff`).
    pub(super) backoff: super::backoff::Backoff,
}

impl Seat {
    /// A seat on `partition` that holds nothing yet; under a crontab,
    /// `job` is ours placed there.
    pub(super) fn new(partition: Partition, job: Option<&str>) -> Seat {
        Seat {
            partition,
            job: job.map(str::to_owned),
            pause: None,
            trigger: None,
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
            line_read: None,
            naming: None,
            standings: Vec::new(),
            last_standing: Standing::Standby,
            stood_down: Reason::Started,
            fenced_child: false,
            ended: Reason::Exited,
            catching_up: false,
            leaving: None,
            backoff: Default::default(),
        }
    }

    /// The standings taken since the last call, in order.
    pub(super) fn standings_taken(&mut self) -> Vec<Standing> {
        std::mem::take(&mut self.standings)
    }

    /// Notes the current standing if it changed.
    pub(super) fn note_standing(&mut self) {
        let standing = self.standing();
        if standing != self.last_standing {
            self.last_standing = standing;
            self.standings.push(standing);
        }
    }

    /// Why we last became a standby (see `Leader::why_standby`).
    pub(super) fn why_standby(&self) -> Reason {
        self.stood_down
    }

    /// Why the command ends if it ends now: it exited (by itself, as far
    /// as we know), was fenced, or we stopped it.
    fn why_child_ends(&self) -> Reason {
        match self.child {
            _ if self.fenced_child => Reason::Fenced,
            Child::Stopping { .. } => Reason::Stopped,
            _ => Reason::Exited,
        }
    }

    /// Our standing on this seat now.
    pub(super) fn standing(&self) -> Standing {
        match self.tenure.map(|t| t.phase) {
            None => Standing::Standby,
            Some(Phase::Candidate) => Standing::Candidate,
            Some(Phase::Leader { token }) => Standing::Leader { token },
            Some(Phase::Fenced) => Standing::Fenced,
        }
    }

    /// Send time of the newest own heartbeat read back, while we own the
    /// partition.
    pub(super) fn fresh(&self) -> Option<BootTime> {
        self.tenure.and_then(|t| t.fresh).map(|f| f.sent)
    }

    /// Whether the seat means to run its command (not stopping it to stand
    /// aside or exit).
    pub(super) fn serving(&self) -> bool {
        matches!(self.plan, Plan::Serve | Plan::Start(_))
    }

    /// The seat's deadlines: each one `consider`ed.
    pub(super) fn deadlines(&self, v: &View, mut consider: impl FnMut(Option<BootTime>)) {
        if let Some(t) = self.tenure {
            consider(Some(t.next_heartbeat));
            match t.phase {
                Phase::Leader { .. } => consider(t.fresh.map(|f| f.sent + v.settings.heartbeat_deadline)),
                Phase::Candidate | Phase::Fenced => consider(Some(give_back_at(v.settings, &t))),
            }
        }
        if let Child::Stopping { kill_at } = self.child {
            consider(kill_at);
        }
        if self.child == Child::Running {
            consider(self.run_until);
            consider(self.replaced_at(v));
        }
        // A moment already passed was tried then and failed (the heartbeat
        // was stale); only a new heartbeat can change that.
        consider(self.promotion_at(v).filter(|&at| at > v.latest));
        let start = self.start_at(v);
        consider(start.map(|s| s.name).filter(|&at| at > v.latest));
        consider(start.map(|s| s.spawn).filter(|&at| at > v.latest));
    }

    pub(super) fn on_assigned(&mut self, cx: &mut Ctx, now: BootTime) {
        // A seat retired while its member waits for another seat's command
        // to exit has nothing to lead for.
        if self.tenure.is_some() || self.plan == Plan::Done {
            return;
        }
        info!(after = ?now.since(cx.v.started), partition = self.partition, "candidate: assigned the partition, confirming with a heartbeat");
        self.term += 1;
        self.tenure = Some(Tenure {
            since: now,
            phase_since: now,
            next_heartbeat: now,
            term_since: now,
            start: None,
            fresh: None,
            phase: Phase::Candidate,
            last_sent: None,
        });
        self.note_standing();
        if !cx.v.healthy {
            self.on_yield(cx, Reason::Unhealthy, None, now);
        }
    }

    pub(super) fn on_revoked(&mut self, cx: &mut Ctx, lost: bool, now: BootTime) {
        if let Some(tenure) = self.tenure.take() {
            info!(standing = ?tenure.phase, held = ?now.since(tenure.since), lost, "revoked: the partition was taken away");
            self.stood_down = if lost { Reason::Lost } else { Reason::Revoked };
        }
        self.note_standing();
        // Whatever our standing was, the partition goes only once the child
        // has; with --overlap, a graceful revoke lets it go at once, while the
        // child stops.
        match self.child {
            Child::Idle => self.release(cx),
            Child::Running | Child::Stopping { .. } if !lost && cx.v.settings.overlap => {
                self.stop(cx, now);
                cx.out.push(Action::ReleaseRevoke(self.partition));
            }
            Child::Running | Child::Stopping { .. } => {
                self.revoke_waits = true;
                if lost {
                    self.kill(cx);
                } else {
                    self.stop(cx, now);
                }
            }
        }
    }

    pub(super) fn on_heartbeat(&mut self, cx: &mut Ctx, (offset, sent, more): (i64, BootTime, bool), now: BootTime) {
        self.catching_up = more;
        let deadline = cx.v.settings.heartbeat_deadline;
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
                self.try_promote(cx, now)
            }
            // While the child stops (a shutdown or a yield) too: we still
            // own the partition and heartbeat, so the lease may run as long
            // as our claims do, and `--grace` is not cut short by it.
            Phase::Leader { .. } => self.renew_lease(cx, sent + deadline),
        }
    }

    /// One of our heartbeats on the partition was written, as the broker
    /// acknowledged, while a rebalance that revoked another seat holds the
    /// reader (its barrier blocks the thread that reads our records back,
    /// and the rebalance goes on after it): a leading seat stays fresh on
    /// it, its lease ending at `until` at the latest, past which the
    /// coordinator could have expired our session without the reader being
    /// able to say so (the record counts as sent a deadline before `until`
    /// at the latest). It never promotes, resumes or places a term: only a
    /// record read back, with every record before it, does.
    pub(super) fn on_delivered(
        &mut self,
        cx: &mut Ctx,
        (offset, sent): (i64, BootTime),
        until: BootTime,
        now: BootTime,
    ) {
        let deadline = cx.v.settings.heartbeat_deadline;
        let Some(tenure) = self.tenure.as_mut().filter(|t| matches!(t.phase, Phase::Leader { .. })) else {
            return;
        };
        let counted = sent.min(until - deadline);
        let newer = counted >= tenure.term_since && tenure.fresh.is_some_and(|f| f.sent < counted);
        if !newer || now.since(sent) >= deadline {
            return;
        }
        tenure.fresh = Some(Fresh { sent: counted, offset });
        self.renew_lease(cx, counted + deadline);
    }

    /// Moves the command's lease to `until`, if it may be running: the
    /// shim kills it there unless told later.
    fn renew_lease(&self, cx: &mut Ctx, until: BootTime) {
        if self.child != Child::Idle {
            cx.out.push(Action::Lease(self.partition, until));
        }
    }

    /// Every record fetched with our heartbeat has been heard.
    pub(super) fn on_caught_up(&mut self) {
        self.catching_up = false;
    }

    /// Another member's record on this partition (the member took in what
    /// it says of the pause and of hand-overs). A claim holds us back until
    /// its writer's command must be dead: its deadline after it was
    /// written, with the margin. Its writer's later record without a claim
    /// withdraws it. Of two leaders the newer leadership (larger token) is
    /// the coordinator's latest word: the older one fences. A leader also
    /// fences when a term that started before its own still contends: the
    /// group gave the partition to both, and the earlier one is the one
    /// both sides let lead.
    pub(super) fn on_other(&mut self, cx: &mut Ctx, other: Other, now: BootTime) {
        let runs = cx.v.settings.waves.is_some() || cx.v.settings.scheduled();
        if let (true, Some(attempt)) = (runs, other.attempt.as_ref()) {
            // A token is the offset of an earlier record (as in `peers`).
            if attempt.token < other.offset {
                self.learn(cx.v.settings, attempt.clone(), cx.v.anchor.wall_ms_at(now));
            }
        }
        if let Some(placed) = &other.job {
            self.placed(cx.v.settings, placed);
        }
        let until = (now - other.age) + other.deadline + cx.v.settings.claim_margin;
        let leading = matches!(self.standing(), Standing::Leader { .. });
        let (before, after) = self.peers.read(&other, until, now);
        say::held_back(&other, until, now, leading, before.claim.is_some());
        say::goes_first(&other.writer, before.term, after.term, self.tenure.and_then(|t| t.start), leading);
        let Some(tenure) = self.tenure else { return };
        let Phase::Leader { token: mine } = tenure.phase else { return };
        match other.stance {
            Stance::Leading { token } if token > mine => {
                warn!(mine, theirs = token, "another member claims the partition with a newer token; fencing");
            }
            Stance::Contending if after.term.is_some_and(|t| t.goes_first(tenure.start, now)) => {
                warn!(writer = %other.writer, "another member has contended for the partition since before our leadership began; fencing");
            }
            _ => return,
        }
        self.fence(cx, now);
    }

    /// What a record says of the crontab job placed on this partition: of
    /// claims the first counts, of records that carry it the newest (their
    /// writers read the partition). Ours, placed here by us, stays.
    fn placed(&mut self, settings: &super::Settings, placed: &super::Placed) {
        if settings.job_on(self.partition).is_some() {
            return;
        }
        if placed.replaces(self.job.as_deref()) && self.job.as_deref() != Some(placed.job.as_str()) {
            if self.tenure.is_some() {
                warn!(job = %crate::printable::printable(&placed.job), "this partition holds a job our crontab does not have: it runs only while a member whose file has it owns the partition");
            }
            self.job = Some(placed.job.clone());
        }
    }

    /// Stops leading at once: the command is killed, not asked to stop.
    fn fence(&mut self, cx: &mut Ctx, now: BootTime) {
        if let Some(tenure) = self.tenure.as_mut() {
            tenure.phase = Phase::Fenced;
            tenure.phase_since = now;
        }
        self.note_standing();
        if self.child != Child::Idle {
            self.fenced_child = true;
            self.kill(cx);
        }
    }

    pub(super) fn on_child_exited(&mut self, cx: &mut Ctx, status: ChildStatus, now: BootTime) {
        if let (true, Some(tenure)) = (self.paused(), self.tenure.as_mut()) {
            // Say at once that it is gone: `pause --stop` waits for that.
            tenure.next_heartbeat = now;
        }
        let was = self.child;
        let overran = std::mem::take(&mut self.overran);
        self.ended = match self.why_child_ends() {
            Reason::Stopped if overran => Reason::Overran,
            why => why,
        };
        self.child = Child::Idle;
        self.fenced_child = false;
        if let (Child::Stopping { .. }, ChildStatus::Exited(0), false, true) =
            (was, status, overran, cx.v.settings.scheduled())
        {
            // Before the disclaimer that a revoke's release writes: it says so.
            self.stopped_run_ended(&cx.v, status, now);
        }
        if std::mem::take(&mut self.revoke_waits) {
            info!("child stopped; releasing the partition to the group");
            self.release(cx);
        }
        match self.plan {
            Plan::Exit(code) => return self.exit(cx, code.unwrap_or(status.code())),
            Plan::StandAside(why) => return self.stand_aside(cx, why),
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
        let settings = cx.v.settings;
        if settings.scheduled() {
            return self.scheduled_run_ended(&cx.v, status, now);
        }
        let restart = self.backoff.after(settings.restart, (settings.restart_delay, status, now), Whose::Seat);
        if let Some(delay) = restart {
            self.plan = Plan::Start(now + delay);
        } else {
            info!(%status, "the child's run is over; leaving the group");
            // The attempt ended on its own: our last record says so, and the
            // rest of its wave exits on reading it.
            let token = self.child_token;
            if let Some(attempt) = self.attempt.as_mut().filter(|j| j.token == token) {
                attempt.code = Some(status.code());
            }
            self.exit(cx, status.code());
        }
    }

    /// A signal to pass on to the command's group, if it may live.
    pub(super) fn forward(&mut self, cx: &mut Ctx, sig: super::Signal) {
        if self.child != Child::Idle {
            cx.out.push(Action::SignalGroup(self.partition, sig));
        }
    }

    /// Queues our next heartbeat. A term ends once we have gone a deadline
    /// without reading one of its records back: other members may have
    /// counted it out by then, so what follows must not keep its place.
    fn send_heartbeat(&mut self, cx: &mut Ctx, now: BootTime) {
        let (next, pause) = (self.next_due(&cx.v), self.pause_note());
        let settings = cx.v.settings;
        let Some(tenure) = self.tenure.as_mut() else { return };
        tenure.last_sent = Some(now);
        // A run named for our leadership is the newest run we say.
        let naming = self.naming.as_mut().filter(|n| tenure.phase == (Phase::Leader { token: n.token }));
        let attempt = match naming {
            Some(naming) => {
                naming.sent.get_or_insert(now);
                Some(naming.attempt.clone())
            }
            None => self.attempt.clone(),
        };
        let confirmed = tenure.fresh.map_or(tenure.term_since, |f| f.sent.max(tenure.term_since));
        if now.since(confirmed) >= settings.heartbeat_deadline {
            self.term += 1;
            tenure.term_since = now;
            tenure.start = None;
        }
        let idle = self.child == Child::Idle && matches!(tenure.phase, Phase::Leader { .. });
        let interval = if idle { settings.idle_heartbeat() } else { settings.heartbeat_interval };
        tenure.next_heartbeat = if settings.names_roles() { on_beat(now, interval) } else { now + interval };
        let stance = match (tenure.phase, self.child) {
            (Phase::Leader { token }, _) => Stance::Leading { token },
            (_, Child::Running | Child::Stopping { .. }) => Stance::Leading { token: self.child_token },
            _ => Stance::Contending,
        };
        let job = self.job.clone();
        let record = Record { term: self.term, start: tenure.start, stance, attempt, next, pause, to: None, job };
        self.spoke = true;
        cx.out.push(Action::SendHeartbeat(self.partition, record));
    }

    /// Deadlines that have passed by `now`, those that may start the
    /// command (the member's candidacy comes between these and the rest).
    pub(super) fn on_time_to_start(&mut self, cx: &mut Ctx, now: BootTime) {
        self.try_promote(cx, now);
        self.start_if_due(cx, now);
    }

    /// Deadlines that have passed by `now`: heartbeats, the fence, giving
    /// the partition back, --max-runtime and grace.
    pub(super) fn on_time(&mut self, cx: &mut Ctx, now: BootTime) {
        let settings = cx.v.settings;
        let deadline = settings.heartbeat_deadline;
        // Heartbeats go on while a shutdown stops the child: we still own
        // the partition, and a cut network must still fence.
        if self.tenure.is_some_and(|t| now >= t.next_heartbeat) {
            self.send_heartbeat(cx, now);
        }
        if let Some(Tenure { phase: Phase::Leader { .. }, fresh: Some(fresh), .. }) = self.tenure {
            if now >= fresh.sent + deadline {
                warn!(age = ?now.since(fresh.sent), deadline = ?deadline, "fenced: own heartbeats stopped arriving; killing the child");
                self.fence(cx, now);
            }
        }
        if let Some(tenure) = self.tenure.filter(|t| !matches!(t.phase, Phase::Leader { .. })) {
            if now >= give_back_at(settings, &tenure) {
                warn!(standing = ?tenure.phase, window = ?settings.resume_window, "no own heartbeat read back for the whole resume window; giving the partition back to the group");
                self.give_back(cx);
            }
        }
        if self.child == Child::Running && self.replaced_at(&cx.v).is_some_and(|t| now >= t) {
            warn!("the next due time came while the run goes on; stopping it (overlap=replace)");
            self.overran = true;
            self.stop(cx, now);
        }
        if self.child == Child::Running && self.run_until.is_some_and(|t| now >= t) {
            warn!(max_runtime = ?settings.max_runtime_of(self.partition), "the run exceeded --max-runtime; stopping it");
            self.overran = true;
            self.stop(cx, now);
        }
        if let Child::Stopping { kill_at: Some(t) } = self.child {
            if now >= t {
                warn!(grace = ?settings.grace, "child still running after the grace period; sending SIGKILL");
                self.kill(cx);
            }
        }
    }

    /// When the run under way (the child running) gives way to its job's
    /// next due time (`overlap=replace`): the first to come after it
    /// started, never one already past (a run catching up would be stopped
    /// at birth).
    fn replaced_at(&self, v: &View) -> Option<BootTime> {
        let schedule = v.settings.schedule_of(self.partition).filter(|s| s.overlap == Some(Overlap::Replace))?;
        let run = self.attempt.as_ref().filter(|a| a.token == self.child_token)?;
        schedule.calendar.after(run.due?.max(run.wave_ms)).map(|next| v.anchor.boot_at(next))
    }

    pub(super) fn stop(&mut self, cx: &mut Ctx, now: BootTime) {
        if self.child == Child::Running {
            cx.out.push(Action::SignalGroup(self.partition, cx.v.settings.stop_signal));
            self.child = Child::Stopping { kill_at: Some(now + cx.v.settings.grace) };
        }
    }

    pub(super) fn kill(&mut self, cx: &mut Ctx) {
        cx.out.push(Action::KillGroup(self.partition));
        self.child = Child::Stopping { kill_at: None };
    }
}

/// When an owner of the partition that does not lead gives it back: once
/// its own heartbeats have been gone for the resume window. After that the
/// coordinator may have expired our session and moved the partition on
/// without its verdict reaching us, so resuming would be unsafe; and
/// holding on (data path broken, coordinator reachable) would leave the
/// group leaderless for as long as the fault lasts. Found by neli-soak.
fn give_back_at(settings: &Settings, tenure: &Tenure) -> BootTime {
    tenure.fresh.map_or(tenure.since, |f| f.sent) + settings.resume_window
}

/// The first multiple of `interval` on the boot clock after `now`: the
/// seats of a member of several write their heartbeats in the same step,
/// so that its loop, librdkafka's threads and the read-back wake once for
/// them all rather than once per seat; never later than `now + interval`.
fn on_beat(now: BootTime, interval: Duration) -> BootTime {
    let step = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX).max(1);
    BootTime::from_nanos((now.as_nanos() / step).saturating_add(1).saturating_mul(step))
}

/// How long a hand-over holds: three candidacy intervals, as a candidacy
/// does. Its target leads well within it, or has died.
pub(super) fn handover_window(settings: &Settings) -> Duration {
    3 * settings.candidacy_interval
}
