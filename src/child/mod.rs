//! The child supervisor: starts the command behind its shim, signals its
//! process group, renews its lease and waits until the group is gone.
//!
//! The process tree is `neli-run -> shim -> command -> ...`, one shim per
//! seat, where the shim leads a new process group that the command shares
//! (see `shim.rs` for what the shim guarantees on its own). Descendants may
//! leave that group; they never leave the tree below the shim while it
//! lives, as the shim is a child subreaper, so a seat's kill reaches
//! everything below its own shim (`tree`) and nothing of another seat's.
//! neli-run is a subreaper too (or PID 1): it reaps every exited process
//! itself, so `std::process::Child` is not kept, and what a shim that died
//! abruptly left comes back to it, to be swept (`all_gone`).
//!
//! Processes run beside the command (the hooks, the health check) are below
//! us too, each under a keeper of its own (`keeper.rs`) that keeps what it
//! starts below it and kills that when it ends. Shims and keepers are
//! registered with the reaper (`reaper.rs`), which hands each status to
//! whoever started that process, and whose sweeps spare them.

pub mod keeper;
mod program;
mod reaper;
pub mod shim;
#[cfg(test)]
mod tests;
pub mod tree;

pub use reaper::{all_gone, reap, Beside};

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::oneshot;

use crate::clock::BootTime;
use crate::exit::{ChildStatus, Failure, Kind};

/// What to run and how to stop it.
#[derive(Clone, Debug)]
pub struct Command {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Its number (`config` checked that it can stop a process).
    pub stop_signal: i32,
    pub grace: Duration,
    /// Extra environment for the child (NELI_GROUP and friends).
    pub env: Vec<(String, String)>,
    /// Variables neli-run consumed, kept from the child (a password in
    /// NELI_KAFKA_PROPERTIES, systemd's NOTIFY_SOCKET).
    pub env_remove: Vec<OsString>,
}

/// Checks, before joining any group, that the command can be executed, so a
/// typo is an immediate error and not a leader that fails every restart.
/// Searches PATH as execvp does. Errors carry the shell's exit codes (127 not
/// found, 126 not executable).
pub fn check_executable(program: &OsStr) -> Result<(), Failure> {
    let name = Path::new(program);
    let candidates: Vec<PathBuf> = if program.to_string_lossy().contains('/') {
        vec![name.to_path_buf()]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path).map(|dir| dir.join(name)).collect()
    };
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if candidates.iter().any(|p| executable(p)) {
        return Ok(());
    }
    match candidates.iter().find(|p| p.exists()) {
        Some(p) => {
            Err(Failure::new(Kind::NotExecutable, format!("not an executable file: {} (chmod +x it?)", p.display())))
        }
        None => Err(Failure::new(
            Kind::NotFound,
            format!("command not found: {} (give a path, or check PATH)", name.display()),
        )),
    }
}

/// A started child: its shim's pid, which is also the process group id,
/// and the shim's registration with the reaper (its status comes there).
#[derive(Debug)]
pub struct Running {
    pgid: Pid,
    lease: File,
    exit: oneshot::Receiver<ChildStatus>,
}

impl Running {
    /// Starts the shim and, through it, the command; the child may run until
    /// `lease` unless the lease is renewed. Without a token (a warm
    /// command, told its token through a file) NELI_FENCING_TOKEN is unset.
    pub fn spawn(cmd: &Command, token: Option<i64>, lease: BootTime) -> io::Result<Running> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let mut shim = std::process::Command::new(program::path());
        for name in &cmd.env_remove {
            shim.env_remove(name);
        }
        shim.arg0("neli-run-shim")
            .arg(shim::ARG)
            .arg(cmd.stop_signal.to_string())
            .arg(cmd.grace.as_millis().to_string())
            .arg("--")
            .arg(&cmd.program)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .process_group(0);
        match token {
            Some(token) => shim.env("NELI_FENCING_TOKEN", token.to_string()),
            None => shim.env_remove("NELI_FENCING_TOKEN"),
        };
        // Read before the fork: getrlimit in the child is not on the list of
        // async-signal-safe calls.
        let fd_limit = fd_limit();
        // SAFETY: only async-signal-safe calls (dup2, fcntl, close_range)
        // between fork and exec, on the read end, which the closure owns (so
        // it is open until `shim` is dropped, after the spawn).
        unsafe {
            shim.pre_exec(move || {
                place_lease_fd(&read)?;
                cloexec_inherited_fds(shim::LEASE_FD + 1, fd_limit);
                Ok(())
            });
        }
        // Without /proc (a container or namespace that lacks it) the exec
        // fails, and says so here.
        let started = Running::start(&mut shim, File::from(write)).map_err(|err| {
            io::Error::new(err.kind(), format!("cannot start the shim {}: {err}", program::path().display()))
        });
        // Closes our copy of the read end (the pre_exec closure owns it) once
        // the shim has its own, before the first lease is written.
        drop(shim);
        let mut running = started?;
        running.renew(lease)?;
        fcntl(&running.lease, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok(running)
    }

    /// Starts `shim` (a shim's command line, in a group of its own) and
    /// registers it with the reaper under the lock it is forked under, so
    /// its status comes to `exited` however soon it exits, and no sweep
    /// takes it for an orphan.
    fn start(shim: &mut std::process::Command, lease: File) -> io::Result<Running> {
        let (pgid, exit) = reaper::spawn_shim(shim)?;
        Ok(Running { pgid, lease, exit })
    }

    /// Whether `reap` has reaped the shim (its number may then be
    /// another's, and its group's too once that is empty).
    fn reaped(&self) -> bool {
        !self.exit.is_empty() || self.exit.is_terminated()
    }

    /// Waits until `reap` has reaped the shim: its status. Cancel-safe; once
    /// it has returned, the `Running` is done with (the reaper's channel is
    /// spent).
    pub async fn exited(&mut self) -> ChildStatus {
        if self.exit.is_terminated() {
            return std::future::pending().await;
        }
        (&mut self.exit).await.unwrap_or_else(|_| {
            // Never: the registry drops an entry only as it reaps its pid.
            tracing::error!(pid = self.pgid.as_raw(), "the shim's registration was lost");
            ChildStatus::Exited(Kind::Internal.code())
        })
    }

    /// The shim's pid and the group's id.
    pub fn pgid(&self) -> Pid {
        self.pgid
    }

    /// Moves the lease forward. A full pipe (a shim that stopped reading)
    /// drops the renewal: the lease then expires, which is the safe side. A
    /// closed one is a shim that exited (a short run, between its exit and
    /// its reaping): no lease is left to move, and nothing to say.
    pub fn renew(&mut self, until: BootTime) -> io::Result<()> {
        let until = if crate::layers_off::off(crate::layers_off::Layer::Lease) {
            BootTime::from_nanos(u64::MAX / 2) // no end a test could wait for
        } else {
            until
        };
        match self.lease.write(&until.as_nanos().to_le_bytes()) {
            Err(err) if matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::BrokenPipe) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Sends `sig` to the whole group; the shim, which ignores it, passes
    /// it on to descendants that left the group when it is the stop signal.
    /// Not once the shim is reaped: its group is then leftovers, swept.
    pub fn signal(&self, sig: Signal) {
        if self.reaped() {
            return;
        }
        match killpg(self.pgid, sig) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(err) => tracing::warn!(%err, %sig, "could not signal the child's group"),
        }
    }

    /// SIGKILLs everything the command started, whatever group or session
    /// it moved to: everything below its shim, which is a subreaper, and
    /// nothing else (another seat's command, a hook, a check). Not the
    /// shim: it reaps them and reports the command's own status (a command
    /// that exited on SIGTERM is 143 even if a daemon it left had to be
    /// killed). SIGCONT wakes a shim stopped along with its group (`kill
    /// -STOP -PGID`), which must reap.
    ///
    /// The shim's number is its own here: this runs on the loop, and only
    /// the loop reaps, so a shim not reaped yet is not reaped during the
    /// kill; once reaped, its leftovers are directly below neli-run, and
    /// `all_gone`'s. A shim that dies during the walk leaves its command to
    /// us too: what was read below it is then signalled only if still below
    /// it (`tree::signal`).
    pub fn kill(&self) {
        if self.reaped() {
            return;
        }
        tree::signal_below(self.pgid, Signal::SIGKILL, |_| true);
        let _ = nix::sys::signal::kill(self.pgid, Signal::SIGCONT);
    }
}

/// Puts the lease pipe's read end at `LEASE_FD`, inheritable, in the forked
/// child. Async-signal-safe (runs between fork and exec).
///
/// dup2 is libc's: the target is a descriptor number, not a descriptor we
/// own (it may not even be open), and nix's `dup2` wants an `OwnedFd` there;
/// its `dup2_raw` (0.31) does not check dup2's result, so a failure would
/// become an `OwnedFd` of -1 instead of an error.
fn place_lease_fd(read: &OwnedFd) -> io::Result<()> {
    if read.as_raw_fd() == shim::LEASE_FD {
        fcntl(read, FcntlArg::F_SETFD(FdFlag::empty()))?;
    } else {
        // SAFETY: `read` is open; dup2 replaces whatever this child had at
        // LEASE_FD, which is the shim's from here on.
        Errno::result(unsafe { libc::dup2(read.as_raw_fd(), shim::LEASE_FD) })?;
    }
    Ok(())
}

/// Marks every fd from `first` on close-on-exec: librdkafka opens its
/// wake-up pipes without O_CLOEXEC, and the user's command must not inherit
/// them. Not closed: std's exec-status pipe is among them, and without it a
/// failed exec (or pre_exec) reads as a successful spawn. The fallback walks
/// fds up to `limit`, the RLIMIT_NOFILE read before the fork (no fd above it
/// can have been opened while it held). Async-signal-safe (runs between fork
/// and exec).
fn cloexec_inherited_fds(first: i32, limit: i32) {
    let first = first as libc::c_uint;
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets fd flags; no
    // memory is touched.
    let done =
        unsafe { libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC) } == 0;
    if !done {
        // Kernels before 5.11: one by one.
        for fd in first as i32..limit {
            // SAFETY: as above; an fd that is not open fails with EBADF.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                // SAFETY: as above.
                unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
            }
        }
    }
}

/// One above the highest fd this process can have open: the soft
/// RLIMIT_NOFILE (bounded by the kernel's nr_open), or 4096 if unknown.
fn fd_limit() -> i32 {
    match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) => soft.min(i32::MAX as u64) as i32,
        Err(_) => 4096,
    }
}

/// Makes this process a child subreaper, so that descendants of a dying
/// child group come back to us to be reaped (as they would to PID 1), and
/// `all_gone` does not wait on whatever init does with orphans.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}
