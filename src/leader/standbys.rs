//! Who else may lead, as the candidacy records and hand-overs on partition
//! 0 say: what an owner asks before it leads (`defer_to`), and a leader
//! with --preempt when a member joins. Only the choice of who leads: the
//! claims and the fence (`peers`) decide when anyone may. And the hot set
//! (docs/hot-set.md): the list its owner names (`hot`), or the newest one
//! read from another (`read_hot`), the one place a member keeps it.

use std::time::Duration;

use super::hot_set::{hot_set, HotList, Known};
use super::{Candidacy, Other, Stance};
use crate::clock::BootTime;

/// One member that does not own partition 0, as its newest candidacy
/// record says (one that may not lead is kept for the hot set's choice,
/// which skips it; a withdrawal is not).
#[derive(Clone, Debug)]
struct Standby {
    writer: String,
    known: Known,
    /// When its writer wrote it (our boot clock, from its age when read).
    written: BootTime,
    /// Read from the roster: its writer was cold (`Candidacy::cold`).
    cold: bool,
}

impl Standby {
    /// Whether it may be let lead: it may lead and its record counts.
    fn may_lead(&self, now: BootTime) -> bool {
        self.known.eligible(now)
    }
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
    /// The newest list of hot standbys read from another owner of partition
    /// 0 (None until one is read: an older owner names none).
    read_hot: Option<HotList>,
}

impl Standbys {
    /// Takes in a candidacy read `now`: the newest of a name replaces its
    /// older ones (a restarted member's incarnation too); a withdrawal
    /// lapses it at once, as one whose health check fails may not lead.
    /// Returns the member if it may lead. A record its writer wrote before
    /// the one we know is old news: a member's records come from two
    /// places (the roster while it is cold, partition 0 while hot, read by
    /// two clients), and a roster record read after a newer one of
    /// partition 0 must not undo it (say, that the member is unhealthy
    /// now, or gone: a 100-member soak saw a list name a member 23 s after
    /// it had left, and the cold members wait on a list's live members).
    pub(super) fn read(&mut self, c: &Candidacy, now: BootTime) -> Option<(String, u8)> {
        let written = now - c.age;
        if self.list.iter().any(|s| s.writer == c.writer && s.written > written) {
            return None;
        }
        self.list.retain(|s| s.known.name != c.name && s.writer != c.writer);
        let known = Known {
            name: c.name.clone(),
            priority: c.priority,
            never_lead: c.never_lead,
            unhealthy: c.unhealthy,
            drained: c.drained,
            until: if c.leaving { written } else { written + c.live_for },
        };
        let standby = Standby { writer: c.writer.clone(), known, written, cold: c.cold };
        let may_lead = standby.may_lead(now);
        self.list.push(standby);
        may_lead.then(|| (c.name.clone(), c.priority))
    }

    /// Takes in another member's heartbeat record read `now`. A leader ends
    /// any hand-over (it has happened, or another member leads); a
    /// disclaimer takes its writer's candidacy back (it left the group for
    /// a while or for good: lapsed, so that an older one read after is old
    /// news) and may hand over (for `window`).
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
                let written = now - other.age;
                for s in self.list.iter_mut().filter(|s| s.writer == other.writer) {
                    (s.known.until, s.written) = (s.known.until.min(written), s.written.max(written));
                }
                if let Some(to) = &other.to {
                    self.handover = Some((to.clone(), (now - other.age) + window));
                }
            }
        }
    }

    /// The live member of `name` that may lead.
    fn live(&self, name: &str, now: BootTime) -> Option<&Standby> {
        self.list.iter().find(|s| s.known.name == name && s.may_lead(now))
    }

    /// Notes that we let another member lead, on our record at `offset`.
    pub(super) fn deferring(&mut self, offset: i64) {
        self.deferred = Some(offset);
    }

    /// Whom an owner named `me` of priority `mine`, about to lead, lets
    /// lead instead: the target of a fresh hand-over, if it is live and not
    /// us (a hand-over to us: we lead, whatever the priorities), or unless
    /// we know it may not lead: a cold member's candidacies are on the
    /// roster, which only the owner reads, and the hand-over's writer read
    /// it live (a lapsed record of it here says only that it went cold;
    /// one that says it is unhealthy, drained or --never-lead is not let
    /// lead); else the
    /// live member of the highest priority above ours. None: we lead, as
    /// we do once we let a member lead in vain.
    pub(super) fn defer_to(&self, me: &str, mine: u8, now: BootTime) -> Option<String> {
        if self.deferred.is_some() {
            return None;
        }
        if let Some(to) = self.handed_to(now) {
            if to == me {
                return None;
            }
            let unfit =
                |s: &Standby| s.known.name == to && (s.known.never_lead || s.known.unhealthy || s.known.drained);
            if self.live(to, now).is_some() || !self.list.iter().any(unfit) {
                return Some(to.to_string());
            }
        }
        self.list
            .iter()
            .filter(|s| s.known.name != me && s.known.priority > mine && self.live(&s.known.name, now).is_some())
            .max_by_key(|s| s.known.priority)
            .map(|s| s.known.name.clone())
    }

    /// The hot standbys an owner of partition 0 named `me` names (the one
    /// seat holder it knows of; in a group of roles, a member that took
    /// another role writes no candidacy, and its last one lapses): the
    /// choice of `hot_set` among the members read, `k` of them, the target
    /// of our yield or of a fresh hand-over first.
    pub(super) fn hot(&self, me: &str, k: u32, yield_to: Option<&str>, now: BootTime) -> HotList {
        let known: Vec<Known> = self.list.iter().map(|s| s.known.clone()).collect();
        hot_set(&known, &[me], k, yield_to.or(self.handed_to(now)), now)
    }

    /// Passes over each cold member `list` names that has not answered
    /// within `within` of being named: a cold member's record (the
    /// roster's) counts for three roster intervals, 90 s at the defaults,
    /// and one killed just after writing it would be named, and the hot set
    /// one short, all that time (a 100-member soak, seed 7376: a minute).
    /// Named, a member writes to partition 0 at once, and a record of it
    /// read since replaces this one; until one comes it counts no longer
    /// than `within` after the first list that named it, and once lapsed
    /// stays out of the list (no list naming it again and again).
    pub(super) fn pass_over_silent(&mut self, list: &HotList, within: Duration, now: BootTime) {
        for s in self.list.iter_mut().filter(|s| s.cold && list.named(&s.known.name)) {
            s.known.until = s.known.until.min(now + within);
        }
    }

    /// A disclaimer handed the control partition to us (`me`), until
    /// `until`: read by our watcher while we are cold. The owner that
    /// yields reads cold members on the roster; we read nothing but what
    /// the watcher brings, and join to take it over.
    pub(super) fn handed_us(&mut self, me: &str, until: BootTime) {
        self.handover = Some((me.to_string(), until));
    }

    /// The member a hand-over that still holds at `now` names.
    pub(super) fn handed_to(&self, now: BootTime) -> Option<&str> {
        self.handover.as_ref().filter(|(_, until)| now < *until).map(|(to, _)| to.as_str())
    }

    /// Until when the newest candidacy of a member `list` names that may
    /// lead counts: while one does, the hot set is alive, and a cold
    /// member need not join for an owner that has gone silent (its hot
    /// standby takes over within a session).
    pub(super) fn named_live_until(&self, list: &HotList) -> Option<BootTime> {
        let named = self.list.iter().filter(|s| list.named(&s.known.name));
        named.filter(|s| !s.known.never_lead && !s.known.unhealthy && !s.known.drained).map(|s| s.known.until).max()
    }

    /// Takes in the list another owner of partition 0 named in its record.
    pub(super) fn read_hot(&mut self, list: HotList) {
        self.read_hot = Some(list);
    }

    /// The newest list read from another owner.
    pub(super) fn hot_read(&self) -> Option<&HotList> {
        self.read_hot.as_ref()
    }
}
