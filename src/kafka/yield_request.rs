//! The yield record: what `neli-run yield` writes to partition 0 to ask the
//! leader to hand over (a control record beside the heartbeats).

use serde::{Deserialize, Serialize};

use super::heartbeat::printable;

/// A control record on partition 0: `neli-run yield` asks the leader (any
/// leader, or the one named) to hand over.
///
/// Version 2 adds who asked (`name`, `host`, `pid`, `user`, `uid`), for the
/// leader's log. Only fields were added: older versions ignore them, and a
/// version 1 record reads with them unset. Whoever can write to the topic
/// can write any of them: they say who asked, they do not prove it.
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
    /// The asker's NELI_NAME when it runs inside a member's command, else
    /// its host name (from version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The asker's host name (from version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The asker's process id (from version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The asker's local user name, when its uid has one (from version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The asker's uid (from version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// The member to hand over to (from version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

impl Yield {
    /// A request to `target` (or whoever leads) to hand over (to `to`, or
    /// whoever the group picks), signed with this process.
    pub fn new(target: Option<String>, to: Option<String>) -> Yield {
        let host = nix::unistd::gethostname().ok().map(|h| h.to_string_lossy().into_owned());
        let uid = nix::unistd::getuid();
        let user = nix::unistd::User::from_uid(uid).ok().flatten().map(|u| u.name);
        let name = std::env::var("NELI_NAME").ok().filter(|n| !n.is_empty()).or_else(|| host.clone());
        Yield {
            kind: "yield".into(),
            v: 3,
            target,
            at_ms: crate::clock::wall_ms(),
            name,
            host,
            pid: Some(std::process::id()),
            user,
            uid: Some(uid.as_raw()),
            to,
        }
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

    /// Who asked, for a log line, every string escaped ([`printable`]):
    /// "user alice (uid 1000) on host web-2 (pid 4242)".
    pub fn asker(&self) -> String {
        if self.host.is_none() && self.user.is_none() && self.pid.is_none() {
            return "an unknown asker (a neli-run older than the version 2 record, or another writer)".into();
        }
        let user = match (&self.user, self.uid) {
            (Some(user), Some(uid)) => format!("user {} (uid {uid})", printable(user)),
            (Some(user), None) => format!("user {}", printable(user)),
            (None, Some(uid)) => format!("uid {uid}"),
            (None, None) => "an unknown user".into(),
        };
        let host = self.host.as_deref().map_or_else(|| "?".into(), printable);
        let mut out = format!("{user} on host {host}");
        match (self.pid, self.name.as_deref().filter(|n| Some(*n) != self.host.as_deref())) {
            (Some(pid), Some(name)) => out += &format!(" (pid {pid}, name {})", printable(name)),
            (Some(pid), None) => out += &format!(" (pid {pid})"),
            (None, Some(name)) => out += &format!(" (name {})", printable(name)),
            (None, None) => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::BootTime;
    use crate::kafka::heartbeat::{Content, Heartbeat, Member};
    use crate::leader::{Record, Stance};

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
            Content {
                record: Record {
                    term: 1,
                    start: None,
                    stance: Stance::Contending,
                    attempt: None,
                    next: None,
                    to: None,
                },
                since_ms: None,
                deadline_ms: 1,
            },
        );
        assert!(Yield::decode(&hb.encode()).is_none());
    }

    #[test]
    fn yield_records_say_who_asked_and_old_ones_still_read() {
        let mine = Yield::decode(&Yield::new(None, None).encode()).unwrap();
        assert_eq!((mine.v, mine.pid), (3, Some(std::process::id())));
        assert_eq!(mine.uid, Some(nix::unistd::getuid().as_raw()));
        // The user name as the system itself answers it.
        let id = std::process::Command::new("id").arg("-un").output().unwrap();
        assert_eq!(mine.user.as_deref(), Some(String::from_utf8_lossy(&id.stdout).trim()));
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
        assert!(v1.applies_to("a") && v1.user.is_none());
        assert!(v1.asker().contains("unknown asker"), "{}", v1.asker());
        let forged = Yield {
            user: Some("al\u{1b}[2Jice".into()),
            host: Some("web-2\nfake".into()),
            pid: Some(7),
            uid: Some(1000),
            name: Some("w\u{202e}x".into()),
            ..v1
        };
        assert_eq!(forged.asker(), r"user al\u{1b}[2Jice (uid 1000) on host web-2\nfake (pid 7, name w\u{202e}x)");
    }
}
