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
//! The member and its seats. A [`Leader`] is the member's core, one per
//! neli-run process; it holds one [`Seat`] per partition it may lead on:
//! one per NELI role (`Settings::seats`, role j on partition j; the single
//! leader is role 0 on partition 0). Each rule lives where it happens once: asked "with twelve seats,
//! is this once per member or once per seat?",
//! - once per **seat** (`seat.rs`): the tenure and its phase, the term,
//!   the command (its token, lease, grace, --max-runtime), the fence, the
//!   start gate and the claims read on its partition (`peers`), the plan
//!   after the command's exit and the restart policy, the revoke barrier,
//!   giving the partition back, the attempts (once per wave, a schedule),
//!   the pause read on its partition, why the command ends and the seat's
//!   standing;
//! - once per **member** (this file): the settings, the clocks (the
//!   anchor and the latest step), health, who else may
//!   lead and the hand-over's target (`standbys`, `hand_to`), the candidacy
//!   records, --acquire-timeout, shutdown, and leaving the group or
//!   exiting. Member inputs (health, shutdown, yield, a forwarded
//!   signal) fan out to every seat; seat inputs go to the seat their
//!   partition names, and one for a partition that is no seat is ignored.
//!
//! A seat sees its member through a read-only `View` and changes it only
//! through a `Ctx` (the standbys, the hand-over's target, the step's
//! actions); what only the member can do (leave the group, exit) a seat
//! asks for (`leaving::Leave`), and the member does it once the seat's call
//! returns. Leaving the group is member-wide (see `Leave`); so is exiting,
//! which waits until every seat's command is gone (`exit_when_idle`).
//!
//! Files: `io.rs` is the contract with the shell and `config` (settings,
//! inputs, actions, records); this one the member; `seat.rs` the
//! leadership policy of one seat; `leaving.rs` how a seat lets its
//! partition go (yield, give back, release, exit); `peers.rs` the other
//! members' claims and terms; `standbys.rs` who else may lead;
//! `attempts.rs` and `schedule.rs` what once per wave and a schedule add;
//! `backoff.rs` how long `--restart` waits; `say.rs` what is only logged.

use std::collections::BTreeMap;

use tracing::{debug, info, warn};

use crate::clock::{Anchor, BootTime};
use crate::exit;
pub use attempts::{supersedes, Attempt, Runner, Waves};
pub use backoff::{Backoff, Whose};
pub use hot_set::HotList;
pub use io::{
    Action, Asker, Candidacy, Input, Job, NextRun, Other, Partition, Pause, PauseNote, Placed, Reason, Record, Restart,
    Settings, Signal, Stance, Trigger, CONTROL_PARTITION, MAX_ROLES,
};
use leaving::Leave;
pub use schedule::{Calendar, Missed, Overlap, Retry, Schedule};
use seat::{Child, Ctx, Plan, Seat, View};
use standbys::Standbys;

mod attempts;
mod backoff;
mod cold;
mod hot_set;
mod io;
mod leaving;
mod pause;
mod peers;
mod promote;
mod say;
mod schedule;
mod seat;
mod standbys;

/// Where a seat stands in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Standby,
    Candidate,
    Leader { token: i64 },
    Fenced,
}

/// One seat as the shell shows it after a turn (`Leader::views`).
#[derive(Debug)]
pub struct SeatView<'a> {
    pub partition: Partition,
    pub standing: Standing,
    /// The standings taken since the last view, in order: each change is
    /// news to the hooks, however brief.
    pub taken: Vec<Standing>,
    /// Why it last became a standby: "revoked" (its partition taken
    /// away), "lost" (taken without a rebalance's warning), "yielded",
    /// "unhealthy" (its health check failed), "drained" (`neli-run
    /// drain`), "gave back" (a tenure that could not confirm), "exiting" or
    /// "started". For --on-unlead, which says why a leader stopped leading.
    pub why_standby: Reason,
    /// Send time of the newest own heartbeat read back, while we own the
    /// partition (the heartbeat-age metric).
    pub fresh: Option<BootTime>,
    pub paused: bool,
    /// The newest run known, ours or read.
    pub last_run: Option<&'a Attempt>,
    /// Until its exit is reported, a run has not ended.
    pub child_alive: bool,
    /// When the schedule's next run starts, as planned now.
    pub next_due: Option<NextRun>,
    /// Our crontab's job on this seat, if one is.
    pub job: Option<&'a str>,
    /// The crontab job placed on its partition: ours, or one its records
    /// name that our file lacks (run nowhere while we own it).
    pub placed: Option<&'a str>,
}

/// The member's core: one per neli-run process, holding its seats.
#[derive(Debug)]
pub struct Leader {
    settings: Settings,
    started: BootTime,
    /// Our start on both clocks, or the reading after the wall clock's
    /// latest step: every conversion between boot time and the wall clock
    /// of the records goes through it.
    anchor: Anchor,
    /// Who else may lead, and the newest hand-over (see `standbys`).
    standbys: Standbys,
    /// Whom our next disclaimer hands the partition over to.
    hand_to: Option<String>,
    /// When our next candidacy record is due: set while we are in the group
    /// without a seat's partition (from the first Standby), None while we
    /// stand aside, out of it; out of it for our health check, we say so
    /// anyway (see `announce_due`).
    announce_at: Option<BootTime>,
    /// We have written a candidacy record: we withdraw it when we exit.
    announced: bool,
    /// Exit was asked of the shell: only a revoke from closing is answered.
    done: bool,
    /// A seat asked the member to exit with this status: it does once
    /// every seat's command is gone (`exit_when_idle`).
    exiting: Option<u8>,
    /// We left the group ahead of exiting (`--overlap`).
    left: bool,
    /// The time of the latest step: a deadline at or before it has been
    /// handled, and returning it from `next_deadline` would spin the shell.
    now: BootTime,
    out: Vec<Action>,
    /// The health check's word (`--health-cmd`): no command starts while
    /// it is false, and a member that owns a seat's partition stands aside.
    healthy: bool,
    /// `neli-run drain` named us, and no undrain since: as unhealthy.
    drained: bool,
    /// One per partition we may lead on (`Settings::seats`).
    seats: BTreeMap<Partition, Seat>,
    /// Each seat's log span.
    spans: RoleSpans,
    /// Whether we stay out of the group as a cold standby (`cold`).
    cold: cold::Cold,
    /// When a seat was last revoked, not lost: the coordinator had just
    /// answered us (see `on_delivered`).
    revoked_at: Option<BootTime>,
}

/// The spans a seat's log lines go in, naming its role, when the member
/// has several (`role{role=3}: ...`; a crontab's job by its name,
/// `job{job=billing partition=3}: ...`): the core's and the shell's alike
/// (`Leader::role_span`).
/// Made once per seat and entered at each step: making a span formats its
/// fields, and a member of 10 roles in a group of 100 spent most of its
/// idle CPU making and closing one per seat per step.
#[derive(Debug, Default)]
struct RoleSpans(BTreeMap<Partition, tracing::Span>);

impl RoleSpans {
    fn new(settings: &Settings) -> RoleSpans {
        let span = |p| match settings.job_on(p) {
            Some(job) => tracing::info_span!("job", job = %crate::printable::printable(job), partition = p),
            None => tracing::info_span!("role", role = p),
        };
        match settings.names_roles() {
            true => RoleSpans(settings.seats().map(|p| (p, span(p))).collect()),
            false => RoleSpans::default(),
        }
    }

    /// Enters the seat's span (None: one role, no span).
    fn enter(&self, partition: Partition) -> Option<tracing::span::EnteredSpan> {
        self.0.get(&partition).map(|span| span.clone().entered())
    }
}

impl Leader {
    /// A standby that has just started at `now` (read on both clocks once,
    /// by the shell: the core reads none), with a seat on each partition of
    /// `Settings::seats`.
    pub fn new(settings: Settings, now: Anchor) -> Leader {
        let gated = settings.health_checked;
        let seats = settings.seats().map(|p| (p, Seat::new(p, settings.job_on(p)))).collect();
        let spans = RoleSpans::new(&settings);
        Leader {
            settings,
            started: now.boot,
            anchor: now,
            standbys: Standbys::default(),
            hand_to: None,
            announce_at: None,
            announced: false,
            done: false,
            exiting: None,
            left: false,
            now: now.boot,
            out: Vec::new(),
            healthy: !gated,
            drained: false,
            seats,
            spans,
            revoked_at: None,
            cold: cold::Cold::default(),
        }
    }

    /// Notes the end of a seat's partition as it was when we started (once
    /// per wave: members started before a wave began belong to it,
    /// whatever the clocks of its hosts say).
    pub fn born_at(&mut self, partition: Partition, end: i64) {
        if let Some(seat) = self.seats.get_mut(&partition) {
            seat.born = Some(end);
        }
    }

    /// The standings a seat took since the last call, in order.
    #[cfg(test)]
    fn standings_taken(&mut self, partition: Partition) -> Vec<Standing> {
        self.seats.get_mut(&partition).map(Seat::standings_taken).unwrap_or_default()
    }

    /// Every seat as the shell shows it after a turn, by partition: one
    /// read of the core per turn, whatever the shell makes of it (metrics,
    /// systemd's status line, hooks, leader files). Takes the standings
    /// each seat took since the last call.
    pub fn views(&mut self) -> Vec<SeatView<'_>> {
        let taken: Vec<(Partition, Vec<Standing>)> =
            self.seats.iter_mut().map(|(&partition, seat)| (partition, seat.standings_taken())).collect();
        taken.into_iter().filter_map(|(partition, taken)| self.view_of(partition, taken)).collect()
    }

    /// A seat as the shell shows it, with the standings it took `taken`.
    fn view_of(&self, partition: Partition, taken: Vec<Standing>) -> Option<SeatView<'_>> {
        let seat = self.seats.get(&partition)?;
        Some(SeatView {
            partition,
            standing: seat.standing(),
            taken,
            why_standby: seat.why_standby(),
            fresh: seat.fresh(),
            paused: seat.pause.as_ref().is_some_and(|p| p.paused),
            last_run: seat.attempt.as_ref(),
            child_alive: seat.child != Child::Idle,
            next_due: seat.next_due(&self.view()),
            job: self.settings.job_on(partition),
            placed: seat.job.as_deref(),
        })
    }

    /// A seat's view for a test, with no standings taken.
    #[cfg(test)]
    fn seat_view(&self, partition: Partition) -> Option<SeatView<'_>> {
        self.view_of(partition, Vec::new())
    }

    /// `SeatView::why_standby`, for a test.
    #[cfg(test)]
    pub(crate) fn why_standby(&self, partition: Partition) -> Reason {
        self.seat_view(partition).map_or(Reason::Started, |v| v.why_standby)
    }

    /// Why a seat's last run ended: "exited" (by itself, as far as we
    /// know), "fenced" (killed by a fence), "overran" (we stopped it for
    /// running too long), or "stopped" (we stopped or killed it: a revoke,
    /// a yield, a shutdown). For --on-exit and --on-failure, asked once the core took the exit in: the deadlines that
    /// passed before it count first, so a command the shim's lease killed a
    /// moment before neli-run's own fence was fenced, not ended by itself.
    pub fn why_child_ended(&self, partition: Partition) -> Reason {
        self.seats.get(&partition).map_or(Reason::Exited, |s| s.ended)
    }

    /// `SeatView::job`, for a test.
    #[cfg(test)]
    pub(crate) fn job_on(&self, partition: Partition) -> Option<&str> {
        self.seat_view(partition).and_then(|v| v.job)
    }

    /// A seat's standing now (for logs, status and tests).
    pub fn standing(&self, partition: Partition) -> Standing {
        self.seats.get(&partition).map_or(Standing::Standby, Seat::standing)
    }

    /// `SeatView::last_run`, for a test.
    #[cfg(test)]
    pub(crate) fn last_run(&self, partition: Partition) -> Option<&Attempt> {
        self.seat_view(partition).and_then(|v| v.last_run)
    }

    /// `SeatView::child_alive`, for a test.
    #[cfg(test)]
    pub(crate) fn child_alive(&self, partition: Partition) -> bool {
        self.seat_view(partition).is_some_and(|v| v.child_alive)
    }

    /// The pause in force on a seat, as far as we know (for metrics):
    /// current while we own its partition, which is read only then.
    #[cfg(test)]
    pub(crate) fn paused(&self, partition: Partition) -> Option<&Pause> {
        self.seats.get(&partition)?.pause.as_ref().filter(|p| p.paused)
    }

    /// `SeatView::fresh`, for a test.
    #[cfg(test)]
    pub(crate) fn fresh(&self, partition: Partition) -> Option<BootTime> {
        self.seat_view(partition).and_then(|v| v.fresh)
    }

    /// `SeatView::next_due`, for a test.
    #[cfg(test)]
    pub(crate) fn next_due(&self, partition: Partition) -> Option<NextRun> {
        self.seat_view(partition).and_then(|v| v.next_due)
    }

    /// A seat, for a test to set what no input reaches in one step.
    #[cfg(test)]
    fn seat_mut(&mut self, partition: Partition) -> &mut Seat {
        self.seats.get_mut(&partition).expect("a seat")
    }

    /// What the seats see of the member now.
    fn view(&self) -> View<'_> {
        View {
            settings: &self.settings,
            anchor: self.anchor,
            started: self.started,
            latest: self.now,
            healthy: self.may_lead(),
        }
    }

    /// Whether we may lead now: healthy (`--health-cmd`) and not drained.
    fn may_lead(&self) -> bool {
        self.healthy && !self.drained
    }

    /// Runs `f` on the seat of `partition` (if it is one), then does what
    /// the seat asked of the member. With several seats, what it logs
    /// names its role.
    fn on_seat(&mut self, partition: Partition, f: impl FnOnce(&mut Seat, &mut Ctx)) {
        let healthy = self.may_lead();
        let Leader { settings, started, anchor, standbys, hand_to, now, out, seats, spans, .. } = self;
        let _role = spans.enter(partition);
        let Some(seat) = seats.get_mut(&partition) else { return };
        let v = View { settings, anchor: *anchor, started: *started, latest: *now, healthy };
        f(seat, &mut Ctx { v, standbys, hand_to, out });
        if let Some(leave) = seat.leaving.take() {
            self.leave(leave);
        }
    }

    /// Runs `f` on every seat in turn (a member event fanned out).
    fn each_seat(&mut self, mut f: impl FnMut(&mut Seat, &mut Ctx)) {
        let partitions: Vec<Partition> = self.seats.keys().copied().collect();
        for partition in partitions {
            self.on_seat(partition, &mut f);
        }
    }

    /// Runs `f` on every seat that owns its partition or has a command: only
    /// those have deadlines (`Seat::deadlines`), so time touches no other.
    /// A member of 10 roles in a group of 100 holds 90 seats that own
    /// nothing, and skips them at every step without entering their span.
    fn each_busy_seat(&mut self, mut f: impl FnMut(&mut Seat, &mut Ctx)) {
        let busy: Vec<Partition> =
            self.seats.values().filter(|s| s.tenure.is_some() || s.child != Child::Idle).map(|s| s.partition).collect();
        for partition in busy {
            self.on_seat(partition, &mut f);
        }
    }

    /// A fleet crontab's topic grew while we run (a partition added for a
    /// new job, `kafka::placement`), and Kafka named that partition to us:
    /// a seat on it, as the ones we started with (a standby, ready for its
    /// job if the crontab we read has it). Nothing without a crontab, whose
    /// seats are the roles', or for a seat we have.
    pub fn seat(&mut self, partition: Partition) {
        if self.settings.jobs.is_none() || self.seats.contains_key(&partition) {
            return;
        }
        self.seats.insert(partition, Seat::new(partition, self.settings.job_on(partition)));
        self.settings.roles = self.settings.roles.max(u32::try_from(partition).map_or(1, |p| p + 1));
        self.spans = RoleSpans::new(&self.settings);
    }

    /// A crontab read again at `now`: `jobs` by their partitions. A job
    /// whose due times changed runs by its new line from its next due time
    /// after `now`; one added to a seat is ready from now; of either,
    /// nothing due at or before `now` runs, missed or not (see
    /// `Schedule::since`: the runs on record were the old line's, or
    /// another job's of the name). A job whose due times stayed keeps
    /// them, each one run once. One removed starts no more runs (a run
    /// going on ends as it would), and its partition goes on holding it
    /// (our records still name it).
    pub fn set_jobs(&mut self, mut jobs: BTreeMap<Partition, Job>, now: BootTime) {
        let changed_at = self.anchor.wall_ms_at(now);
        for (partition, job) in &mut jobs {
            let old = self.settings.jobs.as_ref().and_then(|old| old.get(partition));
            job.schedule.since = match old.filter(|old| old.name == job.name) {
                Some(old) if old.schedule.line == job.schedule.line => old.schedule.since,
                _ => Some(changed_at),
            };
        }
        for (partition, seat) in &mut self.seats {
            let Some(job) = jobs.get(partition) else { continue };
            if self.settings.job_on(*partition) != Some(job.name.as_str()) {
                seat.job = Some(job.name.clone());
                if let seat::Plan::Start(_) = seat.plan {
                    seat.plan = seat::Plan::Start(now.max(self.now));
                }
            }
        }
        self.settings.jobs = Some(jobs);
        self.spans = RoleSpans::new(&self.settings);
    }

    /// Enters the span of `partition`'s seat, for the shell's log lines about
    /// it (None with one role).
    pub fn role_span(&self, partition: Partition) -> Option<tracing::span::EnteredSpan> {
        self.spans.enter(partition)
    }

    /// Whether any seat holds its partition.
    fn owns_any(&self) -> bool {
        self.seats.values().any(|s| s.tenure.is_some())
    }

    /// Feeds one event; returns what to do, in order.
    pub fn step(&mut self, input: Input, now: BootTime) -> Vec<Action> {
        if input.partition().is_some_and(|p| !self.seats.contains_key(&p)) {
            return Vec::new(); // a partition that is no seat of ours
        }
        if self.done {
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
            Input::Assigned { partition } => self.on_seat(partition, |s, cx| s.on_assigned(cx, now)),
            Input::Revoked { partition, lost } => {
                if !lost {
                    self.revoked_at = Some(now);
                }
                self.on_seat(partition, |s, cx| s.on_revoked(cx, lost, now))
            }
            Input::OwnHeartbeat { partition, offset, sent, more } => {
                self.on_seat(partition, |s, cx| s.on_heartbeat(cx, (offset, sent, more), now))
            }
            Input::Delivered { partition, offset, sent } => self.on_delivered(partition, (offset, sent), now),
            Input::CaughtUp { partition } => self.on_seat(partition, |s, _| s.on_caught_up()),
            Input::OtherHeartbeat(partition, other) => self.on_other(partition, other, now),
            Input::ChildExited(partition, status) => {
                self.on_seat(partition, |s, cx| s.on_child_exited(cx, status, now))
            }
            Input::Shutdown => self.shutdown(None, now),
            Input::Fatal(code) => self.shutdown(Some(code), now),
            Input::Forward(sig) => self.each_seat(|s, cx| s.forward(cx, sig)),
            Input::Yield { to } => self.on_yield(Reason::Yielded, to, now),
            Input::Pause(partition, pause) => self.on_seat(partition, |s, cx| s.on_pause(cx, pause, now)),
            Input::Trigger(partition, trigger) => self.on_seat(partition, |s, cx| s.on_trigger(&cx.v, trigger, now)),
            Input::Health(healthy) => self.on_health(healthy, now),
            Input::Drain(drained) => self.on_drain(drained, now),
            Input::Standby => {
                if !self.owns_any() && self.announce_at.is_none() && self.may_lead() {
                    self.announce_at = Some(now);
                }
            }
            Input::Candidacy(candidacy) => self.on_candidacy(candidacy, now),
            Input::Hot(list) => self.on_hot(list, now),
            Input::Echo => self.on_echo(),
            Input::RosterRead => self.cold.roster_read = Some(now),
            Input::HandedTo(age) => {
                let until = (now - age) + seat::handover_window(&self.settings);
                self.standbys.handed_us(&self.settings.name, until);
            }
            Input::Tick => {}
        }
        // Cold first: a member that goes cold says it is there in this step.
        self.settle_cold(now);
        self.pass_over_silent();
        self.on_time(now);
        for seat in self.seats.values_mut() {
            seat.note_standing();
        }
        debug_assert!(
            self.out.iter().filter_map(Action::partition).all(|p| self.seats.contains_key(&p)),
            "an action for a partition that is no seat: {:?}",
            self.out
        );
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
        consider(self.announce_due());
        let view = self.view();
        for seat in self.seats.values() {
            seat.deadlines(&view, &mut consider);
        }
        consider(self.acquire_deadline());
        consider(self.cold_deadline());
        next
    }

    /// When we give up for not leading (--acquire-timeout): until a seat
    /// has led, while every seat still means to.
    fn acquire_deadline(&self) -> Option<BootTime> {
        let waiting = |s: &Seat| matches!(s.plan, Plan::Serve | Plan::Start(_) | Plan::StandAside(_));
        let led = self.seats.values().any(|s| s.ever_led);
        match (led, self.seats.values().all(waiting), self.settings.acquire_timeout) {
            (false, true, Some(t)) => Some(self.started + t),
            _ => None,
        }
    }

    /// SIGTERM or SIGINT (`code` None: exit with the command's status), or a
    /// fatal error: every seat stops its command, then the member exits;
    /// asked again, the commands are killed. A seat counts as asked again
    /// only if it was stopping to exit before this input: one seat's exit
    /// stops the others within the same step (`exit_when_idle`), which is
    /// their first ask. With several seats a requested stop exits 0 (each
    /// command's status is in the log): no one command's status speaks for
    /// the member. With --overlap the member leaves the group at once: its
    /// revokes are released while its commands stop.
    fn shutdown(&mut self, code: Option<u8>, now: BootTime) {
        let code = code.or((self.seats.len() > 1).then_some(0));
        if self.settings.overlap && !self.left && self.seats.values().any(|s| s.child != Child::Idle) {
            // The next owners need not wait for our commands to finish.
            self.left = true;
            self.out.push(Action::LeaveGroup);
        }
        let asked: Vec<Partition> =
            self.seats.values().filter(|s| matches!(s.plan, Plan::Exit(_))).map(|s| s.partition).collect();
        self.each_seat(|s, cx| {
            if asked.contains(&s.partition) || !matches!(s.plan, Plan::Exit(_) | Plan::Done) {
                s.on_shutdown(cx, code, now);
            }
        });
    }

    /// An own record written (with several seats, the adapter says each
    /// for a while after a revoke):
    /// a rebalance that revokes a seat holds the reader in its barrier, and
    /// goes on after it, while the seats kept read nothing back. A leading
    /// seat may stay fresh on its records written until a session after
    /// the latest revoke began, less a coordinator heartbeat and the margin
    /// (the resume window): a revoke the group makes follows the
    /// coordinator's answer, so no other member can own a kept seat's
    /// partition before (one we make by leaving revokes every seat, and
    /// keeps none). A lost revoke counts for nothing: the session is gone,
    /// and every partition with it. Long after a revoke, a delivery says
    /// nothing the records read back do not.
    fn on_delivered(&mut self, partition: Partition, record: (i64, BootTime), now: BootTime) {
        let Some(since) = self.revoked_at else { return };
        let until = since + self.settings.resume_window;
        self.on_seat(partition, |s, cx| s.on_delivered(cx, record, until, now));
    }

    /// Another member's record on a seat's partition: the hand-over it
    /// makes is the member's; the pause it carries, its claim and term the
    /// seat's.
    fn on_other(&mut self, partition: Partition, other: Other, now: BootTime) {
        if self.seats.get(&partition).is_some_and(|s| s.peers.stale(&other)) {
            debug!(writer = %other.writer, offset = other.offset, "a record older than one of its writer's already read: read again, it says nothing new");
            return;
        }
        // A pause it names is an earlier record (as a token is): a later
        // offset would outrank every real request to come.
        if let Some(pause) = other.pause.clone().filter(|p| p.offset < other.offset) {
            self.on_seat(partition, |s, cx| s.on_pause(cx, pause, now));
        }
        self.standbys.other(&other, seat::handover_window(&self.settings), now);
        let owner = !matches!(other.stance, Stance::Released) && other.age < other.deadline;
        if partition == CONTROL_PARTITION && owner {
            self.on_hot(other.hot.clone(), now);
        }
        self.on_seat(partition, |s, cx| s.on_other(cx, other, now));
    }

    /// When our next candidacy record is due: while we are in the group
    /// without a seat's partition, and mean to lead when asked (not while
    /// we stop to stand aside or exit); and while our health check keeps
    /// us out of it, at once and then every interval, so that `status`
    /// shows why we do not lead (the shell marks those records unhealthy:
    /// no owner lets us lead on them). A cold standby, out of the group too,
    /// says it is there all the same, at once and then every interval: the
    /// owner chooses the hot standbys among the members it reads.
    fn announce_due(&self) -> Option<BootTime> {
        let serving = self.seats.values().all(Seat::serving);
        let asked = self.may_lead() && !self.cold.is_cold();
        let due = if asked { self.announce_at } else { self.announce_at.or(Some(self.now)) };
        due.filter(|_| !self.owns_any() && serving)
    }

    /// Another member's candidacy. A leader with --preempt hands over to a
    /// live one of higher priority.
    fn on_candidacy(&mut self, candidacy: Candidacy, now: BootTime) {
        self.heard_hot(&candidacy);
        let Some((name, priority)) = self.standbys.read(&candidacy, now) else { return };
        if !self.settings.preempt || priority <= self.settings.priority {
            return;
        }
        let mine = self.settings.priority;
        self.each_seat(|s, cx| {
            if matches!(s.standing(), Standing::Leader { .. }) && s.serving() {
                say::preempted(&name, priority, mine);
                s.on_yield(cx, Reason::Preempted, Some(name.clone()), now);
            }
        });
    }

    /// Hands over (see `Seat::on_yield`): every seat that holds its
    /// partition stops its command, then stands aside.
    fn on_yield(&mut self, why: Reason, to: Option<String>, now: BootTime) {
        self.each_seat(|s, cx| s.on_yield(cx, why, to.clone(), now));
    }

    /// The health check's verdict changed (the shell says only changes,
    /// after its thresholds). Unhealthy, a member that owns a seat's
    /// partition hands over as a yield does; a standby is kept out of the
    /// group by the shell meanwhile, and says at once that it is unhealthy
    /// (no owner may hand a partition to it), and `start_at` starts
    /// nothing. Healthy again, it says so once it is back in the group
    /// (Standby).
    fn on_health(&mut self, healthy: bool, now: BootTime) {
        self.healthy = healthy;
        self.announce_at = None;
        if !healthy {
            self.on_yield(Reason::Unhealthy, None, now);
        }
    }

    /// `neli-run drain` named us (`drained`) or `undrain` did: as the
    /// health check's verdict, on a flag of its own (a member drained and
    /// unhealthy stays out until both end).
    fn on_drain(&mut self, drained: bool, now: BootTime) {
        self.drained = drained;
        self.announce_at = None;
        if drained {
            self.on_yield(Reason::Drained, None, now);
        }
    }

    /// Deadlines that have passed by `now`.
    fn on_time(&mut self, now: BootTime) {
        if self.done {
            return;
        }
        self.each_busy_seat(|s, cx| s.on_time_to_start(cx, now));
        if self.announce_due().is_some_and(|t| now >= t) {
            self.announce_at = Some(now + self.settings.candidacy_interval);
            self.announced = true;
            self.out.push(Action::SendCandidacy { leaving: false });
        }
        self.each_busy_seat(|s, cx| s.on_time(cx, now));
        let idle = self.seats.values().all(|s| s.child == Child::Idle);
        if self.acquire_deadline().is_some_and(|t| now >= t) && idle {
            warn!(timeout = ?self.settings.acquire_timeout.unwrap_or_default(), "not leader within --acquire-timeout; giving up");
            self.exit(exit::Kind::AcquireTimeout.code());
        }
    }

    /// Does what a seat asked of the member (see `leaving::Leave`).
    fn leave(&mut self, leave: Leave) {
        match leave {
            Leave::Rejoin => self.out.push(Action::Rejoin),
            Leave::StandAside { to } => {
                if self.may_lead() {
                    // Out of the group until another member leads: we say we
                    // are a candidate again once back in it.
                    self.announce_at = None;
                }
                self.out.push(match to {
                    Some(to) => Action::HandOver { to },
                    None => Action::StandAside,
                });
            }
            Leave::Exit(code) => self.exit_when_idle(code),
        }
    }

    /// A seat asked the member to exit (its run is over, a shutdown, a
    /// fatal error): a member exits as a whole, so every other seat stops
    /// its command first, and the member exits, with the first status
    /// asked for, once no seat's command may still run. With one seat, at
    /// once: it asks only once its command is gone.
    fn exit_when_idle(&mut self, code: u8) {
        if self.done {
            return;
        }
        let code = *self.exiting.get_or_insert(code);
        let now = self.now;
        self.each_seat(|s, cx| {
            if !matches!(s.plan, Plan::Exit(_) | Plan::Done) {
                s.on_shutdown(cx, Some(code), now);
            }
        });
        if !self.done && self.seats.values().all(|s| s.child == Child::Idle) {
            self.exit(code);
        }
    }

    /// Exits: every seat not yet done retires (its disclaimer), our
    /// candidacy is withdrawn, and the shell is told.
    fn exit(&mut self, code: u8) {
        self.done = true;
        self.each_seat(|s, cx| {
            if s.plan != Plan::Done {
                s.retire(cx);
            }
        });
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
mod roles_walk;

#[cfg(test)]
mod tests;
