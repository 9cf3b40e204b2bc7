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
//! Static membership (KIP-345, group.instance.id) as Kafka 3.x classic
//! groups have it: a static member gets its member id without
//! MEMBER_ID_REQUIRED; one restarted (no member id, a known instance id)
//! takes its old place under a new member id, in a stable group with no
//! rebalance and its stored assignment; its old id is then answered
//! FENCED_INSTANCE_ID (Heartbeat, SyncGroup, OffsetCommit, LeaveGroup,
//! JoinGroup); a static member that does not rejoin a rebalance stays until
//! its session ends; a LeaveGroup may name it by instance id alone.
//!
//! A known member's JoinGroup is answered as Kafka answers it
//! (GroupMetadataManager.classicGroupJoinExistingMember in 4.0,
//! GroupCoordinator.doCurrentMemberJoinGroup in 3.9). During the join
//! phase it updates the member and joins the rebalance. In a stable group
//! the leader's starts a rebalance, as does a follower's whose protocols
//! (names and metadata bytes, in order) changed; a follower's with its
//! protocols unchanged is answered at once with the current generation
//! (no members listed) and starts none. After the join phase, until the
//! leader's sync, an unchanged one is answered with the current generation
//! (the leader's with the members), and a changed one starts a rebalance.
//! So a follower rejoining unchanged to wake the group is lost unless a
//! rebalance is already under way, as on Kafka.
//!
//! Simplified where neli-run cannot tell: the protocol is the leader's
//! first that all support (Kafka votes; a restarted static member starts a
//! rebalance only if it no longer supports the group's protocol). Offsets
//! are the coordinator's, as on Kafka: a commit is checked against the
//! member and its generation, and kept in memory.
//!
//! This file is the machine ([`Coordinator`]); `task.rs` is the tokio task
//! that runs it (requests and the timer in, replies out), `request.rs` the
//! requests it takes and the frames it answers with.

mod admin;
mod request;
mod task;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::wire::{
    FENCED_INSTANCE_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED, NONE, NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
};
pub use request::{
    cap_api_versions, find_coordinator, Body, Committed, JoinGroup, OffsetCommit, Request, SyncGroup, ADDED,
};
pub use task::{ask, spawn, CoordinatorTx, Message};

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
    /// Its group.instance.id: a static member, whose next incarnation
    /// takes its place (and its assignment) under a new member id.
    instance: Option<String>,
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

    /// The member id a static member's instance id has now.
    fn static_member(&self, instance: &str) -> Option<&String> {
        self.members.iter().find(|(_, m)| m.instance.as_deref() == Some(instance)).map(|(id, _)| id)
    }

    /// Whether `id` (with `instance`, if static) is a member now, as
    /// Kafka's validateCurrentMember: an instance id now held by another
    /// member id is fenced, an instance id not in the group is unknown.
    fn check(&self, id: &str, instance: Option<&str>) -> i16 {
        match instance.map(|i| self.static_member(i)) {
            Some(Some(current)) if current != id => FENCED_INSTANCE_ID,
            Some(None) => UNKNOWN_MEMBER_ID,
            _ if !self.members.contains_key(id) => UNKNOWN_MEMBER_ID,
            _ => NONE,
        }
    }

    /// A static member back under a new member id (Kafka's
    /// replaceStaticMember): the old id's waiting join and sync are
    /// fenced, and it keeps its place, its assignment and its leadership.
    fn replace(&mut self, old: &str, new: &str, out: &mut Vec<Reply>) -> &mut Member {
        let mut m = self.members.remove(old).expect("a member");
        for (to, req) in m.join.take().into_iter().chain(m.sync.take()) {
            out.push(Reply { to, frame: req.error(FENCED_INSTANCE_ID) });
        }
        if self.leader.as_deref() == Some(old) {
            self.leader = Some(new.to_string());
        }
        self.members.entry(new.to_string()).or_insert(m)
    }

    /// A static member back with no member id (restarted) while its
    /// instance id still holds `old`: it takes that place under `new`, as
    /// Kafka's updateStaticMemberAndRebalance does. In a stable group
    /// whose protocol it still supports, that is all: no rebalance, and the
    /// answer names the leader as it was (its old id, if it led) and no
    /// members, so that it syncs as a follower and gets its stored
    /// assignment back. Mid-rebalance it joins the rebalance; after the
    /// join phase (its old id may be in the leader's assignment) it starts
    /// a new one.
    fn rejoin_static(
        &mut self,
        (to, req): (ReplyTo, &Request),
        join: &JoinGroup,
        (old, new): (&str, &str),
        now: Millis,
        out: &mut Vec<Reply>,
    ) {
        let leader_was = self.leader.clone().unwrap_or_default();
        let m = self.replace(old, new, out);
        m.session = join.session;
        m.rebalance = join.rebalance;
        m.protocols = join.protocols.clone();
        m.expires = now + join.session;
        m.join = Some((to, req.clone()));
        let kept =
            self.protocol.clone().filter(|p| self.members.values().all(|m| m.protocols.iter().any(|(q, _)| q == p)));
        match (self.state, kept) {
            (State::Stable, Some(protocol)) => {
                self.members.get_mut(new).expect("replaced").join = None;
                let frame = req.join_response(NONE, self.generation, &protocol, &leader_was, new, &[]);
                out.push(Reply { to, frame });
            }
            (State::Preparing { .. }, _) => self.try_complete_join(now, false, out),
            _ => {
                self.prepare(now, 0, out);
                self.try_complete_join(now, false, out);
            }
        }
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
        self.state = State::Preparing { until: now + self.rebalance_timeout(), initial: false };
    }

    /// How long a join phase waits for the members: the longest of their
    /// rebalance timeouts.
    fn rebalance_timeout(&self) -> Millis {
        self.members.values().map(|m| m.rebalance).max().unwrap_or(0)
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
        // A static member that did not rejoin stays, with its last
        // metadata, until its session ends (Kafka's onCompleteJoin).
        let late: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.join.is_none() && m.instance.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in late {
            self.remove(&id, out);
        }
        self.pending.clear();
        if self.members.is_empty() {
            self.empty();
            return;
        }
        let mut in_order: Vec<(&String, &Member)> = self.members.iter().collect();
        in_order.sort_by_key(|(_, m)| m.order);
        let joined = |id: &String| self.members[id].join.is_some();
        let Some(first) = in_order.iter().map(|(id, _)| *id).find(|id| joined(id)) else {
            // Only static members that have not rejoined: wait on, until
            // they do or their sessions end.
            self.state = State::Preparing { until: now + self.rebalance_timeout(), initial: false };
            return;
        };
        self.generation += 1;
        let leader = self.leader.clone().filter(|l| self.members.contains_key(l) && joined(l)).unwrap_or(first.clone());
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
        let metadata = self.metadata(&protocol);
        self.leader = Some(leader.clone());
        self.protocol = Some(protocol.clone());
        let listed: Vec<_> = metadata.iter().map(|(id, i, d)| (id.as_str(), i.as_deref(), d.as_slice())).collect();
        for (id, m) in self.members.iter_mut() {
            if let Some((to, req)) = m.join.take() {
                let members = if *id == leader { &listed[..] } else { &[] };
                out.push(Reply {
                    to,
                    frame: req.join_response(NONE, self.generation, &protocol, &leader, id, members),
                });
            }
            m.expires = now + m.session;
            m.assignment.clear();
        }
        self.state = State::Completing;
    }

    /// Every member's id, instance id and metadata for `protocol`, in the
    /// order they joined: the list a leader's join answer carries (Kafka's
    /// currentMemberMetadata).
    fn metadata(&self, protocol: &str) -> Vec<(String, Option<String>, Vec<u8>)> {
        let mut in_order: Vec<(&String, &Member)> = self.members.iter().collect();
        in_order.sort_by_key(|(_, m)| m.order);
        in_order
            .iter()
            .map(|(id, m)| {
                let meta = m.protocols.iter().find(|(p, _)| p == protocol).map(|(_, d)| d.clone()).unwrap_or_default();
                (id.to_string(), m.instance.clone(), meta)
            })
            .collect()
    }

    /// Kafka's answer to member `id`'s JoinGroup (with `protocols`) when it
    /// starts no rebalance, None when it does
    /// (GroupMetadataManager.classicGroupJoinExistingMember, 4.0;
    /// GroupCoordinator.doCurrentMemberJoinGroup, 3.9). Only a join with
    /// the member's own protocols (the same names and metadata bytes in the
    /// same order: Kafka's `matches`) is answered so: a follower's in a
    /// stable group, or any member's after the join phase, until the
    /// leader's sync (one that missed its join answer). The answer is the
    /// current generation's, with the members for the leader only. Nothing
    /// about the member changes, not even its session (Kafka counts no join
    /// as a heartbeat). The leader's join in a stable group always
    /// rebalances: that is how it asks for one when what it would assign
    /// has changed but no member's metadata has.
    fn current_join(&self, id: &str, protocols: &[(String, Vec<u8>)], req: &Request) -> Option<Vec<u8>> {
        if self.members.get(id)?.protocols != protocols {
            return None;
        }
        let leads = self.leader.as_deref() == Some(id);
        let protocol = self.protocol.as_deref().unwrap_or_default();
        let metadata = match self.state {
            State::Completing if leads => self.metadata(protocol),
            State::Completing => vec![],
            State::Stable if !leads => vec![],
            _ => return None,
        };
        let listed: Vec<_> = metadata.iter().map(|(id, i, d)| (id.as_str(), i.as_deref(), d.as_slice())).collect();
        let leader = self.leader.as_deref().unwrap_or_default();
        Some(req.join_response(NONE, self.generation, protocol, leader, id, &listed))
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
    /// How long a rebalance a LeaveGroup began holds every join before it
    /// completes with whoever joined (0: none; see `pausing_after_leaves`).
    leave_pause: Millis,
    next_member: u64,
}

impl Coordinator {
    /// `initial_delay` is Kafka's group.initial.rebalance.delay.ms.
    pub fn new(initial_delay: Millis) -> Coordinator {
        Coordinator { groups: BTreeMap::new(), initial_delay, leave_pause: 0, next_member: 1 }
    }

    /// A rebalance begun by a LeaveGroup answers no join for `pause`, then
    /// completes with the members that joined meanwhile, as tansu 0.6 does
    /// (its coordinator sleeps 3 s when a member rejoins a group whose
    /// leader left), and as Kafka does while a slow member has yet to
    /// rejoin: a member that left and came back within it is in the next
    /// generation, and may be handed back what it gave up.
    pub fn pausing_after_leaves(self, pause: Millis) -> Coordinator {
        Coordinator { leave_pause: pause, ..self }
    }

    /// Takes a request that `to` waits on; returns the responses that are
    /// due now (to it, and to others whose requests it completed).
    pub fn handle(&mut self, to: ReplyTo, req: Request, now: Millis) -> Vec<Reply> {
        let mut out = self.tick(now);
        match &req.body {
            Body::Join(join) => self.join(to, &req, join, now, &mut out),
            Body::Sync(sync) => self.sync(to, &req, sync, now, &mut out),
            Body::Heartbeat { generation, member, instance } => {
                let frame = self.heartbeat(*generation, (member, instance.as_deref()), &req, now);
                out.push(Reply { to, frame });
            }
            Body::Leave { members } => self.leave(to, &req, members, now, &mut out),
            Body::Commit(commit) => {
                let frame = self.commit(&req, commit, now);
                out.push(Reply { to, frame });
            }
            // Looking creates nothing.
            Body::Fetch { topics } => out.push(Reply { to, frame: self.fetch(&req, topics.as_deref()) }),
            Body::Describe { groups } => out.push(Reply { to, frame: self.describe(&req, groups) }),
            Body::List => out.push(Reply { to, frame: self.list(&req) }),
        }
        out
    }

    /// A JoinGroup: a first one gets its member id (MEMBER_ID_REQUIRED);
    /// a member's join starts a rebalance, or completes the one going,
    /// unless it changes nothing (a follower's in a stable group, any
    /// member's while completing, with its protocols unchanged), which is
    /// answered at once with the current generation (see `current_join`).
    /// A static member (with an instance id) gets its id at once, and one
    /// back after a restart takes its own place (see `rejoin_static`).
    fn join(&mut self, to: ReplyTo, req: &Request, join: &JoinGroup, now: Millis, out: &mut Vec<Reply>) {
        let JoinGroup { session, rebalance, member, instance, protocol_type, protocols } = join;
        let group = self.groups.entry(req.group.clone()).or_default();
        let id = if member.is_empty() {
            let id = format!("{}-{}", instance.as_ref().unwrap_or(&req.client_id), self.next_member);
            self.next_member += 1;
            if instance.is_none() && req.version >= 4 {
                group.pending.insert(id.clone(), now + session);
                out.push(Reply { to, frame: req.join_response(MEMBER_ID_REQUIRED, -1, "", "", &id, &[]) });
                return;
            }
            id
        } else {
            member.clone()
        };
        let old = instance.as_deref().and_then(|i| group.static_member(i)).cloned();
        if let (true, Some(old)) = (member.is_empty(), old) {
            return group.rejoin_static((to, req), join, (&old, &id), now, out);
        }
        let known = group.members.contains_key(&id);
        if !member.is_empty() && !group.pending.contains_key(&id) {
            let code = group.check(&id, instance.as_deref());
            if code != NONE {
                out.push(Reply { to, frame: req.error(code) });
                return;
            }
        }
        group.pending.remove(&id);
        let consistent = group.members.values().all(|m| {
            m.protocol_type == *protocol_type && m.protocols.iter().any(|(p, _)| protocols.iter().any(|(q, _)| p == q))
        });
        if protocols.is_empty() || !consistent {
            out.push(Reply { to, frame: req.error(INCONSISTENT_GROUP_PROTOCOL) });
            return;
        }
        if known {
            if let Some(frame) = group.current_join(&id, protocols, req) {
                out.push(Reply { to, frame });
                return;
            }
        } else {
            group.joins += 1;
        }
        let order = group.joins;
        let m = group.members.entry(id).or_insert_with(|| Member {
            client_id: req.client_id.clone(),
            host: req.host.clone(),
            instance: instance.clone(),
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
        group.prepare(now, self.initial_delay, out);
        group.try_complete_join(now, false, out);
    }

    /// A SyncGroup: the leader's brings the assignments; every member's
    /// waits for them.
    fn sync(&mut self, to: ReplyTo, req: &Request, sync: &SyncGroup, now: Millis, out: &mut Vec<Reply>) {
        let SyncGroup { generation, member, instance, assignments } = sync;
        let group = self.groups.entry(req.group.clone()).or_default();
        let checked = group.check(member, instance.as_deref());
        let code = match group.state {
            _ if checked != NONE => checked,
            State::Preparing { .. } => REBALANCE_IN_PROGRESS,
            _ if *generation != group.generation => ILLEGAL_GENERATION,
            _ => NONE,
        };
        if code != NONE {
            out.push(Reply { to, frame: req.error(code) });
            return;
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
        group.try_complete_sync(is_leader, out);
    }

    /// A Heartbeat's answer: whether the member is still in the group's
    /// current generation, and if a rebalance asks it to rejoin.
    fn heartbeat(
        &mut self,
        generation: i32,
        (member, instance): (&str, Option<&str>),
        req: &Request,
        now: Millis,
    ) -> Vec<u8> {
        let group = self.groups.entry(req.group.clone()).or_default();
        let checked = group.check(member, instance);
        let code = match group.state {
            _ if checked != NONE => checked,
            State::Empty => UNKNOWN_MEMBER_ID,
            State::Preparing { .. } => REBALANCE_IN_PROGRESS,
            _ if generation != group.generation => ILLEGAL_GENERATION,
            _ => NONE,
        };
        if let Some(m) = group.members.get_mut(member).filter(|_| checked == NONE) {
            m.expires = now + m.session;
        }
        req.error(code)
    }

    /// A LeaveGroup, as Kafka's GroupCoordinator.handleLeaveGroup: each
    /// member known leaves, each other one gets UNKNOWN_MEMBER_ID, and an
    /// old incarnation of a static member FENCED_INSTANCE_ID. From v3 a
    /// static member can be named by its instance id alone (no member id),
    /// as an administrator removes one.
    fn leave(
        &mut self,
        to: ReplyTo,
        req: &Request,
        members: &[(String, Option<String>)],
        now: Millis,
        out: &mut Vec<Reply>,
    ) {
        let Some(group) = self.groups.get_mut(&req.group) else {
            // Nobody is in a group Kafka has never heard of; leaving creates none.
            let unknown: Vec<_> =
                members.iter().map(|(id, i)| (id.as_str(), i.as_deref(), UNKNOWN_MEMBER_ID)).collect();
            out.push(Reply { to, frame: req.leave_response(NONE, &unknown) });
            return;
        };
        let mut left = false;
        let results: Vec<(&str, Option<&str>, i16)> = members
            .iter()
            .map(|(id, instance)| {
                let current = match (id.is_empty(), instance.as_deref()) {
                    (true, Some(i)) => group.static_member(i).cloned().ok_or(UNKNOWN_MEMBER_ID),
                    _ => match group.check(id, instance.as_deref()) {
                        NONE => Ok(id.clone()),
                        code => Err(code),
                    },
                };
                let code = match current {
                    Ok(current) => {
                        group.remove(&current, out);
                        left = true;
                        NONE
                    }
                    Err(code) => code,
                };
                (id.as_str(), instance.as_deref(), code)
            })
            .collect();
        let pausing = self.leave_pause > 0 && !group.members.is_empty();
        if left && pausing {
            // Whoever has rejoined, the join phase lasts the pause from now
            // (one going on too).
            group.prepare(now, self.initial_delay, out);
            group.state = State::Preparing { until: now + self.leave_pause, initial: true };
        } else if left {
            group.after_leaving(now, self.initial_delay, out);
        }
        out.push(Reply { to, frame: req.leave_response(NONE, &results) });
    }

    /// An OffsetCommit's answer, validated as Kafka 3.9 does
    /// (GroupCoordinator.validateOffsetCommit, then doCommitOffsets).
    fn commit(&mut self, req: &Request, commit: &OffsetCommit, now: Millis) -> Vec<u8> {
        let OffsetCommit { generation, member, instance, topics } = commit;
        let managed = *generation >= 0 || !member.is_empty() || instance.is_some();
        if managed && !self.groups.contains_key(&req.group) {
            // A member of a group Kafka has never heard of is stale.
            return req.error(ILLEGAL_GENERATION);
        }
        let group = self.groups.entry(req.group.clone()).or_default();
        let checked = group.check(member, instance.as_deref());
        let code = match (managed, group.members.get_mut(member)) {
            (true, _) if checked != NONE => checked,
            (true, None) => UNKNOWN_MEMBER_ID,
            (true, Some(_)) if *generation != group.generation => ILLEGAL_GENERATION,
            (true, Some(_)) if group.state == State::Completing => REBALANCE_IN_PROGRESS,
            (true, Some(m)) => {
                m.expires = now + m.session;
                NONE
            }
            // Outside group management (a new group, created by this
            // commit, or an empty one): only while nobody is in it.
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
        req.error(code)
    }

    /// An OffsetFetch answer: the offsets asked for (all of the group's
    /// with None), -1 where none was committed.
    fn fetch(&self, req: &Request, topics: Option<&[(String, Vec<i32>)]>) -> Vec<u8> {
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
        req.fetch_response(&committed)
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

    /// Its broker went away (stopped, crashed, or the coordination moved
    /// off it): every JoinGroup and SyncGroup waiting is answered
    /// NOT_COORDINATOR, as Kafka answers them when it unloads a group, so
    /// that their members look the coordinator up again.
    pub fn unload(&mut self) -> Vec<Reply> {
        let mut out = Vec::new();
        for m in self.groups.values_mut().flat_map(|g| g.members.values_mut()) {
            for (to, req) in m.join.take().into_iter().chain(m.sync.take()) {
                out.push(Reply { to, frame: req.error(NOT_COORDINATOR) });
            }
        }
        out
    }

    /// Its groups loaded on a broker, as Kafka's GroupMetadataManager loads
    /// them on a new coordinator: every member's session starts afresh (so
    /// members survive the move), and a rebalance that was under way starts
    /// again (Kafka loads the last generation that completed; members that
    /// had joined a newer one rejoin).
    pub fn load(&mut self, now: Millis) -> Vec<Reply> {
        let mut out = self.unload();
        for group in self.groups.values_mut() {
            for m in group.members.values_mut() {
                m.expires = now + m.session;
            }
            // Ids handed out but not yet joined are not in the log.
            group.pending.clear();
            if matches!(group.state, State::Preparing { .. } | State::Completing) {
                group.state = State::Stable;
                group.prepare(now, self.initial_delay, &mut out);
            }
        }
        out
    }

    /// When `tick` next has something to do.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.groups.values().filter_map(Group::next_deadline).min()
    }
}
