//! Runs on the record: every run of the command (the single leader's, each
//! role's, each crontab job's, each scheduled run, each wave's attempt) is
//! written to a topic of its own, `<topic>.runs`, for `neli-run history`
//! to read from any host.
//!
//! History, never safety. The group's topic decides who may run (a
//! scheduled run starts only once its start is there); this topic only
//! tells what happened. So recording never waits: the shell's loop hands a
//! run's facts to a bounded queue (`Runs::started`, `Runs::ended`, a
//! `try_send` that never blocks), and a thread of its own (`recorder.rs`)
//! makes the topic and writes to it. A full queue, a broker down or a
//! refused write loses the record, counted and logged once, and nothing
//! else: a start, a kill, a fence or a revoke never waits on it.
//!
//! Two records per run, both keyed by the run's id: one when it starts and
//! one when it ends, the end repeating everything the start said. The
//! start is what shows a run whose member died with it (kill -9, a lost
//! host): no end ever comes, and that is the run an operator asks about.
//! The end stands alone, so a reader that lost the start to retention
//! still has the whole run. The tail of the run's output is a field of the
//! end record (`output.rs`): an end waits for the run's end anyway, and a
//! start written with it would be lost with a member that dies running.
//!
//! A `--warm` command runs on every member all the time: its run on the
//! record is each stretch of it leading, from the token file written (its
//! lead signal sent, or held for its set-up) to its unlead signal sent,
//! or to its exit (a fence's kill among them). An unlead's end says so
//! (`unlead`) in place of an exit status; the process runs on, so its
//! output's tail goes on the end of the run in which it exits, if any.
//!
//! `history.rs` is `neli-run history`, the reader.

mod history;
mod logs;
mod output;
mod recorder;
mod render;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::child::output::Kept;
use crate::clock::{wall_ms, BootTime};
use crate::config::Config;
use crate::exit::ChildStatus;
use crate::kafka::heartbeat::Member;
use crate::leader::{Attempt, Partition};
pub use history::main as history_main;
pub use logs::main as logs_main;
pub use recorder::Recorder;

/// The runs topic of the group's topic `topic`: beside it, as the hot
/// set's `<topic>.roster` will be.
pub fn topic_of(topic: &str) -> String {
    format!("{topic}.runs")
}

/// How long the runs topic keeps a record (`retention.ms`, set when a
/// member creates the topic): a week of history.
pub const RETENTION_MS: u64 = 7 * 24 * 3600 * 1000;

/// Which of a run's two records this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Event {
    Start,
    End,
}

/// One record on the runs topic (JSON). The end record repeats the start's
/// fields and adds how the run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Format version.
    pub v: u32,
    /// The run's id: the member's incarnation and its count of runs.
    pub run: String,
    pub event: Event,
    pub group: String,
    /// The group's topic (the runs topic is its name and `.runs`).
    pub topic: String,
    /// The seat's partition: the role (0 for the single leader), or under
    /// a crontab the job's partition.
    pub role: Partition,
    /// `--roles`, when the member runs more than one role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<u32>,
    /// The crontab job's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Who ran it: the member's `--name`, its host and pid.
    pub member: String,
    pub host: String,
    pub pid: u32,
    /// The run's fencing token (NELI_FENCING_TOKEN).
    pub token: i64,
    /// A scheduled run's due time (NELI_DUE), wall-clock ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_ms: Option<u64>,
    /// A wave's first start (NELI_WAVE), wall-clock ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_ms: Option<u64>,
    /// NELI_ATTEMPT, for a wave's or a due time's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// When the command started (a scheduled run: its due time), wall ms.
    pub start_ms: u64,
    /// End only: when everything it started was gone, wall ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    /// End only: its exit code, or the signal that killed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// A `--warm` command's leading (both records): it runs on outside it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warm: bool,
    /// End only, `--warm`: it ended with --unlead-signal, the command
    /// running on (no exit status).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unlead: bool,
    /// End only: how long it ran, on the boot clock (a wall-clock step
    /// meanwhile does not change it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// End only, when kept (`--keep-output`, `output=`): the last bytes of
    /// its stdout and stderr together, as text when UTF-8, else base64
    /// (`output.rs`); and how many bytes it wrote in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
}

/// A run under way on a seat: its start record, and when it started on the
/// boot clock.
struct Under {
    record: RunRecord,
    started: BootTime,
}

/// The shell's side of recording: who we are, the run under way on each
/// seat, and the queue to the recorder. Every call returns at once.
pub struct Runs {
    /// Started with the first run: a standby that never runs anything
    /// holds no producer and no connection for it.
    recorder: Option<Recorder>,
    target: crate::config::Target,
    /// Records lost, as /metrics counts them.
    lost: Arc<AtomicU64>,
    member: Member,
    group: String,
    topic: String,
    roles: Option<u32>,
    warm: bool,
    count: u64,
    under: BTreeMap<Partition, Under>,
}

impl Runs {
    /// Recording for the member `member` of `cfg`'s group. The recorder's
    /// thread starts with the first run, and makes the runs topic (off the
    /// loop).
    pub fn start(cfg: &Config, member: &Member, lost: Arc<AtomicU64>) -> Runs {
        Runs {
            recorder: None,
            lost,
            target: cfg.kafka.clone(),
            member: member.clone(),
            group: cfg.kafka.group.clone(),
            topic: cfg.kafka.topic.clone(),
            roles: cfg.roles.filter(|&n| n > 1),
            warm: cfg.warm.is_some(),
            count: 0,
            under: BTreeMap::new(),
        }
    }

    /// The command of seat `role` (the job `job`, if a crontab's) started
    /// under `token`; `begin_ms`: a scheduled run's start, its due time.
    pub fn started(
        &mut self,
        role: Partition,
        job: Option<String>,
        token: i64,
        attempt: Option<&Attempt>,
        begin_ms: Option<u64>,
    ) {
        self.count += 1;
        let now = BootTime::now();
        let wall = wall_ms();
        let record = RunRecord {
            v: 1,
            run: format!("{}-{}", self.member.incarnation, self.count),
            event: Event::Start,
            group: self.group.clone(),
            topic: self.topic.clone(),
            role,
            roles: self.roles,
            job,
            member: self.member.name.clone(),
            host: self.member.host.clone(),
            pid: self.member.pid,
            token,
            due_ms: attempt.and_then(|a| a.due),
            wave_ms: attempt.filter(|a| a.due.is_none()).map(|a| a.wave_ms),
            attempt: attempt.map(|a| a.number),
            start_ms: begin_ms.unwrap_or(wall).max(wall),
            end_ms: None,
            exit_code: None,
            signal: None,
            warm: self.warm,
            unlead: false,
            duration_ms: None,
            output: None,
            output_base64: None,
            output_bytes: None,
        };
        // A scheduled run's command starts at its due time, a moment on.
        let started = now + std::time::Duration::from_millis(record.start_ms - wall);
        self.recorder
            .get_or_insert_with(|| Recorder::start(&self.target, &self.member, self.lost.clone()))
            .record(record.clone());
        self.under.insert(role, Under { record, started });
    }

    /// The run on seat `role` ended with `status`, everything it started
    /// gone (nothing if no start was recorded there), the tail of its
    /// output `kept` if its shim kept one. Returns its end record: what a
    /// failure hook is told of it.
    pub fn ended(&mut self, role: Partition, status: ChildStatus, kept: Option<Kept>) -> Option<RunRecord> {
        self.end(role, |record| {
            match status {
                ChildStatus::Exited(code) => record.exit_code = Some(code),
                ChildStatus::Signaled(sig) => record.signal = Some(sig),
            }
            if let Some(kept) = &kept {
                output::set(record, kept);
            }
        })
    }

    /// `--warm`: the run on seat `role` ended with --unlead-signal sent,
    /// its command running on (nothing if no start was recorded there).
    pub fn unled(&mut self, role: Partition) {
        self.end(role, |record| record.unlead = true);
    }

    /// Ends the run on seat `role`, `how` saying how, and records the end.
    fn end(&mut self, role: Partition, how: impl FnOnce(&mut RunRecord)) -> Option<RunRecord> {
        let Under { mut record, started } = self.under.remove(&role)?;
        record.event = Event::End;
        record.end_ms = Some(wall_ms().max(record.start_ms));
        let ran = BootTime::now().since(started);
        record.duration_ms = Some(u64::try_from(ran.as_millis()).unwrap_or(u64::MAX));
        how(&mut record);
        if let Some(recorder) = &self.recorder {
            recorder.record(record.clone());
        }
        Some(record)
    }

    /// Gives the recorder up to `within` to write what it holds; returns
    /// at once when it has nothing left. Said once the member is done.
    pub async fn finish(self, within: std::time::Duration) {
        if let Some(recorder) = self.recorder {
            recorder.finish(within).await;
        }
    }
}

#[cfg(test)]
mod tests;
