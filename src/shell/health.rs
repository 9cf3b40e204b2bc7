//! `--health-cmd`: a shell command line whose exit status says whether this
//! member may lead (Docker's HEALTHCHECK, with its interval, timeout and
//! retries).
//!
//! A thread of its own runs the check, one at a time, `--health-interval`
//! after the last one ended; one that outlasts `--health-timeout` is sent
//! SIGKILL, with all it started, and counts as failed. Only the verdict's
//! changes reach the loop (`Verdict`), as an input it never waits for: a
//! check that hangs delays the next check, nothing else. Its stdout goes to
//! /dev/null, its stderr to a pipe read to its end by a thread of the
//! check's own, which keeps only the last `TAIL` bytes (a flood is read and
//! dropped, never held): the last line is logged with a failure, so a
//! check that cannot run says why. The log says each change, each failure
//! up to the threshold, and then every `STILL_FAILING`th failure while the
//! member stays out (about once a minute at the default interval).
//!
//! Started through `child::Beside`, as the hooks are: neli-run reaps every
//! process below it on the loop, and the command's kills must spare it. Its
//! keeper (`child::keeper`) kills what a check leaves running (`cmd &`, a
//! `setsid` daemon) once the check has exited: nothing piles up, one per
//! interval, below neli-run.

use std::ffi::OsString;
use std::io::Read;
use std::process::Stdio;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::unistd::Pid;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tracing::{debug, info, warn};

use crate::child::Beside;
use crate::config::Config;
use crate::env;
use crate::exit::{ChildStatus, Failure, Kind};
use crate::printable::printable;

/// The health check of this member: its verdicts, as they change.
pub(super) struct Health {
    changes: UnboundedReceiver<bool>,
    /// Dropped to stop the thread (it waits on it between checks).
    _stop: Sender<()>,
    /// The check running now: killed when neli-run exits.
    running: Arc<Mutex<Slot>>,
}

/// The check running now, if any; once `stopped`, none is started.
#[derive(Default)]
struct Slot {
    pid: Option<Pid>,
    stopped: bool,
}

impl Health {
    /// Starts the thread that runs the check; None if none is set.
    pub(super) fn start(cfg: &Config) -> Result<Option<Health>, Failure> {
        let Some(check) = cfg.health.clone() else { return Ok(None) };
        info!(cmd = %check.cmd, "waiting for the first health check to pass before joining the group");
        let (tx, changes) = unbounded_channel();
        let (_stop, stopped) = channel::<()>();
        let running = Arc::new(Mutex::new(Slot::default()));
        let (env, remove, current) = (cfg.given_env(), env::removed(), running.clone());
        std::thread::Builder::new()
            .name("neli-health".into())
            .spawn(move || {
                let mut verdict = Verdict::new(check.retries);
                loop {
                    let (outcome, stderr) = run(&check.cmd, &env, remove, check.timeout, &current);
                    let change = verdict.note(outcome.passed());
                    let (failures, retries) = (verdict.failures, check.retries);
                    let stderr = stderr.as_deref();
                    match change {
                        Some(true) => info!(check = %outcome, "health check passed: healthy"),
                        Some(false) => warn!(check = %outcome, stderr, failures, "health check failed: unhealthy"),
                        None if outcome.passed() => debug!("health check passed"),
                        None if failures <= retries => {
                            warn!(check = %outcome, stderr, failures, retries, "health check failed")
                        }
                        // Past the threshold, now and then: a member kept out
                        // for ever must not look like one that is fine.
                        None if failures % STILL_FAILING == 0 => warn!(
                            check = %outcome,
                            stderr,
                            failures,
                            "health check still failing: out of the group until a check passes"
                        ),
                        None => debug!(check = %outcome, stderr, "health check failed"),
                    }
                    if let Some(healthy) = change {
                        if tx.send(healthy).is_err() {
                            return;
                        }
                    }
                    match stopped.recv_timeout(check.interval) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                }
            })
            .map(|_| Some(Health { changes, _stop, running }))
            .map_err(|err| Failure::new(Kind::Internal, format!("cannot start the health check's thread: {err}")))
    }

    /// The next change of verdict (never, if the thread has stopped).
    pub(super) async fn changed(health: &mut Option<Health>) -> bool {
        match health.as_mut() {
            Some(h) => match h.changes.recv().await {
                Some(healthy) => healthy,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// At exit: kills the check running now, if any, and starts no other
    /// (the thread stops once this is dropped). Someone must reap it (the
    /// loop no longer does).
    pub(super) fn stop(self) {
        let mut slot = self.running.lock().unwrap_or_else(|e| e.into_inner());
        slot.stopped = true;
        if let Some(pid) = slot.pid {
            Beside::kill(pid);
        }
    }
}

/// The verdict from checks in a row, as Docker's: healthy after a check
/// passes, unhealthy after `retries` fail in a row; unknown (unhealthy to
/// the core) until the first passes.
struct Verdict {
    retries: u32,
    failures: u32,
    healthy: Option<bool>,
}

impl Verdict {
    fn new(retries: u32) -> Verdict {
        Verdict { retries, failures: 0, healthy: None }
    }

    /// Notes one check; returns the new verdict if it changed.
    fn note(&mut self, passed: bool) -> Option<bool> {
        self.failures = if passed { 0 } else { self.failures.saturating_add(1) };
        let now = match (passed, self.healthy) {
            (true, _) => Some(true),
            (false, Some(true)) if self.failures >= self.retries => Some(false),
            (false, was) => was,
        };
        let changed = (now != self.healthy).then_some(now == Some(true));
        self.healthy = now;
        changed
    }
}

/// How one check went.
enum Outcome {
    Exited(ChildStatus),
    TimedOut(Duration),
    NotStarted(String),
    /// Sent SIGKILL, and still not reaped after KILL_WAIT.
    Stuck,
}

impl Outcome {
    fn passed(&self) -> bool {
        matches!(self, Outcome::Exited(status) if status.success())
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The shell's codes for a command it could not run.
            Outcome::Exited(status @ ChildStatus::Exited(127)) => write!(f, "{status} (not found by the shell)"),
            Outcome::Exited(status @ ChildStatus::Exited(126)) => write!(f, "{status} (found, but not executable)"),
            Outcome::Exited(status) => write!(f, "{status}"),
            Outcome::TimedOut(t) => write!(f, "timed out after {t:?} (--health-timeout): sent SIGKILL"),
            Outcome::NotStarted(err) => write!(f, "not started: {err}"),
            Outcome::Stuck => write!(f, "timed out, and not gone after SIGKILL"),
        }
    }
}

/// How long a check sent SIGKILL may take to be reaped before the next
/// one is due (a process in uninterruptible sleep).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How much of the end of a check's stderr is kept, in bytes.
const TAIL: usize = 200;

/// How long the last of a check's stderr may take to be read once it has
/// ended (its keeper has killed all that could hold the pipe open).
const TAIL_WAIT: Duration = Duration::from_secs(1);

/// Past --health-retries, a failure is logged once in this many: about once
/// a minute at the default --health-interval (5s).
const STILL_FAILING: u32 = 12;

/// Runs the check once, within `timeout`: how it went, and the last line
/// of its stderr, if it wrote any.
fn run(
    line: &str,
    env: &[(String, String)],
    remove: &[OsString],
    timeout: Duration,
    running: &Mutex<Slot>,
) -> (Outcome, Option<String>) {
    let mut cmd = Beside::shell(line);
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    for name in remove {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let tail = match stderr_tail() {
        Ok((write, tail)) => {
            cmd.stderr(write);
            Some(tail)
        }
        Err(err) => {
            debug!(%err, "cannot read the health check's stderr: /dev/null takes it");
            cmd.stderr(Stdio::null());
            None
        }
    };
    // Spawned under the slot's lock, so that `stop` either prevents it or
    // sees its pid: none outlives neli-run.
    let lock = || running.lock().unwrap_or_else(|e| e.into_inner());
    let (pid, status) = {
        let mut slot = lock();
        if slot.stopped {
            return (Outcome::NotStarted("neli-run is exiting".into()), None);
        }
        // `cmd`, and with it our copy of the pipe's write end, goes here.
        match Beside::spawn(cmd) {
            Ok((pid, status)) => {
                slot.pid = Some(pid);
                (pid, status)
            }
            Err(err) => return (Outcome::NotStarted(err.to_string()), None),
        }
    };
    let outcome = match status.recv_timeout(timeout) {
        Ok(status) => Outcome::Exited(status),
        Err(_) => {
            Beside::kill(pid);
            match status.recv_timeout(KILL_WAIT) {
                Ok(_) => Outcome::TimedOut(timeout),
                Err(_) => Outcome::Stuck,
            }
        }
    };
    lock().pid = None;
    let stderr = tail.and_then(|tail| tail.recv_timeout(TAIL_WAIT).ok()).and_then(|tail| last_line(&tail));
    (outcome, stderr)
}

/// A pipe for a check's stderr, and the end of what it carries once all
/// its writers are gone: a thread reads it to its end, keeping the last
/// `TAIL` bytes.
fn stderr_tail() -> std::io::Result<(std::os::fd::OwnedFd, std::sync::mpsc::Receiver<Vec<u8>>)> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (tx, tail) = channel();
    std::thread::Builder::new().name("neli-health-err".into()).spawn(move || {
        let _ = tx.send(read_tail(std::fs::File::from(read)));
    })?;
    Ok((write, tail))
}

/// Reads `from` to its end; the last `TAIL` bytes.
fn read_tail(mut from: impl Read) -> Vec<u8> {
    let mut tail = Tail(Vec::with_capacity(2 * TAIL));
    // An error ends the read as its end does (io::copy retries EINTR).
    let _ = std::io::copy(&mut from, &mut tail);
    tail.0
}

/// What is written to it, but only the last `TAIL` bytes.
struct Tail(Vec<u8>);

impl std::io::Write for Tail {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        self.0.drain(..self.0.len().saturating_sub(TAIL));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The last line that is not blank in `tail`, printable (control
/// characters escaped), if any.
fn last_line(tail: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(tail);
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    Some(printable(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_turns_healthy_on_a_pass_and_unhealthy_after_retries_failures_in_a_row() {
        let mut v = Verdict::new(3);
        assert_eq!(v.note(false), None, "unknown until a check passes: still not healthy");
        assert_eq!(v.note(false), None);
        assert_eq!(v.note(true), Some(true), "the first pass");
        assert_eq!(v.note(true), None);
        assert_eq!(v.note(false), None);
        assert_eq!(v.note(false), None);
        assert_eq!(v.note(true), None, "a pass resets the count");
        assert_eq!(v.note(false), None);
        assert_eq!(v.note(false), None);
        assert_eq!(v.note(false), Some(false), "three in a row");
        assert_eq!(v.note(false), None, "said once");
        assert_eq!(v.note(true), Some(true), "one pass is enough");
        let mut v = Verdict::new(1);
        v.note(true);
        assert_eq!(v.note(false), Some(false));
    }

    #[test]
    fn a_check_that_cannot_run_says_why_and_its_stderr_is_kept_to_its_last_line() {
        let said = |code| Outcome::Exited(ChildStatus::Exited(code)).to_string();
        assert_eq!(said(127), "exit code 127 (not found by the shell)");
        assert_eq!(said(126), "exit code 126 (found, but not executable)");
        assert_eq!(said(1), "exit code 1");
        // A flood is read to its end, and only its last bytes are kept.
        let flood = [b'x'].repeat(1 << 20).into_iter().chain(*b"\nsh: 1: /nonexistent/check: not found\n\n");
        let tail = read_tail(std::io::Cursor::new(flood.collect::<Vec<u8>>()));
        assert_eq!(tail.len(), TAIL);
        assert_eq!(last_line(&tail).as_deref(), Some("sh: 1: /nonexistent/check: not found"));
        assert_eq!(last_line(b"\x1b[2Jcleared \n  \n"), Some("\\u{1b}[2Jcleared".into()), "escaped");
        assert_eq!(last_line(b" \n"), None);
    }
}
