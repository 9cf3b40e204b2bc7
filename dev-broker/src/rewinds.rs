//! The control socket's `rewind TOPIC P` ([`crate::cluster::Event::Rewind`]):
//! the next Fetch that asks for partition P of TOPIC, from any client, is
//! answered for it with OFFSET_OUT_OF_RANGE and no records
//! ([`crate::fetch::out_of_range`]), as a broker answers a fetch past the
//! log end it knows (a new leader whose log lags; brokers over a shared
//! store). Later fetches are served as before. A client with
//! `auto.offset.reset=earliest` then reads the partition again from its
//! start: records older than some it was given are given again.
//!
//! Fetches from v13 name topics by id: the ids are learnt from the Metadata
//! responses going back to clients (a client fetches a topic only once
//! its metadata named it).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use crate::fetch::{self, Asked};
use crate::wire::Header;

/// The rewinds asked for and not yet served, and the topics' ids.
#[derive(Default)]
pub struct Rewinds(Mutex<State>);

#[derive(Default)]
struct State {
    /// (topic, partition) whose next fetch is answered out of range.
    pending: BTreeSet<(String, i32)>,
    /// Topic names by id, from the Metadata responses.
    names: HashMap<[u8; 16], String>,
}

impl Rewinds {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers the next fetch of `partition` of `topic` out of range.
    pub fn ask(&self, topic: &str, partition: i32) {
        self.state().pending.insert((topic.to_string(), partition));
    }

    /// The rewinds not yet served, as `TOPIC/P` (for `describe`).
    pub fn pending(&self) -> Vec<String> {
        self.state().pending.iter().map(|(t, p)| format!("{t}/{p}")).collect()
    }

    /// Learns the topic ids a Metadata response of `version` (without its
    /// length) names: from v10.
    pub fn learn(&self, frame: &[u8], version: i16) {
        if version < 10 {
            return;
        }
        let mut seen = Vec::new();
        crate::topics::edit_topics(frame, version, |topic| {
            // The head ends with the id and IsInternal.
            let id = topic.head.len().checked_sub(17).and_then(|at| topic.head.get(at..at + 16));
            if let (Some(name), Some(id)) = (&topic.name, id.and_then(|id| <[u8; 16]>::try_from(id).ok())) {
                seen.push((id, name.clone()));
            }
            None
        });
        if !seen.is_empty() {
            self.state().names.extend(seen);
        }
    }

    /// The partitions of a Fetch request to answer out of range (each
    /// rewind is served once, and forgotten), or None if it asks for none.
    pub fn take(&self, header: &Header) -> Option<Vec<Asked>> {
        let mut state = self.state();
        if state.pending.is_empty() {
            return None;
        }
        let state = &mut *state;
        let asked = fetch::asked(header)?;
        let taken: Vec<Asked> = asked
            .into_iter()
            .filter(|a| {
                let name = match &a.topic {
                    fetch::Topic::Name(name) => Some(name),
                    fetch::Topic::Id(id) => state.names.get(id),
                };
                name.is_some_and(|name| state.pending.remove(&(name.clone(), a.partition)))
            })
            .collect();
        (!taken.is_empty()).then_some(taken)
    }

    /// The name of the topic a fetch asked for, as the rewind named it.
    pub fn name(&self, topic: &fetch::Topic) -> String {
        match topic {
            fetch::Topic::Name(name) => name.clone(),
            fetch::Topic::Id(id) => self.state().names.get(id).cloned().unwrap_or_else(|| format!("{id:02x?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::tests::request;
    use crate::topics::tests::metadata_response_with;

    #[test]
    fn a_rewind_takes_the_next_fetch_of_its_partition_once_by_name_or_by_learnt_id() {
        let rewinds = Rewinds::default();
        let fetch = |version| request(version, 500, 1, 2); // topic "t" (id 7s from v13), partitions 0 and 1
        let take = |frame: &[u8]| rewinds.take(&Header::parse(frame).unwrap());
        assert_eq!(take(&fetch(11)), None, "nothing asked");
        rewinds.ask("t", 1);
        rewinds.ask("u", 0);
        assert_eq!(rewinds.pending(), ["t/1", "u/0"]);
        assert_eq!(take(&fetch(16)), None, "the topic's id is not known yet");
        rewinds.learn(&metadata_response_with(9, &[("t", 0, 2)]), 9);
        assert_eq!(take(&fetch(16)), None, "v9 names no ids");
        rewinds.learn(&metadata_response_with(12, &[("t", 0, 2)]), 12);
        let taken = take(&fetch(16)).expect("partition 1 of t, by its id");
        assert_eq!(taken.iter().map(|a| (a.partition, a.offset)).collect::<Vec<_>>(), [(1, 1)]);
        assert_eq!(rewinds.name(&taken[0].topic), "t");
        assert_eq!(take(&fetch(16)), None, "served once");
        rewinds.ask("t", 1);
        assert_eq!(take(&fetch(11)).map(|t| t.len()), Some(1), "by name to v12");
        assert_eq!(rewinds.pending(), ["u/0"]);
    }
}
