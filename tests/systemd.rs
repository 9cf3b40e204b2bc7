//! systemd's notify protocol, with a test socket standing in for systemd
//! (the protocol is one datagram per message to NOTIFY_SOCKET).

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::{wait_until, Group};

/// Collects datagrams until `until` holds for what was received, or panics.
fn receive_until(socket: &UnixDatagram, within: Duration, until: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = Instant::now();
    let mut got = Vec::new();
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buf = [0u8; 512];
    while !until(&got) {
        assert!(start.elapsed() < within, "timed out; received {got:?}");
        if let Ok(n) = socket.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    got
}

#[test]
fn notify_reports_ready_role_watchdog_and_stopping() {
    let g = Group::new("notify");
    let path = g.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let prefix =
        vec!["env".to_string(), format!("NOTIFY_SOCKET={}", path.display()), "WATCHDOG_USEC=200000".to_string()];
    let mut m = g.member_in(Some(prefix), "a", &[], &["sleep", "1000"]);
    let t = g.broker.timing;
    let got = receive_until(&socket, t.takeover(), |got| {
        got.iter().any(|m| m.starts_with("STATUS=leader")) && got.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2
    });
    let ready = got.iter().position(|m| m == "READY=1").expect("READY=1 was sent");
    let leader = got.iter().position(|m| m.starts_with("STATUS=leader")).unwrap();
    assert!(ready < leader, "READY=1 comes first: {got:?}");
    crate::util::wait_until(t.takeover(), "the child runs", || g.lock_held() && !g.starts().is_empty());
    assert!(got[leader].contains(&g.starts()[0].1.to_string()), "{got:?}");
    m.signal(Signal::SIGTERM);
    receive_until(&socket, t.takeover(), |got| got.iter().any(|m| m == "STOPPING=1"));
    m.wait_exit(t.takeover());
}

/// A member that never leads runs under the same unit file (Type=notify,
/// WatchdogSec=): ready at once, its watchdog fed, stopping said.
#[test]
fn a_member_that_never_leads_speaks_the_notify_protocol_too() {
    let g = Group::new("notify-never-lead");
    let path = g.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let prefix =
        vec!["env".to_string(), format!("NOTIFY_SOCKET={}", path.display()), "WATCHDOG_USEC=200000".to_string()];
    let mut w = g.member_in(Some(prefix), "w", &["--never-lead"], &["sleep", "1000"]);
    let t = g.broker.timing;
    let got = receive_until(&socket, t.takeover(), |got| got.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2);
    assert_eq!(got[0], "READY=1", "{got:?}");
    assert!(got.iter().any(|m| m.starts_with("STATUS=watching")), "{got:?}");
    w.signal(Signal::SIGTERM);
    receive_until(&socket, t.takeover(), |got| got.iter().any(|m| m == "STOPPING=1"));
    assert_eq!(w.wait_exit(t.takeover()).code(), Some(0), "{}", w.log());
}

#[test]
fn a_member_kept_out_by_its_health_check_is_ready_and_says_so() {
    // Without READY=1, systemd would fail the unit at TimeoutStartSec and
    // restart it, again and again, while the host is unhealthy.
    let g = Group::new("notify-health");
    let path = g.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let prefix = vec!["env".to_string(), format!("NOTIFY_SOCKET={}", path.display())];
    let mut m = g.member_in(Some(prefix), "a", &["--health-cmd", "false", "--health-interval", "100ms"], &["true"]);
    let got = receive_until(&socket, g.broker.timing.takeover(), |got| got.iter().any(|m| m.starts_with("STATUS=")));
    assert_eq!(got, ["READY=1", "STATUS=unhealthy: out of the group until the health check passes"]);
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(g.broker.timing.takeover()).code(), Some(0), "{}", m.log());
}

#[test]
fn without_notify_socket_it_runs_as_usual() {
    // The common case: every other test runs without NOTIFY_SOCKET.
    let g = Group::new("no-notify");
    let mut m = g.member("a", &[], &["true"]);
    assert_eq!(m.wait_exit(g.broker.timing.takeover()).code(), Some(0));
}

#[test]
fn the_contrib_unit_file_is_valid() {
    if std::process::Command::new("systemd-analyze").arg("--version").output().is_err() {
        crate::util::skip("systemd-analyze is not installed (apt-get install systemd)");
        return;
    }
    let g = Group::new("unit");
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/neli-run@.service")).unwrap();
    let path = g.dir.path().join("neli-run@.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/neli-run", crate::util::bin())).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(g.dir.path().join("neli-run@billing.service"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "systemd-analyze verify: {stderr}");
}

/// A drained member tells systemd why it runs nothing, and what ends it;
/// undrained, alone, it leads again.
#[test]
fn a_drained_member_says_so_in_its_status_line() {
    let g = Group::new("notify-drain");
    let path = g.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let prefix = vec!["env".to_string(), format!("NOTIFY_SOCKET={}", path.display())];
    let mut m = g.member_in(Some(prefix), "a", &[], &["sleep", "1000"]);
    let t = g.broker.timing;
    receive_until(&socket, t.takeover(), |got| got.iter().any(|m| m.starts_with("STATUS=leader")));
    let kafka = ["-b", g.broker.address.as_str(), "-g", g.name.as_str()];
    // Alone: only --force drains it.
    let (code, out) = crate::util::run(&[&["drain", "a", "--force"][..], &kafka].concat());
    assert_eq!(code, 0, "{out}");
    receive_until(&socket, t.takeover(), |got| {
        got.iter().any(|m| m == "STATUS=drained: out of the group until `neli-run undrain`")
    });
    let (code, out) = crate::util::run(&[&["undrain", "a"][..], &kafka].concat());
    assert_eq!(code, 0, "{out}");
    receive_until(&socket, t.takeover(), |got| got.iter().any(|m| m.starts_with("STATUS=leader")));
    // Its command starts again once the record naming the wave's run is
    // read back, a round trip after it leads (130 ms on tansu).
    wait_until(t.takeover(), "the command runs again", || m.log().matches("child started").count() == 2);
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(t.takeover()).code(), Some(143), "{}", m.log());
}

/// A member of roles says which roles it leads, and drained, that it leads
/// none and why.
#[test]
fn a_member_of_roles_names_its_roles_in_its_status_line_and_says_when_drained() {
    let g = Group::new("notify-roles");
    let path = g.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let prefix = vec!["env".to_string(), format!("NOTIFY_SOCKET={}", path.display())];
    let mut m = g.member_in(Some(prefix), "a", &["--roles", "2"], &["sleep", "1000"]);
    let t = g.broker.timing;
    let leading = |m: &String| m.starts_with("STATUS=leading role(s) 0 (token ") && m.contains(", 1 (token ");
    receive_until(&socket, t.takeover(), |got| got.iter().any(leading));
    let kafka = ["-b", g.broker.address.as_str(), "-g", g.name.as_str()];
    let (code, out) = crate::util::run(&[&["drain", "a", "--force"][..], &kafka].concat());
    assert_eq!(code, 0, "{out}");
    receive_until(&socket, t.takeover(), |got| {
        got.iter().any(|m| m == "STATUS=drained (`neli-run undrain` ends it): standby: no role")
    });
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(t.takeover()).code(), Some(0), "{}", m.log());
}
