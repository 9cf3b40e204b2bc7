//! `neli-run cron check`: the real binary reading a crontab file as a
//! member will, saying each job and refusing bad lines by FILE:LINE:COLUMN.
//! (Which due times a line makes, daylight-saving days included, is pinned
//! by src/crontab/tests.rs with fixed dates.)

use std::process::{Command, Stdio};

use crate::util::{bin, tempdir};

/// Runs `neli-run cron check ARGS`: status, stdout, stderr.
fn check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin()).args(["cron", "check"]).args(args).stdin(Stdio::null()).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

const GOOD: &str = "# the fleet's jobs\nCRON_TZ=Europe/Berlin\n\
                    */5 * * * *   billing   /usr/local/bin/billing-job --queue nightly\n\
                    30 2 * * *    report[missed=all]    /usr/local/bin/report > /var/log/report.log\n\
                    @every 90s    ping      curl -fsS https://example.internal/health\n";

#[test]
fn cron_check_says_each_job_and_its_next_due_times() {
    let dir = tempdir::Dir::new("cron-check-good");
    let file = dir.path().join("fleet.crontab");
    std::fs::write(&file, GOOD).unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = check(&[path, "--next", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(err, "", "no problem, nothing on stderr");
    assert!(out.contains("billing  (line 3)  */5 * * * *  Europe/Berlin\n"), "{out}");
    assert!(out.contains("  command: /usr/local/bin/report > /var/log/report.log\n"), "{out}");
    assert!(out.contains("ping  (line 5)  @every 90s  UTC\n"), "{out}");
    assert!(out.ends_with(&format!("{path}: 3 jobs, 0 lines refused\n")), "{out}");
    // Two due times each, report's at 02:30 Berlin time.
    let report = out.split("report  (line 4)").nth(1).unwrap().lines().nth(1).unwrap();
    assert_eq!(report.matches(" 02:30:00 +0").count(), 2, "{out}");

    let (code, out, _) = check(&[path, "--json", "--next", "1"]);
    assert_eq!(code, 0, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let jobs = json["jobs"].as_array().unwrap();
    let names: Vec<_> = jobs.iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["billing", "report", "ping"]);
    assert_eq!(jobs[1]["missed"], "all");
    assert_eq!(jobs[1]["zone"], "Europe/Berlin");
    assert!(jobs[2]["zone"].is_null(), "@every has no zone: {out}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let next = jobs[2]["next_ms"][0].as_u64().unwrap();
    assert!(next > now - 1000 && next <= now + 90_000 && next % 90_000 == 0, "{out}");
    assert_eq!(json["problems"], serde_json::json!([]));
}

#[test]
fn cron_check_refuses_each_bad_line_by_line_and_column_and_keeps_the_rest() {
    let dir = tempdir::Dir::new("cron-check-bad");
    let file = dir.path().join("fleet.crontab");
    let text = format!("{GOOD}MAILTO=ops@example.com\n*/5 * * * *   /usr/bin/oops\n0 25 * * * late echo hi\n");
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = check(&[path, "--time-zone", "UTC"]);
    assert_eq!(code, 2, "{out}{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with(&format!("{path}:6:8: warning: neli-run sends no mail")), "{err}");
    assert!(lines[1].starts_with(&format!("{path}:7:15: error: '/usr/bin/oops' looks like a command")), "{err}");
    assert_eq!(lines[2], format!("{path}:8:3: error: hour field '25': number out of bounds (hour: 0-23)"));
    // The good lines are still read.
    assert!(out.ends_with(&format!("{path}: 3 jobs, 2 lines refused\n")), "{out}");
    let (code, out, err) = check(&[path, "--json"]);
    assert_eq!(code, 2, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["jobs"].as_array().unwrap().len(), 3);
    let problems = json["problems"].as_array().unwrap();
    assert_eq!(
        problems[2],
        serde_json::json!({"line": 8, "column": 3, "error": true, "message": "hour field '25': number out of bounds (hour: 0-23)"})
    );
}

#[test]
fn cron_check_names_a_file_it_cannot_read_and_a_bad_zone() {
    let (code, _, err) = check(&["/nonexistent/fleet.crontab"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read the crontab /nonexistent/fleet.crontab: No such file"), "{err}");
    let (code, _, err) = check(&["/dev/null", "--time-zone", "Mars/Base"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--time-zone: unknown time zone 'Mars/Base'"), "{err}");
    // An empty file is fine: no jobs.
    let (code, out, err) = check(&["/dev/null"]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "/dev/null: 0 jobs, 0 lines refused\n", ""));
}
