//! What the core tells the operator about its decisions, apart from the
//! decisions: these functions only log (cargo-mutants leaves them alone,
//! see .cargo/mutants.toml; no test pins a log line's condition).

use super::*;
use crate::printable::printable;
use peers::{Peers, Term};
use seat::Phase;
use std::time::Duration;

/// Our term's first record is on the partition: who contended before it.
pub(super) fn earlier_contenders(peers: &Peers, offset: i64, now: BootTime) {
    for (writer, term) in peers.terms() {
        if term.goes_first(Some(offset), now) {
            info!(%writer, "another member has contended for the partition since before us; it goes first");
        }
    }
}

/// Our own record at `offset` is back: if it is our term's first (`start`),
/// we would lead now, so a claim or an earlier term that still holds us
/// back starts a wait, said with its length. (A claim read before this and
/// withdrawn by then is no wait.)
pub(super) fn waiting(peers: &Peers, start: Option<i64>, offset: i64, now: BootTime) {
    if start != Some(offset) {
        return;
    }
    if let Some(until) = peers.held_until(offset).filter(|until| *until > now) {
        info!(wait = ?until.since(now), "another member's claim on the partition still holds: waiting until its command must be gone");
    }
}

/// Who ran `attempt`, for a log line (Debug-formatted there: the writer
/// chose these strings).
fn runner(attempt: &Attempt) -> (&str, &str) {
    attempt.by.as_ref().map_or(("this member", ""), |r| (r.name.as_str(), r.host.as_str()))
}

/// A wave's start lies in our future (`now`, wall ms): its host's
/// clock is ahead.
pub(super) fn wave_from_the_future(attempt: Option<&Attempt>, now: u64) {
    let Some(attempt) = attempt.filter(|j| j.wave_ms > now) else { return };
    let (name, host) = runner(attempt);
    warn!(name = ?name, host = ?host, ahead = ?Duration::from_millis(attempt.wave_ms - now), "a wave's start lies in our future: that host's clock is ahead of ours, so only the log says who belongs to it (fix the clocks: NTP)");
}

/// A scheduled run is named on the topic, its command to begin at `begin`
/// (wall ms) once that record is read back: said with how late that is (a
/// missed one) and how soon. `child started` says when it did begin.
pub(super) fn due(due: u64, begin: u64, begins_in: Duration) {
    let late = Duration::from_millis(begin.saturating_sub(due));
    info!(
        due_ms = due,
        ?late,
        ?begins_in,
        "naming the run of a due time on the topic; its command starts once that is read back"
    );
}

/// A run of our wave already ended: we exit with its status.
pub(super) fn covered(attempt: Option<&Attempt>, code: u8) {
    if let Some(attempt) = attempt {
        let (name, host) = runner(attempt);
        info!(name = ?name, host = ?host, token = attempt.token, attempt = attempt.number, code, "this wave's run already ended; not running the command again (--once-within)");
    }
}

pub(super) fn promoted(was: Phase, token: i64, took: Duration) {
    if was == Phase::Fenced {
        info!(token, fenced_for = ?took, "resumed: own heartbeats are back");
    } else {
        info!(token, took = ?took, "leader: read own heartbeat back");
    }
}

/// A claim we had not known of (said only if we do not lead and did not
/// know of it): no wait yet, since its writer may withdraw it before we
/// would lead (`waiting` says when one starts).
pub(super) fn held_back(other: &Other, until: BootTime, now: BootTime, leading: bool, known: bool) {
    if let (Some(token), true, false, false) = (other.stance.token(), until > now, leading, known) {
        tracing::debug!(writer = %other.writer, token, age = ?other.age, holds_until = ?until.since(now), "another member claims the partition");
    }
}

/// A term (`before` and `now` its entry before and after its newest
/// record) has just become one that contends from before ours.
/// (Not said while we lead: then it fences, and says so.)
pub(super) fn goes_first(writer: &str, before: Option<Term>, now: Option<Term>, ours: Option<i64>, leading: bool) {
    let Some(now) = now else { return };
    let was = before.filter(|b| b.id == now.id && b.contending).map(|b| b.start);
    if now.contending && ours.is_some_and(|s| now.start < s && was.is_none_or(|w| w >= s)) && !leading {
        info!(%writer, "another member has contended for the partition since before us; it goes first");
    }
}

/// A pause or resume newer than we knew of (`running`: our command runs).
pub(super) fn pause(pause: &Pause, running: bool) {
    let by = pause.by.describe();
    match (pause.paused, pause.stop && running) {
        (true, true) => info!(
            offset = pause.offset,
            at_ms = pause.at_ms,
            "paused by {by}, with --stop: stopping the command; it starts again on resume (under a schedule, unless a later due time has come by then: that one runs in its place)"
        ),
        (true, false) => info!(
            offset = pause.offset,
            at_ms = pause.at_ms,
            "the group is paused, by {by}: no command starts until it is resumed"
        ),
        (false, _) => info!(offset = pause.offset, at_ms = pause.at_ms, "the group is resumed, by {by}"),
    }
}

/// A yield: what we do once the command is gone (`to` is the writer's
/// choice: escaped).
pub(super) fn yielding(phase: Phase, to: Option<&str>, why: Reason) {
    match to {
        Some(to) => {
            info!(standing = ?phase, why = why.as_str(), to = %printable(to), "yielding: stopping the child, then handing the partition over")
        }
        None => {
            info!(standing = ?phase, why = why.as_str(), "yielding: stopping the child, then standing aside for another member")
        }
    }
}

/// A candidate lets `to` lead instead (a hand-over names it, or its
/// priority is higher).
pub(super) fn defers(to: &str) {
    info!(to = %printable(to), "another live member should lead (a hand-over names it, or its --priority is higher): handing the partition over before leading");
}

/// --preempt: a member of higher priority is live.
pub(super) fn preempted(to: &str, theirs: u8, ours: u8) {
    info!(to = %printable(to), theirs, ours, "a live member of higher --priority (--preempt): handing over to it");
}

/// The hot standbys' list read keeps us hot, or no longer does (`was`:
/// whether the last one read did; a short list keeps every member). Not
/// while we own the control partition (`owner`): its backlog names earlier
/// owners' lists, and we name our own.
pub(super) fn hot(was: Option<bool>, list: &HotList, me: &str, owner: bool) {
    let kept = list.keeps(me);
    if was == Some(kept) || owner {
        return;
    }
    let names = list.names.iter().map(|n| printable(n)).collect::<Vec<_>>().join(", ");
    if list.named(me) {
        info!(hot = %names, k = list.k, "a hot standby: the owner of partition 0 names this member to lead next");
    } else if kept {
        info!(hot = %names, k = list.k, "a hot standby: the owner of partition 0 names fewer than it wants, and every member stays in");
    } else {
        info!(hot = %names, k = list.k, "a cold standby: not among the hot standbys the owner of partition 0 names");
    }
}

/// We go cold, or come back into the group, and why (`cold::stays_cold`).
pub(super) fn cold(cold: bool, us: super::cold::Us, list: Option<&HotList>, silence: std::time::Duration) {
    let names = list.map(|l| l.names.iter().map(|n| printable(n).to_string()).collect::<Vec<_>>().join(", "));
    let names = names.unwrap_or_default();
    if cold {
        info!(hot = %names, "a cold standby: leaving the group until the owner of partition 0 names this member or goes silent");
    } else if list.is_some_and(|l| l.named(us.name)) || us.target {
        info!(hot = %names, "named a hot standby: joining the group");
    } else if us.seated {
        info!("holding a seat: in the group");
    } else if list.is_some_and(|l| !l.full()) {
        info!(hot = %names, "the owner of partition 0 names fewer hot standbys than it wants: joining the group");
    } else {
        info!(
            ?silence,
            "no live record of the owner of partition 0 read: joining the group in case every hot member is gone"
        );
    }
}
