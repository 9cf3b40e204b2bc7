//! How to reach the group's topic: the options running a command and every
//! subcommand but `dev-broker` share.

use clap::Args;

/// How to reach the group's topic (shared by running and `status`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Kafka")]
pub struct KafkaArgs {
    /// Kafka bootstrap brokers, comma-separated [default: the
    /// --kafka-config file's bootstrap.servers, or localhost:9092].
    #[arg(short, long, env = "NELI_BROKERS", value_name = "HOST:PORT,...")]
    pub brokers: Option<String>,

    /// A Java-style client properties file (the client.properties Kafka
    /// users already have): security.protocol, sasl.mechanism,
    /// sasl.jaas.config, ssl.ca.location ... Merged under -X.
    ///
    /// Read as Java reads it (escapes, continuation lines, trailing spaces
    /// kept). The place for secrets: keep it mode 600 (neli-run warns when
    /// a file holding a password is readable by group or others).
    #[arg(long, env = "NELI_KAFKA_CONFIG", value_name = "FILE")]
    pub kafka_config: Option<std::path::PathBuf>,

    /// Set the Kafka property KEY to the contents of the file PATH, less
    /// one trailing newline (repeatable), e.g. sasl.password=PATH.
    ///
    /// Keeps a secret off the command line. Made for systemd's
    /// LoadCredential=: --kafka-secret
    /// sasl.password=${CREDENTIALS_DIRECTORY}/kafka-password. The
    /// environment variable takes a ','- or ';'-separated list.
    #[arg(long = "kafka-secret", env = "NELI_KAFKA_SECRETS", value_name = "KEY=PATH", value_delimiter = ',')]
    pub kafka_secrets: Vec<String>,

    /// The group: members of the same group elect one leader among them.
    #[arg(short, long, env = "NELI_GROUP", required = true)]
    pub group: Option<String>,

    /// Topic for heartbeats [default: <GROUP>.neli].
    ///
    /// Created with one partition and one hour of retention if missing.
    #[arg(long, env = "NELI_TOPIC")]
    pub topic: Option<String>,

    /// A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; not for secrets).
    ///
    /// How TLS, SASL and tuning are set. Not for secrets: every local user
    /// can read a command line (/proc/PID/cmdline); put sasl.password and
    /// other secrets in a --kafka-config file of mode 600, in a
    /// --kafka-secret file, or in the environment. The environment variable
    /// NELI_KAFKA_PROPERTIES takes a ';'-separated list (write a ';' inside
    /// a value as \; and a backslash as \\); -X wins over it.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub kafka_properties: Vec<String>,
}
