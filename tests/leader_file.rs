//! --leader-file against careless and hostile neighbours: a link planted
//! where neli-run writes, a path that names someone else's file, another
//! neli-run naming the same path, a directory it cannot write. neli-run
//! (root under the shipped unit) must never write through a link, nor
//! replace or remove a file it did not write; what it cannot do is refused
//! at start, with the path and the fix. (That the file follows leadership:
//! cluster.rs.)

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::sys::signal::Signal;

use crate::util::{bin, run, skip, wait_until, Group, LONG};

/// A leader file as neli-run writes it, naming `pid`.
fn leader_file(pid: i32) -> String {
    format!("token=12\nname=old\ngroup=billing\npid={pid}\nsince=2026-11-25T07:30:00.123Z\n")
}

/// A pid that names no process (above the kernel's pid_max).
const GONE: i32 = 999_999_999;

/// `neli-run --leader-file PATH` against a broker nobody listens on: the
/// status and what it says (a refusal comes before any connection).
fn start_with(path: &Path) -> (i32, String) {
    run(&[
        "-g",
        "g",
        "-b",
        "127.0.0.1:1",
        "--acquire-timeout",
        "1s",
        "--leader-file",
        path.to_str().unwrap(),
        "--",
        "true",
    ])
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[test]
fn a_link_planted_where_the_leader_file_is_written_is_never_followed() {
    let g = Group::new("leader-file-link");
    let (victim, path) = (g.dir.path().join("victim"), g.dir.path().join("lead"));
    std::fs::write(&victim, "IMPORTANT DATA").unwrap();
    // Left by a neli-run killed with -9 while leading: b removes it.
    std::fs::write(&path, leader_file(GONE)).unwrap();
    let mut a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(LONG, "a leads", || g.lock_held());
    let b = g.member("b", &["--leader-file", path.to_str().unwrap()], &["sleep", "1000"]);
    wait_until(LONG, "the leader file b found, whose writer is gone, is removed", || read(&path).is_none());
    assert!(b.log().contains("removing the leader file of a neli-run that is gone"), "{}", b.log());
    // The temporary name neli-run used to write through (PATH.PID.tmp),
    // known to anyone from `ps`: a link there to the victim.
    let planted = g.dir.path().join(format!("lead.{}.tmp", b.pid()));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    wait_until(g.broker.timing.takeover(), "b's leader file names its token", || {
        read(&path).is_some_and(|text| text.starts_with("token=") && text.contains(&format!("pid={}", b.pid())))
    });
    assert_eq!(read(&victim).as_deref(), Some("IMPORTANT DATA"), "written through the link");
    assert!(std::fs::symlink_metadata(&path).unwrap().is_file(), "a file of its own");
    assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink(), "the link is left as it was");
    g.assert_no_overlap();
}

#[test]
fn a_path_that_is_not_a_free_leader_file_is_refused_at_start_and_left_as_it_was() {
    let dir = tempfile_dir("refused");
    let user = dir.join("billing.conf");
    std::fs::write(&user, "PRE-EXISTING USER FILE\n").unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&user, &link).unwrap();
    let dangling = dir.join("dangling");
    std::os::unix::fs::symlink(dir.join("nothing"), &dangling).unwrap();
    let empty = dir.join("empty");
    std::fs::write(&empty, "").unwrap();
    for (path, why) in [
        (&user, "is not a leader file"),
        (&empty, "is not a leader file"),
        (&link, "is a symbolic link"),
        (&dangling, "is a symbolic link"),
    ] {
        let before = std::fs::symlink_metadata(path).unwrap();
        let (code, out) = start_with(path);
        assert_eq!(code, 2, "{}: {out}", path.display());
        let said = format!("--leader-file {}: it {why}", path.display());
        assert!(out.contains(&said) && out.contains("name another path"), "{}: {out}", path.display());
        let after = std::fs::symlink_metadata(path).unwrap();
        assert_eq!((before.ino(), before.len()), (after.ino(), after.len()), "{} untouched", path.display());
    }
    assert_eq!(read(&user).as_deref(), Some("PRE-EXISTING USER FILE\n"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_instances_naming_one_path_the_first_keeps_it_and_each_removes_only_its_own() {
    let g = Group::new("leader-file-shared");
    let path = g.dir.path().join("lead");
    let mut a = g.member("a", &["--leader-file", path.to_str().unwrap()], &["sleep", "1000"]);
    let mine = format!("pid={}", a.pid());
    wait_until(LONG, "a writes its leader file", || read(&path).is_some_and(|t| t.contains(&mine)));
    // Another neli-run (another group, say) naming the same path: refused,
    // and a's file stays.
    let (code, out) = start_with(&path);
    assert_eq!(code, 2, "{out}");
    let said = format!("it is the leader file of another neli-run that runs (pid {}, group {})", a.pid(), g.name);
    assert!(out.contains(&said) && out.contains("give each member a path of its own"), "{out}");
    assert!(read(&path).is_some_and(|t| t.contains(&mine)), "a's file left as it was");
    // Replaced by another neli-run's while a leads (b's, as if b wrote
    // it): a leaves it at exit.
    let b = g.member("b", &[], &["sleep", "1000"]);
    let theirs = leader_file(b.pid().as_raw());
    std::fs::write(g.dir.path().join("theirs"), &theirs).unwrap();
    std::fs::rename(g.dir.path().join("theirs"), &path).unwrap();
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    assert_eq!(read(&path).as_deref(), Some(theirs.as_str()), "not a's to remove:\n{}", a.log());
    assert!(a.log().contains("left alone"), "{}", a.log());
}

#[test]
fn a_directory_neli_run_cannot_write_is_refused_at_start_with_the_fix() {
    for path in ["/proc/neli-leader", "/sys/neli-leader"] {
        let (code, out) = start_with(Path::new(path));
        assert_eq!(code, 2, "{path}: {out}");
        assert!(out.contains(&format!("--leader-file {path}:")) && out.contains("kernel interface"), "{path}: {out}");
    }
    // A directory of root's, 0755: the user nobody cannot write there.
    let dir = tempfile_dir("read-only");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = dir.join("leader");
    let as_nobody = ["--reuid=65534", "--regid=65534", "--clear-groups", bin()];
    let args = ["-g", "g", "-b", "127.0.0.1:1", "--leader-file", path.to_str().unwrap(), "--", "true"];
    let out = if nix::unistd::geteuid().is_root() {
        std::process::Command::new("setpriv").args(as_nobody).args(args).output()
    } else {
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
        std::process::Command::new(bin()).args(args).output()
    };
    let Ok(out) = out else {
        skip("setpriv (util-linux) is not installed");
        return;
    };
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!("--leader-file {}: directory {} cannot hold it", path.display(), dir.display()))
            && text.contains("Permission denied")
            && text.contains("RuntimeDirectory="),
        "{text}"
    );
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh directory of this test's in the temporary directory, which the
/// user nobody can reach (a test group's directory is private).
/// A directory every local user can write to (audit E12: another user can
/// keep the member from starting, or plant a leader file that names it)
/// is warned about at start, sticky (/tmp) or not, with the fix; a
/// directory of neli-run's own is not.
#[test]
fn a_leader_file_in_a_directory_every_user_can_write_is_warned_about() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile_dir("shared");
    for (mode, said) in [(0o1777, Some(false)), (0o777, Some(true)), (0o755, None)] {
        let sub = dir.join(format!("{mode:o}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(mode)).unwrap();
        let (code, out) = start_with(&sub.join("lead"));
        let warned = out.contains("is writable by every user") && out.contains("RuntimeDirectory=neli");
        assert_eq!(warned, said.is_some(), "mode {mode:o}: {out}");
        assert_eq!(out.contains("as it is not sticky"), said == Some(true), "mode {mode:o}: {out}");
        assert_eq!(code, 75, "warned, not refused (2): it goes on to wait for a leadership (--acquire-timeout)\n{out}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("neli-leader-file-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
