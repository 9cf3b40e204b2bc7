//! The Kafka cluster's own life, timed (contender `cluster`: neli-run on a
//! dev broker of three brokers, whose events go through its control
//! socket): what each event costs the running command, beside the time
//! partition 0 had no leader.
//!
//! - rolling-restart: every broker stopped the controlled way (down half a
//!   session), started again and given a session, in turn; per broker
//!   restarted: the command's downtime, its stops, handovers and the
//!   holder's longest heartbeat gap;
//! - leader-move, coordinator-move: the same figures per move;
//! - leader-crash: partition 0's leader broker crashed (its leaderships move
//!   after KRaft's 9 s): how long partition 0 had no leader, the command's
//!   downtime, and how soon after partition 0 had a leader again the
//!   command ran; then the same crash with `--session-timeout 12s`, whose
//!   derived heartbeat deadline (11.3 s) outlasts the outage;
//! - coordinator-crash: the coordinator's broker crashed and started again
//!   a quarter of a session later: stops and handovers;
//! - cut: the holder cut off from one broker only, the coordinator's
//!   (`coordinator-cut`) or partition 0's leader's (`leader-cut`), until a
//!   command runs again: the downtime, who ran it, and whether the old one
//!   still ran when the new one started.
//!
//! The holder runs with its Kafka adapter at debug level, so that every gap
//! over 1.5 heartbeat intervals in its own heartbeats is in its log; a
//! restart that left none had none that long.

use std::fs;
use std::time::{Duration, Instant, SystemTime};

use neli_proof::brokers::{coordinator_of, leader_of};

use crate::candidates::{alive, Contender, Group};
use crate::report::Results;
use crate::{gap_of, ms, Bench};

/// KRaft's broker.session.timeout.ms default: how long a crashed broker's
/// leaderships stay with it (the dev broker's `crash B` default).
const NOTICED_AFTER: Duration = Duration::from_secs(9);

/// Runs the cluster scenarios asked for against `c` (a contender on a dev
/// broker cluster; the others have no cluster events).
pub fn measure(bench: &Bench, c: &mut Contender, results: &mut Results) {
    if !c.broker.is_cluster() {
        return;
    }
    let run = |s: &str| bench.args.scenarios.iter().any(|x| x == s);
    if run("rolling-restart") {
        planned(bench, c, results, "rolling-restart");
    }
    if run("leader-move") {
        planned(bench, c, results, "leader-move");
    }
    if run("coordinator-move") {
        planned(bench, c, results, "coordinator-move");
    }
    if run("leader-crash") {
        leader_crash(bench, c, results, None);
        leader_crash(bench, c, results, Some(Duration::from_secs(12)));
    }
    if run("coordinator-crash") {
        coordinator_crash(bench, c, results);
    }
    if run("cut") {
        cuts(bench, c, results);
    }
}

/// A holder and two standbys, settled, the holder's Kafka adapter at debug
/// level; `session` overrides the contender's timing.
fn settled_group<'a>(bench: &Bench, c: &'a mut Contender, session: Option<Duration>) -> Option<Group<'a>> {
    let mut g = Group::new(c, &bench.work);
    g.env = vec![("RUST_LOG".into(), "info,neli_run::kafka=debug".into())];
    if let Some(s) = session {
        g.timing = Some(vec!["--session-timeout".into(), format!("{}ms", s.as_millis())]);
    }
    for _ in 0..3 {
        g.spawn();
    }
    (g.wait_start(1, bench.within).is_some() && g.settle(bench.within, false)).then_some(g)
}

/// What the command did while an event ran its course.
struct Watched {
    /// How long no child of the group ran.
    downtime: Duration,
    /// Whether the holder's child died.
    stopped: bool,
    /// Children started on other members.
    handovers: usize,
    /// The holder's longest heartbeat gap said in its log (over 1.5
    /// heartbeat intervals), if any.
    gap: Option<Duration>,
    /// When the first new child started, if one did.
    restarted: Option<SystemTime>,
    /// The holder's child still ran when a new one started.
    overlap: bool,
}

/// Watches the group for `window` (or, with `until_running`, until a child
/// runs again once the holder's died), from the holder's child and log as
/// they are now.
fn watch(g: &Group, window: Duration, until_running: bool) -> Watched {
    let before = g.starts();
    let holder = g.holder().expect("a holder");
    let (old, log) = (before.last().expect("a child").clone(), g.log_path(holder));
    let seen = fs::metadata(&log).map_or(0, |m| m.len() as usize);
    let begun = Instant::now();
    let (mut down_since, mut downtime, mut stopped) = (None::<Instant>, Duration::ZERO, false);
    let mut overlap = false;
    loop {
        let now = Instant::now();
        let starts = g.starts();
        overlap |= starts.len() > before.len() && alive(old.pid);
        let running = starts.len() > before.len() || alive(old.pid);
        stopped |= !alive(old.pid);
        match (running, down_since) {
            (false, None) => down_since = Some(now),
            (true, Some(since)) => {
                downtime += now - since;
                down_since = None;
            }
            _ => {}
        }
        let over = now - begun >= window && (!until_running || !stopped || starts.len() > before.len());
        if over || now - begun >= window * 4 {
            downtime += down_since.map_or(Duration::ZERO, |since| now - since);
            let new = &starts[before.len()..];
            let text = fs::read_to_string(&log).unwrap_or_default();
            let gap = text.get(seen..).unwrap_or("").lines().filter_map(gap_of).max();
            return Watched {
                downtime,
                stopped,
                handovers: new.iter().filter(|s| s.name != old.name).count(),
                gap,
                restarted: new.first().map(|s| s.at),
                overlap,
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Records what a planned event did: it should do nothing.
fn record(results: &mut Results, scenario: &str, cname: &str, w: &Watched) {
    results.add(&format!("{scenario} downtime"), cname, ms(w.downtime));
    results.add(&format!("{scenario} stops"), cname, f64::from(u8::from(w.stopped)));
    results.add(&format!("{scenario} handovers"), cname, w.handovers as f64);
    if let Some(gap) = w.gap {
        results.add(&format!("{scenario} heartbeat gap over 1.5 intervals"), cname, ms(gap));
    }
}

/// A planned event, --reps times (a rolling restart: each broker once a
/// rep): nothing may happen to the command.
fn planned(bench: &Bench, c: &mut Contender, results: &mut Results, scenario: &str) {
    let (cname, session) = (c.name, c.session);
    let Some(g) = settled_group(bench, c, None) else {
        results.notes.push(format!("{cname}: {scenario}: the group never settled"));
        return;
    };
    let topic = format!("{}.neli", g.name());
    let broker = &g.contender.broker;
    for _ in 0..bench.args.reps {
        let now = broker.event("describe").unwrap_or_default();
        let steps: Vec<(Vec<String>, Duration)> = match scenario {
            "rolling-restart" => (1..=3).map(|b| (vec![format!("stop {b}"), format!("start {b}")], session)).collect(),
            "leader-move" => {
                let to = next(leader_of(&now, &topic).unwrap_or(1));
                vec![(vec![format!("leader {topic} 0 {to}")], session)]
            }
            _ => {
                // Two sessions: a member the new coordinator had forgotten
                // would be expired, and the group rebalanced.
                let to = next(coordinator_of(&now).unwrap_or(3));
                vec![(vec![format!("coordinator {to}")], session * 2)]
            }
        };
        for (events, window) in steps {
            let w = std::thread::scope(|s| {
                let watcher = s.spawn(|| watch(&g, window + session / 2, false));
                for (i, event) in events.iter().enumerate() {
                    if i > 0 {
                        // A restarted broker is down half a session.
                        std::thread::sleep(session / 2);
                    }
                    if let Err(why) = broker.event(event) {
                        eprintln!("neli-bench: {cname}: {scenario}: {why}");
                    }
                }
                watcher.join().expect("the watcher")
            });
            eprintln!(
                "neli-bench: {cname}: {scenario} ({}): downtime {:.0?}, stopped {}, handovers {}, gap {:?}",
                events.join(", "),
                w.downtime,
                w.stopped,
                w.handovers,
                w.gap
            );
            record(results, scenario, cname, &w);
        }
    }
}

/// Partition 0's leader broker crashed, --reps times: how long partition 0
/// had no leader, how long the command was down, and how soon after
/// partition 0 had a leader the command ran again. With `session` (12 s),
/// the derived deadline outlasts the outage: whether the command ran on.
fn leader_crash(bench: &Bench, c: &mut Contender, results: &mut Results, session: Option<Duration>) {
    let cname = c.name;
    let scenario = match session {
        None => "leader-crash".to_string(),
        Some(s) => format!("leader-crash, session {}", humantime::format_duration(s)),
    };
    let Some(g) = settled_group(bench, c, session) else {
        results.notes.push(format!("{cname}: {scenario}: the group never settled"));
        return;
    };
    let topic = format!("{}.neli", g.name());
    let broker = &g.contender.broker;
    for _ in 0..bench.args.reps.min(3) {
        let led = apart(&g, &topic).0;
        let crashed = SystemTime::now();
        let w = std::thread::scope(|s| {
            let watcher = s.spawn(|| watch(&g, NOTICED_AFTER + Duration::from_secs(2), true));
            let _ = broker.event(&format!("crash {led}"));
            // Partition 0 has a leader again once the crash is noticed.
            let mut moved = None;
            neli_proof::wait_for(NOTICED_AFTER * 2, || {
                let now = broker.event("describe").unwrap_or_default();
                moved = leader_of(&now, &topic).filter(|l| *l != led && *l > 0).map(|_| SystemTime::now());
                moved.is_some()
            });
            (watcher.join().expect("the watcher"), moved)
        });
        let (w, moved) = w;
        let _ = broker.event(&format!("start {led}"));
        let offline = moved.and_then(|m| m.duration_since(crashed).ok());
        if let Some(offline) = offline {
            results.add(&format!("{scenario}: partition 0 without a leader"), cname, ms(offline));
        }
        results.add(&format!("{scenario} downtime"), cname, ms(w.downtime));
        results.add(&format!("{scenario} stops"), cname, f64::from(u8::from(w.stopped)));
        results.add(&format!("{scenario} handovers"), cname, w.handovers as f64);
        let after = w.restarted.zip(moved).and_then(|(r, m)| r.duration_since(m).ok());
        if let Some(after) = after {
            results.add(&format!("{scenario}: runs again after partition 0 has a leader"), cname, ms(after));
        }
        eprintln!(
            "neli-bench: {cname}: {scenario}: offline {offline:.0?}, downtime {:.0?}, stopped {}, runs again {after:.0?} after partition 0 had a leader",
            w.downtime, w.stopped
        );
        // The restarted broker back as a follower, the group quiet again.
        g.settle(bench.within, false);
    }
}

/// The coordinator's broker crashed and started again a quarter of a
/// session later, --reps times: the command should not notice.
fn coordinator_crash(bench: &Bench, c: &mut Contender, results: &mut Results) {
    let (cname, session) = (c.name, c.session);
    let Some(g) = settled_group(bench, c, None) else {
        results.notes.push(format!("{cname}: coordinator-crash: the group never settled"));
        return;
    };
    let (broker, topic) = (&g.contender.broker, format!("{}.neli", g.name()));
    for _ in 0..bench.args.reps {
        let at = apart(&g, &topic).1;
        let w = std::thread::scope(|s| {
            let watcher = s.spawn(|| watch(&g, session * 2, false));
            let _ = broker.event(&format!("crash {at}"));
            std::thread::sleep(session / 4);
            let _ = broker.event(&format!("start {at}"));
            watcher.join().expect("the watcher")
        });
        eprintln!(
            "neli-bench: {cname}: coordinator-crash (broker {at}): downtime {:.0?}, stopped {}, handovers {}",
            w.downtime, w.stopped, w.handovers
        );
        record(results, "coordinator-crash", cname, &w);
    }
}

/// The holder cut off from one broker only, --reps times each way: from
/// the coordinator's (librdkafka's session timer revokes it as the group
/// gives partition 0 to a standby, which its claims hold back) and from
/// partition 0's leader's (it fences, gives the partition back, and stands
/// aside the second time), until a command runs again.
fn cuts(bench: &Bench, c: &mut Contender, results: &mut Results) {
    let (cname, session) = (c.name, c.session);
    let Some(g) = settled_group(bench, c, None) else {
        results.notes.push(format!("{cname}: cut: the group never settled"));
        return;
    };
    let (broker, topic) = (&g.contender.broker, format!("{}.neli", g.name()));
    for scenario in ["coordinator-cut", "leader-cut"] {
        for _ in 0..bench.args.reps {
            let (led, at) = apart(&g, &topic);
            let Some(holder) = g.holder() else { break };
            let name = g.candidate_name(holder).to_string();
            let from = if scenario == "coordinator-cut" { at } else { led };
            let w = std::thread::scope(|s| {
                let watcher = s.spawn(|| watch(&g, session * 2, true));
                let _ = broker.event(&format!("cut {name} {from}"));
                watcher.join().expect("the watcher")
            });
            let _ = broker.event("heal");
            eprintln!(
                "neli-bench: {cname}: {scenario} ({name} from broker {from}): downtime {:.0?}, handovers {}, overlap {}",
                w.downtime, w.handovers, w.overlap
            );
            results.add(&format!("{scenario} downtime"), cname, ms(w.downtime));
            results.add(&format!("{scenario} handovers"), cname, w.handovers as f64);
            results.add(&format!("{scenario} overlaps"), cname, f64::from(u8::from(w.overlap)));
            // The cut member back in the group (it may have stood aside).
            std::thread::sleep(session * 2);
        }
    }
}

/// Partition 0's leader and the coordinator, moved apart first if an earlier
/// scenario left them on one broker (whose crash is both events at once,
/// which these scenarios do not time), the group settled after.
fn apart(g: &Group, topic: &str) -> (i32, i32) {
    let broker = &g.contender.broker;
    let now = broker.event("describe").unwrap_or_default();
    let (led, at) = (leader_of(&now, topic).unwrap_or(1), coordinator_of(&now).unwrap_or(3));
    if led != at {
        return (led, at);
    }
    let _ = broker.event(&format!("coordinator {}", next(at)));
    g.settle(Duration::from_secs(60), false);
    (led, next(at))
}

/// The broker after `b` of three.
fn next(b: i32) -> i32 {
    b % 3 + 1
}
