//! Members of a fleet crontab whose files differ (findings C-3): `status`
//! says that a job's owner does not run it when the owner's file lacks it
//! (exit 1 while another member's file has it), that a job no member's
//! file has any more was removed (exit 0 for it: no work left undone),
//! and which members run by which file (its digest, as `cron check`
//! prints it); a member reading another's records of another file says
//! so, by name, with the fix.

use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::util::{run, wait_until, Group, Member};

/// Writes (by a rename, as an editor does) a crontab of `jobs`, each due
/// every 2 s and appending "JOB MEMBER" to `runs`.
fn write(g: &Group, file: &Path, jobs: &[&str]) {
    let runs = g.dir.path().join("runs").display().to_string();
    let text: String =
        jobs.iter().map(|job| format!("@every 2s  {job}  echo \"$NELI_JOB $NELI_NAME\" >> {runs}\n")).collect();
    let new = file.with_extension("new");
    std::fs::write(&new, text).unwrap();
    std::fs::rename(&new, file).unwrap();
}

/// A member running the crontab `file`.
fn member(g: &Group, name: &str, file: &Path) -> Member {
    let mut argv = vec!["-b".to_string(), g.broker.address.clone(), "-g".into(), g.name.clone()];
    argv.extend(["--name".into(), name.into()]);
    argv.extend(g.broker.timing.args());
    argv.extend(["--crontab".into(), file.display().to_string()]);
    Member::spawn(name, &[], &argv, &g.dir.path().join(format!("{name}.log")), None)
}

/// The digest `cron check` prints for `file`.
fn digest(file: &Path) -> String {
    let path = file.display().to_string();
    let (code, out) = run(&["cron", "check", &path]);
    assert_eq!(code, 0, "{out}");
    let line = out.lines().find(|l| l.starts_with(&format!("{path}: digest "))).unwrap_or_else(|| panic!("{out}"));
    line[path.len() + 9..].split(' ').next().unwrap().to_string()
}

/// `status` as text and as JSON (exit status, output).
fn status(g: &Group) -> ((i32, String), (i32, Value)) {
    let text = run(&["status", "-b", &g.broker.address, "-g", &g.name]);
    let (code, json) = run(&["status", "-b", &g.broker.address, "-g", &g.name, "--json"]);
    let json = serde_json::from_str(&json).unwrap_or(Value::Null);
    (text, (code, json))
}

/// `status --json`'s entry of `job`.
fn job<'a>(json: &'a Value, job: &str) -> Option<&'a Value> {
    json["roles"].as_array()?.iter().find(|r| r["job"] == job)
}

/// Who owns `job` (its fresh leader), as `status --json` says.
fn owner(json: &Value, name: &str) -> Option<String> {
    let entry = job(json, name).filter(|r| r["fresh"] == true)?;
    entry["leader"]["name"].as_str().map(str::to_string)
}

/// The text's lines of `job`: its own and those under it.
fn lines_of(text: &str, job: &str) -> String {
    let head = format!("  job {job} (role ");
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines.next().unwrap_or_default().to_string();
    lines.take_while(|l| l.starts_with("    ")).fold(first, |all, l| all + "\n" + l)
}

#[test]
fn status_names_a_job_its_owner_does_not_run_a_job_no_file_has_and_members_of_another_crontab() {
    let g = Group::new("crontab-agree");
    let within = g.broker.timing.takeover() * 2;
    let files: Vec<PathBuf> =
        ["m1", "m2", "m3", "t"].iter().map(|m| g.dir.path().join(format!("{m}.crontab"))).collect();
    for file in &files[..3] {
        write(&g, file, &["a", "b"]);
    }
    write(&g, &files[3], &["a", "b", "x"]);
    let (base, with_x) = (digest(&files[0]), digest(&files[3]));
    assert_ne!(base, with_x);

    // t places x (its own partition), then leaves: x's partition goes to a
    // member whose file lacks it, and no file has it any more.
    let mut t = member(&g, "t", &files[3]);
    wait_until(within, "t placed its jobs", || t.log().contains("job placed"));
    let mut members: Vec<Member> = ["m1", "m2", "m3"].iter().zip(&files).map(|(m, f)| member(&g, m, f)).collect();
    wait_until(within, "the members joined", || members.iter().all(|m| m.log().contains("job placed")));
    t.signal(Signal::SIGTERM);
    assert_eq!(t.wait_exit(within).code(), Some(0), "{}", t.log());

    // Removed: said so, no "next run was due ... ago" for ever; exit 0.
    let mut last = Default::default();
    let removed = crate::util::wait_for(within * 2, || {
        last = status(&g);
        let ((code, text), (json_code, json)) = &last;
        let x = lines_of(text, "x");
        *code == 0
            && *json_code == 0
            && x.contains("removed: no member's crontab has this job")
            && text.contains("2 of 3 roles led (1 removed from every member's crontab)")
            && !x.contains("next run")
            && job(json, "x").is_some_and(|r| r["state"] == "removed" && r["has_job"] == serde_json::json!([]))
            && job(json, "x").is_some_and(|r| r["schedule"]["next_due"].is_null())
            && ["a", "b"].iter().all(|j| job(json, j).is_some_and(|r| r["state"] == "runs"))
            && text.contains(&format!("every member runs by crontab digest {base}"))
    });
    assert!(removed, "x shown removed, exit 0: {last:?}");

    // Each member owns one job (the assignor balances). m_h, owning a or
    // b, gets x in its file: x's owner m_o still lacks it, and x runs
    // nowhere while m_h's file has it. Exit 1, both named.
    let mut json = Value::Null;
    wait_until(within * 2, "each member owns one job", || {
        json = status(&g).1 .1;
        let mut owners: Vec<String> = ["a", "b", "x"].iter().filter_map(|j| owner(&json, j)).collect();
        owners.sort();
        owners == ["m1", "m2", "m3"]
    });
    let o = owner(&json, "x").unwrap();
    let h = owner(&json, "a").unwrap();
    let index = |name: &str| ["m1", "m2", "m3"].iter().position(|m| *m == name).unwrap();
    write(&g, &files[index(&h)], &["a", "b", "x"]);
    members[index(&h)].signal(Signal::SIGHUP);
    wait_until(within, "m_h read its file again", || members[index(&h)].log().contains("crontab read again"));
    let said = format!("owner {o} does not run it (its crontab lacks the job); the crontab of {h} has it");
    let lacks = crate::util::wait_for(within * 2, || {
        last = status(&g);
        let ((code, text), (json_code, json)) = &last;
        *code == 1
            && *json_code == 1
            && lines_of(text, "x").contains(&said)
            && !lines_of(text, "x").contains("next run")
            && text.contains("members run by different crontabs:")
            && text.contains(&format!("digest {with_x}: {h}"))
            && text.contains("roll the same file to every member")
            && json["fresh"] == false
            && json["crontab_disagree"] == true
            && job(json, "x").is_some_and(|r| r["state"] == "owner-lacks-job" && r["has_job"] == serde_json::json!([h]))
    });
    assert!(lacks, "x shown not run by its owner, exit 1: {last:?}");
    let ran_x = |runs: &str| runs.lines().filter(|l| l.starts_with("x ")).count();
    let runs = || std::fs::read_to_string(g.dir.path().join("runs")).unwrap_or_default();
    let before = ran_x(&runs());
    let nowhere = crate::util::stays_false(std::time::Duration::from_secs(5), || ran_x(&runs()) > before);
    assert!(nowhere, "x (due every 2 s) runs nowhere meanwhile: {}", runs());

    // m_h stops: the member that takes its partition reads its records,
    // of another file, and says so by name, with the fix, once.
    let mut m_h = members.remove(index(&h));
    m_h.signal(Signal::SIGTERM);
    assert_eq!(m_h.wait_exit(within).code(), Some(0), "{}", m_h.log());
    let warning = format!("member {h} runs by another crontab than ours (digest {with_x}, ours {base})");
    wait_until(within * 2, "a member names m_h's crontab", || members.iter().any(|m| m.log().contains(&warning)));
    let log: String = members.iter().map(Member::log).collect();
    assert!(log.contains("roll the same file to every member") && log.contains("cron check FILE"), "{log}");
    for m in &members {
        assert!(m.log().matches(&warning).count() <= 1, "once: {}", m.log());
    }
    for mut m in members {
        m.signal(Signal::SIGTERM);
        m.wait_exit(within);
    }
}

/// Writes (by a rename) a crontab of `jobs` due every 2 s, every due time
/// run (`missed=all`), each run appending "JOB DUE MEMBER VERSION" (its due
/// time in ms since the epoch) to `runs`.
fn write_version(g: &Group, file: &Path, jobs: &[&str], version: &str) {
    let runs = g.dir.path().join("runs").display().to_string();
    let say = format!("echo \"$NELI_JOB $(date -d \"$NELI_DUE\" +%s%3N) $NELI_NAME {version}\" >> {runs}");
    let text: String = jobs.iter().map(|job| format!("@every 2s  {job}[missed=all]  {say}\n")).collect();
    let new = file.with_extension("new");
    std::fs::write(&new, text).unwrap();
    std::fs::rename(&new, file).unwrap();
}

/// The runs so far: (job, due, member, version).
fn versioned_runs(g: &Group) -> Vec<(String, u64, String, String)> {
    let text = std::fs::read_to_string(g.dir.path().join("runs")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split(' ').collect();
            Some((w.first()?.to_string(), w.get(1)?.parse().ok()?, w.get(2)?.to_string(), w.get(3)?.to_string()))
        })
        .collect()
}

/// Asserts that `job` ran each due time from its first run to its last
/// once: none twice, none lost (due every 2 s).
fn assert_each_due_time_once(runs: &[(String, u64, String, String)], job: &str) {
    let mut dues: Vec<u64> = runs.iter().filter(|r| r.0 == job).map(|r| r.1).collect();
    dues.sort_unstable();
    let twice: Vec<&[u64]> = dues.windows(2).filter(|w| w[0] == w[1]).collect();
    assert!(twice.is_empty(), "{job}: a due time ran twice: {twice:?} in {runs:?}");
    let lost: Vec<&[u64]> = dues.windows(2).filter(|w| w[1] - w[0] != 2000).collect();
    assert!(lost.is_empty(), "{job}: due times lost between {lost:?} in {runs:?}");
}

/// The rollout of docs/operations.md ("Rolling out a crontab"): three
/// members move from file A (jobs a, b, c) to file B (a and b with another
/// command, c dropped, d added) by SIGHUP, one at a time. Meanwhile
/// `status` names the members of each file; a and b run every due time
/// once throughout, by the file their owner has; d runs every due time
/// once from its first run; at the end every member runs by B's digest, c
/// shows removed, and `status` exits 0.
#[test]
fn a_crontab_rolled_out_member_by_member_runs_each_due_time_once_and_status_follows_it() {
    let g = Group::new("crontab-rollout");
    let within = g.broker.timing.takeover() * 2;
    let names = ["m1", "m2", "m3"];
    let files: Vec<PathBuf> = names.iter().map(|m| g.dir.path().join(format!("{m}.crontab"))).collect();
    for file in &files {
        write_version(&g, file, &["a", "b", "c"], "A");
    }
    let digest_a = digest(&files[0]);
    let members: Vec<Member> = names.iter().zip(&files).map(|(m, f)| member(&g, m, f)).collect();
    wait_until(within * 2, "each member owns one job", || {
        let json = status(&g).1 .1;
        let mut owners: Vec<String> = ["a", "b", "c"].iter().filter_map(|j| owner(&json, j)).collect();
        owners.sort();
        owners == names
    });
    let ran = |job: &str, version: &str| versioned_runs(&g).iter().filter(|r| r.0 == job && r.3 == version).count();
    wait_until(within, "a, b and c run by A", || ["a", "b", "c"].iter().all(|j| ran(j, "A") >= 2));

    for (i, name) in names.iter().enumerate() {
        write_version(&g, &files[i], &["a", "b", "d"], "B");
        members[i].signal(Signal::SIGHUP);
        wait_until(within, "the member read its file again", || members[i].log().contains("crontab read again"));
        if i < names.len() - 1 {
            let digest_b = digest(&files[i]);
            let said = format!("digest {digest_b}: {}", names[..=i].join(", "));
            let mut last = String::new();
            let shown = crate::util::wait_for(within, || {
                last = status(&g).0 .1;
                last.contains("members run by different crontabs:") && last.contains(&said)
            });
            assert!(shown, "status names the members on each file ({said}): {last}");
        }
        // The jobs it owns run by B from here on.
        let json = status(&g).1 .1;
        for job in ["a", "b"].into_iter().filter(|j| owner(&json, j).as_deref() == Some(name)) {
            let before = ran(job, "B");
            wait_until(within, "its job runs by B", || ran(job, "B") > before);
        }
    }
    let digest_b = digest(&files[0]);
    let mut last = Default::default();
    let done = crate::util::wait_for(within * 2, || {
        last = status(&g);
        let ((code, text), (_, json)) = &last;
        *code == 0
            && text.contains(&format!("every member runs by crontab digest {digest_b}"))
            && job(json, "c").is_some_and(|r| r["state"] == "removed")
            && ["a", "b", "d"].iter().all(|j| job(json, j).is_some_and(|r| r["state"] == "runs"))
    });
    assert!(done, "the rollout done: every member on B ({digest_b}, was {digest_a}), exit 0: {last:?}");
    wait_until(within, "d runs by B", || ran("d", "B") >= 3);
    let runs = versioned_runs(&g);
    for job in ["a", "b", "c", "d"] {
        assert_each_due_time_once(&runs, job);
    }
    let last_a = runs.iter().filter(|r| r.0 == "a").max_by_key(|r| r.1).unwrap();
    assert_eq!(last_a.3, "B", "{runs:?}");
    for m in &members {
        m.signal(Signal::SIGTERM);
    }
    for mut m in members {
        assert_eq!(m.wait_exit(within).code(), Some(0), "{}", m.log());
    }
}
