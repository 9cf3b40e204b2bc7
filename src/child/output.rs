//! The tail of a run's output (`--keep-output SIZE`, a job's `output=`):
//! the shim reads the command's stdout and stderr through pipes of its
//! own, passes each on to where it went before (the shim's own fd 1 and 2,
//! which are neli-run's: the journal, the container's log, a terminal) and
//! keeps the last SIZE bytes of the two together, interleaved in the order
//! it read them, for the run's end record. With SIZE 0 there is no pipe:
//! the command writes to neli-run's stdout and stderr itself, as before.
//!
//! The keeper is the shim because the shim lives exactly as long as the
//! command and what it started (it is their subreaper, and kills them all
//! before it exits): the reader of the command's pipes never dies before
//! its writers, so the command never meets a broken pipe of ours. neli-run
//! killed -9 is a fence (the shim kills the command, as it always did), so
//! the pipes close with the command, not before it.
//!
//! Nothing here waits on a reader: the shim's loop still watches the
//! lease and the signals while the command writes. What the shim cannot
//! pass on at once waits in a backlog, and the command's pipe is not read
//! until the backlog is written: behind a stalled log reader the command
//! blocks on a full pipe, as it did writing there itself. A reader that is
//! gone (EPIPE: a dead journald, a closed terminal) stops the passing on,
//! said once on stderr; the command goes on, and its output is still kept
//! here (it died of SIGPIPE before, writing there itself). When the run
//! ends (the command and everything below it gone) the shim reads what is
//! left in the pipes without waiting for their end (a process outside the
//! tree may hold one open), gives a stalled reader `FLUSH` to take the
//! rest, and writes the tail to `TAIL_FD`, a memfd that neli-run reads
//! once it has reaped the shim.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::stderr::{self, Out};

/// The fd on which the shim writes the tail (a memfd of neli-run's).
pub const TAIL_FD: i32 = 4;

/// How much is read from a pipe at once.
const CHUNK: usize = 64 * 1024;

/// How long the end of a run gives a stalled log reader to take what the
/// shim still holds for it (then it is dropped; the tail has it).
const FLUSH: Duration = Duration::from_secs(1);

/// The command's two streams, and their tail.
pub struct Output {
    streams: [Stream; 2],
    tail: Tail,
    file: File,
}

/// One of the command's streams as the shim reads it.
struct Stream {
    /// The pipe's read end (non-blocking); None once at its end.
    pipe: Option<File>,
    /// Where it is passed on; None once that reader is gone.
    out: Option<Out>,
    name: &'static str,
    /// Read and not yet passed on.
    backlog: Vec<u8>,
}

/// The last `keep` bytes of the output, and how many there were in all.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tail {
    keep: usize,
    pub bytes: VecDeque<u8>,
    pub total: u64,
}

impl Tail {
    pub fn new(keep: usize) -> Tail {
        Tail { keep, bytes: VecDeque::new(), total: 0 }
    }

    /// Appends `read`, keeping only the last `keep` bytes.
    pub fn push(&mut self, read: &[u8]) {
        self.total += read.len() as u64;
        let read = &read[read.len().saturating_sub(self.keep)..];
        self.bytes.extend(read);
        let over = self.bytes.len().saturating_sub(self.keep);
        self.bytes.drain(..over);
    }
}

/// Whether a stream's pipe had more to read.
enum Drawn {
    More,
    NotNow,
    Ended,
}

impl Output {
    /// The pipes for a command whose output's last `keep` bytes are kept:
    /// the keeper, and the write ends the command gets as its stdout and
    /// stderr. Takes `TAIL_FD`.
    pub fn new(keep: usize) -> io::Result<(Output, [OwnedFd; 2])> {
        // SAFETY: neli-run placed the memfd at this fd; nothing else owns it.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(TAIL_FD) });
        fcntl(&file, FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
        let stream = |fd: i32, name| -> io::Result<(Stream, OwnedFd)> {
            let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
            fcntl(&read, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
            Ok((Stream { pipe: Some(File::from(read)), out: Some(Out::open(fd)), name, backlog: Vec::new() }, write))
        };
        let (stdout, out_fd) = stream(1, "stdout")?;
        let (stderr, err_fd) = stream(2, "stderr")?;
        Ok((Output { streams: [stdout, stderr], tail: Tail::new(keep), file }, [out_fd, err_fd]))
    }

    /// What to wait for, each with its stream's index: a pipe to read, or
    /// (while a backlog waits) room to pass it on.
    pub fn interest(&self) -> Vec<(usize, PollFd<'_>)> {
        let mut fds = Vec::new();
        for (i, s) in self.streams.iter().enumerate() {
            match (&s.out, &s.pipe) {
                (Some(out), _) if !s.backlog.is_empty() => {
                    fds.push((i, PollFd::new(out.waitable(), PollFlags::POLLOUT)))
                }
                (_, Some(pipe)) => fds.push((i, PollFd::new(pipe.as_fd(), PollFlags::POLLIN))),
                _ => {}
            }
        }
        fds
    }

    /// Stream `i` can go on: passes its backlog on, or reads its pipe.
    pub fn ready(&mut self, i: usize) {
        let s = &mut self.streams[i];
        match s.backlog.is_empty() {
            false => s.pass_on(&[]),
            true => {
                s.read(&mut self.tail);
            }
        }
    }

    /// The run is over: reads what is left in the pipes (never waiting for
    /// their end), passes it on within `FLUSH`, and writes the tail for
    /// neli-run: the count of bytes in all (8 bytes, little-endian), then
    /// the tail.
    pub fn finish(mut self) {
        let until = Instant::now() + FLUSH;
        for s in &mut self.streams {
            while Instant::now() < until && matches!(s.read(&mut self.tail), Drawn::More) {}
        }
        for s in &mut self.streams {
            while !s.backlog.is_empty() && Instant::now() < until {
                let Some(out) = &s.out else { break };
                let mut fds = [PollFd::new(out.waitable(), PollFlags::POLLOUT)];
                let left = until.saturating_duration_since(Instant::now());
                let wait = PollTimeout::try_from(left.as_millis().min(1000) as i32).unwrap_or(PollTimeout::ZERO);
                let _ = poll(&mut fds, wait);
                s.pass_on(&[]);
            }
            if !s.backlog.is_empty() {
                stderr::line(format_args!(
                    "neli-run: shim: {} bytes of the command's {} not passed on: its reader took nothing for {FLUSH:?} (the run's record keeps its tail)",
                    s.backlog.len(),
                    s.name
                ));
            }
        }
        let (front, back) = self.tail.bytes.as_slices();
        let written = self
            .file
            .write_all(&self.tail.total.to_le_bytes())
            .and_then(|()| self.file.write_all(front))
            .and_then(|()| self.file.write_all(back));
        if let Err(err) = written {
            stderr::line(format_args!("neli-run: shim: cannot hand the command's output to neli-run: {err}"));
        }
    }
}

impl Stream {
    /// Reads what the pipe holds (up to `CHUNK`) into `tail`, and passes
    /// it on.
    fn read(&mut self, tail: &mut Tail) -> Drawn {
        let Some(pipe) = &mut self.pipe else { return Drawn::Ended };
        let mut buf = vec![0u8; CHUNK];
        match pipe.read(&mut buf) {
            Ok(0) => {
                self.pipe = None;
                Drawn::Ended
            }
            Ok(n) => {
                tail.push(&buf[..n]);
                self.pass_on(&buf[..n]);
                Drawn::More
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => Drawn::More,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Drawn::NotNow,
            Err(_) => {
                self.pipe = None;
                Drawn::Ended
            }
        }
    }

    /// Passes the backlog, then `more`, on as far as the reader takes them
    /// now; the rest waits in the backlog. A reader that is gone is not
    /// written to again.
    fn pass_on(&mut self, more: &[u8]) {
        let Some(out) = &self.out else { return };
        self.backlog.extend_from_slice(more);
        match out.write_some(&self.backlog) {
            Ok(n) => {
                self.backlog.drain(..n);
            }
            Err(err) => {
                self.out = None;
                self.backlog = Vec::new();
                stderr::line(format_args!(
                    "neli-run: shim: the command's {} cannot be passed on ({err}): from now on it is kept only in the run's record (--keep-output)",
                    self.name
                ));
            }
        }
    }
}

/// What the shim handed over: the tail of a run's output, and how many
/// bytes the command wrote in all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    pub bytes: Vec<u8>,
    pub total: u64,
}

impl Kept {
    /// Reads what the shim wrote to `file` (the memfd neli-run gave it),
    /// at most `keep` bytes of tail; None if it wrote nothing (it never
    /// started the command, or was killed).
    pub fn read(file: &File, keep: usize) -> Option<Kept> {
        use std::os::unix::fs::FileExt;
        let mut data = vec![0u8; 8 + keep];
        let mut got = 0;
        while got < data.len() {
            match file.read_at(&mut data[got..], got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if got < 8 {
            return None;
        }
        let total = u64::from_le_bytes(data[..8].try_into().ok()?);
        data.truncate(got);
        Some(Kept { bytes: data.split_off(8), total })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_bytes_and_one_never_written_reads_as_none() {
        let mut tail = Tail::new(4);
        tail.push(b"abc");
        tail.push(b"defgh");
        assert_eq!((tail.bytes.iter().copied().collect::<Vec<u8>>(), tail.total), (b"efgh".to_vec(), 8));
        let memfd = nix::sys::memfd::memfd_create(c"t", nix::sys::memfd::MFdFlags::MFD_CLOEXEC).unwrap();
        let mut file = File::from(memfd);
        // A shim killed before it wrote: no output, and no panic.
        assert_eq!(Kept::read(&file, 4), None);
        file.write_all(&8u64.to_le_bytes()).and_then(|()| file.write_all(b"efgh")).unwrap();
        assert_eq!(Kept::read(&file, 4), Some(Kept { bytes: b"efgh".to_vec(), total: 8 }));
    }
}
