//! Every request the dev broker has received since it started, counted by
//! client.id and API: what an idle member costs the brokers, seen from
//! their side (`requests` on the control socket; neli-bench's idle
//! scenario reads it at both ends of its window). One lock per request:
//! nothing next to the forwarding itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// The counts, by client.id, then API key; and by client.id the longest
/// wait (MaxWaitMs) a Fetch for any record (MinBytes 1) asked for.
#[derive(Default)]
pub struct Requests(Mutex<HashMap<String, BTreeMap<i16, u64>>>, Mutex<BTreeMap<String, i32>>);

impl Requests {
    /// Counts one request of `api_key` from `client` (its client.id).
    pub fn count(&self, client: &str, api_key: i16) {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // No allocation once a client has been seen.
        match counts.get_mut(client) {
            Some(apis) => *apis.entry(api_key).or_default() += 1,
            None => _ = counts.insert(client.to_string(), BTreeMap::from([(api_key, 1)])),
        }
    }

    /// Notes that a Fetch of `client` for any record (MinBytes 1: a
    /// leader's read-back, not a watcher's fetch for a wake's size) asked
    /// to be held up to `wait_ms`: how late a broker that holds every fetch
    /// for its wait (tansu) would answer it.
    pub fn fetch_wait(&self, client: &str, wait_ms: i32) {
        let mut waits = self.1.lock().unwrap_or_else(|e| e.into_inner());
        match waits.get_mut(client) {
            Some(longest) => *longest = (*longest).max(wait_ms),
            None => _ = waits.insert(client.to_string(), wait_ms),
        }
    }

    /// The longest wait each client's fetches for any record asked for, one line
    /// `CLIENT MS` per client (as in [`Requests::lines`]), sorted by client.
    pub fn fetch_waits(&self) -> String {
        let waits = self.1.lock().unwrap_or_else(|e| e.into_inner());
        waits.iter().map(|(client, ms)| format!("{} {ms}", shown(client))).collect::<Vec<_>>().join("\n")
    }

    /// The counts, one line `CLIENT API COUNT` per client and API, sorted
    /// by client, then API key: CLIENT is the client.id with whitespace
    /// shown as `_` (`-` when it has none), API Kafka's name for the key
    /// ([`api_name`]). Empty when nothing was received.
    pub fn lines(&self) -> String {
        let counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut clients: Vec<_> = counts.iter().collect();
        clients.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = Vec::new();
        for (client, apis) in clients {
            let client = shown(client);
            for (key, n) in apis {
                out.push(format!("{client} {} {n}", api_name(*key)));
            }
        }
        out.join("\n")
    }
}

/// A client.id as the lines show it: whitespace as `_`, none as `-`.
fn shown(client: &str) -> String {
    match client {
        "" => "-".to_string(),
        c => c.chars().map(|c| if c.is_whitespace() || c.is_control() { '_' } else { c }).collect(),
    }
}

/// Kafka's name for an API key (as its protocol guide spells it), for the
/// keys clients send; a key not named here is shown as its number.
pub fn api_name(key: i16) -> std::borrow::Cow<'static, str> {
    let name = match key {
        0 => "Produce",
        1 => "Fetch",
        2 => "ListOffsets",
        3 => "Metadata",
        8 => "OffsetCommit",
        9 => "OffsetFetch",
        10 => "FindCoordinator",
        11 => "JoinGroup",
        12 => "Heartbeat",
        13 => "LeaveGroup",
        14 => "SyncGroup",
        15 => "DescribeGroups",
        16 => "ListGroups",
        17 => "SaslHandshake",
        18 => "ApiVersions",
        19 => "CreateTopics",
        20 => "DeleteTopics",
        21 => "DeleteRecords",
        22 => "InitProducerId",
        23 => "OffsetForLeaderEpoch",
        32 => "DescribeConfigs",
        36 => "SaslAuthenticate",
        37 => "CreatePartitions",
        42 => "DeleteGroups",
        47 => "OffsetDelete",
        60 => "DescribeCluster",
        68 => "ConsumerGroupHeartbeat",
        69 => "ConsumerGroupDescribe",
        71 => "GetTelemetrySubscriptions",
        72 => "PushTelemetry",
        n => return n.to_string().into(),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_listed_by_client_then_api_one_line_each() {
        let requests = Requests::default();
        assert_eq!(requests.lines(), "");
        for (client, key) in [("m2", 12), ("m1", 1), ("m1 b", 0), ("m1", 12), ("m1", 1), ("", 18), ("m1", 99)] {
            requests.count(client, key);
        }
        assert_eq!(
            requests.lines(),
            "- ApiVersions 1\nm1 Fetch 2\nm1 Heartbeat 1\nm1 99 1\nm1_b Produce 1\nm2 Heartbeat 1"
        );
    }

    #[test]
    fn the_longest_fetch_wait_is_listed_by_client() {
        let requests = Requests::default();
        assert_eq!(requests.fetch_waits(), "");
        for (client, ms) in [("m2", 100), ("m1", 500), ("m1", 100), ("", 30)] {
            requests.fetch_wait(client, ms);
        }
        assert_eq!(requests.fetch_waits(), "- 30\nm1 500\nm2 100");
    }
}
