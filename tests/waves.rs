//! Once per wave: the README's cron line, `neli-run --group G -- JOB`
//! started on every host for one tick, runs JOB once between them. The
//! overlap detector counts the starts from the command's own side; each
//! attempt also appends NELI_ATTEMPT and NELI_WAVE to a file.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::*;

/// A job that records its attempt, then runs `then` (a shell snippet).
fn recorded(g: &Group, then: &str) -> String {
    let attempts = g.dir.path().join("attempts");
    format!("echo \"$NELI_ATTEMPT $NELI_WAVE\" >> {}; {then}", attempts.display())
}

/// Each attempt's (NELI_ATTEMPT, NELI_WAVE).
fn attempts(g: &Group) -> Vec<(String, String)> {
    neli_proof::detector::read_lines(&g.dir.path().join("attempts"))
        .iter()
        .filter_map(|l| l.split_once(' ').map(|(a, w)| (a.to_string(), w.to_string())))
        .collect()
}

fn bound(g: &Group) -> Duration {
    g.broker.timing.takeover() * 2
}

#[test]
fn three_members_started_for_one_tick_run_a_one_second_job_once() {
    let g = Group::new("wave-once");
    let job = recorded(&g, "sleep 1");
    // As cron starts them on three hosts: within two seconds of each other.
    let mut members: Vec<Member> = ["a", "b", "c"]
        .iter()
        .map(|name| {
            let m = g.member(name, &[], &["sh", "-c", &job]);
            std::thread::sleep(Duration::from_millis(700));
            m
        })
        .collect();
    for m in &mut members {
        assert_eq!(m.wait_exit(bound(&g)).code(), Some(0), "{}", m.log());
    }
    g.assert_no_overlap();
    let starts = g.starts();
    assert_eq!(starts.len(), 1, "the job ran once: {starts:?}");
    assert_eq!(attempts(&g).len(), 1);
    assert_eq!(attempts(&g)[0].0, "1", "a first attempt");
    // The others say who ran it, and did not run it.
    let runner = &starts[0].0;
    let ran = members.iter().find(|m| &m.name == runner).unwrap().log();
    assert!(ran.contains("the run's ending is on the group's topic"), "the runner says so: {ran}");
    for m in members.iter().filter(|m| &m.name != runner) {
        let log = m.log();
        assert!(log.contains("this wave's run already ended"), "{log}");
        assert!(log.contains(&format!("name=\"{runner}\"")), "names the member that ran it: {log}");
        assert!(!log.contains("the run's ending is on"), "only the runner says its ending is recorded: {log}");
        assert!(!log.contains("child started"), "{log}");
    }
    // `status` shows the wave's run, as the members read it.
    let (code, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    assert_eq!(code, 1, "no leader once the wave is over: {out}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let last = &status["last_run"];
    assert_eq!((last["name"].as_str(), last["attempt"].as_u64()), (Some(runner.as_str()), Some(1)), "{out}");
    assert_eq!((last["status"].as_u64(), last["state"].as_str()), (Some(0), Some("exited")), "{out}");
    assert_eq!(last["token"].as_i64(), Some(starts[0].1));
    let (_, text) = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    assert!(text.contains("last run: exited 0, started 20"), "{text}");
    assert!(text.contains(&format!("by {runner} (host ")) && !text.contains("attempt"), "{text}");
}

#[test]
fn a_leader_killed_or_stopped_mid_run_is_retried_once_by_another_member_as_the_next_attempt() {
    for (sig, test) in [(Signal::SIGKILL, "wave-retry-crash"), (Signal::SIGTERM, "wave-retry-stop")] {
        retried_after(sig, test);
    }
}

fn retried_after(sig: Signal, test: &str) {
    let g = Group::new(test);
    // The first attempt hangs; a retry succeeds at once.
    let job = recorded(&g, "[ \"$NELI_ATTEMPT\" = 1 ] && exec sleep 1000; exit 0");
    let mut a = g.member("a", &[], &["sh", "-c", &job]);
    wait_until(bound(&g), "a runs the first attempt", || g.lock_held());
    let mut b = g.member("b", &[], &["sh", "-c", &job]);
    wait_until(bound(&g), "b has joined as a standby", || b.joined_as_standby());
    a.signal(sig);
    a.wait_exit(bound(&g));
    assert_eq!(b.wait_exit(bound(&g)).code(), Some(0), "{}", b.log());
    g.assert_no_overlap();
    g.assert_no_orphan();
    let starts: Vec<String> = g.starts().into_iter().map(|s| s.0).collect();
    assert_eq!(starts, ["a", "b"]);
    let attempts = attempts(&g);
    assert_eq!(attempts.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(), ["1", "2"]);
    assert_eq!(attempts[0].1, attempts[1].1, "the retry belongs to the first attempt's wave");
    assert!(attempts[0].1.ends_with('Z') && attempts[0].1.contains('T'), "RFC 3339: {}", attempts[0].1);
}

#[test]
fn a_member_started_within_the_window_exits_and_one_started_after_it_runs_again() {
    let g = Group::new("wave-window");
    let job = recorded(&g, "exit 0");
    let window = ["--once-within", "5s"];
    let mut a = g.member("a", &window, &["sh", "-c", &job]);
    assert_eq!(a.wait_exit(bound(&g)).code(), Some(0), "{}", a.log());
    let ran = Instant::now();
    // Started at once after the run (within 5 s of its start): it exits.
    let mut b = g.member("b", &window, &["sh", "-c", &job]);
    assert_eq!(b.wait_exit(bound(&g)).code(), Some(0), "{}", b.log());
    assert!(b.log().contains("this wave's run already ended"), "{}", b.log());
    if ran.elapsed() < Duration::from_secs(5) {
        assert_eq!(g.starts().len(), 1, "b ran the job within the window");
    }
    // The window is a span of time: passing it is what the test is about.
    std::thread::sleep(Duration::from_secs(5).saturating_sub(ran.elapsed()) + Duration::from_millis(200));
    let mut c = g.member("c", &window, &["sh", "-c", &job]);
    assert_eq!(c.wait_exit(bound(&g)).code(), Some(0), "{}", c.log());
    let starts: Vec<String> = g.starts().into_iter().map(|s| s.0).collect();
    assert_eq!(starts, ["a", "c"], "c began a wave of its own");
    let attempts = attempts(&g);
    assert_eq!(attempts.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(), ["1", "1"]);
    assert_ne!(attempts[0].1, attempts[1].1);
}

#[test]
fn a_failed_run_is_retried_by_the_next_member_or_ends_the_wave_with_failed_run_exit() {
    let g = Group::new("wave-failed-retry");
    let job = recorded(&g, "exit 3");
    let mut a = g.member("a", &[], &["sh", "-c", &job]);
    assert_eq!(a.wait_exit(bound(&g)).code(), Some(3));
    let mut b = g.member("b", &[], &["sh", "-c", &job]);
    assert_eq!(b.wait_exit(bound(&g)).code(), Some(3));
    assert_eq!(attempts(&g).iter().map(|a| a.0.as_str()).collect::<Vec<_>>(), ["1", "2"]);

    let g = Group::new("wave-failed-exit");
    let job = recorded(&g, "exit 3");
    let exit = ["--failed-run", "exit"];
    let mut a = g.member("a", &exit, &["sh", "-c", &job]);
    assert_eq!(a.wait_exit(bound(&g)).code(), Some(3));
    let mut b = g.member("b", &exit, &["sh", "-c", &job]);
    assert_eq!(b.wait_exit(bound(&g)).code(), Some(3), "b exits with the run's status: {}", b.log());
    assert_eq!(g.starts().len(), 1);
}

#[test]
fn with_once_within_0_every_member_runs_the_job() {
    let g = Group::new("wave-off");
    let mut a = g.member("a", &["--once-within", "0"], &["true"]);
    assert_eq!(a.wait_exit(bound(&g)).code(), Some(0));
    let mut b = g.member("b", &["--once-within", "0"], &["true"]);
    assert_eq!(b.wait_exit(bound(&g)).code(), Some(0));
    assert_eq!(g.starts().len(), 2);
}

#[test]
fn wave_flags_that_cannot_apply_are_refused_naming_why() {
    let cases: [(&[&str], &str); 6] = [
        (&["--once-within", "1m", "--restart", "always"], "--once-within applies only to --restart never"),
        (&["--failed-run", "retry", "--restart", "on-failure"], "--failed-run applies only to --restart never"),
        (&["--once-within", "2h"], "--once-within 2h: too long, at most 1h"),
        (&["--once-within", "0", "--failed-run", "exit"], "--failed-run has no effect with --once-within 0"),
        (&["--max-runtime", "0"], "--max-runtime must be more than 0"),
        (&["--max-runtime", "5 parsecs"], "invalid value '5 parsecs' for '--max-runtime <DURATION>'"),
    ];
    for (flags, says) in cases {
        let args = [&["-g", "x", "-b", "127.0.0.1:1"], flags, &["--", "true"]].concat();
        let (code, out) = run(&args);
        assert_eq!(code, 2, "{flags:?}: {out}");
        assert!(out.contains(says), "{flags:?}: {out}");
    }
}

#[test]
fn a_run_stopped_for_overrunning_max_runtime_ends_its_wave_like_a_failed_run() {
    let g = Group::new("wave-max-runtime");
    let job = recorded(&g, "exec sleep 1000");
    // Long enough for b to have joined before a's run overruns: tansu
    // assigned nobody for 44 s when a left while b's join was under way.
    let flags = ["--max-runtime", "6s", "--failed-run", "exit"];
    let mut a = g.member("a", &flags, &["sh", "-c", &job]);
    wait_until(bound(&g), "a runs it", || g.lock_held());
    let mut b = g.member("b", &flags, &["sh", "-c", &job]);
    wait_until(bound(&g), "b has joined as a standby", || b.joined_as_standby());
    assert_eq!(a.wait_exit(bound(&g)).code(), Some(143), "{}", a.log());
    assert_eq!(b.wait_exit(bound(&g)).code(), Some(143), "b exits with the stopped run's status: {}", b.log());
    assert_eq!(g.starts().len(), 1);
    g.assert_no_orphan();
}

/// A host whose clock runs a day ahead wrote that a wave succeeded: by the
/// clocks, that wave would seem to begin in everyone's future and cover
/// every member started until then, skipping the job for a day. Who began
/// before a wave is read from the log instead: a member started after the
/// record was written runs the job, and says why the clocks were not used.
#[test]
fn a_success_written_by_a_clock_a_day_ahead_does_not_cover_later_members() {
    use neli_run::for_tests::{wall_ms, Attempt, BootTime, Content, Heartbeat, Record, Stance};
    let g = Group::new("wave-future-clock");
    let ghost = neli_run::for_tests::Member::this_process("ahead".into());
    // A token is an earlier offset: fillers at 0 and 1, the wave's at 1.
    g.produce(b"filler");
    g.produce(b"filler");
    let job = Attempt {
        wave_ms: wall_ms(),
        wave_token: 1,
        number: 1,
        token: 1,
        code: Some(0),
        by: None,
        due: None,
        ended: None,
        line: None,
    };
    let record = Record { attempt: Some(job), ..Record::saying(1, Stance::Released) };
    let mut hb =
        Heartbeat::new(&ghost, 1, BootTime::now(), wall_ms(), Content { record, since_ms: None, deadline_ms: 1000 });
    const DAY: u64 = 86_400_000;
    hb.at_ms += DAY;
    hb.attempt.as_mut().unwrap().wave_ms += DAY;
    g.produce(&hb.encode());
    let mut a = g.member("a", &[], &["true"]);
    assert_eq!(a.wait_exit(bound(&g)).code(), Some(0), "{}", a.log());
    assert_eq!(g.starts().len(), 1, "a ran the job: {}", a.log());
    assert!(a.log().contains("that host's clock is ahead of ours"), "{}", a.log());

    // A member started before such a wave began, by the log, belongs to it:
    // held back by the host's claim, it reads the success and exits.
    let g = Group::new("wave-future-clock-before");
    g.produce(b"filler");
    let claim = Record::saying(1, Stance::Leading { token: 0 });
    g.produce(
        &Heartbeat::new(
            &ghost,
            1,
            BootTime::now(),
            wall_ms(),
            Content { record: claim, since_ms: None, deadline_ms: 60_000 },
        )
        .encode(),
    );
    let mut b = g.member("b", &[], &["true"]);
    wait_until(bound(&g), "b waits for the claim", || b.log().contains("waiting until its command must be gone"));
    let job = Attempt {
        wave_ms: wall_ms(),
        wave_token: 2,
        number: 1,
        token: 0,
        code: Some(0),
        by: None,
        due: None,
        ended: None,
        line: None,
    };
    let record = Record { attempt: Some(job), ..Record::saying(1, Stance::Released) };
    let mut hb =
        Heartbeat::new(&ghost, 2, BootTime::now(), wall_ms(), Content { record, since_ms: None, deadline_ms: 60_000 });
    hb.at_ms += DAY;
    hb.attempt.as_mut().unwrap().wave_ms += DAY;
    g.produce(&hb.encode());
    assert_eq!(b.wait_exit(bound(&g)).code(), Some(0), "{}", b.log());
    assert!(b.log().contains("this wave's run already ended"), "{}", b.log());
    assert!(g.starts().is_empty(), "b ran the job: {}", b.log());
}

/// A member started before its host's clock was set (NTP's first sync
/// steps it an hour forward while the member waits) judges the wave by the
/// clock as set: the wave began seconds before it started, so it belongs
/// to it. By the clock it started with, the wave would begin an hour in its
/// future, and it would run the job again. `NELI_TEST_WALL_OFFSET_FILE` is
/// a debug-build-only hook (src/clock.rs; a release build has none): it
/// adds the milliseconds a file holds to neli-run's wall-clock readings.
#[test]
fn a_member_started_before_its_clock_was_set_belongs_to_the_wave_by_the_clock_as_set() {
    let g = Group::new("wave-clock-step");
    let (offset, gate) = (g.dir.path().join("offset"), g.dir.path().join("gate"));
    let job = recorded(&g, &format!("while [ ! -f {} ]; do sleep 0.05; done", gate.display()));
    // A lease the load cannot cut short: a fence would make b's run a retry.
    let mut a = g.member("a", &LONG_LEASE, &["sh", "-c", &job]);
    wait_until(LONG, "a runs the job", || attempts(&g).len() == 1);
    std::fs::write(&offset, "-3600000").unwrap();
    let env = vec!["env".to_string(), format!("NELI_TEST_WALL_OFFSET_FILE={}", offset.display())];
    let mut b = g.member_in(Some(env), "b", &LONG_LEASE, &["sh", "-c", &job]);
    wait_until(LONG, "b has joined as a standby", || b.joined_as_standby());
    std::fs::write(&offset, "0").unwrap();
    std::fs::write(&gate, "").unwrap();
    assert_eq!(a.wait_exit(LONG).code(), Some(0), "{}", a.log());
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "{}", b.log());
    assert!(b.log().contains("this wave's run already ended"), "{}", b.log());
    assert!(b.log().contains("the wall clock stepped"), "{}", b.log());
    assert_eq!(attempts(&g).len(), 1, "the job ran once: {}", b.log());
    g.assert_no_overlap();
}
