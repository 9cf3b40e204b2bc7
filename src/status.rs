//! `neli-run status`, `yield`, `pause` and `resume`: who leads a group, read from the heartbeat records on
//! partition 0 rather than from the group coordinator, so it works on any
//! broker (including ones without DescribeGroups) and never joins the group.
//!
//! The leader is the writer of the newest record that carries a fencing
//! token; it is *fresh* while that record is younger than the deadline the
//! writer itself declared, unless a newer record of the same writer (name
//! and incarnation) carries none: a disclaimer (released) or a fenced
//! leader's (contending) takes the claim back, as it does in the members'
//! own claim check (`Leader::on_other`). Ages use the writer's wall clock
//! (the record's `at_ms`), so clock skew between machines shifts them.
//!
//! The group is paused while the newest pause or resume request (by offset),
//! read itself or carried forward by a record, is a pause.
//!
//! Exit statuses: `exit::STATUSES` (its `status`, `yield_` and `pause` columns) says
//! what each means; a closed stdout (`status | head -1`) ends quietly with 0.
//!
//! Every string read from the topic is someone's choice: the text output
//! escapes control characters in it ([`printable`]).

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::{Duration, Instant, UNIX_EPOCH};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;
use tracing::debug;

use crate::cli::{StatusArgs, YieldArgs};
use crate::clock::wall_ms;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::kafka::candidacy;
use crate::kafka::heartbeat::{printable, Heartbeat, WireJob, WirePause};
use crate::kafka::yield_request::{PauseRequest, Yield};

/// How many of the newest records to read: with a 500 ms interval, about
/// half an hour of history, which is plenty to find the current leader.
const HISTORY: i64 = 4096;

/// How many of a schedule's runs `status` shows: the newest. Older ones
/// are in the retained records only while the topic keeps them; the newest
/// always is, since every record carries it forward.
const RUNS: usize = 10;

/// `status --json`'s format (docs/operations.md, "Who leads?"): raised when a key
/// changes meaning or goes away; new keys may appear without it.
const JSON_VERSION: u32 = 1;

/// The longest `yield --timeout` taken: a yield that waits longer is a typo.
const MAX_YIELD_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Why `status` or `yield` ends without its answer.
#[derive(Debug)]
enum Stop {
    /// stdout was closed (`status | head -1`): end quietly, with 0.
    Closed,
    /// Exit with its status after saying it (one line).
    Fail(Failure),
}

impl From<Failure> for Stop {
    fn from(failure: Failure) -> Stop {
        Stop::Fail(failure)
    }
}

fn fail<T>(kind: Kind, message: impl Into<String>) -> Result<T, Stop> {
    Err(Stop::Fail(Failure::new(kind, message)))
}

/// Writes one line to stdout; a reader that went away is [`Stop::Closed`].
fn say(text: &str) -> Result<(), Stop> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Stop::Closed),
        Err(e) => fail(Kind::Io, format!("cannot write to stdout: {e}")),
    }
}

/// Whether stdout is a pipe or socket whose reader has gone: `--watch`
/// writes only on a change, and must not outlive `| head -1` until then.
fn stdout_closed() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// A client the configuration did not allow, said as the run mode says it
/// (rdkafka's own message carries the property's value, which may be a
/// secret).
fn rejected(err: KafkaError, target: &Target) -> Stop {
    Stop::Fail(crate::config::creation_error(err, target))
}

/// The status or failure of `result`, for `main` to say: a reader that
/// closed our stdout ended us quietly with 0.
fn finish(result: Result<u8, Stop>) -> Result<u8, Failure> {
    match result {
        Ok(code) => Ok(code),
        Err(Stop::Closed) => Ok(0),
        Err(Stop::Fail(failure)) => Err(failure),
    }
}

/// The clients' context: librdkafka's chatter goes to debug level (-v
/// shows it), and the errors it reports only there are kept, so that a
/// wrong password reads as one and not as "all brokers down".
struct Probe {
    topic: String,
    group: String,
    /// The first error no retry fixes (authentication, authorization).
    fatal: Mutex<Option<Failure>>,
    /// The latest other error, for "unreachable" messages.
    last: Mutex<Option<String>>,
    /// Why a record we wrote was not delivered, if it was not.
    undelivered: Mutex<Option<String>>,
    /// Where the record we wrote landed, once delivered.
    delivered: Mutex<Option<i64>>,
}

impl Probe {
    fn new(target: &Target) -> Probe {
        Probe {
            topic: target.topic.clone(),
            group: target.group.clone(),
            fatal: Mutex::new(None),
            last: Mutex::new(None),
            undelivered: Mutex::new(None),
            delivered: Mutex::new(None),
        }
    }

    fn note(&self, err: &KafkaError, reason: &str) {
        let Some(code) = err.rdkafka_error_code() else { return };
        use RDKafkaErrorCode::*;
        let what = match code {
            Authentication | SaslAuthenticationFailed => format!("Kafka authentication failed: {reason}"),
            TopicAuthorizationFailed | GroupAuthorizationFailed | ClusterAuthorizationFailed => {
                format!("Kafka denied access: {err}")
            }
            _ => format!("{err}: {reason}"),
        };
        match crate::kafka::fatal(code, what, &self.topic, &self.group) {
            Some(fatal) => {
                self.fatal.lock().expect("probe lock").get_or_insert(fatal);
            }
            None => {
                let what = match code {
                    SSL => format!("TLS handshake failed: {reason}"),
                    _ => reason.to_string(),
                };
                *self.last.lock().expect("probe lock") = Some(what);
            }
        }
    }

    /// What to say when Kafka did not answer (`what` failed): the fatal
    /// error seen meanwhile, if any, else "unreachable" (69).
    fn failure(&self, what: String) -> Stop {
        // librdkafka's reasons quote what brokers said: one line, escaped.
        if let Some(fatal) = self.fatal.lock().expect("probe lock").clone() {
            return Stop::Fail(Failure::new(fatal.kind, printable(&fatal.message)));
        }
        match self.last.lock().expect("probe lock").as_deref() {
            Some(last) if !what.contains(last) => {
                Stop::Fail(Failure::new(Kind::Unavailable, format!("{what} ({})", printable(last))))
            }
            _ => Stop::Fail(Failure::new(Kind::Unavailable, what)),
        }
    }
}

impl ClientContext for Probe {
    fn log(&self, _: RDKafkaLogLevel, fac: &str, message: &str) {
        debug!(target: "librdkafka", "{fac} {message}");
    }

    fn error(&self, err: KafkaError, reason: &str) {
        debug!(target: "librdkafka", %err, "{reason}");
        self.note(&err, reason);
    }
}

impl ConsumerContext for Probe {}

impl ProducerContext for Probe {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(msg) => *self.delivered.lock().expect("probe lock") = Some(msg.offset()),
            Err((err, _)) => {
                self.note(err, &err.to_string());
                *self.undelivered.lock().expect("probe lock") = Some(err.to_string());
            }
        }
    }
}

/// What the records say.
#[derive(Debug, Default)]
struct View {
    /// The newest record carrying a token.
    leader: Option<Heartbeat>,
    /// When its writer took that claim back (the wall clock of its first
    /// newer record without a token), if it did.
    withdrawn_ms: Option<u64>,
    /// Its writer's newest record says its health check fails.
    unhealthy: bool,
    /// The newest run of a wave the records name (once per wave), as the
    /// members read it: the larger token, or of one run, its ending.
    job: Option<WireJob>,
    /// A schedule's newest runs the records name, oldest first.
    runs: Vec<WireJob>,
    /// When the schedule is next due, as the newest record that said
    /// planned it.
    next_ms: Option<u64>,
    /// The newest pause or resume request (by offset) the records name.
    pause: Option<WirePause>,
    /// The newest candidacy of each member that does not own partition 0
    /// (live or not: `standbys` says which are).
    candidacies: Vec<candidacy::Record>,
}

impl View {
    /// Takes in the record at `offset`: a heartbeat, a candidacy, or a pause or resume
    /// request (anything else is not ours to read).
    fn read(&mut self, payload: Option<&[u8]>, offset: i64) {
        let Some(payload) = payload else { return };
        if let Some(mut hb) = Heartbeat::decode(payload) {
            // A record names only an earlier request (as the members read it).
            if let Some(pause) = hb.pause.clone().filter(|p| p.offset < offset) {
                self.note_pause(pause);
            }
            hb.pause = hb.pause.filter(|p| p.offset < offset);
            self.add(hb);
        } else if let Some(c) = candidacy::Record::decode(payload) {
            self.candidacies.retain(|known| known.name != c.name);
            self.candidacies.push(c);
        } else if let Some(request) = PauseRequest::decode(payload) {
            let p = request.at(offset);
            let running = false;
            self.note_pause(WirePause { offset, paused: p.paused, stop: p.stop, at_ms: p.at_ms, by: p.by, running });
        }
    }

    fn note_pause(&mut self, pause: WirePause) {
        if self.pause.as_ref().is_none_or(|known| pause.offset > known.offset) {
            self.pause = Some(pause);
        }
    }

    /// The pause in force, if the group is paused.
    fn paused(&self) -> Option<&WirePause> {
        self.pause.as_ref().filter(|p| p.paused)
    }

    /// The members whose candidacy is live at `now_ms`: by priority, the
    /// highest first, then by name.
    fn standbys(&self, now_ms: u64) -> Vec<&candidacy::Record> {
        let mut live: Vec<_> = self.candidacies.iter().filter(|c| c.live(now_ms)).collect();
        live.sort_by(|a, b| b.priority.cmp(&a.priority).then_with(|| a.name.cmp(&b.name)));
        live
    }

    fn add(&mut self, mut hb: Heartbeat) {
        // Its writer owns partition 0, or left it: no standby now.
        self.candidacies.retain(|c| c.name != hb.name || c.incarnation != hb.incarnation);
        self.next_ms = hb.next_ms.or(self.next_ms);
        if let Some(job) = hb.job.take() {
            let newer = |known: &WireJob| {
                crate::leader::supersedes((job.token, job.due_ms, job.code), (known.token, known.due_ms, known.code))
            };
            if job.due_ms.is_some() {
                match self.runs.iter_mut().find(|r| (r.token, r.due_ms) == (job.token, job.due_ms)) {
                    Some(known) if newer(known) => *known = job.clone(),
                    Some(_) => {}
                    None => {
                        self.runs.push(job.clone());
                        self.runs.sort_by_key(|r| (r.due_ms, r.token));
                        if self.runs.len() > RUNS {
                            self.runs.remove(0);
                        }
                    }
                }
            }
            if self.job.as_ref().is_none_or(newer) {
                self.job = Some(job);
            }
        }
        if self.leader.as_ref().is_some_and(|l| l.name == hb.name && l.incarnation == hb.incarnation) {
            self.unhealthy = hb.unhealthy;
        }
        if hb.token.is_some() {
            self.unhealthy = hb.unhealthy;
            self.leader = Some(hb);
            self.withdrawn_ms = None;
        } else if self.withdrawn_ms.is_none()
            && self.leader.as_ref().is_some_and(|l| l.name == hb.name && l.incarnation == hb.incarnation)
        {
            // A leader that released (or was fenced) runs nothing: without
            // this it showed as leading until its deadline.
            self.withdrawn_ms = Some(hb.at_ms);
        }
    }

    /// Whether the records are a schedule's (`--every`, `--cron`).
    fn scheduled(&self) -> bool {
        !self.runs.is_empty() || self.next_ms.is_some()
    }

    /// The leader, if its newest heartbeat is within its own deadline and
    /// it has not taken its claim back since.
    fn fresh_leader(&self, now_ms: u64) -> Option<&Heartbeat> {
        self.leader
            .as_ref()
            .filter(|hb| self.withdrawn_ms.is_none() && now_ms.saturating_sub(hb.at_ms) < hb.deadline_ms)
    }

    /// A one-line summary that changes exactly when the answer does.
    fn key(&self, now_ms: u64) -> String {
        let leader = match self.fresh_leader(now_ms) {
            Some(hb) => format!("{} {}", hb.name, hb.token.unwrap_or_default()),
            None => "none".into(),
        };
        let running = |hb: &Heartbeat| hb.pause.as_ref().map(|p| p.running);
        let paused = match self.paused() {
            Some(p) => format!(" paused {} {:?}", p.offset, self.fresh_leader(now_ms).and_then(running)),
            None => String::new(),
        };
        // Who may lead next, and whether they can: not when they last wrote.
        let standbys: String = self
            .standbys(now_ms)
            .iter()
            .map(|c| format!(" {}/{} {} {} {}", c.name, c.incarnation, c.priority, c.never_lead, c.unhealthy))
            .collect();
        format!("{leader}{paused}{standbys}")
    }
}

fn ago(now_ms: u64, then_ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(now_ms.saturating_sub(then_ms))).to_string()
}

fn rfc3339(ms: u64) -> String {
    written(ms, |t| humantime::format_rfc3339_seconds(t).to_string())
}

/// As [`rfc3339`], to the millisecond: when a run started and ended.
fn rfc3339_ms(ms: u64) -> String {
    written(ms, |t| humantime::format_rfc3339_millis(t).to_string())
}

/// A record's time as `format` writes it. The time is the writer's word:
/// one past what SystemTime holds must not panic here.
fn written(ms: u64, format: impl Fn(std::time::SystemTime) -> String) -> String {
    match UNIX_EPOCH.checked_add(Duration::from_millis(ms)).filter(|_| ms < 253_402_300_800_000) {
        Some(t) => format(t),
        None => format!("{ms} ms after the epoch"),
    }
}

fn render(target: &Target, view: &View, json_out: bool) -> String {
    let now = wall_ms();
    let fresh = view.fresh_leader(now);
    if json_out {
        let leader = view.leader.as_ref().map(|hb| {
            json!({
                "name": hb.name,
                "host": hb.host,
                "pid": hb.pid,
                "token": hb.token,
                "leader_since": hb.since_ms.map(rfc3339),
                "heartbeat_age_ms": now.saturating_sub(hb.at_ms),
                "heartbeat_deadline_ms": hb.deadline_ms,
                "withdrawn_age_ms": view.withdrawn_ms.map(|ms| now.saturating_sub(ms)),
                "unhealthy": view.unhealthy,
                "timing": hb.timing,
            })
        });
        let schedule = view.scheduled().then(|| {
            let runs: Vec<_> = view
                .runs
                .iter()
                .map(|run| {
                    json!({
                        "due": run.due_ms.map(rfc3339),
                        "started": rfc3339_ms(run.wave_ms),
                        "ended": run.ended_ms.map(rfc3339_ms),
                        "status": run.code,
                        "state": run_state(run, fresh),
                        "attempt": run.attempt,
                        "token": run.token,
                        "name": run.name,
                        "host": run.host,
                    })
                })
                .collect();
            json!({ "next_due": view.next_ms.map(rfc3339), "runs": runs })
        });
        let last_run = view.job.as_ref().map(|job| {
            json!({
                "due": job.due_ms.map(rfc3339),
                "wave": rfc3339(job.wave_ms),
                "attempt": job.attempt,
                "token": job.token,
                "name": job.name,
                "host": job.host,
                "status": job.code,
                "state": run_state(job, fresh),
            })
        });
        let paused = view.paused().map(|p| {
            json!({
                "since": rfc3339(p.at_ms),
                "by": p.by,
                "asker": p.by.describe(),
                "stop": p.stop,
                "offset": p.offset,
                "leader_command_running": fresh.and_then(|hb| hb.pause.as_ref()).map(|n| n.running),
            })
        });
        return json!({
            "version": JSON_VERSION,
            "group": target.group,
            "topic": target.topic,
            "fresh": fresh.is_some(),
            "leader": leader,
            "last_run": last_run,
            "schedule": schedule,
            "paused": paused,
            "standbys": view.standbys(now).iter().map(|c| json!({
                "name": c.name,
                "host": c.host,
                "pid": c.pid,
                "priority": c.priority,
                "never_lead": c.never_lead,
                "healthy": !c.unhealthy,
                "since": rfc3339(c.since_ms),
                "last_seen_ms": now.saturating_sub(c.at_ms),
            })).collect::<Vec<_>>(),
        })
        .to_string();
    }
    let paused = view.paused().map_or(String::new(), |p| pause_line(p, fresh, now));
    let standbys = standby_lines(view, now);
    if view.scheduled() {
        return leadership(target, view, fresh, now) + &paused + &schedule_lines(view, fresh, now) + &standbys;
    }
    let last_run = view.job.as_ref().map_or(String::new(), |job| run_line(job, fresh, now));
    leadership(target, view, fresh, now) + &paused + &last_run + &standbys
}

/// The pause line: since when, by whom, and with --stop whether the
/// leader's command is gone yet.
fn pause_line(pause: &WirePause, fresh: Option<&Heartbeat>, now: u64) -> String {
    let since = format!("{} ({} ago)", rfc3339(pause.at_ms), ago(now, pause.at_ms));
    let command = match (pause.stop, fresh.and_then(|hb| hb.pause.as_ref()).map(|n| n.running)) {
        (_, None) => "",
        (true, Some(true)) => ": the leader's command is stopping (--stop)",
        (true, Some(false)) => ": the leader's command is stopped (--stop)",
        (false, Some(true)) => ": the leader's command runs on until it ends, and does not start again",
        (false, Some(false)) => ": the leader does not start its command",
    };
    format!("\n  paused since {since} by {}{command}; `neli-run resume` ends it", pause.by.describe())
}

/// The live members besides the leader, a line each: who may lead next
/// (the highest priority first), who may not while its health check fails,
/// and who only watches (--never-lead).
fn standby_lines(view: &View, now: u64) -> String {
    let mut out = String::new();
    for c in view.standbys(now) {
        let what = match (c.never_lead, c.unhealthy) {
            (true, _) => "watcher".to_string(),
            (false, false) => format!("standby, priority {}", c.priority),
            (false, true) => {
                format!("standby, priority {}, unhealthy (--health-cmd fails: it may not lead)", c.priority)
            }
        };
        out += &format!(
            "\n  {what}: {n} (host {h}, pid {p}) since {s} ({sa} ago), last seen {a} ago",
            n = printable(&c.name),
            h = printable(&c.host),
            p = c.pid,
            s = rfc3339(c.since_ms),
            sa = ago(now, c.since_ms),
            a = ago(now, c.at_ms),
        );
    }
    out
}

/// The last line of a command run once per wave, or of a service (whose
/// run is a wave of one that never ends): what it does now, in the words
/// of a service while it runs; attempts only once it ended or was cut
/// short.
fn run_line(job: &WireJob, fresh: Option<&Heartbeat>, now: u64) -> String {
    let by = format!("by {} (host {}), token {}", printable(&job.name), printable(&job.host), job.token);
    let retried = match job.attempt {
        1 => String::new(),
        a => format!(", attempt {a} (earlier attempts of the run started {} were cut short)", rfc3339(job.wave_ms)),
    };
    match (job.code, run_state(job, fresh)) {
        (Some(code), _) => {
            format!("\n  last run: exited {code}, started {}, {by}{retried}", rfc3339(job.wave_ms))
        }
        (None, "running") => {
            // This attempt's start: the wave's for a first attempt, else
            // its leader's (who started it on becoming leader).
            let start = match job.attempt {
                1 => Some(job.wave_ms),
                _ => fresh.and_then(|hb| hb.since_ms),
            };
            let since = start.map_or(String::new(), |ms| format!(" since {} ({} ago)", rfc3339(ms), ago(now, ms)));
            format!("\n  command running{since}, {by}")
        }
        (None, _) if fresh.is_some_and(|hb| hb.pause.as_ref().is_some_and(|p| p.paused && !p.running)) => {
            format!(
                "\n  last run: stopped by the pause (it runs again on resume), started {}, {by}",
                rfc3339(job.wave_ms)
            )
        }
        (None, _) => format!(
            "\n  last run: cut short (its leader crashed, was fenced or stopped: the next leader runs it again), \
             started {}, {by}{retried}",
            rfc3339(job.wave_ms)
        ),
    }
}

/// The text's first lines: who leads, or led last.
fn leadership(target: &Target, view: &View, fresh: Option<&Heartbeat>, now: u64) -> String {
    let group = printable(&target.group);
    let health = match (view.unhealthy, fresh) {
        (false, _) => "",
        (true, Some(_)) => "\n  its health check fails (--health-cmd): it is handing over",
        (true, None) => "\n  it stood aside: its health check fails (--health-cmd)",
    };
    let lines = match (fresh, &view.leader) {
        (Some(hb), _) => format!(
            "group {group}: leader {n} (host {h}, pid {p}), token {t}\n  leader since {s} ({sa} ago)\n  last heartbeat {a} ago (deadline {d})",
            n = printable(&hb.name),
            h = printable(&hb.host),
            p = hb.pid,
            t = hb.token.unwrap_or_default(),
            s = hb.since_ms.map_or("?".into(), rfc3339),
            sa = hb.since_ms.map_or("?".into(), |s| ago(now, s)),
            a = ago(now, hb.at_ms),
            d = humantime::format_duration(Duration::from_millis(hb.deadline_ms)),
        ),
        (None, Some(hb)) => format!(
            "group {group}: no fresh leader (last: {n}, token {t}, {a} ago)",
            n = printable(&hb.name),
            t = hb.token.unwrap_or_default(),
            a = match view.withdrawn_ms {
                Some(ms) => format!("stopped leading {}", ago(now, ms)),
                None => format!("last heartbeat {}", ago(now, hb.at_ms)),
            },
        ),
        (None, None) => {
            format!("group {group}: no leader in the retained heartbeats of {}", printable(&target.topic))
        }
    };
    lines + health
}

/// A schedule's lines: when it is next due, and its newest runs.
fn schedule_lines(view: &View, fresh: Option<&Heartbeat>, now: u64) -> String {
    let mut out = match view.next_ms {
        Some(next) if next >= now => format!("\n  next run due {} (in {})", rfc3339(next), ago(next, now)),
        Some(next) => format!("\n  next run was due {} ({} ago)", rfc3339(next), ago(now, next)),
        None => String::new(),
    };
    if !view.runs.is_empty() {
        out += "\n  runs (oldest first):";
    }
    for run in &view.runs {
        out += &format!(
            "\n    due {d}: started {s}, {e}, by {n} (host {h}), token {t}{a}",
            d = run.due_ms.map_or("?".into(), rfc3339),
            s = rfc3339_ms(run.wave_ms),
            e = match (run.code, run.ended_ms) {
                (Some(code), Some(ended)) => format!("ended {} with status {code}", rfc3339_ms(ended)),
                (Some(code), None) => format!("exited {code}"),
                (None, _) => run_state(run, fresh).replace('-', " "),
            },
            n = printable(&run.name),
            h = printable(&run.host),
            t = run.token,
            a = if run.attempt > 1 { format!(", attempt {}", run.attempt) } else { String::new() },
        );
    }
    out
}

/// Where a wave's run stands: "exited", "running" (its leader leads, fresh,
/// and its command runs) or "cut-short" (its leader crashed, was fenced or
/// stopped, or `pause --stop` stopped it: it runs again).
fn run_state(job: &WireJob, fresh: Option<&Heartbeat>) -> &'static str {
    let runs = |hb: &Heartbeat| hb.token == Some(job.token) && hb.pause.as_ref().is_none_or(|p| p.running);
    match (job.code, fresh) {
        (Some(_), _) => "exited",
        (None, Some(hb)) if runs(hb) => "running",
        (None, _) => "cut-short",
    }
}

/// Runs `neli-run status`.
pub fn main(args: StatusArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    let (json_out, watch) = (args.json, args.watch);
    finish(Target::from_args(args.kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let fresh = status(&target, json_out, watch)?;
        Ok(if fresh { 0 } else { Kind::NoLeader.code() })
    }))
}

/// A reader of partition 0 outside the group, caught up to its end.
fn read_partition(target: &Target) -> Result<(BaseConsumer<Probe>, View), Stop> {
    // librdkafka wants a group for assign(); assign() never joins it.
    let group = format!("{}.status", target.group);
    let config = target.client_config(&[
        ("group.id", &group),
        ("enable.auto.commit", "false"),
        ("enable.partition.eof", "true"),
        ("fetch.wait.max.ms", "100"),
    ]);
    let consumer: BaseConsumer<Probe> = match config.create_with_context(Probe::new(target)) {
        Ok(c) => c,
        Err(e) => return Err(rejected(e, target)),
    };
    let probe = consumer.context();
    // Asked in short rounds: a failed login shows between two of them.
    let until = Instant::now() + Duration::from_secs(5);
    let marks = loop {
        let marks = consumer.fetch_watermarks(&target.topic, 0, Duration::from_secs(1));
        if marks.is_ok() {
            break marks;
        }
        // librdkafka reports why (e.g. a failed login) as an event that only
        // polling serves to the context.
        for _ in 0..5 {
            if consumer.poll(Duration::from_millis(100)).is_none() || probe.fatal.lock().expect("probe lock").is_some()
            {
                break;
            }
        }
        let unknown = matches!(
            marks,
            Err(KafkaError::MetadataFetch(
                RDKafkaErrorCode::UnknownPartition | RDKafkaErrorCode::UnknownTopicOrPartition
            ) | KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownTopicOrPartition))
        );
        if unknown || probe.fatal.lock().expect("probe lock").is_some() || Instant::now() >= until {
            break marks;
        }
    };
    let (low, high) = match marks {
        Ok(marks) => marks,
        Err(
            KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownPartition)
            | KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownTopicOrPartition)
            | KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownTopicOrPartition),
        ) if probe.fatal.lock().expect("probe lock").is_none() => {
            // A topic we may not see has no partitions either: tell that apart.
            let denied = consumer.fetch_metadata(Some(&target.topic), Duration::from_secs(2)).ok().and_then(|md| {
                let code = md.topics().first()?.error().map(RDKafkaErrorCode::from)?;
                crate::kafka::fatal(
                    code,
                    format!("Kafka denied access: topic {}: {code}", target.topic),
                    &target.topic,
                    &target.group,
                )
            });
            if let Some(fatal) = denied {
                return fail(fatal.kind, printable(&fatal.message));
            }
            let (topic, group) = (printable(&target.topic), printable(&target.group));
            return fail(Kind::NoLeader, format!("no topic {topic}: no member of group {group} has run yet"));
        }
        Err(e) => {
            return Err(probe.failure(format!(
                "cannot read {} from {}: {e}",
                printable(&target.topic),
                printable(&target.brokers)
            )))
        }
    };

    let mut view = View::default();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&target.topic, 0, Offset::Offset(low.max(high - HISTORY)))
        .map_err(|e| Failure::new(Kind::Internal, e.to_string()))?;
    consumer.assign(&tpl).map_err(|e| Failure::new(Kind::Internal, e.to_string()))?;
    // Catch up to the end as it was when we started.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut caught_up = high <= low;
    while !caught_up && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                view.read(msg.payload(), msg.offset());
                caught_up = msg.offset() + 1 >= high;
            }
            Some(Err(KafkaError::PartitionEOF(_))) => caught_up = true,
            Some(Err(e)) => return Err(probe.failure(format!("reading {}: {e}", printable(&target.topic)))),
            None => {}
        }
    }
    Ok((consumer, view))
}

fn status(target: &Target, json_out: bool, watch: bool) -> Result<bool, Stop> {
    let (consumer, mut view) = read_partition(target)?;
    if !watch {
        say(&render(target, &view, json_out))?;
        return Ok(view.fresh_leader(wall_ms()).is_some());
    }
    let mut shown = String::new();
    loop {
        let key = view.key(wall_ms());
        if key != shown {
            say(&render(target, &view, json_out))?;
            shown = key;
        }
        if stdout_closed() {
            return Err(Stop::Closed);
        }
        match consumer.poll(Duration::from_millis(250)) {
            Some(Ok(msg)) => view.read(msg.payload(), msg.offset()),
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => {
                crate::stderr::line(format_args!("warning: {e}"));
            }
        }
    }
}

/// Runs `neli-run yield`.
pub fn yield_main(args: YieldArgs, env_properties: Option<String>) -> Result<u8, Failure> {
    let timeout: Duration = args.timeout.into();
    if timeout > MAX_YIELD_TIMEOUT {
        return finish(fail(Kind::Usage, "--timeout must be at most 24h"));
    }
    for (flag, value) in [("--name", &args.name), ("--to", &args.to)] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            let what = if flag == "--to" { "the member to hand over to" } else { "the member that must lead" };
            return finish(fail(
                Kind::Usage,
                format!(
                    "{flag} is empty: give {what} (its --name, as `neli-run status` lists it), or leave {flag} out"
                ),
            ));
        }
    }
    finish(Target::from_args(args.kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let message = handover(&target, args.name, args.to, args.force, timeout)?;
        say(&message)?;
        Ok(0)
    }))
}

/// Writes a control record (`what` request) to partition 0: its offset.
fn write(target: &Target, value: &[u8], what: &str) -> Result<i64, Stop> {
    let producer: BaseProducer<Probe> = target
        .client_config(&[("acks", "all")])
        .create_with_context(Probe::new(target))
        .map_err(|e| rejected(e, target))?;
    if let Err((e, _)) = producer.send(BaseRecord::<(), _>::to(&target.topic).partition(0).payload(value)) {
        return Err(producer.context().failure(format!("cannot write the {what} request: {e}")));
    }
    let flushed = producer.flush(Duration::from_secs(10));
    // A refused write (e.g. no WRITE on the topic) comes as its delivery
    // report, which flush() serves.
    if let Err(e) = flushed {
        return Err(producer.context().failure(format!("cannot write the {what} request: {e}")));
    }
    let probe = producer.context();
    if let Some(why) = probe.undelivered.lock().expect("probe lock").clone() {
        return Err(probe.failure(format!("cannot write the {what} request: {}", printable(&why))));
    }
    let offset = *probe.delivered.lock().expect("probe lock");
    offset.ok_or_else(|| probe.failure(format!("cannot write the {what} request: not delivered within 10s")))
}

/// Runs `neli-run pause` (`paused`, with `--stop` if `stop`) or `resume`.
pub fn pause_main(
    kafka: crate::cli::KafkaArgs,
    paused: bool,
    stop: bool,
    timeout: Duration,
    env_properties: Option<String>,
) -> Result<u8, Failure> {
    if timeout > MAX_YIELD_TIMEOUT {
        return finish(fail(Kind::Usage, "--timeout must be at most 24h"));
    }
    finish(Target::from_args(kafka, env_properties).map_err(Stop::from).and_then(|target| {
        let message = pause(&target, paused, stop, timeout)?;
        say(&message)?;
        Ok(0)
    }))
}

/// Writes a pause or resume and waits until a record of an owner of
/// partition 0 (leading or contending) carries it, or a newer one, and
/// with --stop says its command is gone.
fn pause(target: &Target, paused: bool, stop: bool, timeout: Duration) -> Result<String, Stop> {
    let group = printable(&target.group);
    let what = if paused { "pause" } else { "resume" };
    let (consumer, _) = read_partition(target).map_err(|stop| match stop {
        // No topic: nowhere to write it yet.
        Stop::Fail(f) if f.kind == Kind::NoLeader => Stop::Fail(Failure::new(
            f.kind,
            format!(
                "{}; create the topic first (kafka-topics.sh --create --topic {} --partitions 1 --config \
                 retention.ms=3600000, or start one member, which creates it), then {what}",
                f.message,
                printable(&target.topic)
            ),
        )),
        stop => stop,
    })?;
    let offset = write(target, &PauseRequest::new(paused, stop).encode(), what)?;
    let start = Instant::now();
    while start.elapsed() < timeout {
        let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) else { continue };
        let Some(hb) = msg.payload().and_then(Heartbeat::decode) else { continue };
        let owner = hb.token.is_some() || hb.role == Some(crate::kafka::heartbeat::WireStance::Contending);
        let honoured = hb.pause.as_ref().filter(|p| p.offset >= offset && p.offset < msg.offset());
        let Some(note) = honoured.filter(|note| owner && !(paused && stop && note.running)) else { continue };
        let (name, host) = (printable(&hb.name), printable(&hb.host));
        let now = match (note.paused, note.offset == offset) {
            (_, false) => format!("a newer request (offset {}) is in force now", note.offset),
            (true, _) if stop => "its command is stopped".into(),
            (true, _) if note.running => "its command runs on until it ends, and does not start again".into(),
            (true, _) => "it does not start its command".into(),
            (false, _) if note.running => "its command runs".into(),
            (false, _) => "it starts its command when due".into(),
        };
        return Ok(format!("group {group}: {what} (offset {offset}) acknowledged by {name} (host {host}): {now}"));
    }
    let standing = if paused { "the pause stands on the topic" } else { "the resume stands on the topic" };
    fail(
        Kind::NoLeader,
        format!(
            "group {group}: no owner of partition 0 acknowledged the {what} within {} ({standing}, and whichever \
             member owns partition 0 next honours it)",
            humantime::format_duration(timeout),
        ),
    )
}

/// Asks the leader to hand over (to `to`) and waits until another member
/// (`to`) leads, or until it is clear that none will: the old leader leads
/// again, or (with `to`) a member other than `to` leads. Without `to`, and
/// unless `force`, refuses when no member `status` knows of may take over:
/// the leader would stop its command and lead again only after its watch
/// (3 session timeouts), with nothing running meanwhile.
fn handover(
    target: &Target,
    name: Option<String>,
    to: Option<String>,
    force: bool,
    timeout: Duration,
) -> Result<String, Stop> {
    let group = printable(&target.group);
    let (consumer, mut view) = read_partition(target)?;
    let Some(old) = view.fresh_leader(wall_ms()).cloned() else {
        return fail(Kind::NoLeader, format!("group {group}: no fresh leader to yield"));
    };
    if let Some(name) = &name {
        if *name != old.name {
            return fail(
                Kind::NoLeader,
                format!("{} does not lead group {group} ({} does)", printable(name), printable(&old.name)),
            );
        }
    }
    match &to {
        Some(to) => check_target(&view, &old, to, &group)?,
        None if !force => {
            // A standby that has just joined writes its first record now:
            // give it one candidacy interval (twice the leader's heartbeat
            // interval) before refusing.
            let interval = old.timing.map_or(500, |t| t.heartbeat_interval_ms);
            let grace = (2 * Duration::from_millis(interval)).min(timeout);
            let start = Instant::now();
            while let Err(refused) = check_someone_may_lead(&view, &old, &group) {
                if start.elapsed() >= grace {
                    return Err(refused);
                }
                if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
                    view.read(msg.payload(), msg.offset());
                }
            }
        }
        None => {}
    }
    write(target, &Yield::new(name, to.clone()).encode(), "yield")?;
    let start = Instant::now();
    let mut now = None;
    while start.elapsed() < timeout {
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            view.read(msg.payload(), msg.offset());
        }
        now = view.fresh_leader(wall_ms()).filter(|new| new.token != old.token).cloned();
        let Some(new) = &now else { continue };
        if new.name != old.name && to.as_ref().is_none_or(|to| *to == new.name) {
            return Ok(format!(
                "group {group}: leadership moved from {} (token {}) to {} (token {})",
                printable(&old.name),
                old.token.unwrap_or_default(),
                printable(&new.name),
                new.token.unwrap_or_default()
            ));
        }
        // Another leads under a new token: the hand-over is over, and
        // waiting on says nothing more.
        break;
    }
    match (&to, now) {
        (Some(to), Some(new)) if new.name != old.name => fail(
            Kind::NoLeader,
            format!(
                "group {group}: {} leads now, not {} (did {} stop meanwhile?)",
                printable(&new.name),
                printable(to),
                printable(to)
            ),
        ),
        (_, Some(new)) => fail(
            Kind::NoLeader,
            format!(
                "group {group}: no other member took over: {} leads again (token {}){}",
                printable(&old.name),
                new.token.unwrap_or_default(),
                match &to {
                    Some(to) => format!(" ({} did not take partition 0: did it stop meanwhile?)", printable(to)),
                    None => String::new(),
                }
            ),
        ),
        (_, None) => fail(
            Kind::NoLeader,
            format!(
                "group {group}: no other member took over within {} (is {} alone?)",
                humantime::format_duration(timeout),
                printable(&old.name)
            ),
        ),
    }
}

/// Refuses a plain `yield` when no member `status` knows of may take over
/// (none is live, or every one never leads or fails its health check):
/// the leader would stop its command for nothing, and the group would run
/// nothing until it leads again (audit D6). `--force` yields anyway (e.g.
/// to members older than candidacy records, which `status` cannot see).
fn check_someone_may_lead(view: &View, leader: &Heartbeat, group: &str) -> Result<(), Stop> {
    let others: Vec<_> = view.standbys(wall_ms()).into_iter().filter(|c| c.name != leader.name).collect();
    if others.iter().any(|c| !c.never_lead && !c.unhealthy) {
        return Ok(());
    }
    // Each one live, and why it may not lead.
    let why: Vec<_> = others
        .iter()
        .map(|c| {
            if c.never_lead {
                format!("{} runs with --never-lead", printable(&c.name))
            } else {
                format!("{}'s health check (--health-cmd) fails", printable(&c.name))
            }
        })
        .collect();
    let why = if why.is_empty() { "no other member is live".to_string() } else { why.join(", ") };
    fail(
        Kind::NoLeader,
        format!(
            "group {group}: no member may take over from {} ({why}): it would stop its command and lead again \
             only after 3 session timeouts, with nothing running meanwhile. Start or heal a standby \
             (`neli-run status` lists them), or pass --force to yield anyway",
            printable(&leader.name)
        ),
    )
}

/// Refuses `yield --to` a member that cannot take over: the leader itself,
/// one that never leads, or one with no live candidacy.
fn check_target(view: &View, leader: &Heartbeat, to: &str, group: &str) -> Result<(), Stop> {
    if to == leader.name {
        return fail(Kind::NoLeader, format!("{} leads group {group} already", printable(to)));
    }
    let standbys = view.standbys(wall_ms());
    match standbys.iter().find(|c| c.name == to) {
        Some(c) if c.never_lead => fail(
            Kind::NoLeader,
            format!("{} runs with --never-lead: it watches group {group} and never leads; name another", printable(to)),
        ),
        Some(c) if c.unhealthy => fail(
            Kind::NoLeader,
            format!(
                "{}'s health check (--health-cmd) fails: it may not lead group {group} until it passes; name another",
                printable(to)
            ),
        ),
        Some(_) => Ok(()),
        None => {
            let may = |c: &&&candidacy::Record| !c.never_lead && !c.unhealthy;
            let names: Vec<_> = standbys.iter().filter(may).map(|c| printable(&c.name)).collect();
            let live = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            fail(
                Kind::NoLeader,
                format!(
                    "{} is not a live member of group {group} (members that may lead: {live}; `neli-run status` lists them)",
                    printable(to)
                ),
            )
        }
    }
}

/// Runs a member with `--never-lead`: it never joins the group (so Kafka
/// can never assign it partition 0), writes candidacy records saying it
/// never leads (so that `status` lists it), and logs who leads, until
/// SIGTERM or SIGINT (then exit 0, after its withdrawal).
pub async fn never_lead(cfg: crate::config::Config) -> Result<u8, Failure> {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return Err(Failure::new(Kind::Internal, "cannot install signal handlers"));
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let mut watching = tokio::task::spawn_blocking(move || watch(&cfg, &flag));
    tokio::select! {
        done = &mut watching => return done.unwrap_or_else(|e| Err(Failure::new(Kind::Internal, e.to_string()))),
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("asked to stop: withdrawing our candidacy");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watching.await.unwrap_or_else(|e| Err(Failure::new(Kind::Internal, e.to_string())))
}

/// `never_lead`'s loop, until `stop`: waits for the group's topic, then
/// writes a candidacy every interval and logs each change of leader.
fn watch(cfg: &crate::config::Config, stop: &std::sync::atomic::AtomicBool) -> Result<u8, Failure> {
    use std::sync::atomic::Ordering;
    let target = &cfg.kafka;
    let member = crate::kafka::heartbeat::Member::this_process(cfg.name.clone());
    let since_ms = wall_ms();
    let interval = cfg.leader.candidacy_interval;
    tracing::info!(group = %printable(&target.group), name = %printable(&cfg.name), "watching the group; this member never leads (--never-lead)");
    // Under systemd (Type=notify, WatchdogSec=) as a member that may lead:
    // ready at once (waiting for the topic is part of its job).
    let mut systemd = Systemd::new();
    systemd.send("READY=1");
    systemd.send("STATUS=watching: this member never leads (--never-lead)");
    // The topic may not exist yet: the first member that may lead creates it.
    let mut waiting = false;
    let (consumer, mut view) = loop {
        if stop.load(Ordering::Relaxed) {
            systemd.send("STOPPING=1");
            return Ok(0);
        }
        systemd.watchdog();
        match read_partition(target) {
            Ok(read) => break read,
            Err(Stop::Fail(f)) if matches!(f.kind, Kind::NoLeader | Kind::Unavailable) => {
                if !std::mem::replace(&mut waiting, true) {
                    tracing::warn!("{f}; waiting");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(Stop::Fail(f)) => return Err(f),
            Err(Stop::Closed) => return Ok(0),
        }
    };
    let producer: BaseProducer<Probe> = target
        .client_config(&[("acks", "all")])
        .create_with_context(Probe::new(target))
        .map_err(|e| crate::config::creation_error(e, target))?;
    let send = |leaving: bool| {
        let record =
            crate::kafka::candidacy::Record::new(&member, 0, true, since_ms, interval, leaving, false).encode();
        let to = BaseRecord::to(&target.topic).partition(0).key(member.name.as_bytes()).payload(&record);
        if let Err((err, _)) = producer.send(to) {
            debug!(%err, "candidacy not queued");
        }
    };
    let mut next = Instant::now();
    let mut shown = String::new();
    while !stop.load(Ordering::Relaxed) {
        systemd.watchdog();
        if Instant::now() >= next {
            send(false);
            next += interval;
        }
        producer.poll(Duration::ZERO);
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            view.read(msg.payload(), msg.offset());
        }
        let key = view.key(wall_ms());
        if key != shown {
            match view.fresh_leader(wall_ms()) {
                Some(hb) => tracing::info!(
                    leader = %printable(&hb.name),
                    host = %printable(&hb.host),
                    token = hb.token.unwrap_or_default(),
                    "the group has a leader"
                ),
                None => tracing::warn!("the group has no fresh leader"),
            }
            shown = key;
        }
    }
    systemd.send("STOPPING=1");
    send(true);
    let _ = producer.flush(Duration::from_secs(2));
    Ok(0)
}

/// systemd's notify protocol for `never_lead`, if systemd asked for it:
/// WATCHDOG=1 while its loop turns.
struct Systemd {
    notifier: Option<crate::notify::Notifier>,
    every: Option<Duration>,
    last: Option<Instant>,
}

impl Systemd {
    fn new() -> Systemd {
        let notifier = crate::notify::Notifier::from_env();
        let every = crate::notify::Notifier::watchdog_interval().filter(|_| notifier.is_some());
        Systemd { notifier, every, last: None }
    }

    fn send(&self, message: &str) {
        self.notifier.iter().for_each(|n| n.send(message));
    }

    /// WATCHDOG=1, if due.
    fn watchdog(&mut self) {
        let Some(every) = self.every else { return };
        if self.last.is_none_or(|last| last.elapsed() >= every) {
            self.send("WATCHDOG=1");
            self.last = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::{Content, Member, WireStance};
    use crate::leader::{Record, Stance};

    fn hb(name: &str, token: Option<i64>, at_ms: u64) -> Heartbeat {
        let stance = token.map_or(Stance::Contending, |token| Stance::Leading { token });
        let mut hb = Heartbeat::new(
            &Member::this_process(name.into()),
            1,
            crate::clock::BootTime::from_nanos(1),
            at_ms,
            Content {
                record: Record { term: 1, start: None, stance, attempt: None, next: None, pause: None, to: None },
                since_ms: Some(at_ms),
                deadline_ms: 3000,
            },
        );
        hb.at_ms = at_ms;
        hb
    }

    #[test]
    fn the_newest_token_bearing_record_leads_while_within_its_deadline() {
        let mut v = View::default();
        v.add(hb("a", Some(1), 1_000));
        v.add(hb("b", None, 2_000)); // a candidate: not a leader yet
        assert_eq!(v.fresh_leader(3_999).map(|h| h.name.as_str()), Some("a"));
        assert!(v.fresh_leader(4_000).is_none(), "stale after its own deadline");
        v.add(hb("b", Some(5), 4_100));
        assert_eq!(v.key(4_200), "b 5");
    }

    #[test]
    fn a_newer_record_of_the_leader_without_a_token_takes_its_claim_back() {
        let mut v = View::default();
        let a = hb("a", Some(1), 1_000);
        let mut other_a = hb("a", None, 1_100);
        other_a.incarnation = "restarted".into();
        v.add(a.clone());
        v.add(other_a); // another incarnation of the same name: not the leader
        assert_eq!(v.key(1_200), "a 1");
        let mut released = a.clone();
        (released.token, released.role, released.at_ms) = (None, Some(WireStance::Released), 1_300);
        v.add(released);
        assert!(v.fresh_leader(1_400).is_none(), "released, long before its deadline");
        assert_eq!(v.withdrawn_ms, Some(1_300));
        assert_eq!(v.leader.as_ref().map(|h| h.name.as_str()), Some("a"), "still shown as the last leader");
        v.add(hb("a", Some(2), 1_500));
        assert_eq!(v.key(1_600), "a 2", "a new token-bearing record leads again");
    }

    #[test]
    fn a_leader_whose_health_check_fails_is_shown_handing_over_then_standing_aside() {
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(["neli-run", "-g", "g", "--", "true"]);
        let target = crate::config::Config::from_args(cli.expect("arguments").run, None).expect("valid").kafka;
        let now = wall_ms();
        let mut v = View::default();
        let a = hb("a", Some(1), now - 100);
        v.add(a.clone());
        v.add(hb("b", None, now - 90));
        assert!(!leadership(&target, &v, v.fresh_leader(now), now).contains("health"));
        let mut failing = Heartbeat { unhealthy: true, ..a.clone() };
        failing.at_ms = now - 50;
        v.add(failing.clone());
        let text = leadership(&target, &v, v.fresh_leader(now), now);
        assert!(
            text.contains("leader a") && text.contains("health check fails (--health-cmd): it is handing over"),
            "{text}"
        );
        (failing.token, failing.role, failing.at_ms) = (None, Some(WireStance::Released), now - 10);
        v.add(failing);
        let text = leadership(&target, &v, v.fresh_leader(now), now);
        assert!(text.contains("no fresh leader") && text.contains("it stood aside: its health check fails"), "{text}");
        v.add(hb("b", Some(9), now));
        assert!(!leadership(&target, &v, v.fresh_leader(now), now).contains("health"), "a new leader, healthy");
    }
}

#[cfg(test)]
mod pause_tests {
    use super::*;
    use crate::kafka::heartbeat::{Content, Member};
    use crate::leader::{Asker, Pause, PauseNote, Record, Stance};

    /// Leader a's record carrying `pause` (its command `running` or not).
    fn leading(pause: Option<Pause>, running: bool, at_ms: u64) -> Vec<u8> {
        let note = pause.map(|request| PauseNote { request, running });
        let record = Record {
            term: 1,
            start: None,
            stance: Stance::Leading { token: 1 },
            attempt: None,
            next: None,
            pause: note,
            to: None,
        };
        let content = Content { record, since_ms: Some(at_ms), deadline_ms: 3000 };
        Heartbeat::new(&Member::this_process("a".into()), 1, crate::clock::BootTime::from_nanos(1), at_ms, content)
            .encode()
    }

    fn target() -> Target {
        let (brokers, group, topic) = ("b:9092".into(), "g".into(), "g.neli".into());
        Target { brokers, group, topic, properties: Vec::new(), origins: Vec::new() }
    }

    #[test]
    fn the_newest_request_read_or_carried_is_the_pause_shown_with_who_asked() {
        let now = wall_ms();
        let mut v = View::default();
        let mut request = PauseRequest::new(true, true);
        request.by =
            Asker { user: Some("al\u{1b}ice".into()), uid: Some(7), host: Some("h".into()), ..Asker::default() };
        v.read(Some(&request.encode()), 4);
        assert_eq!(v.paused().map(|p| (p.offset, p.stop)), Some((4, true)));
        // The leader still stops its command, then says it is gone.
        let pause = PauseRequest::decode(&request.encode()).unwrap().at(4);
        v.read(Some(&leading(Some(pause.clone()), true, now)), 5);
        let text = render(&target(), &v, false);
        assert!(text.contains(r"by user al\u{1b}ice (uid 7) on host h: the leader's command is stopping"), "{text}");
        v.read(Some(&leading(Some(pause), false, now)), 6);
        let text = render(&target(), &v, false);
        assert!(text.contains("the leader's command is stopped (--stop)"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&render(&target(), &v, true)).unwrap();
        assert_eq!(json["paused"]["stop"], true);
        assert_eq!(json["paused"]["by"]["uid"], 7);
        assert_eq!(json["paused"]["leader_command_running"], false);
        // A record cannot name a request at or after its own offset.
        let forged = Pause { offset: 9, paused: false, stop: false, at_ms: now, by: Asker::default() };
        v.read(Some(&leading(Some(forged), true, now)), 7);
        assert!(v.paused().is_some(), "a forged resume is not read");
        // A resume, carried by a later record, ends it.
        v.read(Some(&PauseRequest::new(false, false).encode()), 8);
        assert!(v.paused().is_none());
        assert!(!render(&target(), &v, false).contains("paused"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&render(&target(), &v, true)).unwrap()["paused"],
            serde_json::Value::Null
        );
    }
}
