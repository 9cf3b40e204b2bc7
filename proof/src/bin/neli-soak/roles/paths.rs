//! The paths users take (issue 65), judged from the soak's own records and
//! the members' logs: a job's holder cut off just before a due time
//! (`Fault::CutBeforeDue`, the soak's `cuts`), a job's line changed by a
//! rolled-out reload (`Fault::Reschedule`, the soak's `reloads`), and a
//! leader fenced within its first second of leading (findings R-1).
//!
//! **Cuts.** A run starts, as neli-run promises (docs/how-it-works.md,
//! C-10), only once a record naming it is on the topic and read back: a
//! member cut off cannot start one, and the next owner, finding no trace of
//! it, runs it once. A member's log says when it named a due time's run
//! (`naming the run of a due time on the topic; its command starts once that is read back`) and when its command began (`child
//! started`, next in that role's span: up to `HEAD_START` ahead of an
//! on-time due time). A command begun while its member was cut off whose
//! naming came after the cut began could not have had it read back: it
//! started after the cut, and fails the soak (doubled or not: a cut shorter
//! than the lease may let its records through after). Each due time run
//! twice (two starts or more, the command's own record) is told by the
//! first of its runs, each followed by the next (cut short, or its ending
//! lost), that met its member's cut: started after it (as above); named
//! before it and begun during it (its naming read back in between: the
//! smallest such margin is shown); under way when it came (the
//! at-least-once window documented); or none met one (a freeze, a crash, a
//! revoke, a cluster's partial cut).
//!
//! **Reloads.** Every run says its job's line version (`LINE=`): a run of a
//! changed line (version 1 or more) is of a due time that must not have
//! passed before the line took over the job: when the member of that
//! line's first run read it, by its file read again after the soak gave it
//! (its log's `crontab read again`) or its start with it (docs/operations.md,
//! Reloading: it counts from then or later; a member that reads a run of
//! its own line on record follows it as before).
//!
//! **Fences.** Per role (or job), a member's fence (a claim of another's
//! newer or older record, or its own heartbeats lost) within a second of
//! its `leader: read own heartbeat back` for that role.

use std::collections::BTreeMap;

use neli_proof::detector::read_lines;

use crate::judge::{member_lines, read_runs, rfc_ms, STARTING};

/// How soon after leading a fence is counted (findings R-1).
const FIRST_SECOND: u64 = 1_000;

/// What the paths of issue 65 did, over every role.
#[derive(Default)]
pub struct Paths {
    /// Cuts of a member's network recorded (every kind).
    pub cuts: usize,
    /// Commands begun while their member was cut off, named after the
    /// cut began (doubled or not): must be none; and begun while cut off,
    /// named before it.
    pub after_cut: Vec<String>,
    pub named_before: usize,
    /// Due times run twice whose first run to meet its member's cut (see
    /// the module doc) started after it began (as `after_cut`): must be
    /// none.
    pub doubled_after_cut: usize,
    /// ... named before the cut and begun during it, with the smallest time
    /// between its naming and the cut (ms).
    pub begun_cut_off: usize,
    pub margin: Option<u64>,
    /// ... under way when the cut came.
    pub under_way: usize,
    /// ... none of whose runs met a cut (a freeze, a crash, a revoke, a
    /// cluster's partial cut): run to their end twice (named), or cut
    /// short (counted).
    pub other: Vec<String>,
    pub cut_short: usize,
    /// Of the due times run twice, those that ran to their end twice.
    pub ended_twice: usize,
    /// Rollout steps and starts recorded (`reloads`), and those whose
    /// member's log said no reading after it.
    pub reloads: usize,
    pub unconfirmed: usize,
    /// Runs of a changed line checked, and those of a due time that passed
    /// before their member read the line: must be none.
    pub changed_runs: usize,
    pub early: Vec<String>,
    /// Per role: fences of a leader within its first second.
    pub fences: Vec<Vec<String>>,
}

/// What a run that ran again had met of its member's cuts: begun after
/// one began, named after it; begun during one (named the given ms before
/// it); under way when one came.
enum Met {
    After,
    During(u64),
    UnderWay,
}

/// A member's cut: (cut before, cut after, heal before), wall ms.
type Cut = (u64, u64, u64);

/// Judges the work directory `dir` of `roles` roles (see the module doc).
pub fn judge(dir: &std::path::Path, roles: usize) -> Paths {
    let lines = member_lines(dir);
    let mut paths = Paths { fences: vec![Vec::new(); roles], ..Paths::default() };
    // Per (member, role, due): when its log named each of its runs there
    // and when their commands began (`child started`, next in the span).
    let mut spawns: BTreeMap<(String, usize, u64), Vec<(u64, u64)>> = BTreeMap::new();
    let mut naming: BTreeMap<(String, usize), (u64, u64)> = BTreeMap::new();
    let mut reads: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut led: BTreeMap<(String, usize), u64> = BTreeMap::new();
    for (member, line) in &lines {
        let Some(at) = line.split_whitespace().next().and_then(rfc_ms) else { continue };
        if line.contains("crontab read again") {
            reads.entry(member.clone()).or_default().push(at);
        }
        let Some(role) = role_of(line).filter(|r| *r < roles) else { continue };
        if line.contains(STARTING) {
            let due = line.split_whitespace().find_map(|w| w.strip_prefix("due_ms=")?.parse::<u64>().ok());
            if let Some(due) = due {
                naming.insert((member.clone(), role), (due, at));
            }
        } else if line.contains(": child started") {
            if let Some((due, named)) = naming.remove(&(member.clone(), role)) {
                spawns.entry((member.clone(), role, due)).or_default().push((named, at));
            }
        } else if line.contains("leader: read own heartbeat back") {
            led.insert((member.clone(), role), at);
        } else if line.contains("; fencing") || line.contains("fenced: own heartbeats stopped arriving") {
            if let Some(since) = led.remove(&(member.clone(), role)).filter(|since| at < since + FIRST_SECOND) {
                paths.fences[role].push(format!(
                    "{member} led at {}, fenced {} ms later: {line}",
                    wall(since),
                    at - since
                ));
            }
        }
    }
    let cuts = read_cuts(dir);
    paths.cuts = cuts.values().map(Vec::len).sum();
    // The cut of `member` its command begun at `begun` met, if any.
    let cut_at =
        |member: &str, begun: u64| cuts.get(member).into_iter().flatten().find(|c| c.1 <= begun && begun < c.2);
    for ((member, role, due), runs) in &spawns {
        for &(named, begun) in runs {
            match cut_at(member, begun) {
                Some(c) if named >= c.0 => paths.after_cut.push(format!(
                    "role {role}: {member} named due {} at {} and began its command at {}, cut off since {}",
                    wall(*due),
                    wall(named),
                    wall(begun),
                    wall(c.0)
                )),
                Some(_) => paths.named_before += 1,
                None => {}
            }
        }
    }
    for j in 0..roles {
        let runs = read_runs(&dir.join("roles").join(j.to_string()).join("runs"));
        for (&due, starts) in runs.starts.iter().filter(|(_, s)| s.len() > 1) {
            let mut starts = starts.clone();
            starts.sort_by_key(|s| s.1);
            let ended = starts.iter().filter(|s| runs.ended.contains(&(due, s.0, s.3.clone()))).count();
            paths.ended_twice += usize::from(ended > 1);
            // Each run again follows the one before it (cut short, or its
            // ending lost): the first of them that met its member's cut
            // tells the due time's kind.
            let met = starts.windows(2).find_map(|w| {
                let (run, again) = (&w[0], &w[1]);
                let member = run.3.as_str();
                let spawned = spawns.get(&(run.3.clone(), j, due)).into_iter().flatten();
                let (named, begun) =
                    spawned.filter(|r| r.1 <= run.1 + 500).max_by_key(|r| r.1).copied().unwrap_or((run.1, run.1));
                let member_cuts = cuts.get(member).map(Vec::as_slice).unwrap_or_default();
                match cut_at(member, begun) {
                    Some(c) if named >= c.0 => Some(Met::After),
                    Some(c) => Some(Met::During(c.0 - named)),
                    None if member_cuts.iter().any(|c| begun < c.0 && c.0 < again.1) => Some(Met::UnderWay),
                    None => None,
                }
            });
            match met {
                Some(Met::After) => paths.doubled_after_cut += 1,
                Some(Met::During(margin)) => {
                    paths.begun_cut_off += 1;
                    paths.margin = Some(paths.margin.unwrap_or(u64::MAX).min(margin));
                }
                Some(Met::UnderWay) => paths.under_way += 1,
                None if ended > 1 => {
                    let runs: Vec<String> =
                        starts.iter().map(|s| format!("{} {} at {}", s.3, s.0, wall(s.1))).collect();
                    paths.other.push(format!("role {j}: due {} ran to its end twice: {}", wall(due), runs.join(", ")));
                }
                None => paths.cut_short += 1,
            }
        }
        check_reloads(dir, j, &runs, &reads, &mut paths);
    }
    paths.reloads = read_lines(&dir.join("reloads")).len();
    paths.unconfirmed = read_lines(&dir.join("reloads"))
        .iter()
        .filter(|l| l.split(' ').nth(2) == Some("hup"))
        .filter(|l| read_at(l, &reads).1)
        .count();
    paths
}

/// Role `j`'s runs of a changed line: each of a due time after its member
/// read that line (see the module doc).
fn check_reloads(
    dir: &std::path::Path,
    j: usize,
    runs: &crate::judge::Runs,
    reads: &BTreeMap<String, Vec<u64>>,
    paths: &mut Paths,
) {
    let given = read_lines(&dir.join("reloads"));
    // When a member first read a file with line `line` of this job.
    let read = |member: &str, line: u32| {
        given
            .iter()
            .filter(|l| l.split(' ').next() == Some(member))
            .filter(|l| {
                let versions = l.split(' ').nth(3).unwrap_or_default();
                versions.split(',').nth(j).and_then(|v| v.parse::<u32>().ok()) == Some(line)
            })
            .map(|l| read_at(l, reads).0)
            .min()
    };
    // Each changed line's first run (by its command's start): the line
    // took over the job when that run's member read it.
    let mut first: BTreeMap<u32, (u64, &str)> = BTreeMap::new();
    for (line, _, _, ms, member) in runs.lines.values().flatten().filter(|l| l.0 > 0) {
        let earliest = first.entry(*line).or_insert((*ms, member));
        if *ms < earliest.0 {
            *earliest = (*ms, member);
        }
    }
    for (&due, lines) in &runs.lines {
        for (line, _, token, ms, member) in lines.iter().filter(|l| l.0 > 0) {
            paths.changed_runs += 1;
            // A run of the line on record before ours: followed as ours
            // (docs/operations.md, Reloading), from when the line took over.
            let (since, by) = match first.get(line) {
                Some(&(at, by)) if at < *ms => (read(by, *line), by),
                _ => (read(member, *line), member.as_str()),
            };
            if since.is_none_or(|since| due < since) {
                paths.early.push(format!(
                    "role {j}: due {} of line {line} run by {member} (token {token}); the line took over when {by} \
                     read it at {}",
                    wall(due),
                    since.map_or("no time recorded".into(), wall)
                ));
            }
        }
    }
}

/// When the member of a `reloads` line read the file it was given: at its
/// start, then; after a SIGHUP, its first `crontab read again` since (or,
/// none logged, the SIGHUP's time, and true).
fn read_at(given: &str, reads: &BTreeMap<String, Vec<u64>>) -> (u64, bool) {
    let mut w = given.split(' ');
    let (member, at, how) =
        (w.next().unwrap_or_default(), w.next().and_then(|a| a.parse().ok()).unwrap_or(0), w.next());
    if how == Some("start") {
        return (at, false);
    }
    match reads.get(member).into_iter().flatten().filter(|r| **r >= at).min() {
        Some(&read) => (read, false),
        None => (at, true),
    }
}

/// Each member's cuts from the soak's `cuts`, each paired with its heal
/// (none: never healed while it ran).
fn read_cuts(dir: &std::path::Path) -> BTreeMap<String, Vec<Cut>> {
    let mut cuts: BTreeMap<String, Vec<Cut>> = BTreeMap::new();
    for line in read_lines(&dir.join("cuts")) {
        let w: Vec<&str> = line.split(' ').collect();
        let (Some(&what), Some(&member)) = (w.first(), w.get(1)) else { continue };
        let (Some(before), Some(after)) =
            (w.get(2).and_then(|t| t.parse().ok()), w.get(3).and_then(|t| t.parse().ok()))
        else {
            continue;
        };
        let mine = cuts.entry(member.to_string()).or_default();
        match what {
            "cut" => mine.push((before, after, u64::MAX)),
            _ => {
                if let Some(open) = mine.last_mut().filter(|c| c.2 == u64::MAX) {
                    open.2 = before;
                }
            }
        }
    }
    cuts
}

/// The role of a member's log line: its role's span, or its job's (job
/// jNN is role NN).
fn role_of(line: &str) -> Option<usize> {
    let (_, rest) = line.split_once("role{role=").or_else(|| line.split_once("job{job=j"))?;
    rest.split(['}', ' ']).next()?.parse().ok()
}

/// Wall ms as the members' logs print time.
fn wall(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A work directory of one job (role 0): member logs, the soak's cuts
    /// and reloads, and the job's runs file.
    fn work(name: &str, logs: &[(&str, &str)], cuts: &str, reloads: &str, runs: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("neli-soak-paths-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("roles").join("0")).unwrap();
        for (member, log) in logs {
            std::fs::write(dir.join(format!("{member}.log")), log).unwrap();
        }
        std::fs::write(dir.join("cuts"), cuts).unwrap();
        std::fs::write(dir.join("reloads"), reloads).unwrap();
        std::fs::write(dir.join("roles").join("0").join("runs"), runs).unwrap();
        dir
    }

    /// Wall ms of 2026-11-29T10:00:SS.mmmZ.
    fn at(s: f64) -> u64 {
        1_795_946_400_000 + (s * 1000.0) as u64
    }

    fn log(lines: &[(f64, &str)]) -> String {
        lines.iter().map(|(s, l)| format!("{}  INFO {l}\n", wall(at(*s)))).collect()
    }

    /// a is cut at :10.000 (healed at :14); due :11 runs again on b.
    /// a's command began at :10.9, named at :10.6 (after the cut: the
    /// promise broken) or at :09.9 (read back before it); or it began at
    /// :09.95 (under way at the cut).
    #[test]
    fn a_command_begun_while_cut_off_is_unsafe_only_if_named_after_the_cut() {
        let judge_with = |named: f64, begun: f64| {
            let due = at(11.0);
            let a = log(&[
                (named, &format!("job{{job=j0 partition=0}}: naming the run of a due time on the topic; its command starts once that is read back due_ms={due}")),
                (begun, "job{job=j0 partition=0}: child started pid=1 token=5"),
            ]);
            let cuts = format!("cut a {} {}\nheal a {} {}\n", at(10.0), at(10.01), at(14.0), at(14.01));
            let runs =
                format!("start {d} 1 5 {} a 0 5000\nstart {d} 2 9 {} b 0 5000\n", at(11.0), at(16.0), d = wall(due));
            judge(&work(&format!("cut{named}-{begun}"), &[("a", &a)], &cuts, "", &runs), 1)
        };
        let count = |p: Paths| (p.after_cut.len(), p.doubled_after_cut, p.named_before, p.begun_cut_off, p.under_way);
        assert_eq!(count(judge_with(10.6, 10.9)), (1, 1, 0, 0, 0), "named after the cut");
        let before = judge_with(9.9, 10.9);
        assert_eq!(before.margin, Some(100));
        assert_eq!(count(before), (0, 0, 1, 1, 0), "named before the cut, begun during it");
        assert_eq!(count(judge_with(9.9, 9.95)), (0, 0, 0, 0, 1), "under way at the cut");
    }

    /// Due :11 run by a, then by b at :16; a cut off only from :20 on. The
    /// first run cut short (no `end` of a's) is counted apart; both ended,
    /// it is named (no cut: a freeze, a revoke ...).
    #[test]
    fn a_due_time_run_twice_with_no_cut_between_is_told_apart_by_its_endings() {
        let judge_with = |ends: &str| {
            let due = wall(at(11.0));
            let cuts = format!("cut a {} {}\nheal a {} {}\n", at(20.0), at(20.01), at(22.0), at(22.01));
            let runs = format!("start {due} 1 5 {} a 0 5000\nstart {due} 2 9 {} b 0 5000\n{ends}", at(11.0), at(16.0));
            let runs = runs.replace("DUE", &due);
            judge(&work(&format!("nocut{}", ends.len()), &[], &cuts, "", &runs), 1)
        };
        let count = |p: Paths| (p.under_way, p.cut_short, p.other.len(), p.ended_twice);
        assert_eq!(count(judge_with("end DUE 9 b\n")), (0, 1, 0, 0), "a's run cut short");
        assert_eq!(count(judge_with("end DUE 5 a\nend DUE 9 b\n")), (0, 0, 1, 1), "ran to its end twice");
    }

    /// Line 1 of job 0 given to a at :10 by a SIGHUP, read at :10.5: its
    /// run of due :10.4 is early, of :12 is not; b, started with line 1 at
    /// :20 after a's first run of it, follows a's runs (due :16 is fine).
    #[test]
    fn a_changed_lines_due_time_before_the_line_took_over_is_early() {
        let a = log(&[(10.5, "crontab read again jobs=[\"j0\"]")]);
        let reloads = format!("a {} hup 1\nb {} start 1\n", at(10.0), at(20.0));
        let run = |due: f64, member: &str, ms: f64| format!("start {} 1 5 {} {member} 1 4000\n", wall(at(due)), at(ms));
        let runs = [run(10.4, "a", 10.6), run(12.0, "a", 12.0), run(16.0, "b", 20.5)].concat();
        let paths = judge(&work("reload", &[("a", &a)], "", &reloads, &runs), 1);
        assert_eq!(paths.changed_runs, 3);
        assert_eq!(paths.early.len(), 1, "{:?}", paths.early);
        assert!(paths.early[0].contains("10:00:10.400Z"), "{:?}", paths.early);
        assert_eq!((paths.reloads, paths.unconfirmed), (2, 0));
        let unread = judge(&work("unread", &[], "", &reloads, ""), 1);
        assert_eq!(unread.unconfirmed, 1, "a's SIGHUP with no reading logged after it");
    }

    #[test]
    fn a_fence_within_a_second_of_leading_is_counted_for_its_role() {
        let a = log(&[
                (1.0, "role{role=2}: leader: read own heartbeat back token=7"),
                (1.6, "role{role=2}: another member has contended for the partition since before our leadership began; fencing"),
                (5.0, "role{role=1}: leader: read own heartbeat back token=9"),
                (6.5, "role{role=1}: fenced: own heartbeats stopped arriving; killing the child"),
            ],
        );
        let paths = judge(&work("fence", &[("a", &a)], "", "", ""), 3);
        assert_eq!(paths.fences.iter().map(Vec::len).collect::<Vec<_>>(), [0, 0, 1]);
    }

    #[test]
    fn a_role_is_read_from_its_span_or_its_jobs() {
        assert_eq!(role_of("T  INFO role{role=3}: leader: read own heartbeat back token=4"), Some(3));
        assert_eq!(role_of("T  INFO job{job=j07 partition=7}: starting the run"), Some(7));
        assert_eq!(role_of("T  INFO crontab read again"), None);
    }
}
