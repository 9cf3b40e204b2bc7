//! The control records: what `neli-run yield`, `pause` and `resume` write
//! to partition 0 beside the heartbeats, each saying who asked.

use serde::{Deserialize, Serialize};

use crate::leader::{Asker, Pause};

/// A control record on partition 0: `neli-run yield` asks the leader (any
/// leader, or the one named) to hand over.
///
/// Version 2 adds who asked (`name`, `host`, `pid`, `user`, `uid`, beside
/// the other fields on the wire), for the leader's log. Only fields were
/// added: older versions ignore them, and a version 1 record reads with
/// them unset.
///
/// Version 3 adds `to` (`yield --to`): the member to hand over to. An older
/// leader ignores it and yields to whoever the group picks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Yield {
    /// Always "yield": what tells this record from a heartbeat.
    #[serde(rename = "type")]
    pub kind: String,
    pub v: u32,
    /// The member asked, or None for whoever leads.
    pub target: Option<String>,
    pub at_ms: u64,
    /// Who asked (from version 2).
    #[serde(flatten)]
    pub by: Asker,
    /// The member to hand over to (from version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// This process as the asker of a control record.
fn this_asker() -> Asker {
    let host = nix::unistd::gethostname().ok().map(|h| h.to_string_lossy().into_owned());
    let uid = nix::unistd::getuid();
    let user = nix::unistd::User::from_uid(uid).ok().flatten().map(|u| u.name);
    let name = std::env::var("NELI_NAME").ok().filter(|n| !n.is_empty()).or_else(|| host.clone());
    Asker { name, host, pid: Some(std::process::id()), user, uid: Some(uid.as_raw()) }
}

impl Yield {
    /// A request to `target` (or whoever leads) to hand over (to `to`, or
    /// whoever the group picks), signed with this process.
    pub fn new(target: Option<String>, to: Option<String>) -> Yield {
        Yield { kind: "yield".into(), v: 3, target, at_ms: crate::clock::wall_ms(), by: this_asker(), to }
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

    /// Who asked, for a log line, every string escaped.
    pub fn asker(&self) -> String {
        self.by.describe()
    }
}

/// A control record on partition 0: `neli-run pause` ("type": "pause") or
/// `resume` ("resume"). Every member honours the newest one (by offset) it
/// has read, here or carried forward by a heartbeat ([`Pause`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRequest {
    #[serde(rename = "type")]
    pub kind: String,
    pub v: u32,
    /// `pause --stop`: stop a running command too.
    #[serde(default)]
    pub stop: bool,
    pub at_ms: u64,
    #[serde(flatten)]
    pub by: Asker,
}

impl PauseRequest {
    /// A pause (or, `paused` false, a resume), signed with this process.
    pub fn new(paused: bool, stop: bool) -> PauseRequest {
        let kind = if paused { "pause" } else { "resume" };
        PauseRequest { kind: kind.into(), v: 1, stop: stop && paused, at_ms: crate::clock::wall_ms(), by: this_asker() }
    }

    /// Serialized record value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a pause always serializes")
    }

    /// Parses a record value that is a pause or resume request.
    pub fn decode(bytes: &[u8]) -> Option<PauseRequest> {
        serde_json::from_slice::<PauseRequest>(bytes).ok().filter(|p| p.kind == "pause" || p.kind == "resume")
    }

    /// The request as read at `offset`.
    pub fn at(self, offset: i64) -> Pause {
        Pause { offset, paused: self.kind == "pause", stop: self.stop, at_ms: self.at_ms, by: self.by }
    }
}

/// A control record on a crontab job's partition: `neli-run cron trigger
/// JOB` ("type": "trigger"). The job's owner runs it once, due when asked
/// ([`crate::leader::Trigger`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerRequest {
    #[serde(rename = "type")]
    pub kind: String,
    pub v: u32,
    pub at_ms: u64,
    #[serde(flatten)]
    pub by: Asker,
}

impl TriggerRequest {
    /// A trigger, now, signed with this process.
    pub fn new() -> TriggerRequest {
        TriggerRequest { kind: "trigger".into(), v: 1, at_ms: crate::clock::wall_ms(), by: this_asker() }
    }

    /// Serialized record value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a trigger always serializes")
    }

    /// Parses a record value that is a trigger.
    pub fn decode(bytes: &[u8]) -> Option<TriggerRequest> {
        serde_json::from_slice::<TriggerRequest>(bytes).ok().filter(|t| t.kind == "trigger")
    }

    /// The request as read at `offset`.
    pub fn at(self, offset: i64) -> crate::leader::Trigger {
        crate::leader::Trigger { offset, at_ms: self.at_ms, by: self.by }
    }
}

/// A control record on partition 0: `neli-run drain MEMBER` ("type":
/// "drain") or `undrain` ("undrain"). The member it names, if it started
/// before it was written, leaves the group and stays out of it (its roles
/// move to the others) until the newest one it has read is an undrain.
/// Padded as a wake is, so that a standby's watcher, whose fetch waits for
/// a wake's size, reads it at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRequest {
    #[serde(rename = "type")]
    pub kind: String,
    pub v: u32,
    /// The member's --name.
    pub member: String,
    pub at_ms: u64,
    #[serde(flatten)]
    pub by: Asker,
    /// Spaces up to a wake's size.
    #[serde(default)]
    pad: String,
}

impl DrainRequest {
    /// A drain of `member` (or, `drained` false, an undrain), signed with
    /// this process.
    pub fn new(member: String, drained: bool) -> DrainRequest {
        let kind = if drained { "drain" } else { "undrain" };
        DrainRequest {
            kind: kind.into(),
            v: 1,
            member,
            at_ms: crate::clock::wall_ms(),
            by: this_asker(),
            pad: String::new(),
        }
    }

    /// Serialized record value, padded to a call's size: the member it
    /// names may be cold, its watcher's fetch parked for more than a wake
    /// (`wake::CALL_BYTES`).
    pub fn encode(&self) -> Vec<u8> {
        let bare = serde_json::to_vec(self).expect("a drain always serializes").len();
        let pad = " ".repeat(super::wake::CALL_BYTES.saturating_sub(bare));
        serde_json::to_vec(&DrainRequest { pad, ..self.clone() }).expect("a drain always serializes")
    }

    /// Parses a record value that is a drain or undrain request.
    pub fn decode(bytes: &[u8]) -> Option<DrainRequest> {
        serde_json::from_slice::<DrainRequest>(bytes).ok().filter(|d| d.kind == "drain" || d.kind == "undrain")
    }

    /// Whether it drains (false: undrains).
    pub fn drains(&self) -> bool {
        self.kind == "drain"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::BootTime;
    use crate::kafka::heartbeat::{Content, Heartbeat, Member};
    use crate::leader::Record;

    #[test]
    fn yield_records_are_not_heartbeats_and_name_their_target() {
        let any = Yield::new(None, None).encode();
        let named = Yield::new(Some("b".into()), None).encode();
        assert!(Heartbeat::decode(&any).is_none());
        assert!(Yield::decode(&any).unwrap().applies_to("a"));
        assert!(!Yield::decode(&named).unwrap().applies_to("a"));
        let hb = Heartbeat::new(
            &Member::this_process("a".into()),
            1,
            BootTime::from_nanos(1),
            1,
            Content { record: Record::contending(1), since_ms: None, deadline_ms: 1 },
        );
        assert!(Yield::decode(&hb.encode()).is_none());
    }

    #[test]
    fn yield_records_say_who_asked_and_old_ones_still_read() {
        let mine = Yield::decode(&Yield::new(None, None).encode()).unwrap();
        assert_eq!((mine.v, mine.by.pid), (3, Some(std::process::id())));
        assert_eq!(mine.by.uid, Some(nix::unistd::getuid().as_raw()));
        // The user name as the system itself answers it.
        let id = std::process::Command::new("id").arg("-un").output().unwrap();
        assert_eq!(mine.by.user.as_deref(), Some(String::from_utf8_lossy(&id.stdout).trim()));
        assert!(mine.asker().contains(&format!("(pid {}", std::process::id())), "{}", mine.asker());
        // What version 1 readers decode (their struct, as it was): still a
        // yield for the same target.
        #[derive(Deserialize)]
        struct V1 {
            #[serde(rename = "type")]
            kind: String,
            target: Option<String>,
        }
        let old: V1 = serde_json::from_slice(&Yield::new(Some("b".into()), None).encode()).unwrap();
        assert_eq!((old.kind.as_str(), old.target.as_deref()), ("yield", Some("b")));
        // Version 1, as older neli-run versions write it.
        let v1 = Yield::decode(br#"{"type":"yield","v":1,"target":"a","at_ms":5}"#).unwrap();
        assert!(v1.applies_to("a") && v1.by.user.is_none());
        assert!(v1.asker().contains("unknown asker"), "{}", v1.asker());
        let by = Asker {
            user: Some("al\u{1b}[2Jice".into()),
            host: Some("web-2\nfake".into()),
            pid: Some(7),
            uid: Some(1000),
            name: Some("w\u{202e}x".into()),
        };
        let forged = Yield { by, ..v1 };
        assert_eq!(forged.asker(), r"user al\u{1b}[2Jice (uid 1000) on host web-2\nfake (pid 7, name w\u{202e}x)");
    }

    #[test]
    fn pause_and_resume_records_are_neither_yields_nor_heartbeats_and_say_who_asked() {
        let pause = PauseRequest::new(true, true).encode();
        assert!(Yield::decode(&pause).is_none() && Heartbeat::decode(&pause).is_none());
        assert!(PauseRequest::decode(&Yield::new(None, None).encode()).is_none());
        let read = PauseRequest::decode(&pause).unwrap().at(12);
        assert_eq!((read.offset, read.paused, read.stop), (12, true, true));
        assert_eq!(read.by.pid, Some(std::process::id()));
        // A resume never stops anything, whatever it was asked.
        let resume = PauseRequest::decode(&PauseRequest::new(false, true).encode()).unwrap().at(13);
        assert_eq!((resume.paused, resume.stop), (false, false));
        let json = String::from_utf8(pause).unwrap();
        assert!(json.contains(r#""type":"pause""#) && json.contains(r#""stop":true"#), "{json}");
    }
}

#[cfg(test)]
mod trigger_tests {
    use super::*;

    #[test]
    fn a_trigger_is_no_pause_yield_or_heartbeat_and_says_who_asked() {
        let bytes = TriggerRequest::new().encode();
        assert!(PauseRequest::decode(&bytes).is_none() && Yield::decode(&bytes).is_none());
        assert!(crate::kafka::heartbeat::Heartbeat::decode(&bytes).is_none());
        assert!(TriggerRequest::decode(&PauseRequest::new(true, false).encode()).is_none());
        let read = TriggerRequest::decode(&bytes).unwrap().at(7);
        assert_eq!((read.offset, read.by.pid), (7, Some(std::process::id())));
        assert!(read.at_ms > 0);
    }

    #[test]
    fn a_drain_is_padded_past_the_watchers_minimum_and_is_no_other_request() {
        let bytes = DrainRequest::new("web-1".into(), true).encode();
        assert!(bytes.len() >= crate::kafka::wake::CALL_BYTES, "{}", bytes.len());
        let drain = DrainRequest::decode(&bytes).expect("a drain");
        assert!(drain.drains() && drain.member == "web-1" && drain.by.pid == Some(std::process::id()));
        let undrain = DrainRequest::decode(&DrainRequest::new("web-1".into(), false).encode()).expect("an undrain");
        assert!(!undrain.drains());
        assert!(PauseRequest::decode(&bytes).is_none() && Yield::decode(&bytes).is_none());
        assert!(TriggerRequest::decode(&bytes).is_none());
        assert!(crate::kafka::heartbeat::Heartbeat::decode(&bytes).is_none());
        assert!(crate::kafka::wake::Record::decode(&bytes).is_none());
        assert!(DrainRequest::decode(&PauseRequest::new(true, false).encode()).is_none());
    }
}
