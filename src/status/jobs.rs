//! Whether a fleet crontab's jobs run, as the members' heartbeats say
//! (findings C-3): each carries its writer's file's digest and the
//! partitions whose jobs that file has. A partition's owner whose file
//! lacks its job holds it and runs nothing (src/leader/seat.rs says so in
//! its log), and a job that no live member's file has any more was
//! removed: its partition stays, idle. `status` says both, names the
//! members whose files differ, and exits 1 while a job that some member's
//! file has runs nowhere (a removed job is no work left undone).
//!
//! A record without the two fields (a member of before them) is taken to
//! run whatever it owns, as `status` took every owner before.

use std::collections::BTreeMap;

use serde_json::json;

use super::agree::Agreement;
use super::view::{View, Writer};
use crate::kafka::heartbeat::in_ranges;
use crate::printable::printable;

/// Where a crontab's job stands.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum JobState {
    /// A fresh owner runs it (its file has it, or its record does not say).
    Runs,
    /// Its owner's file lacks it: it runs nowhere while some live member's
    /// file (named, when their records say so) has it.
    OwnerLacks { owner: String, has: Vec<String> },
    /// No fresh owner.
    NoOwner,
    /// No live member's file has it (each said which jobs it has).
    Removed,
}

impl JobState {
    /// Its name in `status --json` (`roles[].state`).
    fn name(&self) -> &'static str {
        match self {
            JobState::Runs => "runs",
            JobState::OwnerLacks { .. } => "owner-lacks-job",
            JobState::NoOwner => "no-owner",
            JobState::Removed => "removed",
        }
    }
}

impl Agreement {
    /// Where the job on partition `j` stands (None: no crontab's job there).
    pub(super) fn job(&self, views: &[View], j: usize, now_ms: u64) -> Option<JobState> {
        let view = views.get(j).filter(|v| self.crontab && v.placed.is_some())?;
        let partition = i32::try_from(j).ok()?;
        let has = |jobs_on: Option<&String>| jobs_on.is_none_or(|on| in_ranges(on, partition));
        let members = || self.members.iter().map(|(w, _)| w);
        let havers: Vec<String> =
            members().filter(|w| w.jobs_on.as_ref().is_some_and(|on| in_ranges(on, partition))).map(name).collect();
        let unknown = members().any(|w| w.jobs_on.is_none());
        let removed = havers.is_empty() && !unknown && members().next().is_some();
        Some(match view.fresh_leader(now_ms) {
            Some(hb) if has(hb.jobs_on.as_ref()) => JobState::Runs,
            _ if removed => JobState::Removed,
            Some(hb) => JobState::OwnerLacks { owner: hb.name.clone(), has: havers },
            None => JobState::NoOwner,
        })
    }

    /// Whether job `j`'s owner does not run it, or no file has it: its
    /// records' next due time is no one's plan (a removed job's stayed
    /// "due ... ago" for ever).
    pub(super) fn unplanned(&self, views: &[View], j: usize, now_ms: u64) -> bool {
        matches!(self.job(views, j, now_ms), Some(JobState::OwnerLacks { .. } | JobState::Removed))
    }

    /// How many jobs no member's file has (`status`'s first line).
    pub(super) fn removed(&self, views: &[View], now_ms: u64) -> usize {
        (0..views.len()).filter(|&j| self.job(views, j, now_ms) == Some(JobState::Removed)).count()
    }

    /// The text's line under job `j`'s when it does not run, or was removed.
    pub(super) fn job_line(&self, views: &[View], j: usize, now_ms: u64) -> String {
        match self.job(views, j, now_ms) {
            Some(JobState::OwnerLacks { owner, has }) => {
                let has = match has.is_empty() {
                    true => "a member whose file has it runs it once it owns the partition".to_string(),
                    false => format!(
                        "the crontab of {} has it",
                        has.iter().map(|n| printable(n)).collect::<Vec<_>>().join(", ")
                    ),
                };
                format!(
                    "\n    owner {} does not run it (its crontab lacks the job); {has}: roll the same file to every \
                     member (docs/operations.md, \"Rolling out a crontab\")",
                    printable(&owner)
                )
            }
            Some(JobState::Removed) => {
                "\n    removed: no member's crontab has this job (its partition stays, idle)".to_string()
            }
            _ => String::new(),
        }
    }

    /// The live members of a crontab's group by the digest of the file
    /// each says it runs by (a member of before digests: none).
    fn by_digest(&self) -> BTreeMap<&str, Vec<&Writer>> {
        let mut by: BTreeMap<&str, Vec<&Writer>> = BTreeMap::new();
        for (w, _) in self.members.iter().filter(|_| self.crontab) {
            if let Some(digest) = &w.crontab {
                by.entry(digest.as_str()).or_default().push(w);
            }
        }
        by
    }

    /// Whether live members run by different crontabs.
    pub(super) fn crontabs_disagree(&self) -> bool {
        self.by_digest().len() > 1
    }

    /// The text's lines on the members' crontabs: the one digest they
    /// share, or who runs by which.
    pub(super) fn crontab_lines(&self) -> String {
        let by = self.by_digest();
        match by.len() {
            0 => String::new(),
            1 => format!(
                "\n  every member runs by crontab digest {}",
                by.keys().map(|d| printable(d)).collect::<String>()
            ),
            _ => {
                let mut out = "\n  members run by different crontabs:".to_string();
                for (digest, writers) in &by {
                    let names: Vec<String> = writers.iter().map(|w| name(w)).collect();
                    out += &format!("\n    digest {}: {}", printable(digest), names.join(", "));
                }
                out + "\n  roll the same file to every member (`neli-run cron check FILE` prints its digest; \
                       docs/operations.md, \"Rolling out a crontab\")"
            }
        }
    }

    /// `status --json`'s word on job `j`: its `state` and `has_job` (the
    /// live members whose file has it).
    pub(super) fn job_json(&self, views: &[View], j: usize, now_ms: u64) -> (serde_json::Value, serde_json::Value) {
        let Some(state) = self.job(views, j, now_ms) else { return (json!(null), json!(null)) };
        let partition = i32::try_from(j).unwrap_or(i32::MAX);
        let has: Vec<&str> = self
            .members
            .iter()
            .filter(|(w, _)| w.jobs_on.as_ref().is_some_and(|on| in_ranges(on, partition)))
            .map(|(w, _)| w.name.as_str())
            .collect();
        (json!(state.name()), json!(has))
    }
}

/// A member's name as the text shows it.
fn name(w: &Writer) -> String {
    printable(&w.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::Heartbeat;
    use crate::status::view::tests::hb;

    /// A view of a partition holding `job`, led by `leader` whose file is
    /// `digest` and has the jobs on `jobs_on`.
    fn led(leader: &Heartbeat, job: &str, digest: &str, jobs_on: Option<&str>) -> View {
        let mut v = View::default();
        let record = Heartbeat {
            placed: Some(job.into()),
            crontab: Some(digest.into()),
            jobs_on: jobs_on.map(str::to_owned),
            ..leader.clone()
        };
        v.read(Some(&record.encode()), 1);
        v
    }

    #[test]
    fn an_owner_that_lacks_its_job_does_not_run_it_and_a_job_no_file_has_was_removed() {
        let now = crate::clock::wall_ms();
        let (m1, m3) = (hb("m1", Some(1), now - 10), hb("m3", Some(2), now - 10));
        // m1 (file A: jobs on 0) owns 0 and 2; m3 (file B: jobs on 0-2) owns 1.
        let views =
            vec![led(&m1, "a", "A", Some("0")), led(&m3, "b", "B", Some("0-2")), led(&m1, "only3", "A", Some("0"))];
        let a = Agreement::of(&views, Some(3), now);
        assert_eq!(a.job(&views, 0, now), Some(JobState::Runs));
        // b: m1 lacks it but does not own it; m3 runs it.
        assert_eq!(a.job(&views, 1, now), Some(JobState::Runs));
        assert_eq!(a.job(&views, 2, now), Some(JobState::OwnerLacks { owner: "m1".into(), has: vec!["m3".into()] }));
        assert!(!a.runs(&views, 2, now) && !a.all_run(&views, now));
        assert!(a.unplanned(&views, 2, now) && !a.unplanned(&views, 1, now));
        assert_eq!(a.removed(&views, now), 0);
        let line = a.job_line(&views, 2, now);
        assert!(
            line.contains("owner m1 does not run it (its crontab lacks the job); the crontab of m3 has it"),
            "{line}"
        );
        assert!(a.crontabs_disagree());
        let text = a.crontab_lines();
        assert!(text.contains("digest A: m1\n    digest B: m3\n  roll the same file"), "{text}");
        assert_eq!(a.job_json(&views, 2, now), (json!("owner-lacks-job"), json!(["m3"])));

        // Both files lose only3: removed, and every other job runs.
        let mut views =
            vec![led(&m1, "a", "A", Some("0-1")), led(&m3, "b", "A", Some("0-1")), led(&m1, "only3", "A", Some("0-1"))];
        let a = Agreement::of(&views, Some(3), now);
        assert_eq!(a.job(&views, 2, now), Some(JobState::Removed));
        assert!(a.all_run(&views, now), "a removed job is no work left undone");
        assert_eq!(a.removed(&views, now), 1);
        assert!(a.unplanned(&views, 2, now) && !a.unplanned(&views, 0, now), "a removed job has no next due time");
        assert!(a.job_line(&views, 2, now).contains("removed: no member's crontab has this job"));
        assert!(!a.crontabs_disagree());
        assert_eq!(a.crontab_lines(), "\n  every member runs by crontab digest A");
        // Unless a member that owns no partition (its candidacy says its
        // file) has it.
        let idle = crate::kafka::heartbeat::Member::this_process("m4".into());
        let candidacy = crate::kafka::candidacy::Record {
            crontab: Some("C".into()),
            jobs_on: Some("0-2".into()),
            ..crate::kafka::candidacy::Record::new(
                &idle,
                0,
                false,
                now,
                std::time::Duration::from_secs(1),
                false,
                false,
            )
        };
        views[0].read(Some(&candidacy.encode()), 2);
        let a = Agreement::of(&views, Some(3), now);
        assert_eq!(a.job(&views, 2, now), Some(JobState::OwnerLacks { owner: "m1".into(), has: vec!["m4".into()] }));

        // A member of before jobs_on: taken to run what it owns, and a job
        // of no known file is not taken for removed.
        let views = vec![led(&m1, "a", "A", None), led(&m3, "b", "A", Some("1"))];
        let a = Agreement::of(&views, Some(2), now);
        assert_eq!(a.job(&views, 0, now), Some(JobState::Runs));
        let views = vec![led(&m1, "a", "A", None), led(&m3, "b", "A", Some("1")), led(&m3, "c", "A", Some("1"))];
        let a = Agreement::of(&views, Some(3), now);
        assert_eq!(a.job(&views, 2, now), Some(JobState::OwnerLacks { owner: "m3".into(), has: vec![] }));

        // A spare partition (no job placed yet) is no job; members of
        // before digests name none.
        let mut views = vec![led(&m1, "a", "A", Some("0"))];
        let mut spare = View::default();
        spare.read(Some(&m3.encode()), 1);
        views.push(spare);
        let a = Agreement::of(&views, Some(2), now);
        assert_eq!(a.job(&views, 1, now), None);
        let mut old_view = View::default();
        old_view.read(Some(&Heartbeat { placed: Some("a".into()), ..m1 }.encode()), 1);
        let a = Agreement::of(&[old_view], Some(1), now);
        assert_eq!((a.crontab_lines(), a.crontabs_disagree()), (String::new(), false));
    }
}
