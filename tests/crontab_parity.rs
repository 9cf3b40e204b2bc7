//! `neli-run cron check` refuses what a member refuses and accepts what a
//! member runs (one reading, `crontab::read`): the real binary, both ways
//! (audit 2026-11-29 E10; findings C-4, C-6, C-7, C-8).

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::crontab_trust::{check, member, JOB};
use crate::util::{bin, tempdir};

/// The lines of `err` that name `file`.
fn said<'a>(err: &'a str, file: &str) -> Vec<&'a str> {
    err.lines().filter(|l| l.contains(file)).collect()
}

#[test]
fn cron_check_refuses_what_a_member_refuses_no_job_a_nul_a_long_command_a_missing_shell_and_jobs_below_a_bad_zone() {
    let dir = tempdir::Dir::new("crontab-parity");
    let write = |name: &str, text: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        file.display().to_string()
    };
    // A file with no job: a member exits 2, and so does the check.
    for (name, text) in [("empty", ""), ("comments", "# nothing yet\n\nPATH=/bin\n")] {
        let file = write(name, text);
        let (code, out, err) = check(&[&file]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains(&format!("{file}: error: no job to run")), "{err}");
        assert!(out.contains(&format!("{file}: 0 jobs, 0 lines refused")), "{out}");
        let (code, out) = member(&file);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains("no job to run"), "{out}");
    }
    // Each a line that could never run, refused at its line and column by
    // both (the member then has no job: exit 2).
    let long = format!("@every 1s  long  echo {}\n", "x".repeat(128 * 1024));
    for (name, text, at, message) in [
        ("nul", "@every 1s  nul  echo a\0b\n", ":1:23: error: job 'nul''s command: a NUL byte", ""),
        ("long", long.as_str(), ":1:18: error: job 'long''s command: 131078 bytes, over the 131072", "MAX_ARG_STRLEN"),
        (
            "shell",
            "SHELL=/nonexistent/sh\n@every 1s  a  true\n",
            ":1:7: error: SHELL=/nonexistent/sh: command not found",
            "",
        ),
        ("shell", "SHELL=/nonexistent/sh\n@every 1s  a  true\n", ":2:1: error: the SHELL on line 1 was refused", ""),
        ("tz", "CRON_TZ=Europe/Berln\n0 3 * * *  a  true\n", ":1:9: error: unknown time zone 'Europe/Berln'", ""),
        (
            "tz",
            "CRON_TZ=Europe/Berln\n0 3 * * *  a  true\n",
            ":2:1: error: the CRON_TZ on line 1 was refused",
            "fix that line",
        ),
    ] {
        let file = write(name, text);
        let (code, out, err) = check(&[&file]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(
            said(&err, &file).iter().any(|l| l.starts_with(&format!("{file}{at}")) && l.contains(message)),
            "{err}"
        );
        let (code, out) = member(&file);
        assert_eq!(code, 2, "{name}: {out}");
        assert!(said(&out, &file).iter().any(|l| l.contains(&format!("{file}{at}"))), "{name}: {out}");
        assert!(out.contains("no job to run"), "{name}: {out}");
    }
    // A good CRON_TZ (and SHELL) below a refused one holds again.
    let file = write("again", "CRON_TZ=Europe/Berln\n0 3 * * *  a  true\nCRON_TZ=UTC\n0 3 * * *  b  true\n");
    let (code, out, err) = check(&[&file, "--json"]);
    assert_eq!(code, 2, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["jobs"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(json["jobs"][0]["name"], "b");
    assert_eq!(json["jobs"][0]["zone"], "UTC");
}

#[test]
fn cron_check_writes_every_problem_to_a_slow_stderr_pipe() {
    let dir = tempdir::Dir::new("crontab-slow-stderr");
    let file = dir.path().join("many-bad.crontab");
    let mut text = JOB.to_string();
    for n in 0..3000 {
        text += &format!("61 * * * *  bad{n}  echo x\n");
    }
    std::fs::write(&file, text).unwrap();
    let mut child = Command::new(bin())
        .args(["cron", "check", file.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Nobody reads for a second: the pipe fills, and the check must wait.
    std::thread::sleep(Duration::from_secs(1));
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(2));
    let refused = err.lines().filter(|l| l.contains(": error: minute field '61'")).count();
    assert_eq!(
        refused,
        3000,
        "every refused line said: {} lines, the last {:?}",
        err.lines().count(),
        err.lines().last()
    );
}

/// A crontab holds at most as many jobs as a group has partitions for
/// (1,024, as --roles): the next is refused at its line by both, and the
/// first 1,024 are read (audit E9: 1,100 jobs made a topic of 1,100
/// partitions with no word).
#[test]
fn a_crontab_past_1024_jobs_is_refused_at_the_first_job_too_many() {
    let dir = tempdir::Dir::new("crontab-many");
    let file = dir.path().join("many.crontab");
    let text: String = (0..1025).map(|n| format!("@every 1h  job{n}  echo {n}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let file = file.display().to_string();
    // Its output is larger than a pipe holds: read as it comes.
    let done = Command::new(bin()).args(["cron", "check", &file, "--next", "1"]).stdin(Stdio::null()).output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&done.stdout), String::from_utf8_lossy(&done.stderr));
    assert_eq!(done.status.code(), Some(2), "{err}");
    let at = format!("{file}:1025:1: error: more than 1024 jobs");
    assert!(err.lines().any(|l| l.starts_with(&at) && l.contains("split the file between groups")), "{err}");
    assert!(out.contains(&format!("{file}: 1024 jobs, 1 line refused")), "{out}");
}

/// `--from` before 1970 is a time, refused for what it is (findings C-9:
/// "not an RFC 3339 time").
#[test]
fn cron_check_from_before_1970_says_so() {
    let dir = tempdir::Dir::new("crontab-from");
    let file = dir.path().join("one.crontab");
    std::fs::write(&file, JOB).unwrap();
    let (code, out, err) = check(&["--from", "1969-01-01T00:00:00Z", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--from 1969-01-01T00:00:00Z: before 1970"), "{err}");
}
