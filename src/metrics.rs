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
//! server reads one request head (`crate::http`), answers GET or HEAD, and
//! closes the connection.

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
use tokio::io::AsyncWriteExt;
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
    /// `neli-run drain` named us (`neli_drained`).
    pub drained: bool,
    /// When the shell's loop last turned; None until it starts (while
    /// connecting to Kafka).
    pub loop_seen: Option<BootTime>,
    pub transitions: BTreeMap<&'static str, u64>,
    pub child_restarts: u64,
    /// Run records lost (`crate::runs`), counted by the recorder itself.
    pub runs_unrecorded: std::sync::Arc<std::sync::atomic::AtomicU64>,
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
    /// With `--crontab`, the jobs whose partitions we own and our file
    /// lacks: they run nowhere while we own them (`status` says so too).
    pub lacked: std::collections::BTreeSet<String>,
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
    /// The role is paused (`pause --role J`), as this member last read its
    /// partition.
    pub paused: bool,
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
        if !s.jobs.is_empty() || !s.lacked.is_empty() {
            self.jobs(&mut enc)?;
        }
        one(&mut enc, "neli_kafka_reachable", None, "1 while Kafka answers.", gauge(s.kafka_reachable as i64))?;
        let lost = ConstCounter::new(s.runs_unrecorded.load(std::sync::atomic::Ordering::Relaxed));
        let help = "Run records not written to the runs topic (queue full, Kafka down or refusing them).";
        one(&mut enc, "neli_runs_unrecorded", None, help, lost)?;
        let help =
            "1 while the group is paused (neli-run pause), as this member last read partition 0: current on its owner.";
        one(&mut enc, "neli_paused", None, help, gauge(s.paused as i64))?;
        if let Some(healthy) = s.healthy {
            let help = "1 while the health check (--health-cmd) says this member may lead.";
            one(&mut enc, "neli_healthy", None, help, gauge(healthy as i64))?;
        }
        let help = "1 while this member is drained (neli-run drain): out of the group, running nothing.";
        one(&mut enc, "neli_drained", None, help, gauge(s.drained as i64))?;
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
        let help = "1 while the role is paused (neli-run pause), as this member last read its partition: current on its owner.";
        family(enc, ("neli_role_paused", None), help, "role", per_role(|r| r.paused as i64))?;
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
        let help = "1 while this member owns the job's partition and its crontab lacks the job: it runs nowhere.";
        let lacked = self.snapshot.lacked.iter().map(|j| (j.as_str(), ConstGauge::new(1)));
        family(enc, ("neli_job_lacked", None), help, "job", lacked)?;
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
    let Some(head) = crate::http::read_head(&mut stream, 8192).await else { return };
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
        let (method, path, accept) = crate::http::parse(head, "accept");
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
mod tests;
