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
pub mod output;
mod program;
mod reaper;
pub mod shim;
#[cfg(test)]
mod tests;
pub mod tree;

pub use reaper::{all_gone, reap, Beside};

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::spawn::{posix_spawn, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::{killpg, SigSet, Signal};
use nix::unistd::Pid;
use tokio::sync::oneshot;

use crate::clock::{self, BootTime};
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
    /// How many bytes of its output its shim keeps for the run's record
    /// (`output.rs`); 0: none, and its stdout and stderr are neli-run's.
    pub keep_output: usize,
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
    /// The memfd the shim writes the output's tail to, and its bound.
    tail: Option<(File, usize)>,
}

impl Running {
    /// Starts the shim and, through it, the command, once the wall clock
    /// reads `begin_ms` (ms since the Unix epoch: a scheduled run's due
    /// time) if given: until then the shim waits, and a kill, a stop signal
    /// or the lease's end leaves the command never started. The child may
    /// run until `lease` unless the lease is renewed. Without a token (a
    /// warm command, told its token through a file) NELI_FENCING_TOKEN is
    /// unset.
    pub fn spawn(cmd: &Command, token: Option<i64>, lease: BootTime, begin_ms: Option<u64>) -> io::Result<Running> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        // posix_spawn's dup2 onto the same number would leave it close-on-exec.
        let read = match read.as_raw_fd() == shim::LEASE_FD {
            true => read.try_clone()?, // the lowest free number: above it
            false => read,
        };
        let (program, argv, env) = shim_line(cmd, token, begin_ms)?;
        let tail = match cmd.keep_output {
            0 => None,
            _ => Some(tail_file()?),
        };
        // Without /proc (a container or namespace that lacks it) the exec
        // fails, and says so here.
        let spawn = || posix_spawn_shim(&program, &argv, &env, &read, tail.as_ref());
        let started = Running::start(spawn, File::from(write)).map_err(|err| {
            io::Error::new(err.kind(), format!("cannot start the shim {}: {err}", program::path().display()))
        });
        // Our copy of the read end goes once the shim has its own, before the
        // first lease is written.
        drop(read);
        let mut running = started?;
        running.tail = tail.map(|file| (file, cmd.keep_output));
        running.renew(lease)?;
        fcntl(&running.lease, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok(running)
    }

    /// Starts a shim with `start` (which returns its pid; in a group of its
    /// own) and registers it with the reaper under the lock it is started
    /// under, so its status comes to `exited` however soon it exits, and no
    /// sweep takes it for an orphan.
    fn start(start: impl FnOnce() -> io::Result<Pid>, lease: File) -> io::Result<Running> {
        let (pgid, exit) = reaper::spawn_shim(start)?;
        Ok(Running { pgid, lease, exit, tail: None })
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

    /// The tail of the run's output, once the shim is reaped (None: not
    /// kept, or the shim never wrote it).
    pub fn output(&self) -> Option<output::Kept> {
        self.tail.as_ref().and_then(|(file, keep)| output::Kept::read(file, *keep))
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

/// The shim's program, its arguments and its environment (ours, less
/// `env_remove`, plus the command's `env` and its token), as posix_spawn
/// takes them.
fn shim_line(
    cmd: &Command,
    token: Option<i64>,
    begin_ms: Option<u64>,
) -> io::Result<(CString, Vec<CString>, Vec<CString>)> {
    let c = |bytes: Vec<u8>| {
        CString::new(bytes).map_err(|err| {
            let text = String::from_utf8_lossy(&err.into_vec()).into_owned();
            io::Error::new(io::ErrorKind::InvalidInput, format!("a NUL byte in {text:?}"))
        })
    };
    let (stop, grace) = (cmd.stop_signal.to_string(), cmd.grace.as_millis().to_string());
    let (begin, keep) = (begin_ms.map_or(0, clock::realtime_ns_at).to_string(), cmd.keep_output.to_string());
    let head = ["neli-run-shim", shim::ARG, &stop, &grace, &begin, &keep, "--"].map(|a| a.as_bytes().to_vec());
    let tail = std::iter::once(&cmd.program).chain(&cmd.args).map(|a| a.as_bytes().to_vec());
    let argv = head.into_iter().chain(tail).map(c).collect::<io::Result<_>>()?;
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for name in &cmd.env_remove {
        env.remove(name);
    }
    env.extend(cmd.env.iter().map(|(k, v)| (k.into(), v.into())));
    match token {
        Some(token) => env.insert("NELI_FENCING_TOKEN".into(), token.to_string().into()),
        None => env.remove(OsStr::new("NELI_FENCING_TOKEN")),
    };
    let env =
        env.into_iter().map(|(k, v)| c([k.as_bytes(), b"=", v.as_bytes()].concat())).collect::<io::Result<_>>()?;
    Ok((c(program::path().as_os_str().as_bytes().to_vec())?, argv, env))
}

/// Starts the shim: the lease pipe's read end at `LEASE_FD`, a process
/// group of its own, no signal blocked and SIGPIPE's default action (as
/// std starts a process). posix_spawn, not fork: the kernel does not copy
/// neli-run's page tables, which a fork did (with the exec that the loop
/// waited for, 2 to 4 ms a start, one after another for the runs due
/// together). The descriptors the shim inherits beyond its lease
/// (librdkafka's pipes and sockets are not close-on-exec) it closes
/// itself, before anything else (`shim::main`).
fn posix_spawn_shim(
    program: &CString,
    argv: &[CString],
    env: &[CString],
    read: &OwnedFd,
    tail: Option<&File>,
) -> io::Result<Pid> {
    let mut actions = PosixSpawnFileActions::init()?;
    actions.add_dup2(read.as_raw_fd(), shim::LEASE_FD)?;
    if let Some(tail) = tail {
        actions.add_dup2(tail.as_raw_fd(), output::TAIL_FD)?;
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    attr.set_sigdefault(&default_at_start())?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    Ok(posix_spawn(program.as_c_str(), &actions, &attr, argv, env)?)
}

/// A memfd for the shim to write a run's output's tail to, above the fds
/// the shim is given (a dup2 onto its own number would leave it
/// close-on-exec, and one onto the lease's would be overwritten).
fn tail_file() -> io::Result<File> {
    let memfd = nix::sys::memfd::memfd_create(c"neli-run-output", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
    let above = fcntl(&memfd, FcntlArg::F_DUPFD_CLOEXEC(output::TAIL_FD + 1))?;
    // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else owns.
    Ok(File::from(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(above) }))
}

/// The signals the shim (and so the command) starts with at their default
/// action whatever neli-run does with them: SIGPIPE, which neli-run ignores
/// as every Rust program does, and the C library's own (32 to 34), which
/// posix_spawn would leave ignored in the new program (glibc's and musl's
/// alike) and which `sigaddset` refuses to name. Signals neli-run catches
/// posix_spawn resets itself; ones it was started ignoring stay ignored,
/// as across any exec.
fn default_at_start() -> SigSet {
    // SAFETY: an all-zero sigset_t is the empty set.
    let mut raw: libc::sigset_t = unsafe { std::mem::zeroed() };
    let words = std::ptr::addr_of_mut!(raw).cast::<libc::c_ulong>();
    let per = libc::c_ulong::BITS as usize;
    for bit in (32..=34).map(|sig: usize| sig - 1) {
        // SAFETY: a sigset_t holds the kernel's 64 signals at least, as
        // words of bits, signal n being bit n - 1 (glibc and musl alike).
        unsafe { *words.add(bit / per) |= 1 << (bit % per) };
    }
    // SAFETY: built as the C library's sigset_t is.
    let mut set = unsafe { SigSet::from_sigset_t_unchecked(raw) };
    set.add(Signal::SIGPIPE);
    set
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
