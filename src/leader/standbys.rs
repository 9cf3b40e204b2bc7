//! Who else may lead, as the candidacy records and hand-overs on partition
//! 0 say: what an owner asks before it leads (`defer_to`), and a leader
//! with --preempt when a member joins. Only the choice of who leads: the
//! claims and the fence (`peers`) decide when anyone may.

use std::time::Duration;

use super::{Candidacy, Other, Stance};
use crate::clock::BootTime;

/// One member that does not own partition 0 and may lead, as its newest
/// candidacy record says (one that never leads is not kept).
#[derive(Clone, Debug)]
struct Standby {
    writer: String,
    name: String,
    priority: u8,
    /// When its record stops counting (our boot clock).
    until: BootTime,
}

/// The members read, and the newest hand-over.
#[derive(Debug, Default)]
pub(super) struct Standbys {
    list: Vec<Standby>,
    /// The member a disclaimer handed partition 0 to, and until when that
    /// holds: three of our candidacy intervals after it was written, unless
    /// someone leads first.
    handover: Option<(String, BootTime)>,
    /// The offset of our record on which we let another member lead,
    /// until someone leads: if partition 0 comes back to us first, no
    /// member took it (that one's records get
    /// through and its group membership does not, or the broker gave it
    /// back to us before the group's rebalance ended: tansu's takes 3 s),
    /// and we lead rather than hand over again and again, to that member
    /// or to the next of higher priority. Only a leader's record past it
    /// ends it: a new owner reads the records before its own again, old
    /// leaders' too.
    deferred: Option<i64>,
}

impl Standbys {
    /// Takes in a candidacy read `now`: the newest of a name replaces its
    /// older ones (a restarted member's incarnation too); a withdrawal
    /// removes it, as one whose health check fails does. Returns the member
    /// if it may lead.
    pub(super) fn read(&mut self, c: &Candidacy, now: BootTime) -> Option<(String, u8)> {
        self.list.retain(|s| s.name != c.name && s.writer != c.writer);
        if c.leaving || c.never_lead || c.unhealthy {
            // Listed by `status`, not here: no owner may let it lead.
            return None;
        }
        let until = (now - c.age) + c.live_for;
        self.list.push(Standby { writer: c.writer.clone(), name: c.name.clone(), priority: c.priority, until });
        (until > now).then(|| (c.name.clone(), c.priority))
    }

    /// Takes in another member's heartbeat record read `now`. A leader ends
    /// any hand-over (it has happened, or another member leads); a
    /// disclaimer takes its writer's candidacy back (it left the group for
    /// a while or for good) and may hand over (for `window`).
    pub(super) fn other(&mut self, other: &Other, window: Duration, now: BootTime) {
        match other.stance {
            Stance::Leading { .. } => {
                self.handover = None;
                if self.deferred.is_some_and(|at| other.offset > at) {
                    self.deferred = None;
                }
            }
            Stance::Contending => {}
            Stance::Released => {
                self.list.retain(|s| s.writer != other.writer);
                if let Some(to) = &other.to {
                    self.handover = Some((to.clone(), (now - other.age) + window));
                }
            }
        }
    }

    /// The live member of `name`.
    fn live(&self, name: &str, now: BootTime) -> Option<&Standby> {
        self.list.iter().find(|s| s.name == name && s.until > now)
    }

    /// Notes that we let another member lead, on our record at `offset`.
    pub(super) fn deferring(&mut self, offset: i64) {
        self.deferred = Some(offset);
    }

    /// Whom an owner named `me` of priority `mine`, about to lead, lets
    /// lead instead: the target of a fresh hand-over, if it is live and not
    /// us (a hand-over to us: we lead, whatever the priorities); else the
    /// live member of the highest priority above ours. None: we lead, as
    /// we do once we let a member lead in vain.
    pub(super) fn defer_to(&self, me: &str, mine: u8, now: BootTime) -> Option<String> {
        if self.deferred.is_some() {
            return None;
        }
        if let Some((to, _)) = self.handover.as_ref().filter(|(_, until)| now < *until) {
            if to == me {
                return None;
            }
            if self.live(to, now).is_some() {
                return Some(to.clone());
            }
        }
        self.list
            .iter()
            .filter(|s| s.name != me && s.priority > mine && self.live(&s.name, now).is_some())
            .max_by_key(|s| s.priority)
            .map(|s| s.name.clone())
    }
}
