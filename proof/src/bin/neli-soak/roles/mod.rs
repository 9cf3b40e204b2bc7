//! The roles soak (`--roles R`): every member runs `neli-run --roles R`,
//! each role's command under an overlap detector of its own
//! (`WORK/roles/{role}`, which neli-run fills in per role), and faults
//! strike random members (with roles every member leads some), the broker
//! or the cluster until --transitions role moves: a role's command
//! starting on another member than that role's previous start.
//!
//! The fault `drain` takes a member holding a role out of the group, half
//! the time by `neli-run drain NAME` and half by its health check, which
//! its file `drain-NAME` fails (`--health-cmd 'test ! -e
//! WORK/drain-NAME'`, checked every 100 ms, one failure enough, on every
//! member): it stops every role's command, leaves the group and stays
//! alive; once the group settled without it, `neli-run undrain NAME` or the
//! file removed (the `undrain`, before any other fault) brings it back to
//! take its share.
//!
//! A role paused (`pause`, not on a schedule): `neli-run pause --role J
//! --stop` of a random role of a settled group, then its holder leaves
//! (SIGTERM, started again at once); until the other roles settle, role
//! J's lock must stay free with no start (its next owner reads the pause
//! on J's partition): a start or a held lock is unsafe. Then `resume
//! --role J`, and J must run again as the group settles.
//!
//! Between faults the soak waits for the group to *settle*: every role's
//! lock held, each by a live member (running, neither struck down, frozen,
//! cut off nor drained), the roles spread evenly over the live members
//! (R/n rounded down or up each), no start for half a session, nothing left
//! to do (a thaw, a heal, a restart, a cluster event) and nothing done for
//! a session. A fault and what follows
//! up to the next settled moment is an *episode*. Now and then a second
//! fault strikes while the first is in flight; an episode that overlapped
//! another (or a member's unasked exit) is not *clean*.
//!
//! Judged on clean episodes that began settled, the *needless moves*:
//! after a join, a role whose holder changed to another member than the
//! joiner, or that started again on its holder; after a member's leave
//! (SIGTERM) or crash (kill -9) that was not started again within the
//! episode, or its drain, a role of another member that moved or started
//! again; after an undrain, as after a join, a role that moved to another
//! member than the one back, or started again on its holder; after a job
//! added to a `--crontab` (which starts a job short, on a topic of a
//! partition per job, and gets its last job a third of the way in, alone,
//! from a settled group: a partition is added for it; not on tansu, which
//! cannot add one), any other job that moved or ran again. A drained
//! member never exits (one that does is counted as any unasked exit), and
//! no other fault strikes it or its commands until its undrain. Measured:
//! each role's longest time with no command (its lock free), and how long
//! the roles of a member stopped with SIGTERM or kill -9, or drained, took
//! to start elsewhere (clean episodes only).
//!
//! On a schedule (`--roles R --schedule`): every member also runs
//! `--every` and `--missed all` (the single leader's schedule soak's period
//! and run length), and each role's command is one run per due time
//! (`SCHEDULED`), still under its role's detector: overlaps and orphans
//! per role as above. Settled means every role has started a run since the
//! last strike or action (a lock is free between runs), on a live member,
//! spread evenly. A needless move is then any run of the episode, by the
//! command's own record, on another member than the role's holder and the
//! one it may go to, or the holder's run cut short and run again (a later
//! attempt). Each role's runs are judged by the schedule's rules
//! (`judge::check_roles_schedule`): no rerun after an ending recorded, no
//! due time skipped.
//!
//! A crontab's own paths (`--crontab`, issue 65): each member reads a file
//! of its own (`crontabs/NAME`, a copy of `fleet.crontab` given at its start
//! and at each reload), so that a change reaches the members one at a
//! time. A fifth of the faults cut a job's holder off (`cut-before-due`)
//! 0.2-2 s before one of that job's due times, for 0.2-2 session timeouts;
//! `reschedule` changes one job's `@every` and rolls the file out, a SIGHUP
//! per member 0.3-1.5 s apart (half the time while the job's run goes
//! on), alone from a settled group (judged like a job added: no job may
//! move nor run again). The judge (`paths`) tells each due time run twice
//! by when its first run's command started against its member's cuts
//! (after a cut fails the soak), checks that no changed line runs a due
//! time that passed before the line took over the job, and counts, per
//! role, the fences of a leader within its first second (every roles soak).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use neli_proof::detector::{locks_held, Detector};
use neli_proof::netns::NetNs;
use neli_proof::{die_with_runner, Rng};

use crate::faults::{wall, Fault};
use crate::members::{LogReader, Soak};
use crate::Args;

mod commands;
mod episodes;
mod paths;
mod report;
mod strike;

pub use commands::{check, faults, refused, KINDS};
use commands::{stops_its_member, write_crontab, COMMAND, SCHEDULED};
use episodes::{Episode, Snapshot};
pub use episodes::{Figures, Gap, Needless};

/// What a pending action does when its time comes.
enum Action {
    /// A member in this slot (once the one there has exited).
    Start(usize),
    /// A signal to the member of this name, if it still runs in the slot.
    Signal(usize, String, Signal),
    /// The slot's network cut (if its member still runs there).
    Cut(usize, String),
    /// The slot's network cut healed (if its member still runs there).
    Heal(usize, String),
    /// The members' crontab (as it stands) put in place of this member's
    /// own file, and the member told (SIGHUP): one step of a rollout.
    Reload(usize, String),
    /// A broker fault's end.
    End(Fault),
    /// A cluster fault's scripted event.
    Event(String),
    /// A second fault, while the first is in flight.
    Strike,
    /// Nothing: the episode stays open until then (a cluster fault's watch).
    Wait,
}

impl Action {
    /// Whether it ends a fault (a heal, a thaw, the broker or the cluster
    /// back) rather than starts one or waits.
    fn ends_a_fault(&self) -> bool {
        !matches!(self, Action::Start(_) | Action::Strike | Action::Wait | Action::Cut(..))
    }
}

struct Pending {
    at: Instant,
    /// The episode it belongs to (None: a member's unasked exit).
    episode: Option<usize>,
    action: Action,
}

/// The roles soak as it runs.
struct Run<'a> {
    soak: &'a mut Soak,
    faults: &'a [Fault],
    rng: Rng,
    detectors: Vec<Detector>,
    ids: Vec<Option<String>>,
    starts: Vec<Vec<(String, i64)>>,
    held: Vec<bool>,
    /// When a new start was last seen, of any role and of each.
    last_start: Instant,
    role_started: Vec<Option<Instant>>,
    /// Per role, since when its lock has been free, and the faults in
    /// flight meanwhile.
    free: Vec<Option<(Instant, SystemTime, Vec<Fault>)>>,
    open: Vec<Episode>,
    pending: Vec<Pending>,
    next_id: usize,
    /// Slots whose member was sent SIGTERM or SIGKILL, not yet exited.
    struck: BTreeMap<usize, Signal>,
    /// Slots whose member is frozen or cut off, by episode.
    impaired: BTreeMap<usize, usize>,
    /// Slots whose member is drained, until its undrain: true if by
    /// `neli-run drain NAME`, false if by its drain file.
    drained: BTreeMap<usize, bool>,
    /// Since the last strike or action: the group must settle within --stall.
    clock: Instant,
    /// After a stall: strike the next fault without waiting to settle.
    forced: bool,
    /// --stall: how long the group may take to settle.
    stall: Duration,
    figures: Figures,
    /// `--crontab`: the members' crontab, one job per role.
    crontab: Option<std::path::PathBuf>,
    /// The roles in play: all of them, but under `--crontab` the jobs its
    /// file has (one fewer until `AddJob`).
    jobs: usize,
    /// `--crontab`: after how many transitions the last job is added.
    add_at: Option<usize>,
    /// `--crontab`: each job's line version (`Fault::Reschedule`).
    lines: Vec<u32>,
}

/// Runs the roles soak until --transitions (or a stop), judges it and
/// prints the summary.
pub fn soak(
    soak: &mut Soak,
    args: &Args,
    roles: usize,
    faults: &[Fault],
    seed: u64,
    interrupted: &AtomicBool,
) -> ExitCode {
    let began = Instant::now();
    let detectors: Vec<Detector> = (0..roles)
        .map(|j| Detector::new(soak.detector.dir.join("roles").join(j.to_string())).expect("a role's work dir"))
        .collect();
    // A crontab starts a job short, on a topic of as many partitions: the
    // last one is added a third of the way in (`Fault::AddJob`), where the
    // broker can add a partition for it.
    let jobs = if args.crontab && args.adds_partitions() { roles - 1 } else { roles };
    let lines = vec![0; roles];
    let crontab = args.crontab.then(|| write_crontab(&soak.detector.dir, (jobs, roles), soak.schedule, &lines));
    let mut run = Run {
        soak,
        faults,
        rng: Rng(seed),
        detectors,
        ids: vec![None; roles],
        starts: vec![Vec::new(); roles],
        held: vec![false; roles],
        last_start: Instant::now(),
        role_started: vec![None; roles],
        free: vec![None; roles],
        open: Vec::new(),
        pending: Vec::new(),
        next_id: 0,
        struck: BTreeMap::new(),
        impaired: BTreeMap::new(),
        drained: BTreeMap::new(),
        clock: Instant::now(),
        forced: false,
        stall: args.stall.into(),
        figures: Figures { gaps: vec![Gap::default(); roles], ..Figures::default() },
        add_at: (jobs < roles).then_some(args.transitions / 3),
        crontab,
        jobs,
        lines,
    };
    for slot in 0..run.soak.slots.len() {
        run.start(slot);
    }
    let stall: Duration = args.stall.into();
    let (mut reported, mut progress) = (0, Progress::default());
    while !interrupted.load(Ordering::Relaxed) {
        run.tick();
        let done = run.transitions();
        let settled = run.settled();
        if settled || (run.forced && run.open.is_empty() && run.pending.is_empty()) {
            let had = run.open.len();
            run.close(settled);
            // A drained member comes back first: a drain is judged whole.
            if done >= args.transitions && run.drained.is_empty() {
                break;
            }
            if let Some(why) = (had > 0).then(|| progress.note(done, false)).flatten() {
                eprintln!("neli-soak: {why}: stopping");
                break;
            }
            run.forced = false;
            run.strike_next(settled);
        } else if run.clock.elapsed() > stall {
            run.stall(stall);
            if done >= args.transitions {
                break;
            }
            if let Some(why) = progress.note(done, true) {
                eprintln!("neli-soak: {why}: stopping");
                break;
            }
        }
        if done >= reported + 25 {
            reported = done;
            let overlaps: usize = run.detectors.iter().map(|d| d.overlaps().len()).sum();
            println!("neli-soak: {done} transitions, {overlaps} overlaps");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    run.finish();
    run.figures.wall = began.elapsed();
    let verdict = report::judge(run.soak, &run.detectors);
    report::report(seed, args, run.soak, &run.figures, &verdict)
}

/// Whether the soak gets anywhere: a fault list that moves no role, or a
/// group stuck, would never reach --transitions.
#[derive(Default)]
struct Progress {
    at: usize,
    idle: usize,
    stuck: usize,
}

impl Progress {
    /// Notes the transitions `done` once a fault's episode closed, or after
    /// a stall; why to stop, if the soak should.
    fn note(&mut self, done: usize, stall: bool) -> Option<&'static str> {
        if done > self.at {
            (self.idle, self.stuck) = (0, 0);
        } else if stall {
            self.stuck += 1;
        } else {
            self.idle += 1;
        }
        self.at = done;
        if self.idle >= 50 {
            Some("50 faults in a row moved no role (do --faults move roles?)")
        } else if self.stuck >= 3 {
            Some("three stalls in a row with no role moving")
        } else {
            None
        }
    }
}

impl Run<'_> {
    /// Starts a member in `slot`; its name.
    fn start(&mut self, slot: usize) -> String {
        self.soak.started += 1;
        let name = format!("c{}-{}", slot, self.soak.started);
        let own_crontab = self.crontab.is_some().then(|| self.give_crontab(&name, "start"));
        let soak = &mut *self.soak;
        let log = fs::File::create(soak.detector.dir.join(format!("{name}.log"))).expect("log file");
        let (pipe, reader) = LogReader::start(log);
        if let Some(old) = soak.slots[slot].log.replace(reader) {
            old.set(LogReader::DEAD);
        }
        let mut argv = soak.slots[slot].ns.as_ref().map(NetNs::exec_prefix).unwrap_or_default();
        argv.push(soak.neli.display().to_string());
        let dir = soak.detector.dir.join("roles").join("{role}");
        let drain = format!("test ! -e {}", soak.health_file(Fault::Drain, &name).display());
        // On a schedule (--every, --missed all: each due time run, late if
        // need be), each run its role's (--restart never, the default).
        let (schedule, command, run) = match soak.schedule {
            Some((run, every)) => {
                let every = format!("{}ms", every.as_millis());
                (vec!["--every".to_string(), every, "--missed".into(), "all".into()], SCHEDULED, run)
            }
            None => (Vec::new(), COMMAND, Duration::ZERO),
        };
        // A crontab's jobs in place of the roles (`crontab`): the same runs.
        let roles: Vec<String> = match own_crontab {
            Some(file) => vec!["--crontab".into(), file.display().to_string()],
            None => {
                let guard = soak.detector.dir.join("guarded.sh").display().to_string();
                let mut line = schedule;
                line.extend(["--roles".into(), self.detectors.len().to_string(), "--".into(), guard]);
                line.extend([dir.display().to_string(), "sh".into(), "-c".into(), command.into()]);
                line.extend(soak.schedule.map(|_| dir.display().to_string()));
                line
            }
        };
        let child = die_with_runner(&mut Command::new(&argv[0]))
            .args(&argv[1..])
            .args(["-b", &soak.brokers, "-g", &soak.group, "--name", &name])
            .args(&soak.timing)
            .args(["--health-cmd", &drain, "--health-interval", "100ms", "--health-retries", "1"])
            .args(roles)
            .envs(soak.schedule.map(|_| ("RUN", format!("{:.1}", run.as_secs_f64()))))
            .stdin(Stdio::null())
            .stdout(pipe.try_clone().expect("a pipe"))
            .stderr(pipe)
            .spawn()
            .expect("start neli-run");
        soak.births.insert(name.clone(), SystemTime::now());
        soak.slots[slot].member = Some((name.clone(), child));
        name
    }

    /// `--crontab`: the members' file (`fleet.crontab`, as it stands)
    /// copied over the member `name`'s own (`crontabs/NAME`: each member
    /// reads its own, so that a rollout reaches them one at a time), and
    /// noted in `reloads` ("NAME MS HOW V0,V1,...": when, why, and each
    /// job's line version) for the judge (`cuts::check_reloads`); its path.
    fn give_crontab(&self, name: &str, how: &str) -> std::path::PathBuf {
        let dir = &self.soak.detector.dir;
        let text = fs::read_to_string(dir.join("fleet.crontab")).expect("the members' crontab");
        fs::create_dir_all(dir.join("crontabs")).expect("the members' crontabs");
        let file = dir.join("crontabs").join(name);
        let lines: Vec<String> = self.lines.iter().map(u32::to_string).collect();
        let at = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
        commands::install(&file, &text);
        self.append("reloads", &format!("{name} {at} {how} {}", lines.join(",")));
        file
    }

    /// The network of the member `name` in `slot` cut (`cut`) or healed,
    /// noted in `cuts` ("cut|heal NAME BEFORE_MS AFTER_MS": around the
    /// rules' change) for the judge (`cuts::classify`).
    pub(super) fn cut(&self, slot: usize, name: &str, cut: bool) {
        let ms = || SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
        let (ns, before) = (self.soak.slots[slot].ns.as_ref().expect("a namespace"), ms());
        match cut {
            true => ns.cut(),
            false => ns.heal(),
        }
        self.append("cuts", &format!("{} {name} {before} {}", if cut { "cut" } else { "heal" }, ms()));
    }

    /// A line appended to the work directory's file `what`.
    fn append(&self, what: &str, line: &str) {
        use std::io::Write;
        let path = self.soak.detector.dir.join(what);
        let mut file = fs::OpenOptions::new().create(true).append(true).open(path).expect("a record of the soak's");
        writeln!(file, "{line}").expect("a record of the soak's");
    }

    /// Slots whose member runs, not struck down, frozen, cut off or drained.
    fn live(&self) -> Vec<usize> {
        (0..self.soak.slots.len())
            .filter(|s| self.soak.slots[*s].member.is_some())
            .filter(|s| !self.struck.contains_key(s) && !self.impaired.contains_key(s) && !self.drained.contains_key(s))
            .collect()
    }

    /// Live slots whose member holds a role (ran its last start): what a
    /// drain may strike.
    fn drainable(&self) -> Vec<usize> {
        let holders: BTreeSet<&str> = self.starts.iter().filter_map(|s| s.last()).map(|s| s.0.as_str()).collect();
        self.live().into_iter().filter(|&s| self.name(s).is_some_and(|n| holders.contains(n.as_str()))).collect()
    }

    fn name(&self, slot: usize) -> Option<String> {
        self.soak.slots[slot].member.as_ref().map(|(n, _)| n.clone())
    }

    /// Role moves so far, over every role.
    fn transitions(&self) -> usize {
        self.starts.iter().map(|s| s.windows(2).filter(|w| w[0].0 != w[1].0).count()).sum()
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            holders: self.starts.iter().map(|s| s.last().map(|s| s.0.clone()).unwrap_or_default()).collect(),
            counts: self.starts.iter().map(Vec::len).collect(),
        }
    }

    /// The faults in flight.
    fn in_flight(&self) -> Vec<Fault> {
        self.open.iter().map(|e| e.fault).collect()
    }

    /// One look at everything: exited members, due actions, the locks and
    /// the starts.
    fn tick(&mut self) {
        self.reap();
        self.act_due(|_| true);
        let pending = &self.pending;
        self.impaired.retain(|_, ep| pending.iter().any(|p| p.episode == Some(*ep)));
        self.look();
    }

    /// Does the due actions that end a fault, and only those: a command
    /// asked again until acknowledged (a drain, a resume) must not hold up
    /// the end of the fault it waits out. A cluster soak (seed 7379) held
    /// partition 0 offline for 2 minutes, not the 1.2 to 12 s drawn: its
    /// scripted leader waited behind a drain asked 102 times meanwhile.
    pub(super) fn end_due(&mut self) {
        self.act_due(Action::ends_a_fault);
    }

    /// Does the due pending actions that `which` picks, in their order; one
    /// not done yet (a start waiting for its slot) stays pending.
    fn act_due(&mut self, which: impl Fn(&Action) -> bool) {
        let now = Instant::now();
        let (mut due, rest): (Vec<Pending>, Vec<Pending>) =
            std::mem::take(&mut self.pending).into_iter().partition(|p| p.at <= now && which(&p.action));
        self.pending = rest;
        due.sort_by_key(|p| p.at);
        for p in due {
            if self.act(&p.action) {
                self.clock = Instant::now();
            } else {
                self.pending.push(p);
            }
        }
    }

    /// Notes members that exited; one that exited unasked is started again
    /// at once, and spoils the episodes in flight.
    fn reap(&mut self) {
        for slot in 0..self.soak.slots.len() {
            let Some((name, child)) = self.soak.slots[slot].member.as_mut() else { continue };
            let Ok(Some(status)) = child.try_wait() else { continue };
            let name = name.clone();
            self.soak.slots[slot].member = None;
            self.impaired.remove(&slot);
            self.drained.remove(&slot);
            match self.struck.remove(&slot) {
                Some(Signal::SIGTERM) if status.code() != Some(0) => {
                    self.figures.exits.push(format!("{name} exited {status} after a SIGTERM (expected 0)"));
                }
                Some(_) => {}
                None => {
                    eprintln!("neli-soak: {name} exited unasked ({status}) at {}", wall(SystemTime::now()));
                    self.figures.exits.push(format!("{name} exited unasked: {status}"));
                    self.open.iter_mut().for_each(|e| e.clean = false);
                    self.pending.push(Pending { at: Instant::now(), episode: None, action: Action::Start(slot) });
                }
            }
        }
    }

    /// Does a pending action; whether it is done (a start waits for the
    /// slot's member to exit, and is dropped if a join filled the slot).
    fn act(&mut self, action: &Action) -> bool {
        let still = |run: &Run, slot: usize, name: &str| run.name(slot).as_deref() == Some(name);
        match action {
            Action::Start(slot) => {
                if self.soak.slots[*slot].member.is_some() {
                    return !self.struck.contains_key(slot);
                }
                self.start(*slot);
            }
            Action::Signal(slot, name, sig) => {
                if still(self, *slot, name) {
                    let _ = kill(self.soak.pid(*slot), *sig);
                    // A thaw mends a stalled log (a dead one stays dead):
                    // the member's later lines are what tells its story.
                    if *sig == Signal::SIGCONT {
                        self.soak.slots[*slot].log.as_ref().expect("a log reader").set(LogReader::READING);
                    }
                }
            }
            Action::Cut(slot, name) => {
                if still(self, *slot, name) {
                    self.cut(*slot, name, true);
                }
            }
            Action::Heal(slot, name) => {
                if still(self, *slot, name) {
                    self.cut(*slot, name, false);
                }
            }
            Action::Reload(slot, name) => {
                if still(self, *slot, name) {
                    self.give_crontab(name, "hup");
                    let _ = kill(self.soak.pid(*slot), Signal::SIGHUP);
                }
            }
            Action::End(fault) => self.soak.end(*fault, 0),
            Action::Event(event) => self.soak.cluster_event(event),
            Action::Strike => {
                if let Some(fault) = self.draw() {
                    self.strike(fault, false);
                }
            }
            Action::Wait => {}
        }
        true
    }

    /// Reads every role's lock and starts: leaderless gaps and the moves of
    /// struck members' roles.
    fn look(&mut self) {
        let now = Instant::now();
        for (id, d) in self.ids.iter_mut().zip(&self.detectors) {
            if id.is_none() {
                *id = d.lock_id();
            }
        }
        self.held = locks_held(&self.ids);
        let starts: Vec<Vec<(String, i64)>> = self.detectors.iter().map(Detector::starts).collect();
        for (j, (new, old)) in starts.iter().zip(&self.starts).enumerate() {
            if new.len() > old.len() {
                self.last_start = now;
                self.role_started[j] = Some(now);
            }
        }
        self.starts = starts;
        for j in 0..self.held.len() {
            match (self.held[j], self.free[j].is_some()) {
                (false, false) if !self.starts[j].is_empty() => {
                    self.free[j] = Some((now, SystemTime::now(), self.in_flight()));
                }
                (true, true) => self.gap_over(j, now),
                _ => {}
            }
        }
        for e in &mut self.open {
            let moves_its_roles = stops_its_member(e.fault) || e.fault == Fault::Drain;
            let Some((_, name)) = e.member.as_ref().filter(|_| moves_its_roles) else { continue };
            for m in e.moves.iter_mut().filter(|m| m.took.is_none()) {
                if self.starts[m.role].iter().skip(m.count).any(|s| s.0 != *name) {
                    m.took = Some(now - e.at);
                }
            }
        }
    }

    /// Role `j`'s lock, free since `free[j]`, is held again (or the soak
    /// ends) at `now`: the longest such time is the role's gap.
    fn gap_over(&mut self, j: usize, now: Instant) {
        let Some((since, from, during)) = self.free[j].take() else { return };
        let gap = &mut self.figures.gaps[j];
        if now - since > gap.length {
            let during: Vec<&str> = during.iter().map(|f| f.name()).collect();
            let during = if during.is_empty() { "no fault".into() } else { during.join("+") };
            *gap = Gap { length: now - since, from: Some(from), during };
        }
    }

    /// Whether the group has settled (see the module doc). On a schedule
    /// a role's lock is free between runs: every role has started a run
    /// since the last strike or action instead.
    fn settled(&self) -> bool {
        let running = match self.soak.schedule {
            None => self.held.iter().all(|h| *h),
            Some(_) => self.role_started[..self.jobs].iter().all(|s| s.is_some_and(|s| s > self.clock)),
        };
        if !self.pending.is_empty() || !running {
            return false;
        }
        // Half a session with no start, and a whole one since the last
        // strike or action: what a fault did may show late (a network cut's
        // retransmits, a broker's clients reconnecting).
        if self.last_start.elapsed() < self.soak.session / 2 || self.clock.elapsed() < self.soak.session {
            return false;
        }
        let mut spread: BTreeMap<String, usize> =
            self.live().into_iter().filter_map(|s| self.name(s)).map(|n| (n, 0)).collect();
        for s in &self.starts[..self.jobs] {
            match s.last().and_then(|(holder, _)| spread.get_mut(holder)) {
                Some(count) => *count += 1,
                None => return false,
            }
        }
        let (n, members) = (self.jobs, spread.len());
        members > 0 && spread.values().all(|&k| n / members <= k && k <= n.div_ceil(members))
    }

    /// A line in the work directory's faults.log (wall time as the members'
    /// logs print it), to find a fault's traces in the members' logs.
    fn note(&self, line: &str) {
        use std::io::Write;
        let path = self.soak.detector.dir.join("faults.log");
        if let Ok(mut log) = fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(log, "{} {line}", wall(SystemTime::now()));
        }
    }

    /// The group did not settle within --stall: says how it stands, and
    /// lets the next fault strike without waiting.
    fn stall(&mut self, stall: Duration) {
        self.figures.stalls += 1;
        let live: Vec<String> = self.live().into_iter().filter_map(|s| self.name(s)).collect();
        let drained: Vec<String> = self.drained.keys().filter_map(|&s| self.name(s)).collect();
        let roles: Vec<String> = (0..self.held.len())
            .map(|j| {
                let holder = self.starts[j].last().map_or("-", |s| s.0.as_str());
                format!("{j}:{holder}{}", if self.held[j] { "" } else { "(free)" })
            })
            .collect();
        eprintln!(
            "neli-soak: the group did not settle within {stall:?} (at {}; in flight: {}; {} actions pending): \
             live {live:?}, drained {drained:?}, roles {}",
            wall(SystemTime::now()),
            self.in_flight().iter().map(|f| f.name()).collect::<Vec<_>>().join("+"),
            self.pending.len(),
            roles.join(" ")
        );
        // A member that outlived its SIGTERM by --stall is killed, and named.
        let hung: Vec<usize> =
            self.struck.iter().filter(|(_, sig)| **sig == Signal::SIGTERM).map(|(s, _)| *s).collect();
        for slot in hung {
            let name = self.name(slot).unwrap_or_default();
            eprintln!("neli-soak: {name} still runs {stall:?} after its SIGTERM: kill -9");
            self.figures.exits.push(format!("{name} still ran --stall after a SIGTERM: killed"));
            let _ = kill(self.soak.pid(slot), Signal::SIGKILL);
            self.struck.insert(slot, Signal::SIGKILL);
        }
        self.open.clear();
        self.forced = true;
        self.clock = Instant::now();
    }

    /// Ends what is still in flight (thaws, heals, the broker and the
    /// cluster back; a cut not yet made is dropped), then stops every member with SIGTERM (kill -9 after
    /// 30 s), noting any that does not exit 0.
    fn finish(&mut self) {
        // A role still without a command counts until now.
        let now = Instant::now();
        (0..self.free.len()).for_each(|j| self.gap_over(j, now));
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by_key(|p| p.at);
        for p in pending.iter().filter(|p| p.action.ends_a_fault()) {
            self.act(&p.action);
        }
        self.reap();
        for slot in &self.soak.slots {
            if let Some(ns) = &slot.ns {
                ns.heal();
            }
            if let Some(log) = &slot.log {
                log.set(LogReader::READING);
            }
            if let Some((_, child)) = &slot.member {
                let pid = Pid::from_raw(child.id() as i32);
                let _ = kill(pid, Signal::SIGCONT);
                let _ = kill(pid, Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for slot in &mut self.soak.slots {
            let Some((name, child)) = slot.member.as_mut() else { continue };
            let mut status = child.try_wait().ok().flatten();
            while status.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
                status = child.try_wait().ok().flatten();
            }
            match status {
                Some(s) if s.code() == Some(0) => {}
                Some(s) => self.figures.exits.push(format!("{name} exited {s} after the final SIGTERM (expected 0)")),
                None => {
                    self.figures.exits.push(format!("{name} still ran 30 s after the final SIGTERM: killed"));
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            slot.member = None;
        }
    }
}
