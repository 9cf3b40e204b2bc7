//! `neli-run status` and `neli-run yield`: who leads a group, read from the heartbeat records on
//! partition 0 rather than from the group coordinator, so it works on any
//! broker (including ones without DescribeGroups) and never joins the group.
//!
//! The leader is the writer of the newest record that carries a fencing
//! token; it is *fresh* while that record is younger than the deadline the
//! writer itself declared. Ages use the writer's wall clock (the record's
//! `at_ms`), so clock skew between machines shifts them.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;

use crate::cli::{StatusArgs, YieldArgs};
use crate::config::Target;
use crate::exit;
use crate::kafka::heartbeat::{wall_ms, Heartbeat, Yield};
use crate::kafka::Quiet;

/// How many of the newest records to read: with a 500 ms interval, about
/// half an hour of history, which is plenty to find the current leader.
const HISTORY: i64 = 4096;

/// What the records say.
#[derive(Debug, Default)]
struct View {
    /// The newest record carrying a token.
    leader: Option<Heartbeat>,
}

impl View {
    fn add(&mut self, hb: Heartbeat) {
        if hb.token.is_some() {
            self.leader = Some(hb);
        }
    }

    /// The leader, if its newest heartbeat is within its own deadline.
    fn fresh_leader(&self, now_ms: u64) -> Option<&Heartbeat> {
        self.leader.as_ref().filter(|hb| now_ms.saturating_sub(hb.at_ms) < hb.deadline_ms)
    }

    /// A one-line summary that changes exactly when the answer does.
    fn key(&self, now_ms: u64) -> String {
        match self.fresh_leader(now_ms) {
            Some(hb) => format!("{} {}", hb.name, hb.token.unwrap_or_default()),
            None => "none".into(),
        }
    }
}

fn ago(now_ms: u64, then_ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(now_ms.saturating_sub(then_ms))).to_string()
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

fn render(target: &Target, view: &View, json_out: bool) -> String {
    let now = wall_ms();
    let fresh = view.fresh_leader(now);
    if json_out {
        let leader = view.leader.as_ref().map(|hb| {
            json!({
                "name": hb.name,
                "host": hb.host,
                "pid": hb.pid,
                "token": hb.token,
                "leader_since": hb.since_ms.map(rfc3339),
                "heartbeat_age_ms": now.saturating_sub(hb.at_ms),
                "heartbeat_deadline_ms": hb.deadline_ms,
            })
        });
        return json!({
            "group": target.group,
            "topic": target.topic,
            "fresh": fresh.is_some(),
            "leader": leader,
            "leadership_changed": view.leader.as_ref().and_then(|hb| hb.since_ms).map(rfc3339),
        })
        .to_string();
    }
    match (fresh, &view.leader) {
        (Some(hb), _) => format!(
            "group {g}: leader {n} (host {h}, pid {p}), token {t}\n  leader since {s} ({sa} ago)\n  last heartbeat {a} ago (deadline {d})",
            g = target.group,
            n = hb.name,
            h = hb.host,
            p = hb.pid,
            t = hb.token.unwrap_or_default(),
            s = hb.since_ms.map_or("?".into(), rfc3339),
            sa = hb.since_ms.map_or("?".into(), |s| ago(now, s)),
            a = ago(now, hb.at_ms),
            d = humantime::format_duration(Duration::from_millis(hb.deadline_ms)),
        ),
        (None, Some(hb)) => format!(
            "group {g}: no fresh leader (last: {n}, token {t}, last heartbeat {a} ago)",
            g = target.group,
            n = hb.name,
            t = hb.token.unwrap_or_default(),
            a = ago(now, hb.at_ms),
        ),
        (None, None) => format!("group {}: no leader in the retained heartbeats of {}", target.group, target.topic),
    }
}

/// Runs `neli-run status`.
pub fn main(args: StatusArgs, env_properties: Option<String>) -> ExitCode {
    let json_out = args.json;
    let watch = args.watch;
    let target = match Target::from_args(args.kafka, env_properties) {
        Ok(t) => t,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(exit::USAGE);
        }
    };
    match status(&target, json_out, watch) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err((code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// A reader of partition 0 outside the group, caught up to its end.
fn read_partition(target: &Target) -> Result<(BaseConsumer<Quiet>, View), (u8, String)> {
    // librdkafka wants a group for assign(); assign() never joins it.
    let group = format!("{}.status", target.group);
    let config = target.client_config(&[
        ("group.id", &group),
        ("enable.auto.commit", "false"),
        ("enable.partition.eof", "true"),
        ("fetch.wait.max.ms", "100"),
    ]);
    let consumer: BaseConsumer<Quiet> = config
        .create_with_context(Quiet)
        .map_err(|e| (exit::KAFKA_CONFIG, format!("Kafka client configuration rejected: {e}")))?;
    let (low, high) = consumer.fetch_watermarks(&target.topic, 0, Duration::from_secs(5)).map_err(|e| match e {
        KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownPartition)
        | KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownTopicOrPartition)
        | KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownTopicOrPartition) => {
            (1, format!("no topic {}: no member of group {} has run yet", target.topic, target.group))
        }
        e => (1, format!("cannot read {} from {}: {e}", target.topic, target.brokers)),
    })?;

    let mut view = View::default();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&target.topic, 0, Offset::Offset(low.max(high - HISTORY)))
        .map_err(|e| (exit::INTERNAL, e.to_string()))?;
    consumer.assign(&tpl).map_err(|e| (exit::INTERNAL, e.to_string()))?;
    // Catch up to the end as it was when we started.
    let deadline = SystemTime::now() + Duration::from_secs(10);
    let mut caught_up = high <= low;
    while !caught_up && SystemTime::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                if let Some(hb) = msg.payload().and_then(Heartbeat::decode) {
                    view.add(hb);
                }
                caught_up = msg.offset() + 1 >= high;
            }
            Some(Err(KafkaError::PartitionEOF(_))) => caught_up = true,
            Some(Err(e)) => return Err((1, format!("reading {}: {e}", target.topic))),
            None => {}
        }
    }
    Ok((consumer, view))
}

fn status(target: &Target, json_out: bool, watch: bool) -> Result<bool, (u8, String)> {
    let (consumer, mut view) = read_partition(target)?;
    if !watch {
        println!("{}", render(target, &view, json_out));
        return Ok(view.fresh_leader(wall_ms()).is_some());
    }
    let mut shown = String::new();
    loop {
        let key = view.key(wall_ms());
        if key != shown {
            println!("{}", render(target, &view, json_out));
            shown = key;
        }
        match consumer.poll(Duration::from_millis(250)) {
            Some(Ok(msg)) => {
                if let Some(hb) = msg.payload().and_then(Heartbeat::decode) {
                    view.add(hb);
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => eprintln!("warning: {e}"),
        }
    }
}

/// Runs `neli-run yield`.
pub fn yield_main(args: YieldArgs, env_properties: Option<String>) -> ExitCode {
    let timeout: Duration = args.timeout.into();
    let target = match Target::from_args(args.kafka, env_properties) {
        Ok(t) => t,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(exit::USAGE);
        }
    };
    match handover(&target, args.name, timeout) {
        Ok(message) => {
            println!("{message}");
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// Asks the leader to hand over and waits until another member leads.
fn handover(target: &Target, name: Option<String>, timeout: Duration) -> Result<String, (u8, String)> {
    let (consumer, mut view) = read_partition(target)?;
    let Some(old) = view.fresh_leader(wall_ms()).cloned() else {
        return Err((1, format!("group {}: no fresh leader to yield", target.group)));
    };
    if let Some(name) = &name {
        if *name != old.name {
            return Err((1, format!("{name} does not lead group {} ({} does)", target.group, old.name)));
        }
    }
    let producer: BaseProducer<Quiet> = target
        .client_config(&[("acks", "all")])
        .create_with_context(Quiet)
        .map_err(|e| (exit::KAFKA_CONFIG, format!("Kafka client configuration rejected: {e}")))?;
    let request = Yield::new(name).encode();
    producer
        .send(BaseRecord::<(), _>::to(&target.topic).partition(0).payload(&request))
        .map_err(|(e, _)| (1, format!("cannot write the yield request: {e}")))?;
    producer.flush(Duration::from_secs(10)).map_err(|e| (1, format!("cannot write the yield request: {e}")))?;
    let until = SystemTime::now() + timeout;
    while SystemTime::now() < until {
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            if let Some(hb) = msg.payload().and_then(Heartbeat::decode) {
                view.add(hb);
            }
        }
        if let Some(new) = view.fresh_leader(wall_ms()) {
            if new.token != old.token && new.name != old.name {
                return Ok(format!(
                    "group {}: leadership moved from {} (token {}) to {} (token {})",
                    target.group,
                    old.name,
                    old.token.unwrap_or_default(),
                    new.name,
                    new.token.unwrap_or_default()
                ));
            }
        }
    }
    Err((1, format!("group {}: no other member took over within {:?} (is {} alone?)", target.group, timeout, old.name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::{Content, Member};
    use crate::leader::{Record, Stance};

    fn hb(name: &str, token: Option<i64>, at_ms: u64) -> Heartbeat {
        let stance = token.map_or(Stance::Contending, |token| Stance::Leading { token });
        let mut hb = Heartbeat::new(
            &Member::this_process(name.into()),
            1,
            crate::clock::BootTime::from_nanos(1),
            Content { record: Record { run: 1, start: None, stance }, since_ms: Some(at_ms), deadline_ms: 3000 },
        );
        hb.at_ms = at_ms;
        hb
    }

    #[test]
    fn the_newest_token_bearing_record_leads_while_within_its_deadline() {
        let mut v = View::default();
        v.add(hb("a", Some(1), 1_000));
        v.add(hb("b", None, 2_000)); // a candidate: not a leader yet
        assert_eq!(v.fresh_leader(3_999).map(|h| h.name.as_str()), Some("a"));
        assert!(v.fresh_leader(4_000).is_none(), "stale after its own deadline");
        v.add(hb("b", Some(5), 4_100));
        assert_eq!(v.key(4_200), "b 5");
    }
}
