//! The imperative shell: one loop that feeds the leadership core with what
//! happens (Kafka events, signals, the child's exit, its own timer) and
//! carries out the actions it returns.
//!
//! `Shell::serve` turns the loop: `next_input` (its one `select!`), the
//! core's `step`, `apply` for each action, then `report`. The loop's timer
//! is armed at `Leader::next_deadline()` (quinn's `poll_timeout` pattern),
//! so fencing happens here on time whatever the Kafka thread is doing; the
//! shim's lease backs it up if this process itself is frozen.
//!
//! It is split as the core is: `Shell` is the member's part (Kafka, the
//! signals, the health check, the reports), and each seat's part, one per
//! role's partition (`leader::Settings::seats`), is a `Seat` (`seat.rs`: the command, its
//! `--warm` adapter, its revoke's release). The core's actions for a seat
//! go to the seat they name, and a command's exit comes back as its own
//! seat's input (the reaper routes each status by the shim's pid).
//!
//! What takes time runs beside the loop and comes back as an input: waiting
//! for a stopped command's leftovers to go (`Supervisor::exited`), flushing
//! a disclaimer. The loop also waits, each wait bounded and saying why where
//! it is, in the kill's one pass over /proc (`Supervisor::kill`), in `reap`
//! behind the reaper's lock (held by a spawn, or a sweep's signals), and,
//! once the loop is done, in `warm_stop`'s grace and `Shell::exit` (leaving the
//! group, at most `LEAVE_WAIT`; the leader file; the hooks).

mod health;
mod hooks;
mod input;
pub(crate) mod leader_file;
mod reload;
mod report;
mod seat;
mod signals;
mod supervisor;
mod warm;

use std::collections::{BTreeMap, VecDeque};
use std::ops::ControlFlow;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use tokio::time::Interval;
use tracing::{error, info};

use crate::child;
use crate::clock::{Anchor, BootTime};
use crate::config::Config;
use crate::exit::{ChildStatus, Failure, Kind};
use crate::kafka::heartbeat::Member;
use crate::kafka::{Event, Kafka, Out};
use crate::layers_off::{self, Layer};
use crate::leader::{self, Action, Input, Leader, Partition};
use crate::metrics;
use crate::notify::Notifier;
use crate::printable::printable;
use health::Health;
use hooks::Hooks;
use input::Keep;
use leader_file::LeaderFile;
use reload::Reload;
use report::Report;
use seat::{Heard, Seat};
use signals::{sleep_for, Signals};

/// Runs `cfg` until the child's run ends; returns the exit status (the
/// command's, or the core's for an outcome that is not the command's), or
/// why neli-run could not do its part.
pub async fn run(cfg: Config) -> Result<u8, Failure> {
    match Shell::start(cfg).await? {
        Some(shell) => Ok(shell.serve().await),
        None => Ok(0), // asked to stop while connecting
    }
}

/// SIGHUP, as the core names signals: with `--crontab`, read the file again.
const SIGHUP: i32 = nix::sys::signal::Signal::SIGHUP as i32;

/// The loop's state between two turns: the core, what the member talks
/// through, and its seats, each with the command it supervises.
struct Shell {
    core: Leader,
    kafka: Kafka,
    events: UnboundedReceiver<Event>,
    /// False once the Kafka thread has stopped (its channel is closed).
    kafka_alive: bool,
    signals: Signals,
    sigchld: tokio::signal::unix::Signal,
    /// One per seat (one per role), by partition.
    seats: BTreeMap<Partition, Seat>,
    /// Inputs the shell makes itself (a start that failed), heard before
    /// anything new.
    pending: VecDeque<Input>,
    /// A command's exit that --on-exit and --on-failure hear once the core
    /// has judged it (`Leader::why_child_ended`): with the input the loop
    /// steps next, and the run's record (if one was recorded).
    ended: Option<(Partition, ChildStatus, Option<crate::runs::RunRecord>)>,
    /// A disclaimer is flushed off the loop; the handovers that follow it
    /// (release, stand aside, rejoin, exit) wait for that, in order, so the
    /// next owner reads it first. Kills and signals never wait.
    flushing: Option<JoinHandle<()>>,
    after_flush: Vec<Action>,
    /// `--health-cmd`: its verdicts, as they change.
    health: Option<Health>,
    /// `--crontab`: its file, read again on SIGHUP and when it changes.
    reload: Option<Reload>,
    report: Report,
    /// Every run on the record (`<topic>.runs`), written off the loop.
    runs: crate::runs::Runs,
}

impl Shell {
    /// Everything before the loop: checks, signal handlers, the metrics
    /// server, and the Kafka clients; None if asked to stop meanwhile.
    async fn start(mut cfg: Config) -> Result<Option<Shell>, Failure> {
        let started = Anchor::now();
        layers_off::warn_if_any();
        child::check_executable(&cfg.program)?;
        let (Ok(mut signals), Ok(sigchld)) = (Signals::new(), signal(SignalKind::child())) else {
            return Err(Failure::new(Kind::Internal, "cannot install signal handlers"));
        };
        child::become_subreaper()
            .map_err(|err| Failure::new(Kind::Internal, format!("cannot become a child subreaper: {err}")))?;
        if cfg.crontab.is_some() && !place(&mut cfg, &mut signals).await? {
            return Ok(None);
        }
        let seats = Seat::all(&cfg)?;

        let ids =
            metrics::Ids { group: cfg.kafka.group.clone(), topic: cfg.kafka.topic.clone(), member: cfg.name.clone() };
        let metrics = metrics::shared(ids);
        metrics.lock().expect("metrics lock").healthy = cfg.health.as_ref().map(|_| false);
        if let Some(addr) = cfg.metrics_addr {
            if let Err(err) = metrics::serve(addr, metrics.clone()).await {
                return Err(Failure::new(Kind::Usage, format!("cannot serve --metrics-addr {addr}: {err}")));
            }
        }

        let (events_tx, events) = unbounded_channel();
        let member = Member::this_process(cfg.name.clone());
        let lost = report_lost(&metrics);
        let runs = crate::runs::Runs::start(&cfg, &member, lost);
        let Some(mut kafka) = connect(&cfg, member, events_tx, &mut signals, started.boot).await? else {
            return Ok(None);
        };
        kafka.say_crontab(crate::kafka::CrontabSaid::of(&cfg));
        // Once connected: only the loop reaps a check's process (during a
        // long connect each would time out, and the log blame the check).
        let health = Health::start(&cfg)?;
        let notifier = Notifier::from_env();
        let watchdog = Notifier::watchdog_interval().filter(|_| notifier.is_some()).map(tokio::time::interval);
        let turning = cfg.metrics_addr.map(|_| tokio::time::interval(metrics::LOOP_TICK));
        let report = Report {
            metrics,
            notifier,
            watchdog,
            turning,
            // A member waiting for its check is started, not stuck: without
            // READY=1 systemd would fail the unit at TimeoutStartSec.
            joined: cfg.health.is_some(),
            ready: false,
            healthy: cfg.health.as_ref().map(|_| false),
            drain: Default::default(),
            shown: None,
            shown_roles: None,
            leader_files: cfg
                .leader_files
                .iter()
                .map(|(&role, path)| {
                    let about = format!(
                        "{}name={}\ngroup={}\npid={}\n",
                        cfg.roles.map_or(String::new(), |_| format!("role={role}\n")),
                        printable(&cfg.name),
                        printable(&cfg.kafka.group),
                        std::process::id()
                    );
                    (role, (LeaderFile::start(path.clone()), about))
                })
                .collect(),
            hooks: Hooks::start(&cfg),
        };

        // Started before connecting: --acquire-timeout counts from here.
        let mut core = Leader::new(cfg.leader.clone(), started);
        for seat in cfg.leader.seats() {
            if let Some(end) = kafka.born(seat) {
                core.born_at(seat, end);
            }
        }
        Ok(Some(Shell {
            core,
            kafka,
            events,
            kafka_alive: true,
            signals,
            sigchld,
            seats,
            pending: VecDeque::new(),
            ended: None,
            flushing: None,
            after_flush: Vec::new(),
            health,
            reload: Reload::new(&cfg),
            report,
            runs,
        }))
    }

    /// Turns the loop until the core says exit; returns the exit status.
    async fn serve(mut self) -> u8 {
        self.warm_start();
        // Said at once: a member kept out by its health check may hear
        // nothing for long.
        self.report();
        loop {
            let input = self.next_input().await;
            if !self.warm_heard(&input) {
                continue;
            }
            // Handovers held back by a flush that just ended go first.
            let mut actions = match self.flushing {
                None => std::mem::take(&mut self.after_flush),
                Some(_) => Vec::new(),
            };
            // The wall clock read anew each turn: after a step (NTP's first
            // sync), due times follow it (`Leader::wall_clock`).
            self.core.wall_clock(Anchor::now());
            actions.extend(self.core.step(input, BootTime::now()));
            if let (Some((seat, status, run)), Some(hooks)) = (self.ended.take(), self.report.hooks.as_mut()) {
                let why = self.core.why_child_ended(seat);
                hooks.exited(seat, status, why);
                hooks.failed(seat, status, why, run.as_ref());
            }
            for action in actions {
                if let ControlFlow::Break(code) = self.apply(action) {
                    let code = self.warm_stop(code).await;
                    return self.exit(code).await;
                }
            }
            self.report();
        }
    }

    /// The next input for the core: one the shell made itself, or the
    /// first thing the loop's `select!` hears that the core must hear.
    /// What concerns only the shell (a reap, the watchdog, the metrics'
    /// tick) is handled here and waited past.
    async fn next_input(&mut self) -> Input {
        if let Some(input) = self.pending.pop_front() {
            return input;
        }
        loop {
            // tokio's timer runs on CLOCK_MONOTONIC, which stops while the
            // machine is suspended: after a resume this sleep may end late
            // by the suspension's length. The child is not left running
            // meanwhile: the shim's lease is a CLOCK_BOOTTIME timerfd, which
            // fires at once, and the core handles any input only after the
            // deadlines that passed (a fence among them).
            let sleep = self.core.next_deadline().map(|t| t.since(BootTime::now()));
            // `--warm`: the first seat whose dead command is due to start
            // again as a standby's, or whose command has set up and has a
            // signal held for that.
            let warm_due = self.seats.iter().filter_map(|(&p, seat)| Some((seat.warm.as_ref()?.due()?, p))).min();
            tokio::select! {
                event = self.events.recv(), if self.kafka_alive => {
                    if let Some(input) = self.heard(event) {
                        return input;
                    }
                }
                input = self.signals.next() => match (&mut self.reload, input) {
                    // cron's word for "read the file again".
                    (Some(reload), Input::Forward(leader::Signal(sig))) if sig == SIGHUP => reload.ask("SIGHUP"),
                    (_, input) => return input,
                },
                cfg = Reload::next(&mut self.reload) => {
                    self.reloaded(&cfg);
                    return Input::Tick;
                }
                healthy = Health::changed(&mut self.health) => {
                    // Before the core hears it: an unhealthy standby leaves
                    // the group, and one that owns partition 0 stays out
                    // once the core has stood aside.
                    self.report.healthy = Some(healthy);
                    self.keep_out();
                    self.report.metrics.lock().expect("metrics lock").healthy = Some(healthy);
                    return Input::Health(healthy);
                }
                _ = self.sigchld.recv() => child::reap(),
                (seat, heard) = seat::heard(&mut self.seats) => {
                    if let Some(input) = self.seat_heard(seat, heard) {
                        return input;
                    }
                }
                _ = sleep_for(sleep) => return Input::Tick,
                _ = restart(warm_due.map(|(at, _)| at)) => {
                    if let Some(input) = warm_due.and_then(|(_, seat)| self.warm_due(seat)) {
                        return input;
                    }
                }
                _ = flushed(&mut self.flushing) => {
                    self.flushing = None;
                    return Input::Tick;
                }
                _ = tick(&mut self.report.watchdog) => self.report.notify("WATCHDOG=1"),
                _ = tick(&mut self.report.turning) => {
                    let mut m = self.report.metrics.lock().expect("metrics lock");
                    m.loop_seen = Some(BootTime::now());
                    m.kafka_reachable = self.kafka.reachable();
                }
            }
        }
    }

    /// Takes in the crontab read again: each seat's job and command anew.
    fn reloaded(&mut self, cfg: &Config) {
        let jobs = cfg.leader.jobs.clone().unwrap_or_default();
        let names: Vec<&str> = jobs.values().map(|job| job.name.as_str()).collect();
        info!(jobs = ?names, "crontab read again");
        self.core.set_jobs(jobs, BootTime::now());
        self.kafka.say_crontab(crate::kafka::CrontabSaid::of(cfg));
        match self.report.hooks.as_mut() {
            Some(hooks) => hooks.set_jobs(cfg),
            None => self.report.hooks = Hooks::start(cfg),
        }
        for (&partition, seat) in &mut self.seats {
            seat.child.set_command(cfg, partition);
        }
        // The topic grew for a new job: the group's leader must see it.
        if cfg.leader.seats().any(|partition| !self.seats.contains_key(&partition)) {
            self.kafka.look_for_partitions();
        }
    }

    /// Seats a fleet crontab's partition that Kafka names to us for the
    /// first time: one added to the topic for a new job since we started
    /// (`kafka::placement`), whoever added it. Its job runs here if our
    /// crontab has it, as on the seats we started with. Nothing without a
    /// crontab (the seats are the roles'), or for a seat we have.
    fn seat(&mut self, partition: Partition) {
        let Some(cfg) = self.reload.as_ref().map(|r| &r.cfg) else { return };
        if self.seats.contains_key(&partition) {
            return;
        }
        match Seat::new(cfg, partition) {
            Ok(seat) => {
                info!(partition, job = ?cfg.leader.job_on(partition), "a partition added to the topic: seated");
                self.seats.insert(partition, seat);
                self.core.seat(partition);
                // Our producer may not know the partition yet.
                self.kafka.look_for_partitions();
            }
            // Never: `--warm`, the one way to fail, is refused with --crontab.
            Err(e) => error!(partition, "cannot seat a partition added to the topic: {e}"),
        }
    }

    /// The span a seat's log lines go in, the core's (`Leader::role_span`):
    /// naming its role when the member has several.
    fn role_span(&self, seat: Partition) -> Option<tracing::span::EnteredSpan> {
        self.core.role_span(seat)
    }

    /// Takes in what a seat heard: its command's exit, or (`--warm`) a write
    /// of its token file; returns what the core must hear, if anything.
    fn seat_heard(&mut self, seat: Partition, heard: Heard) -> Option<Input> {
        let _role = self.role_span(seat);
        match heard {
            Heard::Exited(status) => {
                info!(%status, "child exited");
                if self.seats.get(&seat).is_some_and(|s| s.warm.is_some()) {
                    return self.warm_exited(seat, status);
                }
                let output = self.seats.get_mut(&seat).and_then(|s| s.child.take_output());
                self.ended = Some((seat, status, self.runs.ended(seat, status, output)));
                Some(Input::ChildExited(seat, status))
            }
            Heard::Written(n, done) => self.warm_written(seat, n, done),
        }
    }

    /// Takes in a Kafka event (None: the Kafka thread stopped): keeps what
    /// the shell needs, and returns what the core must hear, if anything.
    fn heard(&mut self, event: Option<Event>) -> Option<Input> {
        match &event {
            Some(Event::Fatal(failure)) => error!("Kafka: {failure}"),
            Some(Event::Drain { drained, offset, by }) => return self.drain(*drained, *offset, by),
            None => {
                error!("the Kafka thread stopped");
                self.kafka_alive = false;
            }
            Some(_) => {}
        }
        let (input, keep) = input::input(event, !layers_off::off(Layer::Claims));
        if let Some(partition) = input.as_ref().and_then(Input::partition) {
            self.seat(partition);
        }
        match keep {
            Keep::Nothing => {}
            Keep::Joined => self.report.joined = true,
            Keep::Release(partition, release) => match self.seats.get_mut(&partition) {
                Some(seat) => seat.hold(release),
                // Never: Kafka reports revokes of the seats' partitions only.
                None => error!(partition, "a revoke of a partition that is no seat's; released"),
            },
        }
        input
    }

    /// `neli-run drain` (`drained`) or `undrain` named us at `offset`:
    /// newer than any heard, and a change, it keeps us out of the group (a
    /// standby leaves at once; an owner once the core has stood aside) or
    /// lets us join again, as a health check's verdict does.
    fn drain(&mut self, drained: bool, offset: i64, by: &str) -> Option<Input> {
        let drained = self.report.drain.hear(drained, offset)?;
        match drained {
            true => {
                info!(offset, "drained by {by}: stopping our commands and leaving the group until `neli-run undrain`")
            }
            false => info!(offset, "undrained by {by}: joining the group again"),
        }
        self.keep_out();
        self.report.metrics.lock().expect("metrics lock").drained = drained;
        Some(Input::Drain(drained))
    }

    /// Keeps us out of the group while the health check fails or we are
    /// drained, as the report says now.
    fn keep_out(&mut self) {
        let out = match (self.report.healthy, self.report.drain.drained) {
            (_, true) => Out::Drained,
            (Some(false), false) => Out::Unhealthy,
            (_, false) => Out::In,
        };
        self.kafka.keep_out(out);
    }

    /// Carries out one of the core's actions; Break with the status when
    /// the core says exit.
    fn apply(&mut self, action: Action) -> ControlFlow<u8> {
        let handover = matches!(
            action,
            Action::ReleaseRevoke(_) | Action::StandAside | Action::HandOver { .. } | Action::Rejoin | Action::Exit(_)
        );
        if handover && self.flushing.is_some() {
            self.after_flush.push(action);
            return ControlFlow::Continue(());
        }
        if let Some(partition) = action.partition() {
            if self.warm_apply(partition, &action) {
                return ControlFlow::Continue(());
            }
            if !self.seats.contains_key(&partition) {
                // Never: the core names only the seats it was built with.
                error!(partition, "an action for a partition that is no seat's; ignored");
                return ControlFlow::Continue(());
            }
        }
        // Each seat's action goes to the seat its partition names.
        let _role = action.partition().and_then(|p| self.role_span(p));
        let mut seat = action.partition().and_then(|partition| self.seats.get_mut(&partition));
        match action {
            Action::SendHeartbeat(partition, record) => {
                // The control partition's owner names the hot standbys.
                let hot = self.core.hot_list().filter(|_| partition == leader::CONTROL_PARTITION);
                self.kafka.send_heartbeat(partition, BootTime::now(), (record, hot));
            }
            Action::Spawn { partition, token, lease, attempt, begin } => {
                // On the wall clock, as the core reads it: the command never
                // sees a time before its due time.
                let begin_ms = begin.map(|begin| self.core.wall_ms_at(begin));
                let job = seat.as_ref().and_then(|seat| seat.child.job());
                if seat.is_some_and(|seat| seat.child.spawn(Some(token), lease, attempt.clone(), begin_ms)) {
                    self.runs.started(partition, job, token, attempt.as_ref(), begin_ms);
                    let mut m = self.report.metrics.lock().expect("metrics lock");
                    match self.seats.len() {
                        1 => m.child_started(token),
                        _ => m.roles.entry(partition).or_default().started(token),
                    }
                    drop(m);
                    if let Some(hooks) = self.report.hooks.as_mut() {
                        hooks.spawned(partition, token);
                    }
                } else {
                    self.pending.push_back(Input::ChildExited(partition, ChildStatus::Exited(Kind::Internal.code())));
                }
            }
            Action::Lease(_, until) => seat.iter_mut().for_each(|seat| seat.child.renew(until)),
            Action::SignalGroup(_, sig) => seat.iter_mut().for_each(|seat| seat.child.signal(sig)),
            Action::KillGroup(_) => seat.iter_mut().for_each(|seat| seat.child.kill()),
            Action::Disclaim(partition, record) => {
                // It leaves the control partition: the next owner names them.
                self.kafka.send_heartbeat(partition, BootTime::now(), (record, None));
                self.flushing = Some(tokio::task::spawn_blocking(self.kafka.flusher(DISCLAIM_WAIT)));
            }
            Action::Rejoin => self.kafka.rejoin(),
            Action::LeaveGroup => self.kafka.leave_group(),
            Action::Cold(cold) => self.kafka.cold(cold),
            Action::StandAside => self.kafka.stand_aside(),
            Action::HandOver { to } => self.kafka.hand_over(to),
            Action::SendCandidacy { leaving } => {
                self.kafka.send_candidacy(leaving);
                if leaving {
                    self.flushing = Some(tokio::task::spawn_blocking(self.kafka.flusher(DISCLAIM_WAIT)));
                }
            }
            Action::ReleaseRevoke(_) => seat.iter_mut().for_each(|seat| seat.release()),
            Action::Exit(code) => return ControlFlow::Break(code),
        }
        ControlFlow::Continue(())
    }

    /// Tells the operator where the loop stands after a turn
    /// (`Report::show`).
    fn report(&mut self) {
        let now = BootTime::now();
        let wall = self.core.wall_ms_at(now);
        let seats = &self.seats;
        // A warm standby's command runs, and leads only once promoted.
        let up = |p| {
            seats.get(&p).is_some_and(|seat| seat.child.is_running() && seat.warm.as_ref().is_none_or(|w| w.leads()))
        };
        let reachable = self.kafka.reachable();
        self.report.show(&self.core.views(), up, reachable, (now, wall));
    }

    /// Leaves the group, then waits for the hooks, and returns `code`. The
    /// waits after the loop, and on its thread: the core exits only once
    /// the command is gone, so nothing is left to supervise or fence
    /// meanwhile (and the hooks' processes are reaped here: nothing else
    /// is below us); each wait is bounded (`LEAVE_WAIT`, --hook-timeout)
    /// and a second SIGTERM or SIGINT cuts it short. The hooks come after
    /// leaving: a hook must not delay the handover.
    async fn exit(mut self, code: u8) -> u8 {
        self.report.notify("STOPPING=1");
        if let Some(health) = self.health.take() {
            health.stop();
        }
        let files = std::mem::take(&mut self.report.leader_files).into_values().map(|(file, _)| file);
        LeaderFile::close_all(files, LEADER_FILE_WAIT).await;
        info!(code, "leaving the group");
        // Kafka unreachable: the last records wait for nothing.
        let runs_wait = if self.kafka.reachable() { RUNS_WAIT } else { std::time::Duration::ZERO };
        let leaving = tokio::task::spawn_blocking(move || self.kafka.leave());
        let mut hurried = false;
        tokio::select! {
            _ = leaving => {}
            _ = self.signals.shutdown() => {
                info!("asked again: exiting without waiting to leave the group");
                hurried = true;
            }
            _ = tokio::time::sleep(LEAVE_WAIT) => error!(wait = ?LEAVE_WAIT, "leaving the group takes too long; exiting (the group expires our session)"),
            _ = reaping(&mut self.sigchld) => {}
        }
        // After the handover: the last run's end record, bounded (not at
        // all when asked again to stop).
        self.runs.finish(if hurried { std::time::Duration::ZERO } else { runs_wait }).await;
        if let Some(hooks) = self.report.hooks.take() {
            let signals = &mut self.signals;
            let hurry = async move {
                if !hurried {
                    signals.shutdown().await;
                }
            };
            tokio::select! {
                _ = hooks.finish(hurry) => {}
                _ = reaping(&mut self.sigchld) => {}
            }
        }
        code
    }
}

/// Connects to Kafka on a blocking thread; None if SIGTERM or SIGINT came
/// first. --acquire-timeout, counted from `started`, bounds the wait.
async fn connect(
    cfg: &Config,
    member: Member,
    events: UnboundedSender<Event>,
    signals: &mut Signals,
    started: BootTime,
) -> Result<Option<Kafka>, Failure> {
    let t = &cfg.timing;
    info!(group = %printable(&cfg.kafka.group), topic = %cfg.kafka.topic, name = %printable(&cfg.name), brokers = %cfg.kafka.brokers, "joining");
    info!(session_timeout = ?t.session_timeout, heartbeat_deadline = ?t.heartbeat_deadline, heartbeat_interval = ?t.heartbeat_interval, grace = ?t.grace, coordinator_heartbeat = ?t.coordinator_heartbeat, socket_timeout = ?t.request_timeout(), "timing");
    let connecting = {
        let settings = crate::kafka::Settings::of(cfg);
        tokio::task::spawn_blocking(move || Kafka::connect(&settings, member, events))
    };
    tokio::select! {
        kafka = connecting => match kafka {
            Ok(Ok(kafka)) => Ok(Some(kafka)),
            Ok(Err(failure)) => Err(failure),
            Err(err) => Err(Failure::new(Kind::Internal, format!("connecting to Kafka failed: {err}"))),
        },
        _ = signals.shutdown() => Ok(None),
        _ = sleep_for(cfg.leader.acquire_timeout.map(|t| (started + t).since(BootTime::now()))) => {
            Err(Failure::new(Kind::AcquireTimeout, "not leader within --acquire-timeout (Kafka never answered)"))
        }
    }
}

/// Places the crontab's jobs on the topic's partitions (`kafka::placement`)
/// and seats them; false if asked to stop meanwhile.
async fn place(cfg: &mut Config, signals: &mut Signals) -> Result<bool, Failure> {
    let names: Vec<String> = cfg.crontab.iter().flat_map(|c| c.jobs.iter().map(|job| job.name.clone())).collect();
    let placing = {
        let settings = crate::kafka::Settings::of(cfg);
        tokio::task::spawn_blocking(move || crate::kafka::placement::place(&settings, &names))
    };
    tokio::select! {
        placed = placing => match placed {
            Ok(Ok((placed, partitions))) => {
                cfg.place(&placed, partitions);
                Ok(true)
            }
            Ok(Err(failure)) => Err(failure),
            Err(err) => Err(Failure::new(Kind::Internal, format!("placing the crontab's jobs failed: {err}"))),
        },
        _ = signals.shutdown() => Ok(false),
    }
}

/// The counter of lost run records that /metrics shows.
fn report_lost(metrics: &metrics::Shared) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
    metrics.lock().expect("metrics lock").runs_unrecorded.clone()
}

/// Reaps whatever exits below us, for ever: after the loop, where nothing
/// else does (the hooks' statuses come back through it).
async fn reaping(sigchld: &mut tokio::signal::unix::Signal) {
    loop {
        child::reap();
        if sigchld.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

/// Waits until `at`, if set (else never ends).
async fn restart(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Waits for the flush under way, if any (else never ends).
async fn flushed(flushing: &mut Option<JoinHandle<()>>) {
    match flushing {
        Some(flush) => {
            let _ = flush.await;
        }
        None => std::future::pending().await,
    }
}

/// The next tick of `interval`, if there is one (else never ends).
async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// How long leaving the group may take before neli-run exits anyway: the
/// coordinator then expires our session instead (a broker that does not
/// answer, or a second SIGTERM, must not keep a stopped service up).
const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long writing the runs' last records may hold up exiting, once the
/// group has been left (a broker down: the records are lost, and said so).
const RUNS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// How long removing the leader file may hold up exiting (a hung file
/// system).
const LEADER_FILE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a disclaimer may hold up giving partition 0 away. A healthy
/// broker takes milliseconds; when it is unreachable the next owner waits
/// out our last claim instead.
const DISCLAIM_WAIT: std::time::Duration = std::time::Duration::from_millis(250);
