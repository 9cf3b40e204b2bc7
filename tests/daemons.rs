//! Commands that daemonize part of their work: descendants that left the
//! command's process group (setsid), were double-forked (reparented), or
//! ignore SIGTERM. None of them may outlive the member's leadership, on any
//! path: kill -9 of neli-run, a fence, a graceful stop, a yield, or the
//! command exiting. The overlap detector's lock is inherited by every one
//! of them, so "the lock is free" means "all of them are gone".

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{run, wait_until, Broker, Group, FENCE_ROOM, LONG, LONG_LEASE, SHIM_BOUND};

/// A command that starts a double-forked, setsid'd `sleep` that ignores
/// SIGTERM (d1) and a setsid'd shell (d2) that notes SIGTERM in `d2-term`
/// and exits (what `daemon`, `start-stop-daemon --background` and
/// nohup+setsid cron scripts leave behind), then runs `last`. Each writes
/// its pid into `dir` once it is in place, so a test knows the escape
/// happened before it acts.
fn daemonizing(dir: &std::path::Path, last: &str) -> String {
    let d = dir.display();
    format!(
        "(setsid sh -c 'trap \"\" TERM; echo $$ > {d}/d1; exec sleep 1000' &); \
         setsid sh -c 'trap \"echo TERM > {d}/d2-term; exit 0\" TERM; echo $$ > {d}/d2; while :; do sleep 0.05; done' & \
         while [ ! -s {d}/d1 ] || [ ! -s {d}/d2 ]; do sleep 0.01; done; {last}"
    )
}

/// Whether the daemon that left the group got the stop signal (not only
/// the SIGKILL after grace). Its trap has to run for the file to show: the
/// tests that ask give it `GRACE`.
fn stop_signal_reached_the_daemon(dir: &std::path::Path) -> bool {
    dir.join("d2-term").exists()
}

/// The grace of the tests whose daemon must have run its SIGTERM trap
/// before the SIGKILL at its end: 2 s was not always enough on a loaded
/// machine (the trap waits for the daemon's shell to be scheduled). A
/// daemon the signal never reached never writes the file, however long the
/// grace. These tests wait it out (the other daemon ignores SIGTERM).
const GRACE: [&str; 2] = ["--grace", "8s"];

/// A group for `GRACE`: it must end within the session timeout (with the
/// coordinator heartbeat and a margin), so the session is longer.
fn graceful_group(test: &str) -> Group {
    let mut broker = Broker::start();
    broker.timing = broker.timing.with_session(Duration::from_secs(10));
    Group::on(broker, test)
}

/// Waits until both daemons are in place and have left the group.
fn wait_for_daemons(dir: &std::path::Path) {
    wait_until(LONG, "both daemons run", || dir.join("d1").exists() && dir.join("d2").exists());
}

#[test]
fn kill_9_of_neli_run_kills_the_daemons_too() {
    let g = Group::new("daemons-kill9");
    let script = daemonizing(g.dir.path(), "exec sleep 1000");
    let mut m = g.member("a", &LONG_LEASE, &["sh", "-c", &script]);
    wait_for_daemons(g.dir.path());
    m.signal(Signal::SIGKILL);
    m.wait_exit(LONG);
    wait_until(SHIM_BOUND, "the shim killed every daemon after neli-run died", || !g.lock_held());
    // The shim waited for its SIGKILLs to take, rather than giving up.
    wait_until(SHIM_BOUND, "the shim reports", || m.log().contains("neli-run is gone"));
    assert!(!m.log().contains("uninterruptible sleep"), "{}", m.log());
}

#[test]
fn sigterm_stops_the_daemons_within_grace_before_neli_run_exits() {
    let g = graceful_group("daemons-sigterm");
    let script = daemonizing(g.dir.path(), "exec sleep 1000");
    let mut m = g.member("a", &GRACE, &["sh", "-c", &script]);
    wait_for_daemons(g.dir.path());
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(143), "{}", m.log());
    // Not "eventually": neli-run must not exit while any of them lives.
    assert!(!g.lock_held(), "a daemon outlived neli-run\n{}", m.log());
    assert!(stop_signal_reached_the_daemon(g.dir.path()), "the setsid'd daemon never got SIGTERM: {}", m.log());
}

/// The shim passes the stop signal on to what left the group as soon as it
/// gets it, not only once the command has exited: here the command ignores
/// it, so nothing exits before neli-run's SIGKILL at the end of --grace,
/// and the setsid'd daemon must have had its SIGTERM by then.
#[test]
fn the_stop_signal_reaches_escaped_daemons_while_the_command_ignores_it() {
    let g = graceful_group("daemons-term-ignored");
    let ignoring = g.dir.path().join("ignoring");
    let last = format!("trap '' TERM; touch {}; while :; do sleep 0.05; done", ignoring.display());
    let script = daemonizing(g.dir.path(), &last);
    // Unguarded: the detector's flock would die of the SIGTERM and end the
    // command early.
    let mut m = g.member_unguarded("a", &GRACE, &["sh", "-c", &script]);
    wait_for_daemons(g.dir.path());
    wait_until(LONG, "the command ignores SIGTERM", || ignoring.exists());
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(137), "killed when the grace ran out: {}", m.log());
    assert!(stop_signal_reached_the_daemon(g.dir.path()), "the setsid'd daemon never got SIGTERM: {}", m.log());
}

/// A daemon may name itself anything (`/proc/self/comm`, or the file name
/// it was started from): bytes that are not UTF-8, parentheses. It left
/// the group, ignores SIGTERM, and is killed with the rest all the same
/// (the walk below the shim once skipped a process whose name was not
/// UTF-8).
#[test]
fn a_daemon_named_in_bytes_that_are_not_utf8_is_killed_with_the_rest() {
    let g = Group::new("daemons-named");
    let d = g.dir.path().display();
    let script = format!(
        "(setsid sh -c 'printf \"\\377) (\" > /proc/self/comm; trap \"\" TERM; echo $$ > {d}/d3; \
         while :; do sleep 0.05; done' &); while [ ! -s {d}/d3 ]; do sleep 0.01; done; exec sleep 1000"
    );
    let mut m = g.member("a", &["--grace", "1s"], &["sh", "-c", &script]);
    wait_until(LONG, "the daemon runs", || g.dir.path().join("d3").exists());
    let pid = std::fs::read_to_string(g.dir.path().join("d3")).unwrap();
    let comm = std::fs::read(format!("/proc/{}/comm", pid.trim())).unwrap();
    assert!(comm.starts_with(b"\xff) ("), "the daemon renamed itself: {comm:?}");
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(143), "{}", m.log());
    assert!(!g.lock_held(), "the daemon outlived neli-run\n{}", m.log());
}

#[test]
fn a_command_that_exits_leaving_daemons_keeps_its_status_and_takes_them_along() {
    let g = Group::new("daemons-exit");
    let script = daemonizing(g.dir.path(), "exit 5");
    let mut m = g.member("a", &[], &["sh", "-c", &script]);
    assert_eq!(m.wait_exit(LONG).code(), Some(5), "{}", m.log());
    assert!(!g.lock_held(), "a daemon outlived neli-run\n{}", m.log());
    assert!(stop_signal_reached_the_daemon(g.dir.path()), "the setsid'd daemon never got SIGTERM: {}", m.log());
}

#[test]
fn the_shim_stops_then_kills_daemons_left_behind_even_while_neli_run_is_frozen() {
    let g = Group::new("daemons-drain-frozen");
    let go = g.dir.path().join("go");
    let script = daemonizing(g.dir.path(), &format!("while [ ! -e {} ]; do sleep 0.01; done; exit 5", go.display()));
    let mut m = g.member("a", &LONG_LEASE, &["sh", "-c", &script]);
    wait_for_daemons(g.dir.path());
    // neli-run cannot sweep, and the lease (8 s) is far off: only the shim's
    // drain (stop signal, --grace, SIGKILL) can end the daemons.
    m.signal(Signal::SIGSTOP);
    std::fs::write(&go, "").unwrap();
    wait_until(SHIM_BOUND, "the shim killed the daemons after grace", || !g.lock_held());
    assert!(stop_signal_reached_the_daemon(g.dir.path()), "the setsid'd daemon never got SIGTERM: {}", m.log());
    m.signal(Signal::SIGCONT);
    assert_eq!(m.wait_exit(LONG).code(), Some(5), "{}", m.log());
}

#[test]
fn when_the_shim_is_killed_neli_run_sweeps_up_the_daemons() {
    let g = Group::new("daemons-shim-killed");
    let script = daemonizing(g.dir.path(), "exec sleep 1000");
    let mut m = g.member("a", &[], &["sh", "-c", &script]);
    wait_for_daemons(g.dir.path());
    let shim = m.forked_pid().expect("neli-run's child is the shim");
    nix::sys::signal::kill(shim, Signal::SIGKILL).unwrap();
    // The daemons were reparented to neli-run: it must kill them before it
    // reports the child gone (here: exits, --restart never).
    assert_eq!(m.wait_exit(LONG).code(), Some(137), "{}", m.log());
    assert!(!g.lock_held(), "a daemon outlived neli-run\n{}", m.log());
    // It waited for its SIGKILLs to take, rather than giving up on them.
    assert!(!m.log().contains("uninterruptible sleep"), "{}", m.log());
}

#[test]
fn the_command_dies_with_its_shim_while_neli_run_is_frozen() {
    let g = Group::new("shim-pdeathsig");
    let pidfile = g.dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 1000", pidfile.display());
    // Unguarded, so that the command is the shim's own child.
    let mut m = g.member_unguarded("a", &LONG_LEASE, &["sh", "-c", &script]);
    // Written, not only made: the shell opens the file before it writes.
    let pid = || std::fs::read_to_string(&pidfile).ok().and_then(|s| s.trim().parse::<i32>().ok());
    wait_until(LONG, "the command runs", || pid().is_some());
    let command = nix::unistd::Pid::from_raw(pid().expect("its pid"));
    let shim = m.forked_pid().expect("neli-run's child is the shim");
    // Nobody can sweep: neli-run is frozen and the shim dies at once.
    m.signal(Signal::SIGSTOP);
    nix::sys::signal::kill(shim, Signal::SIGKILL).unwrap();
    wait_until(SHIM_BOUND, "the command died with its shim", || {
        std::fs::read_to_string(format!("/proc/{command}/stat")).map_or(true, |s| s.contains(") Z "))
    });
    m.signal(Signal::SIGCONT);
    assert_eq!(m.wait_exit(LONG).code(), Some(137), "{}", m.log());
}

#[test]
fn a_yield_hands_over_only_once_the_daemons_are_gone() {
    let g = Group::new("daemons-yield");
    let script = daemonizing(g.dir.path(), "exec sleep 1000");
    let a = g.member("a", &[], &["sh", "-c", &script]);
    wait_for_daemons(g.dir.path());
    let b = g.member("b", &[], &["sleep", "1000"]);
    wait_until(LONG, "b is a standby", || a.log().contains("child started") && b.joined_as_standby());
    let t = g.broker.timing;
    let timeout = format!("{}ms", t.takeover().as_millis());
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", &timeout]);
    assert_eq!(code, 0, "{out}");
    wait_until(t.takeover(), "b leads", || g.starts().last().is_some_and(|s| s.0 == "b") && g.lock_held());
    // b's flock -n would have failed while a daemon of a's held the lock.
    g.assert_no_overlap();
}

#[test]
fn a_fence_kills_the_daemons_and_leadership_returns_without_overlap() {
    let g = Group::on(Broker::dev(), "daemons-fence");
    let script = daemonizing(g.dir.path(), "exec sleep 1000");
    let _a = g.member("a", &[], &["sh", "-c", &script]);
    wait_for_daemons(g.dir.path());
    let t = g.broker.timing;
    g.broker.signal(Signal::SIGSTOP);
    wait_until(t.deadline + FENCE_ROOM, "the fence killed the command and its daemons", || !g.lock_held());
    g.broker.signal(Signal::SIGCONT);
    wait_until(t.takeover(), "someone leads again", || g.lock_held());
    g.assert_no_overlap();
}

#[test]
fn neli_run_sweeps_until_nothing_is_left_even_from_a_daemon_that_keeps_forking() {
    // A setsid'd daemon that forks `sleep`s as fast as it can (2000 of
    // them at most, each for 30 s: a sweep that fails must not leave a fork
    // bomb behind on a loaded machine, as an unbounded loop once did). One
    // sweep lists its processes and kills them, but children forked between
    // the listing and the kill are not on it. Only sweeping again until nothing
    // is left (all_gone) gets them all. A sweep that stopped after one pass
    // leaves survivors in most rounds (5 of 6 when tried), so three rounds.
    for round in 0..3 {
        let g = Group::new(&format!("daemons-forking-{round}"));
        let d = g.dir.path().display();
        let script = format!(
            "setsid sh -c 'i=0; while [ $i -lt 2000 ]; do sleep 30 & i=$((i+1)); [ $i = 100 ] && echo $$ > {d}/d3; done' & \
             while [ ! -s {d}/d3 ]; do sleep 0.01; done; exec sleep 1000"
        );
        let mut m = g.member("a", &[], &["sh", "-c", &script]);
        wait_until(LONG, "the daemon forked a hundred", || g.dir.path().join("d3").exists());
        let shim = m.forked_pid().expect("neli-run's child is the shim");
        nix::sys::signal::kill(shim, Signal::SIGKILL).unwrap();
        assert_eq!(m.wait_exit(LONG).code(), Some(137), "{}", m.log());
        assert!(!g.lock_held(), "round {round}: a process the daemon forked outlived neli-run\n{}", m.log());
    }
}
