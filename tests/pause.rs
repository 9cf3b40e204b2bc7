//! `neli-run pause` and `resume`: a pause every member honours, the one
//! that comes to own partition 0 later too, shown by `status` and /metrics.

use nix::sys::signal::Signal;

use crate::metrics::{free_addr, get};
use crate::util::{run, stays_false, wait_until, Group, Member};

fn status(g: &Group) -> serde_json::Value {
    let (_, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    serde_json::from_str(out.trim()).unwrap_or(serde_json::Value::Null)
}

/// `neli-run pause` (with `extra`) or `resume` on the group: status and output.
fn ask(g: &Group, what: &str, extra: &[&str]) -> (i32, String) {
    let mut args = vec![what, "-b", &g.broker.address, "-g", &g.name];
    args.extend(extra);
    run(&args)
}

/// Waits until status shows `member` leading, fresh, and its own record
/// saying the group is paused and its command does not run. A leader that
/// did not honour it would have started its command in the step that wrote
/// that record; then no start follows for two session timeouts either.
fn leads_paused_without_starting(g: &Group, member: &Member, starts: usize) {
    let t = g.broker.timing;
    wait_until(t.takeover(), &format!("status shows {} leading under the pause", member.name), || {
        let json = status(g);
        // (`leader_command_running` is read from the leader's own record.)
        let said = json["paused"]["leader_command_running"] == false;
        json["fresh"] == true && json["leader"]["name"] == member.name.as_str() && said
    });
    assert!(stays_false(t.session * 2, || g.starts().len() > starts), "started while paused: {:?}", g.starts());
    assert!(!g.lock_held(), "a command runs while paused");
    let log = member.log();
    assert!(log.contains("the group is paused, by user ") && log.contains("(pid "), "who asked is logged:\n{log}");
}

#[test]
fn a_pause_outlives_a_graceful_handover_and_a_resume_starts_the_command() {
    let g = Group::new("pause-handover");
    let t = g.broker.timing;
    let mut a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a runs its command", || g.lock_held() && g.starts().len() == 1);
    let b = g.member("b", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "b is a standby", || b.joined_as_standby());
    wait_until(t.takeover(), "status sees a leading", || status(&g)["fresh"] == true);
    assert!(status(&g)["paused"].is_null());

    // Without --stop a's command runs on.
    let (code, out) = ask(&g, "pause", &[]);
    assert_eq!(code, 0, "{out}\n{}", a.log());
    assert!(out.contains("acknowledged by a") && out.contains("does not start again"), "{out}");
    assert!(g.lock_held(), "pause without --stop stopped the command");
    let json = status(&g);
    assert_eq!(json["paused"]["stop"], false, "{json}");
    // Who asked: this test's user.
    assert_eq!(json["paused"]["by"]["uid"].as_u64(), Some(u64::from(nix::unistd::getuid().as_raw())), "{json}");
    let (_, text) = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    assert!(text.contains("paused since 20") && text.contains(" by user "), "{text}");

    // Other writers' records push the request out of the backlog a new
    // owner reads (64 records here): only a's later records, which carry
    // the pause, can tell b.
    for _ in 0..80 {
        g.produce(br#"{"type":"noise"}"#);
    }
    let written = std::time::Instant::now();
    wait_until(t.takeover(), "a writes a record after the others", || {
        status(&g)["leader"]["heartbeat_age_ms"].as_u64().is_some_and(|age| age < written.elapsed().as_millis() as u64)
    });
    // a leaves: b comes to own partition 0 long after the request, and
    // leads without starting the command.
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(t.takeover()).code(), Some(143), "{}", a.log());
    leads_paused_without_starting(&g, &b, 1);

    let (code, out) = ask(&g, "resume", &[]);
    assert_eq!(code, 0, "{out}\n{}", b.log());
    assert!(out.contains("acknowledged by b"), "{out}");
    wait_until(t.takeover(), "b starts the command", || g.starts().len() == 2 && g.lock_held());
    assert_eq!(g.starts()[1].0, "b");
    assert!(status(&g)["paused"].is_null());
    assert!(b.log().contains("the group is resumed, by user "), "{}", b.log());
    g.assert_no_overlap();
}

#[test]
fn pause_stop_stops_the_command_and_the_leader_keeps_leading_without_it() {
    let g = Group::new("pause-stop");
    let t = g.broker.timing;
    let addr = free_addr();
    // --restart never: the stop must not end the run (nor neli-run).
    let a = g.member("a", &["--metrics-addr", &addr], &["sleep", "1000"]);
    wait_until(t.takeover(), "a runs its command", || g.lock_held() && g.starts().len() == 1);
    let metric = |line: &str| get(&addr, "/metrics").is_some_and(|(_, text)| text.lines().any(|l| l == line));
    assert!(metric("neli_paused 0"));

    let (code, out) = ask(&g, "pause", &["--stop"]);
    assert_eq!(code, 0, "{out}\n{}", a.log());
    assert!(out.contains("its command is stopped"), "{out}");
    // Acknowledged once its process group is gone.
    assert!(!g.lock_held(), "the command still runs after the acknowledgement:\n{}", a.log());
    assert!(a.log().contains("with --stop: stopping the command"), "{}", a.log());
    let (_, text) = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    assert!(text.contains("the leader's command is stopped (--stop)"), "{text}");
    assert!(text.contains("leader a"), "a leads on: {text}");
    wait_until(t.takeover(), "/metrics says paused", || metric("neli_paused 1"));
    assert!(stays_false(t.session * 2, || g.starts().len() > 1), "started while paused: {:?}", g.starts());

    // The single leader is role 0: --role names no other.
    let (code, out) = ask(&g, "resume", &["--role", "1"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("has no role 1: it runs a single leader (role 0)"), "{out}");
    let (code, out) = ask(&g, "resume", &["--role", "0"]);
    assert_eq!(code, 0, "{out}\n{}", a.log());
    wait_until(t.takeover(), "a starts its command again", || g.starts().len() == 2 && g.lock_held());
    wait_until(t.takeover(), "/metrics says not paused", || metric("neli_paused 0"));
    g.assert_no_overlap();
    drop(a);
    g.assert_no_orphan();
}

#[test]
fn a_pause_written_while_no_member_runs_is_honoured_by_the_next_one() {
    let g = Group::new("pause-early");
    let t = g.broker.timing;
    // No topic yet: nothing to pause, said so.
    let (code, out) = ask(&g, "pause", &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no topic") && out.contains("create the topic first") && out.lines().count() == 1, "{out}");

    let mut a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a runs its command", || g.lock_held() && g.starts().len() == 1);
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(t.takeover()).code(), Some(143), "{}", a.log());

    // Nobody owns partition 0 to acknowledge: 1, and the pause stands.
    let (code, out) = ask(&g, "pause", &["--timeout", "2s"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no owner of partition 0 acknowledged") && out.contains("honours it"), "{out}");
    let b = g.member("b", &[], &["sleep", "1000"]);
    leads_paused_without_starting(&g, &b, 1);

    let (code, out) = ask(&g, "resume", &[]);
    assert_eq!(code, 0, "{out}\n{}", b.log());
    wait_until(t.takeover(), "b starts the command", || g.starts().len() == 2 && g.lock_held());
    g.assert_no_overlap();
}

#[test]
fn pause_and_resume_refuse_bad_input_with_a_usage_error() {
    let (code, out) = run(&["pause", "-b", "127.0.0.1:1", "-g", "g", "--timeout", "2d"]);
    assert_eq!((code, out.trim()), (2, "error: --timeout must be at most 24h"));
    let (code, out) = run(&["resume", "-b", "127.0.0.1:1", "-g", "g", "--stop"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("unexpected argument '--stop'"), "{out}");
    let (code, out) = run(&["pause", "-b", "127.0.0.1:1"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--group"), "{out}");
}
