//! The shim: a tiny process between neli-run and the child that makes the
//! child's fate independent of neli-run's.
//!
//! neli-run starts the shim (`program.rs`: `__shim ...`) with posix_spawn
//! as the leader of a new process group; the shim closes every descriptor
//! it inherited beyond stdio and its lease, and starts the command in that
//! same group (so neli-run's `killpg` reaches the command and whatever
//! stays in its group), once the wall clock reads the instant neli-run
//! names (a scheduled run's due time: neli-run starts its shim a moment
//! ahead, so that the command itself starts on time, and never before it
//! by the clock the command reads; until then the lease, the pipe and the
//! stop signal end the shim with nothing started), and then only watches
//! three things, with every
//! asynchronous signal blocked so that a signal sent to the group never
//! kills it:
//! - the lease pipe (fd 3): neli-run writes the instant (CLOCK_BOOTTIME, in
//!   nanoseconds, 8 bytes little-endian) until which the child may run. When
//!   that instant passes with no newer lease, the shim SIGKILLs everything
//!   below it: fencing that works even while neli-run is frozen (SIGSTOP, a
//!   stuck thread, a swapped-out process). When the pipe closes, neli-run is
//!   dead (even by `kill -9`), and the shim does the same.
//! - SIGCHLD: the shim is a child subreaper, so every descendant that loses
//!   its parent comes back to it, whatever group or session it moved to.
//!   When the command exits, the shim sends the stop signal to everything
//!   left below it (unless it already passed neli-run's on) and reaps. It
//!   exits with the command's status (re-raising the signal that killed it,
//!   so neli-run sees the same death) as soon as nothing is left; if
//!   something is still there after `grace` (a `setsid` daemon that ignores
//!   the stop signal), it SIGKILLs it, sweeping until nothing is left or for
//!   at most 5 s (a process in uninterruptible sleep; it says so), and then
//!   exits with that same status. The lease and the pipe still fence
//!   meanwhile (then the status is SIGKILL).
//! - the stop signal, which neli-run sends to the group: the shim passes it
//!   on to the descendants that left the group (`setsid`, `setpgid`), and
//!   does not signal the group a second time once the command exits.
//!
//! The shim never signals its own group and never kills itself: it kills by
//! walking the process tree (`tree`), so it is still there to sweep up what
//! forks during the kill, and it reports only after killing, through writes
//! that cannot block or panic (`crate::stderr`), so a dead or stalled log
//! reader cannot keep it from killing.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpid, getppid, Pid};

use super::output::{Output, TAIL_FD};
use super::tree;
use crate::exit::{ChildStatus, Kind};
use crate::stderr;

/// The argument that turns the binary into the shim.
pub const ARG: &str = "__shim";
/// The fd on which the shim reads leases.
pub const LEASE_FD: i32 = 3;

/// Signals that report a fault in the shim itself; blocking them would hide a
/// crash (tini leaves them alone too).
pub(super) const FAULTS: [Signal; 7] =
    [Signal::SIGSEGV, Signal::SIGBUS, Signal::SIGFPE, Signal::SIGILL, Signal::SIGABRT, Signal::SIGTRAP, Signal::SIGSYS];

/// Entry point: `neli-run __shim <stop-signal> <grace-ms> <begin> <keep> --
/// <cmd> [args]`, where `<begin>` is the instant (CLOCK_REALTIME, nanoseconds
/// since the Unix epoch) the command starts at, 0 for at once, and `<keep>`
/// the bytes of its output to keep (`output.rs`; 0: its stdout and stderr
/// are the shim's own).
pub fn main(args: &[OsString]) -> ! {
    // The tail's memfd, when the output is kept, is one more to keep.
    close_inherited(match parse(args) {
        Some((.., keep, _, _)) if keep > 0 => TAIL_FD,
        _ => LEASE_FD,
    });
    stderr::init();
    // Run from memory, the kernel named it by its fd's number (`program`).
    let _ = nix::sys::prctl::set_name(c"neli-run-shim");
    let code = match run(args) {
        Ok(status) => finish(status),
        Err(err) => {
            // Nothing may outlive the shim unwatched: kill first, then say why.
            kill_all();
            stderr::line(format_args!("neli-run: shim: {err}; killed the command"));
            Kind::Internal.code()
        }
    };
    std::process::exit(code.into())
}

/// Closes every descriptor above `last` (the lease, or the tail's memfd):
/// neli-run starts the shim with
/// posix_spawn, which cannot mark what it holds close-on-exec (librdkafka's
/// pipes and sockets are not), and the shim must neither keep neli-run's
/// connections open nor pass them to the command.
fn close_inherited(last: i32) {
    let first = (last + 1) as libc::c_uint;
    // SAFETY: closes descriptors nothing in this process uses yet (nothing
    // has run before this but the program's start-up).
    if unsafe { libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, 0) } == 0 {
        return;
    }
    // Kernels before 5.9: each one /proc lists (its own listing's is
    // closed by then, and fails with EBADF).
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    for fd in open.into_iter().filter(|&fd| fd > last) {
        // SAFETY: as above.
        unsafe { libc::close(fd) };
    }
}

/// The shim's arguments: the stop signal, grace, when the command begins
/// (CLOCK_REALTIME ns, 0 for at once), the bytes of output to keep, and
/// the command.
type Args<'a> = (Signal, Duration, u64, usize, &'a OsString, &'a [OsString]);

fn parse(args: &[OsString]) -> Option<Args<'_>> {
    let [sig, grace, begin, keep, sep, program, rest @ ..] = args else {
        return None;
    };
    let sig = Signal::try_from(sig.to_str()?.parse::<i32>().ok()?).ok()?;
    let grace = Duration::from_millis(grace.to_str()?.parse().ok()?);
    let begin = begin.to_str()?.parse().ok()?;
    let keep = keep.to_str()?.parse().ok()?;
    (sep == "--").then_some((sig, grace, begin, keep, program, rest))
}

fn run(args: &[OsString]) -> io::Result<ChildStatus> {
    let (stop_signal, grace, begin, keep, program, rest) =
        parse(args).ok_or_else(|| io::Error::other("bad arguments (the shim is started by neli-run only)"))?;
    let (mut lease, lease_timer, signals) = arm(stop_signal)?;
    if let Some(status) = wait_to_begin(begin, (&mut lease, &lease_timer), &signals, stop_signal)? {
        return Ok(status);
    }
    // neli-run may have been frozen (or this start slow) between its
    // decision to start the command and now: once its lease has passed,
    // another member may own the partition. The timer would kill the
    // command at once, but not before it ran. (A one-shot timer that has
    // expired is disarmed.)
    if lease_timer.get()?.is_none() {
        stderr::line(format_args!("neli-run: shim: the lease had passed before the command could start; not started"));
        return Ok(ChildStatus::Signaled(Signal::SIGKILL as i32));
    }
    let me = getpid();
    // Kept or not, the command runs: a keeper that cannot start says so.
    let (output, stdio) = match (keep > 0).then(|| Output::new(keep)).transpose() {
        Ok(kept) => kept.unzip(),
        Err(err) => {
            stderr::line(format_args!("neli-run: shim: cannot keep the command's output ({err}); not kept"));
            (None, None)
        }
    };
    let child = match spawn_command(program, rest, me, stdio) {
        Ok(child) => child,
        Err(status) => return Ok(status),
    };
    let drain_timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, TimerFlags::TFD_CLOEXEC)?;
    let watch = Watch {
        me,
        stop_signal,
        grace,
        child,
        lease,
        lease_timer,
        signals,
        drain_timer,
        status: None,
        stop_sent: false,
        draining: false,
        output,
    };
    watch.run()
}

/// Everything before the command starts: takes the lease pipe, becomes a
/// subreaper, blocks every asynchronous signal (a signal sent to the group
/// must not kill the shim) and watches SIGCHLD and the stop signal through
/// a signalfd instead, then arms the lease timer with neli-run's first
/// lease. Returns the lease pipe, the lease timer and the signalfd.
fn arm(stop_signal: Signal) -> io::Result<(std::fs::File, TimerFd, SignalFd)> {
    // SAFETY: neli-run placed the lease pipe at this fd; nothing else owns it.
    let mut lease = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(LEASE_FD) });
    nix::fcntl::fcntl(&lease, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
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
    Ok((lease, lease_timer, signals))
}

/// Waits until `begin` (CLOCK_REALTIME ns; at once if it has come) with
/// nothing started, watching what the running command's shim watches: a
/// lease that passes, a closed pipe (neli-run is gone) or the stop signal
/// (the run was revoked, fenced or replaced before its due time) each end
/// the shim with the status neli-run would see had it been killed (Some),
/// and nothing ever starts. None once `begin` has come.
fn wait_to_begin(
    begin: u64,
    (lease, lease_timer): (&mut std::fs::File, &TimerFd),
    signals: &SignalFd,
    stop_signal: Signal,
) -> io::Result<Option<ChildStatus>> {
    let begin_timer = TimerFd::new(ClockId::CLOCK_REALTIME, TimerFlags::TFD_CLOEXEC)?;
    arm_at(&begin_timer, begin)?;
    let not_started = |why: &str, status: ChildStatus| {
        stderr::line(format_args!("neli-run: shim: {why} before the command's start time; not started"));
        Ok(Some(status))
    };
    loop {
        let [lease_ready, lease_expired, signalled, begun] =
            readable([lease.as_fd(), lease_timer.as_fd(), signals.as_fd(), begin_timer.as_fd()])?;
        if lease_ready {
            if !read_leases(lease, lease_timer)? {
                return not_started("neli-run is gone", ChildStatus::Signaled(Signal::SIGKILL as i32));
            }
            // As in `Watch::run`: a renewal that came with the old lease's
            // expiry counts.
            continue;
        }
        if lease_expired {
            return not_started("the lease passed", ChildStatus::Signaled(Signal::SIGKILL as i32));
        }
        if signalled {
            let mut stopped = false;
            while let Some(info) = signals.read_signal()? {
                stopped |= info.ssi_signo as i32 == stop_signal as i32;
            }
            if stopped {
                return not_started("stopped", ChildStatus::Signaled(stop_signal as i32));
            }
        }
        if begun {
            return Ok(None);
        }
    }
}

/// Waits until one of `fds` can be read (a wait a signal interrupts goes
/// on): which ones can.
fn readable<const N: usize>(fds: [BorrowedFd<'_>; N]) -> io::Result<[bool; N]> {
    let mut polled = fds.map(|fd| PollFd::new(fd, PollFlags::POLLIN));
    loop {
        match poll(&mut polled, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
            Ok(_) => return Ok(polled.each_ref().map(|fd| fd.revents().is_some_and(|r| !r.is_empty()))),
        }
    }
}

/// Reads the leases queued on the pipe and re-arms `timer` at the newest;
/// false if the pipe closed (neli-run is dead).
fn read_leases(lease: &mut std::fs::File, timer: &TimerFd) -> io::Result<bool> {
    // Up to 64 leases queued since we last looked: the newest counts.
    // (neli-run writes each in one 8-byte write, which a pipe keeps whole.)
    let mut many = [0u8; 512];
    match lease.read(&mut many) {
        Ok(0) | Err(_) => Ok(false),
        Ok(n) => {
            if let Some(last) = many[..n].chunks_exact(8).last() {
                arm_at(timer, u64::from_le_bytes(last.try_into().expect("8 bytes")))?;
            }
            Ok(true)
        }
    }
}

/// Starts the command in the shim's group, with no signal blocked. Err is
/// the status the shim reports for a command that cannot start (the
/// shell's 127 and 126), said on stderr.
fn spawn_command(
    program: &OsString,
    rest: &[OsString],
    me: Pid,
    stdio: Option<[OwnedFd; 2]>,
) -> Result<Pid, ChildStatus> {
    let mut command = Command::new(program);
    command.args(rest).arg0(program);
    if let Some([out, err]) = stdio {
        command.stdout(out).stderr(err);
    }
    // SAFETY: sigprocmask, prctl and getppid are async-signal-safe. The
    // command must start with no signal blocked (std resets SIGPIPE's
    // disposition, not the mask). If the shim dies without sweeping (only
    // SIGKILL can do that), the command dies with it: whatever watched its
    // lease is gone.
    unsafe {
        command.pre_exec(move || {
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            if getppid() != me {
                return Err(io::Error::other("the shim died before the command started"));
            }
            Ok(())
        });
    }
    match command.spawn() {
        Ok(child) => Ok(Pid::from_raw(child.id() as i32)),
        Err(err) => {
            let (code, what) = match err.kind() {
                io::ErrorKind::NotFound => (Kind::NotFound.code(), "command not found"),
                io::ErrorKind::PermissionDenied => (Kind::NotExecutable.code(), "permission denied"),
                _ => (Kind::NotExecutable.code(), "cannot execute"),
            };
            stderr::line(format_args!("neli-run: {}: {what} ({err})", program.to_string_lossy()));
            Err(ChildStatus::Exited(code))
        }
    }
}

/// The started command, watched until its end is settled.
struct Watch {
    me: Pid,
    stop_signal: Signal,
    grace: Duration,
    child: Pid,
    lease: std::fs::File,
    lease_timer: TimerFd,
    signals: SignalFd,
    /// Armed once the command has exited: when what it left has had its
    /// `grace`.
    drain_timer: TimerFd,
    /// The command's own status, once it has exited.
    status: Option<ChildStatus>,
    /// Whether everything below us has had the stop signal: neli-run's
    /// killpg reached the group, and we passed it on to the rest.
    stop_sent: bool,
    draining: bool,
    /// The command's output, when its tail is kept.
    output: Option<Output>,
}

impl Watch {
    /// Waits on the lease pipe, the lease timer, the signalfd and the drain
    /// timer until the shim's status is known; every path that ends with
    /// something still running below the shim kills it first.
    fn run(mut self) -> io::Result<ChildStatus> {
        let status = self.settle()?;
        if let Some(output) = self.output.take() {
            output.finish();
        }
        Ok(status)
    }

    /// Waits until the command's status is settled, passing its output on
    /// meanwhile.
    fn settle(&mut self) -> io::Result<ChildStatus> {
        loop {
            let ([lease_ready, lease_expired, signalled, drained], streams) = self.wait()?;
            for stream in streams {
                self.output.as_mut().expect("streams are the output's").ready(stream);
            }
            if lease_ready {
                if let Some(status) = self.on_lease()? {
                    return Ok(status);
                }
                // The timer now stands at the newest lease: a lease that came
                // with the old one's expiry (the shim scheduled late) counts,
                // so look again before fencing.
                continue;
            }
            if lease_expired {
                return Ok(fence("lease expired (no fresh heartbeat)"));
            }
            if drained {
                return Ok(self.on_drain());
            }
            if signalled {
                if let Some(status) = self.on_signals()? {
                    return Ok(status);
                }
            }
        }
    }

    /// Waits until something can go on: which of the lease pipe, the lease
    /// timer, the signalfd and the drain timer can be read, and which of
    /// the output's streams can go on.
    fn wait(&self) -> io::Result<([bool; 4], Vec<usize>)> {
        let fixed = [self.lease.as_fd(), self.lease_timer.as_fd(), self.signals.as_fd(), self.drain_timer.as_fd()];
        let (streams, fds): (Vec<usize>, Vec<PollFd<'_>>) =
            self.output.as_ref().map(Output::interest).unwrap_or_default().into_iter().unzip();
        let mut polled: Vec<PollFd<'_>> = fixed.map(|fd| PollFd::new(fd, PollFlags::POLLIN)).into_iter().collect();
        polled.extend(fds);
        loop {
            match poll(&mut polled, PollTimeout::NONE) {
                Err(Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
                Ok(_) => break,
            }
        }
        let hit: Vec<bool> = polled.iter().map(|fd| fd.revents().is_some_and(|r| !r.is_empty())).collect();
        let ready = streams.into_iter().zip(&hit[4..]).filter(|(_, &hit)| hit).map(|(i, _)| i).collect();
        Ok(([hit[0], hit[1], hit[2], hit[3]], ready))
    }

    /// New leases on the pipe: re-arms the lease timer at the newest. A
    /// closed pipe means neli-run is dead: fenced, with that status.
    fn on_lease(&mut self) -> io::Result<Option<ChildStatus>> {
        match read_leases(&mut self.lease, &self.lease_timer)? {
            false => Ok(Some(fence("neli-run is gone"))),
            true => Ok(None),
        }
    }

    /// The stop signal, or SIGCHLD: passes the stop signal on, reaps, and
    /// once the command has exited gives what it left `grace` to go. The
    /// command's status once nothing is left below the shim.
    fn on_signals(&mut self) -> io::Result<Option<ChildStatus>> {
        let me = self.me;
        while let Some(info) = self.signals.read_signal()? {
            if info.ssi_signo as i32 == self.stop_signal as i32 {
                // neli-run signalled the group; pass it on to whatever
                // left the group (setsid, setpgid, a double fork).
                self.stop_sent = true;
                tree::signal_below(me, self.stop_signal, |p| p.pgrp != me);
            }
        }
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == self.child => {
                    self.status = Some(ChildStatus::Exited(code as u8));
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == self.child => {
                    self.status = Some(ChildStatus::Signaled(sig as i32));
                }
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) => continue,
                Err(Errno::ECHILD) => match self.status {
                    Some(status) => return Ok(Some(status)),
                    None => break,
                },
                Err(err) => return Err(err.into()),
            }
            if !self.draining {
                // The command is gone; whatever it left must go too
                // (dumb-init does the same for its group), within grace.
                self.draining = true;
                if !self.stop_sent {
                    self.stop_sent = true;
                    tree::signal_below(me, self.stop_signal, |_| true);
                }
                self.drain_timer.set(
                    Expiration::OneShot(TimeSpec::from_duration(self.grace.max(Duration::from_millis(1)))),
                    TimerSetTimeFlags::empty(),
                )?;
            }
        }
        Ok(None)
    }

    /// Grace is over and what the command left is still there: kills it,
    /// then ends with the command's own status.
    fn on_drain(&self) -> ChildStatus {
        let swept = kill_all();
        stderr::line(format_args!(
            "neli-run: shim: processes left after the command exited ignored the stop signal; killed them{}",
            if swept { "" } else { STILL_THERE }
        ));
        self.status.expect("the drain timer runs only once the command has exited")
    }
}

/// Appended to a report when a sweep gave up with processes still there.
const STILL_THERE: &str = " (some were still there after 5 s: uninterruptible sleep?)";

/// Kills everything below the shim, then says why: the kill never waits
/// for a log reader. The shim then ends as if killed, as the command was.
fn fence(why: &str) -> ChildStatus {
    let swept = kill_all();
    stderr::line(format_args!(
        "neli-run: shim: {why}; killed the command and everything it started{}",
        if swept { "" } else { STILL_THERE }
    ));
    ChildStatus::Signaled(Signal::SIGKILL as i32)
}

/// SIGKILLs everything below the shim until nothing is left, reaping as it
/// goes: a process that forks during the sweep leaves its child to us (we
/// are its subreaper), and the next round gets it. Returns false if it gave
/// up: a SIGKILLed process never runs user code again, but one in
/// uninterruptible sleep can take long to go.
pub(super) fn kill_all() -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        tree::signal_below(getpid(), Signal::SIGKILL, |_| true);
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) => {}
                Err(Errno::ECHILD) => return true,
                Err(_) => break,
            }
        }
        if std::time::Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn arm_at(timer: &TimerFd, nanos: u64) -> io::Result<()> {
    // An absolute expiry of 0 would disarm the timer; 1 ns has long passed.
    let at = TimeSpec::from_duration(Duration::from_nanos(nanos.max(1)));
    timer.set(Expiration::OneShot(at), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?;
    Ok(())
}

/// Ends the shim the way the command ended, so neli-run sees the same status.
pub(super) fn finish(status: ChildStatus) -> u8 {
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
