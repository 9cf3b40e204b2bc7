//! Whether we have said "standby" in our current membership of the group:
//! once a membership, at its first assignment without a seat's partition,
//! as the core writes our candidacy from then on (`Input::Standby`).
//!
//! A membership begins when we subscribe and ends when we unsubscribe
//! (`Subscription`), and an assignment counts only for the membership it
//! is heard in. librdkafka does not end a join in flight when we
//! unsubscribe: it puts the unsubscribe off until the join completes
//! ("postponing subscribe until previous rebalance completes"), delivers
//! that join's assignment, and only then leaves. A member whose health
//! check failed during its first join heard that assignment after its
//! leave; with one flag, cleared at the leave, it set the flag, the core
//! ignored the "standby" (unhealthy, it may not lead), and when the check
//! passed and the member joined again the new membership's assignment
//! found the flag set and said nothing: no candidacy, and `status` did not
//! list the member (findings O-1). Now an assignment heard out of the
//! group says nothing, and each subscribe starts a membership of its own,
//! so that no callback of an older membership can speak for a newer one.

use std::sync::atomic::{AtomicU8, Ordering};

/// Out of the group (not subscribed): assignments say nothing.
const OUT: u8 = 0;
/// In a membership that has not said "standby" yet.
const UNSAID: u8 = 1;
/// In a membership that has said it.
const SAID: u8 = 2;

/// Set by the consumer thread (subscribing, unsubscribing, and the
/// rebalance callbacks, which run inside its polls); read by the watcher.
pub(super) struct Standby(AtomicU8);

impl Default for Standby {
    fn default() -> Standby {
        Standby(AtomicU8::new(OUT))
    }
}

impl Standby {
    /// We subscribed: a membership begins, "standby" unsaid.
    pub(super) fn joining(&self) {
        self.0.store(UNSAID, Ordering::Relaxed);
    }

    /// We unsubscribed: what the membership we left still delivers says
    /// nothing.
    pub(super) fn left(&self) {
        self.0.store(OUT, Ordering::Relaxed);
    }

    /// A seat's partition is ours (assigned), or was until a revoke: the
    /// next assignment without one says "standby" again.
    pub(super) fn owner(&self) {
        let _ = self.0.compare_exchange(SAID, UNSAID, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// An assignment without a seat's partition: whether "standby" is to
    /// be said now (the first of this membership, in the group).
    pub(super) fn assigned(&self) -> bool {
        self.0.compare_exchange(UNSAID, SAID, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Whether we are out of the group (not subscribed).
    pub(super) fn out(&self) -> bool {
        self.0.load(Ordering::Relaxed) == OUT
    }

    /// Whether "standby" has been said in this membership.
    pub(super) fn said(&self) -> bool {
        self.0.load(Ordering::Relaxed) == SAID
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Said once a membership; an owner says it again once it owns no seat.
    #[test]
    fn standby_is_said_once_a_membership_and_again_after_owning_a_seat() {
        let standby = Standby::default();
        standby.joining();
        assert!(standby.assigned());
        assert!(standby.said());
        assert!(!standby.assigned(), "said twice");
        standby.owner();
        assert!(!standby.said());
        assert!(standby.assigned(), "not said again after owning a seat");
    }

    /// The order of findings O-1: the leave comes while the first join is
    /// in flight, its assignment after the leave, then the rejoin's.
    #[test]
    fn a_late_assignment_of_a_membership_left_does_not_speak_for_the_next() {
        let standby = Standby::default();
        assert!(!standby.assigned(), "never subscribed");
        standby.joining();
        standby.left();
        assert!(!standby.assigned(), "heard out of the group");
        assert!(standby.out());
        assert!(!standby.said());
        standby.owner();
        assert!(!standby.assigned(), "a revoke out of the group does not put us back in it");
        standby.joining();
        assert!(standby.assigned(), "the rejoin's assignment says nothing");
    }

    /// A subscribe while the membership before has said it (the stand-aside
    /// and the rejoin subscribe right after unsubscribing): said again.
    #[test]
    fn each_subscribe_says_it_again() {
        let standby = Standby::default();
        standby.joining();
        assert!(standby.assigned());
        standby.joining();
        assert!(!standby.said());
        assert!(standby.assigned());
    }
}
