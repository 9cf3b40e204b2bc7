//! Whether the members of a group of roles agree on `--roles`, as their
//! heartbeats say (each carries its writer's `--roles`): `status` counts the
//! roles by the topic's partitions and by the largest `--roles` a live
//! member says, a role runs only on a fresh leader whose `--roles` reaches
//! it, and the members that say another `--roles` are named.
//!
//! Under a fleet crontab a record's `roles` is its writer's count of the
//! topic's partitions, which members learn at different times: not a
//! disagreement, so none is looked for there.

use std::collections::BTreeMap;

use serde_json::json;

use super::jobs::JobState;
use super::view::{View, Writer};
use crate::printable::printable;

/// The live members of a group of roles and what each says.
#[derive(Debug)]
pub(super) struct Agreement {
    /// The roles counted (the views read): the topic's partitions, or more.
    pub(super) roles: u32,
    /// The topic's partitions, if the metadata said.
    pub(super) partitions: Option<u32>,
    /// Each live member (newest record within its deadline, on any role's
    /// partition), by name, with the roles it leads now.
    pub(super) members: Vec<(Writer, Vec<usize>)>,
    /// A fleet crontab's: no --roles to agree on.
    pub(super) crontab: bool,
}

impl Agreement {
    /// What `views` (role j's partition each) say at `now_ms`, of a topic
    /// of `partitions`.
    pub(super) fn of(views: &[View], partitions: Option<u32>, now_ms: u64) -> Agreement {
        let mut newest: BTreeMap<(String, String), Writer> = BTreeMap::new();
        // A member that owns no partition says its file and its --roles in
        // its candidacy (partition 0's).
        let standbys = views.first().map(|v| v.standbys(now_ms)).unwrap_or_default();
        let idle = standbys.into_iter().filter(|c| c.crontab.is_some() || c.roles.is_some()).map(Writer::of_candidacy);
        for w in views.iter().flat_map(|v| v.writers.iter().cloned()).chain(idle) {
            let key = (w.name.clone(), w.incarnation.clone());
            if newest.get(&key).is_none_or(|known| known.at_ms < w.at_ms) {
                newest.insert(key, w);
            }
        }
        let members = newest
            .into_values()
            .filter(|w| w.live(now_ms))
            .map(|w| {
                let leads = (0..views.len())
                    .filter(|&j| {
                        views[j]
                            .fresh_leader(now_ms)
                            .is_some_and(|hb| hb.name == w.name && hb.incarnation == w.incarnation)
                    })
                    .collect();
                (w, leads)
            })
            .collect();
        let roles = u32::try_from(views.len()).unwrap_or(u32::MAX);
        let crontab = views.iter().any(|v| v.placed.is_some());
        Agreement { roles, partitions, members, crontab }
    }

    /// Whether role `j` runs: its partition has a fresh leader whose
    /// --roles reaches it (a member of fewer roles never runs it), or under
    /// a crontab whose file has the partition's job (`jobs.rs`).
    pub(super) fn runs(&self, views: &[View], j: usize, now_ms: u64) -> bool {
        if let Some(state) = self.job(views, j, now_ms) {
            return state == JobState::Runs;
        }
        let reaches = |roles: Option<u32>| self.crontab || usize::try_from(roles.unwrap_or(1)).is_ok_and(|n| j < n);
        views.get(j).and_then(|v| v.fresh_leader(now_ms)).is_some_and(|hb| reaches(hb.roles))
    }

    /// Whether every role runs (a crontab's job that no member's file has
    /// any more needs not).
    pub(super) fn all_run(&self, views: &[View], now_ms: u64) -> bool {
        (0..views.len()).all(|j| self.runs(views, j, now_ms) || self.job(views, j, now_ms) == Some(JobState::Removed))
    }

    /// The live members by the --roles each says, where some member says
    /// another --roles than the roles counted (empty when all agree).
    pub(super) fn disagreeing(&self) -> BTreeMap<u32, Vec<&Writer>> {
        let mut by: BTreeMap<u32, Vec<&Writer>> = BTreeMap::new();
        if self.crontab {
            return by;
        }
        for (w, _) in &self.members {
            by.entry(w.roles).or_default().push(w);
        }
        if by.keys().all(|&n| n == self.roles) {
            by.clear();
        }
        by
    }

    /// The text's lines on a disagreement (none when all agree).
    pub(super) fn lines(&self) -> String {
        let by = self.disagreeing();
        if by.is_empty() {
            return String::new();
        }
        let topic = match self.partitions {
            Some(p) => format!("the topic has {p} partition(s), so {} roles", self.roles),
            None => format!("{} roles", self.roles),
        };
        let mut out = format!("\n  members disagree on --roles ({topic}):");
        for (n, writers) in &by {
            let mut names: Vec<String> = writers.iter().map(|w| printable(&w.name)).collect();
            names.dedup();
            let short = match *n < self.roles {
                true => format!(
                    " (runs roles 0-{} only: a role of {n}-{} that Kafka assigns it runs nowhere)",
                    n.saturating_sub(1),
                    self.roles - 1
                ),
                false => String::new(),
            };
            out += &format!("\n    --roles {n}: {}{short}", names.join(", "));
        }
        out += "\n  give every member the same --roles (a change of --roles is a rollout: docs/operations.md, \
                \"Changing --roles\")";
        out
    }

    /// `status --json`'s `members` and `roles_disagree`; a member is `hot`
    /// while it leads a role or `hot` names it (null while no list is
    /// known).
    pub(super) fn json(&self, hot: Option<&crate::leader::HotList>) -> (serde_json::Value, bool) {
        let members: Vec<_> = self
            .members
            .iter()
            .map(|(w, leads)| {
                json!({
                    "name": w.name,
                    "host": w.host,
                    "pid": w.pid,
                    "roles": (!self.crontab).then_some(w.roles),
                    "leads": leads,
                    "hot": hot.map(|list| !leads.is_empty() || list.keeps(&w.name)),
                    "crontab": w.crontab,
                    "jobs_on": w.jobs_on,
                })
            })
            .collect();
        (json!(members), !self.disagreeing().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::status::view::tests::hb;

    /// A view of one partition led by `member` (its record, --roles `roles`).
    fn led(member: &crate::kafka::heartbeat::Heartbeat, roles: u32) -> View {
        let mut v = View::default();
        let record = crate::kafka::heartbeat::Heartbeat { roles: Some(roles), ..member.clone() };
        v.read(Some(&record.encode()), 1);
        v
    }

    #[test]
    fn members_of_fewer_roles_are_named_and_a_role_beyond_them_does_not_run() {
        let now = crate::clock::wall_ms();
        let (m3, m6) = (hb("m3", Some(1), now - 10), hb("m6", Some(1), now - 10));
        let mut views: Vec<View> = (0..3).map(|_| led(&m3, 3)).collect();
        views.extend((3..6).map(|_| led(&m6, 6)));
        let a = Agreement::of(&views, Some(6), now);
        assert!(a.all_run(&views, now), "each role on a member that runs it");
        let text = a.lines();
        assert!(text.contains("the topic has 6 partition(s), so 6 roles"), "{text}");
        assert!(text.contains("--roles 3: m3 (runs roles 0-2 only"), "{text}");
        assert!(text.contains("--roles 6: m6\n"), "{text}");
        let (members, disagree) = a.json(None);
        assert!(disagree);
        assert_eq!(members[0]["leads"], json!([0, 1, 2]), "{members}");
        assert_eq!(members[0]["hot"], json!(null), "no list known: {members}");
        let list = crate::leader::HotList { k: 2, names: vec!["m6".into()] };
        let (members, _) = a.json(Some(&list));
        assert_eq!((&members[0]["hot"], &members[1]["hot"]), (&json!(true), &json!(true)), "each leads a role");
        let (members, _) = a.json(Some(&crate::leader::HotList { k: 2, names: vec![] }));
        assert_eq!(members[0]["hot"], json!(true), "leading a role is hot whatever the list: {members}");
        // A record of m3's on role 4's partition: m3 does not run role 4.
        views[4] = led(&m3, 3);
        assert!(!Agreement::of(&views, Some(6), now).all_run(&views, now));
        // A member that owns no role says its --roles in its candidacy
        // (partition 0's): named too, though it leads nothing.
        let mut views: Vec<View> = (0..6).map(|_| led(&m6, 6)).collect();
        let idle = |roles| {
            let member = crate::kafka::heartbeat::Member::this_process("m8".into());
            let c = crate::kafka::candidacy::Record {
                roles,
                ..crate::kafka::candidacy::Record::new(&member, 0, false, now, Duration::from_secs(1), false, false)
            };
            c.encode()
        };
        views[0].read(Some(&idle(Some(8))), 2);
        let text = Agreement::of(&views, Some(6), now).lines();
        assert!(text.contains("--roles 8: m8") && text.contains("--roles 6: m6"), "{text}");
        // A record of a version that did not say it is not counted as 1.
        views[0].read(Some(&idle(None)), 3);
        assert_eq!(Agreement::of(&views, Some(6), now).lines(), "");
        // All agree: nothing said.
        let a = hb("a", Some(1), now - 10);
        let same: Vec<View> = (0..2).map(|_| led(&a, 2)).collect();
        assert_eq!(Agreement::of(&same, Some(2), now).lines(), "");
    }
}
