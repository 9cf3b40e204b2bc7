//! `--crontab`: the file read again on SIGHUP, and when it changes (its
//! size, times or inode, looked at every `LOOK`: an editor's rename counts,
//! and so does a `chmod` or `chown` that makes a refused file trusted).
//! Reading and placing the new jobs takes Kafka round trips, so it runs
//! beside the loop; the loop takes the result in (`Shell::reloaded`). A
//! file refused (it cannot be read, holds no job, another user could write
//! it, it is not a regular file or too big: `crontab::read`) changes
//! nothing: said once, however often it is read again, and the jobs go on. Placing its jobs can fail on Kafka's side (a job with no
//! partition that could not be added, an ACL): said, the jobs go on, and
//! the file is read again after a wait that doubles, so that the fix (a
//! grant, a `kafka-topics.sh --alter`) is taken without a restart.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{error, info};

use crate::config::{read_crontab, Config};
use crate::crontab::Job;
use crate::leader::Partition;

/// How often the file is looked at.
const LOOK: Duration = Duration::from_secs(2);

/// The longest wait before a placement that failed is tried again.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// What tells one version of the file from another: size, modification
/// and change times (ns), inode.
type Stamp = Option<(u64, i128, i128, u64)>;

/// The crontab's file, watched.
pub(super) struct Reload {
    /// The member's configuration as the jobs were last seated.
    pub(super) cfg: Config,
    stamp: Stamp,
    look: tokio::time::Interval,
    reading: Option<JoinHandle<(Stamp, Outcome)>>,
    /// Asked again while a read was under way: read once more after it.
    again: bool,
    /// After placements that failed: how many in a row, and when to try
    /// again.
    failed: Option<(u32, tokio::time::Instant)>,
    /// Why the file was last refused, said once: a SIGHUP a second asks
    /// again and need not say it again.
    refused: Option<String>,
}

/// What a read of the file came to.
enum Outcome {
    /// Read and placed.
    Read(Read),
    /// Nothing to take in: the file was refused, and why.
    Refused(String),
    /// Placing its jobs failed on Kafka's side: tried again later.
    Again,
}

/// A crontab read again, its jobs placed.
pub(super) struct Read {
    jobs: Vec<Job>,
    /// The file's digest (`crontab::digest`).
    digest: String,
    placed: BTreeMap<String, Partition>,
    /// The topic's partitions: more than we started with when a new job
    /// took a partition added for it.
    partitions: i32,
}

impl Reload {
    /// With `--crontab`: the file as the member started with it.
    pub(super) fn new(cfg: &Config) -> Option<Reload> {
        let file = &cfg.crontab.as_ref()?.file;
        let mut look = tokio::time::interval(LOOK);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stamp = stamp(file);
        Some(Reload { cfg: cfg.clone(), stamp, look, reading: None, again: false, failed: None, refused: None })
    }

    /// Reads the file again (`why` is said), unless a read is under way.
    pub(super) fn ask(&mut self, why: &str) {
        if self.reading.is_some() {
            self.again = true;
            return;
        }
        let Some(cron) = self.cfg.crontab.as_ref() else { return };
        info!(file = %cron.file.display(), "{why}: reading the crontab again");
        let (file, zone) = (cron.file.clone(), cron.zone);
        let settings = crate::kafka::Settings::of(&self.cfg);
        self.reading = Some(tokio::task::spawn_blocking(move || {
            // Before reading: a change made meanwhile is read next time.
            let stamp = stamp(&file);
            let (jobs, digest) = match read_crontab(&file, zone) {
                Ok(read) => read,
                Err(e) => return (stamp, Outcome::Refused(e)),
            };
            let names: Vec<String> = jobs.iter().map(|job| job.name.clone()).collect();
            match crate::kafka::placement::place(&settings, &names) {
                Ok((placed, partitions)) => (stamp, Outcome::Read(Read { jobs, digest, placed, partitions })),
                Err(e) => {
                    error!("placing the crontab's jobs: {e}; the jobs go on as they were, and placing is tried again");
                    (stamp, Outcome::Again)
                }
            }
        }));
    }

    /// The next crontab read again, once the file changed or was asked
    /// for: the configuration with its jobs seated anew. Cancel-safe.
    pub(super) async fn next(reload: &mut Option<Reload>) -> Config {
        let Some(r) = reload.as_mut() else { return std::future::pending().await };
        loop {
            match r.reading.as_mut() {
                Some(reading) => {
                    let (stamp, outcome) =
                        reading.await.unwrap_or_else(|e| (r.stamp, Outcome::Refused(format!("reading it: {e}"))));
                    (r.stamp, r.reading) = (stamp, None);
                    r.failed = match outcome {
                        Outcome::Again => {
                            let failed = r.failed.map_or(0, |(n, _)| n);
                            let wait = LOOK.saturating_mul(1 << failed.min(5)).min(RETRY_MAX);
                            Some((failed + 1, tokio::time::Instant::now() + wait))
                        }
                        _ => None,
                    };
                    match &outcome {
                        Outcome::Refused(why) if r.refused.as_ref() != Some(why) => {
                            error!("{why}; the jobs go on as they were");
                            r.refused = Some(why.clone());
                        }
                        Outcome::Refused(_) => info!("the crontab is still refused, as said; the jobs go on"),
                        Outcome::Read(_) => r.refused = None,
                        Outcome::Again => {}
                    }
                    if std::mem::take(&mut r.again) {
                        r.ask("asked again meanwhile");
                    }
                    if let Outcome::Read(read) = outcome {
                        r.cfg.reload((read.jobs, read.digest), &read.placed, read.partitions);
                        return r.cfg.clone();
                    }
                }
                None => {
                    r.look.tick().await;
                    let file = r.cfg.crontab.as_ref().map(|c| c.file.clone()).unwrap_or_default();
                    if stamp(&file) != r.stamp {
                        r.ask("the file changed");
                    } else if r.failed.is_some_and(|(_, at)| tokio::time::Instant::now() >= at) {
                        r.ask("placing the jobs failed before");
                    }
                }
            }
        }
    }
}

/// The file's size, times, inode and device, if it can be read.
fn stamp(file: &Path) -> Stamp {
    let m = std::fs::metadata(file).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some((m.len(), ns(m.mtime(), m.mtime_nsec()), ns(m.ctime(), m.ctime_nsec()), m.ino() ^ m.dev()))
}
