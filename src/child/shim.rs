//! The shim: a tiny process between neli-run and the child that makes the
//! child's fate independent of neli-run's.
//!
//! neli-run starts `/proc/self/exe __shim ...` as the leader of a new process
//! group; the shim starts the command in that same group and then only
//! watches three things (with every asynchronous signal blocked, so a signal
//! sent to the group never kills it):
//! - the lease pipe (fd 3): neli-run writes the instant (CLOCK_BOOTTIME, in
//!   nanoseconds, 8 bytes little-endian) until which the child may run. When
//!   that instant passes with no newer lease, the shim SIGKILLs the group:
//!   fencing that works even while neli-run is frozen (SIGSTOP, a stuck
//!   thread, a swapped-out process). When the pipe closes, neli-run is dead
//!   (even by `kill -9`), and the shim SIGKILLs the group too.
//! - SIGCHLD: the shim is a child subreaper, so every descendant that loses
//!   its parent comes back to it. When the command exits, the rest of the
//!   group gets the stop signal and `grace` to leave, then SIGKILL; the shim
//!   exits once no descendant is left, with the command's status (re-raising
//!   the signal that killed it, so neli-run sees the same death).
//! - the stop signal itself, so that the group is not signalled twice when
//!   neli-run already asked it to stop.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{killpg, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::exit::{self, ChildStatus};

/// The argument that turns the binary into the shim.
pub const ARG: &str = "__shim";
/// The fd on which the shim reads leases.
pub const LEASE_FD: i32 = 3;

/// Signals that report a fault in the shim itself; blocking them would hide a
/// crash (tini leaves them alone too).
const FAULTS: [Signal; 7] =
    [Signal::SIGSEGV, Signal::SIGBUS, Signal::SIGFPE, Signal::SIGILL, Signal::SIGABRT, Signal::SIGTRAP, Signal::SIGSYS];

/// Entry point: `neli-run __shim <stop-signal> <grace-ms> -- <cmd> [args]`.
pub fn main(args: &[OsString]) -> ! {
    let code = match run(args) {
        Ok(status) => finish(status),
        Err(err) => {
            eprintln!("neli-run: shim: {err}");
            exit::INTERNAL
        }
    };
    std::process::exit(code.into())
}

fn parse(args: &[OsString]) -> Option<(Signal, Duration, &OsString, &[OsString])> {
    let [sig, grace, sep, program, rest @ ..] = args else {
        return None;
    };
    let sig = Signal::try_from(sig.to_str()?.parse::<i32>().ok()?).ok()?;
    let grace = Duration::from_millis(grace.to_str()?.parse().ok()?);
    (sep == "--").then_some((sig, grace, program, rest))
}

fn run(args: &[OsString]) -> io::Result<ChildStatus> {
    let (stop_signal, grace, program, rest) =
        parse(args).ok_or_else(|| io::Error::other("bad arguments (the shim is started by neli-run only)"))?;
    // SAFETY: neli-run placed the lease pipe at this fd; nothing else owns it.
    let mut lease = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(LEASE_FD) });
    nix::fcntl::fcntl(LEASE_FD, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
    nix::sys::prctl::set_child_subreaper(true)?;

    let mut blocked = SigSet::all();
    for sig in FAULTS {
        blocked.remove(sig);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None)?;
    let mut watched = SigSet::empty();
    watched.add(Signal::SIGCHLD);
    watched.add(stop_signal);
    let signals = SignalFd::with_flags(&watched, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)?;

    // No child before the first lease: neli-run writes it before we run.
    let lease_timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, TimerFlags::TFD_CLOEXEC)?;
    let mut buf = [0u8; 8];
    if lease.read_exact(&mut buf).is_err() {
        return Err(io::Error::other("neli-run went away before the first lease"));
    }
    arm_at(&lease_timer, u64::from_le_bytes(buf))?;

    let mut command = Command::new(program);
    command.args(rest).arg0(program);
    // SAFETY: sigprocmask is async-signal-safe. The command must start with
    // no signal blocked (std resets SIGPIPE's disposition, not the mask).
    unsafe {
        command.pre_exec(|| {
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(err) => {
            let (code, what) = match err.kind() {
                io::ErrorKind::NotFound => (exit::NOT_FOUND, "command not found"),
                io::ErrorKind::PermissionDenied => (exit::NOT_EXECUTABLE, "permission denied"),
                _ => (exit::NOT_EXECUTABLE, "cannot execute"),
            };
            eprintln!("neli-run: {}: {what} ({err})", program.to_string_lossy());
            return Ok(ChildStatus::Exited(code));
        }
    };

    let drain_timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, TimerFlags::TFD_CLOEXEC)?;
    let mut status: Option<ChildStatus> = None;
    let mut group_signalled = false;
    let mut draining = false;
    loop {
        let mut fds = [
            PollFd::new(lease.as_fd(), PollFlags::POLLIN),
            PollFd::new(lease_timer.as_fd(), PollFlags::POLLIN),
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(drain_timer.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
            Ok(_) => {}
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        let (lease_ready, lease_expired, signalled, drained) =
            (ready(&fds[0]), ready(&fds[1]), ready(&fds[2]), ready(&fds[3]));
        if lease_ready {
            let mut many = [0u8; 8 * 64];
            match lease.read(&mut many) {
                Ok(0) | Err(_) => {
                    eprintln!("neli-run: shim: neli-run is gone; killing the command's process group");
                    kill_group();
                }
                Ok(n) if n >= 8 => {
                    let last = &many[(n / 8 - 1) * 8..n / 8 * 8];
                    arm_at(&lease_timer, u64::from_le_bytes(last.try_into().expect("8 bytes")))?;
                }
                Ok(_) => {}
            }
        }
        if lease_expired {
            eprintln!("neli-run: shim: lease expired (no fresh heartbeat); killing the command's process group");
            kill_group();
        }
        if drained {
            eprintln!("neli-run: shim: processes left after the command exited ignored the stop signal; killing them");
            kill_group();
        }
        if signalled {
            while let Some(info) = signals.read_signal()? {
                if info.ssi_signo as i32 == stop_signal as i32 {
                    group_signalled = true;
                }
            }
            loop {
                match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                        status = Some(ChildStatus::Exited(code as u8));
                    }
                    Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                        status = Some(ChildStatus::Signaled(sig as i32));
                    }
                    Ok(WaitStatus::StillAlive) => break,
                    Ok(_) => continue,
                    Err(Errno::ECHILD) => match status {
                        Some(status) => return Ok(status),
                        None => break,
                    },
                    Err(err) => return Err(err.into()),
                }
                if status.is_some() && !draining {
                    // The command is gone; whatever it left in the group
                    // must go too (dumb-init does the same), within grace.
                    draining = true;
                    if !group_signalled {
                        group_signalled = true;
                        let _ = killpg(Pid::from_raw(0), stop_signal);
                    }
                    drain_timer.set(
                        Expiration::OneShot(TimeSpec::from_duration(grace.max(Duration::from_millis(1)))),
                        TimerSetTimeFlags::empty(),
                    )?;
                }
            }
        }
    }
}

fn arm_at(timer: &TimerFd, nanos: u64) -> io::Result<()> {
    // An absolute expiry of 0 would disarm the timer; 1 ns has long passed.
    let at = TimeSpec::from_duration(Duration::from_nanos(nanos.max(1)));
    timer.set(Expiration::OneShot(at), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?;
    Ok(())
}

fn kill_group() -> ! {
    let _ = killpg(Pid::from_raw(0), Signal::SIGKILL);
    // SIGKILL is delivered on the way back from the kernel; this is only
    // reached if the group could not be signalled at all.
    std::thread::sleep(Duration::from_secs(1));
    std::process::exit(137)
}

/// Ends the shim the way the command ended, so neli-run sees the same status.
fn finish(status: ChildStatus) -> u8 {
    if let ChildStatus::Signaled(sig) = status {
        if let Ok(sig) = Signal::try_from(sig) {
            // Dying of SIGSEGV and the like must not write a second core.
            let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
            // SAFETY: restoring the default disposition has no preconditions.
            let _ = unsafe { nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl) };
            let mut only = SigSet::empty();
            only.add(sig);
            let _ = nix::sys::signal::raise(sig);
            let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&only), None);
        }
    }
    status.code()
}
