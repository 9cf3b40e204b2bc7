//! Best-effort stderr: writes that never block and never panic.
//!
//! neli-run reports from the paths that keep the safety promise: the shim
//! says why it killed the command, the shell's loop logs a fence. A log reader
//! that died (EPIPE), one that stalled (a full pipe: a slow journald, a
//! terminal in scroll lock) or a full disk must not stop those paths, yet
//! `eprintln!` panics on the first and blocks on the second. So a report goes
//! through a descriptor of its own opened with O_NONBLOCK: reopening a pipe,
//! FIFO or terminal through /proc/self/fd/2 gives a new open file
//! description, so the command, which shares fd 2, keeps its blocking
//! writes. A socket (journald's stream) gets `send(MSG_DONTWAIT)`, a regular
//! file a plain write. What cannot be written at once is dropped, and the
//! next line that gets through says how many were lost.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{send, MsgFlags};

/// Where reports go, decided once from what fd 2 is.
enum Sink {
    /// Our own non-blocking description of fd 2's pipe, FIFO or terminal.
    Reopened(File),
    /// fd 2 is a socket: `send` with MSG_DONTWAIT.
    Socket,
    /// A regular file (or anything else that never waits for a reader).
    Plain,
    /// A pipe or terminal that could not be reopened (no /proc): write only
    /// when poll says there is room. Another writer can fill it in between,
    /// so this is the fallback, not the rule.
    Polled,
    /// fd 2 is closed, or its reader was already gone.
    Nowhere,
}

static SINK: OnceLock<Sink> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Decides where reports go. Called early (before the log reader can have
/// died), and by the first report otherwise.
pub fn init() {
    SINK.get_or_init(open);
}

fn open() -> Sink {
    let Ok(stat) = nix::sys::stat::fstat(io::stderr()) else {
        return Sink::Nowhere;
    };
    let kind = stat.st_mode & libc::S_IFMT;
    if kind == libc::S_IFSOCK {
        return Sink::Socket;
    }
    if kind != libc::S_IFIFO && kind != libc::S_IFCHR {
        return Sink::Plain;
    }
    let reopened =
        std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open("/proc/self/fd/2");
    match reopened {
        Ok(file) => Sink::Reopened(file),
        // A FIFO without a reader: nobody would read what we write.
        Err(err) if err.raw_os_error() == Some(libc::ENXIO) => Sink::Nowhere,
        Err(_) => Sink::Polled,
    }
}

/// Writes `buf` if that can be done now; returns whether all of it went.
pub fn write(buf: &[u8]) -> bool {
    let sink = SINK.get_or_init(open);
    let dropped = DROPPED.load(Ordering::Relaxed);
    if dropped > 0 {
        let note = format!("neli-run: {dropped} log line(s) dropped: stderr was not writable\n");
        if !write_now(sink, note.as_bytes()) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        DROPPED.fetch_sub(dropped, Ordering::Relaxed);
    }
    let ok = write_now(sink, buf);
    if !ok {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
    ok
}

/// One line (a newline is added), best effort.
pub fn line(args: fmt::Arguments<'_>) {
    write(format!("{args}\n").as_bytes());
}

fn write_now(sink: &Sink, mut buf: &[u8]) -> bool {
    let stderr = io::stderr();
    let fd2 = stderr.as_fd();
    while !buf.is_empty() {
        let wrote = match sink {
            Sink::Reopened(file) => nix::unistd::write(file, buf).map_err(io::Error::from),
            Sink::Socket => {
                send(fd2.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL).map_err(io::Error::from)
            }
            Sink::Plain => nix::unistd::write(fd2, buf).map_err(io::Error::from),
            Sink::Polled => {
                let mut fds = [PollFd::new(fd2, PollFlags::POLLOUT)];
                match poll(&mut fds, PollTimeout::ZERO) {
                    Ok(1) if fds[0].revents().is_some_and(|r| r == PollFlags::POLLOUT) => {
                        nix::unistd::write(fd2, buf).map_err(io::Error::from)
                    }
                    _ => return false,
                }
            }
            Sink::Nowhere => return false,
        };
        match wrote {
            Ok(0) => return false,
            Ok(n) => buf = &buf[n..],
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// A `tracing` writer over the sink (made by `|| Log`): a log line that
/// cannot be written now is dropped, never waited for, and never an error
/// (tracing-subscriber reports a failed write with `eprintln!`, which
/// panics on EPIPE).
#[derive(Clone, Copy, Debug, Default)]
pub struct Log;

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
