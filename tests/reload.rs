//! A fleet crontab read again (SIGHUP) that changes a job's line: the job
//! runs by its new line from its first due time after the reload, whatever
//! `missed=` says; none of the new line's due times that passed before the
//! reload runs (C-1 of the findings of 2026-11-29: a line changed from
//! every 60 s to every 15 s ran the due times 35 s and 5 s before the
//! reload back to back, and `missed=skip` ran the first of them).

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
    let runs = g.dir.path().join("runs").display().to_string();
    let say = format!("echo \"$NELI_JOB $(date -d \"$NELI_DUE\" +%s%3N) $(date +%s%3N)\" >> {runs}");
    let text = format!("@every {every}  ydef  {say}\n@every {every}  yskip[missed=skip]  {say}\n");
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

#[test]
fn a_line_changed_by_a_reload_runs_from_its_first_due_time_after_it_and_none_before() {
    let g = crate::util::Group::new("reload-line");
    let file = g.dir.path().join("f.crontab");
    write(&g, &file, "20s");
    let argv: Vec<String> = [
        vec!["-b".to_string(), g.broker.address.clone(), "-g".into(), g.name.clone(), "--name".into(), "r1".into()],
        g.broker.timing.args(),
        vec!["--crontab".into(), file.display().to_string()],
    ]
    .concat();
    let mut r1 = crate::util::Member::spawn("r1", &[], &argv, &g.dir.path().join("r1.log"), None);
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
