//! The candidacy record: what a member that does not own partition 0
//! writes there, when it joins and then every candidacy interval, so that
//! the owner and `neli-run status` know who else may lead (and who only
//! watches, with --never-lead). A record of its own type beside the
//! heartbeats: older versions ignore it, as they ignore yield records (it
//! lacks the heartbeat's `seq` and `sent_ns`, and its `type` is not
//! "yield").
//!
//! Cost: one record of about 250 bytes per standby and interval (1 s at
//! the default timing), written by the producer every member has anyway.

use serde::{Deserialize, Serialize};

use super::heartbeat::Member;
use crate::leader::Candidacy;
use crate::printable::printable;

/// How many of its writer's intervals a candidacy counts for: one lost
/// record is not a member gone.
pub const LIVE_INTERVALS: u32 = 3;

/// One candidacy record's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Always "candidacy": what tells it from heartbeats and yields.
    #[serde(rename = "type")]
    pub kind: String,
    pub v: u32,
    pub name: String,
    pub incarnation: String,
    pub host: String,
    pub pid: u32,
    /// --priority: the higher leads, when the group has a choice.
    pub priority: u8,
    /// --never-lead: it watches and never runs the command.
    #[serde(default)]
    pub never_lead: bool,
    /// Wall clock (ms since the epoch) since when it has been a standby.
    pub since_ms: u64,
    /// Wall clock (ms since the epoch) when written.
    pub at_ms: u64,
    /// How long after `at_ms` it counts: its writer writes the next well
    /// before.
    pub live_ms: u64,
    /// The withdrawal: its writer leaves.
    #[serde(default)]
    pub leaving: bool,
    /// Its health check fails (--health-cmd): it is out of the group and
    /// may not lead, but says so, so that `status` can show why.
    #[serde(default)]
    pub unhealthy: bool,
}

impl Record {
    /// `member`'s candidacy now, written every `interval` (the withdrawal
    /// when `leaving`).
    pub fn new(
        member: &Member,
        priority: u8,
        never_lead: bool,
        since_ms: u64,
        interval: std::time::Duration,
        leaving: bool,
        unhealthy: bool,
    ) -> Record {
        Record {
            kind: "candidacy".into(),
            v: 1,
            name: member.name.clone(),
            incarnation: member.incarnation.clone(),
            host: member.host.clone(),
            pid: member.pid,
            priority,
            never_lead,
            since_ms,
            at_ms: crate::clock::wall_ms(),
            live_ms: (LIVE_INTERVALS * interval).as_millis() as u64,
            leaving,
            unhealthy,
        }
    }

    /// Serialized record value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a candidacy always serializes")
    }

    /// Parses a record value that is a candidacy.
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice::<Record>(bytes).ok().filter(|c| c.kind == "candidacy")
    }

    /// Whether `member` wrote it.
    pub fn is_from(&self, member: &Member) -> bool {
        self.name == member.name && self.incarnation == member.incarnation
    }

    /// Whether it still counts at `now_ms` (the writer's wall clock against
    /// ours).
    pub fn live(&self, now_ms: u64) -> bool {
        !self.leaving && now_ms < self.at_ms.saturating_add(self.live_ms)
    }

    /// What the core needs of it, read at `now_ms`.
    pub fn as_core(&self, now_ms: u64) -> Candidacy {
        let ms = std::time::Duration::from_millis;
        Candidacy {
            // As `Heartbeat::as_other` names writers.
            writer: format!("{}/{}", printable(&self.name), printable(&self.incarnation)),
            name: self.name.clone(),
            priority: self.priority,
            never_lead: self.never_lead,
            leaving: self.leaving,
            unhealthy: self.unhealthy,
            age: ms(now_ms.saturating_sub(self.at_ms)),
            live_for: ms(self.live_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::Heartbeat;
    use crate::kafka::yield_request::Yield;

    fn record() -> Record {
        Record {
            kind: "candidacy".into(),
            v: 1,
            name: "b".into(),
            incarnation: "0123456789abcdef".into(),
            host: "h".into(),
            pid: 7,
            priority: 2,
            never_lead: false,
            since_ms: 1_000,
            at_ms: 2_000,
            live_ms: 3_000,
            leaving: false,
            unhealthy: false,
        }
    }

    #[test]
    fn candidacies_are_neither_heartbeats_nor_yields_and_read_back() {
        let bytes = record().encode();
        assert!(Heartbeat::decode(&bytes).is_none(), "older readers ignore it");
        assert!(Yield::decode(&bytes).is_none());
        assert_eq!(Record::decode(&bytes), Some(record()));
        assert!(Record::decode(&Yield::new(None, None).encode()).is_none());
        let c = record().as_core(2_500);
        assert_eq!((c.priority, c.age.as_millis(), c.live_for.as_millis()), (2, 500, 3_000));
        assert!(record().live(4_999) && !record().live(5_000));
        assert!(!Record { leaving: true, ..record() }.live(2_000), "a withdrawal is not live");
    }
}
