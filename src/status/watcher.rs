//! The `--never-lead` member: it never joins the group, writes candidacy
//! records that say it never leads (so that `status` lists it), and logs
//! each change of leader, read from partition 0 as `status --watch` reads
//! it.

use std::time::{Duration, Instant};

use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord};
use tracing::debug;

use super::probe::Probe;
use super::read::read_partition;
use super::Stop;
use crate::clock::wall_ms;
use crate::exit::{Failure, Kind};
use crate::notify::{Notifier, Watchdog};
use crate::printable::printable;

/// Runs a member with `--never-lead`: it never joins the group (so Kafka
/// can never assign it partition 0), writes candidacy records saying it
/// never leads (so that `status` lists it), and logs who leads, until
/// SIGTERM or SIGINT (then exit 0, after its withdrawal).
pub async fn never_lead(cfg: crate::config::Config) -> Result<u8, Failure> {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return Err(Failure::new(Kind::Internal, "cannot install signal handlers"));
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let mut watching = tokio::task::spawn_blocking(move || watch(&cfg, &flag));
    tokio::select! {
        done = &mut watching => return done.unwrap_or_else(|e| Err(Failure::new(Kind::Internal, e.to_string()))),
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("asked to stop: withdrawing our candidacy");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watching.await.unwrap_or_else(|e| Err(Failure::new(Kind::Internal, e.to_string())))
}

/// `never_lead`'s loop, until `stop`: waits for the group's topic, then
/// writes a candidacy every interval and logs each change of leader.
fn watch(cfg: &crate::config::Config, stop: &std::sync::atomic::AtomicBool) -> Result<u8, Failure> {
    use std::sync::atomic::Ordering;
    let target = &cfg.kafka;
    let member = crate::kafka::heartbeat::Member::this_process(cfg.name.clone());
    let since_ms = wall_ms();
    let interval = cfg.leader.candidacy_interval;
    tracing::info!(group = %printable(&target.group), name = %printable(&cfg.name), "watching the group; this member never leads (--never-lead)");
    // Under systemd (Type=notify, WatchdogSec=) as a member that may lead:
    // ready at once (waiting for the topic is part of its job).
    let notifier = Notifier::from_env();
    let notify = |message: &str| notifier.iter().for_each(|n| n.send(message));
    let mut watchdog = Watchdog::from_env();
    let mut beat = || {
        if let (Some(notifier), Some(watchdog)) = (&notifier, &mut watchdog) {
            watchdog.beat(notifier);
        }
    };
    notify("READY=1");
    notify("STATUS=watching: this member never leads (--never-lead)");
    // The topic may not exist yet: the first member that may lead creates it.
    let mut waiting = false;
    let (consumer, mut view) = loop {
        if stop.load(Ordering::Relaxed) {
            notify("STOPPING=1");
            return Ok(0);
        }
        beat();
        match read_partition(target) {
            Ok(read) => break read,
            Err(Stop::Fail(f)) if matches!(f.kind, Kind::NoLeader | Kind::Unavailable) => {
                if !std::mem::replace(&mut waiting, true) {
                    tracing::warn!("{f}; waiting");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(Stop::Fail(f)) => return Err(f),
            Err(Stop::Closed) => return Ok(0),
        }
    };
    let producer: BaseProducer<Probe> = target
        .client_config(&[("acks", "all")])
        .create_with_context(Probe::new(target))
        .map_err(|e| crate::config::creation_error(e, target))?;
    let send = |leaving: bool, interval: Duration| {
        let record =
            crate::kafka::candidacy::Record::new(&member, 0, true, since_ms, interval, leaving, false).encode();
        let to = BaseRecord::to(&target.topic).partition(0).key(member.name.as_bytes()).payload(&record);
        if let Err((err, _)) = producer.send(to) {
            debug!(%err, "candidacy not queued");
        }
    };
    let mut next = Instant::now();
    let mut shown = String::new();
    while !stop.load(Ordering::Relaxed) {
        beat();
        if Instant::now() >= next {
            // As a standby's (`candidacy::interval`): rarer in a large group.
            let every = crate::kafka::candidacy::interval(interval, view.other_standbys(&member, wall_ms()));
            send(false, every);
            next += every;
        }
        producer.poll(Duration::ZERO);
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            view.read(msg.payload(), msg.offset());
        }
        let key = view.key(wall_ms());
        if key != shown {
            match view.fresh_leader(wall_ms()) {
                Some(hb) => tracing::info!(
                    leader = %printable(&hb.name),
                    host = %printable(&hb.host),
                    token = hb.token.unwrap_or_default(),
                    "the group has a leader"
                ),
                None => tracing::warn!("the group has no fresh leader"),
            }
            shown = key;
        }
    }
    notify("STOPPING=1");
    send(true, interval);
    let _ = crate::kafka::flush(&producer, Duration::from_secs(2));
    Ok(0)
}
