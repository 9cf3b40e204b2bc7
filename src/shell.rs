//! The imperative shell: one loop that feeds the leadership core with what
//! happens (Kafka events, signals, the child's exit, its own timer) and
//! carries out the actions it returns.
//!
//! The loop's timer is armed at `Leader::next_deadline()` (quinn's
//! `poll_timeout` pattern), so fencing happens here on time whatever the
//! Kafka thread is doing; the shim's lease backs it up if this process
//! itself is frozen. The loop awaits only in its `select!`: what takes time
//! (waiting for a stopped command's leftovers to go, flushing a disclaimer,
//! leaving the group) runs beside it and comes back as an input.

use std::collections::VecDeque;
use std::sync::mpsc::SyncSender;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::unbounded_channel;
use tracing::{error, info};

use crate::child::{self, Running};
use crate::clock::{Anchor, BootTime};
use crate::config::Config;
use crate::exit::{ChildStatus, Failure, Kind};
use crate::kafka::heartbeat::{printable, Member};
use crate::kafka::{Event, Kafka};
use crate::layers_off::{self, Layer};
use crate::leader::{self, Action, Input, Leader, Role};
use crate::metrics;
use crate::notify::Notifier;

/// Runs `cfg` until the child's run ends; returns the exit status (the
/// command's, or the core's for an outcome that is not the command's), or
/// why neli-run could not do its part.
pub async fn run(cfg: Config) -> Result<u8, Failure> {
    let started = Anchor::now();
    layers_off::warn_if_any();
    child::check_executable(&cfg.program)?;
    let (Ok(mut signals), Ok(mut sigchld)) = (Signals::new(), signal(SignalKind::child())) else {
        return Err(Failure::new(Kind::Internal, "cannot install signal handlers"));
    };
    child::become_subreaper()
        .map_err(|err| Failure::new(Kind::Internal, format!("cannot become a child subreaper: {err}")))?;
    let command = child::Command {
        program: cfg.program.clone(),
        args: cfg.args.clone(),
        stop_signal: cfg.leader.stop_signal.0,
        grace: cfg.leader.grace,
        env: vec![
            ("NELI_GROUP".into(), cfg.kafka.group.clone()),
            ("NELI_TOPIC".into(), cfg.kafka.topic.clone()),
            ("NELI_NAME".into(), cfg.name.clone()),
            ("NELI_BROKERS".into(), cfg.kafka.brokers.clone()),
        ],
        env_remove: consumed_env(),
    };

    let ids = metrics::Ids { group: cfg.kafka.group.clone(), topic: cfg.kafka.topic.clone(), member: cfg.name.clone() };
    let metrics = metrics::shared(ids);
    if let Some(addr) = cfg.metrics_addr {
        if let Err(err) = metrics::serve(addr, metrics.clone()).await {
            return Err(Failure::new(Kind::Usage, format!("cannot serve --metrics-addr {addr}: {err}")));
        }
    }

    let (events_tx, mut events) = unbounded_channel();
    let member = Member::this_process(cfg.name.clone());
    info!(group = %printable(&cfg.kafka.group), topic = %cfg.kafka.topic, name = %printable(&cfg.name), brokers = %cfg.kafka.brokers, "joining");
    let connecting = {
        let cfg = cfg.clone();
        tokio::task::spawn_blocking(move || Kafka::connect(&cfg, member, events_tx))
    };
    let mut kafka = tokio::select! {
        kafka = connecting => match kafka {
            Ok(Ok(kafka)) => kafka,
            Ok(Err(failure)) => return Err(failure),
            Err(err) => return Err(Failure::new(Kind::Internal, format!("connecting to Kafka failed: {err}"))),
        },
        _ = signals.shutdown() => return Ok(0),
        _ = sleep_for(cfg.leader.acquire_timeout.map(|t| (started.boot + t).since(BootTime::now()))) => {
            return Err(Failure::new(Kind::AcquireTimeout, "not leader within --acquire-timeout (Kafka never answered)"));
        }
    };

    let notifier = Notifier::from_env();
    let notify = |message: &str| notifier.iter().for_each(|n| n.send(message));
    let mut watchdog = Notifier::watchdog_interval().filter(|_| notifier.is_some()).map(tokio::time::interval);
    // With --metrics-addr, the loop notes that it turns at least every
    // LOOP_TICK, however long it would sleep: /livez tells a stuck loop
    // from a standby's quiet one by that.
    let mut turning = cfg.metrics_addr.map(|_| tokio::time::interval(metrics::LOOP_TICK));
    let mut joined = false;
    let mut ready = false;
    let mut shown_role = None;

    // Started before connecting: --acquire-timeout counts from here.
    let mut core = Leader::new(cfg.leader.clone(), started);
    if let Some(end) = kafka.born() {
        core.born_at(end);
    }
    let mut running: Option<Running> = None;
    // The command's status, sent once everything it started is gone: the
    // wait for that runs beside the loop, which keeps heartbeating meanwhile.
    let (gone_tx, mut gone) = unbounded_channel::<ChildStatus>();
    let mut release: Option<SyncSender<()>> = None;
    let mut pending: VecDeque<Input> = VecDeque::new();
    let mut kafka_alive = true;
    // A disclaimer is flushed off the loop; the handovers that follow it
    // (release, stand aside, rejoin, exit) wait for that, in order, so the
    // next owner reads it first. Kills and signals never wait.
    let mut flushing: Option<tokio::task::JoinHandle<()>> = None;
    let mut after_flush: Vec<Action> = Vec::new();
    loop {
        let mut actions = Vec::new();
        let input = match pending.pop_front() {
            Some(input) => input,
            None => {
                // tokio's timer runs on CLOCK_MONOTONIC, which stops while
                // the machine is suspended: after a resume this sleep may end
                // late by the suspension's length. The child is not left
                // running meanwhile: the shim's lease is a CLOCK_BOOTTIME
                // timerfd, which fires at once, and the core handles any
                // input only after the deadlines that passed (a fence among
                // them).
                let sleep = core.next_deadline().map(|t| t.since(BootTime::now()));
                tokio::select! {
                    event = events.recv(), if kafka_alive => match event {
                        Some(Event::Standby) => {
                            joined = true;
                            Input::Tick
                        }
                        Some(Event::Assigned) => {
                            joined = true;
                            Input::Assigned
                        }
                        Some(Event::Revoked { lost, release: r }) => {
                            release = Some(r);
                            Input::Revoked { lost }
                        }
                        Some(Event::OwnHeartbeat { offset, sent }) => Input::OwnHeartbeat { offset, sent },
                        Some(Event::OtherHeartbeat(_)) if layers_off::off(Layer::Claims) => continue,
                        Some(Event::OtherHeartbeat(other)) => Input::OtherHeartbeat(other),
                        Some(Event::Yield) => Input::Yield,
                        Some(Event::Fatal(failure)) => {
                            error!("Kafka: {failure}");
                            Input::Fatal(failure.code())
                        }
                        None => {
                            error!("the Kafka thread stopped");
                            kafka_alive = false;
                            Input::Fatal(Kind::Internal.code())
                        }
                    },
                    input = signals.next() => input,
                    _ = sigchld.recv() => {
                        let Some(pgid) = running.as_ref().map(Running::pgid) else {
                            child::reap(None);
                            continue;
                        };
                        let Some(status) = child::reap(Some(pgid)) else { continue };
                        // The shim is gone; what it leaves is killed and
                        // reaped off the loop (up to seconds, for a process
                        // in uninterruptible sleep).
                        running = None;
                        let gone_tx = gone_tx.clone();
                        tokio::spawn(async move {
                            child::all_gone().await;
                            let _ = gone_tx.send(status);
                        });
                        continue;
                    }
                    Some(status) = gone.recv() => {
                        info!(%status, "child exited");
                        Input::ChildExited(status)
                    }
                    _ = sleep_for(sleep) => Input::Tick,
                    _ = async { flushing.as_mut().expect("guarded").await }, if flushing.is_some() => {
                        flushing = None;
                        actions = std::mem::take(&mut after_flush);
                        Input::Tick
                    }
                    _ = async { watchdog.as_mut().expect("guarded").tick().await }, if watchdog.is_some() => {
                        notify("WATCHDOG=1");
                        continue;
                    }
                    _ = async { turning.as_mut().expect("guarded").tick().await }, if turning.is_some() => {
                        let mut m = metrics.lock().expect("metrics lock");
                        m.loop_seen = Some(BootTime::now());
                        m.kafka_reachable = kafka.reachable();
                        continue;
                    }
                }
            }
        };
        actions.extend(core.step(input, BootTime::now()));
        for action in actions {
            let handover =
                matches!(action, Action::ReleaseRevoke | Action::StandAside | Action::Rejoin | Action::Exit(_));
            if handover && flushing.is_some() {
                after_flush.push(action);
                continue;
            }
            match action {
                Action::SendHeartbeat(record) => kafka.send_heartbeat(BootTime::now(), record),
                Action::Spawn { token, lease, attempt } => {
                    match Running::spawn(&with_job(&command, attempt), token, lease) {
                        Ok(child) => {
                            info!(pid = child.pgid().as_raw(), token, "child started");
                            running = Some(child);
                            metrics.lock().expect("metrics lock").child_started(token);
                        }
                        Err(err) => {
                            error!(%err, "cannot start the child");
                            pending.push_back(Input::ChildExited(ChildStatus::Exited(Kind::Internal.code())));
                        }
                    }
                }
                Action::Lease(until) => {
                    if let Some(child) = running.as_mut() {
                        if let Err(err) = child.renew(until) {
                            error!(%err, "cannot renew the child's lease; it will be fenced");
                        }
                    }
                }
                Action::SignalGroup(sig) => {
                    if let (Some(child), Ok(sig)) = (running.as_ref(), Signal::try_from(sig.0)) {
                        child.signal(sig);
                    }
                }
                Action::KillGroup => running.iter().for_each(Running::kill),
                Action::Disclaim(record) => {
                    kafka.send_heartbeat(BootTime::now(), record);
                    flushing = Some(tokio::task::spawn_blocking(kafka.flusher(DISCLAIM_WAIT)));
                }
                Action::Rejoin => kafka.rejoin(),
                Action::StandAside => kafka.stand_aside(),
                Action::ReleaseRevoke => {
                    if let Some(r) = release.take() {
                        let _ = r.send(());
                    }
                }
                Action::Exit(code) => {
                    notify("STOPPING=1");
                    info!(code, "leaving the group");
                    leave(kafka, &mut signals).await;
                    return Ok(code);
                }
            }
        }
        {
            let mut m = metrics.lock().expect("metrics lock");
            let now = BootTime::now();
            for role in core.roles_taken() {
                m.set_role(role, started.wall_ms_at(now));
            }
            m.set_role(core.role(), started.wall_ms_at(now));
            m.loop_seen = Some(now);
            m.fresh = core.fresh();
            m.child_up = running.is_some();
            m.note_run(core.last_run(), core.child_alive());
            m.next_due_ms = core.next_due().filter(|_| matches!(core.role(), Role::Leader { .. }));
            m.kafka_reachable = kafka.reachable();
        }
        if joined && !ready {
            ready = true;
            notify("READY=1");
        }
        let role = core.role();
        if ready && shown_role != Some(role) {
            shown_role = Some(role);
            notify(&match role {
                Role::Standby => "STATUS=standby".to_string(),
                Role::Candidate => "STATUS=candidate: confirming leadership".to_string(),
                Role::Leader { token } => format!("STATUS=leader, fencing token {token}"),
                Role::Fenced => "STATUS=fenced: no fresh heartbeat, command killed".to_string(),
            });
        }
    }
}

/// The command as one attempt of a wave runs it: NELI_ATTEMPT (1, then 2
/// for the first retry ...) and NELI_WAVE (when the wave's first attempt
/// started, RFC 3339 UTC): a command that must not repeat work can key it
/// by the wave and check it on a retry. A schedule's run gets NELI_DUE (its
/// due time, RFC 3339 UTC) in place of NELI_WAVE: the key its attempts share.
fn with_job(command: &child::Command, job: Option<leader::Attempt>) -> std::borrow::Cow<'_, child::Command> {
    let Some(job) = job else { return std::borrow::Cow::Borrowed(command) };
    let rfc3339 = |ms| humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms));
    let mut command = command.clone();
    command.env.push(("NELI_ATTEMPT".into(), job.number.to_string()));
    command.env.push(match job.due {
        None => ("NELI_WAVE".into(), rfc3339(job.wave_ms).to_string()),
        Some(due) => ("NELI_DUE".into(), rfc3339(due).to_string()),
    });
    std::borrow::Cow::Owned(command)
}

/// The environment variables neli-run reads, which the command must not
/// inherit: every option's `NELI_*` (NELI_KAFKA_PROPERTIES may hold a
/// password) and systemd's notify and watchdog variables, which are ours to
/// answer. The command gets NELI_GROUP, NELI_TOPIC, NELI_NAME, NELI_BROKERS
/// and NELI_FENCING_TOKEN set afresh instead (and NELI_ATTEMPT, NELI_WAVE
/// once per wave).
fn consumed_env() -> Vec<std::ffi::OsString> {
    fn walk(cmd: &clap::Command, out: &mut Vec<std::ffi::OsString>) {
        out.extend(cmd.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_os_string()));
        cmd.get_subcommands().for_each(|sub| walk(sub, out));
    }
    let mut names: Vec<std::ffi::OsString> =
        ["NELI_KAFKA_PROPERTIES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"].map(Into::into).to_vec();
    walk(&<crate::cli::Cli as clap::CommandFactory>::command(), &mut names);
    names
}

/// How long leaving the group may take before neli-run exits anyway: the
/// coordinator then expires our session instead (a broker that does not
/// answer, or a second SIGTERM, must not keep a stopped service up).
const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Leaves the group off the loop's thread, answering a second SIGTERM or
/// SIGINT by exiting at once.
async fn leave(kafka: Kafka, signals: &mut Signals) {
    let leaving = tokio::task::spawn_blocking(move || kafka.leave());
    tokio::select! {
        _ = leaving => {}
        _ = signals.shutdown() => info!("asked again: exiting without waiting to leave the group"),
        _ = tokio::time::sleep(LEAVE_WAIT) => error!(wait = ?LEAVE_WAIT, "leaving the group takes too long; exiting (the group expires our session)"),
    }
}

/// How long a disclaimer may hold up giving partition 0 away. A healthy
/// broker takes milliseconds; when it is unreachable the next owner waits
/// out our last claim instead.
const DISCLAIM_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

async fn sleep_for(d: Option<std::time::Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// The signals neli-run handles, as streams.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    forwarded: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        let forwarded = [
            (Signal::SIGHUP, SignalKind::hangup()),
            (Signal::SIGUSR1, SignalKind::user_defined1()),
            (Signal::SIGUSR2, SignalKind::user_defined2()),
            (Signal::SIGWINCH, SignalKind::window_change()),
        ];
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            forwarded: forwarded
                .into_iter()
                .map(|(sig, kind)| Ok((sig, signal(kind)?)))
                .collect::<std::io::Result<_>>()?,
        })
    }

    async fn shutdown(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// The next shutdown or forwarded signal, as core input.
    async fn next(&mut self) -> Input {
        let forwarded = any_of(&mut self.forwarded);
        tokio::select! {
            _ = self.term.recv() => Input::Shutdown,
            _ = self.int.recv() => Input::Shutdown,
            sig = forwarded => Input::Forward(leader::Signal(sig as i32)),
        }
    }
}

async fn any_of(streams: &mut [(Signal, tokio::signal::unix::Signal)]) -> Signal {
    std::future::poll_fn(|cx| {
        for (sig, stream) in streams.iter_mut() {
            if stream.poll_recv(cx).is_ready() {
                return std::task::Poll::Ready(*sig);
            }
        }
        std::task::Poll::Pending
    })
    .await
}
