//! `--leader-file PATH`: a file that exists while this member leads, for
//! whatever on the host asks "do we lead here?" (a cron line, a load
//! balancer's check script, a prompt). Written when it leads (its fencing
//! token, name, group and pid, as `key=value` lines), removed when it stops
//! leading and when neli-run exits; each write replaces the file at once
//! (`files::write_atomically`: a new temporary file renamed over it,
//! never following a link), so a reader never sees half of one.
//!
//! Advisory: it is written once the member leads (its command started, or
//! due under a schedule) and removed once it stops leading, as its command
//! is stopped or killed (the core acts first, the shell reports after), and a neli-run
//! killed with -9 leaves it behind (the next start removes it; its `pid=`
//! line names a process that is gone). The fencing token stays the guard.
//!
//! Whose file it is (`files::holder`): neli-run replaces or removes only a
//! leader file it wrote, or one whose writer is gone. Anything else at the
//! path (a typo naming another file, a link, another running neli-run's
//! leader file) is refused at start, and left alone if it appears later:
//! the first neli-run to hold a path keeps it.
//!
//! The file system may be slow or full: every write and removal runs on a
//! thread of its own, in order, and a failure is logged, never raised. The
//! loop only queues them.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::files::{self, holder, Holder};

/// What the writer thread does next.
enum Op {
    Write(String),
    Remove,
}

/// The leader file of this member, as its writer thread keeps it.
pub(super) struct LeaderFile {
    ops: Sender<Op>,
    /// Told once the writer is done (its queue closed and emptied).
    done: oneshot::Receiver<()>,
    /// The token the file says, if it is written.
    shown: Option<i64>,
}

impl LeaderFile {
    /// Starts the writer for `path`, which first removes a file a previous
    /// run left there (it was killed while leading).
    pub(super) fn start(path: PathBuf) -> LeaderFile {
        let (ops, queued) = channel();
        let (done_tx, done) = oneshot::channel();
        std::thread::spawn(move || {
            for op in queued {
                let done = match (holder(&path), op) {
                    (Holder::Other { pid, .. }, _) => {
                        Err(format!("it is the leader file of another neli-run that runs (pid {pid}); left alone"))
                    }
                    (Holder::Foreign(why), _) => Err(format!("it {why}; left alone (neli-run replaces only its own)")),
                    (_, Op::Write(text)) => files::write_atomically(&path, &text).map_err(|e| e.to_string()),
                    (Holder::Nobody, Op::Remove) => Ok(()),
                    (held, Op::Remove) => {
                        if let Holder::Gone { pid } = held {
                            info!(path = %path.display(), pid, "removing the leader file of a neli-run that is gone");
                        }
                        std::fs::remove_file(&path).or_else(|e| match e.kind() {
                            std::io::ErrorKind::NotFound => Ok(()),
                            _ => Err(e.to_string()),
                        })
                    }
                };
                if let Err(err) = done {
                    warn!(path = %path.display(), %err, "cannot update the leader file");
                }
            }
            let _ = done_tx.send(());
        });
        let _ = ops.send(Op::Remove);
        LeaderFile { ops, done, shown: None }
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

    /// Removes the files (one per seat) and waits up to `wait` in all for
    /// their writers to be done (a file system that hangs must not keep
    /// neli-run from exiting); the wait is the runtime's, no worker thread
    /// is held.
    pub(super) async fn close_all(files: impl IntoIterator<Item = LeaderFile>, wait: Duration) {
        let mut done = Vec::new();
        for file in files {
            let _ = file.ops.send(Op::Remove);
            done.push(file.done);
        }
        let all = async {
            for file in done {
                let _ = file.await;
            }
        };
        if tokio::time::timeout(wait, all).await.is_err() {
            warn!(?wait, "the leader file was not removed in time");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_follows_what_is_shown_and_is_gone_once_closed() {
        let dir = std::env::temp_dir().join(format!("neli-leader-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("leader");
        std::fs::write(&path, "token=3\nname=a\ngroup=g\npid=999999999\nsince=x\n").unwrap();
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
        let text = |t: i64| format!("token={t}\npid={}\n", std::process::id());
        file.show(Some(7), text);
        settle(Some(&text(7)));
        file.show(Some(7), |_| unreachable!("nothing changed"));
        file.show(Some(9), text);
        settle(Some(&text(9)));
        file.show(None, |_| unreachable!());
        settle(None);
        file.show(Some(11), text);
        settle(Some(&text(11)));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(LeaderFile::close_all([file], Duration::from_secs(10)));
        assert_eq!(read(), None);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
