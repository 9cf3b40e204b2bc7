//! `neli-run logs`: a run's output, read from the runs topic (the tail its
//! member kept in the run's end record, `output.rs`) by a reader that
//! never joins the group, as `history` reads.
//!
//! The run is the last of its role or job, or the last that started by
//! `--at`; `--follow` then goes on reading from where the topic ended
//! when `logs` started, and prints each run of that role or job as its
//! end record comes. The output is someone's bytes: printed escaped
//! (`printable_output`) unless `--raw`.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::history::{self, Filter, Run, State};
use super::render::{how_ended, short, time};
use super::{output, topic_of, Event, RunRecord};
use crate::cli::LogsArgs;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::printable::{printable, printable_output};

/// How many of the newest runs are read to find the last of a seat (and,
/// with none named, to tell which seats the group has).
const LOOK_BACK: usize = 50;

/// Runs `neli-run logs`.
pub fn main(args: LogsArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    // A time to the second (as `history` prints it) names that whole second.
    let until = args.at.as_deref().map(history::since_ms).transpose()?.map(|at| at + 1000);
    let target = Target::from_args(args.kafka, env_properties)?;
    let filter = Filter { role: args.role, job: args.job, since: None, until };
    let consumer = history::consumer(&target)?;
    let topic = topic_of(&target.topic);
    let partitions = history::partitions(&consumer, &target, &topic)?;
    // Where --follow starts: where the topic ends now (a run that ends
    // while the last one is read is printed once, by its id).
    let mut ends = Vec::new();
    for partition in 0..partitions {
        let (_, high) = consumer
            .fetch_watermarks(&topic, partition, Duration::from_secs(5))
            .map_err(|e| history::failure(&consumer, format!("cannot read {}: {e}", printable(&topic))))?;
        ends.push((partition, high));
    }
    drop(consumer);
    let runs = history::read(&target, &filter, LOOK_BACK)?;
    let filter = seat(&target, filter, &runs)?;
    let last = runs.iter().rev().find(|run| filter.wants(&run.record));
    let mut out = Out { raw: args.raw };
    if !args.follow {
        let Some(run) = last else { return Err(no_run(&target, &filter)) };
        let bytes = kept(run)?;
        eprintln!("{}", header(run));
        return out.output(&bytes);
    }
    let mut shown = BTreeSet::new();
    if let Some(run) = last.filter(|run| run.state == State::Ended) {
        shown.insert(run.record.run.clone());
        out.run(run)?;
    }
    follow(&target, &filter, &ends, &mut shown, &mut out)
}

/// The seat asked for. With neither --role nor --job: the single leader's
/// (role 0), unless the group's runs are a crontab's jobs or roles', which
/// must be named.
fn seat(target: &Target, mut filter: Filter, runs: &[Run]) -> Result<Filter, Failure> {
    if filter.role.is_some() || filter.job.is_some() {
        return Ok(filter);
    }
    let jobs: BTreeSet<&str> = runs.iter().filter_map(|run| run.record.job.as_deref()).collect();
    let roles: BTreeSet<i32> =
        runs.iter().filter(|run| run.record.roles.is_some()).map(|run| run.record.role).collect();
    let group = printable(&target.group);
    if !jobs.is_empty() {
        let names: Vec<String> = jobs.iter().map(|job| printable(job)).collect();
        return Err(Failure::new(
            Kind::Usage,
            format!("group {group} runs a crontab's jobs: name one with --job NAME (lately run: {})", names.join(", ")),
        ));
    }
    if !roles.is_empty() {
        let named: Vec<String> = roles.iter().map(i32::to_string).collect();
        return Err(Failure::new(
            Kind::Usage,
            format!("group {group} runs roles: name one with --role J (lately run: {})", named.join(", ")),
        ));
    }
    filter.role = Some(0);
    Ok(filter)
}

/// The run's kept output, or what to say when there is none.
pub(super) fn kept(run: &Run) -> Result<Vec<u8>, Failure> {
    let r = &run.record;
    let which = format!(
        "the run of {} started {} on {}@{}",
        seat_name(r),
        time(r.start_ms),
        printable(&r.member),
        printable(&r.host)
    );
    match run.state {
        State::Running => {
            return Err(Failure::new(
                Kind::NoLeader,
                format!("{which} is still running: its output is recorded when it ends (--follow prints it then)"),
            ))
        }
        State::NoEnd => {
            return Err(Failure::new(
                Kind::NoLeader,
                format!("{which} has no end on record (its member died with it): no output was kept"),
            ))
        }
        State::Ended => {}
    }
    output::bytes(r).ok_or_else(|| {
        if r.unlead {
            return Failure::new(
                Kind::NoLeader,
                format!(
                    "{which} ended with the unlead signal, its --warm command running on: a warm command's \
                     output is kept only at its exit, on the run it exits in"
                ),
            );
        }
        Failure::new(
            Kind::NoLeader,
            format!(
                "{which} kept no output: its member ran with --keep-output 0 (or its crontab job with output=0). \
                 Give the members --keep-output SIZE (8KiB by default) to keep the tail of each run's output"
            ),
        )
    })
}

/// No run of the seat on the record.
fn no_run(target: &Target, filter: &Filter) -> Failure {
    let mut what = match (&filter.job, filter.role) {
        (Some(job), _) => format!("of job {}", printable(job)),
        (None, Some(0)) => "of the leader's command".to_string(),
        (None, role) => format!("of role {}", role.unwrap_or(0)),
    };
    if let Some(until) = filter.until {
        what += &format!(" started by {}", time(until - 1000));
    }
    Failure::new(
        Kind::NoLeader,
        format!("no run {what} among the newest {LOOK_BACK} recorded in group {}", printable(&target.group)),
    )
}

/// A run's one line: which, who, how it ended, how much output is kept.
fn header(run: &Run) -> String {
    let r = &run.record;
    let ended = how_ended(r);
    let kept = match (output::bytes(r), r.output_bytes) {
        (Some(bytes), Some(total)) if bytes.len() as u64 == total => format!("all {total} bytes of output"),
        (Some(bytes), Some(total)) => format!("the last {} of {total} bytes of output", bytes.len()),
        _ => "no output kept".into(),
    };
    format!(
        "== {} run started {} on {}@{} (token {}): {ended} after {}; {kept} ==",
        seat_name(r),
        time(r.start_ms),
        printable(&r.member),
        printable(&r.host),
        r.token,
        short(r.duration_ms.unwrap_or(0)),
    )
}

fn seat_name(r: &RunRecord) -> String {
    match (&r.job, r.roles) {
        (Some(job), _) => format!("job {}", printable(job)),
        (None, Some(_)) => format!("role {}", r.role),
        (None, None) => "leader".into(),
    }
}

/// stdout, written escaped unless `raw`.
struct Out {
    raw: bool,
}

impl Out {
    fn output(&mut self, bytes: &[u8]) -> Result<u8, Failure> {
        let text;
        let mut bytes = bytes;
        if !self.raw {
            text = printable_output(bytes);
            bytes = text.as_bytes();
        }
        let newline = !self.raw && !bytes.is_empty() && !bytes.ends_with(b"\n");
        let mut out = std::io::stdout().lock();
        let wrote = out.write_all(bytes).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) });
        match wrote.and_then(|()| out.flush()) {
            Ok(()) => Ok(0),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
            Err(e) => Err(Failure::new(Kind::Io, format!("cannot write to stdout: {e}"))),
        }
    }

    /// A run as --follow prints it: its header, then its output.
    fn run(&mut self, run: &Run) -> Result<(), Failure> {
        self.output(format!("{}\n", header(run)).as_bytes())?;
        match output::bytes(&run.record) {
            Some(bytes) => self.output(&bytes).map(drop),
            None => Ok(()),
        }
    }
}

/// `--follow`: reads on from `ends`, and prints each run of the seat as
/// its end record comes, until killed.
fn follow(
    target: &Target,
    filter: &Filter,
    ends: &[(i32, i64)],
    shown: &mut BTreeSet<String>,
    out: &mut Out,
) -> Result<u8, Failure> {
    let consumer = history::consumer(target)?;
    let topic = topic_of(&target.topic);
    let mut tpl = TopicPartitionList::new();
    for &(partition, from) in ends {
        tpl.add_partition_offset(&topic, partition, Offset::Offset(from)).map_err(|e| history::internal(&e))?;
    }
    consumer.assign(&tpl).map_err(|e| history::internal(&e))?;
    loop {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(msg)) => {
                let Some(Ok(record)) = msg.payload().map(serde_json::from_slice::<RunRecord>) else { continue };
                if record.event != Event::End || !filter.wants(&record) || !shown.insert(record.run.clone()) {
                    continue;
                }
                out.run(&Run { record, state: State::Ended })?;
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => {
                let fatal = consumer.context().fatal.lock().expect("seen lock").clone();
                if let Some(fatal) = fatal {
                    return Err(fatal);
                }
                tracing::debug!(%e, "logs --follow: reading the runs topic");
            }
        }
    }
}
