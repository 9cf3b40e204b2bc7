//! The overlap detector: every child runs under `flock -n` on one shared
//! file (proof/fixtures/guarded.sh), and every process it forks inherits
//! the lock. A start while the lock is held is an overlap; a lock still held
//! once every neli-run has exited is an orphan. The kernel keeps the score,
//! not neli-run.

use std::fs;
use std::path::{Path, PathBuf};

/// The wrapper script; `Detector::new` writes it into the work directory.
pub const GUARDED: &str = include_str!("../fixtures/guarded.sh");

/// A work directory holding the lock, the start log and the overlap log.
pub struct Detector {
    pub dir: PathBuf,
}

impl Detector {
    /// Creates `dir` with an executable `guarded.sh` in it, or takes the
    /// one there: the script is written beside and renamed into place, so
    /// that a child executing the one there keeps it (writing into a file
    /// being executed fails with ETXTBSY, seen in CI when a crontab test
    /// made its jobs' detectors again under their runs).
    pub fn new(dir: PathBuf) -> std::io::Result<Detector> {
        use std::os::unix::fs::PermissionsExt;
        fs::create_dir_all(&dir)?;
        static FRESH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = FRESH.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let fresh = dir.join(format!(".guarded.sh.{}.{n}", std::process::id()));
        fs::write(&fresh, GUARDED)?;
        fs::set_permissions(&fresh, fs::Permissions::from_mode(0o755))?;
        fs::rename(&fresh, dir.join("guarded.sh"))?;
        Ok(Detector { dir })
    }

    /// The command prefix that runs a child under the detector.
    pub fn wrap(&self) -> Vec<String> {
        vec![self.dir.join("guarded.sh").display().to_string(), self.dir.display().to_string()]
    }

    /// Every child start so far: (member name, fencing token), in order.
    pub fn starts(&self) -> Vec<(String, i64)> {
        read_lines(&self.dir.join("starts"))
            .iter()
            .filter_map(|l| {
                let (n, t) = l.split_once(' ')?;
                Some((n.to_string(), t.parse().ok()?))
            })
            .collect()
    }

    /// Every start refused because another child held the lock.
    pub fn overlaps(&self) -> Vec<String> {
        read_lines(&self.dir.join("overlaps"))
    }

    /// Whether some child (or a process it forked) holds the lock now.
    /// Read from /proc/locks, never by taking the lock: a probe that held it
    /// for a moment would make a child starting then look like an overlap.
    pub fn lock_held(&self) -> bool {
        self.lock_id().is_some_and(|id| locks_held(&[Some(id)])[0])
    }

    /// The lock file as /proc/locks names it (MAJ:MIN:INODE, the device
    /// in hex); None until a child has created it.
    pub fn lock_id(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(self.dir.join("lock")).ok()?;
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        Some(format!("{major:02x}:{minor:02x}:{}", meta.ino()))
    }
}

/// Which of the locks `ids` (see `Detector::lock_id`; None: never created,
/// so free) some process holds, from one read of /proc/locks:
/// "1: FLOCK  ADVISORY  WRITE 4242 08:01:131090 0 EOF".
pub fn locks_held(ids: &[Option<String>]) -> Vec<bool> {
    let locks = fs::read_to_string("/proc/locks").unwrap_or_default();
    let held: Vec<&str> =
        locks.lines().filter(|l| l.contains(" FLOCK ")).filter_map(|l| l.split_whitespace().nth(5)).collect();
    ids.iter().map(|id| id.as_deref().is_some_and(|id| held.contains(&id))).collect()
}

/// The lines of a file; none if it does not exist.
pub fn read_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}
