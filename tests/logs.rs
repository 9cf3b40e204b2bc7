//! A run's output on the record and `neli-run logs`: real members run a
//! command that writes, its shim keeps the tail (`--keep-output`), and
//! another process reads it back from the runs topic, as an operator on
//! another host would.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{bin, wait_for, wait_until, Group, KillSleeping, LONG};

/// `neli-run logs -b BROKER -g GROUP ARGS`: status, stdout (bytes), stderr.
fn logs(g: &Group, args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(bin())
        .args(["logs", "-b", &g.broker.address, "-g", &g.name])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run neli-run logs");
    (out.status.code().unwrap_or(-1), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `logs ARGS` once it finds an ended run with output (status 0).
fn logs_of_a_run(g: &Group, args: &[&str]) -> (Vec<u8>, String) {
    let mut last = (0, Vec::new(), String::new());
    let found = wait_for(LONG, || {
        last = logs(g, args);
        last.0 == 0
    });
    assert!(found, "logs never printed a run: {} {}", String::from_utf8_lossy(&last.1), last.2);
    (last.1, last.2)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_runs_stdout_and_stderr_are_read_back_with_logs_from_another_process() {
    let g = Group::new("logs-single");
    let command = "echo out-line-1; echo err-line-1 >&2; echo out-line-2; exit 4";
    let mut a = g.member_unguarded("a", &["--restart", "never"], &["sh", "-c", command]);
    assert_eq!(a.wait_exit(LONG).code(), Some(4));
    // Still where it went before: the member's stdout and stderr.
    let log = a.log();
    assert!(["out-line-1", "err-line-1", "out-line-2"].iter().all(|l| log.contains(l)), "{log}");

    let (out, err) = logs_of_a_run(&g, &[]);
    let lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(sorted, ["err-line-1", "out-line-1", "out-line-2"], "both streams, interleaved: {lines:?}");
    assert!(lines.iter().position(|l| *l == "out-line-1") < lines.iter().position(|l| *l == "out-line-2"));
    assert!(err.starts_with("== leader run started ") && err.contains(" on a@"), "the header: {err}");
    assert!(err.contains(": exit 4 after ") && err.contains("all 33 bytes of output"), "{err}");
}

#[test]
fn follow_prints_each_next_runs_output_as_it_ends() {
    let g = Group::new("logs-follow");
    let _a = g.member_unguarded("a", &["--every", "1s"], &["sh", "-c", "echo tick-$NELI_DUE"]);
    logs_of_a_run(&g, &[]);
    let dir = g.dir.path().join("follow.out");
    let file = std::fs::File::create(&dir).unwrap();
    let mut follow = Command::new(bin())
        .args(["logs", "-b", &g.broker.address, "-g", &g.name, "--follow"])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(Stdio::null())
        .spawn()
        .expect("start logs --follow");
    let read = || std::fs::read_to_string(&dir).unwrap_or_default();
    let headers = |s: &str| s.lines().filter(|l| l.starts_with("== leader run started ")).count();
    // The last run at once, then each next one as it ends.
    let seen = wait_for(LONG, || headers(&read()) >= 3);
    let _ = follow.kill();
    let _ = follow.wait();
    let printed = read();
    assert!(seen, "logs --follow printed fewer than 3 runs: {printed}");
    let lines: Vec<&str> = printed.lines().collect();
    for pair in lines.chunks(2).take(3) {
        assert!(pair[0].starts_with("== leader run started ") && pair[0].contains("all "), "{printed}");
        assert!(pair[1].starts_with("tick-20"), "each header is followed by its run's output: {printed}");
    }
    let ticks: std::collections::BTreeSet<&str> = lines.iter().filter(|l| l.starts_with("tick-")).copied().collect();
    assert!(ticks.len() >= 3, "three different runs: {printed}");
}

#[test]
fn binary_and_escape_sequences_are_kept_bounded_and_shown_escaped() {
    let g = Group::new("logs-hostile");
    let command = r"head -c 100000 /dev/urandom; printf '\033[2J\033]0;pwned\007tail-end\r\n'";
    let mut a = g.member_unguarded("a", &["--restart", "never", "--keep-output", "1KiB"], &["sh", "-c", command]);
    assert_eq!(a.wait_exit(LONG).code(), Some(0));
    let (out, err) = logs_of_a_run(&g, &[]);
    assert!(err.contains("the last 1024 of 100024 bytes of output"), "{err}");
    assert!(!out.iter().any(|&b| b == 0x1b || b == 0x07 || b == b'\r'), "no control byte reaches the terminal");
    let shown = text(&out);
    assert!(shown.ends_with("\\u{1b}[2J\\u{1b}]0;pwned\\u{7}tail-end\\r\n"), "{shown:?}");
    assert!(shown.contains("\\x{"), "bytes that are not UTF-8 are written \\x{{..}}: {shown:?}");
    // --raw: the bytes as written, the last KiB of them.
    let (code, raw, _) = logs(&g, &["--raw"]);
    assert_eq!((code, raw.len()), (0, 1024));
    assert!(raw.ends_with(b"\x1b[2J\x1b]0;pwned\x07tail-end\r\n"));
}

#[test]
fn keep_output_0_leaves_the_commands_fds_alone_and_logs_says_none_is_kept() {
    let g = Group::new("logs-none");
    // The command's stdout is the member's own (its log file), not a pipe.
    let mut a = g.member_unguarded(
        "a",
        &["--restart", "never", "--keep-output", "0"],
        &["sh", "-c", "echo fd1=$(readlink /proc/$$/fd/1)"],
    );
    assert_eq!(a.wait_exit(LONG).code(), Some(0));
    let log = a.log();
    assert!(log.contains("fd1=/") && log.contains("a.log"), "{log}");
    let mut said = (0, Vec::new(), String::new());
    wait_until(LONG, "logs finds the run", || {
        said = logs(&g, &[]);
        said.2.contains("kept no output")
    });
    assert_eq!(said.0, 1, "{}", said.2);
    assert!(said.2.contains("--keep-output 0") && said.2.contains("--keep-output SIZE"), "names the flag: {}", said.2);
    assert!(said.1.is_empty());

    // Kept, the command writes to the shim's pipe.
    let g = Group::new("logs-some");
    let mut b = g.member_unguarded("b", &["--restart", "never"], &["sh", "-c", "echo fd1=$(readlink /proc/$$/fd/1)"]);
    assert_eq!(b.wait_exit(LONG).code(), Some(0));
    assert!(b.log().contains("fd1=pipe:"), "{}", b.log());
}

#[test]
fn a_daemon_holding_stdout_open_does_not_keep_the_run_from_ending() {
    let g = Group::new("logs-daemon");
    let _sweep = KillSleeping("1069".into());
    let (pid_file, go) = (g.dir.path().join("pid"), g.dir.path().join("go"));
    // A daemon that ignores the stop signal holds the command's stdout;
    // and so does a process outside the tree (this test), which the shim
    // cannot kill: the run ends all the same, its output kept.
    let command = format!(
        "echo $$ > {p}; while [ ! -e {go} ]; do sleep 0.05; done; (trap '' TERM; exec sleep 1069) & echo before-exit; exit 5",
        p = pid_file.display(),
        go = go.display()
    );
    let mut a = g.member_unguarded("a", &["--restart", "never", "--grace", "1s"], &["sh", "-c", &command]);
    let mut pid = String::new();
    wait_until(LONG, "the command says its pid", || {
        pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
        pid.ends_with('\n')
    });
    let held = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{}/fd/1", pid.trim()))
        .expect("open the command's stdout pipe from outside its tree");
    std::fs::write(&go, b"").unwrap();
    let began = Instant::now();
    assert_eq!(a.wait_exit(LONG).code(), Some(5), "the run ends though its pipe is still open");
    assert!(began.elapsed() < Duration::from_secs(30), "{:?}", began.elapsed());
    let (out, err) = logs_of_a_run(&g, &[]);
    assert_eq!(text(&out), "before-exit\n", "{err}");
    assert!(err.contains("exit 5"), "{err}");
    // The pipe is still open here: nothing waited for its end.
    let mut probe = Vec::new();
    let _ = (&held).take(0).read_to_end(&mut probe);
    drop(held);
}

#[test]
fn a_crontab_jobs_output_option_and_logs_of_a_job() {
    let g = Group::new("logs-crontab");
    let crontab = g.dir.path().join("crontab");
    std::fs::write(&crontab, "@every 1s quiet[output=0] echo quiet-line\n@every 1s loud[output=4] echo loud-line\n")
        .unwrap();
    let mut argv = vec!["-b".to_string(), g.broker.address.clone(), "-g".into(), g.name.clone(), "--name".into()];
    argv.extend(["a".to_string(), "--crontab".into(), crontab.display().to_string()]);
    argv.extend(g.broker.timing.args());
    let _a = crate::util::Member::spawn("a", &[], &argv, &g.dir.path().join("a.log"), None);
    let (out, err) = logs_of_a_run(&g, &["--job", "loud"]);
    assert_eq!(text(&out), "ine\n", "the last 4 bytes: {err}");
    assert!(err.contains("== job loud run started ") && err.contains("the last 4 of 10 bytes"), "{err}");
    let mut said = (0, Vec::new(), String::new());
    wait_until(LONG, "logs finds a run of quiet", || {
        said = logs(&g, &["--job", "quiet"]);
        said.2.contains("kept no output")
    });
    assert_eq!(said.0, 1, "{}", said.2);
    assert!(said.2.contains("output=0"), "{}", said.2);
    // With no job named, the jobs are named.
    let (code, _, err) = logs(&g, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("name one with --job NAME") && err.contains("loud"), "{err}");
}

/// How long after a run's end `logs --follow`, in another process, prints
/// its output (the end as the member recorded it, `end_ms`, to the line's
/// arrival on the reader's stdout), and the bytes of a run's records with
/// 8 KiB of output kept.
#[test]
#[ignore]
fn measure() {
    use std::io::BufRead;
    let bin = std::env::var("NELI_MEASURE_BIN").unwrap_or_else(|_| bin().to_string());
    let g = Group::new("logs-measure");
    // About 9 KiB a run (100 lines of 90 bytes), of which 8 KiB are kept.
    let command = "i=0; while [ $i -lt 100 ]; do i=$((i+1)); printf '%089d\\n' $i; done";
    let mut argv: Vec<String> = ["-b", &g.broker.address, "-g", &g.name, "--name", "a"].map(String::from).into();
    argv.extend(g.broker.timing.args());
    argv.extend(["--every", "2s", "--", "sh", "-c", command].map(String::from));
    let mut member = Command::new(&bin)
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    logs_of_a_run(&g, &[]);
    let mut follow = Command::new(&bin)
        .args(["logs", "-b", &g.broker.address, "-g", &g.name, "--follow"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wall = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let mut headers = Vec::new();
    for line in std::io::BufReader::new(follow.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.starts_with("== leader run started ") {
            headers.push((line, wall()));
            if headers.len() == 21 {
                break;
            }
        }
    }
    let _ = follow.kill();
    let _ = follow.wait();
    let _ = member.kill();
    let _ = member.wait();
    // Each header's run, by its start (to the second; runs are 2 s apart).
    let (_, json, _) = {
        let out = Command::new(&bin)
            .args(["history", "-b", &g.broker.address, "-g", &g.name, "--limit", "0", "--json"])
            .output()
            .unwrap();
        (0, String::from_utf8_lossy(&out.stdout).into_owned(), ())
    };
    let runs: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut lags = Vec::new();
    for (header, arrived) in headers.iter().skip(1) {
        let started = header.split_whitespace().nth(4).unwrap();
        let run = runs["runs"].as_array().unwrap().iter().find(|r| {
            let at = std::time::UNIX_EPOCH + Duration::from_millis(r["start_ms"].as_u64().unwrap());
            humantime::format_rfc3339_seconds(at).to_string() == started
        });
        if let Some(end) = run.and_then(|r| r["end_ms"].as_u64()) {
            lags.push(arrived.saturating_sub(end));
        }
    }
    lags.sort_unstable();
    println!("logs --follow: {} runs, from the run's end to its output printed: {lags:?} ms", lags.len());

    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::Message;
    let consumer: BaseConsumer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", &g.broker.address).set("group.id", "m").create().unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&format!("{}.neli.runs", g.name), 0, rdkafka::Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let mut sizes = Vec::new();
    while sizes.len() < 10 {
        let Some(Ok(msg)) = consumer.poll(Duration::from_secs(5)) else { break };
        let size = msg.key().map_or(0, <[u8]>::len) + msg.payload().map_or(0, <[u8]>::len);
        let event = serde_json::from_slice::<serde_json::Value>(msg.payload().unwrap()).unwrap()["event"].clone();
        sizes.push(format!("{event} {size}"));
    }
    println!("records (key + value bytes), a run printing 9,000 bytes, 8 KiB kept: {sizes:?}");
}
