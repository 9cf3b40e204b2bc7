//! How long a seat waits before it starts a command that exited under
//! `--restart` again: `--restart-delay`, doubled for each failed run in a
//! row, up to [`BOUND`].
//!
//! Why: a command that cannot start (a missing file, a refused
//! connection, `false`) failed and was started again every
//! `--restart-delay`, for ever: 1,992 starts in 10 s at `--restart-delay
//! 0` (audit E11), each with its log lines and fork. systemd and
//! Kubernetes back off alike; a stated bound keeps a command that comes
//! back by itself (a database up again) from waiting long.
//!
//! The rule, pure (time comes in as `now`):
//! - a run that exits 0 resets the streak: under `--restart always` a
//!   command that ends well is started again after `--restart-delay`
//!   every time, a loop the operator asked for;
//! - a failed run (non-zero, or killed) adds one to the streak; the first
//!   failure waits `--restart-delay`, the n-th in a row
//!   `max(--restart-delay, 100 ms) * 2^(n-1)`, at most [`BOUND`] (or
//!   `--restart-delay`, when that is longer);
//! - a run that lasted [`BOUND`] or longer starts a new streak, as does
//!   the first run we know of. A run's length is counted from its
//!   command's start (`began`).

use std::time::Duration;

use tracing::{info, warn};

use crate::clock::BootTime;
use crate::exit::ChildStatus;
use crate::leader::Restart;

/// The longest wait between a failed run and the next, and the run length
/// that ends a streak: a command that has come back is started within
/// this, and one that ran this long was not stuck in a start-up loop.
pub const BOUND: Duration = Duration::from_secs(30);

/// The step doubled from when `--restart-delay` is shorter (0 included,
/// where doubling would stay 0).
const FLOOR: Duration = Duration::from_millis(100);

/// One command's streak of failed runs: a seat's (the core), or a warm
/// standby's (shell/warm.rs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    /// Failed runs in a row, the latest included.
    failed: u32,
    /// When the latest run began (see the module's rule).
    due: Option<BootTime>,
}

/// The decision for one exit: the wait, and what to say of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Step {
    pub delay: Duration,
    /// Failed runs in a row (0 after a run that exited 0).
    pub failed: u32,
    /// The wait is longer than the one before it: said once, as a warning.
    pub grew: bool,
}

impl Backoff {
    /// The command begins at `at`: its run's length counts from there.
    pub fn began(&mut self, at: BootTime) {
        self.due = Some(at);
    }

    /// A run that exited with `status` at `now` is to start again: how long
    /// until it does, under `--restart-delay` `base`.
    fn next(&mut self, base: Duration, failed: bool, now: BootTime) -> Step {
        let long = self.due.is_none_or(|due| now.since(due) >= BOUND);
        if !failed || long {
            self.failed = 0;
        }
        if failed {
            self.failed = self.failed.saturating_add(1);
        }
        let delay = delay(base, self.failed);
        self.due = Some(now + delay);
        Step { delay, failed: self.failed, grew: delay > self::delay(base, self.failed.saturating_sub(1)) }
    }

    /// The restart policy, decided here once for every command neli-run
    /// starts again (a seat's, in the core; a warm standby's, in the
    /// shell): None when `restart` says a run that exited with `status` at
    /// `now` is over, else how long until it starts again under
    /// `--restart-delay` `base`, said in the log (a longer wait as a
    /// warning with the streak, once per step).
    pub fn after(
        &mut self,
        restart: Restart,
        (base, status, now): (Duration, ChildStatus, BootTime),
        whose: Whose,
    ) -> Option<Duration> {
        if !restart.again(status) {
            return None;
        }
        let step = self.next(base, !status.success(), now);
        let delay = step.delay;
        if step.grew {
            let bound = if delay >= BOUND.max(base) { " (its bound)" } else { "" };
            let what = match whose {
                Whose::Seat => "the command keeps failing",
                Whose::WarmStandby => "the standby's command keeps failing",
            };
            warn!(%status, failed_runs = step.failed, ?delay, "{what}: backing off, restarting after a longer wait{bound}");
        } else {
            match whose {
                Whose::Seat => info!(%status, ?delay, "restarting the child (--restart)"),
                Whose::WarmStandby => info!(%status, ?delay, "the standby's command exited; restarting it (--restart)"),
            }
        }
        Some(delay)
    }
}

/// Whose command `Backoff::after` decides for, as the log names it.
#[derive(Clone, Copy, Debug)]
pub enum Whose {
    /// A seat's (the leader's, or a role's).
    Seat,
    /// `--warm`: a standby's, which runs while another member leads.
    WarmStandby,
}

/// The wait after the `failed`-th failed run in a row (0: a clean exit).
fn delay(base: Duration, failed: u32) -> Duration {
    if failed <= 1 {
        return base;
    }
    let doubled = base.max(FLOOR).saturating_mul(2u32.saturating_pow(failed - 1));
    doubled.min(BOUND.max(base))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn at(secs: f64) -> BootTime {
        BootTime::from_nanos((secs * 1e9) as u64)
    }

    /// The waits of `n` failed runs in a row, each exiting as soon as it starts.
    fn storm(base: Duration, n: usize) -> Vec<Duration> {
        let (mut b, mut now) = (Backoff::default(), at(100.0));
        (0..n)
            .map(|_| {
                let d = b.next(base, true, now).delay;
                now = now + d;
                d
            })
            .collect()
    }

    #[test]
    fn failed_runs_in_a_row_double_the_wait_up_to_the_bound() {
        let secs = |v: &[f64]| v.iter().map(|s| Duration::from_secs_f64(*s)).collect::<Vec<_>>();
        assert_eq!(storm(S, 8), secs(&[1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]));
        // 0 doubles from 100 ms: the audit's storm (1,992 starts in 10 s) is 7.
        assert_eq!(storm(Duration::ZERO, 4), secs(&[0.0, 0.2, 0.4, 0.8]));
        assert_eq!(storm(Duration::ZERO, 40).last(), Some(&BOUND), "no overflow past the bound");
        assert_eq!(storm(Duration::from_secs(60), 3), secs(&[60.0; 3]), "a longer --restart-delay is its own bound");
    }

    #[test]
    fn each_longer_wait_is_said_once() {
        let (mut b, mut now, mut said) = (Backoff::default(), at(0.0), vec![]);
        for _ in 0..9 {
            let step = b.next(S, true, now);
            said.push((step.failed, step.grew));
            now = now + step.delay;
        }
        let grew: Vec<u32> = said.iter().filter(|s| s.1).map(|s| s.0).collect();
        assert_eq!(grew, [2, 3, 4, 5, 6], "1 s is --restart-delay itself; 30 s once, not again");
    }

    #[test]
    fn a_long_run_or_a_clean_exit_ends_the_streak() {
        let mut b = Backoff::default();
        assert_eq!(b.next(S, true, at(0.0)).delay, S);
        assert_eq!(b.next(S, true, at(1.0)).delay, 2 * S, "ran 0 s after its due time");
        // Due at 3 s; ran 29.9 s: still one streak.
        assert_eq!(b.next(S, true, at(32.9)).delay, 4 * S);
        // Due at 36.9 s; ran 30 s: a new streak.
        let step = b.next(S, true, at(66.9));
        assert_eq!((step.delay, step.failed, step.grew), (S, 1, false));
        assert_eq!(b.next(S, true, at(67.9)).delay, 2 * S);
        let clean = b.next(S, false, at(69.9));
        assert_eq!((clean.delay, clean.failed, clean.grew), (S, 0, false), "exit 0 waits --restart-delay");
        assert_eq!(b.next(S, true, at(70.9)).delay, S, "and the next failure starts a new streak");
    }

    #[test]
    fn a_run_held_back_counts_from_its_start_not_from_when_it_was_due() {
        let mut b = Backoff::default();
        assert_eq!(b.next(S, true, at(0.0)).delay, S);
        // Due at 1 s, held back (no lease yet, a pause) until 40 s; it fails
        // at 41 s, after 1 s of running: the same streak.
        b.began(at(40.0));
        assert_eq!(b.next(S, true, at(41.0)).delay, 2 * S);
    }
}
