//! `--metrics-addr`: what an operator's tools ask of a running member.
//!
//! - `/metrics`: who this member is (`neli_build_info`, `neli_member_info`
//!   with group, topic and name), its standing (leader or not, fencing token,
//!   since when it leads, heartbeat age, transitions by kind, child restarts,
//!   child up, Kafka reachable; with a schedule, runs by outcome, the last
//!   success and the next due time) and the `process_*` metrics every
//!   official Prometheus client exports. Prometheus text (0.0.4), or
//!   OpenMetrics when the scraper asks for it (Prometheus does).
//! - `/livez`: 200 while the shell's loop turns: a liveness probe. A Kafka
//!   outage does not fail it (restarting would not bring Kafka back).
//! - `/readyz`, and `/healthz` (its older name, kept): 200 while Kafka
//!   answers and the shell's loop turns: a readiness probe.
//! - `/leader`: 200 only on the member running the command: for load
//!   balancers and readiness probes. With `--roles`, 200 on a member that
//!   runs some role's command, and `/leader?role=J` on the one running role
//!   J's; `/metrics` then has each role's series, labelled `role`.
//!
//! The exposition is prometheus-client's (the Prometheus org's Rust client):
//! group, topic and name are user-supplied label values, which it escapes.
//! Five endpoints with fixed answers do not need an HTTP framework: the
//! server reads one request head, answers GET or HEAD, and closes the
//! connection.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::registry::{Registry, Unit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::clock::BootTime;
use crate::leader::{Attempt, Standing};

/// With `--metrics-addr`, the shell's loop notes that it turns at least this
/// often, however long it would otherwise sleep (a standby may wait for
/// minutes): so a quiet loop is not taken for a stuck one.
pub const LOOP_TICK: Duration = Duration::from_secs(1);

/// How long `/livez` waits for the shell's loop to turn before it fails: ten
/// ticks, room for a loaded machine.
pub const LOOP_STUCK: Duration = Duration::from_secs(10);

/// Who this member is, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct Ids {
    pub group: String,
    pub topic: String,
    pub member: String,
}

/// What the shell's loop reports; read by the HTTP server.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub ids: Ids,
    pub standing: Option<Standing>,
    /// Send time of the newest own heartbeat read back, while we own p0.
    pub fresh: Option<BootTime>,
    pub child_up: bool,
    /// The group is paused (`neli-run pause`), as we last read partition 0.
    pub paused: bool,
    pub kafka_reachable: bool,
    /// The health check's verdict (`--health-cmd`), once it has one; None
    /// without a check (no series then).
    pub healthy: Option<bool>,
    /// When the shell's loop last turned; None until it starts (while
    /// connecting to Kafka).
    pub loop_seen: Option<BootTime>,
    pub transitions: BTreeMap<&'static str, u64>,
    pub child_restarts: u64,
    /// The token of the current leadership and when it began (wall ms).
    leading: Option<(i64, u64)>,
    last_start_token: Option<i64>,
    /// This member's runs (of a wave or a schedule) by how they ended.
    runs: Runs,
    /// When the newest successful scheduled run we know of ended (wall ms).
    last_success_ms: Option<u64>,
    /// When the schedule is next due, as we plan it (wall ms).
    pub next_due_ms: Option<u64>,
    /// With `--roles` above 1, each role's own series (the member-wide ones
    /// above then speak for role 0's seat only: `neli_roles_led` and these
    /// say the rest).
    pub roles: BTreeMap<i32, RoleStat>,
    /// With `--crontab`, each of our jobs' series, by name.
    pub jobs: BTreeMap<String, JobStat>,
}

/// One crontab job's share of the snapshot (`--crontab`), as this member
/// knows it: it owns the job's partition, or did.
#[derive(Clone, Debug, Default)]
pub struct JobStat {
    /// This member owns the job's partition and may run it.
    pub owned: bool,
    /// When the job is next due, while this member owns it (wall ms).
    pub next_due_ms: Option<u64>,
    /// The newest run this member knows of, and the newest that ended.
    last: Option<Attempt>,
    ended: Option<Attempt>,
    /// This member's runs of the job, by how they ended.
    runs: Runs,
}

impl JobStat {
    /// Takes in the newest run the job's seat knows of (`child_up`: a run
    /// of ours may still be going).
    pub fn note_run(&mut self, job: Option<&Attempt>, child_up: bool) {
        let Some(job) = job else { return };
        if self.last.as_ref() != Some(job) {
            self.last = Some(job.clone());
            if job.ended.is_some() {
                self.ended = Some(job.clone());
            }
        }
        self.runs.count(job, child_up);
    }
}

/// A member's runs by how they ended (`OUTCOMES`), each counted once.
#[derive(Clone, Debug, Default)]
struct Runs {
    by: BTreeMap<&'static str, u64>,
    /// The last of our runs counted: (token, due time, attempt).
    counted: Option<(i64, Option<u64>, u32)>,
}

/// How a run ends, as `neli_runs_total` and `neli_job_runs_total` say it.
const OUTCOMES: [&str; 3] = ["success", "failure", "cut_short"];

impl Runs {
    /// Counts `job`, the newest run its seat knows of, once it is ours and
    /// over (`child_up` false).
    fn count(&mut self, job: &Attempt, child_up: bool) {
        let key = (job.token, job.due, job.number);
        if job.by.is_none() && !child_up && self.counted != Some(key) {
            self.counted = Some(key);
            let outcome = match job.code {
                Some(0) => "success",
                Some(_) => "failure",
                None => "cut_short",
            };
            *self.by.entry(outcome).or_default() += 1;
        }
    }

    /// How many ended as `outcome`.
    fn of(&self, outcome: &str) -> u64 {
        self.by.get(outcome).copied().unwrap_or(0)
    }
}

/// One role's share of the snapshot, with `--roles` above 1.
#[derive(Clone, Debug, Default)]
pub struct RoleStat {
    /// The token this member leads the role under, while it does.
    pub token: Option<i64>,
    /// The role's command runs here.
    pub up: bool,
    /// Starts of the role's command within one leadership.
    pub restarts: u64,
    last_start_token: Option<i64>,
}

impl RoleStat {
    /// Records a start of the role's command (see `Snapshot::child_started`).
    pub fn started(&mut self, token: i64) {
        if self.last_start_token == Some(token) {
            self.restarts += 1;
        }
        self.last_start_token = Some(token);
    }

    fn leads(&self) -> bool {
        self.token.is_some() && self.up
    }
}

/// Shared between the shell's loop and the server.
pub type Shared = Arc<Mutex<Snapshot>>;

/// A snapshot to share, naming this member.
pub fn shared(ids: Ids) -> Shared {
    Arc::new(Mutex::new(Snapshot { ids, ..Snapshot::default() }))
}

impl Snapshot {
    /// Records a change of standing at `now_ms` (wall clock), counting it by kind; a leadership
    /// under a new fencing token begins then.
    pub fn set_standing(&mut self, standing: Standing, now_ms: u64) {
        let kind = match (self.standing, standing) {
            (Some(old), new) if old == new => return,
            (_, Standing::Standby) if self.standing.is_none() => "joined",
            (_, Standing::Standby) => "revoked",
            (_, Standing::Candidate) => "candidate",
            (Some(Standing::Fenced), Standing::Leader { .. }) => "resumed",
            (_, Standing::Leader { .. }) => "leader",
            (_, Standing::Fenced) => "fenced",
        };
        *self.transitions.entry(kind).or_default() += 1;
        self.leading = match (standing, self.leading) {
            (Standing::Leader { token }, Some((held, since))) if held == token => Some((held, since)),
            (Standing::Leader { token }, _) => Some((token, now_ms)),
            _ => None,
        };
        self.standing = Some(standing);
    }

    /// Records a start of the command; a second start under the same token
    /// is a restart (`--restart`), a new token a new leadership or a resume.
    pub fn child_started(&mut self, token: i64) {
        if self.last_start_token == Some(token) {
            self.child_restarts += 1;
        }
        self.last_start_token = Some(token);
    }

    /// Takes in the newest run the core knows of: counts our own once it
    /// is over (`child_up` false), and notes a success's end.
    pub fn note_run(&mut self, job: Option<&Attempt>, child_up: bool) {
        let Some(job) = job else { return };
        if let (Some(0), Some(ended)) = (job.code, job.ended) {
            self.last_success_ms = Some(self.last_success_ms.map_or(ended, |t| t.max(ended)));
        }
        self.runs.count(job, child_up);
    }

    fn is_leader(&self) -> bool {
        matches!(self.standing, Some(Standing::Leader { .. })) && self.child_up
    }

    /// Whether the shell's loop turned within [`LOOP_STUCK`] (or has not begun:
    /// connecting to Kafka may take as long as Kafka is away).
    fn is_alive(&self, now: BootTime) -> bool {
        self.loop_seen.is_none_or(|seen| now.since(seen) < LOOP_STUCK)
    }

    /// The exposition in `format`, with the process's own metrics read now.
    pub fn render(&self, now: BootTime, format: Format) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape { snapshot: self.clone(), now, process: Process::read() }));
        let mut open_metrics = String::new();
        prometheus_client::encoding::text::encode(&mut open_metrics, &registry)
            .expect("every value fits its type, and a String takes any text");
        match format {
            Format::OpenMetrics => open_metrics,
            Format::Prometheus => prometheus_text(&open_metrics),
        }
    }
}

/// The two exposition formats Prometheus reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4: what `promtool check metrics`,
    /// curl and older collectors read.
    Prometheus,
    /// OpenMetrics 1.0, which Prometheus asks for first.
    OpenMetrics,
}

impl Format {
    /// The format a request's Accept header asks for: OpenMetrics only when
    /// it names it (with a nonzero quality).
    pub fn from_accept(accept: Option<&str>) -> Format {
        let wants = |range: &str| {
            let mut parts = range.split(';').map(str::trim);
            parts.next().is_some_and(|t| t.eq_ignore_ascii_case("application/openmetrics-text"))
                && !parts.any(|p| p.replace(' ', "").parse::<Quality>().is_ok_and(|q| q.0 == 0.0))
        };
        match accept {
            Some(accept) if accept.split(',').any(wants) => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A media range's `q=` parameter.
struct Quality(f64);

impl std::str::FromStr for Quality {
    type Err = ();
    fn from_str(s: &str) -> Result<Quality, ()> {
        let q = s.strip_prefix("q=").or_else(|| s.strip_prefix("Q=")).ok_or(())?;
        q.parse().map(Quality).map_err(|_| ())
    }
}

/// The same families in the Prometheus text format: there a counter's
/// HELP and TYPE name its `_total` series and an info family is a gauge
/// named `_info`; UNIT and EOF lines do not exist. Samples and their
/// escaped label values are the same in both.
fn prometheus_text(open_metrics: &str) -> String {
    let mut out = String::with_capacity(open_metrics.len());
    let mut help = None;
    for line in open_metrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').map_or("", |(_, text)| text));
        } else if let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|rest| rest.rsplit_once(' ')) {
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), kind),
                "info" => (format!("{name}_info"), "gauge"),
                _ => (name.to_string(), kind),
            };
            if let Some(help) = help.take() {
                out.push_str(&format!("# HELP {name} {help}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
        } else if !line.starts_with("# UNIT ") && line != "# EOF" {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// One scrape: a snapshot's values and the process's, as metric families.
#[derive(Debug)]
struct Scrape {
    snapshot: Snapshot,
    now: BootTime,
    process: Option<Process>,
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.snapshot;
        let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
        let build = Info::new(vec![
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            ("commit", env!("NELI_BUILD_COMMIT").to_string()),
            ("librdkafka", librdkafka),
        ]);
        let help = "This neli-run's version, the commit it was built from, and the librdkafka it runs on.";
        one(&mut enc, "neli_build", None, help, build)?;
        let ids = &s.ids;
        let member =
            Info::new(vec![("group", ids.group.clone()), ("topic", ids.topic.clone()), ("member", ids.member.clone())]);
        one(&mut enc, "neli_member", None, "The group, topic and member name (--name) of this member.", member)?;
        let gauge = |v: i64| ConstGauge::new(v);
        if s.roles.is_empty() {
            self.leadership(&mut enc)?;
        } else {
            self.roles(&mut enc)?;
        }
        if !s.jobs.is_empty() {
            self.jobs(&mut enc)?;
        }
        one(&mut enc, "neli_kafka_reachable", None, "1 while Kafka answers.", gauge(s.kafka_reachable as i64))?;
        let help =
            "1 while the group is paused (neli-run pause), as this member last read partition 0: current on its owner.";
        one(&mut enc, "neli_paused", None, help, gauge(s.paused as i64))?;
        if let Some(healthy) = s.healthy {
            let help = "1 while the health check (--health-cmd) says this member may lead.";
            one(&mut enc, "neli_healthy", None, help, gauge(healthy as i64))?;
        }
        let by_outcome = OUTCOMES.map(|k| (k, ConstCounter::new(s.runs.of(k))));
        let help = "Runs of the command this member started (of a wave or a schedule), by how they ended.";
        family(&mut enc, ("neli_runs", None), help, "outcome", by_outcome)?;
        if let Some(ms) = s.last_success_ms {
            let help = "When the newest successful scheduled run this member knows of ended (Unix time).";
            one(&mut enc, "neli_last_success_timestamp", Some(&Unit::Seconds), help, ConstGauge::new(seconds(ms)))?;
        }
        if let Some(ms) = s.next_due_ms {
            let help = "When the schedule's next run is due, while this member leads (Unix time).";
            one(&mut enc, "neli_next_run_timestamp", Some(&Unit::Seconds), help, ConstGauge::new(seconds(ms)))?;
        }
        if let Some(p) = &self.process {
            let (secs, bytes) = (Some(&Unit::Seconds), Some(&Unit::Bytes));
            let help = "Total user and system CPU time spent in seconds.";
            one(&mut enc, "process_cpu", secs, help, ConstCounter::new(p.cpu_seconds))?;
            let help = "Resident memory size in bytes.";
            one(&mut enc, "process_resident_memory", bytes, help, ConstGauge::new(p.resident_bytes))?;
            let help = "Virtual memory size in bytes.";
            one(&mut enc, "process_virtual_memory", bytes, help, ConstGauge::new(p.virtual_bytes))?;
            one(&mut enc, "process_open_fds", None, "Number of open file descriptors.", ConstGauge::new(p.open_fds))?;
            let help = "Maximum number of open file descriptors.";
            one(&mut enc, "process_max_fds", None, help, ConstGauge::new(p.max_fds))?;
            let help = "Start time of the process since unix epoch in seconds.";
            one(&mut enc, "process_start_time", secs, help, ConstGauge::new(p.start_time_seconds))?;
        }
        Ok(())
    }
}

impl Scrape {
    /// The single leader's standing: leader or not, its token and since
    /// when, its heartbeats' age, its transitions and its command.
    fn leadership(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.snapshot;
        let leading = s.leading.filter(|_| matches!(s.standing, Some(Standing::Leader { .. })));
        let gauge = |v: i64| ConstGauge::new(v);
        let help = "1 while this member leads and runs the command.";
        one(enc, "neli_leader", None, help, gauge(s.is_leader() as i64))?;
        let help = "Fencing token of the current leadership, -1 when not leading.";
        one(enc, "neli_fencing_token", None, help, gauge(leading.map_or(-1, |(token, _)| token)))?;
        if let Some((_, since_ms)) = leading {
            let help = "When the current leadership (fencing token) of this member began (Unix time).";
            one(enc, "neli_leader_since_timestamp", Some(&Unit::Seconds), help, ConstGauge::new(seconds(since_ms)))?;
        }
        if let Some(fresh) = s.fresh {
            let age = ConstGauge::new(self.now.since(fresh).as_secs_f64());
            let help = "Age of the newest own heartbeat read back.";
            one(enc, "neli_heartbeat_age", Some(&Unit::Seconds), help, age)?;
        }
        let kinds = ["joined", "candidate", "leader", "fenced", "resumed", "revoked"];
        let by_kind = kinds.map(|k| (k, ConstCounter::new(*s.transitions.get(k).unwrap_or(&0))));
        family(enc, ("neli_transitions", None), "Changes of role, by the role entered.", "kind", by_kind)?;
        let restarts = ConstCounter::new(s.child_restarts);
        one(enc, "neli_child_restarts", None, "Starts of the command within one leadership.", restarts)?;
        one(enc, "neli_child_up", None, "1 while the command runs.", gauge(s.child_up as i64))
    }

    /// Each role's series (`--roles` above 1), labelled `role`, in place of
    /// the single leader's.
    fn roles(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.snapshot;
        let led = s.roles.values().filter(|r| r.leads()).count() as i64;
        let help = "Roles this member leads and runs the command of.";
        one(enc, "neli_roles_led", None, help, ConstGauge::new(led))?;
        let labels: Vec<String> = s.roles.keys().map(|r| r.to_string()).collect();
        let per_role = |f: fn(&RoleStat) -> i64| {
            labels.iter().zip(s.roles.values()).map(move |(l, r)| (l.as_str(), ConstGauge::new(f(r))))
        };
        let help = "1 while this member leads the role and runs its command.";
        family(enc, ("neli_role_leader", None), help, "role", per_role(|r| r.leads() as i64))?;
        let help = "Fencing token of this member's leadership of the role, -1 when it does not lead it.";
        family(enc, ("neli_role_fencing_token", None), help, "role", per_role(|r| r.token.unwrap_or(-1)))?;
        let restarts = labels.iter().zip(s.roles.values()).map(|(l, r)| (l.as_str(), ConstCounter::new(r.restarts)));
        let help = "Starts of the role's command within one leadership.";
        family(enc, ("neli_role_child_restarts", None), help, "role", restarts)
    }
}

impl Scrape {
    /// Each crontab job's series (`--crontab`), labelled `job`: what this
    /// member knows of it; the member that owns it says the most.
    fn jobs<'a>(&'a self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let jobs = &self.snapshot.jobs;
        let help = "1 while this member owns the job's partition and runs the job at its due times.";
        let owned = jobs.iter().map(|(j, s)| (j.as_str(), ConstGauge::new(s.owned as i64)));
        family(enc, ("neli_job_owned", None), help, "job", owned)?;
        let mut metric = enc.encode_descriptor(
            "neli_job_runs",
            "Runs of the job this member started, by how they ended.",
            None,
            ConstCounter::<u64>::TYPE,
        )?;
        for (job, stat) in jobs {
            for kind in OUTCOMES {
                let n = ConstCounter::new(stat.runs.of(kind));
                n.encode(metric.encode_family(&[("job", job.as_str()), ("outcome", kind)])?)?;
            }
        }
        let help = "Exit status of the job's newest run that ended, as this member knows it.";
        let status =
            |(j, s): (&'a String, &'a JobStat)| Some((j.as_str(), ConstGauge::new(i64::from(s.ended.as_ref()?.code?))));
        family(enc, ("neli_job_last_exit_status", None), help, "job", jobs.iter().filter_map(status))?;
        let help = "How long the job's newest run that ended took.";
        let took = |(j, s): (&'a String, &'a JobStat)| {
            let a = s.ended.as_ref()?;
            Some((j.as_str(), ConstGauge::new(seconds(a.ended?.saturating_sub(a.wave_ms)))))
        };
        family(enc, ("neli_job_last_duration", Some(&Unit::Seconds)), help, "job", jobs.iter().filter_map(took))?;
        let help = "How late the job's newest run started after its due time.";
        let late = |(j, s): (&'a String, &'a JobStat)| {
            let a = s.last.as_ref()?;
            Some((j.as_str(), ConstGauge::new(seconds(a.wave_ms.saturating_sub(a.due?)))))
        };
        family(enc, ("neli_job_last_lateness", Some(&Unit::Seconds)), help, "job", jobs.iter().filter_map(late))?;
        let help = "When the job is next due, while this member owns it (Unix time).";
        let next = jobs.iter().filter_map(|(j, s)| Some((j.as_str(), ConstGauge::new(seconds(s.next_due_ms?)))));
        family(enc, ("neli_job_next_run_timestamp", Some(&Unit::Seconds)), help, "job", next)
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// A family of one unlabelled sample.
fn one(
    enc: &mut DescriptorEncoder,
    name: &str,
    unit: Option<&Unit>,
    help: &str,
    metric: impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    metric.encode(enc.encode_descriptor(name, help, unit, metric.metric_type())?)
}

/// A family with one label, `key` (an outcome, a role, a job ...), a
/// sample per value.
fn family<'a, M: EncodeMetric + TypedMetric>(
    enc: &mut DescriptorEncoder,
    (name, unit): (&str, Option<&Unit>),
    help: &str,
    key: &str,
    samples: impl IntoIterator<Item = (&'a str, M)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = enc.encode_descriptor(name, help, unit, M::TYPE)?;
    for (value, sample) in samples {
        sample.encode(metric.encode_family(&[(key, value)])?)?;
    }
    Ok(())
}

/// The role `/leader?role=J` asks about, if any.
fn role_asked(path: &str) -> Result<Option<i32>, String> {
    let Some((_, query)) = path.split_once('?') else { return Ok(None) };
    match query.split('&').find_map(|kv| kv.strip_prefix("role=")) {
        None => Ok(None),
        Some(role) => role.parse().map(Some).map_err(|_| format!("role={role}: expected a role's number\n")),
    }
}

/// The process's own resources, read from /proc as the official clients
/// (client_golang, client_python) read them.
#[derive(Debug, PartialEq)]
struct Process {
    cpu_seconds: f64,
    resident_bytes: i64,
    virtual_bytes: i64,
    open_fds: i64,
    /// The soft limit ("unlimited" is i64::MAX).
    max_fds: i64,
    start_time_seconds: f64,
}

impl Process {
    fn read() -> Option<Process> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as i64;
        let (max_fds, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok()?;
        // SAFETY: sysconf only reads a configuration value.
        let ticks = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
            t if t > 0 => t as f64,
            _ => 100.0, // USER_HZ on every Linux architecture neli-run builds for
        };
        Process::parse(&stat, &status, &boot, ticks, open_fds, i64::try_from(max_fds).unwrap_or(i64::MAX))
    }

    /// From /proc/self/stat (CPU ticks, start in ticks since boot),
    /// /proc/self/status (memory in kB) and /proc/stat (boot time).
    fn parse(stat: &str, status: &str, boot: &str, ticks: f64, open_fds: i64, max_fds: i64) -> Option<Process> {
        // proc(5) numbers the fields from 1; the command name (2) may hold
        // spaces and parentheses, so count from the last ')': state is 3.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
        let kb = |key: &str| {
            let line = status.lines().find_map(|l| l.strip_prefix(key))?;
            line.trim().strip_suffix("kB")?.trim().parse::<i64>().ok().map(|kb| kb * 1024)
        };
        let boot_time: f64 = boot.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()?;
        Some(Process {
            cpu_seconds: (field(14)? + field(15)?) / ticks,
            resident_bytes: kb("VmRSS:")?,
            virtual_bytes: kb("VmSize:")?,
            open_fds,
            max_fds,
            start_time_seconds: boot_time + field(22)? / ticks,
        })
    }
}

/// Binds `addr` now, so a bad address fails at start-up, and serves it.
pub async fn serve(addr: SocketAddr, shared: Shared) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream, shared.clone()));
        }
    });
    Ok(())
}

async fn answer(mut stream: TcpStream, shared: Shared) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    });
    if read.await.is_err() {
        return;
    }
    let head = String::from_utf8_lossy(&head);
    let reply = {
        let snapshot = shared.lock().expect("metrics lock").clone();
        Reply::to(&head, &snapshot, BootTime::now())
    };
    let _ = stream.write_all(&reply.bytes()).await;
    let _ = stream.shutdown().await;
}

/// An answer to one request.
#[derive(Debug)]
struct Reply {
    status: &'static str,
    content_type: &'static str,
    body: String,
    /// HEAD: the headers GET would get, without the body.
    head_only: bool,
}

impl Reply {
    /// The answer to the request whose head is `head`.
    fn to(head: &str, s: &Snapshot, now: BootTime) -> Reply {
        let mut lines = head.split("\r\n");
        let mut words = lines.next().unwrap_or("").split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let accept = lines
            .take_while(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("accept"))
            .map(|(_, value)| value.trim());
        let text = "text/plain; charset=utf-8";
        let reply = |status, body: &str| Reply { status, content_type: text, body: body.into(), head_only: false };
        let stuck = || {
            let since = s.loop_seen.map_or(Duration::ZERO, |seen| now.since(seen));
            format!("the shell's loop has not turned for {}s\n", since.as_secs())
        };
        let mut reply = match path.split('?').next().unwrap_or("") {
            _ if method != "GET" && method != "HEAD" => reply("405 Method Not Allowed", "GET or HEAD only\n"),
            "/metrics" => {
                let format = Format::from_accept(accept);
                Reply {
                    status: "200 OK",
                    content_type: format.content_type(),
                    body: s.render(now, format),
                    head_only: false,
                }
            }
            "/livez" if s.is_alive(now) => reply("200 OK", "ok\n"),
            "/livez" => Reply { body: stuck(), ..reply("503 Service Unavailable", "") },
            "/readyz" | "/healthz" if !s.is_alive(now) => {
                Reply { body: stuck(), ..reply("503 Service Unavailable", "") }
            }
            "/readyz" | "/healthz" if s.kafka_reachable => reply("200 OK", "ok\n"),
            "/readyz" | "/healthz" => reply("503 Service Unavailable", "Kafka unreachable\n"),
            "/leader" if !s.roles.is_empty() => match role_asked(path) {
                Err(why) => reply("400 Bad Request", &why),
                Ok(Some(role)) if s.roles.get(&role).is_some_and(RoleStat::leads) => reply("200 OK", "leader\n"),
                Ok(None) if s.roles.values().any(RoleStat::leads) => reply("200 OK", "leader of a role\n"),
                Ok(_) => reply("503 Service Unavailable", "not leader\n"),
            },
            "/leader" if s.is_leader() => reply("200 OK", "leader\n"),
            "/leader" => reply("503 Service Unavailable", "not leader\n"),
            _ => reply("404 Not Found", "try /metrics, /livez, /readyz, /healthz or /leader\n"),
        };
        reply.head_only = method == "HEAD";
        reply
    }

    fn bytes(&self) -> Vec<u8> {
        let allow = if self.status.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" };
        let mut out = format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        );
        if !self.head_only {
            out.push_str(&self.body);
        }
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::Runner;

    fn at(secs: f64) -> BootTime {
        BootTime::from_nanos((secs * 1e9) as u64)
    }

    fn has(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn transitions_are_counted_by_kind_and_render_as_prometheus_text() {
        let mut s = Snapshot::default();
        s.set_standing(Standing::Standby, 1000);
        s.set_standing(Standing::Candidate, 1000);
        s.set_standing(Standing::Leader { token: 7 }, 1000);
        s.set_standing(Standing::Leader { token: 7 }, 1000);
        s.set_standing(Standing::Fenced, 1000);
        s.set_standing(Standing::Leader { token: 9 }, 1000);
        s.child_up = true;
        for token in [7, 7, 9] {
            s.child_started(token); // a start, a restart, a resume
        }
        s.fresh = Some(at(1.0));
        let text = s.render(at(1.5), Format::Prometheus);
        for line in [
            "neli_leader 1",
            "neli_fencing_token 9",
            "neli_heartbeat_age_seconds 0.5",
            "neli_transitions_total{kind=\"joined\"} 1",
            "neli_transitions_total{kind=\"leader\"} 1",
            "neli_transitions_total{kind=\"fenced\"} 1",
            "neli_transitions_total{kind=\"resumed\"} 1",
            "neli_child_restarts_total 1",
            "neli_child_up 1",
            "neli_paused 0",
            "neli_runs_total{outcome=\"success\"} 0",
            "# TYPE neli_transitions_total counter",
            "# HELP neli_transitions_total Changes of role, by the role entered.",
            "# TYPE neli_leader gauge",
        ] {
            assert!(has(&text, line), "missing {line}:\n{text}");
        }
        // The duplicate of transitions{kind="fenced"} is gone, and nothing
        // of OpenMetrics' own is left in the text format.
        assert!(!text.contains("neli_fences_total"), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
    }

    #[test]
    fn the_health_gauge_is_there_only_with_a_health_check() {
        let mut s = Snapshot::default();
        assert!(!s.render(at(1.0), Format::Prometheus).contains("neli_healthy"), "no --health-cmd, no series");
        for (healthy, line) in [(false, "neli_healthy 0"), (true, "neli_healthy 1")] {
            s.healthy = Some(healthy);
            let text = s.render(at(1.0), Format::Prometheus);
            assert!(has(&text, line) && text.contains("# TYPE neli_healthy gauge"), "{text}");
        }
    }

    #[test]
    fn a_leadership_begins_with_its_token_and_is_shown_only_while_leading() {
        let since = |s: &Snapshot| {
            let text = s.render(at(100.0), Format::Prometheus);
            let line = text.lines().find(|l| l.starts_with("neli_leader_since_timestamp_seconds "))?.to_string();
            Some(line.rsplit(' ').next()?.parse::<f64>().unwrap())
        };
        let mut s = Snapshot::default();
        s.set_standing(Standing::Standby, 1000);
        assert_eq!(since(&s), None);
        let begun = 1_700_000_000_250;
        s.set_standing(Standing::Leader { token: 3 }, begun);
        let first = since(&s).expect("leading");
        assert_eq!(first, begun as f64 / 1000.0);
        s.set_standing(Standing::Leader { token: 3 }, begun + 5000);
        assert_eq!(since(&s), Some(first), "the same leadership goes on");
        s.set_standing(Standing::Fenced, begun + 6000);
        assert_eq!(since(&s), None, "fenced: not leading");
        s.set_standing(Standing::Leader { token: 4 }, begun + 7000);
        assert_eq!(since(&s), Some(first + 7.0), "a resume is a new leadership, under a new token");
        s.set_standing(Standing::Standby, begun + 8000);
        assert_eq!(since(&s), None);
    }

    #[test]
    fn build_and_member_info_name_this_member_and_escape_what_the_user_gave() {
        let ids = Ids { group: "billing".into(), topic: "billing.neli".into(), member: "a \"b\"\\c\nd".into() };
        let s = shared(ids).lock().unwrap().clone();
        let text = s.render(at(1.0), Format::Prometheus);
        let build = format!(
            "neli_build_info{{version=\"{}\",commit=\"{}\",librdkafka=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            env!("NELI_BUILD_COMMIT"),
            rdkafka::util::get_rdkafka_version().1
        );
        let member = r#"neli_member_info{group="billing",topic="billing.neli",member="a \"b\"\\c\nd"} 1"#;
        for line in [build.as_str(), member, "# TYPE neli_build_info gauge", "# TYPE neli_member_info gauge"] {
            assert!(has(&text, line), "missing {line}:\n{text}");
        }
        let open = s.render(at(1.0), Format::OpenMetrics);
        for line in [build.as_str(), member, "# TYPE neli_build info", "# TYPE neli_member info", "# EOF"] {
            assert!(has(&open, line), "missing {line}:\n{open}");
        }
        assert_eq!(open.lines().last(), Some("# EOF"));
    }

    #[test]
    fn process_metrics_are_read_from_proc() {
        let p = Process::read().expect("/proc is mounted");
        assert!(p.resident_bytes > 0 && p.virtual_bytes >= p.resident_bytes, "{p:?}");
        assert!(p.open_fds >= 3 && p.max_fds >= p.open_fds, "{p:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 3600.0, "{p:?}");
        let text = Snapshot::default().render(at(1.0), Format::Prometheus);
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(text.lines().any(|l| l.starts_with(name)), "missing {name}:\n{text}");
        }
        assert!(has(&text, "# TYPE process_cpu_seconds_total counter"), "{text}");
    }

    #[test]
    fn proc_fields_are_counted_from_the_last_parenthesis() {
        // A command name with spaces and a ')' (fields 14, 15: 250 and 50
        // ticks of CPU; 22: started 1000 ticks after boot).
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[14 - 3] = "250".into();
        fields[15 - 3] = "50".into();
        fields[22 - 3] = "1000".into();
        let stat = format!("42 (a) b (c)) {}\n", fields.join(" "));
        let status = "Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t     512 kB\n";
        let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
        let p = Process::parse(&stat, status, boot, 100.0, 7, 1024).unwrap();
        let want = Process {
            cpu_seconds: 3.0,
            resident_bytes: 512 * 1024,
            virtual_bytes: 2048 * 1024,
            open_fds: 7,
            max_fds: 1024,
            start_time_seconds: 1_700_000_010.0,
        };
        assert_eq!(p, want);
        assert_eq!(Process::parse("42 (x", status, boot, 100.0, 7, 1024), None);
    }

    #[test]
    fn open_metrics_is_served_only_to_who_asks_for_it() {
        // What Prometheus 2 sends.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::from_accept(Some("Application/OpenMetrics-Text; q=0.9")), Format::OpenMetrics);
        assert_eq!(Format::from_accept(Some("application/openmetrics-text; q=0")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("text/plain")), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("*/*")), Format::Prometheus);
        assert_eq!(Format::from_accept(None), Format::Prometheus);
    }

    fn reply(request: &str, s: &Snapshot, now: BootTime) -> (String, String) {
        let bytes = Reply::to(request, s, now).bytes();
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (head.to_string(), body.to_string())
    }

    #[test]
    fn head_gets_the_headers_of_get_without_the_body() {
        let s = Snapshot::default();
        let (get_head, get_body) = reply("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &s, at(1.0));
        let (head_head, head_body) = reply("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &s, at(1.0));
        assert!(get_head.starts_with("HTTP/1.1 200 OK\r\n") && head_head.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(get_head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{get_head}");
        let length = |head: &str| head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().to_string();
        assert_eq!(length(&get_head), get_body.len().to_string());
        // The process's metrics change between two scrapes, so the two
        // lengths may differ a little: HEAD's is a body's, not zero.
        assert!(length(&head_head).parse::<usize>().unwrap() > 100, "{head_head}");
        assert_eq!(head_body, "");
        let (head, body) = reply("HEAD /livez HTTP/1.1\r\n\r\n", &s, at(1.0));
        assert!(head.contains("Content-Length: 3\r\n") && body.is_empty(), "{head}");
        let (head, _) = reply("GET /metrics HTTP/1.1\r\naccept: application/openmetrics-text\r\n\r\n", &s, at(1.0));
        assert!(
            head.contains("Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"),
            "{head}"
        );
        let (head, _) = reply("POST /metrics HTTP/1.1\r\n\r\n", &s, at(1.0));
        assert!(head.starts_with("HTTP/1.1 405 ") && head.contains("Allow: GET, HEAD\r\n"), "{head}");
        let (head, _) = reply("GET /readyz HTTP/1.1\r\n\r\n", &s, at(1.0));
        assert!(head.contains("Content-Type: text/plain; charset=utf-8\r\n"), "{head}");
    }

    #[test]
    fn liveness_follows_the_shell_loop_and_readiness_also_kafka() {
        let status = |path: &str, s: &Snapshot, now: f64| {
            let (head, _) = reply(&format!("GET {path} HTTP/1.1\r\n\r\n"), s, at(now));
            head.split_whitespace().nth(1).unwrap().to_string()
        };
        let mut s = Snapshot::default();
        // Connecting: alive (Kafka may be away for long), not ready.
        assert_eq!(status("/livez", &s, 100.0), "200");
        assert_eq!(status("/readyz", &s, 100.0), "503");
        s.loop_seen = Some(at(100.0));
        s.kafka_reachable = true;
        for path in ["/livez", "/readyz", "/healthz"] {
            assert_eq!(status(path, &s, 109.0), "200", "{path}");
        }
        // Kafka away: still alive, not ready.
        s.kafka_reachable = false;
        assert_eq!(status("/livez", &s, 109.0), "200");
        assert_eq!(status("/readyz", &s, 109.0), "503");
        assert_eq!(status("/healthz", &s, 109.0), "503");
        // The loop stuck for LOOP_STUCK: neither.
        s.kafka_reachable = true;
        let stuck = 100.0 + LOOP_STUCK.as_secs_f64();
        for path in ["/livez", "/readyz", "/healthz"] {
            assert_eq!(status(path, &s, stuck), "503", "{path}");
        }
        let (_, body) = reply("GET /livez HTTP/1.1\r\n\r\n", &s, at(stuck));
        assert_eq!(body, "the shell's loop has not turned for 10s\n");
        assert_eq!(status("/nope", &s, 100.0), "404");
    }

    fn run(token: i64, due: u64, code: Option<u8>, by: Option<&str>) -> Attempt {
        let by = by.map(|name| Runner { name: name.into(), host: "h".into() });
        Attempt {
            wave_ms: 1,
            wave_token: token,
            number: 1,
            token,
            code,
            by,
            due: Some(due),
            ended: code.map(|_| due + 500),
        }
    }

    #[test]
    fn runs_are_counted_once_by_outcome_and_the_last_success_is_kept() {
        let mut s = Snapshot::default();
        s.note_run(Some(&run(7, 2000, None, None)), true); // running: not yet
        s.note_run(Some(&run(7, 2000, Some(0), None)), false);
        s.note_run(Some(&run(7, 2000, Some(0), None)), false); // the same run again
        s.note_run(Some(&run(7, 4000, Some(2), None)), false);
        s.note_run(Some(&run(7, 6000, None, None)), false); // stopped by us
        s.note_run(Some(&run(9, 8000, Some(0), Some("b"))), false); // b's, read
        s.next_due_ms = Some(10_000);
        let text = s.render(BootTime::from_nanos(1), Format::Prometheus);
        for line in [
            "neli_runs_total{outcome=\"success\"} 1",
            "neli_runs_total{outcome=\"failure\"} 1",
            "neli_runs_total{outcome=\"cut_short\"} 1",
            "neli_last_success_timestamp_seconds 8.5",
            "neli_next_run_timestamp_seconds 10.0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
    }
}
