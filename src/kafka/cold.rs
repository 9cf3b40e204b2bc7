//! The adapter's part of cold standbys (docs/hot-set.md, slice 2; the rule
//! is the core's, `leader::cold`): a cold member stays out of the group as
//! an unhealthy one does (`Out::Cold`, which health and drains outrank),
//! and the owner's heartbeat that invites a member is large enough to
//! answer the parked fetch of its watcher at once.

use super::consumer::{Ask, Out};
use super::{Kafka, Partition, CONTROL_PARTITION};
use crate::leader::HotList;

impl Kafka {
    /// Stays out of the group as a cold standby (`cold`), or joins it
    /// again, unless the health check or a drain keeps us out meanwhile
    /// (then that, as ever, and cold once it ends).
    pub fn cold(&mut self, cold: bool) {
        self.cold = cold;
        self.ask_out();
    }

    /// Asks the consumer thread to stay out or come in, as health, drains
    /// and the core's cold say together.
    pub(super) fn ask_out(&mut self) {
        let out = match self.kept_out {
            Out::In if self.cold => Out::Cold,
            out => out,
        };
        self.out = out;
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
        let sent = std::mem::replace(&mut self.hot_sent, hot.cloned());
        let new = |list: &HotList| list.names.iter().any(|n| !sent.as_ref().is_some_and(|s| s.named(n)));
        match hot.is_some_and(new) {
            true => " ".repeat(super::wake::WAKE_BYTES),
            false => String::new(),
        }
    }
}
