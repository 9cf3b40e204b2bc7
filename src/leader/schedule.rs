//! A schedule of its own (`--every`, `--cron`): which due time the leader
//! runs next. The answer depends only on the newest run the group's records
//! name, on when this leader became ready to run one (it came to lead, or
//! its previous run ended) and on the time, so every leader that reads the
//! same records decides alike: a run that ended is never run again, one cut
//! short is run again, and due times that passed with nobody to run them
//! (nobody led, or the previous run was still going) are *missed*, and
//! follow [`Missed`].
//!
//! Due times are wall-clock milliseconds since the Unix epoch, as the
//! records carry them, and stay so here: a weekly job's last due time may
//! lie before this machine booted, where no `BootTime` reaches.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use super::Attempt;

/// When a scheduled command is due, in wall-clock milliseconds since the
/// Unix epoch. Members compare due times across machines (the records carry
/// them), so every member must compute the same ones: a grid on the epoch,
/// or a cron expression.
pub trait Calendar: Debug + Send + Sync {
    /// The first due time strictly after `ms`, if there is one.
    fn after(&self, ms: u64) -> Option<u64>;
    /// The last due time at or before `ms`, if there is one.
    fn at_or_before(&self, ms: u64) -> Option<u64>;
}

/// What happens to due times that passed with nobody to run them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// Skip them; the next run is the next due time (a run cut short by a
    /// crash is not run again either).
    Skip,
    /// Run the latest of them once, at once (as systemd's Persistent=true
    /// and a Kubernetes CronJob do).
    Once,
    /// Run each of them, oldest first, one after another.
    All,
}

/// A command's schedule, as the core needs it.
#[derive(Clone, Debug)]
pub struct Schedule {
    pub calendar: Arc<dyn Calendar>,
    pub missed: Missed,
    /// A due run that cannot start within this long of its due time is
    /// skipped (Kubernetes' startingDeadlineSeconds); None: never.
    pub starting_deadline: Option<Duration>,
    /// Whether a run that failed is run again; None: never (as cron).
    pub retry: Option<Retry>,
    /// What due times that come while a run goes on do; None: they are
    /// missed, as when nobody ran them, and follow `missed`.
    pub overlap: Option<Overlap>,
    /// When the due times changed (wall-clock ms): a crontab read again
    /// gave the job another line then, or added it (`Leader::set_jobs`).
    /// Nothing due at or before it runs, missed or not: the runs the
    /// records name before it were the old line's, and the new line's due
    /// times before it were nobody's. None: the line the member started
    /// with, whose every due time counts.
    pub since: Option<u64>,
    /// Its line: its due times as written (a crontab line with its zone,
    /// or --every/--cron), in a short digest (`crontab::digest`). Each
    /// run's records name it ([`super::Attempt::line`]), so that a member
    /// started with another line knows the runs on record are not its
    /// line's; a crontab read again whose line differs changed the due
    /// times (`Leader::set_jobs`). None: a line of no text (tests).
    pub line: Option<String>,
}

/// What a due time that comes while the previous run goes on does (a
/// job's runs never overlap: one run at a time is the promise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// Nothing: it is skipped (Kubernetes' Forbid).
    Skip,
    /// It waits: the latest of them runs once the run ends.
    Queue,
    /// The run is stopped, as `--max-runtime` stops one, and the due time
    /// runs (Kubernetes' Replace).
    Replace,
}

/// A run that failed (exited non-zero) is run again, its due time and one
/// attempt more, after `delay`, while it has had at most `times` attempts
/// (a rerun of a run cut short counts as one; a retry cut short is tried
/// again as the same attempt: the failure outranks it) and its next due
/// time has not come nor
/// its starting deadline passed: a later due time supersedes it. A retry is
/// read off the records like any run, so the job's next owner makes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    pub times: u32,
    pub delay: Duration,
}

/// The run to start next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Next {
    /// Its due time (wall-clock ms).
    pub due: u64,
    /// It was missed: it may start at once, not at its due time.
    pub missed: bool,
    /// It runs again the newest run, which was cut short or failed.
    pub retry: bool,
    /// Not before this (wall-clock ms): a retry's delay after the failure.
    pub not_before: Option<u64>,
}

impl Schedule {
    /// `calendar` with cron's ways: the latest missed run only, no
    /// starting deadline, no retry, a due time during a run missed, every
    /// due time counting (a crontab line's, before its options).
    pub fn of(calendar: Arc<dyn Calendar>) -> Schedule {
        Schedule {
            calendar,
            missed: Missed::Once,
            starting_deadline: None,
            retry: None,
            overlap: None,
            since: None,
            line: None,
        }
    }

    /// The next run for a leader ready since `ready`, at `now`, after
    /// `last`: the newest run the group's records name (it ended if it has
    /// a status, else it was cut short). With no run on record (a new
    /// group, or one whose records all expired) nothing counts as missed.
    /// A line changed since the newest run counts from its change
    /// (`since`), as from a run that ended then. (`ready` and `now` in
    /// wall-clock ms.)
    pub fn next(&self, last: Option<&Attempt>, ready: u64, now: u64) -> Option<Next> {
        let change = self.change_after(last);
        let last = change.as_ref().or(last);
        let deadline = self.starting_deadline.map(millis);
        // A due time that passed more than the deadline ago is skipped.
        let fits = |due: u64| deadline.is_none_or(|d| now <= due.saturating_add(d));
        if let Some(retry) = last.and_then(|last| self.retry_of(last, now)).filter(|r| fits(r.due)) {
            return Some(retry);
        }
        // Due times that came while the last run went on, by `overlap`: the
        // latest of them queued, or all skipped (as if run).
        let during = last.and_then(|last| self.during(last));
        if let (Some(due), Some(Overlap::Queue | Overlap::Replace)) = (during, self.overlap) {
            if fits(due) {
                return Some(Next { due, missed: true, retry: false, not_before: None });
            }
        }
        // The newest due time run (or skipped), and whether its run was cut
        // short.
        let last = last.and_then(|attempt| Some((during.unwrap_or(attempt.due?), attempt.code.is_none())));
        let earliest = deadline.map(|d| now.saturating_sub(d));
        let missed = last.and_then(|(done, cut)| {
            let pick = match self.missed {
                Missed::Skip => None,
                Missed::Once => self.calendar.at_or_before(ready).filter(|&d| d > done || (cut && d == done)),
                Missed::All => {
                    let first = if cut { Some(done) } else { self.calendar.after(done) };
                    // The oldest to do that can still start in time.
                    match (first, earliest) {
                        (Some(first), Some(earliest)) => self.at_or_after(earliest).map(|e| e.max(first)),
                        (first, None) => first,
                        (None, _) => None,
                    }
                }
            };
            pick.filter(|&d| d <= ready && fits(d)).map(|due| (due, cut && due == done))
        });
        if let Some((due, retry)) = missed {
            return Some(Next { due, missed: true, retry, not_before: None });
        }
        // On time: the first due time from `ready` on, after the last run.
        let mut due = match last {
            Some((done, _)) if done >= ready => self.calendar.after(done)?,
            _ => self.at_or_after(ready)?,
        };
        if let Some(earliest) = earliest {
            due = due.max(self.at_or_after(earliest)?);
        }
        Some(Next { due, missed: false, retry: false, not_before: None })
    }

    /// The change of line (`since`) as a run of that moment that ended
    /// then, if it came after the newest run (its due time, or the latest
    /// that came while it went on): the due times at or before it are
    /// neither missed nor run again (the old line's run, cut short or
    /// failed, included), and the new line's next due time after it is.
    fn change_after(&self, last: Option<&Attempt>) -> Option<Attempt> {
        let since = self.since?;
        let done = last.and_then(|last| self.during(last).or(last.due));
        if done.is_some_and(|done| done > since) {
            return None;
        }
        let code = Some(0);
        Some(Attempt {
            wave_ms: since,
            wave_token: 0,
            number: 1,
            token: 0,
            code,
            by: None,
            due: Some(since),
            ended: Some(since),
            line: None,
        })
    }

    /// The latest due time that came while `last` went on, if it ended by
    /// itself and `overlap` says what such due times do. A run that started
    /// late, once its next due time had come (catching up missed ones),
    /// leaves the due times behind it to `missed`, unless it gives way to
    /// the newest (replace).
    fn during(&self, last: &Attempt) -> Option<u64> {
        let overlap = self.overlap?;
        let (due, ended) = (last.due?, last.ended.filter(|_| last.code.is_some())?);
        let on_time = self.calendar.after(due).is_some_and(|next| next > last.wave_ms);
        if !on_time && overlap != Overlap::Replace {
            return None;
        }
        self.calendar.at_or_before(ended).filter(|&d| d > due)
    }

    /// The retry of `last`, if it failed and may be run again at `now`.
    fn retry_of(&self, last: &Attempt, now: u64) -> Option<Next> {
        let (retry, due) = (self.retry?, last.due?);
        let failed = last.code.is_some_and(|code| code != 0);
        let superseded = self.calendar.after(due).is_some_and(|next| next <= now);
        if !failed || last.number > retry.times || superseded {
            return None;
        }
        let not_before = last.ended.map(|ended| ended.saturating_add(millis(retry.delay)));
        Some(Next { due, missed: true, retry: true, not_before })
    }

    fn at_or_after(&self, ms: u64) -> Option<u64> {
        self.calendar.after(ms.checked_sub(1)?)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::fixtures::every;

    fn s(secs: u64) -> u64 {
        secs * 1000
    }

    fn every_10s(missed: Missed, deadline: Option<u64>) -> Schedule {
        Schedule {
            calendar: every(10_000),
            missed,
            starting_deadline: deadline.map(Duration::from_secs),
            retry: None,
            overlap: None,
            since: None,
            line: None,
        }
    }

    /// The run of due time `due` (seconds), ended with `code` or cut short.
    fn ran(due: u64, code: Option<u8>) -> Attempt {
        Attempt {
            wave_ms: 1,
            wave_token: 1,
            number: 1,
            token: 1,
            code,
            by: None,
            due: Some(s(due)),
            ended: None,
            line: None,
        }
    }

    fn next(s: &Schedule, last: Option<Attempt>, ready: u64, now: u64) -> Option<(u64, u64, bool)> {
        let n = s.next(last.as_ref(), super::tests::s(ready), super::tests::s(now))?;
        // When it may start, in seconds: at once (when ready) if missed.
        let at = if n.missed { ready } else { n.due / 1000 };
        Some((n.due / 1000, at, n.retry))
    }

    #[test]
    fn with_no_run_on_record_the_first_run_is_the_next_due_time() {
        for missed in [Missed::Skip, Missed::Once, Missed::All] {
            assert_eq!(next(&every_10s(missed, None), None, 25, 25), Some((30, 30, false)), "{missed:?}");
            // A run of a wave (no due time) says nothing about the schedule.
            let wave = Attempt { due: None, ..ran(0, Some(0)) };
            assert_eq!(next(&every_10s(missed, None), Some(wave), 25, 25), Some((30, 30, false)));
        }
    }

    #[test]
    fn a_run_that_ended_is_not_run_again_and_nothing_missed_means_the_next_due_time() {
        for missed in [Missed::Skip, Missed::Once, Missed::All] {
            let s = every_10s(missed, None);
            assert_eq!(next(&s, Some(ran(20, Some(0))), 25, 25), Some((30, 30, false)), "{missed:?}");
            assert_eq!(next(&s, Some(ran(20, Some(1))), 25, 25), Some((30, 30, false)), "a failure too");
            // Ready exactly at a due time: that one is on time, not missed.
            assert_eq!(next(&s, Some(ran(20, Some(0))), 30, 30).map(|n| n.0), Some(30));
        }
    }

    #[test]
    fn missed_due_times_follow_the_policy() {
        // The run of 20 ended; 30, 40 and 50 passed with nobody to run them.
        let last = || Some(ran(20, Some(0)));
        assert_eq!(next(&every_10s(Missed::Skip, None), last(), 55, 55), Some((60, 60, false)));
        assert_eq!(next(&every_10s(Missed::Once, None), last(), 55, 55), Some((50, 55, false)), "the latest, at once");
        assert_eq!(next(&every_10s(Missed::All, None), last(), 55, 55), Some((30, 55, false)), "the oldest first");
        // All: once 30 has run, 40 is next, still at once.
        assert_eq!(next(&every_10s(Missed::All, None), Some(ran(30, Some(0))), 57, 57), Some((40, 57, false)));
        // Once: a due time that passed during our own run is missed too.
        assert_eq!(next(&every_10s(Missed::Once, None), Some(ran(50, Some(0))), 62, 62), Some((60, 62, false)));
    }

    #[test]
    fn a_run_cut_short_is_run_again_unless_skipped_or_superseded() {
        let cut = || Some(ran(20, None));
        assert_eq!(next(&every_10s(Missed::All, None), cut(), 25, 25), Some((20, 25, true)));
        assert_eq!(next(&every_10s(Missed::Once, None), cut(), 25, 25), Some((20, 25, true)));
        assert_eq!(next(&every_10s(Missed::Skip, None), cut(), 25, 25), Some((30, 30, false)));
        // Once: a later due time also passed; only the latest runs.
        assert_eq!(next(&every_10s(Missed::Once, None), cut(), 45, 45), Some((40, 45, false)));
        assert_eq!(next(&every_10s(Missed::All, None), cut(), 45, 45), Some((20, 45, true)));
    }

    #[test]
    fn the_starting_deadline_skips_what_can_no_longer_start_in_time() {
        let last = || Some(ran(20, Some(0)));
        // Deadline 12 s at 55: 30 and 40 are too late, 50 is not.
        assert_eq!(next(&every_10s(Missed::All, Some(12)), last(), 55, 55), Some((50, 55, false)));
        assert_eq!(next(&every_10s(Missed::Once, Some(12)), last(), 55, 55), Some((50, 55, false)));
        // A deadline reaching back past the last run does not run it again.
        assert_eq!(next(&every_10s(Missed::All, Some(12)), last(), 25, 25), Some((30, 30, false)));
        assert_eq!(next(&every_10s(Missed::Skip, Some(12)), last(), 25, 25), Some((30, 30, false)));
        // Deadline 3 s: every missed one is too late; the next due time.
        assert_eq!(next(&every_10s(Missed::All, Some(3)), last(), 55, 55), Some((60, 60, false)));
        assert_eq!(next(&every_10s(Missed::Once, Some(3)), last(), 55, 55), Some((60, 60, false)));
        // A cut-short run past its deadline is not run again.
        assert_eq!(next(&every_10s(Missed::All, Some(3)), Some(ran(20, None)), 25, 25), Some((30, 30, false)));
        // An on-time run held back past its deadline (by a claim): the next.
        assert_eq!(next(&every_10s(Missed::Skip, Some(3)), last(), 25, 34), Some((40, 40, false)));
        // The deadline is counted when asked, not when ready.
        assert_eq!(next(&every_10s(Missed::Once, Some(6)), last(), 55, 56), Some((50, 55, false)));
        assert_eq!(next(&every_10s(Missed::Once, Some(6)), last(), 55, 57), Some((60, 60, false)));
    }

    #[test]
    fn a_failed_run_is_run_again_after_the_delay_while_it_has_retries_and_its_next_due_time_has_not_come() {
        let retry = Some(Retry { times: 2, delay: Duration::from_secs(3) });
        let sched = Schedule { retry, ..every_10s(Missed::Skip, None) };
        // The run of 20, attempt `number`, ended at 21 with `code`.
        let ended = |number, code| Attempt { number, ended: Some(s(21)), ..ran(20, Some(code)) };
        let retry_at = |n: Option<Next>| n.map(|n| (n.due / 1000, n.not_before.map(|t| t / 1000), n.retry));
        assert_eq!(retry_at(sched.next(Some(&ended(1, 1)), s(21), s(21))), Some((20, Some(24), true)));
        assert_eq!(
            retry_at(sched.next(Some(&ended(2, 3)), s(22), s(29))),
            Some((20, Some(24), true)),
            "attempt 3 of 3"
        );
        // Not after a success, nor a third failure, nor once 30 has come.
        assert_eq!(retry_at(sched.next(Some(&ended(1, 0)), s(21), s(21))), Some((30, None, false)));
        assert_eq!(retry_at(sched.next(Some(&ended(3, 1)), s(21), s(21))), Some((30, None, false)));
        assert_eq!(retry_at(sched.next(Some(&ended(1, 1)), s(21), s(30))), Some((30, None, false)));
        // Nor past the starting deadline (asked at 23, the deadline 22).
        let sched = Schedule { starting_deadline: Some(Duration::from_secs(2)), ..sched };
        assert_eq!(retry_at(sched.next(Some(&ended(1, 1)), s(21), s(22))), Some((20, Some(24), true)));
        assert_eq!(retry_at(sched.next(Some(&ended(1, 1)), s(21), s(23))), Some((30, None, false)));
        // Without retries, a failure is not run again.
        let sched = every_10s(Missed::All, None);
        assert_eq!(retry_at(sched.next(Some(&ended(1, 1)), s(21), s(21))), Some((30, None, false)));
    }

    #[test]
    fn due_times_that_came_during_a_run_follow_the_overlap_policy_and_those_after_it_the_missed_one() {
        // The run of 20, started at 20, ended at 45: 30 and 40 came while it
        // went on.
        let long = |code| Some(Attempt { wave_ms: s(20), ended: Some(s(45)), ..ran(20, code) });
        let with = |overlap, missed| Schedule { overlap, ..every_10s(missed, None) };
        for missed in [Missed::Skip, Missed::Once, Missed::All] {
            let at = |overlap| next(&with(overlap, missed), long(Some(0)), 45, 45);
            assert_eq!(at(Some(Overlap::Skip)), Some((50, 50, false)), "{missed:?}");
            assert_eq!(at(Some(Overlap::Queue)), Some((40, 45, false)), "the latest, at once");
            assert_eq!(at(Some(Overlap::Replace)), Some((40, 45, false)), "{missed:?}");
        }
        // Without one, they are missed (today's rule).
        assert_eq!(next(&with(None, Missed::All), long(Some(0)), 45, 45), Some((30, 45, false)));
        // Due times after the run ended (nobody ran them: its owner died)
        // are the missed policy's, whatever the overlap one.
        let skip_all = with(Some(Overlap::Skip), Missed::All);
        assert_eq!(next(&skip_all, long(Some(0)), 75, 75), Some((50, 75, false)));
        // A run cut short says nothing of when it ended: missed, and run again.
        let cut = Some(Attempt { ended: None, ..ran(20, None) });
        assert_eq!(next(&skip_all, cut, 45, 45), Some((20, 45, true)));
        // A run that started late, catching up (20 started at 35, once 30
        // had come), leaves the due times behind it and during it to the
        // missed policy; but a replaced one gives way to the newest.
        let late = |overlap, started| {
            let run = Attempt { wave_ms: s(started), ended: Some(s(45)), ..ran(20, Some(0)) };
            next(&with(overlap, Missed::All), Some(run), 45, 45)
        };
        assert_eq!(late(Some(Overlap::Skip), 35), Some((30, 45, false)));
        assert_eq!(late(Some(Overlap::Queue), 35), Some((30, 45, false)));
        assert_eq!(late(Some(Overlap::Replace), 35), Some((40, 45, false)));
        // Started as 30 came: late too.
        assert_eq!(late(Some(Overlap::Skip), 30), Some((30, 45, false)));
        // A queued due time past the starting deadline is skipped.
        let late =
            Schedule { starting_deadline: Some(Duration::from_secs(3)), ..with(Some(Overlap::Queue), Missed::Once) };
        assert_eq!(next(&late, long(Some(0)), 45, 45), Some((50, 50, false)));
    }

    #[test]
    fn a_line_changed_after_the_newest_run_counts_from_the_change() {
        // "0 3 * * *" ran on 2026-11-28 at 03:00 UTC; at 02:30 on the 29th
        // it became "0 2 * * *": not 02:00 that day, but the 30th's.
        let utc = crate::calendar::Zone::Named(chrono_tz::UTC);
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).expect("a time").timestamp_millis() as u64;
        let calendar = Arc::new(crate::calendar::Cron::new("0 2 * * *", utc).expect("a cron line"));
        let at_3 = Attempt { due: Some(at("2026-11-28T03:00:00Z")), ..ran(0, Some(0)) };
        let (change, ready) = (at("2026-11-29T02:30:00Z"), at("2026-11-28T03:00:01Z"));
        for missed in [Missed::Skip, Missed::Once, Missed::All] {
            let line = Schedule { calendar: calendar.clone(), since: Some(change), ..every_10s(missed, None) };
            let n = line.next(Some(&at_3), ready, change + 1).expect("a next run");
            assert_eq!((n.due, n.missed), (at("2026-11-30T02:00:00Z"), false), "{missed:?}");
            // Before the fix: the 29th's 02:00, at once.
            let unchanged = Schedule { since: None, ..line };
            assert_eq!(unchanged.next(Some(&at_3), ready, change + 1).map(|n| n.due), Some(at("2026-11-29T02:00:00Z")));
        }
        // every 10 s from 45 (the run of 20 cut short, or failed with a
        // retry waiting): neither is run again, nor 30 or 40; 50 is next.
        let retry = Some(Retry { times: 3, delay: Duration::from_secs(1) });
        for last in [ran(20, None), Attempt { ended: Some(s(21)), ..ran(20, Some(1)) }] {
            for missed in [Missed::Skip, Missed::Once, Missed::All] {
                let line = Schedule { retry, since: Some(s(45)), ..every_10s(missed, None) };
                assert_eq!(next(&line, Some(last.clone()), 46, 46), Some((50, 50, false)), "{missed:?} {last:?}");
                // A due time after the change that nobody ran is missed.
                assert_eq!(
                    next(&line, Some(last.clone()), 56, 56).map(|n| n.0),
                    Some(if missed == Missed::Skip { 60 } else { 50 })
                );
            }
        }
        // A change in the very millisecond of the run's due time still
        // comes after it: the run of 40, cut short, is not run again.
        let line = Schedule { retry, since: Some(s(40)), ..every_10s(Missed::All, None) };
        assert_eq!(next(&line, Some(ran(40, None)), 41, 41), Some((50, 50, false)));
        // A run after the change is the newest: the change says no more.
        let line = Schedule { since: Some(s(45)), ..every_10s(Missed::All, None) };
        assert_eq!(next(&line, Some(ran(50, Some(0))), 75, 75), Some((60, 75, false)));
    }

    #[test]
    fn a_run_recorded_ahead_of_our_clock_is_not_run_again() {
        // Another host's clock is ahead: it ran the due time 30 at our 25.
        for missed in [Missed::Skip, Missed::Once, Missed::All] {
            assert_eq!(next(&every_10s(missed, None), Some(ran(30, Some(0))), 25, 25), Some((40, 40, false)));
        }
    }
}
