//! The reaper's routing, a seat's kill and the sweep, with real processes
//! and real signals. A seat's shim is mostly played by `sh -c`, started as
//! `Running::spawn` starts a shim (`Running::start`): registered with the
//! reaper, in a group of its own. Where the shim's own judgement is the
//! test's subject, `Running::spawn` starts the real one: the program neli-run
//! carries (`program.rs`), which this test binary carries too.
//!
//! Each test runs in a process of its own (`isolated`), a child subreaper
//! as neli-run is: `reap` waits for any child, and would take the statuses
//! of other tests' processes, and orphans must come back to the test, not
//! to init. The subreaper bit applies to the whole process, so it is set in
//! that process only, never in the one running the other tests.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::{getpid, Pid};

use super::tree::{below, outside};
use super::{become_subreaper, reap, tree, Beside, Running};
use crate::clock::BootTime;
use crate::exit::ChildStatus;

/// Set to a test's name in the process that runs it alone.
const ISOLATED: &str = "NELI_RUN_ISOLATED_TEST";

/// Runs the test `name` of this module in a process of its own, made a
/// child subreaper, and fails if it fails there (or did not run). What it
/// leaves running is killed when it ends.
fn isolated(name: &str, body: impl FnOnce()) {
    if std::env::var(ISOLATED).as_deref() == Ok(name) {
        struct Cleanup;
        impl Drop for Cleanup {
            fn drop(&mut self) {
                tree::signal_below(getpid(), Signal::SIGKILL, |_| true);
            }
        }
        let _cleanup = Cleanup;
        become_subreaper().expect("a child subreaper");
        body();
        return;
    }
    let test = format!("{}::{name}", module_path!().split_once("::").expect("a crate's module").1);
    let out = Command::new("/proc/self/exe")
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ISOLATED, name)
        .output()
        .expect("the test binary runs");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.contains("1 passed"), "{test} alone: {:?}\n{said}", out.status);
}

/// A seat's shim, played by `sh -c script`: registered, in its own group.
fn seat(script: &str) -> Running {
    let mut sh = Command::new("sh");
    sh.args(["-c", script]);
    std::os::unix::process::CommandExt::process_group(&mut sh, 0);
    let lease = File::options().write(true).open("/dev/null").expect("/dev/null");
    started(&mut sh, lease)
}

/// `sh` (set up as a shim) started as `Running::spawn` starts one.
fn started(sh: &mut Command, lease: File) -> Running {
    Running::start(|| Ok(Pid::from_raw(sh.spawn()?.id() as i32)), lease).expect("sh starts")
}

/// Reaps, as the loop does, until `done` (for at most ten seconds, far more
/// than anything here takes: a bound, not a guess).
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        reap();
        if done() {
            return;
        }
        assert!(Instant::now() < end, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The pids below `root`, sorted.
fn pids_below(root: Pid) -> Vec<Pid> {
    let mut pids: Vec<Pid> = below(root).iter().map(|p| p.pid).collect();
    pids.sort();
    pids
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(future)
}

/// Whether `pid` is stopped (state T in /proc/PID/stat).
fn stopped(pid: Pid) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')').is_some_and(|at| stat[at + 1..].trim_start().starts_with('T'))
}

#[test]
fn a_seats_kill_leaves_another_seats_command_alone() {
    isolated("a_seats_kill_leaves_another_seats_command_alone", || {
        let mut a = seat("sleep 100 & sleep 100 & wait; exit 3");
        let b = seat("sleep 100 & sleep 100 & wait; exit 5");
        until("both seats' commands run", || below(a.pgid()).len() == 2 && below(b.pgid()).len() == 2);
        let b_tree = pids_below(b.pgid());
        a.kill();
        // A's shell exits once both its sleeps are dead (it waits for them).
        until("A's shim is reaped", || a.reaped());
        assert_eq!(block_on(a.exited()), ChildStatus::Exited(3));
        assert!(!b.reaped(), "B's shim still runs");
        assert_eq!(pids_below(b.pgid()), b_tree, "B's command untouched by A's kill");
        let mut b = b;
        b.kill();
        until("B's shim is reaped", || b.reaped());
        assert_eq!(block_on(b.exited()), ChildStatus::Exited(5));
    });
}

#[test]
fn a_kill_wakes_a_stopped_shim() {
    isolated("a_kill_wakes_a_stopped_shim", || {
        let mut a = seat("sleep 100 & wait; exit 4");
        until("the command runs", || below(a.pgid()).len() == 1);
        kill(a.pgid(), Signal::SIGSTOP).expect("SIGSTOP");
        until("the shim is stopped", || stopped(a.pgid()));
        a.kill();
        until("the shim, woken, reaps its command and is reaped", || a.reaped());
        assert_eq!(block_on(a.exited()), ChildStatus::Exited(4));
    });
}

/// `sh -c script` with its stdin from a pipe: the returned end, dropped,
/// lets a `read` in the script go on (the order of exits is the test's).
fn held(script: &str) -> (Command, OwnedFd) {
    // Close-on-exec: no other child may hold the write end.
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("a pipe");
    let mut sh = Command::new("sh");
    sh.args(["-c", script]).stdin(Stdio::from(read));
    (sh, write)
}

#[test]
fn every_status_goes_to_whoever_started_that_process() {
    isolated("every_status_goes_to_whoever_started_that_process", || {
        let lease = || File::options().write(true).open("/dev/null").expect("/dev/null");
        let (mut sh, a_go) = held("read _; exit 3");
        let mut a = started(&mut sh, lease());
        let (mut sh, b_go) = held("read _; exit 5");
        let mut b = started(&mut sh, lease());
        let (hook, hook_go) = held("read _; exit 7");
        let (_, hook) = Beside::spawn(hook).expect("the hook starts");
        let (mut stray, stray_go) = held("read _; exit 9");
        // Not registered: an orphan's status, reaped and dropped.
        let stray = Pid::from_raw(stray.spawn().expect("sh starts").id() as i32);
        // They exit in the order opposite to the registry's.
        let gone = |pid: Pid| !std::path::Path::new(&format!("/proc/{pid}")).exists();
        drop(stray_go);
        until("the stray is reaped", || gone(stray));
        assert!(!a.reaped() && !b.reaped(), "an orphan's status is nobody's");
        drop(hook_go);
        let mut hooks = Vec::new();
        until("the hook is reaped", || {
            hooks.extend(hook.try_iter());
            !hooks.is_empty()
        });
        assert!(!a.reaped() && !b.reaped(), "a hook's status is the hook's");
        drop(b_go);
        until("B's shim is reaped", || b.reaped());
        assert!(!a.reaped(), "B's status is B's");
        drop(a_go);
        until("A's shim is reaped", || a.reaped());
        assert_eq!((block_on(a.exited()), block_on(b.exited())), (ChildStatus::Exited(3), ChildStatus::Exited(5)));
        assert_eq!(hooks, [ChildStatus::Exited(7)]);
        assert!(hook.try_recv().is_err(), "one status each");
    });
}

#[test]
fn a_sweep_takes_orphans_and_spares_live_seats_and_hooks() {
    isolated("a_sweep_takes_orphans_and_spares_live_seats_and_hooks", || {
        let us = getpid();
        let b = seat("sleep 100 & sleep 100 & wait");
        let mut hook = Command::new("sh");
        hook.args(["-c", "sleep 100 & wait"]);
        let (hook, _status) = Beside::spawn(hook).expect("the hook starts");
        // A shell that leaves a subshell and its two sleeps to us, as a
        // shim killed with SIGKILL leaves its command, in another session.
        let _ = Command::new("sh")
            .args(["-c", "setsid sh -c 'sleep 100 & sleep 100 & wait' & exit 0"])
            .spawn()
            .expect("sh starts")
            .id();
        let registered = |pid| pid == b.pgid() || pid == hook;
        until("the orphans are below us, the rest in place", || {
            let orphans = outside(below(us), registered);
            orphans.len() == 3
                && orphans.iter().filter(|p| p.ppid == us).count() == 1
                && below(b.pgid()).len() == 2
                && below(hook).len() == 1
        });
        let (b_tree, hook_tree) = (pids_below(b.pgid()), pids_below(hook));
        block_on(async {
            let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()).expect("SIGCHLD");
            let reaping = async {
                loop {
                    reap();
                    sigchld.recv().await;
                }
            };
            tokio::select! {
                _ = super::all_gone() => {}
                _ = reaping => {}
            }
        });
        // all_gone returns once none is left, not even as a zombie.
        let left = outside(below(us), registered);
        assert!(left.is_empty(), "orphans left: {left:?}");
        assert!(!b.reaped(), "B's shim still runs");
        assert_eq!(pids_below(b.pgid()), b_tree, "B's command untouched by the sweep");
        assert_eq!(pids_below(hook), hook_tree, "the hook untouched by the sweep");
    });
}

/// The shim itself (the program neli-run carries, run from memory as
/// `Running::spawn` runs it), given a first lease that has already passed:
/// neli-run frozen between its decision to start the command and the start
/// (seen once in tests/crontab.rs: a thawed member's command ran for a few
/// milliseconds beside the new owner's before the lease timer killed it).
/// It starts nothing; given a lease to come, the same command runs.
#[test]
fn a_shim_whose_first_lease_has_passed_never_starts_the_command() {
    isolated("a_shim_whose_first_lease_has_passed_never_starts_the_command", || {
        let dir = std::env::temp_dir().join(format!("neli-run-lease-test-{}", getpid()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let run = |marker: &std::path::Path, lease: BootTime| {
            let mut running = Running::spawn(&touching(marker), Some(1), lease, None).expect("the shim starts");
            until("the shim is reaped", || running.reaped());
            block_on(running.exited())
        };
        let (late, due) = (dir.join("late"), dir.join("due"));
        let passed = run(&late, BootTime::now() - Duration::from_millis(1));
        let to_come = run(&due, BootTime::now() + Duration::from_secs(60));
        let ran = (late.exists(), due.exists());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((passed, to_come), (ChildStatus::Signaled(Signal::SIGKILL as i32), ChildStatus::Exited(0)));
        assert_eq!(ran, (false, true), "(ran under a lease that had passed, ran under a lease to come)");
    });
}

/// The real shim, frozen until its lease has passed while neli-run renews
/// it: on waking it finds the new lease and the old one's expiry together,
/// as a shim scheduled late does. The new lease counts (the command was
/// fenced for nothing: a scheduled run lost), so the stop signal that
/// follows ends the command its own way.
#[test]
fn a_lease_renewed_as_the_old_one_expires_counts() {
    isolated("a_lease_renewed_as_the_old_one_expires_counts", || {
        let trapping = super::Command {
            program: "sh".into(),
            args: vec!["-c".into(), "trap 'exit 7' TERM; sleep 100 & wait".into()],
            stop_signal: Signal::SIGTERM as i32,
            grace: Duration::from_secs(5),
            env: Vec::new(),
            env_remove: Vec::new(),
            keep_output: 0,
        };
        // Long enough that a loaded machine starts the command within it.
        let lease = BootTime::now() + Duration::from_secs(5);
        let mut running = Running::spawn(&trapping, Some(1), lease, None).expect("the shim starts");
        let shim = running.pgid();
        until("the command runs", || below(shim).len() == 2);
        kill(shim, Signal::SIGSTOP).expect("SIGSTOP");
        until("the shim is stopped", || stopped(shim));
        let end = Instant::now() + Duration::from_secs(10);
        while BootTime::now() <= lease + Duration::from_millis(10) {
            assert!(Instant::now() < end, "the lease never passed");
            std::thread::sleep(Duration::from_millis(20));
        }
        running.renew(BootTime::now() + Duration::from_secs(60)).expect("the renewal is written");
        running.signal(Signal::SIGTERM);
        kill(shim, Signal::SIGCONT).expect("SIGCONT");
        until("the shim is reaped", || running.reaped());
        assert_eq!(block_on(running.exited()), ChildStatus::Exited(7), "fenced, though its lease was renewed");
    });
}

/// A run shorter than a heartbeat interval: the loop may renew its lease
/// after the shim exited and before it is reaped. That is no error (it was
/// said as one, "it will be fenced", for every short run of a crontab).
#[test]
fn renewing_the_lease_of_a_shim_that_exited_is_no_error() {
    isolated("renewing_the_lease_of_a_shim_that_exited_is_no_error", || {
        let quick = super::Command {
            program: "true".into(),
            args: Vec::new(),
            stop_signal: Signal::SIGTERM as i32,
            grace: Duration::from_secs(1),
            env: Vec::new(),
            env_remove: Vec::new(),
            keep_output: 0,
        };
        let mut running =
            Running::spawn(&quick, Some(1), BootTime::now() + Duration::from_secs(60), None).expect("starts");
        until("the shim is reaped", || running.reaped());
        assert!(running.renew(BootTime::now() + Duration::from_secs(60)).is_ok(), "a renewal after the exit failed");
        assert_eq!(block_on(running.exited()), ChildStatus::Exited(0));
    });
}

/// A command that touches `marker`, as a seat's command.
fn touching(marker: &std::path::Path) -> super::Command {
    super::Command {
        program: "sh".into(),
        args: vec!["-c".into(), format!("touch {}", marker.display()).into()],
        stop_signal: Signal::SIGTERM as i32,
        grace: Duration::from_secs(1),
        env: Vec::new(),
        env_remove: Vec::new(),
        keep_output: 0,
    }
}

/// Whether `pid` blocks signals (/proc/PID/status's SigBlk): the shim does
/// from its `arm` on, and from then a signal waits for its signalfd.
fn blocks_signals(pid: Pid) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .any(|l| l.strip_prefix("SigBlk:").is_some_and(|mask| !mask.trim().trim_start_matches('0').is_empty()))
}

/// The real shim given a wall-clock time to begin at (a scheduled run's
/// due time, its shim started ahead of it): the command starts then, not
/// before; the command's own clock says so.
#[test]
fn a_shim_starts_its_command_at_its_begin_and_not_before() {
    isolated("a_shim_starts_its_command_at_its_begin_and_not_before", || {
        let marker = std::env::temp_dir().join(format!("neli-run-begin-test-{}", getpid()));
        let begin = crate::clock::wall_ms() + 500;
        let dating = super::Command {
            args: vec!["-c".into(), format!("date +%s%3N > {}", marker.display()).into()],
            ..touching(&marker)
        };
        let lease = BootTime::now() + Duration::from_secs(60);
        let mut running = Running::spawn(&dating, Some(1), lease, Some(begin)).expect("the shim starts");
        until("the shim is reaped", || running.reaped());
        let started: Option<u64> = std::fs::read_to_string(&marker).ok().and_then(|s| s.trim().parse().ok());
        let _ = std::fs::remove_file(&marker);
        assert_eq!(block_on(running.exited()), ChildStatus::Exited(0));
        let started = started.expect("the command ran and said when");
        assert!(started >= begin, "the command started {} ms before its begin", begin - started);
    });
}

/// The real shim waiting for its begin, with nothing started: the stop
/// signal (the run revoked, paused or replaced before its due time), a
/// lease that passes (a fence) and neli-run's death (the lease pipe
/// closed) each end it at once with the status of a command killed so,
/// and the command never starts.
#[test]
fn a_shim_waiting_for_its_begin_starts_nothing_once_stopped_fenced_or_orphaned() {
    isolated("a_shim_waiting_for_its_begin_starts_nothing_once_stopped_fenced_or_orphaned", || {
        let dir = std::env::temp_dir().join(format!("neli-run-begin-test-{}", getpid()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let later = || BootTime::now() + Duration::from_secs(60);
        let waiting = |name: &str, lease: BootTime| {
            let marker = dir.join(name);
            let begin = Some(crate::clock::wall_ms() + 60_000);
            let running = Running::spawn(&touching(&marker), Some(1), lease, begin).expect("the shim starts");
            let shim = running.pgid();
            until("the shim blocks signals, waiting", || blocks_signals(shim));
            (running, marker)
        };
        let mut ended = Vec::new();
        let (mut stopped, marker) = waiting("stopped", later() + Duration::from_secs(60));
        stopped.signal(Signal::SIGTERM);
        until("the stopped shim is reaped", || stopped.reaped());
        ended.push((block_on(stopped.exited()), marker.exists()));
        let (mut fenced, marker) = waiting("fenced", BootTime::now() + Duration::from_millis(300));
        until("the fenced shim is reaped", || fenced.reaped());
        ended.push((block_on(fenced.exited()), marker.exists()));
        let (mut orphaned, marker) = waiting("orphaned", later() + Duration::from_secs(60));
        // neli-run's end of the lease pipe closes, as at its death.
        orphaned.lease = File::open("/dev/null").expect("/dev/null");
        until("the orphaned shim is reaped", || orphaned.reaped());
        ended.push((block_on(orphaned.exited()), marker.exists()));
        let _ = std::fs::remove_dir_all(&dir);
        let (term, kill) =
            (ChildStatus::Signaled(Signal::SIGTERM as i32), ChildStatus::Signaled(Signal::SIGKILL as i32));
        assert_eq!(ended, [(term, false), (kill, false), (kill, false)], "(stopped, fenced, orphaned): (status, ran)");
    });
}
