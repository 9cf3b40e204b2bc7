//! NELI's roles (`--roles N`): one command per role, each role on exactly one
//! member at a time, spread evenly, and only the roles of a member that
//! comes or goes move. Every role's command runs under an overlap detector
//! of its own (`DIR/{role}`, replaced per role by neli-run): a second start
//! of one role while its lock is held is an overlap.

use std::collections::BTreeMap;
use std::time::Duration;

use neli_proof::detector::Detector;
use nix::sys::signal::Signal;

use crate::util::{run, stays_false, wait_until, Broker, Group, Member};

/// A group whose members run `--roles n`, each role's command guarded by
/// its own detector.
struct Roles {
    g: Group,
    n: usize,
    detectors: Vec<Detector>,
}

impl Roles {
    fn new(test: &str, n: usize) -> Roles {
        Roles::on(Group::new(test), n)
    }

    fn on(g: Group, n: usize) -> Roles {
        let detectors =
            (0..n).map(|j| Detector::new(g.dir.path().join("roles").join(j.to_string())).unwrap()).collect();
        Roles { g, n, detectors }
    }

    /// A member of the group running `sleep 1000` for each role it owns.
    fn member(&self, name: &str) -> Member {
        self.member_running(name, &[], &["sleep", "1000"])
    }

    /// A member with `extra` flags running `command` for each role it owns.
    fn member_running(&self, name: &str, extra: &[&str], command: &[&str]) -> Member {
        let n = self.n.to_string();
        let guarded = self.detectors[0].wrap()[0].clone();
        let dir = self.g.dir.path().join("roles").join("{role}").display().to_string();
        let command = [&[guarded.as_str(), &dir][..], command].concat();
        self.g.member_unguarded(name, &[&["--roles", &n][..], extra].concat(), &command)
    }

    /// Each role's starts so far: (member, token), in order.
    fn starts(&self) -> Vec<Vec<(String, i64)>> {
        self.detectors.iter().map(Detector::starts).collect()
    }

    /// Who runs each role now (the newest start of each, all locks held),
    /// or None while some role runs nowhere.
    fn holders(&self) -> Option<Vec<String>> {
        let held = self.detectors.iter().all(Detector::lock_held);
        let newest: Option<Vec<String>> = self.starts().into_iter().map(|s| s.last().map(|s| s.0.clone())).collect();
        newest.filter(|_| held)
    }

    /// How many roles each member runs now.
    fn spread(&self) -> BTreeMap<String, usize> {
        let mut spread = BTreeMap::new();
        for holder in self.holders().unwrap_or_default() {
            *spread.entry(holder).or_insert(0) += 1;
        }
        spread
    }

    /// Waits until the roles are spread over `members` members, at most
    /// `most` each, every role running.
    fn wait_spread(&self, members: usize, most: usize) {
        wait_until(self.g.broker.timing.takeover(), &format!("{} roles spread over {members} members", self.n), || {
            let spread = self.spread();
            spread.len() == members && spread.values().all(|&k| k <= most)
        });
    }

    /// Asserts that since `before`, each role held by `who` (by `holders`)
    /// started once more, elsewhere or on `who`, and no other role started
    /// again.
    fn assert_only_moved(&self, before: &[Vec<(String, i64)>], holders: &[String], who: &str) {
        for (j, (after, before)) in self.starts().iter().zip(before).enumerate() {
            let moved = after.len() - before.len();
            assert_eq!(moved, usize::from(holders[j] == who), "role {j} (held by {}): {after:?}", holders[j]);
        }
    }

    /// Each role's tokens grow, across its owners.
    fn assert_tokens_increase(&self) {
        for (j, s) in self.starts().iter().enumerate() {
            assert!(s.windows(2).all(|w| w[0].1 < w[1].1), "role {j}'s tokens must increase: {s:?}");
        }
    }

    fn assert_no_overlap(&self) {
        for (j, d) in self.detectors.iter().enumerate() {
            assert!(!d.starts().is_empty(), "role {j} never ran: nothing was checked");
            assert_eq!(d.overlaps(), Vec::<String>::new(), "two commands of role {j} ran at once");
        }
    }

    fn assert_no_orphan(&self) {
        wait_until(Duration::from_secs(5), "no role's lock is held once every member exited", || {
            self.detectors.iter().all(|d| !d.lock_held())
        });
    }
}

#[test]
fn roles_spread_evenly_and_each_runs_once() {
    let r = Roles::new("roles-spread", 6);
    let members: Vec<Member> = ["a", "b", "c"].iter().map(|n| r.member(n)).collect();
    r.wait_spread(3, 2);
    let starts = r.starts();
    assert!(
        stays_false(r.g.broker.timing.session, || r.starts() != starts),
        "a role started again in a stable group: {:?}",
        r.starts()
    );
    r.assert_tokens_increase();
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// A member that stops hands over only its own roles: the others' commands
/// never stop.
#[test]
fn a_graceful_leave_moves_only_the_leavers_roles() {
    let r = Roles::new("roles-leave", 6);
    let mut members: Vec<Member> = ["a", "b", "c"].iter().map(|n| r.member(n)).collect();
    r.wait_spread(3, 2);
    let before = r.starts();
    let holders = r.holders().unwrap();
    members[2].signal(Signal::SIGTERM);
    assert_eq!(members[2].wait_exit(r.g.broker.timing.takeover()).code(), Some(0), "{}", members[2].log());
    r.wait_spread(2, 3);
    r.assert_only_moved(&before, &holders, "c");
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// A member killed with SIGKILL: its shims kill its commands, and its roles
/// start elsewhere once the group expires its session; no other role moves.
#[test]
fn a_crashed_members_roles_move_and_only_they() {
    let r = Roles::new("roles-crash", 4);
    let mut members: Vec<Member> = ["a", "b"].iter().map(|n| r.member(n)).collect();
    r.wait_spread(2, 2);
    let before = r.starts();
    let holders = r.holders().unwrap();
    members[0].signal(Signal::SIGKILL);
    members[0].wait_exit(r.g.broker.timing.takeover());
    r.wait_spread(1, 4);
    r.assert_only_moved(&before, &holders, "a");
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// A member joining takes its share (at most ceil(roles / members)) and
/// stops no role it does not take.
#[test]
fn a_join_takes_its_share_and_stops_no_other_role() {
    let r = Roles::new("roles-join", 4);
    let mut members: Vec<Member> = ["a", "b"].iter().map(|n| r.member(n)).collect();
    r.wait_spread(2, 2);
    let before = r.starts();
    members.push(r.member("c"));
    r.wait_spread(3, 2);
    let holders = r.holders().unwrap();
    let taken = holders.iter().filter(|h| *h == "c").count();
    assert!((1..=2).contains(&taken), "c took {taken} roles: {holders:?}");
    r.assert_only_moved(&before, &holders, "c");
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// A join's revoke holds the consumer thread until the revoked role's
/// command is gone, and this one ignores SIGTERM for the whole grace, longer
/// than the heartbeat deadline: the roles the member keeps read none of
/// their heartbeats back meanwhile, yet must not be fenced (the broker's
/// acknowledgements of their records keep them fresh).
#[test]
fn a_join_whose_revoked_command_is_slow_to_stop_stops_no_other_role() {
    // Grace 4.5 s against a 2 s deadline (tansu's coordinator heartbeat of
    // 600 ms still fits the session).
    let timing = ["--session-timeout", "6s", "--heartbeat-deadline", "2s", "--grace", "4500ms"];
    slow_revoke(Roles::new("roles-slow-revoke", 4), &timing);
}

/// The same on a cluster of three, where most partitions are led by a
/// broker that is not the coordinator. librdkafka pauses every partition
/// of ours while its rebalance callback runs and resumes them after,
/// without waking the thread that fetches from their leader: with no other
/// traffic to that broker, the kept roles read nothing back for up to a
/// second after the revoke (its 1 s idle tick), past the 0.5 s that the
/// grace (4.7 s, within the lease) leaves of the resume window (5.2 s),
/// and were fenced (the cluster soak's needless moves). neli-run wakes
/// those fetchers itself. Without that, this test failed 4 of 5 runs (a
/// kept partition's fetcher waits out what is left of its tick, which may
/// be short: it fails most runs, not every one).
#[test]
fn on_a_cluster_a_join_whose_revoked_command_is_slow_to_stop_stops_no_other_role() {
    let r = Roles::on(Group::on(Broker::cluster(3), "roles-slow-revoke-cluster"), 6);
    slow_revoke(r, &["--session-timeout", "6s", "--heartbeat-deadline", "5s", "--grace", "4700ms"]);
}

/// Two members of `r`, a third joining: each revoked command ignores
/// SIGTERM, and stops at the end of the grace or its lease, whichever
/// comes first.
fn slow_revoke(r: Roles, timing: &[&str]) {
    let grace = timing.iter().position(|t| *t == "--grace").and_then(|i| humantime::parse_duration(timing[i + 1]).ok());
    let grace = grace.expect("a --grace");
    let stubborn = ["sh", "-c", "trap '' TERM; sleep 1000"];
    let mut members: Vec<Member> = ["a", "b"].iter().map(|n| r.member_running(n, timing, &stubborn)).collect();
    r.wait_spread(2, r.n.div_ceil(2));
    let before = r.starts();
    members.push(r.member_running("c", timing, &stubborn));
    r.wait_spread(3, r.n.div_ceil(3));
    let holders = r.holders().unwrap();
    r.assert_only_moved(&before, &holders, "c");
    for m in &members[..2] {
        // The margin is the test (a kept role's reader must be woken at
        // once after the revoke): a machine so loaded that the revoked
        // command's SIGKILL and exit came late has spent it already.
        let late = revoke_overrun(&m.log(), grace).filter(|late| *late > Duration::from_millis(200));
        match late {
            Some(late) => eprintln!("{}: a revoke ran {late:?} past its grace (load): fences not judged", m.name),
            None => assert!(!m.log().contains("fenced"), "{}", m.log()),
        }
    }
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// How long past `grace` the first revoke in `log` that took the whole
/// grace lasted: from the revoke to its command's exit at the SIGKILL.
fn revoke_overrun(log: &str, grace: Duration) -> Option<Duration> {
    let at = |line: &str| humantime::parse_rfc3339_weak(line.split_whitespace().next()?).ok();
    let lines: Vec<&str> = log.lines().collect();
    let killed = lines.iter().position(|l| l.contains("child still running after the grace period"))?;
    let revoked = lines[..killed].iter().rev().find(|l| l.contains("revoked: the partition was taken away"))?;
    let exited = lines[killed..].iter().find(|l| l.contains("child exited status=killed by SIGKILL"))?;
    at(exited)?.duration_since(at(revoked)?).ok()?.checked_sub(grace)
}

/// A drain by the health check (`--health-cmd 'test ! -e FILE'`, the file
/// touched): the member stops its roles' commands, leaves the group and
/// stays up; its roles, and only they, move to the others. The file
/// removed, it joins again and takes its share back; no role ever runs
/// twice at once.
#[test]
fn a_member_drained_by_its_health_check_hands_its_roles_over_and_takes_them_back() {
    let r = Roles::new("roles-drain", 6);
    let drain = |name: &str| r.g.dir.path().join(format!("drain-{name}"));
    let mut members: Vec<Member> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            let check = format!("test ! -e {}", drain(n).display());
            let health = ["--health-cmd", &check, "--health-interval", "100ms", "--health-retries", "1"];
            // Each role's command takes its own time to stop (role j:
            // 0.j s), so that a member's roles stand aside one by one.
            let slow = "trap 'sleep 0.$NELI_ROLE; exit 0' TERM; while :; do sleep 0.1; done";
            r.member_running(n, &health, &["sh", "-c", slow])
        })
        .collect();
    r.wait_spread(3, 2);
    let before = r.starts();
    let holders = r.holders().unwrap();
    std::fs::write(drain("c"), "").unwrap();
    r.wait_spread(2, 3);
    r.assert_only_moved(&before, &holders, "c");
    assert!(!members.iter_mut().any(|m| m.exited()), "a drained member stays up");
    let group = ["status", "-b", r.g.broker.address.as_str(), "-g", r.g.name.as_str()];
    wait_until(r.g.broker.timing.takeover(), "status says c is drained", || run(&group).1.contains("no role: c (host"));
    let (_, out) = run(&group);
    assert!(out.contains("unhealthy (--health-cmd fails: it takes no role)"), "{out}");
    // It left the group once, not once per role.
    let log = members[2].log();
    assert_eq!(log.matches("staying out of the group until the health check passes").count(), 1, "{log}");
    std::fs::remove_file(drain("c")).unwrap();
    r.wait_spread(3, 2);
    r.assert_tokens_increase();
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// `neli-run drain MEMBER`: the member stops its roles' commands, leaves
/// the group and stays up; its roles, and only they, move to the others,
/// and the command returns once it says it is drained. `status`, its log
/// and /metrics say so; `undrain` brings it back to take its share. A
/// member of `--no-wake` (no wake watcher of its own) hears it too. A drain
/// of a member that is not live, or of the last that may lead, is refused.
#[test]
fn neli_run_drain_moves_a_members_roles_off_it_and_undrain_brings_it_back() {
    let r = Roles::new("roles-drain-cli", 6);
    let metrics = crate::metrics::free_addr();
    let mut members: Vec<Member> =
        [("a", &[][..]), ("b", &[][..]), ("c", &["--no-wake", "--metrics-addr", &metrics][..])]
            .iter()
            .map(|(n, extra)| r.member_running(n, extra, &["sleep", "1000"]))
            .collect();
    r.wait_spread(3, 2);
    let kafka = ["-b", r.g.broker.address.as_str(), "-g", r.g.name.as_str()];
    let (code, out) = run(&[&["drain", "nobody"][..], &kafka].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("nobody is not a live member of group") && out.contains("a, b, c"), "{out}");
    let before = r.starts();
    let holders = r.holders().unwrap();
    let (code, out) = run(&[&["drain", "c"][..], &kafka].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("c (host") && out.contains("drained (offset"), "{out}");
    // Said once its commands are gone: each one's exit is in c's log before
    // its drained candidacy is written.
    let c_ran = holders.iter().filter(|h| *h == "c").count();
    let log = members[2].log();
    let since = log.split_once("drained by").map_or("", |(_, since)| since);
    assert_eq!(since.matches("child exited").count(), c_ran, "{log}");
    r.wait_spread(2, 3);
    r.assert_only_moved(&before, &holders, "c");
    assert!(!members.iter_mut().any(|m| m.exited()), "a drained member stays up");
    let log = members[2].log();
    assert!(log.contains("drained by user") && log.contains("out of the group until `neli-run undrain`"), "{log}");
    let (_, status) = run(&[&["status"][..], &kafka].concat());
    assert!(
        status.contains("no role: c (host") && status.contains("drained (`neli-run undrain` brings it back)"),
        "{status}"
    );
    let (_, json) = run(&[&["status", "--json"][..], &kafka].concat());
    let json: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let c = json["standbys"].as_array().unwrap().iter().find(|s| s["name"] == "c").cloned().unwrap_or_default();
    assert_eq!((&c["drained"], &c["healthy"]), (&serde_json::json!(true), &serde_json::json!(true)), "{json}");
    let scraped = crate::metrics::get(&metrics, "/metrics").unwrap().1;
    assert!(scraped.lines().any(|l| l == "neli_drained 1"), "{scraped}");
    let (code, out) = run(&[&["drain", "c"][..], &kafka].concat());
    assert_eq!((code, out.contains("drained already: nothing to do")), (0, true), "{out}");
    // b drained too, a alone may lead: draining a is refused.
    assert_eq!(run(&[&["drain", "b"][..], &kafka].concat()).0, 0);
    r.wait_spread(1, 6);
    let (code, out) = run(&[&["drain", "a"][..], &kafka].concat());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no other member may take over from a") && out.contains("--force"), "{out}");
    for name in ["b", "c"] {
        let (code, out) = run(&[&["undrain", name][..], &kafka].concat());
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("{name} (host")) && out.contains("undrained (offset"), "{out}");
    }
    r.wait_spread(3, 2);
    let scraped = crate::metrics::get(&metrics, "/metrics").unwrap().1;
    assert!(scraped.lines().any(|l| l == "neli_drained 0"), "{scraped}");
    r.assert_tokens_increase();
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// `--leader-file` with `{role}`: one file per role, which exists on the
/// member leading that role only, names the role and its command's token,
/// and goes when the member stops.
#[test]
fn each_role_has_a_leader_file_of_its_own() {
    let r = Roles::new("roles-leader-file", 4);
    let file = |name: &str, j: usize| r.g.dir.path().join(format!("{name}-leader-{j}"));
    let read = |name: &str, j: usize| std::fs::read_to_string(file(name, j)).ok();
    let member = |name: &str| {
        let path = r.g.dir.path().join(format!("{name}-leader-{{role}}"));
        r.member_running(name, &["--leader-file", path.to_str().unwrap()], &["sleep", "1000"])
    };
    let mut members = vec![member("a"), member("b")];
    r.wait_spread(2, 2);
    // Each role's file is its holder's, naming the role and the token its
    // command runs with.
    let shown = |j: usize, holder: &str| {
        let token = r.starts()[j].last().map(|s| format!("token={}", s.1));
        let other = if holder == "a" { "b" } else { "a" };
        read(other, j).is_none()
            && read(holder, j).is_some_and(|text| {
                text.lines().any(|l| l == format!("role={j}")) && text.lines().any(|l| Some(l.to_string()) == token)
            })
    };
    let holders = r.holders().unwrap();
    wait_until(r.g.broker.timing.takeover(), "each role's leader file is its holder's", || {
        holders.iter().enumerate().all(|(j, h)| shown(j, h))
    });
    members[1].signal(Signal::SIGTERM);
    members[1].wait_exit(r.g.broker.timing.takeover());
    assert!((0..4).all(|j| read("b", j).is_none()), "b's files are removed when it exits");
    r.wait_spread(1, 4);
    wait_until(r.g.broker.timing.takeover(), "a's leader files for every role", || (0..4).all(|j| shown(j, "a")));
    drop(members);
    r.assert_no_overlap();
}

/// With roles, each role's hooks follow that role: --on-lead once per role
/// with its role and token, --on-exit and --on-unlead for each as the member
/// stops.
#[test]
fn each_roles_hooks_follow_that_role() {
    let r = Roles::new("roles-hooks", 3);
    let log = r.g.dir.path().join("hooks");
    let line =
        format!("echo \"$NELI_HOOK $NELI_ROLE $NELI_ROLES $NELI_FENCING_TOKEN $NELI_REASON\" >> {}", log.display());
    let hooks = ["--on-lead", &line, "--on-unlead", &line, "--on-exit", &line];
    let mut a = r.member_running("a", &hooks, &["sleep", "1000"]);
    let told = |hook: &str| {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let mut lines: Vec<String> = text.lines().filter(|l| l.starts_with(hook)).map(String::from).collect();
        lines.sort();
        lines
    };
    // The hook and the guarded command start side by side: wait for both.
    r.wait_spread(1, 3);
    wait_until(r.g.broker.timing.takeover(), "a lead hook per role", || told("lead ").len() == 3);
    let tokens: Vec<i64> = r.starts().iter().map(|s| s.last().expect("the role started").1).collect();
    let each = |what: &str| (0..3).map(|j| format!("{what} {j} 3 {} ", tokens[j])).collect::<Vec<_>>();
    let expect = |hook: &str, reason: &str| each(hook).into_iter().map(|l| l + reason).collect::<Vec<_>>();
    assert_eq!(told("lead "), expect("lead", "elected"));
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(r.g.broker.timing.takeover()).code(), Some(0), "{}", a.log());
    assert_eq!(told("exit "), expect("exit", "stopped"), "{}", a.log());
    assert_eq!(told("unlead "), expect("unlead", "exiting"), "{}", a.log());
}

/// The command of each role is told its role, in `{role}` and its
/// environment.
#[test]
fn each_roles_command_is_told_its_role() {
    let g = Group::new("roles-env");
    let out = g.dir.path().join("out-{role}").display().to_string();
    let script = "echo \"$NELI_ROLE $NELI_ROLES $1 $NELI_FENCING_TOKEN\" > \"$0\"; exec sleep 1000";
    let m = g.member_unguarded("a", &["--roles", "3"], &["sh", "-c", script, &out, "{role}"]);
    let read = |j: usize| std::fs::read_to_string(g.dir.path().join(format!("out-{j}"))).unwrap_or_default();
    wait_until(g.broker.timing.takeover(), "every role's command ran", || (0..3).all(|j| !read(j).is_empty()));
    for j in 0..3 {
        let words: Vec<String> = read(j).split_whitespace().map(String::from).collect();
        assert_eq!(words[..3], [j.to_string(), "3".into(), j.to_string()], "role {j}: {words:?}");
        assert!(words[3].parse::<i64>().is_ok(), "role {j}'s token: {words:?}");
    }
    drop(m);
}

/// A topic made for fewer roles is refused with the command that fixes it.
#[test]
fn a_topic_with_fewer_partitions_than_roles_is_refused() {
    let g = Group::new("roles-topic");
    let mut one = g.member_unguarded("a", &[], &["true"]);
    assert_eq!(one.wait_exit(g.broker.timing.takeover()).code(), Some(0), "{}", one.log());
    let mut three = g.member_unguarded("b", &["--roles", "3"], &["sleep", "1000"]);
    assert_eq!(three.wait_exit(g.broker.timing.takeover()).code(), Some(78), "{}", three.log());
    let log = three.log();
    assert!(log.contains("has 1 partition(s), and --roles 3 needs 3"), "{log}");
    assert!(log.contains(&format!("--alter --topic {}.neli --partitions 3", g.name)), "{log}");
}

#[test]
fn what_roles_do_not_support_yet_is_refused_by_name() {
    let cases: [(&[&str], &str); 5] = [
        (&["--restart", "never"], "--restart never is for a command run once per tick from cron"),
        (&["--restart", "on-failure"], "--restart on-failure is for a command run once per tick from cron"),
        (&["--warm"], "--warm does not work with --roles 4 yet"),
        (&["--every", "1m", "--restart", "always"], "--restart always"),
        (
            &["--leader-file", "/tmp/x"],
            "--leader-file /tmp/x: with --roles 4, each role has a leader file of its own: put {role} in the path",
        ),
    ];
    for (extra, said) in cases {
        let args: Vec<&str> = ["-g", "g", "--roles", "4"].iter().chain(extra).chain(&["--", "true"]).copied().collect();
        let (code, out) = run(&args);
        assert_eq!(code, 2, "{extra:?}: {out}");
        assert!(out.contains(said), "{extra:?}: {out}");
    }
    for bad in ["0", "1025", "x"] {
        let (code, out) = run(&["-g", "g", "--roles", bad, "--", "true"]);
        assert_eq!(code, 2, "--roles {bad}: {out}");
        assert!(out.contains("--roles"), "--roles {bad}: {out}");
    }
}

/// `status` lists who leads each role (text and JSON); `yield`, which
/// moves the one leader, refuses a group of roles and writes nothing, and
/// so does `yield --role J`.
#[test]
fn status_shows_each_roles_leader_and_yield_refuses_roles() {
    let r = Roles::new("roles-status", 3);
    let members: Vec<Member> = ["a", "b"].iter().map(|n| r.member(n)).collect();
    r.wait_spread(2, 2);
    let holders = r.holders().unwrap();
    let group = ["-b", r.g.broker.address.as_str(), "-g", r.g.name.as_str()];
    let (code, out) = run(&[&["status"][..], &group].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 of 3 roles led"), "{out}");
    for (j, holder) in holders.iter().enumerate() {
        assert!(out.contains(&format!("role {j}: {holder} (host")), "role {j} is {holder}'s: {out}");
    }
    let (code, out) = run(&[&["status", "--json"][..], &group].concat());
    assert_eq!(code, 0, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).expect(&out);
    let named: Vec<&str> =
        json["roles"].as_array().unwrap().iter().map(|r| r["leader"]["name"].as_str().unwrap()).collect();
    assert_eq!(named, holders, "{out}");
    let starts = r.starts();
    let (code, out) = run(&[&["yield"][..], &group].concat());
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("runs 3 roles (--roles): yield works on a single leader only"), "{out}");
    assert!(out.contains("pause --role J"), "names what holds one role: {out}");
    // Nor one role on its own: the assignor would hand it straight back.
    let (code, out) = run(&[&["yield", "--role", "1"][..], &group].concat());
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("yield --role 1 works on a single leader only"), "{out}");
    assert!(out.contains("drain MEMBER"), "names what moves roles: {out}");
    assert!(stays_false(r.g.broker.timing.session, || r.starts() != starts), "a role moved: {:?}", r.starts());
    drop(members);
    r.assert_no_overlap();
}

/// `pause --role J` holds one role where it is (with --stop its command
/// stops, and no other role's does); `pause` holds every role, each
/// acknowledged by its owner; `resume --role J` starts that role again and
/// no other; `status` shows each pause with the command that ends it.
#[test]
fn pause_holds_one_role_or_every_role_and_resume_starts_them_again() {
    let r = Roles::new("roles-pause", 3);
    let members: Vec<Member> = ["a", "b"].iter().map(|n| r.member(n)).collect();
    r.wait_spread(2, 2);
    let holders = r.holders().unwrap();
    let group = ["-b", r.g.broker.address.as_str(), "-g", r.g.name.as_str()];
    let before = r.starts();
    let (code, out) = run(&[&["pause", "--role", "1", "--stop"][..], &group].concat());
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("role 1: pause (offset ") && out.contains(&format!("acknowledged by {} (host", holders[1])),
        "{out}"
    );
    assert!(out.contains("its command is stopped") && !out.contains("role 0") && !out.contains("role 2"), "{out}");
    assert!(!r.detectors[1].lock_held(), "role 1's command is gone once its owner says so");
    assert!(r.detectors[0].lock_held() && r.detectors[2].lock_held(), "the other roles run on");
    let (_, text) = run(&[&["status"][..], &group].concat());
    assert!(text.contains("paused since") && text.contains("`neli-run resume --role 1` ends it"), "{text}");
    let (_, json) = run(&[&["status", "--json"][..], &group].concat());
    let json: serde_json::Value = serde_json::from_str(&json).expect(&json);
    let paused: Vec<bool> = json["roles"].as_array().unwrap().iter().map(|r| r["paused"] == true).collect();
    assert_eq!(paused, [false, true, false], "{json}");

    // Every role: each owner acknowledges; the running ones run on.
    let (code, out) = run(&[&["pause"][..], &group].concat());
    assert_eq!(code, 0, "{out}");
    for j in 0..3 {
        assert!(out.contains(&format!("role {j}: pause (offset ")), "role {j}: {out}");
    }
    assert!(out.contains("its command runs on until it ends, and does not start again"), "{out}");
    // One role resumed: it starts again, on whichever member owns it.
    let (code, out) = run(&[&["resume", "--role", "1"][..], &group].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("role 1: resume (offset "), "{out}");
    wait_until(r.g.broker.timing.takeover(), "role 1 runs again", || r.detectors[1].lock_held());
    let (code, out) = run(&[&["resume"][..], &group].concat());
    assert_eq!(code, 0, "{out}");
    let after = r.starts();
    assert_eq!((after[0].len(), after[2].len()), (before[0].len(), before[2].len()), "{after:?}");
    assert_eq!(after[1].len(), before[1].len() + 1, "role 1 started once again: {after:?}");

    let (code, out) = run(&[&["pause", "--role", "3"][..], &group].concat());
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("has no role 3: it runs 3 roles (0 to 2)"), "{out}");
    drop(members);
    r.assert_no_overlap();
}

/// A member frozen (SIGSTOP): each of its shims kills its command once the
/// lease runs out, the group gives its roles to the others, and thawed it
/// takes its share back; no role ever runs twice at once.
#[test]
fn a_frozen_members_roles_move_and_come_back_without_overlap() {
    let r = Roles::new("roles-sigstop", 4);
    let members: Vec<Member> = ["a", "b"].iter().map(|n| r.member(n)).collect();
    r.wait_spread(2, 2);
    members[0].signal(Signal::SIGSTOP);
    r.wait_spread(1, 4);
    assert_eq!(r.spread().keys().collect::<Vec<_>>(), ["b"], "b runs every role while a is frozen");
    members[0].signal(Signal::SIGCONT);
    r.wait_spread(2, 2);
    r.assert_tokens_increase();
    drop(members);
    r.assert_no_overlap();
    r.assert_no_orphan();
}

/// `--overlap`: a member that stops lets its partition go at once, and the
/// next owner starts while the old command still finishes within its grace;
/// without it, the next owner starts only once the old command is gone. The
/// old command takes 15 s to finish, longer than any broker here takes to
/// hand a partition over (tansu: up to 11 s seen).
#[test]
fn with_overlap_the_next_owner_starts_while_the_old_command_finishes() {
    for overlap in [true, false] {
        let g = Group::new(if overlap { "overlap" } else { "exclusive" });
        let log = g.dir.path().join("log").display().to_string();
        let script = "trap 'sleep 15; echo end $NELI_NAME >> \"$0\"; exit 0' TERM; echo start $NELI_NAME >> \"$0\"; \
                      while :; do sleep 0.1; done";
        let timing = ["--session-timeout", "30s", "--heartbeat-deadline", "25s", "--grace", "20s"];
        let mut extra = [&timing[..], &["--restart", "always"]].concat();
        if overlap {
            extra.push("--overlap");
        }
        let lines = || std::fs::read_to_string(&log).unwrap_or_default().lines().map(String::from).collect::<Vec<_>>();
        let mut a = g.member_unguarded("a", &extra, &["sh", "-c", script, &log]);
        wait_until(g.broker.timing.takeover(), "a runs its command", || lines() == ["start a"]);
        let b = g.member_unguarded("b", &extra, &["sh", "-c", script, &log]);
        wait_until(g.broker.timing.takeover(), "b is a standby", || b.joined_as_standby());
        a.signal(Signal::SIGTERM);
        let started = || lines().contains(&"start b".to_string());
        wait_until(Duration::from_secs(60), "b runs its command", started);
        let expected: &[&str] = if overlap { &["start a", "start b"] } else { &["start a", "end a", "start b"] };
        assert_eq!(lines(), expected, "overlap {overlap}:\n{}", b.log());
        a.wait_exit(Duration::from_secs(60));
    }
}

/// Roles on a schedule: each role's command runs once per due time of
/// `--every`, on the role's owner; a member killed -9 hands its roles on,
/// and no (role, due time) runs twice, on the same member or another.
#[test]
fn each_roles_command_runs_once_per_due_time_across_the_members() {
    let r = Roles::new("roles-every", 3);
    let runs = r.g.dir.path().join("runs");
    let line = format!("echo \"$NELI_ROLE $NELI_DUE $NELI_NAME\" >> {}", runs.display());
    let member = |name: &str| r.member_running(name, &["--every", "1s"], &["sh", "-c", &line]);
    // (role, due, member) of every run so far.
    let read = || -> Vec<(usize, String, String)> {
        let text = std::fs::read_to_string(&runs).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Some((f.first()?.parse().ok()?, f.get(1)?.to_string(), f.get(2)?.to_string()))
            })
            .collect()
    };
    let ran_by = |who: &str, since: usize| -> Vec<usize> {
        (0..3).map(|j| read().iter().skip(since).filter(|(role, _, m)| *role == j && m == who).count()).collect()
    };
    let t = r.g.broker.timing;
    let mut a = member("a");
    wait_until(t.takeover(), "a runs every role", || ran_by("a", 0).iter().all(|&n| n >= 1));
    let b = member("b");
    wait_until(t.takeover(), "b runs some roles", || ran_by("b", 0).iter().any(|&n| n >= 2));
    let before = read().len();
    a.signal(Signal::SIGKILL);
    a.wait_exit(t.takeover());
    wait_until(t.takeover(), "b runs every role after a's death", || ran_by("b", before).iter().all(|&n| n >= 2));
    // `status` shows each role's schedule under it: next due, last run.
    let group = ["-b", r.g.broker.address.as_str(), "-g", r.g.name.as_str()];
    let (code, text) = run(&[&["status"][..], &group].concat());
    assert_eq!(code, 0, "{text}");
    for j in 0..3 {
        let at = text.find(&format!("role {j}: b ")).unwrap_or_else(|| panic!("role {j} led by b: {text}"));
        let under: Vec<&str> = text[at..].lines().skip(1).take(3).collect();
        // Or, read while the run of that due time goes on, after it.
        let next = ["    next run due ", "    next run: after the one due "];
        assert!(next.iter().any(|n| under[0].starts_with(n)), "{text}");
        assert_eq!(under[1], "    last run:", "{text}");
        assert!(under[2].starts_with("      due ") && under[2].contains(", by b (host "), "{text}");
    }
    let (code, json) = run(&[&["status", "--json"][..], &group].concat());
    assert_eq!(code, 0, "{json}");
    let json: serde_json::Value = serde_json::from_str(json.trim()).expect("JSON");
    for j in 0..3 {
        let schedule = &json["roles"][j]["schedule"];
        assert!(schedule["next_due"].is_string(), "{json}");
        assert!(schedule["runs"].as_array().is_some_and(|runs| !runs.is_empty()), "{json}");
    }
    drop(b);
    let mut seen = std::collections::BTreeSet::new();
    for (role, due, who) in read() {
        assert!(!due.is_empty(), "role {role} was told its due time");
        assert!(
            seen.insert((role, due.clone())),
            "role {role}'s run due {due} ran twice (again on {who}): {:?}",
            read()
        );
    }
    r.assert_no_overlap();
}
