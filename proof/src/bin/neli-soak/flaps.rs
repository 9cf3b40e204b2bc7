//! Health flaps at random moments of a join (`--flaps N`): the soak of
//! issue 65's "every standby listed by `status` within 2 s of its check
//! passing".
//!
//! A dev broker and three members at the product's timing, each with
//! `--health-cmd 'test -f ok-SLOT' --health-interval 200ms
//! --health-retries 1`, its command under the overlap detector. Each flap
//! takes a standby into a join (a restart under a new name, or a leave by
//! its check and a rejoin), removes its file at a random moment 0 to
//! 1.5 s after the member logs `healthy: joining the group` and creates it
//! again 0.1 to 0.5 s later. What is measured is the time from the check
//! passing again (the log line `health check passed: healthy`, by its own
//! timestamp; the file's return when no check saw it gone) to the end of
//! the first `neli-run status --json` that lists the member healthy on a
//! candidacy written since. Every `KILL_EVERY`th flap then stops the other
//! standby and kills the leader (SIGTERM and kill -9 in turn): the
//! just-flapped standby must take over, with no overlap.
//!
//! Exits 1 on an overlap, a standby never listed (stranded: 30 s), one
//! listed later than `GOAL`, or a takeover that did not come.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use neli_proof::brokers::Broker;
use neli_proof::detector::Detector;
use neli_proof::{die_with_runner, percentile, wait_for, Rng};

/// The issue's goal: listed within this of the check passing.
const GOAL: Duration = Duration::from_secs(2);
/// A standby not listed this long after its check passed is stranded.
const STRANDED: Duration = Duration::from_secs(30);
/// Members in the group: a leader and two standbys.
const MEMBERS: usize = 3;
/// Every this many flaps, the leader is killed after the flap.
const KILL_EVERY: usize = 10;
/// How long a takeover may take: kill -9 at the default session (6 s) plus
/// room for a loaded machine.
const TAKEOVER: Duration = Duration::from_secs(30);

const JOINING: &str = "healthy: joining the group";
const LEAVING: &str = "leaving the group until";
const FAILED: &str = "health check failed: unhealthy";
const PASSED: &str = "health check passed: healthy";

/// One member process: its name, process and log.
struct Member {
    name: String,
    child: Child,
    log: PathBuf,
}

/// What one flap measured.
struct Flap {
    slot: usize,
    /// The member flapped.
    name: String,
    how: &'static str,
    delay: Duration,
    down: Duration,
    /// Whether a check saw the file gone.
    failed: bool,
    /// From the check passing to the end of the first `status` listing it.
    listed: Option<Duration>,
    /// From the check passing to the candidacy that `status` listed being
    /// written (its writer's clock, as `status` reads it): `listed` less
    /// the polling and `status`'s own run.
    written: Option<Duration>,
    /// A leader kill after it: the signal and the takeover's time (None:
    /// none came within `TAKEOVER`).
    takeover: Option<(&'static str, Option<Duration>)>,
}

struct Run {
    neli: PathBuf,
    detector: Detector,
    brokers: String,
    group: String,
    members: Vec<Option<Member>>,
    started: usize,
}

/// Runs `flaps` flaps; the summary, and whether the goal held.
pub fn soak(flaps: usize, seed: u64) -> ExitCode {
    // Ctrl-C ends the soak early with a summary, and still cleans up.
    let interrupted = std::sync::Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone()).expect("signal handler");
    }
    let neli = std::env::current_exe().expect("own path").with_file_name("neli-run");
    let dir = std::env::temp_dir().join(format!("neli-soak-flaps-{}", std::process::id()));
    let detector = Detector::new(dir.clone()).expect("work dir");
    let broker = match Broker::dev(&neli, "kafka", "127.0.0.1", "127.0.0.1", &dir.join("broker.log"), None) {
        Ok(b) => b,
        Err(why) => {
            eprintln!("neli-soak: {why}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "neli-soak --flaps {flaps}: seed {seed}, dev broker, {MEMBERS} members at the product's timing, \
         --health-interval 200ms --health-retries 1, work dir {}",
        dir.display()
    );
    let mut run = Run {
        neli,
        detector,
        brokers: broker.address.clone(),
        group: format!("flaps-{}", std::process::id()),
        members: (0..MEMBERS).map(|_| None).collect(),
        started: 0,
    };
    let mut rng = Rng(seed);
    let mut done = Vec::new();
    for slot in 0..MEMBERS {
        fs::write(run.ok(slot), "").expect("ok file");
        run.start(slot);
        // The leader first, then each standby in the group: a flap strikes
        // a member that has joined.
        let log = run.member(slot).log.clone();
        let up = match slot {
            0 => wait_for(TAKEOVER, || run.detector.starts().len() == 1),
            _ => wait_for(TAKEOVER, || fs::read_to_string(&log).unwrap_or_default().contains("standby: in the group")),
        };
        if !up {
            eprintln!("neli-soak: {} neither led nor stood by within {TAKEOVER:?}", run.member(slot).name);
            return ExitCode::FAILURE;
        }
    }
    for n in 1..=flaps {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let mut flap = run.flap(&mut rng);
        if flap.listed.is_some() && n % KILL_EVERY == 0 {
            flap.takeover = Some(run.kill_leader(flap.slot, n / KILL_EVERY % 2 == 0));
        }
        print_flap(n, &flap);
        done.push(flap);
    }
    run.stop_all();
    report(&run, &done)
}

impl Run {
    fn ok(&self, slot: usize) -> PathBuf {
        self.detector.dir.join(format!("ok-{slot}"))
    }

    /// Starts a member in `slot` under a new name.
    fn start(&mut self, slot: usize) {
        self.started += 1;
        let name = format!("f{slot}-{}", self.started);
        let log = self.detector.dir.join(format!("{name}.log"));
        let out = fs::File::create(&log).expect("log file");
        let check = format!("test -f {}", self.ok(slot).display());
        let child = die_with_runner(&mut Command::new(&self.neli))
            .args(["-b", &self.brokers, "-g", &self.group, "--name", &name])
            .args(["--health-cmd", &check, "--health-interval", "200ms", "--health-retries", "1"])
            .arg("--")
            .args(self.detector.wrap())
            .args(["sleep", "100000"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .expect("start neli-run");
        self.members[slot] = Some(Member { name, child, log });
    }

    /// Stops the member in `slot` (SIGTERM, kill -9 after 30 s).
    fn stop(&mut self, slot: usize) {
        if let Some(mut m) = self.members[slot].take() {
            let _ = kill(Pid::from_raw(m.child.id() as i32), Signal::SIGTERM);
            if !wait_for(Duration::from_secs(30), || m.child.try_wait().ok().flatten().is_some()) {
                let _ = m.child.kill();
            }
            let _ = m.child.wait();
        }
    }

    fn stop_all(&mut self) {
        (0..MEMBERS).for_each(|slot| self.stop(slot));
    }

    fn member(&self, slot: usize) -> &Member {
        self.members[slot].as_ref().expect("a member")
    }

    /// The slot of the member whose command started last: the leader.
    fn leader(&self) -> Option<usize> {
        let (name, _) = self.detector.starts().pop()?;
        self.members.iter().position(|m| m.as_ref().is_some_and(|m| m.name == name))
    }

    /// One flap of a standby picked at random; how it went.
    fn flap(&mut self, rng: &mut Rng) -> Flap {
        let leader = self.leader();
        let standbys: Vec<usize> = (0..MEMBERS).filter(|s| Some(*s) != leader).collect();
        let slot = rng.pick(&standbys);
        let ok = self.ok(slot);
        let how = rng.pick(&["restart", "rejoin"]);
        let mark = match how {
            "restart" => {
                self.stop(slot);
                self.start(slot);
                0
            }
            _ => {
                let mark = log_len(&self.member(slot).log);
                fs::remove_file(&ok).expect("ok file");
                let left = wait_for(STRANDED, || self.lines_after(slot, mark).iter().any(|l| l.contains(LEAVING)));
                fs::write(&ok, "").expect("ok file");
                if !left {
                    eprintln!("neli-soak: {} did not leave on its failing check", self.member(slot).name);
                }
                mark
            }
        };
        let delay = rng.between(Duration::ZERO, Duration::from_millis(1500));
        let down = rng.between(Duration::from_millis(100), Duration::from_millis(500));
        let name = self.member(slot).name.clone();
        let mut flap =
            Flap { slot, name, how, delay, down, failed: false, listed: None, written: None, takeover: None };
        if !wait_for(STRANDED, || self.lines_after(slot, mark).iter().any(|l| l.contains(JOINING))) {
            eprintln!("neli-soak: {} never joined", self.member(slot).name);
            return flap;
        }
        let joined = log_len(&self.member(slot).log);
        std::thread::sleep(delay);
        fs::remove_file(&ok).expect("ok file");
        std::thread::sleep(down);
        fs::write(&ok, "").expect("ok file");
        let back = wall_ms(SystemTime::now());
        let mut polls: Vec<(u64, Option<u64>)> = Vec::new();
        let (deadline, mut last) = (Instant::now() + STRANDED, String::new());
        while Instant::now() < deadline {
            let (end, at, said) = self.poll_status(slot);
            polls.push((end, at));
            last = said;
            let lines = self.lines_after(slot, joined);
            let fail = lines.iter().position(|l| l.contains(FAILED));
            flap.failed = fail.is_some();
            let passed = match fail {
                Some(at) => lines[at..].iter().find(|l| l.contains(PASSED)).and_then(|l| log_ms(l)),
                // A check runs every 200 ms: none failing 0.6 s after the
                // file's return saw it gone.
                None if wall_ms(SystemTime::now()) > back + 600 => Some(back),
                None => None,
            };
            if let Some(p) = passed {
                if let Some((end, at)) = polls.iter().find(|(_, at)| at.is_some_and(|at| at >= p)) {
                    flap.listed = Some(Duration::from_millis(end.saturating_sub(p)));
                    flap.written = at.map(|at| Duration::from_millis(at.saturating_sub(p)));
                    break;
                }
            }
        }
        if flap.listed.is_none() {
            let name = &self.member(slot).name;
            eprintln!("neli-soak: {name} not listed; the check came back at {back} (wall ms); status's last standbys (name, healthy, last seen ms): {last}");
        }
        flap
    }

    /// One `neli-run status --json`: when it ended (wall ms), and when the
    /// newest healthy candidacy of the member in `slot` it lists was
    /// written (at the latest).
    fn poll_status(&self, slot: usize) -> (u64, Option<u64>, String) {
        let out = Command::new(&self.neli)
            .args(["status", "-b", &self.brokers, "-g", &self.group, "--json"])
            .stderr(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let end = wall_ms(SystemTime::now());
        let name = &self.member(slot).name;
        let listed = standbys(&out);
        let at = listed
            .iter()
            .filter(|(n, healthy, _)| n == name && *healthy)
            .map(|(_, _, seen)| end.saturating_sub(*seen))
            .max();
        (end, at, format!("{listed:?}"))
    }

    /// Lines of the log of the member in `slot` after byte `mark`.
    fn lines_after(&self, slot: usize, mark: u64) -> Vec<String> {
        let text = fs::read(&self.member(slot).log).unwrap_or_default();
        let from = (mark as usize).min(text.len());
        String::from_utf8_lossy(&text[from..]).lines().map(str::to_string).collect()
    }

    /// Stops every member but the leader and the one in `slot`, then the
    /// leader (kill -9 or SIGTERM); the takeover's time, if the member in
    /// `slot` took over. Then fills the slots again.
    fn kill_leader(&mut self, slot: usize, nine: bool) -> (&'static str, Option<Duration>) {
        let Some(leader) = self.leader() else { return ("none", None) };
        for other in (0..MEMBERS).filter(|s| *s != leader && *s != slot) {
            self.stop(other);
        }
        let starts = self.detector.starts().len();
        let signal = if nine { Signal::SIGKILL } else { Signal::SIGTERM };
        let t = Instant::now();
        let _ = kill(Pid::from_raw(self.member(leader).child.id() as i32), signal);
        let name = self.member(slot).name.clone();
        let took = wait_for(TAKEOVER, || self.detector.starts().iter().skip(starts).any(|(n, _)| *n == name))
            .then(|| t.elapsed());
        self.stop(leader);
        for other in 0..MEMBERS {
            if self.members[other].is_none() {
                self.start(other);
            }
        }
        // The new standbys joined and listed before the next flap.
        for other in (0..MEMBERS).filter(|s| *s != slot) {
            let log = &self.member(other).log;
            wait_for(STRANDED, || fs::read_to_string(log).unwrap_or_default().contains("standby: in the group"));
        }
        (if nine { "kill -9" } else { "SIGTERM" }, took)
    }
}

/// (name, healthy, last_seen_ms) of every standby in a `status --json`.
fn standbys(json: &str) -> Vec<(String, bool, u64)> {
    // "standbys":[{"drained":..,"healthy":true,..,"last_seen_ms":12,"name":"f1-2",..}]
    let Some(list) = json.split("\"standbys\":[").nth(1) else { return Vec::new() };
    list.split('}')
        .filter_map(|entry| {
            let field = |key: &str| {
                let rest = entry.split(&format!("\"{key}\":")).nth(1)?;
                Some(rest.split([',', '}']).next()?.trim_matches('"').to_string())
            };
            Some((field("name")?, field("healthy")? == "true", field("last_seen_ms")?.parse().ok()?))
        })
        .collect()
}

fn log_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn wall_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

/// A log line's timestamp ("2026-11-29T13:22:57.123456Z ..."), wall ms.
fn log_ms(line: &str) -> Option<u64> {
    let stamp = line.split_whitespace().next()?.strip_suffix('Z')?;
    let (date, time) = stamp.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut t = time.split(':');
    let (h, min) = (t.next()?.parse::<u64>().ok()?, t.next()?.parse::<u64>().ok()?);
    let secs: f64 = t.next()?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some(days as u64 * 86_400_000 + (h * 3600 + min * 60) * 1000 + (secs * 1000.0) as u64)
}

fn print_flap(n: usize, f: &Flap) {
    let listed = match (f.listed, f.written) {
        (Some(l), Some(w)) => format!("{} ms (its candidacy written at {} ms)", l.as_millis(), w.as_millis()),
        _ => "NEVER".to_string(),
    };
    let takeover = match f.takeover {
        Some((how, Some(t))) => format!(", leader {how}: took over in {} ms", t.as_millis()),
        Some((how, None)) => format!(", leader {how}: NO TAKEOVER"),
        None => String::new(),
    };
    println!(
        "flap {n} ({}): slot {} {}, file gone {} ms after joining for {} ms, check {}, listed {listed} after it passed{takeover}",
        f.name,
        f.slot,
        f.how,
        f.delay.as_millis(),
        f.down.as_millis(),
        if f.failed { "failed" } else { "never failed" },
    );
}

fn report(run: &Run, flaps: &[Flap]) -> ExitCode {
    let mut listed: Vec<Duration> = flaps.iter().filter_map(|f| f.listed).collect();
    listed.sort();
    let mut written: Vec<Duration> = flaps.iter().filter_map(|f| f.written).collect();
    written.sort();
    let stranded = flaps.iter().filter(|f| f.listed.is_none()).count();
    let late = listed.iter().filter(|d| **d > GOAL).count();
    let failed = flaps.iter().filter(|f| f.failed).count();
    let kills: Vec<_> = flaps.iter().filter_map(|f| f.takeover).collect();
    let mut takeovers: Vec<Duration> = kills.iter().filter_map(|k| k.1).collect();
    takeovers.sort();
    let overlaps = run.detector.overlaps().len();
    let ms = |d: Duration| d.as_millis();
    println!(
        "\n{} flaps ({failed} with a check failing, {} restarts, {} rejoins): listed after the check passed \
         p50 {} ms, p99 {} ms, max {} ms; over {GOAL:?}: {late}; stranded (not listed in {STRANDED:?}): {stranded}",
        flaps.len(),
        flaps.iter().filter(|f| f.how == "restart").count(),
        flaps.iter().filter(|f| f.how == "rejoin").count(),
        ms(percentile(&listed, 0.5)),
        ms(percentile(&listed, 0.99)),
        ms(listed.last().copied().unwrap_or_default()),
    );
    println!(
        "the candidacy status listed was written after the check passed: p50 {} ms, p99 {} ms, max {} ms",
        ms(percentile(&written, 0.5)),
        ms(percentile(&written, 0.99)),
        ms(written.last().copied().unwrap_or_default()),
    );
    println!(
        "leader killed {} times (SIGTERM and kill -9 in turn): the just-flapped standby took over {} times \
         (max {} ms); overlaps: {overlaps}",
        kills.len(),
        takeovers.len(),
        ms(takeovers.last().copied().unwrap_or_default()),
    );
    let safe = overlaps == 0 && stranded == 0 && late == 0 && takeovers.len() == kills.len();
    println!("{}", if safe { "PASS" } else { "FAIL" });
    if safe {
        let _ = fs::remove_dir_all(&run.detector.dir);
        ExitCode::SUCCESS
    } else {
        println!("logs kept in {}", run.detector.dir.display());
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_stamps_and_status_are_read() {
        assert_eq!(log_ms("2026-11-29T13:22:57.123456Z  INFO health check passed"), Some(1_795_958_577_123));
        assert_eq!(log_ms("1970-01-01T00:00:01.5Z x"), Some(1_500));
        let json = r#"{"standbys":[{"drained":false,"healthy":true,"last_seen_ms":12,"name":"f1-2"},{"healthy":false,"last_seen_ms":5,"name":"f2-3"}],"version":1}"#;
        assert_eq!(standbys(json), vec![("f1-2".into(), true, 12), ("f2-3".into(), false, 5)]);
    }
}
