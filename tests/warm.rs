//! --warm: the command runs on every member and is told when it leads
//! (--lead-signal, the token in $NELI_TOKEN_FILE) and when it no longer
//! does (--unlead-signal, the file emptied first). Each member's command is
//! a script that writes what it is told to one shared file: appends, in the
//! order they happen.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{run, stays_false, wait_until, Group, Member, LONG};

/// One line of the shared file: who, what, the token file's content then,
/// and the script's pid.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    name: String,
    what: String,
    token: String,
    pid: i32,
}

/// Everything the scripts wrote so far, in order.
fn seen(events: &Path) -> Vec<Seen> {
    let text = std::fs::read_to_string(events).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let token = f.get(3)?.trim_start_matches('[').trim_end_matches(']').to_string();
            Some(Seen { name: f[1].into(), what: f[2].into(), token, pid: f.get(4)?.parse().ok()? })
        })
        .collect()
}

/// The warm command of the docs' example, reporting to `events`: it sets
/// its traps first, reads the token file at start and on each signal, and
/// exits 0 on SIGTERM, or once a file quit-<name> appears. No command
/// substitution (`$(...)`): bash 5.2 fails to parse one in a trap that runs
/// while it parses another ("unexpected EOF while looking for matching
/// `)'"), as when the lead signal comes while the script starts.
fn script(g: &Group) -> String {
    script_setting_up(g, "warm.sh", ":")
}

/// `script`, named `name`, that first runs `set_up` (a command that takes
/// a while): a signal then would find no trap, and kill it.
fn script_setting_up(g: &Group, name: &str, set_up: &str) -> String {
    let (dir, events) = (g.dir.path().display(), g.dir.path().join("events"));
    let path = g.dir.path().join(name);
    std::fs::write(
        &path,
        format!(
            r#"#!/bin/bash
{set_up}
ev() {{ local token=; read -r token < "$NELI_TOKEN_FILE"; echo "$EPOCHREALTIME $NELI_NAME $1 [$token] $$" >> {events}; }}
trap 'ev lead' USR1
trap 'ev unlead' USR2
trap 'ev stop; exit 0' TERM
ev start
while :; do
  [ -e {dir}/quit-$NELI_NAME ] && {{ ev quit; exit 0; }}
  sleep 0.05 & wait $!
done
"#,
            events = events.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn warm(g: &Group, name: &str, script: &str, extra: &[&str]) -> Member {
    let args: Vec<&str> =
        ["--warm", "--restart", "on-failure", "--restart-delay", "200ms"].iter().chain(extra).copied().collect();
    g.member_unguarded(name, &args, &[script])
}

/// Whether `pid` runs (a zombie does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// The token the log of `m` says it leads under, the newest.
fn led_token(m: &Member) -> Option<String> {
    let log = m.log();
    let line = log.lines().rev().find(|l| l.contains("leading: token file written"))?;
    Some(line.split("token=").nth(1)?.split_whitespace().next()?.to_string())
}

#[test]
fn every_member_runs_the_command_only_the_leader_is_told_and_a_handover_unleads_before_it_leads() {
    let g = Group::new("warm-handover");
    let script = script(&g);
    let events = g.dir.path().join("events");
    // A token file's directory of an earlier process whose pid a member
    // now has (one killed by another test leaves its own) is older.
    let began = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    let mut members: Vec<Member> = ["a", "b", "c"].iter().map(|n| warm(&g, n, &script, &[])).collect();
    wait_until(LONG, "all three commands run", || seen(&events).iter().filter(|s| s.what == "start").count() == 3);
    wait_until(LONG, "one is told it leads", || seen(&events).iter().any(|s| s.what == "lead"));
    let first = seen(&events).into_iter().find(|s| s.what == "lead").unwrap();
    let leader = members.iter().position(|m| m.name == first.name).unwrap();
    assert_eq!(Some(first.token.clone()), led_token(&members[leader]), "the token its log names");
    assert!(first.token.parse::<i64>().is_ok(), "{first:?}");
    // Each started as a standby's, the token file empty; the first member
    // leads within milliseconds, so its command may read its token at
    // start (the lead signal waits for its set-up, and comes all the same).
    let leaders = |s: &Seen| s.name == first.name && s.token == first.token;
    let mut starts = seen(&events).into_iter().filter(|s| s.what == "start");
    assert!(starts.all(|s| s.token.is_empty() || leaders(&s)), "{:?}", seen(&events));

    // A graceful handover: the old leader's command is told first, with
    // the file already empty, then another's is told it leads. (A plain
    // yield needs a standby to hand over to.)
    wait_until(LONG, "a standby", || members.iter().any(|m| m.joined_as_standby()));
    let t = g.broker.timing;
    let timeout = format!("{}ms", t.takeover().as_millis());
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", &timeout]);
    assert_eq!(code, 0, "{out}");
    wait_until(t.takeover(), "another is told it leads", || {
        seen(&events).iter().filter(|s| s.what == "lead").count() == 2
    });
    let all = seen(&events);
    let unlead = all.iter().position(|s| s.what == "unlead").expect("the old leader's command was told");
    let second = all.iter().rposition(|s| s.what == "lead").unwrap();
    assert!(unlead < second, "unlead before the next lead: {all:#?}");
    assert_eq!(all[unlead].name, first.name);
    assert_eq!(all[unlead].token, "", "the token file is emptied before the unlead signal");
    assert_ne!(all[second].name, first.name);
    assert!(all[second].token.parse::<i64>().unwrap() > first.token.parse::<i64>().unwrap(), "{all:#?}");
    // Exactly two leads and one unlead, and the commands never restarted.
    assert_eq!(all.iter().filter(|s| s.what == "lead").count(), 2, "{all:#?}");
    assert_eq!(all.iter().filter(|s| s.what == "start").count(), 3, "{all:#?}");

    // SIGTERM: every command gets the stop signal and nothing is left.
    let pids: Vec<i32> = all.iter().filter(|s| s.what == "start").map(|s| s.pid).collect();
    let token_dirs = |m: &Member| -> Vec<std::path::PathBuf> {
        let prefix = format!("neli-run-warm.{}.", m.pid());
        let entries = std::fs::read_dir(std::env::temp_dir()).unwrap().flatten();
        let ours = |e: &std::fs::DirEntry| e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t >= began);
        entries.filter(|e| e.file_name().to_string_lossy().starts_with(&prefix) && ours(e)).map(|e| e.path()).collect()
    };
    assert!(members.iter().all(|m| token_dirs(m).len() == 1), "each member's token file's directory");
    for m in &members {
        m.signal(Signal::SIGTERM);
    }
    for m in members.iter_mut() {
        assert_eq!(m.wait_exit(LONG).code(), Some(0), "the command's status:\n{}", m.log());
        assert_eq!(token_dirs(m), Vec::<std::path::PathBuf>::new(), "removed at exit");
    }
    assert_eq!(seen(&events).iter().filter(|s| s.what == "stop").count(), 3, "{:#?}", seen(&events));
    wait_until(Duration::from_secs(5), "no command is left", || pids.iter().all(|&p| !alive(p)));
}

/// A command that takes a while to set up before its traps, as the first
/// and only member: it leads within milliseconds of its start, before its
/// traps are set, and the lead signal waits for its set-up (`SET_UP`)
/// rather than kill it. It learns that it leads: from the file, once the
/// traps are set, and from the lead signal.
#[test]
fn a_command_still_setting_up_when_its_member_leads_is_told_once_set_up_not_killed() {
    let g = Group::new("warm-set-up");
    let script = script_setting_up(&g, "slow.sh", "sleep 0.3");
    let events = g.dir.path().join("events");
    let count = |what: &str| seen(&events).iter().filter(|s| s.what == what).count();
    let mut a = warm(&g, "a", &script, &[]);
    wait_until(LONG, "a leads", || led_token(&a).is_some());
    let token = led_token(&a).unwrap();
    wait_until(LONG, "a's command is told it leads", || count("lead") == 1);
    let all = seen(&events);
    let lead = all.iter().find(|s| s.what == "lead").unwrap();
    assert_eq!(lead.token, token, "the file holds the token when the signal comes: {all:#?}");
    assert_eq!(count("start"), 1, "never killed nor started again: {all:#?}\n{}", a.log());
    assert!(!a.log().contains("child exited"), "{}", a.log());
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(LONG).code(), Some(0), "{}", a.log());
    assert_eq!(count("stop"), 1, "{:#?}", seen(&events));
}

#[test]
fn a_standbys_command_that_dies_is_restarted_and_the_leaders_follows_restart() {
    let g = Group::new("warm-restart");
    let script = script(&g);
    let events = g.dir.path().join("events");
    let count = |what: &str, name: &str| seen(&events).iter().filter(|s| s.what == what && s.name == name).count();
    // --on-exit is told of the leader's runs only, a standby's command being no run.
    let exits = |name: &str| std::fs::read_to_string(g.dir.path().join(format!("{name}.exits"))).unwrap_or_default();
    let hook = format!("echo $NELI_REASON $NELI_EXIT_STATUS >> {}/$NELI_NAME.exits", g.dir.path().display());
    // --on-failure, of the leader's run killed by a signal neli-run did not send.
    let failures =
        |name: &str| std::fs::read_to_string(g.dir.path().join(format!("{name}.failures"))).unwrap_or_default();
    let failed = format!("echo $NELI_REASON $NELI_SIGNAL >> {}/$NELI_NAME.failures", g.dir.path().display());
    let hooks = ["--on-exit", &hook, "--on-failure", &failed];
    let mut a = warm(&g, "a", &script, &hooks);
    wait_until(LONG, "a's command is told it leads", || count("lead", "a") == 1);
    let mut b = warm(&g, "b", &script, &hooks);
    wait_until(LONG, "b's command runs", || count("start", "b") == 1);
    wait_until(LONG, "b is a standby", || b.joined_as_standby());

    // The standby's command, killed, starts again (an empty token file).
    let pid_of = |name: &str| seen(&events).iter().rev().find(|s| s.what == "start" && s.name == name).unwrap().pid;
    let old = pid_of("b");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(old), Signal::SIGKILL).unwrap();
    wait_until(LONG, "b's command starts again", || count("start", "b") == 2);
    assert_ne!(pid_of("b"), old);
    assert!(b.log().contains("the standby's command exited; restarting it"), "{}", b.log());

    // The leader's command, killed, is the run failing: --restart
    // on-failure starts it again, still leading, the token in the file.
    let token = seen(&events).into_iter().find(|s| s.what == "lead").unwrap().token;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid_of("a")), Signal::SIGKILL).unwrap();
    wait_until(LONG, "a's command starts again", || count("start", "a") == 2);
    let again = seen(&events).into_iter().rev().find(|s| s.what == "start" && s.name == "a").unwrap();
    assert_eq!(again.token, token, "started as the leader's: it reads its token at start");
    assert!(a.log().contains("restarting the child (--restart)"), "{}", a.log());

    // The leader's run ends with 0: on-failure ends a's part; b leads.
    std::fs::write(g.dir.path().join("quit-a"), "").unwrap();
    assert_eq!(a.wait_exit(LONG).code(), Some(0), "{}", a.log());
    wait_until(g.broker.timing.takeover(), "b's command is told it leads", || count("lead", "b") == 1);
    assert_eq!(count("start", "b"), 2, "b's command kept running");
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "{}", b.log());
    let pids: Vec<i32> = seen(&events).iter().map(|s| s.pid).collect();
    wait_until(Duration::from_secs(5), "no command is left", || pids.iter().all(|&p| !alive(p)));
    assert_eq!((exits("a"), exits("b")), ("exited 137\nexited 0\n".into(), "stopped 0\n".into()));
    assert_eq!((failures("a"), failures("b")), ("exited SIGKILL\n".into(), String::new()));
}

#[test]
fn a_frozen_leader_has_its_warm_command_killed_by_the_shim_and_a_frozen_standby_keeps_its_own() {
    let g = Group::new("warm-fence");
    let script = script(&g);
    let events = g.dir.path().join("events");
    let count = |what: &str, name: &str| seen(&events).iter().filter(|s| s.what == what && s.name == name).count();
    let pid_of = |name: &str| seen(&events).iter().rev().find(|s| s.what == "start" && s.name == name).unwrap().pid;
    let a = warm(&g, "a", &script, &[]);
    wait_until(LONG, "a's command is told it leads", || count("lead", "a") == 1);
    let b = warm(&g, "b", &script, &[]);
    wait_until(LONG, "b is a standby", || count("start", "b") == 1 && b.joined_as_standby());
    let (pa, pb) = (pid_of("a"), pid_of("b"));
    // Frozen, neither renews a lease: the leader's command is fenced by its
    // shim at the heartbeat deadline; the standby's has no lease to lose.
    b.signal(Signal::SIGSTOP);
    a.signal(Signal::SIGSTOP);
    let deadline = g.broker.timing.deadline;
    wait_until(deadline + Duration::from_secs(10), "a's command is fenced", || !alive(pa));
    assert!(alive(pb), "the standby's command runs on");
    b.signal(Signal::SIGCONT);
    a.signal(Signal::SIGCONT);
    // Thawed, a's command starts again (a standby's, or the leader's if a
    // still owns partition 0), and b's ran throughout.
    wait_until(g.broker.timing.takeover(), "a's command starts again", || count("start", "a") == 2);
    assert!(alive(pb) && count("start", "b") == 1, "{:#?}", seen(&events));
    // On the record: a's run ended with the fence's kill.
    let runs = crate::history::wait_runs(&g, &[], "a's run ended", |runs| {
        runs.first().is_some_and(|r| r["member"] == "a" && r["state"] == "ended")
    });
    assert_eq!((runs[0]["signal"].as_i64(), runs[0]["warm"].as_bool()), (Some(9), Some(true)), "{runs:#?}");
    for mut m in [a, b] {
        m.signal(Signal::SIGTERM);
        assert_eq!(m.wait_exit(LONG).code(), Some(0), "{}", m.log());
    }
    let pids: Vec<i32> = seen(&events).iter().map(|s| s.pid).collect();
    wait_until(Duration::from_secs(5), "no command is left", || pids.iter().all(|&p| !alive(p)));
}

/// The docs' example script, as a user pastes it, in the group's
/// directory: its path.
fn docs_example(g: &Group) -> String {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md")).unwrap();
    let start = docs.find("#!/bin/bash\n# /usr/local/bin/billing-warm").expect("the example in docs/operations.md");
    let example = &docs[start..start + docs[start..].find("```").unwrap()];
    let path = g.dir.path().join("billing-warm");
    std::fs::write(&path, example).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// The docs' example script: two members hand over with a yield, and stop
/// on SIGTERM.
#[test]
fn the_docs_example_leads_stands_by_and_stops() {
    let g = Group::new("warm-docs");
    let path = docs_example(&g);
    let mut members = [warm(&g, "a", &path, &[]), warm(&g, "b", &path, &[])];
    let leads = |m: &Member| m.log().matches("leading, token").count();
    wait_until(LONG, "one leads", || members.iter().map(leads).sum::<usize>() == 1);
    let first = members.iter().position(|m| leads(m) == 1).unwrap();
    wait_until(LONG, "both warmed up", || members.iter().all(|m| m.log().contains("warming up")));
    wait_until(LONG, "the other is a standby", || members[1 - first].joined_as_standby());
    let timeout = format!("{}ms", g.broker.timing.takeover().as_millis());
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", &timeout]);
    assert_eq!(code, 0, "{out}");
    wait_until(g.broker.timing.takeover(), "the other leads", || leads(&members[1 - first]) == 1);
    assert!(members[first].log().contains("standing by"), "{}", members[first].log());
    for m in members.iter_mut() {
        m.signal(Signal::SIGTERM);
        assert_eq!(m.wait_exit(LONG).code(), Some(0), "{}", m.log());
        assert!(m.log().contains("stopping"), "{}", m.log());
    }
}

/// A command that ignores the stop signal: SIGTERM to a standby and to the
/// leader each ends in SIGKILL after --grace, and nothing is left.
#[test]
fn sigterm_kills_a_warm_command_that_ignores_it_after_grace_on_a_standby_and_a_leader() {
    let g = Group::new("warm-grace");
    let pids = g.dir.path().join("pids");
    let script =
        format!("trap '' TERM USR1 USR2; echo $NELI_NAME $$ >> {}; while :; do sleep 0.05; done", pids.display());
    let pid_of = |name: &str| -> Option<i32> {
        let text = std::fs::read_to_string(&pids).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
    };
    let args = ["--warm", "--restart", "always", "--grace", "1s"];
    let mut a = g.member_unguarded("a", &args, &["bash", "-c", &script]);
    wait_until(LONG, "a leads", || a.log().contains("leading: token file written"));
    let mut b = g.member_unguarded("b", &args, &["bash", "-c", &script]);
    wait_until(LONG, "b is a standby with its command", || b.joined_as_standby() && pid_of("b").is_some());
    for (m, name) in [(&mut b, "b"), (&mut a, "a")] {
        let pid = pid_of(name).unwrap();
        m.signal(Signal::SIGTERM);
        assert_eq!(m.wait_exit(LONG).code(), Some(137), "killed after --grace:\n{}", m.log());
        assert!(m.log().contains("grace"), "{}", m.log());
        wait_until(Duration::from_secs(5), "its command is gone", || !alive(pid));
    }
}

/// `pause --stop` unleads the warm command and leaves it running; `resume`
/// tells it to lead again.
#[test]
fn pause_stop_unleads_the_warm_command_and_resume_leads_it_again() {
    let g = Group::new("warm-pause");
    let script = script(&g);
    let events = g.dir.path().join("events");
    let count = |what: &str| seen(&events).iter().filter(|s| s.what == what).count();
    let mut a = warm(&g, "a", &script, &[]);
    wait_until(LONG, "a's command is told it leads", || count("lead") == 1);
    let ask = |what: &str, extra: &[&str]| {
        let mut args = vec![what, "-b", &g.broker.address, "-g", &g.name, "--timeout", "30s"];
        args.extend(extra);
        run(&args)
    };
    let (code, out) = ask("pause", &["--stop"]);
    assert_eq!(code, 0, "{out}");
    // Acknowledged once told: the script notes it a moment later.
    wait_until(LONG, "a's command is told it no longer leads", || count("unlead") == 1);
    let all = seen(&events);
    assert_eq!(all.last().map(|s| s.token.as_str()), Some(""), "{all:#?}");
    let (code, out) = ask("resume", &[]);
    assert_eq!(code, 0, "{out}");
    wait_until(LONG, "a's command is told it leads again", || count("lead") == 2);
    let all = seen(&events);
    assert!(all.last().unwrap().token.parse::<i64>().is_ok(), "{all:#?}");
    assert_eq!(count("start"), 1, "the command ran throughout: {all:#?}");
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(LONG).code(), Some(0), "{}", a.log());
}

/// A warm member (as `warm` starts one) whose writes of files wait while
/// `hold` exists: a hung file system (NELI_TEST_HOLD_WRITES, debug builds).
fn warm_holding(g: &Group, name: &str, script: &str, hold: &Path, restart_delay: &str) -> Member {
    let mut argv: Vec<String> = ["-b", &g.broker.address, "-g", &g.name, "--name", name].map(String::from).to_vec();
    argv.extend(g.broker.timing.args());
    argv.extend(
        ["--warm", "--restart", "on-failure", "--restart-delay", restart_delay, "--", script].map(String::from),
    );
    let prefix = ["env".to_string(), format!("NELI_TEST_HOLD_WRITES={}", hold.display())];
    Member::spawn(name, &prefix, &argv, &g.dir.path().join(format!("{name}.log")), None)
}

/// Removes what a member that exited while a write hung left of its token
/// file: its private directory.
fn remove_token_dirs(m: &Member) {
    let prefix = format!("neli-run-warm.{}.", m.pid());
    for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A write of the token file that hangs (a hung $RUNTIME_DIRECTORY or
/// /tmp) holds back the lead signal (the command is told only once the
/// file holds the token), and not the loop: SIGTERM still stops the
/// command and neli-run, while the file's last write still hangs.
#[test]
fn a_token_file_write_that_hangs_holds_back_the_lead_signal_and_not_the_loop() {
    let g = Group::new("warm-hung-write");
    let script = script(&g);
    let events = g.dir.path().join("events");
    let count = |what: &str| seen(&events).iter().filter(|s| s.what == what).count();
    let hold = g.dir.path().join("hold");
    std::fs::write(&hold, "").unwrap();
    let mut a = warm_holding(&g, "a", &script, &hold, "200ms");
    wait_until(LONG, "a's command runs", || count("start") == 1);
    wait_until(LONG, "a leads and its token's write hangs", || a.log().contains("TEST BUILD: holding a write"));
    std::fs::remove_file(&hold).unwrap();
    wait_until(LONG, "a's command is told it leads", || count("lead") >= 1);
    let lead = seen(&events).into_iter().find(|s| s.what == "lead").unwrap();
    assert!(lead.token.parse::<i64>().is_ok(), "told before the file held the token: {lead:?}");
    // The file system hangs again.
    std::fs::write(&hold, "").unwrap();
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(LONG).code(), Some(0), "{}", a.log());
    assert_eq!(count("stop"), 1, "{:#?}", seen(&events));
    assert!(a.log().contains("was not removed in time"), "{}", a.log());
    remove_token_dirs(&a);
    let pids: Vec<i32> = seen(&events).iter().map(|s| s.pid).collect();
    wait_until(Duration::from_secs(5), "no command is left", || pids.iter().all(|&p| !alive(p)));
}

/// The command's lease is the leader's before the token file is written:
/// a neli-run frozen while the write is under way (here: while it hangs)
/// has its command killed by the shim, as any frozen leader's. Were the
/// file written first, the command would read itself leader with a
/// standby's lease, which never runs out.
#[test]
fn a_leader_frozen_while_its_token_file_is_written_has_its_command_fenced() {
    let g = Group::new("warm-frozen-write");
    let script = script(&g);
    let events = g.dir.path().join("events");
    let hold = g.dir.path().join("hold");
    std::fs::write(&hold, "").unwrap();
    let mut a = warm_holding(&g, "a", &script, &hold, "200ms");
    wait_until(LONG, "a's command runs", || seen(&events).iter().any(|s| s.what == "start"));
    let pid = seen(&events)[0].pid;
    wait_until(LONG, "a leads and its token's write hangs", || a.log().contains("TEST BUILD: holding a write"));
    a.signal(Signal::SIGSTOP);
    let deadline = g.broker.timing.deadline;
    wait_until(deadline + Duration::from_secs(10), "a's command is fenced by its lease", || !alive(pid));
    a.signal(Signal::SIGCONT);
    std::fs::remove_file(&hold).unwrap();
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    let pids: Vec<i32> = seen(&events).iter().map(|s| s.pid).collect();
    wait_until(Duration::from_secs(5), "no command is left", || pids.iter().all(|&p| !alive(p)));
}

/// A member that comes to lead while its command is not running (dead,
/// its restart not due) starts it once the token file is written, under
/// the newest lease: not the one it was granted when it came to lead,
/// which ran out while the write hung.
#[test]
fn a_command_started_once_its_token_file_is_written_runs_under_the_newest_lease() {
    let g = Group::new("warm-late-start");
    let script = script(&g);
    let events = g.dir.path().join("events");
    let count = |what: &str, name: &str| seen(&events).iter().filter(|s| s.what == what && s.name == name).count();
    let b = warm(&g, "b", &script, &[]);
    wait_until(LONG, "b's command is told it leads", || count("lead", "b") == 1);
    let hold = g.dir.path().join("hold");
    let mut a = warm_holding(&g, "a", &script, &hold, "1h");
    wait_until(LONG, "a is a standby with its command", || count("start", "a") == 1 && a.joined_as_standby());
    let first = seen(&events).into_iter().find(|s| s.what == "start" && s.name == "a").unwrap().pid;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first), Signal::SIGKILL).unwrap();
    wait_until(LONG, "a's command is dead, its restart an hour away", || a.log().contains("restarting it"));
    std::fs::write(&hold, "").unwrap();
    b.signal(Signal::SIGTERM);
    wait_until(g.broker.timing.takeover(), "a leads, its token's write hangs", || {
        a.log().contains("TEST BUILD: holding a write")
    });
    // The lease a was granted on coming to lead runs out meanwhile (the
    // loop renews it every heartbeat).
    std::thread::sleep(g.broker.timing.deadline * 2);
    std::fs::remove_file(&hold).unwrap();
    wait_until(LONG, "a's command starts, reading its token", || count("start", "a") == 2);
    let started = seen(&events).into_iter().rev().find(|s| s.what == "start" && s.name == "a").unwrap();
    assert!(started.token.parse::<i64>().is_ok(), "{started:?}");
    let deadline = g.broker.timing.deadline;
    assert!(stays_false(deadline, || !alive(started.pid)), "killed by its lease at start:\n{}", a.log());
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(LONG).code(), Some(0), "{}", a.log());
}

/// A standby's command that keeps failing backs off as a leader's does:
/// the wait doubles from --restart-delay, each longer wait said once (the
/// restart policy is decided in one place, `Backoff::after`; before, a
/// warm standby's `false` was started again every --restart-delay, for
/// ever).
#[test]
fn a_warm_standbys_command_that_keeps_failing_backs_off() {
    let g = Group::new("warm-backoff");
    let script = script(&g);
    let events = g.dir.path().join("events");
    let mut a = warm(&g, "a", &script, &[]);
    wait_until(LONG, "a's command is told it leads", || seen(&events).iter().any(|s| s.what == "lead"));
    let mut b = g.member_unguarded("b", &["--warm", "--restart", "on-failure", "--restart-delay", "0"], &["false"]);
    let counts = |log: &str| -> Vec<u32> {
        let said = log.lines().filter(|l| l.contains("the standby's command keeps failing: backing off"));
        said.filter_map(|l| l.split("failed_runs=").nth(1)?.split(' ').next()?.parse().ok()).collect()
    };
    // Waits 0, 0.2, 0.4, 0.8 and 1.6 s: the sixth failure about 3 s in;
    // the bound is for a loaded machine.
    wait_until(Duration::from_secs(40), "the standby's sixth failed run in a row", || counts(&b.log()).contains(&6));
    assert_eq!(counts(&b.log())[..5], [2, 3, 4, 5, 6], "each longer wait said once, in order\n{}", b.log());
    assert!(b.log().contains("delay=3.2s"), "{}", b.log());
    assert!(!b.exited(), "on-failure goes on\n{}", b.log());
    b.signal(Signal::SIGTERM);
    b.wait_exit(LONG);
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
}

/// Each time a warm command leads is a run on the record, read by `history`
/// from another process: who led, under which token, and how it ended. The
/// first leader's ends with the unlead signal at a yield (its command runs
/// on); the second's with its command's exit at SIGTERM, the tail of that
/// command's output kept for `logs`.
#[test]
fn each_time_a_warm_command_leads_is_a_run_in_history_with_how_it_ended() {
    use crate::history::{history, wait_runs};
    let g = Group::new("warm-history");
    let path = docs_example(&g);
    let mut members = [warm(&g, "a", &path, &[]), warm(&g, "b", &path, &[])];
    let leads = |m: &Member| m.log().matches("leading, token").count();
    wait_until(LONG, "one leads", || members.iter().map(leads).sum::<usize>() == 1);
    let first = members.iter().position(|m| leads(m) == 1).unwrap();
    let told = |m: &Member| {
        let log = m.log();
        let line = log.lines().find(|l| l.contains("leading, token")).map(str::to_string).unwrap_or_default();
        line.rsplit(' ').next().and_then(|t| t.parse::<i64>().ok()).unwrap_or_else(|| panic!("a token: {log}"))
    };
    let token = told(&members[first]);
    wait_until(LONG, "the other is a standby", || members[1 - first].joined_as_standby());
    let timeout = format!("{}ms", g.broker.timing.takeover().as_millis());
    let (code, out) = run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", &timeout]);
    assert_eq!(code, 0, "{out}");
    wait_until(g.broker.timing.takeover(), "the other leads", || leads(&members[1 - first]) == 1);
    let (a, b) = (&members[first], &members[1 - first]);
    let runs = wait_runs(&g, &[], "the first leader's run ended, the second's running", |runs| {
        runs.len() == 2 && runs[0]["state"] == "ended" && runs[1]["state"] == "running"
    });
    let who: Vec<(&str, i64, bool)> =
        runs.iter().map(|r| (r["member"].as_str().unwrap(), r["token"].as_i64().unwrap(), r["warm"] == true)).collect();
    assert_eq!(who, [(a.name.as_str(), token, true), (b.name.as_str(), told(b), true)], "{runs:#?}");
    assert!(told(b) > token, "{runs:#?}");
    let unled = &runs[0];
    assert_eq!(unled["unlead"], true, "ended by the unlead signal: {unled}");
    assert!(unled["exit_code"].is_null() && unled["signal"].is_null(), "its command runs on: {unled}");
    assert!(unled["output_bytes"].is_null(), "its command's output is its exit's: {unled}");
    let (code, out, err) = history(&g, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.lines().nth(1).is_some_and(|l| l.contains(&format!(" {}@", a.name)) && l.contains(" unlead ")),
        "{out}"
    );

    // The standby stops (it leads nothing: no run), then the leader: its
    // command exits 0 at the stop signal, and its run ends so.
    let b_token = told(b);
    for i in [first, 1 - first] {
        members[i].signal(Signal::SIGTERM);
        assert_eq!(members[i].wait_exit(LONG).code(), Some(0), "{}", members[i].log());
    }
    let b = &members[1 - first];
    let runs =
        wait_runs(&g, &[], "the second leader's run ended", |runs| runs.last().is_some_and(|r| r["state"] == "ended"));
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let exited = &runs[1];
    assert_eq!((exited["member"].as_str(), exited["exit_code"].as_u64()), (Some(b.name.as_str()), Some(0)), "{exited}");
    assert!(exited["unlead"].is_null() && exited["output_bytes"].as_u64() > Some(0), "{exited}");
    let (code, out) = run(&["logs", "-b", &g.broker.address, "-g", &g.name]);
    assert_eq!(code, 0, "{out}");
    // Whole lines: token 1's line is a prefix of token 12's.
    let line = |t: i64| format!("leading, token {t}");
    assert!(out.lines().any(|l| l == line(b_token)) && out.contains("stopping"), "its output's tail: {out}");
    assert!(!out.lines().any(|l| l == line(token)), "b's command's output, not a's: {out}");
}
