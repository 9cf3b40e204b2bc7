//! Other members, as their records on partition 0 describe them: the
//! defence against brokers that give the partition to two members at once.
//!
//! Fast NELI alone would need none of this: the coordinator hands partition
//! 0 to one member at a time, and the revoke barrier keeps the next owner
//! waiting until the last one's command is gone. tansu was caught by
//! neli-soak giving it to a second member while the first still led, so a
//! member also reads what the others say and holds back while
//! - another member's *claim* (a record saying its command may be running)
//!   has not run out: its deadline after it was written, plus a margin for
//!   the writers' clocks to disagree and for a kill to land;
//! - or another member's *term* (a stretch of ownership whose records others
//!   can have counted without a break) began earlier on the partition than
//!   ours and still contends: every member reads the same order, so of two
//!   owners both agree which goes first without racing on time.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Other, Stance};
use crate::clock::BootTime;

/// How long an expired term is remembered: a record of it that arrives late
/// keeps its place in the order instead of looking new.
const FORGET_TERMS: Duration = Duration::from_secs(60);

/// What the newest records of one writer say.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Peer {
    /// Until when its command may be running (a claim that a record of it
    /// without one withdraws).
    pub claim: Option<BootTime>,
    /// Its current term, if its records name one and it contends.
    pub term: Option<Term>,
    /// The newest of its records read: its sequence number (the writer's
    /// own count, one for all its partitions) and until when it counts.
    /// A record of it not newer is one read before, delivered again.
    newest: (u64, Option<BootTime>),
}

/// Another member's term, as far as we have read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Term {
    pub id: u64,
    /// Its first offset: the earliest we read or the writer declared.
    pub start: i64,
    /// Until when its newest record counts: written + its deadline + margin.
    pub until: BootTime,
    /// Its newest record said "contending" (a leading one is a claim).
    pub contending: bool,
}

impl Term {
    /// Whether it contends from before `ours` (our term's first offset) and
    /// has not gone quiet by `now`.
    pub fn goes_first(&self, ours: Option<i64>, now: BootTime) -> bool {
        self.contending && self.until > now && ours.is_some_and(|s| self.start < s)
    }
}

/// Every other writer's claim and term, by writer. Kept whether or not we
/// own the partition: a claim read just before our tenure matters as much
/// as one read during it.
#[derive(Debug, Default)]
pub(super) struct Peers {
    by_writer: BTreeMap<String, Peer>,
    /// The newest fencing token any of them has claimed: our own token must
    /// be newer, so that tokens only grow across the group.
    newest_token: Option<i64>,
}

impl Peers {
    /// Whether `other` is not newer than a record of its writer already
    /// read: the partition read again from an earlier offset (a broker
    /// answered a fetch out of range, and the consumer started over), or
    /// records delivered out of order. Taken in, an older `contending`
    /// record would withdraw a live claim or place a term that ended (R-1:
    /// a second owner started beside the first on tansu, and a new leader
    /// fenced itself on the cluster), so it says nothing.
    pub fn stale(&self, other: &Other) -> bool {
        self.by_writer.get(&other.writer).is_some_and(|p| other.seq <= p.newest.0)
    }

    /// Takes in another member's record, not `stale` (the member drops a
    /// stale record whole, before anything reads it: `Leader::on_other`);
    /// `until` is when it stops counting. Returns the writer's entry before
    /// and after (for the log).
    pub fn read(&mut self, other: &Other, until: BootTime, now: BootTime) -> (Peer, Peer) {
        // A writer is remembered as long as a record of it read again could
        // count (its newest counts longest), so that `stale` knows it.
        // (Its claim and term run out no later than its newest record.)
        self.by_writer.retain(|_, p| {
            p.claim = p.claim.filter(|&c| c > now);
            p.term = p.term.filter(|t| t.until + FORGET_TERMS > now);
            p.newest.1.is_some_and(|u| u + FORGET_TERMS > now)
        });
        if let Stance::Leading { token } = other.stance {
            // A token is the offset of an earlier record: a larger one is
            // nonsense, and must not keep us from ever leading.
            if token < other.offset {
                self.newest_token = Some(self.newest_token.map_or(token, |t| t.max(token)));
            }
        }
        let peer = self.by_writer.entry(other.writer.clone()).or_default();
        let before = *peer;
        peer.newest = (other.seq, Some(peer.newest.1.map_or(until, |u| u.max(until))));
        peer.claim = match other.stance {
            Stance::Leading { .. } => Some(peer.claim.map_or(until, |c| c.max(until))),
            Stance::Contending | Stance::Released => None,
        };
        peer.term = match (other.term, other.stance) {
            (Some(id), Stance::Leading { .. } | Stance::Contending) => {
                let start = other.start.unwrap_or(other.offset).min(other.offset);
                let mut term = peer.term.filter(|t| t.id == id).unwrap_or(Term { id, start, until, contending: false });
                term.start = term.start.min(start);
                term.until = term.until.max(until);
                term.contending = other.stance == Stance::Contending;
                Some(term)
            }
            // A disclaimer ends its term; a v1 record never contends.
            _ => None,
        };
        (before, *peer)
    }

    /// Until when someone else holds us back from running the command, if
    /// we were to start from `ours` (our term's first offset): the latest
    /// claim, and the latest term that contends from before ours.
    pub fn held_until(&self, ours: i64) -> Option<BootTime> {
        let claims = self.by_writer.values().filter_map(|p| p.claim);
        claims.chain(self.contending_until(ours)).max()
    }

    /// As `held_until`, without the claims of commands that may still run:
    /// what holds an owner back under `--overlap`, where an earlier owner's
    /// command may finish beside ours, but two contenders of one partition
    /// still go in the order of their terms.
    pub fn contending_until(&self, ours: i64) -> Option<BootTime> {
        let earlier = self.by_writer.values().filter_map(|p| p.term).filter(|t| t.contending && t.start < ours);
        earlier.map(|t| t.until).max()
    }

    /// The newest fencing token another member has claimed.
    pub fn newest_token(&self) -> Option<i64> {
        self.newest_token
    }

    /// Every term we know of, by writer.
    pub fn terms(&self) -> impl Iterator<Item = (&str, Term)> {
        self.by_writer.iter().filter_map(|(w, p)| p.term.map(|t| (w.as_str(), t)))
    }
}
