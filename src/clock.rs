//! Time as the whole program sees it: `CLOCK_BOOTTIME`.
//!
//! Every deadline that guards safety (heartbeat freshness, the child's lease,
//! the grace period) is measured on this clock because, unlike
//! `CLOCK_MONOTONIC` (and so `std::time::Instant`), it keeps counting while
//! the machine is suspended: a laptop or VM that sleeps through its session
//! timeout must wake up fenced, not believing its last heartbeat is fresh.
//! The clock is machine-wide, so the shim process can enforce a lease that
//! neli-run computed.
//!
//! The wall clock is read here too, for what other machines compare (a
//! record's send time, a wave's start, a due time). Every clock reading
//! that decides anything (a deadline, a due time, a record's time) is
//! made through this module. The leadership core reads none: the shell
//! passes it the time of each event and an [`Anchor`] to convert with,
//! read anew before each step, which the core takes up when the wall clock
//! stepped ([`Anchor::stepped`]). Elsewhere, `std::time::Instant` (or
//! tokio's) only bounds waits that decide nothing about leading (polls and
//! give-ups in `kafka/`, `status/`, `leader_file.rs`, `child/`, warm's
//! restart delay), and `SystemTime` only stamps what people read (the
//! leader file's `since`) or names a file (warm's token directory).

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on `CLOCK_BOOTTIME`. Plain data so the leadership core can be fed
/// any time it likes in tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootTime(Duration);

impl BootTime {
    /// The current time: what every deadline is measured on.
    pub fn now() -> BootTime {
        let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
            .expect("CLOCK_BOOTTIME is available on every Linux since 2.6.39");
        BootTime(Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32))
    }

    /// Builds a time from nanoseconds since boot (what heartbeat records and
    /// lease messages carry).
    pub fn from_nanos(nanos: u64) -> BootTime {
        BootTime(Duration::from_nanos(nanos))
    }

    /// Nanoseconds since boot, for the wire.
    pub fn as_nanos(self) -> u64 {
        self.0.as_nanos() as u64
    }

    /// How long ago `earlier` was, or zero when it is not earlier.
    pub fn since(self, earlier: BootTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

/// Wall-clock milliseconds since the Unix epoch, now: what other machines
/// can compare (records' send times, due times), never a deadline here.
pub fn wall_ms() -> u64 {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    ms.saturating_add_signed(test_offset_ms())
}

/// The instant the wall clock reads `ms` (since the Unix epoch), on
/// `CLOCK_REALTIME` in nanoseconds: when a scheduled run's shim starts its
/// command. (A test's offset, below, taken off: the shim reads the clock
/// itself.)
pub fn realtime_ns_at(ms: u64) -> u64 {
    ms.saturating_add_signed(test_offset_ms().saturating_neg()).saturating_mul(1_000_000)
}

/// Debug builds only: `NELI_TEST_WALL_OFFSET_FILE=PATH` adds the signed
/// milliseconds PATH holds to every wall-clock reading, read anew each
/// time, so that a test steps neli-run's wall clock (by rewriting the
/// file) without root and without touching the machine's. It warns once,
/// so that no log of such a run passes for a normal one.
#[cfg(debug_assertions)]
fn test_offset_ms() -> i64 {
    let Some(path) = std::env::var_os("NELI_TEST_WALL_OFFSET_FILE") else { return 0 };
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| tracing::warn!("TEST BUILD: the wall clock is offset by NELI_TEST_WALL_OFFSET_FILE"));
    std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// A release build reads the wall clock as it is.
#[cfg(not(debug_assertions))]
fn test_offset_ms() -> i64 {
    0
}

/// How far the wall clock must move against `CLOCK_BOOTTIME` to count as
/// a step. The two run at the same rate (NTP's slewing adjusts both; a
/// suspension advances both), so they part only when the wall clock is
/// set: by an NTP client stepping it (chrony beyond `makestep`'s 1 s,
/// systemd-timesyncd beyond 0.4 s), a leap second, or by hand. Well above
/// what reading the two clocks one after the other can differ by.
pub const STEP: Duration = Duration::from_millis(100);

/// One moment read on both clocks. The core converts every time that goes
/// to or comes from other machines (a wave's start, a due time) through
/// one, both ways: a time read from a record and written again is the same
/// millisecond. It keeps the one it was started with until the wall clock
/// steps ([`Anchor::stepped`]), then takes the new reading: due times
/// then follow the wall clock, as cron's do. Plain data, so tests fix it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub boot: BootTime,
    /// Wall-clock ms since the Unix epoch at `boot`.
    pub wall_ms: u64,
}

impl Anchor {
    /// Both clocks, now (on whole milliseconds, the records' unit). Read
    /// between two readings of the boot clock, again if those lie more
    /// than a millisecond apart (the thread was preempted between them):
    /// a pair read apart would look like a step.
    pub fn now() -> Anchor {
        Anchor::read(BootTime::now, wall_ms)
    }

    /// `now` on the clocks given (tests give theirs): up to five tries.
    fn read(mut boot: impl FnMut() -> BootTime, mut wall: impl FnMut() -> u64) -> Anchor {
        let ms = |t: BootTime| BootTime(Duration::from_millis(t.0.as_millis() as u64));
        let mut tries = 0;
        loop {
            let before = boot();
            let wall_ms = wall();
            let after = boot();
            tries += 1;
            if after.since(before) <= Duration::from_millis(1) || tries == 5 {
                return Anchor { boot: ms(before), wall_ms };
            }
        }
    }

    /// How far the wall clock stepped (in ms, forward positive) between
    /// this anchor and `read`, a later reading of both clocks; None while
    /// they agree within [`STEP`].
    pub fn stepped(self, read: Anchor) -> Option<i64> {
        let step = read.wall_ms as i128 - self.wall_ms_at(read.boot) as i128;
        (step.unsigned_abs() >= STEP.as_millis()).then_some(step as i64)
    }

    /// Wall-clock milliseconds since the Unix epoch at `t`.
    pub fn wall_ms_at(self, t: BootTime) -> u64 {
        // Whole milliseconds since the anchor, rounded down on both sides of it.
        let ms = (t.0.as_nanos() as i128 - self.boot.0.as_nanos() as i128).div_euclid(1_000_000);
        (self.wall_ms as i128 + ms).max(0) as u64
    }

    /// The time at wall-clock milliseconds `ms` (since the Unix epoch);
    /// the boot itself for anything earlier.
    pub fn boot_at(self, ms: u64) -> BootTime {
        if ms >= self.wall_ms {
            self.boot + Duration::from_millis(ms - self.wall_ms)
        } else {
            self.boot - Duration::from_millis(self.wall_ms - ms)
        }
    }
}

impl Add<Duration> for BootTime {
    type Output = BootTime;
    fn add(self, d: Duration) -> BootTime {
        BootTime(self.0 + d)
    }
}

impl Sub<Duration> for BootTime {
    type Output = BootTime;
    fn sub(self, d: Duration) -> BootTime {
        BootTime(self.0.saturating_sub(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_round_trip_and_since_saturates() {
        let t = BootTime::from_nanos(5_000_000_000);
        assert_eq!(BootTime::from_nanos(t.as_nanos()), t);
        assert_eq!((t + Duration::from_secs(2)).since(t), Duration::from_secs(2));
        assert_eq!(t.since(t + Duration::from_secs(2)), Duration::ZERO);
    }

    #[test]
    fn wall_clock_times_convert_there_and_back_to_the_millisecond() {
        // Booted 100 s ago, on the wall clock of 2023-11-14T22:13:20Z.
        let anchor = Anchor { boot: BootTime::from_nanos(100_000_000_000), wall_ms: 1_700_000_000_000 };
        let wall = anchor.wall_ms;
        for ms in [wall, wall - 1, wall - 1000, wall + 5] {
            assert_eq!(anchor.wall_ms_at(anchor.boot_at(ms)), ms);
        }
        // Before the boot: the boot itself.
        assert_eq!(anchor.boot_at(0), BootTime::from_nanos(0));
        // Within a millisecond: rounded down, on both sides of the anchor.
        assert_eq!(anchor.wall_ms_at(anchor.boot + Duration::from_micros(999)), wall);
        assert_eq!(anchor.wall_ms_at(anchor.boot - Duration::from_micros(1)), wall - 1);
        assert_eq!(anchor.wall_ms_at(anchor.boot + Duration::from_secs(3)), wall + 3000);
        // Read from the machine: whole milliseconds.
        let now = Anchor::now();
        assert_eq!(now.boot.as_nanos() % 1_000_000, 0);
        assert_eq!(now.wall_ms_at(now.boot_at(now.wall_ms + 7)), now.wall_ms + 7);
    }

    #[test]
    fn a_step_is_the_wall_clock_moving_against_the_boot_clock_by_100_ms_or_more() {
        let anchor = Anchor { boot: BootTime::from_nanos(100_000_000_000), wall_ms: 1_700_000_000_000 };
        // Read 10 s later: both clocks moved alike, whatever the rounding.
        let later = |wall_ms| Anchor { boot: anchor.boot + Duration::from_secs(10), wall_ms };
        let on_time = anchor.wall_ms + 10_000;
        for wall in [on_time, on_time + 99, on_time - 99] {
            assert_eq!(anchor.stepped(later(wall)), None, "{}", wall as i64 - on_time as i64);
        }
        assert_eq!(anchor.stepped(later(on_time + 100)), Some(100));
        assert_eq!(anchor.stepped(later(on_time - 100)), Some(-100));
        assert_eq!(anchor.stepped(later(on_time + 3_600_000)), Some(3_600_000), "NTP's first sync");
        assert_eq!(anchor.stepped(later(on_time - 60_000)), Some(-60_000), "set back a minute");
        // Read from the machine, twice: no step (the test hook is not set here).
        let now = Anchor::now();
        assert_eq!(now.stepped(Anchor::now()), None);
    }

    #[test]
    fn a_reading_interrupted_between_the_two_clocks_is_read_again() {
        // Boot-clock readings `apart` ms apart, then 0.5 ms apart; the wall
        // clock counts its readings.
        let read = |apart: u64| {
            let (mut boots, mut walls) = (0u64, 0u64);
            let anchor = Anchor::read(
                || {
                    boots += 1;
                    // Before and after of try n: n*100 ms, then +apart (try 1) or +0.5.
                    let (n, late) = (boots.div_ceil(2), boots % 2 == 0);
                    let gap = if n == 1 { apart * 1_000_000 } else { 500_000 };
                    BootTime::from_nanos(n * 100_000_000 + if late { gap } else { 0 })
                },
                || {
                    walls += 1;
                    walls
                },
            );
            (anchor, walls)
        };
        assert_eq!(read(1), (Anchor { boot: BootTime::from_nanos(100_000_000), wall_ms: 1 }, 1));
        assert_eq!(read(5), (Anchor { boot: BootTime::from_nanos(200_000_000), wall_ms: 2 }, 2), "read again");
        // Never read within a millisecond: the fifth try stands.
        let (mut boots, mut walls) = (0u64, 0u64);
        let anchor = Anchor::read(
            || {
                boots += 1;
                BootTime::from_nanos(boots * 10_000_000)
            },
            || {
                walls += 1;
                walls
            },
        );
        assert_eq!(anchor, Anchor { boot: BootTime::from_nanos(90_000_000), wall_ms: 5 });
    }

    #[test]
    fn now_moves_forward() {
        let a = BootTime::now();
        let b = BootTime::now();
        assert!(b >= a);
    }
}
