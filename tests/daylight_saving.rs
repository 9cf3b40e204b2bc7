//! Daylight-saving days through the real binary: `neli-run cron check
//! --from` prints the due times a member computes, and they follow cron's
//! rule (docs/operations.md): a job whose minute and hour fields do not start
//! with `*` runs once on both days. (src/calendar.rs pins the rule line by
//! line, in Berlin and New York.)

use std::process::{Command, Stdio};

use crate::util::{bin, tempdir};

/// A list, a list of hours and a range, each with times in Berlin's
/// skipped (2026-03-29) and repeated (2026-10-25) hour 02:00-03:00.
const DST2: &str = "CRON_TZ=Europe/Berlin\n0,30 2 * * *  list  true\n15 2,3 * * *  hours  true\n\
                    15 1-3 * * *  range  true\n";

/// `neli-run cron check --next 4 --from FROM FILE`'s `next:` lines, by job.
fn next_due(file: &str, from: &str) -> Vec<(String, String)> {
    let out = Command::new(bin())
        .args(["cron", "check", "--next", "4", "--from", from, file])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    let jobs = lines.windows(2).filter_map(|w| {
        let due = w[1].strip_prefix("  next:    ")?;
        Some((w[0].split(' ').next()?.to_string(), due.to_string()))
    });
    jobs.collect()
}

#[test]
fn lists_and_ranges_run_once_on_both_daylight_saving_days() {
    let dir = tempdir::Dir::new("daylight-saving-lists");
    let file = dir.path().join("dst2.crontab");
    std::fs::write(&file, DST2).unwrap();
    let file = file.to_str().unwrap();
    let due = |jobs: &[(&str, &str)]| -> Vec<(String, String)> {
        jobs.iter().map(|&(job, due)| (job.to_string(), due.to_string())).collect()
    };

    // The short day: 02:00 and 02:30 are skipped, one due time at 03:00
    // stands for both; 02:15 too, then 03:15 as usual.
    assert_eq!(
        next_due(file, "2026-03-29T00:00:00+01:00"),
        due(&[
            (
                "list",
                "2026-03-29 03:00:00 +02:00, 2026-03-30 02:00:00 +02:00, 2026-03-30 02:30:00 +02:00, \
                 2026-03-31 02:00:00 +02:00"
            ),
            (
                "hours",
                "2026-03-29 03:00:00 +02:00, 2026-03-29 03:15:00 +02:00, 2026-03-30 02:15:00 +02:00, \
                 2026-03-30 03:15:00 +02:00"
            ),
            (
                "range",
                "2026-03-29 01:15:00 +01:00, 2026-03-29 03:00:00 +02:00, 2026-03-29 03:15:00 +02:00, \
                 2026-03-30 01:15:00 +02:00"
            ),
        ])
    );
    // The long day: the first pass (+02:00) of 02:00-03:00 only.
    assert_eq!(
        next_due(file, "2026-10-25T00:00:00+02:00"),
        due(&[
            (
                "list",
                "2026-10-25 02:00:00 +02:00, 2026-10-25 02:30:00 +02:00, 2026-10-26 02:00:00 +01:00, \
                 2026-10-26 02:30:00 +01:00"
            ),
            (
                "hours",
                "2026-10-25 02:15:00 +02:00, 2026-10-25 03:15:00 +01:00, 2026-10-26 02:15:00 +01:00, \
                 2026-10-26 03:15:00 +01:00"
            ),
            (
                "range",
                "2026-10-25 01:15:00 +02:00, 2026-10-25 02:15:00 +02:00, 2026-10-25 03:15:00 +01:00, \
                 2026-10-26 01:15:00 +01:00"
            ),
        ])
    );
}
