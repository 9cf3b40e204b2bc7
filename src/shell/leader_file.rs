//! `--leader-file PATH`: a file that exists while this member leads, for
//! whatever on the host asks "do we lead here?" (a cron line, a load
//! balancer's check script, a prompt). Written when it leads (its fencing
//! token, name, group and pid, as `key=value` lines), removed when it stops
//! leading and when neli-run exits; each write replaces the file at once
//! (a temporary file renamed over it), so a reader never sees half of one.
//!
//! Advisory: it is written once the member leads (its command started, or
//! due under a schedule) and removed once it stops leading, as its command
//! is stopped or killed (the core acts first, the shell reports after), and a neli-run
//! killed with -9 leaves it behind (the next start removes it; its `pid=`
//! line names a process that is gone). The fencing token stays the guard.
//!
//! The file system may be slow or full: every write and removal runs on a
//! thread of its own, in order, and a failure is logged, never raised. The
//! loop only queues them.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::warn;

/// What the writer thread does next.
enum Op {
    Write(String),
    Remove,
}

/// The leader file of this member, as its writer thread keeps it.
pub(super) struct LeaderFile {
    ops: Sender<Op>,
    writer: JoinHandle<()>,
    /// The token the file says, if it is written.
    shown: Option<i64>,
}

impl LeaderFile {
    /// Starts the writer for `path`, which first removes a file a previous
    /// run left there (it was killed while leading).
    pub(super) fn start(path: PathBuf) -> LeaderFile {
        let (ops, queued) = channel();
        let writer = std::thread::spawn(move || {
            for op in queued {
                let done = match op {
                    Op::Write(text) => write_atomically(&path, &text),
                    Op::Remove => std::fs::remove_file(&path).or_else(|e| match e.kind() {
                        std::io::ErrorKind::NotFound => Ok(()),
                        _ => Err(e),
                    }),
                };
                if let Err(err) = done {
                    warn!(path = %path.display(), %err, "cannot update the leader file");
                }
            }
        });
        let _ = ops.send(Op::Remove);
        LeaderFile { ops, writer, shown: None }
    }

    /// Shows `token` (we lead under it) or None (we do not): queues a write
    /// or a removal if that changes what the file says. `text` gives the
    /// file's contents for a token.
    pub(super) fn show(&mut self, token: Option<i64>, text: impl FnOnce(i64) -> String) {
        if token == self.shown {
            return;
        }
        self.shown = token;
        let _ = self.ops.send(match token {
            Some(token) => Op::Write(text(token)),
            None => Op::Remove,
        });
    }

    /// Removes the file and waits up to `wait` for the writer to be done
    /// (a file system that hangs must not keep neli-run from exiting).
    pub(super) fn close(self, wait: Duration) {
        let _ = self.ops.send(Op::Remove);
        drop(self.ops);
        let until = std::time::Instant::now() + wait;
        while !self.writer.is_finished() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !self.writer.is_finished() {
            warn!(?wait, "the leader file was not removed in time");
        }
    }
}

/// Writes `text` to a temporary file beside `path`, then renames it over
/// `path`.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, text).and_then(|()| std::fs::rename(&temporary, path)).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_follows_what_is_shown_and_is_gone_once_closed() {
        let dir = std::env::temp_dir().join(format!("neli-leader-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("leader");
        std::fs::write(&path, "left by a run killed while leading").unwrap();
        let read = || std::fs::read_to_string(&path).ok();
        let settle = |want: Option<&str>| {
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while read().as_deref() != want && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(read().as_deref(), want);
        };
        let mut file = LeaderFile::start(path.clone());
        settle(None);
        file.show(Some(7), |t| format!("token={t}\n"));
        settle(Some("token=7\n"));
        file.show(Some(7), |_| unreachable!("nothing changed"));
        file.show(Some(9), |t| format!("token={t}\n"));
        settle(Some("token=9\n"));
        file.show(None, |_| unreachable!());
        settle(None);
        file.show(Some(11), |t| format!("token={t}\n"));
        settle(Some("token=11\n"));
        file.close(Duration::from_secs(10));
        assert_eq!(read(), None);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
