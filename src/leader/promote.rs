//! When a seat leads and when its command starts: a candidate (or a fenced
//! leader) is promoted once its own heartbeat is read back fresh and no
//! other member's claim or earlier term holds it back; the command starts
//! once it is due, under the lease that heartbeat gives, and never at or
//! past the lease's end. Every start goes through `start_at`.

use std::time::Duration;

use super::attempts::Turn;
use super::seat::{Child, Ctx, Phase, Plan, Seat, Tenure, View};
use super::{say, Action, Attempt, Reason};
use crate::clock::BootTime;

/// How far ahead of its due time a scheduled run's shim is started (it
/// waits for the due time, then starts the command): what starting the
/// shims of the runs due at once takes, with room.
pub const HEAD_START: Duration = Duration::from_millis(100);

/// How far ahead of its due time a scheduled run on time is named in our
/// records (`Naming`), at most: a record's read-back takes milliseconds on
/// Kafka and the dev broker, and up to 0.9 s on tansu, so that the run
/// still starts on its due time. A quarter of the heartbeat deadline if
/// that is less, so that the lease the read-back gives covers the start.
pub const NAME_AHEAD: Duration = Duration::from_secs(1);

/// When a start comes (`Seat::start_at`): a run the records name is named
/// at `name`, its child is spawned at `spawn`, and its command starts at
/// `begin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Start {
    pub name: BootTime,
    pub spawn: BootTime,
    pub begin: BootTime,
    /// Under a schedule, the run it starts: worked out once a start, here.
    pub next: Option<super::schedule::Next>,
}

impl Seat {
    /// When a candidate (or fenced leader) may lead: its newest own heartbeat
    /// is fresh, and no other member's claim or earlier term holds it back.
    ///
    /// No fixed wait: the log itself is the proof. Everything written to
    /// the partition before our first record of this term (from the backlog
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
    pub(super) fn promotion_at(&self, v: &View) -> Option<BootTime> {
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
            let at = self.held_until(v, start).unwrap_or(tenure.since);
            return (at < fresh.sent + v.settings.heartbeat_deadline).then_some(at);
        }
        None
    }

    /// Until when the others' records hold back a term that began at
    /// `start` (`Peers::held_until`); with --overlap, an earlier owner's
    /// command may still be finishing, and only earlier contenders do.
    pub(super) fn held_until(&self, v: &View, start: i64) -> Option<BootTime> {
        match v.settings.overlap {
            true => self.peers.contending_until(start),
            false => self.peers.held_until(start),
        }
    }

    pub(super) fn try_promote(&mut self, cx: &mut Ctx, now: BootTime) {
        if self.promotion_at(&cx.v).is_none_or(|at| now < at) {
            return;
        }
        let Some(tenure) = self.tenure.as_mut() else { return };
        let Some(fresh) = tenure.fresh else { return };
        if now.since(fresh.sent) >= cx.v.settings.heartbeat_deadline {
            return;
        }
        // A candidate that has not started the command yet may let another
        // member lead instead: one a hand-over names, or of higher priority.
        if tenure.phase == Phase::Candidate && self.child == Child::Idle {
            if let Some(to) = cx.standbys.defer_to(&cx.v.settings.name, cx.v.settings.priority, now) {
                say::defers(&to);
                cx.standbys.deferring(fresh.offset);
                *cx.hand_to = Some(to);
                return self.stand_aside(cx, Reason::HandedOver);
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
    ///
    /// A scheduled run on time is spawned `HEAD_START` ahead of its due
    /// time (never before a claim or term that holds us back has ended),
    /// its shim waiting for the due time: the command then starts on it,
    /// where the start of its shim, and of the other runs due with it,
    /// came after it. A missed run, a retry and a restart start at once.
    pub(super) fn start_at(&self, v: &View) -> Option<Start> {
        let Plan::Start(ready) = self.plan else { return None };
        if self.paused() || !v.healthy {
            return None;
        }
        let tenure = self.tenure?;
        let (Phase::Leader { .. }, Some(fresh), Some(start)) = (tenure.phase, tenure.fresh, tenure.start) else {
            return None;
        };
        if self.child != Child::Idle {
            return None;
        }
        if !v.settings.runs_on(self.partition) {
            return None;
        }
        let zero = Duration::ZERO;
        let next = match v.settings.schedule_of(self.partition) {
            None => None,
            // Not before our last run's ending is on the partition.
            // (A record sent as it ended, in the same step, is later.)
            Some(_) if self.run_ended.is_some_and(|ended| fresh.sent <= ended) => return None,
            Some(_) => Some(self.next_run(v, ready, v.latest)?),
        };
        let (due, head_start, name_ahead) = match next {
            None => (ready, zero, zero),
            Some(next) => match next.missed {
                true => (next.not_before.map_or(ready, |wall| ready.max(v.anchor.boot_at(wall))), zero, zero),
                false => {
                    let ahead = NAME_AHEAD.min(v.settings.heartbeat_deadline / 4).max(HEAD_START);
                    (v.anchor.boot_at(next.due), HEAD_START, ahead)
                }
            },
        };
        let quiet = self.held_until(v, start);
        let after_quiet = |at: BootTime| quiet.map_or(at, |quiet| quiet.max(at));
        let begin = after_quiet(due);
        let (name, spawn) = (after_quiet(due - name_ahead), after_quiet(due - head_start));
        (begin < fresh.sent + v.settings.heartbeat_deadline).then_some(Start { name, spawn, begin, next })
    }

    /// Starts the command once `start_at` has come, under the lease our
    /// newest heartbeat gives (and not at or past its end); or, once per
    /// wave, exits if a run of our wave already ended. A schedule's run and
    /// a wave's are named in our records first, and start only once a
    /// record that names them is read back (`Naming`): for a wave, the
    /// record that announces our leadership, so the start waits one write
    /// and read more than the promotion (the first record cannot name the
    /// run: its token is that record's offset, and whether the wave still
    /// needs a run is known only once that record is read back).
    pub(super) fn start_if_due(&mut self, cx: &mut Ctx, now: BootTime) {
        let Some(Tenure { phase: Phase::Leader { token }, fresh: Some(fresh), .. }) = self.tenure else { return };
        let lease = fresh.sent + cx.v.settings.heartbeat_deadline;
        let Some(Start { name, spawn, begin, next }) = self.start_at(&cx.v) else { return };
        if now < name || now >= lease {
            return;
        }
        let begin = begin.max(now);
        // Under a schedule, still the run named (a reload, a trigger or a
        // starting deadline may have moved it).
        let named =
            self.naming.take().filter(|n| n.token == token && next.is_none_or(|next| Some(next.due) == n.attempt.due));
        let attempt = match named {
            // Named, and a record naming it read back: it starts.
            Some(naming) if now >= spawn && naming.sent.is_some_and(|sent| fresh.sent >= sent) => Some(naming.attempt),
            Some(naming) => return self.naming = Some(naming),
            None => {
                let attempt = match next {
                    Some(next) => Some(self.scheduled(&cx.v, next, token, (now, begin))),
                    None => match self.turn(&cx.v, token, now) {
                        Turn::Run(attempt) => attempt,
                        Turn::Covered(code) => {
                            say::covered(self.attempt.as_ref(), code);
                            return self.exit(cx, code);
                        }
                    },
                };
                match attempt {
                    // A run the group must not double (a due time's, a
                    // wave's): named first. A service (`--restart always`
                    // or `on-failure`, `--once-within 0`) has no run to
                    // name: every owner runs it anyway, and no two at once
                    // is the claims' and the lease's to keep, not a record's.
                    Some(attempt) => return self.name(attempt, token, now),
                    None => None,
                }
            }
        };
        if now < spawn {
            return;
        }
        self.attempt = attempt.clone();
        self.plan = Plan::Serve;
        self.child = Child::Running;
        self.backoff.began(begin);
        self.child_token = token;
        self.run_until = cx.v.settings.max_runtime_of(self.partition).map(|d| begin + d);
        let begin = (begin > now).then_some(begin);
        cx.out.push(Action::Spawn { partition: self.partition, token, lease, attempt, begin });
    }

    /// Names `attempt` in our next record, sent at once (a millisecond later if
    /// a record of ours already went out at `now`: the one that names it
    /// must be told apart from it by its send time).
    fn name(&mut self, attempt: Attempt, token: i64, now: BootTime) {
        let Some(tenure) = self.tenure.as_mut() else { return };
        let sent_now = tenure.last_sent == Some(now);
        tenure.next_heartbeat = if sent_now { now + Duration::from_millis(1) } else { now };
        self.naming = Some(Naming { attempt, token, sent: None });
    }
}

/// A run decided (a due time's or a wave's), which starts only once one of
/// our records that names it (as the newest run, not ended) is read back:
/// a record that cannot reach the topic does not start a run, and the next
/// owner, finding no trace of it, runs it once (C-10: a member cut off from
/// its partition's leader ran a due time within its lease, and the next
/// owner ran it again). A run named and never started reads as one cut
/// short: the next owner runs it.
#[derive(Clone, Debug)]
pub(super) struct Naming {
    pub attempt: Attempt,
    /// The leadership it was decided under.
    pub token: i64,
    /// When the first record naming it was sent.
    pub sent: Option<BootTime>,
}
