//! The keeper: the process each hook and health check runs under
//! (`Beside::spawn`), so that nothing it starts outlives it.
//!
//! neli-run is a child subreaper, so a check's `cmd &` or a hook's `setsid
//! daemon` comes back to neli-run once the shell that started it exits, and
//! there nothing tells it by ancestry from the command's own leftovers: one
//! was left per check, until neli-run exited, and one started by the last
//! hook outlived neli-run. So neli-run runs `/proc/self/exe __keeper --
//! /bin/sh -c LINE`, and the keeper, a subreaper itself, keeps below it
//! everything the line starts, whatever group or session that moves to:
//! - when the shell exits, the keeper SIGKILLs everything left below it
//!   (sweeping until nothing is left, as the shim does: `shim::kill_all`)
//!   and exits with the shell's status;
//! - on SIGTERM (neli-run's kill at --hook-timeout, --health-timeout or
//!   exit; a stop of the unit) it does the same at once, and ends as if
//!   SIGKILLed.
//!
//! It blocks every other signal, so a signal sent to its process group
//! reaches the line, not the keeper. neli-run never SIGKILLs a keeper: what
//! is below it would come back to neli-run (`Beside::kill` sends SIGTERM).
//! The command's kills never reach it (they are rooted at the command's
//! shim), and the sweeps of orphans spare it and all below it, as it is
//! registered with the reaper (`reaper.rs`).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::shim;
use crate::exit::{ChildStatus, Kind};
use crate::stderr;

/// The argument that turns the binary into a keeper.
pub const ARG: &str = "__keeper";

/// Entry point: `neli-run __keeper -- <program> [args]`.
pub fn main(args: &[OsString]) -> ! {
    stderr::init();
    // Run from memory, the kernel named it by its fd's number (`program`).
    let _ = nix::sys::prctl::set_name(c"neli-run-keeper");
    let code = match run(args) {
        Ok(status) => shim::finish(status),
        Err(err) => {
            // Nothing may outlive the keeper: kill first, then say why.
            shim::kill_all();
            stderr::line(format_args!("neli-run: keeper: {err}; killed what the hook or check started"));
            Kind::Internal.code()
        }
    };
    std::process::exit(code.into())
}

fn run(args: &[OsString]) -> io::Result<ChildStatus> {
    let [sep, program, rest @ ..] = args else { return Err(bad_arguments()) };
    if sep != "--" {
        return Err(bad_arguments());
    }
    nix::sys::prctl::set_child_subreaper(true)?;
    let mut blocked = SigSet::all();
    for sig in shim::FAULTS {
        blocked.remove(sig);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None)?;
    let mut watched = SigSet::empty();
    watched.add(Signal::SIGCHLD);
    watched.add(Signal::SIGTERM);
    let signals = SignalFd::with_flags(&watched, SfdFlags::SFD_CLOEXEC)?;

    let mut command = Command::new(program);
    command.args(rest);
    // SAFETY: sigprocmask is async-signal-safe. The line starts with no
    // signal blocked (std resets SIGPIPE's disposition, not the mask).
    unsafe {
        command.pre_exec(|| {
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(|err| io::Error::other(format!("cannot execute {}: {err}", program.to_string_lossy())))?;
    let child = Pid::from_raw(child.id() as i32);
    loop {
        // A blocking read: SIGCHLD or SIGTERM is all that can come.
        let Some(info) = signals.read_signal()? else { continue };
        if info.ssi_signo == Signal::SIGTERM as u32 {
            sweep();
            return Ok(ChildStatus::Signaled(Signal::SIGKILL as i32));
        }
        loop {
            let status = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => ChildStatus::Exited(code as u8),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => ChildStatus::Signaled(sig as i32),
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                Ok(_) => continue,
                Err(err) => return Err(err.into()),
            };
            // The shell is done: what it left goes too.
            sweep();
            return Ok(status);
        }
    }
}

/// SIGKILLs everything below the keeper, then says so if some of it
/// would not go.
fn sweep() {
    if !shim::kill_all() {
        stderr::line(format_args!(
            "neli-run: keeper: what a hook or check left was sent SIGKILL but was still there after 5 s (uninterruptible sleep?)"
        ));
    }
}

fn bad_arguments() -> io::Error {
    io::Error::other("bad arguments (the keeper is started by neli-run only)")
}
