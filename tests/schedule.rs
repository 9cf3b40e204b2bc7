//! A schedule of its own: `neli-run --group G --every 2s -- JOB` on every
//! member runs JOB at each due time on the leader, across crashes, freezes
//! and handovers. Counted from the command's own side: each run appends
//! "start DUE ATTEMPT" when it starts and "end DUE" when it gets to its end,
//! and the overlap detector sees every start.

use nix::sys::signal::Signal;

use crate::util::*;

/// A job that logs its start, takes `secs`, then logs its end.
fn job(g: &Group, secs: &str) -> String {
    let runs = g.dir.path().join("runs");
    let runs = runs.display();
    format!(r#"echo "start $NELI_DUE $NELI_ATTEMPT" >> {runs}; sleep {secs}; echo "end $NELI_DUE" >> {runs}"#)
}

/// The job's lines, split into words.
fn runs(g: &Group) -> Vec<Vec<String>> {
    neli_proof::detector::read_lines(&g.dir.path().join("runs"))
        .iter()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

/// The due times that ran to their end, in order.
fn ended(g: &Group) -> Vec<String> {
    runs(g).into_iter().filter(|w| w[0] == "end").map(|w| w[1].clone()).collect()
}

/// Whether a run has started and not ended: a fault now cuts it short.
fn mid_run(g: &Group) -> bool {
    runs(g).last().is_some_and(|w| w[0] == "start")
}

/// Waits for `n` more runs to end than `before`, then for a run to be under
/// way; returns who leads (the member running it).
fn after_runs(g: &Group, members: &[Member], before: usize, n: usize) -> usize {
    let bound = g.broker.timing.takeover() * 2;
    wait_until(bound, &format!("{n} more runs end"), || ended(g).len() >= before + n);
    wait_until(bound, "a run is under way", || mid_run(g) && g.lock_held());
    g.leader_among(members)
}

fn millis(rfc3339: &str) -> u64 {
    let t = humantime::parse_rfc3339(rfc3339).unwrap_or_else(|e| panic!("NELI_DUE {rfc3339}: {e}"));
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn every_due_time_runs_to_its_end_exactly_once_across_a_kill_9_a_sigstop_and_a_graceful_stop() {
    let g = Group::new("schedule-faults");
    // A frozen neli-run does not freeze its command: a run that would end
    // before the lease kills it ends unrecorded, and the next leader runs it
    // again (at least once: the README says so). So each run here outlasts
    // the lease (the heartbeat deadline), and a freeze cuts it short.
    let secs = g.broker.timing.deadline.as_secs_f64() + 1.0;
    let job = job(&g, &format!("{secs:.1}"));
    let every = format!("{}s", (secs * 1.5).ceil());
    let flags = ["--every", &every, "--missed", "all"];
    let mut members: Vec<Member> = ["a", "b", "c"].iter().map(|n| g.member(n, &flags, &["sh", "-c", &job])).collect();
    let mut total = 0;
    let mut faults = Vec::new();
    for fault in [Signal::SIGKILL, Signal::SIGSTOP, Signal::SIGTERM] {
        let leader = after_runs(&g, &members, total, 2);
        total = ended(&g).len();
        members[leader].signal(fault);
        faults.push((members[leader].name.clone(), fault));
        if fault == Signal::SIGSTOP {
            // Frozen: its lease kills its run; another member takes over.
            let next = after_runs(&g, &members, total, 1);
            assert_ne!(next, leader, "another member leads while it is frozen");
            members[leader].signal(Signal::SIGCONT);
        }
    }
    after_runs(&g, &members, total, 2);
    for m in &members {
        m.signal(Signal::SIGTERM);
    }
    for m in &mut members {
        m.wait_exit(g.broker.timing.takeover());
    }
    g.assert_no_overlap();
    g.assert_no_orphan();

    let ended = ended(&g);
    let dues: Vec<u64> = ended.iter().map(|d| millis(d)).collect();
    // Each due time ran to its end once, and none between the first and
    // the last was skipped (--missed all, no deadline).
    let period = humantime::parse_duration(&every).unwrap().as_millis() as u64;
    for pair in dues.windows(2) {
        assert_eq!(pair[1], pair[0] + period, "due times ended, in order: {ended:?} (faults {faults:?})");
    }
    assert!(dues.iter().all(|d| d % period == 0), "on the grid from the epoch: {ended:?}");
    // The run the graceful stop cut short ran again as a later attempt
    // (its disclaimer named it; a kill -9 in the first milliseconds of a
    // run, before a record names it, leaves its retry attempt 1).
    let retries = runs(&g).into_iter().filter(|w| w[0] == "start" && w[2] != "1").count();
    assert!(retries >= 1, "a run cut short ran again as a later attempt: {:?}", runs(&g));
    // The fencing tokens grew with each leader that ran the job.
    let tokens: Vec<i64> = g.starts().into_iter().map(|s| s.1).collect();
    assert!(tokens.windows(2).all(|t| t[0] <= t[1]), "{tokens:?}");
}

#[test]
fn a_cron_schedule_leads_on_between_runs_and_status_shows_its_runs_and_next_due_time() {
    let g = Group::new("schedule-cron");
    let job = job(&g, "0.2");
    // Seconds in a sixth field: due every 2 s, in UTC.
    let addr = crate::metrics::free_addr();
    let flags = ["--cron", "*/2 * * * * *", "--time-zone", "UTC", "--metrics-addr", &addr];
    let mut a = g.member("a", &flags, &["sh", "-c", &job]);
    let bound = g.broker.timing.takeover() * 2;
    wait_until(bound, "three runs end", || ended(&g).len() >= 3);
    assert!(!a.exited(), "a scheduled member stays up between runs: {}", a.log());
    // The job writes its end a moment before its member sees it exit and
    // records that on the topic, which is where status reads it (a CI run
    // read the third run as running in between): wait for status to say so.
    let mut out = String::new();
    wait_until(bound, "status shows three runs ended", || {
        let code;
        (code, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
        let runs = serde_json::from_str::<serde_json::Value>(&out).ok().map(|s| s["schedule"]["runs"].clone());
        let done = |r: &serde_json::Value| r.as_array().map(|r| r.iter().filter(|r| r["state"] == "exited").count());
        code == 0 && runs.and_then(|r| done(&r)).is_some_and(|n| n >= 3)
    });
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let schedule = &status["schedule"];
    let runs = schedule["runs"].as_array().unwrap_or_else(|| panic!("{out}"));
    let done: Vec<&serde_json::Value> = runs.iter().filter(|r| r["state"] == "exited").collect();
    assert!(done.len() >= 3, "{out}");
    for run in &done {
        assert_eq!(
            (run["status"].as_u64(), run["name"].as_str(), run["attempt"].as_u64()),
            (Some(0), Some("a"), Some(1))
        );
        let due = run["due"].as_str().unwrap();
        assert!(ended(&g).iter().any(|d| millis(d) / 1000 == millis(due) / 1000), "{due} is one the job saw: {out}");
        let (started, ended) = (millis(run["started"].as_str().unwrap()), millis(run["ended"].as_str().unwrap()));
        assert!(
            started >= millis(due) && ended >= started + 200,
            "started on time, ended after the job's 0.2 s: {run}"
        );
    }
    let next = millis(schedule["next_due"].as_str().unwrap_or_else(|| panic!("{out}")));
    let last = millis(done.last().unwrap()["due"].as_str().unwrap());
    assert!(next > last && next % 2000 == 0, "the next due time follows the last run: {out}");
    let (_, text) = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    // Read while a run goes on, its due time is the next until it ends.
    let next = text.contains("next run due ") || text.contains("next run: after the one due ");
    assert!(next && text.contains("runs (oldest first):"), "{text}");
    assert!(text.contains("with status 0, by a (host "), "{text}");
    // /metrics counts the runs by outcome, and has the last success and the
    // next due time as Unix times.
    let (_, metrics) = crate::metrics::get(&addr, "/metrics").unwrap();
    let value = |name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}: {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("neli_runs_total{outcome=\"success\"}") >= 3.0, "{metrics}");
    assert_eq!(value("neli_runs_total{outcome=\"failure\"}"), 0.0, "{metrics}");
    // Read after status: a run may have ended in between (a CI run at load
    // 35 saw the fourth), so the last success is checked against what
    // /metrics itself says is next.
    let last_success = value("neli_last_success_timestamp_seconds");
    let next_run = value("neli_next_run_timestamp_seconds");
    assert!(last_success * 1000.0 >= last as f64 && last_success < next_run, "{metrics}");
    assert_eq!(next_run as u64 % 2, 0, "{metrics}");
    a.signal(Signal::SIGTERM);
    a.wait_exit(bound);
    g.assert_no_overlap();
}

#[test]
fn a_new_leader_does_not_repeat_a_run_that_ended_before_a_graceful_handover() {
    let g = Group::new("schedule-handover");
    let job = job(&g, "0");
    // Due every 3 s; the job takes no time.
    let flags = ["--every", "3s"];
    let mut a = g.member("a", &flags, &["sh", "-c", &job]);
    let bound = g.broker.timing.takeover() * 2;
    wait_until(bound, "a's first run ends", || !ended(&g).is_empty());
    let mut b = g.member("b", &flags, &["sh", "-c", &job]);
    wait_until(bound, "b has joined as a standby", || b.joined_as_standby());
    // (a may have run more due times meanwhile: tansu takes 3 s to let b in.)
    a.signal(Signal::SIGTERM);
    a.wait_exit(bound);
    let by_a = ended(&g).len();
    wait_until(bound, "b runs a due time", || ended(&g).len() > by_a);
    let dues: Vec<u64> = ended(&g).iter().map(|d| millis(d)).collect();
    // b's run is a due time after every one a ran, and none ended twice.
    assert!(dues.windows(2).all(|w| w[0] < w[1]), "due times ended, in order, once each: {:?}", runs(&g));
    assert_eq!(g.starts().last().map(|s| s.0.as_str()), Some("b"), "{:?}", runs(&g));
    b.signal(Signal::SIGTERM);
    b.wait_exit(bound);
    g.assert_no_overlap();
}

/// The wall clock stepping under a running member (NTP's first sync an
/// hour forward, then 5 s back) without root: `NELI_TEST_WALL_OFFSET_FILE`
/// is a debug-build-only hook (src/clock.rs; a release build has none) that
/// adds the milliseconds a file holds to neli-run's every wall-clock
/// reading. The job reads the same file, so it logs the time by the clock
/// neli-run sees, and applies the next step itself (moving STEP over the
/// offset) as it starts: mid-run, never while neli-run decides a start.
#[test]
fn due_times_follow_the_wall_clock_when_it_steps_forward_then_back_and_none_runs_twice() {
    let g = Group::new("schedule-clock-step");
    let dir = g.dir.path();
    let (offset, step, runs) = (dir.join("offset"), dir.join("step"), dir.join("runs"));
    // Started an hour behind, as before NTP's first sync.
    std::fs::write(&offset, "-3600000").unwrap();
    let job = format!(
        r#"now=$(( $(date +%s%3N) + $(cat {o}) )); echo "$NELI_DUE $NELI_ATTEMPT $now" >> {r}; if [ -f {s} ]; then mv {s} {o}; fi; sleep 0.3"#,
        o = offset.display(),
        s = step.display(),
        r = runs.display()
    );
    let env = vec!["env".to_string(), format!("NELI_TEST_WALL_OFFSET_FILE={}", offset.display())];
    let flags = [&LONG_LEASE[..], &["--every", "2s"]].concat();
    let mut a = g.member_in(Some(env), "a", &flags, &["sh", "-c", &job]);
    let lines = || neli_proof::detector::read_lines(&runs).len();
    wait_until(LONG, "a first run", || lines() >= 1);
    for to in ["0", "-5000"] {
        let tmp = dir.join("step.tmp");
        std::fs::write(&tmp, to).unwrap();
        std::fs::rename(&tmp, &step).unwrap();
        wait_until(LONG, "a run takes the step", || !step.exists());
        let n = lines();
        wait_until(LONG, "two runs after the step", || lines() >= n + 2);
    }
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    // Every run started at or after its due time by the clock neli-run saw
    // (1 ms rounding aside), in the same frame (not an hour off), and each
    // due time ran once, in order (again only as a later attempt of a run a
    // fence cut short).
    let runs: Vec<(u64, u32, u64)> = neli_proof::detector::read_lines(&runs)
        .iter()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (millis(w[0]), w[1].parse().unwrap(), w[2].parse().unwrap())
        })
        .collect();
    for &(due, _, now) in &runs {
        assert!(now + 100 >= due && now < due + 600_000, "a run of {due} started at {now}: {runs:?}");
    }
    for w in runs.windows(2) {
        assert!(w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1), "{runs:?}");
    }
    // neli-run saw both steps, and said so.
    let log = a.log();
    let steps: Vec<i64> = log
        .lines()
        .filter(|l| l.contains("the wall clock stepped"))
        .filter_map(|l| l.split("step_ms=").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        steps.len() == 2 && (steps[0] - 3_600_000).abs() < 1000 && (steps[1] + 5000).abs() < 1000,
        "{steps:?}: {log}"
    );
    g.assert_no_overlap();
}

#[test]
fn schedule_flags_that_cannot_apply_are_refused_naming_why() {
    let cases: [(&[&str], &str); 9] = [
        (&["--every", "500ms"], "--every must be at least 1s"),
        (&["--every", "5m", "--restart", "always"], "--restart always is for a command run as a service"),
        (&["--every", "5m", "--once-within", "10s"], "leave --once-within out"),
        (&["--cron", "*/5 * * * *", "--failed-run", "exit"], "leave --failed-run out"),
        (&["--missed", "all"], "--missed applies only to a schedule: give --every or --cron"),
        (&["--starting-deadline", "1m"], "--starting-deadline applies only to a schedule"),
        (&["--cron", "61 * * * *"], "--cron '61 * * * *': Component error: Number out of bounds"),
        (&["--cron", "0 0 30 2 *"], "it never comes"),
        (&["--cron", "0 * * * *", "--time-zone", "Mars/Base"], "unknown time zone 'Mars/Base'"),
    ];
    for (flags, says) in cases {
        let args = [&["-g", "x", "-b", "127.0.0.1:1"], flags, &["--", "true"]].concat();
        let (code, out) = run(&args);
        assert_eq!(code, 2, "{flags:?}: {out}");
        assert!(out.contains(says), "{flags:?}: {out}");
    }
}
