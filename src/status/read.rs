//! Reading partition 0 (and, for a group of roles, every role's partition)
//! from outside the group: a consumer that assigns itself the partitions
//! (it never joins the group) and catches up on their newest records, for `status`, `yield`, `pause`, `resume` and the
//! `--never-lead` member.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::probe::Probe;
use super::view::View;
use super::{fail, rejected, Stop};
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::printable::printable;

/// How many of the newest records to read: with a 500 ms interval, about
/// half an hour of history, which is plenty to find the current leader.
const HISTORY: i64 = 4096;

/// A reader of partition 0 outside the group, caught up to its end.
/// Under a fleet crontab (partition 0 names a job), the view's roles are
/// every partition of the topic: its records say the seats their writer
/// has, and a partition added for a new job may not be one of them yet.
pub(super) fn read_partition(target: &Target) -> Result<(BaseConsumer<Probe>, View), Stop> {
    let (consumer, mut views) = read_partitions(target, 1)?;
    let mut view = views.remove(0);
    if view.placed.is_some() {
        view.roles = view.roles.max(topic_partitions(&consumer, target)).filter(|&n| n > 1);
    }
    Ok((consumer, view))
}

/// The roles of a group whose partition 0 says `view`, and its topic's
/// partitions (`partitions` asks the metadata, only of a group of roles);
/// None: a single leader's group. A group of roles is one that partition
/// 0's newest record says, or a live member's (a member of another
/// --roles may have written last); a crontab of one job is one too, for
/// its job's name. Every partition of the topic is a role's: a member of
/// fewer roles holds some of them and runs none (findings R-2).
pub(super) fn shape(view: &View, partitions: impl FnOnce() -> Option<u32>) -> Option<(u32, Option<u32>)> {
    let now = crate::clock::wall_ms();
    let said = view.writers.iter().filter(|w| w.live(now) && w.roles > 1).map(|w| w.roles).max();
    let roles = view.roles.max(said).or(view.placed.as_ref().map(|_| 1))?;
    let partitions = partitions();
    Some((roles.max(partitions.unwrap_or(0)), partitions))
}

/// How many partitions the group's topic has, if the metadata says.
pub(super) fn topic_partitions(consumer: &BaseConsumer<Probe>, target: &Target) -> Option<u32> {
    let md = consumer.fetch_metadata(Some(&target.topic), Duration::from_secs(2)).ok()?;
    partitions_in(&md, target)
}

/// How many partitions `md` lists for the group's topic (None: not listed).
fn partitions_in(md: &rdkafka::metadata::Metadata, target: &Target) -> Option<u32> {
    let partitions = md.topics().iter().find(|t| t.name() == target.topic)?.partitions().len();
    u32::try_from(partitions).ok().filter(|&n| n > 0)
}

/// How `status` reads a topic: from outside the group, assigned, to its
/// end. librdkafka wants a group for assign(); assign() never joins it.
pub(super) fn reader_config(target: &Target) -> rdkafka::ClientConfig {
    let group = format!("{}.status", target.group);
    target.client_config(&[
        ("group.id", &group),
        ("enable.auto.commit", "false"),
        ("enable.partition.eof", "true"),
        ("fetch.wait.max.ms", "100"),
    ])
}

/// A reader of partitions 0 to `n - 1` outside the group (one per role of
/// a group of `n` roles), each caught up to its end: a view of each.
pub(super) fn read_partitions(target: &Target, n: u32) -> Result<(BaseConsumer<Probe>, Vec<View>), Stop> {
    let config = reader_config(target);
    let consumer: BaseConsumer<Probe> = match config.create_with_context(Probe::new(target)) {
        Ok(c) => c,
        Err(e) => return Err(rejected(e, target)),
    };
    let probe = consumer.context();
    // Asked in short rounds: a failed login shows between two of them.
    let until = Instant::now() + Duration::from_secs(5);
    let marks = loop {
        let marks = consumer.fetch_watermarks(&target.topic, 0, Duration::from_secs(1));
        if marks.is_ok() {
            break marks;
        }
        // librdkafka reports why (e.g. a failed login) as an event that only
        // polling serves to the context.
        for _ in 0..5 {
            if consumer.poll(Duration::from_millis(100)).is_none() || probe.fatal.lock().expect("probe lock").is_some()
            {
                break;
            }
        }
        let unknown = matches!(
            marks,
            Err(KafkaError::MetadataFetch(
                RDKafkaErrorCode::UnknownPartition | RDKafkaErrorCode::UnknownTopicOrPartition
            ) | KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownTopicOrPartition))
        );
        // A partition without a leader is unknown too (a broker's crash,
        // a leader moving): the topic the metadata lists is asked again.
        let gone = unknown && topic_partitions(&consumer, target).is_none();
        if gone || probe.fatal.lock().expect("probe lock").is_some() || Instant::now() >= until {
            break marks;
        }
    };
    let (low, high) = match marks {
        Ok(marks) => marks,
        Err(
            KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownPartition)
            | KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownTopicOrPartition)
            | KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownTopicOrPartition),
        ) if probe.fatal.lock().expect("probe lock").is_none() => {
            // A topic we may not see has no partitions either: tell that apart.
            let md = consumer.fetch_metadata(Some(&target.topic), Duration::from_secs(2)).ok();
            let denied = md.as_ref().and_then(|md| {
                let code = md.topics().first()?.error().map(RDKafkaErrorCode::from)?;
                crate::kafka::fatal(
                    code,
                    format!("Kafka denied access: topic {}: {code}", target.topic),
                    &target.topic,
                    &target.group,
                )
            });
            if let Some(fatal) = denied {
                return fail(fatal.kind, printable(&fatal.message));
            }
            let (topic, group) = (printable(&target.topic), printable(&target.group));
            if md.as_ref().and_then(|md| partitions_in(md, target)).is_some() {
                let why = "offline, or its leader moving between brokers: try again";
                return fail(Kind::Unavailable, format!("partition 0 of {topic} has no leader ({why})"));
            }
            return fail(Kind::NoLeader, format!("no topic {topic}: no member of group {group} has run yet"));
        }
        Err(e) => {
            return Err(probe.failure(format!(
                "cannot read {} from {}: {e}",
                printable(&target.topic),
                printable(&target.brokers)
            )))
        }
    };

    let mut marks = vec![(low, high)];
    for partition in 1..i32::try_from(n).unwrap_or(1) {
        let more = consumer.fetch_watermarks(&target.topic, partition, Duration::from_secs(5));
        marks.push(more.map_err(|e| probe.failure(format!("cannot read {}: {e}", printable(&target.topic))))?);
    }
    let mut tpl = TopicPartitionList::new();
    for (partition, &(low, high)) in (0..).zip(&marks) {
        tpl.add_partition_offset(&target.topic, partition, Offset::Offset(low.max(high - HISTORY)))
            .map_err(|e| Failure::new(Kind::Internal, e.to_string()))?;
    }
    consumer.assign(&tpl).map_err(|e| Failure::new(Kind::Internal, e.to_string()))?;
    // Catch up to the end of each as it was when we started.
    let mut views: Vec<View> = marks.iter().map(|_| View::default()).collect();
    let mut behind: Vec<bool> = marks.iter().map(|&(low, high)| high > low).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    // librdkafka reconnects after a dropped connection (a loaded broker, a
    // socket timeout) and says so as an error: only a fatal one, or no
    // catching up by the deadline, fails the reading.
    let mut last = None;
    while behind.contains(&true) && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                let Ok(p) = usize::try_from(msg.partition()) else { continue };
                let (Some(view), Some(&(_, high))) = (views.get_mut(p), marks.get(p)) else { continue };
                view.read(msg.payload(), msg.offset());
                behind[p] = msg.offset() + 1 < high;
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                if let Some(behind) = usize::try_from(p).ok().and_then(|p| behind.get_mut(p)) {
                    *behind = false;
                }
            }
            Some(Err(e)) if probe.fatal.lock().expect("probe lock").is_some() => {
                return Err(probe.failure(format!("reading {}: {e}", printable(&target.topic))))
            }
            Some(Err(e)) => last = Some(e),
            None => {}
        }
    }
    if behind.contains(&true) {
        let topic = printable(&target.topic);
        return Err(probe.failure(match last {
            Some(e) => format!("reading {topic}: {e}"),
            None => format!("reading {topic}: not caught up to its end within 10 s"),
        }));
    }
    if let Some(view) = views.first_mut() {
        super::roster::merge(target, view);
    }
    Ok((consumer, views))
}
