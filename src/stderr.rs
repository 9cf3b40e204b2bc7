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
use std::os::fd::AsFd;
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

static SINK: OnceLock<Out> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Decides where reports go. Called early (before the log reader can have
/// died), and by the first report otherwise.
pub fn init() {
    SINK.get_or_init(|| Out::open(2));
}

/// A descriptor written to without ever waiting (fd 2 for reports; the
/// shim forwards a command's output to fd 1 and 2 the same way).
pub struct Out {
    fd: i32,
    sink: Sink,
}

impl Out {
    /// Decides, from what `fd` is now, how to write to it without waiting.
    pub fn open(fd: i32) -> Out {
        // SAFETY: only looked at for the call, and `fd` stays open.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let Ok(stat) = nix::sys::stat::fstat(borrowed) else {
            return Out { fd, sink: Sink::Nowhere };
        };
        let kind = stat.st_mode & libc::S_IFMT;
        let sink = if kind == libc::S_IFSOCK {
            Sink::Socket
        } else if kind != libc::S_IFIFO && kind != libc::S_IFCHR {
            Sink::Plain
        } else {
            let reopened = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
                .open(format!("/proc/self/fd/{fd}"));
            match reopened {
                Ok(file) => Sink::Reopened(file),
                // A FIFO without a reader: nobody would read what we write.
                Err(err) if err.raw_os_error() == Some(libc::ENXIO) => Sink::Nowhere,
                Err(_) => Sink::Polled,
            }
        };
        Out { fd, sink }
    }

    /// Writes what can be written of `buf` now: how much (0: nothing can be
    /// now; wait for `waitable` to be writable). An error: nothing ever
    /// will be (the reader is gone).
    pub fn write_some(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `fd` is open for as long as this process writes to it.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        loop {
            let wrote = match &self.sink {
                Sink::Reopened(file) => nix::unistd::write(file, buf),
                Sink::Socket => send(self.fd, buf, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL),
                Sink::Plain => nix::unistd::write(fd, buf),
                Sink::Polled => {
                    let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
                    match poll(&mut fds, PollTimeout::ZERO) {
                        Ok(1) if fds[0].revents().is_some_and(|r| r == PollFlags::POLLOUT) => {
                            nix::unistd::write(fd, buf)
                        }
                        Ok(_) => return Ok(0),
                        Err(err) => Err(err),
                    }
                }
                Sink::Nowhere => return Err(io::ErrorKind::BrokenPipe.into()),
            };
            match wrote {
                Ok(0) if !buf.is_empty() => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => return Ok(0),
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// What to poll for POLLOUT while `write_some` writes nothing.
    pub fn waitable(&self) -> std::os::fd::BorrowedFd<'_> {
        match &self.sink {
            Sink::Reopened(file) => file.as_fd(),
            // SAFETY: as in `write_some`.
            _ => unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) },
        }
    }
}

/// Writes `buf` if that can be done now; returns whether all of it went.
pub fn write(buf: &[u8]) -> bool {
    let sink = SINK.get_or_init(|| Out::open(2));
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

fn write_now(out: &Out, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        match out.write_some(buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf = &buf[n..],
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
