//! What a roles soak measures of each fault and what followed it (an
//! episode): the roles that moved, how long they took, which moves were
//! needless, and each role's longest time with no command.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use crate::faults::{wall, Fault};

use super::Run;

/// The group as it stood: who ran each role last, and how many starts each
/// role had.
#[derive(Clone)]
pub(super) struct Snapshot {
    pub(super) holders: Vec<String>,
    pub(super) counts: Vec<usize>,
}

/// A role the struck member held: its starts then, and how long it took to
/// start on another member.
pub(super) struct Move {
    pub(super) role: usize,
    pub(super) count: usize,
    pub(super) took: Option<Duration>,
}

/// One fault and what followed it until the group settled.
pub(super) struct Episode {
    pub(super) fault: Fault,
    /// The member struck, or the one that joined: (slot, name).
    pub(super) member: Option<(usize, String)>,
    pub(super) at: Instant,
    pub(super) wall: SystemTime,
    /// The group when struck, if it had settled then.
    pub(super) before: Option<Snapshot>,
    /// A stopped member started again within the episode.
    pub(super) back: bool,
    /// No other episode, nor an unasked exit, overlapped it.
    pub(super) clean: bool,
    pub(super) moves: Vec<Move>,
    /// `AddJob`: the role of the job added, which may start anywhere.
    pub(super) added: Option<usize>,
}

/// A role's longest time with no command running.
#[derive(Clone, Default)]
pub struct Gap {
    pub length: Duration,
    /// When it began, and the faults in flight then.
    pub from: Option<SystemTime>,
    pub during: String,
}

/// Clean episodes judged for needless moves, by what they were.
#[derive(Default)]
pub struct Needless {
    pub judged: usize,
    pub moves: Vec<String>,
}

/// What the roles soak saw, for the summary.
#[derive(Default)]
pub struct Figures {
    /// By fault: how many struck, how many while another was in flight.
    pub faults: BTreeMap<Fault, (usize, usize)>,
    /// Clean episodes by fault.
    pub clean: BTreeMap<Fault, usize>,
    /// Role moves: from the SIGTERM or the kill -9 sent to a member, or its
    /// drain file, until each of its roles started on another member.
    pub graceful: Vec<Duration>,
    pub crash: Vec<Duration>,
    pub drain: Vec<Duration>,
    pub joins: Needless,
    pub leaves: Needless,
    pub crashes: Needless,
    pub drains: Needless,
    pub undrains: Needless,
    /// Jobs added to the crontab (`--crontab`): no other job may move.
    pub adds: Needless,
    /// A job's line changed and rolled out (`--crontab`): no job may move
    /// nor run again.
    pub reloads: Needless,
    pub gaps: Vec<Gap>,
    /// Times the group did not settle within --stall.
    pub stalls: usize,
    /// Members that exited unasked, or not 0 after a SIGTERM.
    pub exits: Vec<String>,
    /// Roles paused (`pause --role J --stop`, see `Run::pause_role`).
    pub pauses: usize,
    /// A paused role's command that ran or started: unsafe.
    pub paused_starts: Vec<String>,
    /// `pause`, `resume`, `drain` or `undrain` that exited other than 0
    /// (nobody acknowledged).
    pub unacknowledged: usize,
    /// Drains and undrains by `neli-run drain` and `undrain` (the others by
    /// the member's drain file).
    pub drain_commands: usize,
    pub wall: Duration,
}

impl Run<'_> {
    /// Closes the episodes in flight: judges the clean ones that began
    /// settled against the group now (`settled`), and keeps their moves.
    pub(super) fn close(&mut self, settled: bool) {
        let after = self.snapshot();
        for e in std::mem::take(&mut self.open) {
            if !(e.clean && settled) {
                continue;
            }
            *self.figures.clean.entry(e.fault).or_default() += 1;
            let took = e.moves.iter().filter_map(|m| m.took);
            match e.fault {
                Fault::Sigterm => self.figures.graceful.extend(took),
                Fault::Kill9 => self.figures.crash.extend(took),
                Fault::Drain => self.figures.drain.extend(took),
                _ => {}
            }
            let Some(before) = &e.before else { continue };
            // A job added is struck at no member: nobody may take a role.
            let member = &e.member.as_ref().map_or(String::new(), |m| m.1.clone());
            let needless = match e.fault {
                Fault::AddJob => &mut self.figures.adds,
                Fault::Reschedule => &mut self.figures.reloads,
                Fault::Join => &mut self.figures.joins,
                Fault::Undrain => &mut self.figures.undrains,
                Fault::Drain => &mut self.figures.drains,
                Fault::Sigterm if !e.back => &mut self.figures.leaves,
                Fault::Kill9 | Fault::BrokenLogKill9 if !e.back => &mut self.figures.crashes,
                _ => continue,
            };
            needless.judged += 1;
            let since = e.wall.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
            for j in (0..after.holders.len()).filter(|&j| Some(j) != e.added) {
                let (was, is) = (&before.holders[j], &after.holders[j]);
                let restarted = after.counts[j] > before.counts[j];
                let joins = matches!(e.fault, Fault::Join | Fault::Undrain | Fault::AddJob);
                // A join (or a drained member back) may take any role; a
                // leaver's, a crashed or a drained member's roles must move;
                // no other role may. On a schedule every due time is a
                // start: each run of the episode (the command's own record)
                // must be by the role's holder as a first attempt (none cut
                // short and run again), or by the member the role may go to.
                let runs = self.soak.schedule.map(|_| crate::judge::runs_since(&self.detectors[j].dir, since));
                let kept = |(name, attempt): &(String, u32)| name == was && *attempt == 1;
                let fine = match &runs {
                    None if joins => is == member || (was == is && !restarted),
                    None => was == member || (was == is && !restarted),
                    Some(runs) if joins => runs.iter().all(|r| &r.0 == member || kept(r)),
                    Some(runs) => was == member || runs.iter().all(kept),
                };
                if !fine {
                    let runs: Vec<String> = runs.iter().flatten().map(|(n, a)| format!("{n} attempt {a}")).collect();
                    needless.moves.push(format!(
                        "{} of {member} at {}: role {j} from {was} to {is} (starts {} -> {}){}",
                        e.fault.name(),
                        wall(e.wall),
                        before.counts[j],
                        after.counts[j],
                        if runs.is_empty() { String::new() } else { format!("; runs: {}", runs.join(", ")) }
                    ));
                }
            }
        }
    }
}
