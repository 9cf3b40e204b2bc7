//! `neli-run history`: the group's runs, read from its runs topic by a
//! consumer that assigns itself the partitions (it never joins the group).
//!
//! It reads back from the end in growing windows until it has `--limit`
//! runs (or has passed `--since`), pairs each run's start
//! and end by the run's id, and prints them oldest first, so that the
//! newest is the line nearest the prompt. A run with a start and no end is
//! running, unless a newer run of the same role or job has started since,
//! or (`--job`) the job's owner now runs under another token: then its
//! member died with it or lost the job, and no end will come ("no end").

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tracing::debug;

use super::render::{json, text};
use super::{topic_of, Event, RunRecord};
use crate::cli::HistoryArgs;
use crate::clock::wall_ms;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::printable::printable;

/// Runs `neli-run history` (and `cron history JOB`, its view of one job).
pub fn main(args: HistoryArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    let since = args.shown.since.as_deref().map(since_ms).transpose()?;
    let target = Target::from_args(args.kafka, env_properties)?;
    let filter = Filter { role: args.role, job: args.job, since, until: None };
    let runs = read(&target, &filter, args.shown.limit);
    // A crontab's job: what its partition of the group's topic says now
    // (its owner, pause, next due time), read after its runs.
    let job = filter.job.as_deref().map(|job| crate::status::job_now(&target, job));
    let mut runs = match (runs, &job) {
        (Ok(runs), _) => runs,
        // No runs topic yet: a job that has not run, or (said below) none.
        (Err(no_topic), Some(_)) if no_topic.kind == Kind::NoLeader => Vec::new(),
        (Err(failure), _) => return Err(failure),
    };
    let job = match job.transpose() {
        Ok(job) => job,
        // A job no partition names now (its group long stopped) may still
        // have runs on the record; with none, the job's failure says why.
        Err(failure) if failure.kind == Kind::NoLeader && !runs.is_empty() => None,
        Err(failure) => return Err(failure),
    };
    if let Some(owner) = job.as_ref().map(|j| j.owner_token) {
        for run in runs.iter_mut().filter(|r| r.state == State::Running && Some(r.record.token) != owner) {
            run.state = State::NoEnd;
        }
    }
    let text = match args.shown.json {
        true => json(&target, &runs, job.as_ref()),
        false => text(&target, &filter, &runs, job.as_ref()),
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::new(Kind::Io, format!("cannot write to stdout: {e}"))),
    }
}

/// `--since`: a duration back from now, or an RFC 3339 time; wall ms.
pub(super) fn since_ms(given: &str) -> Result<u64, Failure> {
    if let Ok(back) = humantime::parse_duration(given) {
        return Ok(wall_ms().saturating_sub(u64::try_from(back.as_millis()).unwrap_or(u64::MAX)));
    }
    match chrono::DateTime::parse_from_rfc3339(given) {
        Ok(time) => Ok(u64::try_from(time.timestamp_millis()).unwrap_or(0)),
        Err(_) => Err(Failure::new(
            Kind::Usage,
            format!(
                "--since {}: neither a duration (90m, 2d) nor an RFC 3339 time (2026-11-29T08:00:00Z)",
                printable(given)
            ),
        )),
    }
}

/// Which runs to show.
pub(super) struct Filter {
    pub(super) role: Option<i32>,
    pub(super) job: Option<String>,
    pub(super) since: Option<u64>,
    /// Only the runs started before it (`logs --at`), wall ms.
    pub(super) until: Option<u64>,
}

impl Filter {
    pub(super) fn wants(&self, record: &RunRecord) -> bool {
        self.role.is_none_or(|role| record.role == role)
            && self.job.as_ref().is_none_or(|job| record.job.as_ref() == Some(job))
            && self.since.is_none_or(|since| record.start_ms >= since)
            && self.until.is_none_or(|until| record.start_ms < until)
    }
}

/// How a run ended, as far as the topic says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Ended,
    Running,
    /// No end, and a newer run of its role or job has started.
    NoEnd,
}

/// One run: its end record if written, else its start.
pub(super) struct Run {
    pub(super) record: RunRecord,
    pub(super) state: State,
}

/// The first records a window reads back from the end; it doubles until
/// enough runs are found.
const FIRST_WINDOW: i64 = 512;

/// How far members' clocks may disagree: `--since` reads back until a
/// record written this much before it. (Kafka's own search by time,
/// ListOffsets, is not on every broker: librdkafka's mock has none.)
const SKEW_MS: u64 = 60_000;

/// How long reading may take before `history` gives up.
const READ_WAIT: Duration = Duration::from_secs(30);

/// The runs `filter` wants, the newest `limit` (0: all), oldest first.
pub(super) fn read(target: &Target, filter: &Filter, limit: usize) -> Result<Vec<Run>, Failure> {
    let topic = topic_of(&target.topic);
    let consumer = consumer(target)?;
    let partitions = partitions(&consumer, target, &topic)?;
    let until = Instant::now() + READ_WAIT;
    let mut records = Vec::new();
    for partition in 0..partitions {
        let (low, high) = consumer
            .fetch_watermarks(&topic, partition, Duration::from_secs(5))
            .map_err(|e| failure(&consumer, format!("cannot read {}: {e}", printable(&topic))))?;
        let mut got: Vec<RunRecord> = Vec::new();
        let (mut from, mut window) = (high, FIRST_WINDOW.max(i64::try_from(limit).unwrap_or(0) * 4));
        while from > low {
            let earlier = from.saturating_sub(window).max(low);
            // The newest window is read to the partition's end, wherever
            // that is now (tansu 0.6 says a high watermark short of it).
            let end = (from < high).then_some(from);
            let mut more = read_range(&consumer, &topic, partition, (earlier, end), until)?;
            debug!(partition, from = earlier, to = from, records = more.len(), "read a window of the runs topic");
            // Written before --since (less a clock's skew): what comes
            // before it is older still.
            let passed = filter.since.is_some_and(|since| {
                more.iter().any(|r| r.end_ms.unwrap_or(r.start_ms).saturating_add(SKEW_MS) < since)
            });
            more.append(&mut got);
            got = more;
            from = earlier;
            window = window.saturating_mul(2);
            if passed || (limit > 0 && assemble(got.clone(), filter).len() >= limit) {
                break;
            }
        }
        records.extend(got);
    }
    let mut runs = assemble(records, filter);
    if limit > 0 && runs.len() > limit {
        runs.drain(..runs.len() - limit);
    }
    Ok(runs)
}

/// Pairs the records by run, keeps the runs `filter` wants, and says how
/// each ended; oldest start first.
pub(super) fn assemble(records: Vec<RunRecord>, filter: &Filter) -> Vec<Run> {
    let mut by_run: BTreeMap<String, (Option<RunRecord>, Option<RunRecord>)> = BTreeMap::new();
    for record in records.into_iter().filter(|r| filter.wants(r)) {
        let entry = by_run.entry(record.run.clone()).or_default();
        match record.event {
            Event::Start => entry.0 = Some(record),
            Event::End => entry.1 = Some(record),
        }
    }
    let mut runs: Vec<Run> = by_run
        .into_values()
        .filter_map(|(start, end)| match (start, end) {
            (_, Some(end)) => Some(Run { record: end, state: State::Ended }),
            (Some(start), None) => Some(Run { record: start, state: State::Running }),
            (None, None) => None,
        })
        .collect();
    runs.sort_by(|a, b| (a.record.start_ms, &a.record.run).cmp(&(b.record.start_ms, &b.record.run)));
    // A run with no end, and a newer start on its seat: it ended unseen.
    let mut newest: BTreeMap<(i32, Option<String>), u64> = BTreeMap::new();
    for run in runs.iter_mut().rev() {
        let seat = (run.record.role, run.record.job.clone());
        if run.state == State::Running && newest.get(&seat).is_some_and(|&newer| newer > run.record.start_ms) {
            run.state = State::NoEnd;
        }
        let at = newest.entry(seat).or_insert(0);
        *at = (*at).max(run.record.start_ms);
    }
    runs
}

/// The reader: a consumer that never joins (assign only).
pub(super) fn consumer(target: &Target) -> Result<BaseConsumer<Seen>, Failure> {
    let group = format!("{}.history", target.group);
    target
        .client_config(&[
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("enable.partition.eof", "true"),
            ("fetch.wait.max.ms", "100"),
        ])
        .create_with_context(Seen::new(target))
        .map_err(|e| crate::config::creation_error(e, target))
}

/// How many partitions the runs topic has; a missing topic is said as
/// what it means: no run recorded yet, or a wrong group.
pub(super) fn partitions(consumer: &BaseConsumer<Seen>, target: &Target, topic: &str) -> Result<i32, Failure> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let looked = consumer.fetch_metadata(Some(topic), Duration::from_secs(2));
        if let Some(fatal) = consumer.context().fatal.lock().expect("seen lock").clone() {
            return Err(fatal);
        }
        let code = match &looked {
            Ok(md) => match md.topics().iter().find(|t| t.name() == topic) {
                Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                    return Ok(i32::try_from(t.partitions().len()).unwrap_or(1))
                }
                Some(t) => t.error().map(RDKafkaErrorCode::from),
                None => None,
            },
            Err(e) => e.rdkafka_error_code(),
        };
        if let Some(fatal) = code.and_then(|code| denied(code, topic, target)) {
            return Err(fatal);
        }
        if code == Some(RDKafkaErrorCode::UnknownTopicOrPartition) {
            return Err(no_topic(consumer, target, topic));
        }
        if Instant::now() >= until {
            let why = looked.err().map_or_else(|| "no answer".to_string(), |e| e.to_string());
            return Err(failure(
                consumer,
                format!("cannot read {} from {}: {why}", printable(topic), printable(&target.brokers)),
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// No runs topic: whether the group's own topic is there says which of
/// no run yet and a wrong name it is.
fn no_topic(consumer: &BaseConsumer<Seen>, target: &Target, topic: &str) -> Failure {
    let group_topic = consumer.fetch_metadata(Some(&target.topic), Duration::from_secs(2)).ok().is_some_and(|md| {
        md.topics().iter().any(|t| t.name() == target.topic && t.error().is_none() && !t.partitions().is_empty())
    });
    let (topic, group, group_topic_name) = (printable(topic), printable(&target.group), printable(&target.topic));
    let message = match group_topic {
        true => format!(
            "no run recorded yet in group {group}: its topic {group_topic_name} is there, but no runs topic \
             ({topic}): none of its members has run its command since members record runs"
        ),
        false => format!(
            "no run recorded in group {group}: neither {topic} nor the group's topic {group_topic_name} exists. \
             Is the group's name right (as its members' -g; `neli-run status -g GROUP` finds a group that has \
             run), or its --topic?"
        ),
    };
    Failure::new(Kind::NoLeader, message)
}

/// The records of `partition` from offset `range.0` to before `range.1`,
/// or to its end (those it cannot read as a run's record are skipped).
fn read_range(
    consumer: &BaseConsumer<Seen>,
    topic: &str,
    partition: i32,
    (from, to): (i64, Option<i64>),
    until: Instant,
) -> Result<Vec<RunRecord>, Failure> {
    let mut records = Vec::new();
    if to.is_some_and(|to| from >= to) {
        return Ok(records);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(from)).map_err(|e| internal(&e))?;
    consumer.assign(&tpl).map_err(|e| internal(&e))?;
    let mut last = None;
    loop {
        if Instant::now() >= until {
            let why = last.map_or_else(|| "not read to its end in time".to_string(), |e: KafkaError| e.to_string());
            return Err(failure(consumer, format!("reading {}: {why}", printable(topic))));
        }
        match consumer.poll(Duration::from_millis(200)) {
            // Past the window (or the record after a gap of offsets with
            // no record, such as a transaction's markers).
            Some(Ok(msg)) if to.is_some_and(|to| msg.offset() >= to) => break,
            Some(Ok(msg)) => match msg.payload().map(serde_json::from_slice::<RunRecord>) {
                Some(Ok(record)) => records.push(record),
                _ => debug!(offset = msg.offset(), "not a run's record; skipped"),
            },
            // Only the read to the end stops at the end: an earlier
            // window's, still queued, says nothing of this one.
            Some(Err(KafkaError::PartitionEOF(p))) if p == partition && to.is_none() => break,
            Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Err(e)) => {
                if let Some(fatal) = consumer.context().fatal.lock().expect("seen lock").clone() {
                    return Err(fatal);
                }
                last = Some(e);
            }
            None => {}
        }
    }
    Ok(records)
}

pub(super) fn internal(e: &KafkaError) -> Failure {
    Failure::new(Kind::Internal, e.to_string())
}

/// A failure to read: the fatal error librdkafka reported meanwhile if
/// any, else Kafka unreachable.
pub(super) fn failure(consumer: &BaseConsumer<Seen>, what: String) -> Failure {
    let seen = consumer.context();
    if let Some(fatal) = seen.fatal.lock().expect("seen lock").clone() {
        return fatal;
    }
    match seen.last.lock().expect("seen lock").as_deref() {
        Some(last) if !what.contains(last) => Failure::new(Kind::Unavailable, format!("{what} ({})", printable(last))),
        _ => Failure::new(Kind::Unavailable, what),
    }
}

/// A refusal of the runs topic, and the ACL that reading it needs.
fn denied(code: RDKafkaErrorCode, topic: &str, target: &Target) -> Option<Failure> {
    let what = format!("Kafka denied access: topic {}: {code}", printable(topic));
    let mut fatal = crate::kafka::fatal(code, what, topic, &target.group)?;
    if code == RDKafkaErrorCode::TopicAuthorizationFailed {
        fatal.message = format!(
            "Kafka denied access to topic {t} ({code}). `history` needs READ and DESCRIBE on it: kafka-acls.sh \
             --add --allow-principal User:... --operation Read --operation Describe --topic {t}",
            t = printable(topic)
        );
    }
    Some(fatal)
}

/// The reader's context: librdkafka's chatter at debug level, and the
/// errors it reports only there kept (a failed login reads as one).
pub(super) struct Seen {
    topic: String,
    group: String,
    pub(super) fatal: Mutex<Option<Failure>>,
    last: Mutex<Option<String>>,
}

impl Seen {
    fn new(target: &Target) -> Seen {
        Seen {
            topic: topic_of(&target.topic),
            group: target.group.clone(),
            fatal: Mutex::new(None),
            last: Mutex::new(None),
        }
    }
}

impl ClientContext for Seen {
    fn log(&self, _: RDKafkaLogLevel, fac: &str, message: &str) {
        debug!(target: "librdkafka", "{fac} {message}");
    }

    fn error(&self, err: KafkaError, reason: &str) {
        debug!(target: "librdkafka", %err, "{reason}");
        let Some(code) = err.rdkafka_error_code() else { return };
        match crate::kafka::fatal(code, format!("{err}: {reason}"), &self.topic, &self.group) {
            Some(fatal) => {
                self.fatal
                    .lock()
                    .expect("seen lock")
                    .get_or_insert(Failure::new(fatal.kind, printable(&fatal.message)));
            }
            None => *self.last.lock().expect("seen lock") = Some(reason.to_string()),
        }
    }
}

impl ConsumerContext for Seen {}
