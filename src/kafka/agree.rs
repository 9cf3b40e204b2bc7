//! A member's check that the others run with the same `--roles`: every
//! heartbeat carries its writer's, and one that differs from ours is said
//! by name, with the fix, once per other member and value (not on every
//! record). A warning, not a refusal: a change of `--roles` is rolled out
//! member by member, and for that while old and new members run side by
//! side (docs/operations.md, "Changing --roles"). A role never runs twice
//! meanwhile: each is claimed on its own partition, whatever `--roles` its
//! claimant runs with.
//!
//! Under a fleet crontab each heartbeat carries its writer's file's digest
//! and the partitions whose jobs that file has ([`CrontabSaid`]): a
//! member reading another's different digest says so by name, once per
//! member and pair of digests, with the fix. A warning too: a new file is
//! rolled out member by member (docs/operations.md, "Rolling out a
//! crontab").

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use tracing::warn;

use super::heartbeat::Heartbeat;
use super::Seats;
use crate::printable::printable;

/// The (member, --roles) pairs said so far in this process.
static TOLD: LazyLock<Mutex<HashSet<(String, u32)>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// The (member, theirs, ours) crontab digests said so far.
type ToldDigests = HashSet<(String, String, String)>;

/// Our crontab's digest as our records say it now, and the digests said
/// so far in this process.
static CRONTAB: LazyLock<Mutex<(Option<String>, ToldDigests)>> = LazyLock::new(|| Mutex::new((None, HashSet::new())));

/// What a crontab member says of its file in each heartbeat
/// (`Heartbeat::crontab` and `jobs_on`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrontabSaid {
    pub digest: String,
    /// The partitions of the jobs it has, as ranges (`heartbeat::ranges`).
    pub jobs_on: String,
}

impl CrontabSaid {
    /// What `cfg`'s crontab, as seated, says (None without one).
    pub fn of(cfg: &crate::config::Config) -> Option<CrontabSaid> {
        let cron = cfg.crontab.as_ref()?;
        let jobs_on = super::heartbeat::ranges(cron.placed.keys().copied());
        Some(CrontabSaid { digest: cron.digest.clone(), jobs_on })
    }

    /// Makes `said` ours: what another member's digest is compared with.
    pub(super) fn ours(said: Option<&CrontabSaid>) {
        CRONTAB.lock().expect("crontab lock").0 = said.map(|s| s.digest.clone());
    }
}

/// Says, once per member and value, that `hb`'s writer runs with another
/// --roles than ours (our seats'), or by another crontab than ours.
pub(super) fn check(seats: &Seats, hb: &Heartbeat) {
    if let Some(said) = differs(seats, hb, &mut TOLD.lock().expect("told lock")) {
        warn!("{said}");
    }
    let mut crontab = CRONTAB.lock().expect("crontab lock");
    let (ours, told) = &mut *crontab;
    if let Some(said) = other_crontab(ours.as_deref(), hb, told) {
        warn!("{said}");
    }
}

/// What to say of `hb`'s writer, if it runs by another crontab than ours
/// (digest `ours`) and that is news (`told`).
fn other_crontab(ours: Option<&str>, hb: &Heartbeat, told: &mut ToldDigests) -> Option<String> {
    let (ours, theirs) = (ours?, hb.crontab.as_deref()?);
    if theirs == ours || !told.insert((hb.name.clone(), theirs.to_string(), ours.to_string())) {
        return None;
    }
    Some(format!(
        "member {} runs by another crontab than ours (digest {}, ours {ours}): a job that one file has and another \
         lacks runs only while a member whose file has it owns its partition, and a line that differs runs as its \
         owner's file says; roll the same file to every member (`neli-run cron check FILE` prints its digest; \
         docs/operations.md, \"Rolling out a crontab\"); `neli-run status` names who runs by which",
        printable(&hb.name),
        printable(theirs),
    ))
}

/// What to say of `hb`'s writer, if it runs with another --roles than our
/// `seats` and that is news (`told`).
fn differs(seats: &Seats, hb: &Heartbeat, told: &mut HashSet<(String, u32)>) -> Option<String> {
    if seats.every || hb.placed.is_some() {
        return None;
    }
    let ours = u32::try_from(seats.known.len()).unwrap_or(u32::MAX).max(1);
    let theirs = hb.roles.unwrap_or(1).max(1);
    if theirs == ours || !told.insert((hb.name.clone(), theirs)) {
        return None;
    }
    let (low, high) = (ours.min(theirs), ours.max(theirs));
    let who = if theirs > ours { format!("members with --roles {theirs}") } else { "members like us".to_string() };
    Some(format!(
        "member {} runs with --roles {theirs}, we with --roles {ours}: give every member of the group the same \
         --roles (a rollout: docs/operations.md, \"Changing --roles\"); meanwhile roles {low} to {} run only on \
         {who}, and one that Kafka assigns to another member runs nowhere",
        printable(&hb.name),
        high - 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::{Content, Member};
    use crate::leader::{Record, Stance};

    fn record(name: &str, roles: Option<u32>) -> Heartbeat {
        let content = Content { record: Record::saying(1, Stance::Contending), since_ms: None, deadline_ms: 3000 };
        let mut hb =
            Heartbeat::new(&Member::this_process(name.into()), 1, crate::clock::BootTime::from_nanos(1), 1, content);
        hb.roles = roles;
        hb
    }

    #[test]
    fn another_roles_is_said_once_per_member_and_value() {
        let seats = Seats { known: vec![0, 1, 2], every: false };
        let mut told = HashSet::new();
        let said = differs(&seats, &record("m6", Some(6)), &mut told).expect("said");
        assert!(said.starts_with("member m6 runs with --roles 6, we with --roles 3: give every member"), "{said}");
        assert!(said.contains("roles 3 to 5 run only on members with --roles 6"), "{said}");
        assert_eq!(differs(&seats, &record("m6", Some(6)), &mut told), None, "once");
        assert!(differs(&seats, &record("m6", Some(8)), &mut told).is_some(), "a new value");
        assert!(differs(&seats, &record("m1", None), &mut told).expect("said").contains("we with --roles 3"));
        assert_eq!(differs(&seats, &record("m3", Some(3)), &mut told), None, "the same");
        let crontab = Seats { known: vec![0], every: true };
        assert_eq!(differs(&crontab, &record("c", Some(9)), &mut told), None);
    }

    #[test]
    fn another_crontab_is_said_once_per_member_and_digests() {
        let mut told = HashSet::new();
        let with =
            |name: &str, digest: Option<&str>| Heartbeat { crontab: digest.map(str::to_owned), ..record(name, None) };
        let said = other_crontab(Some("aa"), &with("m3", Some("bb")), &mut told).expect("said");
        assert!(said.starts_with("member m3 runs by another crontab than ours (digest bb, ours aa)"), "{said}");
        assert!(said.contains("roll the same file to every member") && said.contains("cron check"), "{said}");
        assert_eq!(other_crontab(Some("aa"), &with("m3", Some("bb")), &mut told), None, "once");
        assert!(other_crontab(Some("cc"), &with("m3", Some("bb")), &mut told).is_some(), "ours changed");
        assert_eq!(other_crontab(Some("aa"), &with("m2", Some("aa")), &mut told), None, "the same file");
        assert_eq!(other_crontab(Some("aa"), &with("m1", None), &mut told), None, "a record of before digests");
        assert_eq!(other_crontab(None, &with("m1", Some("bb")), &mut told), None, "no crontab of ours");
    }
}
