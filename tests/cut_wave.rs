//! A wave's run (once per wave: `neli-run --group G -- JOB` from cron on
//! every host) starts only once a record naming it is read back (findings
//! C-10): a member that has read its first record back, and so leads, but
//! whose next record cannot reach the topic does not run the wave, and the
//! next owner runs it once. On the dev broker's cluster: partition 0 leads
//! on broker 1, the coordinator is broker 3; the cut falls on the member's
//! first record as leader (`cut-at`), so that it leads on a lease its
//! contending record gave, and the group still hears it. Both tests ran the
//! wave twice before waves' runs were named.

use crate::util::{wait_until, Broker, Group};

/// The runs, a member's name a line.
fn runs(g: &Group) -> Vec<String> {
    neli_proof::detector::read_lines(&g.dir.path().join("runs"))
}

#[test]
fn a_leader_whose_first_record_as_leader_is_cut_off_does_not_run_the_wave_and_the_next_owner_runs_it_once() {
    let g = Group::on(Broker::cluster(3), "cut-wave");
    let job = format!(r#"echo "$NELI_NAME" >> {}"#, g.dir.path().join("runs").display());
    let within = g.broker.timing.takeover();
    // The first record a writes as leader, and all after it, never reach
    // partition 0's leader (what a wrote before did: it leads on it).
    g.broker.event(r#"cut-at a 1 "role":"leading""#);
    let mut a = g.member("a", &[], &["sh", "-c", &job]);
    wait_until(within, "a leads", || a.log().contains("leader: read own heartbeat back"));
    wait_until(within, "the cut falls", || g.broker.event("describe").ends_with("cuts a@1"));
    let mut b = g.member("b", &[], &["sh", "-c", &job]);
    // b runs the wave once a gave partition 0 up (its lease ran out
    // without a record of its own read back). Without the naming, a ran it
    // as it came to lead, and b, finding no trace of it, again.
    wait_until(within * 2, "b runs the wave", || runs(&g).contains(&"b".to_string()));
    assert_eq!(b.wait_exit(within).code(), Some(0), "{}", b.log());
    assert_eq!(runs(&g), ["b"], "--- a:\n{}\n--- b:\n{}", a.log(), b.log());
    assert!(a.log().contains("fenced"), "a fenced at its lease's end:\n{}", a.log());
    // Healed, a reads that its wave's run ended, and exits 0 without
    // running it.
    g.broker.event("heal");
    assert_eq!(a.wait_exit(within).code(), Some(0), "{}", a.log());
    assert!(a.log().contains("this wave's run already ended"), "{}", a.log());
    assert_eq!(runs(&g), ["b"]);
    g.assert_no_overlap();
}

#[test]
fn a_new_owner_whose_first_record_as_leader_is_cut_off_does_not_retry_the_wave_and_the_next_owner_does_once() {
    let g = Group::on(Broker::cluster(3), "cut-wave-next");
    // a's run goes on until it is stopped; a retry ends at once.
    let job = format!(
        r#"echo "$NELI_NAME $NELI_ATTEMPT" >> {}; [ "$NELI_NAME" = a ] && exec sleep 1000; true"#,
        g.dir.path().join("runs").display()
    );
    let within = g.broker.timing.takeover();
    let mut a = g.member("a", &[], &["sh", "-c", &job]);
    wait_until(within, "a runs the wave", || runs(&g) == ["a 1"]);
    let mut b = g.member("b", &[], &["sh", "-c", &job]);
    wait_until(within, "b is a standby", || b.joined_as_standby());
    // a is stopped mid-run (cut short: the next owner runs it again), and b,
    // the next owner, is cut off at its first record as leader.
    g.broker.event(r#"cut-at b 1 "role":"leading""#);
    a.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(a.wait_exit(within).code(), Some(143), "{}", a.log());
    wait_until(within, "b leads", || b.log().contains("leader: read own heartbeat back"));
    let mut c = g.member("c", &[], &["sh", "-c", &job]);
    // c runs the retry once b gave partition 0 up. Without the naming, b
    // ran it as it came to lead, and c, finding no trace of that, again.
    wait_until(within * 2, "c runs the retry", || runs(&g).iter().any(|r| r.starts_with("c ")));
    assert_eq!(c.wait_exit(within).code(), Some(0), "{}", c.log());
    assert_eq!(runs(&g), ["a 1", "c 2"], "--- b:\n{}\n--- c:\n{}", b.log(), c.log());
    g.broker.event("heal");
    assert_eq!(b.wait_exit(within).code(), Some(0), "{}", b.log());
    assert_eq!(runs(&g), ["a 1", "c 2"]);
    g.assert_no_overlap();
}
