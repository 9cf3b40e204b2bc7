//! A scheduled run starts only once a record naming it is read back
//! (findings C-10): a member cut off from its partition's leader, its lease
//! still good, does not run the next due time, and the next owner runs it
//! once. On the dev broker's cluster: partition 0 leads on broker 1, the
//! coordinator is broker 3, so a member cut off from broker 1 keeps the
//! partition in the group until it fences and gives it back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::util::{wait_until, Broker, Group};

/// A long lease, so that the cut comes well before the run is named (a
/// second ahead of its due time) and well within the lease: without the
/// naming, the cut member would start the run. The session that allows it.
const LONG_LEASE: [&str; 4] = ["--session-timeout", "12s", "--heartbeat-deadline", "8s"];
const PERIOD_MS: u64 = 10_000;

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as u64
}

/// The runs as "DUE NAME" lines.
fn runs(g: &Group) -> Vec<String> {
    neli_proof::detector::read_lines(&g.dir.path().join("runs"))
}

#[test]
fn a_leader_cut_off_before_a_due_time_does_not_run_it_and_the_next_owner_runs_it_once() {
    let g = Group::on(Broker::cluster(3), "cut-due");
    let job = format!(r#"echo "$NELI_DUE $NELI_NAME" >> {}"#, g.dir.path().join("runs").display());
    let flags: Vec<&str> = LONG_LEASE.iter().copied().chain(["--every", "10s", "--missed", "all"]).collect();
    let a = g.member("a", &flags, &["sh", "-c", &job]);
    wait_until(g.broker.timing.takeover(), "a leads", || a.log().contains("leader: read own heartbeat back"));
    let b = g.member("b", &flags, &["sh", "-c", &job]);
    wait_until(g.broker.timing.takeover(), "b is a standby", || b.joined_as_standby());
    // A run on record, so that the due time after it counts as missed
    // (with none, a new owner starts from the next due time).
    let period = Duration::from_millis(PERIOD_MS);
    wait_until(g.broker.timing.takeover() + period, "a runs a due time", || runs(&g).iter().any(|l| l.ends_with(" a")));
    // The next due time at least 6 s away; the cut 4 s before it (the fault
    // is placed on the clock: nothing is hoped for by waiting).
    let due = (wall_ms() + 6_000).div_ceil(PERIOD_MS) * PERIOD_MS;
    std::thread::sleep(Duration::from_millis(due - 4_000 - wall_ms()));
    g.broker.event("cut a 1");
    let cut_at = wall_ms();
    let due_s = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(due)).to_string();
    let ran = |who: &str| runs(&g).iter().filter(|l| **l == format!("{due_s} {who}")).count();
    let waited = std::time::Instant::now();
    while ran("b") == 0 && waited.elapsed() < g.broker.timing.takeover() * 3 {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ran("b") > 0, "b did not run {due_s}: {:?}\n--- a:\n{}\n--- b:\n{}", runs(&g), a.log(), b.log());
    g.broker.event("heal");
    assert!(cut_at + 3_000 <= due, "the cut came {} ms before the due time", due - cut_at);
    assert_eq!((ran("a"), ran("b")), (0, 1), "{:?}\n{}", runs(&g), a.log());
    assert!(a.log().contains("fenced"), "a fenced at its lease's end:\n{}", a.log());
    g.assert_no_overlap();
}
