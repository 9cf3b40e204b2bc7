//! Kafka properties one by one: where each came from (`Origin`), whether it
//! is ours to set (a flag of its own, or refused), and as librdkafka judges
//! them: why one is refused, and the known property nearest to a typo.
//! `Target` gathers them, and says why a client could not be created
//! (`creation_error`, for the Kafka adapter, `status` and `yield`).

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaConfRes;

use std::fmt;

use super::err;
use crate::exit::Failure;

/// Where a Kafka property came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `-X KEY=VALUE`.
    Flag,
    /// NELI_KAFKA_PROPERTIES, its n-th entry (from 1).
    Env(usize),
    /// A --kafka-config file, at a line.
    File { path: String, line: usize },
    /// A --kafka-secret file.
    Secret { path: String },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag => write!(f, "-X"),
            Origin::Env(n) => write!(f, "NELI_KAFKA_PROPERTIES entry {n}"),
            Origin::File { path, line } => write!(f, "--kafka-config {path} line {line}"),
            Origin::Secret { path } => write!(f, "--kafka-secret {path}"),
        }
    }
}

/// Properties that have a flag of their own; setting them with -X would let
/// the two disagree.
const OWNED_PROPERTIES: [(&str, &str); 4] = [
    ("bootstrap.servers", "--brokers"),
    ("group.id", "--group"),
    ("session.timeout.ms", "--session-timeout"),
    ("client.id", "--name"),
];

/// Properties neli-run refuses, and why: Kafka's static membership
/// (KIP-345), measured on the dev broker (docs/proof.md, "Static
/// membership"): a static member sends no LeaveGroup, so every graceful
/// handover would wait out the session; a restart in place still waits out
/// its old incarnation's claim; and two members given one id fence each
/// other in turn.
const REFUSED_PROPERTIES: [(&str, &str); 1] = [(
    "group.instance.id",
    "static membership is not supported: a static member sends no LeaveGroup, so every graceful handover \
     would wait the whole session timeout (6 s instead of about 0.1 s), a restart in place still waits out \
     its old claim, and two members given one id fence each other in turn; remove it (each member's \
     --name already tells them apart)",
)];

/// Why `key` may not be set from `origin`: a flag of its own, or refused.
pub(super) fn not_settable(key: &str, origin: &str) -> Option<String> {
    if let Some((_, flag)) = OWNED_PROPERTIES.iter().find(|(k, _)| *k == key) {
        return Some(format!("{origin} {key} is set by {flag}; use that flag instead"));
    }
    REFUSED_PROPERTIES.iter().find(|(k, _)| *k == key).map(|(_, why)| format!("{origin} {key}: {why}"))
}

/// `KEY=VALUE` from `origin`, checked: a key, and one that is ours to set.
pub(super) fn checked_property(key: &str, value: String, origin: &Origin) -> Result<(String, String), Failure> {
    if key.is_empty() {
        return err(format!("{origin}: the key is empty (expected KEY=VALUE)"));
    }
    if let Some(why) = not_settable(key, &format!("{origin}:")) {
        return err(why);
    }
    Ok((key.to_string(), value))
}

/// Whether a property's value is a secret that no message may show.
pub(super) fn is_secret(key: &str) -> bool {
    ["password", "secret", "jaas", "token", "credential", "pem", "ssl.key", "oauthbearer.config"]
        .iter()
        .any(|word| key.contains(word))
}

/// Says why librdkafka refuses a property set at `origin`: the key, and for
/// an unknown key the nearest known one. Never a secret's value: rdkafka's
/// own message for an unknown key carries the value, so it is not used.
pub fn rejected_property(err: &KafkaError, origin: &str) -> String {
    match err {
        KafkaError::ClientConfig(RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN, _, key, _) => {
            let hint = nearest_property(key).map(|k| format!("; did you mean {k}?")).unwrap_or_default();
            format!("unknown Kafka property {} ({origin}){hint}", key.escape_debug())
        }
        KafkaError::ClientConfig(_, desc, key, _) if !is_secret(key) => {
            format!("{origin}: {}", desc.lines().next().unwrap_or_default())
        }
        KafkaError::ClientConfig(_, _, key, _) => format!("{origin}: librdkafka refuses the value of {key}"),
        KafkaError::Nul(_) => format!("a Kafka property contains a NUL byte ({origin})"),
        other => format!("{other} ({origin})"),
    }
}

/// The known librdkafka property nearest to `key` (a typo's fix), if any is
/// near enough.
fn nearest_property(key: &str) -> Option<String> {
    let most = (key.len() / 4).clamp(1, 3);
    known_properties()
        .into_iter()
        .map(|known| (strsim::damerau_levenshtein(key, &known), known))
        .filter(|(distance, _)| *distance <= most)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

/// Every property this librdkafka knows (global and topic), read from its
/// own table (`rd_kafka_conf_properties_show`), so the list matches the
/// linked version. Empty if that table cannot be read.
fn known_properties() -> Vec<String> {
    let mut table = Vec::new();
    // SAFETY: a private temporary FILE, written by librdkafka, read back
    // and closed here; no pointer outlives this block.
    unsafe {
        let file = libc::tmpfile();
        if file.is_null() {
            return Vec::new();
        }
        rdkafka_sys::rd_kafka_conf_properties_show(file);
        libc::rewind(file);
        let mut buf = [0u8; 8192];
        loop {
            let n = libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), file);
            if n == 0 {
                break;
            }
            table.extend_from_slice(&buf[..n]);
        }
        libc::fclose(file);
    }
    String::from_utf8_lossy(&table)
        .lines()
        .filter_map(|line| line.split_once('|'))
        .map(|(name, _)| name.trim().to_string())
        .filter(|name| {
            name.contains('.')
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_')
        })
        .collect()
}
