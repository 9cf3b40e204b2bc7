//! Runs on the record and `neli-run history`: real members run their
//! command, and another process reads the runs back from the runs topic
//! (`<topic>.runs`), as an operator on another host would.

use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{bin, wait_for, Group, Member, LONG};

/// `neli-run history -b BROKER -g GROUP ARGS`: status, stdout, stderr.
pub fn history(g: &Group, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(["history", "-b", &g.broker.address, "-g", &g.name])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run neli-run history");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// `history --json`'s runs, once it answers with some (else empty).
pub fn runs(g: &Group, args: &[&str]) -> Vec<serde_json::Value> {
    let (code, out, _) = history(g, &[args, &["--json"]].concat());
    match code {
        0 => serde_json::from_str::<serde_json::Value>(&out).expect("--json parses")["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Waits until `history --json ARGS` shows runs that `enough` accepts, and
/// returns them (the last reading, with the test's message, if never).
pub fn wait_runs(
    g: &Group,
    args: &[&str],
    what: &str,
    enough: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let mut last = Vec::new();
    let seen = wait_for(LONG, || {
        last = runs(g, args);
        enough(&last)
    });
    assert!(seen, "history never showed {what}: {last:#?}");
    last
}

#[test]
fn a_single_leaders_run_is_in_history_from_another_process_with_its_exit_status() {
    let g = Group::new("history-single");
    let mut a = g.member("a", &[], &["sh", "-c", "sleep 0.3; exit 3"]);
    assert_eq!(a.wait_exit(LONG).code(), Some(3), "the member passes the command's status on");

    let (code, out, err) = history(&g, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one run: {out}");
    assert!(lines[0].starts_with("STARTED") && lines[0].contains("MEMBER@HOST"), "{out}");
    let host = nix::unistd::gethostname().unwrap().to_string_lossy().into_owned();
    assert!(lines[1].contains(&format!(" a@{host} ")), "{out}");
    assert!(lines[1].contains(" leader ") && lines[1].contains(" exit 3 "), "{out}");

    // --json parses, and says the same with the numbers.
    let runs = runs(&g, &[]);
    assert_eq!(runs.len(), 1, "{runs:#?}");
    let run = &runs[0];
    assert_eq!((run["member"].as_str(), run["host"].as_str()), (Some("a"), Some(host.as_str())));
    assert_eq!((run["exit_code"].as_u64(), run["state"].as_str()), (Some(3), Some("ended")), "{run}");
    assert_eq!(run["topic"].as_str(), Some(format!("{}.neli", g.name).as_str()));
    assert_eq!(run["pid"].as_u64(), Some(u64::from(a.pid().as_raw() as u32)), "{run}");
    assert_eq!(run["attempt"].as_u64(), Some(1), "a wave's first attempt: {run}");
    let duration = run["duration_ms"].as_u64().expect("a duration");
    assert!((300..30_000).contains(&duration), "the command slept 0.3 s: {run}");
    let (start, end) = (run["start_ms"].as_u64().unwrap(), run["end_ms"].as_u64().unwrap());
    assert!(end >= start + 300, "{run}");
    assert!(run["token"].is_i64(), "{run}");

    // --since: a duration back, or a time.
    let (code, out, err) = history(&g, &["--since", "1h"]);
    assert_eq!((code, out.lines().count()), (0, 2), "{out}{err}");
    let (code, out, err) = history(&g, &["--since", "2099-01-01T00:00:00Z"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), format!("no run since then recorded in group {}", g.name));
    let (code, _, err) = history(&g, &["--since", "yesterday"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("neither a duration (90m, 2d) nor an RFC 3339 time"), "{err}");
}

#[test]
fn a_failover_shows_the_dead_members_run_with_no_end_and_the_survivors_running() {
    let g = Group::new("history-failover");
    let members = g.sleepers(&["a", "b"]);
    let first = g.leader_among(&members);
    let (dead, survivor) = (&members[first], &members[1 - first]);
    // Its start is on the record before it dies.
    wait_runs(&g, &[], "the first leader's run", |runs| runs.len() == 1 && runs[0]["state"] == "running");
    dead.signal(Signal::SIGKILL);
    let runs = wait_runs(&g, &[], "the survivor's run", |runs| runs.len() == 2);
    let who: Vec<(&str, &str)> =
        runs.iter().map(|r| (r["member"].as_str().unwrap(), r["state"].as_str().unwrap())).collect();
    assert_eq!(who, [(dead.name.as_str(), "no_end"), (survivor.name.as_str(), "running")], "{runs:#?}");
    assert!(runs[1]["token"].as_i64() > runs[0]["token"].as_i64(), "tokens grow: {runs:#?}");
    let (code, out, err) = history(&g, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].contains(&format!(" {}@", dead.name)) && lines[1].contains(" no end "), "{out}");
    assert!(lines[2].contains(&format!(" {}@", survivor.name)) && lines[2].contains(" running "), "{out}");
    g.assert_no_overlap();
}

#[test]
fn a_scheduled_run_shows_its_due_time_and_the_roles_their_role() {
    let g = Group::new("history-every");
    let _a = g.member("a", &["--every", "1s"], &["true"]);
    let runs = wait_runs(&g, &[], "two ended runs of the schedule", |runs| {
        runs.iter().filter(|r| r["state"] == "ended").count() >= 2
    });
    let run = runs.iter().find(|r| r["state"] == "ended").unwrap();
    let due = run["due_ms"].as_u64().unwrap_or_else(|| panic!("a due time: {run}"));
    assert_eq!(due % 1000, 0, "due on the second: {run}");
    // At its due time, or once the record naming it is read back if that
    // comes later (61 ms on tansu once, whose fetches wait): before the
    // next due time in any case.
    let start = run["start_ms"].as_u64().unwrap_or_else(|| panic!("a start: {run}"));
    assert!((due..due + 1000).contains(&start), "a scheduled run starts at its due time: {run}");
    assert!(run["wave_ms"].is_null(), "{run}");
    let (code, out, err) = history(&g, &["--limit", "1"]);
    assert_eq!(code, 0, "{out}{err}");
    let line = out.lines().nth(1).unwrap_or_else(|| panic!("one run: {out}"));
    assert_eq!(out.lines().count(), 2, "--limit 1: {out}");
    assert!(line.matches("Z ").count() >= 2, "the start and due times: {out}");

    // Each role's runs under its own role; --role keeps one.
    let roles = Group::new("history-roles");
    let _b = roles.member("b", &["--roles", "2", "--every", "1s"], &["true"]);
    let runs = wait_runs(&roles, &["--role", "1"], "role 1's runs", |runs| !runs.is_empty());
    assert!(runs.iter().all(|r| r["role"] == 1 && r["roles"] == 2), "{runs:#?}");
    wait_runs(&roles, &["--role", "0"], "role 0's runs", |runs| !runs.is_empty());
    let (_, out, _) = history(&roles, &["--role", "1"]);
    assert!(out.lines().skip(1).all(|l| l.contains(" role 1 ")), "{out}");
}

#[test]
fn a_crontab_jobs_runs_are_shown_by_job_with_their_due_times() {
    let g = Group::new("history-crontab");
    let file = g.dir.path().join("fleet.crontab");
    std::fs::write(&file, "@every 1s tick true\n@every 1s tock false\n").unwrap();
    let mut argv: Vec<String> = ["-b", &g.broker.address, "-g", &g.name, "--name", "a"].map(String::from).into();
    argv.extend(g.broker.timing.args());
    argv.extend(["--crontab".into(), file.display().to_string()]);
    let _a = Member::spawn("a", &[], &argv, &g.dir.path().join("a.log"), None);
    let runs =
        wait_runs(&g, &["--job", "tock"], "an ended run of tock", |runs| runs.iter().any(|r| r["state"] == "ended"));
    assert!(runs.iter().all(|r| r["job"] == "tock"), "--job keeps one job: {runs:#?}");
    let run = runs.iter().find(|r| r["state"] == "ended").unwrap();
    assert_eq!(run["exit_code"].as_u64(), Some(1), "{run}");
    assert!(run["due_ms"].as_u64().is_some(), "{run}");
    let (_, out, _) = history(&g, &["--job", "tick"]);
    let rows: Vec<&str> = out.lines().skip(1).take_while(|l| !l.starts_with("job tick (role ")).collect();
    assert!(!rows.is_empty() && rows.iter().all(|l| l.contains(" tick ")), "{out}");
}

#[test]
fn cron_history_is_history_of_the_job_with_its_owner_its_pause_and_a_due_time_with_no_run() {
    let g = Group::new("history-cron");
    // "leap" and "long" are due on February 29th only: never by themselves.
    let marker = format!("{}", 200_000 + std::process::id() % 100_000);
    let _cleanup = crate::util::KillSleeping(marker.clone());
    let file = g.dir.path().join("fleet.crontab");
    let text = format!("@every 1s tick sh -c 'exit 3'\n0 0 29 2 * leap true\n0 0 29 2 * long sleep {marker}\n");
    std::fs::write(&file, text).unwrap();
    let mut argv: Vec<String> = ["-b", &g.broker.address, "-g", &g.name, "--name", "a"].map(String::from).into();
    argv.extend(g.broker.timing.args());
    argv.extend(["--crontab".into(), file.display().to_string()]);
    let mut a = Member::spawn("a", &[], &argv, &g.dir.path().join("a.log"), None);
    let cron = |args: &[&str]| crate::util::run(&[&["cron"], args, &["-b", &g.broker.address, "-g", &g.name]].concat());
    let json = |out: &str| serde_json::from_str::<serde_json::Value>(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    wait_runs(&g, &["--job", "tick"], "two ended runs of tick", |runs| {
        runs.iter().filter(|r| r["state"] == "ended").count() >= 2
    });

    // A job that never ran: no run on the record, its owner and its next
    // due time (from the group's topic), exit 0.
    let (code, out) = cron(&["history", "leap"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&format!("no run of job leap recorded in group {}\n", g.name)), "{out}");
    assert!(out.contains("\njob leap (role ") && out.contains("): owned by a (host "), "{out}");
    assert!(out.contains("\n  next run due 2028-02-2"), "February 29th, 2028 (in any zone): {out}");
    let (_, out) = cron(&["history", "leap", "--json"]);
    let leap = json(&out);
    assert_eq!((leap["job"].as_str(), leap["runs"].as_array().map(Vec::len)), (Some("leap"), Some(0)), "{leap}");
    assert_eq!(leap["owner"]["name"], "a", "{leap}");

    // A paused job: its due times pass with no run, the next one shown.
    let (code, out) = cron(&["pause", "tick"]);
    assert_eq!(code, 0, "{out}");
    let mut out = String::new();
    let overdue = wait_for(LONG, || {
        out = cron(&["history", "tick"]).1;
        out.contains("\n  next run was due ")
    });
    assert!(overdue, "a due time passed unrun while paused: {out}");
    assert!(out.contains("\n  paused since ") && out.contains("`neli-run cron resume tick` ends it"), "{out}");

    // A run whose member dies with it: no end, its job no one's now.
    let (code, out) = cron(&["trigger", "long"]);
    assert_eq!(code, 0, "{out}");
    wait_runs(&g, &["--job", "long"], "long's run", |runs| runs.len() == 1 && runs[0]["state"] == "running");
    a.signal(Signal::SIGKILL);
    let _ = a.wait_exit(LONG);
    let mut out = String::new();
    let gone = wait_for(LONG, || {
        out = cron(&["history", "long"]).1;
        out.contains("): no owner now") && cron(&["history", "tick"]).1.contains("): no owner now")
    });
    assert!(gone, "{out}");
    let row = out.lines().nth(1).unwrap_or_else(|| panic!("a run: {out}"));
    assert!(row.contains(" long ") && row.contains(" a@") && row.contains(" no end "), "{out}");

    // The topic holds still now: both doors answer the same, text and JSON.
    for flags in [&[][..], &["--limit", "2"], &["--since", "1h"]] {
        let (code, by_cron) = cron(&[&["history", "tick"], flags, &["--json"]].concat());
        assert_eq!(code, 0, "{by_cron}");
        let (code, by_history, err) = history(&g, &[&["--job", "tick"], flags, &["--json"]].concat());
        assert_eq!(code, 0, "{err}");
        assert_eq!(json(&by_cron), json(&by_history), "{flags:?}");
    }
    let tick = json(&cron(&["history", "tick", "--json"]).1);
    let runs = tick["runs"].as_array().unwrap();
    assert!(runs.len() >= 2, "{tick}");
    for run in runs {
        assert_eq!((run["member"].as_str(), run["exit_code"].as_u64()), (Some("a"), Some(3)), "{tick}");
        assert_eq!((run["job"].as_str(), run["state"].as_str()), (Some("tick"), Some("ended")), "{tick}");
    }
    assert_eq!((tick["paused"].as_bool(), tick["owner"].is_null()), (Some(true), true), "{tick}");
    assert!(tick["next_due"].is_string() && tick["partition"].is_u64(), "{tick}");
    let (code, by_cron) = cron(&["history", "tick", "--limit", "1"]);
    assert_eq!(code, 0, "{by_cron}");
    let (_, by_history, _) = history(&g, &["--job", "tick", "--limit", "1"]);
    let table = |out: &str| out.lines().take_while(|l| !l.starts_with("  ")).map(String::from).collect::<Vec<_>>();
    assert_eq!(table(&by_cron), table(&by_history));
    let host = nix::unistd::gethostname().unwrap().to_string_lossy().into_owned();
    let lines: Vec<&str> = by_cron.lines().collect();
    assert!(lines[0].starts_with("STARTED") && lines.len() >= 3, "{by_cron}");
    assert!(lines[1].contains(&format!(" a@{host} ")) && lines[1].contains(" exit 3 "), "{by_cron}");
    assert!(lines[2].starts_with("job tick (role ") && lines[2].ends_with("): no owner now"), "{by_cron}");

    // A job no partition names, and no run of it: exit 1, naming the jobs.
    let (code, out) = cron(&["history", "nope"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no job nope in group ") && out.contains("(its jobs: leap, long, tick)"), "{out}");
    // One no partition names whose runs are on the record (a job of long
    // ago): its runs, and nothing the group's topic does not know.
    forge(&g, &[br#"{"v":1,"run":"x-1","event":"end","group":"g","topic":"t","role":7,"job":"gone","member":"m","host":"h","pid":1,"token":9,"start_ms":1000,"end_ms":2000,"exit_code":4}"#]);
    let (code, out) = cron(&["history", "gone"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().count(), 2, "a header and the run: {out}");
    assert!(out.contains(" gone ") && out.contains(" m@h ") && out.contains(" exit 4 "), "{out}");
}

#[test]
fn a_group_with_no_runs_says_so_and_whether_the_group_is_there() {
    let g = Group::new("history-none");
    let (code, out, err) = history(&g, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains(&format!("no run recorded in group {}", g.name)), "{err}");
    assert!(err.contains("Is the group's name right"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line, not librdkafka's: {err}");
    // The group's topic, and no runs topic.
    g.produce(b"not a heartbeat");
    let (code, out, err) = history(&g, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains(&format!("no run recorded yet in group {}", g.name)), "{err}");
    assert!(err.contains(&format!("no runs topic ({}.neli.runs)", g.name)), "{err}");
}

#[test]
fn a_member_name_and_a_job_with_terminal_escapes_are_shown_escaped() {
    let g = Group::new("history-hostile");
    let evil = "evil\u{1b}[2J\u{1b}]0;owned\u{7}";
    let mut a = g.member_unguarded(evil, &[], &["true"]);
    assert_eq!(a.wait_exit(LONG).code(), Some(0));
    // A forged record, as anyone who may write to the topic can.
    forge(&g, &[br#"{"v":1,"run":"x-1","event":"start","group":"g","topic":"t","role":0,"job":"j\u001b[31m","member":"m","host":"h\r\nfake","pid":1,"token":9,"start_ms":1}"#]);
    let (code, out, err) = history(&g, &["--limit", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\r'), "raw escapes: {out:?}");
    assert!(out.contains(r"evil\u{1b}[2J\u{1b}]0;owned\u{7}@"), "{out}");
    assert!(out.contains(r"j\u{1b}[31m") && out.contains(r"m@h\r\nfake"), "{out}");
    // JSON keeps the name as it is, escaped as JSON escapes it.
    let runs = runs(&g, &["--limit", "0"]);
    assert!(runs.iter().any(|r| r["member"] == evil), "{runs:#?}");
}

#[test]
fn history_reads_a_long_topic_back_to_the_newest_runs_and_every_run_with_limit_0() {
    let g = Group::new("history-long");
    // 3,000 runs, written in a few large batches (tansu 0.6 then says a
    // high watermark short of the partition's end).
    let records: Vec<String> = (0..3000u64)
        .flat_map(|n| {
            ["start", "end"].map(|event| {
                let end = if event == "end" { r#","exit_code":0,"duration_ms":5"# } else { "" };
                format!(
                    r#"{{"v":1,"run":"r-{n}","event":"{event}","group":"g","topic":"t","role":0,"member":"m","host":"h","pid":1,"token":{n},"start_ms":{}{end}}}"#,
                    1_000_000 + n
                )
            })
        })
        .collect();
    forge(&g, &records.iter().map(String::as_bytes).collect::<Vec<_>>());
    let tokens = |args: &[&str]| -> Vec<i64> { runs(&g, args).iter().map(|r| r["token"].as_i64().unwrap()).collect() };
    assert_eq!(tokens(&[]), (2980..3000).collect::<Vec<_>>(), "the newest 20, oldest first");
    assert_eq!(tokens(&["--limit", "0"]), (0..3000).collect::<Vec<_>>(), "every run, each once");
    assert_eq!(tokens(&["--limit", "1500"]), (1500..3000).collect::<Vec<_>>());
}

/// Writes `values` to the group's runs topic, as another writer would.
pub fn forge(g: &Group, values: &[&[u8]]) {
    use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
    let producer: ThreadedProducer<rdkafka::producer::DefaultProducerContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", &g.broker.address).create().unwrap();
    let topic = format!("{}.neli.runs", g.name);
    for value in values {
        producer.send(BaseRecord::<(), _>::to(&topic).payload(*value)).unwrap();
    }
    producer.flush(Duration::from_secs(20)).unwrap();
}

#[test]
fn a_runs_topic_kafka_refuses_delays_no_run_and_is_said_once_with_the_acl_to_add() {
    let broker = crate::util::Broker::dev_with(
        "127.0.0.1",
        &["--deny-topic", "acl.neli.runs", "--deny-topic", "once.neli.runs"],
    );
    let g = Group::on(broker, "history-acl");
    let addr = crate::metrics::free_addr();
    let a = g.member("a", &["--topic", "acl.neli", "--every", "1s", "--metrics-addr", &addr], &["true"]);
    // The schedule runs on, due time after due time, unrecorded.
    crate::util::wait_until(LONG, "three runs of the schedule", || g.starts().len() >= 3);
    // Each lost record counted: /metrics says how many.
    let lost = || -> u64 {
        let (_, body) = crate::metrics::get(&addr, "/metrics").unwrap_or_default();
        let line = body.lines().find(|l| l.starts_with("neli_runs_unrecorded_total ")).map(str::to_string);
        line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
    };
    assert!(wait_for(LONG, || lost() >= 4), "two records a run, lost: {}", lost());
    let log = a.log();
    let said: Vec<&str> = log.lines().filter(|l| l.contains("acl.neli.runs")).collect();
    assert_eq!(said.len(), 1, "said once, not once per run: {log}");
    assert!(said[0].contains("kafka-acls.sh --add") && said[0].contains("--operation Write"), "{log}");
    assert!(said[0].contains("the command runs as before"), "{log}");
    // The one line a run's loss adds would repeat per run: it is not said.
    assert!(!log.contains("a run's record could not be written"), "{log}");
    // A single run's member exits with its status at once: nothing waits
    // for records that cannot be written.
    let mut b = Member::spawn(
        "b",
        &[],
        &["-b", &g.broker.address, "-g", "once", "--name", "b", "--", "sh", "-c", "exit 4"].map(String::from),
        &g.dir.path().join("b.log"),
        None,
    );
    assert_eq!(b.wait_exit(LONG).code(), Some(4), "{}", b.log());
    for job in [&[][..], &["--job", "j"]] {
        let (code, _, err) = history(&g, &[&["--topic", "acl.neli"], job].concat());
        assert_eq!(code, 77, "history is refused too, naming the ACL: {err}");
        assert!(err.contains("--operation Read") && err.contains("acl.neli.runs"), "{err}");
    }
}

/// docs/proof.md's figures for the runs topic (not a test: run it by
/// hand, with a release build named in NELI_MEASURE_BIN):
///
///   cargo build --release && NELI_MEASURE_BIN=target/release/neli-run \
///     cargo test --test tests history::measure -- --ignored --nocapture
///
/// The bytes of each record a crontab member writes; the CPU its recorder
/// thread spends per record (schedstat, ns); and `history` over 1,000
/// runs (2,000 records, as members write them).
#[test]
#[ignore]
fn measure() {
    use std::time::Instant;
    let bin = std::env::var("NELI_MEASURE_BIN").unwrap_or_else(|_| bin().to_string());
    let g = Group::new("history-measure");
    let file = g.dir.path().join("fleet.crontab");
    let jobs: String = (0..20).map(|j| format!("@every 1s job-{j:02} true\n")).collect();
    std::fs::write(&file, jobs).unwrap();
    let mut argv: Vec<String> = ["-b", &g.broker.address, "-g", &g.name, "--name", "a"].map(String::from).into();
    argv.extend(g.broker.timing.args());
    argv.extend(["--crontab".into(), file.display().to_string()]);
    let mut command = Command::new(&bin);
    command.args(&argv).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut member = command.spawn().unwrap();
    let pid = member.id();
    let runs_thread = || -> Option<u64> {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        tasks.flatten().find_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            (comm.trim() == "neli-runs").then(|| stat.split_whitespace().next()?.parse().ok())?
        })
    };
    let all_threads = || -> u64 {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
            .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    };
    // Past the start-up (the topic made, the jobs placed).
    wait_runs(&g, &["--limit", "40"], "the jobs' first runs", |runs| runs.len() >= 40);
    let (thread0, all0, runs0) = (runs_thread().unwrap(), all_threads(), runs(&g, &["--limit", "0"]).len());
    std::thread::sleep(Duration::from_secs(30));
    let (thread1, all1, runs1) = (runs_thread().unwrap(), all_threads(), runs(&g, &["--limit", "0"]).len());
    let _ = member.kill();
    let _ = member.wait();
    let made = (runs1 - runs0) as u64;
    println!(
        "crontab of 20 jobs @every 1s, 30 s: {made} runs, {} records; recorder thread {} us per record; \
         the member's every thread {} us per run (supervising it too)",
        made * 2,
        (thread1 - thread0) / (made * 2) / 1000,
        (all1 - all0) / made / 1000
    );

    // The records as they are on the topic.
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::Message;
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &g.broker.address)
        .set("group.id", "measure")
        .create()
        .unwrap();
    let topic = format!("{}.neli.runs", g.name);
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let (mut start, mut end) = (Vec::new(), Vec::new());
    while start.len() < 20 || end.len() < 20 {
        let Some(Ok(msg)) = consumer.poll(Duration::from_secs(5)) else { break };
        let size = msg.payload().map_or(0, <[u8]>::len) + msg.key().map_or(0, <[u8]>::len);
        match msg.payload().is_some_and(|p| String::from_utf8_lossy(p).contains(r#""event":"end""#)) {
            true => end.push(size),
            false => start.push(size),
        }
    }
    let mean = |v: &[usize]| v.iter().sum::<usize>() / v.len().max(1);
    println!(
        "bytes (key + value): start record {} , end record {} (a crontab job's, mean of 20)",
        mean(&start),
        mean(&end)
    );

    // history over 1,000 and 10,000 runs.
    for n in [1_000u64, 10_000] {
        let other = Group::new("history-measure-many");
        let forged: Vec<String> = (0..n)
            .flat_map(|n| {
                let at = 1_795_000_000_000 + n * 60_000;
                let start = format!(
                    r#"{{"v":1,"run":"m-{n}","event":"start","group":"{g}","topic":"{g}.neli","role":{r},"job":"job-{r:02}","member":"member-{m}","host":"host-{m}","pid":4242,"token":{n},"due_ms":{at},"attempt":1,"start_ms":{at}}}"#,
                    g = other.name,
                    r = n % 50,
                    m = n % 5
                );
                let end = start.replace(r#""event":"start""#, r#""event":"end""#).replace(
                    &format!(r#""start_ms":{at}}}"#),
                    &format!(r#""start_ms":{at},"end_ms":{},"exit_code":0,"duration_ms":1234}}"#, at + 1234),
                );
                [start, end]
            })
            .collect();
        forge(&other, &forged.iter().map(String::as_bytes).collect::<Vec<_>>());
        for limit in ["20", "0"] {
            let began = Instant::now();
            let out = Command::new(&bin)
                .args(["history", "-b", &other.broker.address, "-g", &other.name, "--limit", limit])
                .output()
                .unwrap();
            let took = began.elapsed();
            assert!(out.status.success());
            let lines = out.stdout.split(|&b| b == b'\n').count() - 2;
            println!("history --limit {limit} over {n} runs: {lines} lines in {took:?}");
        }
    }
}
