//! The adapter's part of cold standbys (docs/hot-set.md, slice 2; the rule
//! is the core's, `leader::cold`): a cold member stays out of the group as
//! an unhealthy one does (`Out::Cold`, which health and drains outrank);
//! its watcher's parked fetch waits for more than a wake and longer
//! (`wake::watcher_config`), and a record that calls a cold member in (the
//! owner's heartbeat that invites it, a disclaimer that hands partition 0
//! to it) is large enough to answer that fetch at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::consumer::{Ask, Out};
use super::{Kafka, Partition, CONTROL_PARTITION};
use crate::leader::HotList;

/// Whether we stay out of the group and why, and what our heartbeats last
/// named hot.
#[derive(Debug)]
pub(super) struct Outs {
    /// As last asked of the consumer thread: what our records say too.
    pub(super) out: Out,
    /// What the shell asks (health, drains).
    pub(super) kept: Out,
    /// What the core asks (`Action::Cold`).
    cold: bool,
    /// The hot standbys our last heartbeat on the control partition named:
    /// one that names a member this did not is padded (`Heartbeat::pad`).
    hot_sent: Option<HotList>,
    /// The member our last disclaimer on the control partition handed it
    /// to: a disclaimer to another one not named hot is padded.
    to_sent: Option<String>,
    /// Whether we are out of the group as a cold standby, for the watcher
    /// (`wake::Client::follow`).
    watched: Arc<AtomicBool>,
}

impl Outs {
    pub(super) fn new(out: Out) -> Outs {
        Outs { out, kept: out, cold: false, hot_sent: None, to_sent: None, watched: Arc::default() }
    }

    /// What the watcher reads of our standing.
    pub(super) fn watched(&self) -> Arc<AtomicBool> {
        self.watched.clone()
    }
}

impl Kafka {
    /// Stays out of the group as a cold standby (`cold`), or joins it
    /// again, unless the health check or a drain keeps us out meanwhile
    /// (then that, as ever, and cold once it ends).
    pub fn cold(&mut self, cold: bool) {
        self.outs.cold = cold;
        self.ask_out();
    }

    /// Asks the consumer thread to stay out or come in, as health, drains
    /// and the core's cold say together.
    pub(super) fn ask_out(&mut self) {
        let out = match self.outs.kept {
            Out::In if self.outs.cold => Out::Cold,
            out => out,
        };
        self.outs.out = out;
        self.outs.watched.store(out == Out::Cold, Ordering::Relaxed);
        self.asks.ask(Ask::Out(out));
    }

    /// The padding of our next heartbeat on `partition`, which names `hot`
    /// and hands the partition `to` a member, if it does: on the control
    /// partition, a list that names a member the last one did not is an
    /// invite, and a disclaimer to a member it does not name is a hand-over
    /// to a cold one. Cold members' watchers wait for a call's size before
    /// their parked fetch is answered (`wake::CALL_BYTES`); a hot one's
    /// hears a wake.
    pub(super) fn pad(&mut self, partition: Partition, hot: Option<&HotList>, to: Option<&str>) -> String {
        if partition != CONTROL_PARTITION {
            return String::new();
        }
        let sent = std::mem::replace(&mut self.outs.hot_sent, hot.cloned());
        let was_to = std::mem::replace(&mut self.outs.to_sent, to.map(str::to_string));
        match calls((sent.as_ref(), was_to.as_deref()), hot, to) {
            true => " ".repeat(super::wake::CALL_BYTES),
            false => String::new(),
        }
    }
}

/// Whether our next record on the control partition, naming `hot` and
/// handing the partition `to` a member, calls a cold member in, after one
/// that named `sent` and handed it to `was_to`: a list that names a member
/// the last did not (an invite), or a hand-over to a member not named hot
/// (one named hot hears the wake), said once.
fn calls((sent, was_to): (Option<&HotList>, Option<&str>), hot: Option<&HotList>, to: Option<&str>) -> bool {
    let new = |list: &HotList| list.names.iter().any(|n| !sent.is_some_and(|s| s.named(n)));
    let named_hot = |to: &str| hot.or(sent).is_some_and(|list| list.named(to));
    hot.is_some_and(new) || to.is_some_and(|to| was_to != Some(to) && !named_hot(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> HotList {
        HotList { k: 2, names: names.iter().map(|n| n.to_string()).collect() }
    }

    #[test]
    fn an_invite_and_a_hand_over_to_a_member_not_named_hot_call_once() {
        let (bd, bc) = (list(&["b", "d"]), list(&["b", "c"]));
        assert!(calls((None, None), Some(&bd), None), "a first list invites");
        assert!(!calls((Some(&bd), None), Some(&bd), None), "the same list again does not");
        assert!(!calls((Some(&bd), None), Some(&list(&["d"])), None), "a shorter one does not");
        assert!(calls((Some(&bd), None), Some(&bc), None), "one that names c anew does");
        assert!(!calls((Some(&bd), None), None, None), "a record naming none does not");
        assert!(calls((Some(&bd), None), None, Some("c")), "a hand-over to c, cold, does");
        assert!(!calls((Some(&bd), Some("c")), None, Some("c")), "once");
        assert!(calls((Some(&bd), Some("e")), None, Some("c")), "to another, again");
        assert!(!calls((Some(&bd), None), None, Some("d")), "d, hot, hears the wake");
        assert!(!calls((Some(&bc), None), Some(&bc), Some("c")), "c, named hot in this very record");
    }
}
