use super::*;
use crate::leader::Runner;

fn at(secs: f64) -> BootTime {
    BootTime::from_nanos((secs * 1e9) as u64)
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[test]
fn transitions_are_counted_by_kind_and_render_as_prometheus_text() {
    let mut s = Snapshot::default();
    s.set_standing(Standing::Standby, 1000);
    s.set_standing(Standing::Candidate, 1000);
    s.set_standing(Standing::Leader { token: 7 }, 1000);
    s.set_standing(Standing::Leader { token: 7 }, 1000);
    s.set_standing(Standing::Fenced, 1000);
    s.set_standing(Standing::Leader { token: 9 }, 1000);
    s.child_up = true;
    for token in [7, 7, 9] {
        s.child_started(token); // a start, a restart, a resume
    }
    s.fresh = Some(at(1.0));
    let text = s.render(at(1.5), Format::Prometheus);
    for line in [
        "neli_leader 1",
        "neli_fencing_token 9",
        "neli_heartbeat_age_seconds 0.5",
        "neli_transitions_total{kind=\"joined\"} 1",
        "neli_transitions_total{kind=\"leader\"} 1",
        "neli_transitions_total{kind=\"fenced\"} 1",
        "neli_transitions_total{kind=\"resumed\"} 1",
        "neli_child_restarts_total 1",
        "neli_child_up 1",
        "neli_paused 0",
        "neli_runs_total{outcome=\"success\"} 0",
        "# TYPE neli_transitions_total counter",
        "# HELP neli_transitions_total Changes of role, by the role entered.",
        "# TYPE neli_leader gauge",
    ] {
        assert!(has(&text, line), "missing {line}:\n{text}");
    }
    // The duplicate of transitions{kind="fenced"} is gone, and nothing
    // of OpenMetrics' own is left in the text format.
    assert!(!text.contains("neli_fences_total"), "{text}");
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
}

#[test]
fn the_health_gauge_is_there_only_with_a_health_check() {
    let mut s = Snapshot::default();
    assert!(!s.render(at(1.0), Format::Prometheus).contains("neli_healthy"), "no --health-cmd, no series");
    for (healthy, line) in [(false, "neli_healthy 0"), (true, "neli_healthy 1")] {
        s.healthy = Some(healthy);
        let text = s.render(at(1.0), Format::Prometheus);
        assert!(has(&text, line) && text.contains("# TYPE neli_healthy gauge"), "{text}");
    }
}

#[test]
fn a_leadership_begins_with_its_token_and_is_shown_only_while_leading() {
    let since = |s: &Snapshot| {
        let text = s.render(at(100.0), Format::Prometheus);
        let line = text.lines().find(|l| l.starts_with("neli_leader_since_timestamp_seconds "))?.to_string();
        Some(line.rsplit(' ').next()?.parse::<f64>().unwrap())
    };
    let mut s = Snapshot::default();
    s.set_standing(Standing::Standby, 1000);
    assert_eq!(since(&s), None);
    let begun = 1_700_000_000_250;
    s.set_standing(Standing::Leader { token: 3 }, begun);
    let first = since(&s).expect("leading");
    assert_eq!(first, begun as f64 / 1000.0);
    s.set_standing(Standing::Leader { token: 3 }, begun + 5000);
    assert_eq!(since(&s), Some(first), "the same leadership goes on");
    s.set_standing(Standing::Fenced, begun + 6000);
    assert_eq!(since(&s), None, "fenced: not leading");
    s.set_standing(Standing::Leader { token: 4 }, begun + 7000);
    assert_eq!(since(&s), Some(first + 7.0), "a resume is a new leadership, under a new token");
    s.set_standing(Standing::Standby, begun + 8000);
    assert_eq!(since(&s), None);
}

#[test]
fn build_and_member_info_name_this_member_and_escape_what_the_user_gave() {
    let ids = Ids { group: "billing".into(), topic: "billing.neli".into(), member: "a \"b\"\\c\nd".into() };
    let s = shared(ids).lock().unwrap().clone();
    let text = s.render(at(1.0), Format::Prometheus);
    let build = format!(
        "neli_build_info{{version=\"{}\",commit=\"{}\",librdkafka=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        env!("NELI_BUILD_COMMIT"),
        rdkafka::util::get_rdkafka_version().1
    );
    let member = r#"neli_member_info{group="billing",topic="billing.neli",member="a \"b\"\\c\nd"} 1"#;
    for line in [build.as_str(), member, "# TYPE neli_build_info gauge", "# TYPE neli_member_info gauge"] {
        assert!(has(&text, line), "missing {line}:\n{text}");
    }
    let open = s.render(at(1.0), Format::OpenMetrics);
    for line in [build.as_str(), member, "# TYPE neli_build info", "# TYPE neli_member info", "# EOF"] {
        assert!(has(&open, line), "missing {line}:\n{open}");
    }
    assert_eq!(open.lines().last(), Some("# EOF"));
}

#[test]
fn process_metrics_are_read_from_proc() {
    let p = Process::read().expect("/proc is mounted");
    assert!(p.resident_bytes > 0 && p.virtual_bytes >= p.resident_bytes, "{p:?}");
    assert!(p.open_fds >= 3 && p.max_fds >= p.open_fds, "{p:?}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 3600.0, "{p:?}");
    let text = Snapshot::default().render(at(1.0), Format::Prometheus);
    for name in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_virtual_memory_bytes ",
        "process_open_fds ",
        "process_max_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(text.lines().any(|l| l.starts_with(name)), "missing {name}:\n{text}");
    }
    assert!(has(&text, "# TYPE process_cpu_seconds_total counter"), "{text}");
}

#[test]
fn proc_fields_are_counted_from_the_last_parenthesis() {
    // A command name with spaces and a ')' (fields 14, 15: 250 and 50
    // ticks of CPU; 22: started 1000 ticks after boot).
    let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
    fields[14 - 3] = "250".into();
    fields[15 - 3] = "50".into();
    fields[22 - 3] = "1000".into();
    let stat = format!("42 (a) b (c)) {}\n", fields.join(" "));
    let status = "Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t     512 kB\n";
    let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
    let p = Process::parse(&stat, status, boot, 100.0, 7, 1024).unwrap();
    let want = Process {
        cpu_seconds: 3.0,
        resident_bytes: 512 * 1024,
        virtual_bytes: 2048 * 1024,
        open_fds: 7,
        max_fds: 1024,
        start_time_seconds: 1_700_000_010.0,
    };
    assert_eq!(p, want);
    assert_eq!(Process::parse("42 (x", status, boot, 100.0, 7, 1024), None);
}

#[test]
fn open_metrics_is_served_only_to_who_asks_for_it() {
    // What Prometheus 2 sends.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::from_accept(Some(prometheus)), Format::OpenMetrics);
    assert_eq!(Format::from_accept(Some("Application/OpenMetrics-Text; q=0.9")), Format::OpenMetrics);
    assert_eq!(Format::from_accept(Some("application/openmetrics-text; q=0")), Format::Prometheus);
    assert_eq!(Format::from_accept(Some("text/plain")), Format::Prometheus);
    assert_eq!(Format::from_accept(Some("*/*")), Format::Prometheus);
    assert_eq!(Format::from_accept(None), Format::Prometheus);
}

fn reply(request: &str, s: &Snapshot, now: BootTime) -> (String, String) {
    let bytes = Reply::to(request, s, now).bytes();
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

#[test]
fn head_gets_the_headers_of_get_without_the_body() {
    let s = Snapshot::default();
    let (get_head, get_body) = reply("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &s, at(1.0));
    let (head_head, head_body) = reply("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &s, at(1.0));
    assert!(get_head.starts_with("HTTP/1.1 200 OK\r\n") && head_head.starts_with("HTTP/1.1 200 OK\r\n"));
    assert!(get_head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{get_head}");
    let length = |head: &str| head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().to_string();
    assert_eq!(length(&get_head), get_body.len().to_string());
    // The process's metrics change between two scrapes, so the two
    // lengths may differ a little: HEAD's is a body's, not zero.
    assert!(length(&head_head).parse::<usize>().unwrap() > 100, "{head_head}");
    assert_eq!(head_body, "");
    let (head, body) = reply("HEAD /livez HTTP/1.1\r\n\r\n", &s, at(1.0));
    assert!(head.contains("Content-Length: 3\r\n") && body.is_empty(), "{head}");
    let (head, _) = reply("GET /metrics HTTP/1.1\r\naccept: application/openmetrics-text\r\n\r\n", &s, at(1.0));
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"), "{head}");
    let (head, _) = reply("POST /metrics HTTP/1.1\r\n\r\n", &s, at(1.0));
    assert!(head.starts_with("HTTP/1.1 405 ") && head.contains("Allow: GET, HEAD\r\n"), "{head}");
    let (head, _) = reply("GET /readyz HTTP/1.1\r\n\r\n", &s, at(1.0));
    assert!(head.contains("Content-Type: text/plain; charset=utf-8\r\n"), "{head}");
}

#[test]
fn liveness_follows_the_shell_loop_and_readiness_also_kafka() {
    let status = |path: &str, s: &Snapshot, now: f64| {
        let (head, _) = reply(&format!("GET {path} HTTP/1.1\r\n\r\n"), s, at(now));
        head.split_whitespace().nth(1).unwrap().to_string()
    };
    let mut s = Snapshot::default();
    // Connecting: alive (Kafka may be away for long), not ready.
    assert_eq!(status("/livez", &s, 100.0), "200");
    assert_eq!(status("/readyz", &s, 100.0), "503");
    s.loop_seen = Some(at(100.0));
    s.kafka_reachable = true;
    for path in ["/livez", "/readyz", "/healthz"] {
        assert_eq!(status(path, &s, 109.0), "200", "{path}");
    }
    // Kafka away: still alive, not ready.
    s.kafka_reachable = false;
    assert_eq!(status("/livez", &s, 109.0), "200");
    assert_eq!(status("/readyz", &s, 109.0), "503");
    assert_eq!(status("/healthz", &s, 109.0), "503");
    // The loop stuck for LOOP_STUCK: neither.
    s.kafka_reachable = true;
    let stuck = 100.0 + LOOP_STUCK.as_secs_f64();
    for path in ["/livez", "/readyz", "/healthz"] {
        assert_eq!(status(path, &s, stuck), "503", "{path}");
    }
    let (_, body) = reply("GET /livez HTTP/1.1\r\n\r\n", &s, at(stuck));
    assert_eq!(body, "the shell's loop has not turned for 10s\n");
    assert_eq!(status("/nope", &s, 100.0), "404");
}

fn run(token: i64, due: u64, code: Option<u8>, by: Option<&str>) -> Attempt {
    let by = by.map(|name| Runner { name: name.into(), host: "h".into() });
    Attempt {
        wave_ms: 1,
        wave_token: token,
        number: 1,
        token,
        code,
        by,
        due: Some(due),
        ended: code.map(|_| due + 500),
        line: None,
    }
}

#[test]
fn runs_are_counted_once_by_outcome_and_the_last_success_is_kept() {
    let mut s = Snapshot::default();
    s.note_run(Some(&run(7, 2000, None, None)), true); // running: not yet
    s.note_run(Some(&run(7, 2000, Some(0), None)), false);
    s.note_run(Some(&run(7, 2000, Some(0), None)), false); // the same run again
    s.note_run(Some(&run(7, 4000, Some(2), None)), false);
    s.note_run(Some(&run(7, 6000, None, None)), false); // stopped by us
    s.note_run(Some(&run(9, 8000, Some(0), Some("b"))), false); // b's, read
    s.next_due_ms = Some(10_000);
    let text = s.render(BootTime::from_nanos(1), Format::Prometheus);
    for line in [
        "neli_runs_total{outcome=\"success\"} 1",
        "neli_runs_total{outcome=\"failure\"} 1",
        "neli_runs_total{outcome=\"cut_short\"} 1",
        "neli_last_success_timestamp_seconds 8.5",
        "neli_next_run_timestamp_seconds 10.0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
    }
}
