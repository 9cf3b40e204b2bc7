//! Cold standbys (docs/hot-set.md, slice 2): a member the leader's hot
//! list leaves out leaves the consumer group and comes back when a list
//! names it or when no live leader is heard. The real binary on the dev
//! broker, whose count of each client's group requests (`requests`) says
//! who is in the group: a member out of it sends no coordinator Heartbeat.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;

use crate::util::{run, stays_false, wait_until, Broker, Group, Member};

/// How many requests of `api` the dev broker has had from `member`.
fn requests(g: &Group, member: &str, api: &str) -> u64 {
    let lines = g.broker.event("requests");
    let prefix = format!("{member} {api} ");
    lines.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// Whether `member` is out of the group: it sent its LeaveGroup, and no
/// coordinator Heartbeat for four of its intervals.
fn out_of_the_group(g: &Group, member: &str) -> bool {
    let beats = requests(g, member, "Heartbeat");
    let window = g.broker.timing.coordinator_heartbeat * 4;
    requests(g, member, "LeaveGroup") > 0 && stays_false(window, || requests(g, member, "Heartbeat") != beats)
}

/// Whether `member` is in the group: its coordinator Heartbeats go on.
fn in_the_group(g: &Group, member: &str) -> bool {
    let beats = requests(g, member, "Heartbeat");
    !stays_false(g.broker.timing.coordinator_heartbeat * 4, || requests(g, member, "Heartbeat") > beats)
}

/// `a` (priority 1) leads; b, c and d (priorities 2 to 4) join with
/// `--hot-standbys 1`: d is hot, b and c cold, each said in its log.
pub fn leader_a_hot_d_cold_b_and_c(g: &Group) -> (Member, Member, Member, Member) {
    let t = g.broker.timing;
    let member = |name: &str, priority: &str| {
        g.member(name, &["--priority", priority, "--hot-standbys", "1"], &["sleep", "1000"])
    };
    let a = member("a", "1");
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let (b, c, d) = (member("b", "2"), member("c", "3"), member("d", "4"));
    for m in [&b, &c] {
        wait_until(t.takeover(), &format!("{} is a cold standby", m.name), || {
            m.log().contains("a cold standby: leaving the group")
        });
    }
    (a, b, c, d)
}

#[test]
fn cold_standbys_leave_the_group_while_the_hot_one_stays_and_the_leader_runs_on() {
    let g = Group::on(Broker::cluster(1), "cold-leave");
    let t = g.broker.timing;
    let (_a, _b, _c, _d) = leader_a_hot_d_cold_b_and_c(&g);
    for cold in ["b", "c"] {
        wait_until(t.takeover(), &format!("{cold} is out of the group"), || out_of_the_group(&g, cold));
    }
    assert!(in_the_group(&g, "d"), "d, hot, stays in: {}", g.broker.event("requests"));
    assert!(in_the_group(&g, "a"), "the leader stays in");
    assert_eq!(g.starts().len(), 1, "a leads throughout: {:?}", g.starts());
    assert!(g.lock_held(), "a's command runs on");
    g.assert_no_overlap();
}

#[test]
fn a_cold_standby_is_invited_when_the_hot_one_takes_over_from_a_dead_leader() {
    let g = Group::on(Broker::cluster(1), "cold-invite");
    let t = g.broker.timing;
    let (mut a, _b, c, _d) = leader_a_hot_d_cold_b_and_c(&g);
    wait_until(t.takeover(), "c is out of the group", || out_of_the_group(&g, "c"));
    a.signal(Signal::SIGKILL);
    let _ = a.wait_exit(t.takeover());
    wait_until(t.takeover(), "d, the hot standby, leads", || g.starts().last().is_some_and(|s| s.0 == "d"));
    // d's list names c now (K 1): c joins. d names it once it has read the
    // roster, where c's candidacy is (3 candidacy intervals, 1.5 s here),
    // not a roster writer's period later (30 intervals, 15 s), as it would
    // if it waited it out.
    let invited =
        crate::util::wait_for(Duration::from_secs(10), || c.log().contains("named a hot standby: joining the group"));
    assert!(invited, "c is invited within 10 s of d leading\nc: {}\nd: {}", c.log(), _d.log());
    wait_until(t.takeover(), "c is in the group", || in_the_group(&g, "c"));
    assert!(out_of_the_group(&g, "b"), "b stays cold: {}", g.broker.event("requests"));
    g.assert_no_overlap();
}

#[test]
fn cold_standbys_join_and_one_leads_when_the_leader_and_the_hot_standby_die_together() {
    let g = Group::on(Broker::cluster(1), "cold-stranded");
    let t = g.broker.timing;
    let (mut a, b, c, mut d) = leader_a_hot_d_cold_b_and_c(&g);
    wait_until(t.takeover(), "b is out of the group", || out_of_the_group(&g, "b"));
    wait_until(t.takeover(), "c is out of the group", || out_of_the_group(&g, "c"));
    a.signal(Signal::SIGKILL);
    d.signal(Signal::SIGKILL);
    let _ = (a.wait_exit(t.takeover()), d.wait_exit(t.takeover()));
    // Nobody writes the list: a cold member notices the silence and joins
    // (each checks on its own that it has read all of partition 0: the
    // first to lead may invite the other before it notices).
    wait_until(t.takeover(), "b or c hears the silence", || {
        [&b, &c].iter().any(|m| m.log().contains("no live record of the owner of partition 0 read: joining the group"))
    });
    wait_until(t.takeover() * 2, "b or c leads", || g.starts().last().is_some_and(|s| s.0 == "b" || s.0 == "c"));
    g.assert_no_overlap();
}

/// The hot standby unhealthy (out of the group, saying so every interval)
/// when the leader dies: its candidacies say it will not take over, so they
/// are no word of the hot set's, and a cold member joins and leads. A
/// 100-member soak (seed 7375) saw a named hot standby's health flap strand
/// the group for a minute: each of its unhealthy candidacies undid the cold
/// members' evidence that the hot set was silent, until it was healthy again.
#[test]
fn cold_standbys_lead_when_the_leader_dies_and_the_hot_standby_is_unhealthy() {
    let g = Group::on(Broker::cluster(1), "cold-unhealthy");
    let t = g.broker.timing;
    let ok = g.dir.path().join("d.ok");
    std::fs::write(&ok, "").expect("d's health file");
    let check = format!("test -f {}", ok.display());
    let health =
        ["--health-cmd", &check, "--health-interval", "200ms", "--health-timeout", "1s", "--health-retries", "2"];
    let member = |name: &str, priority: &str, extra: &[&str]| {
        let flags: Vec<&str> =
            ["--priority", priority, "--hot-standbys", "1"].into_iter().chain(extra.iter().copied()).collect();
        g.member(name, &flags, &["sleep", "1000"])
    };
    let mut a = member("a", "1", &[]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let (b, c, d) = (member("b", "2", &[]), member("c", "3", &[]), member("d", "4", &health));
    for m in [&b, &c] {
        wait_until(t.takeover(), &format!("{} is a cold standby", m.name), || {
            m.log().contains("a cold standby: leaving the group")
        });
    }
    // a dies before it can read that d fails its check, so a's list,
    // naming d, stays in force; d stays unhealthy.
    a.signal(Signal::SIGKILL);
    std::fs::remove_file(&ok).expect("d unhealthy");
    let _ = a.wait_exit(t.takeover());
    wait_until(t.takeover(), "d is unhealthy", || d.log().contains("unhealthy"));
    wait_until(t.takeover() * 3, "b or c leads while d is unhealthy", || {
        g.starts().last().is_some_and(|s| s.0 == "b" || s.0 == "c")
    });
    assert!(!g.starts().iter().any(|s| s.0 == "d"), "d, unhealthy, never led: {:?}", g.starts());
    g.assert_no_overlap();
}

/// A cold member killed after its roster record (which counts for three
/// roster intervals, 45 s here) is named when the hot standby dies, and
/// does not answer: the owner passes it over within a candidacy's life
/// (1.5 s here) and names the next, not when that record lapses. A
/// 100-member soak (seed 7376) saw a list name a dead member for a minute.
#[test]
fn a_dead_cold_member_named_hot_is_passed_over_for_the_next() {
    let g = Group::on(Broker::cluster(1), "cold-dead-named");
    let t = g.broker.timing;
    let (_a, b, mut c, mut d) = leader_a_hot_d_cold_b_and_c(&g);
    wait_until(t.takeover(), "c is out of the group", || out_of_the_group(&g, "c"));
    c.signal(Signal::SIGKILL);
    let _ = c.wait_exit(t.takeover());
    d.signal(Signal::SIGKILL);
    let _ = d.wait_exit(t.takeover());
    // c's roster record counts 30 s more at least: b named within 20 s
    // was named because c was passed over.
    let invited =
        crate::util::wait_for(Duration::from_secs(20), || b.log().contains("named a hot standby: joining the group"));
    assert!(invited, "b is invited within 20 s of d's death\nb: {}\na: {}", b.log(), _a.log());
    assert_eq!(g.starts().len(), 1, "a leads throughout: {:?}", g.starts());
    g.assert_no_overlap();
}

#[test]
fn the_default_group_of_three_keeps_every_member_in_the_group() {
    let g = Group::on(Broker::cluster(1), "cold-default");
    let t = g.broker.timing;
    let a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let (b, c) = (g.member("b", &[], &["sleep", "1000"]), g.member("c", &[], &["sleep", "1000"]));
    for m in [&b, &c] {
        wait_until(t.takeover(), &format!("{} reads that it is hot", m.name), || m.log().contains("a hot standby"));
    }
    // K 2 names both: neither leaves, for a while of lists.
    let left =
        || [&b, &c].iter().any(|m| m.log().contains("a cold standby: leaving")) || requests(&g, "b", "LeaveGroup") > 0;
    assert!(stays_false(t.session * 2, left), "b: {}\nc: {}", b.log(), c.log());
    assert!(in_the_group(&g, "b") && in_the_group(&g, "c"), "{}", g.broker.event("requests"));
    assert_eq!(g.starts().len(), 1, "a leads throughout: {:?}", g.starts());
    drop(a);
}

/// `a` leads; b, c and d join with `--hot-standbys 1` as in
/// `leader_a_hot_d_cold_b_and_c`, at the product's timing (no timing
/// flags): there a cold watcher's parked fetch waits 5 s, a hot one's 2 s.
fn at_the_product_timing(g: &Group) -> (Member, Member, Member, Member) {
    let member = |name: &str, priority: &str| {
        g.member_untimed(name, &["--priority", priority, "--hot-standbys", "1"], &["sleep", "1000"])
    };
    let a = member("a", "1");
    wait_until(Duration::from_secs(60), "a leads", || g.lock_held());
    let (b, c, d) = (member("b", "2"), member("c", "3"), member("d", "4"));
    wait_until(Duration::from_secs(60), "b is a cold standby", || {
        b.log().contains("a cold standby: leaving the group")
    });
    (a, b, c, d)
}

/// Writes a wake to partition 0 of `g`'s topic as a member that left the
/// group writes it (`wake::Record`: padded to 16 KiB), from a name no
/// member has.
fn write_wake(g: &Group, producer: &BaseProducer) {
    let at_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let mut wake =
        serde_json::json!({"type": "wake", "v": 1, "name": "gone", "incarnation": "0", "at_ms": at_ms, "pad": ""});
    let bare = wake.to_string().len();
    wake["pad"] = " ".repeat(16 * 1024 - bare).into();
    let (topic, wake) = (format!("{}.neli", g.name), wake.to_string());
    producer.send(BaseRecord::to(&topic).partition(0).key("gone").payload(&wake)).expect("the wake queued");
    producer.flush(Duration::from_secs(10)).expect("the wake written");
}

/// Returns once `member`'s watcher has sent a new fetch (the broker has
/// answered its last): it is parked from now on.
fn a_fetch_parked(g: &Group, member: &str) {
    let fetches = requests(g, member, "Fetch");
    wait_until(Duration::from_secs(30), &format!("{member} fetches again"), || requests(g, member, "Fetch") > fetches);
}

#[test]
fn a_wake_answers_the_hot_standbys_watcher_not_a_cold_ones_and_a_hand_over_calls_a_cold_one_at_once() {
    let g = Group::on(Broker::cluster(1), "cold-wake");
    let (_a, b, _c, d) = at_the_product_timing(&g);
    wait_until(Duration::from_secs(60), "b is out of the group", || out_of_the_group(&g, "b"));
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &g.broker.address).create().unwrap();
    for round in 0..3 {
        a_fetch_parked(&g, "b");
        let (fetches, rejoins) = (requests(&g, "b", "Fetch"), d.log().matches("rejoining now").count());
        write_wake(&g, &producer);
        // d, hot, rejoins on it; b's fetch, parked for 5 s, is not answered:
        // a cold member has nothing to take on a wake.
        let woken =
            crate::util::wait_for(Duration::from_secs(30), || d.log().matches("rejoining now").count() > rejoins);
        assert!(woken, "round {round}: d rejoins on the wake\n{}", d.log());
        let answered = !stays_false(Duration::from_millis(2500), || requests(&g, "b", "Fetch") > fetches);
        assert!(!answered, "round {round}: the wake answered b's parked fetch\n{}", g.broker.event("requests"));
    }
    // A hand-over to b is padded past a cold watcher's MinBytes: b hears it
    // at once, not at its fetch's wait's end.
    a_fetch_parked(&g, "b");
    let asked = Instant::now();
    let yielded = std::thread::spawn({
        let (address, group) = (g.broker.address.clone(), g.name.clone());
        move || run(&["yield", "-b", &address, "-g", &group, "--to", "b", "--timeout", "60s"])
    });
    let joins = || b.log().contains("named a hot standby: joining the group");
    wait_until(Duration::from_secs(60), "b is called in", joins);
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(4), "b heard the hand-over {took:?} after the yield\n{}", b.log());
    let (code, out) = yielded.join().unwrap();
    assert_eq!(code, 0, "{out}");
    wait_until(Duration::from_secs(60), "b leads", || g.starts().last().is_some_and(|s| s.0 == "b"));
    g.assert_no_overlap();
}

#[test]
fn cold_standbys_take_over_when_the_leader_and_the_hot_standby_die_together_at_the_product_timing() {
    let g = Group::on(Broker::cluster(1), "cold-gone");
    let (mut a, b, c, mut d) = at_the_product_timing(&g);
    wait_until(Duration::from_secs(60), "c is a cold standby", || {
        c.log().contains("a cold standby: leaving the group")
    });
    for cold in ["b", "c"] {
        wait_until(Duration::from_secs(60), &format!("{cold} is out of the group"), || out_of_the_group(&g, cold));
    }
    a.signal(Signal::SIGKILL);
    d.signal(Signal::SIGKILL);
    let _ = (a.wait_exit(Duration::from_secs(30)), d.wait_exit(Duration::from_secs(30)));
    // Within a cold wait (5 s), the owner's silence (6 s), a candidacy
    // interval (1 s) and a rebalance (how-it-works.md). The check that a
    // cold member reads partition 0 to its end must not wait behind its
    // watcher's parked fetch (on one connection, Kafka and the dev broker
    // answer in order): there it timed out every time, and the group
    // stayed without a leader.
    let led =
        crate::util::wait_for(Duration::from_secs(60), || g.starts().last().is_some_and(|s| s.0 == "b" || s.0 == "c"));
    assert!(led, "b or c leads\nb: {}\nc: {}", b.log(), c.log());
    g.assert_no_overlap();
}

/// A cold member of a wave hears that the wave's run ended, as a hot one
/// does, and never runs it again: not even when it comes to lead long
/// after, once the record of that end is older than what a new owner reads
/// behind its first heartbeat. A 100-member soak saw three cold members of
/// a wave run it again so (docs/proof.md). Here `b` and `c` are cold and
/// frozen while the run ends and more records than that follow it; thawed,
/// each exits 0 and the command ran once.
#[test]
fn a_cold_member_of_a_wave_hears_that_its_run_ended_and_never_runs_it_again() {
    let g = Group::on(Broker::cluster(1), "cold-wave");
    let t = g.broker.timing;
    let done = g.dir.path().join("done");
    let job = format!("while [ ! -e {} ]; do sleep 0.05; done", done.display());
    let member = |name: &str, priority: &str| {
        let flags = ["--priority", priority, "--hot-standbys", "1", "--once-within", "300s"];
        g.member(name, &flags, &["sh", "-c", &job])
    };
    let mut a = member("a", "1");
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let (mut b, mut c, mut d) = (member("b", "2"), member("c", "3"), member("d", "4"));
    for m in [&b, &c] {
        wait_until(t.takeover(), &format!("{} is a cold standby", m.name), || {
            m.log().contains("a cold standby: leaving the group")
        });
        m.signal(Signal::SIGSTOP);
    }
    std::fs::write(&done, "").unwrap();
    assert_eq!(a.wait_exit(t.takeover()).code(), Some(0), "{}", a.log());
    assert_eq!(d.wait_exit(t.takeover() * 2).code(), Some(0), "the hot one: {}", d.log());
    // Past what a new owner reads behind its first heartbeat (a few
    // hundred records at this timing).
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", &g.broker.address).create().unwrap();
    let topic = format!("{}.neli", g.name);
    for _ in 0..2000 {
        while producer.send(BaseRecord::<(), _>::to(&topic).partition(0).payload("not a record of neli-run")).is_err() {
            producer.poll(Duration::from_millis(10));
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    for m in [&b, &c] {
        m.signal(Signal::SIGCONT);
    }
    for m in [&mut b, &mut c] {
        assert_eq!(m.wait_exit(crate::util::LONG).code(), Some(0), "{}", m.log());
    }
    assert_eq!(g.starts().len(), 1, "the wave ran again: {:?}", g.starts());
    g.assert_no_overlap();
}
