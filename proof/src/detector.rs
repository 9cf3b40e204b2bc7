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
                let mut words = l.split(' ');
                Some((words.next()?.to_string(), words.next()?.parse().ok()?))
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
/// so free) some process holds, from /proc/locks:
/// "1: FLOCK  ADVISORY  WRITE 4242 08:01:131090 0 EOF".
///
/// The kernel lists the locks a page at a time, and each read resumes at a
/// line number: a lock released meanwhile earlier in the list shifts the
/// rest, and the line after the cut is skipped. `fs::read_to_string` reads
/// in small pieces (its first read is 32 bytes), so a lock held throughout
/// looked free about once in 400 reads while other tests took and released
/// theirs (a test went on as if the lease had killed a command that still
/// ran). So the file is read in large reads, and a lock missing from
/// one reading is looked for in a second: held if either shows it (a
/// reading only shows locks held while it was taken).
pub fn locks_held(ids: &[Option<String>]) -> Vec<bool> {
    let mut held = vec![false; ids.len()];
    for _ in 0..2 {
        let locks = proc_locks();
        let taken: Vec<&str> =
            locks.lines().filter(|l| l.contains(" FLOCK ")).filter_map(|l| l.split_whitespace().nth(5)).collect();
        for (held, id) in held.iter_mut().zip(ids) {
            *held = *held || id.as_deref().is_some_and(|id| taken.contains(&id));
        }
        if held.iter().zip(ids).all(|(held, id)| *held || id.is_none()) {
            break;
        }
    }
    held
}

/// /proc/locks in large reads (see `locks_held`): with room for 64 KiB,
/// std skips its 32-byte first read and reads 8 KiB or more at a time.
fn proc_locks() -> String {
    use std::io::Read;
    let mut text = String::with_capacity(64 * 1024);
    let _ = fs::File::open("/proc/locks").and_then(|mut file| file.read_to_string(&mut text));
    text
}

/// The lines of a file; none if it does not exist.
pub fn read_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}
