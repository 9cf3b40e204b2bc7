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

use std::ffi::OsString;
use std::time::Duration;

use nix::sys::signal::Signal;
use thiserror::Error;

use crate::cli::{KafkaArgs, RunArgs};
use crate::leader::Settings;

/// Slack for the timer, the kill and the scheduler in every inequality.
pub const MARGIN: Duration = Duration::from_millis(500);
/// Added to --heartbeat-interval for how long a new owner watches partition
/// 0 before leading: the fetch that reads another claimant's heartbeat.
pub const OBSERVE_SLACK: Duration = Duration::from_millis(250);
/// Coordinator heartbeat interval unless `-X heartbeat.interval.ms` says
/// otherwise. Short, because standbys learn of a leader leaving only at their
/// next coordinator heartbeat: it bounds graceful handover.
pub const DEFAULT_COORDINATOR_HEARTBEAT: Duration = Duration::from_millis(500);
/// `max.poll.interval.ms` unless set with -X: Kafka's rebalance timeout,
/// which is also how long librdkafka waits for a JoinGroup answer. Its
/// default of 5 minutes left members stuck that long after a broker pause
/// (found by neli-soak); the consumer thread polls every 100 ms and blocks
/// at most for the revoke barrier, so a short one is safe.
pub fn default_max_poll_interval(session: Duration, grace: Duration) -> Duration {
    (2 * session).max(session + grace + MARGIN)
}

/// Properties that have a flag of their own; setting them with -X would let
/// the two disagree.
const OWNED_PROPERTIES: [(&str, &str); 4] = [
    ("bootstrap.servers", "--brokers"),
    ("group.id", "--group"),
    ("session.timeout.ms", "--session-timeout"),
    ("client.id", "--name"),
];

/// A configuration the user must fix; exits with status 2.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
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
    pub fn from_args(args: RunArgs, env_properties: Option<String>) -> Result<Config, ConfigError> {
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
        let property = |key: &str| kafka.properties.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let coordinator_heartbeat = match property("heartbeat.interval.ms") {
            Some(v) => millis_property("heartbeat.interval.ms", v)?,
            None => DEFAULT_COORDINATOR_HEARTBEAT,
        };

        let session_timeout = duration("--session-timeout", &args.session_timeout)?;
        let heartbeat_interval = duration("--heartbeat-interval", &args.heartbeat_interval)?;
        let leader = Settings {
            resume_window: session_timeout.saturating_sub(coordinator_heartbeat + MARGIN),
            // One heartbeat of another claimant, and the fetch that reads it.
            observe: heartbeat_interval + OBSERVE_SLACK,
            claim_margin: MARGIN,
            heartbeat_interval,
            heartbeat_deadline: duration("--heartbeat-deadline", &args.heartbeat_deadline)?,
            grace: duration("--grace", &args.grace)?,
            stop_signal: parse_signal(&args.stop_signal)?,
            restart: args.restart,
            restart_delay: duration("--restart-delay", &args.restart_delay)?,
            acquire_timeout: args.acquire_timeout.as_deref().map(|v| duration("--acquire-timeout", v)).transpose()?,
        };
        let max_poll_interval = match property("max.poll.interval.ms") {
            Some(v) => millis_property("max.poll.interval.ms", v)?,
            None => default_max_poll_interval(session_timeout, leader.grace),
        };
        let metrics_addr = match args.metrics_addr.as_deref() {
            None => None,
            Some(addr) => match std::net::ToSocketAddrs::to_socket_addrs(addr).map(|mut a| a.next()) {
                Ok(Some(addr)) => Some(addr),
                _ => return err(format!("--metrics-addr '{addr}': expected HOST:PORT, e.g. 0.0.0.0:9464")),
            },
        };
        let Some((program, rest)) = args.command.split_first() else {
            return err("no command given: neli-run [OPTIONS] -- COMMAND [ARGS]...");
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

    /// The safety inequalities of the module doc.
    fn check_timing(&self) -> Result<(), ConfigError> {
        let s = &self.leader;
        let session = self.session_timeout;
        let hb = self.coordinator_heartbeat;
        let d = |d: Duration| humantime::format_duration(d).to_string();
        if s.heartbeat_interval.is_zero() {
            return err("--heartbeat-interval must be more than 0");
        }
        if s.heartbeat_deadline < 2 * s.heartbeat_interval {
            return err(format!(
                "unsafe timing: --heartbeat-deadline {} is less than twice --heartbeat-interval {}, so one late \
                 heartbeat would fence a healthy leader. Raise --heartbeat-deadline to at least {} or lower \
                 --heartbeat-interval to at most {}.",
                d(s.heartbeat_deadline),
                d(s.heartbeat_interval),
                d(2 * s.heartbeat_interval),
                d(s.heartbeat_deadline / 2)
            ));
        }
        if 3 * hb > session {
            return err(format!(
                "unsafe timing: the coordinator heartbeat (heartbeat.interval.ms) {} must be at most a third of \
                 --session-timeout {}. Lower -X heartbeat.interval.ms or raise --session-timeout to at least {}.",
                d(hb),
                d(session),
                d(3 * hb)
            ));
        }
        let budget = session.saturating_sub(hb + MARGIN);
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
                d(s.heartbeat_deadline + hb + MARGIN)
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
                d(s.grace + hb + MARGIN)
            ));
        }
        if session > self.max_poll_interval {
            return err(format!(
                "max.poll.interval.ms {} must be at least --session-timeout {} (librdkafka's rule).",
                d(self.max_poll_interval),
                d(session)
            ));
        }
        if s.grace + MARGIN > self.max_poll_interval {
            return err(format!(
                "unsafe timing: --grace {} + margin {} exceeds the rebalance timeout (max.poll.interval.ms {}). \
                 Raise -X max.poll.interval.ms to at least {}.",
                d(s.grace),
                d(MARGIN),
                d(self.max_poll_interval),
                (s.grace + MARGIN).as_millis()
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
    /// then -X: later ones win.
    pub properties: Vec<(String, String)>,
}

impl Target {
    /// Checks `args`; `env_properties` is NELI_KAFKA_PROPERTIES, if set.
    pub fn from_args(args: KafkaArgs, env_properties: Option<String>) -> Result<Target, ConfigError> {
        let group = args.group.unwrap_or_default();
        if group.is_empty() {
            return err("--group must not be empty");
        }
        let topic = args.topic.unwrap_or_else(|| format!("{group}.neli"));
        check_topic_name(&topic)?;
        let mut properties = Vec::new();
        let mut file_brokers = None;
        if let Some(path) = &args.kafka_config {
            let text = std::fs::read_to_string(path)
                .or_else(|e| err(format!("--kafka-config {}: cannot read it ({e})", path.display())))?;
            for (key, value) in java_properties(&text) {
                match key.as_str() {
                    "bootstrap.servers" => file_brokers = Some(value),
                    _ => properties.extend(translate_java_property(&key, value, path)?),
                }
            }
        }
        let brokers = args.brokers.or(file_brokers).unwrap_or_else(|| "localhost:9092".into());
        let brokers = parse_brokers(&brokers)?;
        let from_env = env_properties.iter().flat_map(|s| s.split(';')).filter(|s| !s.trim().is_empty());
        for prop in from_env.chain(args.kafka_properties.iter().map(String::as_str)) {
            properties.push(parse_property(prop)?);
        }
        Ok(Target { brokers, group, topic, properties })
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

/// Reads Java's `.properties` format: `key=value`, `key: value` or
/// `key value`; `#` and `!` comments; a trailing `\` continues the line.
fn java_properties(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut logical = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) if !head.ends_with('\\') => {
                logical.push_str(head);
                continue;
            }
            _ => logical.push_str(line),
        }
        let entry = std::mem::take(&mut logical);
        let split = entry.find(['=', ':', ' ', '\t']).unwrap_or(entry.len());
        let key = entry[..split].trim().to_string();
        let rest = entry[split..].trim_start();
        let value = rest.strip_prefix(['=', ':']).unwrap_or(rest).trim().to_string();
        out.push((key, value.replace("\\:", ":").replace("\\=", "=").replace("\\\\", "\\")));
    }
    out
}

/// Maps a Java client property to librdkafka's, where they differ.
fn translate_java_property(
    key: &str,
    value: String,
    file: &std::path::Path,
) -> Result<Vec<(String, String)>, ConfigError> {
    let at = file.display();
    match key {
        // Java's way to give SASL credentials.
        "sasl.jaas.config" => {
            let field = |name: &str| {
                let start = value.find(&format!("{name}=\""))? + name.len() + 2;
                let len = value[start..].find('"')?;
                Some(value[start..start + len].to_string())
            };
            match (field("username"), field("password")) {
                (Some(user), Some(password)) => {
                    Ok(vec![("sasl.username".into(), user), ("sasl.password".into(), password)])
                }
                _ => err(format!(
                    "--kafka-config {at}: sasl.jaas.config has no username=\"...\" password=\"...\"; for \
                     Kerberos or OAuth set librdkafka's sasl.* properties instead"
                )),
            }
        }
        "ssl.truststore.location" | "ssl.truststore.password" | "ssl.truststore.type" => err(format!(
            "--kafka-config {at}: {key} (a Java truststore) is not supported by librdkafka; export the CA \
             certificate as PEM (keytool -exportcert -rfc) and set ssl.ca.location"
        )),
        // Java-only settings that have no meaning here.
        k if k.ends_with(".serializer") || k.ends_with(".deserializer") || k.ends_with(".class") => Ok(vec![]),
        _ => Ok(vec![parse_property(&format!("{key}={value}"))
            .map_err(|e| ConfigError(format!("--kafka-config {at}: {}", e.0.trim_start_matches("-X "))))?]),
    }
}

/// Parses a humantime duration ("500ms", "6s", "1m 30s").
fn duration(flag: &str, value: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(value.trim()).or_else(|e| {
        err(format!("invalid duration for {flag}: '{value}' ({e}); use a number with a unit, e.g. 500ms, 6s, 1m"))
    })
}

fn millis_property(key: &str, value: &str) -> Result<Duration, ConfigError> {
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => err(format!("-X {key}={value}: expected a positive number of milliseconds")),
    }
}

fn parse_property(prop: &str) -> Result<(String, String), ConfigError> {
    let Some((key, value)) = prop.split_once('=') else {
        return err(format!("-X {prop}: expected KEY=VALUE, e.g. -X security.protocol=SSL"));
    };
    let key = key.trim();
    if key.is_empty() {
        return err(format!("-X {prop}: the key is empty"));
    }
    if let Some((_, flag)) = OWNED_PROPERTIES.iter().find(|(k, _)| *k == key) {
        return err(format!("-X {key} is set by {flag}; use that flag instead"));
    }
    Ok((key.to_string(), value.to_string()))
}

/// Accepts "TERM", "SIGTERM", "sigterm" or "15".
pub fn parse_signal(value: &str) -> Result<Signal, ConfigError> {
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

/// Checks "host:port,host:port" (an optional `scheme://` is allowed).
fn parse_brokers(value: &str) -> Result<String, ConfigError> {
    let entries: Vec<&str> = value.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    if entries.is_empty() {
        return err("--brokers is empty; give HOST:PORT, e.g. localhost:9092");
    }
    for entry in &entries {
        let addr = entry.split_once("://").map_or(*entry, |(_, a)| a);
        let (host, port) = match addr.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') || host.starts_with('[') => (host, Some(port)),
            _ => (addr, None),
        };
        let host_ok = !host.is_empty() && !host.contains(char::is_whitespace) && !host.contains('/');
        let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
        if !host_ok || !port_ok {
            return err(format!("bad broker address '{entry}' in --brokers: expected HOST:PORT, e.g. localhost:9092"));
        }
    }
    Ok(entries.join(","))
}

/// Kafka's topic name rules, checked early for a clear message.
fn check_topic_name(topic: &str) -> Result<(), ConfigError> {
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

    fn config(extra: &[&str]) -> Result<Config, ConfigError> {
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
        assert_eq!(c.leader.stop_signal, Signal::SIGTERM);
    }

    #[test]
    fn bad_durations_name_the_flag_and_the_format() {
        let e = config(&["--grace", "5 parsecs"]).unwrap_err();
        assert!(e.0.contains("--grace") && e.0.contains("500ms"), "{e}");
    }

    #[test]
    fn deadline_must_cover_two_heartbeats() {
        let e = config(&["--heartbeat-interval", "2s", "--heartbeat-deadline", "3s"]).unwrap_err();
        assert!(e.0.contains("twice"), "{e}");
    }

    #[test]
    fn deadline_must_fence_before_the_session_expires() {
        let e = config(&["--heartbeat-deadline", "5500ms"]).unwrap_err();
        assert!(e.0.contains("at most 5s") && e.0.contains("at least 6s 500ms"), "{e}");
        assert!(config(&["--heartbeat-deadline", "5s"]).is_ok());
    }

    #[test]
    fn grace_must_end_before_the_session_expires() {
        let e = config(&["--grace", "10s"]).unwrap_err();
        assert!(e.0.contains("--grace") && e.0.contains("at least 11s"), "{e}");
        assert!(config(&["--grace", "10s", "--session-timeout", "11s"]).is_ok());
    }

    #[test]
    fn coordinator_heartbeat_and_poll_interval_rules() {
        let e = config(&["-X", "heartbeat.interval.ms=3000"]).unwrap_err();
        assert!(e.0.contains("a third"), "{e}");
        let e = config(&["-X", "max.poll.interval.ms=5000"]).unwrap_err();
        assert!(e.0.contains("at least --session-timeout"), "{e}");
        let e = config(&["-X", "max.poll.interval.ms=6000", "--grace", "3s", "--session-timeout", "6s"]);
        assert!(e.is_ok());
    }

    #[test]
    fn properties_owned_by_flags_are_refused() {
        let e = config(&["-X", "group.id=x"]).unwrap_err();
        assert!(e.0.contains("--group"), "{e}");
        let e = config(&["-X", "novalue"]).unwrap_err();
        assert!(e.0.contains("KEY=VALUE"), "{e}");
    }

    #[test]
    fn env_properties_come_first_and_flags_win() {
        let cli = Cli::try_parse_from(["neli-run", "-g", "g", "-X", "a=2", "--", "true"]).unwrap();
        let c = Config::from_args(cli.run, Some("a=1;b=3;".into())).unwrap();
        assert_eq!(
            c.kafka.properties,
            vec![("a".into(), "1".into()), ("b".into(), "3".into()), ("a".into(), "2".into())]
        );
    }

    #[test]
    fn java_properties_files_are_read_and_translated() {
        let text = "# client.properties\n! also a comment\nbootstrap.servers=k1:9092,\\\n  k2:9092\n\
                    security.protocol = SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n\
                    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
                    username=\"alice\" password=\"s3cret\";\nkey.serializer=org.apache.StringSerializer\n";
        let props = java_properties(text);
        assert_eq!(props[0], ("bootstrap.servers".into(), "k1:9092,k2:9092".into()));
        assert_eq!(props[1], ("security.protocol".into(), "SASL_SSL".into()));
        assert_eq!(props[2], ("sasl.mechanism".into(), "SCRAM-SHA-512".into()));
        let path = std::path::Path::new("client.properties");
        let jaas = translate_java_property(&props[3].0, props[3].1.clone(), path).unwrap();
        assert_eq!(jaas, vec![("sasl.username".into(), "alice".into()), ("sasl.password".into(), "s3cret".into())]);
        assert_eq!(translate_java_property(&props[4].0, props[4].1.clone(), path).unwrap(), vec![]);
        let e = translate_java_property("ssl.truststore.location", "x.jks".into(), path).unwrap_err();
        assert!(e.0.contains("ssl.ca.location"), "{e}");
        let e = translate_java_property("group.id", "x".into(), path).unwrap_err();
        assert!(e.0.contains("--group"), "{e}");
    }

    #[test]
    fn broker_addresses() {
        assert_eq!(parse_brokers(" a:1, b:2 ").unwrap(), "a:1,b:2");
        assert!(parse_brokers("localhost").is_ok());
        assert!(parse_brokers("SSL://k:9093").is_ok());
        assert!(parse_brokers("[::1]:9092").is_ok());
        assert!(parse_brokers("k:abc").is_err());
        assert!(parse_brokers("k:0").is_err());
        assert!(parse_brokers(",").is_err());
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
    fn topic_names() {
        assert!(check_topic_name("billing.neli").is_ok());
        assert!(check_topic_name("bad name").is_err());
        assert!(check_topic_name("..").is_err());
    }
}
