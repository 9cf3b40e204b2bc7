//! NELI's roles (`neli-run --roles N`: one command per role, role j elected
//! on partition j), timed: what a member's leave or crash costs the roles it
//! held, what it costs the other members' roles (nothing, is the promise),
//! and what a member pays per role it owns.
//!
//! - roles-leave: 3 members of 12 roles, one stopped with SIGTERM to its
//!   process group (a graceful leave): per role it held, from the signal
//!   until that role's command runs on another member (every moved role of
//!   every rep is a sample), and per rep until the last of them does (the
//!   redistribution); the other members' roles whose command stopped or
//!   started again within two session timeouts of the signal (the promise:
//!   none), and moved roles whose old command still ran when the new one
//!   started;
//! - roles-crash: the same with kill -9 of the member's neli-run, and each
//!   move's excess over the session timeout (the goal: under a second);
//! - roles-scale: the same leave with 100 roles on 10 members (the goal: the
//!   redistribution within 2 s); and first, with the group settled, the
//!   idle cost of a member of 10 roles (neli-run and its shims) beside the
//!   holder of a single-role group started for it, measured together over
//!   --idle, and their difference per role owned beyond the first.
//!
//! Each role's command records its role (NELI_ROLE) with its start
//! (`candidates::CHILD`). The stopped member is replaced by a new one (a
//! new name), and the group settles again before the next rep: every role's
//! command running on a member of the group, the roles spread evenly, and no
//! start for the join quiet (`Group::settle`).

use std::time::{Duration, Instant, SystemTime};

use neli_proof::wait_for;

use crate::candidates::{alive, Contender, Group, Start, Stop};
use crate::report::Results;
use crate::scenarios::{idle_usage, Usage};
use crate::{ms, Bench};

/// The scenarios: how a member is stopped, the members and the roles.
const SHAPES: [(&str, Stop, usize, usize); 3] = [
    ("roles-leave", Stop::Graceful, 3, 12),
    ("roles-crash", Stop::Crash, 3, 12),
    ("roles-scale", Stop::Graceful, 10, 100),
];

/// Runs the roles scenarios asked for against `c` (neli-run only).
pub fn measure(bench: &Bench, c: &mut Contender, results: &mut Results) {
    if c.is_etcd() {
        return;
    }
    for (scenario, stop, members, roles) in SHAPES {
        if bench.args.scenarios.iter().any(|s| s == scenario) {
            moves(bench, c, results, (scenario, stop), (members, roles));
        }
    }
}

/// A group of `members` members of `roles` roles, settled; then --reps
/// times one member stopped, its moves timed, and a new member in its place.
fn moves(bench: &Bench, c: &Contender, results: &mut Results, kind: (&str, Stop), shape: (usize, usize)) {
    let ((scenario, stop), (members, roles), cname) = (kind, shape, c.name);
    // A group of ten takes longer to form: every join is a rebalance.
    let within = bench.within * members.div_ceil(3) as u32;
    let mut g = Group::new(c, &bench.work);
    g.options = vec!["--roles".into(), roles.to_string()];
    for _ in 0..members {
        g.spawn();
    }
    if !settle(&g, roles, within) {
        results.notes.push(format!("{cname}: {scenario}: the group never settled ({})", describe(&g, roles)));
        return;
    }
    if scenario == "roles-scale" {
        idle_per_role(bench, &g, roles, results);
    }
    for rep in 0..bench.args.reps {
        let victim = rep % g.candidates.len();
        let name = g.candidate_name(victim).to_string();
        let Some(m) = leave(&mut g, victim, stop, roles, within) else {
            results.notes.push(format!("{cname}: {scenario}: {name}'s roles did not all move within {within:?}"));
            return;
        };
        for &(took, overlap) in &m.moved {
            results.add(scenario, cname, ms(took));
            results.add(&format!("{scenario} overlaps"), cname, f64::from(u8::from(overlap)));
            if let Stop::Crash = stop {
                results.add(&format!("{scenario} excess"), cname, ms(took) - ms(c.expiry()));
            }
        }
        let last = m.moved.iter().map(|m| m.0).max().unwrap_or_default();
        results.add(&format!("{scenario} redistribution"), cname, ms(last));
        for &stopped in &m.stopped {
            results.add(&format!("{scenario}: other members' role stops"), cname, f64::from(u8::from(stopped)));
        }
        let first = m.moved.iter().map(|m| m.0).min().unwrap_or_default();
        eprintln!(
            "neli-bench: {cname}: {scenario}: {name}'s {} roles ran elsewhere after {first:.2?} to {last:.2?}, \
             {} overlaps; {} of the other {} roles stopped",
            m.moved.len(),
            m.moved.iter().filter(|m| m.1).count(),
            m.stopped.iter().filter(|s| **s).count(),
            m.stopped.len(),
        );
        if !m.settled {
            results.notes.push(format!("{cname}: {scenario}: without {name}: {}", describe(&g, roles)));
        }
        g.spawn();
        if !settle(&g, roles, within) {
            results.notes.push(format!("{cname}: {scenario}: never settled again ({})", describe(&g, roles)));
            return;
        }
    }
}

/// What one member's stop did.
struct Moved {
    /// Per role the member held: from the stop until its command ran on
    /// another member, and whether its old command still ran then.
    moved: Vec<(Duration, bool)>,
    /// Per role of the other members: whether its command stopped or
    /// started again within two session timeouts of the stop.
    stopped: Vec<bool>,
    /// Whether the group settled without the member.
    settled: bool,
}

/// Stops candidate `victim` of the settled group `g` and waits until each of
/// its roles runs on another member (None: not within `within`); then
/// removes it, and watches the others' roles until the group settled
/// without it and two session timeouts have passed since the stop.
fn leave(g: &mut Group, victim: usize, stop: Stop, roles: usize, within: Duration) -> Option<Moved> {
    let before: Vec<Start> = holders(g, roles).into_iter().collect::<Option<_>>()?;
    let name = g.candidate_name(victim).to_string();
    let count = g.starts().len();
    let (theirs, others): (Vec<usize>, Vec<usize>) = (0..roles).partition(|&j| before[j].name == name);
    let mut next: Vec<Option<(SystemTime, bool)>> = vec![None; theirs.len()];
    let (sent, stopped) = (SystemTime::now(), Instant::now());
    stop.send(g.candidates[victim].pid());
    let moved = wait_for(within, || {
        let starts = g.starts();
        for (next, &j) in next.iter_mut().zip(&theirs) {
            if next.is_none() {
                let new = starts[count..].iter().find(|s| s.role == Some(j) && s.name != name);
                *next = new.map(|s| (s.at, alive(before[j].pid)));
            }
        }
        next.iter().all(Option::is_some)
    });
    // Its process group killed (a crashed member's shims too).
    drop(g.candidates.remove(victim));
    if !moved {
        return None;
    }
    let settled = settle(g, roles, within);
    // The window in which a needless stop would show: a fence of a kept
    // role comes within the heartbeat deadline, a rebalance's within a session.
    std::thread::sleep((g.contender.session * 2).saturating_sub(stopped.elapsed()));
    let starts = g.starts();
    let restarted = |j: usize| starts[count..].iter().any(|s| s.role == Some(j));
    Some(Moved {
        moved: next.into_iter().flatten().map(|(at, o)| (at.duration_since(sent).unwrap_or_default(), o)).collect(),
        stopped: others.into_iter().map(|j| !alive(before[j].pid) || restarted(j)).collect(),
        settled,
    })
}

/// Each role's latest start (None: none yet).
fn holders(g: &Group, roles: usize) -> Vec<Option<Start>> {
    let mut held = vec![None; roles];
    for s in g.starts() {
        if let Some(j) = s.role.filter(|j| *j < roles) {
            held[j] = Some(s);
        }
    }
    held
}

/// How many roles each candidate of `g` runs now.
fn running(g: &Group, roles: usize) -> Vec<usize> {
    let held = holders(g, roles);
    let runs = |name: &str| held.iter().flatten().filter(|s| s.name == name && alive(s.pid)).count();
    g.candidates.iter().map(|c| runs(c.name())).collect()
}

/// Every role's command runs on a candidate of the group, and each
/// candidate runs its share: the roles over the candidates, rounded down or
/// up.
fn spread(g: &Group, roles: usize) -> bool {
    let (counts, n) = (running(g, roles), g.candidates.len().max(1));
    counts.iter().sum::<usize>() == roles && counts.iter().all(|k| (roles / n..=roles.div_ceil(n)).contains(k))
}

/// Waits until the roles are spread and stay so, with no start, through
/// the join quiet; whether they did within `within`.
fn settle(g: &Group, roles: usize, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until && wait_for(until.saturating_duration_since(Instant::now()), || spread(g, roles)) {
        let count = g.starts().len();
        if g.settle(within, false) && g.starts().len() == count && spread(g, roles) {
            return true;
        }
    }
    false
}

/// The roles each candidate runs, for a note.
fn describe(g: &Group, roles: usize) -> String {
    let counts = running(g, roles);
    let each: Vec<String> = g.candidates.iter().zip(&counts).map(|(c, k)| format!("{} runs {k}", c.name())).collect();
    format!("{} of {roles} roles run: {}", counts.iter().sum::<usize>(), each.join(", "))
}

/// The idle cost of the member of the settled group `g` that runs the most
/// roles, beside the holder of a single-role group (with a standby) started
/// for it, both measured over --idle at once; and their difference per role
/// owned beyond the first (CPU also in % of a core).
fn idle_per_role(bench: &Bench, g: &Group, roles: usize, results: &mut Results) {
    let cname = g.contender.name;
    let counts = running(g, roles);
    let Some((member, &k)) = counts.iter().enumerate().max_by_key(|(_, k)| **k) else { return };
    let mut single = Group::new(g.contender, &bench.work);
    single.spawn();
    single.spawn();
    let holder = single.wait_start(1, bench.within).and_then(|_| single.holder());
    let (Some(holder), true, 2..) = (holder, single.settle(bench.within, false), k) else {
        results.notes.push(format!("{cname}: roles-scale: no single-role holder to compare with (or {k} roles)"));
        return;
    };
    let window: Duration = bench.args.idle.into();
    let used = idle_usage(window, &[g.candidates[member].pid(), single.candidates[holder].pid()]);
    let [many, one] = used[..] else { return };
    many.add(results, &format!("roles-scale idle, {k}-role member"), cname);
    one.add(results, "roles-scale idle, 1-role holder", cname);
    let per = |of: fn(&Usage) -> f64| (of(&many) - of(&one)) / (k - 1) as f64;
    let role = Usage { cpu: per(|u| u.cpu), rss: per(|u| u.rss), pss: per(|u| u.pss) };
    role.add(results, "roles-scale idle, per owned role", cname);
    results.add("roles-scale idle, per owned role cpu%", cname, role.cpu / window.as_secs_f64() * 100.0);
}
