//! A member's check that the others run with the same `--roles`: every
//! heartbeat carries its writer's, and one that differs from ours is said
//! by name, with the fix, once per other member and value (not on every
//! record). A warning, not a refusal: a change of `--roles` is rolled out
//! member by member, and for that while old and new members run side by
//! side (docs/operations.md, "Changing --roles"). A role never runs twice
//! meanwhile: each is claimed on its own partition, whatever `--roles` its
//! claimant runs with.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use tracing::warn;

use super::heartbeat::Heartbeat;
use super::Seats;
use crate::printable::printable;

/// The (member, --roles) pairs said so far in this process.
static TOLD: LazyLock<Mutex<HashSet<(String, u32)>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// Says, once per member and value, that `hb`'s writer runs with another
/// --roles than ours (our seats'); a fleet crontab's members have none.
pub(super) fn check(seats: &Seats, hb: &Heartbeat) {
    if let Some(said) = differs(seats, hb, &mut TOLD.lock().expect("told lock")) {
        warn!("{said}");
    }
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
}
