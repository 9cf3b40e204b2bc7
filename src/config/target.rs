//! Where a group's topic is, and how to reach it: the brokers, the group and
//! topic names, and the Kafka properties from -X, NELI_KAFKA_PROPERTIES,
//! --kafka-config and --kafka-secret, each with its origin for messages that
//! never show a value.

use std::path::Path;

use rdkafka::error::KafkaError;

use super::java_props::{self, translate_java_property};
use super::properties::{checked_property, not_settable, rejected_property, Origin};
use super::{err, millis_property, MAX_COORDINATOR_HEARTBEAT_MS, MAX_POLL_INTERVAL_MS};
use crate::cli::KafkaArgs;
use crate::exit::{Failure, Kind};

/// Properties whose value is a secret (librdkafka's sensitive ones less
/// those that hold a name, a path or a public certificate, plus Java's
/// sasl.jaas.config): a --kafka-config file holding one should be readable
/// by its owner only, and -X shows one to every local user.
const SECRET_KEYS: [&str; 9] = [
    "sasl.password",
    "sasl.jaas.config",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
];

/// Why a client could not be created, naming the property and where it came
/// from, never its value (`status` and `yield` say it the same way).
pub(crate) fn creation_error(err: KafkaError, target: &Target) -> Failure {
    let origin = match &err {
        KafkaError::ClientConfig(_, _, key, _) => target.origin(key),
        _ => "-X, --kafka-config, --kafka-secret or NELI_KAFKA_PROPERTIES".into(),
    };
    Failure::new(
        Kind::KafkaConfig,
        format!("Kafka client configuration rejected: {}", rejected_property(&err, &origin)),
    )
}

/// Names a flag the way the user gave it: its environment variable when the
/// value came from there.
pub(super) fn given_as<'a>(flag: &'a str, env: &'a str, value: &str) -> &'a str {
    match std::env::var(env) {
        Ok(v) if v == value => env,
        _ => flag,
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
                if SECRET_KEYS.contains(&entry.key.as_str()) && !secrets.contains(&entry.key) {
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
        let mut exposed = Vec::new();
        for prop in &args.kafka_properties {
            let (k, v) = parse_property(prop, &Origin::Flag)?;
            if SECRET_KEYS.contains(&k.as_str()) && !exposed.contains(&k) {
                exposed.push(k.clone());
            }
            properties.push((k, v, Origin::Flag));
        }
        warn_if_on_the_command_line(&exposed);
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
                let why = rejected_property(&e, &origin.to_string());
                return Err(Failure::new(Kind::KafkaConfig, format!("Kafka client configuration rejected: {why}")));
            }
        }
        let (properties, origins) = uncompressed(properties).into_iter().map(|(k, v, o)| ((k, v), o)).unzip();
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
        // A new client that has just dropped its bootstrap connection for
        // the real broker waits reconnect.backoff.ms / 2 (at least 11 ms)
        // before it may connect again: at librdkafka's 100 ms, a member
        // started against an existing topic wrote its first heartbeat up to
        // 50 ms late (docs/proof.md, "Startup").
        config.set("reconnect.backoff.ms", "10");
        for (k, v) in ours.iter().copied().chain(self.properties.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
            config.set(k, v);
        }
        config
    }
}

/// The most a `--kafka-config` or `--kafka-secret` file holds (a client's
/// properties and a PEM chain are a few KiB): read with this bound, a link
/// to /dev/zero cannot eat the host's memory. A pipe (`<(vault ...)`) is
/// still taken.
const MAX_FILE: u64 = 1024 * 1024;

/// A `--kafka-config` or `--kafka-secret` file's bytes, at most `MAX_FILE`.
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    crate::files::read_at_most(file, MAX_FILE).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => std::io::Error::new(
            e.kind(),
            format!("over {MAX_FILE} bytes (1 MiB), more than a client's configuration holds: is it the right file?"),
        ),
        _ => e,
    })
}

/// Reads a --kafka-config file: UTF-8, or ISO-8859-1 (what Java's
/// `Properties.load` reads) when it is not valid UTF-8.
fn read_kafka_config(path: &Path) -> Result<Vec<java_props::Entry>, Failure> {
    let at = path.display();
    let bytes = read_bounded(path).or_else(|e| err(format!("--kafka-config {at}: cannot read it ({e})")))?;
    let text = String::from_utf8(bytes).unwrap_or_else(|e| e.into_bytes().iter().map(|&b| char::from(b)).collect());
    java_props::parse(&text).map_err(|m| {
        let key = m.key.map(|k| format!(" in the value of {}", k.escape_debug())).unwrap_or_else(|| " in a key".into());
        Failure::new(Kind::Usage, format!("--kafka-config {at} line {}: {}{key}", m.line, m.reason))
    })
}

/// librdkafka's names for a producer's codec (the second is the first's
/// alias).
const COMPRESSION_KEYS: [&str; 2] = ["compression.type", "compression.codec"];

/// `properties` less any compression, with a warning naming where it came
/// from: a wake, a call to a cold standby and a drain are padded to the size
/// that ends a watcher's waiting fetch (`fetch.min.bytes` counts the bytes
/// stored, compressed), so compressed they would be heard only at the
/// fetch's wait end, seconds late. neli-run's records are a few hundred
/// bytes: compressing them saves nothing. Not refused: a file copied from a
/// Java producer often sets it, and nothing else is wrong with it.
fn uncompressed(properties: Vec<(String, String, Origin)>) -> Vec<(String, String, Origin)> {
    let (dropped, kept): (Vec<_>, Vec<_>) =
        properties.into_iter().partition(|(k, _, _)| COMPRESSION_KEYS.contains(&k.as_str()));
    for (k, v, origin) in &dropped {
        tracing::warn!(
            "{origin}: {k}={v} is not used: neli-run writes its records uncompressed (a wake and a call to a cold \
             standby are sized to end a standby's waiting fetch, and compressed they would be heard seconds late); \
             remove it"
        );
    }
    kept
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

/// Warns (once, not fatal) when -X gave secrets, which every local user can
/// read on neli-run's command line; names the keys, never a value.
fn warn_if_on_the_command_line(secrets: &[String]) {
    if !secrets.is_empty() {
        tracing::warn!(
            "-X {}: every local user can read neli-run's command line (/proc/PID/cmdline, ps); put secrets in \
             a --kafka-secret KEY=PATH file (NELI_KAFKA_SECRETS, systemd's LoadCredential=), a --kafka-config \
             file of mode 600, or NELI_KAFKA_PROPERTIES",
            secrets.join(", -X ")
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
    if let Some(why) = not_settable(key, "--kafka-secret") {
        return err(why);
    }
    let bytes =
        read_bounded(Path::new(path)).or_else(|e| err(format!("--kafka-secret {key}={path}: cannot read it ({e})")))?;
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

/// NELI_KAFKA_PROPERTIES, if set. A value that is not UTF-8 is refused,
/// naming the variable and the entry, never the value (a password may be
/// in it): read as unset, it once dropped the whole list without a word,
/// and with it the SASL and TLS settings (audit E6).
pub fn env_properties() -> Result<Option<String>, Failure> {
    env_properties_of(std::env::var_os("NELI_KAFKA_PROPERTIES"))
}

fn env_properties_of(raw: Option<std::ffi::OsString>) -> Result<Option<String>, Failure> {
    use std::os::unix::ffi::OsStrExt as _;
    let Some(raw) = raw else { return Ok(None) };
    let bytes = raw.as_bytes();
    let Err(bad) = std::str::from_utf8(bytes) else { return Ok(raw.into_string().ok()) };
    // The valid text before the first bad byte, and a stand-in for it: the
    // entry the stand-in ends up in is the one that holds the byte.
    let before = std::str::from_utf8(&bytes[..bad.valid_up_to()]).unwrap_or_default();
    let entry = split_env_list(&format!("{before}x")).len();
    err(format!(
        "NELI_KAFKA_PROPERTIES entry {entry} is not valid UTF-8 (a byte at {}): write it as UTF-8 \
         (the value is not shown: it may hold a secret)",
        bad.valid_up_to() + 1
    ))
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
    use crate::config::Config;
    use clap::Parser;

    #[test]
    fn env_properties_not_utf8_are_refused_by_entry_never_shown() {
        use std::os::unix::ffi::OsStringExt as _;
        let of = |bytes: &[u8]| env_properties_of(Some(std::ffi::OsString::from_vec(bytes.to_vec())));
        assert_eq!(of(b"a=1;b=2").unwrap().as_deref(), Some("a=1;b=2"));
        assert_eq!(env_properties_of(None).unwrap(), None);
        let e = of(b"security.protocol=SASL_PLAINTEXT;sasl.username=u;sasl.password=p\xe9ss").unwrap_err();
        assert_eq!(e.kind, Kind::Usage);
        assert!(e.message.starts_with("NELI_KAFKA_PROPERTIES entry 3 is not valid UTF-8"), "{e}");
        assert!(!e.message.contains("sasl") && !e.message.contains("ss"), "nothing of the value shown: {e}");
        assert!(of(b"\xff").unwrap_err().message.contains("entry 1 "));
        assert!(of(b"a=x\\;y\xff;b=1").unwrap_err().message.contains("entry 1 "), "an escaped ';' splits nothing");
        assert!(of(b";;a=1;\xff").unwrap_err().message.contains("entry 2 "), "blank entries do not count");
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
    fn topic_names() {
        assert!(check_topic_name("billing.neli").is_ok());
        assert!(check_topic_name("bad name").is_err());
        assert!(check_topic_name("..").is_err());
    }
}
