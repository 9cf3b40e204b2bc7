//! `neli-run status`, `yield`, `pause` and `resume`, and the `--never-lead`
//! member: who leads a group, read from the heartbeat records on partition 0
//! rather than from the group coordinator, so it works on any broker
//! (including ones without DescribeGroups) and never joins the group.
//!
//! The leader is the writer of the newest record that carries a fencing
//! token; it is *fresh* while that record is younger than the deadline the
//! writer itself declared, unless a newer record of the same writer (name
//! and incarnation) carries none: a disclaimer (released) or a fenced
//! leader's (contending) takes the claim back, as it does in the members'
//! own claim check (`Leader::on_other`). Ages use the writer's wall clock
//! (the record's `at_ms`), so clock skew between machines shifts them.
//!
//! The group is paused while the newest pause or resume request (by offset),
//! read itself or carried forward by a record, is a pause.
//!
//! Exit statuses: `exit::STATUSES` (its `status`, `yield_` and `pause` columns) says
//! what each means; a closed stdout (`status | head -1`) ends quietly with 0.
//!
//! Every string read from the topic is someone's choice: the text output
//! escapes control characters in it (`crate::printable::printable`).
//!
//! The rooms: this file runs `status` (once, or `--watch`) and holds what
//! the commands share (`Stop`, one line to stdout); `read.rs` reads
//! partition 0 from outside the group, through the clients' context in
//! `probe.rs`; `view.rs` is what the records say, `render.rs` that as text
//! or JSON; `control.rs` writes `yield`, `pause` and `resume` and waits for
//! their answer; `watcher.rs` is the `--never-lead` member.

mod agree;
mod control;
mod drain;
mod follow;
mod jobs;
mod probe;
mod read;
mod render;
mod roster;
mod view;
mod watcher;

use std::io::Write;
use std::os::fd::AsFd;
use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::message::Message;

use crate::cli::StatusArgs;
use crate::clock::wall_ms;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::printable::printable;

pub use control::{cron_pause_main, cron_trigger_main, pause_main, yield_main};
pub use drain::drain_main;
pub use follow::{Follower, Lead};
use read::{read_partition, read_partitions, shape, topic_partitions};
use render::{render, render_roles};
use view::View;
pub use watcher::never_lead;

/// Why `status` or `yield` ends without its answer.
#[derive(Debug)]
enum Stop {
    /// stdout was closed (`status | head -1`): end quietly, with 0.
    Closed,
    /// Exit with its status after saying it (one line).
    Fail(Failure),
}

impl From<Failure> for Stop {
    fn from(failure: Failure) -> Stop {
        Stop::Fail(failure)
    }
}

fn fail<T>(kind: Kind, message: impl Into<String>) -> Result<T, Stop> {
    Err(Stop::Fail(Failure::new(kind, message)))
}

/// Writes one line to stdout; a reader that went away is [`Stop::Closed`].
fn say(text: &str) -> Result<(), Stop> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Stop::Closed),
        Err(e) => fail(Kind::Io, format!("cannot write to stdout: {e}")),
    }
}

/// Whether stdout is a pipe or socket whose reader has gone: `--watch`
/// writes only on a change, and must not outlive `| head -1` until then.
fn stdout_closed() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// A client the configuration did not allow, said as the run mode says it
/// (rdkafka's own message carries the property's value, which may be a
/// secret).
fn rejected(err: KafkaError, target: &Target) -> Stop {
    Stop::Fail(crate::config::creation_error(err, target))
}

/// The status or failure of `result`, for `main` to say: a reader that
/// closed our stdout ended us quietly with 0.
fn finish(result: Result<u8, Stop>) -> Result<u8, Failure> {
    match result {
        Ok(code) => Ok(code),
        Err(Stop::Closed) => Ok(0),
        Err(Stop::Fail(failure)) => Err(failure),
    }
}

/// Runs `neli-run status`.
pub fn main(args: StatusArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    let (json_out, watch) = (args.json, args.watch);
    finish(Target::from_args(args.kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let fresh = status(&target, json_out, watch)?;
        Ok(if fresh { 0 } else { Kind::NoLeader.code() })
    }))
}

/// A crontab job's partition of the group's topic now, for `history --job`
/// to say beside the job's runs: what only that partition knows.
pub struct JobNow {
    /// Its lines: whose the job is, its pause, and its next due time.
    pub text: String,
    /// The same, as keys of `history --json` (`job`, `partition`, `owner`,
    /// `paused`, `next_due`, `next_retry`).
    pub json: serde_json::Value,
    /// The token of the job's fresh owner: a run under another token, with
    /// no end on the record, was cut short (its member lost the job).
    pub owner_token: Option<i64>,
}

/// The crontab job `job` as the group's topic says it now; NoLeader,
/// naming the group's jobs, if no partition holds it.
pub fn job_now(target: &Target, job: &str) -> Result<JobNow, Failure> {
    match job_partition(target, job) {
        Ok((_, partition, view)) => Ok(render::job(job, partition, &view)),
        Err(Stop::Fail(failure)) => Err(failure),
        Err(Stop::Closed) => Err(Failure::new(Kind::Internal, "stdout closed while reading the topic")),
    }
}

/// A reader of every partition of a crontab's group, caught up, and the
/// partition that holds `job` with what its records say (NoLeader, naming
/// the group's jobs, if none does).
fn job_partition(
    target: &Target,
    job: &str,
) -> Result<(rdkafka::consumer::BaseConsumer<probe::Probe>, i32, View), Stop> {
    let (consumer, view) = read_partition(target)?;
    let roles = view.roles.or(view.placed.as_ref().map(|_| 1)).unwrap_or(1);
    drop(consumer);
    let (consumer, views) = read_partitions(target, roles)?;
    match views.iter().position(|v| v.placed.as_deref() == Some(job)) {
        Some(p) => {
            let view = views.into_iter().nth(p).expect("found");
            Ok((consumer, i32::try_from(p).unwrap_or(i32::MAX), view))
        }
        None => {
            let placed: Vec<String> = views.iter().filter_map(|v| v.placed.as_deref().map(printable)).collect();
            let known = if placed.is_empty() { "none".to_string() } else { placed.join(", ") };
            let (job, group) = (printable(job), printable(&target.group));
            fail(Kind::NoLeader, format!("no job {job} in group {group} (its jobs: {known})"))
        }
    }
}

fn status(target: &Target, json_out: bool, watch: bool) -> Result<bool, Stop> {
    let (consumer, mut view) = read_partition(target)?;
    if let Some((roles, partitions)) = shape(&view, || topic_partitions(&consumer, target)) {
        drop(consumer);
        return roles_status(target, roles, partitions, json_out, watch);
    }
    if !watch {
        say(&render(target, &view, json_out))?;
        return Ok(view.fresh_leader(wall_ms()).is_some());
    }
    let mut shown = String::new();
    loop {
        let key = view.key(wall_ms());
        if key != shown {
            say(&render(target, &view, json_out))?;
            shown = key;
        }
        if stdout_closed() {
            return Err(Stop::Closed);
        }
        match consumer.poll(Duration::from_millis(250)) {
            Some(Ok(msg)) => view.read(msg.payload(), msg.offset()),
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => {
                crate::stderr::line(format_args!("warning: {e}"));
            }
        }
    }
}

/// `status` of a group of `roles` roles, of a topic of `partitions`: every
/// role's partition read, and fresh only while every role is led by a
/// member whose --roles reaches it (`agree.rs`).
fn roles_status(
    target: &Target,
    roles: u32,
    partitions: Option<u32>,
    json_out: bool,
    watch: bool,
) -> Result<bool, Stop> {
    let (consumer, mut views) = read_partitions(target, roles)?;
    let led = |views: &[view::View]| {
        let now = wall_ms();
        agree::Agreement::of(views, partitions, now).all_run(views, now)
    };
    if !watch {
        say(&render_roles(target, &views, partitions, json_out))?;
        return Ok(led(&views));
    }
    let mut shown = String::new();
    loop {
        let now = wall_ms();
        let mut key: String = views.iter().map(|v| v.key(now) + "|").collect();
        let agreement = agree::Agreement::of(&views, partitions, now);
        key += &agreement.lines();
        key += &agreement.crontab_lines();
        key.extend((0..views.len()).map(|j| agreement.job_line(&views, j, now)));
        if key != shown {
            say(&render_roles(target, &views, partitions, json_out))?;
            shown = key;
        }
        if stdout_closed() {
            return Err(Stop::Closed);
        }
        match consumer.poll(Duration::from_millis(250)) {
            Some(Ok(msg)) => {
                if let Some(view) = usize::try_from(msg.partition()).ok().and_then(|p| views.get_mut(p)) {
                    view.read(msg.payload(), msg.offset());
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => {
                crate::stderr::line(format_args!("warning: {e}"));
            }
        }
    }
}
