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
//! record's send time, a wave's start, a due time): this module is the only
//! one that reads a clock. The leadership core reads none: the shell passes
//! it the time of each event and, once, an [`Anchor`] to convert with.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on `CLOCK_BOOTTIME`. Plain data so the leadership core can be fed
/// any time it likes in tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootTime(Duration);

impl BootTime {
    /// The current time. This module is the only one that reads a clock
    /// (this one here, the wall clock in `wall_ms` and `Anchor::now`).
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
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One moment read on both clocks. The core converts every time that goes
/// to or comes from other machines (a wave's start, a due time) through the
/// one it was started with, both ways: a time read from a record and
/// written again is the same millisecond, and a wall-clock step does not
/// move what it already knows. Plain data, so tests fix it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub boot: BootTime,
    /// Wall-clock ms since the Unix epoch at `boot`.
    pub wall_ms: u64,
}

impl Anchor {
    /// Both clocks, now (on whole milliseconds, the records' unit).
    pub fn now() -> Anchor {
        let wall_ms = wall_ms();
        Anchor { boot: BootTime(Duration::from_millis(BootTime::now().0.as_millis() as u64)), wall_ms }
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
    fn now_moves_forward() {
        let a = BootTime::now();
        let b = BootTime::now();
        assert!(b >= a);
    }
}
