//! The dev broker as a cluster (`--brokers N`): which brokers are up, who
//! leads each partition, which broker is the group coordinator, and which
//! clients are cut off from which broker. The events that change them
//! ([`Event`], sent through `--control`) are carried out in [`crate::control`];
//! this module holds the state and decides, as a Kafka cluster's controller
//! would, where a leadership goes.
//!
//! A model of Kafka's cluster as clients see it, not of its replication:
//! every broker holds a replica of every partition, and every broker that is
//! up is in sync. Leaders are spread (partition p on broker p mod N + 1),
//! and the coordinator starts on the last broker, so that with several
//! brokers partition 0's leader and the coordinator are apart, as on most
//! clusters.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::wire::TOPIC_ALREADY_EXISTS;

/// A broker's id: 1 to N, as the mock numbers them.
pub type BrokerId = i32;

fn no_partition(topic: &str, partition: i32) -> String {
    format!("no partition {partition} of topic {topic:?} (not created yet?)")
}

/// A change made on demand, as a cluster's own life makes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Move a partition's leadership to another broker (a preferred leader
    /// election, or `kafka-reassign-partitions`).
    Leader { topic: String, partition: i32, to: BrokerId },
    /// Leave a partition without a leader (its only in-sync replica lost).
    Offline { topic: String, partition: i32 },
    /// Move the group coordinator (the leadership of the group's
    /// `__consumer_offsets` partition) to another broker.
    Coordinator { to: BrokerId },
    /// A controlled shutdown: leaderships and the coordinator moved off
    /// first, then connections closed and new ones refused.
    Stop { broker: BrokerId },
    /// A crash: connections closed at once; leaderships and the coordinator
    /// moved only after `after` (KRaft's broker.session.timeout.ms).
    Crash { broker: BrokerId, after: std::time::Duration },
    /// Start a stopped or crashed broker again, as a follower.
    Start { broker: BrokerId },
    /// Hold every byte between a client (its client.id) and one broker, both
    /// ways, as a network cut between them holds it (TCP delivers it after
    /// the cut heals).
    Cut { client: String, broker: BrokerId },
    /// Cut a client off from one broker as it sends that broker a request
    /// carrying `text` (a Produce's record: e.g. a heartbeat's
    /// `"role":"leading"`; a topic's name in any request naming it): that
    /// request is held, with everything after it,
    /// as a cut at that instant holds it. What comes before goes through: a
    /// cut at the one moment a race needs, which a test cannot time from
    /// outside (a member's first record read back, its next not written).
    CutAt { client: String, broker: BrokerId, text: String },
    /// End cuts (and cuts armed by `CutAt`): all, or a client's, or a
    /// client's to one broker.
    Heal { client: Option<String>, broker: Option<BrokerId> },
    /// Refuse (`denied`) or allow CreatePartitions on a topic, as an ACL
    /// for ALTER on it, revoked or granted, does.
    Alter { topic: String, denied: bool },
    /// Answer the next Fetch of a partition, from any client, with
    /// OFFSET_OUT_OF_RANGE and no records, as a broker answers a fetch
    /// past the log end it knows (a new leader whose log lags); later
    /// fetches are served as before ([`crate::rewinds`]).
    Rewind { topic: String, partition: i32 },
    /// Say how the cluster stands.
    Describe,
    /// Say how many requests each client sent, by API, since the start
    /// (`requests::Requests::lines`).
    Requests,
    /// Say the longest wait each client's fetches for any record asked for
    /// (`requests::Requests::fetch_waits`).
    FetchWaits,
}

/// How long a crashed broker's leaderships stay with it: KRaft's
/// broker.session.timeout.ms default.
pub const CRASH_NOTICED_AFTER: std::time::Duration = std::time::Duration::from_secs(9);

/// The control socket's grammar, one event per line.
pub const GRAMMAR: &str = "leader TOPIC PARTITION BROKER | offline TOPIC PARTITION | coordinator BROKER | \
                           stop BROKER | crash BROKER [DURATION] | start BROKER | cut CLIENT BROKER | \
                           cut-at CLIENT BROKER TEXT | heal [CLIENT [BROKER]] | deny-alter TOPIC | allow-alter TOPIC | rewind TOPIC PARTITION | \
                           describe | requests";

impl Event {
    /// Reads one line of the control socket's grammar ([`GRAMMAR`]).
    pub fn parse(line: &str) -> Result<Event, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let broker = |w: &str| w.parse::<BrokerId>().map_err(|_| format!("{w:?} is not a broker id (1 to N)"));
        let partition = |w: &str| w.parse::<i32>().map_err(|_| format!("{w:?} is not a partition number"));
        Ok(match words.as_slice() {
            ["leader", topic, p, to] => {
                Event::Leader { topic: topic.to_string(), partition: partition(p)?, to: broker(to)? }
            }
            ["offline", topic, p] => Event::Offline { topic: topic.to_string(), partition: partition(p)? },
            ["coordinator", to] => Event::Coordinator { to: broker(to)? },
            ["stop", b] => Event::Stop { broker: broker(b)? },
            ["crash", b] => Event::Crash { broker: broker(b)?, after: CRASH_NOTICED_AFTER },
            ["crash", b, after] => Event::Crash {
                broker: broker(b)?,
                after: humantime::parse_duration(after).map_err(|e| format!("crash {b} {after}: {e}"))?,
            },
            ["start", b] => Event::Start { broker: broker(b)? },
            ["cut", client, b] => Event::Cut { client: client.to_string(), broker: broker(b)? },
            ["cut-at", client, b, text] => {
                Event::CutAt { client: client.to_string(), broker: broker(b)?, text: text.to_string() }
            }
            ["heal"] => Event::Heal { client: None, broker: None },
            ["heal", client] => Event::Heal { client: Some(client.to_string()), broker: None },
            ["heal", client, b] => Event::Heal { client: Some(client.to_string()), broker: Some(broker(b)?) },
            ["deny-alter", topic] => Event::Alter { topic: topic.to_string(), denied: true },
            ["allow-alter", topic] => Event::Alter { topic: topic.to_string(), denied: false },
            ["rewind", topic, p] => Event::Rewind { topic: topic.to_string(), partition: partition(p)? },
            ["describe"] => Event::Describe,
            ["requests"] => Event::Requests,
            ["fetch-waits"] => Event::FetchWaits,
            [name, ..] => {
                // A known event with the wrong words: say what it takes.
                let usage = GRAMMAR.split(" | ").find(|u| u.split(' ').next() == Some(name));
                return Err(match usage.map(|u| u[name.len()..].trim()) {
                    Some("") => format!("{name} takes no arguments"),
                    Some(words) => format!("{name} needs {words}"),
                    None => format!("unknown event {line:?}; events: {GRAMMAR}"),
                });
            }
            _ => return Err(format!("unknown event {line:?}; events: {GRAMMAR}")),
        })
    }
}

/// The cluster's state, behind one lock (events are rare; connections read
/// it once per request).
pub struct Cluster {
    /// N.
    pub size: BrokerId,
    state: Mutex<State>,
    /// Bumped on every change: connections held by a cut wait on it.
    changed: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    /// By broker id - 1.
    up: Vec<bool>,
    /// By broker id - 1: how many times it went down, so that a crash's
    /// delayed moves do not outlive a restart.
    downs: Vec<u64>,
    /// Leaders by topic, by partition (-1: none).
    leaders: BTreeMap<String, Vec<BrokerId>>,
    coordinator: BrokerId,
    /// Clients (client.id) cut from brokers.
    cuts: BTreeSet<(String, BrokerId)>,
    /// Cuts that fall once the client produces a record carrying the text
    /// to the broker (`CutAt`).
    armed: BTreeSet<(String, BrokerId, String)>,
    /// Topics whose partitions nobody may add (`deny-alter`).
    alter_denied: BTreeSet<String>,
}

impl Cluster {
    /// N brokers, all up, the coordinator on the last.
    pub fn new(size: BrokerId) -> Cluster {
        let state = State {
            up: vec![true; size as usize],
            downs: vec![0; size as usize],
            coordinator: size,
            ..State::default()
        };
        Cluster { size, state: Mutex::new(state), changed: tokio::sync::watch::Sender::new(0) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Refuses an id that names no broker.
    pub fn check(&self, broker: BrokerId) -> Result<(), String> {
        if (1..=self.size).contains(&broker) {
            Ok(())
        } else {
            Err(format!("no broker {broker}: this cluster has brokers 1 to {}", self.size))
        }
    }

    pub fn is_up(&self, broker: BrokerId) -> bool {
        self.state().up.get(broker as usize - 1).copied().unwrap_or(false)
    }

    /// Marks a broker down or up; returns how many times it went down.
    pub fn set_up(&self, broker: BrokerId, up: bool) -> u64 {
        let mut s = self.state();
        let i = broker as usize - 1;
        if s.up[i] && !up {
            s.downs[i] += 1;
        }
        s.up[i] = up;
        let downs = s.downs[i];
        drop(s);
        self.bump();
        downs
    }

    /// How many times a broker went down (see [`Cluster::set_up`]).
    pub fn downs(&self, broker: BrokerId) -> u64 {
        self.state().downs[broker as usize - 1]
    }

    /// Returns once `broker` has gone down more than `since` times (see
    /// [`Cluster::downs`]): what a client connection to it waits on, as a
    /// broker that goes down closes its connections.
    pub async fn went_down(&self, broker: BrokerId, since: u64) {
        self.until(|| self.downs(broker) != since).await
    }

    /// Returns once `done` holds, looked at again after each change.
    async fn until(&self, done: impl Fn() -> bool) {
        let mut changed = self.changed.subscribe();
        while !done() {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// The broker that coordinates every group.
    pub fn coordinator(&self) -> BrokerId {
        self.state().coordinator
    }

    pub fn set_coordinator(&self, broker: BrokerId) {
        self.state().coordinator = broker;
        self.bump();
    }

    /// Where a new topic's partitions lead: spread over the brokers up,
    /// partition p on broker p mod N + 1 or the next one up.
    pub fn place(&self, topic: &str, partitions: i32) -> Vec<BrokerId> {
        let leaders = self.place_from_scratch(partitions);
        self.state().leaders.entry(topic.to_string()).or_insert(leaders).clone()
    }

    /// Has `make` (the mock's CreateTopics) make `topic` of `partitions`,
    /// counted and placed (as [`Cluster::place`]) before `make` runs: the
    /// mock's topic has room for more ([`crate::partitions::ROOM`]), and a
    /// Metadata answer it gives meanwhile is trimmed by this count. Counted
    /// after, one went out whole (findings R-6: 64 partitions for a topic of
    /// 12). A count kept here for a topic `make` then could not make goes
    /// again, unless the mock has the topic (another made it at once).
    /// Returns the partitions' leaders.
    pub fn create(
        &self,
        topic: &str,
        partitions: i32,
        make: impl FnOnce() -> Result<(), (i16, String)>,
    ) -> Result<Vec<BrokerId>, (i16, String)> {
        let placed = self.place_from_scratch(partitions);
        let (leaders, counted_here) = {
            let mut s = self.state();
            let counted_here = !s.leaders.contains_key(topic);
            (s.leaders.entry(topic.to_string()).or_insert(placed).clone(), counted_here)
        };
        if let Err((code, message)) = make() {
            if counted_here && code != TOPIC_ALREADY_EXISTS {
                self.state().leaders.remove(topic);
            }
            return Err((code, message));
        }
        Ok(leaders)
    }

    /// Where partitions 0 to `partitions` - 1 of a new topic would lead.
    fn place_from_scratch(&self, partitions: i32) -> Vec<BrokerId> {
        let s = self.state();
        (0..partitions)
            .map(|p| (0..self.size).map(|k| (p + k) % self.size + 1).find(|b| s.up[*b as usize - 1]).unwrap_or(-1))
            .collect()
    }

    /// Refuses or allows CreatePartitions on `topic` ([`Event::Alter`]).
    pub fn deny_alter(&self, topic: &str, denied: bool) {
        let mut s = self.state();
        match denied {
            true => s.alter_denied.insert(topic.to_string()),
            false => s.alter_denied.remove(topic),
        };
    }

    /// Whether CreatePartitions on `topic` is refused ([`Event::Alter`]).
    pub fn alter_denied(&self, topic: &str) -> bool {
        self.state().alter_denied.contains(topic)
    }

    /// How many partitions `topic` has (None: no such topic).
    pub fn partitions(&self, topic: &str) -> Option<i32> {
        self.state().leaders.get(topic).map(|l| l.len() as i32)
    }

    /// Gives `topic` partitions up to `count`, each new one's leader placed
    /// as a new topic's are; returns the new ones with their leaders.
    pub fn grow(&self, topic: &str, count: i32) -> Vec<(i32, BrokerId)> {
        let all = self.place_from_scratch(count);
        let mut s = self.state();
        let Some(leaders) = s.leaders.get_mut(topic) else { return Vec::new() };
        let from = leaders.len();
        leaders.extend(all.iter().skip(from));
        (from as i32..).zip(all.into_iter().skip(from)).collect()
    }

    /// Records a partition's new leader.
    pub fn set_leader(&self, topic: &str, partition: i32, leader: BrokerId) -> Result<(), String> {
        let mut s = self.state();
        let slot = s
            .leaders
            .get_mut(topic)
            .and_then(|l| l.get_mut(usize::try_from(partition).ok()?))
            .ok_or_else(|| no_partition(topic, partition))?;
        *slot = leader;
        Ok(())
    }

    /// Whether the partition exists (else why not).
    pub fn has_partition(&self, topic: &str, partition: i32) -> Result<(), String> {
        let s = self.state();
        let found = s.leaders.get(topic).is_some_and(|l| usize::try_from(partition).is_ok_and(|p| p < l.len()));
        found.then_some(()).ok_or_else(|| no_partition(topic, partition))
    }

    /// The partitions `broker` leads.
    pub fn led_by(&self, broker: BrokerId) -> Vec<(String, i32)> {
        let s = self.state();
        let led = s.leaders.iter().flat_map(|(t, l)| {
            l.iter().enumerate().filter(|(_, b)| **b == broker).map(move |(p, _)| (t.clone(), p as i32))
        });
        led.collect()
    }

    /// Partitions without a leader.
    pub fn offline(&self) -> Vec<(String, i32)> {
        self.led_by(-1)
    }

    /// Another broker that is up, to take over from `broker` (the next one
    /// after it, round the ring); None if none is.
    pub fn successor(&self, broker: BrokerId) -> Option<BrokerId> {
        let s = self.state();
        (1..self.size).map(|k| (broker - 1 + k) % self.size + 1).find(|b| s.up[*b as usize - 1])
    }

    pub fn cut(&self, client: &str, broker: BrokerId) {
        self.state().cuts.insert((client.to_string(), broker));
        self.bump();
    }

    /// Arms a cut of `client` from `broker` that falls at its first
    /// request there carrying `text` (`cut_if_carries`).
    pub fn cut_at(&self, client: &str, broker: BrokerId, text: &str) {
        self.state().armed.insert((client.to_string(), broker, text.to_string()));
    }

    /// Cuts `client` off from `broker` if `request` (a request it sent
    /// there) carries the text of a cut armed for them; the caller
    /// then holds the request as any other of a cut client's.
    pub fn cut_if_carries(&self, client: &str, broker: BrokerId, request: &[u8]) {
        let mut s = self.state();
        let carries = |text: &str| request.windows(text.len().max(1)).any(|w| w == text.as_bytes());
        let Some(armed) = s.armed.iter().find(|(c, b, text)| c == client && *b == broker && carries(text)).cloned()
        else {
            return;
        };
        s.armed.remove(&armed);
        s.cuts.insert((armed.0, armed.1));
        drop(s);
        tracing::info!(client, broker, text = armed.2, "cluster event: a request carrying the text came: cut");
        self.bump();
    }

    /// Ends the cuts that match, and disarms the armed ones; returns how
    /// many cuts it ended.
    pub fn heal(&self, client: Option<&str>, broker: Option<BrokerId>) -> usize {
        let mut s = self.state();
        let before = s.cuts.len();
        let matches = |c: &String, b: &BrokerId| client.is_none_or(|x| x == c) && broker.is_none_or(|x| x == *b);
        s.cuts.retain(|(c, b)| !matches(c, b));
        s.armed.retain(|(c, b, _)| !matches(c, b));
        let healed = before - s.cuts.len();
        drop(s);
        self.bump();
        healed
    }

    fn is_cut(&self, client: &str, broker: BrokerId) -> bool {
        let s = self.state();
        !s.cuts.is_empty() && s.cuts.contains(&(client.to_string(), broker))
    }

    /// Returns once `client` is not cut from `broker` (at once if it is
    /// not): what a connection between them waits on before each request
    /// and each response.
    pub async fn pass(&self, client: &str, broker: BrokerId) {
        self.until(|| !self.is_cut(client, broker)).await
    }

    /// How the cluster stands, on one line: "brokers 1:up 2:down 3:up;
    /// coordinator 3; leaders t/0:1 t/1:3; cuts a@1".
    pub fn describe(&self) -> String {
        let s = self.state();
        let brokers: Vec<String> =
            s.up.iter().enumerate().map(|(i, up)| format!("{}:{}", i + 1, if *up { "up" } else { "down" })).collect();
        let leaders: Vec<String> = s
            .leaders
            .iter()
            .flat_map(|(t, l)| l.iter().enumerate().map(move |(p, b)| format!("{t}/{p}:{b}")))
            .collect();
        let cuts = s.cuts.iter().map(|(c, b)| format!("{c}@{b}"));
        let armed = s.armed.iter().map(|(c, b, text)| format!("{c}@{b} at {text}"));
        let cuts: Vec<String> = cuts.chain(armed).collect();
        format!(
            "brokers {}; coordinator {}; leaders {}; cuts {}",
            brokers.join(" "),
            s.coordinator,
            if leaders.is_empty() { "none".into() } else { leaders.join(" ") },
            if cuts.is_empty() { "none".into() } else { cuts.join(" ") },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_from_their_lines_and_mistakes_named() {
        assert_eq!(Event::parse("leader t 0 2"), Ok(Event::Leader { topic: "t".into(), partition: 0, to: 2 }));
        assert_eq!(Event::parse(" crash 1 "), Ok(Event::Crash { broker: 1, after: CRASH_NOTICED_AFTER }));
        assert_eq!(
            Event::parse("crash 1 2s"),
            Ok(Event::Crash { broker: 1, after: std::time::Duration::from_secs(2) })
        );
        assert_eq!(Event::parse("heal a 3"), Ok(Event::Heal { client: Some("a".into()), broker: Some(3) }));
        assert_eq!(Event::parse("deny-alter t"), Ok(Event::Alter { topic: "t".into(), denied: true }));
        assert_eq!(Event::parse("allow-alter t"), Ok(Event::Alter { topic: "t".into(), denied: false }));
        assert_eq!(Event::parse("deny-alter").unwrap_err(), "deny-alter needs TOPIC");
        assert!(Event::parse("stop x").unwrap_err().contains("not a broker id"));
        assert!(Event::parse("reboot 1").unwrap_err().contains("events: leader TOPIC"));
        assert!(Event::parse("crash 1 soon").unwrap_err().contains("crash 1 soon"));
        assert_eq!(Event::parse("stop").unwrap_err(), "stop needs BROKER");
        assert_eq!(Event::parse("leader t 0").unwrap_err(), "leader needs TOPIC PARTITION BROKER");
        assert_eq!(Event::parse("describe extra").unwrap_err(), "describe takes no arguments");
        assert_eq!(Event::parse(" rewind  g.neli 3 "), Ok(Event::Rewind { topic: "g.neli".into(), partition: 3 }));
        assert_eq!(Event::parse("rewind g.neli").unwrap_err(), "rewind needs TOPIC PARTITION");
        assert_eq!(Event::parse("rewind g.neli 0 1").unwrap_err(), "rewind needs TOPIC PARTITION");
        assert_eq!(Event::parse("rewind g.neli x").unwrap_err(), "\"x\" is not a partition number");
        assert_eq!(Event::parse("requests"), Ok(Event::Requests));
        assert_eq!(
            Event::parse(r#"cut-at a 1 "role":"leading""#),
            Ok(Event::CutAt { client: "a".into(), broker: 1, text: r#""role":"leading""#.into() })
        );
        assert_eq!(Event::parse("cut-at a 1").unwrap_err(), "cut-at needs CLIENT BROKER TEXT");
        assert_eq!(Event::parse("fetch-waits"), Ok(Event::FetchWaits));
        assert!(Event::parse("").unwrap_err().contains("events: leader TOPIC"));
    }

    #[test]
    fn leaders_spread_over_the_brokers_up_and_the_coordinator_starts_apart() {
        let c = Cluster::new(3);
        assert_eq!(c.place("t", 4), vec![1, 2, 3, 1]);
        assert_eq!(c.coordinator(), 3);
        c.set_up(2, false);
        assert_eq!(c.place("u", 3), vec![1, 3, 3]);
        assert_eq!(c.place("t", 4), vec![1, 2, 3, 1], "placed once");
        assert_eq!(c.led_by(1), vec![("t".into(), 0), ("t".into(), 3), ("u".into(), 0)]);
        assert_eq!(c.successor(1), Some(3));
        assert_eq!(c.successor(3), Some(1));
        c.set_up(1, false);
        c.set_up(3, false);
        assert_eq!(c.successor(3), None);
        assert_eq!(c.place("v", 1), vec![-1]);
        assert_eq!(c.offline(), vec![("v".into(), 0)]);
        c.cut("a", 2);
        assert_eq!(
            c.describe(),
            "brokers 1:down 2:down 3:down; coordinator 3; leaders t/0:1 t/1:2 t/2:3 t/3:1 u/0:1 u/1:3 u/2:3 v/0:-1; \
             cuts a@2"
        );
    }

    /// Findings R-6: a Metadata answer given while the mock makes a topic
    /// is trimmed by the topic's count, which is kept from before.
    #[test]
    fn a_topic_is_counted_while_the_mock_makes_it_and_not_once_it_could_not() {
        let c = Cluster::new(3);
        let made = c.create("t", 12, || {
            assert_eq!(c.partitions("t"), Some(12), "counted while the mock makes it");
            Ok(())
        });
        assert_eq!(made, Ok(vec![1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]));
        let refused = (crate::wire::INVALID_REPLICATION_FACTOR, "no".to_string());
        assert_eq!(c.create("u", 2, || Err(refused.clone())), Err(refused.clone()));
        assert_eq!(c.partitions("u"), None, "not made: not counted");
        let exists = (TOPIC_ALREADY_EXISTS, "Topic 'v' already exists.".to_string());
        assert_eq!(c.create("v", 2, || Err(exists.clone())), Err(exists.clone()));
        assert_eq!(c.partitions("v"), Some(2), "the mock has it (made by another at once): counted");
        assert_eq!(c.create("t", 12, || Err(refused.clone())), Err(refused));
        assert_eq!(c.partitions("t"), Some(12), "counted before: still counted");
    }

    #[test]
    fn a_broker_going_down_counts_once_per_down() {
        let c = Cluster::new(1);
        assert_eq!(c.set_up(1, false), 1);
        assert_eq!(c.set_up(1, false), 1);
        c.set_up(1, true);
        assert_eq!(c.set_up(1, false), 2);
        assert!(c.check(2).is_err() && c.check(0).is_err() && c.check(1).is_ok());
    }

    #[tokio::test]
    async fn a_cut_holds_its_client_on_its_broker_only_until_healed() {
        let c = std::sync::Arc::new(Cluster::new(2));
        c.cut("a", 1);
        c.pass("a", 2).await;
        c.pass("b", 1).await;
        let held = tokio::spawn({
            let c = c.clone();
            async move { c.pass("a", 1).await }
        });
        tokio::task::yield_now().await;
        assert!(!held.is_finished());
        assert_eq!(c.heal(Some("b"), None), 0);
        assert_eq!(c.heal(Some("a"), Some(1)), 1);
        held.await.unwrap();
    }

    #[tokio::test]
    async fn an_armed_cut_falls_at_its_clients_first_request_carrying_the_text_there() {
        let c = Cluster::new(2);
        c.cut_at("a", 1, "leading");
        // Another client's, another broker's, or a request without it: no cut.
        c.cut_if_carries("b", 1, b"..leading..");
        c.cut_if_carries("a", 2, b"..leading..");
        c.cut_if_carries("a", 1, b"..contending..");
        assert!(!c.is_cut("b", 1) && !c.is_cut("a", 2) && !c.is_cut("a", 1));
        assert_eq!(c.describe(), "brokers 1:up 2:up; coordinator 2; leaders none; cuts a@1 at leading");
        c.cut_if_carries("a", 1, b"..\"role\":\"leading\"..");
        assert!(c.is_cut("a", 1));
        assert_eq!(c.describe(), "brokers 1:up 2:up; coordinator 2; leaders none; cuts a@1");
        // Healed, it stays healed: the armed cut fell once.
        assert_eq!(c.heal(None, None), 1);
        c.cut_if_carries("a", 1, b"leading");
        assert!(!c.is_cut("a", 1));
        // A heal disarms what has not fallen yet.
        c.cut_at("a", 1, "x");
        c.heal(Some("a"), None);
        c.cut_if_carries("a", 1, b"x");
        assert!(!c.is_cut("a", 1));
    }
}
