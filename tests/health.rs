//! --health-cmd: an unhealthy leader hands over, an unhealthy member never
//! leads (as a standby, or from its start), a check that hangs is a
//! failure at its timeout, one that cannot run says why, and none leaves
//! anything running. Each member's check is `test -f DIR/NAME.ok`: the test
//! makes a member unhealthy by removing its file.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::{run, sleeping, stays_false, wait_until, Group, KillSleeping, Member, LONG};

/// The check's thresholds in these tests: a check every 200 ms, 2 failures
/// in a row make a member unhealthy.
const CHECK: [&str; 6] = ["--health-interval", "200ms", "--health-timeout", "1s", "--health-retries", "2"];

/// The file whose presence makes `name` healthy.
fn ok_file(g: &Group, name: &str) -> PathBuf {
    g.dir.path().join(format!("{name}.ok"))
}

/// `name`, healthy while its file exists (created now if `healthy`).
fn member(g: &Group, name: &str, healthy: bool) -> Member {
    let cmd = format!("test -f {}", ok_file(g, name).display());
    member_checked(g, name, healthy, &cmd, &[])
}

/// `name`, checked by `cmd` (healthy at first if `healthy`: its file is
/// created), with `extra` flags.
fn member_checked(g: &Group, name: &str, healthy: bool, cmd: &str, extra: &[&str]) -> Member {
    if healthy {
        std::fs::write(ok_file(g, name), "").expect("the health file");
    }
    let flags: Vec<&str> = ["--health-cmd", cmd].into_iter().chain(CHECK).chain(extra.iter().copied()).collect();
    g.member(name, &flags, &["sleep", "1000"])
}

#[test]
fn a_leader_whose_check_fails_hands_over_to_a_healthy_standby_and_rejoins_once_healthy() {
    let g = Group::new("health-handover");
    let t = g.broker.timing;
    let unlead = g.dir.path().join("a.unlead");
    let (check, hook) =
        (format!("test -f {}", ok_file(&g, "a").display()), format!("echo $NELI_REASON >> {}", unlead.display()));
    let mut a = member_checked(&g, "a", true, &check, &["--on-unlead", &hook]);
    wait_until(t.takeover(), "a leads", || g.starts().len() == 1 && g.lock_held());
    assert!(a.log().contains("health check passed: healthy"), "{}", a.log());
    let mut b = member(&g, "b", true);
    wait_until(LONG, "b is a standby", || b.joined_as_standby());
    let failed = Instant::now();
    std::fs::remove_file(ok_file(&g, "a")).expect("a's file");
    wait_until(t.takeover(), "b leads", || g.starts().len() == 2 && g.lock_held());
    let took = failed.elapsed();
    assert_eq!(g.starts()[1].0, "b");
    // Two failures 200 ms apart, the command's stop, then the handover.
    eprintln!("a's check failing to b's command running: {took:?}");
    let log = a.log();
    assert!(log.contains("health check failed: unhealthy"), "{log}");
    assert!(log.contains(r#"why="unhealthy""#), "the yield says why:\n{log}");
    wait_until(LONG, "--on-unlead is told", || std::fs::read_to_string(&unlead).is_ok_and(|r| r == "unhealthy\n"));
    wait_until(LONG, "a stays out", || a.log().contains("staying out of the group until the health check passes"));
    // Healthy again, a joins as a standby and b leads on.
    std::fs::write(ok_file(&g, "a"), "").expect("a's file");
    wait_until(LONG, "a joins again", || a.log().matches("healthy: joining the group").count() == 2);
    wait_until(LONG, "a is a standby", || a.joined_as_standby());
    assert_eq!(g.starts().len(), 2, "b leads on: {:?}", g.starts());
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(t.takeover()).code(), Some(143), "{}", b.log());
    wait_until(t.takeover(), "a leads again", || g.starts().len() == 3 && g.lock_held());
    a.signal(Signal::SIGTERM);
    a.wait_exit(t.takeover());
    g.assert_no_overlap();
}

#[test]
fn a_standby_whose_check_fails_leaves_the_group_and_never_takes_over() {
    let g = Group::new("health-standby");
    let t = g.broker.timing;
    let mut a = member(&g, "a", true);
    wait_until(t.takeover(), "a leads", || g.starts().len() == 1 && g.lock_held());
    let mut b = member(&g, "b", true);
    wait_until(LONG, "b is a standby", || b.joined_as_standby());
    std::fs::remove_file(ok_file(&g, "b")).expect("b's file");
    wait_until(LONG, "b leaves", || b.log().contains("unhealthy: leaving the group until the health check passes"));
    // status shows why b may not lead, and a hand-over to it is refused.
    let status = |json: bool| {
        let mut args = vec!["status", "-b", &g.broker.address, "-g", &g.name];
        args.extend(json.then_some("--json"));
        run(&args).1
    };
    let b_healthy = || {
        let json: serde_json::Value = serde_json::from_str(status(true).trim()).unwrap_or_default();
        json["standbys"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "b")).map(|b| b["healthy"].clone())
    };
    wait_until(LONG, "status says b is unhealthy", || b_healthy() == Some(false.into()));
    let text = status(false);
    assert!(text.contains("standby, priority 0, unhealthy (--health-cmd fails: it may not lead): b (host "), "{text}");
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--to", "b"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("b's health check (--health-cmd) fails: it may not lead group"), "{out}");
    let c = member(&g, "c", true);
    wait_until(LONG, "c is a standby", || c.joined_as_standby());
    // a stops gracefully: the healthy standby leads, never b.
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(t.takeover()).code(), Some(143), "{}", a.log());
    wait_until(t.takeover(), "c leads", || g.starts().len() == 2 && g.lock_held());
    assert_eq!(g.starts()[1].0, "c", "{}", b.log());
    assert!(!b.log().contains("candidate: assigned"), "b was never given partition 0:\n{}", b.log());
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "a standby's exit:\n{}", b.log());
    g.assert_no_overlap();
}

#[test]
fn a_check_that_hangs_fails_at_its_timeout_and_its_member_never_joins() {
    let g = Group::new("health-hang");
    let t = g.broker.timing;
    let pids = g.dir.path().join("check.pids");
    // It also floods what it writes: /dev/null takes it.
    let hang = format!("echo $$ >> {}; yes | head -c 10000000; exec sleep 1000", pids.display());
    let flags = ["--health-cmd", &hang, "--health-interval", "100ms", "--health-timeout", "300ms"];
    let mut b = g.member("b", &flags, &["sleep", "1000"]);
    let checks = || std::fs::read_to_string(&pids).unwrap_or_default().lines().count();
    wait_until(LONG, "three checks time out", || checks() >= 3 && b.log().matches("timed out after").count() >= 3);
    let log = b.log();
    assert!(log.contains("waiting for the first health check to pass before joining the group"), "{log}");
    // Each was killed, process group and all, before the next started.
    for pid in std::fs::read_to_string(&pids).unwrap_or_default().lines().filter_map(|l| l.parse::<i32>().ok()) {
        let gone = || !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        wait_until(Duration::from_secs(5), "a timed-out check is gone", gone);
    }
    // A healthy member leads while b stays out.
    let _c = member(&g, "c", true);
    wait_until(t.takeover(), "c leads", || g.starts().len() == 1 && g.lock_held());
    assert_eq!(g.starts()[0].0, "c");
    assert!(stays_false(Duration::from_secs(1), || b.log().contains("candidate: assigned") || b.joined_as_standby()));
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "{}", b.log());
    g.assert_no_overlap();
}

#[test]
fn a_lone_leader_whose_check_hangs_stops_its_command_unfenced_and_status_says_why() {
    let g = Group::new("health-status");
    let t = g.broker.timing;
    // Without its file the check hangs: each is a failure at its timeout
    // (1 s), and meanwhile the leader's loop heartbeats as ever.
    let hang = format!("test -f {} || exec sleep 1000", ok_file(&g, "a").display());
    let mut a = member_checked(&g, "a", true, &hang, &[]);
    wait_until(t.takeover(), "a leads", || g.starts().len() == 1 && g.lock_held());
    std::fs::remove_file(ok_file(&g, "a")).expect("a's file");
    wait_until(t.takeover(), "a's command is stopped", || !g.lock_held());
    let status = || crate::util::run(&["status", "-b", &g.broker.address, "-g", &g.name]).1;
    wait_until(LONG, "status says why", || status().contains("it stood aside: its health check fails"));
    let json = crate::util::run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]).1;
    assert!(json.contains(r#""unhealthy":true"#), "{json}");
    let log = a.log();
    assert!(log.matches("timed out after 1s (--health-timeout): sent SIGKILL").count() >= 2, "{log}");
    assert!(!log.contains("fenced"), "a hanging check delays no heartbeat:\n{log}");
    // Nobody else is healthy: nothing runs, and a stays out meanwhile.
    assert!(stays_false(Duration::from_secs(1), || g.lock_held()));
    assert_eq!(g.starts().len(), 1);
    // Healthy again, a leads again at once: alone, it does not wait out
    // the watch a yield keeps for another member (3 sessions).
    std::fs::write(ok_file(&g, "a"), "").expect("a's file");
    let healed = Instant::now();
    wait_until(t.takeover(), "a leads again", || g.starts().len() == 2 && g.lock_held());
    // The watch is 3 sessions; a join and a rebalance on a loaded machine
    // may take more than one.
    assert!(healed.elapsed() < t.session * 2, "a waited out the watch: {:?}\n{}", healed.elapsed(), a.log());
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(LONG).code(), Some(143), "{}", a.log());
    g.assert_no_overlap();
}

/// Regression (audit D2): a standby whose check failed and then passed
/// rejoined the group but wrote no candidacy record again, so `status`
/// dropped it and `yield --to` refused it (its Kafka thread still thought
/// it had said "standby" in the group it had left).
#[test]
fn a_standby_healthy_again_is_a_candidate_again() {
    let g = Group::new("health-again");
    let t = g.broker.timing;
    let _a = member(&g, "a", true);
    wait_until(t.takeover(), "a leads", || g.starts().len() == 1 && g.lock_held());
    let b = member(&g, "b", true);
    wait_until(LONG, "b is a standby", || b.joined_as_standby());
    let b_healthy = || {
        let json = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]).1;
        let json: serde_json::Value = serde_json::from_str(json.trim()).unwrap_or_default();
        json["standbys"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "b")).map(|b| b["healthy"].clone())
    };
    wait_until(LONG, "status lists b", || b_healthy() == Some(true.into()));
    std::fs::remove_file(ok_file(&g, "b")).expect("b's file");
    wait_until(LONG, "status says b is unhealthy", || b_healthy() == Some(false.into()));
    std::fs::write(ok_file(&g, "b"), "").expect("b's file");
    wait_until(LONG, "b joins again", || b.log().matches("healthy: joining the group").count() == 2);
    wait_until(LONG, "status lists b as a healthy standby again", || b_healthy() == Some(true.into()));
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--to", "b", "--timeout", "60s"]);
    assert_eq!(code, 0, "{out}\n{}", b.log());
    assert!(out.contains("to b (token"), "{out}");
    // `yield` returns once b's heartbeat says it leads; its command's
    // wrapper records its start a moment after.
    wait_until(LONG, "b's command runs", || g.starts().last().is_some_and(|s| s.0 == "b"));
    g.assert_no_overlap();
}

#[test]
fn what_a_passing_check_leaves_running_is_killed_once_it_ends() {
    let g = Group::new("health-leftovers");
    let t = g.broker.timing;
    let checks = g.dir.path().join("checks");
    // A background job and a daemon in a session of its own, each
    // sleeping a duration no other test uses.
    let (job, daemon) = (format!("773{}", std::process::id()), format!("774{}", std::process::id()));
    let _cleanup = (KillSleeping(job.clone()), KillSleeping(daemon.clone()));
    let check = format!("echo >> {}; sleep {job} & setsid sleep {daemon} & true", checks.display());
    let mut a = g.member("a", &["--health-cmd", &check, "--health-interval", "200ms"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.starts().len() == 1 && g.lock_held());
    let count = || std::fs::read_to_string(&checks).unwrap_or_default().lines().count();
    wait_until(LONG, "eight checks passed", || count() >= 8);
    // The check's keeper kills both once the check's shell exits: of each,
    // at most the latest check's may still be there, if not yet killed.
    let (jobs, daemons) = (sleeping(&job), sleeping(&daemon));
    assert!(jobs.len() <= 1 && daemons.len() <= 1, "left by {} checks: {jobs:?} and {daemons:?}", count());
    assert!(g.lock_held(), "the command runs on");
    assert!(!a.log().contains("health check failed"), "{}", a.log());
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(LONG).code(), Some(143), "{}", a.log());
    assert!(sleeping(&job).is_empty() && sleeping(&daemon).is_empty(), "nothing outlives neli-run");
    g.assert_no_overlap();
}

#[test]
fn a_check_that_cannot_run_says_why_and_the_log_keeps_saying_the_member_is_out() {
    let g = Group::new("health-not-found");
    let flags = ["--health-cmd", "/nonexistent/check", "--health-interval", "100ms", "--health-retries", "2"];
    let mut b = g.member("b", &flags, &["sleep", "1000"]);
    let said = "health check failed check=exit code 127 (not found by the shell)";
    wait_until(LONG, "the log says why", || b.log().contains(said));
    // The shell's own word, from the check's stderr (dash: "not found",
    // bash: "No such file or directory").
    wait_until(LONG, "the log has the shell's word", || {
        b.log().contains(r#"stderr="#) && b.log().contains("/nonexistent/check:")
    });
    // Past --health-retries it still says so, now and then.
    let still = "health check still failing: out of the group until a check passes";
    wait_until(LONG, "it keeps saying the member is out", || b.log().matches(still).count() >= 2);
    let log = b.log();
    let (failed, still): (Vec<&str>, Vec<&str>) =
        (log.lines().filter(|l| l.contains(said)).collect(), log.lines().filter(|l| l.contains(still)).collect());
    // Each failure up to --health-retries, then every 12th.
    assert!(failed.len() == 2 && failed[0].contains("failures=1 retries=2"), "{log}");
    assert!(still[0].contains("failures=12") && still[1].contains("failures=24"), "{log}");
    assert!(still.iter().all(|l| l.contains("not found by the shell")), "{log}");
    assert!(g.starts().is_empty(), "b never leads");
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "{}", b.log());
}

#[test]
fn a_check_is_judged_by_its_own_shell_not_by_what_it_left() {
    let g = Group::new("health-own-status");
    // Two leftovers end first, one with a status and one by a signal of
    // their own; then the check's shell is killed.
    let check = "(sh -c 'exit 3' &); (sh -c 'kill -KILL $$' &); sleep 0.3; kill -TERM $$";
    let flags = ["--health-cmd", check, "--health-interval", "100ms", "--health-retries", "1"];
    let mut b = g.member("b", &flags, &["sleep", "1000"]);
    wait_until(LONG, "a check fails", || b.log().contains("health check failed"));
    let log = b.log();
    let first = log.lines().find(|l| l.contains("health check failed")).unwrap_or_default();
    assert!(first.contains("check=killed by SIGTERM "), "{log}");
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "{}", b.log());
}

/// Regression (O-1): a standby whose check failed while its join was in
/// flight, and passed again a moment later, was not listed by `status`
/// (nor handed anything by name) until it left the group again. The
/// leave does not cut the join short: librdkafka puts the unsubscribe
/// off until the join in flight completes, and that join's assignment,
/// heard after the leave, counted as the "standby" of the next
/// membership, which then said nothing. Each flap fails the check just
/// after a join begins (the leader answers a rebalance within a
/// coordinator heartbeat, so the join is still in flight) and passes it
/// either at once or after that join's late assignment; each time `status`
/// must list the standby healthy again.
#[test]
fn a_standby_whose_check_flaps_during_a_join_is_listed_once_it_passes() {
    const FLAPS: usize = 6;
    let g = Group::new("health-flap");
    let t = g.broker.timing;
    let _a = member(&g, "a", true);
    wait_until(t.takeover(), "a leads", || g.starts().len() == 1 && g.lock_held());
    let ok = ok_file(&g, "b");
    std::fs::write(&ok, "").expect("b's file");
    let check = format!("test -f {}", ok.display());
    let flags = ["--health-cmd", &check, "--health-interval", "100ms", "--health-retries", "1", "-v"];
    let b = g.member("b", &flags, &["sleep", "1000"]);
    // Whether b is listed healthy on a candidacy written since `passed`.
    let listed_since = |passed: Instant| {
        let json = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]).1;
        let since = passed.elapsed();
        let json: serde_json::Value = serde_json::from_str(json.trim()).unwrap_or_default();
        let b = json["standbys"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "b").cloned());
        b.is_some_and(|b| {
            b["healthy"] == true && b["last_seen_ms"].as_u64().is_some_and(|ms| ms < since.as_millis() as u64)
        })
    };
    let count = |what: &str| b.log().matches(what).count();
    let (joined, left) = ("healthy: joining the group", "unhealthy: leaving the group until");
    let (mut late, mut took) = (0, Vec::new());
    for flap in 1..=FLAPS {
        if flap > 1 {
            // Out of the group and in again, for a join to flap: the check
            // fails within a check's interval of the join's start.
            let leaves = count(left);
            std::fs::remove_file(&ok).expect("b's file");
            wait_until(LONG, "b leaves", || count(left) > leaves);
            std::fs::write(&ok, "").expect("b's file");
        }
        wait_until(LONG, "b joins", || count(joined) == 2 * flap - 1);
        std::fs::remove_file(&ok).expect("b's file");
        wait_until(LONG, "b leaves", || count(left) == 2 * flap - 1);
        // Every other flap passes once the join in flight has completed,
        // if it completes after the leave (the defect's window): its
        // assignment is heard after the leave.
        let heard = || count(crate::util::STANDBY_JOINED) + count("an assignment of the join in flight when we left");
        let before = heard();
        if flap % 2 == 1 && !stays_false(Duration::from_secs(2), || heard() > before) {
            late += 1;
        }
        std::fs::write(&ok, "").expect("b's file");
        let passed = Instant::now();
        wait_until(LONG, "b joins again", || count(joined) == 2 * flap);
        // The goal is 2 s; a loaded machine gets more.
        let listed = !stays_false(Duration::from_secs(10), || listed_since(passed));
        assert!(listed, "flap {flap}: b not listed as a healthy standby 10 s after its check passed:\n{}", b.log());
        took.push(passed.elapsed());
    }
    eprintln!("check passing to b listed: {took:?}; {late} of {} passed after the join's late assignment", FLAPS / 2);
}
