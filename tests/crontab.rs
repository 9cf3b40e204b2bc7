//! `neli-run cron check`: the real binary reading a crontab file as a
//! member will, saying each job and refusing bad lines by FILE:LINE:COLUMN.
//! (Which due times a line makes, daylight-saving days included, is pinned
//! by src/crontab/tests.rs with fixed dates.)

use std::process::{Command, Stdio};

use crate::util::{bin, tempdir};

mod placement;

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
    assert!(err.contains("/nonexistent/fleet.crontab: cannot read it: No such file"), "{err}");
    let (code, _, err) = check(&["/dev/null", "--time-zone", "Mars/Base"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--time-zone: unknown time zone 'Mars/Base'"), "{err}");
}

#[test]
fn cron_check_from_a_chosen_moment_shows_a_daily_job_once_on_both_daylight_saving_days() {
    let dir = tempdir::Dir::new("cron-check-dst");
    let file = dir.path().join("fleet.crontab");
    std::fs::write(&file, "CRON_TZ=Europe/Berlin\n30 2 * * *  daily  true\n0 * * * *  hourly  true\n").unwrap();
    let path = file.to_str().unwrap();
    let next = |from: &str, n: &str| {
        let (code, out, err) = check(&[path, "--from", from, "--next", n, "--json"]);
        assert_eq!(code, 0, "{out}{err}");
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        let ms =
            |job: usize| json["jobs"][job]["next_ms"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        (ms(0), ms(1))
    };
    let at = |rfc: &str| chrono::DateTime::parse_from_rfc3339(rfc).unwrap().timestamp_millis() as u64;
    // Spring (2027-03-28: 02:00 to 03:00): 02:30 never comes; once, at 03:00.
    let (daily, hourly): (Vec<u64>, Vec<u64>) = next("2027-03-27T23:30:00+01:00", "30");
    assert_eq!(daily[..2], [at("2027-03-28T03:00:00+02:00"), at("2027-03-29T02:30:00+02:00")]);
    assert_eq!(hourly.iter().filter(|&&d| d < at("2027-03-29T00:00:00+02:00")).count(), 23, "23 hours that day");
    // Autumn (2026-10-25: 03:00 back to 02:00): 02:30 comes twice; once,
    // at the first.
    let (daily, hourly): (Vec<u64>, Vec<u64>) = next("2026-10-24T23:30:00+02:00", "30");
    assert_eq!(daily[..2], [at("2026-10-25T02:30:00+02:00"), at("2026-10-26T02:30:00+01:00")]);
    assert_eq!(hourly.iter().filter(|&&d| d < at("2026-10-26T00:00:00+01:00")).count(), 25, "25 hours that day");
    let (code, _, err) = check(&[path, "--from", "next tuesday"]);
    assert_eq!(code, 2);
    assert!(err.contains("--from next tuesday: not an RFC 3339 time"), "{err}");
}

/// `--crontab FILE` members of one group: each job's run appends "JOB DUE
/// MEMBER" to `runs` and holds the job's own lock (an overlap detector per
/// job) for `hold` seconds.
pub(crate) struct Fleet {
    pub(crate) g: crate::util::Group,
    pub(crate) file: std::path::PathBuf,
    jobs: Vec<String>,
    every: String,
    hold: String,
}

impl Fleet {
    pub(crate) fn new(test: &str, jobs: &[&str], every: &str, hold: &str) -> Fleet {
        Fleet::on(crate::util::Group::new(test), jobs, every, hold)
    }

    /// The fleet of `new`, on the group `g` (its broker).
    fn on(g: crate::util::Group, jobs: &[&str], every: &str, hold: &str) -> Fleet {
        let mut fleet = Fleet {
            file: g.dir.path().join("fleet.crontab"),
            g,
            jobs: Vec::new(),
            every: every.into(),
            hold: hold.into(),
        };
        fleet.jobs = jobs.iter().map(|j| j.to_string()).collect();
        fleet.file = fleet.write("fleet.crontab", jobs);
        fleet
    }

    /// Writes a crontab of `jobs` (names of the fleet's jobs) to `name`.
    pub(crate) fn write(&self, name: &str, jobs: &[&str]) -> std::path::PathBuf {
        self.write_greeting(name, jobs, "hello")
    }

    /// Writes a crontab of `jobs` whose GREETING is `greeting`.
    fn write_greeting(&self, name: &str, jobs: &[&str], greeting: &str) -> std::path::PathBuf {
        let runs = self.g.dir.path().join("runs").display().to_string();
        let mut text = format!("# a fleet's jobs\nGREETING={greeting}\n");
        for job in jobs {
            let detector = neli_proof::detector::Detector::new(self.g.dir.path().join("jobs").join(job)).unwrap();
            let guard = detector.wrap().join(" ");
            let (every, hold) = (&self.every, &self.hold);
            text += &format!(
                "@every {every}  {job}  trap 'echo \"stopped $NELI_JOB $NELI_DUE\" >> {runs}; exit 143' TERM; \
                 echo \"start $NELI_JOB $NELI_DUE $NELI_NAME $GREETING $NELI_ATTEMPT\" >> {runs}; \
                 {guard} sleep {hold}; echo \"end $NELI_JOB $NELI_DUE\" >> {runs}\n"
            );
        }
        let file = self.g.dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        file
    }

    /// A member running the crontab (no command: `--crontab` instead).
    pub(crate) fn member(&self, name: &str) -> crate::util::Member {
        self.member_of(name, &self.file)
    }

    /// A member running the crontab `file`.
    fn member_of(&self, name: &str, file: &std::path::Path) -> crate::util::Member {
        self.member_with(name, file, &[])
    }

    /// A member running the crontab `file`, with `extra` flags.
    fn member_with(&self, name: &str, file: &std::path::Path, extra: &[&str]) -> crate::util::Member {
        let mut argv = vec!["-b".to_string(), self.g.broker.address.clone(), "-g".into(), self.g.name.clone()];
        argv.extend(["--name".into(), name.into()]);
        argv.extend(self.g.broker.timing.args());
        argv.extend(["--crontab".into(), file.display().to_string()]);
        argv.extend(extra.iter().map(|s| s.to_string()));
        crate::util::Member::spawn(name, &[], &argv, &self.g.dir.path().join(format!("{name}.log")), None)
    }

    /// Every run started so far: (job, due, member), the greeting checked.
    pub(crate) fn runs(&self) -> Vec<(String, String, String)> {
        self.lines()
            .into_iter()
            .filter(|w| w[0] == "start")
            .map(|w| (w[1].clone(), w[2].clone(), w[3].clone()))
            .collect()
    }

    /// The runs' lines, split into words.
    fn lines(&self) -> Vec<Vec<String>> {
        neli_proof::detector::read_lines(&self.g.dir.path().join("runs"))
            .iter()
            .map(|line| {
                let w: Vec<String> = line.split(' ').map(str::to_string).collect();
                if w[0] == "start" {
                    let greeting = w.get(4).map(String::as_str);
                    assert!(matches!(greeting, Some("hello" | "bye")), "the file's assignment reaches the job: {line}");
                }
                w
            })
            .collect()
    }

    /// Who ran each job's newest run, once every job has run.
    fn newest(&self) -> Option<std::collections::BTreeMap<String, String>> {
        let mut newest = std::collections::BTreeMap::new();
        for (job, _, member) in self.runs() {
            newest.insert(job, member);
        }
        (newest.len() == self.jobs.len()).then_some(newest)
    }

    /// Asserts that no (job, due time) ran again once a run of it ended
    /// (a run that a revoke stopped says "stopped", and runs again: at
    /// least once; one that exits 0 has ended, even if asked to stop), that
    /// attempts count up, and that no job overlapped itself.
    pub(crate) fn assert_once(&self) {
        let lines = self.lines();
        // Each (job, due)'s newest run: its attempt and how it ended.
        let mut newest: std::collections::BTreeMap<(String, String), (u32, &str)> = Default::default();
        for w in &lines {
            let key = (w[1].clone(), w[2].clone());
            match (w[0].as_str(), newest.get(&key).copied()) {
                ("start", before) => {
                    let attempt: u32 = w[5].parse().unwrap();
                    assert!(before.is_none_or(|(_, how)| how != "end"), "{key:?} ran again after it ended: {lines:?}");
                    // Up, by one unless a run was killed before its first
                    // line (a revoke in its first milliseconds).
                    let last = before.map_or(0, |(a, _)| a);
                    assert!(attempt > last, "{key:?}: attempts count up: {lines:?}");
                    newest.insert(key, (attempt, "running"));
                }
                (how, Some((attempt, _))) => {
                    newest.insert(key, (attempt, if how == "end" { "end" } else { "stopped" }));
                }
                (_, None) => panic!("{key:?} ended before it started: {lines:?}"),
            }
        }
        for job in &self.jobs {
            let detector = neli_proof::detector::Detector { dir: self.g.dir.path().join("jobs").join(job) };
            assert_eq!(detector.overlaps(), Vec::<String>::new(), "two runs of {job} at once");
        }
    }
}

#[test]
fn a_crontab_spreads_its_jobs_over_the_members_runs_each_due_time_once_and_a_crashed_members_jobs_move() {
    let fleet = Fleet::new("crontab-fleet", &["a", "b", "c", "d"], "1s", "0.2");
    let mut one = fleet.member("one");
    let two = fleet.member("two");
    let takeover = fleet.g.broker.timing.takeover();
    // Two jobs each: every job placed on a partition of its own, the
    // partitions spread by the group.
    crate::util::wait_until(takeover * 2, "each member runs two of the four jobs", || {
        let Some(newest) = fleet.newest() else { return false };
        let ones = newest.values().filter(|m| *m == "one").count();
        ones == 2 && newest.values().filter(|m| *m == "two").count() == 2
    });
    let before = fleet.newest().unwrap();
    fleet.assert_once();
    assert!(one.log().contains("job placed"), "{}", one.log());
    // `status` names each job, its owner and its runs.
    let (code, out) = crate::util::run(&["status", "-b", &fleet.g.broker.address, "-g", &fleet.g.name]);
    assert_eq!(code, 0, "{out}");
    for job in ["a", "b", "c", "d"] {
        let line =
            out.lines().find(|l| l.starts_with(&format!("  job {job} (role "))).unwrap_or_else(|| panic!("{out}"));
        assert!(line.contains(": one (host") || line.contains(": two (host"), "{out}");
    }
    assert_eq!(out.matches("    last run:").count(), 4, "{out}");
    let (_, json) = crate::util::run(&["status", "-b", &fleet.g.broker.address, "-g", &fleet.g.name, "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut jobs: Vec<&str> = json["roles"].as_array().unwrap().iter().map(|r| r["job"].as_str().unwrap()).collect();
    jobs.sort();
    assert_eq!(jobs, ["a", "b", "c", "d"]);
    // `cron history JOB`: the job's runs, read from the topic.
    let (address, group) = (fleet.g.broker.address.as_str(), fleet.g.name.as_str());
    // Runs that said "end" before history reads: all on the topic but the
    // newest, whose record may still be on its way (seen once).
    let ended = fleet.lines().iter().filter(|w| w[0] == "end" && w[1] == "b").count();
    let (code, out) = crate::util::run(&["cron", "history", "-b", address, "-g", group, "b"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("STARTED ") && out.contains("\njob b (role ") && out.contains("owned by "), "{out}");
    let exited = out.lines().filter(|l| l.contains(" b ") && l.contains(" exit 0 ")).count();
    assert!(exited >= ended.saturating_sub(1).min(2), "{out}");
    let (_, json) = crate::util::run(&["cron", "history", "-b", address, "-g", group, "b", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["job"], "b");
    assert!(json["runs"].as_array().is_some_and(|runs| runs.iter().any(|r| r["exit_code"] == 0)), "{json}");
    let (code, out) = crate::util::run(&["cron", "history", "-b", address, "-g", group, "nope"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no job nope") && out.contains("its jobs: "), "{out}");

    // kill -9: one's jobs move to two; two's own keep running there.
    one.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = one.wait_exit(std::time::Duration::from_secs(10));
    let ran = fleet.runs().len();
    crate::util::wait_until(takeover * 2, "two runs every job", || {
        fleet.runs().len() > ran && fleet.newest().is_some_and(|n| n.values().all(|m| m == "two"))
    });
    for (job, member) in &before {
        if member == "two" {
            let since: Vec<_> = fleet.runs().into_iter().skip(ran).filter(|(j, _, _)| j == job).collect();
            assert!(since.iter().all(|(_, _, m)| m == "two"), "{job} stayed on two: {since:?}");
        }
    }
    fleet.assert_once();
    drop(two);
}

#[test]
fn a_crontab_with_a_bad_line_runs_the_good_ones_and_one_with_no_job_is_refused() {
    let fleet = Fleet::new("crontab-bad", &["good"], "1s", "0");
    let text = std::fs::read_to_string(&fleet.file).unwrap() + "0 25 * * * late echo never\n";
    std::fs::write(&fleet.file, text).unwrap();
    let member = fleet.member("one");
    crate::util::wait_until(fleet.g.broker.timing.takeover() * 2, "the good job runs", || fleet.newest().is_some());
    let path = fleet.file.display().to_string();
    assert!(
        member.log().contains(&format!("{path}:4:")),
        "the bad line named by file, line and column: {}",
        member.log()
    );
    fleet.assert_once();

    std::fs::write(&fleet.file, "0 25 * * * late echo never\n").unwrap();
    let out = std::process::Command::new(bin())
        .args(["-b", "127.0.0.1:9", "-g", "nobody", "--crontab", &path])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no job to run") && err.contains(&format!("{path}:1:")), "{err}");

    // What does not apply to a crontab is refused by name, before Kafka.
    for (extra, said) in [
        (&["--every", "5s"][..], "--every does not go with --crontab"),
        (&["--roles", "3"][..], "--roles does not go with --crontab"),
        (&["--", "true"][..], "cannot be used with"),
        (&["--never-lead"][..], "cannot be used with"),
    ] {
        let (code, out) =
            crate::util::run(&[&["-b", "127.0.0.1:9", "-g", "nobody", "--crontab", &path], extra].concat());
        assert_eq!(code, 2, "{extra:?}: {out}");
        assert!(out.contains(said), "{extra:?}: {out}");
    }
    let missing = format!("{path}.missing");
    let (code, out) = crate::util::run(&["-b", "127.0.0.1:9", "-g", "nobody", "--crontab", &missing]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&missing) && out.contains("No such file"), "{out}");
}

#[test]
fn a_frozen_members_jobs_move_and_run_once_and_it_takes_its_share_back_when_it_thaws() {
    // Runs outlast the heartbeat deadline now and then, so a freeze cuts
    // some short: the shim's lease kills them, and the new owner runs them
    // again as the next attempt.
    let fleet = Fleet::new("crontab-freeze", &["a", "b", "c", "d"], "1s", "0.3");
    let one = fleet.member("one");
    let two = fleet.member("two");
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "both run jobs", || {
        fleet.newest().is_some_and(|n| n.values().any(|m| m == "one") && n.values().any(|m| m == "two"))
    });
    one.signal(nix::sys::signal::Signal::SIGSTOP);
    let ran = fleet.runs().len();
    crate::util::wait_until(takeover * 3, "two runs every job", || {
        let since: std::collections::BTreeSet<String> =
            fleet.runs().into_iter().skip(ran).filter(|(_, _, m)| m == "two").map(|(j, _, _)| j).collect();
        since.len() == 4
    });
    one.signal(nix::sys::signal::Signal::SIGCONT);
    let ran = fleet.runs().len();
    crate::util::wait_until(takeover * 3, "one runs jobs again", || {
        fleet.runs().into_iter().skip(ran).any(|(_, _, m)| m == "one")
    });
    fleet.assert_once();
    drop((one, two));
}

#[test]
fn cron_pause_holds_one_job_while_the_others_run_and_cron_resume_ends_it() {
    let fleet = Fleet::new("crontab-pause", &["a", "b"], "1s", "0.1");
    let mut one = fleet.member("one");
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "a and b run", || fleet.newest().is_some());
    let starts = |job: &str| fleet.runs().iter().filter(|(j, _, _)| j == job).count();
    let (address, group) = (fleet.g.broker.address.as_str(), fleet.g.name.as_str());
    let cron = |args: &[&str]| crate::util::run(&[&["cron"], args, &["-b", address, "-g", group]].concat());

    let (code, out) = cron(&["pause", "a"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("job a: pause (offset ") && out.contains("acknowledged by one"), "{out}");
    // Acknowledged: a starts no run from now on, b runs on. (A run of a
    // started just before may write its start line after we counted.)
    let (a_then, b_then) = (starts("a"), starts("b"));
    crate::util::wait_until(takeover * 2, "b runs three more times", || starts("b") >= b_then + 3);
    let a_paused = starts("a");
    assert!(a_paused <= a_then + 1, "a paused: {:?}", fleet.runs());
    let (_, history) = cron(&["history", "a"]);
    assert!(history.contains("paused since ") && history.contains("`neli-run cron resume a` ends it"), "{history}");
    let (_, status) = crate::util::run(&["status", "-b", address, "-g", group]);
    let paused: Vec<&str> = status.lines().filter(|l| l.contains("paused since ")).collect();
    assert!(paused.len() == 1 && paused[0].contains("`neli-run cron resume a`"), "only a is paused: {status}");

    let (code, out) = cron(&["resume", "a"]);
    assert_eq!(code, 0, "{out}");
    crate::util::wait_until(takeover * 2, "a runs again", || starts("a") > a_paused);
    // `pause` and `resume` alone hold every job, each named.
    for what in ["pause", "resume"] {
        let (code, out) = crate::util::run(&[what, "-b", address, "-g", group]);
        assert_eq!(code, 0, "{out}");
        for job in ["a", "b"] {
            let said =
                out.lines().any(|l| l.starts_with(&format!("group {group} job {job} (role ")) && l.contains(what));
            assert!(said, "{job}: {out}");
        }
    }
    let (code, out) = cron(&["pause", "nope"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no job nope") && out.contains("its jobs: a, b"), "{out}");
    let (code, out) = cron(&["resume", "a", "--stop"]);
    assert_eq!(code, 2, "{out}");
    fleet.assert_once();
    one.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(one.wait_exit(takeover).success(), "{}", one.log());
}

#[test]
fn cron_trigger_runs_a_job_now_once_across_the_fleet() {
    // "leap" is due at midnight on February 29th only: never in this
    // test by itself.
    let fleet = Fleet::new("crontab-trigger", &["leap", "tick"], "1s", "0.1");
    let text = std::fs::read_to_string(&fleet.file).unwrap().replacen("@every 1s  leap", "0 0 29 2 *  leap", 1);
    std::fs::write(&fleet.file, text).unwrap();
    let one = fleet.member("one");
    let two = fleet.member("two");
    let takeover = fleet.g.broker.timing.takeover();
    let starts = |job: &str| fleet.runs().iter().filter(|(j, _, _)| j == job).count();
    crate::util::wait_until(takeover * 2, "tick runs", || starts("tick") >= 2);
    let (address, group) = (fleet.g.broker.address.as_str(), fleet.g.name.as_str());
    let trigger = || crate::util::run(&["cron", "trigger", "-b", address, "-g", group, "leap"]);
    let (code, out) = trigger();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("job leap: trigger (offset ") && out.contains("started, by "), "{out}");
    crate::util::wait_until(takeover, "the triggered run ends", || {
        fleet.lines().iter().any(|w| w[0] == "end" && w[1] == "leap")
    });
    // Once: while tick runs on three more times, no second run of leap.
    let tick = starts("tick");
    crate::util::wait_until(takeover * 2, "tick runs three more times", || starts("tick") >= tick + 3);
    assert_eq!(starts("leap"), 1, "{:?}", fleet.runs());
    // Another trigger, another run.
    let (code, out) = trigger();
    assert_eq!(code, 0, "{out}");
    crate::util::wait_until(takeover, "the second run starts", || starts("leap") == 2);
    fleet.assert_once();
    drop((one, two));
}

#[test]
fn a_failed_run_is_retried_by_the_jobs_next_owner_after_its_delay_and_stops_once_it_succeeds() {
    // "flaky" (never due by itself: February 29th) fails its first two
    // attempts; the test kills its first runner once it failed, long
    // before its retry's delay is over.
    let fleet = Fleet::new("crontab-retry", &["flaky"], "1s", "0");
    let runs = fleet.g.dir.path().join("runs").display().to_string();
    let say = |what: &str| format!("echo \"{what} $NELI_JOB $NELI_DUE $NELI_NAME hello $NELI_ATTEMPT\" >> {runs}");
    let text = format!(
        "0 0 29 2 *  flaky[retries=2,retry-delay=12s]  {}; if [ \"$NELI_ATTEMPT\" -ge 3 ]; then {}; else {}; exit 1; fi\n",
        say("start"),
        say("end"),
        say("failed")
    );
    std::fs::write(&fleet.file, text).unwrap();
    let mut members = [fleet.member("one"), fleet.member("two")];
    let (address, group) = (fleet.g.broker.address.as_str(), fleet.g.name.as_str());
    let history = || crate::util::run(&["cron", "history", "-b", address, "-g", group, "flaky", "--json"]);
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "the job is placed", || history().0 == 0);
    let (code, out) = crate::util::run(&["cron", "trigger", "-b", address, "-g", group, "flaky"]);
    assert_eq!(code, 0, "{out}");
    let said = |what: &str| fleet.lines().into_iter().filter(|w| w[0] == what).collect::<Vec<_>>();
    // `cron history` shows each attempt as the topic keeps them.
    let attempts = || {
        let json: serde_json::Value = serde_json::from_str(&history().1).unwrap();
        let runs = json["runs"].as_array().cloned().unwrap_or_default();
        runs.iter().map(|r| (r["attempt"].as_u64().unwrap_or(0), r["exit_code"].as_u64())).collect::<Vec<_>>()
    };
    crate::util::wait_until(takeover, "the first attempt's failure is on the topic", || {
        attempts().first() == Some(&(1, Some(1)))
    });
    // Its retry waits 12 s: `cron history` shows it as the due time's next
    // attempt, not as a due time of the job.
    let json: serde_json::Value = serde_json::from_str(&history().1).unwrap();
    assert_eq!(json["next_retry"]["attempt"], 2, "{json}");
    let due = json["runs"][0]["due_ms"].as_u64().unwrap_or_else(|| panic!("a due time: {json}"));
    let due = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(due));
    assert_eq!(json["next_retry"]["due"], due.to_string(), "{json}");
    let (_, text) = crate::util::run(&["cron", "history", "-b", address, "-g", group, "flaky"]);
    assert!(text.contains("next run: attempt 2 of the run due "), "{text}");
    let first = said("start").remove(0);
    let (owner, other) = if first[3] == "one" { (0, "two") } else { (1, "one") };
    members[owner].signal(nix::sys::signal::Signal::SIGKILL);
    let _ = members[owner].wait_exit(std::time::Duration::from_secs(10));
    // The next owner reads the failure and its attempt off the topic.
    crate::util::wait_until(takeover * 2 + std::time::Duration::from_secs(30), "the third attempt succeeds", || {
        !said("end").is_empty()
    });
    let starts: Vec<(String, String, String)> =
        said("start").into_iter().map(|w| (w[2].clone(), w[3].clone(), w[5].clone())).collect();
    let due = &first[2];
    assert_eq!(
        starts,
        [
            (due.clone(), first[3].clone(), "1".into()),
            (due.clone(), other.into(), "2".into()),
            (due.clone(), other.into(), "3".into())
        ],
        "the same due time, attempts 1 to 3, the retries by the job's new owner"
    );
    fleet.assert_once();
    crate::util::wait_until(takeover, "history shows the success", || attempts().last() == Some(&(3, Some(0))));
    assert_eq!(attempts(), [(1, Some(1)), (2, Some(1)), (3, Some(0))]);
}

#[test]
fn overlap_skip_queue_and_replace_decide_what_a_due_time_that_comes_during_a_run_does() {
    // Runs longer than their period: "replace" (every 3 s, never ends by
    // itself), "skip" and "queue" (every 2 s, 3 s each). Each run writes
    // its due time and the wall ms of its start, end or stop.
    let fleet = Fleet::new("crontab-overlap", &[], "1s", "0");
    let dir = fleet.g.dir.path().join("runs");
    std::fs::create_dir_all(&dir).unwrap();
    let line = |job: &str, when: &str, overlap: &str, work: &str| {
        let out = dir.join(job).display().to_string();
        let due = "$(date -d \"$NELI_DUE\" +%s%3N)";
        format!(
            "{when}  {job}[overlap={overlap}]  trap 'echo \"stop {due} $(date +%s%3N)\" >> {out}; exit 143' TERM; \
             echo \"start {due} $(date +%s%3N)\" >> {out}; {work}; echo \"end {due} $(date +%s%3N)\" >> {out}\n"
        )
    };
    let text = line("r", "@every 3s", "replace", "sleep 100 & wait")
        + &line("s", "@every 2s", "skip", "sleep 3")
        + &line("q", "@every 2s", "queue", "sleep 3");
    std::fs::write(&fleet.file, text).unwrap();
    let member = fleet.member("one");
    // Each job's lines: (what, due ms, at ms).
    let lines = |job: &str| -> Vec<(String, u64, u64)> {
        neli_proof::detector::read_lines(&dir.join(job))
            .iter()
            .map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                (w[0].to_string(), w[1].parse().unwrap(), w[2].parse().unwrap())
            })
            .collect()
    };
    let starts = |job: &str| lines(job).into_iter().filter(|l| l.0 == "start").collect::<Vec<_>>();
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2 + std::time::Duration::from_secs(40), "four runs of each job", || {
        ["r", "s", "q"].iter().all(|job| starts(job).len() >= 4)
    });
    drop(member);
    for job in ["r", "s", "q"] {
        let lines = lines(job);
        let dues: Vec<u64> = starts(job).iter().map(|l| l.1).collect();
        assert!(dues.windows(2).all(|w| w[0] < w[1]), "{job}: each due time once, in order: {lines:?}");
        // Its shim is started ahead of the due time; the command, never.
        assert!(starts(job).iter().all(|l| l.2 >= l.1), "{job}: a start before its due time: {lines:?}");
        // Each run's ending (its end or stop line) before the next start.
        let mut queued = 0;
        for pair in starts(job).windows(2) {
            let ended = lines.iter().find(|l| l.0 != "start" && l.1 == pair[0].1).expect("the run ended");
            assert!(ended.2 <= pair[1].2, "{job}: one run at a time: {lines:?}");
            let (next_due, ended_at) = (pair[1].1, ended.2);
            match job {
                // Stopped once its next due time came, which then ran.
                "r" => assert!(ended.0 == "stop" && ended_at >= next_due && next_due > pair[0].1, "{lines:?}"),
                // No due time that came during a run.
                "s" => assert!(next_due > ended_at, "skip: {lines:?}"),
                // The latest that came during the run (none older), run
                // after it (its end line is written just before it exits).
                _ => {
                    assert!(next_due + 2000 > ended_at, "queue: {lines:?}");
                    queued += usize::from(next_due < ended_at);
                }
            }
        }
        assert!(job != "q" || queued > 0, "queue runs a due time that came during a run: {lines:?}");
    }
}

#[test]
fn a_crontab_member_denied_its_topic_exits_77_naming_the_grants() {
    let name = format!("t-crontab-acl-{}", std::process::id());
    let topic = format!("{name}.neli");
    let mut g =
        crate::util::Group::on(crate::util::Broker::dev_with("127.0.0.1", &["--deny-topic", &topic]), "crontab-acl");
    g.name = name;
    let fleet = Fleet {
        file: g.dir.path().join("fleet.crontab"),
        g,
        jobs: vec!["a".into()],
        every: "1s".into(),
        hold: "0".into(),
    };
    fleet.write("fleet.crontab", &["a"]);
    let mut member = fleet.member("one");
    let status = member.wait_exit(fleet.g.broker.timing.takeover() * 2);
    assert_eq!(status.code(), Some(77), "{}", member.log());
    assert!(member.log().contains("WRITE") && member.log().contains(&topic), "{}", member.log());
}
