//! A hostile log: neli-run's stderr (shared with the shim and the command)
//! is a pipe whose reader died or stalled, a full disk, or closed. The
//! fence must hold all the same (the shim kills first and reports after,
//! never blocking or panicking on the report), and neli-run must go on and
//! pass the command's status through.

use std::os::fd::OwnedFd;
use std::process::Stdio;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::signal::Signal;

use crate::util::{wait_until, Group, FENCE_ROOM, LONG, LONG_LEASE, SHIM_BOUND};

/// A pipe for a member's stderr: (read end, write end for the member).
/// Close-on-exec, or processes that other tests start at the same time
/// would inherit the read end and keep a "dead" reader alive.
fn pipe() -> (OwnedFd, Stdio) {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    (read, Stdio::from(write))
}

/// A pipe that is already full: whoever writes to it blocks, as behind a
/// log reader that stopped reading (a stalled journald, a paused `less`).
fn full_pipe() -> (OwnedFd, Stdio) {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
    let chunk = [b'x'; 4096];
    while nix::unistd::write(&write, &chunk).is_ok() {}
    fcntl(&write, FcntlArg::F_SETFL(OFlag::empty())).unwrap();
    (read, Stdio::from(write))
}

#[test]
fn kill_9_with_a_dead_log_reader_still_kills_the_command_at_once() {
    let g = Group::new("dead-reader-kill9");
    let (reader, stderr) = pipe();
    let mut m = g.member_with_stderr("a", &LONG_LEASE, &["sh", "-c", "sleep 1000 & exec sleep 1000"], stderr);
    wait_until(LONG, "the child runs", || g.lock_held());
    drop(reader);
    m.signal(Signal::SIGKILL);
    m.wait_exit(LONG);
    // The shim's "neli-run is gone" report now meets EPIPE; the kill must
    // already have happened.
    wait_until(SHIM_BOUND, "the shim killed the command after neli-run died", || !g.lock_held());
}

#[test]
fn kill_9_with_a_stalled_log_reader_still_kills_the_command_at_once() {
    let g = Group::new("stalled-reader-kill9");
    let (_reader, stderr) = full_pipe();
    // Every log line neli-run writes finds the pipe full: it must lead and
    // start the command all the same.
    let mut m = g.member_with_stderr("a", &LONG_LEASE, &["sh", "-c", "sleep 1000 & exec sleep 1000"], stderr);
    wait_until(LONG, "the child runs although the log pipe is full", || g.lock_held());
    m.signal(Signal::SIGKILL);
    m.wait_exit(LONG);
    wait_until(SHIM_BOUND, "the shim killed the command after neli-run died", || !g.lock_held());
}

#[test]
fn a_frozen_leader_with_a_dead_log_reader_is_fenced_by_the_lease_and_carries_on() {
    let g = Group::new("dead-reader-sigstop");
    let t = g.broker.timing;
    let (reader, stderr) = pipe();
    let mut m = g.member_with_stderr("a", &[], &["sleep", "1000"], stderr);
    wait_until(LONG, "the child runs", || g.lock_held());
    drop(reader);
    m.signal(Signal::SIGSTOP);
    // neli-run is frozen: only the shim's lease can kill the command, and
    // its report meets EPIPE.
    wait_until(t.deadline + FENCE_ROOM, "the lease fenced the frozen leader's child", || !g.lock_held());
    m.signal(Signal::SIGCONT);
    // neli-run logs its fence into the dead pipe, and must live on to lead
    // again. Its log is lost with the pipe: a failure says what is left.
    wait_until(t.takeover(), "it leads again (or exits)", || m.exited() || (g.starts().len() >= 2 && g.lock_held()));
    assert!(!m.exited(), "neli-run exited; starts {:?}, overlaps {:?}", g.starts(), g.overlaps());
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(143));
    g.assert_no_overlap();
}

#[test]
fn a_broken_stderr_never_changes_the_exit_status() {
    let g = Group::new("broken-stderr-status");
    let (reader, dead) = pipe();
    drop(reader);
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    for (name, stderr) in [("dead-pipe", dead), ("dev-full", Stdio::from(full)), ("stalled", full_pipe().1)] {
        let mut m = g.member_with_stderr(name, &[], &["sh", "-c", "exit 3"], stderr);
        assert_eq!(m.wait_exit(LONG).code(), Some(3), "stderr {name}");
    }
    // fd 2 closed altogether.
    let closed = ["sh", "-c", r#"exec "$0" "$@" 2>&-"#].map(String::from).to_vec();
    let mut m = g.member_in(Some(closed), "closed", &[], &["sh", "-c", "exit 3"]);
    assert_eq!(m.wait_exit(LONG).code(), Some(3), "stderr closed");
}

#[test]
fn restart_always_keeps_restarting_with_a_dead_log_reader() {
    let g = Group::new("dead-reader-restart");
    let (reader, stderr) = pipe();
    drop(reader);
    let mut m = g.member_with_stderr("a", &["--restart", "always", "--restart-delay", "100ms"], &["true"], stderr);
    wait_until(LONG, "three runs", || g.starts().len() >= 3);
    assert!(!m.exited(), "neli-run exited");
    m.signal(Signal::SIGTERM);
    let code = m.wait_exit(LONG).code();
    assert!(matches!(code, Some(0) | Some(143)), "{code:?}");
}
