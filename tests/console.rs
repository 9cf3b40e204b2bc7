//! `neli-run console`: the page served by the real binary, read over TCP
//! (and by a real browser, headless Chromium, when it is installed),
//! against real members on the dev broker.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::history::forge;
use crate::util::{skip, wait_for, Group, Member, LONG};

/// A console of `g` started with `extra`, and the address it serves on
/// (it says so on stderr: `--listen 127.0.0.1:0` takes a free port).
fn console(g: &Group, name: &str, extra: &[&str]) -> (Member, String) {
    let mut argv: Vec<String> = ["console", "-b", &g.broker.address, "-g", &g.name].map(String::from).into();
    argv.extend(extra.iter().map(|s| s.to_string()));
    if !extra.contains(&"--listen") {
        argv.extend(["--listen".into(), "127.0.0.1:0".into()]);
    }
    let console = Member::spawn(name, &[], &argv, &g.dir.path().join(format!("{name}.log")), None);
    let mut addr = None;
    let said = wait_for(LONG, || {
        addr = console
            .log()
            .split_once(" on http://")
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(a, _)| a.to_string());
        addr.is_some()
    });
    assert!(said, "the console never said where it listens: {}", console.log());
    (console, addr.expect("said"))
}

/// GET `path` from `addr` with the extra header lines `headers`: the
/// status code and the body.
fn get(addr: &str, path: &str, headers: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the console");
    stream.set_read_timeout(Some(LONG)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read the answer");
    let code = reply.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (code, body)
}

/// Waits until the page (`path`) has everything in `wanted`; the last page.
fn page_with(addr: &str, path: &str, headers: &str, wanted: &[&str]) -> String {
    let mut page = String::new();
    let seen = wait_for(LONG, || {
        page = get(addr, path, headers).1;
        wanted.iter().all(|w| page.contains(w))
    });
    assert!(seen, "the page never showed all of {wanted:?}:\n{page}");
    page
}

/// A member of a crontab group running `file`'s jobs.
fn crontab_member(g: &Group, name: &str, file: &Path) -> Member {
    let log = g.dir.path().join(format!("{}.log", name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")));
    let mut argv: Vec<String> = ["-b", &g.broker.address, "-g", &g.name, "--name", name].map(String::from).into();
    argv.extend(g.broker.timing.args());
    argv.extend(["--crontab".into(), file.display().to_string()]);
    Member::spawn(name, &[], &argv, &log, None)
}

const EVIL: &str = "<script>alert(1)</script>";

#[test]
fn the_page_lists_the_members_jobs_their_holders_and_runs_with_every_name_and_output_escaped() {
    let g = Group::new("console-crontab");
    let file = g.dir.path().join("fleet.crontab");
    std::fs::write(&file, "@every 1s tick true\n@every 1s tock false\n").unwrap();
    // The console first, as a user starts it: the group has no topic yet,
    // which it waits for rather than failing.
    let (mut console, addr) = console(&g, "console", &[]);
    page_with(&addr, "/", "", &["waiting for its topic"]);
    assert!(!console.exited(), "{}", console.log());
    let _a = crontab_member(&g, "a", &file);
    let _evil = crontab_member(&g, EVIL, &file);
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    let page = page_with(
        &addr,
        "/",
        "",
        &["<td>tick</td>", "<td>tock</td>", "<td>a</td>", escaped, "exit 0</span>", "exit 1</span>", "<h2>Jobs</h2>"],
    );
    assert!(page.contains("<table id=\"members\">") && page.contains("<table id=\"roles\">"), "{page}");
    assert!(page.contains("<svg id=\"timeline\""), "the timeline is drawn: {page}");
    // A run whose end has output, as a member that keeps output writes it;
    // and a job named by a forger.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let forged = format!(
        r#"{{"v":1,"run":"x-1","event":"end","group":"g","topic":"t","role":0,"job":"{EVIL}","member":"m","host":"h","pid":1,"token":9,"start_ms":{now},"end_ms":{now},"exit_code":0,"duration_ms":1,"output":"line one\n{EVIL}\u001b[2J"}}"#
    );
    forge(&g, &[forged.as_bytes()]);
    let page = page_with(&addr, "/main?range=day", "", &["line one\n&lt;script&gt;alert(1)&lt;/script&gt;\\u{1b}[2J"]);
    assert!(!page.contains(EVIL), "a name or output is never markup: {page}");
    assert!(!page.contains('\u{1b}'), "nor a terminal escape: {page}");
    let (code, svg) = get(&addr, "/timeline.svg?range=day", "");
    assert_eq!(code, 200, "{svg}");
    assert!(svg.starts_with("<svg") && svg.contains(">tick</text>") && svg.contains("class=\"mark\""), "{svg}");
    assert!(!svg.contains(EVIL), "{svg}");
}

/// A console started on a topic made by hand (empty, as operations.md has
/// it made on a cluster), before any member: a crontab group of two jobs
/// then places its jobs, and the page shows them (at its start it read the
/// group as a single leader's).
#[test]
fn a_console_started_before_a_crontab_group_shows_its_jobs() {
    let g = Group::new("console-before");
    let topic = format!("{}.neli", g.name);
    crate::dev_broker::create(&crate::dev_broker::admin_of(&g.broker), &topic, 2).expect("the topic made");
    let (_console, addr) = console(&g, "console", &[]);
    page_with(&addr, "/", "", &["<table id=\"members\">"]);
    let file = g.dir.path().join("fleet.crontab");
    std::fs::write(&file, "@every 1s tick true\n@every 1s tock true\n").unwrap();
    let _a = crontab_member(&g, "a", &file);
    let _b = crontab_member(&g, "b", &file);
    let page = page_with(&addr, "/", "", &["<h2>Jobs</h2>", "<td>tick</td>", "<td>tock</td>"]);
    assert!(page.contains("<table id=\"roles\">"), "{page}");
}

/// A single leader's group under a running console, rolled to three
/// roles (its topic raised to 3 partitions, then a member with `--roles
/// 3` that takes over): the page shows the three roles, led.
#[test]
fn a_console_shows_the_roles_of_a_topic_grown_under_it() {
    let g = Group::new("console-grown");
    let mut solo = g.member_unguarded("solo", &[], &["sleep", "100000"]);
    let (_console, addr) = console(&g, "console", &[]);
    page_with(&addr, "/", "", &["<td>solo</td>", "the command (token"]);
    crate::roles_disagree::raise_partitions(&g, 3);
    let _three = g.member_unguarded("three", &["--roles", "3"], &["sleep", "100000"]);
    solo.signal(nix::sys::signal::Signal::SIGTERM);
    solo.wait_exit(LONG);
    let rows: Vec<String> = (0..3).map(|j| format!("<tr><td>{j}</td><td>-</td><td>three</td>")).collect();
    let mut wanted: Vec<&str> = rows.iter().map(String::as_str).collect();
    wanted.push("<h2>Roles</h2>");
    page_with(&addr, "/", "", &wanted);
}

#[test]
fn a_console_listening_beyond_loopback_without_a_token_is_refused_naming_the_fix() {
    let g = Group::new("console-refused");
    let argv = ["console", "-b", &g.broker.address, "-g", &g.name, "--listen", "0.0.0.0:0"].map(String::from);
    // (NELI_CONSOLE_TOKEN is not set in the tests' environment.)
    let mut console = Member::spawn("console", &[], &argv, &g.dir.path().join("console.log"), None);
    let code = console.wait_exit(LONG).code();
    let err = console.log();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a loopback address") && err.contains("--token-file FILE or NELI_CONSOLE_TOKEN"), "{err}");
}

#[test]
fn with_a_token_a_request_without_it_gets_401_and_with_it_the_page() {
    let g = Group::new("console-token");
    let _leader = g.member_unguarded("solo", &[], &["sleep", "100000"]);
    let token_file = g.dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let listen = format!("0.0.0.0:{port}");
    let token_arg = token_file.display().to_string();
    let (mut console, _) = console(&g, "console", &["--listen", &listen, "--token-file", &token_arg]);
    let addr = format!("127.0.0.1:{port}");
    let (code, body) = get(&addr, "/", "");
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("solo"), "{body}");
    assert_eq!(get(&addr, "/", "Authorization: Bearer wrong-token\r\n").0, 401);
    assert_eq!(get(&addr, "/timeline.svg", "Authorization: Bearer s3cret-token\r\n").0, 200);
    // user:s3cret-token, as a browser sends basic auth.
    let basic = "Authorization: Basic dXNlcjpzM2NyZXQtdG9rZW4=\r\n";
    page_with(&addr, "/", basic, &["<td>solo</td>", "the command (token"]);
    console.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(console.wait_exit(LONG).code(), Some(0), "SIGTERM stops the console with 0");
}

/// Headless Chromium, if installed: Debian's `chromium`.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    })
}

/// Chromium headless with `args` on `url`: its stdout.
fn headless(browser: &str, args: &[&str], url: &str) -> String {
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000"])
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_real_browser_shows_the_roles_the_jobs_and_a_run_and_takes_a_screenshot() {
    let Some(browser) = chromium() else {
        skip("headless Chromium is not installed (apt-get install chromium; .ci/run installs it)");
        return;
    };
    let g = Group::new("console-browser");
    let file = g.dir.path().join("fleet.crontab");
    std::fs::write(&file, "@every 1s report true\n@every 2s backup false\n").unwrap();
    let _a = crontab_member(&g, "web-1", &file);
    let _b = crontab_member(&g, "web-2", &file);
    let (_console, addr) = console(&g, "console", &[]);
    let url = format!("http://{addr}/");
    page_with(&addr, "/", "", &["<td>report</td>", "<td>backup</td>", "exit 0</span>", "exit 1</span>"]);
    let mut dom = String::new();
    let seen = wait_for(LONG, || {
        dom = headless(browser, &["--dump-dom"], &url);
        [
            "<td>report</td>",
            "<td>backup</td>",
            "web-1",
            "web-2",
            "exit 0</span>",
            "exit 1</span>",
            "<svg id=\"timeline\"",
        ]
        .iter()
        .all(|w| dom.contains(w))
    });
    assert!(seen, "the browser's DOM lacks the jobs, members or runs:\n{dom}");
    // 5 s of the page's time: the script has fetched `main` again (every
    // 3 s) and put it in place; a broken refresh would have emptied it.
    assert!(dom.contains("id=\"main\" data-range=\"hour\""), "{dom}");
    let shot = g.dir.path().join("console.png");
    let arg = format!("--screenshot={}", shot.display());
    headless(browser, &[&arg, "--window-size=1280,900"], &url);
    let png = std::fs::read(&shot).unwrap_or_default();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a screenshot of the page ({} bytes)", png.len());
    if let Some(keep) = std::env::var_os("NELI_CONSOLE_SCREENSHOT") {
        std::fs::copy(&shot, keep).expect("keep the screenshot");
    }
}

/// The page's serve time for a group of 100 roles and one of 50 crontab
/// jobs with a day of runs (each job every minute: 72,000 runs, 144,000
/// records), as docs/proof.md reports it. A benchmark, not a timed test:
///
///     cargo test --release --test tests console::measure -- --ignored --nocapture
#[test]
#[ignore = "a benchmark: run it by hand (docs/proof.md)"]
fn measure() {
    let timed = |addr: &str, path: &str| -> (Duration, Duration, usize) {
        let mut took: Vec<Duration> = (0..20)
            .map(|_| {
                let at = std::time::Instant::now();
                let (code, body) = get(addr, path, "");
                assert_eq!(code, 200);
                assert!(body.len() > 1000);
                at.elapsed()
            })
            .collect();
        took.sort();
        (took[10], took[19], get(addr, path, "").1.len())
    };
    // 100 roles, led by two members.
    let roles = Group::new("console-measure-roles");
    let _members: Vec<Member> = ["r1", "r2"]
        .iter()
        .map(|name| roles.member_unguarded(name, &["--roles", "100"], &["sleep", "99999"]))
        .collect();
    let (_console, addr) = console(&roles, "console", &[]);
    let led = (0..100).map(|j| format!("<tr><td>{j}</td><td>-</td><td>r")).collect::<Vec<_>>();
    page_with(&addr, "/", "", &led.iter().map(String::as_str).collect::<Vec<_>>());
    for path in ["/", "/?range=day", "/main?range=day"] {
        let (median, max, bytes) = timed(&addr, path);
        println!("100 roles, GET {path}: median {median:?}, max {max:?} of 20, {bytes} bytes");
    }
    // 50 jobs with a day of runs.
    let jobs = Group::new("console-measure-jobs");
    let file = jobs.dir.path().join("fleet.crontab");
    let crontab: String = (0..50).map(|j| format!("@yearly job-{j:02} true\n")).collect();
    std::fs::write(&file, crontab).unwrap();
    let _a = crontab_member(&jobs, "j1", &file);
    let _b = crontab_member(&jobs, "j2", &file);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let records: Vec<String> = (0..1440u64)
        .flat_map(|m| (0..50u64).map(move |j| (m, j)))
        .flat_map(|(m, j)| {
            let start = now - (1440 - m) * 60_000;
            let code = if (m + j) % 97 == 0 { 1 } else { 0 };
            ["start", "end"].map(|event| {
                let end = match event {
                    "end" => format!(r#","end_ms":{},"exit_code":{code},"duration_ms":1500"#, start + 1500),
                    _ => String::new(),
                };
                format!(
                    r#"{{"v":1,"run":"f-{m}-{j}","event":"{event}","group":"g","topic":"t","role":{j},"job":"job-{j:02}","member":"j1","host":"h","pid":1,"token":1,"due_ms":{start},"start_ms":{start}{end}}}"#
                )
            })
        })
        .collect();
    forge(&jobs, &records.iter().map(String::as_bytes).collect::<Vec<_>>());
    let (_console, addr) = console(&jobs, "console", &[]);
    // Read to the newest forged run (the read is oldest first).
    let newest = std::time::UNIX_EPOCH + Duration::from_millis(now - 60_000);
    let newest = format!("<td>{}</td><td>job-49</td>", humantime::format_rfc3339_seconds(newest));
    page_with(&addr, "/", "", &["<td>job-00</td>", &newest]);
    for path in ["/", "/?range=day", "/main?range=day"] {
        let (median, max, bytes) = timed(&addr, path);
        println!("50 jobs, a day of runs (72,000), GET {path}: median {median:?}, max {max:?} of 20, {bytes} bytes");
    }
}
