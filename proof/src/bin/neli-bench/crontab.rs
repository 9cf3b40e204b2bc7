//! A fleet crontab (`neli-run --crontab FILE` on every member), timed:
//!
//! - crontab-lateness: 20 jobs due every second on 3 members, for --idle:
//!   each run's start (the job's own clock, first thing it does) after its
//!   due time (every run is a sample); the jobs each member runs; and,
//!   from the members' start on a new group, every job's first run (a
//!   first deploy: the topic created, the jobs placed, the group joined);
//! - crontab-crash: then kill -9 of one member: for each job it ran, its
//!   first run on another member after its due time (a due time that came
//!   while nobody owned the job is missed, and `missed=latest`, the
//!   default, runs the latest at once: the goal is within S + 1 s), and
//!   how many of the other members' jobs missed a due time meanwhile (the
//!   promise: none moved, so none);
//! - crontab-spread: 50 jobs on 5 members: how many each runs (the goal:
//!   10), and a crash that moves only the crashed member's;
//! - crontab-idle: a member alone with 20 jobs none of which is due, beside
//!   one alone with one such job, measured together over --idle: the cost
//!   of a job a member holds while nothing runs (the goal: under 0.05 % of
//!   a core and 256 KiB each).
//!
//! Each job's run appends "JOB DUE_MS START_MS MEMBER" to the group's
//! `runs` file; the members' logs stay in the bench's work directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use neli_proof::{die_with_runner, wait_for};

use crate::candidates::Contender;
use crate::report::Results;
use crate::Bench;

/// Each job's run: its line in `$1/runs` (the due time and the start, in
/// ms since the epoch), read before anything else.
const JOB: &str = r#"started=$(date +%s%3N)
echo "$NELI_JOB $(date -d "$NELI_DUE" +%s%3N) $started $NELI_NAME" >> "$1/runs""#;

/// The scenarios: members, jobs.
const SHAPES: [(&str, usize, usize); 2] = [("crontab-lateness", 3, 20), ("crontab-spread", 5, 50)];

/// Runs the crontab scenarios asked for against `c` (neli-run only).
pub fn measure(bench: &Bench, c: &Contender, results: &mut Results) {
    if c.is_etcd() {
        return;
    }
    let asked = |s: &str| bench.args.scenarios.iter().any(|a| a == s);
    if asked("crontab-idle") {
        idle(bench, c, results);
    }
    for (scenario, members, jobs) in SHAPES {
        let crash = scenario == "crontab-lateness" && asked("crontab-crash");
        if asked(scenario) || crash {
            fleet(bench, c, results, (scenario, crash), (members, jobs));
        }
    }
}

/// A fleet of `members` members of one crontab of `jobs` jobs.
struct Fleet {
    dir: PathBuf,
    file: PathBuf,
    group: String,
    members: Vec<(String, Child)>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for (_, child) in &mut self.members {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Fleet {
    fn new(bench: &Bench, c: &Contender, scenario: &str, jobs: usize) -> Fleet {
        Fleet::due(bench, c, scenario, jobs, "@every 1s")
    }

    /// A fleet whose jobs are due `when`.
    fn due(bench: &Bench, c: &Contender, scenario: &str, jobs: usize, when: &str) -> Fleet {
        let group = c.new_group();
        let dir = bench.work.join(&group);
        fs::create_dir_all(&dir).expect("the fleet's dir");
        let script = dir.join("job.sh");
        fs::write(&script, JOB).expect("the job's script");
        let width = (jobs - 1).to_string().len();
        let mut text = format!("# neli-bench {scenario}\n");
        for j in 0..jobs {
            text += &format!("{when}  j{j:0width$}  sh {} {}\n", script.display(), dir.display());
        }
        let file = dir.join("fleet.crontab");
        fs::write(&file, text).expect("the crontab");
        Fleet { dir, file, group, members: Vec::new() }
    }

    fn spawn(&mut self, c: &Contender) {
        let name = format!("m{}", self.members.len() + 1);
        let log = fs::File::create(self.dir.join(format!("{name}.log"))).expect("log");
        let mut argv = vec!["-b".to_string(), c.broker.address.clone(), "-g".into(), self.group.clone()];
        argv.extend(["--name".into(), name.clone()]);
        argv.extend(c.timing.iter().cloned());
        argv.extend(["--crontab".into(), self.file.display().to_string()]);
        let child = die_with_runner(&mut Command::new(&c.neli))
            .args(&argv)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start a member");
        self.members.push((name, child));
    }

    /// Every run so far: (job, due ms, start ms, member).
    fn runs(&self) -> Vec<(String, u64, u64, String)> {
        neli_proof::detector::read_lines(&self.dir.join("runs"))
            .iter()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.into(), w.next()?.parse().ok()?, w.next()?.parse().ok()?, w.next()?.into()))
            })
            .collect()
    }

    /// Who ran each job's newest run since run `from`, once every job ran.
    fn owners(&self, from: usize, jobs: usize) -> Option<BTreeMap<String, String>> {
        let owners: BTreeMap<String, String> = self.runs().into_iter().skip(from).map(|r| (r.0, r.3)).collect();
        (owners.len() == jobs).then_some(owners)
    }
}

fn fleet(bench: &Bench, c: &Contender, results: &mut Results, (scenario, crash): (&str, bool), shape: (usize, usize)) {
    let (members, jobs) = shape;
    let cname = c.name;
    let mut f = Fleet::new(bench, c, scenario, jobs);
    let began = wall_ms();
    for _ in 0..members {
        f.spawn(c);
    }
    // Settled: every job ran on a member, spread (no member more than
    // its share), twice in a row.
    let share = jobs.div_ceil(members);
    let spread = |f: &Fleet, from: usize| {
        let owners = f.owners(from, jobs)?;
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for m in owners.values() {
            *per.entry(m.as_str()).or_default() += 1;
        }
        (per.len() == members && per.values().all(|&n| n <= share)).then(|| per.values().copied().collect::<Vec<_>>())
    };
    let within = bench.within * 2;
    let mut from = f.runs().len();
    let settled = wait_for(within, || {
        let now = f.runs().len();
        let ok = spread(&f, from).is_some();
        if !ok && now > from + 4 * jobs {
            from = now - jobs;
        }
        ok
    });
    if !settled {
        results.notes.push(format!("{cname}: {scenario}: the jobs never spread over {members} members"));
        return;
    }
    // A first deploy: the topic created, every job placed, the group
    // joined, and each job's first due time (up to a second away).
    let mut first: BTreeMap<String, u64> = BTreeMap::new();
    for (job, _, started, _) in f.runs() {
        first.entry(job).or_insert(started);
    }
    if let Some(last) = first.values().max() {
        results.add(
            &format!("{scenario} first deploy: every job's first run"),
            cname,
            last.saturating_sub(began) as f64,
        );
    }
    let counts = spread(&f, from).unwrap_or_default();
    for n in &counts {
        results.add(&format!("{scenario} jobs per member (of {jobs} on {members})"), cname, *n as f64);
    }
    // Lateness on a settled fleet, for --idle.
    let start = f.runs().len();
    std::thread::sleep(bench.args.idle.into());
    let runs = f.runs();
    let steady = &runs[start..];
    for (_, due, started, _) in steady {
        results.add(&format!("{scenario} start after due"), cname, started.saturating_sub(*due) as f64);
    }
    // What of it is neli-run's own decision (its log's `late=`), and what
    // starting the shim, the shell and the job's first command.
    for late in decided_late(&f.dir, start_ms(steady)) {
        results.add(&format!("{scenario} start decided after due"), cname, late);
    }
    let twice = steady.len() - steady.iter().map(|(j, d, _, _)| (j, d)).collect::<BTreeSet<_>>().len();
    results.add(&format!("{scenario} due times run twice"), cname, twice as f64);
    eprintln!("neli-bench: {cname}: {scenario}: {} runs, jobs per member {counts:?}", steady.len());
    if crash || scenario == "crontab-spread" {
        crashed(c, results, &mut f, scenario, jobs);
    }
}

/// A member of 20 jobs and one of 1, each alone in its group, none of their
/// jobs ever due (February 29th, midnight): what each used over --idle once
/// both lead every job, and the difference per job beyond the first.
fn idle(bench: &Bench, c: &Contender, results: &mut Results) {
    use crate::scenarios::{idle_usage, Usage};
    let cname = c.name;
    let never = "0 0 29 2 *";
    let (mut one, mut many) =
        (Fleet::due(bench, c, "crontab-idle", 1, never), Fleet::due(bench, c, "crontab-idle", 20, never));
    one.spawn(c);
    many.spawn(c);
    // Leading every job: the log says so once per seat.
    let leads = |f: &Fleet, n: usize| {
        let log = fs::read_to_string(f.dir.join("m1.log")).unwrap_or_default();
        log.matches("leader: read own heartbeat back").count() >= n
    };
    if !wait_for(bench.within, || leads(&one, 1) && leads(&many, 20)) {
        results.notes.push(format!("{cname}: crontab-idle: the members never led every job"));
        return;
    }
    let pid = |f: &Fleet| nix::unistd::Pid::from_raw(f.members[0].1.id() as i32);
    let window: Duration = bench.args.idle.into();
    let used = idle_usage(window, &[pid(&many), pid(&one)]);
    let [twenty, single] = used[..] else { return };
    twenty.add(results, "crontab-idle, 20-job member", cname);
    single.add(results, "crontab-idle, 1-job member", cname);
    let per = |of: fn(&Usage) -> f64| (of(&twenty) - of(&single)) / 19.0;
    let job = Usage { cpu: per(|u| u.cpu), rss: per(|u| u.rss), pss: per(|u| u.pss) };
    job.add(results, "crontab-idle, per job", cname);
    results.add("crontab-idle, per job cpu%", cname, job.cpu / window.as_secs_f64() * 100.0);
}

/// The wall clock, in ms since the epoch (as the jobs write it).
fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The wall-clock ms of the first of `runs`.
fn start_ms(runs: &[(String, u64, u64, String)]) -> u64 {
    runs.iter().map(|r| r.2).min().unwrap_or(u64::MAX)
}

/// How late after its due time each member decided to start each run it
/// started from `from_ms` on (its log's `late=`), in ms.
fn decided_late(dir: &std::path::Path, from_ms: u64) -> Vec<f64> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|e| e != "log") {
            continue;
        }
        for line in fs::read_to_string(entry.path()).unwrap_or_default().lines() {
            let Some(rest) = line
                .split_once("naming the run of a due time on the topic; its command starts once that is read back ")
                .map(|(_, r)| r)
            else {
                continue;
            };
            let field = |k: &str| rest.split_whitespace().find_map(|w| w.strip_prefix(k).map(str::to_string));
            let (Some(due), Some(late)) = (field("due_ms="), field("late=")) else { continue };
            let Ok(due) = due.parse::<u64>() else { continue };
            if due + 1000 < from_ms {
                continue;
            }
            if let Ok(late) = humantime::parse_duration(&late) {
                out.push(late.as_secs_f64() * 1000.0);
            }
        }
    }
    out
}

/// kill -9 of the first member: its jobs' first runs elsewhere after their
/// due times, and the other members' jobs' due times missed meanwhile.
fn crashed(c: &Contender, results: &mut Results, f: &mut Fleet, scenario: &str, jobs: usize) {
    let cname = c.name;
    let label = if scenario == "crontab-spread" { "crontab-spread crash" } else { "crontab-crash" };
    let runs = f.runs();
    let owners: BTreeMap<String, String> = runs.iter().map(|r| (r.0.clone(), r.3.clone())).collect();
    let (victim, mut child) = f.members.remove(0);
    let theirs: BTreeSet<&String> = owners.iter().filter(|(_, m)| **m == victim).map(|(j, _)| j).collect();
    let killed_ms = wall_ms();
    let _ = child.kill();
    let _ = child.wait();
    let at = runs.len();
    // Every job of the victim's ran elsewhere, then two more seconds.
    let moved = wait_for(c.session * 3 + Duration::from_secs(10), || {
        let after = f.runs();
        theirs.iter().all(|j| after[at..].iter().any(|r| &&r.0 == j && r.3 != victim))
    });
    if !moved {
        results.notes.push(format!("{cname}: {label}: {victim}'s jobs did not all run elsewhere"));
        return;
    }
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = f.runs();
    let after = &after[at..];
    let mut worst: f64 = 0.0;
    // The first due time the victim did not run: due after the kill.
    let missed = (killed_ms / 1000 + 1) * 1000;
    for j in &theirs {
        // The first run elsewhere: of the latest due time missed (late by
        // less than a period), and how long after the first one missed.
        let first = after.iter().find(|r| &&r.0 == j && r.3 != victim).expect("moved");
        let late = first.2.saturating_sub(first.1) as f64;
        worst = worst.max(late);
        results.add(&format!("{label} start after due"), cname, late);
        results.add(
            &format!("{label} start after the first due time missed"),
            cname,
            first.2.saturating_sub(missed) as f64,
        );
    }
    // The other members' jobs: a due time skipped while the victim's moved.
    let mut skipped = 0;
    for j in owners.iter().filter(|(_, m)| **m != victim).map(|(j, _)| j) {
        let dues: Vec<u64> = after.iter().filter(|r| &r.0 == j).map(|r| r.1).collect();
        skipped += dues.windows(2).filter(|w| w[1] > w[0] + 1000).count();
        let stayed = after.iter().filter(|r| &r.0 == j).all(|r| r.3 == owners[j]);
        results.add(&format!("{label} other jobs moved"), cname, f64::from(u8::from(!stayed)));
    }
    results.add(&format!("{label} other jobs' due times skipped"), cname, skipped as f64);
    let twice = after.len() - after.iter().map(|r| (&r.0, r.1)).collect::<BTreeSet<_>>().len();
    results.add(&format!("{label} due times run twice"), cname, twice as f64);
    eprintln!(
        "neli-bench: {cname}: {label}: {} of {jobs} jobs moved off {victim} (killed at {killed_ms}), the latest \
         {worst:.0} ms after its due time; {skipped} due times of the others skipped",
        theirs.len()
    );
}
