//! What `status --json` says, kept up to date for a reader that stays
//! (`neli-run console`): the group's partitions read once from outside the
//! group, as `status` reads them, then followed record by record, with each
//! role's leaderships noted as the heartbeats show them (the console's
//! timeline), and read again when the group grows. One consumer, assigned
//! (it never joins the group).

use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;

use super::probe::Probe;
use super::read::{read_partition, read_partitions, shape, topic_partitions};
use super::render::{render, render_roles};
use super::view::View;
use super::Stop;
use crate::clock::wall_ms;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::kafka::heartbeat::Heartbeat;

/// How long a leadership is kept after it ended: a day, the console's
/// longest timeline, and a little.
const KEEP_MS: u64 = 25 * 3600 * 1000;

/// The most leaderships kept per role (a flapping role's oldest go first).
const MOST: usize = 4096;

/// One leadership of a role, as its leader's heartbeats showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lead {
    pub name: String,
    pub token: i64,
    /// Since when it leads (its record's `since_ms`, else its first seen).
    pub from_ms: u64,
    /// Its newest heartbeat with the token, or its release.
    pub to_ms: u64,
    /// It took its claim back (released, fenced): no newer heartbeat.
    pub ended: bool,
}

/// How often the topic's partitions are counted again (one metadata
/// request): a group that grows (`--roles` raised, a crontab's new job, a
/// crontab's first placing of its jobs) shows within this.
const RECOUNT: Duration = Duration::from_secs(5);

/// A follower of the group's partitions: `status --json`'s answer now,
/// and each role's leaderships.
pub struct Follower {
    consumer: BaseConsumer<Probe>,
    target: Target,
    /// None: a single leader's group (partition 0 alone).
    partitions: Option<Option<u32>>,
    views: Vec<View>,
    leads: Vec<Vec<Lead>>,
    counted: Instant,
}

impl Follower {
    /// Reads the group's partitions to their ends, as `status` does.
    pub fn open(target: &Target) -> Result<Follower, Failure> {
        let failure = |stop: Stop| match stop {
            Stop::Fail(failure) => failure,
            Stop::Closed => Failure::new(Kind::Internal, "status reader closed"),
        };
        let (consumer, view) = read_partition(target).map_err(failure)?;
        let (consumer, partitions, views) = match shape(&view, || topic_partitions(&consumer, target)) {
            None => (consumer, None, vec![view]),
            Some((roles, partitions)) => {
                drop(consumer);
                let (consumer, views) = read_partitions(target, roles).map_err(failure)?;
                (consumer, Some(partitions), views)
            }
        };
        let mut follower = Follower {
            consumer,
            target: target.clone(),
            partitions,
            views: Vec::new(),
            leads: vec![Vec::new(); views.len()],
            counted: Instant::now(),
        };
        follower.take(views);
        Ok(follower)
    }

    /// Reads the group's partitions again when they are no longer what
    /// it has (a role's partition added, a single leader's group become
    /// one of roles or a crontab's), keeping the leaderships seen; at most
    /// once every [`RECOUNT`]. A failed reading keeps this one, to be tried
    /// again.
    pub fn grow(&mut self) -> Result<(), Failure> {
        if self.counted.elapsed() < RECOUNT {
            return Ok(());
        }
        self.counted = Instant::now();
        let Some(partitions) = topic_partitions(&self.consumer, &self.target) else { return Ok(()) };
        let had = self.partitions.map(|p| (u32::try_from(self.views.len()).unwrap_or(u32::MAX), p));
        if shape(&self.views[0], || Some(partitions)) == had {
            return Ok(());
        }
        let mut grown = Follower::open(&self.target)?;
        for (j, leads) in std::mem::take(&mut self.leads).into_iter().enumerate() {
            if let Some(new) = grown.leads.get_mut(j) {
                *new = leads;
            }
        }
        *self = grown;
        Ok(())
    }

    /// The views as read, with each one's current leader as its first
    /// leadership seen.
    fn take(&mut self, views: Vec<View>) {
        for (j, view) in views.iter().enumerate() {
            if let Some(hb) = &view.leader {
                note(&mut self.leads[j], hb);
            }
        }
        self.views = views;
    }

    /// Takes in what came within `wait` (at most a few hundred records).
    pub fn poll(&mut self, wait: Duration) {
        let mut wait = wait;
        for _ in 0..512 {
            match self.consumer.poll(wait) {
                Some(Ok(msg)) => {
                    let Some(j) = usize::try_from(msg.partition()).ok().filter(|&j| j < self.views.len()) else {
                        continue;
                    };
                    if let Some(hb) = msg.payload().and_then(Heartbeat::decode) {
                        note(&mut self.leads[j], &hb);
                    }
                    self.views[j].read(msg.payload(), msg.offset());
                }
                Some(Err(KafkaError::PartitionEOF(_))) | None => return,
                Some(Err(e)) => {
                    crate::stderr::line(format_args!("warning: {e}"));
                    return;
                }
            }
            wait = Duration::ZERO;
        }
    }

    /// What `status --json` would print now.
    pub fn json(&self) -> serde_json::Value {
        let text = match self.partitions {
            None => render(&self.target, &self.views[0], true),
            Some(partitions) => render_roles(&self.target, &self.views, partitions, true),
        };
        serde_json::from_str(&text).unwrap_or_default()
    }

    /// Each role's leaderships (one list for a single leader's group),
    /// oldest first.
    pub fn leads(&self) -> &[Vec<Lead>] {
        &self.leads
    }
}

/// Notes `hb` in a role's leaderships: a heartbeat with a token extends
/// its leadership or begins one; one without, from the leader, ends it.
fn note(leads: &mut Vec<Lead>, hb: &Heartbeat) {
    let same = |l: &Lead| l.name == hb.name && !l.ended;
    match (hb.token, leads.last_mut()) {
        (Some(token), Some(last)) if same(last) && last.token == token => last.to_ms = last.to_ms.max(hb.at_ms),
        (Some(token), _) => leads.push(Lead {
            name: hb.name.clone(),
            token,
            from_ms: hb.since_ms.unwrap_or(hb.at_ms).min(hb.at_ms),
            to_ms: hb.at_ms,
            ended: false,
        }),
        (None, Some(last)) if same(last) => {
            last.to_ms = last.to_ms.max(hb.at_ms);
            last.ended = true;
        }
        (None, _) => {}
    }
    let old = wall_ms().saturating_sub(KEEP_MS);
    let stale = leads.iter().take_while(|l| l.to_ms < old).count().max(leads.len().saturating_sub(MOST));
    leads.drain(..stale);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::view::tests::hb;

    #[test]
    fn heartbeats_make_leaderships_that_a_release_or_a_new_token_ends() {
        let now = wall_ms();
        let mut leads = Vec::new();
        note(&mut leads, &hb("a", Some(5), now - 3000));
        note(&mut leads, &hb("a", Some(5), now - 2000));
        note(&mut leads, &hb("b", None, now - 1900));
        assert_eq!(leads.len(), 1, "a standby's record changes nothing: {leads:?}");
        assert_eq!((leads[0].from_ms, leads[0].to_ms, leads[0].ended), (now - 3000, now - 2000, false));
        note(&mut leads, &hb("a", None, now - 1500));
        assert!(leads[0].ended && leads[0].to_ms == now - 1500, "{leads:?}");
        note(&mut leads, &hb("b", Some(6), now - 1000));
        note(&mut leads, &hb("b", Some(7), now - 500));
        let tokens: Vec<i64> = leads.iter().map(|l| l.token).collect();
        assert_eq!(tokens, [5, 6, 7], "each token its own leadership");
        let mut leads = Vec::new();
        note(&mut leads, &hb("c", Some(8), now - KEEP_MS * 2));
        note(&mut leads, &hb("c", Some(9), now));
        let tokens: Vec<i64> = leads.iter().map(|l| l.token).collect();
        assert_eq!(tokens, [9], "a leadership older than a day is dropped");
    }
}
