//! --on-failure and a crontab job's `on-failure=`: run once for each run
//! that fails (by the member that saw it end, told the run's facts), never
//! for one that succeeds or that neli-run itself stopped, and, behind one
//! that hangs, killed at --hook-timeout with one hook per job waiting.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sys::signal::Signal;

use crate::util::{bin, wait_for, wait_until, Group, Member, LONG};

/// A hook line that appends the NELI_ variables it is told, sorted, and a
/// `--` line to `file`: one block per hook run (`blocks`).
fn recording(file: &Path) -> String {
    format!("{{ env | grep '^NELI_' | sort; echo --; }} >> {}", file.display())
}

/// The blocks a `recording` hook wrote to `file`, one per run of it.
fn blocks(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.split("--\n").filter(|b| !b.is_empty()).map(str::to_string).collect()
}

/// The value of `name` in a block, if set.
fn var<'a>(block: &'a str, name: &str) -> Option<&'a str> {
    block.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

/// `neli-run history --json`'s runs of `g` (empty until it answers).
fn history(g: &Group) -> Vec<serde_json::Value> {
    let out = Command::new(bin())
        .args(["history", "-b", &g.broker.address, "-g", &g.name, "--json"])
        .stdin(Stdio::null())
        .output()
        .expect("run neli-run history");
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|v| v["runs"].as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn a_run_that_fails_runs_the_failure_hook_once_with_its_facts_and_one_that_succeeds_none() {
    let g = Group::new("onfail-once");
    let dir = g.dir.path();
    let (failures, exits) = (dir.join("failure.env"), dir.join("exit.env"));
    let hooks = ["--on-failure", &recording(&failures), "--on-exit", &recording(&exits)];
    let mut a = g.member("a", &hooks, &["sh", "-c", "sleep 0.2; exit 3"]);
    // The member exits with the run's status once its hooks are done.
    assert_eq!(a.wait_exit(LONG).code(), Some(3), "{}", a.log());
    let told = blocks(&failures);
    assert_eq!(told.len(), 1, "once per failed run:\n{told:?}\n{}", a.log());
    let block = &told[0];
    let token = g.starts()[0].1.to_string();
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    for (name, value) in [
        ("NELI_HOOK", "failure"),
        ("NELI_REASON", "exited"),
        ("NELI_EXIT_CODE", "3"),
        ("NELI_EXIT_STATUS", "3"),
        ("NELI_FAILURES", "1"),
        ("NELI_FENCING_TOKEN", &token),
        ("NELI_GROUP", &g.name),
        ("NELI_NAME", "a"),
        ("NELI_HOST", &host),
    ] {
        assert_eq!(var(block, name), Some(value), "{name} in:\n{block}");
    }
    assert_eq!(var(block, "NELI_SIGNAL"), None, "{block}");
    // --restart never: the run is a wave's (--once-within), its first attempt.
    assert_eq!(var(block, "NELI_ATTEMPT"), Some("1"), "{block}");
    assert!(var(block, "NELI_WAVE").is_some_and(|w| humantime::parse_rfc3339(w).is_ok()), "{block}");
    assert!(!block.contains("NELI_ON_"), "no setting neli-run read: {block}");
    let ms = var(block, "NELI_DURATION_MS").and_then(|d| d.parse::<u64>().ok()).expect(block);
    assert!((150..LONG.as_millis() as u64).contains(&ms), "it ran 0.2 s: {block}");
    let at = |name| humantime::parse_rfc3339(var(block, name).expect(block)).expect(block);
    assert!(at("NELI_STARTED_AT") < at("NELI_ENDED_AT"), "{block}");
    // NELI_RUN names the run as `neli-run history` shows it, from anywhere.
    let run = var(block, "NELI_RUN").expect(block).to_string();
    let mut runs = Vec::new();
    let listed = wait_for(LONG, || {
        runs = history(&g);
        runs.iter().any(|r| r["run"] == run.as_str() && r["exit_code"] == 3)
    });
    assert!(listed, "history names run {run}: {runs:#?}");

    // A run that exits 0 runs none (its exit hook runs: the hooks work).
    let mut b = g.member("b", &hooks, &["true"]);
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "{}", b.log());
    assert_eq!(blocks(&exits).len(), 2, "both exit hooks ran:\n{}", b.log());
    assert_eq!(blocks(&failures).len(), 1, "no failure hook for a success:\n{}", b.log());
    g.assert_no_overlap();
}

#[test]
fn a_run_neli_run_stops_is_no_failure_and_one_stopped_for_overrunning_is() {
    let g = Group::new("onfail-stopped");
    let dir = g.dir.path();
    let file = |name: &str| dir.join(name);
    let rec = |hook: &str| recording(&dir.join(format!("$NELI_NAME.{hook}.env")));
    let (on_failure, on_exit) = (rec("failure"), rec("exit"));
    let hooks = ["--restart", "always", "--on-failure", &on_failure, "--on-exit", &on_exit];
    let mut a = g.member("a", &hooks, &["sleep", "1000"]);
    wait_until(LONG, "a leads", || g.lock_held());
    let mut b = g.member("b", &hooks, &["sleep", "1000"]);
    // A yield: a's command is stopped (SIGTERM), and b's starts.
    let t = g.broker.timing;
    wait_until(t.takeover(), "status lists b as a standby", || {
        crate::util::standbys(&g).iter().any(|(name, _)| name == "b")
    });
    let timeout = format!("{}ms", t.takeover().as_millis());
    let (code, out) = crate::util::run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", &timeout]);
    assert_eq!(code, 0, "{out}");
    wait_until(t.takeover(), "b leads", || g.starts().len() >= 2 && g.lock_held());
    // A stop: b's command gets SIGTERM. At exit each waits for its hooks.
    for member in [&mut a, &mut b] {
        member.signal(Signal::SIGTERM);
        member.wait_exit(LONG);
    }
    for name in ["a", "b"] {
        let exits = blocks(&file(&format!("{name}.exit.env")));
        assert!(!exits.is_empty() && exits.iter().all(|e| var(e, "NELI_REASON") == Some("stopped")), "{exits:?}");
        assert_eq!(blocks(&file(&format!("{name}.failure.env"))), Vec::<String>::new(), "{name} stopped, not failed");
    }

    // Stopped for running past --max-runtime: it did not finish; a failure.
    let over = ["--max-runtime", "1s", "--on-failure", &on_failure];
    let mut c = g.member_unguarded("c", &over, &["sleep", "1000"]);
    // 143, or 137 if the stop signal took longer than --grace on a loaded machine.
    let code = c.wait_exit(LONG).code();
    assert!(matches!(code, Some(143 | 137)), "{code:?}: {}", c.log());
    let told = blocks(&file("c.failure.env"));
    assert_eq!(told.len(), 1, "{told:?}\n{}", c.log());
    assert_eq!(var(&told[0], "NELI_REASON"), Some("overran"), "{}\n{}", told[0], c.log());
    assert_eq!(var(&told[0], "NELI_EXIT_STATUS"), code.map(|c| c.to_string()).as_deref(), "{}", told[0]);
    g.assert_no_overlap();
}

/// A member of `g` running the crontab `file`, with `extra` flags.
fn cron_member(g: &Group, name: &str, file: &Path, extra: &[&str]) -> Member {
    let argv: Vec<String> = [
        vec!["-b".to_string(), g.broker.address.clone(), "-g".into(), g.name.clone(), "--name".into(), name.into()],
        g.broker.timing.args(),
        vec!["--crontab".into(), file.display().to_string()],
        extra.iter().map(|s| s.to_string()).collect(),
    ]
    .concat();
    Member::spawn(name, &[], &argv, &g.dir.path().join(format!("{name}.log")), None)
}

#[test]
fn a_jobs_own_on_failure_runs_in_place_of_the_flags_and_a_command_not_found_notifies() {
    let g = Group::new("onfail-crontab");
    let dir = g.dir.path();
    // The job's own hook: a script, finding where to write through an
    // assignment above the job (a job's hook gets the job's environment).
    let own = dir.join("own-hook");
    std::fs::write(&own, format!("#!/bin/sh\n{}\n", recording(Path::new("$HOOK_DIR/own.env")))).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
    let crontab = dir.join("fleet.crontab");
    let text = format!(
        "HOOK_DIR={}\n@every 1s own[on-failure={}] exit 4\n@every 1s global exit 5\n\
         @every 1s missing no-such-command-neli-onfail\n@every 1s fine true\n",
        dir.display(),
        own.display()
    );
    std::fs::write(&crontab, text).unwrap();
    // `cron check` shows the job's own; an empty one it refuses.
    let (code, out) = crate::util::run(&["cron", "check", crontab.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("own  (line 2)  @every 1s  UTC\n"), "{out}");
    assert!(out.contains(&format!("  on failure: {}\n", own.display())), "{out}");
    let bad = dir.join("bad.crontab");
    std::fs::write(&bad, "@every 1s own[on-failure=] exit 4\n").unwrap();
    let (code, out) = crate::util::run(&["cron", "check", bad.to_str().unwrap()]);
    assert!(code == 2 && out.contains(":1:15: error: on-failure needs a command"), "{out}");
    let global = recording(&dir.join("global.$NELI_JOB.env"));
    let mut a = cron_member(&g, "a", &crontab, &["--on-failure", &global]);
    let file = |name: &str| dir.join(name);
    wait_until(LONG, "each failing job's hook ran", || {
        [file("own.env"), file("global.global.env"), file("global.missing.env")].iter().all(|f| !blocks(f).is_empty())
    });
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    let own = blocks(&file("own.env"));
    assert!(own.iter().all(|b| var(b, "NELI_JOB") == Some("own") && var(b, "NELI_EXIT_CODE") == Some("4")), "{own:?}");
    assert!(own.iter().all(|b| var(b, "NELI_DUE").is_some() && var(b, "NELI_ATTEMPT") == Some("1")), "{own:?}");
    assert!(!file("global.own.env").exists(), "the job's own replaces --on-failure for it");
    let global = blocks(&file("global.global.env"));
    assert!(global.iter().all(|b| var(b, "NELI_EXIT_CODE") == Some("5")), "{global:?}");
    // A command that cannot start (the shell's 127, not found) failed too.
    let missing = blocks(&file("global.missing.env"));
    assert!(missing.iter().all(|b| var(b, "NELI_EXIT_CODE") == Some("127")), "{missing:?}");
    assert!(!file("global.fine.env").exists(), "a job that succeeds notifies nobody");
}

/// Whether `pid` runs (a zombie does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_failure_hook_that_hangs_is_killed_at_its_timeout_and_failures_meanwhile_queue_one_hook() {
    let g = Group::new("onfail-hang");
    let dir = g.dir.path();
    let (runs, told, hung, sleeper) = (dir.join("runs"), dir.join("told"), dir.join("hung"), dir.join("sleep.pid"));
    // The first hook hangs once three runs have failed, and what it started
    // with it; every hook first says how many failures it stands for.
    let hook = format!(
        "echo $NELI_FAILURES >> {told}; if [ ! -e {hung} ]; then touch {hung}; \
         while [ $(wc -l < {runs}) -lt 3 ]; do sleep 0.05; done; sleep 1000 & echo $! > {sleeper}; wait; fi",
        told = told.display(),
        hung = hung.display(),
        runs = runs.display(),
        sleeper = sleeper.display()
    );
    let flags = ["--restart", "on-failure", "--restart-delay", "50ms", "--hook-timeout", "8s", "--on-failure", &hook];
    let fail = format!("echo run >> {}; exit 3", runs.display());
    let mut a = g.member("a", &flags, &["sh", "-c", &fail]);
    let counts = || -> Vec<u32> {
        std::fs::read_to_string(&told).unwrap_or_default().lines().filter_map(|l| l.parse().ok()).collect()
    };
    wait_until(LONG, "a second failure hook ran", || counts().len() >= 2);
    let log = a.log();
    assert!(log.contains("hook still running after --hook-timeout"), "{log}");
    assert!(log.contains(r#"hook failed hook="failure" status=killed by SIGKILL"#), "{log}");
    assert!(log.contains("failure hook dropped before it started"), "{log}");
    // The first stood for one failure; the next for the two or more that
    // failed while it hung, not one hook each.
    let counts = counts();
    assert_eq!(counts[0], 1, "{counts:?}");
    assert!(counts[1] >= 2, "the failures behind the hung hook queued one hook: {counts:?}\n{log}");
    let pid: i32 = std::fs::read_to_string(&sleeper).unwrap().trim().parse().unwrap();
    wait_until(LONG, "what the hung hook started is gone", || !alive(pid));
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    g.assert_no_overlap();
}

#[test]
fn a_single_leaders_command_that_cannot_start_notifies() {
    // Found at start (neli-run refuses a command it cannot find), gone by
    // its second run: the shim cannot run it (127), and that run failed.
    let g = Group::new("onfail-gone");
    let dir = g.dir.path();
    let (command, failures) = (dir.join("once"), dir.join("failure.env"));
    std::fs::write(&command, "#!/bin/sh\nrm -f \"$0\"\nexit 3\n").unwrap();
    std::fs::set_permissions(&command, std::fs::Permissions::from_mode(0o755)).unwrap();
    let flags = ["--restart", "on-failure", "--restart-delay", "100ms", "--on-failure", &recording(&failures)];
    let mut a = g.member_unguarded("a", &flags, &[command.to_str().unwrap()]);
    wait_until(LONG, "a failure hook told 127", || {
        blocks(&failures).iter().any(|b| var(b, "NELI_EXIT_CODE") == Some("127"))
    });
    let log = a.log();
    assert!(log.contains("status=exit code 3") && log.contains("command not found"), "{log}");
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
}

#[test]
fn each_roles_failed_runs_notify_with_its_role() {
    let g = Group::new("onfail-roles");
    let failures = g.dir.path().join("failure.env");
    let flags = ["--roles", "2", "--restart-delay", "200ms", "--on-failure", &recording(&failures)];
    let mut a = g.member_unguarded("a", &flags, &["sh", "-c", "exit $((3 + NELI_ROLE))"]);
    let roles = || -> Vec<(String, String)> {
        let told = blocks(&failures);
        let of = |b: &String| Some((var(b, "NELI_ROLE")?.to_string(), var(b, "NELI_EXIT_CODE")?.to_string()));
        told.iter().filter_map(of).collect()
    };
    wait_until(LONG, "each role's failure hook ran", || {
        let roles = roles();
        roles.contains(&("0".into(), "3".into())) && roles.contains(&("1".into(), "4".into()))
    });
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    assert!(blocks(&failures).iter().all(|b| var(b, "NELI_ROLES") == Some("2")), "{:?}", blocks(&failures));
}

#[test]
fn a_jobs_on_failure_added_by_a_reload_runs_from_then_on() {
    // A member started with no failure hook at all, and one with
    // --on-failure: the file read again gives the job one of its own, and
    // the job's next failures run it.
    for global in [false, true] {
        let g = Group::new("onfail-reload");
        let dir = g.dir.path();
        let (hook, told, crontab) = (dir.join("hook"), dir.join("told.env"), dir.join("fleet.crontab"));
        std::fs::write(&hook, format!("#!/bin/sh\n{}\n", recording(&told))).unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (runs, flags) = (dir.join("runs"), recording(&dir.join("global.env")));
        let line = |options: &str| format!("@every 1s fails{options} echo run >> {}; exit 6\n", runs.display());
        std::fs::write(&crontab, line("")).unwrap();
        let flags = if global { vec!["--on-failure", &flags] } else { vec![] };
        let mut a = cron_member(&g, "a", &crontab, &flags);
        wait_until(LONG, "the job fails", || match global {
            true => !blocks(&dir.join("global.env")).is_empty(),
            false => std::fs::read_to_string(&runs).is_ok_and(|r| r.lines().count() >= 2),
        });
        assert!(!told.exists(), "not the job's own yet");
        let new = crontab.with_extension("new");
        std::fs::write(&new, line(&format!("[on-failure={}]", hook.display()))).unwrap();
        std::fs::rename(&new, &crontab).unwrap();
        a.signal(Signal::SIGHUP);
        wait_until(LONG, "the job's new hook ran", || !blocks(&told).is_empty());
        a.signal(Signal::SIGTERM);
        a.wait_exit(LONG);
        let told = blocks(&told);
        let fails = |b: &String| var(b, "NELI_JOB") == Some("fails") && var(b, "NELI_EXIT_CODE") == Some("6");
        assert!(told.iter().all(fails), "{told:?}");
    }
}
