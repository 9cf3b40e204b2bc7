//! The calendars behind `--every` and `--cron`: due times as wall-clock
//! milliseconds since the Unix epoch, which every member computes alike
//! (the records compare them across machines). Each implements the core's
//! [`Calendar`]; the policy that picks which due time runs is the core's
//! (`leader/schedule.rs`).

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeZone};

use crate::leader::Calendar;

/// The shortest --every (and crontab `@every`): a schedule, not a busy loop.
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// The longest: a yearly job is a cron expression.
pub const MAX_EVERY: Duration = Duration::from_secs(366 * 24 * 3600);

/// `--every`: due every `period`, counted from the Unix epoch.
#[derive(Debug)]
pub struct Every {
    period_ms: u64,
}

impl Every {
    /// None for a period under a millisecond.
    pub fn new(period: Duration) -> Option<Every> {
        let period_ms = u64::try_from(period.as_millis()).ok().filter(|&p| p > 0)?;
        Some(Every { period_ms })
    }
}

impl Calendar for Every {
    fn after(&self, ms: u64) -> Option<u64> {
        (ms / self.period_ms).checked_add(1)?.checked_mul(self.period_ms)
    }

    fn at_or_before(&self, ms: u64) -> Option<u64> {
        Some(ms / self.period_ms * self.period_ms)
    }
}

/// `--time-zone`.
#[derive(Clone, Copy, Debug)]
pub enum Zone {
    /// The TZ variable, else /etc/localtime.
    Local,
    Named(chrono_tz::Tz),
}

impl FromStr for Zone {
    type Err = String;

    fn from_str(s: &str) -> Result<Zone, String> {
        if s.eq_ignore_ascii_case("local") {
            return Ok(Zone::Local);
        }
        chrono_tz::Tz::from_str(s).map(Zone::Named).or_else(|_| {
            // Zone names are case-sensitive in the database, not for people.
            chrono_tz::Tz::from_str_insensitive(s)
                .map(Zone::Named)
                .map_err(|_| format!("unknown time zone '{s}': give an IANA name such as Europe/Berlin, UTC, or local"))
        })
    }
}

impl std::fmt::Display for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Zone::Local => f.write_str("local"),
            Zone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

impl Zone {
    /// `ms` (wall-clock, since the epoch) as people read it in this zone,
    /// with its offset: the offset tells the two 02:30s of a day the clocks
    /// go back apart.
    pub fn show(&self, ms: u64) -> String {
        const FORMAT: &str = "%Y-%m-%d %H:%M:%S %:z";
        let Ok(ms) = i64::try_from(ms) else { return format!("{ms} ms") };
        let shown = match self {
            Zone::Local => chrono::Local.timestamp_millis_opt(ms).single().map(|t| t.format(FORMAT).to_string()),
            Zone::Named(tz) => tz.timestamp_millis_opt(ms).single().map(|t| t.format(FORMAT).to_string()),
        };
        shown.unwrap_or_else(|| format!("{ms} ms"))
    }
}

/// `--cron`: due at the times of a cron expression, in a time zone.
#[derive(Debug)]
pub struct Cron {
    cron: croner::Cron,
    zone: Zone,
}

impl Cron {
    /// Parses `expr`; an expression that never comes (30 February) is
    /// refused here rather than leaving the group with nothing to run.
    pub fn new(expr: &str, zone: Zone) -> Result<Cron, String> {
        let cron = croner::Cron::from_str(expr).map_err(|e| format!("{e}"))?;
        let cron = Cron { cron, zone };
        if cron.after(crate::clock::wall_ms()).is_none() {
            return Err("it never comes (no such date)".into());
        }
        Ok(cron)
    }

    /// The occurrence after (or before, at or) `ms`, in our zone.
    fn find(&self, ms: u64, forward: bool) -> Option<u64> {
        fn find<Z: TimeZone>(cron: &croner::Cron, at: DateTime<Z>, forward: bool) -> Option<i64> {
            let found =
                if forward { cron.find_next_occurrence(&at, false) } else { cron.find_previous_occurrence(&at, true) };
            found.ok().map(|t| t.timestamp_millis())
        }
        let ms = i64::try_from(ms).ok()?;
        let found = match self.zone {
            Zone::Local => find(&self.cron, chrono::Local.timestamp_millis_opt(ms).single()?, forward),
            Zone::Named(tz) => find(&self.cron, tz.timestamp_millis_opt(ms).single()?, forward),
        };
        u64::try_from(found?).ok()
    }
}

impl Calendar for Cron {
    fn after(&self, ms: u64) -> Option<u64> {
        self.find(ms, true)
    }

    fn at_or_before(&self, ms: u64) -> Option<u64> {
        self.find(ms, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: Option<u64>) -> u64 {
        t.expect("a due time")
    }

    const HOUR: u64 = 3_600_000;
    /// 2023-11-14T22:13:20Z, a Tuesday.
    const T: u64 = 1_700_000_000_000;

    #[test]
    fn every_lies_on_a_grid_from_the_epoch() {
        let five = Every::new(Duration::from_secs(300)).unwrap();
        let grid = T / 300_000 * 300_000;
        assert_eq!(ms(five.after(T)), grid + 300_000);
        assert_eq!(ms(five.at_or_before(T)), grid);
        // A due time itself: at_or_before is it, after is the next.
        assert_eq!(ms(five.at_or_before(grid)), grid);
        assert_eq!(ms(five.after(grid)), grid + 300_000);
        // A millisecond before it: after is it.
        assert_eq!(ms(five.after(grid - 1)), grid);
        assert!(Every::new(Duration::from_micros(999)).is_none());
    }

    #[test]
    fn cron_follows_its_expression_in_its_zone() {
        let utc = "UTC".parse().unwrap();
        // Every day at 02:30 UTC.
        let daily = Cron::new("30 2 * * *", utc).unwrap();
        let day = T / (24 * HOUR) * (24 * HOUR);
        assert_eq!(ms(daily.after(T)), day + 24 * HOUR + 2 * HOUR + 1_800_000);
        assert_eq!(ms(daily.at_or_before(T)), day + 2 * HOUR + 1_800_000);
        // Within a second of a due time, and at it.
        let due = day + 2 * HOUR + 1_800_000;
        assert_eq!(ms(daily.at_or_before(due)), due);
        assert_eq!(ms(daily.at_or_before(due + 500)), due);
        assert_eq!(ms(daily.after(due)), due + 24 * HOUR);
        assert_eq!(ms(daily.after(due - 500)), due);
        // The same expression in Berlin (UTC+1 in November) is an hour earlier.
        let berlin = Cron::new("30 2 * * *", "Europe/Berlin".parse().unwrap()).unwrap();
        assert_eq!(ms(berlin.at_or_before(T)), due - HOUR);
        // Seconds in a sixth field, in front.
        let two_s = Cron::new("*/2 * * * * *", utc).unwrap();
        assert_eq!(ms(two_s.after(T + 1)), T + 2000);
    }

    #[test]
    fn bad_expressions_and_zones_are_refused_with_the_reason() {
        let utc = Zone::Named(chrono_tz::UTC);
        assert!(Cron::new("61 * * * *", utc).unwrap_err().contains("out of bounds"));
        assert!(Cron::new("* * * *", utc).unwrap_err().contains("fields"));
        assert_eq!(Cron::new("0 0 30 2 *", utc).unwrap_err(), "it never comes (no such date)");
        assert!("Mars/Olympus".parse::<Zone>().unwrap_err().contains("IANA name"));
        assert!(matches!("europe/berlin".parse::<Zone>(), Ok(Zone::Named(chrono_tz::Europe::Berlin))));
        assert!(matches!("LOCAL".parse::<Zone>(), Ok(Zone::Local)));
    }
}
