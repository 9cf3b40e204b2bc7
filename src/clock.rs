//! Time as the whole program sees it: `CLOCK_BOOTTIME`.
//!
//! Every deadline that guards safety (heartbeat freshness, the child's lease,
//! the grace period) is measured on this clock because, unlike
//! `CLOCK_MONOTONIC` (and so `std::time::Instant`), it keeps counting while
//! the machine is suspended: a laptop or VM that sleeps through its session
//! timeout must wake up fenced, not believing its last heartbeat is fresh.
//! The clock is machine-wide, so the shim process can enforce a lease that
//! neli-run computed.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on `CLOCK_BOOTTIME`. Plain data so the leadership core can be fed
/// any time it likes in tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootTime(Duration);

impl BootTime {
    /// The current time. The only place that reads the clock.
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

/// One pairing of this clock with the wall clock, taken once per process:
/// times that go to other machines (a wave's start) are converted through
/// it both ways, so a time read from a record and written again is the same
/// millisecond, and a wall-clock step does not move what we already know.
fn anchor() -> (BootTime, u64) {
    static ANCHOR: std::sync::OnceLock<(BootTime, u64)> = std::sync::OnceLock::new();
    *ANCHOR.get_or_init(|| {
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        // Both on whole milliseconds, the records' unit.
        (BootTime(Duration::from_millis(BootTime::now().0.as_millis() as u64)), wall.as_millis() as u64)
    })
}

impl BootTime {
    /// Wall-clock milliseconds since the Unix epoch at this time.
    pub fn wall_ms(self) -> u64 {
        let (boot, wall) = anchor();
        // Whole milliseconds since the anchor, rounded down on both sides of it.
        let ms = (self.0.as_nanos() as i128 - boot.0.as_nanos() as i128).div_euclid(1_000_000);
        (wall as i128 + ms).max(0) as u64
    }

    /// The time at wall-clock milliseconds `ms` (since the Unix epoch);
    /// the boot itself for anything earlier.
    pub fn at_wall_ms(ms: u64) -> BootTime {
        let (boot, wall) = anchor();
        if ms >= wall {
            boot + Duration::from_millis(ms - wall)
        } else {
            boot - Duration::from_millis(wall - ms)
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
        let now = BootTime::now();
        let wall = now.wall_ms();
        for ms in [wall, wall - 1, wall - 1000, wall + 5] {
            assert_eq!(BootTime::at_wall_ms(ms).wall_ms(), ms);
        }
        // Before the boot: the boot itself.
        assert_eq!(BootTime::at_wall_ms(0), BootTime::from_nanos(0));
        assert!(now.since(BootTime::at_wall_ms(wall)) < Duration::from_millis(1));
        let later = now + Duration::from_secs(3);
        assert_eq!(later.wall_ms(), wall + 3000);
    }

    #[test]
    fn now_moves_forward() {
        let a = BootTime::now();
        let b = BootTime::now();
        assert!(b >= a);
    }
}
