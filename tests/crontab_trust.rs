//! A crontab is trusted as cron trusts /etc/cron.d, and read with bounds:
//! the real binary, as a member (at start and on reload) and as `cron
//! check`, refuses a file another user could write, what is not a regular
//! file and a file over 1 MiB (audit 2026-11-29 E1, E4, E5).

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::crontab::Fleet;
use crate::util::{bin, tempdir};

/// Runs neli-run with `args`, killed if it has not ended within `within`
/// (what must not hang, and would: a FIFO): its status (-1 if killed) and
/// its stdout and stderr.
pub(crate) fn run_within(args: &[&str], within: Duration) -> (i32, String, String) {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if start.elapsed() > within {
            child.kill().unwrap();
            child.wait().unwrap();
            break -1;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = |pipe: Option<&mut dyn std::io::Read>| {
        let mut s = String::new();
        pipe.map(|p| p.read_to_string(&mut s));
        s
    };
    let out = text(child.stdout.as_mut().map(|p| p as &mut dyn std::io::Read));
    let err = text(child.stderr.as_mut().map(|p| p as &mut dyn std::io::Read));
    (status, out, err)
}

/// `neli-run cron check ARGS`, within 10 s.
pub(crate) fn check(args: &[&str]) -> (i32, String, String) {
    run_within(&[&["cron", "check"], args].concat(), Duration::from_secs(10))
}

/// A member of no reachable broker started with `--crontab file`: what it
/// refuses it refuses before Kafka, so within 10 s.
pub(crate) fn member(file: &str) -> (i32, String) {
    let (code, out, err) =
        run_within(&["-b", "127.0.0.1:9", "-g", "nobody", "--crontab", file], Duration::from_secs(10));
    (code, out + &err)
}

pub(crate) const JOB: &str = "@every 1s  tick  true\n";

#[test]
fn cron_check_and_a_member_refuse_a_crontab_another_user_could_write_naming_the_chmod_or_chown() {
    let dir = tempdir::Dir::new("crontab-trust");
    let file = dir.path().join("fleet.crontab");
    std::fs::write(&file, JOB).unwrap();
    let path = file.to_str().unwrap();
    let chmod = |mode: u32| std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
    for mode in [0o664, 0o646, 0o666] {
        chmod(mode);
        let (code, _, err) = check(&[path]);
        assert_eq!(code, 2, "mode {mode:o}: {err}");
        assert!(err.contains(&format!("its mode is {mode:04o}, writable by group or others")), "{err}");
        assert!(err.contains(&format!("chmod go-w {path}")), "{err}");
        let (code, out) = member(path);
        assert_eq!(code, 2, "mode {mode:o}: {out}");
        assert!(out.contains(&format!("--crontab {path}: refused")) && out.contains("chmod go-w"), "{out}");
    }
    chmod(0o644);
    let (code, out, err) = check(&[path]);
    assert_eq!(code, 0, "{out}{err}");
    if !nix::unistd::geteuid().is_root() {
        return crate::util::skip("chown to another user needs root");
    }
    // Root runs only root's file: another's, even of mode 644, is refused.
    nix::unistd::chown(&file, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let (code, _, err) = check(&[path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("refused: owned by ") && err.contains(&format!("chown root {path}")), "{err}");
    let (code, out) = member(path);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("chown root {path}")), "{out}");
}

#[test]
fn cron_check_a_member_and_kafka_config_refuse_a_fifo_a_directory_dev_zero_and_a_file_over_1_mib() {
    let dir = tempdir::Dir::new("crontab-bounds");
    let fifo = dir.path().join("fifo.crontab");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let big = dir.path().join("big.crontab");
    let mut text = JOB.to_string();
    while text.len() <= 1024 * 1024 {
        text += "# a comment that makes the file big, line after line after line after line\n";
    }
    std::fs::write(&big, &text).unwrap();
    let dir_path = dir.path().to_str().unwrap();
    let (fifo, big) = (fifo.to_str().unwrap(), big.to_str().unwrap());
    for (file, said) in [
        (fifo, "a FIFO, not a regular file"),
        (dir_path, "a directory, not a regular file"),
        ("/dev/zero", "a character device, not a regular file"),
        (big, &format!("{} bytes, over the 1048576 bytes (1 MiB) a crontab may hold", text.len())),
    ] {
        let (code, _, err) = check(&[file]);
        assert_eq!(code, 2, "{file}: {err}");
        assert!(err.contains(&format!("{file}: {said}")), "{file}: {err}");
        let (code, out) = member(file);
        assert_eq!(code, 2, "{file}: {out}");
        assert!(out.contains(said), "{file}: {out}");
    }
    // --kafka-config is read with the same bound (a pipe is still taken).
    let (code, out, err) = run_within(
        &["-b", "127.0.0.1:9", "-g", "g", "--kafka-config", "/dev/zero", "--", "true"],
        Duration::from_secs(10),
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--kafka-config /dev/zero: cannot read it (over 1048576 bytes (1 MiB)"), "{err}");
}

#[test]
fn a_member_keeps_its_jobs_when_its_crontab_turns_untrusted_a_fifo_or_dev_zero_and_says_each_once() {
    let fleet = Fleet::new("crontab-trust-reload", &["a"], "1s", "0");
    let mut one = fleet.member("one");
    let takeover = fleet.g.broker.timing.takeover();
    let starts = || fleet.runs().len();
    crate::util::wait_until(takeover * 2, "a runs", || starts() > 0);
    let path = fleet.file.display().to_string();
    let runs_on = |what: &str| {
        let then = starts();
        crate::util::wait_until(takeover * 2, &format!("a runs on {what}"), || starts() >= then + 2);
    };

    // Another user could write it now (a chmod: its change time tells):
    // refused once, however often asked again, and a runs on.
    std::fs::set_permissions(&fleet.file, std::fs::Permissions::from_mode(0o666)).unwrap();
    crate::util::wait_until(takeover * 2, "the chmod is seen", || one.log().contains("chmod go-w"));
    // Each SIGHUP once the one before is answered: two sent while one is
    // pending are one signal.
    let refused = || one.log().matches("the crontab is still refused").count();
    let before = refused();
    for n in 1..=3 {
        one.signal(Signal::SIGHUP);
        crate::util::wait_until(takeover, "the SIGHUP is answered", || refused() >= before + n);
    }
    assert_eq!(one.log().matches("chmod go-w").count(), 1, "said once: {}", one.log());
    assert!(one.log().contains(&format!("{path}: refused: its mode is 0666")), "{}", one.log());
    runs_on("while the file is refused");

    // A FIFO there, then /dev/zero: each refused at once, no read blocks
    // or grows, and the file fixed is read again.
    let fifo = fleet.g.dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::fs::rename(&fifo, &fleet.file).unwrap();
    crate::util::wait_until(takeover * 2, "the FIFO is refused", || one.log().contains("a FIFO, not a regular file"));
    let link = fleet.g.dir.path().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    std::fs::rename(&link, &fleet.file).unwrap();
    crate::util::wait_until(takeover * 2, "/dev/zero is refused", || {
        one.log().contains("a character device, not a regular file")
    });
    runs_on("after the FIFO and /dev/zero");
    let good = fleet.write("good.crontab", &["a", "b"]);
    std::fs::rename(&good, &fleet.file).unwrap();
    crate::util::wait_until(takeover * 3, "b, new, runs", || fleet.runs().iter().any(|(job, _, _)| job == "b"));
    fleet.assert_once();
    one.signal(Signal::SIGTERM);
    assert!(one.wait_exit(takeover).success(), "{}", one.log());
}
