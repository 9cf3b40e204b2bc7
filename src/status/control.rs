//! `neli-run yield`, `pause` and `resume`: a control record written to
//! partition 0 (a pause of roles: to each role's partition), then the
//! records read until the owner acts on it (or it is clear that none will).

use std::time::{Duration, Instant};

use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use super::probe::Probe;
use super::read::read_partition;
use super::view::View;
use super::{fail, finish, rejected, say, Stop};
use crate::cli::YieldArgs;
use crate::clock::wall_ms;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::kafka::heartbeat::Heartbeat;
use crate::kafka::yield_request::{PauseRequest, TriggerRequest, Yield};
use crate::printable::printable;

/// The longest `--timeout` taken (`yield`, `pause`, `cron pause` and
/// `trigger`): a wait longer than that is a typo.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// `--timeout`, checked against `MAX_TIMEOUT`.
pub(super) fn checked_timeout(timeout: impl Into<Duration>) -> Result<Duration, Failure> {
    let timeout = timeout.into();
    match timeout > MAX_TIMEOUT {
        true => Err(Failure::new(Kind::Usage, "--timeout must be at most 24h")),
        false => Ok(timeout),
    }
}

/// Runs `neli-run yield`.
pub fn yield_main(args: YieldArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    let timeout = checked_timeout(args.timeout)?;
    for (flag, value) in [("--name", &args.name), ("--to", &args.to)] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            let what = if flag == "--to" { "the member to hand over to" } else { "the member that must lead" };
            return finish(fail(
                Kind::Usage,
                format!(
                    "{flag} is empty: give {what} (its --name, as `neli-run status` lists it), or leave {flag} out"
                ),
            ));
        }
    }
    finish(Target::from_args(args.kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let message = handover(&target, args.name, args.to, args.role, args.force, timeout)?;
        say(&message)?;
        Ok(0)
    }))
}

/// Writes a control record (`what` request) to `partition`: its offset.
pub(super) fn write(target: &Target, partition: i32, value: &[u8], what: &str) -> Result<i64, Stop> {
    let producer: BaseProducer<Probe> = target
        .client_config(&[("acks", "all")])
        .create_with_context(Probe::new(target))
        .map_err(|e| rejected(e, target))?;
    if let Err((e, _)) = producer.send(BaseRecord::<(), _>::to(&target.topic).partition(partition).payload(value)) {
        return Err(producer.context().failure(format!("cannot write the {what} request: {e}")));
    }
    let flushed = crate::kafka::flush(&producer, Duration::from_secs(10));
    // A refused write (e.g. no WRITE on the topic) comes as its delivery
    // report, which flush serves.
    if let Err(e) = flushed {
        return Err(producer.context().failure(format!("cannot write the {what} request: {e}")));
    }
    let probe = producer.context();
    if let Some(why) = probe.undelivered.lock().expect("probe lock").clone() {
        return Err(probe.failure(format!("cannot write the {what} request: {}", printable(&why))));
    }
    let offset = *probe.delivered.lock().expect("probe lock");
    offset.ok_or_else(|| probe.failure(format!("cannot write the {what} request: not delivered within 10s")))
}

/// Runs `neli-run pause` (`paused`, with `--stop` if `stop`) or `resume`,
/// of every role or the one `role` names.
pub fn pause_main(
    kafka: crate::cli::KafkaArgs,
    (paused, stop): (bool, bool),
    role: Option<u32>,
    timeout: Duration,
    env_properties: Option<String>,
) -> Result<u8, Failure> {
    let timeout = checked_timeout(timeout)?;
    finish(Target::from_args(kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let message = pause(&target, (paused, stop), role, timeout)?;
        say(&message)?;
        Ok(0)
    }))
}

/// Writes a pause or resume on each partition asked for (0, or with roles
/// each role's) and waits until a record of an owner of each (leading or
/// contending) carries it, or a newer one, and with --stop says its
/// command is gone.
fn pause(target: &Target, (paused, stop): (bool, bool), role: Option<u32>, timeout: Duration) -> Result<String, Stop> {
    let group = printable(&target.group);
    let what = if paused { "pause" } else { "resume" };
    let (consumer, view) = read_partition(target).map_err(|stop| match stop {
        // No topic: nowhere to write it yet.
        Stop::Fail(f) if f.kind == Kind::NoLeader => Stop::Fail(Failure::new(
            f.kind,
            format!(
                "{}; create the topic first (kafka-topics.sh --create --topic {} --partitions 1 --config \
                 retention.ms=3600000, or start one member, which creates it), then {what}",
                f.message,
                printable(&target.topic)
            ),
        )),
        stop => stop,
    })?;
    let roles = view.roles.unwrap_or(1);
    let partitions: Vec<i32> = match role {
        None => (0..roles).filter_map(|j| i32::try_from(j).ok()).collect(),
        Some(j) if j < roles => vec![i32::try_from(j).unwrap_or(i32::MAX)],
        Some(j) => {
            let has = match roles {
                1 => "a single leader (role 0)".to_string(),
                n => format!("{n} roles (0 to {})", n - 1),
            };
            return fail(
                Kind::Usage,
                format!("group {group} has no role {j}: it runs {has}; `neli-run status` lists them"),
            );
        }
    };
    // A group of roles is read on every role's partition (a crontab's
    // partitions are named by their jobs).
    let (consumer, views) = match view.roles {
        Some(roles) => {
            drop(consumer);
            super::read::read_partitions(target, roles)?
        }
        None => (consumer, Vec::new()),
    };
    let label = |p: i32| match views.get(p as usize).and_then(|v| v.placed.as_deref()) {
        Some(job) => format!("job {} (role {p})", printable(job)),
        None => format!("role {p}"),
    };
    let request = PauseRequest::new(paused, stop).encode();
    let written =
        partitions.iter().map(|&p| Ok((p, write(target, p, &request, what)?))).collect::<Result<Vec<_>, Stop>>()?;
    let mut said = acknowledged(&consumer, &written, (paused, stop), timeout);
    let standing = if paused { "the pause stands" } else { "the resume stands" };
    let within = humantime::format_duration(timeout);
    if view.roles.is_none() {
        return match said.remove(&0) {
            Some(said) => Ok(format!("group {group}: {what} (offset {}) acknowledged by {said}", written[0].1)),
            None => fail(
                Kind::NoLeader,
                format!(
                    "group {group}: no owner of partition 0 acknowledged the {what} within {within} ({standing} on \
                     the topic, and whichever member owns partition 0 next honours it)"
                ),
            ),
        };
    }
    let lines: Vec<String> = written
        .iter()
        .filter_map(|(p, offset)| {
            said.get(p)
                .map(|said| format!("group {group} {}: {what} (offset {offset}) acknowledged by {said}", label(*p)))
        })
        .collect();
    let unsaid: Vec<String> = written.iter().filter(|(p, _)| !said.contains_key(p)).map(|(p, _)| label(*p)).collect();
    if unsaid.is_empty() {
        return Ok(lines.join("\n"));
    }
    if !lines.is_empty() {
        say(&lines.join("\n"))?;
    }
    fail(
        Kind::NoLeader,
        format!(
            "group {group}: no owner of {} acknowledged the {what} within {within} ({standing} on the topic, \
             and whichever member owns it next honours it)",
            unsaid.join(", ")
        ),
    )
}

/// Runs `neli-run cron pause JOB` (`paused`) or `cron resume JOB`: the
/// request on the job's partition, acknowledged by its owner.
pub fn cron_pause_main(
    args: crate::cli::CronPauseArgs,
    paused: bool,
    env_properties: Option<String>,
) -> Result<u8, Failure> {
    let timeout = checked_timeout(args.timeout)?;
    if args.stop && !paused {
        return finish(fail(Kind::Usage, "--stop goes with `cron pause` (a resume starts the job when due)"));
    }
    finish(Target::from_args(args.kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let what = if paused { "pause" } else { "resume" };
        let (consumer, partition, _) = super::job_partition(&target, &args.job)?;
        let offset = write(&target, partition, &PauseRequest::new(paused, args.stop).encode(), what)?;
        let job = printable(&args.job);
        match acknowledged(&consumer, &[(partition, offset)], (paused, args.stop), timeout).remove(&partition) {
            Some(said) => say(&format!("job {job}: {what} (offset {offset}) acknowledged by {said}"))?,
            None => {
                let standing = if paused { "the pause stands" } else { "the resume stands" };
                return fail(
                    Kind::NoLeader,
                    format!(
                        "job {job}: no owner of its partition ({partition}) acknowledged the {what} within {} \
                         ({standing} on the topic, and whichever member owns the partition next honours it)",
                        humantime::format_duration(timeout),
                    ),
                );
            }
        }
        Ok(0)
    }))
}

/// Runs `neli-run cron trigger JOB`: the request on the job's partition,
/// and the run it starts.
pub fn cron_trigger_main(args: crate::cli::CronTriggerArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    let timeout = checked_timeout(args.timeout)?;
    finish(Target::from_args(args.kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let (consumer, partition, _) = super::job_partition(&target, &args.job)?;
        let request = TriggerRequest::new();
        let at_ms = request.at_ms;
        let offset = write(&target, partition, &request.encode(), "trigger")?;
        let job = printable(&args.job);
        let start = Instant::now();
        while start.elapsed() < timeout {
            let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) else { continue };
            let hb = msg.payload().and_then(Heartbeat::decode).filter(|_| msg.partition() == partition);
            let Some(run) = hb.and_then(|hb| hb.attempt).filter(|run| run.due_ms.is_some_and(|due| due >= at_ms))
            else {
                continue;
            };
            let due = run.due_ms.map_or("?".into(), super::render::rfc3339_ms);
            say(&format!(
                "job {job}: trigger (offset {offset}): the run due {due} started, by {} (host {}), token {}",
                printable(&run.name),
                printable(&run.host),
                run.token
            ))?;
            return Ok(0);
        }
        fail(
            Kind::NoLeader,
            format!(
                "job {job}: no run started within {} (the trigger stands on the topic: the job's owner, or its \
                 next, runs it once)",
                humantime::format_duration(timeout),
            ),
        )
    }))
}

/// Who acknowledged the request written on each partition (at its
/// offset): an owner's record there carrying it or a newer one (with
/// --stop, once its command is gone), said as "NAME (host HOST): what it
/// does now". Partitions nobody acknowledged within `timeout` are missing.
fn acknowledged(
    consumer: &rdkafka::consumer::BaseConsumer<Probe>,
    written: &[(i32, i64)],
    (paused, stop): (bool, bool),
    timeout: Duration,
) -> std::collections::BTreeMap<i32, String> {
    let mut said = std::collections::BTreeMap::new();
    let start = Instant::now();
    while said.len() < written.len() && start.elapsed() < timeout {
        let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) else { continue };
        let Some(&(partition, offset)) = written.iter().find(|(p, _)| *p == msg.partition()) else { continue };
        if said.contains_key(&partition) {
            continue;
        }
        let Some(hb) = msg.payload().and_then(Heartbeat::decode) else { continue };
        let owner = hb.token.is_some() || hb.stance == Some(crate::kafka::heartbeat::WireStance::Contending);
        let honoured = hb.pause.as_ref().filter(|p| p.offset >= offset && p.offset < msg.offset());
        let Some(note) = honoured.filter(|note| owner && !(paused && stop && note.running)) else { continue };
        let (name, host) = (printable(&hb.name), printable(&hb.host));
        let now = match (note.paused, note.offset == offset) {
            (_, false) => format!("a newer request (offset {}) is in force now", note.offset),
            (true, _) if stop => "its command is stopped".into(),
            (true, _) if note.running => "its command runs on until it ends, and does not start again".into(),
            (true, _) => "it does not start its command".into(),
            (false, _) if note.running => "its command runs".into(),
            (false, _) => "it starts its command when due".into(),
        };
        said.insert(partition, format!("{name} (host {host}): {now}"));
    }
    said
}

/// Refuses `what` (yield, with or without --role) on a group of roles:
/// each role has its own leader, and Kafka's assignor decides which
/// member owns each.
fn not_roles(view: &super::view::View, group: &str, what: &str) -> Result<(), Stop> {
    match view.roles {
        Some(roles) => fail(
            Kind::Usage,
            format!(
                "group {group} runs {roles} roles (--roles): {what} works on a single leader only. One role \
                 cannot be moved on its own (Kafka's cooperative-sticky assignor balances the members by count \
                 and would hand it straight back); stopping a member (SIGTERM), or draining it (`neli-run \
                 drain MEMBER`), moves its roles, and only them, to the others; `neli-run pause --role J` \
                 holds one role where it is; `neli-run status` shows who leads each role"
            ),
        ),
        None => Ok(()),
    }
}

/// Asks the leader to hand over (to `to`) and waits until another member
/// (`to`) leads, or until it is clear that none will: the old leader leads
/// again, or (with `to`) a member other than `to` leads. Without `to`, and
/// unless `force`, refuses when no member `status` knows of may take over:
/// the leader would stop its command and lead again only after its watch
/// (3 session timeouts), with nothing running meanwhile.
fn handover(
    target: &Target,
    name: Option<String>,
    to: Option<String>,
    role: Option<u32>,
    force: bool,
    timeout: Duration,
) -> Result<String, Stop> {
    let group = printable(&target.group);
    let (consumer, mut view) = read_partition(target)?;
    match role {
        Some(j) => not_roles(&view, &group, &format!("yield --role {j}"))?,
        None => not_roles(&view, &group, "yield")?,
    }
    if let Some(j) = role.filter(|&j| j != 0) {
        return fail(
            Kind::Usage,
            format!("group {group} runs a single leader, role 0: there is no role {j} (leave --role out)"),
        );
    }
    let Some(old) = view.fresh_leader(wall_ms()).cloned() else {
        return fail(Kind::NoLeader, format!("group {group}: no fresh leader to yield"));
    };
    if let Some(name) = &name {
        if *name != old.name {
            return fail(
                Kind::NoLeader,
                format!("{} does not lead group {group} ({} does)", printable(name), printable(&old.name)),
            );
        }
    }
    match &to {
        Some(to) => check_target(&view, &old, to, &group)?,
        None if !force => {
            // A standby that has just joined writes its first record now:
            // give it one candidacy interval (twice the leader's heartbeat
            // interval) before refusing.
            let interval = old.timing.map_or(500, |t| t.heartbeat_interval_ms);
            let grace = (2 * Duration::from_millis(interval)).min(timeout);
            let start = Instant::now();
            while let Err(refused) = check_someone_may_lead(&view, &old, &group) {
                if start.elapsed() >= grace {
                    return Err(refused);
                }
                if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
                    view.read(msg.payload(), msg.offset());
                }
            }
        }
        None => {}
    }
    write(target, 0, &Yield::new(name, to.clone()).encode(), "yield")?;
    let start = Instant::now();
    let mut now = None;
    while start.elapsed() < timeout {
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            view.read(msg.payload(), msg.offset());
        }
        now = view.fresh_leader(wall_ms()).filter(|new| new.token != old.token).cloned();
        let Some(new) = &now else { continue };
        if new.name != old.name && to.as_ref().is_none_or(|to| *to == new.name) {
            return Ok(format!(
                "group {group}: leadership moved from {} (token {}) to {} (token {})",
                printable(&old.name),
                old.token.unwrap_or_default(),
                printable(&new.name),
                new.token.unwrap_or_default()
            ));
        }
        // Another leads under a new token: the hand-over is over, and
        // waiting on says nothing more.
        break;
    }
    match (&to, now) {
        (Some(to), Some(new)) if new.name != old.name => fail(
            Kind::NoLeader,
            format!(
                "group {group}: {} leads now, not {} (did {} stop meanwhile?)",
                printable(&new.name),
                printable(to),
                printable(to)
            ),
        ),
        (_, Some(new)) => fail(
            Kind::NoLeader,
            format!(
                "group {group}: no other member took over: {} leads again (token {}){}",
                printable(&old.name),
                new.token.unwrap_or_default(),
                match &to {
                    Some(to) => format!(" ({} did not take partition 0: did it stop meanwhile?)", printable(to)),
                    None => String::new(),
                }
            ),
        ),
        (_, None) => fail(
            Kind::NoLeader,
            format!(
                "group {group}: no other member took over within {} (is {} alone?)",
                humantime::format_duration(timeout),
                printable(&old.name)
            ),
        ),
    }
}

/// Refuses a plain `yield` when no member `status` knows of may take over
/// (none is live, or every one never leads or fails its health check):
/// the leader would stop its command for nothing, and the group would run
/// nothing until it leads again (audit D6). `--force` yields anyway (e.g.
/// to members older than candidacy records, which `status` cannot see).
fn check_someone_may_lead(view: &View, leader: &Heartbeat, group: &str) -> Result<(), Stop> {
    let others: Vec<_> = view.standbys(wall_ms()).into_iter().filter(|c| c.name != leader.name).collect();
    if others.iter().any(|c| c.may_lead()) {
        return Ok(());
    }
    // Each one live, and why it may not lead.
    let why: Vec<_> = others
        .iter()
        .map(|c| {
            if c.never_lead {
                format!("{} runs with --never-lead", printable(&c.name))
            } else if c.drained {
                format!("{} is drained", printable(&c.name))
            } else {
                format!("{}'s health check (--health-cmd) fails", printable(&c.name))
            }
        })
        .collect();
    let why = if why.is_empty() { "no other member is live".to_string() } else { why.join(", ") };
    fail(
        Kind::NoLeader,
        format!(
            "group {group}: no member may take over from {} ({why}): it would stop its command and lead again \
             only after 3 session timeouts, with nothing running meanwhile. Start or heal a standby \
             (`neli-run status` lists them), or pass --force to yield anyway",
            printable(&leader.name)
        ),
    )
}

/// Refuses `yield --to` a member that cannot take over: the leader itself,
/// one that never leads, or one with no live candidacy.
fn check_target(view: &View, leader: &Heartbeat, to: &str, group: &str) -> Result<(), Stop> {
    if to == leader.name {
        return fail(Kind::NoLeader, format!("{} leads group {group} already", printable(to)));
    }
    let standbys = view.standbys(wall_ms());
    match standbys.iter().find(|c| c.name == to) {
        Some(c) if c.never_lead => fail(
            Kind::NoLeader,
            format!("{} runs with --never-lead: it watches group {group} and never leads; name another", printable(to)),
        ),
        Some(c) if c.drained => fail(
            Kind::NoLeader,
            format!("{} is drained (`neli-run undrain` brings it back): name another", printable(to)),
        ),
        Some(c) if c.unhealthy => fail(
            Kind::NoLeader,
            format!(
                "{}'s health check (--health-cmd) fails: it may not lead group {group} until it passes; name another",
                printable(to)
            ),
        ),
        Some(_) => Ok(()),
        None => {
            let names: Vec<_> = standbys.iter().filter(|c| c.may_lead()).map(|c| printable(&c.name)).collect();
            let live = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            fail(
                Kind::NoLeader,
                format!(
                    "{} is not a live member of group {group} (members that may lead: {live}; `neli-run status` lists them)",
                    printable(to)
                ),
            )
        }
    }
}
