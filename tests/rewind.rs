//! A broker that answers a fetch OFFSET_OUT_OF_RANGE (a new partition
//! leader whose log lags; tansu's brokers over a shared store): the
//! consumer resets its position (`auto.offset.reset=earliest`) and is
//! given again, from the partition's start, records older than some it
//! has read. The dev broker's `rewind TOPIC P` answers the next fetch so.
//!
//! A new owner must not take such a record for news: findings R-1, a fresh
//! leader that read the previous owner's `contending` record after its own
//! first heartbeat fenced itself, SIGKILLed its command and started it
//! again under the same token (on tansu, a second owner started while the
//! first ran).

use std::time::Duration;

use crate::util::{run, stays_false, wait_until, Broker, Group, LONG};

/// A heartbeat deadline long enough that the previous owner's `contending`
/// record still counts (its deadline and the margin after it was written)
/// when the new owner is given it again, however loaded the machine; and
/// a session timeout that allows it (the deadline, the coordinator
/// heartbeat and the margin).
const LONG_DEADLINE: [&str; 4] = ["--session-timeout", "40s", "--heartbeat-deadline", "30s"];

/// How many Fetch requests `client` has sent the dev broker.
fn fetches(broker: &Broker, client: &str) -> u64 {
    let (code, out) = run(&["dev-broker", "event", "--control", broker.control_path(), "requests"]);
    assert_eq!(code, 0, "{out}");
    let count = out.lines().find_map(|line| match line.split(' ').collect::<Vec<_>>()[..] {
        [c, "Fetch", n] if c == client => n.parse().ok(),
        _ => None,
    });
    count.unwrap_or(0)
}

#[test]
fn a_new_owner_given_the_previous_owners_records_again_keeps_its_command() {
    let g = Group::on(Broker::cluster(1), "rewind");
    let topic = format!("{}.neli", g.name);
    let a = g.member("a", &LONG_DEADLINE, &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "a leads", || g.lock_held() && g.starts().len() == 1);
    // --no-wake: b's only client fetching partition 0 is its group's
    // consumer (the wake's watcher reads it too until b leads, and could
    // take the rewind). -v: librdkafka's warning that it reset its
    // position is logged at debug (shown if the test fails).
    let extra: Vec<&str> = LONG_DEADLINE.iter().copied().chain(["--no-wake", "-v"]).collect();
    let b = g.member("b", &extra, &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "b is a standby", || b.joined_as_standby());
    // a leaves the graceful way after leading for a moment: its
    // `contending` record, at the partition's start, is seconds old.
    a.signal(nix::sys::signal::Signal::SIGTERM);
    wait_until(g.broker.timing.takeover(), "b takes over and starts its command", || {
        g.starts().iter().any(|(name, _)| name == "b") && b.log().contains("child started")
    });
    let token = g.starts().iter().find(|(name, _)| name == "b").expect("b started").1;

    let said = g.broker.event(&format!("rewind {topic} 0"));
    assert!(said.contains("OFFSET_OUT_OF_RANGE"), "{said}");
    wait_until(LONG, "b's next fetch of partition 0 is answered out of range", || {
        !g.broker.event("describe").contains("rewinds")
    });
    // Its librdkafka resets its position (it logs "offset reset ... to
    // offset BEGINNING", at debug) and fetches from the start: three more
    // fetches and what the one from the start gave has been read.
    let served = fetches(&g.broker, "b");
    wait_until(LONG, "b fetches again, from the partition's start and on", || fetches(&g.broker, "b") >= served + 3);

    let fenced = || b.log().contains("fencing") || g.starts().len() > 2;
    let kept = stays_false(Duration::from_secs(5), fenced);
    let log = b.log();
    let reset_line = log.lines().find(|l| l.contains("offset reset")).unwrap_or_default();
    assert!(kept && !log.contains("fencing"), "b fenced itself on a's records given again ({reset_line}):\n{log}");
    // It was given them again, and said so once.
    assert_eq!(log.matches("read again from an earlier offset").count(), 1, "{log}");
    assert_eq!(g.starts(), [("a".to_string(), g.starts()[0].1), ("b".to_string(), token)], "b's command started once");
    assert!(g.lock_held(), "b's command still runs");
    g.assert_no_overlap();
}
