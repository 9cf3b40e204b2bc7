//! Who may lead: the standbys' candidacy records, `status` listing them,
//! `yield --to`, `--priority` (issue 29). The real binary on the dev
//! broker, every command under the overlap detector.

use std::time::Instant;

use nix::sys::signal::Signal;

use crate::util::{bin, run, standbys, stays_false, wait_for, wait_until, Group, LONG};

/// Sleepers a, leading, and b, listed as its standby.
fn leader_a_and_standby_b(g: &Group) -> (crate::util::Member, crate::util::Member) {
    let t = g.broker.timing;
    let a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let b = g.member("b", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "status lists b", || standbys(g).len() == 1);
    (a, b)
}

/// The name of the member whose command started last.
fn last_start(g: &Group) -> Option<String> {
    g.starts().last().map(|s| s.0.clone())
}

#[test]
fn status_lists_the_standbys_by_priority_until_they_leave() {
    let g = Group::new("standbys-status");
    let t = g.broker.timing;
    let _a = g.member("a", &["--priority", "1"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let _b = g.member("b", &["--priority", "2"], &["sleep", "1000"]);
    let mut c = g.member("c", &[], &["sleep", "1000"]);
    let both = vec![("b".to_string(), 2), ("c".to_string(), 0)];
    wait_until(t.takeover(), "status lists b and c, the highest priority first", || standbys(&g) == both);
    let (code, text) = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("standby, priority 2: b (host ") && text.contains(" since 20"), "{text}");
    assert!(text.contains("standby, priority 0: c (host ") && text.contains("last seen "), "{text}");
    // A standby that stops says so: gone from the list at once, not once its
    // record has aged out.
    c.signal(Signal::SIGTERM);
    assert_eq!(c.wait_exit(t.takeover()).code(), Some(0), "{}", c.log());
    let (_, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    assert_eq!(standbys(&g), vec![("b".to_string(), 2)], "{out}");
    g.assert_no_overlap();
}

#[test]
fn yield_to_a_member_makes_it_lead_whoever_kafka_assigns() {
    let g = Group::new("yield-to");
    let t = g.broker.timing;
    let members = g.sleepers(&["a", "b", "c"]);
    wait_until(t.takeover(), "someone leads", || g.lock_held());
    wait_until(t.takeover(), "status lists two standbys", || standbys(&g).len() == 2);
    // Each round names a member that does not lead; with two standbys,
    // Kafka assigns partition 0 to the other one about half the time.
    for round in 0..4 {
        let leader = last_start(&g).unwrap();
        let to = ["a", "b", "c"].into_iter().filter(|n| *n != leader).nth(round % 2).unwrap();
        wait_until(t.takeover(), "the other two are standbys", || standbys(&g).len() == 2);
        let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--to", to]);
        assert_eq!(code, 0, "round {round}: {out}");
        assert!(out.contains(&format!("from {leader}")) && out.contains(&format!("to {to}")), "{out}");
        wait_until(t.takeover(), "the target's command starts", || last_start(&g).as_deref() == Some(to));
        let names: Vec<_> = g.starts().iter().map(|s| s.0.clone()).collect();
        assert_eq!(names.len(), round + 2, "only the target started, once: {names:?}");
    }
    g.assert_no_overlap();
    drop(members);
}

#[test]
fn yield_to_a_member_that_cannot_take_over_is_refused() {
    let g = Group::new("yield-to-refused");
    let (_a, _b) = leader_a_and_standby_b(&g);
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--to", "z"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("z is not a live member of group") && out.contains("may lead: b"), "{out}");
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--to", "a"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("a leads group") && out.contains("already"), "{out}");
    // An empty name is a usage error, not a member's name (audit D13).
    for flag in ["--to", "--name"] {
        let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, flag, ""]);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains(&format!("{flag} is empty: give the member")), "{out}");
    }
    assert_eq!(g.starts().len(), 1, "nothing moved");
    let (code, out) = run(&["-b", &g.broker.address, "-g", &g.name, "--priority", "101", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--priority") && out.contains("0..=100"), "{out}");
}

/// `neli-run drain` of the single leader: its command stops, a standby
/// leads, and the drained member stays up, out of the group, until
/// `undrain`; `yield --to` it is refused meanwhile. A drain is the running
/// process's: the same member started again joins as any does.
#[test]
fn a_drained_leader_hands_over_stays_up_and_a_restart_ends_the_drain() {
    let g = Group::new("drain-leader");
    let t = g.broker.timing;
    let (mut a, b) = leader_a_and_standby_b(&g);
    let kafka = ["-b", g.broker.address.as_str(), "-g", g.name.as_str()];
    let (code, out) = run(&[&["drain", ""][..], &kafka].concat());
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("the member to drain is empty"), "{out}");
    let (code, out) = run(&[&["drain", "a"][..], &kafka].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("a (host") && out.contains("drained (offset"), "{out}");
    // Said once a's command is gone (its exit is in a's log before its
    // drained candidacy is written).
    assert!(a.log().contains("child exited"), "said before a's command was gone:\n{}", a.log());
    wait_until(t.takeover(), "b leads", || last_start(&g).as_deref() == Some("b") && g.lock_held());
    assert!(!a.exited(), "a drained member stays up:\n{}", a.log());
    assert!(a.log().contains(r#"why="drained""#), "{}", a.log());
    let (code, out) = run(&[&["yield", "--to", "a"][..], &kafka].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("a is drained"), "{out}");
    // b alone may lead: draining it is refused.
    let (code, out) = run(&[&["drain", "b"][..], &kafka].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no other member may take over from b (") && out.contains("--force"), "{out}");
    let (code, out) = run(&[&["undrain", "a"][..], &kafka].concat());
    assert_eq!(code, 0, "{out}\n{}", a.log());
    assert!(out.contains("undrained (offset") && out.contains("back in the group"), "{out}");
    wait_until(t.takeover(), "a is a standby again", || standbys(&g).iter().any(|(n, _)| n == "a"));
    let (code, out) = run(&[&["undrain", "a"][..], &kafka].concat());
    assert_eq!((code, out.contains("is not drained: nothing to do")), (0, true), "{out}");
    // Drained, then started again: the new process joins, and b's stop
    // hands over to it.
    assert_eq!(run(&[&["drain", "a"][..], &kafka].concat()).0, 0);
    a.signal(Signal::SIGTERM);
    a.wait_exit(t.takeover());
    let _a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "the new a is a standby", || standbys(&g).iter().any(|(n, _)| n == "a"));
    drop(b);
    wait_until(t.takeover(), "the new a leads", || last_start(&g).as_deref() == Some("a") && g.lock_held());
    g.assert_no_overlap();
}

/// A drain written while the leader stands aside, after it has left the
/// group and before its watcher (idle while it held the control partition,
/// whose records the group's consumer read) reads again, is heard: the
/// watcher, and the consumer watching from outside the group, go on from
/// the first record the member has not read. (From the end, such a drain
/// was lost in 4 runs of 10; `kafka::context`'s tests pin where each
/// starts.) The leader is frozen the moment it says it left, which holds
/// that moment open.
#[test]
fn a_drain_written_as_the_leader_leaves_the_group_is_heard() {
    let g = Group::new("drain-leaving");
    let t = g.broker.timing;
    let (a, b) = leader_a_and_standby_b(&g);
    let mut yielding = std::process::Command::new(bin())
        .args(["yield", "-b", &g.broker.address, "-g", &g.name])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Looked at every millisecond: the moment lasts up to the watcher's
    // poll (250 ms).
    let asked = Instant::now();
    while !a.log().contains("left the group; waking the others") {
        assert!(asked.elapsed() < t.takeover(), "a never left the group:\n{}", a.log());
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    a.signal(Signal::SIGSTOP);
    g.produce(&neli_run::for_tests::DrainRequest::new("a".into(), true).encode());
    a.signal(Signal::SIGCONT);
    wait_until(t.takeover(), "a hears the drain", || a.log().contains("drained by"));
    assert!(yielding.wait().unwrap().success());
    wait_until(t.takeover(), "b leads", || last_start(&g).as_deref() == Some("b") && g.lock_held());
    drop(b);
    g.assert_no_overlap();
}

#[test]
fn the_live_member_of_highest_priority_leads_when_the_leader_stops() {
    let g = Group::new("priorities");
    let t = g.broker.timing;
    let mut p3 = g.member("p3", &["--priority", "3"], &["sleep", "1000"]);
    wait_until(t.takeover(), "p3 leads", || g.lock_held());
    // Named so that Kafka's choice and the priorities disagree: among
    // members that own nothing, librdkafka's sticky assignor picks the
    // smallest member id, which starts with the name (p1 < p2 < p3).
    let p1 = g.member("p1", &["--priority", "1"], &["sleep", "1000"]);
    wait_until(t.takeover(), "status lists p1", || standbys(&g).len() == 1);
    let mut p2 = g.member("p2", &["--priority", "2"], &["sleep", "1000"]);
    let standing = vec![("p2".to_string(), 2), ("p1".to_string(), 1)];
    wait_until(t.takeover(), "status lists p2 and p1", || standbys(&g) == standing);

    // Whichever of p2 and p1 Kafka assigns, p2 leads: within 2 s (the goal;
    // generous here, for a loaded machine).
    p3.signal(Signal::SIGTERM);
    p3.wait_exit(t.takeover());
    let stopped = Instant::now();
    wait_until(t.takeover(), "p2's command starts", || last_start(&g).as_deref() == Some("p2"));
    let took = stopped.elapsed();
    assert_eq!(g.starts().len(), 2, "p1 never started: {:?}", g.starts());
    eprintln!("p2 led {took:?} after p3 exited");

    // p3 comes back: p2 keeps leading (no --preempt), and p3 leads once p2 stops.
    let _p3 = g.member("p3", &["--priority", "3"], &["sleep", "1000"]);
    let standing = vec![("p3".to_string(), 3), ("p1".to_string(), 1)];
    wait_until(t.takeover(), "status lists p3 and p1", || standbys(&g) == standing);
    assert!(stays_false(t.session, || g.starts().len() > 2), "p3 took over by surprise: {:?}", g.starts());
    p2.signal(Signal::SIGTERM);
    p2.wait_exit(t.takeover());
    wait_until(t.takeover(), "p3's command starts", || last_start(&g).as_deref() == Some("p3"));
    assert_eq!(g.starts().len(), 3, "p1 never started: {:?}", g.starts());
    g.assert_no_overlap();
    drop(p1);
}

#[test]
fn a_member_that_never_leads_watches_is_listed_and_never_runs() {
    let g = Group::new("never-lead");
    let t = g.broker.timing;
    // Started before the topic exists: it waits for it.
    let mut w = g.member("w", &["--never-lead"], &["sleep", "1000"]);
    let mut a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    wait_until(t.takeover(), "status lists w", || standbys(&g) == vec![("w".to_string(), 0)]);
    let (_, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(json["standbys"][0]["never_lead"], true, "{json}");
    let (_, text) = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    assert!(text.contains("watcher: w (host "), "{text}");
    wait_until(t.takeover(), "w logs who leads", || w.log().contains("the group has a leader leader=a"));
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--to", "w"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("w runs with --never-lead"), "{out}");
    let (code, out) = run(&["drain", "-b", &g.broker.address, "-g", &g.name, "w"]);
    assert_eq!((code, out.contains("w (host")), (0, true), "{out}");
    assert!(out.contains("runs with --never-lead: it runs nothing, and has nothing to drain"), "{out}");

    // The leader goes: w never takes over, it says so.
    a.signal(Signal::SIGTERM);
    a.wait_exit(t.takeover());
    wait_until(t.takeover(), "w logs that nobody leads", || w.log().contains("the group has no fresh leader"));
    assert!(stays_false(t.session * 2, || g.starts().len() > 1), "w ran its command: {:?}", g.starts());
    w.signal(Signal::SIGTERM);
    assert_eq!(w.wait_exit(t.takeover()).code(), Some(0), "{}", w.log());
    assert_eq!(standbys(&g), vec![], "withdrawn at once");
    g.assert_no_overlap();

    for flag in [
        &["--priority", "2"][..],
        &["--every", "1m"],
        &["--acquire-timeout", "5s"],
        &["--health-cmd", "true"],
        &["--warm"],
        &["--on-lead", "true"],
    ] {
        let args = [&["-b", &g.broker.address, "-g", &g.name, "--never-lead"][..], flag, &["--", "true"]].concat();
        let (code, out) = run(&args);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains("'--never-lead' cannot be used with") && out.contains(flag[0]), "{out}");
    }
}

/// The candidacies `name` wrote on the group's partition 0, as the time
/// each says it was written (wall-clock ms), oldest first: the partition
/// read up to its end when asked.
fn candidacies_of(g: &Group, name: &str) -> Vec<u64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    let topic = format!("{}.neli", g.name);
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &g.broker.address)
        .set("group.id", format!("{}-reader", g.name))
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer");
    let Ok((_, end)) = consumer.fetch_watermarks(&topic, 0, LONG) else { return Vec::new() };
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Beginning).unwrap();
    consumer.assign(&tpl).expect("assigned");
    let (mut written, mut next) = (Vec::new(), 0);
    let until = Instant::now() + LONG;
    while next < end && Instant::now() < until {
        if let Some(Ok(m)) = consumer.poll(std::time::Duration::from_millis(100)) {
            next = m.offset() + 1;
            let json: serde_json::Value = serde_json::from_slice(m.payload().unwrap_or_default()).unwrap_or_default();
            if json["type"] == "candidacy" && json["name"] == name && json["leaving"] != true {
                written.extend(json["at_ms"].as_u64());
            }
        }
    }
    written
}

/// A member that never leads writes its candidacy once an interval (2 ×
/// --heartbeat-interval), as a standby does, and not at every turn of its
/// loop: counted on the topic by the times the records say they were
/// written, so a slow machine delays them but never packs them closer on
/// average.
#[test]
fn a_member_that_never_leads_writes_its_candidacy_once_an_interval() {
    let g = Group::new("never-lead-cadence");
    let t = g.broker.timing;
    let _a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let _w = g.member("w", &["--never-lead"], &["sleep", "1000"]);
    let mut written = Vec::new();
    wait_until(t.takeover() * 2, "w wrote 10 candidacies", || {
        written = candidacies_of(&g, "w");
        written.len() >= 10
    });
    let interval = 2 * t.heartbeat.as_millis() as u64;
    let span = written.last().unwrap() - written.first().unwrap();
    let average = span / (written.len() as u64 - 1);
    assert!(
        average >= interval / 2,
        "a candidacy every {average} ms on average, the interval {interval} ms: {written:?}"
    );
}

#[test]
fn preempt_hands_over_to_a_member_of_higher_priority_once_it_is_live() {
    let g = Group::new("preempt");
    let t = g.broker.timing;
    let _a = g.member("a", &["--priority", "1", "--preempt"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    // Named to sort first: Kafka gives it partition 0 when a leaves, and it
    // hands it on to b (the hand-over names b).
    let _a0 = g.member("a0", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "status lists a0", || standbys(&g).len() == 1);
    assert!(stays_false(t.session, || g.starts().len() > 1), "a lower priority took over: {:?}", g.starts());
    let _b = g.member("b", &["--priority", "2"], &["sleep", "1000"]);
    wait_until(t.takeover(), "b's command starts", || last_start(&g).as_deref() == Some("b"));
    assert_eq!(g.starts().len(), 2, "a0 never started: {:?}", g.starts());
    g.assert_no_overlap();
}

/// Regression: on a broker slow to end the rebalance a leave begins (tansu
/// 0.6 pauses 3 s; Kafka waits for its slowest member), the member that
/// handed over stood aside only as long as a candidacy counts, came back
/// within the pause, was given partition 0 again and handed it on again,
/// round after round: b never led. It now stands aside while b is live.
#[test]
fn a_hand_over_reaches_its_member_on_a_broker_slow_to_rebalance_after_a_leave() {
    let broker = crate::util::Broker::dev_with("127.0.0.1", &["--leave-pause", "4s"]);
    let g = Group::on(broker, "handover-slow");
    let t = g.broker.timing;
    let _a = g.member("a", &["--preempt"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let _b = g.member("b", &["--priority", "2"], &["sleep", "1000"]);
    wait_until(t.takeover() * 2, "b's command starts", || last_start(&g).as_deref() == Some("b"));
    assert_eq!(g.starts().len(), 2, "a's command ran once, then b's: {:?}", g.starts());
    g.assert_no_overlap();
}

/// The other side of the rule above: a member that handed over to one that
/// dies before it leads is back once the dead one's candidacies lapse (1.5 s
/// here), not after a yield's 3 session timeouts (30 s here). The broker
/// holds the rebalance 6 s, so b dies before it is given partition 0.
#[test]
fn a_hand_over_to_a_member_that_dies_before_it_leads_ends_once_its_candidacies_lapse() {
    let mut broker = crate::util::Broker::dev_with("127.0.0.1", &["--leave-pause", "6s"]);
    broker.timing = broker.timing.with_session(std::time::Duration::from_secs(10));
    let g = Group::on(broker, "handover-dead");
    let t = g.broker.timing;
    let a = g.member("a", &["--preempt"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let b = g.member("b", &["--priority", "2"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a hands over to b", || a.log().contains("left the group"));
    b.signal(Signal::SIGKILL);
    let killed = Instant::now();
    // The pause, b's session (10 s) and a's rejoin: about 10 s; a yield's
    // stand-aside alone would be 30 s.
    wait_until(std::time::Duration::from_secs(60), "a leads again", || g.starts().len() == 2);
    let took = killed.elapsed();
    assert!(took < std::time::Duration::from_secs(25), "a led again {took:?} after b died: {}", a.log());
    assert_eq!(last_start(&g).as_deref(), Some("a"), "{:?}", g.starts());
    g.assert_no_overlap();
}

/// Regression (audit D13): `yield --to c` with c dead (its candidacy still
/// live) waited out its whole --timeout although the old leader led again
/// long before. It says so as soon as a leads under a new token.
#[test]
fn yield_to_a_member_that_died_returns_once_the_old_leader_leads_again() {
    let g = Group::new("yield-to-dead");
    let t = g.broker.timing;
    let _a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    // c's candidacy counts for 3 of its intervals (2 heartbeat intervals
    // each): 12 s, so that the yield takes it for live after its death.
    let slow = ["--session-timeout", "10s", "--heartbeat-deadline", "8s", "--heartbeat-interval", "2s"];
    let c = g.member("c", &slow, &["sleep", "1000"]);
    wait_until(t.takeover(), "status lists c", || standbys(&g).len() == 1);
    c.signal(Signal::SIGKILL);
    /// Killed if the test fails: it would wait 10 minutes.
    struct Asked(Option<std::process::Child>);
    impl Drop for Asked {
        fn drop(&mut self) {
            if let Some(child) = self.0.as_mut() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    let mut asked = Asked(Some(
        std::process::Command::new(bin())
            .args(["yield", "-b", &g.broker.address, "-g", &g.name, "--to", "c", "--timeout", "10m"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("neli-run yield"),
    ));
    let mut done = None;
    wait_until(LONG + t.takeover(), "yield returns once a leads again", || {
        done = asked.0.as_mut().and_then(|c| c.try_wait().expect("wait for yield"));
        done.is_some()
    });
    let out = asked.0.take().expect("yield").wait_with_output().expect("yield's output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(done.and_then(|s| s.code()), Some(1), "{text}");
    assert!(text.contains("no other member took over: a leads again (token "), "{text}");
    assert!(text.contains("c did not take partition 0"), "{text}");
    wait_until(t.takeover(), "a's command runs again", || g.starts().len() == 2 && g.lock_held());
    g.assert_no_overlap();
}

/// `status --json`'s hot standbys (the list its owner names), and each
/// standby's mark: (name, hot).
fn hot_set(g: &Group) -> (Vec<String>, Vec<(String, Option<bool>)>) {
    let (_, out) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    let names = json["hot_standbys"]["names"].as_array().cloned().unwrap_or_default();
    let names = names.iter().map(|n| n.as_str().unwrap_or("?").to_string()).collect();
    let marks = json["standbys"].as_array().cloned().unwrap_or_default();
    let marks = marks.iter().map(|s| (s["name"].as_str().unwrap_or("?").to_string(), s["hot"].as_bool())).collect();
    (names, marks)
}

/// docs/hot-set.md, slice 1: the leader names the --hot-standbys best
/// standbys by priority, `status` shows them hot and the rest cold, and a
/// hot standby killed is replaced by the best cold one. Every member stays
/// in the group meanwhile.
#[test]
fn status_shows_the_best_standbys_hot_and_a_cold_one_takes_a_dead_ones_place() {
    let g = Group::new("hot-set");
    let t = g.broker.timing;
    let member = |name: &str, priority: &str| {
        g.member(name, &["--priority", priority, "--hot-standbys", "2"], &["sleep", "1000"])
    };
    // a leads before the others join: it keeps leading (no --preempt).
    let _a = member("a", "1");
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let (b, _c, mut d) = (member("b", "2"), member("c", "3"), member("d", "4"));
    let want = |hot: &[&str], marks: &[(&str, bool)]| {
        let hot = hot.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let marks = marks.iter().map(|(n, h)| (n.to_string(), Some(*h))).collect::<Vec<_>>();
        (hot, marks)
    };
    let first = want(&["d", "c"], &[("d", true), ("c", true), ("b", false)]);
    let mut seen = hot_set(&g);
    let named = wait_for(t.takeover(), || {
        seen = hot_set(&g);
        seen == first
    });
    assert!(named, "d and c hot, b cold: {seen:?}");
    // Each member reads the list too (its watcher, into its core).
    wait_until(t.takeover(), "b reads that it is cold", || b.log().contains("a cold standby"));
    let (code, text) = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("hot standbys: d, c (--hot-standbys 2)"), "{text}");
    let line = |name: &str| text.lines().find(|l| l.contains(&format!(": {name} (host "))).unwrap_or_default();
    assert!(line("d").starts_with("  standby, priority 4: d") && line("d").ends_with(" ago, hot"), "{text}");
    assert!(line("b").ends_with(" ago, cold (not among the hot standbys)"), "{text}");
    // d dies without a word: once its candidacy lapses, b takes its place.
    d.signal(Signal::SIGKILL);
    let _ = d.wait_exit(t.takeover());
    let next = want(&["c", "b"], &[("c", true), ("b", true)]);
    let named = wait_for(t.takeover(), || {
        seen = hot_set(&g);
        seen == next
    });
    assert!(named, "c and b hot once d is gone: {seen:?}");
    let hot_again = || b.log().rsplit("a cold standby").next().is_some_and(|after| after.contains("a hot standby"));
    wait_until(t.takeover(), "b reads that it is hot again", hot_again);
    assert_eq!(g.starts().len(), 1, "a leads throughout: {:?}", g.starts());
    g.assert_no_overlap();
}

/// A standby stopped with SIGTERM leaves the group: its LeaveGroup reaches
/// the broker, with a health check or without. A close alone sent none (the
/// dev broker counted no LeaveGroup from either), so the group's next
/// rebalance waited out the gone member's session: in issue 65's soak a
/// standby restarted during another's join was listed 4 to 6 s after its
/// check passed, and a handover meanwhile would have waited as long.
#[test]
fn a_standby_stopped_by_sigterm_sends_its_leave_group() {
    let g = Group::on(crate::util::Broker::cluster(1), "standby-leave");
    let t = g.broker.timing;
    let _a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let ok = std::env::temp_dir().join(format!("neli-standby-leave-{}", std::process::id()));
    std::fs::write(&ok, "").expect("c's health file");
    let check = format!("test -f {}", ok.display());
    let mut b = g.member("b", &[], &["sleep", "1000"]);
    let mut c = g.member("c", &["--health-cmd", &check, "--health-interval", "100ms"], &["sleep", "1000"]);
    wait_until(t.takeover(), "status lists b and c", || standbys(&g).len() == 2);
    for m in [&mut b, &mut c] {
        m.signal(Signal::SIGTERM);
        assert!(m.wait_exit(LONG).success(), "{}", m.log());
    }
    let _ = std::fs::remove_file(&ok);
    let requests = g.broker.event("requests");
    for m in [&b, &c] {
        let leaves = requests.lines().find_map(|l| l.strip_prefix(&format!("{} LeaveGroup ", m.name)));
        assert_eq!(leaves, Some("1"), "{} sent no LeaveGroup; the broker counted:\n{requests}\n{}", m.name, m.log());
    }
}
