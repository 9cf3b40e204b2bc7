//! The wake (src/kafka/wake.rs): a member that left the group writes a
//! record once Kafka answered its LeaveGroup, and the others rejoin on it
//! at once instead of at their next coordinator heartbeat. How fast that
//! makes a handover is neli-bench's to say; here, that it happens, in that
//! order, and that members without it (an older version) still take over.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{run, wait_until, Group, Member};

/// A member as an older version runs, as far as the wake goes: no watcher,
/// no wake written.
const WITHOUT_WAKE: [&str; 1] = ["--no-wake"];

/// librdkafka's own debug lines, where it says why it rejoins.
const REJOIN_REASONS: [&str; 3] = ["-v", "-X", "debug=cgrp"];

/// Whether `line` was logged at or after the timestamp `at`.
fn logged_since(line: &str, at: &str) -> bool {
    line.split_whitespace().next().is_some_and(|t| t >= at)
}

/// The timestamp of the first line of `log` that contains `what`.
fn logged_at(log: &str, what: &str) -> Option<String> {
    log.lines().find(|l| l.contains(what)).and_then(|l| l.split_whitespace().next()).map(String::from)
}

const STANDBY: &str = crate::util::STANDBY_JOINED;
/// The watcher stops reading while its member holds the one role, and
/// reads again once it stands by.
const WATCHER_IDLE: &str = "the watcher follows our standing watching=false";
const WATCHER_READS: &str = "the watcher follows our standing watching=true";
const WOKEN: &str = "a member left the group: rejoining now";
const LEFT: &str = "left the group; waking the others";
/// librdkafka's reason for the rejoin a wake asks for (the subscription to
/// a topic that does not exist, once its metadata is in).
const REJOINED: &str = "Metadata for subscribed topic(s) has changed";
/// librdkafka's word that a join is done: a wake in the middle of one waits
/// for it, and rejoins after (or not at all, once the subscription is put
/// back).
const STEADY: &str = "assignment operations done in join-state steady";
/// librdkafka's word for any rejoin (its REJOIN facility): one begun
/// before the wake came (its coordinator heartbeat told it first) takes
/// the wake's place.
const REJOINING: &str = "Rejoining group";
/// librdkafka's reason when its coordinator heartbeat said the group is
/// rebalancing.
const REBALANCING: &str = "Group is rebalancing";

/// Waits until `member` was woken by `from`'s wake, written after
/// `leaving`. The member that took over (`took_over`) is excused when its
/// coordinator heartbeat told it of the rebalance first (about once in 50
/// runs, 1 ms after the leave in a CI run): it then held the one role, and
/// its watcher had stopped reading, before the wake came. A member that
/// stays a standby reads every wake, however it rejoined.
fn woken(member: &Member, from: &str, leaving: &str, took_over: bool, within: Duration) {
    let told_first =
        |log: &str| log.lines().any(|l| l.contains(REJOINING) && l.contains(REBALANCING) && logged_since(l, leaving));
    wait_until(within, &format!("{} is woken by {from}", member.name), || {
        let log = member.log();
        log.lines().any(|l| l.contains(&format!("{WOKEN} from={from}")) && logged_since(l, leaving))
            || (took_over && told_first(&log))
    });
}

#[test]
fn a_leader_that_stops_wakes_the_standbys_once_the_group_answered_its_leave() {
    let g = Group::new("wake");
    let t = g.broker.timing;
    let mut members: Vec<Member> =
        ["a", "b", "c"].iter().map(|n| g.member(n, &REJOIN_REASONS, &["sleep", "1000"])).collect();
    wait_until(t.takeover(), "a leader runs its command", || g.lock_held());
    let i = g.leader_among(&members);
    let mut leader = members.remove(i);
    for standby in &members {
        wait_until(t.takeover(), &format!("{} stands by", standby.name), || {
            standby.log().contains(STANDBY) && standby.log().contains(STEADY)
        });
    }
    leader.signal(Signal::SIGTERM);
    assert_eq!(leader.wait_exit(t.takeover()).code(), Some(143), "{}", leader.log());
    let left = logged_at(&leader.log(), LEFT).unwrap_or_else(|| panic!("the leader woke no one: {}", leader.log()));
    let leaving = logged_at(&leader.log(), "leaving the group").expect("the leader left");
    wait_until(t.takeover(), "the next leader runs its command", || g.starts().len() == 2 && g.lock_held());
    let next = g.starts()[1].0.clone();
    for standby in &members {
        woken(standby, &leader.name, &leaving, standby.name == next, t.takeover());
        let log = standby.log();
        let Some(woken) = logged_at(&log, WOKEN) else { continue };
        assert!(woken >= left, "{} woken at {woken}, before the leave was answered at {left}", standby.name);
        assert!(log.contains(&format!("{WOKEN} from={}", leader.name)), "{log}");
        let (before, after) = log.split_at(log.find(WOKEN).expect("woken"));
        // Unless its coordinator heartbeat told it first (a loaded machine
        // may hold the leave that long; tansu holds a fetch longer than a
        // heartbeat): then it was rejoining already.
        if !before.lines().any(|l| l.contains(REJOINING) && logged_since(l, &leaving)) {
            // librdkafka may log the rejoin's reason a moment before our
            // own line that asked for it: any since the leave counts.
            wait_until(t.takeover(), &format!("{} rejoins on the wake", standby.name), || {
                standby.log().lines().any(|l| l.contains(REJOINED) && logged_since(l, &leaving))
            });
        }
        // The topic the wake subscribed to does not exist: nothing fatal.
        assert!(!after.contains("ERROR"), "{log}");
    }
    drop(members);
    g.assert_no_overlap();
}

/// A rolling upgrade: members of an older version neither wake nor rejoin
/// on a wake (as `--no-wake` runs one).
/// A standby of the old kind takes over from a new leader, and a new
/// standby from an old leader, each at its next coordinator heartbeat.
#[test]
fn members_without_the_wake_still_take_over() {
    let g = Group::new("wake-mixed");
    let t = g.broker.timing;
    let a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    // Stops `leaving`, sees `next` take over as the `n`th start, unwoken;
    // says whether `leaving` wrote a wake.
    let hand_over = |leaving: &mut Member, next: &Member, n: usize| {
        leaving.signal(Signal::SIGTERM);
        assert_eq!(leaving.wait_exit(t.takeover()).code(), Some(143), "{}", leaving.log());
        wait_until(t.takeover(), &format!("{} takes over", next.name), || g.starts().len() == n && g.lock_held());
        assert_eq!(g.starts()[n - 1].0, next.name);
        assert!(!next.log().contains(WOKEN), "{}", next.log());
        leaving.log().contains(LEFT)
    };
    let mut old = g.member("b", &WITHOUT_WAKE, &["sleep", "1000"]);
    wait_until(t.takeover(), "b is a standby", || old.log().contains(STANDBY));
    let mut a = a;
    assert!(hand_over(&mut a, &old, 2), "the new leader wakes: {}", a.log());

    let new = g.member("c", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "c is a standby", || new.log().contains(STANDBY));
    assert!(!hand_over(&mut old, &new, 3), "the old leader wakes no one: {}", old.log());
    drop(new);
    g.assert_no_overlap();
}

/// Why the wake follows the answer to the leave: a member woken while the
/// leader still leads rejoins the group as it is (the leader keeps partition
/// 0, its command runs on), and would hear of a leave that came after only
/// at its next coordinator heartbeat: such a wake is spent for nothing.
#[test]
fn a_wake_before_the_leave_moves_nothing() {
    let g = Group::new("wake-early");
    let t = g.broker.timing;
    let a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let b = g.member("b", &REJOIN_REASONS, &["sleep", "1000"]);
    wait_until(t.takeover(), "b stands by", || b.log().contains(STANDBY) && b.log().contains(STEADY));
    // A wake from nobody that left, as one written before its writer's leave.
    // What b logs from here on is about it (librdkafka may log the rejoin's
    // reason a moment before our own line that asked for it).
    let mark = b.log().len();
    g.produce(br#"{"type":"wake","v":1,"name":"early","incarnation":"0","at_ms":0}"#);
    let joined = "JoinGroup response: GenerationId";
    wait_until(t.takeover(), "b rejoins on the wake and is answered", || {
        let log = &b.log()[mark..];
        log.contains(&format!("{WOKEN} from=early")) && log.contains(REJOINED) && log.contains(joined)
    });
    // Its rejoin is done once its member sees its assignment again.
    wait_until(t.takeover(), "b's rejoin is done", || {
        let log = &b.log()[mark..];
        log[log.find(joined).expect("answered")..].contains(STEADY)
    });
    assert!(!b.log().contains("assigned the partition"), "{}", b.log());
    assert_eq!(g.starts().len(), 1, "a's command runs on");
    assert!(g.lock_held());
    drop((a, b));
    g.assert_no_overlap();
}

/// A yield hands over as a stop does: the leader stands aside (leaves the
/// group and watches from outside), and once librdkafka has given partition
/// 0 up, which is when it sends the LeaveGroup, it wakes the standbys. Then
/// the yielder, its watcher idle while it held the one role, stands by and
/// is woken by the next leader's stop. (Three members: whichever does not
/// take over stays a standby, and is woken whatever the timing.)
#[test]
fn a_yield_wakes_the_standbys() {
    let g = Group::new("wake-yield");
    let t = g.broker.timing;
    let members: Vec<Member> =
        ["a", "b", "c"].iter().map(|n| g.member(n, &REJOIN_REASONS, &["sleep", "1000"])).collect();
    wait_until(t.takeover(), "a leader runs its command", || g.lock_held());
    let i = g.leader_among(&members);
    for (_, standby) in members.iter().enumerate().filter(|(k, _)| *k != i) {
        wait_until(t.takeover(), &format!("{} stands by", standby.name), || {
            standby.log().contains(STANDBY) && standby.log().contains(STEADY)
        });
    }
    // The holder of the one role reads no wakes (no fetch while it holds).
    let yielder = &members[i];
    wait_until(t.takeover(), "the holder's watcher stops reading", || yielder.log().contains(WATCHER_IDLE));
    let timeout = format!("{}ms", t.takeover().as_millis());
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", &timeout]);
    assert_eq!(code, 0, "{out}");
    wait_until(t.takeover(), "another leads", || g.starts().len() == 2 && g.lock_held());
    let next = g.leader_among(&members);
    assert_ne!(next, i, "the yielder leads again");
    let left = logged_at(&yielder.log(), LEFT).unwrap_or_else(|| panic!("the yielder woke no one: {}", yielder.log()));
    for (k, standby) in members.iter().enumerate().filter(|(k, _)| *k != i) {
        woken(standby, &yielder.name, &left, k == next, t.takeover());
    }
    // The yielder stands by again, and the new leader's stop wakes it: its
    // watcher, idle while it held the one role, watches again.
    wait_until(t.takeover(), "the yielder stands by again, its watcher reading", || {
        let log = yielder.log();
        let left = log.find(LEFT).expect("it left");
        log.rfind(STEADY).is_some_and(|steady| steady > left) && log[left..].contains(WATCHER_READS)
    });
    let leader = &members[next];
    leader.signal(Signal::SIGTERM);
    wait_until(t.takeover(), "a third start", || g.starts().len() == 3 && g.lock_held());
    let last = g.leader_among(&members);
    let leaving = logged_at(&leader.log(), "leaving the group").expect("the leader left");
    for (k, standby) in members.iter().enumerate().filter(|(k, _)| *k != next) {
        woken(standby, &leader.name, &leaving, k == last, t.takeover());
    }
    drop(members);
    g.assert_no_overlap();
}

/// With librdkafka's debug logging on, as above, an idle member's consumer
/// thread sleeps between events as without it. Asking librdkafka for the
/// assignment (which makes it serve the group) logs a line there, and each
/// line's event woke the thread to ask again: 30,000 asks a second, a core
/// spun by the thread and one by librdkafka's, until it asked at most
/// every 10 ms.
#[test]
fn debug_logging_does_not_keep_the_consumer_thread_busy() {
    let g = Group::new("debug-spin");
    let a = g.member("a", &REJOIN_REASONS, &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "a leads", || g.lock_held());
    let asks = || a.log().matches("received op GET_ASSIGNMENT").count();
    let before = asks();
    // A window to count in, not a wait for an event.
    std::thread::sleep(Duration::from_secs(2));
    let asked = asks() - before;
    assert!(asked < 1000, "{asked} asks in 2 s");
    drop(a);
    g.assert_no_overlap();
}

/// A member told to compress (`-X compression.type=lz4`, as a Java
/// producer's properties often say) still writes its wake whole: a
/// watcher's fetch waits for the bytes the broker stores, so a compressed
/// wake would be heard only at the wait's end, seconds late. The reader
/// here waits for 12 KiB, which the wake (16 KiB) brings alone and the
/// member's own heartbeats in that time (a few hundred bytes each) do not;
/// its fetch waits a minute, three times the bound.
#[test]
fn a_member_told_to_compress_writes_its_wake_whole() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    let g = Group::new("wake-compressed");
    let t = g.broker.timing;
    let mut a = g.member("a", &["-X", "compression.type=lz4"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a runs its command", || g.lock_held());
    assert!(a.log().contains("compression.type=lz4 is not used"), "{}", a.log());
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &g.broker.address)
        .set("group.id", "wake-compressed-reader")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "60000")
        .set("fetch.min.bytes", (12 * 1024).to_string())
        .set("socket.timeout.ms", "90000")
        .create()
        .expect("a reader");
    let topic = format!("{}.neli", g.name);
    let (_, end) = reader.fetch_watermarks(&topic, 0, Duration::from_secs(20)).expect("partition 0's end");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(end)).unwrap();
    reader.assign(&tpl).expect("assigned");
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(t.takeover()).code(), Some(143), "{}", a.log());
    assert!(a.log().contains(LEFT), "{}", a.log());
    let read = crate::util::wait_for(Duration::from_secs(20), || reader.poll(Duration::from_millis(200)).is_some());
    assert!(read, "the wake did not end a fetch waiting for 12 KiB: compressed?\n{}", a.log());
}
