//! Kafka properties as librdkafka judges them: why one is refused, and the
//! known property nearest to a typo. Beside the configuration that checks
//! them (a client's creation is judged the same way, by the Kafka adapter,
//! `status` and `yield`).

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaConfRes;

use super::Target;
use crate::exit::{Failure, Kind};

/// Why a client could not be created, naming the property and where it came
/// from, never its value (`status` and `yield` say it the same way).
pub(crate) fn creation_error(err: KafkaError, target: &Target) -> Failure {
    let origin = match &err {
        KafkaError::ClientConfig(_, _, key, _) => target.origin(key),
        _ => "-X, --kafka-config, --kafka-secret or NELI_KAFKA_PROPERTIES".into(),
    };
    Failure::new(
        Kind::KafkaConfig,
        format!("Kafka client configuration rejected: {}", rejected_property(&err, &origin)),
    )
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
