//! The reaper: one registry of the processes neli-run started, each with
//! where its status goes, and `reap`, which routes every status by pid.
//!
//! neli-run is a child subreaper (or PID 1), so `waitpid(-1)` hands it the
//! statuses of the processes it started (each seat's shim; the keepers of
//! the hooks and health checks run beside the commands) and of orphans
//! reparented to it (what a shim or a keeper that died abruptly left).
//! Whose each status is, only the registry says:
//!
//! - A process is registered under the lock it is started under (`spawn`),
//!   and `reap` holds that lock across its `waitpid`s: a process that exits
//!   at once is listed before it can be reaped, so its status is never
//!   taken for an orphan's and dropped.
//! - `reap` removes an entry as it reaps its pid. A pid is reused only once
//!   reaped, so a registered pid always names the process registered, and a
//!   registered shim is alive or a zombie: what its command started is
//!   below it (the shim is a subreaper too) until it dies.
//! - A pid nobody registered is an orphan's: reaped and dropped.
//! - Every process directly below neli-run that is not registered is an
//!   orphan, condemned whatever seat it came from, and `all_gone` sweeps
//!   it with all below it; a registered process and all below it are never
//!   touched by a sweep (another seat's live command, a hook).
//!
//! `reap` is called on the shell's loop only (its SIGCHLD handler and its
//! exit path): a `Running` on the loop then knows that its shim, not
//! reaped yet, still has its number (`Running::kill`).

use std::io;
use std::os::unix::process::CommandExt;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::sync::oneshot;

use super::{cloexec_inherited_fds, fd_limit, keeper, tree};
use crate::exit::ChildStatus;

/// Where a registered process's status goes once reaped.
enum Owner {
    /// A seat's shim: to its `Running`, which the loop awaits.
    Shim(oneshot::Sender<ChildStatus>),
    /// A keeper run beside the commands: to the thread that started it.
    Beside(mpsc::Sender<ChildStatus>),
}

impl Owner {
    /// Hands `status` over; an owner that stopped listening drops it.
    fn deliver(self, status: ChildStatus) {
        match self {
            Owner::Shim(to) => drop(to.send(status)),
            Owner::Beside(to) => drop(to.send(status)),
        }
    }
}

/// The processes neli-run started and has not reaped, by pid.
struct Registry(Vec<(Pid, Owner)>);

static REGISTRY: Mutex<Registry> = Mutex::new(Registry(Vec::new()));

/// The registry, locked. Held by a spawn (until the exec), by `reap`
/// (its `waitpid`s, none blocking), by a sweep's signals (no /proc walk),
/// and for a lookup: the loop, which reaps, may wait that long for it.
fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Registry {
    fn holds(&self, pid: Pid) -> bool {
        self.0.iter().any(|(p, _)| *p == pid)
    }

    fn is_beside(&self, pid: Pid) -> bool {
        self.0.iter().any(|(p, owner)| *p == pid && matches!(owner, Owner::Beside(_)))
    }
}

/// Starts `cmd`, registered with `owner` (`registered`).
fn spawn(cmd: &mut std::process::Command, owner: Owner) -> io::Result<Pid> {
    registered(|| Ok(Pid::from_raw(cmd.spawn()?.id() as i32)), owner)
}

/// Starts a process with `start`, registered with `owner` under the lock
/// it is started under (see the module's doc). `start` returns once the
/// exec is done, and on a failed one reaps the child itself (std's spawn
/// and posix_spawn, glibc's and musl's, do): no `reap` can take it first.
fn registered(start: impl FnOnce() -> io::Result<Pid>, owner: Owner) -> io::Result<Pid> {
    let mut registry = registry();
    let pid = start()?;
    registry.0.push((pid, owner));
    Ok(pid)
}

/// Starts a seat's shim with `start`, registered as one; its status comes
/// through the receiver once `reap` reaps it.
pub(super) fn spawn_shim(start: impl FnOnce() -> io::Result<Pid>) -> io::Result<(Pid, oneshot::Receiver<ChildStatus>)> {
    let (status, receiver) = oneshot::channel();
    Ok((registered(start, Owner::Shim(status))?, receiver))
}

/// Reaps every exited child without blocking (we are a subreaper, or PID 1,
/// so orphans are ours to reap), and hands each status to whoever started
/// that process; an orphan's is dropped. On the loop only (module's doc).
pub fn reap() {
    let mut registry = registry();
    loop {
        let (pid, status) = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => (pid, ChildStatus::Exited(code as u8)),
            Ok(WaitStatus::Signaled(pid, sig, _)) => (pid, ChildStatus::Signaled(sig as i32)),
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => continue,
        };
        match registry.0.iter().position(|(p, _)| *p == pid) {
            Some(at) => registry.0.swap_remove(at).1.deliver(status),
            None => tracing::debug!(pid = pid.as_raw(), %status, "reaped an orphan"),
        }
    }
}

/// The processes run beside the commands (the hooks, the health check),
/// each under a keeper of its own (`keeper.rs`) that keeps what it starts
/// below it: registered, so that `reap` hands each status to whoever
/// started it, and a sweep spares it and all below it.
pub struct Beside;

impl Beside {
    /// The command that runs `line` with /bin/sh -c under a keeper of its
    /// own, for `spawn` once its environment and stdio are set.
    pub fn shell(line: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(super::program::path());
        cmd.arg0("neli-run-keeper").arg(keeper::ARG).args(["--", "/bin/sh", "-c", line]);
        cmd
    }

    /// Starts `cmd` (from `shell`) beside the command: in a process group of
    /// its own, without the descriptors neli-run holds (librdkafka's pipes),
    /// spared by the sweeps; its status comes through the receiver once
    /// `reap` reaps it (the caller must not wait for it: only `reap` does).
    pub fn spawn(mut cmd: std::process::Command) -> io::Result<(Pid, Receiver<ChildStatus>)> {
        let fd_limit = fd_limit();
        let us = nix::unistd::getpid();
        cmd.process_group(0);
        // SAFETY: only async-signal-safe calls (fcntl, close_range, prctl,
        // getppid) between fork and exec. A neli-run killed with SIGKILL
        // can kill nothing: the kernel sends the keeper SIGTERM then, and it
        // kills all below it, as at --hook-timeout (a hook that hung
        // outlived it). The thread that spawns is the hooks' or the health
        // check's, which waits for the keeper to end before it ends.
        unsafe {
            cmd.pre_exec(move || {
                cloexec_inherited_fds(3, fd_limit);
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
                if nix::unistd::getppid() != us {
                    return Err(io::Error::other("neli-run died before the hook or check started"));
                }
                Ok(())
            });
        }
        let (status, receiver) = mpsc::channel();
        Ok((spawn(&mut cmd, Owner::Beside(status))?, receiver))
    }

    /// Has the keeper `pid`, started by `spawn`, SIGKILL everything below it
    /// and end (SIGTERM: a SIGKILL would leave what is below it to us),
    /// unless it has been reaped (its number may then be another's); true
    /// if sent.
    pub fn kill(pid: Pid) -> bool {
        let registry = registry();
        registry.is_beside(pid) && nix::sys::signal::kill(pid, Signal::SIGTERM).is_ok()
    }

    /// As `kill`, for all those not reaped yet (never a shim); how many.
    pub fn kill_all() -> usize {
        let registry = registry();
        let beside = registry.0.iter().filter(|(_, owner)| matches!(owner, Owner::Beside(_)));
        beside.filter(|(pid, _)| nix::sys::signal::kill(*pid, Signal::SIGTERM).is_ok()).count()
    }
}

/// One pass of `all_gone`: SIGKILLs every orphan below us (every process
/// directly below neli-run that is not registered) and all below it;
/// returns how many it found (zombies too: they go once the loop reaps).
///
/// /proc is read without the lock (a walk down every process below us,
/// `tree::below`), then the lock is taken, and held while the orphans are told
/// apart and signalled (a lookup and a few syscalls each):
/// - A shim or keeper being started while /proc is read is forked under
///   the lock: by the time the sweep holds it, that process is registered,
///   and spared with all below it. One forked after the read is not in it.
/// - Nothing is reaped while the sweep holds the lock, so no pid it read
///   directly below us can be reused meanwhile by a process neli-run starts
///   (that needs the lock too). Deeper pids are signalled only if still
///   below what was read (`tree::signal`, through a pidfd).
/// - A registered shim's command is below that shim while it lives, so it
///   is spared; once the shim died (even before it is reaped) what it left
///   is directly below us, unregistered, and condemned: it is the dead
///   seat's leftovers, which that seat's own sweep would kill anyway.
fn sweep() -> usize {
    let us = nix::unistd::getpid();
    let procs = tree::below(us);
    let registry = registry();
    let orphans = tree::outside(procs, |pid| registry.holds(pid));
    tree::signal(&orphans, us, Signal::SIGKILL);
    orphans.len()
}

/// Waits until no orphan is left below us (see `sweep`), SIGKILLing them.
/// A shim has exited by now and normally took everything with it; what is
/// left was reparented to us when the shim was killed, and is condemned.
/// The loop reaps the orphans as they die (their SIGCHLD); each pass reads
/// /proc on a blocking thread, off the runtime's workers.
///
/// It never gives up: until it returns the run has not ended, and no run
/// starts after it. A bound used to end the wait after 5 s, on the grounds
/// that a process sent SIGKILL never runs user code again; but a process
/// forked between a pass's listing and its kill was sent nothing, and
/// under load a daemon forking 2,000 `sleep`s outlived the bound and the
/// next run started beside them (issue 67's loaded runs). A process stuck
/// in uninterruptible sleep holds the run open until it goes (said once,
/// then every minute).
pub async fn all_gone() {
    all_gone_by(sweep).await;
}

/// `all_gone`, one pass being `sweep` (how many it found and killed).
async fn all_gone_by(sweep: fn() -> usize) {
    let started = tokio::time::Instant::now();
    let mut said: Option<tokio::time::Instant> = None;
    loop {
        let left = match tokio::task::spawn_blocking(sweep).await {
            Ok(left) => left,
            Err(err) => {
                tracing::error!(%err, "a sweep of the command's leftovers failed; sweeping again");
                usize::MAX
            }
        };
        if left == 0 {
            if said.is_some() {
                tracing::info!(took = ?started.elapsed(), "the command's leftovers are gone: its run has ended");
            }
            return;
        }
        let long = started.elapsed() > SWEEP_SAY_AFTER;
        if long && said.is_none_or(|at| at.elapsed() >= SWEEP_SAY_EVERY) {
            tracing::error!(
                left,
                "processes the command started were sent SIGKILL but still exist (uninterruptible sleep?): \
                 its run has not ended, and nothing starts here until they are gone"
            );
            said = Some(tokio::time::Instant::now());
        }
        tokio::time::sleep(if long { SWEEP_SLOW_PAUSE } else { Duration::from_millis(5) }).await;
    }
}

/// When a sweep that has not ended is said, and how often again.
const SWEEP_SAY_AFTER: Duration = Duration::from_secs(5);
const SWEEP_SAY_EVERY: Duration = Duration::from_secs(60);
/// The pause between passes once a sweep has gone on that long.
const SWEEP_SLOW_PAUSE: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::OnceLock;
    use std::time::Instant;

    use super::*;

    static STARTED: OnceLock<Instant> = OnceLock::new();
    static LAST_LEFT: AtomicUsize = AtomicUsize::new(usize::MAX);

    /// A pass that finds one process left until a second past the bound
    /// (a fork bomb's last forks, or a process slow to die under load).
    fn one_left_until_past_the_bound() -> usize {
        let started = STARTED.get_or_init(Instant::now);
        let left = usize::from(started.elapsed() < SWEEP_SAY_AFTER + Duration::from_secs(1));
        LAST_LEFT.store(left, Ordering::SeqCst);
        left
    }

    /// The sweep's wait ends only once a pass finds nothing left, however
    /// long that takes: before, it gave up at its bound and the run was
    /// reported over with a process of it still there.
    #[tokio::test]
    async fn the_sweep_goes_on_past_its_bound_until_nothing_is_left() {
        all_gone_by(one_left_until_past_the_bound).await;
        assert_eq!(LAST_LEFT.load(Ordering::SeqCst), 0, "the wait ended with a process left");
    }
}
