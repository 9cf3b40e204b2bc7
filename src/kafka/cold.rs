//! The adapter's part of cold standbys (docs/hot-set.md, slice 2; the rule
//! is the core's, `leader::cold`): a cold member stays out of the group as
//! an unhealthy one does (`Out::Cold`, which health and drains outrank),
//! and the owner's heartbeat that invites a member is large enough to
//! answer the parked fetch of its watcher at once.

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
}

impl Outs {
    pub(super) fn new(out: Out) -> Outs {
        Outs { out, kept: out, cold: false, hot_sent: None }
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
        self.asks.ask(Ask::Out(out));
    }

    /// The padding of our next heartbeat on `partition`, which names `hot`:
    /// on the control partition, a list that names a member the last one
    /// did not is an invite, and cold members' watchers wait for a wake's
    /// size before their parked fetch is answered (`wake::WAKE_BYTES`).
    pub(super) fn invite(&mut self, partition: Partition, hot: Option<&HotList>) -> String {
        if partition != CONTROL_PARTITION {
            return String::new();
        }
        let sent = std::mem::replace(&mut self.outs.hot_sent, hot.cloned());
        let new = |list: &HotList| list.names.iter().any(|n| !sent.as_ref().is_some_and(|s| s.named(n)));
        match hot.is_some_and(new) {
            true => " ".repeat(super::wake::WAKE_BYTES),
            false => String::new(),
        }
    }
}
