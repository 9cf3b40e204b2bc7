//! The promises of a member of several roles, checked after every step of
//! seeded random walks (as `invariants.rs` does for the single leader, whose
//! walks try every other input): assignments and revokes of each role's
//! partition in any order, lost ones, own records read back late or never,
//! commands that end by themselves, stops, kills and leases, leaving the
//! group, shutdowns and fatal errors. A simulated shell keeps the rebalance
//! callback's contract per partition and a shim per seat that kills its
//! command when its lease runs out.
//!
//! The promises: a role's command runs only while its member owns the
//! role's partition or a revoke of it waits (the barrier, per role); a
//! revoke is released only once that role's command is gone (with
//! `--overlap`, once it is asked to stop); a command
//! starts only on an owned partition with none of its own running, under a
//! token larger than any before on that partition; the member exits only
//! once every role's command is gone, and says Exit once; an action names
//! a seat.
//!
//! `NELI_INVARIANT_SEEDS=n` runs more seeds than the default.

use std::collections::VecDeque;
use std::time::Duration;

use super::fixtures::*;
use super::*;

/// One role as the simulated shell sees it.
#[derive(Debug, Default)]
struct Role {
    owned: bool,
    /// A revoke waits in the rebalance callback for its release.
    revoke_waits: bool,
    /// The command: (lease, when it is gone if it is going, killed).
    child: Option<(u64, Option<u64>, bool)>,
    /// The next offset of the role's partition.
    log: i64,
    /// Our records produced there, not yet read back: their send times.
    outbox: VecDeque<u64>,
    /// How many of `outbox`'s first records the broker has acknowledged.
    delivered: usize,
    /// The latest lease what the core was told allows: a record read back,
    /// its send time plus the deadline; one delivered while a revoke holds
    /// the reader, the same but no later than a resume window after the
    /// revoke began (the coordinator had just answered then).
    allowed: u64,
    /// The token of the role's last start, and whether it was of an
    /// earlier tenure: a restart within a leadership keeps its token, a new
    /// leadership's is larger.
    last_token: Option<(i64, bool)>,
}

struct Walk {
    rng: fastrand::Rng,
    core: Leader,
    now: u64,
    roles: Vec<Role>,
    /// Asked to leave the group (rejoin, stand aside): every owned
    /// partition is revoked next.
    leaving: bool,
    /// Left for good ahead of exiting (`Action::LeaveGroup`): no more
    /// assignments.
    left: bool,
    done: bool,
    /// `--overlap`: a command asked to stop may outlive its release.
    overlap: bool,
    /// The revoke this step's input is: the deadlines that passed before it
    /// come first (`Leader::step`), so a restart due then may still start
    /// on that partition, which the revoke then stops.
    revoking: Option<Partition>,
    /// When a role was last revoked, not lost: the coordinator had just
    /// answered, so no command may be leased past a resume window after it
    /// on records that were not read back.
    revoked_at: Option<u64>,
    spawned: u64,
    trace: Vec<String>,
}

impl Walk {
    fn new(seed: u64) -> Walk {
        let mut rng = fastrand::Rng::with_seed(seed);
        let n = rng.u32(2..5);
        let restart = [Restart::Always, Restart::OnFailure][rng.usize(..2)];
        let settings = Settings {
            roles: n,
            overlap: rng.u8(..4) == 0,
            max_runtime: (rng.u8(..4) == 0).then(|| Duration::from_millis(rng.u64(1..3000))),
            ..settings(restart)
        };
        let overlap = settings.overlap;
        let core = Leader::new(settings, started(0));
        let roles = (0..n).map(|_| Role::default()).collect();
        Walk {
            rng,
            core,
            now: 0,
            roles,
            leaving: false,
            left: false,
            done: false,
            overlap,
            revoking: None,
            revoked_at: None,
            spawned: 0,
            trace: Vec::new(),
        }
    }

    fn fail(&self, what: &str) -> ! {
        let tail: Vec<&String> = self.trace.iter().rev().take(40).rev().collect();
        panic!("promise broken at {} ms: {what}\nlast steps:\n{tail:#?}", self.now);
    }

    /// One input the shell could report now.
    fn next_input(&mut self) -> Input {
        let now = self.now;
        for (p, role) in (0..).zip(self.roles.iter_mut()) {
            let Some((lease, gone, killed)) = role.child.as_mut() else { continue };
            if !*killed && now >= *lease {
                // The shim's lease ran out: it kills the command by itself.
                *killed = true;
                *gone = Some(gone.map_or(now, |t| t.min(now)));
            }
            if gone.is_some_and(|t| now >= t) {
                let status = if *killed { ChildStatus::Signaled(9) } else { ChildStatus::Exited(self.rng.u8(..2)) };
                role.child = None;
                return Input::ChildExited(p, status);
            }
        }
        if self.leaving || self.done {
            if let Some(p) = self.roles.iter().position(|r| r.owned && !r.revoke_waits) {
                self.revoked_at = Some(now);
                let role = &mut self.roles[p];
                (role.owned, role.revoke_waits) = (false, true);
                return Input::Revoked { partition: p as Partition, lost: false };
            }
            self.leaving = false;
        }
        loop {
            let p = self.rng.usize(..self.roles.len());
            let role = &mut self.roles[p];
            let partition = p as Partition;
            match self.rng.u8(..100) {
                0..=14 => return Input::Tick,
                15..=24 if !role.owned && !role.revoke_waits && !self.leaving && !self.left => {
                    role.owned = true;
                    if let Some((_, earlier)) = role.last_token.as_mut() {
                        *earlier = true;
                    }
                    return Input::Assigned { partition };
                }
                25..=28 if role.owned && !role.revoke_waits => {
                    (role.owned, role.revoke_waits) = (false, true);
                    let lost = self.rng.u8(..3) == 0;
                    if !lost {
                        self.revoked_at = Some(now);
                    }
                    return Input::Revoked { partition, lost };
                }
                29..=79 if !role.outbox.is_empty() => {
                    let sent = role.outbox.pop_front().expect("not empty");
                    role.delivered = role.delivered.saturating_sub(1);
                    if self.rng.u8(..10) == 0 {
                        continue; // lost on the way
                    }
                    let offset = role.log;
                    role.log += 1;
                    role.allowed = role.allowed.max(sent + DEADLINE.as_millis() as u64);
                    return Input::OwnHeartbeat { partition, offset, sent: ms(sent), more: false };
                }
                // The producer tells what was written, before it is read
                // back (and while a revoke holds the reader, instead).
                90..=97 if role.delivered < role.outbox.len() => {
                    let (at, window) = (role.delivered, RESUME_WINDOW.as_millis() as u64);
                    let sent = role.outbox[at];
                    let bound = self.revoked_at.map_or(0, |since| since + window);
                    role.allowed = role.allowed.max((sent + DEADLINE.as_millis() as u64).min(bound));
                    role.delivered += 1;
                    return Input::Delivered { partition, offset: role.log + at as i64, sent: ms(sent) };
                }
                80..=85 if role.child.as_ref().is_some_and(|c| c.1.is_none()) => {
                    // The command ends by itself.
                    role.child.as_mut().expect("alive").1 = Some(now);
                }
                86 => return Input::Shutdown,
                87 if self.rng.u8(..4) == 0 => return Input::Fatal(78),
                88..=89 => return Input::Forward(SIGHUP),
                _ => {}
            }
        }
    }

    fn step(&mut self) {
        // Time moves on: to the core's next deadline at the latest.
        let next = self.core.next_deadline().map(|t| (t.since(ms(0))).as_millis() as u64);
        let by = self.rng.u64(0..150);
        self.now = next.map_or(self.now + by, |t| t.max(self.now).min(self.now + by));
        let input = self.next_input();
        self.revoking = match input {
            Input::Revoked { partition, .. } => Some(partition),
            _ => None,
        };
        let actions = self.core.step(input.clone(), ms(self.now));
        self.trace.push(format!("{} {input:?} -> {actions:?}", self.now));
        for action in actions {
            self.check(action);
        }
        for (p, role) in self.roles.iter().enumerate() {
            // With --overlap a command asked to stop may outlive its release.
            let held = role.owned || role.revoke_waits || (self.overlap && role.child.is_some_and(|c| c.1.is_some()));
            if role.child.is_some() && !held {
                self.fail(&format!("role {p}'s command runs on a partition neither owned nor held by a revoke"));
            }
        }
    }

    fn check(&mut self, action: Action) {
        if self.done {
            self.fail(&format!("{action:?} after Exit"));
        }
        if let Action::Lease(p, lease) | Action::Spawn { partition: p, lease, .. } = action {
            let lease = lease.since(ms(0)).as_millis() as u64;
            if lease > self.roles[p as usize].allowed {
                self.fail(&format!("role {p} leased to {lease}, later than its records allow"));
            }
        }
        if let Some(p) = action.partition() {
            if usize::try_from(p).map_or(true, |p| p >= self.roles.len()) {
                self.fail(&format!("{action:?} names no seat"));
            }
        }
        let now = self.now;
        match action {
            Action::SendHeartbeat(p, _) => self.roles[p as usize].outbox.push_back(now),
            Action::Spawn { partition, token, lease, .. } => {
                let revoking = self.revoking == Some(partition);
                let role = &mut self.roles[partition as usize];
                if !(role.owned || revoking) || role.child.is_some() {
                    self.fail(&format!("role {partition} started while not owned or still running"));
                }
                if role.last_token.is_some_and(|(t, earlier)| token < t || (earlier && token == t)) {
                    self.fail(&format!("role {partition}'s token {token} did not grow"));
                }
                role.last_token = Some((token, false));
                role.child = Some(((lease.since(ms(0))).as_millis() as u64, None, false));
                self.spawned += 1;
            }
            Action::Lease(p, until) => {
                if let Some(child) = self.roles[p as usize].child.as_mut() {
                    child.0 = child.0.max((until.since(ms(0))).as_millis() as u64);
                }
            }
            Action::SignalGroup(p, sig) => {
                if let (Some(child), true) = (self.roles[p as usize].child.as_mut(), sig == SIGTERM) {
                    let exits = now + self.rng.u64(0..800);
                    child.1 = Some(child.1.map_or(exits, |t| t.min(exits)));
                }
            }
            Action::KillGroup(p) => {
                if let Some(child) = self.roles[p as usize].child.as_mut() {
                    child.2 = true;
                    // Now and then a process stuck in the kernel (a hung
                    // mount) outlives its SIGKILL for seconds, and the
                    // barrier outlasts the resume window.
                    let stuck = if self.rng.u8(..8) == 0 { 4000 } else { 50 };
                    let exits = now + self.rng.u64(0..stuck);
                    child.1 = Some(child.1.map_or(exits, |t| t.min(exits)));
                }
            }
            Action::ReleaseRevoke(p) => {
                let role = &mut self.roles[p as usize];
                let stopping = role.child.is_some_and(|c| c.1.is_some());
                if role.child.is_some() && !(self.overlap && stopping) {
                    self.fail(&format!("role {p}'s revoke released while its command runs"));
                }
                role.revoke_waits = false;
            }
            Action::Disclaim(p, _) => self.roles[p as usize].outbox.push_back(now),
            Action::Rejoin | Action::StandAside | Action::HandOver { .. } => self.leaving = true,
            Action::LeaveGroup => (self.leaving, self.left) = (true, true),
            Action::SendCandidacy { .. } => {}
            Action::Cold(true) => {
                if let Some(p) = self.roles.iter().position(|r| r.child.is_some()) {
                    self.fail(&format!("went cold while role {p}'s command runs"));
                }
            }
            Action::Cold(false) => {}
            Action::Exit(_) => {
                if let Some(p) = self.roles.iter().position(|r| r.child.is_some()) {
                    self.fail(&format!("exit while role {p}'s command runs"));
                }
                self.done = true;
            }
        }
    }
}

#[test]
fn random_walks_of_several_roles_keep_every_promise() {
    let seeds: u64 = std::env::var("NELI_INVARIANT_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let (mut spawned, mut exited) = (0, 0);
    for seed in 0..seeds {
        let mut walk = Walk::new(seed);
        for _ in 0..600 {
            if walk.done {
                // After Exit, only the revokes of closing are answered.
                for p in 0..walk.roles.len() {
                    if std::mem::take(&mut walk.roles[p].revoke_waits) || walk.roles[p].owned {
                        let out =
                            walk.core.step(Input::Revoked { partition: p as Partition, lost: false }, ms(walk.now));
                        assert_eq!(out, vec![Action::ReleaseRevoke(p as Partition)], "seed {seed}");
                    }
                }
                assert_eq!(walk.core.step(Input::Tick, ms(walk.now + 10_000)), vec![], "seed {seed}");
                exited += 1;
                break;
            }
            walk.step();
        }
        spawned += walk.spawned;
    }
    // The walks must start commands and reach exits often, or they check little.
    assert!(spawned > seeds * 2, "only {spawned} starts in {seeds} walks");
    assert!(exited > seeds / 4, "only {exited} of {seeds} walks exited");
}
