//! `neli-run status`: the leader as the heartbeat records show it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use nix::sys::signal::Signal;

use crate::util::{bin, run, wait_until, Group};

fn status(g: &Group) -> (i32, serde_json::Value) {
    let (code, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    // Before the topic exists, status explains that in plain text.
    (code, serde_json::from_str(out.trim()).unwrap_or(serde_json::Value::Null))
}

#[test]
fn status_names_the_fresh_leader_and_exits_1_without_one() {
    let g = Group::new("status");
    let mut a = g.member("a", &[], &["sleep", "1000"]);
    let t = g.broker.timing;
    wait_until(t.takeover(), "a leads", || g.lock_held());
    // Its first heartbeat with the token follows the child's start.
    wait_until(t.takeover(), "status reports a fresh leader", || status(&g).0 == 0);
    let (_, json) = status(&g);
    assert_eq!(json["fresh"], true);
    assert_eq!(json["leader"]["name"], "a");
    assert_eq!(json["leader"]["token"], g.starts()[0].1);
    assert!(json["leader"]["heartbeat_age_ms"].as_u64().unwrap() < t.deadline.as_millis() as u64, "{json}");
    a.signal(Signal::SIGKILL);
    a.wait_exit(t.takeover());
    wait_until(t.takeover(), "status reports no fresh leader", || status(&g).0 == 1);
    let (_, json) = status(&g);
    assert_eq!(json["fresh"], false);
    assert_eq!(json["leader"]["name"], "a", "the last leader is still shown");
}

#[test]
fn status_watch_prints_each_change_of_leader() {
    let g = Group::new("status-watch");
    let t = g.broker.timing;
    let mut a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let _b = g.member("b", &[], &["sleep", "1000"]);
    let mut watch = Command::new(bin())
        .args(["status", "--watch", "--json", "-b", &g.broker.address, "-g", &g.name])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next_leader = |rx: &mpsc::Receiver<String>| -> String {
        loop {
            let line = rx.recv_timeout(t.takeover()).expect("a status line");
            let json: serde_json::Value = serde_json::from_str(&line).unwrap();
            if json["fresh"] == true {
                return json["leader"]["name"].as_str().unwrap().to_string();
            }
        }
    };
    assert_eq!(next_leader(&rx), "a");
    a.signal(Signal::SIGTERM);
    a.wait_exit(t.takeover());
    assert_eq!(next_leader(&rx), "b");
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn status_of_an_unreachable_broker_fails_clearly() {
    let (code, out) = run(&["status", "-b", "127.0.0.1:1", "-g", "g"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("cannot read g.neli from 127.0.0.1:1"), "{out}");
}

#[test]
fn yield_hands_over_to_another_member_and_the_old_leader_stays_a_standby() {
    let g = Group::new("yield");
    let t = g.broker.timing;
    let mut a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let b = g.member("b", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "b is a standby", || b.log().contains("standby"));
    wait_until(t.takeover(), "status sees a", || status(&g).0 == 0);

    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--name", "b"]);
    assert_eq!(code, 1, "b does not lead: {out}");
    assert!(out.contains("a does"), "{out}");

    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name]);
    assert_eq!(code, 0, "{out}\n{}", a.log());
    assert!(out.contains("from a") && out.contains("to b"), "{out}");
    assert_eq!(g.starts().last().unwrap().0, "b");
    assert!(!a.exited(), "a yields, it does not exit:\n{}", a.log());
    wait_until(t.takeover(), "a rejoins as a standby", || a.log().matches("standby").count() >= 1);
    g.assert_no_overlap();
}

#[test]
fn yield_of_a_lone_leader_times_out_and_it_leads_again() {
    let g = Group::new("yield-alone");
    let t = g.broker.timing;
    let _a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "status sees a", || status(&g).0 == 0);
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", "3s"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no other member took over"), "{out}");
    wait_until(t.takeover() * 2, "a leads again", || g.starts().len() == 2 && g.lock_held());
}
