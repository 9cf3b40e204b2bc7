//! Checked configuration: parses durations, signals, broker addresses and
//! `-X` properties, and refuses timing that cannot be safe, before anything
//! joins a group.
//!
//! The safety inequalities (the README explains them):
//! 1. `heartbeat_deadline >= 2 * heartbeat_interval`: one late record must
//!    not fence a healthy leader.
//! 2. `heartbeat_deadline + coordinator_heartbeat + MARGIN <= session_timeout`:
//!    a leader cut off from Kafka kills its command before the coordinator
//!    can expire its session and hand partition 0 to someone else. The
//!    coordinator's clock started at our last coordinator heartbeat, which
//!    can be one coordinator heartbeat interval before our last record.
//! 3. `grace + coordinator_heartbeat + MARGIN <= session_timeout`: the revoke
//!    barrier must end before the coordinator could expel us for going
//!    quiet in the callback (librdkafka's mock cluster does; see README).
//! 4. `grace + MARGIN <= max.poll.interval.ms`: Kafka's rebalance timeout.
//! 5. `3 * coordinator_heartbeat <= session_timeout` and
//!    `session_timeout <= max.poll.interval.ms` (librdkafka's own rules).

mod java_props;

use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::cli::{FailedRun, KafkaArgs, RunArgs};
use crate::exit::{Failure, Kind};
use crate::leader::{Missed, Restart, Schedule, Settings, Waves};

/// Slack for the timer, the kill and the scheduler in every inequality.
pub const MARGIN: Duration = Duration::from_millis(500);
/// Coordinator heartbeat interval unless `-X heartbeat.interval.ms` says
/// otherwise. Short, because standbys learn of a leader leaving only at their
/// next coordinator heartbeat: with two standbys a graceful handover waits
/// for the later of two, about two thirds of it on average (250 ms gave a
/// median of 306 ms, 200 ms 200 ms). Each member sends five small requests a
/// second (1000 a second for 200 members).
pub const DEFAULT_COORDINATOR_HEARTBEAT: Duration = Duration::from_millis(200);
/// The longest --session-timeout: Kafka's default
/// group.max.session.timeout.ms (brokers refuse longer sessions unless
/// reconfigured; librdkafka's own limit is 1 h).
pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// librdkafka's ranges for the two timing properties neli-run reads.
const MAX_COORDINATOR_HEARTBEAT_MS: u64 = 3_600_000;
const MAX_POLL_INTERVAL_MS: u64 = 86_400_000;
/// Bounds of the durations that are not tied to the session timeout.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(24 * 3600);
const MAX_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);
const MAX_RUNTIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// --once-within's default: half of cron's shortest period.
pub const DEFAULT_ONCE_WITHIN: Duration = Duration::from_secs(30);
/// A wave's records must still be on the topic when its last member reads
/// them: the retention neli-run creates the topic with.
const MAX_ONCE_WITHIN: Duration = Duration::from_secs(3600);

/// `max.poll.interval.ms` unless set with -X: Kafka's rebalance timeout,
/// which is also how long librdkafka waits for a JoinGroup answer. Its
/// default of 5 minutes left members stuck that long after a broker pause
/// (found by neli-soak); the consumer thread polls every 100 ms and blocks
/// at most for the revoke barrier, so a short one is safe.
pub fn default_max_poll_interval(session: Duration, grace: Duration) -> Duration {
    session.saturating_mul(2).max(session.saturating_add(grace).saturating_add(MARGIN))
}

/// Properties that have a flag of their own; setting them with -X would let
/// the two disagree.
const OWNED_PROPERTIES: [(&str, &str); 4] = [
    ("bootstrap.servers", "--brokers"),
    ("group.id", "--group"),
    ("session.timeout.ms", "--session-timeout"),
    ("client.id", "--name"),
];

/// Properties whose value is a secret: a --kafka-config file holding one
/// should be readable by its owner only.
const SECRET_FILE_KEYS: [&str; 3] = ["sasl.password", "ssl.key.password", "sasl.jaas.config"];

/// A configuration the user must fix: a usage error unless said otherwise.
/// The message never carries a property's value.
fn err<T>(msg: impl Into<String>) -> Result<T, Failure> {
    Err(Failure::new(Kind::Usage, msg))
}

/// Where a Kafka property came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `-X KEY=VALUE`.
    Flag,
    /// NELI_KAFKA_PROPERTIES, its n-th entry (from 1).
    Env(usize),
    /// A --kafka-config file, at a line.
    File { path: String, line: usize },
    /// A --kafka-secret file.
    Secret { path: String },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag => write!(f, "-X"),
            Origin::Env(n) => write!(f, "NELI_KAFKA_PROPERTIES entry {n}"),
            Origin::File { path, line } => write!(f, "--kafka-config {path} line {line}"),
            Origin::Secret { path } => write!(f, "--kafka-secret {path}"),
        }
    }
}

/// Once per wave: on by default with `--restart never`, and only there.
fn waves(
    restart: Restart,
    once_within: Option<Duration>,
    failed_run: Option<FailedRun>,
) -> Result<Option<Waves>, Failure> {
    if restart != Restart::Never {
        if once_within.is_some() || failed_run.is_some() {
            let flag = if once_within.is_some() { "--once-within" } else { "--failed-run" };
            return err(format!(
                "{flag} applies only to --restart never (a command run once per tick, as from cron); \
                 with --restart on-failure or always the command runs as a service and has no waves"
            ));
        }
        return Ok(None);
    }
    let within = match once_within {
        None => DEFAULT_ONCE_WITHIN,
        Some(v) => duration(
            ("--once-within", "NELI_ONCE_WITHIN"),
            v,
            MAX_ONCE_WITHIN,
            "the topic keeps a wave's records for an hour (the retention neli-run creates it with)",
        )?,
    };
    let retry_failed = failed_run != Some(FailedRun::Exit);
    if within.is_zero() {
        if failed_run.is_some() {
            return err("--failed-run has no effect with --once-within 0 (every member runs the command)");
        }
        return Ok(None);
    }
    Ok(Some(Waves { within, retry_failed }))
}

/// The shortest --every: a schedule, not a busy loop.
const MIN_EVERY: Duration = Duration::from_secs(1);
const MAX_EVERY: Duration = Duration::from_secs(366 * 24 * 3600);

/// A schedule of its own (--every or --cron), and the flags that go with
/// one, or with none.
fn schedule(args: &RunArgs) -> Result<Option<Schedule>, Failure> {
    let calendar: std::sync::Arc<dyn crate::leader::Calendar> = match (&args.every, &args.cron) {
        (Some(every), _) => {
            let every = duration(("--every", "NELI_EVERY"), *every, MAX_EVERY, "use --cron for a yearly job")?;
            if every < MIN_EVERY {
                return err("--every must be at least 1s (a schedule, not a loop: see --restart always)");
            }
            std::sync::Arc::new(crate::calendar::Every::new(every).expect("at least 1s"))
        }
        (None, Some(expr)) => {
            let zone = match args.time_zone.as_deref() {
                None => crate::calendar::Zone::Local,
                Some(zone) => zone.parse().map_err(|e| Failure::new(Kind::Usage, format!("--time-zone: {e}")))?,
            };
            match crate::calendar::Cron::new(expr, zone) {
                Ok(cron) => std::sync::Arc::new(cron),
                Err(e) => {
                    return err(format!(
                        "--cron '{expr}': {e} (five fields: minute hour day-of-month month day-of-week, \
                         e.g. \"*/5 * * * *\"; a sixth in front gives seconds)"
                    ))
                }
            }
        }
        (None, None) => {
            let without = [
                ("--time-zone", args.time_zone.is_some()),
                ("--missed", args.missed.is_some()),
                ("--starting-deadline", args.starting_deadline.is_some()),
            ];
            if let Some((flag, _)) = without.iter().find(|(_, given)| *given) {
                return err(format!("{flag} applies only to a schedule: give --every or --cron"));
            }
            return Ok(None);
        }
    };
    let flag = if args.every.is_some() { "--every" } else { "--cron" };
    if args.every.is_some() && args.time_zone.is_some() {
        return err("--time-zone applies only to --cron (--every counts from the Unix epoch, in UTC)");
    }
    if args.restart != Restart::Never {
        return err(format!(
            "{flag} runs the command at its due times and keeps leading between runs; --restart is for a \
             command run as a service: leave one of them out"
        ));
    }
    for (other, given) in [("--once-within", args.once_within.is_some()), ("--failed-run", args.failed_run.is_some())] {
        if given {
            return err(format!(
                "{other} applies to a command run once per tick from cron on every host; with {flag} neli-run \
                 keeps the schedule itself and runs each due time once (leave {other} out)"
            ));
        }
    }
    let starting_deadline = match args.starting_deadline {
        None => None,
        Some(v) => match duration(
            ("--starting-deadline", "NELI_STARTING_DEADLINE"),
            v,
            MAX_EVERY,
            "leave it out for no limit",
        )? {
            d if d.is_zero() => return err("--starting-deadline must be more than 0 (leave it out for no limit)"),
            d => Some(d),
        },
    };
    Ok(Some(Schedule { calendar, missed: args.missed.unwrap_or(Missed::Once), starting_deadline }))
}

/// Names a flag the way the user gave it: its environment variable when the
/// value came from there.
fn given_as<'a>(flag: &'a str, env: &'a str, value: &str) -> &'a str {
    match std::env::var(env) {
        Ok(v) if v == value => env,
        _ => flag,
    }
}

/// Everything `run` needs, checked.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the group's topic is.
    pub kafka: Target,
    pub name: String,
    pub session_timeout: Duration,
    pub coordinator_heartbeat: Duration,
    pub max_poll_interval: Duration,
    pub leader: Settings,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub metrics_addr: Option<std::net::SocketAddr>,
}

impl Config {
    /// Checks `args`; `env_properties` is NELI_KAFKA_PROPERTIES, if set.
    pub fn from_args(args: RunArgs, env_properties: Option<String>) -> Result<Config, Failure> {
        let Some((program, rest)) = args.command.split_first() else {
            return err("no command given: neli-run [OPTIONS] -- COMMAND [ARGS]...");
        };
        if program.is_empty() {
            // An empty name can never be found, so this is "command not
            // found": 127, as `env ""` and shells report it. Refused here
            // because the PATH search would otherwise try "<dir>/" and
            // report a directory as not executable (126).
            return Err(Failure::new(Kind::NotFound, "the command is empty (\"\"): give the program to run after --"));
        }
        let schedule = schedule(&args)?;
        let kafka = Target::from_args(args.kafka, env_properties)?;
        let name = match args.name {
            Some(name) if name.trim().is_empty() => return err("--name must not be empty"),
            Some(name) => name,
            None => format!(
                "{}-{}",
                nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "host".into()),
                std::process::id()
            ),
        };
        let coordinator_heartbeat = match kafka.property("heartbeat.interval.ms") {
            Some((v, origin)) => millis_property("heartbeat.interval.ms", v, origin, MAX_COORDINATOR_HEARTBEAT_MS)?,
            None => DEFAULT_COORDINATOR_HEARTBEAT,
        };

        let within_session = "it must fit within --session-timeout, at most 30m";
        let session_timeout = duration(
            ("--session-timeout", "NELI_SESSION_TIMEOUT"),
            args.session_timeout,
            MAX_SESSION_TIMEOUT,
            "Kafka's default group.max.session.timeout.ms: brokers refuse longer sessions",
        )?;
        let heartbeat_interval = duration(
            ("--heartbeat-interval", "NELI_HEARTBEAT_INTERVAL"),
            args.heartbeat_interval,
            MAX_SESSION_TIMEOUT,
            within_session,
        )?;
        let leader = Settings {
            resume_window: session_timeout.saturating_sub(coordinator_heartbeat.saturating_add(MARGIN)),
            claim_margin: MARGIN,
            heartbeat_interval,
            heartbeat_deadline: duration(
                ("--heartbeat-deadline", "NELI_HEARTBEAT_DEADLINE"),
                args.heartbeat_deadline,
                MAX_SESSION_TIMEOUT,
                within_session,
            )?,
            grace: duration(("--grace", "NELI_GRACE"), args.grace, MAX_SESSION_TIMEOUT, within_session)?,
            stop_signal: crate::leader::Signal(stop_signal(&args.stop_signal)? as i32),
            restart: args.restart,
            restart_delay: duration(
                ("--restart-delay", "NELI_RESTART_DELAY"),
                args.restart_delay,
                MAX_RESTART_DELAY,
                "a pause, not a schedule",
            )?,
            acquire_timeout: args
                .acquire_timeout
                .map(|v| {
                    duration(
                        ("--acquire-timeout", "NELI_ACQUIRE_TIMEOUT"),
                        v,
                        MAX_ACQUIRE_TIMEOUT,
                        "leave it out to wait for ever",
                    )
                })
                .transpose()?,
            max_runtime: match args.max_runtime {
                None => None,
                Some(v) => {
                    match duration(("--max-runtime", "NELI_MAX_RUNTIME"), v, MAX_RUNTIME, "leave it out for no limit")?
                    {
                        d if d.is_zero() => {
                            return err("--max-runtime must be more than 0 (leave it out for no limit)")
                        }
                        d => Some(d),
                    }
                }
            },
            waves: match schedule {
                Some(_) => None,
                None => waves(args.restart, args.once_within, args.failed_run)?,
            },
            schedule,
        };
        let max_poll_interval = match kafka.property("max.poll.interval.ms") {
            Some((v, origin)) => millis_property("max.poll.interval.ms", v, origin, MAX_POLL_INTERVAL_MS)?,
            None => default_max_poll_interval(session_timeout, leader.grace),
        };
        let metrics_addr = match args.metrics_addr.as_deref() {
            None => None,
            Some(addr) => match std::net::ToSocketAddrs::to_socket_addrs(addr).map(|mut a| a.next()) {
                Ok(Some(addr)) => Some(addr),
                _ => return err(format!("--metrics-addr '{addr}': expected HOST:PORT, e.g. 0.0.0.0:9464")),
            },
        };
        let config = Config {
            kafka,
            name,
            session_timeout,
            coordinator_heartbeat,
            max_poll_interval,
            leader,
            program: program.clone(),
            args: rest.to_vec(),
            metrics_addr,
        };
        config.check_timing()?;
        Ok(config)
    }

    /// The safety inequalities of the module doc. Every duration is bounded
    /// by now; the arithmetic saturates all the same.
    fn check_timing(&self) -> Result<(), Failure> {
        let s = &self.leader;
        let session = self.session_timeout;
        let hb = self.coordinator_heartbeat;
        let d = |d: Duration| humantime::format_duration(d).to_string();
        let twice = |d: Duration| d.saturating_mul(2);
        if s.heartbeat_interval.is_zero() {
            return err("--heartbeat-interval must be more than 0");
        }
        if s.heartbeat_deadline < twice(s.heartbeat_interval) {
            return err(format!(
                "unsafe timing: --heartbeat-deadline {} is less than twice --heartbeat-interval {}, so one late \
                 heartbeat would fence a healthy leader. Raise --heartbeat-deadline to at least {} or lower \
                 --heartbeat-interval to at most {}.",
                d(s.heartbeat_deadline),
                d(s.heartbeat_interval),
                d(twice(s.heartbeat_interval)),
                d(s.heartbeat_deadline / 2)
            ));
        }
        if hb.saturating_mul(3) > session {
            return err(format!(
                "unsafe timing: the coordinator heartbeat (heartbeat.interval.ms) {} must be at most a third of \
                 --session-timeout {}. Lower -X heartbeat.interval.ms or raise --session-timeout to at least {}.",
                d(hb),
                d(session),
                d(hb.saturating_mul(3))
            ));
        }
        let budget = session.saturating_sub(hb.saturating_add(MARGIN));
        if s.heartbeat_deadline > budget {
            return err(format!(
                "unsafe timing: --heartbeat-deadline {} + coordinator heartbeat {} + margin {} exceeds \
                 --session-timeout {}: a leader cut off from Kafka could still run its command after the group \
                 gave partition 0 to another member. Lower --heartbeat-deadline to at most {} or raise \
                 --session-timeout to at least {}.",
                d(s.heartbeat_deadline),
                d(hb),
                d(MARGIN),
                d(session),
                d(budget),
                d(s.heartbeat_deadline.saturating_add(hb).saturating_add(MARGIN))
            ));
        }
        if s.grace > budget {
            return err(format!(
                "unsafe timing: --grace {} + coordinator heartbeat {} + margin {} exceeds --session-timeout {}: \
                 while the old leader waits for its command to stop, the group could expel it and start another. \
                 Lower --grace to at most {} or raise --session-timeout to at least {}.",
                d(s.grace),
                d(hb),
                d(MARGIN),
                d(session),
                d(budget),
                d(s.grace.saturating_add(hb).saturating_add(MARGIN))
            ));
        }
        if session > self.max_poll_interval {
            return err(format!(
                "max.poll.interval.ms {} must be at least --session-timeout {} (librdkafka's rule).",
                d(self.max_poll_interval),
                d(session)
            ));
        }
        if s.grace.saturating_add(MARGIN) > self.max_poll_interval {
            return err(format!(
                "unsafe timing: --grace {} + margin {} exceeds the rebalance timeout (max.poll.interval.ms {}). \
                 Raise -X max.poll.interval.ms to at least {}.",
                d(s.grace),
                d(MARGIN),
                d(self.max_poll_interval),
                s.grace.saturating_add(MARGIN).as_millis()
            ));
        }
        Ok(())
    }
}

/// Where a group's topic is: what both running and `status` need.
#[derive(Clone, Debug)]
pub struct Target {
    pub brokers: String,
    pub group: String,
    pub topic: String,
    /// The --kafka-config file's properties, then NELI_KAFKA_PROPERTIES,
    /// then --kafka-secret, then -X: later ones win.
    pub properties: Vec<(String, String)>,
    /// Where each of `properties` came from.
    pub origins: Vec<Origin>,
}

impl Target {
    /// Checks `args`; `env_properties` is NELI_KAFKA_PROPERTIES, if set.
    pub fn from_args(args: KafkaArgs, env_properties: Option<String>) -> Result<Target, Failure> {
        let group = args.group.unwrap_or_default();
        if group.is_empty() {
            return err("--group must not be empty");
        }
        let topic = args.topic.unwrap_or_else(|| format!("{group}.neli"));
        check_topic_name(&topic)?;
        let mut properties: Vec<(String, String, Origin)> = Vec::new();
        let mut file_brokers = None;
        if let Some(path) = &args.kafka_config {
            let mut secrets = Vec::new();
            for entry in read_kafka_config(path)? {
                let origin = Origin::File { path: path.display().to_string(), line: entry.line };
                if SECRET_FILE_KEYS.contains(&entry.key.as_str()) && !secrets.contains(&entry.key) {
                    secrets.push(entry.key.clone());
                }
                match entry.key.as_str() {
                    "bootstrap.servers" => file_brokers = Some((entry.value, origin)),
                    _ => properties.extend(
                        translate_java_property(&entry.key, entry.value, &origin)?
                            .into_iter()
                            .map(|(k, v)| (k, v, origin.clone())),
                    ),
                }
            }
            warn_if_others_can_read(path, &secrets);
        }
        let brokers = match (args.brokers, file_brokers) {
            (Some(b), _) => {
                let name = given_as("--brokers", "NELI_BROKERS", &b).to_string();
                parse_brokers(&b, &name)?
            }
            (None, Some((b, origin))) => parse_brokers(&b, &format!("bootstrap.servers ({origin})"))?,
            (None, None) => "localhost:9092".into(),
        };
        for (n, entry) in split_env_list(env_properties.as_deref().unwrap_or_default()).iter().enumerate() {
            let origin = Origin::Env(n + 1);
            let (k, v) = parse_property(entry, &origin)?;
            properties.push((k, v, origin));
        }
        for spec in args.kafka_secrets.iter().flat_map(|s| s.split(';')).filter(|s| !s.trim().is_empty()) {
            properties.push(read_secret(spec)?);
        }
        for prop in &args.kafka_properties {
            let (k, v) = parse_property(prop, &Origin::Flag)?;
            properties.push((k, v, Origin::Flag));
        }
        for (k, v, origin) in &properties {
            if k.contains('\0') {
                return err(format!("{origin}: a key contains a NUL byte, which librdkafka cannot take"));
            }
            if v.contains('\0') {
                return err(format!("{origin}: the value of {k} contains a NUL byte, which librdkafka cannot take"));
            }
        }
        // librdkafka checks each property when it is set: do it now, so that
        // `status` and `yield` get the same clear message (exit 78) and a run
        // fails before joining. Plugins load when set, so they are left to
        // the real client.
        for (k, v, origin) in properties.iter().filter(|(k, _, _)| k != "plugin.library.paths") {
            // librdkafka reads integers as C ints and would report a wrapped
            // number; say what is wrong instead.
            match k.as_str() {
                "heartbeat.interval.ms" => drop(millis_property(k, v, origin, MAX_COORDINATOR_HEARTBEAT_MS)?),
                "max.poll.interval.ms" => drop(millis_property(k, v, origin, MAX_POLL_INTERVAL_MS)?),
                _ if v.trim().parse::<i128>().is_ok_and(|n| n > i32::MAX.into() || n < i32::MIN.into()) => {
                    return Err(Failure::new(
                        Kind::KafkaConfig,
                        format!(
                            "Kafka client configuration rejected: {origin}: {k} is out of range (librdkafka's \
                             numbers are at most {})",
                            i32::MAX
                        ),
                    ));
                }
                _ => {}
            }
            let mut probe = rdkafka::ClientConfig::new();
            probe.set(k, v);
            if let Err(e) = probe.create_native_config() {
                let why = crate::kafka::rejected_property(&e, &origin.to_string());
                return Err(Failure::new(Kind::KafkaConfig, format!("Kafka client configuration rejected: {why}")));
            }
        }
        let (properties, origins) = properties.into_iter().map(|(k, v, o)| ((k, v), o)).unzip();
        Ok(Target { brokers, group, topic, properties, origins })
    }

    /// The value that wins for `key`, and where it came from.
    pub fn property(&self, key: &str) -> Option<(&str, &Origin)> {
        let i = self.properties.iter().rposition(|(k, _)| k == key)?;
        Some((self.properties[i].1.as_str(), &self.origins[i]))
    }

    /// Where the value that wins for `key` came from, for messages: "set by
    /// neli-run" when the user did not give it.
    pub fn origin(&self, key: &str) -> String {
        match self.property(key) {
            Some((_, origin)) => origin.to_string(),
            None => "set by neli-run".into(),
        }
    }

    /// A client config for these brokers: `ours` first, then the user's
    /// properties, which win.
    pub fn client_config(&self, ours: &[(&str, &str)]) -> rdkafka::ClientConfig {
        let mut config = rdkafka::ClientConfig::new();
        config.set("bootstrap.servers", &self.brokers);
        // librdkafka backs off up to 10 s between reconnects; after a broker
        // restart that is up to 10 s more with nobody leading. Java clients
        // wait at most 1 s.
        config.set("reconnect.backoff.max.ms", "1000");
        for (k, v) in ours.iter().copied().chain(self.properties.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
            config.set(k, v);
        }
        config
    }
}

/// Reads a --kafka-config file: UTF-8, or ISO-8859-1 (what Java's
/// `Properties.load` reads) when it is not valid UTF-8.
fn read_kafka_config(path: &Path) -> Result<Vec<java_props::Entry>, Failure> {
    let at = path.display();
    let bytes = std::fs::read(path).or_else(|e| err(format!("--kafka-config {at}: cannot read it ({e})")))?;
    let text = String::from_utf8(bytes).unwrap_or_else(|e| e.into_bytes().iter().map(|&b| char::from(b)).collect());
    java_props::parse(&text).map_err(|m| {
        let key = m.key.map(|k| format!(" in the value of {}", k.escape_debug())).unwrap_or_else(|| " in a key".into());
        Failure::new(Kind::Usage, format!("--kafka-config {at} line {}: {}{key}", m.line, m.reason))
    })
}

/// Warns (once, not fatal) when a --kafka-config file holding a secret can
/// be read by anyone but its owner.
fn warn_if_others_can_read(path: &Path, secrets: &[String]) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else { return };
    let mode = meta.permissions().mode() & 0o777;
    if !secrets.is_empty() && mode & 0o077 != 0 {
        tracing::warn!(
            "--kafka-config {} holds {} but its mode is {mode:03o} (readable by group or others): chmod 600 it",
            path.display(),
            secrets.join(", ")
        );
    }
}

/// Reads `--kafka-secret KEY=PATH`: the value is the file's contents, less
/// one trailing newline.
fn read_secret(spec: &str) -> Result<(String, String, Origin), Failure> {
    let Some((key, path)) = spec.split_once('=') else {
        return err(format!(
            "--kafka-secret {spec}: expected KEY=PATH, e.g. sasl.password=$CREDENTIALS_DIRECTORY/kafka-password"
        ));
    };
    let key = key.trim();
    if key.is_empty() || path.is_empty() {
        return err(format!("--kafka-secret {spec}: expected KEY=PATH, both non-empty"));
    }
    if let Some((_, flag)) = OWNED_PROPERTIES.iter().find(|(k, _)| *k == key) {
        return err(format!("--kafka-secret {key} is set by {flag}; use that flag instead"));
    }
    let bytes = std::fs::read(path).or_else(|e| err(format!("--kafka-secret {key}={path}: cannot read it ({e})")))?;
    let Ok(mut value) = String::from_utf8(bytes) else {
        return err(format!("--kafka-secret {key}={path}: the file is not UTF-8 text"));
    };
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    Ok((key.to_string(), value, Origin::Secret { path: path.to_string() }))
}

/// Splits NELI_KAFKA_PROPERTIES at `;`; `\;` is a `;` inside a value and
/// `\\` a backslash (any other backslash stands for itself). Blank entries
/// are skipped.
fn split_env_list(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut entry = String::new();
    let mut chars = list.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(c @ (';' | '\\')) => entry.push(c),
                Some(other) => {
                    entry.push('\\');
                    entry.push(other);
                }
                None => entry.push('\\'),
            },
            ';' => out.push(std::mem::take(&mut entry)),
            c => entry.push(c),
        }
    }
    out.push(entry);
    out.retain(|e| !e.trim().is_empty());
    out
}

/// The username and password of a `sasl.jaas.config` value, read as Kafka's
/// JaasConfig does (a `java.io.StreamTokenizer`): `LoginModule flag
/// name=value ...;` where a value is a word or a quoted string with
/// backslash escapes; `//` and `/* */` comments.
fn jaas_credentials(value: &str) -> Option<(String, String)> {
    let chars: Vec<char> = value.chars().collect();
    let mut i = 0;
    let mut tokens: Vec<(bool, String)> = Vec::new(); // (quoted, text)
    let word = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '$' | '.');
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' {
            let quote = c;
            let mut text = String::new();
            i += 1;
            while i < chars.len() && chars[i] != quote {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                    let e = chars[i];
                    if ('0'..='7').contains(&e) {
                        let mut n = 0u32;
                        let mut digits = 0;
                        while digits < 3 && i < chars.len() && ('0'..='7').contains(&chars[i]) && n * 8 < 256 {
                            n = n * 8 + chars[i].to_digit(8)?;
                            i += 1;
                            digits += 1;
                        }
                        text.push(char::from_u32(n)?);
                        continue;
                    }
                    text.push(match e {
                        'a' => '\x07',
                        'b' => '\x08',
                        'f' => '\x0c',
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        'v' => '\x0b',
                        other => other,
                    });
                } else {
                    text.push(chars[i]);
                }
                i += 1;
            }
            i += 1;
            tokens.push((true, text));
        } else if word(c) {
            let start = i;
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            tokens.push((false, chars[start..i].iter().collect()));
        } else {
            tokens.push((false, c.to_string()));
            i += 1;
        }
    }
    // Skip the login module and its flag, then read name=value pairs.
    let (mut user, mut password) = (None, None);
    let mut t = tokens.iter().skip(2).peekable();
    while let Some((quoted, name)) = t.next() {
        if *quoted || !matches!(t.peek(), Some((false, eq)) if eq == "=") {
            continue;
        }
        t.next();
        let Some((_, value)) = t.next() else { break };
        match name.as_str() {
            "username" => user = Some(value.clone()),
            "password" => password = Some(value.clone()),
            _ => {}
        }
    }
    Some((user?, password?))
}

/// Maps a Java client property to librdkafka's, where they differ.
fn translate_java_property(key: &str, value: String, origin: &Origin) -> Result<Vec<(String, String)>, Failure> {
    match key {
        // Java's way to give SASL credentials.
        "sasl.jaas.config" => match jaas_credentials(&value) {
            Some((user, password)) => Ok(vec![("sasl.username".into(), user), ("sasl.password".into(), password)]),
            None => err(format!(
                "{origin}: sasl.jaas.config has no username=\"...\" password=\"...\"; for Kerberos or OAuth set \
                 librdkafka's sasl.* properties instead"
            )),
        },
        "ssl.truststore.location" | "ssl.truststore.password" | "ssl.truststore.type" => err(format!(
            "{origin}: {key} (a Java truststore) is not supported by librdkafka; export the CA certificate as PEM \
             (keytool -exportcert -rfc) and set ssl.ca.location"
        )),
        // Java-only settings that have no meaning here.
        k if k.ends_with(".serializer") || k.ends_with(".deserializer") || k.ends_with(".class") => Ok(vec![]),
        _ => Ok(vec![checked_property(key, value, origin)?]),
    }
}

/// Parses a humantime duration ("500ms", "6s", "1m 30s") of at most `max`.
fn duration(names: (&str, &str), d: Duration, max: Duration, why: &str) -> Result<Duration, Failure> {
    if d > max {
        let from_env = std::env::var(names.1).ok().and_then(|v| humantime::parse_duration(v.trim()).ok()) == Some(d);
        let flag = if from_env { names.1 } else { names.0 };
        let (d, max) = (humantime::format_duration(d), humantime::format_duration(max));
        return err(format!("{flag} {d}: too long, at most {max} ({why})"));
    }
    Ok(d)
}

/// A property in milliseconds that neli-run reads itself, within
/// librdkafka's range 1..=max.
fn millis_property(key: &str, value: &str, origin: &Origin, max: u64) -> Result<Duration, Failure> {
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 && ms <= max => Ok(Duration::from_millis(ms)),
        Ok(ms) if ms > 0 => err(format!(
            "{origin}: {key} is more than librdkafka's limit of {max} ms ({})",
            humantime::format_duration(Duration::from_millis(max))
        )),
        _ => err(format!("{origin}: {key}: expected a positive number of milliseconds")),
    }
}

/// Splits `KEY=VALUE` from -X or NELI_KAFKA_PROPERTIES. Errors name the
/// origin and the key, never the value.
fn parse_property(prop: &str, origin: &Origin) -> Result<(String, String), Failure> {
    let Some((key, value)) = prop.split_once('=') else {
        return match origin {
            // Shown only when it looks like a key: it may be a lone secret.
            Origin::Flag if prop.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) => {
                err(format!("-X {prop}: expected KEY=VALUE, e.g. -X security.protocol=SSL"))
            }
            Origin::Flag => err("-X: an argument is not KEY=VALUE, e.g. -X security.protocol=SSL"),
            _ => err(format!(
                "{origin}: expected KEY=VALUE, entries separated by ';' (write a ';' inside a value as \\;)"
            )),
        };
    };
    checked_property(key.trim(), value.to_string(), origin)
}

fn checked_property(key: &str, value: String, origin: &Origin) -> Result<(String, String), Failure> {
    if key.is_empty() {
        return err(format!("{origin}: the key is empty (expected KEY=VALUE)"));
    }
    if let Some((_, flag)) = OWNED_PROPERTIES.iter().find(|(k, _)| *k == key) {
        return err(format!("{origin}: {key} is set by {flag}; use that flag instead"));
    }
    Ok((key.to_string(), value))
}

/// Accepts "TERM", "SIGTERM", "sigterm" or "15".
pub fn parse_signal(value: &str) -> Result<Signal, Failure> {
    let v = value.trim();
    let parsed = match v.parse::<i32>() {
        Ok(n) => Signal::try_from(n).ok(),
        Err(_) => {
            let upper = v.to_ascii_uppercase();
            let name = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
            name.parse::<Signal>().ok()
        }
    };
    match parsed {
        Some(sig) => Ok(sig),
        None => err(format!("--stop-signal '{value}': not a signal name or number (e.g. SIGTERM, INT, 15)")),
    }
}

/// A --stop-signal: one that asks a command to stop. Signals that cannot
/// stop it are refused with the reason.
pub fn stop_signal(value: &str) -> Result<Signal, Failure> {
    use Signal::*;
    let flag = given_as("--stop-signal", "NELI_STOP_SIGNAL", value);
    let sig = parse_signal(value).map_err(|e| Failure::new(e.kind, e.message.replace("--stop-signal", flag)))?;
    let why = match sig {
        SIGKILL => "neli-run already sends SIGKILL after --grace; the stop signal is the request before it",
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU => "it suspends the command instead of stopping it",
        SIGCONT => "it resumes a suspended command; it stops nothing",
        SIGCHLD | SIGWINCH | SIGURG => "it is ignored by default, so the command would run on until SIGKILL",
        _ => return Ok(sig),
    };
    err(format!(
        "{flag} {}: {why}. Use a signal the command stops on: SIGTERM (the default), SIGINT, SIGQUIT, SIGHUP or \
         one it handles (SIGUSR1, SIGUSR2)",
        sig.as_str()
    ))
}

/// Checks "host:port,host:port" (an optional `scheme://` is allowed);
/// `given_as` names where the list came from.
fn parse_brokers(value: &str, given_as: &str) -> Result<String, Failure> {
    let entries: Vec<&str> = value.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    if entries.is_empty() {
        return err(format!("{given_as} is empty; give HOST:PORT, e.g. localhost:9092"));
    }
    for entry in &entries {
        let addr = entry.split_once("://").map_or(*entry, |(_, a)| a);
        let (host, port) = match addr.strip_prefix('[') {
            // [IPv6]:port or [IPv6]
            Some(rest) => match rest.split_once(']') {
                Some((ip, "")) => (ip, None),
                Some((ip, tail)) => (ip, Some(tail.strip_prefix(':').unwrap_or("x"))),
                None => ("", None),
            },
            None => match addr.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (addr, None),
            },
        };
        let bracketed = addr.starts_with('[');
        let host_ok = !host.is_empty()
            && !host.contains(char::is_whitespace)
            && !host.contains('/')
            && (bracketed && host.parse::<std::net::Ipv6Addr>().is_ok() || !bracketed && !host.contains(':'));
        let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
        if !host_ok || !port_ok {
            return err(format!(
                "bad broker address '{entry}' in {given_as}: expected HOST:PORT, e.g. localhost:9092 (an IPv6 \
                 address goes in brackets: [::1]:9092)"
            ));
        }
    }
    Ok(entries.join(","))
}

/// Kafka's topic name rules, checked early for a clear message.
fn check_topic_name(topic: &str) -> Result<(), Failure> {
    let ok = !topic.is_empty()
        && topic.len() <= 249
        && topic != "."
        && topic != ".."
        && topic.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        err(format!(
            "invalid topic name '{topic}': Kafka allows letters, digits, '.', '_' and '-' (at most 249); \
             pick a --group made of those or pass --topic"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn config(extra: &[&str]) -> Result<Config, Failure> {
        let mut argv = vec!["neli-run", "-g", "billing"];
        argv.extend_from_slice(extra);
        argv.extend_from_slice(&["--", "true"]);
        let cli = Cli::try_parse_from(argv).expect("parses");
        Config::from_args(cli.run, None)
    }

    #[test]
    fn defaults_are_safe_and_derive_topic_and_name() {
        let c = config(&[]).unwrap();
        assert_eq!(c.kafka.topic, "billing.neli");
        assert!(c.name.ends_with(&format!("-{}", std::process::id())));
        assert_eq!(c.session_timeout, Duration::from_secs(6));
        assert_eq!(c.max_poll_interval, Duration::from_secs(12));
        assert_eq!(c.leader.stop_signal, crate::leader::Signal(Signal::SIGTERM as i32));
    }

    #[test]
    fn bad_durations_name_the_flag_and_the_format() {
        // Parsed by clap, which reports it against the flag.
        let e = Cli::try_parse_from(["neli-run", "-g", "g", "--grace", "5 parsecs", "--", "true"]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("'--grace <DURATION>'") && e.contains("parsecs") && e.contains("500ms"), "{e}");
    }

    #[test]
    fn deadline_must_cover_two_heartbeats() {
        let e = config(&["--heartbeat-interval", "2s", "--heartbeat-deadline", "3s"]).unwrap_err();
        assert!(e.message.contains("twice"), "{e}");
    }

    #[test]
    fn deadline_must_fence_before_the_session_expires() {
        let e = config(&["--heartbeat-deadline", "5500ms"]).unwrap_err();
        assert!(e.message.contains("at most 5s 300ms") && e.message.contains("at least 6s 200ms"), "{e}");
        assert!(config(&["--heartbeat-deadline", "5300ms"]).is_ok());
    }

    #[test]
    fn grace_must_end_before_the_session_expires() {
        let e = config(&["--grace", "10s"]).unwrap_err();
        assert!(e.message.contains("--grace") && e.message.contains("at least 10s 700ms"), "{e}");
        assert!(config(&["--grace", "10s", "--session-timeout", "11s"]).is_ok());
    }

    #[test]
    fn coordinator_heartbeat_and_poll_interval_rules() {
        let e = config(&["-X", "heartbeat.interval.ms=3000"]).unwrap_err();
        assert!(e.message.contains("a third"), "{e}");
        let e = config(&["-X", "max.poll.interval.ms=5000"]).unwrap_err();
        assert!(e.message.contains("at least --session-timeout"), "{e}");
        let e = config(&["-X", "max.poll.interval.ms=6000", "--grace", "3s", "--session-timeout", "6s"]);
        assert!(e.is_ok());
    }

    #[test]
    fn properties_owned_by_flags_are_refused() {
        let e = config(&["-X", "group.id=x"]).unwrap_err();
        assert!(e.message.contains("--group"), "{e}");
        let e = config(&["-X", "novalue"]).unwrap_err();
        assert!(e.message.contains("KEY=VALUE"), "{e}");
    }

    #[test]
    fn env_properties_come_first_and_flags_win() {
        let cli = Cli::try_parse_from(["neli-run", "-g", "g", "-X", "client.rack=2", "--", "true"]).unwrap();
        let c = Config::from_args(cli.run, Some("client.rack=1;linger.ms=3;".into())).unwrap();
        assert_eq!(
            c.kafka.properties,
            vec![
                ("client.rack".into(), "1".into()),
                ("linger.ms".into(), "3".into()),
                ("client.rack".into(), "2".into())
            ]
        );
        assert_eq!(c.kafka.origins, vec![Origin::Env(1), Origin::Env(2), Origin::Flag]);
        assert_eq!(c.kafka.origin("client.rack"), "-X");
        assert_eq!(c.kafka.origin("linger.ms"), "NELI_KAFKA_PROPERTIES entry 2");
    }

    #[test]
    fn java_properties_files_are_read_and_translated() {
        let text = "# client.properties\n! also a comment\nbootstrap.servers=k1:9092,\\\n  k2:9092\n\
                    security.protocol = SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n\
                    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
                    username=\"alice\" password=\"s3cret\";\nkey.serializer=org.apache.StringSerializer\n";
        let props: Vec<(String, String)> =
            java_props::parse(text).unwrap().into_iter().map(|e| (e.key, e.value)).collect();
        assert_eq!(props[0], ("bootstrap.servers".into(), "k1:9092,k2:9092".into()));
        assert_eq!(props[1], ("security.protocol".into(), "SASL_SSL".into()));
        assert_eq!(props[2], ("sasl.mechanism".into(), "SCRAM-SHA-512".into()));
        let at = Origin::File { path: "client.properties".into(), line: 7 };
        let jaas = translate_java_property(&props[3].0, props[3].1.clone(), &at).unwrap();
        assert_eq!(jaas, vec![("sasl.username".into(), "alice".into()), ("sasl.password".into(), "s3cret".into())]);
        assert_eq!(translate_java_property(&props[4].0, props[4].1.clone(), &at).unwrap(), vec![]);
        let e = translate_java_property("ssl.truststore.location", "x.jks".into(), &at).unwrap_err();
        assert!(e.message.contains("ssl.ca.location") && e.message.contains("client.properties line 7"), "{e}");
        let e = translate_java_property("group.id", "x".into(), &at).unwrap_err();
        assert!(e.message.contains("--group") && e.message.contains("line 7"), "{e}");
    }

    #[test]
    fn jaas_values_are_read_as_kafka_tokenizes_them() {
        let creds = jaas_credentials;
        let m = "org.apache.kafka.common.security.plain.PlainLoginModule required";
        assert_eq!(
            creds(&format!("{m} username=\"alice\" password=\"a\\\"b\\\\c\";")),
            Some(("alice".into(), "a\"b\\c".into()))
        );
        assert_eq!(creds(&format!("{m} username=bob password='x y';")), Some(("bob".into(), "x y".into())));
        // "username" inside another option's name or value is not the option.
        assert_eq!(
            creds(&format!("{m} xusername=\"no\" username = \"u\" /* c */ password=\"password=\\\"p\";")),
            Some(("u".into(), "password=\"p".into()))
        );
        assert_eq!(creds(&format!("{m} username=\"u\";")), None);
    }

    #[test]
    fn env_list_escapes() {
        assert_eq!(split_env_list("a=1;b=x\\;y;;c=\\\\;"), vec!["a=1", "b=x;y", "c=\\"]);
        assert_eq!(split_env_list("p=a\\b"), vec!["p=a\\b"]);
        assert_eq!(split_env_list(" ; "), Vec::<String>::new());
    }

    #[test]
    fn property_errors_name_the_origin_and_never_the_value() {
        let e = parse_property("novalue-secret", &Origin::Env(2)).unwrap_err();
        assert!(e.message.contains("NELI_KAFKA_PROPERTIES entry 2") && !e.message.contains("novalue-secret"), "{e}");
        let e = parse_property("top secret!", &Origin::Flag).unwrap_err();
        assert!(e.message.contains("-X") && !e.message.contains("secret"), "{e}");
        let e = parse_property("=topsecret", &Origin::Flag).unwrap_err();
        assert!(e.message.contains("-X") && !e.message.contains("topsecret"), "{e}");
        let cli = Cli::try_parse_from(["neli-run", "-g", "g", "--", "true"]).unwrap();
        let e = Config::from_args(cli.run, Some("a=1;pw;with".into())).unwrap_err();
        assert!(e.message.contains("NELI_KAFKA_PROPERTIES entry 2") && !e.message.contains("-X"), "{e}");
        assert!(!e.message.contains("with"), "{e}");
    }

    #[test]
    fn unknown_properties_are_refused_with_a_suggestion_and_no_value() {
        let e = config(&["-X", "sasl.pasword=TOPSECRET"]).unwrap_err();
        assert_eq!(e.kind, Kind::KafkaConfig);
        assert!(e.message.contains("sasl.pasword") && e.message.contains("did you mean sasl.password?"), "{e}");
        assert!(!e.message.contains("TOPSECRET"), "{e}");
        let e = config(&["-X", "security.protocol=bogus"]).unwrap_err();
        assert_eq!(e.kind, Kind::KafkaConfig);
        assert!(e.message.contains("security.protocol") && e.message.contains("-X"), "{e}");
    }

    #[test]
    fn absurd_durations_are_refused_without_overflow() {
        for flag in ["--session-timeout", "--heartbeat-interval", "--heartbeat-deadline", "--grace"] {
            let e = config(&[flag, "10000000000000000000s"]).unwrap_err();
            assert!(e.message.contains(flag) && e.message.contains("at most 30m"), "{e}");
        }
        let e = config(&["--session-timeout", "99999999h"]).unwrap_err();
        assert!(e.message.contains("group.max.session.timeout.ms"), "{e}");
        assert!(config(&["--session-timeout", "30m"]).is_ok());
        let e = config(&["--restart-delay", "10000000000000000000s"]).unwrap_err();
        assert!(e.message.contains("--restart-delay"), "{e}");
        let e = config(&["--acquire-timeout", "10000000000000000000s"]).unwrap_err();
        assert!(e.message.contains("--acquire-timeout"), "{e}");
        let e = config(&["-X", "max.poll.interval.ms=18446744073709551615"]).unwrap_err();
        assert!(e.message.contains("86400000") && !e.message.contains("-1"), "{e}");
        assert_eq!(e.message.lines().count(), 1);
        let e = config(&["-X", "heartbeat.interval.ms=18446744073709551615"]).unwrap_err();
        assert!(e.message.contains("3600000"), "{e}");
        assert_eq!(default_max_poll_interval(Duration::MAX, Duration::MAX), Duration::MAX);
    }

    #[test]
    fn empty_command_is_not_found() {
        let cli = Cli::try_parse_from(["neli-run", "-g", "g", "--", ""]).unwrap();
        let e = Config::from_args(cli.run, None).unwrap_err();
        assert_eq!(e.kind, Kind::NotFound);
        assert!(e.message.contains("empty"), "{e}");
    }

    #[test]
    fn secrets_come_from_files() {
        let dir = std::env::temp_dir().join(format!("neli-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "pa;ss \n").unwrap();
        let (k, v, o) = read_secret(&format!("sasl.password={}", file.display())).unwrap();
        assert_eq!((k.as_str(), v.as_str()), ("sasl.password", "pa;ss "));
        assert_eq!(o, Origin::Secret { path: file.display().to_string() });
        std::fs::write(&file, "two\n\n").unwrap();
        assert_eq!(read_secret(&format!("k={}", file.display())).unwrap().1, "two\n");
        let e = read_secret("sasl.password=/nonexistent/pw").unwrap_err();
        assert!(e.message.contains("sasl.password") && e.message.contains("/nonexistent/pw"), "{e}");
        assert!(read_secret("sasl.password").is_err());
        assert!(read_secret("group.id=/x").unwrap_err().message.contains("--group"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn broker_addresses() {
        assert_eq!(parse_brokers(" a:1, b:2 ", "--brokers").unwrap(), "a:1,b:2");
        assert!(parse_brokers("localhost", "--brokers").is_ok());
        assert!(parse_brokers("SSL://k:9093", "--brokers").is_ok());
        assert!(parse_brokers("[::1]:9092", "--brokers").is_ok());
        assert!(parse_brokers("[::1]", "--brokers").is_ok());
        for bad in ["k:abc", "k:0", ",", ":::", "::1", ":9092", "[::1]x", "[nope]:1", "k:1:2"] {
            let e = parse_brokers(bad, "NELI_BROKERS").unwrap_err();
            assert!(e.message.contains("NELI_BROKERS"), "{bad}: {e}");
        }
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(parse_signal("INT").unwrap(), Signal::SIGINT);
        assert_eq!(parse_signal("sigquit").unwrap(), Signal::SIGQUIT);
        assert_eq!(parse_signal("9").unwrap(), Signal::SIGKILL);
        assert!(parse_signal("SIGNOPE").is_err());
        assert!(parse_signal("99").is_err());
    }

    #[test]
    fn stop_signals_that_cannot_stop_are_refused() {
        for sig in ["STOP", "KILL", "CHLD", "CONT", "WINCH", "URG", "TSTP", "TTIN", "TTOU", "9"] {
            let e = stop_signal(sig).unwrap_err();
            assert!(e.message.contains("SIGTERM"), "{sig}: {e}");
        }
        for sig in ["TERM", "INT", "QUIT", "HUP", "USR1", "USR2"] {
            assert!(stop_signal(sig).is_ok(), "{sig}");
        }
    }

    #[test]
    fn topic_names() {
        assert!(check_topic_name("billing.neli").is_ok());
        assert!(check_topic_name("bad name").is_err());
        assert!(check_topic_name("..").is_err());
    }
}
