//! Who creates topics on the dev broker, and when: as on Kafka, a topic is
//! created by CreateTopics, or by a Metadata request that allows automatic
//! creation, never by a client that only looks (`neli-run status`, whose
//! Metadata requests disallow it).
//!
//! The mock does not serve CreateTopics, and its automatic creation gives a
//! topic four partitions, which a group topic must not have (a member
//! joining may take partition 0 from a leader). So the forwarder answers
//! CreateTopics itself and creates an auto-created topic before the mock
//! sees the request, each through the mock's own topic creation.

use std::collections::HashSet;

use super::wire::{
    put_string, put_uvarint, Header, Reader, CREATE_TOPICS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST, INVALID_TOPIC, METADATA, NONE, TOPIC_AUTHORIZATION_FAILED,
};

/// The CreateTopics versions answered here: the non-flexible ones (0 to 4;
/// librdkafka, kafka-python and kafkajs all use one of them). The
/// ApiVersions answer gains them.
pub const CREATE_TOPICS_VERSIONS: (i16, i16, i16) = (CREATE_TOPICS, 0, 4);

/// The topic names of a Metadata request that allows automatic creation:
/// those the broker creates if missing. Nothing for any other request, or
/// one that disallows it. Kafka's Metadata request is flexible (compact
/// strings, tagged fields) from version 9, carries topic ids from version
/// 10 and says whether to create from version 4 (before that, it always
/// may).
pub fn auto_created(header: &Header) -> Vec<String> {
    (|| {
        let Header { api_key, version, flexible, .. } = *header;
        if api_key != METADATA {
            return None;
        }
        let mut r = header.body.clone();
        let count = if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i32()?) };
        let mut topics = Vec::new();
        for _ in 0..count.max(0) {
            if version >= 10 {
                r.skip(16)?;
            }
            topics.extend(r.string_in(flexible)?);
            if flexible {
                r.tagged_fields()?;
            }
        }
        let allowed = version < 4 || r.take(1)? != [0];
        allowed.then_some(topics)
    })()
    .unwrap_or_default()
}

/// The id of the dev broker's one broker.
const BROKER: i32 = 1;

/// A reader of a Metadata response frame of `version` (1 and later,
/// without its length) past its brokers and cluster id: at the controller.
fn past_brokers(frame: &[u8], version: i16) -> Option<Reader<'_>> {
    let flexible = version >= 9;
    let mut r = Reader { buf: frame, at: 4 }; // after the correlation id
    if flexible {
        r.tagged_fields()?;
    }
    if version >= 3 {
        r.skip(4)?; // throttle time
    }
    let brokers = if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i32()?) };
    for _ in 0..brokers.max(0) {
        r.skip(4)?; // node id
        r.string_in(flexible)?; // host
        r.skip(4)?; // port
        r.string_in(flexible)?; // rack
        if flexible {
            r.tagged_fields()?;
        }
    }
    if version >= 2 {
        r.string_in(flexible)?; // cluster id
    }
    Some(r)
}

/// A Metadata response frame of `version` (without its length) that names
/// the one broker as the controller, or None if it does not parse. The mock
/// names broker 0, which does not exist; admin clients send CreateTopics to
/// the controller, so they would wait for it (librdkafka until its timeout,
/// kafka-python fails at once).
pub fn name_controller(frame: &[u8], version: i16) -> Option<Vec<u8>> {
    if version < 1 {
        return None; // no controller before v1
    }
    let r = past_brokers(frame, version)?;
    let mut out = frame.to_vec();
    out.get_mut(r.at..r.at + 4)?.copy_from_slice(&BROKER.to_be_bytes());
    Some(out)
}

/// A Metadata response frame of `version` (without its length) whose broker
/// list leaves out broker `hidden`, or None if it names no such broker or
/// does not parse. The mock's spare broker ([`crate::mock::Mock`]) leads
/// partitions that have no leader: clients must not learn of it, so that to
/// them such a partition's leader is unknown, as on Kafka.
pub fn hide_broker(frame: &[u8], version: i16, hidden: i32) -> Option<Vec<u8>> {
    if version < 1 {
        return None; // no rack field: not read here, and no client sends v0
    }
    let flexible = version >= 9;
    let mut r = Reader { buf: frame, at: 4 }; // after the correlation id
    if flexible {
        r.tagged_fields()?;
    }
    if version >= 3 {
        r.skip(4)?; // throttle time
    }
    let head = r.at;
    let brokers = if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i32()?) };
    let mut kept = Vec::new();
    for _ in 0..brokers.max(0) {
        let start = r.at;
        let id = r.i32()?;
        r.string_in(flexible)?; // host
        r.skip(4)?; // port
        r.string_in(flexible)?; // rack
        if flexible {
            r.tagged_fields()?;
        }
        if id != hidden {
            kept.push(frame.get(start..r.at)?);
        }
    }
    if kept.len() as i64 == brokers {
        return None;
    }
    let mut out = frame.get(..head)?.to_vec();
    if flexible {
        put_uvarint(&mut out, kept.len() as u64 + 1);
    } else {
        out.extend_from_slice(&(kept.len() as i32).to_be_bytes());
    }
    kept.iter().for_each(|b| out.extend_from_slice(b));
    out.extend_from_slice(r.rest());
    Some(out)
}

/// Whether `--deny-topic` refuses `topic`: one of `denied` names it, or is a
/// prefix ending in `*` that it starts with (as a Kafka ACL with a PREFIXED
/// pattern; `*` alone refuses every topic).
pub fn denies(denied: &[String], topic: &str) -> bool {
    denied.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => topic.starts_with(prefix),
        None => d == topic,
    })
}

/// A Metadata response frame of `version` (without its length) whose topics
/// that `denied` refuses ([`denies`]) are answered as Kafka answers a topic
/// the client may not describe, whether it exists or not:
/// TOPIC_AUTHORIZATION_FAILED, no partitions, a zero topic id. None if it
/// names no such topic or does not parse. The mock refuses exact names
/// itself (its topic errors); a prefix it cannot take, so the forwarder
/// edits its answer, which for a topic that does not exist is
/// UNKNOWN_TOPIC_OR_PARTITION.
pub fn deny_topics(frame: &[u8], version: i16, denied: &[String]) -> Option<Vec<u8>> {
    if denied.is_empty() {
        return None;
    }
    edit_topics(frame, version, |topic| {
        let name = topic.name.as_deref().filter(|n| denies(denied, n))?;
        let flexible = version >= 9;
        let mut out = TOPIC_AUTHORIZATION_FAILED.to_be_bytes().to_vec();
        if flexible {
            put_uvarint(&mut out, name.len() as u64 + 1);
            out.extend_from_slice(name.as_bytes());
        } else {
            put_string(&mut out, Some(name));
        }
        if version >= 10 {
            out.extend_from_slice(&[0; 16]); // Kafka's zero id
        }
        out.push(0); // not internal
        put_count(&mut out, 0, flexible); // no partitions
        if version >= 8 {
            out.extend_from_slice(&i32::MIN.to_be_bytes()); // operations not asked for
        }
        if flexible {
            out.push(0); // tagged fields
        }
        Some(out)
    })
}

/// One topic of a Metadata response, as [`edit_topics`] reads it.
pub struct TopicEntry<'a> {
    pub name: Option<String>,
    /// From its error code to its partitions' count.
    pub head: &'a [u8],
    /// Each partition's index and its whole entry.
    pub partitions: Vec<(i32, &'a [u8])>,
    /// After its partitions (authorized operations, tagged fields).
    pub tail: &'a [u8],
}

/// A Metadata response frame of `version` (1 and later, without its
/// length) with each topic that `edit` rewrites (its new bytes) replaced,
/// or None if `edit` rewrote none or the frame does not parse.
pub fn edit_topics(
    frame: &[u8],
    version: i16,
    mut edit: impl FnMut(&TopicEntry) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    if version < 1 {
        return None; // v0 is not read here, and no client sends it
    }
    let flexible = version >= 9;
    let count = |r: &mut Reader| Some(if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i32()?) }.max(0));
    let mut r = past_brokers(frame, version)?;
    r.skip(4)?; // controller
    let mut out = frame.get(..r.at)?.to_vec();
    let topics = count(&mut r)?;
    put_count(&mut out, topics as usize, flexible);
    let mut changed = false;
    for _ in 0..topics {
        let start = r.at;
        r.skip(2)?; // error code
        let name = r.string_in(flexible)?;
        if version >= 10 {
            r.skip(16)?; // topic id
        }
        r.skip(1)?; // is internal
        let head = frame.get(start..r.at)?;
        let mut partitions = Vec::new();
        for _ in 0..count(&mut r)? {
            let entry = r.at;
            r.skip(2)?; // error code
            let index = r.i32()?;
            r.skip(4)?; // leader
            if version >= 7 {
                r.skip(4)?; // leader epoch
            }
            // Replicas, in-sync replicas, and from v5 offline replicas.
            for _ in 0..2 + usize::from(version >= 5) {
                let n = count(&mut r)?;
                r.skip(4 * n as usize)?;
            }
            if flexible {
                r.tagged_fields()?;
            }
            partitions.push((index, frame.get(entry..r.at)?));
        }
        let tail_at = r.at;
        if version >= 8 {
            r.skip(4)?; // topic authorized operations
        }
        if flexible {
            r.tagged_fields()?;
        }
        let topic = TopicEntry { name, head, partitions, tail: frame.get(tail_at..r.at)? };
        match edit(&topic) {
            Some(bytes) => {
                changed = true;
                out.extend_from_slice(&bytes);
            }
            None => out.extend_from_slice(frame.get(start..r.at)?),
        }
    }
    out.extend_from_slice(r.rest());
    changed.then_some(out)
}

/// An array's count: compact (n + 1, a varint) in a flexible version.
pub fn put_count(out: &mut Vec<u8>, n: usize, flexible: bool) {
    if flexible {
        put_uvarint(out, n as u64 + 1);
    } else {
        out.extend_from_slice(&(n as i32).to_be_bytes());
    }
}

/// One topic of a CreateTopics request.
#[derive(Debug, PartialEq)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker's default.
    pub partitions: i32,
    /// -1: the broker's default.
    pub replication: i16,
    /// Partitions given with their replicas by hand (then `partitions` and
    /// `replication` are -1): how many.
    pub assigned: usize,
}

/// A CreateTopics request (versions 0 to 4).
#[derive(Debug, PartialEq)]
pub struct CreateTopics {
    pub version: i16,
    pub correlation: i32,
    pub topics: Vec<NewTopic>,
    /// Check only, create nothing (version 1 on).
    pub validate_only: bool,
}

impl CreateTopics {
    /// The request, or None for any other request, a version not answered
    /// here, or one that does not parse.
    pub fn parse(header: &Header) -> Option<CreateTopics> {
        let Header { api_key, version, correlation, .. } = *header;
        let mut r = header.body.clone();
        if api_key != CREATE_TOPICS || !(CREATE_TOPICS_VERSIONS.1..=CREATE_TOPICS_VERSIONS.2).contains(&version) {
            return None;
        }
        let mut topics = Vec::new();
        for _ in 0..r.i32()?.max(0) {
            let name = r.string()?;
            let (partitions, replication) = (r.i32()?, r.i16()?);
            let assigned = r.i32()?.max(0) as usize;
            for _ in 0..assigned {
                r.skip(4)?; // partition index
                let brokers = r.i32()?.max(0) as usize;
                r.skip(4 * brokers)?;
            }
            // Configs (retention and the like): the mock keeps none.
            for _ in 0..r.i32()?.max(0) {
                r.string()?;
                r.string_in(false)?;
            }
            topics.push(NewTopic { name, partitions, replication, assigned });
        }
        r.skip(4)?; // timeout
        let validate_only = version >= 1 && r.take(1)? != [0];
        Some(CreateTopics { version, correlation, topics, validate_only })
    }

    /// Checks each topic as Kafka does, has `create` make the valid ones
    /// (unless only validating) with their partition count, and returns the
    /// response frame. `create` answers with Kafka's error code and message
    /// (TOPIC_ALREADY_EXISTS, ...).
    pub fn answer(
        &self,
        denied: &[String],
        default_partitions: i32,
        brokers: i32,
        mut create: impl FnMut(&str, i32) -> Result<(), (i16, String)>,
    ) -> Vec<u8> {
        let mut seen = HashSet::new();
        let twice: HashSet<&str> = self.topics.iter().map(|t| t.name.as_str()).filter(|n| !seen.insert(*n)).collect();
        let mut out = self.correlation.to_be_bytes().to_vec();
        if self.version >= 2 {
            out.extend_from_slice(&0i32.to_be_bytes()); // throttle time
        }
        out.extend_from_slice(&(self.topics.len() as i32).to_be_bytes());
        for topic in &self.topics {
            let partitions = match (topic.assigned, topic.partitions) {
                (0, -1) => default_partitions,
                (0, n) => n,
                (n, _) => n as i32,
            };
            let checked = if twice.contains(topic.name.as_str()) {
                Err((INVALID_REQUEST, "the request names this topic more than once".to_string()))
            } else if let Some(why) = invalid_name(&topic.name) {
                Err((INVALID_TOPIC, format!("Topic name {:?} is invalid: {why}", topic.name)))
            } else if denies(denied, &topic.name) {
                Err((TOPIC_AUTHORIZATION_FAILED, "Authorization failed.".to_string()))
            } else if partitions < 1 {
                Err((INVALID_PARTITIONS, "Number of partitions must be larger than 0.".to_string()))
            } else if topic.assigned == 0
                && topic.replication != -1
                && !(1..=brokers).contains(&i32::from(topic.replication))
            {
                Err((
                    INVALID_REPLICATION_FACTOR,
                    format!(
                        "Replication factor {} is invalid: the dev broker has {brokers} broker(s) (ask for 1 to \
                         {brokers}, or -1 for the default)",
                        topic.replication
                    ),
                ))
            } else if self.validate_only {
                Ok(())
            } else {
                create(&topic.name, partitions)
            };
            put_string(&mut out, Some(&topic.name));
            let (code, message) = checked.map_or_else(|(c, m)| (c, Some(m)), |()| (NONE, None));
            out.extend_from_slice(&code.to_be_bytes());
            if self.version >= 1 {
                put_string(&mut out, message.as_deref());
            }
        }
        out
    }
}

/// Why Kafka refuses a topic name (its `Topic.validate`), or None.
fn invalid_name(name: &str) -> Option<&'static str> {
    if name.is_empty() || name == "." || name == ".." {
        Some("it must not be empty, '.' or '..'")
    } else if name.len() > 249 {
        Some("it is longer than 249 characters")
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
        Some("it may contain only ASCII letters, digits, '.', '_' and '-'")
    } else {
        None
    }
}

#[cfg(test)]
pub(crate) mod tests;
