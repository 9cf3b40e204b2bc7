//! The verdict, from the kernel's lock and the children's and members' own
//! records (see the module doc of `main`): overlaps, orphans, fencing
//! tokens, and reruns or skipped due times.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::time::{Duration, Instant};

use neli_proof::detector::{read_lines, Detector};

use crate::members::{Soak, WAVE};

/// What the soak found once every member was stopped.
pub struct Verdict {
    /// Children left holding the lock (0 or 1: the lock says whether, not
    /// how many).
    pub orphans: usize,
    /// Starts refused because another child held the lock.
    pub overlaps: Vec<String>,
    /// Every child start: (member, fencing token).
    pub starts: Vec<(String, i64)>,
    /// Whether every start's fencing token exceeds the one before (a
    /// schedule's repeated starts under one leadership aside).
    pub tokens_increase: bool,
    /// Once per wave: starts after a recorded success (see `reruns`).
    pub reruns: Vec<(String, i64, i64)>,
    /// Once per wave: the successes recorded on the topic.
    pub succeeded: usize,
    /// Under --schedule, what the scheduled runs did.
    pub scheduled: Option<ScheduleCheck>,
    /// Commands started by a member whose health check had never passed
    /// ("name token", the children's own word).
    pub sick_starts: Vec<String>,
}

impl Verdict {
    /// What broke the rules, each with its count (none: safe): an overlap,
    /// an orphan, a rerun, a skipped due time, a token out of order, a sick
    /// member's start.
    pub fn failures(&self) -> Vec<String> {
        let (reruns, skipped) = self.scheduled.as_ref().map_or((0, 0), |c| (c.reruns.len(), c.skipped.len()));
        failures(&[
            ("overlaps", self.overlaps.len()),
            ("orphans", self.orphans),
            ("tokens out of order", usize::from(!self.tokens_increase)),
            ("reruns", self.reruns.len() + reruns),
            ("skipped due times", skipped),
            ("starts by a sick member", self.sick_starts.len()),
        ])
    }
}

/// Each kind of failure that happened, with its count ("reruns 2"), for
/// the soak's last line: CI shows only an output's tail.
pub fn failures(counts: &[(&str, usize)]) -> Vec<String> {
    counts.iter().filter(|(_, n)| *n > 0).map(|(what, n)| format!("{what} {n}")).collect()
}

/// The starts that broke a pause (of `starts`, those past the first
/// `before`): one under a fencing token past the pause record at `offset`
/// (its member led after the request was on the topic, so had read it),
/// or one logged after the acknowledgement (past the first `acked`). A
/// start under an older token before the acknowledgement raced the request
/// (`pause` reads to the end before it writes, seconds on a slow broker),
/// and `--stop` ended it before the owner acknowledged, which the lock
/// then tells.
pub fn paused_starts(starts: &[(String, i64)], before: usize, acked: usize, offset: i64) -> Vec<(String, i64)> {
    let late = |(i, (_, token)): &(usize, &(String, i64))| *i >= acked || *token > offset;
    starts.iter().enumerate().skip(before).filter(late).map(|(_, start)| start.clone()).collect()
}

/// The pause record's offset from `neli-run pause`'s word ("group g:
/// pause (offset 42) acknowledged by ..."); where it names none, `i64::MIN`,
/// so that every start since the ask counts.
pub fn pause_offset(said: &str) -> i64 {
    let offset = said.split_once("(offset ").and_then(|(_, rest)| rest.split(')').next()?.parse().ok());
    offset.unwrap_or(i64::MIN)
}

/// Stops every member and the broker, waits up to 5 s for the lock to be
/// free, and judges what the records say.
pub fn judge(soak: &mut Soak) -> Verdict {
    soak.stop_all();
    drop(soak.broker.take());
    let orphans = {
        let deadline = Instant::now() + Duration::from_secs(5);
        while soak.detector.lock_held() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        usize::from(soak.detector.lock_held())
    };
    let overlaps = soak.detector.overlaps();
    let starts = soak.detector.starts();
    // (A schedule runs many due times under one leadership: one token; so
    // does a resume start again the command that `pause --stop` stopped,
    // and a warm member, under --restart on-failure, its command that died.)
    let warm = |name: &str| {
        let slot = name.strip_prefix('c').and_then(|n| n.split('-').next()).and_then(|n| n.parse().ok());
        slot.is_some_and(|slot| soak.is_warm(slot))
    };
    let again = starts.windows(2).filter(|w| w[0] == w[1] && !warm(&w[0].0)).count();
    let repeats_allowed = soak.schedule.is_some() || again <= soak.resumes;
    let tokens_increase =
        starts.windows(2).all(|w| w[0].1 < w[1].1 || (w[0] == w[1] && (repeats_allowed || warm(&w[0].0))));
    let (reruns, succeeded) = match soak.schedule {
        Some(_) => (Vec::new(), 0),
        None => (reruns(&soak.detector, &soak.births), recorded_successes(&soak.detector.dir).len()),
    };
    let scheduled = soak.schedule.map(|(_, every)| check_schedule(&soak.detector.dir, every));
    let sick_starts = read_lines(&soak.detector.dir.join("sick-starts"));
    Verdict { orphans, overlaps, starts, tokens_increase, reruns, succeeded, scheduled, sick_starts }
}

/// How much later than the soak's record of its start a neli-run may note
/// its own start (a rerun is judged only outside that doubt).
const START_DOUBT: Duration = Duration::from_millis(500);

/// The tokens of runs whose success is on the topic, as their members
/// logged it (a log lost to a broken-log fault only means fewer checks).
fn recorded_successes(dir: &std::path::Path) -> Vec<i64> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|e| e != "log") {
            continue;
        }
        for line in read_lines(&entry.path()).iter().filter(|l| l.contains("the run's ending is on the group's topic"))
        {
            let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse::<i64>().ok());
            if let (Some(token), Some(0)) = (field("token="), field("code=")) {
                found.push(token);
            }
        }
    }
    found
}

/// Starts after a wave's recorded success that ran it again, or that began
/// a new wave on a member of it: (name, token, the succeeded token). A
/// member counts as one of the wave only if surely started within WAVE of
/// its beginning.
fn reruns(detector: &Detector, births: &BTreeMap<String, std::time::SystemTime>) -> Vec<(String, i64, i64)> {
    // By token: the wave it ran for, and whether it began that wave.
    let waves: BTreeMap<i64, (std::time::SystemTime, bool)> = read_lines(&detector.dir.join("waves"))
        .iter()
        .filter_map(|l| {
            let mut fields = l.split(' ');
            let token = fields.next()?.parse().ok()?;
            let wave = humantime::parse_rfc3339(fields.next()?).ok()?;
            Some((token, (wave, fields.next()? == "1")))
        })
        .collect();
    let mut found = Vec::new();
    for done in recorded_successes(&detector.dir) {
        let Some(&(wave, _)) = waves.get(&done) else { continue };
        for (name, token) in detector.starts().into_iter().filter(|s| s.1 > done) {
            let Some(&(ran, began)) = waves.get(&token) else { continue };
            let member = births.get(&name).is_some_and(|&born| born + START_DOUBT < wave + WAVE);
            if ran == wave || (began && member) {
                found.push((name, token, done));
            }
        }
    }
    found
}

/// What the scheduled runs did, from the command's own side.
#[derive(Default)]
pub struct ScheduleCheck {
    /// Due times started (at least once), and those that ran to their end.
    pub started: usize,
    pub ended: usize,
    /// Due times between the first and the last started that never started
    /// and whose run no member recorded as ended.
    pub skipped: Vec<String>,
    /// Starts of a due time by a leader that had read its ending (its token
    /// above the ending record's offset), or begun more than `LANDING_DOUBT`
    /// after a member logged the ending as on the topic: (due time, token of
    /// the start, token of the recorded run). (An ending delivered late,
    /// after a cut, lands late: a start begun before it is the at-least-once
    /// the README states, not a rerun.)
    pub reruns: Vec<(String, i64, i64)>,
    /// Due times that ran to their end twice, no ending recorded between.
    pub at_least_once: usize,
    /// Starts of a later attempt (a run cut short, run again).
    pub retried: usize,
    /// A flaky job's (`--crontab`) first attempts that failed on purpose,
    /// and the starts that retried one (by `retries=`).
    pub failed: usize,
    pub retries: usize,
    /// An `overlap=replace` job's (`--crontab`) due times never started:
    /// the newest due time wins, so those behind it are not skipped but
    /// superseded (not a failure).
    pub superseded: usize,
    /// Due times whose ending a member logged as on the topic.
    pub recorded: usize,
    /// The latest first start after its due time, and that due time.
    pub latest: Option<(Duration, String)>,
}

/// Judges the runs file and the members' logs (see the module doc).
fn check_schedule(dir: &std::path::Path, every: Duration) -> ScheduleCheck {
    let runs = read_runs(&dir.join("runs"));
    // The endings the members saw delivered, by due time; and the due
    // times they started.
    let mut recorded: BTreeMap<u64, Recorded> = BTreeMap::new();
    let mut started: BTreeSet<u64> = Default::default();
    for (_, line) in member_lines(dir) {
        let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse::<u64>().ok());
        if line.contains(STARTING) {
            started.extend(field("due_ms="));
            continue;
        }
        if let Some(ending) = Ending::parse(&line).filter(|e| e.code != Some(FAILED)) {
            ending.note(&mut recorded);
        }
    }
    started.extend(locked_dues(dir));
    judge_runs(&runs, &recorded, &started, every)
}

/// The due times whose command took the detector's lock in `dir` (the
/// third word of its `starts`): run, even if killed before its own first
/// line, by a member whose log is lost.
fn locked_dues(dir: &std::path::Path) -> Vec<u64> {
    read_lines(&dir.join("starts")).iter().filter_map(|l| rfc_ms(l.split(' ').nth(2)?)).collect()
}

/// The member's log line saying it starts a due time's run (`due_ms=`;
/// with roles, in the role's span).
pub(crate) const STARTING: &str =
    "naming the run of a due time on the topic; its command starts once that is read back";

/// The member's log line saying a run's ending is on the topic.
const RECORDED: &str = "the run's ending is on the group's topic";

/// Every line of every log in `dir` (the members' `NAME.log`), with the
/// name of the file it is in.
pub(crate) fn member_lines(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        found.extend(read_lines(&path).into_iter().map(|l| (name.clone(), l)));
    }
    found
}

/// Wall ms of an RFC 3339 time, as the members' logs and `NELI_DUE` print
/// it.
pub(crate) fn rfc_ms(rfc: &str) -> Option<u64> {
    humantime::parse_rfc3339(rfc).ok().map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64)
}

/// The status a flaky job's first attempt fails with (`SCHEDULED` in
/// `roles`): a failure retried, not an ending.
pub const FAILED: u64 = 200;

/// What a command wrote of its runs ("start DUE ATTEMPT TOKEN MS [NAME]",
/// "end DUE TOKEN [NAME]", a flaky job's "fail DUE ATTEMPT ..."): by due
/// time, each start's (token, wall ms, attempt, member), how many runs
/// ended, and which: (due, token, member); the failures: (due, attempt).
/// A start's attempt counts the failures before it out: the retry of a
/// failure is a first try as far as cuts go.
#[derive(Default)]
pub(crate) struct Runs {
    pub(crate) starts: BTreeMap<u64, Vec<(i64, u64, u32, String)>>,
    ends: BTreeMap<u64, usize>,
    pub(crate) ended: BTreeSet<(u64, i64, String)>,
    failed: BTreeSet<(u64, u32)>,
    /// Starts that retried a failure.
    retries: usize,
    /// Each start's job line (`--crontab`), by due time; none from a
    /// command that names no line.
    pub(crate) lines: BTreeMap<u64, Vec<LineRun>>,
}

/// A start of a `--crontab` job's run with its line: (line version, its
/// period in ms, token, wall ms, member).
pub(crate) type LineRun = (u32, u64, i64, u64, String);

pub(crate) fn read_runs(path: &std::path::Path) -> Runs {
    let mut runs = Runs::default();
    for line in read_lines(path) {
        let w: Vec<&str> = line.split(' ').collect();
        let attempt = || w.get(2).and_then(|a| a.parse::<u32>().ok()).unwrap_or(0);
        match (w.first(), w.get(1).and_then(|d| rfc_ms(d))) {
            (Some(&"fail"), Some(due)) => drop(runs.failed.insert((due, attempt()))),
            (Some(&"start"), Some(due)) => {
                let token = w.get(3).and_then(|t| t.parse().ok()).unwrap_or(-1);
                let ms = w.get(4).and_then(|t| t.parse().ok()).unwrap_or(0);
                let failures = runs.failed.range((due, 0)..(due, attempt())).count() as u32;
                runs.retries += usize::from(failures > 0 && runs.failed.contains(&(due, attempt() - 1)));
                let name = w.get(5).map(|n| n.to_string()).unwrap_or_default();
                let line = w.get(6).and_then(|l| l.parse::<u32>().ok());
                let every = w.get(7).and_then(|e| e.parse::<u64>().ok()).filter(|e| *e > 0);
                if let (Some(line), Some(every)) = (line, every) {
                    runs.lines.entry(due).or_default().push((line, every, token, ms, name.clone()));
                }
                runs.starts.entry(due).or_default().push((token, ms, attempt() - failures, name));
            }
            (Some(&"end"), Some(due)) => {
                *runs.ends.entry(due).or_default() += 1;
                if let (Some(token), Some(name)) = (w.get(2).and_then(|t| t.parse().ok()), w.get(3)) {
                    runs.ended.insert((due, token, name.to_string()));
                }
            }
            _ => {}
        }
    }
    runs
}

/// The runs a role's command (its work directory `dir`) started at or
/// after `since` (wall ms), in order: (member, attempt).
pub fn runs_since(dir: &std::path::Path, since: u64) -> Vec<(String, u32)> {
    let mut found: Vec<(u64, String, u32)> = read_runs(&dir.join("runs"))
        .starts
        .into_values()
        .flatten()
        .filter(|s| s.1 >= since)
        .map(|(_, ms, attempt, name)| (ms, name, attempt))
        .collect();
    found.sort();
    found.into_iter().map(|(_, name, attempt)| (name, attempt)).collect()
}

/// A member's log line saying a run's ending is on the topic.
struct Ending {
    token: i64,
    due: u64,
    code: Option<u64>,
    /// The role (partition) it names, where the line says.
    role: Option<usize>,
    /// When it was logged (wall ms).
    at: u64,
    /// The record's offset on the role's partition, where the line says.
    offset: Option<i64>,
}

/// A due time's ending as first known to be on the topic.
#[derive(Clone, Copy)]
struct Recorded {
    /// The token of the run that ended.
    token: i64,
    /// When its member logged it as delivered, or started its next run
    /// (wall ms).
    at: u64,
    /// The record's offset: every leader whose token (its first record's
    /// offset) is greater read it before it led.
    offset: Option<i64>,
}

/// How long after an ending was logged as delivered another leader may
/// still begin its due time unaware (its decision taken before it read the
/// record, then the spawn and the command's first line, on a loaded
/// machine): a start later than that is a rerun whatever its token.
const LANDING_DOUBT: u64 = 500;

impl Ending {
    fn parse(line: &str) -> Option<Ending> {
        if !line.contains(RECORDED) {
            return None;
        }
        let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse::<u64>().ok());
        let at = line.split_whitespace().next().and_then(rfc_ms)?;
        let role = field("role=").map(|r| r as usize);
        let offset = field("offset=").map(|o| o as i64);
        Some(Ending { token: field("token=")? as i64, due: field("due_ms=")?, code: field("code="), role, at, offset })
    }

    /// Keeps the first such line of each due time.
    fn note(&self, recorded: &mut BTreeMap<u64, Recorded>) {
        let this = Recorded { token: self.token, at: self.at, offset: self.offset };
        let first = recorded.entry(self.due).or_insert(this);
        if self.at < first.at {
            *first = this;
        }
    }
}

/// The schedule's rules (see the module doc) over one schedule's runs, the
/// endings recorded and the due times the members said they started.
fn judge_runs(
    runs: &Runs,
    recorded: &BTreeMap<u64, Recorded>,
    started: &BTreeSet<u64>,
    every: Duration,
) -> ScheduleCheck {
    let (starts, ends) = (&runs.starts, &runs.ends);
    let name =
        |due: u64| humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(due)).to_string();
    let mut check = ScheduleCheck { started: starts.len(), ended: ends.len(), ..Default::default() };
    for (&due, started) in starts {
        if let Some(&r) = recorded.get(&due) {
            // Begun by a leader that had read the ending, or long after it landed.
            let rerun = |s: &&(i64, u64, u32, String)| r.offset.is_some_and(|o| s.0 > o) || s.1 > r.at + LANDING_DOUBT;
            check.reruns.extend(started.iter().filter(rerun).map(|s| (name(due), s.0, r.token)));
        }
    }
    check.at_least_once = ends.iter().filter(|(due, &n)| n > 1 && !recorded.contains_key(due)).count();
    // Each line of the job (`--crontab`'s reloads change one) on its own
    // grid, between its first and its last due time started.
    let mut segments: BTreeMap<u32, (u64, BTreeSet<u64>)> = BTreeMap::new();
    for (&due, lines) in &runs.lines {
        for &(line, period, ..) in lines {
            segments.entry(line).or_insert((period, BTreeSet::new())).1.insert(due);
        }
    }
    if segments.is_empty() {
        segments.insert(0, (every.as_millis() as u64, starts.keys().copied().collect()));
    }
    for (period, dues) in segments.values() {
        let (Some(&first), Some(&last)) = (dues.first(), dues.last()) else { continue };
        let period = *period;
        // A run killed before its first line (child-crash strikes once the
        // detector's lock is held) ends as a failure, not retried: its due
        // time was run, as its member's log (its start, or its ending) says.
        // A flaky job's due time whose only attempt failed (its retry
        // superseded by a later due time) was run too.
        let failed = |d: &u64| runs.failed.range((*d, 0)..=(*d, u32::MAX)).next().is_some();
        let run = |d: &u64| starts.contains_key(d) || started.contains(d) || recorded.contains_key(d) || failed(d);
        check.skipped.extend((first..=last).step_by(period as usize).filter(|d| !run(d)).map(name));
    }
    check.retried = starts.values().flatten().filter(|s| s.2 > 1).count();
    (check.failed, check.retries) = (runs.failed.len(), runs.retries);
    check.recorded = recorded.len();
    check.latest = starts
        .iter()
        .filter_map(|(&due, s)| Some((s.iter().map(|s| s.1).min()?.saturating_sub(due), due)))
        .max()
        .map(|(late, due)| (Duration::from_millis(late), name(due)));
    check
}

/// The status a role's scheduled run exits with when it gets to its end
/// (`SCHEDULED` in `roles`): where the member's log line saying a run's
/// ending is on the topic names no role (a single seat's), its status does.
pub fn role_code(role: usize) -> u64 {
    (role % 128) as u64
}

/// A schedule kept per role (`--roles R --schedule`): each role's runs
/// (`WORK/roles/J/runs`) judged by the schedule's rules, with what the
/// members' logs say of that role.
pub struct RolesSchedule {
    pub roles: Vec<ScheduleCheck>,
    /// Lines saying a run's ending is on the topic that could not be told
    /// to one role (no run of that due time, token and member, or several,
    /// with the line's status): they judge no role.
    pub unattributed: usize,
    /// Due times recorded only by their member's next run (no log line).
    pub next_run: usize,
}

impl RolesSchedule {
    /// `count` summed over every role.
    pub fn sum(&self, count: fn(&ScheduleCheck) -> usize) -> usize {
        self.roles.iter().map(count).sum()
    }
}

/// Judges every role's schedule (see `RolesSchedule`). The log line of a
/// run's ending names its member, token, due time, status and role (its
/// `role=`): it counts for that role if that member started a run of that
/// due time under that token there and the role's runs exit with that
/// status (a status of 128 or more, a run killed, matches any). A line that
/// names no role counts for the one role that fits. A member may miss that
/// line (a broken log): a run that got to its end counts as recorded, too, from the next
/// run (of another due time) its member started for that role under the
/// same token, since neli-run starts a next run only once the record of
/// the last one's ending is read back.
pub fn check_roles_schedule(dir: &std::path::Path, roles: usize, every: Duration) -> RolesSchedule {
    let dirs: Vec<std::path::PathBuf> = (0..roles).map(|j| dir.join("roles").join(j.to_string())).collect();
    let runs: Vec<Runs> = dirs.iter().map(|d| read_runs(&d.join("runs"))).collect();
    let mut recorded: Vec<BTreeMap<u64, Recorded>> = vec![BTreeMap::new(); roles];
    let mut started: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); roles];
    let mut endings = Vec::new();
    for (member, line) in member_lines(dir) {
        if line.contains(STARTING) {
            // A role's span, or (--crontab) its job's: job jNN is role NN.
            let role = line.split_once("role{role=").or_else(|| line.split_once("job{job=j"));
            let role = role.and_then(|(_, r)| r.split(['}', ' ']).next()?.parse::<usize>().ok());
            let due = line.split_whitespace().find_map(|w| w.strip_prefix("due_ms=")?.parse::<u64>().ok());
            if let (Some(role), Some(due)) = (role.filter(|r| *r < roles), due) {
                started[role].insert(due);
            }
        } else if let Some(ending) = Ending::parse(&line).filter(|e| e.code != Some(FAILED)) {
            endings.push((member, ending));
        }
    }
    for (started, dir) in started.iter_mut().zip(&dirs) {
        started.extend(locked_dues(dir));
    }
    let mut unattributed = 0;
    for (member, e) in endings {
        let status = |j: &usize| e.code.is_none_or(|c| c >= 128 || c == role_code(*j));
        let ran =
            |j: &usize| runs[*j].starts.get(&e.due).is_some_and(|s| s.iter().any(|s| s.0 == e.token && s.3 == member));
        let named = |j: &usize| e.role.is_none_or(|r| r == *j);
        let roles: Vec<usize> = (0..roles).filter(named).filter(status).filter(ran).collect();
        match roles[..] {
            [j] => e.note(&mut recorded[j]),
            _ => unattributed += 1,
        }
    }
    let mut next_run = 0;
    for (runs, recorded) in runs.iter().zip(&mut recorded) {
        for (&due, starts) in &runs.starts {
            for (token, ms, _, member) in starts.iter().filter(|s| runs.ended.contains(&(due, s.0, s.3.clone()))) {
                let next = runs
                    .starts
                    .iter()
                    .filter(|(&d, _)| d != due)
                    .flat_map(|(_, s)| s)
                    .filter(|s| s.0 == *token && s.3 == *member && s.1 > *ms)
                    .map(|s| s.1)
                    .min();
                let Some(at) = next else { continue };
                let known = recorded.get(&due).copied();
                if known.is_none_or(|r| at < r.at) {
                    next_run += usize::from(known.is_none());
                    recorded.insert(due, Recorded { token: *token, at, offset: known.and_then(|r| r.offset) });
                }
            }
        }
    }
    // The crontab's jobs that give way to their newest due time.
    let crontab = fs::read_to_string(dir.join("fleet.crontab")).unwrap_or_default();
    let replaced = |j: usize| {
        crontab.lines().any(|l| {
            l.contains(&format!(" j{j:0w$}[", w = (roles - 1).to_string().len())) && l.contains("overlap=replace")
        })
    };
    let roles = (0..roles)
        .map(|j| {
            let mut check = judge_runs(&runs[j], &recorded[j], &started[j], every);
            if replaced(j) {
                check.superseded = std::mem::take(&mut check.skipped).len();
            }
            check
        })
        .collect();
    RolesSchedule { roles, unattributed, next_run }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUE: u64 = 1_000_000;
    const EVERY: Duration = Duration::from_secs(5);

    /// Runs of DUE, each (token, its first line's wall ms, member).
    fn runs(starts: &[(i64, u64, &str)]) -> Runs {
        let mut runs = Runs::default();
        for &(token, ms, member) in starts {
            runs.starts.entry(DUE).or_default().push((token, ms, 1, member.into()));
        }
        runs
    }

    /// DUE's ending, logged as delivered at 2,000 ms, at offset 40.
    fn recorded() -> BTreeMap<u64, Recorded> {
        BTreeMap::from([(DUE, Recorded { token: 10, at: 2_000, offset: Some(40) })])
    }

    #[test]
    fn a_leader_that_read_the_ending_before_it_led_reruns_however_soon_it_starts() {
        let check = judge_runs(&runs(&[(10, 1_000, "a"), (41, 2_010, "b")]), &recorded(), &BTreeSet::new(), EVERY);
        assert_eq!(check.reruns.len(), 1, "token 41 led after the ending at offset 40");
    }

    #[test]
    fn a_start_begun_unaware_as_the_ending_landed_is_at_least_once_and_a_late_one_a_rerun() {
        let soon = judge_runs(&runs(&[(10, 1_000, "a"), (30, 2_010, "b")]), &recorded(), &BTreeSet::new(), EVERY);
        assert!(soon.reruns.is_empty(), "token 30 led before the ending landed and began 10 ms after its log line");
        let late = judge_runs(&runs(&[(10, 1_000, "a"), (30, 2_600, "b")]), &recorded(), &BTreeSet::new(), EVERY);
        assert_eq!(late.reruns.len(), 1, "begun 600 ms after the ending was on the topic");
    }

    /// a led before the pause (offset 50) and started as it was written;
    /// b led past it; c started after the acknowledgement (the third start
    /// logged, of one logged before the episode).
    #[test]
    fn a_pause_is_broken_by_a_leader_past_its_record_or_a_start_after_its_acknowledgement() {
        let starts: Vec<(String, i64)> =
            [("z", 10), ("a", 40), ("b", 51), ("c", 45)].map(|(m, t)| (m.into(), t)).into();
        assert_eq!(paused_starts(&starts[..2], 1, 2, 50), [], "a raced the request");
        assert_eq!(paused_starts(&starts[..3], 1, 2, 50), [("b".into(), 51)]);
        assert_eq!(paused_starts(&starts, 1, 3, 50), [("b".into(), 51), ("c".into(), 45)]);
        assert_eq!(paused_starts(&starts[..2], 1, 1, 50), [("a".into(), 40)], "a began after the acknowledgement");
    }

    #[test]
    fn the_pause_record_offset_is_read_from_the_acknowledgement() {
        assert_eq!(pause_offset("group g: pause (offset 47183) acknowledged by c1 (host h)"), 47183);
        assert_eq!(pause_offset("group g: paused"), i64::MIN, "every start counts");
    }

    #[test]
    fn the_last_line_names_each_kind_of_failure_that_happened() {
        assert_eq!(failures(&[("overlaps", 0), ("reruns", 2), ("orphans", 1)]), ["reruns 2", "orphans 1"]);
    }

    #[test]
    fn a_due_time_whose_command_took_the_lock_was_run_though_it_left_no_line() {
        let dir = std::env::temp_dir().join(format!("neli-soak-judge-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let rfc = |ms: u64| humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms));
        let every = EVERY.as_millis() as u64;
        let line = |ms: u64| format!("start {} 1 7 {ms} a\n", rfc(ms));
        fs::write(dir.join("runs"), line(DUE) + &line(DUE + 2 * every)).unwrap();
        let skipped = check_schedule(&dir, EVERY).skipped;
        fs::write(dir.join("starts"), format!("a 7 {}\n", rfc(DUE + every))).unwrap();
        let locked = check_schedule(&dir, EVERY).skipped;
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            (skipped.len(), locked.len()),
            (1, 0),
            "(with no trace of the middle due time, with its lock taken)"
        );
    }
}
