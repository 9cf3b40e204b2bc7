//! A fleet crontab read again (SIGHUP) that changes a job's line: the job
//! runs by its new line from its first due time after the reload, whatever
//! `missed=` says; none of the new line's due times that passed before the
//! reload runs (C-1 of the findings of 2026-11-29: a line changed from
//! every 60 s to every 15 s ran the due times 35 s and 5 s before the
//! reload back to back, and `missed=skip` ran the first of them). A member
//! started with the changed file counts the line alike, from its reading
//! of the old line's runs on the topic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::signal::Signal;

/// The wall clock now, in ms since the epoch.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Writes (by a rename, as an editor does) a crontab of two jobs due
/// `every`: `ydef` (`missed=latest`, the default) and `yskip`
/// (`missed=skip`). Each run appends "JOB DUE STARTED" to `runs` (its due
/// time and its start, in ms since the epoch).
fn write(g: &crate::util::Group, file: &std::path::Path, every: &str) {
    write_jobs(g, file, every, ["ydef", "yskip[missed=skip]"]);
}

/// As `write`, the jobs `jobs` (each a name with its options).
fn write_jobs(g: &crate::util::Group, file: &std::path::Path, every: &str, jobs: [&str; 2]) {
    let runs = g.dir.path().join("runs").display().to_string();
    let say = format!("echo \"$NELI_JOB $(date -d \"$NELI_DUE\" +%s%3N) $(date +%s%3N)\" >> {runs}");
    let text: String = jobs.iter().map(|job| format!("@every {every}  {job}  {say}\n")).collect();
    let new = file.with_extension("new");
    std::fs::write(&new, text).unwrap();
    std::fs::rename(&new, file).unwrap();
}

/// The runs so far: (job, due, started), in ms since the epoch.
fn runs(g: &crate::util::Group) -> Vec<(String, u64, u64)> {
    let text = std::fs::read_to_string(g.dir.path().join("runs")).unwrap_or_default();
    text.lines()
        .filter(|line| line.ends_with(|c: char| c.is_ascii_digit()))
        .map(|line| {
            let w: Vec<&str> = line.split(' ').collect();
            assert_eq!(w.len(), 3, "{line}");
            (w[0].to_string(), w[1].parse().unwrap(), w[2].parse().unwrap())
        })
        .collect()
}

/// The due times each job ran, in order.
fn dues(runs: &[(String, u64, u64)], job: &str) -> Vec<u64> {
    runs.iter().filter(|(j, _, _)| j == job).map(|(_, due, _)| *due).collect()
}

/// A member `name` of `g` that runs by the crontab `file`.
fn member(g: &crate::util::Group, name: &str, file: &std::path::Path) -> crate::util::Member {
    let argv: Vec<String> = [
        vec!["-b".to_string(), g.broker.address.clone(), "-g".into(), g.name.clone(), "--name".into(), name.into()],
        g.broker.timing.args(),
        vec!["--crontab".into(), file.display().to_string()],
    ]
    .concat();
    crate::util::Member::spawn(name, &[], &argv, &g.dir.path().join(format!("{name}.log")), None)
}

#[test]
fn a_line_changed_by_a_reload_runs_from_its_first_due_time_after_it_and_none_before() {
    let g = crate::util::Group::new("reload-line");
    let file = g.dir.path().join("f.crontab");
    write(&g, &file, "20s");
    let mut r1 = member(&g, "r1", &file);
    let takeover = g.broker.timing.takeover();

    // Both jobs run once by the old line (every 20 s): at D.
    crate::util::wait_until(takeover + Duration::from_secs(25), "both jobs run", || {
        let runs = runs(&g);
        ["ydef", "yskip"].iter().all(|job| !dues(&runs, job).is_empty())
    });
    let first = runs(&g);
    let d = first.iter().map(|(_, due, _)| *due).max().unwrap();
    // The reload 4.5 s before the old line's next due time (D + 20 s), once
    // the new line's D + 5, D + 10 and D + 15 have passed.
    let reload_at = d + 15_500;
    std::thread::sleep(Duration::from_millis(reload_at.saturating_sub(now_ms())));
    let reload_ms = now_ms();
    write(&g, &file, "5s");
    r1.signal(Signal::SIGHUP);
    crate::util::wait_until(takeover, "the file is read again", || r1.log().contains("crontab read again"));

    // The new line's first due time after the reload is D + 20 s; both run
    // it once, on time, and then D + 25 s.
    crate::util::wait_until(Duration::from_secs(30), "both run D + 25 s", || {
        let runs = runs(&g);
        ["ydef", "yskip"].iter().all(|job| dues(&runs, job).contains(&(d + 25_000)))
    });
    let runs = runs(&g);
    for job in ["ydef", "yskip"] {
        let after: Vec<u64> = dues(&runs, job).into_iter().filter(|&due| due > d).collect();
        assert!(after.iter().all(|&due| due > reload_ms), "{job}: a due time before the reload ran: {runs:?}");
        assert_eq!(after[..2], [d + 20_000, d + 25_000], "{job}: each once, from D + 20 s: {runs:?}");
        let (_, due, started) = runs.iter().find(|(j, due, _)| j == job && *due == d + 20_000).unwrap();
        assert!(started.abs_diff(*due) < 3000, "{job} ran D + 20 s on time, not caught up: {runs:?}");
    }
    r1.signal(Signal::SIGTERM);
    assert!(r1.wait_exit(takeover).success(), "{}", r1.log());
}

/// C-1 for a member started fresh: the file changed while no member ran,
/// and a member started with it reads runs of the old line on the topic.
/// Each run's records name the line it ran by, and the member counts its
/// own from its reading of them, as after a reload: before, `missed=latest`
/// ran the new line's latest due time before the start at once, and
/// `missed=all` each of them.
#[test]
fn a_member_started_with_a_changed_line_runs_none_of_its_due_times_before_it_read_the_old_lines_run() {
    let g = crate::util::Group::new("fresh-line");
    let file = g.dir.path().join("f.crontab");
    let jobs = ["ydef", "yall[missed=all]"];
    write_jobs(&g, &file, "20s", jobs);
    let mut r1 = member(&g, "r1", &file);
    let takeover = g.broker.timing.takeover();

    // Both jobs run once by the old line (every 20 s), at D; r1 stops.
    crate::util::wait_until(takeover + Duration::from_secs(25), "both jobs run", || {
        let runs = runs(&g);
        ["ydef", "yall"].iter().all(|job| !dues(&runs, job).is_empty())
    });
    let d = runs(&g).iter().map(|(_, due, _)| *due).max().unwrap();
    r1.signal(Signal::SIGTERM);
    assert!(r1.wait_exit(takeover).success(), "{}", r1.log());

    // The file says every 5 s; r2 starts with it once the new line's
    // D + 5, D + 10 and D + 15 have passed with no member.
    write_jobs(&g, &file, "5s", jobs);
    std::thread::sleep(Duration::from_millis((d + 15_500).saturating_sub(now_ms())));
    let start_ms = now_ms();
    let mut r2 = member(&g, "r2", &file);
    crate::util::wait_until(takeover + Duration::from_secs(15), "both run twice by the new line", || {
        let runs = runs(&g);
        ["ydef", "yall"].iter().all(|job| dues(&runs, job).iter().filter(|&&due| due > d).count() >= 2)
    });
    let runs = runs(&g);
    for job in ["ydef", "yall"] {
        let after: Vec<u64> = dues(&runs, job).into_iter().filter(|&due| due > d).collect();
        assert!(after.iter().all(|&due| due > start_ms), "{job}: a due time before r2 started ran: {runs:?}");
        assert_eq!(after[1], after[0] + 5000, "{job}: each once, by the new line: {runs:?}");
        let (_, due, started) = runs.iter().find(|(j, due, _)| j == job && *due == after[0]).unwrap();
        assert!(started.abs_diff(*due) < 3000, "{job} ran its first due time on time, not caught up: {runs:?}");
    }
    assert!(r2.log().contains("ran by another line"), "the line change said: {}", r2.log());
    r2.signal(Signal::SIGTERM);
    assert!(r2.wait_exit(takeover).success(), "{}", r2.log());
}
