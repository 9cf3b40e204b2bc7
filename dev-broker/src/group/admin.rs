//! The group APIs an administrator's tools call (DescribeGroups,
//! ListGroups): views of the coordinator's state, changing nothing.

use super::{Coordinator, Group, Member, Request, State};
use crate::wire::{put_bytes, put_string, NONE};

impl Coordinator {
    /// A DescribeGroups answer, as Kafka's GroupMetadata.summary gives it:
    /// members with their protocol metadata and assignment only while the
    /// group is stable; "Dead" for a group never heard of.
    pub(super) fn describe(&self, req: &Request, ids: &[String]) -> Vec<u8> {
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
                    put_string(&mut out, m.instance.as_deref());
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
    pub(super) fn list(&self, req: &Request) -> Vec<u8> {
        let mut out = req.response();
        out.extend_from_slice(&NONE.to_be_bytes());
        out.extend_from_slice(&(self.groups.len() as i32).to_be_bytes());
        for (id, g) in &self.groups {
            put_string(&mut out, Some(id));
            put_string(&mut out, Some(g.protocol_type()));
        }
        out
    }
}
