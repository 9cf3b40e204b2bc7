//! The roster (docs/hot-set.md, slice 3): cold members' candidacies are on
//! a topic of their own, `<topic>.roster`, not on partition 0. `status`
//! (and `yield --to`, `drain`, which read what it reads) reads its newest
//! records too, so that it lists cold members as it lists hot ones. A
//! roster that does not exist (no member has gone cold, or every member
//! predates it) or that we may not read lists none of them, said on
//! stderr.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::view::View;
use crate::config::Target;
use crate::kafka::candidacy;
use crate::kafka::roster::{topic_of, TAIL};

/// Takes the roster's candidacies into `view` (partition 0's): each one
/// newer than what `view` knows of its writer's name.
pub(super) fn merge(target: &Target, view: &mut View) {
    for c in read(target) {
        view.roster(c);
    }
}

/// The roster's newest records that are candidacies, oldest first; none if
/// it cannot be read (said on stderr unless it does not exist).
fn read(target: &Target) -> Vec<candidacy::Record> {
    let topic = topic_of(&target.topic);
    let config = super::read::reader_config(target);
    let Ok(consumer): Result<BaseConsumer, _> = config.create() else { return Vec::new() };
    let (low, high) = match consumer.fetch_watermarks(&topic, 0, Duration::from_secs(5)) {
        Ok(marks) => marks,
        Err(err) => {
            if !unknown(&err) {
                crate::stderr::line(format_args!(
                    "warning: cannot read the roster {} (cold standbys are not listed): {err}",
                    crate::printable::printable(&topic)
                ));
            }
            return Vec::new();
        }
    };
    let mut tpl = TopicPartitionList::new();
    if high <= low
        || tpl.add_partition_offset(&topic, 0, Offset::Offset(low.max(high - TAIL))).is_err()
        || consumer.assign(&tpl).is_err()
    {
        return Vec::new();
    }
    let mut read = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                read.extend(msg.payload().and_then(candidacy::Record::decode));
                if msg.offset() + 1 >= high {
                    break;
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(_)) | None => {}
        }
    }
    read
}

/// Whether `err` says the roster does not exist.
fn unknown(err: &KafkaError) -> bool {
    use rdkafka::error::RDKafkaErrorCode::*;
    matches!(
        err,
        KafkaError::MetadataFetch(UnknownPartition | UnknownTopicOrPartition)
            | KafkaError::OffsetFetch(UnknownTopicOrPartition | UnknownPartition)
    )
}
