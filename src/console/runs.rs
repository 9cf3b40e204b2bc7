//! The console's runs: the runs topic (`<topic>.runs`, `crate::runs`)
//! followed by one consumer that assigns itself its partitions (it never
//! joins the group): read back from a day's worth of records at most, then
//! each new record as it comes. Start and end are paired by the run's id,
//! as `history` pairs them.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::clock::wall_ms;
use crate::config::Target;
use crate::exit::Failure;
use crate::runs::{Event, RunRecord};

/// How far back the first read goes, in records per partition: a day of
/// 50 jobs every minute is 144,000 records (a start and an end per run).
const BACK: i64 = 200_000;

/// How long a run is kept: the day timeline, and a little.
const KEEP_MS: u64 = 25 * 3600 * 1000;

/// The most runs whose output is kept (the newest): outputs are bounded
/// by their members (`--keep-output`), not their count.
const OUTPUTS: usize = 500;

/// One run: its start and its end as far as read, and its output's tail
/// when its end record has one.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub start: Option<RunRecord>,
    pub end: Option<RunRecord>,
    /// The end record's `output` (text), or its `output_base64` said so.
    pub output: Option<String>,
}

impl Run {
    /// The newest record of the run (its end once written).
    pub fn record(&self) -> &RunRecord {
        self.end.as_ref().or(self.start.as_ref()).expect("a run has a record")
    }
}

/// The runs read so far, by id (the page reads them while the reader
/// reads on).
#[derive(Default)]
pub struct Store {
    pub runs: BTreeMap<String, Run>,
    outputs: VecDeque<String>,
    /// Why there are no runs (yet): the topic is missing, or unreadable.
    pub note: Option<String>,
}

/// The consumer that reads the runs topic.
pub struct Reader {
    topic: String,
    consumer: Option<BaseConsumer<Quiet>>,
    pub note: Option<String>,
}

impl Reader {
    /// The reader of the runs of the group whose topic is `group_topic`.
    pub fn new(group_topic: &str) -> Reader {
        Reader { topic: crate::runs::topic_of(group_topic), consumer: None, note: Some("not read yet".into()) }
    }

    /// Assigns the runs topic's partitions, once it is there (a group
    /// whose members have run nothing has none yet).
    pub fn open(&mut self, target: &Target) -> Result<(), Failure> {
        if self.consumer.is_some() {
            return Ok(());
        }
        let group = format!("{}.console", target.group);
        let consumer: BaseConsumer<Quiet> = target
            .client_config(&[
                ("group.id", &group),
                ("enable.auto.commit", "false"),
                ("enable.partition.eof", "true"),
                ("fetch.wait.max.ms", "500"),
            ])
            .create_with_context(Quiet)
            .map_err(|e| crate::config::creation_error(e, target))?;
        let topic = &self.topic;
        let partitions = match consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) {
            Ok(md) => {
                md.topics().iter().find(|t| t.name() == *topic && t.error().is_none()).map(|t| t.partitions().len())
            }
            Err(e) => {
                self.note = Some(format!("cannot read {topic}: {e}"));
                return Ok(());
            }
        };
        let Some(partitions) = partitions.filter(|&n| n > 0) else {
            self.note = Some(format!("no runs topic ({topic}) yet: no member has run its command"));
            return Ok(());
        };
        let mut tpl = TopicPartitionList::new();
        for p in 0..i32::try_from(partitions).unwrap_or(1) {
            let from = match consumer.fetch_watermarks(topic, p, Duration::from_secs(5)) {
                Ok((low, high)) => Offset::Offset(high.saturating_sub(BACK).max(low)),
                Err(_) => Offset::Beginning,
            };
            let _ = tpl.add_partition_offset(topic, p, from);
        }
        if let Err(e) = consumer.assign(&tpl) {
            self.note = Some(format!("cannot read {topic}: {e}"));
            return Ok(());
        }
        self.consumer = Some(consumer);
        self.note = None;
        Ok(())
    }

    /// The records that came within `wait` (up to 50,000: a day's catch-up
    /// takes a few rounds).
    pub fn poll(&mut self, wait: Duration) -> Vec<Vec<u8>> {
        let Some(consumer) = &self.consumer else { return Vec::new() };
        let mut wait = wait;
        let mut read = Vec::new();
        self.note = None;
        for _ in 0..50_000 {
            match consumer.poll(wait) {
                Some(Ok(msg)) => {
                    if let Some(payload) = msg.payload() {
                        read.push(payload.to_vec());
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) | None => break,
                Some(Err(e)) => {
                    self.note = Some(format!("reading {}: {e}", self.topic));
                    break;
                }
            }
            wait = Duration::ZERO;
        }
        read
    }
}

impl Store {
    /// Takes in what the reader read.
    pub fn take_all(&mut self, read: Vec<Vec<u8>>, note: Option<String>) {
        for payload in read {
            self.take(&payload);
        }
        self.note = note;
        self.prune(wall_ms());
    }

    /// Takes in one record (anything not a run's record is skipped).
    pub fn take(&mut self, payload: &[u8]) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(payload) else { return };
        let output = output_of(&value);
        let Ok(record) = serde_json::from_value::<RunRecord>(value) else { return };
        let id = record.run.clone();
        let run = self.runs.entry(id.clone()).or_default();
        match record.event {
            Event::Start => run.start = Some(record),
            Event::End => {
                run.end = Some(record);
                if output.is_some() {
                    run.output = output;
                    self.outputs.push_back(id);
                }
            }
        }
        while self.outputs.len() > OUTPUTS {
            let Some(old) = self.outputs.pop_front() else { break };
            if let Some(run) = self.runs.get_mut(&old) {
                run.output = None;
            }
        }
    }

    /// Drops the runs that ended (or started, if they never ended) more
    /// than a day ago.
    fn prune(&mut self, now: u64) {
        let old = now.saturating_sub(KEEP_MS);
        self.runs.retain(|_, run| {
            let r = run.record();
            r.end_ms.unwrap_or(r.start_ms) >= old
        });
    }
}

/// The reader's context: librdkafka's chatter (a partition's end, a
/// broker gone a moment) at debug level; what matters shows on the page.
pub struct Quiet;

impl ClientContext for Quiet {
    fn log(&self, _: RDKafkaLogLevel, fac: &str, message: &str) {
        tracing::debug!(target: "librdkafka", "{fac} {message}");
    }

    fn error(&self, err: KafkaError, reason: &str) {
        tracing::debug!(target: "librdkafka", %err, "{reason}");
    }
}

impl ConsumerContext for Quiet {}

/// A run's output as the end record has it: `output` when text; a tail
/// that was not UTF-8 (`output_base64`) is said as such, base64 and all.
fn output_of(value: &serde_json::Value) -> Option<String> {
    if let Some(text) = value.get("output").and_then(|v| v.as_str()) {
        return Some(text.to_string());
    }
    let base64 = value.get("output_base64").and_then(|v| v.as_str())?;
    Some(format!("(not UTF-8; base64:)\n{base64}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(run: &str, event: &str, start_ms: u64, extra: &str) -> Vec<u8> {
        format!(
            r#"{{"v":1,"run":"{run}","event":"{event}","group":"g","topic":"t","role":0,"member":"m","host":"h","pid":1,"token":1,"start_ms":{start_ms}{extra}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn starts_and_ends_pair_by_run_with_the_ends_output_and_old_runs_go() {
        let mut runs = Store::default();
        let now = wall_ms();
        runs.take(&record("a-1", "start", now, ""));
        runs.take(&record("a-1", "end", now, &format!(r#","end_ms":{now},"exit_code":0,"output":"hi <b>""#)));
        runs.take(&record("a-2", "end", now, r#","output_base64":"AAE=""#));
        runs.take(b"not a record");
        runs.take(&record("old", "start", now - KEEP_MS - 1000, ""));
        runs.prune(now);
        assert_eq!(runs.runs.keys().collect::<Vec<_>>(), ["a-1", "a-2"]);
        let a1 = &runs.runs["a-1"];
        assert!(a1.start.is_some() && a1.end.is_some());
        assert_eq!(a1.output.as_deref(), Some("hi <b>"));
        assert!(runs.runs["a-2"].output.as_deref().is_some_and(|o| o.ends_with("AAE=")));
    }

    #[test]
    fn only_the_newest_outputs_are_kept() {
        let mut runs = Store::default();
        let now = wall_ms();
        for n in 0..=OUTPUTS {
            runs.take(&record(&format!("r-{n:04}"), "end", now, r#","output":"x""#));
        }
        assert!(runs.runs["r-0000"].output.is_none());
        assert!(runs.runs[&format!("r-{OUTPUTS:04}")].output.is_some());
    }
}
