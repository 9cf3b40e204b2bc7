//! The join watchdog: a rebalance of ours that never ends is seen, said,
//! and nudged.
//!
//! tansu 0.6 keeps a group's leader when that leader leaves while the
//! group is forming (its `LeaveGroup` in the Forming state clears no
//! leader; a session expiry clears only a leader that is still a member).
//! Every later join is answered naming the departed leader and no
//! members, every `SyncGroup` fails with REBALANCE_IN_PROGRESS, and no
//! timer ends it: the group's members wait in their join for minutes (the
//! roles soak: 418 s with roles running nowhere) until some other request
//! happens to race one of theirs. Two group requests from different
//! connections at once make tansu's store refuse one write and reload the
//! group, which drops a leader that is not a member. A nudge is that race,
//! made on purpose: a burst of offset commits from short-lived clients of
//! the group that never join it, for a topic nobody reads. Every commit
//! is refused (not a member); none joins, leaves or assigns anything, so
//! no seat moves by it, and a member that holds one keeps its command under
//! its heartbeats as before. Kafka and the dev broker never need one, and
//! refuse it as harmlessly.
//!
//! Seen through librdkafka's statistics (`cgrp.join_state`, every
//! `STATS_EVERY`): a join is stuck once it has not been `steady` for the
//! rebalance timeout and a session timeout more, longer than any rebalance
//! a live group takes (each member rejoins within the rebalance timeout,
//! or the coordinator drops it).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tracing::{debug, warn};

/// How often librdkafka reports the group consumer's statistics, which
/// say its join state.
pub(super) const STATS_EVERY: Duration = Duration::from_secs(2);

/// The clients of a nudge, each on a connection of its own.
const CLIENTS: usize = 3;
/// The commits each sends, and for how long at most.
const COMMITS: usize = 200;
const BURST: Duration = Duration::from_secs(3);
/// The topic the nudge's commits name: none that neli-run reads.
const TOPIC: &str = "__neli_nudge";

/// Whether our join has gone on too long: fed the join state librdkafka
/// reports, it says when to nudge (at most once each `stuck` while it
/// lasts).
#[derive(Debug)]
pub(super) struct JoinWatch {
    /// How long a join may last before it is stuck.
    stuck: Duration,
    /// Since when the join state has not been steady, if it has not.
    joining_since: Option<Instant>,
    /// When we last nudged in this join.
    nudged: Option<Instant>,
}

impl JoinWatch {
    /// A join is stuck after `max_poll_interval` (Kafka's rebalance
    /// timeout) and `session` more.
    pub(super) fn new(max_poll_interval: Duration, session: Duration) -> JoinWatch {
        JoinWatch { stuck: max_poll_interval.saturating_add(session), joining_since: None, nudged: None }
    }

    /// librdkafka's join state at `now`. `init` is a member not
    /// subscribed (out of the group) or not yet to its coordinator:
    /// nothing to nudge.
    pub(super) fn state(&mut self, join_state: &str, now: Instant) {
        if matches!(join_state, "steady" | "init") {
            self.joining_since = None;
            self.nudged = None;
        } else {
            self.joining_since.get_or_insert(now);
        }
    }

    /// A round of our join assigned or revoked at `now`: it moves, and
    /// counts from there (statistics every 2 s miss a steady state between
    /// two rounds).
    pub(super) fn moved(&mut self, now: Instant) {
        if self.joining_since.is_some() {
            self.joining_since = Some(now);
            self.nudged = None;
        }
    }

    /// Whether to nudge at `now` (and note that we do): the join has gone
    /// on `stuck`, and so has the last nudge.
    pub(super) fn due(&mut self, now: Instant) -> Option<Duration> {
        let since = self.joining_since?;
        let waited = now.saturating_duration_since(since);
        let again = self.nudged.is_none_or(|at| now.saturating_duration_since(at) >= self.stuck);
        (waited >= self.stuck && again).then(|| {
            self.nudged = Some(now);
            waited
        })
    }
}

/// The join state in librdkafka's statistics (`"cgrp": {... "join_state":
/// "wait-sync" ...}`), read without parsing the rest.
pub(super) fn join_state(stats: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(stats).ok()?;
    let cgrp = &text[text.find("\"cgrp\"")?..];
    let rest = &cgrp[cgrp.find("\"join_state\"")? + "\"join_state\"".len()..];
    let value = rest.trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
    value.split('"').next()
}

/// Says the stuck join, then nudges the coordinator on threads of its
/// own: the consumer thread never waits for it, and a nudge that fails
/// only says so.
pub(super) fn nudge(config: &ClientConfig, waited: Duration) {
    warn!(
        waited = ?waited,
        "the group's rebalance has not ended: nudging its coordinator (tansu 0.6 can keep a departed member as \
         the group's leader for good; docs/operations.md, \"On tansu\")"
    );
    for n in 0..CLIENTS {
        let config = config.clone();
        let spawned = std::thread::Builder::new().name("neli-nudge".into()).spawn(move || commits(&config, n));
        if let Err(err) = spawned {
            debug!(%err, "could not start a nudge's client");
        }
    }
}

/// One client of a nudge: `COMMITS` commits, each refused.
fn commits(config: &ClientConfig, n: usize) {
    let consumer: BaseConsumer = match config.create() {
        Ok(c) => c,
        Err(err) => return debug!(%err, n, "a nudge's client could not be made"),
    };
    let mut tpl = TopicPartitionList::new();
    if tpl.add_partition_offset(TOPIC, 0, Offset::Offset(0)).is_err() {
        return;
    }
    let until = Instant::now() + BURST;
    for _ in 0..COMMITS {
        if Instant::now() >= until {
            break;
        }
        // Refused (UNKNOWN_MEMBER_ID): what counts is that it was sent.
        let _ = consumer.commit(&tpl, CommitMode::Sync);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_join_is_nudged_once_it_has_lasted_the_rebalance_timeout_and_a_session_then_each_time_as_long_again() {
        let t0 = Instant::now();
        let mut w = JoinWatch::new(10 * S, 6 * S);
        w.state("wait-join", t0);
        w.state("wait-sync", t0 + 5 * S);
        assert_eq!(w.due(t0 + 15 * S), None, "a join of 15 s is a slow one, not a stuck one");
        assert_eq!(w.due(t0 + 16 * S), Some(16 * S));
        assert_eq!(w.due(t0 + 17 * S), None, "once a stuck time");
        w.state("wait-join", t0 + 30 * S);
        assert_eq!(w.due(t0 + 31 * S), None);
        assert_eq!(w.due(t0 + 32 * S), Some(32 * S), "nudged again while it lasts");
    }

    #[test]
    fn a_steady_or_idle_member_is_never_nudged_and_a_new_join_counts_afresh() {
        let t0 = Instant::now();
        let mut w = JoinWatch::new(10 * S, 6 * S);
        assert_eq!(w.due(t0 + 100 * S), None, "no state reported");
        w.state("wait-join", t0);
        w.state("steady", t0 + 3 * S);
        assert_eq!(w.due(t0 + 100 * S), None, "the join ended");
        w.state("wait-join", t0 + 100 * S);
        assert_eq!(w.due(t0 + 115 * S), None, "this join began at 100 s");
        w.state("init", t0 + 115 * S);
        assert_eq!(w.due(t0 + 200 * S), None, "out of the group: nothing to nudge");
    }

    #[test]
    fn a_join_whose_rounds_assign_or_revoke_counts_from_its_last_round() {
        let t0 = Instant::now();
        let mut w = JoinWatch::new(10 * S, 6 * S);
        w.moved(t0);
        assert_eq!(w.due(t0 + 100 * S), None, "no join under way: nothing moved");
        w.state("wait-join", t0);
        w.moved(t0 + 10 * S);
        w.state("wait-sync", t0 + 12 * S);
        assert_eq!(w.due(t0 + 25 * S), None, "16 s from the last round, not from the join's start");
        assert_eq!(w.due(t0 + 26 * S), Some(16 * S));
    }

    #[test]
    fn the_join_state_is_read_from_the_groups_part_of_the_statistics() {
        let stats = br#"{"name":"c","brokers":{"b":{"state":"UP"}},"cgrp": { "state": "up", "stateage": 1, "join_state" : "wait-sync", "rebalance_age": 3}}"#;
        assert_eq!(join_state(stats), Some("wait-sync"));
        assert_eq!(join_state(br#"{"join_state":"steady"}"#), None, "not the group's");
        assert_eq!(join_state(br#"{"cgrp":{"state":"up"}}"#), None);
        assert_eq!(join_state(b"\xff"), None);
    }
}
