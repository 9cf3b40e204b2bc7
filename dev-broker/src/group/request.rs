//! The group APIs' wire format, as far as the coordinator serves them:
//! requests read from their frames, responses written for them, and the
//! ApiVersions answer capped to the versions read here. No state: the
//! coordinator ([`super::Coordinator`]) decides, this file only encodes.

use super::Millis;
use crate::wire::{
    put_bytes, put_string, Header, Reader, DESCRIBE_GROUPS, FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP,
    LIST_GROUPS, NONE, NOT_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH, SYNC_GROUP,
};

/// The highest version of each group API served here: the non-flexible
/// ones (librdkafka 2.12 uses FindCoordinator 2, JoinGroup 5, SyncGroup 3,
/// Heartbeat 3, LeaveGroup 1, OffsetCommit 7 and OffsetFetch 5 under this
/// cap; kafkajs and kafka-python use LeaveGroup 3, which leaves a list of
/// members). The ApiVersions answer is capped to these.
const MAX_VERSION: [(i16, i16); 9] = [
    (FIND_COORDINATOR, 2),
    (JOIN_GROUP, 5),
    (HEARTBEAT, 3),
    (LEAVE_GROUP, 3),
    (SYNC_GROUP, 3),
    (OFFSET_COMMIT, 7),
    (OFFSET_FETCH, 5),
    (DESCRIBE_GROUPS, 4),
    (LIST_GROUPS, 2),
];
/// APIs the mock does not serve at all, which the ApiVersions answer gains.
pub const ADDED: [(i16, i16, i16); 2] = [(DESCRIBE_GROUPS, 0, 4), (LIST_GROUPS, 0, 2)];
/// The lowest versions read here (the older ones lay their fields out
/// differently and no client in use sends them).
const MIN_VERSION: [(i16, i16); 2] = [(OFFSET_COMMIT, 2), (OFFSET_FETCH, 1)];

/// A group request, as read from its frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub version: i16,
    pub correlation: i32,
    pub client_id: String,
    /// The client's address as Kafka shows it ("/127.0.0.1"); set by the
    /// shell, which knows the connection.
    pub host: String,
    /// Empty for DescribeGroups and ListGroups, which name no one group.
    pub group: String,
    pub body: Body,
}

/// What a group request asks, by API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Join(JoinGroup),
    Sync(SyncGroup),
    Heartbeat {
        generation: i32,
        member: String,
        /// Its group.instance.id (from v3), if a static member.
        instance: Option<String>,
    },
    /// The members leaving: id and group.instance.id (one, without an
    /// instance id, before v3).
    Leave {
        members: Vec<(String, Option<String>)>,
    },
    Commit(OffsetCommit),
    /// Offsets asked for, by topic; None for all of the group's.
    Fetch {
        topics: Option<Vec<(String, Vec<i32>)>>,
    },
    Describe {
        groups: Vec<String>,
    },
    List,
}

/// A JoinGroup request: a member (none yet on its first) and what it
/// supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroup {
    pub session: Millis,
    pub rebalance: Millis,
    /// Empty on a member's first JoinGroup (and on a static member's
    /// first after a restart).
    pub member: String,
    /// Its group.instance.id (from v5): a static member (KIP-345).
    pub instance: Option<String>,
    pub protocol_type: String,
    /// The assignors it supports, each with its metadata, in its order.
    pub protocols: Vec<(String, Vec<u8>)>,
}

/// A SyncGroup request: from the leader with every member's assignment,
/// from the others with none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroup {
    pub generation: i32,
    pub member: String,
    /// Its group.instance.id (from v3), if a static member.
    pub instance: Option<String>,
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// An OffsetCommit request: offsets to keep, by topic and partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommit {
    /// -1 (and no member) outside group management.
    pub generation: i32,
    pub member: String,
    /// Its group.instance.id (from v7), if a static member.
    pub instance: Option<String>,
    pub topics: Vec<(String, Vec<(i32, Committed)>)>,
}

/// A committed offset, as OffsetFetch returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

impl Request {
    /// Reads a request of a group API and version served here; None for
    /// anything else.
    pub fn parse(header: &Header) -> Option<Request> {
        let Header { api_key, version, correlation, flexible, .. } = *header;
        let (client_id, mut r) = (header.client_id.clone(), header.body.clone());
        let max = MAX_VERSION.iter().find(|(key, _)| *key == api_key)?.1;
        let min = MIN_VERSION.iter().find(|(key, _)| *key == api_key).map_or(0, |(_, min)| *min);
        if flexible || version > max || version < min {
            return None;
        }
        let host = String::new();
        match api_key {
            DESCRIBE_GROUPS => {
                let groups = (0..r.i32()?.max(0)).map(|_| r.string()).collect::<Option<_>>()?;
                let body = Body::Describe { groups };
                return Some(Request { version, correlation, client_id, host, group: String::new(), body });
            }
            LIST_GROUPS => {
                return Some(Request { version, correlation, client_id, host, group: String::new(), body: Body::List })
            }
            _ => {}
        }
        let group = r.string()?;
        let body = match api_key {
            JOIN_GROUP => {
                let session = r.i32()?.max(0) as Millis;
                let rebalance = if version >= 1 { r.i32()?.max(0) as Millis } else { session };
                let member = r.string()?;
                let instance = if version >= 5 { r.string_in(false)? } else { None };
                let protocol_type = r.string()?;
                let protocols = (0..r.i32()?.max(0)).map(|_| Some((r.string()?, r.bytes()?))).collect::<Option<_>>()?;
                Body::Join(JoinGroup { session, rebalance, member, instance, protocol_type, protocols })
            }
            SYNC_GROUP => {
                let (generation, member) = (r.i32()?, r.string()?);
                let instance = if version >= 3 { r.string_in(false)? } else { None };
                let assignments =
                    (0..r.i32()?.max(0)).map(|_| Some((r.string()?, r.bytes()?))).collect::<Option<_>>()?;
                Body::Sync(SyncGroup { generation, member, instance, assignments })
            }
            HEARTBEAT => {
                let (generation, member) = (r.i32()?, r.string()?);
                let instance = if version >= 3 { r.string_in(false)? } else { None };
                Body::Heartbeat { generation, member, instance }
            }
            LEAVE_GROUP if version >= 3 => {
                let members = (0..r.i32()?.max(0)).map(|_| Some((r.string()?, r.string_in(false)?)));
                Body::Leave { members: members.collect::<Option<_>>()? }
            }
            LEAVE_GROUP => Body::Leave { members: vec![(r.string()?, None)] },
            OFFSET_COMMIT => {
                let (generation, member) = (r.i32()?, r.string()?);
                let instance = if version >= 7 { r.string_in(false)? } else { None };
                if version <= 4 {
                    r.i64()?; // retention time
                }
                let topics = (0..r.i32()?.max(0))
                    .map(|_| {
                        let name = r.string()?;
                        let partitions = (0..r.i32()?.max(0))
                            .map(|_| {
                                let (partition, offset) = (r.i32()?, r.i64()?);
                                let leader_epoch = if version >= 6 { r.i32()? } else { -1 };
                                Some((partition, Committed { offset, leader_epoch, metadata: r.string_in(false)? }))
                            })
                            .collect::<Option<_>>()?;
                        Some((name, partitions))
                    })
                    .collect::<Option<_>>()?;
                Body::Commit(OffsetCommit { generation, member, instance, topics })
            }
            OFFSET_FETCH => {
                let count = r.i32()?;
                let topics = (count >= 0)
                    .then(|| {
                        (0..count)
                            .map(|_| Some((r.string()?, (0..r.i32()?.max(0)).map(|_| r.i32()).collect::<Option<_>>()?)))
                            .collect::<Option<Vec<_>>>()
                    })
                    .map_or(Some(None), |t| t.map(Some))?;
                Body::Fetch { topics }
            }
            _ => return None,
        };
        Some(Request { version, correlation, client_id, host, group, body })
    }

    fn api_key(&self) -> i16 {
        match self.body {
            Body::Join(_) => JOIN_GROUP,
            Body::Sync(_) => SYNC_GROUP,
            Body::Heartbeat { .. } => HEARTBEAT,
            Body::Leave { .. } => LEAVE_GROUP,
            Body::Commit(_) => OFFSET_COMMIT,
            Body::Fetch { .. } => OFFSET_FETCH,
            Body::Describe { .. } => DESCRIBE_GROUPS,
            Body::List => LIST_GROUPS,
        }
    }

    /// A response frame's start: correlation id, then the throttle time
    /// where this version has one.
    pub(super) fn response(&self) -> Vec<u8> {
        let mut out = self.correlation.to_be_bytes().to_vec();
        let throttled = match self.api_key() {
            JOIN_GROUP => self.version >= 2,
            OFFSET_COMMIT | OFFSET_FETCH => self.version >= 3,
            DESCRIBE_GROUPS | LIST_GROUPS => self.version >= 1,
            _ => self.version >= 1,
        };
        if throttled {
            out.extend_from_slice(&0i32.to_be_bytes());
        }
        out
    }

    /// What a broker that is not the group's coordinator answers:
    /// NOT_COORDINATOR, or for ListGroups (which lists a broker's own
    /// groups) none.
    pub fn elsewhere(&self) -> Vec<u8> {
        self.error(if self.body == Body::List { NONE } else { NOT_COORDINATOR })
    }

    /// The answer that is only an error code (Heartbeat, LeaveGroup with
    /// no members listed, and SyncGroup with an empty assignment).
    pub(super) fn error(&self, code: i16) -> Vec<u8> {
        match &self.body {
            Body::Join(_) => self.join_response(code, -1, "", "", "", &[]),
            Body::Sync(_) => self.sync_response(code, &[]),
            Body::Leave { .. } => self.leave_response(code, &[]),
            Body::Heartbeat { .. } => {
                let mut out = self.response();
                out.extend_from_slice(&code.to_be_bytes());
                out
            }
            Body::Commit(OffsetCommit { topics, .. }) => {
                let mut out = self.response();
                out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
                for (name, partitions) in topics {
                    put_string(&mut out, Some(name));
                    out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
                    for (partition, ..) in partitions {
                        out.extend_from_slice(&partition.to_be_bytes());
                        out.extend_from_slice(&code.to_be_bytes());
                    }
                }
                out
            }
            Body::Fetch { .. } => self.fetch_response(&[]),
            Body::Describe { .. } | Body::List => {
                let mut out = self.response();
                out.extend_from_slice(&code.to_be_bytes());
                out.extend_from_slice(&0i32.to_be_bytes()); // no groups
                out
            }
        }
    }

    /// An OffsetFetch answer: every partition asked for (or every one the
    /// group committed), with -1 where nothing was committed.
    pub(super) fn fetch_response(&self, committed: &[(String, i32, Option<Committed>)]) -> Vec<u8> {
        let mut out = self.response();
        type Partitions<'a> = Vec<(i32, Option<&'a Committed>)>;
        let mut topics: Vec<(&str, Partitions)> = Vec::new();
        for (topic, partition, c) in committed {
            match topics.last_mut() {
                Some((t, parts)) if t == topic => parts.push((*partition, c.as_ref())),
                _ => topics.push((topic, vec![(*partition, c.as_ref())])),
            }
        }
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, partitions) in topics {
            put_string(&mut out, Some(topic));
            out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for (partition, c) in partitions {
                out.extend_from_slice(&partition.to_be_bytes());
                out.extend_from_slice(&c.map_or(-1, |c| c.offset).to_be_bytes());
                if self.version >= 5 {
                    out.extend_from_slice(&c.map_or(-1, |c| c.leader_epoch).to_be_bytes());
                }
                put_string(&mut out, Some(c.and_then(|c| c.metadata.as_deref()).unwrap_or("")));
                out.extend_from_slice(&NONE.to_be_bytes());
            }
        }
        if self.version >= 2 {
            out.extend_from_slice(&NONE.to_be_bytes());
        }
        out
    }

    pub(super) fn join_response(
        &self,
        code: i16,
        generation: i32,
        protocol: &str,
        leader: &str,
        member: &str,
        members: &[(&str, Option<&str>, &[u8])],
    ) -> Vec<u8> {
        let mut out = self.response();
        out.extend_from_slice(&code.to_be_bytes());
        out.extend_from_slice(&generation.to_be_bytes());
        put_string(&mut out, Some(protocol));
        put_string(&mut out, Some(leader));
        put_string(&mut out, Some(member));
        out.extend_from_slice(&(members.len() as i32).to_be_bytes());
        for (id, instance, metadata) in members {
            put_string(&mut out, Some(id));
            if self.version >= 5 {
                put_string(&mut out, *instance);
            }
            put_bytes(&mut out, metadata);
        }
        out
    }

    /// A LeaveGroup answer: from v3 (KIP-345) the error of each member
    /// listed, after the group's; before, one member's error is the
    /// answer's, as Kafka's LeaveGroupResponse lifts it.
    pub(super) fn leave_response(&self, code: i16, members: &[(&str, Option<&str>, i16)]) -> Vec<u8> {
        let mut out = self.response();
        if self.version < 3 {
            let member = members.iter().map(|(.., c)| *c).find(|c| *c != NONE);
            let lifted = if code == NONE { member.unwrap_or(NONE) } else { code };
            out.extend_from_slice(&lifted.to_be_bytes());
            return out;
        }
        out.extend_from_slice(&code.to_be_bytes());
        out.extend_from_slice(&(members.len() as i32).to_be_bytes());
        for (id, instance, code) in members {
            put_string(&mut out, Some(id));
            put_string(&mut out, *instance);
            out.extend_from_slice(&code.to_be_bytes());
        }
        out
    }

    pub(super) fn sync_response(&self, code: i16, assignment: &[u8]) -> Vec<u8> {
        let mut out = self.response();
        out.extend_from_slice(&code.to_be_bytes());
        put_bytes(&mut out, assignment);
        out
    }
}

/// The answer to a FindCoordinator request (versions 0 to 2, one key):
/// `node` at `host`:`port`, whatever the key (every group and transaction
/// has the one coordinator). None for any other request.
pub fn find_coordinator(header: &Header, node: i32, host: &str, port: u16) -> Option<Vec<u8>> {
    if header.api_key != FIND_COORDINATOR || header.version > 2 {
        return None;
    }
    let mut out = header.correlation.to_be_bytes().to_vec();
    if header.version >= 1 {
        out.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    }
    out.extend_from_slice(&NONE.to_be_bytes());
    if header.version >= 1 {
        put_string(&mut out, None); // error message
    }
    out.extend_from_slice(&node.to_be_bytes());
    put_string(&mut out, Some(host));
    out.extend_from_slice(&i32::from(port).to_be_bytes());
    Some(out)
}

/// Caps the group APIs in an ApiVersions response frame (`version` is the
/// request's) to the versions served here; None if it cannot be read.
pub fn cap_api_versions(frame: &[u8], version: i16) -> Option<Vec<u8>> {
    let flexible = version >= 3;
    let mut r = Reader { buf: frame, at: 6 }; // correlation id, error code
    let count = if flexible { r.uvarint()?.checked_sub(1)? } else { u64::try_from(r.i32()?).ok()? };
    let mut out = frame.to_vec();
    for _ in 0..count {
        let (key, at) = (r.i16()?, r.at);
        r.skip(4)?; // min, max
        if flexible {
            r.tagged_fields()?;
        }
        if let Some((_, max)) = MAX_VERSION.iter().find(|(k, _)| *k == key) {
            let theirs = i16::from_be_bytes([out[at + 2], out[at + 3]]);
            out[at + 2..at + 4].copy_from_slice(&theirs.min(*max).to_be_bytes());
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame's request, read as the forwarder reads it.
    fn parse(frame: &[u8]) -> Option<Request> {
        Request::parse(&Header::parse(frame)?)
    }

    #[test]
    fn reads_the_requests_librdkafka_sends_and_leaves_flexible_ones_alone() {
        // JoinGroup v5: group, session, rebalance, member, instance id,
        // protocol type, protocols.
        let mut f = vec![0, 11, 0, 5, 0, 0, 0, 42, 0, 1, b'c', 0, 1, b'g'];
        f.extend_from_slice(&3000i32.to_be_bytes());
        f.extend_from_slice(&9000i32.to_be_bytes());
        f.extend_from_slice(&[0, 2, b'm', b'1', 255, 255, 0, 1, b't', 0, 0, 0, 1, 0, 1, b'p', 0, 0, 0, 1, 9]);
        let want = Body::Join(JoinGroup {
            session: 3000,
            rebalance: 9000,
            member: "m1".into(),
            instance: None,
            protocol_type: "t".into(),
            protocols: vec![("p".into(), vec![9])],
        });
        assert_eq!(
            parse(&f),
            Some(Request {
                version: 5,
                correlation: 42,
                client_id: "c".into(),
                host: String::new(),
                group: "g".into(),
                body: want
            })
        );
        // A static member's: with its group.instance.id.
        let mut fi = f.clone();
        fi.splice(26..28, [0, 1, b'i']);
        let Body::Join(static_join) = parse(&fi).unwrap().body else { panic!("a JoinGroup") };
        assert_eq!(static_join.instance.as_deref(), Some("i"));
        // Heartbeat v3 and LeaveGroup v1.
        let hb = [0, 12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, b'g', 0, 0, 0, 4, 0, 1, b'm', 255, 255];
        assert_eq!(parse(&hb).unwrap().body, Body::Heartbeat { generation: 4, member: "m".into(), instance: None });
        let lv = [0, 13, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, b'g', 0, 1, b'm'];
        assert_eq!(parse(&lv).unwrap().body, Body::Leave { members: vec![("m".into(), None)] });
        // LeaveGroup v3 (KIP-345): a list of members, each with an instance id.
        let lv3 = [0, 13, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, b'g', 0, 0, 0, 2, 0, 1, b'm', 255, 255, 0, 1, b'n', 0, 1, b'i'];
        let want = Body::Leave { members: vec![("m".into(), None), ("n".into(), Some("i".into()))] };
        assert_eq!(parse(&lv3).unwrap().body, want);
        // LeaveGroup v4 is flexible: capped away, and not read.
        let mut lv4 = lv3;
        lv4[3] = 4;
        assert_eq!(parse(&lv4), None);
        // JoinGroup v6 is flexible: capped away, and not read.
        let mut v6 = f.clone();
        v6[3] = 6;
        assert_eq!(parse(&v6), None);
    }

    #[test]
    fn api_versions_are_capped_to_the_group_versions_served_here() {
        // ApiVersions v2 response: correlation, error, 2 APIs, throttle.
        let mut f = vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 2];
        f.extend_from_slice(&[0, 11, 0, 0, 0, 9]); // JoinGroup 0..9
        f.extend_from_slice(&[0, 3, 0, 0, 0, 12]); // Metadata 0..12
        f.extend_from_slice(&[0, 0, 0, 0]);
        let capped = cap_api_versions(&f, 2).unwrap();
        assert_eq!(capped[10..22], [0, 11, 0, 0, 0, 5, 0, 3, 0, 0, 0, 12]);
        assert_eq!(capped.len(), f.len());
    }

    #[test]
    fn reads_offset_commit_and_fetch_requests() {
        // OffsetCommit v7: group g, generation 3, member m, no instance id,
        // one topic t with partition 0 at offset 9, epoch 2, metadata "x".
        let mut f = vec![0, 8, 0, 7, 0, 0, 0, 1, 0, 1, b'c', 0, 1, b'g', 0, 0, 0, 3, 0, 1, b'm', 255, 255];
        f.extend_from_slice(&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0]);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 1, b'x']);
        let want = Body::Commit(OffsetCommit {
            generation: 3,
            member: "m".into(),
            instance: None,
            topics: vec![("t".into(), vec![(0, Committed { offset: 9, leader_epoch: 2, metadata: Some("x".into()) })])],
        });
        assert_eq!(parse(&f).unwrap().body, want);
        // OffsetFetch v5: all topics (null), and t/0, 1.
        let all = [0, 9, 0, 5, 0, 0, 0, 1, 0, 1, b'c', 0, 1, b'g', 255, 255, 255, 255];
        assert_eq!(parse(&all).unwrap().body, Body::Fetch { topics: None });
        let mut some = vec![0, 9, 0, 5, 0, 0, 0, 1, 0, 1, b'c', 0, 1, b'g', 0, 0, 0, 1, 0, 1, b't'];
        some.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(parse(&some).unwrap().body, Body::Fetch { topics: Some(vec![("t".into(), vec![0, 1])]) });
        // OffsetCommit v1 lays its fields out otherwise: not read.
        let mut v1 = f.clone();
        v1[3] = 1;
        assert_eq!(parse(&v1), None);
    }
}
