//! `--metrics-addr`: /metrics, /healthz and /leader over real HTTP.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use crate::util::{run, wait_until, Group};

pub fn free_addr() -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("127.0.0.1:{port}")
}

/// GET `path`; the status code and body, or None if nothing listens yet.
pub fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(addr).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_string();
    Some((code, body))
}

#[test]
fn leader_endpoint_answers_200_only_on_the_leader() {
    let g = Group::new("metrics");
    let t = g.broker.timing;
    let (addr_a, addr_b) = (free_addr(), free_addr());
    let _a = g.member("a", &["--metrics-addr", &addr_a], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let b = g.member("b", &["--metrics-addr", &addr_b], &["sleep", "1000"]);
    wait_until(t.takeover(), "b is a standby", || b.log().contains("standby"));

    wait_until(t.takeover(), "a's /leader says 200", || get(&addr_a, "/leader").is_some_and(|r| r.0 == 200));
    assert_eq!(get(&addr_b, "/leader").map(|r| r.0), Some(503));
    assert_eq!(get(&addr_a, "/healthz").map(|r| r.0), Some(200));
    assert_eq!(get(&addr_b, "/healthz").map(|r| r.0), Some(200));
    assert_eq!(get(&addr_a, "/nope").map(|r| r.0), Some(404));

    let (code, text) = get(&addr_a, "/metrics").unwrap();
    assert_eq!(code, 200);
    let token = g.starts()[0].1;
    for line in ["neli_leader 1", &format!("neli_fencing_token {token}"), "neli_child_up 1", "neli_kafka_reachable 1"] {
        assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
    }
    assert!(text.contains("neli_heartbeat_age_seconds"), "{text}");
    let (_, standby) = get(&addr_b, "/metrics").unwrap();
    assert!(standby.lines().any(|l| l == "neli_leader 0"), "{standby}");
}

#[test]
fn bad_metrics_address_is_a_usage_error() {
    let (code, out) = run(&["-g", "g", "--metrics-addr", "nowhere", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--metrics-addr"), "{out}");
}

#[test]
fn metrics_address_in_use_is_refused_at_start() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--metrics-addr", &addr, "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cannot serve --metrics-addr") && out.contains("in use"), "{out}");
}
