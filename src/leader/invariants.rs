//! The core's promises, checked after every step of seeded random walks (the
//! harness idea of raft-rs). The scenario tests tell stories; this one
//! states the rules and lets random sequences of assignments, revokes, own
//! and foreign records (v1 and v2), child exits, signals and time try to
//! break them. Pause and resume requests among them, read as requests or
//! carried by others' records: while the newest says paused nothing
//! starts, and `--stop` stops what runs. The wall clock steps now and
//! then, forward and back: due times follow it, and none runs twice.
//! Walks with a health check (`--health-cmd`) turn it healthy and
//! unhealthy at random too, and every walk drains and undrains the member
//! (`neli-run drain`): no command starts while it is unhealthy or drained.
//! Now and then a record of another member read before is read again, as a
//! consumer whose read position went back (an offset reset) reads it: it
//! says nothing new, and the rules below do not change for it.
//!
//! A simulated shell stands around one [`Leader`]: it keeps the rebalance
//! callback's contract (no assignment while a revoke waits for release), a
//! child that dies when killed, when its lease runs out (the shim) or by
//! itself, and a partition log in which our records come back in order,
//! late or never. What it knows of other members' claims and terms it works
//! out from the records it fed in, by the README's rules, not by asking
//! the core.
//!
//! Every action that names a partition names a seat's. A run that must
//! not be doubled (a wave's, a due time's) starts only once a record of ours
//! naming it was read back (C-10).
//!
//! `NELI_INVARIANT_SEEDS=n` runs more seeds than the default.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use super::fixtures::*;
use super::*;

mod inputs;

const D: u64 = 1000; // heartbeat deadline, ms
const H: u64 = 200; // heartbeat interval, ms
const GRACE: u64 = 500;

fn as_ms(t: BootTime) -> u64 {
    (t.since(BootTime::from_nanos(0))).as_millis() as u64
}

/// The child as the simulated shell sees it.
#[derive(Debug)]
struct Child {
    token: i64,
    lease: u64,
    /// When it will be gone (it was killed, stopped, or ends by itself).
    exits_at: Option<u64>,
    killed: bool,
    /// When it started, and whether it was since asked to stop or killed.
    since: u64,
    stopped: bool,
}

/// Another member's term as the README's rules make it: its first offset,
/// until when its newest record counts, whether it still contends.
#[derive(Debug, Clone, Copy)]
struct TheirTerm {
    id: u64,
    start: i64,
    until: u64,
    contending: bool,
}

/// A run as records name it: its token, wave, attempt and due time.
type RunKey = (i64, i64, u32, Option<u64>);

fn run_key(j: &Attempt) -> RunKey {
    (j.token, j.wave_token, j.number, j.due)
}

struct Sim {
    seed: u64,
    rng: fastrand::Rng,
    settings: Settings,
    core: Leader,
    now: u64,
    /// The next offset on partition 0.
    log: i64,
    /// Our records produced and not yet read back: (record, sent).
    outbox: VecDeque<(Record, u64)>,
    owned: bool,
    /// A revoke waits in the rebalance callback for release.
    revoke_waits: bool,
    /// We asked to leave (rejoin, stand aside): a revoke comes next.
    leaving: bool,
    child: Option<Child>,
    /// Other writers' claims: until when each may run its command.
    claims: BTreeMap<String, u64>,
    terms: BTreeMap<String, TheirTerm>,
    their_term: BTreeMap<String, u64>,
    /// The first offset of each of our terms read back.
    own_start: BTreeMap<u64, i64>,
    /// Our newest term (from the records we were told to write).
    our_term: u64,
    /// The send time of the newest own record read back.
    newest_read: Option<u64>,
    /// The runs (`run_key`) that our records read back named, not ended.
    named_read: BTreeSet<RunKey>,
    last_token: Option<i64>,
    /// The newest token another member claimed (below its record's offset).
    newest_theirs: Option<i64>,
    last_spawn_token: Option<i64>,
    shutting_down: bool,
    /// When our latest scheduled run ended by itself (told to the core).
    ended_at: Option<u64>,
    /// How our latest scheduled run ended by itself, if it did: its
    /// status and the wall-clock time.
    exited: Option<(u8, u64)>,
    /// The due time and attempt of our latest scheduled run.
    last_due: Option<(u64, u32)>,
    /// Scheduled runs started.
    scheduled: u64,
    /// The newest pause or resume fed: (offset, paused, stop).
    pause: Option<(i64, bool, bool)>,
    /// Walks that started the command after a resume.
    resumed_runs: u64,
    done: bool,
    /// The health check's verdict as last told to the core.
    healthy: bool,
    /// `neli-run drain` named us (toggled at random in every walk).
    drained: bool,
    /// The newest own record fed said records were fetched behind it, and
    /// no `CaughtUp` has come since.
    catching_up: bool,
    trace: Vec<String>,
    /// The walk's boot on the wall clock: any time of day, so that due
    /// times fall anywhere between the walk's steps. Moved by the wall
    /// clock's steps.
    wall0: u64,
    /// Draws the wall clock's steps, apart from `rng`: the walks' other
    /// inputs stay what they were before steps came in.
    clock: fastrand::Rng,
    /// Other members' records fed lately, each with when: read again now
    /// and then (drawn by `again`, apart from `rng` as `clock` is).
    heard: VecDeque<(Other, u64)>,
    again: fastrand::Rng,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = fastrand::Rng::with_seed(seed);
        let restart = [Restart::Never, Restart::OnFailure, Restart::Always][rng.usize(..3)];
        let settings = Settings {
            heartbeat_interval: Duration::from_millis(H),
            heartbeat_deadline: Duration::from_millis(D),
            grace: Duration::from_millis(GRACE),
            stop_signal: SIGTERM,
            restart,
            restart_delay: Duration::from_millis(rng.u64(0..300)),
            acquire_timeout: rng.bool().then(|| Duration::from_millis(rng.u64(1000..20_000))),
            max_runtime: (rng.u8(..4) == 0).then(|| Duration::from_millis(rng.u64(1..3000))),
            resume_window: Duration::from_millis(2200),
            claim_margin: Duration::from_millis([0, 200][rng.usize(..2)]),
            // Once per wave only adds ways to exit without running.
            waves: (restart == Restart::Never && rng.bool())
                .then(|| Waves { within: Duration::from_millis(rng.u64(0..20_000)), retry_failed: rng.bool() }),
            schedule: None,
            health_checked: rng.u8(..3) == 0,
            name: "me".into(),
            priority: rng.u8(..3),
            preempt: rng.bool(),
            candidacy_interval: Duration::from_millis(rng.u64(100..1000)),
            hot_standbys: 2,
            owner_silence: Duration::from_millis(3000),
            // One seat: the roles walk (`roles_walk`) tries several.
            roles: 1,
            overlap: false,
            jobs: None,
        };
        // A schedule runs the command at due times instead (never with waves).
        let schedule = (restart == Restart::Never && settings.waves.is_none() && rng.bool()).then(|| Schedule {
            calendar: every(rng.u64(50..3000)),
            missed: [Missed::Skip, Missed::Once, Missed::All][rng.usize(..3)],
            starting_deadline: rng.bool().then(|| Duration::from_millis(rng.u64(0..3000))),
            retry: rng.bool().then(|| Retry { times: rng.u32(0..3), delay: Duration::from_millis(rng.u64(0..2000)) }),
            overlap: [None, Some(Overlap::Skip), Some(Overlap::Queue), Some(Overlap::Replace)][rng.usize(..4)],
            since: None,
            line: None,
        });
        // A health check, a member of higher priority and a schedule each
        // hold starts back: together they leave too few second runs for the
        // schedule's rules to be tried. A scheduled walk has neither.
        let health_checked = settings.health_checked && schedule.is_none();
        let priority = if schedule.is_some() { 2 } else { settings.priority };
        let settings = Settings { schedule, health_checked, priority, ..settings };
        let wall0 = WALL + rng.u64(..86_400_000);
        let mut core = Leader::new(settings.clone(), Anchor { boot: ms(0), wall_ms: wall0 });
        if rng.bool() {
            core.born_at(P, rng.i64(0..20));
        }
        Sim {
            seed,
            rng,
            settings,
            core,
            now: 0,
            log: 0,
            outbox: VecDeque::new(),
            owned: false,
            revoke_waits: false,
            leaving: false,
            child: None,
            claims: BTreeMap::new(),
            terms: BTreeMap::new(),
            their_term: BTreeMap::new(),
            own_start: BTreeMap::new(),
            our_term: 0,
            newest_read: None,
            named_read: BTreeSet::new(),
            last_token: None,
            newest_theirs: None,
            last_spawn_token: None,
            shutting_down: false,
            ended_at: None,
            exited: None,
            last_due: None,
            scheduled: 0,
            pause: None,
            resumed_runs: 0,
            done: false,
            healthy: !health_checked,
            drained: false,
            catching_up: false,
            trace: Vec::new(),
            wall0,
            clock: fastrand::Rng::with_seed(seed ^ 0x5eed_c10c),
            heard: VecDeque::new(),
            again: fastrand::Rng::with_seed(seed ^ 0x000f_f5e7),
        }
    }

    fn fail(&self, what: &str) -> ! {
        let tail: Vec<&String> = self.trace.iter().rev().take(40).rev().collect();
        panic!("invariant broken in seed {} at {} ms: {what}\nlast steps:\n{tail:#?}", self.seed, self.now);
    }

    /// Time passes to the next input; the shell's timer fires on the way,
    /// on time (or, after a freeze, late: at the input's own time).
    fn step(&mut self) {
        if self.clock.u8(..100) == 0 {
            self.step_wall_clock();
        }
        if let Some(input) = (self.again.u8(..25) == 0).then(|| self.read_again()).flatten() {
            self.feed(input);
            if self.done {
                return;
            }
        }
        let frozen = self.rng.u8(..50) == 0;
        let at = self.now + if frozen { self.rng.u64(0..3000) } else { self.rng.u64(0..250) };
        while let Some(due) = self.core.next_deadline().map(as_ms).filter(|&d| d <= at) {
            self.now = if frozen { at } else { due.max(self.now) };
            self.feed(Input::Tick);
            if self.done {
                return;
            }
        }
        self.now = at;
        let input = self.next_input();
        self.feed(input);
    }

    /// The wall clock steps (NTP, or by hand), forward or back, by 100 ms
    /// (what counts as a step) to 5 s. The shell reads it before each step
    /// of the core: here, a tick's, as the first thing after the step (a
    /// deadline the step moved into the past is handled before any input
    /// that comes later, as a timer's tick is). The checks then count due
    /// times on the clock as set.
    fn step_wall_clock(&mut self) {
        let by = self.clock.u64(100..5000);
        self.wall0 = if self.clock.bool() { self.wall0 + by } else { self.wall0 - by };
        self.trace.push(format!("{} ms: the wall clock now reads {}", self.now, self.wall0 + self.now));
        self.core.wall_clock(Anchor { boot: ms(self.now), wall_ms: self.wall0 + self.now });
        self.feed(Input::Tick);
    }

    /// Feeds one input and checks every action and the state after it.
    fn feed(&mut self, input: Input) {
        if let Input::OwnHeartbeat { sent, .. } = &input {
            let sent = as_ms(*sent);
            self.newest_read = Some(self.newest_read.map_or(sent, |n| n.max(sent)));
        }
        if matches!(input, Input::Shutdown | Input::Fatal(_)) {
            self.shutting_down = true;
        }
        // The newest request by offset, of those a record may name.
        let read = match &input {
            Input::Pause(_, p) => Some(p.clone()),
            Input::OtherHeartbeat(_, o) => o.pause.clone().filter(|p| p.offset < o.offset),
            _ => None,
        };
        if let Some(p) = read.filter(|p| self.pause.is_none_or(|(known, ..)| p.offset > known)) {
            self.pause = Some((p.offset, p.paused, p.stop));
        }
        let now = self.now;
        let before = self.core.standing(P);
        let actions = self.core.step(input.clone(), ms(now));
        self.trace.push(format!("{now} ms: {input:?} -> {actions:?}, standing {:?}", self.core.standing(P)));
        let standing = self.core.standing(P);
        if before == Standing::Candidate && matches!(standing, Standing::Leader { .. }) && self.catching_up {
            // It may not know yet of a member it should let lead.
            self.fail("a candidate led before it heard the records fetched with its heartbeat");
        }
        for action in actions {
            self.check(&action, standing);
        }
        self.check_state(standing);
    }

    fn check(&mut self, action: &Action, standing: Standing) {
        let now = self.now;
        if action.partition().is_some_and(|p| p != P) {
            self.fail(&format!("{action:?} names a partition that is no seat"));
        }
        let fresh_until = self.newest_read.map(|s| s + D);
        match action.clone() {
            Action::SendHeartbeat(_, record) => {
                self.check_carried(&record);
                if let Some(child) = &self.child {
                    // A record never claims less than is true.
                    if record.stance.token().is_none_or(|t| t < child.token) {
                        self.fail(&format!("{record:?} written while a child of token {} may live", child.token));
                    }
                }
                self.produce(record);
            }
            Action::Disclaim(_, record) => {
                if self.child.is_some() || record.stance != Stance::Released {
                    self.fail(&format!("disclaimer {record:?} with a child alive: {:?}", self.child));
                }
                self.check_carried(&record);
                self.produce(record);
            }
            Action::Spawn { token, lease, attempt, begin, .. } => {
                self.check_spawn(token, (lease, fresh_until), attempt, begin, standing);
            }
            Action::Lease(_, until) => {
                let until = as_ms(until);
                if fresh_until.is_none_or(|f| until > f) {
                    self.fail(&format!("lease to {until} beyond the newest own record read back + D"));
                }
                match self.child.as_mut() {
                    Some(child) if !child.killed => child.lease = until,
                    Some(_) => {}
                    None => self.fail("lease without a child"),
                }
            }
            Action::SignalGroup(_, sig) => {
                if let Some(child) = self.child.as_mut() {
                    child.stopped |= sig == SIGTERM;
                    if sig == SIGTERM && child.exits_at.is_none() && self.rng.u8(..4) != 0 {
                        child.exits_at = Some(now + self.rng.u64(0..800));
                    }
                }
            }
            Action::KillGroup(_) => {
                if let Some(child) = self.child.as_mut() {
                    child.killed = true;
                    child.stopped = true;
                    child.exits_at = Some(child.exits_at.map_or(now + 20, |t| t.min(now + 20)));
                }
            }
            Action::ReleaseRevoke(_) => {
                if self.child.is_some() {
                    self.fail("revoke released while a child lives");
                }
                if !self.revoke_waits {
                    self.fail("release without a revoke");
                }
                self.revoke_waits = false;
            }
            Action::SendCandidacy { .. } => {
                if standing != Standing::Standby {
                    self.fail(&format!("a candidacy written while {standing:?}"));
                }
            }
            Action::Rejoin | Action::StandAside | Action::HandOver { .. } => {
                if matches!(action, Action::StandAside | Action::HandOver { .. }) && self.child.is_some() {
                    self.fail("stood aside while a child lives");
                }
                self.leaving = true;
            }
            // A cold standby holds nothing: no partition, no command.
            Action::Cold(true) if self.child.is_some() || standing != Standing::Standby => {
                self.fail(&format!("went cold while {standing:?}, child {:?}", self.child));
            }
            Action::Cold(_) => {}
            // Only with --overlap, which these walks leave off
            // (`roles_walk` tries it).
            Action::LeaveGroup => self.fail("left the group ahead of exiting without --overlap"),
            Action::Exit(_) => {
                if self.child.is_some() {
                    self.fail("exit while a child lives");
                }
                self.done = true;
            }
        }
    }

    /// A spawn: who may start the command, when, under which lease.
    fn check_spawn(
        &mut self,
        token: i64,
        (lease, fresh_until): (BootTime, Option<u64>),
        attempt: Option<Attempt>,
        begin: Option<BootTime>,
        standing: Standing,
    ) {
        let now = self.now;
        if attempt.as_ref().is_some_and(|j| !self.named_read.contains(&run_key(j))) {
            self.fail(&format!("{attempt:?} started before a record of ours naming it was read back"));
        }
        if let Some(schedule) = self.settings.schedule.clone() {
            self.check_scheduled(&schedule, attempt, begin);
        }
        if begin
            .is_some_and(|begin| begin <= ms(self.now) || begin >= lease || begin > ms(self.now) + promote::HEAD_START)
        {
            self.fail(&format!(
                "a command to begin at {begin:?}: not after now, within the head start and before its lease {lease:?}"
            ));
        }
        let lease = as_ms(lease);
        if self.child.is_some() {
            self.fail("spawn while a child lives");
        }
        if standing != (Standing::Leader { token }) {
            self.fail(&format!("spawn of token {token} while {standing:?}"));
        }
        if self.shutting_down {
            self.fail("spawn while shutting down");
        }
        match self.pause {
            Some((offset, true, _)) => self.fail(&format!("spawn while paused (request at {offset})")),
            Some(_) => self.resumed_runs += 1,
            None => {}
        }
        if !self.healthy {
            self.fail("spawn while unhealthy");
        }
        if self.drained {
            self.fail("spawn while drained");
        }
        if lease <= now || fresh_until.is_none_or(|f| lease > f) {
            self.fail(&format!("spawn with lease {lease} (newest own record read back + D: {fresh_until:?})"));
        }
        let ours = self.own_start.get(&self.our_term).copied();
        if let Some(why) = held_back(&self.claims, &self.terms, now, ours) {
            self.fail(&format!("spawn while {why}"));
        }
        if self.last_spawn_token.is_some_and(|t| token < t) {
            self.fail(&format!("token {token} after {:?}", self.last_spawn_token));
        }
        self.last_spawn_token = Some(token);
        // Most commands take SIGTERM; some ignore it. Its run (and
        // --max-runtime) begins when its command does: a scheduled
        // run's shim is started ahead of it.
        let since = begin.map_or(now, as_ms);
        self.child = Some(Child { token, lease, exits_at: None, killed: false, since, stopped: false });
    }

    /// A scheduled run's command starts (at once, or at `begin`) at or
    /// after its due time and within the starting deadline; after our
    /// previous run ended by itself, only once a record of ours sent after
    /// that is read back; and due times run in order (the same one again
    /// only as a later attempt, after a cut).
    fn check_scheduled(&mut self, schedule: &Schedule, attempt: Option<Attempt>, begin: Option<BootTime>) {
        let (now, deadline) = (begin.map_or(self.now, as_ms), schedule.starting_deadline);
        // (Due times are wall-clock ms; the walk's times are boot time.)
        let Some(Attempt { due: Some(due), number, .. }) = attempt else {
            self.fail(&format!("a scheduled spawn without a due time: {attempt:?}"));
        };
        let (due, now) = (due, self.wall0 + now);
        if due > now || deadline.is_some_and(|d| now > due + d.as_millis() as u64) {
            self.fail(&format!("the run of due time {due} started at {now} (starting deadline {deadline:?})"));
        }
        if let Some(ended) = self.ended_at.filter(|&e| self.newest_read.is_none_or(|r| r <= e)) {
            self.fail(&format!("a run started before a record sent after the last one ended at {ended} was read back"));
        }
        if let Some((last, last_attempt)) = self.last_due {
            if due < last || (due == last && number <= last_attempt) {
                self.fail(&format!("due time {due} attempt {number} after due time {last} attempt {last_attempt}"));
            }
            // A run that ended by itself runs again only as a failure's
            // retry, after its delay.
            if let Some((code, ended)) = self.exited.take().filter(|_| due == last) {
                match schedule.retry.filter(|r| code != 0 && last_attempt <= r.times) {
                    None => self.fail(&format!("due time {due} ran again after attempt {last_attempt} exited {code}")),
                    Some(r) if now < ended + r.delay.as_millis() as u64 => {
                        self.fail(&format!("due time {due} retried at {now}, before {ended} + {:?}", r.delay))
                    }
                    Some(_) => {}
                }
            }
        }
        self.exited = None;
        self.last_due = Some((due, number));
        self.scheduled += 1;
    }

    /// Every record carries the newest pause or resume we fed, and says
    /// whether our command may run.
    fn check_carried(&self, record: &Record) {
        let said = record.pause.as_ref().map(|n| (n.request.offset, n.request.paused, n.request.stop));
        if said != self.pause || record.pause.as_ref().is_some_and(|n| n.running != self.child.is_some()) {
            self.fail(&format!(
                "{record:?} carries not the newest pause {:?} or not whether a child lives",
                self.pause
            ));
        }
    }

    fn produce(&mut self, record: Record) {
        self.our_term = record.term;
        self.outbox.push_back((record, self.now));
    }

    fn check_state(&mut self, standing: Standing) {
        let now = self.now;
        let taken = self.core.standings_taken(P);
        if taken.windows(2).any(|w| w[0] == w[1]) || taken.last().is_some_and(|&r| r != standing) {
            self.fail(&format!("standings reported {taken:?} while {standing:?}"));
        }
        if let Standing::Leader { token } = standing {
            if self.last_token != Some(token) {
                if self.last_token.is_some_and(|t| token <= t) {
                    self.fail(&format!("leader with token {token} after {:?}", self.last_token));
                }
                if self.newest_theirs.is_some_and(|t| token <= t) {
                    self.fail(&format!("leader with token {token}, older than {:?} read", self.newest_theirs));
                }
                self.last_token = Some(token);
            }
            let fresh_until = self.newest_read.map_or(0, |s| s + D);
            if self.child.as_ref().is_some_and(|c| !c.killed) && now >= fresh_until {
                self.fail("leader with a live child past its newest own record + D: not fenced");
            }
            if self.core.next_deadline().is_none_or(|t| as_ms(t) > fresh_until) {
                self.fail(&format!(
                    "a leader's next deadline {:?} is past its fence at {fresh_until}",
                    self.core.next_deadline()
                ));
            }
        }
        if let (Some(max), Some(child)) = (self.settings.max_runtime, &self.child) {
            if !child.stopped && now >= child.since + max.as_millis() as u64 {
                self.fail(&format!("a child started at {} runs past --max-runtime {max:?} unstopped", child.since));
            }
        }
        if let (Some((offset, true, true)), Some(child)) = (self.pause, &self.child) {
            if !child.stopped {
                self.fail(&format!("a child runs unstopped after pause --stop at {offset}"));
            }
        }
        if (!self.healthy || self.drained) && self.child.is_none() && standing != Standing::Standby {
            // Unhealthy or drained, a member gives partition 0 up once its
            // command is gone.
            self.fail(&format!("{standing:?} while unhealthy or drained with no command"));
        }
        if self.revoke_waits && self.child.is_none() {
            // Every path that ends the child releases a waiting revoke at once.
            self.fail("a revoke waits with no child alive");
        }
        if let Some(t) = self.core.next_deadline() {
            if as_ms(t) <= now && !self.done {
                self.fail(&format!("next deadline {t:?} already passed"));
            }
        }
    }
}

/// What holds a spawn at `now` back, if anything: a claim that has not run
/// out, or a term that contends from before ours (`ours`, our term's first
/// offset) and has not gone quiet.
fn held_back(
    claims: &BTreeMap<String, u64>,
    terms: &BTreeMap<String, TheirTerm>,
    now: u64,
    ours: Option<i64>,
) -> Option<String> {
    if let Some((w, until)) = claims.iter().find(|(_, &u)| u > now) {
        return Some(format!("{w}'s claim holds until {until}"));
    }
    let earlier = terms.iter().find(|(_, r)| r.contending && r.until > now && ours.is_some_and(|s| r.start < s));
    earlier.map(|(w, r)| format!("{w}'s term {r:?}, earlier than ours at {ours:?}, contends"))
}

#[test]
fn random_runs_keep_every_promise() {
    let seeds: u64 = std::env::var("NELI_INVARIANT_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let (mut spawned, mut repeated, mut schedules, mut resumed) = (0, 0, 0, 0);
    for seed in 0..seeds {
        let mut sim = Sim::new(seed);
        // A schedule's second run needs a first that ended by itself, then
        // a due time, while no pause, yield or fault holds it back: longer.
        let steps = if sim.settings.schedule.is_some() { 1500 } else { 600 };
        for _ in 0..steps {
            sim.step();
            if sim.done {
                // After Exit, only a revoke from closing is answered.
                if sim.revoke_waits {
                    let actions = sim.core.step(revoked(false), ms(sim.now));
                    assert_eq!(actions, vec![Action::ReleaseRevoke(P)], "seed {seed}");
                }
                assert_eq!(sim.core.step(Input::Tick, ms(sim.now + 10_000)), vec![], "seed {seed}");
                break;
            }
        }
        spawned += u64::from(sim.last_spawn_token.is_some());
        repeated += u64::from(sim.scheduled > 1);
        schedules += u64::from(sim.settings.schedule.is_some());
        resumed += u64::from(sim.resumed_runs > 0);
    }
    // Resumes start the command again, or the pause check proves little.
    assert!(resumed > seeds / 10, "only {resumed} of {seeds} walks started the command after a resume");
    // And a schedule's second run, after a first that ended by itself: rare
    // (each run waits for its ending, then its naming, to be read back, and
    // our records come back late here), so the walks are many.
    assert!(repeated * 50 > schedules, "only {repeated} of {schedules} scheduled walks started a second run");
    // The walk must reach leadership often, or it checks little.
    // (A run a record names starts a read-back later: fewer walks get there.)
    assert!(spawned > seeds / 4, "only {spawned} of {seeds} runs ever spawned");
}
