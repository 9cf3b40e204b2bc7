//! The group's topic: found, or created as Kafka creates it (CreateTopics:
//! one partition per role, an hour's retention), naming the ACL a denial
//! lacks; one with fewer partitions than the roles is refused, and so is
//! one with more under `--roles` above 1.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication, TopicResult};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaResult, RDKafkaErrorCode};
use tracing::{debug, error, info, warn};

use super::context::ReaderContext;
use super::{fatal, fatal_kind, Joined, Settings};
use crate::config::creation_error;
use crate::exit::{Failure, Kind};

/// Makes sure the topic exists: metadata first (any broker), CreateTopics
/// when missing. Retries while Kafka is unreachable. Returns the thread that
/// drops the admin client, if one created the topic.
pub(super) fn ensure_topic(s: &Settings, consumer: &BaseConsumer<ReaderContext>) -> Result<Option<Joined>, Failure> {
    let mut admin = None;
    // A topic with more partitions than --roles is looked at twice, a
    // second apart, before the member is refused: one metadata answer can
    // be wrong for a moment just after the topic was made.
    let mut rechecked = false;
    loop {
        if let Some(fatal) = consumer.context().reach.fatal.lock().expect("fatal lock").take() {
            return Err(fatal);
        }
        let metadata = consumer.fetch_metadata(Some(&s.target.topic), Duration::from_secs(5));
        match metadata {
            Ok(md) => {
                let Some(topic) = md.topics().iter().find(|t| t.name() == s.target.topic) else {
                    continue;
                };
                match topic.error().map(RDKafkaErrorCode::from) {
                    None if !topic.partitions().is_empty() => {
                        let (has, used) = (topic.partitions().len(), partitions_used(s));
                        if has < used {
                            return Err(too_few(&s.target.topic, has, used));
                        }
                        if has > used && used > 1 && !s.seats.every {
                            if !rechecked {
                                rechecked = true;
                                std::thread::sleep(Duration::from_secs(1));
                                continue;
                            }
                            return Err(too_many(&s.target.topic, has, used));
                        }
                        if has > used {
                            warn!(topic = %s.target.topic, partitions = has, uses = used, "topic has more partitions than this member uses; Kafka assigns the others too, and a member holding them runs nothing there");
                        }
                        consumer.context().reach.reachable();
                        return Ok(admin);
                    }
                    None
                    | Some(RDKafkaErrorCode::UnknownTopicOrPartition)
                    | Some(RDKafkaErrorCode::LeaderNotAvailable) => {
                        admin = create_topic(s)?.or(admin);
                    }
                    Some(code) => {
                        if let Some(fatal) =
                            fatal(code, format!("topic {}: {code}", s.target.topic), &s.target.topic, &s.target.group)
                        {
                            return Err(fatal);
                        }
                        debug!(%code, "topic metadata error; retrying");
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            }
            Err(err) => {
                if let Some(fatal) =
                    err.rdkafka_error_code().and_then(|c| fatal(c, err.to_string(), &s.target.topic, &s.target.group))
                {
                    return Err(fatal);
                }
                consumer.context().reach.unreachable(&err.to_string());
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// How many partitions the group's topic needs: up to the highest of the
/// seats' partitions and the control partition (1 with the one seat).
fn partitions_used(s: &Settings) -> usize {
    let control = super::CONTROL_PARTITION;
    let highest = s.seats.known.iter().copied().chain([control]).max().unwrap_or(control);
    usize::try_from(highest).map_or(1, |h| h + 1)
}

/// The topic exists with fewer partitions than the roles need: one per
/// role, role j on partition j. Kafka can add partitions, never remove them.
fn too_few(topic: &str, has: usize, used: usize) -> Failure {
    Failure::new(
        Kind::KafkaConfig,
        format!(
            "topic {topic} has {has} partition(s), and --roles {used} needs {used} (role j is elected on partition \
             j). Add them (kafka-topics.sh --bootstrap-server ... --alter --topic {topic} --partitions {used}), \
             or run with --roles {has} or fewer, or pass another --topic"
        ),
    )
}

/// The topic has more partitions than `--roles` (above 1) uses: Kafka
/// would assign the others as well, and the member holding them runs
/// nothing there, so the roles would not spread (findings R-3). Refused: a
/// member of another group's size, or of the group's old `--roles` after
/// its partitions were raised for a new one (a rollout), is not one to
/// run. Kafka cannot remove partitions.
fn too_many(topic: &str, has: usize, used: usize) -> Failure {
    Failure::new(
        Kind::KafkaConfig,
        format!(
            "topic {topic} has {has} partitions, and --roles {used} uses {used} (role j is elected on partition j): \
             Kafka would assign the other {extra} to the members too, and a member holding them runs nothing \
             there, so the roles would not spread. If the group now runs --roles {has}, run this member with \
             --roles {has} too (a change of --roles is a rollout: docs/operations.md, \"Changing --roles\"); \
             otherwise give this group a topic of its own (--topic, or another --group), or delete the topic once \
             no member runs (kafka-topics.sh --bootstrap-server ... --delete --topic {topic})",
            extra = has - used
        ),
    )
}

/// Adds partitions to the topic, up to `count` in all (CreatePartitions,
/// as `kafka-topics.sh --alter --partitions` does): a fleet crontab's new
/// job takes one of its own. INVALID_PARTITIONS says the topic has as
/// many already (two members reading one new file race to add them).
pub(super) fn add_partitions(s: &Settings, count: i32) -> Result<(), RDKafkaErrorCode> {
    info!(topic = %s.target.topic, partitions = count, "adding partitions to the topic for the crontab's new jobs");
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        s.target.client_config(&[("client.id", &s.client_id)]).create().map_err(|e| {
            error!(%e, "no admin client to add partitions with");
            RDKafkaErrorCode::Fail
        })?;
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let wanted = NewPartitions::new(&s.target.topic, usize::try_from(count).unwrap_or(1));
    // Placement runs on one of tokio's blocking threads, where the
    // runtime's handle may block on a future.
    let result = tokio::runtime::Handle::current().block_on(admin.create_partitions([&wanted], &opts));
    refusal(result).map_or(Ok(()), Err)
}

/// Why Kafka refused an admin request about our one topic, if it did.
pub(super) fn refusal(result: KafkaResult<Vec<TopicResult>>) -> Option<RDKafkaErrorCode> {
    match result {
        Ok(results) => results.into_iter().next()?.err().map(|(_, code)| code),
        Err(err) => Some(err.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
    }
}

/// Creates the topic; returns the thread that drops the admin client.
/// Dropping one joins its polling thread, which wakes every 100 ms: that
/// wait is not for the first election to make.
pub(super) fn create_topic(s: &Settings) -> Result<Option<Joined>, Failure> {
    info!(topic = %s.target.topic, partitions = partitions_used(s), "creating the topic (1 hour retention)");
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        s.target.client_config(&[("client.id", &s.client_id)]).create().map_err(|e| creation_error(e, &s.target))?;
    create_topic_with(s, &admin)?;
    // Should the thread not start, the admin client is dropped here.
    Ok(Joined::spawn("neli-admin", move |_, _| drop(admin)).ok())
}

fn create_topic_with(s: &Settings, admin: &AdminClient<rdkafka::client::DefaultClientContext>) -> Result<(), Failure> {
    let (topic, n) = (&s.target.topic, partitions_used(s));
    // Kafka::connect runs on one of tokio's blocking threads (shell/mod.rs),
    // where the runtime's handle may block on a future.
    let runtime = tokio::runtime::Handle::current();
    let configs = [("retention.ms", "3600000"), ("segment.ms", "600000")];
    match create(admin, &runtime, topic, i32::try_from(n).unwrap_or(1), &configs) {
        Created::Made => Ok(()),
        Created::Denied(code) => {
            Err(Failure::new(Kind::Denied, format!("{}.", may_not_create(topic, code, n, 3_600_000))))
        }
        Created::Refused(code) => {
            error!(topic = %topic, %code, "could not create the topic");
            Err(Failure::new(
                Kind::KafkaConfig,
                format!(
                    "topic {topic} does not exist and could not be created ({code}). Create it with {n} \
                     partition(s) (kafka-topics.sh --create --topic {topic} --partitions {n}) or pass --topic."
                ),
            ))
        }
    }
}

/// How a CreateTopics of one topic came out.
pub enum Created {
    /// Made, by this request or by another member's before it.
    Made,
    /// This principal may not create it (an authorization or login failure).
    Denied(RDKafkaErrorCode),
    /// Any other refusal.
    Refused(RDKafkaErrorCode),
}

/// Creates `topic` with `partitions` and `configs` as a member makes its
/// topics (the group's and the runs topic alike): replication by the
/// broker's default (-1, KIP-464), 1 where the broker takes no default;
/// a topic already there counts as made. Blocks on `runtime`.
pub fn create(
    admin: &AdminClient<rdkafka::client::DefaultClientContext>,
    runtime: &tokio::runtime::Handle,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Created {
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let mut replication = -1; // the broker's default.replication.factor (KIP-464)
    loop {
        let new = configs
            .iter()
            .fold(NewTopic::new(topic, partitions, TopicReplication::Fixed(replication)), |t, (k, v)| t.set(k, v));
        let Some(code) = refusal(runtime.block_on(admin.create_topics([&new], &opts))) else { return Created::Made };
        match code {
            RDKafkaErrorCode::TopicAlreadyExists => return Created::Made,
            RDKafkaErrorCode::InvalidReplicationFactor | RDKafkaErrorCode::UnsupportedVersion if replication == -1 => {
                replication = 1;
            }
            code if fatal_kind(code) == Some(Kind::Denied) => return Created::Denied(code),
            code => return Created::Refused(code),
        }
    }
}

/// Why a topic was not made (`code`, a denial), and the remedy: an admin
/// creates it (`partitions`, `retention_ms`) or grants CREATE.
pub fn may_not_create(topic: &str, code: RDKafkaErrorCode, partitions: usize, retention_ms: u64) -> String {
    format!(
        "topic {t} does not exist and this principal may not create it ({code}). Ask an admin to create it \
         (kafka-topics.sh --create --topic {t} --partitions {partitions} --config retention.ms={retention_ms}) or \
         grant CREATE on it",
        t = crate::printable::printable(topic)
    )
}
