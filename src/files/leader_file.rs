//! A leader file as neli-run writes it (`--leader-file`: `key=value`
//! lines with its fencing token and pid), read back to tell whose it is:
//! the member's writer (shell/leader_file.rs) replaces or removes only its
//! own or one whose writer is gone, and a start refuses a path that holds
//! anything else (config).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::errno::Errno;
use nix::unistd::Pid;

/// Who holds a leader file's path, judged by what is there.
#[derive(Debug, PartialEq)]
pub enum Holder {
    Nobody,
    /// A leader file that names this process.
    Us,
    /// A leader file whose writer is gone (killed with -9): free to take.
    Gone {
        pid: i32,
    },
    /// The leader file of another neli-run, which runs.
    Other {
        pid: i32,
        group: String,
    },
    /// Anything else, and why it is not a leader file neli-run wrote.
    Foreign(String),
}

/// The most a leader file holds (its name and group are bounded by Kafka's).
const MAX_LEN: u64 = 64 * 1024;

/// Who holds `path`: nobody, a neli-run (this one, one that is gone, one
/// that runs), or something neli-run must not touch.
pub fn holder(path: &Path) -> Holder {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Holder::Nobody,
        Err(err) => return Holder::Foreign(format!("cannot be read ({err})")),
    };
    if meta.file_type().is_symlink() {
        return Holder::Foreign("is a symbolic link".into());
    }
    if !meta.is_file() {
        return Holder::Foreign("is not a regular file".into());
    }
    let mut text = String::new();
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .and_then(|file| file.take(MAX_LEN + 1).read_to_string(&mut text));
    match read {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Holder::Nobody,
        Err(err) => return Holder::Foreign(format!("is not a leader file ({err})")),
        Ok(n) if n as u64 > MAX_LEN => return Holder::Foreign("is not a leader file (too long)".into()),
        Ok(_) => {}
    }
    let Some((pid, group)) = parse(&text) else {
        return Holder::Foreign("is not a leader file (no token= and pid= lines)".into());
    };
    if pid == std::process::id() as i32 {
        Holder::Us
    } else if runs_as_neli_run(pid) {
        Holder::Other { pid, group: group.to_string() }
    } else {
        Holder::Gone { pid }
    }
}

/// The `pid=` and `group=` of a leader file as neli-run writes it: lines of
/// `key=value` with a numeric token and pid; None if it is not one.
fn parse(text: &str) -> Option<(i32, &str)> {
    let (mut token, mut pid, mut group) = (None, None, "");
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (key, value) = line.split_once('=')?;
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return None;
        }
        match key {
            "token" => token = Some(value.parse::<i64>().ok()?),
            "pid" => pid = Some(value.parse::<i32>().ok().filter(|&p| p > 0)?),
            "group" => group = value,
            _ => {}
        }
    }
    token.and(pid).map(|pid| (pid, group))
}

/// Whether `pid` is a process that runs this program (a pid reused by
/// another program is not): if it cannot be told, it is taken to be one.
fn runs_as_neli_run(pid: i32) -> bool {
    if nix::sys::signal::kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH) {
        return false;
    }
    let comm = |pid: &str| std::fs::read(format!("/proc/{pid}/comm"));
    match (comm(&pid.to_string()), comm("self")) {
        (Ok(theirs), Ok(ours)) => theirs == ours,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_leader_file_neli_run_wrote_is_its_to_replace() {
        let dir = std::env::temp_dir().join(format!("neli-leader-holder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("leader");
        let with = |text: &str| {
            let _ = std::fs::remove_file(&path);
            std::fs::write(&path, text).unwrap();
            holder(&path)
        };
        let _ = std::fs::remove_file(&path);
        assert_eq!(holder(&path), Holder::Nobody);
        let ours = std::process::id();
        assert_eq!(with(&format!("token=5\nname=a\ngroup=g\npid={ours}\nsince=t\n")), Holder::Us);
        assert_eq!(with("token=5\nname=a\ngroup=g\npid=999999999\n"), Holder::Gone { pid: 999999999 });
        // A live process that is not this program: its pid was reused.
        assert_eq!(with("token=5\npid=1\n"), Holder::Gone { pid: 1 });
        for text in ["PRE-EXISTING USER FILE\n", "", "pid=1\n", "token=5\n", "token=x\npid=1\n", "Token=5\npid=1\n"] {
            assert!(matches!(with(text), Holder::Foreign(_)), "{text:?}");
        }
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &path).unwrap();
        assert_eq!(holder(&path), Holder::Foreign("is a symbolic link".into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
