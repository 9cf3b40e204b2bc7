//! What the forwarder does for group requests that go to librdkafka's mock
//! (`--group-coordinator mock`): it names new members as Kafka does, and
//! holds a member's next request until the mock has answered its last, two
//! things whose absence makes the mock abort.

use crate::wire::{self, Header};

/// Group requests (JoinGroup, SyncGroup) the mock is still answering, by
/// member id: the mock fails an assertion and aborts when a member sends
/// another while one is pending, which clients do when they rejoin quickly
/// or reconnect (Kafka itself answers the older one). So a member's next
/// group request waits here until the mock has answered the previous one.
#[derive(Default)]
pub struct Pending {
    /// member id -> (connection, correlation id) of its request in flight.
    by_member: std::sync::Mutex<std::collections::HashMap<String, (u64, i32)>>,
    changed: tokio::sync::Notify,
    /// Numbers the connections, for `by_member`.
    connections: std::sync::atomic::AtomicU64,
}

impl Pending {
    /// A number for a new connection, unique in this broker.
    pub fn connection(&self) -> u64 {
        self.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Before a group request goes to the mock: the answer given here
    /// instead (MEMBER_ID_REQUIRED to a first JoinGroup), or None once the
    /// request may go, after the member's previous one was answered.
    pub async fn before_mock(&self, header: &Header<'_>, conn: u64) -> Option<Vec<u8>> {
        match GroupRequest::parse(header)? {
            first if first.member.is_empty() => first.member_id_required(&next_member_id(&first.client_id)),
            req => {
                self.enter(&req.member, conn, req.correlation).await;
                None
            }
        }
    }

    /// Waits until `member` has no group request in flight, then records
    /// this one.
    async fn enter(&self, member: &str, conn: u64, correlation: i32) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut map = self.by_member.lock().expect("pending lock");
                if !map.contains_key(member) {
                    map.insert(member.to_string(), (conn, correlation));
                    return;
                }
            }
            changed.await;
        }
    }

    /// Whether a group request sent on `conn` is still unanswered.
    pub fn holds(&self, conn: u64) -> bool {
        self.by_member.lock().expect("pending lock").values().any(|(c, _)| *c == conn)
    }

    /// The response to (`conn`, `correlation`) has passed: or, with None,
    /// the connection is gone and so is everything it had in flight.
    pub fn leave(&self, conn: u64, correlation: Option<i32>) {
        let mut map = self.by_member.lock().expect("pending lock");
        let before = map.len();
        map.retain(|_, (c, corr)| !(*c == conn && correlation.is_none_or(|x| x == *corr)));
        if map.len() != before {
            self.changed.notify_waiters();
        }
    }
}

/// A unique member id, as Kafka makes them (client id and a suffix). The
/// mock would name a member after its address in memory, which the next
/// member to join reuses as soon as one is expelled: the expelled client's
/// next request then lands on the new member's state (and a JoinGroup on
/// one still joining fails an assertion and aborts the mock).
fn next_member_id(client_id: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!("{client_id}-dev-{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// What the forwarder needs of a JoinGroup or SyncGroup request.
/// Both are flexible (compact strings, tagged fields) from JoinGroup v6 /
/// SyncGroup v4.
struct GroupRequest {
    api_key: i16,
    version: i16,
    correlation: i32,
    client_id: String,
    /// Empty on a member's first JoinGroup.
    member: String,
}

impl GroupRequest {
    fn parse(header: &Header) -> Option<GroupRequest> {
        let Header { api_key, version, correlation, flexible, .. } = *header;
        let (client_id, mut r) = (header.client_id.clone(), header.body.clone());
        if api_key != wire::JOIN_GROUP && api_key != wire::SYNC_GROUP {
            return None;
        }
        r.string_in(flexible)?; // group id
        if api_key == wire::JOIN_GROUP {
            r.skip(if version >= 1 { 8 } else { 4 })?; // session (and rebalance) timeout
        } else {
            r.skip(4)?; // generation id
        }
        let member = r.string_in(flexible)?.unwrap_or_default();
        Some(GroupRequest { api_key, version, correlation, client_id, member })
    }

    /// For a first JoinGroup (v4 to v6, the mock's range), the answer Kafka
    /// gives since KIP-394: MEMBER_ID_REQUIRED with the id to join with.
    fn member_id_required(&self, member: &str) -> Option<Vec<u8>> {
        if self.api_key != wire::JOIN_GROUP || !(4..=6).contains(&self.version) {
            return None;
        }
        let flexible = self.version >= 6;
        let mut f = self.correlation.to_be_bytes().to_vec();
        let string = |f: &mut Vec<u8>, s: &str| {
            if flexible {
                f.push(s.len() as u8 + 1); // a uvarint: member ids stay short
            } else {
                f.extend_from_slice(&(s.len() as i16).to_be_bytes());
            }
            f.extend_from_slice(s.as_bytes());
        };
        if flexible {
            f.push(0); // response header tagged fields
        }
        f.extend_from_slice(&0i32.to_be_bytes()); // throttle time
        f.extend_from_slice(&wire::MEMBER_ID_REQUIRED.to_be_bytes());
        f.extend_from_slice(&(-1i32).to_be_bytes()); // generation
        string(&mut f, ""); // protocol name
        string(&mut f, ""); // leader
        string(&mut f, member);
        if flexible {
            f.extend_from_slice(&[1, 0]); // no members; tagged fields
        } else {
            f.extend_from_slice(&0i32.to_be_bytes()); // no members
        }
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: i16) -> Vec<u8> {
        let mut f = vec![0, 3];
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        f.extend_from_slice(&3i16.to_be_bytes());
        f.extend_from_slice(b"cli");
        f
    }

    #[test]
    fn reads_the_member_of_join_and_sync_group_requests() {
        // JoinGroup v5 (classic strings): group, session, rebalance, member.
        let mut join = vec![0, 11, 0, 5];
        join.extend_from_slice(&42i32.to_be_bytes());
        join.extend_from_slice(&3i16.to_be_bytes());
        join.extend_from_slice(b"cli");
        join.extend_from_slice(&1i16.to_be_bytes());
        join.extend_from_slice(b"g");
        join.extend_from_slice(&[0u8; 8]);
        join.extend_from_slice(&2i16.to_be_bytes());
        join.extend_from_slice(b"m1");
        let parsed = |f: &[u8]| GroupRequest::parse(&Header::parse(f)?).map(|r| (r.member, r.correlation));
        assert_eq!(parsed(&join), Some(("m1".into(), 42)));
        // SyncGroup v4 (flexible): compact strings and tagged fields.
        let mut sync = vec![0, 14, 0, 4];
        sync.extend_from_slice(&7i32.to_be_bytes());
        sync.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
        sync.push(0); // header tagged fields
        sync.extend_from_slice(&[2, b'g']);
        sync.extend_from_slice(&[0u8; 4]);
        sync.extend_from_slice(&[3, b'm', b'2']);
        assert_eq!(parsed(&sync), Some(("m2".into(), 7)));
        // A first join has no member id; other requests are not looked at.
        let mut first = join.clone();
        first.truncate(join.len() - 4);
        first.extend_from_slice(&0i16.to_be_bytes());
        assert_eq!(parsed(&first), Some((String::new(), 42)));
        assert!(GroupRequest::parse(&Header::parse(&header(1)).unwrap()).is_none());
    }

    #[test]
    fn a_first_join_is_answered_member_id_required_with_a_unique_id() {
        let first = GroupRequest { api_key: 11, version: 5, correlation: 9, client_id: "a".into(), member: "".into() };
        let mut want = 9i32.to_be_bytes().to_vec();
        want.extend_from_slice(&[0, 0, 0, 0, 0, 79, 255, 255, 255, 255, 0, 0, 0, 0, 0, 3]);
        want.extend_from_slice(b"a-1");
        want.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(first.member_id_required("a-1"), Some(want));
        let flexible = GroupRequest { version: 6, ..first };
        let answer = flexible.member_id_required("a-1").unwrap();
        assert_eq!(&answer[4..], &[0, 0, 0, 0, 0, 0, 79, 255, 255, 255, 255, 1, 1, 4, b'a', b'-', b'1', 1, 0]);
        // Versions the mock does not serve are left to it.
        assert!(GroupRequest { version: 3, ..flexible }.member_id_required("x").is_none());
        assert_ne!(next_member_id("a"), next_member_id("a"));
    }
}
