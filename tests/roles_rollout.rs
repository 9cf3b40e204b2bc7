//! The rollout of docs/operations.md ("Changing --roles"), walked with the
//! real binary on the dev broker: three members move from `--roles 6` to
//! `--roles 8`. Every role's command runs under an overlap detector of its
//! own (`DIR/roles/{role}`: a second start of a role while its lock is
//! held is an overlap) and records which `--roles` its member ran with; a
//! watcher reads the locks throughout and keeps each role's longest time
//! run nowhere.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use neli_proof::detector::{locks_held, Detector};
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::util::{run, wait_for, wait_until, Group, Member};

/// The roles after the rollout; before it, `OLD`.
const NEW: usize = 8;
const OLD: usize = 6;

/// A group whose roles' commands are each guarded by a detector of their
/// own, roles 0 to 7 (those of 6 and 7 unused until the rollout).
struct Rollout {
    g: Group,
    detectors: Vec<Detector>,
}

impl Rollout {
    fn new() -> Rollout {
        let g = Group::new("roles-rollout");
        let detectors =
            (0..NEW).map(|j| Detector::new(g.dir.path().join("roles").join(j.to_string())).unwrap()).collect();
        Rollout { g, detectors }
    }

    /// Member `name` running with `--roles roles` (its log `NAME-ROLES.log`,
    /// so a restart keeps the old one's): each role's command records
    /// "ROLE MEMBER TOKEN ROLES" in `DIR/runs`, then sleeps.
    fn member(&self, name: &str, roles: usize) -> Member {
        let g = &self.g;
        let runs = g.dir.path().join("runs").display().to_string();
        let script = format!("echo \"$NELI_ROLE $NELI_NAME $NELI_FENCING_TOKEN {roles}\" >> '{runs}'; exec sleep 1000");
        let guarded = self.detectors[0].wrap()[0].clone();
        let dir = g.dir.path().join("roles").join("{role}").display().to_string();
        let mut argv = vec!["-b".to_string(), g.broker.address.clone(), "-g".into(), g.name.clone()];
        argv.extend(["--name".into(), name.into(), "--roles".into(), roles.to_string()]);
        argv.extend(g.broker.timing.args());
        argv.extend(["--".into(), guarded, dir, "sh".into(), "-c".into(), script]);
        Member::spawn(name, &[], &argv, &g.dir.path().join(format!("{name}-{roles}.log")), None)
    }

    /// Which roles run now (their locks held).
    fn running(&self) -> Vec<bool> {
        let ids: Vec<Option<String>> = self.detectors.iter().map(Detector::lock_id).collect();
        locks_held(&ids)
    }

    /// Who runs role `j` now (its newest start, its lock held).
    fn holder(&self, j: usize) -> Option<String> {
        let newest = self.detectors[j].starts().last().map(|s| s.0.clone());
        newest.filter(|_| self.detectors[j].lock_held())
    }

    /// Every start so far: (role, member, token, its member's --roles).
    fn runs(&self) -> Vec<(usize, String, i64, usize)> {
        let text = std::fs::read_to_string(self.g.dir.path().join("runs")).unwrap_or_default();
        let parse = |line: &str| {
            let w: Vec<&str> = line.split(' ').collect();
            Some((w.first()?.parse().ok()?, w.get(1)?.to_string(), w.get(2)?.parse().ok()?, w.get(3)?.parse().ok()?))
        };
        text.lines().filter_map(parse).collect()
    }

    /// `status` (exit status, text) and `status --json` (exit status, JSON).
    fn status(&self) -> ((i32, String), (i32, Value)) {
        let (address, group) = (&self.g.broker.address, &self.g.name);
        let text = run(&["status", "-b", address, "-g", group]);
        let (code, json) = run(&["status", "-b", address, "-g", group, "--json"]);
        (text, (code, serde_json::from_str(&json).unwrap_or(Value::Null)))
    }

    /// Waits until `status` (text and JSON) counts 8 roles, names the
    /// members on each --roles (`old` on 6, `new` on 8), and exits 0
    /// exactly while every role runs (the locks say), 1 while one runs
    /// nowhere.
    fn wait_status_follows(&self, old: &[&str], new: &[&str]) {
        let within = self.g.broker.timing.takeover() * 2;
        let mut last = Default::default();
        let followed = wait_for(within, || {
            let before = self.running();
            last = self.status();
            let after = self.running();
            if before != after {
                return false; // a role started or stopped meanwhile: read again
            }
            let ((code, text), (json_code, json)) = &last;
            let all = after.iter().all(|&r| r);
            let led = after.iter().filter(|&&r| r).count();
            let said = |roles: usize, names: &[&str]| {
                names.is_empty() || text.contains(&format!("\n    --roles {roles}: {}", names.join(", ")))
            };
            let members: Vec<(String, u64)> = json["members"]
                .as_array()
                .map(|m| {
                    m.iter().map(|m| (m["name"].as_str().unwrap_or("?").to_string(), m["roles"].as_u64().unwrap_or(0)))
                })
                .into_iter()
                .flatten()
                .collect();
            let each = |roles: u64, names: &[&str]| names.iter().all(|n| members.contains(&(n.to_string(), roles)));
            *code == i32::from(!all)
                && *json_code == *code
                && text.contains(&format!("{led} of {NEW} roles led"))
                && json["partitions"] == NEW
                && json["fresh"] == all
                && members.len() == old.len() + new.len()
                && each(OLD as u64, old)
                && each(NEW as u64, new)
                && match old.is_empty() {
                    true => !text.contains("members disagree") && json["roles_disagree"] == false,
                    false => {
                        text.contains(&format!(
                            "members disagree on --roles (the topic has {NEW} partition(s), so {NEW} roles)"
                        )) && said(OLD, old)
                            && text.contains(&format!("(runs roles 0-{} only", OLD - 1))
                            && said(NEW, new)
                            && json["roles_disagree"] == true
                    }
                }
        });
        assert!(followed, "status follows the rollout (on --roles 6: {old:?}, on 8: {new:?}): {last:?}");
    }
}

/// Reads the roles' locks every 50 ms until stopped, and returns each
/// role's longest time with no lock held, from when every old role first
/// ran (roles 6 and 7: from when each first ran).
fn watch(detectors: &[Detector], stop: Arc<AtomicBool>) -> JoinHandle<Vec<Duration>> {
    let dirs: Vec<_> = detectors.iter().map(|d| d.dir.clone()).collect();
    std::thread::spawn(move || {
        let detectors: Vec<Detector> = dirs.into_iter().map(|dir| Detector { dir }).collect();
        let mut seen: Vec<Option<Instant>> = vec![None; detectors.len()];
        let mut longest = vec![Duration::ZERO; detectors.len()];
        while !stop.load(Ordering::Relaxed) {
            let ids: Vec<Option<String>> = detectors.iter().map(Detector::lock_id).collect();
            let now = Instant::now();
            for (j, held) in locks_held(&ids).into_iter().enumerate() {
                if let Some(since) = seen[j] {
                    longest[j] = longest[j].max(now - since);
                }
                if held {
                    seen[j] = Some(now);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        longest
    })
}

/// docs/operations.md, "Changing --roles", step by step: m1 to m3 run
/// `--roles 6`; (1) the topic is raised to 8 partitions: the members keep
/// their roles, and `status` counts 8, names the three on --roles 6 and
/// exits 1; (2) each member in turn is stopped (SIGTERM) and started again
/// with `--roles 8` (m1 first, by mistake, with --roles 6 again: refused,
/// 78, naming --roles 8); (3) `status` follows each step and exits 0 with
/// "8 of 8 roles led" at the end. Throughout, no role runs on two members
/// at once, roles 0 to 5 never run nowhere for longer than a takeover,
/// each role's tokens grow, and roles 6 and 7 run only on members on
/// --roles 8.
#[test]
fn roles_rolled_out_from_6_to_8_member_by_member_run_each_role_once_and_status_follows() {
    let r = Rollout::new();
    let within = r.g.broker.timing.takeover();
    let names = ["m1", "m2", "m3"];
    let mut members: Vec<Member> = names.iter().map(|n| r.member(n, OLD)).collect();
    wait_until(within * 2, "roles 0 to 5 run, spread over the three members", || {
        let holders: Option<Vec<String>> = (0..OLD).map(|j| r.holder(j)).collect();
        holders.is_some_and(|h| names.iter().all(|n| h.contains(&n.to_string())))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(&r.detectors, stop.clone());
    let mut last = Default::default();
    let six = wait_for(within, || {
        last = r.status();
        let ((code, text), _) = &last;
        *code == 0 && text.contains(&format!("{OLD} of {OLD} roles led")) && !text.contains("members disagree")
    });
    assert!(six, "before: status says 6 of 6 roles led, exit 0: {last:?}");

    // Step 1: the topic's partitions raised. The members keep their roles
    // (no command restarts); status counts 8 roles at once, and roles 6
    // and 7 run nowhere: exit 1, the three named on --roles 6.
    let starts: Vec<usize> = r.detectors.iter().map(|d| d.starts().len()).collect();
    crate::roles_disagree::raise_partitions(&r.g, NEW);
    r.wait_status_follows(&names, &[]);
    let (_, text) = r.status().0;
    assert!(text.contains("role 6: no leader") && text.contains("role 7: no leader"), "{text}");
    let now: Vec<usize> = r.detectors.iter().map(|d| d.starts().len()).collect();
    assert_eq!(now, starts, "raising the partitions restarted no role: {:?}", r.runs());

    // Step 2: each member in turn stopped and started with --roles 8.
    for i in 0..names.len() {
        members[i].signal(Signal::SIGTERM);
        assert_eq!(members[i].wait_exit(within).code(), Some(0), "{}", members[i].log());
        wait_until(within, "the others run roles 0 to 5 again", || r.running()[..OLD].iter().all(|&h| h));
        if i == 0 {
            // Started again with the old flag: refused, naming the new one.
            let mut again = r.member(names[i], OLD);
            assert_eq!(again.wait_exit(within).code(), Some(78), "{}", again.log());
            let log = again.log();
            assert!(log.contains(&format!("has {NEW} partitions, and --roles {OLD} uses {OLD}")), "{log}");
            assert!(log.contains(&format!("run this member with --roles {NEW} too")), "{log}");
        }
        members[i] = r.member(names[i], NEW);
        wait_until(within * 2, "the restarted member runs a role", || {
            (0..NEW).any(|j| r.holder(j).as_deref() == Some(names[i]))
                && r.runs().iter().any(|run| run.1 == names[i] && run.3 == NEW)
        });
        r.wait_status_follows(&names[i + 1..], &names[..=i]);
    }

    // Step 3: done: every role runs, status exits 0 with 8 of 8.
    wait_until(within * 2, "all 8 roles run", || r.running().iter().all(|&h| h));
    r.wait_status_follows(&[], &names);
    let (_, text) = r.status().0;
    assert!(text.contains(&format!("{NEW} of {NEW} roles led")), "{text}");
    stop.store(true, Ordering::Relaxed);
    let longest = watcher.join().expect("the watcher");
    eprintln!(
        "each role's longest time run nowhere (ms): {:?}",
        longest.iter().map(Duration::as_millis).collect::<Vec<_>>()
    );

    let runs = r.runs();
    for (j, d) in r.detectors.iter().enumerate() {
        assert!(!d.starts().is_empty(), "role {j} never ran: {runs:?}");
        assert_eq!(d.overlaps(), Vec::<String>::new(), "two commands of role {j} ran at once: {runs:?}");
        let tokens: Vec<i64> = d.starts().iter().map(|s| s.1).collect();
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "role {j}'s tokens grow: {tokens:?}");
    }
    for (j, gap) in longest.iter().enumerate().take(OLD) {
        assert!(*gap < within, "role {j} ran nowhere for {gap:?}, over a takeover ({within:?}): {runs:?}");
    }
    let stray: Vec<_> = runs.iter().filter(|run| run.0 >= OLD && run.3 != NEW).collect();
    assert!(stray.is_empty(), "roles 6 and 7 ran only on members on --roles 8: {stray:?}");

    for m in &members {
        m.signal(Signal::SIGTERM);
    }
    for mut m in members {
        assert_eq!(m.wait_exit(within).code(), Some(0), "{}", m.log());
    }
    wait_until(Duration::from_secs(30), "no role's lock is held once every member exited", || {
        !r.running().iter().any(|&h| h)
    });
}
