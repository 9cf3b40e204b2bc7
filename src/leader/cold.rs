//! Cold standbys (docs/hot-set.md, slice 2): a member the control
//! partition's owner does not name hot leaves the consumer group, so that
//! a group's rebalances and coordinator heartbeats cost what its hot set
//! costs, not what the fleet does. The rule is here, pure; the shell keeps
//! the member out of the group (`Action::Cold`) as it does an unhealthy
//! one, and the Kafka adapter's watcher, which reads partition 0 in or out
//! of the group, brings each live list (`Input::Hot`).
//!
//! Going cold must never cost a seat or strand the group, so a member goes
//! cold only when all of these hold: it holds no seat (no partition of a
//! seat of ours, no command of ours running); the newest list
//! comes from an owner heard within `Settings::owner_silence`; that list
//! names `k` members and not us (a short list means every member left may
//! be needed); and no hand-over names us. It comes back as soon as one
//! fails: a list that names it (the owner's invite), or a silent hot set:
//! no live record of the owner read for `owner_silence`, no candidacy of a
//! hot standby the list names that still counts, and two of our own
//! candidacies read back since the hot set's last word (`ECHOES`: we read
//! what is written; the hot set may all be gone: the simple rule that keeps anyone from being stranded;
//! its bound and soak are slice 3's). While a hot standby is heard, a
//! cold member waits for it to take over from a dead owner rather than
//! join with every other cold member.

use super::hot_set::HotList;
use super::{Action, Leader, CONTROL_PARTITION};
use crate::clock::BootTime;

/// What the member knows that the rule weighs.
#[derive(Debug, Default)]
pub(super) struct Cold {
    /// When we last read a live record of the control partition's owner
    /// naming the hot standbys.
    heard: Option<BootTime>,
    /// We asked the shell to keep us out of the group as a cold standby.
    cold: bool,
    /// Our own candidacies read back since the hot set's last word.
    echoes: u32,
    /// When our reader of the roster last said it had read it to its end
    /// (`Input::RosterRead`), as the control partition's owner.
    pub(super) roster_read: Option<BootTime>,
}

impl Cold {
    pub(super) fn is_cold(&self) -> bool {
        self.cold
    }
}

/// What the rule weighs of ourselves at one step.
#[derive(Clone, Copy, Debug)]
pub(super) struct Us<'a> {
    pub(super) name: &'a str,
    /// A seat of ours holds its partition, or a command of ours runs (a
    /// member that exits does so once none runs).
    pub(super) seated: bool,
    /// A hand-over (`yield --to`, a disclaimer's target) names us and
    /// still holds.
    pub(super) target: bool,
}

/// What we have read of the hot set: until when it counts as alive
/// (`Leader::hot_alive_until`), and how many of our own candidacies our
/// watcher has read back since its last word.
#[derive(Clone, Copy, Debug)]
pub(super) struct Heard {
    pub(super) until: Option<BootTime>,
    pub(super) echoes: u32,
}

/// How many of our own candidacies read back after the hot set's last
/// word make its silence count. Silence alone is no evidence: a broker
/// too slow to answer our fetches (200 members starting at once on the
/// dev broker) says nothing of the hot set, and every cold member joining
/// then makes it slower still. Our own records read back, written after
/// the hot set's last word (partition 0 is read in order), show that we
/// read what is written.
pub(super) const ECHOES: u32 = 2;

/// How many candidacy intervals a new owner of the control partition
/// waits at most for its reader of the roster before it names a list
/// anyway: a cold member writes its roster record once every 30
/// (`kafka::roster`), so by then each has written one since.
const ROSTER_WAIT: u32 = 30;

impl Heard {
    /// Whether the hot set is silent at `now`.
    fn silent(self, now: BootTime) -> bool {
        self.until.is_none_or(|until| now >= until) && self.echoes >= ECHOES
    }
}

/// Whether a member `us` stays out of the group as a cold standby at
/// `now`, given the newest `list` read and what we `heard` of the hot set
/// since: no seat, no hand-over to us, a list of a hot set not silent
/// that names `k` others and not us.
pub(super) fn stays_cold(us: Us, list: Option<&HotList>, heard: Heard, now: BootTime) -> bool {
    let Some(list) = list else { return false };
    let live = heard.until.is_some() && !heard.silent(now);
    live && list.full() && !us.seated && !us.target && !list.named(us.name)
}

impl Leader {
    /// The hot standbys our heartbeats on the control partition name while
    /// we own it (None while we do not: its owner decides, one writer, so
    /// that members never disagree): `hot_set`'s choice among the members
    /// read, the target of our yield or of a fresh hand-over first. In the
    /// records through the shell, as `roles` and `unhealthy` are, so that
    /// a record's contents stay the seat's to decide.
    ///
    /// A new owner names none until it has owned the partition for a
    /// candidacy's life (3 intervals): until then it may not have read
    /// every member's candidacy, and a list made of what it has read
    /// would change within the interval, inviting members and sending
    /// them out again (a join cut short by a leave holds the group's next
    /// rebalance up to a session); a short one would bring every cold
    /// member in. Nor until it has read the roster to its end, where the
    /// cold members' candidacies are (`Input::RosterRead`), or a roster
    /// writer's period has passed (`ROSTER_WAIT` intervals): a 100-member
    /// soak saw a new owner, after a broker restart, name the one hot
    /// standby it had read, and 98 cold members join at once. Meanwhile
    /// the list read before stays in force.
    pub fn hot_list(&self) -> Option<HotList> {
        let super::Settings { name, hot_standbys, candidacy_interval, .. } = &self.settings;
        let since = self.seats.get(&CONTROL_PARTITION)?.tenure.as_ref()?.since;
        let read = self.cold.roster_read.is_some_and(|at| at >= since);
        let known = read || self.now >= since + ROSTER_WAIT * *candidacy_interval;
        (known && self.now >= since + 3 * *candidacy_interval)
            .then(|| self.standbys.hot(name, *hot_standbys, self.hand_to.as_deref(), self.now))
    }

    /// Holds each cold member our list names to answer within a
    /// candidacy's life (`Standbys::pass_over_silent`).
    pub(super) fn pass_over_silent(&mut self) {
        if let Some(list) = self.hot_list() {
            let within = 3 * self.settings.candidacy_interval;
            self.standbys.pass_over_silent(&list, within, self.now);
        }
    }

    /// Whether we own the control partition (as the seat on it).
    pub(super) fn owns_control(&self) -> bool {
        self.seats.get(&CONTROL_PARTITION).is_some_and(|s| s.tenure.is_some())
    }

    /// A live record of the control partition's owner read at `now`, and
    /// the hot standbys it names: the owner is heard; the list is kept
    /// (`Standbys`, the one place) and said when it changes whether it
    /// names us. One that names none (a new owner's first, an older
    /// version's) leaves the newest list read in force.
    pub(super) fn on_hot(&mut self, list: Option<HotList>, now: BootTime) {
        self.cold.heard = Some(now);
        self.cold.echoes = 0;
        let Some(list) = list else { return };
        let me = self.settings.name.as_str();
        let was = self.standbys.hot_read().map(|known| known.keeps(me));
        super::say::hot(was, &list, me, self.owns_control());
        self.standbys.read_hot(list);
    }

    /// Goes cold or comes back as `stays_cold` says now: a change is one
    /// `Action::Cold` for the shell.
    pub(super) fn settle_cold(&mut self, now: BootTime) {
        let name = self.settings.name.as_str();
        let seated = self.owns_any() || self.seats.values().any(|s| s.child != super::seat::Child::Idle);
        let us = Us { name, seated, target: self.standbys.handed_to(now) == Some(name) };
        let list = self.standbys.hot_read();
        let cold = stays_cold(us, list, self.heard(), now);
        if cold == self.cold.cold {
            return;
        }
        self.cold.cold = cold;
        super::say::cold(cold, us, list, self.settings.owner_silence);
        self.out.push(Action::Cold(cold));
    }

    /// Until when the hot set counts as alive: `owner_silence` after the
    /// owner's last live record read, or while the newest candidacy of a
    /// hot standby the list names counts (the owner may have died, and
    /// that standby takes over within a session: the cold members need
    /// not all join meanwhile).
    fn hot_alive_until(&self) -> Option<BootTime> {
        let owner = self.cold.heard.map(|at| at + self.settings.owner_silence);
        let named = self.standbys.hot_read().and_then(|list| self.standbys.named_live_until(list));
        owner.max(named)
    }

    /// What we have heard of the hot set.
    fn heard(&self) -> Heard {
        Heard { until: self.hot_alive_until(), echoes: self.cold.echoes }
    }

    /// When a cold member finds the hot set silent (it then joins the
    /// group); None while we are not cold, or until enough of our own
    /// candidacies are read back (each one a step).
    pub(super) fn cold_deadline(&self) -> Option<BootTime> {
        self.hot_alive_until().filter(|_| self.cold.cold && self.cold.echoes >= ECHOES)
    }

    /// Our watcher read back a candidacy of ours.
    pub(super) fn on_echo(&mut self) {
        self.cold.echoes = self.cold.echoes.saturating_add(1);
    }

    /// A candidacy was read: the hot set spoke if a member the list in
    /// force names says it may take over. One that says it may not (its
    /// health check failing, drained, never leading, leaving) is no word of
    /// the hot set's: a 100-member soak saw a named hot standby, unhealthy
    /// and out of the group, write one every interval for a minute, each
    /// undoing the cold members' echoes, and nobody led.
    pub(super) fn heard_hot(&mut self, candidacy: &super::Candidacy) {
        let may_lead = !(candidacy.unhealthy || candidacy.never_lead || candidacy.leaving);
        if may_lead && self.standbys.hot_read().is_some_and(|list| list.named(&candidacy.name)) {
            self.cold.echoes = 0;
        }
    }
}
