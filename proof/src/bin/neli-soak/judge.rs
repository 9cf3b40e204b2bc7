//! The verdict, from the kernel's lock and the children's and members' own
//! records (see the module doc of `main`): overlaps, orphans, fencing
//! tokens, and reruns or skipped due times.

use std::collections::BTreeMap;
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
    /// No overlap, orphan, rerun, skipped due time or token out of order.
    pub fn safe(&self) -> bool {
        let schedule_kept = self.scheduled.as_ref().is_none_or(|c| c.reruns.is_empty() && c.skipped.is_empty());
        self.overlaps.is_empty()
            && self.orphans == 0
            && self.tokens_increase
            && self.reruns.is_empty()
            && schedule_kept
            && self.sick_starts.is_empty()
    }
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
    /// Starts of a due time after a member logged its run's ending as on
    /// the topic: (due time, token of the start, token of the recorded run).
    /// (An ending delivered late, after a cut, is logged late: a start before
    /// that moment is the at-least-once the README states, not a rerun.)
    pub reruns: Vec<(String, i64, i64)>,
    /// Due times that ran to their end twice, no ending recorded between.
    pub at_least_once: usize,
}

/// Judges the runs file and the members' logs (see the module doc).
fn check_schedule(dir: &std::path::Path, every: Duration) -> ScheduleCheck {
    let ms = |rfc: &str| {
        humantime::parse_rfc3339(rfc).ok().map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64)
    };
    // Due time -> (token, wall ms) of each start.
    let mut starts: BTreeMap<u64, Vec<(i64, u64)>> = BTreeMap::new();
    let mut ends: BTreeMap<u64, usize> = BTreeMap::new();
    for line in read_lines(&dir.join("runs")) {
        let w: Vec<&str> = line.split(' ').collect();
        match (w.first(), w.get(1).and_then(|d| ms(d))) {
            (Some(&"start"), Some(due)) => {
                let token = w.get(3).and_then(|t| t.parse().ok()).unwrap_or(-1);
                starts.entry(due).or_default().push((token, w.get(4).and_then(|t| t.parse().ok()).unwrap_or(0)));
            }
            (Some(&"end"), Some(due)) => *ends.entry(due).or_default() += 1,
            _ => {}
        }
    }
    // The endings the members saw delivered: due time -> (token, the wall
    // ms of the first such log line); and the due times they started.
    let mut recorded: BTreeMap<u64, (i64, u64)> = BTreeMap::new();
    let mut started: std::collections::BTreeSet<u64> = Default::default();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|e| e != "log") {
            continue;
        }
        for line in read_lines(&entry.path()) {
            let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse::<u64>().ok());
            if line.contains("starting the run of a due time") {
                started.extend(field("due_ms="));
                continue;
            }
            if !line.contains("the run's ending is on the group's topic") {
                continue;
            }
            let at = line.split_whitespace().next().and_then(ms);
            if let (Some(token), Some(due), Some(at)) = (field("token="), field("due_ms="), at) {
                let first = recorded.entry(due).or_insert((token as i64, at));
                if at < first.1 {
                    *first = (token as i64, at);
                }
            }
        }
    }
    let name =
        |due: u64| humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(due)).to_string();
    let mut check = ScheduleCheck { started: starts.len(), ended: ends.len(), ..Default::default() };
    for (&due, started) in &starts {
        if let Some(&(done, at)) = recorded.get(&due) {
            check.reruns.extend(started.iter().filter(|&&(_, ms)| ms > at).map(|&(t, _)| (name(due), t, done)));
        }
    }
    check.at_least_once = ends.iter().filter(|(due, &n)| n > 1 && !recorded.contains_key(due)).count();
    if let (Some(&first), Some(&last)) = (starts.keys().next(), starts.keys().last()) {
        let period = every.as_millis() as u64;
        // A run killed before its first line (child-crash strikes once the
        // detector's lock is held) ends as a failure, not retried: its due
        // time was run, as its member's log (its start, or its ending) says.
        let run = |d: &u64| starts.contains_key(d) || started.contains(d) || recorded.contains_key(d);
        check.skipped = (first..=last).step_by(period as usize).filter(|d| !run(d)).map(name).collect();
    }
    check
}
