//! Which standbys are hot (docs/hot-set.md): the few members the group will
//! need next, so that only they need be in the consumer group once cold
//! members leave it (slice 2). One member decides, the owner of the
//! control partition, so that members never disagree about the list; this
//! is its choice, a pure function of what it read, so that every rule
//! (priorities, `--never-lead`, health, drains, seats, a stale member,
//! `yield --to`) is tested without a broker.

use std::cmp::Reverse;

use crate::clock::BootTime;

/// One member as its newest candidacy says it: what the choice weighs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    pub name: String,
    pub priority: u8,
    pub never_lead: bool,
    pub unhealthy: bool,
    pub drained: bool,
    /// Until when its newest record counts (our boot clock): a member not
    /// heard from since is gone, and must not take the place of one that
    /// can be invited.
    pub until: BootTime,
}

impl Known {
    /// Whether it could be the next leader at `now` (seats aside).
    pub(super) fn eligible(&self, now: BootTime) -> bool {
        !self.never_lead && !self.unhealthy && !self.drained && self.until > now
    }
}

/// The list the control partition's owner names in its heartbeats: the
/// hot standbys it wants, best first, and the `--hot-standbys` it chose
/// them for (a reader tells a list cut short by too few members from a
/// full one by it).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HotList {
    pub k: u32,
    pub names: Vec<String>,
}

impl HotList {
    /// Whether it names `name` hot. One not named is cold; slice 2 has it
    /// leave the group only by a list that names `k` others (a short one
    /// means every member left may be needed).
    pub fn named(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// Whether it names `k` members: a shorter one keeps every member in
    /// the group (`cold::stays_cold`).
    pub fn full(&self) -> bool {
        self.names.len() >= usize::try_from(self.k).unwrap_or(usize::MAX)
    }

    /// Whether `name`, holding no seat, is a hot standby by it: named, or
    /// the list is short. What the log and `status` say; one not kept is
    /// cold.
    pub fn keeps(&self, name: &str) -> bool {
        self.named(name) || !self.full()
    }
}

/// The hot standbys at `now`: of the `known` members that are live,
/// healthy, undrained, may lead and hold no seat (`holders`, by name), the
/// `k` best by `--priority` (highest first), then by name, each once;
/// `first` (the target of `yield --to`, or a hand-over), if it is one of
/// them, goes first whatever its rank. The order depends on nothing but
/// the members' words, not the order they were read in: the same members
/// give the same list, and one that joins with a lower rank than the
/// `k`th displaces nobody.
pub fn hot_set(known: &[Known], holders: &[&str], k: u32, first: Option<&str>, now: BootTime) -> HotList {
    let mut eligible: Vec<&Known> =
        known.iter().filter(|m| m.eligible(now) && !holders.contains(&m.name.as_str())).collect();
    let rank = |m: &Known| (Some(m.name.as_str()) != first, Reverse(m.priority));
    eligible.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.name.cmp(&b.name)));
    let mut names: Vec<String> = Vec::new();
    for m in eligible {
        if names.len() >= k as usize {
            break;
        }
        if !names.contains(&m.name) {
            names.push(m.name.clone());
        }
    }
    HotList { k, names }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::leader::fixtures::ms;

    const NOW: u64 = 10_000;

    fn m(name: &str, priority: u8) -> Known {
        Known { name: name.into(), priority, never_lead: false, unhealthy: false, drained: false, until: ms(13_000) }
    }

    fn names(known: &[Known], holders: &[&str], k: u32, first: Option<&str>) -> Vec<String> {
        hot_set(known, holders, k, first, ms(NOW)).names
    }

    #[test]
    fn the_k_best_by_priority_then_by_name() {
        let known = [m("d", 1), m("a", 5), m("c", 9), m("b", 5), m("e", 0)];
        assert_eq!(names(&known, &[], 2, None), ["c", "a"]);
        assert_eq!(names(&known, &[], 3, None), ["c", "a", "b"], "equal priorities: by name");
        assert_eq!(names(&known, &[], 0, None), Vec::<String>::new(), "K 0: no hot standby");
        assert_eq!(hot_set(&known, &[], 2, None, ms(NOW)).k, 2, "the list says the K it was chosen for");
    }

    #[test]
    fn ties_go_by_name_alone() {
        let known = [m("web-3", 0), m("web-10", 0), m("web-1", 0), m("web-2", 0)];
        assert_eq!(names(&known, &[], 3, None), ["web-1", "web-10", "web-2"], "byte order: stable, not clever");
    }

    #[test]
    fn fewer_candidates_than_k_are_all_hot() {
        let known = [m("a", 0), m("b", 3)];
        assert_eq!(names(&known, &[], 5, None), ["b", "a"]);
        assert_eq!(names(&[], &[], 2, None), Vec::<String>::new());
    }

    #[test]
    fn members_that_may_not_lead_are_never_hot() {
        let never = Known { never_lead: true, ..m("n", 9) };
        let sick = Known { unhealthy: true, ..m("u", 9) };
        let drained = Known { drained: true, ..m("d", 9) };
        let known = [never, sick, drained, m("a", 0), m("b", 1)];
        assert_eq!(names(&known, &[], 2, None), ["b", "a"]);
        assert_eq!(names(&known, &[], 5, None), ["b", "a"], "not even to fill the list");
    }

    #[test]
    fn a_stale_member_is_dropped() {
        let gone = Known { until: ms(NOW), ..m("gone", 9) };
        let known = [gone, m("a", 0), m("b", 0)];
        assert_eq!(names(&known, &[], 2, None), ["a", "b"], "its record counts until, not at, its end");
        let just = Known { until: ms(NOW + 1), ..m("just", 9) };
        assert_eq!(names(&[just, m("a", 0)], &[], 1, None), ["just"]);
    }

    #[test]
    fn seat_holders_are_hot_already_and_take_no_place_in_the_list() {
        let known = [m("leader", 9), m("role-1", 8), m("a", 1), m("b", 0), m("c", 0)];
        assert_eq!(names(&known, &["leader", "role-1"], 2, None), ["a", "b"]);
        assert_eq!(names(&known, &["leader"], 2, None), ["role-1", "a"]);
    }

    #[test]
    fn yield_to_puts_the_named_member_first_if_it_may_be_hot() {
        let known = [m("a", 9), m("b", 5), m("low", 0), Known { unhealthy: true, ..m("sick", 0) }];
        assert_eq!(names(&known, &[], 2, Some("low")), ["low", "a"], "first, however low its rank");
        assert_eq!(names(&known, &[], 1, Some("low")), ["low"], "first even at K 1");
        assert_eq!(names(&known, &[], 2, Some("sick")), ["a", "b"], "an unhealthy target is not hot");
        assert_eq!(names(&known, &[], 2, Some("nobody")), ["a", "b"], "an unknown target changes nothing");
        assert_eq!(names(&known, &["low"], 2, Some("low")), ["a", "b"], "a seat holder is hot already");
        assert_eq!(names(&known, &[], 2, Some("b")), ["b", "a"]);
    }

    #[test]
    fn the_same_members_give_the_same_list_in_any_order_read() {
        let known = vec![m("a", 1), m("b", 1), m("c", 2), m("d", 0), m("e", 2)];
        let want = names(&known, &[], 3, None);
        assert_eq!(want, ["c", "e", "a"]);
        let mut turned = known.clone();
        for _ in 0..known.len() {
            turned.rotate_left(1);
            assert_eq!(names(&turned, &[], 3, None), want);
            turned.reverse();
            assert_eq!(names(&turned, &[], 3, None), want);
        }
    }

    #[test]
    fn a_member_joining_with_a_lower_rank_displaces_nobody_and_a_better_one_the_last() {
        let mut known = vec![m("a", 5), m("b", 3)];
        let before = names(&known, &[], 2, None);
        known.push(m("c", 3)); // b's priority, a later name: ranks below it
        known.push(m("d", 0));
        assert_eq!(names(&known, &[], 2, None), before);
        known.push(m("e", 4));
        assert_eq!(names(&known, &[], 2, None), ["a", "e"], "a better member takes the last place");
    }

    #[test]
    fn a_name_read_twice_is_one_member() {
        let known = [m("a", 1), m("a", 1), m("b", 0)];
        assert_eq!(names(&known, &[], 2, None), ["a", "b"]);
    }

    #[test]
    fn a_list_names_whom_it_names() {
        let list = hot_set(&[m("a", 0), m("b", 0), m("c", 0)], &[], 2, None, ms(NOW));
        assert!(list.named("a") && list.named("b") && !list.named("c") && !list.named(""));
        assert!(list.full() && list.keeps("a") && !list.keeps("c"), "a full list keeps whom it names");
        let short = hot_set(&[m("a", 0)], &[], 2, None, ms(NOW));
        assert!(!short.full() && short.keeps("a") && short.keeps("c"), "a short list keeps every member in");
    }
}
