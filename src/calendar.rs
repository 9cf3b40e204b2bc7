//! The calendars behind `--every` and `--cron`: due times as wall-clock
//! milliseconds since the Unix epoch, which every member computes alike
//! (the records compare them across machines). Each implements the core's
//! [`Calendar`]; the policy that picks which due time runs is the core's
//! (`leader/schedule.rs`).

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone};

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

    /// The wall clock at `ms`: the date and time people read in this zone.
    fn wall(&self, ms: i64) -> Option<NaiveDateTime> {
        match self {
            Zone::Local => chrono::Local.timestamp_millis_opt(ms).single().map(|t| t.naive_local()),
            Zone::Named(tz) => tz.timestamp_millis_opt(ms).single().map(|t| t.naive_local()),
        }
    }

    /// The instants (ms) at which the wall clock reads `wall`: none in a
    /// gap the clocks skip, two in an hour they repeat, earliest first.
    fn instants(&self, wall: &NaiveDateTime) -> LocalResult<i64> {
        let found = match self {
            Zone::Local => chrono::Local.from_local_datetime(wall).map(|t| t.timestamp_millis()),
            Zone::Named(tz) => tz.from_local_datetime(wall).map(|t| t.timestamp_millis()),
        };
        match found {
            LocalResult::Ambiguous(a, b) => LocalResult::Ambiguous(a.min(b), a.max(b)),
            found => found,
        }
    }
}

/// `--cron`: due at the times of a cron expression, in a time zone.
#[derive(Debug)]
pub struct Cron {
    cron: croner::Cron,
    zone: Zone,
    /// A fixed-time job by cron's rule ([`fixed_time`]): due on the wall
    /// clock, once a day however the clocks change. Otherwise croner's
    /// answers stand: due as the clock runs.
    fixed: bool,
}

impl Cron {
    /// Parses `expr`; an expression that never comes (30 February) is
    /// refused here rather than leaving the group with nothing to run.
    pub fn new(expr: &str, zone: Zone) -> Result<Cron, String> {
        let cron = croner::Cron::from_str(expr).map_err(|e| format!("{e}"))?;
        let cron = Cron { cron, zone, fixed: fixed_time(expr) };
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
        // Due times fall on whole seconds, so the second `ms` is in has the
        // same due times before and after it. Croner needs it so: it allows
        // a repeated hour's instants a second's slack against the start,
        // and from 01:59:59.5 (-04:00) on the long day in New York it would
        // give 01:00 (-05:00), half a second later, as the one before.
        let ms = ms / 1000 * 1000;
        if self.fixed {
            return self.find_fixed(ms, forward);
        }
        let ms = i64::try_from(ms).ok()?;
        let found = match self.zone {
            Zone::Local => find(&self.cron, chrono::Local.timestamp_millis_opt(ms).single()?, forward),
            Zone::Named(tz) => find(&self.cron, tz.timestamp_millis_opt(ms).single()?, forward),
        };
        u64::try_from(found?).ok()
    }

    /// As `find`, for a fixed-time job. Croner's own rule makes only a
    /// single minute, hour and second fixed-time, so lists and ranges would
    /// run twice on the long day and not on the short one. Instead croner
    /// walks the wall clock (the zone's local times read as UTC, where no
    /// hour is skipped or repeated) and [`due_at`] maps the wall-clock time
    /// it finds to its due time. That map never goes back in time, so the
    /// first wall-clock time after `ms`'s gives the first due time after
    /// `ms`, and the last at or before it the last at or before: `after`
    /// and `at_or_before` agree on one set of due times. Due times never
    /// lie in the second pass of a repeated hour, so an `ms` there is first
    /// moved back to the first pass's end ([`first_pass`]).
    fn find_fixed(&self, ms: u64, forward: bool) -> Option<u64> {
        let ms = first_pass(self.zone, i64::try_from(ms).ok()?)?;
        let wall = chrono::Utc.from_utc_datetime(&self.zone.wall(ms)?);
        let found = if forward {
            self.cron.find_next_occurrence(&wall, false)
        } else {
            self.cron.find_previous_occurrence(&wall, true)
        };
        u64::try_from(due_at(self.zone, found.ok()?.naive_utc())?).ok()
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

/// Whether `expr` is a fixed-time job by cron's rule (Vixie cron's and
/// cronie's, which docs/operations.md promises): neither its minute nor its
/// hour field starts with `*`, as written. `30 2`, `0,30 2`, `15 1-3` and
/// `0-59/30 2` are fixed-time; `*/30 2`, `0 *` and `* 2` run as the clock
/// runs. Six and seven fields have seconds in front, which do not count
/// (cron has none). Of the nicknames only `@hourly` (`0 *`) is not fixed.
fn fixed_time(expr: &str) -> bool {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let (minute, hour) = match fields[..] {
        [nickname] => return !nickname.eq_ignore_ascii_case("@hourly"),
        [minute, hour, _, _, _] | [_, minute, hour, _, _, _] | [_, minute, hour, _, _, _, _] => (minute, hour),
        _ => return false,
    };
    !minute.starts_with('*') && !hour.starts_with('*')
}

/// Offsets from UTC lie within this (tzdb's are within 16 hours, local
/// mean times included): the bounds of the searches for a transition.
const SPAN_MS: i64 = 30 * 3_600_000;

/// When a fixed-time job whose wall-clock time is `wall` is due, as cron
/// runs it: at that time; if the clocks went back over it, at the first of
/// its two instants (the job runs once); if they skipped it, at the end of
/// the gap, the first instant after it (the job still runs that day, as
/// cron runs each skipped fixed time right after the change). Every
/// skipped time of a job is due at that one instant, so they are one due
/// time and one run.
fn due_at(zone: Zone, wall: NaiveDateTime) -> Option<i64> {
    match zone.instants(&wall) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t),
        LocalResult::None => {
            // No instant reads `wall`: before the gap's end every instant
            // reads earlier, from it on every instant reads later.
            let w = wall.and_utc().timestamp_millis();
            let past = |i| zone.wall(i).is_none_or(|t| t > wall);
            Some(first_where(w.saturating_sub(SPAN_MS), w.saturating_add(SPAN_MS), past))
        }
    }
}

/// `ms`, or, when it lies in the second pass of a repeated hour (where no
/// fixed-time job is due), the first pass's last millisecond: the due times
/// before and after both are those of that millisecond.
fn first_pass(zone: Zone, ms: i64) -> Option<i64> {
    let wall = zone.wall(ms)?;
    match zone.instants(&wall) {
        LocalResult::Ambiguous(first, second) if second == ms && first < ms => {
            // The clocks went back between the two: from then on the wall
            // clock reads `wall` or earlier, until `ms`.
            let back = |i| zone.wall(i).is_none_or(|t| t <= wall);
            Some(first_where(first, ms, back) - 1)
        }
        _ => Some(ms),
    }
}

/// The first millisecond in `(lo, hi]` at which `holds` does, given that it
/// holds at `hi`, not at `lo`, and from some millisecond on between (a
/// binary search: the zone database gives offsets, not transitions).
fn first_where(mut lo: i64, mut hi: i64, holds: impl Fn(i64) -> bool) -> i64 {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
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

    /// The due times of `expr` in `zone` on the day (local) that starts at
    /// `midnight` (RFC 3339), as people read them there (time and offset),
    /// once `after` and `at_or_before` are seen to agree on them: minute by
    /// minute and a millisecond each side of each, each due time is the
    /// first after the one before it, and the last at or before itself.
    fn day(expr: &str, zone: &str, midnight: &str) -> Vec<String> {
        let zone: Zone = zone.parse().unwrap();
        let cron = Cron::new(expr, zone).unwrap();
        let start = u64::try_from(DateTime::parse_from_rfc3339(midnight).unwrap().timestamp_millis()).unwrap();
        let date = &zone.show(start)[..10];
        let before = cron.at_or_before(start - 1);
        let due: Vec<u64> = std::iter::successors(cron.after(start - 1), |&d| cron.after(d))
            .take_while(|&d| zone.show(d).starts_with(date))
            .collect();
        let next = cron.after(*due.last().unwrap_or(&start));
        let chain: Vec<Option<u64>> =
            std::iter::once(before).chain(due.iter().copied().map(Some)).chain([next]).collect();
        let probes = (0..=26 * 60).map(|m| start - 1 + m * 60_000).take_while(|&t| next.is_none_or(|n| t < n));
        for t in probes.chain(due.iter().flat_map(|&d| [d - 1, d, d + 1])) {
            // The last due time at or before t, and the first after it.
            let i = chain.iter().rposition(|d| d.is_some_and(|d| d <= t)).unwrap_or(0);
            assert_eq!(cron.at_or_before(t), chain[i], "{expr}: at_or_before({})", zone.show(t));
            assert_eq!(cron.after(t), chain[i + 1], "{expr}: after({})", zone.show(t));
        }
        due.iter().map(|&d| zone.show(d)[11..].to_string()).collect()
    }

    /// Cron's rule on daylight-saving days (docs/operations.md): a job
    /// whose minute and hour do not start with `*` is fixed-time and runs
    /// once on both days: a time the clocks skip is due when they land (two
    /// such times are one due time), and a repeated time at its first pass.
    /// The others run as the clock runs. Berlin skips 02:00-03:00 on
    /// 2026-03-29 and repeats it on 2026-10-25 (first at +02:00).
    #[test]
    fn fixed_time_jobs_run_once_on_berlins_daylight_saving_days() {
        let short = |expr| day(expr, "Europe/Berlin", "2026-03-29T00:00:00+01:00");
        let long = |expr| day(expr, "Europe/Berlin", "2026-10-25T00:00:00+02:00");
        for (expr, on_short, on_long) in [
            ("30 2 * * *", &["03:00:00 +02:00"][..], &["02:30:00 +02:00"][..]),
            ("0,30 2 * * *", &["03:00:00 +02:00"], &["02:00:00 +02:00", "02:30:00 +02:00"]),
            ("15 2,3 * * *", &["03:00:00 +02:00", "03:15:00 +02:00"], &["02:15:00 +02:00", "03:15:00 +01:00"]),
            (
                "15 1-3 * * *",
                &["01:15:00 +01:00", "03:00:00 +02:00", "03:15:00 +02:00"],
                &["01:15:00 +02:00", "02:15:00 +02:00", "03:15:00 +01:00"],
            ),
            ("0-59/30 2 * * *", &["03:00:00 +02:00"], &["02:00:00 +02:00", "02:30:00 +02:00"]),
            (
                "0,30 2,3 * * *",
                &["03:00:00 +02:00", "03:30:00 +02:00"],
                &["02:00:00 +02:00", "02:30:00 +02:00", "03:00:00 +01:00", "03:30:00 +01:00"],
            ),
            // Seconds in front do not count: minute and hour are fixed.
            ("*/20 30 2 * * *", &["03:00:00 +02:00"], &["02:30:00 +02:00", "02:30:20 +02:00", "02:30:40 +02:00"]),
            ("0 0 * * SUN", &["00:00:00 +01:00"], &["00:00:00 +02:00"]),
            // Wildcards run as the clock runs: none in a skipped hour, both passes of a repeated one.
            ("*/30 2 * * *", &[], &["02:00:00 +02:00", "02:30:00 +02:00", "02:00:00 +01:00", "02:30:00 +01:00"]),
        ] {
            assert_eq!(short(expr), on_short, "{expr} on the short day");
            assert_eq!(long(expr), on_long, "{expr} on the long day");
        }
        assert_eq!(short("15 * * * *")[..3], ["00:15:00 +01:00", "01:15:00 +01:00", "03:15:00 +02:00"]);
        assert_eq!(
            long("15 * * * *")[1..5],
            ["01:15:00 +02:00", "02:15:00 +02:00", "02:15:00 +01:00", "03:15:00 +01:00"]
        );
        assert_eq!(short("0 * * * *").len(), 23);
        assert_eq!(long("0 * * * *").len(), 25);
        assert_eq!(short("@hourly").len(), 23);
        assert_eq!(long("*/15 * * * *").len(), 100);
        assert_eq!(short("* 2 * * *"), Vec::<String>::new());
        assert_eq!(long("* 2 * * *").len(), 120);
        assert_eq!(short("@daily"), ["00:00:00 +01:00"]);
    }

    /// The same in New York, whose clocks change at 02:00 local: 2026-03-08
    /// skips 02:00-03:00 (-05:00 to -04:00), 2026-11-01 repeats 01:00-02:00
    /// (first at -04:00).
    #[test]
    fn fixed_time_jobs_run_once_on_new_yorks_daylight_saving_days() {
        let short = |expr| day(expr, "America/New_York", "2026-03-08T00:00:00-05:00");
        let long = |expr| day(expr, "America/New_York", "2026-11-01T00:00:00-04:00");
        assert_eq!(short("30 2 * * *"), ["03:00:00 -04:00"]);
        assert_eq!(short("0,30 2 * * *"), ["03:00:00 -04:00"]);
        assert_eq!(short("15 1-3 * * *"), ["01:15:00 -05:00", "03:00:00 -04:00", "03:15:00 -04:00"]);
        assert_eq!(short("0-59/20 2 * * *"), ["03:00:00 -04:00"]);
        assert!(short("*/20 2 * * *").is_empty());
        assert_eq!(short("0 * * * *").len(), 23);
        assert_eq!(long("30 1 * * *"), ["01:30:00 -04:00"]);
        assert_eq!(long("0,30 1 * * *"), ["01:00:00 -04:00", "01:30:00 -04:00"]);
        assert_eq!(long("15 1-3 * * *"), ["01:15:00 -04:00", "02:15:00 -05:00", "03:15:00 -05:00"]);
        assert_eq!(long("0 1,2 * * *"), ["01:00:00 -04:00", "02:00:00 -05:00"]);
        assert_eq!(long("0-59/30 1 * * *"), ["01:00:00 -04:00", "01:30:00 -04:00"]);
        assert_eq!(long("*/30 1 * * *"), ["01:00:00 -04:00", "01:30:00 -04:00", "01:00:00 -05:00", "01:30:00 -05:00"]);
        assert_eq!(long("0 * * * *").len(), 25);
    }

    #[test]
    fn fixed_time_is_read_off_the_minute_and_hour_as_written() {
        for fixed in ["30 2 * * *", "0,30 2 * * *", "15 1-3 * * *", "0-59/30 2 * * *", "0 0-23 * * *", "* 30 2 * * *"] {
            assert!(fixed_time(fixed), "{fixed}");
        }
        for fixed in ["@daily", "@weekly", "0 30 2 * * * 2027", "5 4 * * SUN"] {
            assert!(fixed_time(fixed), "{fixed}");
        }
        for wild in ["*/30 2 * * *", "0 * * * *", "* 2 * * *", "30 */2 * * *", "@hourly", "@HOURLY", "0 0 * * * *"] {
            assert!(!fixed_time(wild), "{wild}");
        }
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
