//! Files neli-run writes for other processes to read (`--leader-file`,
//! `--warm`'s token file), written so that whoever can create files in
//! their directory cannot turn a write against another file: neli-run runs
//! as root under the shipped unit, and /tmp is shared.
//!
//! - A write goes to a temporary file of a name nobody can know beforehand,
//!   created with O_CREAT|O_EXCL|O_NOFOLLOW: a file or link already there
//!   is never opened, let alone truncated (another name is tried). It is
//!   then renamed over the file, which replaces a link there instead of
//!   following it, and a reader never sees half of one.
//! - A directory is tried once at start the same way (`probe_dir`): one
//!   neli-run cannot write to is refused then, not found out when the
//!   member first leads.
//!
//! - Who holds a leader file's path (`holder`): its format, read back.
//!
//! And files others write for neli-run to read (a crontab, a
//! `--kafka-config`) are read with a bound (`read_at_most`), so that a link
//! to /dev/zero or a runaway file cannot eat the host's memory.

mod leader_file;

pub use leader_file::{holder, Holder};

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A new file's mode (less the umask): readable by all, as a file written
/// for others to read must be.
const MODE: u32 = 0o644;

/// How many names to try: each is random, so a clash at all means that
/// someone takes them on purpose.
const TRIES: usize = 16;

/// A number no other process can predict (std's hasher keys come from the
/// operating system's random source): for names of new files.
pub fn random() -> u64 {
    RandomState::new().hash_one(std::process::id())
}

/// Creates `path` for writing, only if nothing is there (not even a
/// dangling link), without following a link at it.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).mode(MODE).open(path)
}

/// Creates a new file at the first of `TRIES` names from `name` at which
/// nothing is.
fn create_unique(mut name: impl FnMut() -> PathBuf) -> std::io::Result<(PathBuf, File)> {
    let mut clash = None;
    for _ in 0..TRIES {
        let path = name();
        match create_new(&path) {
            Ok(file) => return Ok((path, file)),
            Err(err) if err.kind() == ErrorKind::AlreadyExists => clash = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(clash.unwrap_or_else(|| ErrorKind::AlreadyExists.into()))
}

/// A temporary name beside `path`: `PATH.RANDOM.tmp`.
fn temporary_beside(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{:016x}.tmp", random()));
    PathBuf::from(name)
}

/// Replaces `path` with a file holding `text`: written to a new temporary
/// file beside it, then renamed over it.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    write_through(path, text, || temporary_beside(path))
}

/// `write_atomically` with the temporary names `name` gives.
fn write_through(path: &Path, text: &str, name: impl FnMut() -> PathBuf) -> std::io::Result<()> {
    test_hold(path);
    let (temporary, mut file) = create_unique(name)?;
    file.write_all(text.as_bytes()).and_then(|()| std::fs::rename(&temporary, path)).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

/// Whether every local user may create files in `dir` (mode o+w), and if
/// so whether it is sticky (as /tmp). There another user can take a path
/// before neli-run writes it (a file or link there makes neli-run refuse
/// to start), or leave a forged file at it while neli-run has none there;
/// without the sticky bit, also rename or remove neli-run's own file.
pub fn writable_by_all(dir: &Path) -> Option<bool> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir).ok()?.permissions().mode();
    (mode & 0o002 != 0).then_some(mode & 0o1000 != 0)
}

/// Whether neli-run can create files in `dir`: refuses /proc and /sys
/// (their errors would point the wrong way: "No such file or directory"),
/// then creates and removes a file there. Err says why not.
pub fn probe_dir(dir: &Path) -> Result<(), String> {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC, PROC_SUPER_MAGIC, SYSFS_MAGIC};
    if let Ok(fs) = statfs(dir) {
        let kind = fs.filesystem_type();
        if [PROC_SUPER_MAGIC, SYSFS_MAGIC, CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC].contains(&kind) {
            return Err("it is a kernel interface (/proc, /sys), not a place for files".into());
        }
    }
    let (probe, file) = create_unique(|| dir.join(format!(".neli-run-probe.{:016x}", random())))
        .map_err(|err| format!("cannot create a file there: {err}"))?;
    drop(file);
    std::fs::remove_file(&probe).map_err(|err| format!("cannot remove a file created there: {err}"))
}

/// All of `reader`, unless it holds more than `max` bytes: then an
/// InvalidData error saying so (never more than `max + 1` bytes are read).
pub fn read_at_most(reader: impl std::io::Read, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    reader.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            format!("it holds more than {max} bytes, the most read"),
        ));
    }
    Ok(bytes)
}

/// Debug builds only: while the file that `NELI_TEST_HOLD_WRITES` names
/// exists, each write waits, as on a hung file system, so that a test can
/// see what must not wait on one (a release build has no such switch).
#[cfg(debug_assertions)]
fn test_hold(path: &Path) {
    let Some(hold) = std::env::var_os("NELI_TEST_HOLD_WRITES") else { return };
    let hold = Path::new(&hold);
    if hold.exists() {
        tracing::warn!(path = %path.display(), "TEST BUILD: holding a write while NELI_TEST_HOLD_WRITES exists");
        while hold.exists() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[cfg(not(debug_assertions))]
fn test_hold(_: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("neli-files-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_write_never_follows_a_link_at_its_temporary_name() {
        let dir = scratch("link");
        let (victim, path) = (dir.join("victim"), dir.join("leader"));
        std::fs::write(&victim, "IMPORTANT DATA").unwrap();
        // The first name the writer tries is taken by a link to the victim
        // (and a dangling one): it tries another.
        let (planted, dangling) = (dir.join("planted.tmp"), dir.join("dangling.tmp"));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        std::os::unix::fs::symlink(dir.join("nothing"), &dangling).unwrap();
        let mut names = [planted.clone(), dangling.clone(), dir.join("fresh.tmp")].into_iter();
        write_through(&path, "token=7\n", || names.next().unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "IMPORTANT DATA");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "token=7\n");
        assert!(!dir.join("nothing").exists(), "no file created through the dangling link");
        assert!(!dir.join("fresh.tmp").exists(), "renamed");
        // Only links at every name: it gives up, and writes nothing.
        let err = write_through(&path, "token=8\n", || planted.clone()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "IMPORTANT DATA");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "token=7\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_at_the_file_itself_is_replaced_not_followed() {
        let dir = scratch("rename");
        let (victim, path) = (dir.join("victim"), dir.join("leader"));
        std::fs::write(&victim, "IMPORTANT DATA").unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_atomically(&path, "token=7\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "IMPORTANT DATA");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_are_not_predictable_from_the_pid() {
        assert_ne!(random(), random());
        assert_ne!(temporary_beside(Path::new("/run/x")), temporary_beside(Path::new("/run/x")));
    }

    #[test]
    fn a_directory_that_holds_no_files_of_ours_is_refused() {
        assert!(probe_dir(Path::new("/proc")).unwrap_err().contains("kernel interface"));
        assert!(probe_dir(Path::new("/sys")).unwrap_err().contains("kernel interface"));
        let dir = scratch("probe");
        assert_eq!(probe_dir(&dir), Ok(()));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the probe is removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
