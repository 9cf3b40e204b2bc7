//! One member and its child: exit statuses, stop signals, grace, process
//! groups, forwarded signals and restart policies.

use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{parent_of, sleeping, stays_false, wait_until, Group, Member, LONG, LONG_LEASE};

/// librdkafka's clients are destroyed before neli-run exits, on each path
/// that waits for them: a run that ends (its group's topic created on the
/// way, so the admin client too) and a Kafka error when joining. A client
/// destroyed while exit's handlers run can corrupt the heap (seen in CI: an
/// abort in place of the status due). With -v, neli-run says when it has to
/// exit beside librdkafka (faults.rs has that path).
#[test]
fn librdkafka_is_gone_before_neli_run_exits() {
    let g = Group::new("clean-exit");
    let mut m = g.member("a", &["-v"], &["sh", "-c", "exit 4"]);
    assert_eq!(m.wait_exit(LONG).code(), Some(4), "{}", m.log());
    assert!(m.log().contains("creating the topic"), "{}", m.log());
    assert!(!m.log().contains("librdkafka may still run"), "{}", m.log());
    let broker = crate::util::Broker::dev_with("127.0.0.1", &["--deny-topic", "denied.neli"]);
    let (code, out) = crate::util::run(&["-v", "-g", "denied", "-b", &broker.address, "--", "true"]);
    assert_eq!(code, 77, "{out}");
    assert!(!out.contains("librdkafka may still run"), "{out}");
}

#[test]
fn exit_code_of_the_child_is_ours() {
    let g = Group::new("exit-code");
    let mut m = g.member("a", &[], &["sh", "-c", "exit 7"]);
    assert_eq!(m.wait_exit(LONG).code(), Some(7), "{}", m.log());
}

#[test]
fn child_killed_by_a_signal_exits_128_plus_n() {
    let g = Group::new("signal-code");
    let mut m = g.member("a", &[], &["sh", "-c", "kill -SEGV $$"]);
    // The wrapper shell reports its child's SIGSEGV death as 139.
    assert_eq!(m.wait_exit(LONG).code(), Some(139), "{}", m.log());
}

#[test]
fn child_env_carries_group_name_and_token() {
    let g = Group::new("env");
    let out = g.dir.path().join("env");
    let script = format!("env | grep ^NELI_ > {}", out.display());
    let mut m = g.member("a", &[], &["sh", "-c", &script]);
    assert_eq!(m.wait_exit(LONG).code(), Some(0), "{}", m.log());
    let env = std::fs::read_to_string(out).unwrap();
    assert!(env.contains(&format!("NELI_GROUP={}", g.name)), "{env}");
    assert!(env.contains(&format!("NELI_TOPIC={}.neli", g.name)), "{env}");
    assert!(env.contains("NELI_NAME=a"), "{env}");
    let token = g.starts()[0].1;
    assert!(env.contains(&format!("NELI_FENCING_TOKEN={token}")), "{env}");
}

#[test]
fn child_env_keeps_what_neli_run_consumed_from_the_command() {
    let g = Group::new("env-scrub");
    let out = g.dir.path().join("env");
    let script = format!("env > {}", out.display());
    // A password in NELI_KAFKA_PROPERTIES, systemd's variables (for neli-run
    // to answer, not the command), an option's variable, and one of the
    // user's own, which must pass.
    let prefix = [
        "env",
        "NELI_KAFKA_PROPERTIES=sasl.password=TOPSECRET",
        "NOTIFY_SOCKET=/nonexistent/notify",
        "WATCHDOG_USEC=60000000",
        "NELI_RESTART=never",
        "USERS_OWN=kept",
    ]
    .map(String::from)
    .to_vec();
    let mut m = g.member_in(Some(prefix), "a", &["-X", "security.protocol=plaintext"], &["sh", "-c", &script]);
    assert_eq!(m.wait_exit(LONG).code(), Some(0), "{}", m.log());
    let env = std::fs::read_to_string(out).unwrap();
    for gone in ["TOPSECRET", "NELI_KAFKA_PROPERTIES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "NELI_RESTART"] {
        assert!(!env.contains(gone), "{gone} reached the command:\n{env}");
    }
    assert!(env.contains("USERS_OWN=kept"), "{env}");
    assert!(env.contains(&format!("NELI_GROUP={}", g.name)), "{env}");
    assert!(env.contains(&format!("NELI_BROKERS={}", g.broker.address)), "{env}");
}

#[test]
fn sigterm_stops_the_child_and_exits_with_its_status() {
    let g = Group::new("sigterm");
    let mut m = g.member("a", &[], &["sleep", "1000"]);
    wait_until(LONG, "the child runs", || g.lock_held());
    m.signal(Signal::SIGTERM);
    // flock reports its child's SIGTERM death as 128+15.
    assert_eq!(m.wait_exit(LONG).code(), Some(143), "{}", m.log());
    g.assert_no_orphan();
}

#[test]
fn child_ignoring_sigterm_is_killed_after_grace() {
    let g = Group::new("ignore-term");
    // The child says it is ready once it ignores TERM: a signal sent as soon
    // as the lock is held could arrive before the trap is set.
    let ready = g.dir.path().join("ready");
    let script = format!("trap '' TERM; touch {}; while :; do sleep 0.1; done", ready.display());
    let mut m = g.member("a", &["--grace", "1s"], &["sh", "-c", &script]);
    wait_until(LONG, "the child ignores TERM", || ready.exists());
    let asked = std::time::Instant::now();
    m.signal(Signal::SIGTERM);
    m.wait_exit(LONG);
    assert!(asked.elapsed() >= Duration::from_millis(900), "killed before the grace ran out");
    g.assert_no_orphan();
}

#[test]
fn neli_run_itself_kills_a_command_that_ignores_sigterm_when_grace_runs_out() {
    let g = Group::new("ignore-term-own-kill");
    // Unguarded, so that the shim's own child ignores TERM and the shim has
    // nothing to drain; an 8 s lease: within the bound below, only
    // neli-run's kill after --grace can end it.
    let extra = [&["--grace", "1s"], &LONG_LEASE[..]].concat();
    let (mut m, command) = trapping(&g, &extra, "''");
    let asked = std::time::Instant::now();
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(137), "{}", m.log());
    let took = asked.elapsed();
    assert!(took >= Duration::from_millis(900), "killed before the grace ran out: {took:?}");
    assert!(took < Duration::from_secs(5), "not killed when the grace ran out: {took:?}");
    assert!(!command.exists(), "the command outlived neli-run");
}

/// A member running a shell command that traps SIGTERM with `trap` and then
/// loops, unguarded (the detector's flock would die of a SIGTERM meant for
/// the command); returned once the trap is set, with the command's /proc
/// entry (which exists while it lives).
fn trapping(g: &Group, extra: &[&str], trap: &str) -> (Member, PathBuf) {
    let pidfile = g.dir.path().join("pid");
    let script = format!("trap {trap} TERM; echo $$ > {}; while :; do sleep 0.05; done", pidfile.display());
    let m = g.member_unguarded("a", extra, &["sh", "-c", &script]);
    let pid = || std::fs::read_to_string(&pidfile).ok().filter(|p| p.ends_with('\n'));
    wait_until(LONG, "the command has set its trap", || pid().is_some());
    (m, PathBuf::from(format!("/proc/{}", pid().unwrap().trim())))
}

#[test]
fn grandchildren_die_with_the_child() {
    let g = Group::new("grandchildren");
    let mut m = g.member("a", &[], &["sh", "-c", "sleep 1000 & sleep 1000 & wait"]);
    wait_until(LONG, "the child runs", || g.lock_held());
    m.signal(Signal::SIGTERM);
    m.wait_exit(LONG);
    g.assert_no_orphan();
}

#[test]
fn grandchildren_left_behind_by_an_exiting_child_are_stopped() {
    let g = Group::new("leftovers");
    let mut m = g.member("a", &[], &["sh", "-c", "sleep 1000 & exit 4"]);
    assert_eq!(m.wait_exit(LONG).code(), Some(4), "{}", m.log());
    g.assert_no_orphan();
}

#[test]
fn kill_9_of_neli_run_kills_the_whole_group() {
    let g = Group::new("kill9");
    let mut m = g.member("a", &[], &["sh", "-c", "sleep 1000 & sleep 1000 & wait"]);
    wait_until(LONG, "the child runs", || g.lock_held());
    m.signal(Signal::SIGKILL);
    m.wait_exit(LONG);
    g.assert_no_orphan();
}

#[test]
fn hup_usr1_usr2_winch_are_forwarded_to_the_child() {
    let g = Group::new("forward");
    let seen = g.dir.path().join("seen");
    let script = format!(
        "for s in HUP USR1 USR2 WINCH; do trap \"echo $s >> {0}\" $s; done; echo ready >> {0}; while :; do sleep 0.05; done",
        seen.display()
    );
    // Unguarded: the detector's flock would die of HUP like any process of
    // the group that does not handle it.
    let mut m = g.member_unguarded("a", &[], &["sh", "-c", &script]);
    let read = || std::fs::read_to_string(&seen).unwrap_or_default();
    wait_until(LONG, "the child is ready", || read().contains("ready"));
    for (sig, name) in
        [(Signal::SIGHUP, "HUP"), (Signal::SIGUSR1, "USR1"), (Signal::SIGUSR2, "USR2"), (Signal::SIGWINCH, "WINCH")]
    {
        m.signal(sig);
        wait_until(LONG, &format!("the child saw {name}"), || read().contains(name));
    }
    m.signal(Signal::SIGTERM);
    m.wait_exit(LONG);
}

#[test]
fn restart_never_exits_after_one_run() {
    let g = Group::new("restart-never");
    let mut m = g.member("a", &["--restart", "never"], &["sh", "-c", "exit 1"]);
    assert_eq!(m.wait_exit(LONG).code(), Some(1));
    assert_eq!(g.starts().len(), 1);
}

/// A child that fails twice, then succeeds (counting its runs in a file).
fn flaky(g: &Group) -> String {
    let count = g.dir.path().join("count");
    format!("n=$(cat {0} 2>/dev/null || echo 0); echo $((n+1)) > {0}; [ $n -ge 2 ]", count.display())
}

#[test]
fn restart_on_failure_runs_until_success() {
    let g = Group::new("restart-on-failure");
    let script = flaky(&g);
    let mut m = g.member("a", &["--restart", "on-failure", "--restart-delay", "100ms"], &["sh", "-c", &script]);
    assert_eq!(m.wait_exit(LONG).code(), Some(0), "{}", m.log());
    let starts = g.starts();
    assert_eq!(starts.len(), 3, "{starts:?}");
    assert!(starts.iter().all(|s| s.1 == starts[0].1), "restarts keep the token: {starts:?}");
}

#[test]
fn restart_always_runs_again_after_success() {
    let g = Group::new("restart-always");
    let mut m = g.member("a", &["--restart", "always", "--restart-delay", "100ms"], &["true"]);
    wait_until(LONG, "three runs", || g.starts().len() >= 3);
    assert!(!m.exited(), "always never exits by itself");
    m.signal(Signal::SIGTERM);
    // 0 when the signal falls between runs, 143 when it stops a run.
    let code = m.wait_exit(LONG).code();
    assert!(matches!(code, Some(0) | Some(143)), "{code:?}\n{}", m.log());
}

#[test]
fn as_pid_1_it_handles_sigterm_and_leaves_nothing_behind() {
    // A container entrypoint: neli-run is PID 1 of a new PID namespace, where
    // signals without a handler are ignored and orphans are its to reap.
    let g = Group::new("pid1");
    let prefix = ["unshare", "--pid", "--fork", "--mount-proc"].map(String::from).to_vec();
    // Probed as it is used: --mount-proc also fails where / is no mount
    // point (a chroot), which --pid alone does not show.
    let ok = std::process::Command::new(&prefix[0]).args(&prefix[1..]).arg("true").status().is_ok_and(|s| s.success());
    if !ok {
        crate::util::skip("unshare --pid --fork --mount-proc is not permitted here");
        return;
    }
    let pidfile = g.dir.path().join("pid");
    let script = format!("echo $PPID > {}; sleep 1000 & sleep 1000 & wait", pidfile.display());
    let mut m = g.member_in(Some(prefix), "a", &[], &["sh", "-c", &script]);
    wait_until(LONG, "the child runs", || g.lock_held());
    let neli = m.forked_pid().expect("unshare forked neli-run");
    let status = std::fs::read_to_string(format!("/proc/{neli}/status")).unwrap();
    assert!(status.lines().any(|l| l.starts_with("NSpid:") && l.trim_end().ends_with("\t1")), "{status}");
    nix::sys::signal::kill(neli, Signal::SIGTERM).unwrap();
    // unshare passes on its child's status.
    assert_eq!(m.wait_exit(LONG).code(), Some(143), "{}", m.log());
    g.assert_no_orphan();
}

/// Found in review: the child closed every fd above the lease before exec,
/// std's exec-status pipe too, so a failed exec of the shim read as a
/// started child (which then died of SIGABRT in std's child-side assert:
/// "child started", then 134). Here the exec fails for real: neli-run runs
/// in a mount namespace without /proc, and the shim is /proc/self/exe.
#[test]
fn a_shim_that_cannot_be_executed_is_reported_and_not_taken_for_a_start() {
    let g = Group::new("shim-exec-fails");
    let no_proc = r#"umount -l /proc && exec "$0" "$@""#;
    let prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", no_proc].map(String::from).to_vec();
    let ok = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", "umount -l /proc && ! test -e /proc/self/exe"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        crate::util::skip("cannot unmount /proc in a new mount namespace (unshare --mount) here");
        return;
    }
    let mut m = g.member_in(Some(prefix), "a", &["-v"], &["sleep", "1000"]);
    let code = m.wait_exit(LONG).code();
    let log = m.log();
    assert!(!log.contains("child started"), "a failed exec taken for a start: {log}");
    assert_eq!(code, Some(70), "neli-run's internal error, not the child's: {log}");
    assert!(
        log.contains("cannot start the child") && log.contains("cannot start the shim /proc/self/exe: No such file"),
        "the failed exec is reported: {log}"
    );
    // Without /proc, librdkafka's threads cannot be counted: it may still
    // run, so exit's handlers must not (they aborted here twice in CI,
    // with a corrupted heap in place of the status).
    assert!(log.contains("librdkafka may still run: exiting without exit handlers threads=None"), "{log}");
    assert!(g.starts().is_empty(), "{:?}", g.starts());
}

/// The command inherits stdin, stdout and stderr and nothing else of
/// neli-run's (librdkafka's sockets and wake-up pipes are not CLOEXEC),
/// and the shim holds nothing of them either beyond its lease (fd 3): it
/// closes them as it starts.
#[test]
fn the_command_inherits_no_fd_of_neli_run_beyond_stdio() {
    let g = Group::new("no-fd-leak");
    // A shell that says when it is past its own start-up: a program read
    // during it (sleep opens /etc/locale.alias as it starts) holds files of
    // its own for a moment, which are not inherited.
    let ready = g.dir.path().join("ready");
    let script = format!("touch {}; while :; do sleep 1; done", ready.display());
    let mut m = g.member_unguarded("a", &[], &["sh", "-c", &script]);
    let children = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let (mut shim, mut command) = (None, None);
    wait_until(LONG, "the command runs below the shim, past its start-up", || {
        shim = children(m.pid().as_raw() as u32).split_whitespace().next().and_then(|p| p.parse().ok());
        command = shim.and_then(|shim| children(shim).split_whitespace().next().map(String::from));
        // Exec'd: until then the fork holds the shim's own fds.
        ready.exists()
            && command
                .as_ref()
                .is_some_and(|c| std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n == "sh\n"))
    });
    let dir = format!("/proc/{}/fd", command.unwrap());
    let mut fds: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    fds.sort();
    let targets: Vec<_> = fds.iter().map(|fd| std::fs::read_link(format!("{dir}/{fd}")).ok()).collect();
    assert_eq!(fds, ["0", "1", "2"], "{targets:?}");
    let dir = format!("/proc/{}/fd", shim.unwrap());
    let held: Vec<(i32, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap())
        .filter_map(|fd| Some((fd, std::fs::read_link(format!("{dir}/{fd}")).ok()?.display().to_string())))
        .collect();
    // The shim's own: its timers and signalfd, the memfd it hands the
    // output's tail over in, and the pipes it reads the command's stdout
    // and stderr from (--keep-output).
    let own = |target: &str| {
        target.starts_with("anon_inode:")
            || target.starts_with("/memfd:neli-run-output")
            || targets.iter().flatten().any(|t| t.display().to_string() == target && target.starts_with("pipe:"))
    };
    let theirs: Vec<_> = held.iter().filter(|(fd, target)| *fd > 3 && !own(target)).collect();
    assert!(theirs.is_empty(), "the shim holds {theirs:?} of neli-run's (all it holds: {held:?})");
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(143), "{}", m.log());
}

/// A descriptor neli-run was handed without close-on-exec (a shell's
/// redirect, a service manager's socket) reaches neither the shim nor the
/// command, whether the shim keeps the output (the tail's memfd takes fd
/// 4) or not (`--keep-output 0`: it closes every fd above its lease).
#[test]
fn a_descriptor_neli_run_inherited_reaches_neither_the_shim_nor_the_command() {
    for keep in ["0", "8KiB"] {
        let g = Group::new("inherited-fd");
        let marker = g.dir.path().join("inherited");
        std::fs::write(&marker, "not the command's").unwrap();
        let ready = g.dir.path().join("ready");
        // fds 4 and 5: the tail's memfd's number and the one above it.
        let opens = format!("exec 4<{m} 5<{m}; exec \"$0\" \"$@\"", m = marker.display());
        let prefix = vec!["sh".into(), "-c".into(), opens];
        let script = format!("touch {}; while :; do sleep 1; done", ready.display());
        let mut m = g.member_unguarded_in(prefix, "a", &["--keep-output", keep], &["sh", "-c", &script]);
        let children =
            |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let (mut shim, mut command) = (None, None);
        wait_until(LONG, "the command runs below the shim, past its start-up", || {
            shim = children(m.pid().as_raw() as u32).split_whitespace().next().map(String::from);
            command =
                shim.as_deref().and_then(|s| children(s.parse().unwrap()).split_whitespace().next().map(String::from));
            ready.exists()
                && command
                    .as_ref()
                    .is_some_and(|c| std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n == "sh\n"))
        });
        let holding = |pid: &str| -> Vec<String> {
            let dir = format!("/proc/{pid}/fd");
            std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
                .filter(|target| *target == marker)
                .map(|target| target.display().to_string())
                .collect()
        };
        assert!(!holding(&m.pid().as_raw().to_string()).is_empty(), "the test's premise: neli-run holds the marker");
        assert_eq!(holding(&shim.unwrap()), Vec::<String>::new(), "the shim, --keep-output {keep}");
        assert_eq!(holding(&command.unwrap()), Vec::<String>::new(), "the command, --keep-output {keep}");
        m.signal(Signal::SIGTERM);
        assert_eq!(m.wait_exit(LONG).code(), Some(143), "{}", m.log());
    }
}

/// The command starts with the signal dispositions neli-run was started
/// with (here SIGALRM ignored, which neli-run does not catch), as across a
/// fork and exec, except SIGPIPE, which neli-run ignores as every Rust
/// program does, and the C library's own signals (32 to 34), which
/// posix_spawn, which starts the shim, would leave ignored.
#[test]
fn the_command_starts_with_the_signal_dispositions_neli_run_was_given() {
    let g = Group::new("signal-dispositions");
    let marker = format!("1000.{}", std::process::id());
    let ignoring = ["sh", "-c", r#"trap "" ALRM; exec "$0" "$@""#].map(String::from).to_vec();
    let mut m = g.member_in(Some(ignoring), "a", &[], &["sleep", &marker]);
    wait_until(LONG, "the command runs", || !sleeping(&marker).is_empty());
    let ignored = |pid: i32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).unwrap().trim().to_string();
        u64::from_str_radix(&mask, 16).unwrap()
    };
    let bit = |sig: i32| 1u64 << (sig - 1);
    let given = ignored(m.pid().as_raw());
    assert_ne!(given & bit(libc::SIGALRM), 0, "SIGALRM ignored in neli-run: {given:#x}");
    let reset = bit(libc::SIGPIPE) | bit(32) | bit(33) | bit(34);
    let command = ignored(sleeping(&marker)[0].0);
    assert_eq!(command, given & !reset, "ignored in the command {command:#x}, in neli-run {given:#x}");
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(143), "{}", m.log());
}

/// Found by hand: the shim's lease was not renewed while a shutdown waited
/// for the command, so a command that took longer than the heartbeat
/// deadline to stop was SIGKILLed before its grace was up (with the
/// defaults, --grace 3s and --heartbeat-deadline 3s, one that took 2.6 s).
#[test]
fn sigterm_gives_the_command_its_whole_grace_even_past_the_heartbeat_deadline() {
    let g = Group::new("grace-past-deadline");
    let stopped = g.dir.path().join("stopped");
    let extra = ["--session-timeout", "10s", "--heartbeat-deadline", "2s", "--grace", "7s"];
    let (mut m, _) = trapping(&g, &extra, &format!("'sleep 4; touch {}; exit 0'", stopped.display()));
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(LONG).code(), Some(0), "the command's own status: {}", m.log());
    assert!(stopped.exists(), "the command finished stopping: {}", m.log());
}

/// The shim's drain (stop signal, then SIGKILL after --grace, to what a
/// command left behind) starts only once the command itself has exited.
/// While the command still stops, its grace is neli-run's to end: with
/// neli-run frozen mid-stop, the command lives on past the grace until
/// neli-run returns (or the 8 s lease runs out).
#[test]
fn the_shim_leaves_a_command_that_still_stops_to_neli_run() {
    let g = Group::new("shim-no-early-drain");
    let got_term = g.dir.path().join("got-term");
    let extra = [&["--grace", "1s"], &LONG_LEASE[..]].concat();
    let (mut m, command) = trapping(&g, &extra, &format!("'touch {}'", got_term.display()));
    m.signal(Signal::SIGTERM);
    wait_until(LONG, "the command got SIGTERM", || got_term.exists());
    m.signal(Signal::SIGSTOP);
    // (Its /proc entry, not pgrep: neli-run's own arguments hold the script.)
    assert!(
        stays_false(Duration::from_secs(3), || !command.exists()),
        "the command was killed while neli-run was frozen, within the lease: {}",
        m.log()
    );
    m.signal(Signal::SIGCONT);
    assert_eq!(m.wait_exit(LONG).code(), Some(137), "neli-run's grace kill: {}", m.log());
}

#[test]
fn a_run_past_max_runtime_is_stopped_then_killed_and_its_status_is_the_exit_status() {
    let g = Group::new("max-runtime");
    let mut m = g.member("a", &["--max-runtime", "1s"], &["sleep", "1000"]);
    assert_eq!(m.wait_exit(LONG).code(), Some(143), "stopped by SIGTERM: {}", m.log());
    assert!(m.log().contains("the run exceeded --max-runtime; stopping it"), "{}", m.log());
    g.assert_no_orphan();

    // A command that ignores the stop signal is killed after --grace
    // (unguarded: the detector's wrapper would die of the SIGTERM itself).
    let g = Group::new("max-runtime-kill");
    let ignore = "trap '' TERM; while :; do sleep 0.2; done";
    let mut m = g.member_unguarded("a", &["--max-runtime", "1s"], &["sh", "-c", ignore]);
    assert_eq!(m.wait_exit(LONG).code(), Some(137), "{}", m.log());
    assert!(m.log().contains("child still running after the grace period; sending SIGKILL"), "{}", m.log());
}

/// The shim and the keeper are the small static program neli-run carries
/// inside it (shim/, src/child/program.rs), run from memory: they map
/// nothing of neli-run's Kafka client and its libraries (a shim re-executing
/// neli-run held 8 MiB resident for a loop that needs none), and ps still
/// names them.
#[test]
fn the_shim_and_the_keeper_run_from_memory_and_map_no_kafka_client() {
    let g = Group::new("light-shim");
    let mut a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(LONG, "a runs its command", || g.lock_held());
    // b's health check runs under a keeper for as long as it sleeps.
    let mut b = g.member("b", &["--health-cmd", "sleep 1000", "--health-timeout", "10m"], &["sleep", "1000"]);
    // Its child called `name` (forked by whichever of its threads).
    let named = |of: &Member, name: &str| {
        let mut pids =
            std::fs::read_dir("/proc").unwrap().flatten().filter_map(|e| e.file_name().to_str()?.parse().ok());
        pids.find(|&p: &i32| {
            parent_of(p) == Some(of.pid().as_raw())
                && std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|comm| comm.trim_end() == name)
        })
    };
    let mut found = Vec::new();
    wait_until(LONG, "a's shim and b's keeper run", || {
        found = [named(&a, "neli-run-shim"), named(&b, "neli-run-keeper")].into_iter().flatten().collect();
        found.len() == 2
    });
    for pid in found {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert!(exe.to_string_lossy().starts_with("/memfd:neli-run-shim"), "{pid} runs {exe:?}");
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        for library in ["librdkafka", "libssl", "libcrypto", "libsasl2", "libzstd", "libz.so", "libcurl"] {
            assert!(!maps.contains(library), "{pid} maps {library}:\n{maps}");
        }
    }
    // What they run cannot be changed, not even by root.
    let fds = std::fs::read_dir(format!("/proc/{}/fd", a.pid())).unwrap().flatten();
    let carried = fds
        .map(|fd| fd.path())
        .find(|fd| std::fs::read_link(fd).is_ok_and(|to| to.to_string_lossy().starts_with("/memfd:neli-run-shim")))
        .expect("a holds the program it starts its shims from");
    // (A shim running it makes a write fail with ETXTBSY; between shims,
    // only the seals stop one.)
    let file = std::fs::File::open(&carried).unwrap();
    let seals = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GET_SEALS).unwrap();
    let all = nix::libc::F_SEAL_SEAL | nix::libc::F_SEAL_SHRINK | nix::libc::F_SEAL_GROW | nix::libc::F_SEAL_WRITE;
    assert_eq!(seals & all, all, "{carried:?} is sealed: {seals:#x}");
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(LONG).code(), Some(143), "{}", a.log());
    // b never joined (its first check never passed): it stops as a member
    // that never ran a command does.
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(LONG).code(), Some(0), "{}", b.log());
    g.assert_no_orphan();
}
