//! `--metrics-addr`: /metrics, /livez, /readyz, /healthz and /leader over
//! real HTTP.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{run, skip, stays_false, wait_until, Broker, Group, Member};

pub fn free_addr() -> String {
    let [addr] = free_addrs();
    addr
}

/// N distinct free addresses: the listeners are held until all are
/// chosen, or the kernel may hand out the same port twice (then the second
/// member cannot serve its --metrics-addr and exits).
pub fn free_addrs<const N: usize>() -> [String; N] {
    let listeners: [TcpListener; N] = std::array::from_fn(|_| TcpListener::bind("127.0.0.1:0").unwrap());
    listeners.map(|l| format!("127.0.0.1:{}", l.local_addr().unwrap().port()))
}

/// One HTTP/1.1 exchange: the status code, the header lines and the body,
/// or None if nothing listens yet.
pub fn request(addr: &str, method: &str, path: &str, headers: &[&str]) -> Option<(u16, Vec<String>, String)> {
    let mut stream = TcpStream::connect(addr).ok()?;
    let headers: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(stream, "{method} {path} HTTP/1.1\r\nHost: test\r\n{headers}\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, head.lines().skip(1).map(str::to_string).collect(), body.to_string()))
}

/// GET `path`; the status code and body, or None if nothing listens yet.
pub fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    request(addr, "GET", path, &[]).map(|(code, _, body)| (code, body))
}

fn code(addr: &str, path: &str) -> Option<u16> {
    get(addr, path).map(|r| r.0)
}

/// Member a, leading, and member b, its standby, each serving
/// --metrics-addr (the two addresses, in that order).
fn leader_and_standby(g: &Group) -> ([Member; 2], [String; 2]) {
    let t = g.broker.timing;
    let [addr_a, addr_b] = free_addrs();
    let a = g.member("a", &["--metrics-addr", &addr_a], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let mut b = g.member("b", &["--metrics-addr", &addr_b], &["sleep", "1000"]);
    wait_until(t.takeover(), "b is a standby (or exits)", || b.joined_as_standby() || b.exited());
    assert!(b.joined_as_standby(), "b: {}", b.log());
    ([a, b], [addr_a, addr_b])
}

#[test]
fn leader_endpoint_answers_200_only_on_the_leader() {
    let g = Group::new("metrics");
    let t = g.broker.timing;
    let (_members, [addr_a, addr_b]) = leader_and_standby(&g);

    wait_until(t.takeover(), "a's /leader says 200", || code(&addr_a, "/leader") == Some(200));
    assert_eq!(code(&addr_b, "/leader"), Some(503));
    for addr in [&addr_a, &addr_b] {
        for path in ["/livez", "/readyz", "/healthz"] {
            assert_eq!(code(addr, path), Some(200), "{addr}{path}");
        }
    }
    assert_eq!(code(&addr_a, "/nope"), Some(404));

    let (code, text) = get(&addr_a, "/metrics").unwrap();
    assert_eq!(code, 200);
    let token = g.starts()[0].1;
    let topic = format!("{}.neli", g.name);
    for line in [
        "neli_leader 1",
        &format!("neli_fencing_token {token}"),
        "neli_child_up 1",
        "neli_kafka_reachable 1",
        &format!("neli_member_info{{group=\"{}\",topic=\"{topic}\",member=\"a\"}} 1", g.name),
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
    }
    let build = format!("neli_build_info{{version=\"{}\",", env!("CARGO_PKG_VERSION"));
    for start in ["neli_heartbeat_age_seconds ", "neli_leader_since_timestamp_seconds ", &build, "process_open_fds "] {
        assert!(text.lines().any(|l| l.starts_with(start)), "missing {start}:\n{text}");
    }
    let (_, standby) = get(&addr_b, "/metrics").unwrap();
    assert!(standby.lines().any(|l| l == "neli_leader 0"), "{standby}");
    assert!(!standby.contains("neli_leader_since_timestamp_seconds"), "{standby}");
}

#[test]
fn http_answers_head_negotiates_openmetrics_and_names_the_charset() {
    let g = Group::new("metrics-http");
    let addr = free_addr();
    let _a = g.member("a", &["--metrics-addr", &addr], &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "a leads", || g.lock_held());

    let (code, headers, body) = request(&addr, "GET", "/metrics", &[]).unwrap();
    assert_eq!(code, 200);
    assert!(headers.iter().any(|h| h == "Content-Type: text/plain; version=0.0.4; charset=utf-8"), "{headers:?}");
    assert!(!body.contains("# EOF"), "{body}");
    let (code, headers, empty) = request(&addr, "HEAD", "/metrics", &[]).unwrap();
    assert_eq!((code, empty.as_str()), (200, ""), "{headers:?}");
    let length = headers.iter().find_map(|h| h.strip_prefix("Content-Length: ")).unwrap();
    assert!(length.parse::<usize>().unwrap() > 1000, "the length GET's body would have: {headers:?}");
    let (code, headers, _) = request(&addr, "HEAD", "/livez", &[]).unwrap();
    assert_eq!(code, 200);
    assert!(headers.iter().any(|h| h == "Content-Type: text/plain; charset=utf-8"), "{headers:?}");

    // What Prometheus asks for.
    let accept = "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (code, headers, body) = request(&addr, "GET", "/metrics", &[accept]).unwrap();
    assert_eq!(code, 200);
    let open_metrics = "Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8";
    assert!(headers.iter().any(|h| h == open_metrics), "{headers:?}");
    assert_eq!(body.lines().last(), Some("# EOF"), "{body}");
    assert!(body.lines().any(|l| l == "# TYPE neli_member info"), "{body}");

    let (code, headers, _) = request(&addr, "POST", "/metrics", &[]).unwrap();
    assert_eq!(code, 405);
    assert!(headers.iter().any(|h| h == "Allow: GET, HEAD"), "{headers:?}");
}

#[test]
fn a_kafka_outage_fails_readiness_but_not_liveness() {
    let g = Group::on(Broker::dev(), "metrics-outage");
    let t = g.broker.timing;
    let (_members, [addr_a, addr_b]) = leader_and_standby(&g);
    wait_until(t.takeover(), "both are ready", || {
        code(&addr_a, "/readyz") == Some(200) && code(&addr_b, "/readyz") == Some(200)
    });

    g.broker.signal(Signal::SIGKILL);
    // The standby's loop has nothing to do now: it still notes that it
    // turns, and sees Kafka go.
    wait_until(t.takeover(), "neither is ready", || {
        code(&addr_a, "/readyz") == Some(503) && code(&addr_b, "/readyz") == Some(503)
    });
    assert_eq!(code(&addr_a, "/healthz"), Some(503), "/healthz is /readyz's older name");
    let (_, text) = get(&addr_b, "/metrics").unwrap();
    assert!(text.lines().any(|l| l == "neli_kafka_reachable 0"), "{text}");
    // Longer than /livez waits for the loop: a quiet loop is not a stuck one.
    let window = Duration::from_secs(12);
    assert!(
        stays_false(window, || code(&addr_a, "/livez") != Some(200) || code(&addr_b, "/livez") != Some(200)),
        "/livez failed during a Kafka outage"
    );
}

#[test]
fn metrics_pass_promtool_check_with_awkward_label_values() {
    let promtool = Command::new("promtool").arg("--version").output();
    if !promtool.is_ok_and(|out| out.status.success()) {
        return skip("promtool is not installed (Debian: apt-get install prometheus)");
    }
    // A group and a name with a quote, a backslash and spaces (Kafka takes
    // any group name; the topic must be plain).
    let g = Group::on(Broker::dev(), "metrics-promtool");
    let addr = free_addr();
    let group = format!("{} \"quoted\" back\\slash", g.name);
    let topic = format!("{}.neli", g.name);
    let mut argv: Vec<String> =
        ["-b", &g.broker.address, "-g", &group, "--topic", &topic, "--name", "a\"b\\c"].map(String::from).to_vec();
    argv.extend(g.broker.timing.args());
    // With a health check: its gauge goes through promtool too.
    argv.extend(["--metrics-addr", &addr, "--health-cmd", "true", "--", "sleep", "1000"].map(String::from));
    let _a = Member::spawn("a", &[], &argv, &g.dir.path().join("a.log"), None);
    wait_until(g.broker.timing.takeover(), "a leads", || code(&addr, "/leader") == Some(200));
    let (_, text) = get(&addr, "/metrics").unwrap();
    assert!(text.lines().any(|l| l == "neli_healthy 1"), "{text}");
    let member = format!(
        "neli_member_info{{group=\"{} \\\"quoted\\\" back\\\\slash\",topic=\"{topic}\",member=\"a\\\"b\\\\c\"}} 1",
        g.name
    );
    assert!(text.lines().any(|l| l == member), "missing {member}:\n{text}");
    assert_promtool_clean(&text);
}

/// `promtool check metrics` finds nothing to say about `text`.
fn assert_promtool_clean(text: &str) {
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{text}");
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

/// With `--roles`, /metrics has each role's series (labelled `role`,
/// promtool-clean), and /leader answers per role: `?role=J` on the member
/// running role J's command only.
#[test]
fn roles_have_their_own_series_and_leader_probe() {
    let g = Group::new("metrics-roles");
    let [addr_a, addr_b] = free_addrs();
    let t = g.broker.timing;
    let _a = g.member_unguarded("a", &["--roles", "2", "--metrics-addr", &addr_a], &["sleep", "1000"]);
    let _b = g.member_unguarded("b", &["--roles", "2", "--metrics-addr", &addr_b], &["sleep", "1000"]);
    let leads = |addr: &str, role: u8| code(addr, &format!("/leader?role={role}")) == Some(200);
    wait_until(t.takeover(), "each member leads one role", || {
        (0..2).all(|j| leads(&addr_a, j) != leads(&addr_b, j)) && leads(&addr_a, 0) != leads(&addr_a, 1)
    });
    for addr in [&addr_a, &addr_b] {
        // A snapshot read while the member leads its role (on a loaded
        // machine a seat may be fenced for a moment, and lead nothing).
        let lines = |mine: u8, other: u8| {
            [
                "neli_roles_led 1".to_string(),
                format!("neli_role_leader{{role=\"{mine}\"}} 1"),
                format!("neli_role_leader{{role=\"{other}\"}} 0"),
                format!("neli_role_fencing_token{{role=\"{other}\"}} -1"),
                format!("neli_role_child_restarts_total{{role=\"{mine}\"}} 0"),
                format!("neli_role_paused{{role=\"{mine}\"}} 0"),
            ]
        };
        let mut snapshot = None;
        wait_until(t.takeover(), &format!("{addr} shows the role it leads"), || {
            let (mine, other) = if leads(addr, 0) { (0, 1) } else { (1, 0) };
            let text = get(addr, "/metrics").map(|(_, text)| text).unwrap_or_default();
            let shown = lines(mine, other).iter().all(|line| text.lines().any(|l| l == line));
            snapshot = Some((mine, text));
            shown
        });
        let (mine, text) = snapshot.expect("read");
        let token = text.lines().find_map(|l| l.strip_prefix(&format!("neli_role_fencing_token{{role=\"{mine}\"}} ")));
        assert!(token.is_some_and(|t| t.parse::<i64>().is_ok_and(|t| t >= 0)), "{text}");
        assert!(!text.contains("neli_leader "), "the single leader's series are left out: {text}");
        assert_eq!(code(addr, "/leader"), Some(200), "a member that runs some role's command");
        assert_eq!(code(addr, "/leader?role=x"), Some(400));
        if std::process::Command::new("promtool").arg("--version").output().is_ok_and(|o| o.status.success()) {
            assert_promtool_clean(&text);
        } else {
            skip("promtool is not installed (Debian: apt-get install prometheus)");
        }
    }
    // One role paused: its owner says so in that role's series only.
    let (status, out) = run(&["pause", "-b", &g.broker.address, "-g", &g.name, "--role", "1"]);
    assert_eq!(status, 0, "{out}");
    let owner = if leads(&addr_a, 1) { &addr_a } else { &addr_b };
    wait_until(t.takeover(), "role 1's owner says it is paused, and role 0 not", || {
        let text = get(owner, "/metrics").map(|(_, text)| text).unwrap_or_default();
        ["neli_role_paused{role=\"1\"} 1", "neli_role_paused{role=\"0\"} 0"]
            .iter()
            .all(|line| text.lines().any(|l| l == *line))
    });
}

/// A command that exits and starts again under the same leadership counts
/// as a restart of its own seat: the single leader's counter, or its
/// role's with `--roles`.
#[test]
fn a_restart_is_counted_for_its_own_seat() {
    for (roles, series) in [("1", "neli_child_restarts_total"), ("2", "neli_role_child_restarts_total{role=\"1\"}")] {
        let g = Group::new("metrics-restarts");
        let addr = free_addr();
        let flags = ["--roles", roles, "--restart", "always", "--restart-delay", "100ms", "--metrics-addr", &addr];
        let _a = g.member_unguarded("a", &flags, &["sh", "-c", "sleep 0.2; exit 3"]);
        let restarts = || {
            let text = get(&addr, "/metrics").map(|r| r.1).unwrap_or_default();
            let count = text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse::<u64>().ok());
            count.unwrap_or(0)
        };
        wait_until(g.broker.timing.takeover(), &format!("{series} counts the restarts"), || restarts() >= 2);
    }
}
