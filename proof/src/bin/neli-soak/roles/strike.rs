//! Striking faults: which applies now, at which member, and what each does
//! (a signal, a freeze, a cut, a drain, a job added, a join, a broker or
//! cluster fault), each opening its episode with the roles the struck
//! member held.

use std::collections::BTreeSet;
use std::fs;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{kill, Signal};

use crate::faults::{below, wall, Fault};
use crate::members::LogReader;

use super::commands::{stops_its_member, strikes_a_member, write_crontab};
use super::episodes::{Episode, Move};
use super::{Action, Pending, Run};

impl Run<'_> {
    /// Draws a fault that applies now: one striking a member needs another
    /// live member to take its roles; a join, a slot with no member (a
    /// join is drawn one time in three when one is free).
    pub(super) fn draw(&mut self) -> Option<Fault> {
        let live = self.live().len();
        let joinable = !self.joinable().is_empty();
        let held = self.held.iter().any(|h| *h);
        let drainable = !self.drainable().is_empty();
        let applies = |f: &Fault| match f {
            Fault::Join => joinable,
            Fault::ChildCrash => held,
            Fault::Drain | Fault::CutBeforeDue => drainable && live >= 2,
            // Alone, from a settled group: a rollout to every member.
            Fault::Reschedule => self.open.is_empty() && self.pending.is_empty(),
            // Alone, from a settled group: its holder leaves while paused.
            Fault::Pause => self.open.is_empty() && self.pending.is_empty() && live >= 2,
            f if strikes_a_member(*f) => live >= 2,
            _ => true,
        };
        let can: Vec<Fault> = self.faults.iter().copied().filter(applies).collect();
        if can.contains(&Fault::Join) && self.rng.next_u64() % 3 == 0 {
            return Some(Fault::Join);
        }
        // A crontab's cut just before a due time: a fifth of the faults.
        if can.contains(&Fault::CutBeforeDue) && self.rng.next_u64() % 5 == 0 {
            return Some(Fault::CutBeforeDue);
        }
        // A reload that changes a job's line: an eighth, where it applies.
        if can.contains(&Fault::Reschedule) && self.rng.next_u64() % 8 == 0 {
            return Some(Fault::Reschedule);
        }
        let rest: Vec<Fault> =
            can.iter().copied().filter(|f| !matches!(f, Fault::CutBeforeDue | Fault::Reschedule)).collect();
        let can = if rest.is_empty() { can } else { rest };
        (!can.is_empty()).then(|| self.rng.pick(&can))
    }

    /// Empty slots no restart waits for.
    fn joinable(&self) -> Vec<usize> {
        let restarting: BTreeSet<usize> = self
            .pending
            .iter()
            .filter_map(|p| match p.action {
                Action::Start(slot) => Some(slot),
                _ => None,
            })
            .collect();
        (0..self.soak.slots.len())
            .filter(|s| self.soak.slots[*s].member.is_none() && !self.struck.contains_key(s) && !restarting.contains(s))
            .collect()
    }

    /// Strikes the next fault (a drained member's undrain before any); one
    /// time in four a second one follows while the first is in flight.
    pub(super) fn strike_next(&mut self, settled: bool) {
        // The crontab's last job, added alone to a settled group.
        if self.add_at.is_some_and(|at| self.transitions() >= at) && settled && self.drained.is_empty() {
            self.add_at = None;
            self.strike(Fault::AddJob, settled);
            return;
        }
        let next = if self.drained.is_empty() { self.draw() } else { Some(Fault::Undrain) };
        let Some(fault) = next else {
            eprintln!("neli-soak: no fault of this run applies now");
            self.forced = true;
            return;
        };
        if fault == Fault::Pause {
            return self.pause_role();
        }
        let id = self.strike(fault, settled);
        if fault != Fault::Reschedule && self.rng.next_u64() % 4 == 0 {
            let at = Instant::now() + self.rng.between(Duration::ZERO, self.soak.session * 2);
            self.pending.push(Pending { at, episode: Some(id), action: Action::Strike });
        }
    }

    /// `neli-run drain NAME` or `undrain NAME` (`what`), counted; one not
    /// acknowledged is counted too.
    /// Asks `what` (drain, undrain) of `name` until it is acknowledged or
    /// a stall's time has passed, as an operator would: one asked while
    /// every broker restarts fails at once, and the group then settles as
    /// it was, not as the soak expects (a cluster soak's one stall).
    fn ask_drain(&mut self, what: &str, name: &str) {
        self.figures.drain_commands += 1;
        let asked = Instant::now();
        while crate::faults::ask(self.soak, what, &[name], self.stall).is_none() && asked.elapsed() < self.stall {
            self.figures.unacknowledged += 1;
            self.end_due();
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// `Fault::Pause`: `pause --role J --stop` of a random role. Once it is
    /// acknowledged the role's lock must be free, and stay free with no
    /// start of it, while its holder leaves (SIGTERM, started again at
    /// once) and the other roles settle: the role's next owner reads the
    /// pause on the role's partition. Then `resume --role J`, and the main
    /// loop waits for the group to settle, J running again. The time J was
    /// paused is the operator's, not a gap of the role's; a pause not
    /// acknowledged (it may never have been written) is not judged.
    fn pause_role(&mut self) {
        let stall = self.stall;
        let j = (self.rng.next_u64() % self.starts.len() as u64) as usize;
        let Some(holder) = self.starts[j].last().map(|s| s.0.clone()) else { return };
        self.figures.faults.entry(Fault::Pause).or_default().0 += 1;
        self.figures.pauses += 1;
        let (role, count) = (j.to_string(), self.starts[j].len());
        match crate::faults::ask(self.soak, "pause", &["--role", &role, "--stop"], stall) {
            Some(said) => self.hold_paused(j, &holder, count, &said),
            None => self.figures.unacknowledged += 1,
        }
        // As an operator would: again until acknowledged (`resume` gives up
        // reading a topic it cannot catch up with in 10 s, on a loaded
        // broker; a tansu soak's role then stayed paused for 10 minutes).
        let resumed = Instant::now();
        while crate::faults::ask(self.soak, "resume", &["--role", &role], stall).is_none() && resumed.elapsed() < stall
        {
            self.figures.unacknowledged += 1;
            self.end_due();
            std::thread::sleep(Duration::from_secs(1));
        }
        self.free[j] = None;
        self.clock = Instant::now();
    }

    /// Role `j` paused (`said`: `pause`'s acknowledgement; `count`: its
    /// starts before): its holder leaves, and no start of it may count
    /// (see `judge::paused_starts`) until the group settles.
    fn hold_paused(&mut self, j: usize, holder: &str, count: usize, said: &str) {
        let (stall, session) = (self.stall, self.soak.session);
        let offset = crate::judge::pause_offset(said);
        let paused_at = SystemTime::now();
        self.tick();
        let acked = self.starts[j].len();
        self.note(&format!("role {j} paused (--stop); its holder {holder} leaves"));
        if let Some(slot) = self.soak.slot_named(holder) {
            self.struck.insert(slot, Signal::SIGTERM);
            let _ = kill(self.soak.pid(slot), Signal::SIGTERM);
            self.pending.push(Pending { at: Instant::now(), episode: None, action: Action::Start(slot) });
        }
        self.clock = Instant::now();
        loop {
            self.tick();
            let started = crate::judge::paused_starts(&self.starts[j], count, acked, offset);
            if !started.is_empty() || self.held[j] {
                let why =
                    format!("role {j} paused at {}: lock held {}, starts {started:?}", wall(paused_at), self.held[j]);
                eprintln!("neli-soak: {why}");
                self.figures.paused_starts.push(why);
                break;
            }
            let others = self.held.iter().enumerate().all(|(k, held)| k == j || *held);
            let quiet = self.last_start.elapsed() > session && self.clock.elapsed() > session;
            if others && quiet && self.pending.is_empty() {
                break;
            }
            if self.clock.elapsed() > stall {
                self.stall(stall);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Strikes `fault` (at a random live member, for a member's fault; an
    /// undrain at a drained one) and opens its episode; its id.
    pub(super) fn strike(&mut self, fault: Fault, settled: bool) -> usize {
        let (id, now) = (self.next_id, Instant::now());
        self.next_id += 1;
        let alone = self.open.is_empty();
        let slot = self.aim(fault, alone);
        let mut e = self.episode(fault, slot, settled && alone, now);
        let (s, name) = (self.soak.session, e.member.as_ref().map(|m| m.1.clone()).unwrap_or_default());
        match fault {
            Fault::Kill9 | Fault::Sigterm | Fault::BrokenLogKill9 => e.back = self.stop(fault, (slot, name), id, now),
            Fault::SigstopCont | Fault::BrokenLogStop => self.freeze(fault, (slot, name), id, now),
            Fault::NetCut | Fault::NetBlip => {
                self.cut(slot, &name, true);
                self.impaired.insert(slot, id);
                let (lo, hi) = if fault == Fault::NetBlip { (s / 5, s * 4 / 5) } else { (s, s * 3) };
                self.later((id, now), lo, hi, Action::Heal(slot, name));
            }
            Fault::ChildCrash => self.crash_a_command(),
            // Half by the member's health check on its file, half by
            // `neli-run drain NAME` (which waits until the member says it is
            // drained, its commands gone).
            Fault::Drain => {
                let by_command = self.rng.next_u64() % 2 == 0;
                match by_command {
                    true => self.ask_drain("drain", &name),
                    false => self.soak.strike(fault, slot, &mut self.rng),
                }
                self.drained.insert(slot, by_command);
            }
            Fault::Undrain => e.member = self.undrain(slot),
            // Every member's file at once (each reads it within 2 s).
            Fault::AddJob => {
                e.added = Some(self.jobs);
                self.jobs += 1;
                self.write_crontab();
                let members: Vec<(usize, String)> =
                    (0..self.soak.slots.len()).filter_map(|s| Some((s, self.name(s)?))).collect();
                for (slot, name) in members {
                    self.pending.push(Pending { at: now, episode: Some(id), action: Action::Reload(slot, name) });
                }
            }
            Fault::CutBeforeDue => self.cut_before_due((slot, name), id, now),
            Fault::Reschedule => self.reschedule(id, now),
            Fault::Join => {
                let free = self.joinable();
                let slot = self.rng.pick(&free);
                e.member = Some((slot, self.start(slot)));
            }
            Fault::BrokerPause | Fault::BrokerRestart => {
                self.soak.strike(fault, 0, &mut self.rng);
                self.later((id, now), s / 5, s * 3 / 2, Action::End(fault));
            }
            _ if fault.is_cluster_event() => self.script(fault, slot, id, now),
            _ => unreachable!("{} is not a fault of the roles soak", fault.name()),
        }
        self.note(&format!(
            "{} {}{}{}",
            fault.name(),
            e.member.as_ref().map_or("", |m| m.1.as_str()),
            if stops_its_member(fault) && !e.back { " (back only by a join)" } else { "" },
            if alone { "" } else { " (while another fault is in flight)" }
        ));
        self.clock = Instant::now();
        self.open.push(e);
        id
    }

    /// Counts `fault` (`alone`: no other in flight, else the episodes in
    /// flight are not clean, and the roles free meanwhile saw it too), and
    /// draws the slot it strikes: a live one, a drainable one for a drain,
    /// a drained one for an undrain (0 if none).
    fn aim(&mut self, fault: Fault, alone: bool) -> usize {
        self.open.iter_mut().for_each(|e| e.clean = false);
        for (_, _, during) in self.free.iter_mut().flatten() {
            during.push(fault);
        }
        let counted = self.figures.faults.entry(fault).or_default();
        counted.0 += 1;
        counted.1 += usize::from(!alone);
        let targets = match fault {
            Fault::Drain | Fault::CutBeforeDue => self.drainable(),
            Fault::Undrain => self.drained.keys().copied().take(1).collect(),
            _ => self.live(),
        };
        if targets.is_empty() {
            0
        } else {
            self.rng.pick(&targets)
        }
    }

    /// The episode `fault` opens at `now` on `slot`: the group as it stood
    /// if it is `clean` (settled, alone), and for a member's fault, the
    /// member and the roles it held.
    fn episode(&self, fault: Fault, slot: usize, clean: bool, now: Instant) -> Episode {
        let mut e = Episode {
            fault,
            member: None,
            at: now,
            wall: SystemTime::now(),
            before: clean.then(|| self.snapshot()),
            back: false,
            clean,
            moves: Vec::new(),
            added: None,
        };
        if strikes_a_member(fault) {
            let name = self.name(slot).expect("a live member");
            e.moves = held_by(&self.starts, &name);
            e.member = Some((slot, name));
        }
        e
    }

    /// An action of episode `id` (struck at `at`), due at a random time
    /// between `lo` and `hi` after the strike.
    fn later(&mut self, (id, at): (usize, Instant), lo: Duration, hi: Duration, action: Action) {
        let at = at + self.rng.between(lo, hi);
        self.pending.push(Pending { at, episode: Some(id), action });
    }

    /// SIGTERM or kill -9 of `member` (`BrokenLogKill9`: its log broken
    /// first, the kill once neli-run and its commands met it); whether it
    /// is started again within the episode (else it is left for a join).
    fn stop(&mut self, fault: Fault, (slot, name): (usize, String), id: usize, now: Instant) -> bool {
        let sig = if fault == Fault::Sigterm { Signal::SIGTERM } else { Signal::SIGKILL };
        if fault == Fault::BrokenLogKill9 {
            let log = self.soak.slots[slot].log.as_ref().expect("a log reader");
            log.set(self.rng.pick(&[LogReader::STALLED, LogReader::DEAD]));
            let at = now + Duration::from_millis(300);
            self.pending.push(Pending { at, episode: Some(id), action: Action::Signal(slot, name, sig) });
        } else {
            let _ = kill(self.soak.pid(slot), sig);
        }
        self.struck.insert(slot, sig);
        let back = !self.faults.contains(&Fault::Join) || self.rng.pick(&[true, false]);
        if back {
            let s = self.soak.session;
            self.later((id, now), s / 5, s * 2, Action::Start(slot));
        }
        back
    }

    /// SIGSTOP of `member` (`BrokenLogStop`: its log broken first), and
    /// its SIGCONT later.
    fn freeze(&mut self, fault: Fault, (slot, name): (usize, String), id: usize, now: Instant) {
        let delay = match fault {
            Fault::BrokenLogStop => {
                let log = self.soak.slots[slot].log.as_ref().expect("a log reader");
                log.set(self.rng.pick(&[LogReader::STALLED, LogReader::DEAD]));
                let at = now + Duration::from_millis(300);
                let stop = Action::Signal(slot, name.clone(), Signal::SIGSTOP);
                self.pending.push(Pending { at, episode: Some(id), action: stop });
                Duration::from_millis(300)
            }
            _ => {
                let _ = kill(self.soak.pid(slot), Signal::SIGSTOP);
                Duration::ZERO
            }
        };
        self.impaired.insert(slot, id);
        let s = self.soak.session;
        self.later((id, now), delay + s / 5, delay + s * 3, Action::Signal(slot, name, Signal::SIGCONT));
    }

    /// The members' crontab written anew (`fleet.crontab`), with each
    /// job's line as it stands.
    fn write_crontab(&self) {
        let roles = self.starts.len();
        write_crontab(&self.soak.detector.dir, (self.jobs, roles), self.soak.schedule, &self.lines);
    }

    /// `Fault::CutBeforeDue`: the member `name` in `slot` holds a job; it is
    /// cut off 0.2-2 s before that job's next due time at least 2.2 s away
    /// (on its line's grid from the epoch), for 0.2-2 session timeouts.
    fn cut_before_due(&mut self, (slot, name): (usize, String), id: usize, now: Instant) {
        let held: Vec<usize> = held_by(&self.starts, &name).iter().map(|m| m.role).collect();
        let Some((_, every)) = self.soak.schedule else { return };
        let job = if held.is_empty() { 0 } else { self.rng.pick(&held) };
        let every = super::commands::period(every, self.lines[job]).as_millis() as u64;
        let wall_now = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
        let due = (wall_now + 2_200).div_ceil(every) * every;
        let ahead = self.rng.between(Duration::from_millis(200), Duration::from_secs(2));
        let at = now + Duration::from_millis(due - wall_now) - ahead;
        self.pending.push(Pending { at, episode: Some(id), action: Action::Cut(slot, name.clone()) });
        let s = self.soak.session;
        let heal = at + self.rng.between(s / 5, s * 2);
        self.pending.push(Pending { at: heal, episode: Some(id), action: Action::Heal(slot, name.clone()) });
        self.impaired.insert(slot, id);
        let due = humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(due));
        self.note(&format!("cut-before-due: {name} holds job {job}, cut {ahead:?} before its due time {due}"));
    }

    /// `Fault::Reschedule`: one job's line changed (its period, see
    /// `commands::period`) in the members' file, then rolled out: each
    /// member's own file replaced and the member told (SIGHUP), one at a
    /// time, 0.3-1.5 s apart, in random order; half the time the first
    /// step comes while the job's run of its next due time goes on.
    fn reschedule(&mut self, id: usize, now: Instant) {
        let Some((_, every)) = self.soak.schedule else { return };
        let job = (self.rng.next_u64() % self.jobs as u64) as usize;
        let old = super::commands::period(every, self.lines[job]).as_millis() as u64;
        self.lines[job] += 1;
        self.write_crontab();
        let wall_now = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
        let mut at = match self.rng.next_u64() % 2 {
            0 => {
                let due = (wall_now + 500).div_ceil(old) * old;
                now + Duration::from_millis(due - wall_now)
                    + self.rng.between(Duration::from_millis(100), Duration::from_secs(2))
            }
            _ => now + self.rng.between(Duration::from_millis(200), Duration::from_secs(1)),
        };
        let mut members: Vec<(usize, String)> =
            self.live().into_iter().filter_map(|s| Some((s, self.name(s)?))).collect();
        let mut order = Vec::new();
        while !members.is_empty() {
            let i = (self.rng.next_u64() % members.len() as u64) as usize;
            let (slot, name) = members.swap_remove(i);
            order.push(name.clone());
            self.pending.push(Pending { at, episode: Some(id), action: Action::Reload(slot, name) });
            at += self.rng.between(Duration::from_millis(300), Duration::from_millis(1500));
        }
        let every = super::commands::period(every, self.lines[job]);
        self.note(&format!(
            "reschedule: job {job} to @every {every:?} (line {}), rolled out to {order:?}",
            self.lines[job]
        ));
    }

    /// The drained member of `slot` brought back (by `neli-run undrain` if
    /// it was drained so, else its drain file removed); the member.
    fn undrain(&mut self, slot: usize) -> Option<(usize, String)> {
        let member = self.name(slot).map(|name| (slot, name));
        match self.drained.remove(&slot) {
            Some(true) => self.ask_drain("undrain", &member.as_ref().map_or(String::new(), |m| m.1.clone())),
            _ => self.soak.end(Fault::Drain, slot),
        }
        member
    }

    /// A cluster fault: its scripted events, and the episode held open
    /// until the script's end.
    fn script(&mut self, fault: Fault, slot: usize, id: usize, now: Instant) {
        if let Some(script) = self.soak.script(fault, slot, &mut self.rng) {
            for (offset, event) in script.events {
                self.pending.push(Pending { at: now + offset, episode: Some(id), action: Action::Event(event) });
            }
            let at = now + script.length;
            self.pending.push(Pending { at, episode: Some(id), action: Action::Wait });
        }
        if strikes_a_member(fault) {
            self.impaired.insert(slot, id);
        }
    }

    /// `Fault::ChildCrash`: the whole tree of a random running role's
    /// command killed (none of a drained member's, which it is stopping);
    /// its shim lives on, and restarts it (--restart always); on a
    /// schedule the run ends as a failure, not run again.
    fn crash_a_command(&mut self) {
        let drained: BTreeSet<String> = self.drained.keys().filter_map(|&s| self.name(s)).collect();
        let running: Vec<usize> = (0..self.held.len())
            .filter(|&j| self.held[j] && !self.starts[j].last().is_some_and(|s| drained.contains(&s.0)))
            .collect();
        if running.is_empty() {
            return;
        }
        let role = self.rng.pick(&running);
        let holder = self.starts[role].last().map(|s| s.0.clone()).unwrap_or_default();
        let Some(slot) = (0..self.soak.slots.len()).find(|&s| self.name(s) == Some(holder.clone())) else { return };
        let neli = self.soak.pid(slot).as_raw();
        let key = format!("NELI_ROLE={role}");
        let shim = children(neli).into_iter().find(|c| {
            let env = fs::read(format!("/proc/{c}/environ")).unwrap_or_default();
            env.split(|b| *b == 0).any(|v| v == key.as_bytes())
        });
        for p in shim.map(below).unwrap_or_default() {
            let _ = kill(p, Signal::SIGKILL);
        }
    }
}

/// The roles whose last start was `name`'s, each with its starts so far:
/// what a fault striking that member may move.
fn held_by(starts: &[Vec<(String, i64)>], name: &str) -> Vec<Move> {
    (0..starts.len())
        .filter(|&j| starts[j].last().is_some_and(|s| s.0 == name))
        .map(|role| Move { role, count: starts[role].len(), took: None })
        .collect()
}

/// The children of `pid`, over all its threads.
fn children(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let list = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(list.split_whitespace().filter_map(|c| c.parse::<i32>().ok()));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_holds_the_roles_it_started_last() {
        let start = |name: &str| (name.to_string(), 0);
        let starts = vec![vec![start("a"), start("b")], vec![start("b"), start("a")], vec![], vec![start("a")]];
        let held: Vec<(usize, usize)> = held_by(&starts, "a").iter().map(|m| (m.role, m.count)).collect();
        assert_eq!(held, [(1, 2), (3, 1)]);
        assert!(held_by(&starts, "c").is_empty());
    }
}
