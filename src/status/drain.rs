//! `neli-run drain MEMBER` and `undrain MEMBER`: a control record on
//! partition 0 that the member named reads (its watcher, or its consumer
//! while it owns partition 0), then its candidacy read until it says it
//! is drained (out of the group, its commands gone) or back.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::message::Message;

use super::control::{checked_timeout, write};
use super::read::{read_partition, read_partitions};
use super::view::View;
use super::{fail, finish, say, Stop};
use crate::clock::wall_ms;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::kafka::candidacy;
use crate::kafka::heartbeat::Heartbeat;
use crate::kafka::yield_request::DrainRequest;
use crate::printable::printable;

/// Runs `neli-run drain` (`drained`; refused when no other member may take
/// over, unless `force`) or `undrain` of `member`.
pub fn drain_main(
    kafka: crate::cli::KafkaArgs,
    member: String,
    (drained, force): (bool, bool),
    timeout: impl Into<Duration>,
    env_properties: Option<String>,
) -> Result<u8, Failure> {
    let timeout = checked_timeout(timeout)?;
    if member.trim().is_empty() {
        let what = if drained { "drain" } else { "undrain" };
        return finish(fail(
            Kind::Usage,
            format!("the member to {what} is empty: give its --name, as `neli-run status` lists it"),
        ));
    }
    finish(Target::from_args(kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let message = drain(&target, &member, (drained, force), timeout)?;
        say(&message)?;
        Ok(0)
    }))
}

/// Writes the request and waits for the member's candidacy to say it is
/// drained (written once it owns nothing, so its commands are gone) or
/// not; says what the member does now.
fn drain(target: &Target, member: &str, (drained, force): (bool, bool), timeout: Duration) -> Result<String, Stop> {
    let (group, who) = (printable(&target.group), printable(member));
    let what = if drained { "drain" } else { "undrain" };
    let (consumer, view) = read_partition(target)?;
    // Members that hold roles write no candidacy: each role's partition
    // names its owner.
    let (consumer, mut views) = match view.roles {
        Some(roles) => {
            drop(consumer);
            read_partitions(target, roles)?
        }
        None => (consumer, vec![view]),
    };
    // A member's newest record may be a candidacy interval old, and more
    // by the time the backlog is read: give it as long as `yield` gives a
    // standby that has just joined before calling it gone.
    let grace = Duration::from_secs(2).min(timeout);
    let start = Instant::now();
    let (standby, leads) = loop {
        let now = wall_ms();
        let leads = views.iter().any(|v| v.fresh_leader(now).is_some_and(|l| l.name == member));
        let standby = views[0].standbys(now).into_iter().find(|c| c.name == member).cloned();
        if leads || standby.is_some() || start.elapsed() >= grace {
            break (standby, leads);
        }
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            read_into(&mut views, &msg);
        }
    };
    let now = wall_ms();
    match (&standby, leads) {
        (None, false) => {
            return fail(
                Kind::NoLeader,
                format!(
                    "{who} is not a live member of group {group} (its members: {}; `neli-run status` lists them)",
                    members(&views, now)
                ),
            )
        }
        (Some(c), false) if c.never_lead => {
            return Ok(format!(
                "group {group}: {who} (host {}) runs with --never-lead: it runs nothing, and has nothing to {what}",
                printable(&c.host)
            ));
        }
        (_, true) if !drained => {
            return Ok(format!("group {group}: {who} leads, and is not drained: nothing to do"));
        }
        (Some(c), false) if c.drained == drained => {
            let now = if drained { "drained already" } else { "not drained" };
            return Ok(format!("group {group}: {who} (host {}) is {now}: nothing to do", printable(&c.host)));
        }
        _ => {}
    }
    if drained && !force {
        check_others_may_lead(&views, member, &group)?;
    }
    let offset = write(target, 0, &DrainRequest::new(member.to_string(), drained).encode(), what)?;
    let start = Instant::now();
    while start.elapsed() < timeout {
        let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) else { continue };
        let partition = msg.partition();
        read_into(&mut views, &msg);
        let payload = msg.payload().unwrap_or_default();
        let said = candidacy::Record::decode(payload)
            .filter(|c| partition == 0 && msg.offset() > offset && c.name == member && c.drained == drained);
        if let Some(c) = said {
            let host = printable(&c.host);
            return Ok(match drained {
                true => format!(
                    "group {group}: {who} (host {host}) drained (offset {offset}): out of the group, running \
                     nothing; {}, and `neli-run undrain {who}` brings it back",
                    match views.len() > 1 {
                        true => "its roles go to the others (`neli-run status` shows where)",
                        false => "another member leads (`neli-run status` shows who)",
                    }
                ),
                false if c.unhealthy => format!(
                    "group {group}: {who} (host {host}) undrained (offset {offset}), but its health check \
                     (--health-cmd) fails: it joins once the check passes"
                ),
                false => format!("group {group}: {who} (host {host}) undrained (offset {offset}): back in the group"),
            });
        }
        // Undrained, a member may own a partition at once, and write no
        // candidacy: its first heartbeat says it is back (a drained one
        // owns nothing, and writes none).
        if let Some(hb) = Heartbeat::decode(payload).filter(|hb| !drained && hb.name == member) {
            return Ok(format!(
                "group {group}: {who} (host {}) undrained (offset {offset}): back in the group, owning partition \
                 {partition}",
                printable(&hb.host)
            ));
        }
    }
    fail(
        Kind::NoLeader,
        format!(
            "group {group}: {who} did not acknowledge the {what} (offset {offset}) within {} (a drain is read by \
             the process that was running when it was written, and lasts as long as it does: is {who} still \
             running? `neli-run status` shows the group)",
            humantime::format_duration(timeout)
        ),
    )
}

/// Takes a record into the view of its partition.
fn read_into(views: &mut [View], msg: &impl Message) {
    if let Some(view) = usize::try_from(msg.partition()).ok().and_then(|p| views.get_mut(p)) {
        view.read(msg.payload(), msg.offset());
    }
}

/// The live members the views name, leaders and standbys, for an error.
fn members(views: &[View], now: u64) -> String {
    let mut names: BTreeSet<String> =
        views.iter().filter_map(|v| v.fresh_leader(now)).map(|l| l.name.clone()).collect();
    names.extend(views[0].standbys(now).iter().map(|c| c.name.clone()));
    match names.is_empty() {
        true => "none".into(),
        false => names.iter().map(|n| printable(n)).collect::<Vec<_>>().join(", "),
    }
}

/// Refuses a drain that leaves no member to take over: another member that
/// leads a role, or a live standby that may lead (not --never-lead,
/// unhealthy or drained). Its commands would stop with nowhere to go.
fn check_others_may_lead(views: &[View], member: &str, group: &str) -> Result<(), Stop> {
    let now = wall_ms();
    let leader = views.iter().filter_map(|v| v.fresh_leader(now)).any(|l| l.name != member);
    let standby = views[0].standbys(now).iter().any(|c| c.name != member && c.may_lead());
    if leader || standby {
        return Ok(());
    }
    fail(
        Kind::NoLeader,
        format!(
            "group {group}: no other member may take over from {} (`neli-run status` lists the members, and why \
             each may not lead): drained, its commands would stop with nothing to run them. Start or heal a \
             member, or pass --force to drain it anyway",
            printable(member)
        ),
    )
}
