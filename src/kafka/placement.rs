//! Where a fleet crontab's jobs sit (`--crontab`): each job on a partition
//! of its own, the same one for every member whose file has it, before the
//! member joins the group.
//!
//! The topic itself says which job a partition holds: the first *claim* on
//! a partition that held no job places it there, and every record that a
//! seat writes on it afterwards carries the name forward (`Record::job`),
//! so that the placement outlives the claim when the topic's retention
//! drops it; of the records read, the name most of them carry counts
//! (`held`: one forged record does not move a job). A member reads the newest records of every partition, finds
//! its jobs already placed, claims a free partition for each job that is
//! not, and reads again: a claim that lost (another job's came first on
//! that partition) tries the next free one. Jobs are placed once and stay:
//! adding or removing one moves no other, whatever order the files list
//! them in, and a job in only some files is placed like any other.
//!
//! A topic without a free partition for a new job gets one added for it
//! (`topic::add_partitions`); where Kafka refuses that (ACLs, a broker
//! without CreatePartitions), the job is refused with the command that
//! adds one. Kafka never removes a partition.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tracing::{info, warn};

use super::heartbeat::{Heartbeat, Member};
use super::{fatal, topic, Settings};
use crate::clock::{wall_ms, BootTime};
use crate::config::creation_error;
use crate::exit::{Failure, Kind};
use crate::leader::Partition;
use crate::printable::printable;

/// How many of each partition's newest records say what it holds: a
/// seat's every record names its job, so the newest few always do.
const NEWEST: i64 = 64;

/// How long one round of reading may take before it is tried again.
const ROUND: Duration = Duration::from_secs(10);

/// How many times one claim is written before its absence is an error.
const CLAIMS: u32 = 3;

/// Places `jobs` (names, each once) on the group's topic (its claims
/// written by a fresh incarnation of the member `s` names), creating it with
/// a partition per job if it is missing; returns each job's partition and
/// the topic's partition count (every partition is a seat).
pub fn place(s: &Settings, jobs: &[String]) -> Result<(BTreeMap<String, Partition>, i32), Failure> {
    let topic = &s.target.topic;
    let group = format!("{}.placement", s.target.group);
    let consumer: BaseConsumer<Quiet> = s
        .target
        .client_config(&[
            ("client.id", &s.client_id),
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("enable.partition.eof", "true"),
            ("fetch.wait.max.ms", "100"),
        ])
        .create_with_context(Quiet)
        .map_err(|e| creation_error(e, &s.target))?;
    let producer: BaseProducer<Quiet> = s
        .target
        .client_config(&[("client.id", &s.client_id), ("acks", "all"), ("linger.ms", "0")])
        .create_with_context(Quiet)
        .map_err(|e| creation_error(e, &s.target))?;
    let claimer = Member::this_process(s.client_id.clone());
    // The claim written last and how many rounds in a row it was: one
    // that never shows on its partition was never written (a write Kafka
    // refused, e.g. without WRITE on the topic).
    let mut unseen: (Option<(String, Partition)>, u32) = (None, 0);
    // The partition count asked for last, and how many rounds in a row.
    let mut grown: (i32, u32) = (0, 0);
    loop {
        let partitions = partitions(s, &consumer, jobs.len())?;
        let read = read(&consumer, (topic, &s.target.group), partitions);
        // No fetch between rounds: one held open by the broker would hold
        // the next round's offset requests behind it (100 ms a partition).
        let _ = consumer.unassign();
        let Some(held) = read? else {
            warn!(topic = %printable(topic), "could not read the topic to its end to place the crontab's jobs; trying again");
            continue;
        };
        let plan = plan(&held, jobs);
        if plan.claim.is_none() && plan.short == 0 {
            for (job, partition) in &plan.placed {
                info!(job = %printable(job), partition, "job placed");
            }
            return Ok((plan.placed, partitions));
        }
        if plan.short > 0 {
            let needed = partitions.saturating_add(i32::try_from(plan.short).unwrap_or(i32::MAX));
            grown = in_a_row(grown, needed);
            let added = topic::add_partitions(s, needed);
            match added {
                // Placed in the next round, on the new partitions; or they
                // are there already, another member's (read again). Not
                // there after CLAIMS rounds: refused.
                Ok(()) | Err(RDKafkaErrorCode::InvalidPartitions) if grown.1 <= CLAIMS => continue,
                added => {
                    let why = added.map_or_else(|code| code.to_string(), |()| "they never showed".into());
                    let denied = added.is_err_and(|code| super::fatal_kind(code) == Some(Kind::Denied));
                    return Err(Failure::new(
                        if denied { Kind::Denied } else { Kind::KafkaConfig },
                        format!(
                            "topic {t} has {partitions} partition(s), each holding a job, and {short} job(s) of the \
                             crontab have none yet (a job is placed on a partition of its own, and stays there); \
                             adding them failed ({why}). Add them (kafka-topics.sh --bootstrap-server ... --alter \
                             --topic {t} --partitions {needed}; with ACLs, ALTER on the topic lets neli-run add \
                             them itself), or pass another --topic",
                            t = printable(topic),
                            short = plan.short
                        ),
                    ));
                }
            }
        }
        if let Some((job, partition)) = &plan.claim {
            unseen = in_a_row(unseen, Some((job.clone(), *partition)));
            if unseen.1 > CLAIMS {
                return Err(Failure::new(
                    Kind::Denied,
                    format!(
                        "cannot place job {} on topic {}: its claim on partition {partition}, written {CLAIMS} times, \
                         never showed there (may this principal WRITE to the topic? kafka-acls.sh --add \
                         --allow-principal User:... --operation Write --topic {})",
                        printable(job),
                        printable(topic),
                        printable(topic)
                    ),
                ));
            }
            info!(job = %printable(job), partition, "claiming a partition for the job");
            let value = claim_record(&claimer, job).encode();
            let record: BaseRecord<'_, (), [u8]> = BaseRecord::to(topic).partition(*partition).payload(&value);
            if let Err((err, _)) = producer.send(record) {
                // A partition just added, which the producer has not seen
                // yet (its metadata is its own): it learns it, and the
                // claim is made again in the next round.
                if err.rdkafka_error_code() == Some(RDKafkaErrorCode::UnknownPartition) {
                    warn!(partition, "the producer does not know the partition yet; reading the topic again");
                    let _ = producer.client().fetch_metadata(Some(topic), ROUND);
                    continue;
                }
                let what = format!("cannot write a claim to {}: {err}", printable(topic));
                return Err(Failure::new(Kind::Internal, what));
            }
        }
        if let Err(err) = super::flush(&producer, ROUND) {
            warn!(%err, "claims not acknowledged yet; reading the topic again");
        }
    }
}

/// `now` after `last` (a value and how many rounds in a row it was): the
/// count goes on if it is the same value, else starts again at 1.
fn in_a_row<T: PartialEq>(last: (T, u32), now: T) -> (T, u32) {
    match last {
        (value, n) if value == now => (value, n + 1),
        _ => (now, 1),
    }
}

/// The placement's clients' context: a partition read to its end is what a
/// round waits for, not an error (librdkafka also says it on the client's
/// own queue, which the default context logged as one, twice a round);
/// every other error is said, and the round that meets it reads again or
/// fails.
struct Quiet;

impl ClientContext for Quiet {
    fn error(&self, err: KafkaError, reason: &str) {
        match err.rdkafka_error_code() {
            Some(RDKafkaErrorCode::PartitionEOF) => {}
            _ => warn!(%err, %reason, "placing the crontab's jobs"),
        }
    }
}

impl ConsumerContext for Quiet {}

impl ProducerContext for Quiet {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
}

/// A claim on a partition for `job`, written by `claim` (an incarnation of
/// its own: no seat ever takes it for its own heartbeat).
fn claim_record(claim: &Member, job: &str) -> Heartbeat {
    let mut record = Heartbeat::new(
        claim,
        0,
        BootTime::now(),
        wall_ms(),
        super::heartbeat::Content {
            record: crate::leader::Record {
                job: Some(job.to_owned()),
                ..crate::leader::Record::saying(0, crate::leader::Stance::Released)
            },
            since_ms: None,
            deadline_ms: 0,
        },
    );
    record.run = None;
    record.claim = true;
    record
}

/// The topic's partition count, once it exists (created with one
/// partition per job when missing).
fn partitions(s: &Settings, consumer: &BaseConsumer<Quiet>, jobs: usize) -> Result<i32, Failure> {
    let topic = &s.target.topic;
    let mut said = false;
    loop {
        match consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) {
            Ok(md) => {
                let found = md.topics().iter().find(|t| t.name() == topic.as_str());
                match found.map(|t| (t.error().map(RDKafkaErrorCode::from), t.partitions().len())) {
                    Some((None, n)) if n > 0 => return Ok(i32::try_from(n).unwrap_or(i32::MAX)),
                    Some((Some(code), _)) if fatal(code, String::new(), topic, &s.target.group).is_some() => {
                        let what = format!("topic {}: {code}", printable(topic));
                        return Err(fatal(code, what, topic, &s.target.group).expect("fatal"));
                    }
                    _ => {
                        let sized = Settings {
                            seats: super::Seats {
                                known: (0..i32::try_from(jobs.max(1)).unwrap_or(1)).collect(),
                                every: true,
                            },
                            ..s.clone()
                        };
                        drop(topic::create_topic(&sized)?);
                    }
                }
            }
            Err(err) => {
                if !std::mem::replace(&mut said, true) {
                    warn!(%err, brokers = %s.target.brokers, "cannot reach Kafka to place the crontab's jobs; retrying");
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// What the newest records of each of the topic's `partitions` say it
/// holds (None: not read to the end within a round).
fn read(
    consumer: &BaseConsumer<Quiet>,
    (topic, group): (&str, &str),
    partitions: i32,
) -> Result<Option<Vec<Option<String>>>, Failure> {
    let internal = |e: KafkaError| Failure::new(Kind::Internal, format!("reading {}: {e}", printable(topic)));
    // Denied: said as such. Anything else (a broker restarting as we start,
    // a dropped connection) is read again in a new round.
    let again_unless_denied = |e: KafkaError| match e
        .rdkafka_error_code()
        .and_then(|code| fatal(code, format!("reading {topic}: {e}"), topic, group))
    {
        Some(fatal) => Err(fatal),
        None => Ok(None),
    };
    let mut ends = Vec::new();
    let mut tpl = TopicPartitionList::new();
    for partition in 0..partitions {
        let (low, high) = match consumer.fetch_watermarks(topic, partition, ROUND) {
            Ok(marks) => marks,
            Err(e) => return again_unless_denied(e),
        };
        tpl.add_partition_offset(topic, partition, Offset::Offset(low.max(high - NEWEST))).map_err(internal)?;
        ends.push(high);
    }
    consumer.assign(&tpl).map_err(internal)?;
    let mut records: Vec<Vec<Heartbeat>> = ends.iter().map(|_| Vec::new()).collect();
    let mut behind: Vec<bool> = ends.iter().map(|&high| high > 0).collect();
    let until = Instant::now() + ROUND;
    while behind.contains(&true) {
        if Instant::now() >= until {
            return Ok(None);
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                let Ok(p) = usize::try_from(msg.partition()) else { continue };
                if let (Some(list), Some(record)) = (records.get_mut(p), msg.payload().and_then(Heartbeat::decode)) {
                    list.push(record);
                }
                if let (Some(behind), Some(&high)) = (behind.get_mut(p), ends.get(p)) {
                    *behind = msg.offset() + 1 < high;
                }
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                if let Some(behind) = usize::try_from(p).ok().and_then(|p| behind.get_mut(p)) {
                    *behind = false;
                }
            }
            Some(Err(e)) => return again_unless_denied(e),
            None => {}
        }
    }
    Ok(Some(records.iter().map(|list| held(list)).collect()))
}

/// The job a partition holds, by its newest records in order: the name
/// most of the records that carry one carry (the newest of those tied),
/// else the first claim. A record that carries a name comes from a seat
/// that read the partition, so the holder's name outlives the claims (and
/// a losing claim left alone by retention); one record carrying another
/// name, written by anyone with WRITE on the topic, is outvoted by the
/// seats' own instead of placing the job again on another partition,
/// where it ran twice at one due time (audit E3).
fn held(records: &[Heartbeat]) -> Option<String> {
    let mut votes: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (at, record) in records.iter().enumerate().filter(|(_, r)| !r.claim) {
        if let Some(job) = &record.placed {
            let (count, newest) = votes.entry(job.as_str()).or_default();
            (*count, *newest) = (*count + 1, at);
        }
    }
    match votes.into_iter().max_by_key(|&(_, vote)| vote) {
        Some((job, _)) => Some(job.to_owned()),
        None => records.iter().find(|r| r.claim).and_then(|r| r.placed.clone()),
    }
}

/// Where each job goes, given what each partition holds.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    /// Jobs already placed, each on the lowest partition holding it.
    placed: BTreeMap<String, Partition>,
    /// The claim to write next, if a job is not placed yet: the first of
    /// them by name, on the lowest free partition.
    claim: Option<(String, Partition)>,
    /// Jobs not placed, when no partition is free.
    short: usize,
}

/// Claims go one at a time, each on the lowest partition that is free as
/// far as the claimer has read: so a job claims a partition only once
/// every lower one is held, and can never win two (its claim on the lower
/// one would have come after that one's holder's). Two claims of one
/// round, the second on the next free partition, could each win, with the
/// first partition then won by another member's claim of the second job.
/// Every member claims its jobs in the same order (by name), so members
/// with the same file claim the same job on the same partition at once.
fn plan(held: &[Option<String>], jobs: &[String]) -> Plan {
    let mut plan = Plan::default();
    let mut missing: Vec<&String> = Vec::new();
    for job in jobs {
        match (0..).zip(held).find(|(_, h)| h.as_deref() == Some(job.as_str())) {
            Some((partition, _)) => {
                plan.placed.insert(job.clone(), partition);
            }
            None => missing.push(job),
        }
    }
    missing.sort();
    let free = (0..).zip(held).find(|(_, h)| h.is_none()).map(|(p, _)| p);
    match (missing.first(), free) {
        (Some(job), Some(partition)) => plan.claim = Some(((*job).clone(), partition)),
        (Some(_), None) => plan.short = missing.len(),
        (None, _) => {}
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(placed: Option<&str>, claim: bool) -> Heartbeat {
        let me = Member { name: "m".into(), incarnation: "i".into(), host: "h".into(), pid: 1 };
        let mut r = claim_record(&me, placed.unwrap_or(""));
        r.placed = placed.map(str::to_owned);
        r.claim = claim;
        r
    }

    fn names(jobs: &[&str]) -> Vec<String> {
        jobs.iter().map(|j| j.to_string()).collect()
    }

    #[test]
    fn a_value_seen_again_counts_up_and_another_starts_at_one() {
        assert_eq!(in_a_row((0, 0), 3), (3, 1));
        assert_eq!(in_a_row((3, 1), 3), (3, 2));
        assert_eq!(in_a_row((3, 2), 4), (4, 1));
        assert_eq!(in_a_row((None, 0), Some("a")), (Some("a"), 1));
    }

    #[test]
    fn of_claims_the_first_counts_and_a_carrying_record_outlives_them() {
        assert_eq!(held(&[]), None);
        assert_eq!(held(&[record(None, false)]), None, "a seat that knows of no job");
        assert_eq!(held(&[record(Some("a"), true), record(Some("b"), true)]).as_deref(), Some("a"));
        // The winning claim dropped by retention, the loser's kept: the
        // seat's records carried the winner.
        let kept = [record(Some("b"), true), record(Some("a"), false), record(None, false)];
        assert_eq!(held(&kept).as_deref(), Some("a"));
        // One record carrying another name (a forged one, audit E3), the
        // newest or the oldest read, is outvoted by the seats' records; a
        // forged claim after them counts for nothing.
        let mut seats = vec![record(Some("a"), false); 3];
        seats.push(record(Some("other"), false));
        assert_eq!(held(&seats).as_deref(), Some("a"));
        seats.rotate_right(1);
        assert_eq!(held(&seats).as_deref(), Some("a"));
        seats.push(record(Some("other"), true));
        assert_eq!(held(&seats).as_deref(), Some("a"));
        // Tied: the newest.
        assert_eq!(held(&[record(Some("a"), false), record(Some("b"), false)]).as_deref(), Some("b"));
    }

    #[test]
    fn a_job_placed_stays_and_one_new_job_at_a_time_claims_the_lowest_free_partition() {
        let held = vec![Some("b".to_string()), None, Some("a".to_string()), None];
        let p = plan(&held, &names(&["a", "e", "b", "c"]));
        assert_eq!(p.placed, BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 0)]));
        assert_eq!(p.claim, Some(("c".to_string(), 1)), "c before e, whatever the file's order");
        let placed = p.placed;
        assert_eq!(plan(&held, &names(&["a", "b"])), Plan { placed, claim: None, short: 0 });
        let p = plan(&[Some("a".to_string())], &names(&["a", "d", "c"]));
        assert_eq!((p.claim, p.short), (None, 2), "no partition left for c and d");
    }

    #[test]
    fn a_job_placed_twice_runs_on_the_lowest_partition_only() {
        let held = vec![None, Some("a".to_string()), Some("a".to_string())];
        assert_eq!(plan(&held, &names(&["a"])).placed, BTreeMap::from([("a".to_string(), 1)]));
    }
}
