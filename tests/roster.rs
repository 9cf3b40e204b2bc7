//! The roster (docs/hot-set.md, slice 3): cold members write their
//! candidacies to `<topic>.roster`, not to partition 0, which every member
//! reads; the owner of partition 0 reads the roster and still chooses among
//! them, and `status` lists them. The real binary on the dev broker; the
//! topics read as any client reads them.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::cold::leader_a_hot_d_cold_b_and_c;
use crate::util::{run, standbys, wait_for, wait_until, Broker, Group};

/// The candidacies on partition 0 of `topic` from `from` on, as (name,
/// at_ms), and the partition's end.
fn candidacies(g: &Group, topic: &str, from: i64) -> (Vec<(String, u64)>, i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &g.broker.address)
        .set("group.id", format!("{}-test-reader", g.name))
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer");
    let Ok((low, high)) = consumer.fetch_watermarks(topic, 0, Duration::from_secs(10)) else {
        return (Vec::new(), 0);
    };
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(from.max(low))).unwrap();
    consumer.assign(&tpl).unwrap();
    let mut read = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    let mut next = from.max(low);
    while next < high && Instant::now() < until {
        let Some(Ok(msg)) = consumer.poll(Duration::from_millis(200)) else { continue };
        next = msg.offset() + 1;
        let value: serde_json::Value = msg.payload().and_then(|p| serde_json::from_slice(p).ok()).unwrap_or_default();
        if value["type"] == "candidacy" {
            read.push((value["name"].as_str().unwrap_or("?").to_string(), value["at_ms"].as_u64().unwrap_or(0)));
        }
    }
    assert!(next >= high, "{topic} read to its end ({next} of {high})");
    (read, high)
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn cold_standbys_write_their_candidacies_to_the_roster_and_not_to_partition_0() {
    let g = Group::on(Broker::cluster(1), "roster-write");
    let t = g.broker.timing;
    let (_a, _b, _c, _d) = leader_a_hot_d_cold_b_and_c(&g);
    let (topic, roster) = (format!("{}.neli", g.name), format!("{}.neli.roster", g.name));
    let (cold_since, (_, from)) = (wall_ms(), candidacies(&g, &topic, 0));
    // Each writes one a roster interval (30 candidacy intervals: 6 s here).
    let on_roster = |name: &str| candidacies(&g, &roster, 0).0.iter().any(|(n, at)| n == name && *at > cold_since);
    let written = wait_for(t.takeover() * 2, || on_roster("b") && on_roster("c"));
    assert!(written, "b's and c's candidacies on {roster}: {:?}", candidacies(&g, &roster, 0).0);
    let (on_0, _) = candidacies(&g, &topic, from);
    let cold_on_0: Vec<_> = on_0.iter().filter(|(n, _)| n == "b" || n == "c").collect();
    assert!(cold_on_0.is_empty(), "cold members wrote to partition 0 meanwhile: {cold_on_0:?}");
    assert!(on_0.iter().any(|(n, _)| n == "d"), "d, hot, writes to partition 0 as ever: {on_0:?}");
    g.assert_no_overlap();
}

#[test]
fn status_lists_cold_members_from_the_roster_and_yield_to_one_hands_over_to_it() {
    let g = Group::on(Broker::cluster(1), "roster-yield");
    let t = g.broker.timing;
    let (_a, b, _c, _d) = leader_a_hot_d_cold_b_and_c(&g);
    // Long after their last candidacies on partition 0 lapsed (3 candidacy
    // intervals), status still lists them, from the roster.
    std::thread::sleep(t.session * 2);
    let listed = standbys(&g);
    for (name, priority) in [("b", 2), ("c", 3), ("d", 4)] {
        assert!(listed.contains(&(name.to_string(), priority)), "{name} listed: {listed:?}");
    }
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--to", "b", "--timeout", "60s"]);
    assert_eq!(code, 0, "yield --to b, a cold member: {out}\nb: {}", b.log());
    wait_until(t.takeover(), "b leads", || g.starts().last().is_some_and(|s| s.0 == "b"));
    g.assert_no_overlap();
}

#[test]
fn a_member_denied_the_roster_writes_to_partition_0_says_which_acl_to_add_and_runs_on() {
    // The group's name is ours to choose, so that the broker denies its
    // roster (as a LITERAL ACL on the topic alone would) from the start.
    let name = format!("t-roster-acl-{}", std::process::id());
    let denied = format!("{name}.neli.roster");
    let mut g = Group::on(Broker::dev_with("127.0.0.1", &["--deny-topic", &denied]), "roster-acl");
    g.name = name;
    let t = g.broker.timing;
    let (mut a, mut b, mut c, mut d) = leader_a_hot_d_cold_b_and_c(&g);
    for m in [&b, &c] {
        let said = m.log().matches("denied the roster topic").count();
        assert_eq!(said, 1, "{} says it once: {}", m.name, m.log());
        assert!(m.log().contains(&format!("--topic {denied}")), "and names the ACL: {}", m.log());
    }
    // The cold members' candidacies are on partition 0 as before: status
    // lists them while they are cold, long after they went cold.
    std::thread::sleep(t.session * 2);
    let listed = standbys(&g);
    assert!(listed.contains(&("b".into(), 2)) && listed.contains(&("c".into(), 3)), "{listed:?}");
    for m in [&mut a, &mut b, &mut c, &mut d] {
        assert!(!m.exited(), "{} runs on: {}", m.name, m.log());
    }
    g.assert_no_overlap();
}

/// A member that could not look at the roster topic when it started (its
/// broker did not answer: a restart, a storm of reconnects) still reads it
/// once it owns partition 0, before it names its hot list. A 100-member
/// soak saw such an owner read no roster, name a short list from what
/// partition 0 held (the cold members write to the roster), and 75 cold
/// members join at once. Here `a`'s first request naming the roster is
/// held until its look gives up; then `a` leads with `d` hot and `b`, `c`
/// cold; when `d` dies, `a`'s list must name `c` (the best it knows only
/// from the roster), not fall short and call both in.
#[test]
fn an_owner_that_could_not_look_at_the_roster_at_its_start_reads_it_all_the_same() {
    let g = Group::on(Broker::cluster(1), "roster-unlooked");
    let t = g.broker.timing;
    g.broker.event("cut-at a 1 neli.roster");
    let member = |name: &str, priority: &str| {
        g.member(name, &["--priority", priority, "--hot-standbys", "1"], &["sleep", "1000"])
    };
    let a = member("a", "1");
    wait_until(Duration::from_secs(60), "a gives up looking at the roster", || {
        a.log().contains("cannot look at the roster topic now")
    });
    g.broker.event("heal a");
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let (b, c, mut d) = (member("b", "2"), member("c", "3"), member("d", "4"));
    for m in [&b, &c] {
        wait_until(t.takeover(), &format!("{} is a cold standby", m.name), || {
            m.log().contains("a cold standby: leaving the group")
        });
    }
    d.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = d.wait_exit(t.takeover());
    const JOINS: [&str; 2] = ["named a hot standby: joining", "names fewer hot standbys than it wants: joining"];
    wait_until(Duration::from_secs(60), "c joins the group", || JOINS.iter().any(|j| c.log().contains(j)));
    assert!(c.log().contains(JOINS[0]), "a's list named c: {}", c.log());
    assert!(!b.log().contains(JOINS[1]), "a's list was short: {}", b.log());
    assert_eq!(g.starts().len(), 1, "a leads throughout: {:?}", g.starts());
    g.assert_no_overlap();
}

/// A member whose look at the roster went unanswered at its start looks
/// again, a roster interval later and on: once the broker answers, its
/// candidacies while cold go to the roster and no longer to partition 0,
/// which every member reads. Before, they stayed there for as long as it
/// ran (a broker storming as a fleet started would have left every member
/// writing there).
#[test]
fn a_member_that_could_not_look_at_the_roster_at_its_start_uses_it_once_it_answers() {
    let g = Group::on(Broker::cluster(1), "roster-later");
    let t = g.broker.timing;
    let member = |name: &str, priority: &str| {
        g.member(name, &["--priority", priority, "--hot-standbys", "1"], &["sleep", "1000"])
    };
    let _a = member("a", "1");
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let b = member("b", "3");
    wait_until(t.takeover(), "b is a standby", || b.log().contains("standby:"));
    g.broker.event("cut-at c 1 neli.roster");
    let c = member("c", "2");
    wait_until(Duration::from_secs(60), "c gives up looking at the roster", || {
        c.log().contains("cannot look at the roster topic now")
    });
    g.broker.event("heal c");
    wait_until(t.takeover(), "c is a cold standby", || c.log().contains("a cold standby: leaving the group"));
    wait_until(t.takeover() * 2, "c looks at the roster again", || c.log().contains("the roster topic answers now"));
    let (topic, roster) = (format!("{}.neli", g.name), format!("{}.neli.roster", g.name));
    let since = wall_ms();
    let c_on_roster = |after: u64| candidacies(&g, &roster, 0).0.iter().any(|(n, at)| n == "c" && *at > after);
    wait_until(t.takeover() * 2, "c writes to the roster", || c_on_roster(since));
    // From here to c's next roster record, nothing of c's on partition 0.
    let (from, next) = (candidacies(&g, &topic, 0).1, wall_ms());
    wait_until(t.takeover() * 2, "c writes to the roster again", || c_on_roster(next));
    let (on_0, _) = candidacies(&g, &topic, from);
    assert!(!on_0.iter().any(|(n, _)| n == "c"), "c, cold, wrote to partition 0 after the roster answered: {on_0:?}");
    g.assert_no_overlap();
}

/// A broker that refuses the roster (here its name: the group's topic is
/// 245 characters, and the roster's would pass Kafka's 249) leaves it off
/// for good, said once, and the member leads on: it does not take the
/// refusal for a broker that did not answer and look again for ever.
#[test]
fn a_member_whose_roster_the_broker_refuses_leads_on_without_it() {
    let g = Group::on(Broker::cluster(1), "roster-refused");
    let t = g.broker.timing;
    let topic = format!("{}-{}", g.name, "x".repeat(244 - g.name.len()));
    assert_eq!(topic.len(), 245);
    let a = g.member("a", &["--topic", &topic], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    wait_until(t.takeover(), "a says the roster is refused", || a.log().contains("no roster topic"));
    assert!(!a.log().contains("cannot look at the roster topic"), "a refusal is no silence: {}", a.log());
    g.assert_no_overlap();
}
