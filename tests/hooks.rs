//! Hooks (--on-lead, --on-unlead, --on-exit): what they are told, that one
//! that hangs delays no handover and no fence, and is killed, with all it
//! started, at --hook-timeout, that those queued behind it say only what is
//! still news and are waited for at exit within one timeout, and that
//! nothing a hook starts outlives it.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::util::{sleeping, wait_until, Broker, Group, KillSleeping, FENCE_ROOM, LONG};

/// The pids in `file`, one a line (each hook appends its own).
fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Kills, when a failing test drops it, the process groups of the hooks
/// listed in pids files (each its keeper's): its members are SIGKILLed, and
/// their hooks would outlive them. (A passing test has seen them gone:
/// their numbers may be another's by then.)
struct KillHooks(Vec<std::path::PathBuf>);

impl Drop for KillHooks {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for pid in self.0.iter().flat_map(|f| pids(f)) {
            if let Ok(group) = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))) {
                let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
            }
        }
    }
}

/// Whether `pid` runs (a zombie does not: init may be slow to reap it).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// A hook line that writes the NELI_ variables it is told, sorted, to
/// `$NELI_HOOK.env` in `g`'s directory (read back with `env_in`).
fn recording(g: &Group) -> String {
    format!("env | grep '^NELI_' | sort > {}/$NELI_HOOK.env", g.dir.path().display())
}

/// The NELI_ variables a hook wrote to `file` (sorted lines).
fn env_in(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap_or_default()
}

#[test]
fn the_hooks_are_told_the_group_the_token_the_reason_and_the_status_and_a_failing_one_changes_nothing() {
    let g = Group::new("hooks-env");
    // Each writes what it was told; the lead hook fails besides.
    let record = recording(&g);
    let lead = format!("{record}; exit 7");
    let hooks = ["--on-lead", &lead, "--on-unlead", &record, "--on-exit", &record];
    // A setting neli-run consumed (a password could be in it) is no hook's.
    let prefix = ["env", "NELI_KAFKA_PROPERTIES=sasl.password=TOPSECRET"].map(String::from).to_vec();
    let mut a = g.member_in(Some(prefix), "a", &hooks, &["sh", "-c", "sleep 1; exit 3"]);
    assert_eq!(a.wait_exit(LONG).code(), Some(3), "the command's status, whatever the hooks did:\n{}", a.log());
    let token = g.starts()[0].1;
    let log = a.log();
    assert!(log.contains(r#"hook failed hook="lead" status=exit code 7"#), "{log}");
    let common = |hook: &str| {
        let env = env_in(&g.dir.path().join(format!("{hook}.env")));
        for line in [
            format!("NELI_GROUP={}", g.name),
            format!("NELI_TOPIC={}.neli", g.name),
            "NELI_NAME=a".to_string(),
            format!("NELI_BROKERS={}", g.broker.address),
            format!("NELI_FENCING_TOKEN={token}"),
            format!("NELI_HOOK={hook}"),
        ] {
            assert!(env.lines().any(|l| l == line), "{line} in {hook}'s:\n{env}\n{log}");
        }
        assert!(!env.contains("TOPSECRET") && !env.contains("NELI_ON_"), "{hook}'s:\n{env}");
        env
    };
    assert!(common("lead").lines().any(|l| l == "NELI_REASON=elected"));
    let exit = common("exit");
    assert!(exit.lines().any(|l| l == "NELI_EXIT_STATUS=3") && exit.contains("NELI_REASON=exited"), "{exit}");
    assert!(common("unlead").lines().any(|l| l == "NELI_REASON=exiting"));
    // The unlead hook ran after the group was left, never before.
    let (left, waited) = (log.find("leaving the group"), log.find(r#"hook started hook="unlead""#));
    assert!(left.is_some() && left < waited, "{log}");
    g.assert_no_overlap();
}

#[test]
fn hooks_that_never_exit_delay_no_handover_and_exit_waits_for_them_only_after_leaving() {
    let g = steady("hooks-handover");
    let file = |name: &str| g.dir.path().join(format!("{name}.pids"));
    let _cleanup = KillHooks(vec![file("a"), file("b")]);
    let member = |name: &str| {
        let hang = format!("echo $$ >> {}; sleep 1000", file(name).display());
        let hooks = ["--on-lead", &hang, "--on-unlead", &hang, "--on-exit", &hang, "--hook-timeout", "10m"];
        g.member(name, &hooks, &["sleep", "1000"])
    };
    let mut a = member("a");
    wait_until(LONG, "a leads and its lead hook hangs", || g.starts().len() == 1 && pids(&file("a")).len() == 1);
    let mut b = member("b");
    // A revoke in a's life: a yields while its lead hook hangs.
    let t = g.broker.timing;
    yield_to(&g, "b");
    assert!(pids(&file("a")).iter().all(|&p| alive(p)), "a's lead hook hung throughout");
    // A graceful stop of b while its lead hook hangs: b leaves the group
    // first, so a leads again while b still waits for its hooks.
    wait_until(LONG, "b's lead hook hangs", || pids(&file("b")).len() == 1);
    b.signal(Signal::SIGTERM);
    wait_until(t.takeover(), "a leads again", || g.starts().len() >= 3 && g.lock_held());
    assert_eq!(g.starts()[2].0, "a");
    wait_until(LONG, "b waits for its hooks", || b.log().contains("waiting for the hooks queued"));
    assert!(!b.exited(), "b waits for its hooks:\n{}", b.log());
    let log = b.log();
    assert!(log.find("leaving the group") < log.find("waiting for the hooks queued"), "{log}");
    // A second SIGTERM cuts the wait short, and kills them.
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(Duration::from_secs(10)).code(), Some(143), "{}", b.log());
    assert!(b.log().contains("asked again: not waiting for the hooks"), "{}", b.log());
    for name in ["a", "b"] {
        if name == "a" {
            a.signal(Signal::SIGTERM);
            wait_until(LONG, "a waits for its hooks", || a.log().contains("waiting for the hooks queued"));
            a.signal(Signal::SIGTERM);
            a.wait_exit(Duration::from_secs(10));
        }
        let hooks = pids(&file(name));
        wait_until(Duration::from_secs(10), "the hooks are gone", || hooks.iter().all(|&p| !alive(p)));
    }
    g.assert_no_overlap();
}

#[test]
fn a_hook_that_never_exits_delays_no_fence() {
    let g = Group::on(Broker::dev(), "hooks-fence");
    let file = g.dir.path().join("hook.pids");
    let _cleanup = KillHooks(vec![file.clone()]);
    let hang = format!("echo $$ >> {}; sleep 1000", file.display());
    let hooks = ["--on-lead", &hang, "--on-unlead", &hang, "--on-exit", &hang, "--hook-timeout", "10m"];
    let mut a = g.member("a", &hooks, &["sleep", "1000"]);
    wait_until(LONG, "a leads and its lead hook hangs", || g.lock_held() && pids(&file).len() == 1);
    let t = g.broker.timing;
    g.broker.signal(Signal::SIGSTOP);
    // A fence the hook held up would wait for its --hook-timeout, 10 minutes.
    wait_until(t.deadline + FENCE_ROOM, "the fence killed the command", || !g.lock_held());
    g.broker.signal(Signal::SIGCONT);
    // The resumed broker may rebalance more than once (its sessions all ran
    // out while it was stopped): a may lead again more than once.
    wait_until(t.takeover(), "a leads again", || g.lock_held() && g.starts().len() >= 2);
    assert_eq!(pids(&file).len(), 1, "the hooks queued behind the one that hangs wait");
    a.signal(Signal::SIGTERM);
    wait_until(LONG, "a waits for its hooks", || a.log().contains("waiting for the hooks queued"));
    a.signal(Signal::SIGTERM);
    // (Its status is its command's, 143, unless a load spike fenced it again.)
    a.wait_exit(Duration::from_secs(10));
    let hooks = pids(&file);
    wait_until(Duration::from_secs(10), "a's hooks are gone", || hooks.iter().all(|&p| !alive(p)));
    g.assert_no_overlap();
}

#[test]
fn a_hook_past_its_timeout_is_killed_with_its_process_group_and_a_fence_is_told_as_one() {
    let g = Group::on(Broker::dev(), "hooks-timeout");
    let file = g.dir.path().join("hook.pids");
    let _cleanup = KillHooks(vec![file.clone()]);
    // The lead hook and a grandchild, each writing its pid, hang.
    let hang = format!("sleep 1000 & echo $! >> {0}; echo $$ >> {0}; wait", file.display());
    let record = recording(&g);
    let hooks = ["--on-lead", &hang, "--on-unlead", &record, "--on-exit", &record, "--hook-timeout", "1s"];
    let mut a = g.member("a", &hooks, &["sleep", "1000"]);
    wait_until(LONG, "the hook and its grandchild run", || pids(&file).len() == 2);
    let hooks = pids(&file);
    wait_until(LONG, "the hook is killed", || a.log().contains(r#"hook failed hook="lead" status=killed by SIGKILL"#));
    assert!(a.log().contains("hook still running after --hook-timeout"), "{}", a.log());
    wait_until(Duration::from_secs(10), "the hook and its grandchild are gone", || hooks.iter().all(|&p| !alive(p)));
    assert!(g.lock_held(), "the command runs on");
    // A fence: the unlead and exit hooks say so.
    let t = g.broker.timing;
    g.broker.signal(Signal::SIGSTOP);
    wait_until(t.deadline + FENCE_ROOM, "the fence killed the command", || !g.lock_held());
    g.broker.signal(Signal::SIGCONT);
    let env = |hook: &str| env_in(&g.dir.path().join(format!("{hook}.env")));
    wait_until(LONG, "the unlead and exit hooks ran", || !env("unlead").is_empty() && !env("exit").is_empty());
    assert!(env("unlead").contains("NELI_REASON=fenced\n"), "{}", env("unlead"));
    let exit = env("exit");
    assert!(exit.contains("NELI_REASON=fenced\n") && exit.contains("NELI_EXIT_STATUS=137\n"), "{exit}");
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    g.assert_no_overlap();
}

/// A hook that hangs, and what it started, die with a neli-run killed
/// with SIGKILL, which can kill nothing itself (they ran on for good).
#[test]
fn a_hook_that_hangs_is_killed_with_all_it_started_when_neli_run_is_killed_with_sigkill() {
    let g = Group::new("hooks-kill9");
    let file = g.dir.path().join("hook.pids");
    let _cleanup = KillHooks(vec![file.clone()]);
    let hang = format!("sleep 1000 & echo $! >> {0}; echo $$ >> {0}; wait", file.display());
    let mut a = g.member("a", &["--on-lead", &hang, "--hook-timeout", "10m"], &["sleep", "1000"]);
    wait_until(LONG, "the hook and its child run", || pids(&file).len() == 2);
    a.signal(Signal::SIGKILL);
    a.wait_exit(LONG);
    let hooks = pids(&file);
    wait_until(LONG, "the hook and its child are gone", || hooks.iter().all(|&p| !alive(p)));
}

#[test]
fn a_command_the_shim_fenced_while_its_member_was_frozen_is_told_as_fenced() {
    // The shim's lease and neli-run's own fence run out together: when the
    // shim kills first (here, neli-run is frozen past it), the exit that
    // neli-run hears on waking is still the fence's. (Seen in CI: a fence
    // told as "exited" when the shim was a few milliseconds ahead.)
    let g = Group::new("hooks-shim-fence");
    let record = recording(&g);
    let mut a = g.member("a", &["--on-exit", &record], &["sleep", "1000"]);
    wait_until(LONG, "a leads", || g.lock_held());
    a.signal(Signal::SIGSTOP);
    wait_until(g.broker.timing.deadline + Duration::from_secs(10), "the shim killed the command", || !g.lock_held());
    a.signal(Signal::SIGCONT);
    let exit = || env_in(&g.dir.path().join("exit.env"));
    wait_until(LONG, "the exit hook ran", || !exit().is_empty());
    let exit = exit();
    assert!(exit.contains("NELI_REASON=fenced\n") && exit.contains("NELI_EXIT_STATUS=137\n"), "{exit}");
    a.signal(Signal::SIGTERM);
    a.wait_exit(LONG);
    g.assert_no_overlap();
}

/// A group on a session long enough that no load spike fences a leader
/// (3 s did, with heartbeat gaps past 2 s at load 30, and a fence adds a
/// leadership the test did not ask for): for tests whose leaders change
/// only by yields and stops, which do not wait for a session to run out.
fn steady(test: &str) -> Group {
    let mut broker = Broker::start();
    broker.timing = broker.timing.with_session(Duration::from_secs(10));
    Group::on(broker, test)
}

/// `neli-run yield` on `g` once `to` is a standby again, and waits until
/// `to` leads: the next start is its. A yield refuses while no other member
/// has a live candidacy (as `status` lists them), which a member that has
/// just stopped leading writes only once it is back in the group.
fn yield_to(g: &Group, to: &str) {
    let t = g.broker.timing;
    wait_until(t.takeover(), &format!("status lists {to} as a standby"), || {
        crate::util::standbys(g).iter().any(|(name, _)| name == to)
    });
    let starts = g.starts().len() + 1;
    let timeout = format!("{}ms", t.takeover().as_millis());
    let (code, out) = crate::util::run(&["yield", "-b", &g.broker.address, "-g", &g.name, "--timeout", &timeout]);
    assert_eq!(code, 0, "{out}");
    wait_until(t.takeover(), &format!("{to} leads"), || g.starts().len() >= starts && g.lock_held());
    assert_eq!(g.starts()[starts - 1].0, to);
}

#[test]
fn hooks_that_hang_queue_only_the_latest_change_and_a_stop_waits_one_timeout_for_them() {
    // The audit's case: lead and unlead hooks that never exit, two yields,
    // then a stop. The hooks queued behind the one that hangs were waited
    // for one by one (36 s at the default --hook-timeout, 10 s, past
    // systemd's TimeoutStopSec=30s). Here the timeout is 20 s: the first
    // lead hook must still hang when a leads again, and on a loaded
    // machine the two yields took 10 s.
    let g = steady("hooks-bounded");
    let file = g.dir.path().join("a.pids");
    let _cleanup = KillHooks(vec![file.clone()]);
    let hang = format!("echo $$ >> {}; sleep 1000", file.display());
    let hooks = ["--restart", "always", "--on-lead", &hang, "--on-unlead", &hang, "--hook-timeout", "20s"];
    let mut a = g.member("a", &hooks, &["sleep", "1000"]);
    wait_until(LONG, "a leads and its lead hook hangs", || g.starts().len() == 1 && pids(&file).len() == 1);
    let mut b = g.member("b", &["--restart", "always"], &["sleep", "1000"]);
    yield_to(&g, "b");
    yield_to(&g, "a");
    a.signal(Signal::SIGTERM);
    let stopping = Instant::now();
    // One --hook-timeout and a margin for the hooks, after the command's
    // stop and the leave: well within two timeouts, even on a loaded
    // machine, which is what the hooks queued one by one would take.
    let status = a.wait_exit(Duration::from_secs(35));
    eprintln!("a's stop took {:?}", stopping.elapsed());
    assert_eq!(status.code(), Some(143), "{}", a.log());
    // The second lead hook was overtaken before it started.
    let log = a.log();
    assert_eq!(log.matches(r#"hook started hook="lead""#).count(), 1, "{log}");
    let hooks = pids(&file);
    wait_until(Duration::from_secs(10), "a's hooks are gone", || hooks.iter().all(|&p| !alive(p)));
    b.signal(Signal::SIGTERM);
    b.wait_exit(LONG);
    g.assert_no_overlap();
}

#[test]
fn stale_lead_and_unlead_hooks_queued_behind_one_that_hangs_never_run() {
    let g = steady("hooks-stale");
    let dir = g.dir.path();
    let told = dir.join("told");
    // Each hook writes what it tells; the first of each kind hangs until
    // released, and the changes meanwhile queue behind it.
    let hook = |kind: &str| {
        let (hung, release) = (dir.join(format!("{kind}.hung")), dir.join(format!("{kind}.release")));
        let hook = format!(
            "echo $NELI_HOOK $NELI_FENCING_TOKEN >> {}; [ -e {hung} ] || {{ touch {hung}; while [ ! -e {release} ]; do sleep 0.05; done; }}",
            told.display(),
            hung = hung.display(),
            release = release.display()
        );
        (hook, hung, release)
    };
    let ((lead, lead_hung, lead_release), (unlead, unlead_hung, unlead_release)) = (hook("lead"), hook("unlead"));
    let hooks = ["--on-lead", &lead, "--on-unlead", &unlead, "--hook-timeout", "10m"];
    let mut a = g.member("a", &hooks, &["sleep", "1000"]);
    wait_until(LONG, "a leads and its lead hook hangs", || g.starts().len() == 1 && lead_hung.exists());
    let mut b = g.member("b", &[], &["sleep", "1000"]);
    let yields = |leaders: &[&str]| leaders.iter().for_each(|leader| yield_to(&g, leader));
    // While the lead hook hangs, a stops leading, leads again, and stops
    // again: only the last unlead waits, and runs (the world heard lead).
    yields(&["b", "a", "b"]);
    let (first, third) = (g.starts()[0].1, g.starts()[2].1);
    std::fs::write(&lead_release, "").unwrap();
    let lines = || std::fs::read_to_string(&told).unwrap_or_default();
    wait_until(LONG, "the latest unlead hook hangs", || {
        lines().contains(&format!("unlead {third}\n")) && unlead_hung.exists()
    });
    // While it hangs, a leads again and stops again: the lead is overtaken
    // by the unlead, which is passed over (the world heard unlead last).
    yields(&["a", "b"]);
    std::fs::write(&unlead_release, "").unwrap();
    wait_until(LONG, "the last unlead is passed over", || {
        a.log().contains("hook not run: the lead hook it would take back never ran")
    });
    assert_eq!(lines(), format!("lead {first}\nunlead {third}\n"), "{}", a.log());
    for member in [&mut a, &mut b] {
        member.signal(Signal::SIGTERM);
        member.wait_exit(LONG);
    }
    g.assert_no_overlap();
}

#[test]
fn a_daemon_the_unlead_hook_starts_at_exit_does_not_outlive_neli_run() {
    let g = Group::new("hooks-daemon");
    let marker = format!("777{}", std::process::id());
    let _cleanup = KillSleeping(marker.clone());
    let daemon = g.dir.path().join("daemon.pid");
    // It takes a moment after starting the daemon: the exit waits for it,
    // within --hook-timeout and a margin.
    // (Its pid is written first: under load the hook's shell may take
    // seconds to reach a line after the sleep.)
    let hook = format!("setsid sleep {marker} >/dev/null 2>&1 & echo $! > {}; sleep 0.3", daemon.display());
    let mut a = g.member("a", &["--on-unlead", &hook, "--hook-timeout", "10s"], &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "a leads", || g.starts().len() == 1 && g.lock_held());
    a.signal(Signal::SIGINT);
    a.wait_exit(LONG);
    let pid: i32 = std::fs::read_to_string(&daemon).expect("the unlead hook ran").trim().parse().unwrap();
    // The hook's keeper killed it once the hook's shell exited, before
    // neli-run could.
    assert!(!alive(pid) && sleeping(&marker).is_empty(), "the daemon outlived neli-run: {:?}", sleeping(&marker));
    g.assert_no_overlap();
}
