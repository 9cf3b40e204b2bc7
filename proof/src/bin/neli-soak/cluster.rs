//! The Kafka cluster's own life as soak faults (`--cluster N`): each one a
//! script of events for the dev broker's control socket, timed from the
//! fault's start, and how long to watch the command after it.
//!
//! Planned events (a rolling restart, a leader or coordinator move, a
//! partition read again from its start) must never stop the command; unplanned ones (a crash, a partition offline, the
//! leader cut off from the coordinator or from partition 0's leader) may
//! stop it only where safety needs it. The soak counts a stop after which
//! the same member led again as a *needless stop*, and the report says
//! which faults made them.

use std::time::Duration;

use neli_proof::brokers::{coordinator_of, leader_of};
use neli_proof::Rng;

use crate::faults::Fault;
use crate::members::Soak;

/// Events at offsets from the fault's start, and the fault's whole length
/// (the last event plus the time the command is watched after it).
pub struct Script {
    pub events: Vec<(Duration, String)>,
    pub length: Duration,
}

impl Soak {
    /// The script of a cluster fault struck while the member in `slot`
    /// leads; None for the other faults, or if the cluster cannot say how
    /// it stands. Every script leaves every broker up and every cut healed.
    pub fn script(&self, fault: Fault, slot: usize, rng: &mut Rng) -> Option<Script> {
        let broker = self.broker.as_ref().filter(|_| fault.is_cluster_event())?;
        let now =
            broker.event("describe").map_err(|why| eprintln!("neli-soak: {why}: no cluster event this time")).ok()?;
        let n = self.cluster as i32;
        let s = self.session;
        let topic = format!("{}.neli", self.group);
        let other = |rng: &mut Rng, not: i32| {
            let others: Vec<i32> = (1..=n).filter(|b| *b != not).collect();
            rng.pick(&others)
        };
        let at = |offset: Duration, event: String| (offset, event);
        let (events, watch) = match fault {
            Fault::RollingRestart => {
                // Each broker stopped the controlled way, down half a
                // session, then a session to catch up before the next.
                let first = rng.pick(&(1..=n).collect::<Vec<_>>());
                let order = (0..n).map(|k| (first - 1 + k) % n + 1);
                let events = order
                    .enumerate()
                    .flat_map(|(k, b)| {
                        let t = s * 3 / 2 * k as u32;
                        [at(t, format!("stop {b}")), at(t + s / 2, format!("start {b}"))]
                    })
                    .collect();
                (events, s)
            }
            Fault::LeaderMove => {
                let to = other(rng, leader_of(&now, &topic)?);
                (vec![at(Duration::ZERO, format!("leader {topic} 0 {to}"))], s)
            }
            Fault::CoordinatorMove => {
                // Watched two sessions: a member the new coordinator had
                // forgotten would be expired and the group rebalanced.
                let to = other(rng, coordinator_of(&now)?);
                (vec![at(Duration::ZERO, format!("coordinator {to}"))], s * 2)
            }
            Fault::BrokerCrash => {
                // Any broker; what it led moves after KRaft's 9 s, or when it
                // starts again first.
                let b = rng.pick(&(1..=n).collect::<Vec<_>>());
                let back = rng.between(s / 5, s * 4);
                (vec![at(Duration::ZERO, format!("crash {b}")), at(back, format!("start {b}"))], s)
            }
            Fault::PartitionOffline => {
                let back = rng.between(s / 5, s * 2);
                let to = rng.pick(&(1..=n).collect::<Vec<_>>());
                let events =
                    vec![at(Duration::ZERO, format!("offline {topic} 0")), at(back, format!("leader {topic} 0 {to}"))];
                (events, s)
            }
            Fault::CoordinatorCut | Fault::LeaderCut => {
                let name = &self.slots[slot].member.as_ref()?.0;
                let c = match fault {
                    Fault::CoordinatorCut => coordinator_of(&now)?,
                    _ => leader_of(&now, &topic)?,
                };
                let back = rng.between(s / 5, s * 2);
                (vec![at(Duration::ZERO, format!("cut {name} {c}")), at(back, format!("heal {name} {c}"))], s)
            }
            Fault::Rewind => {
                // Any role's partition: each new owner reads its own.
                let p = rng.pick(&(0..self.partitions.max(1)).collect::<Vec<_>>());
                (vec![at(Duration::ZERO, format!("rewind {topic} {p}"))], s)
            }
            _ => return None,
        };
        let last = events.iter().map(|e| e.0).max().unwrap_or_default();
        Some(Script { events, length: last + watch })
    }

    /// Makes one scripted event; a refusal is reported, not fatal (the
    /// soak judges the command, not the dev broker).
    pub fn cluster_event(&self, event: &str) {
        if let Some(broker) = &self.broker {
            if let Err(why) = broker.event(event) {
                eprintln!("neli-soak: cluster event refused: {why}");
            }
        }
    }
}
