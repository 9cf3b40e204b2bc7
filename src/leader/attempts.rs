//! Attempts: the runs of the command that once per wave (`--restart never`,
//! the cron wrapper) and a schedule (`--every`, `--cron`) name in every
//! record, so that the next leader neither repeats a run that ended nor
//! forgets one that was due or cut short. The core's glue between its
//! leadership, [`Waves`] and [`Schedule`](super::Schedule).

use std::time::Duration;

use tracing::{info, warn};

use super::seat::{Child, Plan, Seat, View};

/// How far ahead of ours a trigger's clock may be (see `Seat::on_trigger`).
const TRIGGER_AHEAD: u64 = 60_000;
use super::{say, schedule, Leader, NextRun, Settings};
use crate::clock::{Anchor, BootTime};
use crate::exit::ChildStatus;

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

/// One attempt at a run: a wave's (once per wave) or a due time's (a
/// schedule). An attempt that did not end on its own (its leader crashed,
/// was fenced or was stopped) is tried again by the next leader of the
/// wave: at least once, never twice after a success (a due time's, as
/// `Missed` says). On the wire, a record's `job`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// When the wave's first attempt started, in wall-clock ms (what other
    /// machines can compare). A schedule's attempts share their due time
    /// instead: each is a wave of its own, and this is its own start.
    pub wave_ms: u64,
    /// The first attempt's token: where the wave began on partition 0, which
    /// every member reads alike, whatever its clock.
    pub wave_token: i64,
    /// 1 for the first attempt, 2 for the first retry ...
    pub number: u32,
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
    /// A scheduled run: the line it ran by ([`super::Schedule::line`]), so
    /// that a member whose line differs counts its own from when it read
    /// the run (`Seat::learn`). None for a wave's, and a record of a
    /// version that did not say.
    pub line: Option<String>,
}

/// Whether an attempt (its token, due time, number and ending) says more
/// than a `known` one. Records carry attempts forward, so the same one is
/// read many times, ended or not.
/// - A wave's (no due time): the newer attempt (the larger token), or the
///   same attempt telling how it ended. A failed run is tried again, so a
///   later attempt's word is the one that counts.
/// - A schedule's: the later due time (one leadership runs due times one
///   after another under one token); of one due time, a run that succeeded
///   over any other, then a run that ended over any that did not, since an
///   ending is final and an attempt begun before it landed (then cut short)
///   must not undo it (found by neli-soak on tansu, for a success, and on
///   the dev broker, for a run `overlap=replace` stopped); of two endings,
///   the later attempt (a failure's retry over the failure: a retry under
///   way says nothing until it ends); else the newer token.
pub fn supersedes<D: Ord>(
    (token, due, number, code): (i64, Option<D>, u32, Option<u8>),
    (known, known_due, known_number, known_code): (i64, Option<D>, u32, Option<u8>),
) -> bool {
    if due.is_some() && known_due.is_some() {
        let key = |due, number, code: Option<u8>, token| (due, code == Some(0), code.is_some(), number, token);
        return key(&due, number, code, token) > key(&known_due, known_number, known_code, known);
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

/// Whether to run the command now (as which attempt of which wave), or to
/// exit with the status of a run of our wave that already ended.
pub(super) enum Turn {
    Run(Option<Attempt>),
    Covered(u8),
}

impl Leader {
    /// Both clocks as the shell read them just now, before a step. When the
    /// wall clock stepped (NTP's first sync after we started, or someone
    /// set it), we convert by the new reading from now on: a due time is a
    /// point on the wall clock, so the one we wait for comes sooner or
    /// later on the boot clock by the step, as cron's would; and the wave
    /// and due times we write agree again with the send times beside them.
    /// What we measure on the boot clock alone (heartbeats, leases, grace,
    /// --max-runtime, --restart-delay) does not move. A step back never
    /// runs a due time again: the next run is after the newest one on
    /// record, whatever the clock says.
    pub fn wall_clock(&mut self, read: Anchor) {
        if let Some(step_ms) = self.anchor.stepped(read) {
            warn!(step_ms, "the wall clock stepped: due times and waves follow it from now on");
            self.anchor = read;
        }
    }

    /// Wall-clock milliseconds since the Unix epoch at `t`, as we convert
    /// them (for metrics: the same frame as our records).
    pub fn wall_ms_at(&self, t: BootTime) -> u64 {
        self.anchor.wall_ms_at(t)
    }
}

impl Seat {
    /// The schedule's next run for us, ready since `ready`, at `now`, after
    /// the newest run we know of.
    pub(super) fn next_run(&self, v: &View, ready: BootTime, now: BootTime) -> Option<schedule::Next> {
        let wall = |t| v.anchor.wall_ms_at(t);
        let schedule = self.schedule(v.settings)?;
        if let Some(trigger) = self.triggered() {
            // Due when asked, and run at once (the asker's clock may be
            // ahead of ours).
            return Some(schedule::Next { due: trigger.at_ms, missed: true, retry: false, not_before: None });
        }
        schedule.next(self.attempt.as_ref(), wall(ready), wall(now))
    }

    /// Our schedule, its line counted from its latest change: a reload's
    /// (`Schedule::since`), or the reading of a run on record that another
    /// line ran (`learn`): the due times of ours before either were
    /// nobody's, and are neither missed nor run.
    fn schedule(&self, settings: &Settings) -> Option<schedule::Schedule> {
        let schedule = settings.schedule_of(self.partition)?;
        Some(schedule::Schedule { since: schedule.since.max(self.line_read), ..schedule.clone() })
    }

    /// A `cron trigger` read on our partition: the newest by offset. Its
    /// asker's clock names the run's due time, and the job's next due time
    /// follows it: one more than `TRIGGER_AHEAD` ahead of ours is refused,
    /// or a clock set wrong would hold the job's runs back until then.
    pub(super) fn on_trigger(&mut self, v: &View, trigger: super::Trigger, now: BootTime) {
        if self.trigger.as_ref().is_some_and(|known| known.offset >= trigger.offset) {
            return;
        }
        let ours = v.anchor.wall_ms_at(now);
        if trigger.at_ms > ours.saturating_add(TRIGGER_AHEAD) {
            warn!(
                at_ms = trigger.at_ms,
                ours,
                "a trigger from a clock ahead of ours by more than a minute, asked by {}: not run (set the clocks right)",
                trigger.by.describe()
            );
            return;
        }
        info!(offset = trigger.offset, at_ms = trigger.at_ms, "run now, once: asked by {}", trigger.by.describe());
        self.trigger = Some(trigger);
    }

    /// The trigger still to answer: no run due at or after it has begun,
    /// as far as the records we read say (a run cut short is the
    /// schedule's to run again, as any).
    fn triggered(&self) -> Option<&super::Trigger> {
        let trigger = self.trigger.as_ref()?;
        let last = self.attempt.as_ref().and_then(|a| a.due);
        last.is_none_or(|due| due < trigger.at_ms).then_some(trigger)
    }

    /// The run of a schedule's due time that we start now under `token`,
    /// its command at `begin` (its wave is this attempt alone: the due time
    /// is what attempts share; it started when its command did).
    pub(super) fn scheduled(
        &self,
        v: &View,
        next: schedule::Next,
        token: i64,
        (now, begin): (BootTime, BootTime),
    ) -> Attempt {
        let wave_ms = v.anchor.wall_ms_at(begin);
        say::due(next.due, wave_ms, begin.since(now));
        let number = self.attempt.as_ref().filter(|_| next.retry).map_or(1, |last| last.number + 1);
        let line = v.settings.line_of(self.partition).map(str::to_owned);
        Attempt {
            wave_ms,
            wave_token: token,
            number,
            token,
            code: None,
            by: None,
            due: Some(next.due),
            ended: None,
            line,
        }
    }

    /// When the schedule's next run starts, as we plan it now (for our
    /// records, `neli-run status` and metrics).
    pub(super) fn next_due(&self, v: &View) -> Option<NextRun> {
        let schedule = self.schedule(v.settings)?;
        match (self.plan, self.child, &self.attempt) {
            (Plan::Start(ready), Child::Idle, _) => self
                .next_run(v, ready, v.latest)
                .map(|n| NextRun { at_ms: n.not_before.map_or(n.due, |at| at.max(n.due)), retry: n.retry }),
            // (A run of the line before a reload is followed by the new
            // line's first due time after it.)
            (_, Child::Running, Some(Attempt { due: Some(due), .. })) => {
                let after = schedule.since.map_or(*due, |since| since.max(*due));
                schedule.calendar.after(after).map(|at_ms| NextRun { at_ms, retry: false })
            }
            _ => None,
        }
    }

    /// Whether our turn to run the command has come, under once per wave:
    /// everything written before our term's first record has been read by
    /// now (see `promotion_at`), so the newest attempt we know of is the
    /// newest of the wave, or was carried forward by a later record.
    pub(super) fn turn(&self, v: &View, token: i64, now: BootTime) -> Turn {
        let Some(waves) = v.settings.waves else { return Turn::Run(None) };
        let wave_ms = v.anchor.wall_ms_at(now);
        let fresh = Attempt {
            wave_ms,
            wave_token: token,
            number: 1,
            token,
            code: None,
            by: None,
            due: None,
            ended: None,
            line: None,
        };
        // Started before the wave began (by the log), or within the window
        // after (by the clocks; a wave that seems to begin in our future
        // comes from a clock ahead of ours and cannot be placed).
        let ours = |j: &&Attempt| {
            let wave = v.anchor.boot_at(j.wave_ms);
            self.born.is_some_and(|end| end <= j.wave_token) || (wave <= now && v.started < wave + waves.within)
        };
        say::wave_from_the_future(self.attempt.as_ref(), wave_ms);
        let Some(last) = self.attempt.as_ref().filter(ours) else {
            return Turn::Run(Some(fresh));
        };
        match last.code {
            Some(code) if code == 0 || !waves.retry_failed => Turn::Covered(code),
            _ => Turn::Run(Some(Attempt {
                wave_ms: last.wave_ms,
                wave_token: last.wave_token,
                number: last.number + 1,
                ..fresh
            })),
        }
    }

    /// Takes in an attempt another member's record names, if it is newer
    /// than what we know. Under a schedule, only a schedule's (one with a
    /// due time): a wave's, from a member started with other flags, says
    /// nothing about the schedule, and taking it would forget the newest
    /// due time run, which a clock behind it would then run again (found
    /// by the invariant walks once the wall clock stepped back in them).
    /// The run our command is under way for stays ours, unless another
    /// says its due time succeeded: a late copy of the failure it retries
    /// would otherwise take its place, and its ending go unrecorded.
    /// Read at `read_ms` (wall clock), a newest run of another line than
    /// ours for the job (a member of an older file ran it) is a change of
    /// line then, as a reload's: our line's due times before it were
    /// nobody's (C-1 for a member started with a changed file).
    pub(super) fn learn(&mut self, settings: &Settings, attempt: Attempt, read_ms: u64) {
        if settings.scheduled() && attempt.due.is_none() {
            return;
        }
        let ours_running =
            |known: &Attempt| self.child != Child::Idle && known.token == self.child_token && known.due == attempt.due;
        let newer = |known: &Attempt| {
            let key = |a: &Attempt| (a.token, a.due, a.number, a.code);
            supersedes(key(&attempt), key(known)) && (attempt.code == Some(0) || !ours_running(known))
        };
        if self.attempt.as_ref().is_none_or(newer) {
            match (attempt.line.as_deref(), settings.line_of(self.partition)) {
                (Some(theirs), Some(ours)) if theirs != ours => {
                    let due_ms = attempt.due;
                    info!(
                        due_ms,
                        "the job's newest run on record ran by another line: ours counts from now, as if read again"
                    );
                    self.line_read = Some(read_ms);
                }
                (Some(_), Some(_)) => self.line_read = None,
                // A version that did not say, or not a crontab's job.
                _ => {}
            }
            self.attempt = Some(attempt);
        }
    }

    /// A scheduled run we asked to stop (a revoke, a shutdown, a pause)
    /// that exited 0: it ended (its exit may even have come before our
    /// signal, and been heard after), and the next owner must not run its
    /// due time again. Any other ending was cut short, and runs again.
    pub(super) fn stopped_run_ended(&mut self, v: &View, status: ChildStatus, now: BootTime) {
        let token = self.child_token;
        if let Some(attempt) = self.attempt.as_mut().filter(|j| j.token == token) {
            attempt.code = Some(status.code());
            attempt.ended = Some(v.anchor.wall_ms_at(now));
        }
    }

    /// A scheduled run ended on its own: we say so at once, and lead on to
    /// the next due time.
    pub(super) fn scheduled_run_ended(&mut self, v: &View, status: ChildStatus, now: BootTime) {
        let token = self.child_token;
        if let Some(attempt) = self.attempt.as_mut().filter(|j| j.token == token) {
            attempt.code = Some(status.code());
            attempt.ended = Some(v.anchor.wall_ms_at(now));
        }
        self.run_ended = Some(now);
        self.plan = Plan::Start(now);
        if let Some(tenure) = self.tenure.as_mut() {
            tenure.next_heartbeat = now;
        }
        let next = self.next_due(v);
        let next_due_in = next.map(|n| Duration::from_millis(n.at_ms.saturating_sub(v.anchor.wall_ms_at(now))));
        info!(%status, ?next_due_in, "the scheduled run ended");
    }
}

#[cfg(test)]
mod tests;
