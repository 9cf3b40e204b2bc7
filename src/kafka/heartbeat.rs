//! The heartbeat record: what a candidate or leader writes to partition 0.
//!
//! JSON, so that `kcat` and `neli-run status` can read it. A member is
//! its name plus a random incarnation: a restarted process with the same
//! name (the default name is reused when a PID is) must never mistake the
//! previous incarnation's records for its own. `sent_ns` is CLOCK_BOOTTIME
//! of the writer and so means something only to the writer itself.
//!
//! Version 2 adds `role`, `run` and `start` (see [`crate::leader::Record`]);
//! a version 1 record reads as leading while it has a token and as released
//! otherwise, which is all version 1 meant.

use serde::{Deserialize, Serialize};

use crate::clock::BootTime;
use crate::leader::{Record, Stance};

/// Who we are on the topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub incarnation: String,
    pub host: String,
    pub pid: u32,
}

impl Member {
    /// This process, with a fresh random incarnation.
    pub fn this_process(name: String) -> Member {
        let incarnation = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
            .map(|uuid| uuid.trim().replace('-', "")[..16].to_string())
            .unwrap_or_else(|_| format!("{:016x}", BootTime::now().as_nanos() ^ u64::from(std::process::id()) << 40));
        Member {
            name,
            incarnation,
            host: nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default(),
            pid: std::process::id(),
        }
    }
}

/// One heartbeat record's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Format version.
    pub v: u32,
    pub name: String,
    pub incarnation: String,
    pub host: String,
    pub pid: u32,
    pub seq: u64,
    pub sent_ns: u64,
    /// Wall clock (ms since the Unix epoch) when sent: for other machines.
    #[serde(default)]
    pub at_ms: u64,
    /// The writer's fencing token while its command may run.
    #[serde(default)]
    pub token: Option<i64>,
    /// "leading", "contending" or "released" (from version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The writer's run (from version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// The offset of the run's first record, once its writer read it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    /// Wall clock (ms since the epoch) when this leadership began.
    #[serde(default)]
    pub since_ms: Option<u64>,
    /// The writer's --heartbeat-deadline: older than this, it is not fresh.
    #[serde(default)]
    pub deadline_ms: u64,
}

/// [`Stance`] on the wire, for readers such as `kcat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leading,
    Contending,
    Released,
}

/// What a heartbeat says beyond who wrote it and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Content {
    pub record: Record,
    /// Wall clock (ms since the epoch) when the leadership began.
    pub since_ms: Option<u64>,
    pub deadline_ms: u64,
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Heartbeat {
    /// The record `member` sends as its `seq`th heartbeat at `sent`.
    pub fn new(member: &Member, seq: u64, sent: BootTime, content: Content) -> Heartbeat {
        let Record { run, start, stance } = content.record;
        let role = match stance {
            Stance::Leading { .. } => Role::Leading,
            Stance::Contending => Role::Contending,
            Stance::Released => Role::Released,
        };
        let token = stance.token();
        Heartbeat {
            v: 2,
            name: member.name.clone(),
            incarnation: member.incarnation.clone(),
            host: member.host.clone(),
            pid: member.pid,
            seq,
            sent_ns: sent.as_nanos(),
            at_ms: wall_ms(),
            token,
            role: Some(role),
            run: Some(run),
            start,
            since_ms: content.since_ms.filter(|_| token.is_some()),
            deadline_ms: content.deadline_ms,
        }
    }

    /// Serialized record value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a heartbeat always serializes")
    }

    /// Parses a record value; anything else on the topic is ignored.
    pub fn decode(bytes: &[u8]) -> Option<Heartbeat> {
        serde_json::from_slice(bytes).ok()
    }

    /// What the leadership core needs of another member's record, read at
    /// `offset`. A record without a send time or deadline (older versions)
    /// is taken as just written with `ours`: the cautious reading.
    pub fn as_other(&self, offset: i64, ours: std::time::Duration) -> crate::leader::Other {
        let ms = std::time::Duration::from_millis;
        let stance = match (self.token, self.role) {
            (Some(token), _) => Stance::Leading { token },
            (None, Some(Role::Contending)) => Stance::Contending,
            _ => Stance::Released,
        };
        crate::leader::Other {
            writer: format!("{}/{}", self.name, self.incarnation),
            offset,
            run: self.run,
            start: self.start,
            stance,
            age: if self.at_ms == 0 { ms(0) } else { ms(wall_ms().saturating_sub(self.at_ms)) },
            deadline: if self.deadline_ms == 0 { ours } else { ms(self.deadline_ms) },
        }
    }

    /// Whether `member` wrote this record.
    pub fn is_from(&self, member: &Member) -> bool {
        self.name == member.name && self.incarnation == member.incarnation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_recognises_only_its_own_incarnation() {
        let me = Member::this_process("a".into());
        let record = Record { run: 2, start: Some(5), stance: Stance::Leading { token: 9 } };
        let hb =
            Heartbeat::new(&me, 3, BootTime::from_nanos(42), Content { record, since_ms: Some(1), deadline_ms: 3000 });
        let back = Heartbeat::decode(&hb.encode()).unwrap();
        assert_eq!(back, hb);
        assert!(back.is_from(&me));
        let restarted = Member::this_process("a".into());
        assert_ne!(restarted.incarnation, me.incarnation);
        assert!(!back.is_from(&restarted));
        assert_eq!(Heartbeat::decode(b"not json"), None);
    }

    #[test]
    fn records_read_as_the_stance_their_writer_meant_across_versions() {
        let deadline = std::time::Duration::from_secs(3);
        let v1 = |token: &str| {
            let json = format!(
                r#"{{"v":1,"name":"a","incarnation":"i","host":"h","pid":1,"seq":1,"sent_ns":1,"token":{token}}}"#
            );
            Heartbeat::decode(json.as_bytes()).unwrap().as_other(40, deadline)
        };
        assert_eq!(v1("7").stance, Stance::Leading { token: 7 });
        assert_eq!(v1("null").stance, Stance::Released, "a version 1 candidate contends for nothing");
        assert_eq!(v1("null").run, None);
        let me = Member::this_process("b".into());
        let record = Record { run: 4, start: None, stance: Stance::Contending };
        let hb = Heartbeat::new(&me, 1, BootTime::from_nanos(1), Content { record, since_ms: Some(9), deadline_ms: 1 });
        assert_eq!(hb.since_ms, None, "only leadership has a beginning");
        let other = Heartbeat::decode(&hb.encode()).unwrap().as_other(41, deadline);
        assert_eq!((other.stance, other.run, other.start, other.offset), (Stance::Contending, Some(4), None, 41));
        assert!(String::from_utf8(hb.encode()).unwrap().contains(r#""role":"contending""#));
    }
}

/// A control record on partition 0: `neli-run yield` asks the leader (any
/// leader, or the one named) to hand over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Yield {
    /// Always "yield": what tells this record from a heartbeat.
    #[serde(rename = "type")]
    pub kind: String,
    pub v: u32,
    /// The member asked, or None for whoever leads.
    pub target: Option<String>,
    pub at_ms: u64,
}

impl Yield {
    /// A request to `target` (or whoever leads).
    pub fn new(target: Option<String>) -> Yield {
        Yield { kind: "yield".into(), v: 1, target, at_ms: wall_ms() }
    }

    /// Serialized record value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a yield always serializes")
    }

    /// Parses a record value that is a yield request.
    pub fn decode(bytes: &[u8]) -> Option<Yield> {
        serde_json::from_slice::<Yield>(bytes).ok().filter(|y| y.kind == "yield")
    }

    /// Whether it asks the member named `name`.
    pub fn applies_to(&self, name: &str) -> bool {
        self.target.as_deref().is_none_or(|t| t == name)
    }
}

#[cfg(test)]
mod yield_tests {
    use super::*;

    #[test]
    fn yield_records_are_not_heartbeats_and_name_their_target() {
        let any = Yield::new(None).encode();
        let named = Yield::new(Some("b".into())).encode();
        assert!(Heartbeat::decode(&any).is_none());
        assert!(Yield::decode(&any).unwrap().applies_to("a"));
        assert!(!Yield::decode(&named).unwrap().applies_to("a"));
        let hb = Heartbeat::new(
            &Member::this_process("a".into()),
            1,
            BootTime::from_nanos(1),
            Content {
                record: Record { run: 1, start: None, stance: Stance::Contending },
                since_ms: None,
                deadline_ms: 1,
            },
        );
        assert!(Yield::decode(&hb.encode()).is_none());
    }
}
