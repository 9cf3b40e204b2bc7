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
//! Every standby's watcher reads every candidacy (for the wake), so a
//! group's reading grew with the square of its standbys: 200 standbys read
//! 40,000 records a second. A standby that knows of more than
//! `GROUP_BUDGET` live candidacies writes less often (`interval`), so that
//! the group writes about `GROUP_BUDGET` an interval whatever its size; each
//! record says how long it counts, so readers need no change.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::heartbeat::Member;
use crate::leader::Candidacy;
use crate::printable::printable;

/// How many of its writer's intervals a candidacy counts for: one lost
/// record is not a member gone.
pub const LIVE_INTERVALS: u32 = 3;

/// How many candidacies a group writes in one candidacy interval, at most,
/// once its standbys know of each other (`interval`): 10 a second at the
/// default timing.
pub const GROUP_BUDGET: u32 = 10;

/// How many writers a `Census` keeps, at most: a flood of made-up writers
/// must not grow a member without bound (it only slows their candidacies).
const CENSUS_CAP: usize = 4096;

/// How often a member writes its candidacy when it knows of `others` live
/// ones besides: every `base` in a group of up to `GROUP_BUDGET`, and
/// proportionally less often beyond.
pub fn interval(base: Duration, others: usize) -> Duration {
    let members = u32::try_from(others.saturating_add(1)).unwrap_or(u32::MAX);
    (base * members.max(GROUP_BUDGET) / GROUP_BUDGET).max(base)
}

/// The other members whose candidacies are live, as a standby's watcher
/// reads them: what `interval` counts.
#[derive(Debug, Default)]
pub struct Census {
    /// Each writer's name and incarnation, and until when (its writer's
    /// wall clock, ms) its newest candidacy counts.
    until: HashMap<(String, String), u64>,
}

impl Census {
    /// Takes in a candidacy read at `now_ms`: a withdrawal removes its
    /// writer.
    pub fn note(&mut self, record: &Record, now_ms: u64) {
        let writer = (record.name.clone(), record.incarnation.clone());
        if !record.live(now_ms) {
            self.until.remove(&writer);
            return;
        }
        if self.until.len() >= CENSUS_CAP && !self.until.contains_key(&writer) {
            self.until.retain(|_, until| now_ms < *until);
            if self.until.len() >= CENSUS_CAP {
                return;
            }
        }
        self.until.insert(writer, record.at_ms.saturating_add(record.live_ms));
    }

    /// How many writers' candidacies are live at `now_ms`.
    pub fn live(&mut self, now_ms: u64) -> usize {
        self.until.retain(|_, until| now_ms < *until);
        self.until.len()
    }
}

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
    /// `neli-run drain` named it: it is out of the group and may not lead
    /// until `undrain` (and what the drain's writer waits for).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drained: bool,
    /// Under a crontab, its writer's file's digest and the partitions whose
    /// jobs that file has, as its heartbeats say them (`Heartbeat::crontab`,
    /// `jobs_on`): a member that owns no partition is counted by `status`
    /// too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crontab: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_on: Option<String>,
    /// Its writer's --roles above 1, as its heartbeats say it
    /// (`Heartbeat::roles`): a member that owns no role is named by
    /// `status` when its --roles differs too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<u32>,
}

impl Record {
    /// `member`'s candidacy now, written every `interval` (the withdrawal
    /// when `leaving`).
    pub fn new(
        member: &Member,
        priority: u8,
        never_lead: bool,
        since_ms: u64,
        interval: Duration,
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
            drained: false,
            crontab: None,
            jobs_on: None,
            roles: None,
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

    /// Whether its writer may lead: not --never-lead, healthy, not drained.
    pub fn may_lead(&self) -> bool {
        !self.never_lead && !self.unhealthy && !self.drained
    }

    /// What the core needs of it, read at `now_ms`.
    pub fn as_core(&self, now_ms: u64) -> Candidacy {
        let ms = Duration::from_millis;
        Candidacy {
            // As `Heartbeat::as_other` names writers.
            writer: format!("{}/{}", printable(&self.name), printable(&self.incarnation)),
            name: self.name.clone(),
            priority: self.priority,
            never_lead: self.never_lead,
            leaving: self.leaving,
            // To the core, as one that fails its check: no owner hands a
            // partition to it.
            unhealthy: self.unhealthy || self.drained,
            drained: self.drained,
            age: ms(now_ms.saturating_sub(self.at_ms)),
            live_for: ms(self.live_ms),
            cold: false,
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
            drained: false,
            crontab: None,
            jobs_on: None,
            roles: None,
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

    #[test]
    fn a_drained_member_is_one_no_owner_hands_a_partition_to_and_says_so_only_when_drained() {
        assert!(!record().as_core(2_500).unhealthy);
        let drained = Record { drained: true, ..record() };
        assert!(drained.as_core(2_500).unhealthy, "to the core, as one whose check fails");
        assert!(Record { unhealthy: true, ..record() }.as_core(2_500).unhealthy);
        assert!(record().may_lead());
        for may_not in
            [drained.clone(), Record { unhealthy: true, ..record() }, Record { never_lead: true, ..record() }]
        {
            assert!(!may_not.may_lead(), "{may_not:?}");
        }
        let json = String::from_utf8(drained.encode()).unwrap();
        assert!(json.contains(r#""drained":true"#), "{json}");
        assert_eq!(Record::decode(drained.encode().as_slice()), Some(drained));
        let plain = String::from_utf8(record().encode()).unwrap();
        assert!(!plain.contains("drained"), "written only when drained (older readers see nothing new): {plain}");
    }

    #[test]
    fn a_standby_writes_less_often_only_in_a_group_past_the_budget() {
        let base = Duration::from_secs(1);
        assert_eq!(interval(base, 0), base);
        assert_eq!(interval(base, GROUP_BUDGET as usize - 1), base, "a group of the budget: as ever");
        assert_eq!(interval(base, 29), 3 * base);
        assert_eq!(interval(base, 199), 20 * base, "200 members write 10 an interval between them");
        assert!(interval(base, usize::MAX) >= base);
    }

    #[test]
    fn the_census_counts_live_writers_once_each_until_they_withdraw_or_lapse() {
        let mut census = Census::default();
        census.note(&record(), 2_000);
        census.note(&Record { at_ms: 2_500, ..record() }, 2_500);
        census.note(&Record { incarnation: "fedcba9876543210".into(), at_ms: 2_500, ..record() }, 2_500);
        assert_eq!(census.live(2_600), 2, "a writer counts once however often it writes");
        assert_eq!(census.live(5_000), 2, "the newest record of a writer sets its lapse");
        assert_eq!(census.live(5_500), 0, "both lapsed");
        census.note(&record(), 2_000);
        census.note(&Record { leaving: true, ..record() }, 2_100);
        assert_eq!(census.live(2_200), 0, "a withdrawal removes its writer");
        census.note(&Record { at_ms: 0, ..record() }, 9_000);
        assert_eq!(census.live(9_000), 0, "a record read after its lapse does not count");
    }

    #[test]
    fn the_census_stays_bounded_under_a_flood_of_writers() {
        let mut census = Census::default();
        for i in 0..CENSUS_CAP {
            census.note(&Record { name: format!("m{i}"), ..record() }, 2_000);
        }
        census.note(&Record { name: "extra".into(), ..record() }, 2_000);
        assert_eq!(census.live(2_000), CENSUS_CAP, "full of live writers: a new one is not counted");
        census.note(&Record { name: "m0".into(), at_ms: 4_000, ..record() }, 4_000);
        census.note(&Record { name: "late".into(), at_ms: 5_000, ..record() }, 5_000);
        assert_eq!(census.live(5_000), 2, "a known writer is renewed when full, and lapsed ones make room");
    }
}
