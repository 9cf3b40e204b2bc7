//! Kafka's classic group coordinator, with Kafka's timing, as a pure state
//! machine (requests and time in, response frames out): what the dev broker
//! answers JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//! OffsetFetch, DescribeGroups and ListGroups with under
//! `--group-coordinator kafka`.
//!
//! librdkafka's mock, the other choice, never ends a join early (it waits
//! `session.timeout - 1s` after any change) and checks sessions on a 1 s
//! tick. Kafka (GroupCoordinator.scala, 3.9) ends a join the moment every
//! remaining member has rejoined, drops members that did not rejoin when the
//! rebalance timeout ends, and expires a session at exactly its last
//! heartbeat plus the session timeout; a group that starts from empty waits
//! `group.initial.rebalance.delay.ms` first. That timing is what users'
//! clusters give, and the revoke barrier matters only under it: a leader
//! that holds its rebalance callback holds up the whole join.
//!
//! Honest by construction: members learn of a rebalance only through their
//! own next Heartbeat (REBALANCE_IN_PROGRESS) or JoinGroup, as on Kafka.
//! Simplified where neli-run cannot tell: any JoinGroup of a known member
//! starts a rebalance (Kafka spares a follower whose metadata is unchanged),
//! and static membership (group.instance.id) is not supported. Offsets are
//! the coordinator's, as on Kafka: a commit is checked against the member
//! and its generation, and kept in memory.

use std::collections::BTreeMap;

use super::wire::{
    put_bytes, put_string, Header, Reader, DESCRIBE_GROUPS, HEARTBEAT, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL,
    JOIN_GROUP, LEAVE_GROUP, LIST_GROUPS, MEMBER_ID_REQUIRED, NONE, OFFSET_COMMIT, OFFSET_FETCH, REBALANCE_IN_PROGRESS,
    SYNC_GROUP, UNKNOWN_MEMBER_ID,
};

/// The highest version of each group API served here: the non-flexible
/// ones (librdkafka 2.12 uses JoinGroup 5, SyncGroup 3, Heartbeat 3,
/// LeaveGroup 1, OffsetCommit 7 and OffsetFetch 5 under this cap; kafkajs
/// and kafka-python use LeaveGroup 3, which leaves a list of members). The
/// ApiVersions answer is capped to these.
const MAX_VERSION: [(i16, i16); 8] = [
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

/// Milliseconds on the coordinator's own clock.
pub type Millis = u64;

/// Who a response goes to: the shell's handle for a waiting request.
pub type ReplyTo = u64;

/// A response frame (without its length) for a waiting request.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub to: ReplyTo,
    pub frame: Vec<u8>,
}

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

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Join {
        session: Millis,
        rebalance: Millis,
        member: String,
        protocol_type: String,
        protocols: Vec<(String, Vec<u8>)>,
    },
    Sync {
        generation: i32,
        member: String,
        assignments: Vec<(String, Vec<u8>)>,
    },
    Heartbeat {
        generation: i32,
        member: String,
    },
    /// The members leaving: id and group.instance.id (one, without an
    /// instance id, before v3).
    Leave {
        members: Vec<(String, Option<String>)>,
    },
    /// Offsets to keep, by topic and partition.
    Commit {
        generation: i32,
        member: String,
        topics: Vec<(String, Vec<(i32, Committed)>)>,
    },
    /// Offsets asked for, by topic; None for all of the group's.
    Fetch {
        topics: Option<Vec<(String, Vec<i32>)>>,
    },
    Describe {
        groups: Vec<String>,
    },
    List,
}

/// A committed offset, as OffsetFetch returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    offset: i64,
    leader_epoch: i32,
    metadata: Option<String>,
}

impl Request {
    /// Reads a frame of a group API and version served here; None for
    /// anything else.
    pub fn parse(frame: &[u8]) -> Option<Request> {
        let Header { api_key, version, correlation, client_id, flexible, body: mut r } = Header::parse(frame)?;
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
                if version >= 5 {
                    r.string_in(false)?; // group.instance.id
                }
                let protocol_type = r.string()?;
                let protocols = (0..r.i32()?.max(0)).map(|_| Some((r.string()?, r.bytes()?))).collect::<Option<_>>()?;
                Body::Join { session, rebalance, member, protocol_type, protocols }
            }
            SYNC_GROUP => {
                let (generation, member) = (r.i32()?, r.string()?);
                if version >= 3 {
                    r.string_in(false)?;
                }
                let assignments =
                    (0..r.i32()?.max(0)).map(|_| Some((r.string()?, r.bytes()?))).collect::<Option<_>>()?;
                Body::Sync { generation, member, assignments }
            }
            HEARTBEAT => Body::Heartbeat { generation: r.i32()?, member: r.string()? },
            LEAVE_GROUP if version >= 3 => {
                let members = (0..r.i32()?.max(0)).map(|_| Some((r.string()?, r.string_in(false)?)));
                Body::Leave { members: members.collect::<Option<_>>()? }
            }
            LEAVE_GROUP => Body::Leave { members: vec![(r.string()?, None)] },
            OFFSET_COMMIT => {
                let (generation, member) = (r.i32()?, r.string()?);
                if version >= 7 {
                    r.string_in(false)?; // group.instance.id
                }
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
                Body::Commit { generation, member, topics }
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
            Body::Join { .. } => JOIN_GROUP,
            Body::Sync { .. } => SYNC_GROUP,
            Body::Heartbeat { .. } => HEARTBEAT,
            Body::Leave { .. } => LEAVE_GROUP,
            Body::Commit { .. } => OFFSET_COMMIT,
            Body::Fetch { .. } => OFFSET_FETCH,
            Body::Describe { .. } => DESCRIBE_GROUPS,
            Body::List => LIST_GROUPS,
        }
    }

    /// A response frame's start: correlation id, then the throttle time
    /// where this version has one.
    fn response(&self) -> Vec<u8> {
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

    /// The answer that is only an error code (Heartbeat, LeaveGroup with
    /// no members listed, and SyncGroup with an empty assignment).
    fn error(&self, code: i16) -> Vec<u8> {
        match &self.body {
            Body::Join { .. } => self.join_response(code, -1, "", "", "", &[]),
            Body::Sync { .. } => self.sync_response(code, &[]),
            Body::Leave { .. } => self.leave_response(code, &[]),
            Body::Heartbeat { .. } => {
                let mut out = self.response();
                out.extend_from_slice(&code.to_be_bytes());
                out
            }
            Body::Commit { topics, .. } => {
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
    fn fetch_response(&self, committed: &[(String, i32, Option<Committed>)]) -> Vec<u8> {
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

    fn join_response(
        &self,
        code: i16,
        generation: i32,
        protocol: &str,
        leader: &str,
        member: &str,
        members: &[(&str, &[u8])],
    ) -> Vec<u8> {
        let mut out = self.response();
        out.extend_from_slice(&code.to_be_bytes());
        out.extend_from_slice(&generation.to_be_bytes());
        put_string(&mut out, Some(protocol));
        put_string(&mut out, Some(leader));
        put_string(&mut out, Some(member));
        out.extend_from_slice(&(members.len() as i32).to_be_bytes());
        for (id, metadata) in members {
            put_string(&mut out, Some(id));
            if self.version >= 5 {
                put_string(&mut out, None); // group.instance.id
            }
            put_bytes(&mut out, metadata);
        }
        out
    }

    /// A LeaveGroup answer: from v3 (KIP-345) the error of each member
    /// listed, after the group's; before, one member's error is the
    /// answer's, as Kafka's LeaveGroupResponse lifts it.
    fn leave_response(&self, code: i16, members: &[(&str, Option<&str>, i16)]) -> Vec<u8> {
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

    fn sync_response(&self, code: i16, assignment: &[u8]) -> Vec<u8> {
        let mut out = self.response();
        out.extend_from_slice(&code.to_be_bytes());
        put_bytes(&mut out, assignment);
        out
    }
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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Empty,
    /// Waiting for every member's JoinGroup, until `until` (the rebalance
    /// timeout, or the initial delay of a group that starts from empty,
    /// which waits it out whoever has joined).
    Preparing {
        until: Millis,
        initial: bool,
    },
    /// Join answered; waiting for the leader's SyncGroup.
    Completing,
    Stable,
}

struct Member {
    client_id: String,
    host: String,
    /// When it first joined: the first of the members left leads a new
    /// generation when the old leader is gone.
    order: u64,
    session: Millis,
    rebalance: Millis,
    protocol_type: String,
    protocols: Vec<(String, Vec<u8>)>,
    /// When its session ends unless it is heard from (not while it waits
    /// for a join or sync answer, as in Kafka).
    expires: Millis,
    join: Option<(ReplyTo, Request)>,
    sync: Option<(ReplyTo, Request)>,
    assignment: Vec<u8>,
}

#[derive(Default)]
struct Group {
    state: State,
    generation: i32,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, until when they may join.
    pending: BTreeMap<String, Millis>,
    /// How many members have joined so far (each one's `order`).
    joins: u64,
    /// Committed offsets, by topic and partition.
    offsets: BTreeMap<(String, i32), Committed>,
    /// The protocol (assignor) chosen in the last join.
    protocol: Option<String>,
}

impl Group {
    /// Its members' protocol type ("consumer"), as Describe- and ListGroups
    /// name it; empty while it has none.
    fn protocol_type(&self) -> &str {
        self.members.values().next().map_or("", |m| m.protocol_type.as_str())
    }

    fn remove(&mut self, id: &str, out: &mut Vec<Reply>) {
        if let Some(m) = self.members.remove(id) {
            for (to, req) in m.join.into_iter().chain(m.sync) {
                out.push(Reply { to, frame: req.error(UNKNOWN_MEMBER_ID) });
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
    }

    /// The last member is gone: a new, empty generation.
    fn empty(&mut self) {
        self.state = State::Empty;
        self.generation += 1;
    }

    /// Members left (or were dropped): the others rejoin, or the group is
    /// empty.
    fn after_leaving(&mut self, now: Millis, initial_delay: Millis, out: &mut Vec<Reply>) {
        if self.members.is_empty() {
            self.empty();
        } else {
            self.prepare(now, initial_delay, out);
            self.try_complete_join(now, false, out);
        }
    }

    /// Starts a rebalance (or keeps the one going): members waiting for a
    /// sync are told to rejoin.
    fn prepare(&mut self, now: Millis, initial_delay: Millis, out: &mut Vec<Reply>) {
        match self.state {
            State::Preparing { .. } => return,
            State::Empty => {
                self.state = State::Preparing { until: now + initial_delay, initial: initial_delay > 0 };
                return;
            }
            State::Completing | State::Stable => {}
        }
        for m in self.members.values_mut() {
            if let Some((to, req)) = m.sync.take() {
                out.push(Reply { to, frame: req.error(REBALANCE_IN_PROGRESS) });
            }
        }
        let timeout = self.members.values().map(|m| m.rebalance).max().unwrap_or(0);
        self.state = State::Preparing { until: now + timeout, initial: false };
    }

    /// Ends the join phase if every member has rejoined (or `timed_out`:
    /// those that did not are dropped).
    fn try_complete_join(&mut self, now: Millis, timed_out: bool, out: &mut Vec<Reply>) {
        let State::Preparing { initial, .. } = self.state else { return };
        if initial && !timed_out {
            return;
        }
        let all_in = self.members.values().all(|m| m.join.is_some()) && self.pending.is_empty();
        if !all_in && !timed_out {
            return;
        }
        let late: Vec<String> =
            self.members.iter().filter(|(_, m)| m.join.is_none()).map(|(id, _)| id.clone()).collect();
        for id in late {
            self.remove(&id, out);
        }
        self.pending.clear();
        if self.members.is_empty() {
            self.empty();
            return;
        }
        self.generation += 1;
        let mut in_order: Vec<(&String, &Member)> = self.members.iter().collect();
        in_order.sort_by_key(|(_, m)| m.order);
        let first = in_order[0].0;
        let leader = self.leader.clone().filter(|l| self.members.contains_key(l)).unwrap_or_else(|| first.clone());
        // The leader's first protocol that every member supports.
        let supported = |name: &str| self.members.values().all(|m| m.protocols.iter().any(|(p, _)| p == name));
        let protocol = self.members[&leader].protocols.iter().map(|(p, _)| p.clone()).find(|p| supported(p));
        let Some(protocol) = protocol else {
            for m in self.members.values_mut() {
                if let Some((to, req)) = m.join.take() {
                    out.push(Reply { to, frame: req.error(INCONSISTENT_GROUP_PROTOCOL) });
                }
            }
            self.members.clear();
            self.state = State::Empty;
            return;
        };
        let metadata: Vec<(String, Vec<u8>)> = in_order
            .iter()
            .map(|(id, m)| {
                let meta = m.protocols.iter().find(|(p, _)| *p == protocol).map(|(_, d)| d.clone()).unwrap_or_default();
                (id.to_string(), meta)
            })
            .collect();
        self.leader = Some(leader.clone());
        self.protocol = Some(protocol.clone());
        let listed: Vec<(&str, &[u8])> = metadata.iter().map(|(id, d)| (id.as_str(), d.as_slice())).collect();
        for (id, m) in self.members.iter_mut() {
            let (to, req) = m.join.take().expect("everyone joined");
            let members = if *id == leader { &listed[..] } else { &[] };
            out.push(Reply { to, frame: req.join_response(NONE, self.generation, &protocol, &leader, id, members) });
            m.expires = now + m.session;
            m.assignment.clear();
        }
        self.state = State::Completing;
    }

    /// Answers the syncs once the leader's assignments are in.
    fn try_complete_sync(&mut self, leader_synced: bool, out: &mut Vec<Reply>) {
        if self.state == State::Completing && leader_synced {
            self.state = State::Stable;
        }
        if self.state != State::Stable {
            return;
        }
        for m in self.members.values_mut() {
            if let Some((to, req)) = m.sync.take() {
                out.push(Reply { to, frame: req.sync_response(NONE, &m.assignment) });
            }
        }
    }

    fn next_deadline(&self) -> Option<Millis> {
        let preparing = match self.state {
            State::Preparing { until, .. } => Some(until),
            _ => None,
        };
        let sessions = self.members.values().filter(|m| m.join.is_none() && m.sync.is_none()).map(|m| m.expires);
        sessions.chain(self.pending.values().copied()).chain(preparing).min()
    }
}

/// Every group's state.
pub struct Coordinator {
    groups: BTreeMap<String, Group>,
    initial_delay: Millis,
    next_member: u64,
}

impl Coordinator {
    /// `initial_delay` is Kafka's group.initial.rebalance.delay.ms.
    pub fn new(initial_delay: Millis) -> Coordinator {
        Coordinator { groups: BTreeMap::new(), initial_delay, next_member: 1 }
    }

    /// Takes a request that `to` waits on; returns the responses that are
    /// due now (to it, and to others whose requests it completed).
    pub fn handle(&mut self, to: ReplyTo, req: Request, now: Millis) -> Vec<Reply> {
        let mut out = self.tick(now);
        let delay = self.initial_delay;
        let known = self.groups.contains_key(&req.group);
        match (&req.body, known) {
            (Body::Fetch { topics }, _) => {
                // Looking creates nothing.
                let offsets = self.groups.get(&req.group).map(|g| &g.offsets);
                let committed: Vec<(String, i32, Option<Committed>)> = match topics {
                    Some(topics) => topics
                        .iter()
                        .flat_map(|(t, parts)| parts.iter().map(move |p| (t.clone(), *p)))
                        .map(|(t, p)| {
                            let c = offsets.and_then(|o| o.get(&(t.clone(), p))).cloned();
                            (t, p, c)
                        })
                        .collect(),
                    None => offsets.into_iter().flatten().map(|((t, p), c)| (t.clone(), *p, Some(c.clone()))).collect(),
                };
                out.push(Reply { to, frame: req.fetch_response(&committed) });
                return out;
            }
            (Body::Describe { groups }, _) => {
                out.push(Reply { to, frame: self.describe(&req, groups) });
                return out;
            }
            (Body::List, _) => {
                out.push(Reply { to, frame: self.list(&req) });
                return out;
            }
            (Body::Leave { members }, false) => {
                // Nobody is in a group Kafka has never heard of; leaving creates none.
                let unknown: Vec<_> =
                    members.iter().map(|(id, i)| (id.as_str(), i.as_deref(), UNKNOWN_MEMBER_ID)).collect();
                out.push(Reply { to, frame: req.leave_response(NONE, &unknown) });
                return out;
            }
            (Body::Commit { generation, member, .. }, false) if *generation >= 0 || !member.is_empty() => {
                // A member of a group Kafka has never heard of is stale.
                out.push(Reply { to, frame: req.error(ILLEGAL_GENERATION) });
                return out;
            }
            _ => {}
        }
        let group = self.groups.entry(req.group.clone()).or_default();
        match &req.body {
            Body::Join { session, rebalance, member, protocol_type, protocols } => {
                let id = if member.is_empty() {
                    let id = format!("{}-{}", req.client_id, self.next_member);
                    self.next_member += 1;
                    if req.version >= 4 {
                        group.pending.insert(id.clone(), now + session);
                        out.push(Reply { to, frame: req.join_response(MEMBER_ID_REQUIRED, -1, "", "", &id, &[]) });
                        return out;
                    }
                    id
                } else {
                    member.clone()
                };
                let known = group.members.contains_key(&id);
                if !known && group.pending.remove(&id).is_none() && !member.is_empty() {
                    out.push(Reply { to, frame: req.error(UNKNOWN_MEMBER_ID) });
                    return out;
                }
                let consistent = group.members.values().all(|m| {
                    m.protocol_type == *protocol_type
                        && m.protocols.iter().any(|(p, _)| protocols.iter().any(|(q, _)| p == q))
                });
                if protocols.is_empty() || !consistent {
                    out.push(Reply { to, frame: req.error(INCONSISTENT_GROUP_PROTOCOL) });
                    return out;
                }
                if !known {
                    group.joins += 1;
                }
                let order = group.joins;
                let m = group.members.entry(id).or_insert_with(|| Member {
                    client_id: req.client_id.clone(),
                    host: req.host.clone(),
                    order,
                    session: 0,
                    rebalance: 0,
                    protocol_type: protocol_type.clone(),
                    protocols: vec![],
                    expires: 0,
                    join: None,
                    sync: None,
                    assignment: vec![],
                });
                m.session = *session;
                m.rebalance = *rebalance;
                m.protocols = protocols.clone();
                m.expires = now + session;
                if let Some((old, old_req)) = m.join.replace((to, req.clone())) {
                    out.push(Reply { to: old, frame: old_req.error(REBALANCE_IN_PROGRESS) });
                }
                if let Some((old, old_req)) = m.sync.take() {
                    out.push(Reply { to: old, frame: old_req.error(REBALANCE_IN_PROGRESS) });
                }
                group.prepare(now, delay, &mut out);
                group.try_complete_join(now, false, &mut out);
            }
            Body::Sync { generation, member, assignments } => {
                let code = match (group.state, group.members.get(member)) {
                    (_, None) => UNKNOWN_MEMBER_ID,
                    (State::Preparing { .. }, _) => REBALANCE_IN_PROGRESS,
                    _ if *generation != group.generation => ILLEGAL_GENERATION,
                    _ => NONE,
                };
                if code != NONE {
                    out.push(Reply { to, frame: req.error(code) });
                    return out;
                }
                let is_leader = group.leader.as_deref() == Some(member) && group.state == State::Completing;
                if is_leader {
                    for (id, assignment) in assignments {
                        if let Some(m) = group.members.get_mut(id) {
                            m.assignment = assignment.clone();
                        }
                    }
                }
                let m = group.members.get_mut(member).expect("checked");
                m.expires = now + m.session;
                if let Some((old, old_req)) = m.sync.replace((to, req.clone())) {
                    out.push(Reply { to: old, frame: old_req.error(REBALANCE_IN_PROGRESS) });
                }
                group.try_complete_sync(is_leader, &mut out);
            }
            Body::Heartbeat { generation, member } => {
                let code = match (group.state, group.members.get(member)) {
                    (_, None) | (State::Empty, _) => UNKNOWN_MEMBER_ID,
                    (State::Preparing { .. }, _) => REBALANCE_IN_PROGRESS,
                    _ if *generation != group.generation => ILLEGAL_GENERATION,
                    _ => NONE,
                };
                if let Some(m) = group.members.get_mut(member) {
                    m.expires = now + m.session;
                }
                out.push(Reply { to, frame: req.error(code) });
            }
            Body::Commit { generation, member, topics } => {
                // As Kafka 3.9 validates a commit (GroupCoordinator
                // .validateOffsetCommit, then doCommitOffsets).
                let managed = *generation >= 0 || !member.is_empty();
                let code = match (managed, group.members.get_mut(member)) {
                    (true, None) => UNKNOWN_MEMBER_ID,
                    (true, Some(_)) if *generation != group.generation => ILLEGAL_GENERATION,
                    (true, Some(_)) if group.state == State::Completing => REBALANCE_IN_PROGRESS,
                    (true, Some(m)) => {
                        m.expires = now + m.session;
                        NONE
                    }
                    // Outside group management (a new group, created by
                    // this commit, or an empty one): only while nobody is in it.
                    (false, _) if group.state != State::Empty => UNKNOWN_MEMBER_ID,
                    (false, _) => NONE,
                };
                if code == NONE {
                    for (topic, partitions) in topics {
                        for (partition, committed) in partitions {
                            group.offsets.insert((topic.clone(), *partition), committed.clone());
                        }
                    }
                }
                out.push(Reply { to, frame: req.error(code) });
            }
            Body::Fetch { .. } | Body::Describe { .. } | Body::List => {} // answered above
            Body::Leave { members } => {
                // As Kafka's GroupCoordinator.handleLeaveGroup: each member
                // known leaves, each other one gets UNKNOWN_MEMBER_ID (a
                // static member's instance id is not looked up here).
                let mut left = false;
                let results: Vec<(&str, Option<&str>, i16)> = members
                    .iter()
                    .map(|(id, instance)| {
                        let code = if group.members.contains_key(id) {
                            group.remove(id, &mut out);
                            left = true;
                            NONE
                        } else {
                            UNKNOWN_MEMBER_ID
                        };
                        (id.as_str(), instance.as_deref(), code)
                    })
                    .collect();
                if left {
                    group.after_leaving(now, delay, &mut out);
                }
                out.push(Reply { to, frame: req.leave_response(NONE, &results) });
            }
        }
        out
    }

    /// Carries out what is due by `now`: joins whose time is up, sessions
    /// and pending member ids that ran out.
    pub fn tick(&mut self, now: Millis) -> Vec<Reply> {
        let mut out = Vec::new();
        let delay = self.initial_delay;
        for group in self.groups.values_mut() {
            group.pending.retain(|_, until| *until > now);
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| m.join.is_none() && m.sync.is_none() && m.expires <= now)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &expired {
                group.remove(id, &mut out);
            }
            if !expired.is_empty() {
                group.after_leaving(now, delay, &mut out);
            }
            if let State::Preparing { until, .. } = group.state {
                group.try_complete_join(now, until <= now, &mut out);
            }
        }
        out
    }

    /// A DescribeGroups answer, as Kafka's GroupMetadata.summary gives it:
    /// members with their protocol metadata and assignment only while the
    /// group is stable; "Dead" for a group never heard of.
    fn describe(&self, req: &Request, ids: &[String]) -> Vec<u8> {
        let mut out = req.response();
        out.extend_from_slice(&(ids.len() as i32).to_be_bytes());
        for id in ids {
            let group = self.groups.get(id);
            let state = match group.map(|g| g.state) {
                None => "Dead",
                Some(State::Empty) => "Empty",
                Some(State::Preparing { .. }) => "PreparingRebalance",
                Some(State::Completing) => "CompletingRebalance",
                Some(State::Stable) => "Stable",
            };
            let stable = state == "Stable";
            let members: Vec<(&String, &Member)> = group.map(|g| g.members.iter().collect()).unwrap_or_default();
            let protocol = group.and_then(|g| g.protocol.as_deref()).filter(|_| stable).unwrap_or("");
            out.extend_from_slice(&NONE.to_be_bytes());
            put_string(&mut out, Some(id));
            put_string(&mut out, Some(state));
            put_string(&mut out, Some(group.map_or("", Group::protocol_type)));
            put_string(&mut out, Some(protocol));
            out.extend_from_slice(&(members.len() as i32).to_be_bytes());
            for (member, m) in members {
                put_string(&mut out, Some(member));
                if req.version >= 4 {
                    put_string(&mut out, None); // group.instance.id
                }
                put_string(&mut out, Some(&m.client_id));
                put_string(&mut out, Some(&m.host));
                let metadata = m.protocols.iter().find(|(p, _)| stable && p == protocol).map_or(&[][..], |(_, d)| d);
                let assignment = if stable { &m.assignment[..] } else { &[] };
                put_bytes(&mut out, metadata);
                put_bytes(&mut out, assignment);
            }
            if req.version >= 3 {
                out.extend_from_slice(&i32::MIN.to_be_bytes()); // operations not asked for
            }
        }
        out
    }

    /// A ListGroups answer: every group the coordinator knows.
    fn list(&self, req: &Request) -> Vec<u8> {
        let mut out = req.response();
        out.extend_from_slice(&NONE.to_be_bytes());
        out.extend_from_slice(&(self.groups.len() as i32).to_be_bytes());
        for (id, g) in &self.groups {
            put_string(&mut out, Some(id));
            put_string(&mut out, Some(g.protocol_type()));
        }
        out
    }

    /// When `tick` next has something to do.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.groups.values().filter_map(Group::next_deadline).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROTO: &str = "cooperative-sticky";
    /// The generation `stable_pair` leaves its group in.
    const G: i32 = 2;

    fn req(version: i16, body: Body) -> Request {
        Request { version, correlation: 7, client_id: "c".into(), host: "/h".into(), group: "g".into(), body }
    }

    fn join(member: &str) -> Request {
        req(
            5,
            Body::Join {
                session: 3000,
                rebalance: 10_000,
                member: member.into(),
                protocol_type: "consumer".into(),
                protocols: vec![(PROTO.into(), member.as_bytes().to_vec())],
            },
        )
    }

    fn sync(generation: i32, member: &str, assignments: &[(&str, &[u8])]) -> Request {
        let assignments = assignments.iter().map(|(m, a)| (m.to_string(), a.to_vec())).collect();
        req(3, Body::Sync { generation, member: member.into(), assignments })
    }

    fn heartbeat(generation: i32, member: &str) -> Request {
        req(3, Body::Heartbeat { generation, member: member.into() })
    }

    fn leave(member: &str) -> Request {
        req(1, Body::Leave { members: vec![(member.into(), None)] })
    }

    /// The error code of a response frame (after correlation id and
    /// throttle time).
    fn code(frame: &[u8]) -> i16 {
        i16::from_be_bytes([frame[8], frame[9]])
    }

    /// A JoinGroup v5 response: (error, generation, leader, member, how
    /// many members are listed).
    fn joined(frame: &[u8]) -> (i16, i32, String, String, i32) {
        let mut r = Reader { buf: frame, at: 8 };
        let (code, generation) = (r.i16().unwrap(), r.i32().unwrap());
        r.string().unwrap();
        let (leader, member) = (r.string().unwrap(), r.string().unwrap());
        (code, generation, leader, member, r.i32().unwrap())
    }

    fn reply_to(out: &[Reply], to: ReplyTo) -> &[u8] {
        &out.iter().find(|r| r.to == to).unwrap_or_else(|| panic!("no reply to {to} in {out:?}")).frame
    }

    /// A group with two members (ids given by the coordinator), stable in
    /// generation 2 at time 0: m1 joined alone first (no initial delay),
    /// then m2, which made m1 rejoin.
    fn stable_pair(c: &mut Coordinator) -> (String, String) {
        let id = |c: &mut Coordinator, to| joined(&c.handle(to, join(""), 0)[0].frame).3;
        let m1 = id(c, 1);
        assert_eq!(joined(&c.handle(2, join(&m1), 0)[0].frame), (0, 1, m1.clone(), m1.clone(), 1), "alone at once");
        assert_eq!(c.handle(3, sync(1, &m1, &[(&m1, b"p0")]), 0)[0].frame[10..], [0, 0, 0, 2, b'p', b'0']);
        let m2 = id(c, 4);
        assert!(c.handle(5, join(&m2), 0).is_empty(), "the join waits for m1");
        assert_eq!(code(&c.handle(6, heartbeat(1, &m1), 0)[0].frame), REBALANCE_IN_PROGRESS);
        let out = c.handle(7, join(&m1), 0);
        assert_eq!(joined(reply_to(&out, 7)), (0, 2, m1.clone(), m1.clone(), 2), "m1 still leads, with both");
        assert_eq!(joined(reply_to(&out, 5)), (0, 2, m1.clone(), m2.clone(), 0));
        assert!(c.handle(8, sync(2, &m2, &[]), 0).is_empty(), "a follower waits for the leader's sync");
        let out = c.handle(9, sync(2, &m1, &[(&m1, b"p0"), (&m2, b"p1")]), 0);
        assert_eq!(reply_to(&out, 9)[10..], [0, 0, 0, 2, b'p', b'0']);
        assert_eq!(reply_to(&out, 8)[10..], [0, 0, 0, 2, b'p', b'1']);
        (m1, m2)
    }

    #[test]
    fn a_first_join_gets_member_id_required_and_a_unique_id() {
        let mut c = Coordinator::new(0);
        let out = c.handle(1, join(""), 0);
        let (code, generation, _, id, _) = joined(&out[0].frame);
        assert_eq!((code, generation), (MEMBER_ID_REQUIRED, -1));
        assert_ne!(id, joined(&c.handle(2, join(""), 0)[0].frame).3);
        assert_eq!(joined(&c.handle(3, join("stranger"), 0)[0].frame).0, UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn a_join_ends_as_soon_as_every_member_has_rejoined() {
        let mut c = Coordinator::new(0);
        let (m1, m2) = stable_pair(&mut c);
        assert_eq!(code(&c.handle(7, heartbeat(G, &m2), 100)[0].frame), NONE);
        // m1 rejoins (as after a revoke): m2 hears of it at its next heartbeat.
        assert!(c.handle(8, join(&m1), 200).is_empty());
        assert_eq!(code(&c.handle(9, heartbeat(G, &m2), 300)[0].frame), REBALANCE_IN_PROGRESS);
        let out = c.handle(10, join(&m2), 310);
        assert_eq!(joined(reply_to(&out, 8)).1, 3, "no fixed wait: the join ends with the last member's");
        assert_eq!(joined(reply_to(&out, 10)).1, 3);
        assert_eq!(code(&c.handle(11, heartbeat(G, &m2), 320)[0].frame), ILLEGAL_GENERATION);
        assert_eq!(code(&c.handle(12, heartbeat(G + 1, &m2), 320)[0].frame), NONE, "completing: heartbeats are fine");
    }

    #[test]
    fn a_member_that_does_not_rejoin_is_dropped_when_the_rebalance_timeout_ends() {
        let mut c = Coordinator::new(0);
        let (m1, m2) = stable_pair(&mut c);
        assert!(c.handle(7, join(&m1), 1000).is_empty());
        // m2 keeps heartbeating but never rejoins: it holds the join up
        // until the rebalance timeout (10 s), as a barrier on Kafka does.
        for t in (1500..11_000).step_by(1000) {
            assert_eq!(code(&c.handle(8, heartbeat(G, &m2), t)[0].frame), REBALANCE_IN_PROGRESS);
        }
        assert_eq!(c.next_deadline(), Some(11_000));
        assert!(c.tick(10_999).is_empty());
        let out = c.tick(11_000);
        assert_eq!(joined(reply_to(&out, 7)), (0, 3, m1.clone(), m1.clone(), 1), "m1 alone in generation 3");
        assert_eq!(code(&c.handle(9, heartbeat(G + 1, &m2), 11_001)[0].frame), UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn a_session_ends_at_exactly_its_last_heartbeat_plus_the_timeout() {
        let mut c = Coordinator::new(0);
        let (m1, m2) = stable_pair(&mut c);
        c.handle(7, heartbeat(G, &m1), 2000);
        c.handle(8, heartbeat(G, &m2), 2500);
        assert_eq!(c.next_deadline(), Some(5000), "m1's session: 2000 + 3000");
        assert!(c.tick(4999).is_empty());
        c.tick(5000);
        assert_eq!(code(&c.handle(9, heartbeat(G, &m1), 5001)[0].frame), UNKNOWN_MEMBER_ID);
        assert_eq!(code(&c.handle(10, heartbeat(G, &m2), 5001)[0].frame), REBALANCE_IN_PROGRESS);
        let out = c.handle(11, join(&m2), 5002);
        assert_eq!(joined(reply_to(&out, 11)), (0, 3, m2.clone(), m2.clone(), 1), "m2 leads at once");
    }

    #[test]
    fn a_leave_starts_a_rebalance_that_ends_with_the_others_rejoining() {
        let mut c = Coordinator::new(0);
        let (m1, m2) = stable_pair(&mut c);
        assert_eq!(code(&c.handle(7, leave(&m1), 100)[0].frame), NONE);
        assert_eq!(code(&c.handle(8, heartbeat(G, &m2), 200)[0].frame), REBALANCE_IN_PROGRESS);
        let out = c.handle(9, join(&m2), 210);
        assert_eq!(joined(reply_to(&out, 9)).0, NONE);
        assert_eq!(code(&c.handle(10, leave(&m1), 220)[0].frame), UNKNOWN_MEMBER_ID);
        // The last member leaving empties the group.
        c.handle(11, leave(&m2), 230);
        assert_eq!(code(&c.handle(12, heartbeat(G + 1, &m2), 240)[0].frame), UNKNOWN_MEMBER_ID);
    }

    /// A LeaveGroup v3 answer: (group error, [(member, instance id, error)]).
    fn left(frame: &[u8]) -> (i16, Vec<(String, Option<String>, i16)>) {
        let mut r = Reader { buf: frame, at: 8 };
        let code = r.i16().unwrap();
        let members =
            (0..r.i32().unwrap()).map(|_| (r.string().unwrap(), r.string_in(false).unwrap(), r.i16().unwrap()));
        let members = members.collect();
        assert!(r.rest().is_empty(), "nothing after the members");
        (code, members)
    }

    #[test]
    fn leave_group_v3_answers_each_member_listed() {
        let mut c = Coordinator::new(0);
        let (m1, m2) = stable_pair(&mut c);
        let leave3 =
            |members: &[&str]| req(3, Body::Leave { members: members.iter().map(|m| (m.to_string(), None)).collect() });
        // One member leaving, as kafkajs and kafka-python do: the others
        // hear of the rebalance at their next heartbeat.
        let out = c.handle(7, leave3(&[&m1]), 100);
        assert_eq!(left(&out[0].frame), (NONE, vec![(m1.clone(), None, NONE)]));
        assert_eq!(code(&c.handle(8, heartbeat(G, &m2), 200)[0].frame), REBALANCE_IN_PROGRESS);
        assert_eq!(joined(reply_to(&c.handle(9, join(&m2), 210), 9)).0, NONE);
        // An unknown member among known ones: its own error, the group's is
        // NONE, and the known one still leaves (the group is then empty).
        let out = c.handle(10, leave3(&["stranger", &m2]), 300);
        let want = vec![("stranger".into(), None, UNKNOWN_MEMBER_ID), (m2.clone(), None, NONE)];
        assert_eq!(left(&out[0].frame), (NONE, want));
        assert_eq!(described(&mut c, 300).0, "Empty");
        // The instance id is echoed; static members are not looked up by it.
        let static_leave = req(3, Body::Leave { members: vec![("".into(), Some("i-1".into()))] });
        let out = c.handle(11, static_leave, 400);
        assert_eq!(left(&out[0].frame), (NONE, vec![("".into(), Some("i-1".into()), UNKNOWN_MEMBER_ID)]));
        // Before v3 the one member's error is the answer's.
        assert_eq!(c.handle(12, leave(&m1), 500)[0].frame[8..], UNKNOWN_MEMBER_ID.to_be_bytes());
    }

    #[test]
    fn leaving_a_group_never_heard_of_creates_none() {
        let mut c = Coordinator::new(0);
        let out = c.handle(1, req(3, Body::Leave { members: vec![("m".into(), None)] }), 0);
        assert_eq!(left(&out[0].frame), (NONE, vec![("m".into(), None, UNKNOWN_MEMBER_ID)]));
        assert_eq!(c.handle(2, leave("m"), 0)[0].frame[8..], UNKNOWN_MEMBER_ID.to_be_bytes());
        assert!(c.groups.is_empty());
    }

    #[test]
    fn a_group_that_starts_empty_waits_the_initial_delay_whoever_joined() {
        let mut c = Coordinator::new(3000);
        let m1 = joined(&c.handle(1, join(""), 0)[0].frame).3;
        assert!(c.handle(2, join(&m1), 10).is_empty());
        assert_eq!(c.next_deadline(), Some(3010));
        assert!(c.tick(3009).is_empty());
        assert_eq!(joined(reply_to(&c.tick(3010), 2)).1, 1);
    }

    #[test]
    fn syncs_in_another_generation_or_during_a_join_are_refused() {
        let mut c = Coordinator::new(0);
        let (m1, m2) = stable_pair(&mut c);
        assert_eq!(code(&c.handle(7, sync(G - 1, &m2, &[]), 10)[0].frame), ILLEGAL_GENERATION);
        assert_eq!(reply_to(&c.handle(8, sync(G, &m2, &[]), 10), 8)[10..], [0, 0, 0, 2, b'p', b'1'], "stable: its own");
        c.handle(9, join(&m1), 20);
        assert_eq!(code(&c.handle(10, sync(G, &m2, &[]), 30)[0].frame), REBALANCE_IN_PROGRESS);
    }

    #[test]
    fn reads_the_requests_librdkafka_sends_and_leaves_flexible_ones_alone() {
        // JoinGroup v5: group, session, rebalance, member, instance id,
        // protocol type, protocols.
        let mut f = vec![0, 11, 0, 5, 0, 0, 0, 42, 0, 1, b'c', 0, 1, b'g'];
        f.extend_from_slice(&3000i32.to_be_bytes());
        f.extend_from_slice(&9000i32.to_be_bytes());
        f.extend_from_slice(&[0, 2, b'm', b'1', 255, 255, 0, 1, b't', 0, 0, 0, 1, 0, 1, b'p', 0, 0, 0, 1, 9]);
        let want = Body::Join {
            session: 3000,
            rebalance: 9000,
            member: "m1".into(),
            protocol_type: "t".into(),
            protocols: vec![("p".into(), vec![9])],
        };
        assert_eq!(
            Request::parse(&f),
            Some(Request {
                version: 5,
                correlation: 42,
                client_id: "c".into(),
                host: String::new(),
                group: "g".into(),
                body: want
            })
        );
        // Heartbeat v3 and LeaveGroup v1.
        let hb = [0, 12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, b'g', 0, 0, 0, 4, 0, 1, b'm', 255, 255];
        assert_eq!(Request::parse(&hb).unwrap().body, Body::Heartbeat { generation: 4, member: "m".into() });
        let lv = [0, 13, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, b'g', 0, 1, b'm'];
        assert_eq!(Request::parse(&lv).unwrap().body, Body::Leave { members: vec![("m".into(), None)] });
        // LeaveGroup v3 (KIP-345): a list of members, each with an instance id.
        let lv3 = [0, 13, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, b'g', 0, 0, 0, 2, 0, 1, b'm', 255, 255, 0, 1, b'n', 0, 1, b'i'];
        let want = Body::Leave { members: vec![("m".into(), None), ("n".into(), Some("i".into()))] };
        assert_eq!(Request::parse(&lv3).unwrap().body, want);
        // LeaveGroup v4 is flexible: capped away, and not read.
        let mut lv4 = lv3;
        lv4[3] = 4;
        assert_eq!(Request::parse(&lv4), None);
        // JoinGroup v6 is flexible: capped away, and not read.
        let mut v6 = f.clone();
        v6[3] = 6;
        assert_eq!(Request::parse(&v6), None);
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

    fn commit(generation: i32, member: &str, offset: i64) -> Request {
        let topics = vec![("t".into(), vec![(0, Committed { offset, leader_epoch: -1, metadata: Some("m".into()) })])];
        req(7, Body::Commit { generation, member: member.into(), topics })
    }

    /// The error of a one-partition OffsetCommit v7 answer.
    fn committed(frame: &[u8]) -> i16 {
        let mut r = Reader { buf: frame, at: 8 };
        assert_eq!((r.i32(), r.string(), r.i32(), r.i32()), (Some(1), Some("t".into()), Some(1), Some(0)));
        r.i16().unwrap()
    }

    /// The offset an OffsetFetch v5 answer gives for t/0.
    fn fetched(c: &mut Coordinator, to: ReplyTo, now: Millis) -> i64 {
        let out = c.handle(to, req(5, Body::Fetch { topics: Some(vec![("t".into(), vec![0])]) }), now);
        let mut r = Reader { buf: &out[0].frame, at: 8 };
        assert_eq!((r.i32(), r.string(), r.i32(), r.i32()), (Some(1), Some("t".into()), Some(1), Some(0)));
        r.i64().unwrap()
    }

    #[test]
    fn a_commit_is_kept_only_from_a_member_of_the_current_generation() {
        let mut c = Coordinator::new(0);
        assert_eq!(fetched(&mut c, 1, 0), -1, "nothing committed");
        assert!(c.groups.is_empty(), "looking creates no group");
        assert_eq!(committed(&c.handle(2, commit(1, "m", 5), 0)[0].frame), ILLEGAL_GENERATION, "an unknown group");
        let (m1, m2) = stable_pair(&mut c);
        assert_eq!(committed(&c.handle(3, commit(G, &m1, 10), 0)[0].frame), NONE);
        assert_eq!(fetched(&mut c, 4, 0), 10);
        assert_eq!(committed(&c.handle(5, commit(G - 1, &m2, 11), 0)[0].frame), ILLEGAL_GENERATION);
        assert_eq!(committed(&c.handle(6, commit(G, "stranger", 12), 0)[0].frame), UNKNOWN_MEMBER_ID);
        assert_eq!(committed(&c.handle(7, commit(-1, "", 13), 0)[0].frame), UNKNOWN_MEMBER_ID, "the group is managed");
        assert_eq!(fetched(&mut c, 8, 0), 10, "none of those was kept");
        // While the join is answered but not yet synced: rebalancing.
        c.handle(9, join(&m1), 100);
        let out = c.handle(10, join(&m2), 100);
        assert_eq!(joined(reply_to(&out, 10)).1, G + 1);
        assert_eq!(committed(&c.handle(11, commit(G + 1, &m2, 14), 100)[0].frame), REBALANCE_IN_PROGRESS);
        // A commit counts as a heartbeat: m2 outlives its last heartbeat.
        c.handle(12, sync(G + 1, &m1, &[]), 200);
        c.handle(13, sync(G + 1, &m2, &[]), 200);
        assert_eq!(committed(&c.handle(14, commit(G + 1, &m2, 15), 2900)[0].frame), NONE);
        c.handle(15, heartbeat(G + 1, &m1), 2900);
        assert!(c.tick(3200).is_empty(), "m2's session runs until 5900");
        assert_eq!(fetched(&mut c, 16, 3200), 15);
        // Outside group management, once the group is empty.
        c.handle(17, leave(&m1), 3300);
        c.handle(18, leave(&m2), 3300);
        assert_eq!(committed(&c.handle(19, commit(-1, "", 16), 3400)[0].frame), NONE);
        assert_eq!(fetched(&mut c, 20, 3400), 16);
    }

    #[test]
    fn reads_offset_commit_and_fetch_requests() {
        // OffsetCommit v7: group g, generation 3, member m, no instance id,
        // one topic t with partition 0 at offset 9, epoch 2, metadata "x".
        let mut f = vec![0, 8, 0, 7, 0, 0, 0, 1, 0, 1, b'c', 0, 1, b'g', 0, 0, 0, 3, 0, 1, b'm', 255, 255];
        f.extend_from_slice(&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0]);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 1, b'x']);
        let want = Body::Commit {
            generation: 3,
            member: "m".into(),
            topics: vec![("t".into(), vec![(0, Committed { offset: 9, leader_epoch: 2, metadata: Some("x".into()) })])],
        };
        assert_eq!(Request::parse(&f).unwrap().body, want);
        // OffsetFetch v5: all topics (null), and t/0, 1.
        let all = [0, 9, 0, 5, 0, 0, 0, 1, 0, 1, b'c', 0, 1, b'g', 255, 255, 255, 255];
        assert_eq!(Request::parse(&all).unwrap().body, Body::Fetch { topics: None });
        let mut some = vec![0, 9, 0, 5, 0, 0, 0, 1, 0, 1, b'c', 0, 1, b'g', 0, 0, 0, 1, 0, 1, b't'];
        some.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(Request::parse(&some).unwrap().body, Body::Fetch { topics: Some(vec![("t".into(), vec![0, 1])]) });
        // OffsetCommit v1 lays its fields out otherwise: not read.
        let mut v1 = f.clone();
        v1[3] = 1;
        assert_eq!(Request::parse(&v1), None);
    }

    /// (state, protocol, members' assignments) of group g in a DescribeGroups v4 answer.
    fn described(c: &mut Coordinator, now: Millis) -> (String, String, Vec<Vec<u8>>) {
        let out = c.handle(99, req(4, Body::Describe { groups: vec!["g".into()] }), now);
        let mut r = Reader { buf: &out[0].frame, at: 8 };
        assert_eq!((r.i32(), r.i16(), r.string()), (Some(1), Some(NONE), Some("g".into())));
        let (state, _, protocol) = (r.string().unwrap(), r.string(), r.string().unwrap());
        let assignments = (0..r.i32().unwrap())
            .map(|_| {
                let (_, _, client, host, _) = (r.string(), r.string_in(false), r.string(), r.string(), r.bytes());
                assert_eq!((client.as_deref(), host.as_deref()), (Some("c"), Some("/h")));
                r.bytes().unwrap()
            })
            .collect();
        (state, protocol, assignments)
    }

    #[test]
    fn describes_a_group_as_kafka_does_with_assignments_only_while_stable() {
        let mut c = Coordinator::new(0);
        assert_eq!(described(&mut c, 0), ("Dead".into(), "".into(), vec![]), "never heard of");
        let (m1, _) = stable_pair(&mut c);
        assert_eq!(described(&mut c, 0), ("Stable".into(), PROTO.into(), vec![b"p0".to_vec(), b"p1".to_vec()]));
        c.handle(7, join(&m1), 100);
        assert_eq!(described(&mut c, 100), ("PreparingRebalance".into(), "".into(), vec![vec![], vec![]]));
    }
}
