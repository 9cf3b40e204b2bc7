//! The command line as the user types it: clap definitions only, no side
//! effects. `config` turns these raw values into a checked `Config`; the
//! man page and shell completions are generated from this file.

use std::ffi::OsString;

use clap::{Args, Parser, Subcommand};

use crate::leader::{Missed, Restart};

/// Run a command on exactly one machine of a group, elected through Kafka.
///
/// Every machine runs the same `neli-run --group G -- COMMAND`. They all join
/// the Kafka consumer group G on the topic `G.neli`; the member that Kafka
/// assigns partition 0 becomes leader once it reads its own heartbeat back
/// from that partition, and only the leader runs COMMAND. The others wait as
/// hot standbys and take over when the leader stops, crashes or loses Kafka.
///
/// COMMAND gets NELI_GROUP, NELI_TOPIC, NELI_NAME and NELI_FENCING_TOKEN (a
/// number that grows with every new leadership: pass it to the systems the
/// command writes to, so they can refuse a deposed leader).
///
/// From cron, the same line on every host runs COMMAND once per tick, not
/// once per host: with --restart never (the default), members started
/// together (--once-within) exit with the status of the run one of them
/// made, and run it again only if that run never ended (NELI_ATTEMPT).
///
/// As a service on every host, --every 5m or --cron "30 2 * * *" keep a
/// schedule instead: the leader runs COMMAND at each due time (NELI_DUE),
/// and a new leader neither repeats a run that ended nor forgets one that
/// was due (--missed).
///
/// Try it without Kafka: `neli-run dev-broker` in one terminal, then
/// `neli-run -g demo -- sh -c 'echo leading; sleep 30'` in two others.
#[derive(Debug, Parser)]
#[command(
    name = "neli-run",
    version,
    subcommand_negates_reqs = true,
    args_override_self = true,
    subcommand_value_name = "SUBCOMMAND",
    subcommand_help_heading = "Subcommands"
)]
pub struct Cli {
    #[command(subcommand)]
    pub subcommand: Option<Sub>,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub log: LogArgs,
}

impl Cli {
    /// Parses `argv`. `--version` and `-V` name the build (`build_version`),
    /// set here rather than in the derive so that the man page keeps the plain
    /// version; so are the exit statuses `--help` lists (`exit::STATUSES`).
    /// Logging flags may come before a subcommand (`neli-run -v status`);
    /// the options of running a command may not, since the subcommand would
    /// ignore them.
    ///
    /// The options that cannot go together (the definition's
    /// `conflicts_with`) or need another (`NEEDS`) are checked here rather
    /// than by clap, knowing where each value came from: clap would name
    /// `--restart` for NELI_RESTART, and count NELI_WARM=false as --warm.
    /// With --never-lead, the options it has no use for are ignored when they
    /// come from the environment (one EnvironmentFile for the hosts that lead
    /// and those that never do), refused when given on the command line.
    pub fn parse_argv(argv: &[OsString]) -> Result<Cli, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let mut command = with_exit_statuses(Cli::command().version(build_version().leak() as &'static str));
        let conflicts = conflicts(&command);
        for (id, _) in &conflicts {
            command = command.mut_arg(id, |a| a.conflicts_with(clap::builder::Resettable::Reset));
        }
        let lenient = |c: &clap::Command| c.clone().ignore_errors(true).try_get_matches_from(argv).ok();
        let mut ignored = Vec::new();
        if let Some(matches) = lenient(&command).filter(|m| m.subcommand().is_none()) {
            if matches!(matches.try_get_one::<bool>("never_lead"), Ok(Some(true))) {
                let unused: Vec<&str> =
                    conflicts.iter().filter(|(a, _)| a == "never_lead").map(|(_, b)| b.as_str()).collect();
                for arg in command.get_arguments().filter(|a| unused.contains(&a.get_id().as_str())) {
                    if is_set(&matches, arg) && matches.value_source(arg.get_id().as_str()) == Some(Env) {
                        ignored.extend(arg.get_env().map(|v| v.to_string_lossy().into_owned()));
                    }
                }
                for arg in unused {
                    command = command.mut_arg(arg, |a| a.env(None));
                }
            }
        }
        if let Some(matches) = lenient(&command) {
            related(&command, &matches, &conflicts)?;
        }
        let matches = command.try_get_matches_from_mut(argv).map_err(|err| name_the_variable(err, &command, argv))?;
        if let Some((sub, _)) = matches.subcommand() {
            let misplaced = command
                .get_arguments()
                .filter(|a| !a.is_global_set())
                .find(|a| matches.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine));
            if let Some(arg) = misplaced {
                let flag = arg.get_long().map_or_else(|| arg.get_id().to_string(), |l| format!("--{l}"));
                return Err(command.error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!("{flag} before '{sub}' is an option of running a command; put it after '{sub}' if '{sub}' takes it (neli-run {sub} --help)"),
                ));
            }
        }
        let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))?;
        cli.run.from_env = FromEnv(
            command
                .get_arguments()
                .filter(|a| matches.value_source(a.get_id().as_str()) == Some(Env))
                .filter_map(|a| Some((format!("--{}", a.get_long()?), given(a, &matches))))
                .collect(),
        );
        cli.run.ignored = ignored;
        Ok(cli)
    }
}

use clap::parser::ValueSource::EnvVariable as Env;

/// The pairs of options that cannot go together, as the definition
/// declares them (`conflicts_with`: --never-lead's list is what a member
/// that never leads has no use for).
fn conflicts(command: &clap::Command) -> Vec<(String, String)> {
    let pairs = command.get_arguments().flat_map(|a| {
        command.get_arg_conflicts_with(a).into_iter().map(|b| (a.get_id().to_string(), b.get_id().to_string()))
    });
    pairs.collect()
}

/// Options that mean nothing without another (clap's `requires`, which
/// has no getter, so listed here).
const NEEDS: [(&str, &str); 5] = [
    ("lead_signal", "warm"),
    ("unlead_signal", "warm"),
    ("health_interval", "health_cmd"),
    ("health_timeout", "health_cmd"),
    ("health_retries", "health_cmd"),
];

/// Whether the user set `arg` (on the command line or in the environment):
/// a flag set to false in the environment is not set.
fn is_set(matches: &clap::ArgMatches, arg: &clap::Arg) -> bool {
    use clap::parser::ValueSource::CommandLine;
    let id = arg.get_id().as_str();
    if !matches!(matches.value_source(id), Some(CommandLine | Env)) {
        return false;
    }
    // Not get_flag: a parse that stopped at an error may hold no value.
    match arg.get_action() {
        clap::ArgAction::SetTrue => matches!(matches.try_get_one::<bool>(id), Ok(Some(true))),
        clap::ArgAction::Count => matches!(matches.try_get_one::<u8>(id), Ok(Some(n)) if *n > 0),
        _ => true,
    }
}

/// `arg` as the user gave it: `'--restart <RESTART>'`, or
/// `NELI_RESTART=always (from the environment)`.
fn given(arg: &clap::Arg, matches: &clap::ArgMatches) -> String {
    match (matches.value_source(arg.get_id().as_str()), arg.get_env()) {
        (Some(Env), Some(var)) => {
            let value = std::env::var_os(var).unwrap_or_default();
            format!("{}={} (from the environment)", var.to_string_lossy(), value.to_string_lossy())
        }
        _ => format!("'{}'", flag(arg)),
    }
}

/// `given`, at the start of a message: "the argument '--restart
/// <RESTART>'", as clap says it.
fn subject(arg: &clap::Arg, matches: &clap::ArgMatches) -> String {
    match given(arg, matches) {
        flag if flag.starts_with('\'') => format!("the argument {flag}"),
        from_env => from_env,
    }
}

/// `--restart <RESTART>`, as clap names an option in its messages.
fn flag(arg: &clap::Arg) -> String {
    let name = arg.get_long().map_or_else(|| arg.get_id().to_string(), |l| format!("--{l}"));
    match (arg.get_action().takes_values(), arg.get_value_names()) {
        (true, Some([value, ..])) => format!("{name} <{value}>"),
        (true, _) => format!("{name} <{}>", arg.get_id().as_str().to_uppercase()),
        (false, _) => name,
    }
}

/// Refuses options of `command` that cannot go together or lack the option
/// they need, naming each as the user gave it.
fn related(
    command: &clap::Command,
    matches: &clap::ArgMatches,
    conflicts: &[(String, String)],
) -> Result<(), clap::Error> {
    use clap::error::ErrorKind;
    let arg = |id: &str| command.get_arguments().find(|a| a.get_id() == id);
    for (a, b) in conflicts {
        let (Some(a), Some(b)) = (arg(a), arg(b)) else { continue };
        if is_set(matches, a) && is_set(matches, b) {
            let conflict = format!("{} cannot be used with {}", subject(a, matches), given(b, matches));
            return Err(command.clone().error(ErrorKind::ArgumentConflict, conflict));
        }
    }
    for (a, b) in NEEDS {
        let (Some(a), Some(b)) = (arg(a), arg(b)) else { continue };
        if is_set(matches, a) && !is_set(matches, b) {
            let needs = format!("{} needs '{}'", subject(a, matches), flag(b));
            return Err(command.clone().error(ErrorKind::MissingRequiredArgument, needs));
        }
    }
    Ok(())
}

/// Which options took their value from the environment, set by
/// `Cli::parse_argv`: a message about one names the variable and its value,
/// which is what to fix (in a unit's EnvironmentFile, say).
#[derive(Clone, Debug, Default)]
pub struct FromEnv(Vec<(String, String)>);

impl FromEnv {
    /// `--flag` as the user gave it: "NELI_FLAG=value (from the
    /// environment)" when its value came from there, else `--flag`.
    pub fn name(&self, flag: &str) -> String {
        self.0.iter().find(|(f, _)| f == flag).map_or_else(|| flag.to_string(), |(_, given)| given.clone())
    }

    /// As `name`, with the value it took: `--flag VALUE` when given on the
    /// command line.
    pub fn name_with(&self, flag: &str, value: &str) -> String {
        match self.name(flag) {
            name if name == flag => format!("{flag} {value}"),
            name => name,
        }
    }
}

/// `--help`'s exit statuses for `command` and its subcommands, rendered
/// from `exit::STATUSES`, the table the man pages and the README use.
fn with_exit_statuses(command: clap::Command) -> clap::Command {
    let mut command = command.after_help(crate::exit::help(""));
    let names: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        command = command.mut_subcommand(&name, |sub| {
            let nested: Vec<String> = sub.get_subcommands().map(|s| s.get_name().to_string()).collect();
            let mut sub = sub.after_help(crate::exit::help(&name));
            for inner in nested {
                sub = sub.mut_subcommand(&inner, |s| s.after_help(crate::exit::help(&format!("{name} {inner}"))));
            }
            sub
        });
    }
    command
}

/// clap names the flag of a bad value even when the value came from the
/// flag's environment variable, which is then what to fix (in a unit's
/// EnvironmentFile, say): adds a tip naming the variable and its value.
fn name_the_variable(mut err: clap::Error, command: &clap::Command, argv: &[OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(err.kind(), ErrorKind::InvalidValue | ErrorKind::ValueValidation) {
        return err;
    }
    let Some(ContextValue::String(invalid)) = err.get(ContextKind::InvalidArg) else {
        return err;
    };
    // "--session-timeout <DURATION>"
    let Some(long) = invalid.split_whitespace().next().and_then(|f| f.strip_prefix("--")) else {
        return err;
    };
    let arg = std::iter::once(command)
        .chain(command.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long));
    let Some((arg, env)) = arg.and_then(|a| Some((a, a.get_env()?))) else {
        return err;
    };
    let given = |a: &OsString| {
        let a = a.to_string_lossy();
        a.strip_prefix("--").is_some_and(|f| f == long || f.starts_with(&format!("{long}=")))
            || arg.get_short().is_some_and(|c| a.starts_with('-') && !a.starts_with("--") && a.contains(c))
    };
    let (Some(value), false) = (std::env::var_os(env), argv.iter().skip(1).take_while(|a| *a != "--").any(given))
    else {
        return err;
    };
    let tip = format!("the value comes from the environment: {}={}", env.to_string_lossy(), value.to_string_lossy());
    let mut tips = match err.get(ContextKind::Suggested) {
        Some(ContextValue::StyledStrs(tips)) => tips.clone(),
        _ => Vec::new(),
    };
    tips.insert(0, tip.into());
    err.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
    err
}

/// What `--version` prints after "neli-run ", like `kcat -V`: the version, the
/// commit and target it was built from (build.rs), librdkafka's version and
/// the features it was built with (which SASL mechanisms, compression codecs
/// and OIDC this build can use).
fn build_version() -> String {
    let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
    let features = rdkafka::ClientConfig::new()
        .create_native_config()
        .and_then(|native| native.get("builtin.features"))
        .unwrap_or_else(|err| format!("unknown ({err})"));
    format!(
        "{}\ncommit: {}\ntarget: {}\nlibrdkafka: {librdkafka}\nbuiltin.features: {features}",
        env!("CARGO_PKG_VERSION"),
        env!("NELI_BUILD_COMMIT"),
        env!("NELI_BUILD_TARGET"),
    )
}

/// Logging, for every subcommand.
#[derive(Debug, Args)]
#[command(next_help_heading = "Operating")]
pub struct LogArgs {
    /// More log output (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, env = "NELI_VERBOSE")]
    pub verbose: u8,

    /// Less log output (-q warnings and errors only, -qq errors only).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, env = "NELI_QUIET", conflicts_with = "verbose")]
    pub quiet: u8,

    /// Log format: text for people, json (one object per line) for
    /// collectors.
    #[arg(long, global = true, env = "NELI_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

// The core's restart policy, as a flag value (the core knows nothing of clap).
impl clap::ValueEnum for Restart {
    fn value_variants<'a>() -> &'a [Self] {
        &[Restart::Never, Restart::OnFailure, Restart::Always]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Restart::Never => PossibleValue::new("never").help("Exit with the child's status (and leave the group)"),
            Restart::OnFailure => {
                PossibleValue::new("on-failure").help("Start it again unless it exited with status 0")
            }
            Restart::Always => PossibleValue::new("always").help("Start it again whatever its status"),
        })
    }
}

// The core's missed-run policy, as a flag value.
impl clap::ValueEnum for Missed {
    fn value_variants<'a>() -> &'a [Self] {
        &[Missed::Skip, Missed::Once, Missed::All]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Missed::Skip => PossibleValue::new("skip")
                .help("Skip them (a run cut short by a crash too): wait for the next due time"),
            Missed::Once => PossibleValue::new("once").help("Run the latest of them once, at once [default]"),
            Missed::All => PossibleValue::new("all").help("Run each of them, oldest first, one after another"),
        })
    }
}

/// What a wave does when its run exits with a failure (see --once-within).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailedRun {
    /// The next member runs it again, as after a crash [default]: each
    /// member runs it at most once, and a service fails over.
    Retry,
    /// Every member of the wave exits with the run's status.
    Exit,
}

/// How log lines look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Commands other than running a child.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Run a Kafka-protocol broker in memory, to try neli-run without Kafka.
    ///
    /// It is librdkafka's mock cluster (one broker, or a cluster with
    /// --brokers) behind fixed addresses, with a group coordinator of its
    /// own that keeps Kafka's timing.
    /// Topics are created as on Kafka: by CreateTopics, or by a producer
    /// (one partition), never by a client that only looks. Everything lives
    /// in this process's memory and is lost when it stops. Other Kafka
    /// clients work too (kafka-python and kafkajs are checked: produce, join
    /// a group, consume, leave, create a topic). For development and tests
    /// only. Stops on Ctrl-C.
    ///
    /// SIGUSR1 takes every broker down (every connection closed, new ones
    /// refused) and SIGUSR2 brings them back with their state, as Kafka
    /// brokers restarting over their logs: to see what clients do then.
    /// With --control, `neli-run dev-broker event` makes one cluster event
    /// at a time (a leader or the coordinator moved, a broker stopped or
    /// crashed, a client cut off from one broker).
    #[cfg(feature = "dev-broker")]
    DevBroker(DevBrokerArgs),

    /// Show who leads a group now, and its standbys, read from its records.
    ///
    /// Works on any broker (it needs no group APIs) and does not join the
    /// group. Names and hosts read from the topic are printed with control
    /// characters escaped. A closed stdout (`| head -1`) ends it quietly
    /// with 0.
    Status(StatusArgs),

    /// Ask the leader to hand over to another member.
    ///
    /// Writes a control record to partition 0; the leader (the one named by
    /// --name, if given) stops its command as on a revoke, leaves the group
    /// and rejoins only once another member leads (or, if it is alone, after
    /// three session timeouts). With --to, the member named leads next.
    /// Waits for the new leader and names it. The request says who asked
    /// (user, host, pid) and the leader logs it; anyone with WRITE on the
    /// topic can ask.
    Yield(YieldArgs),

    /// Pause the group for maintenance: no member starts the command until
    /// `neli-run resume`.
    ///
    /// Writes a control record to partition 0 that every member honours,
    /// now and later (its owner carries it forward in every record): whoever
    /// leads keeps leading without starting the command; --stop also stops
    /// the running one (stop signal, grace, SIGKILL). Waits until the owner
    /// of partition 0 says it honours the pause; without one the pause
    /// still stands, for whoever comes. The request says who asked and the
    /// leader logs it; `neli-run status` shows it.
    Pause(PauseArgs),

    /// End a pause: the owner of partition 0 starts the command again.
    ///
    /// Writes a control record to partition 0 and waits until the owner
    /// of partition 0 says it honours it. A schedule's runs due while
    /// paused count as missed (--missed decides).
    Resume(ResumeArgs),
}

/// Options of `neli-run pause`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Also stop the command that runs now (stop signal, --grace, SIGKILL).
    #[arg(long, env = "NELI_PAUSE_STOP")]
    pub stop: bool,

    /// How long to wait for the owner of partition 0 to acknowledge (at
    /// most 24h).
    #[arg(long, env = "NELI_PAUSE_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

/// Options of `neli-run resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// How long to wait for the owner of partition 0 to acknowledge (at
    /// most 24h).
    #[arg(long, env = "NELI_RESUME_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

/// Options of `neli-run yield`.
#[derive(Debug, Args)]
pub struct YieldArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Only if this member leads (its --name).
    #[arg(long, env = "NELI_YIELD_NAME", value_name = "NAME")]
    pub name: Option<String>,

    /// Hand over to this member (its --name): it must be live (`neli-run
    /// status` lists the standbys). Without it, the live member of the
    /// highest --priority leads, whichever Kafka picks among equals.
    #[arg(long, env = "NELI_YIELD_TO", value_name = "NAME")]
    pub to: Option<String>,

    /// How long to wait for another member to lead (at most 24h).
    #[arg(long, env = "NELI_YIELD_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,

    /// Yield even when no member may take over (none live, or every one
    /// unhealthy or --never-lead, as `neli-run status` lists them): the
    /// command stops and nothing runs until a member leads, the same one
    /// after 3 session timeouts if it is alone. Without it such a yield is
    /// refused.
    #[arg(long, env = "NELI_YIELD_FORCE")]
    pub force: bool,
}

/// Options of `neli-run status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Print JSON instead of text.
    #[arg(long, env = "NELI_JSON")]
    pub json: bool,

    /// Keep watching; print a line each time the leader, its freshness, a
    /// pause or the standbys change (until Ctrl-C).
    #[arg(long, env = "NELI_WATCH")]
    pub watch: bool,
}

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

/// Options of `neli-run dev-broker`.
#[cfg(feature = "dev-broker")]
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DevBrokerArgs {
    /// Make one cluster event on a running dev broker, instead of running one.
    #[command(subcommand)]
    pub event: Option<DevBrokerEvent>,

    /// Address to listen on and advertise to clients (broker 1's; broker i
    /// listens on PORT + i - 1).
    #[arg(long, env = "NELI_DEV_BROKER_LISTEN", default_value = "127.0.0.1:9092", value_name = "HOST:PORT")]
    pub listen: String,

    /// Run a cluster of N brokers (1 to 9), on consecutive ports.
    ///
    /// Every topic is replicated on all of them, partition p led by broker
    /// p mod N + 1 (so partition 0 by broker 1), and the group coordinator
    /// is the last broker (the others answer NOT_COORDINATOR, as Kafka's
    /// brokers do): with N > 1, partition 0's leader and the coordinator
    /// are apart, as on most clusters.
    #[arg(long, env = "NELI_DEV_BROKER_BROKERS", default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=9))]
    pub brokers: u16,

    /// Take cluster events on a unix socket at PATH (mode 600), from
    /// `neli-run dev-broker event --control PATH EVENT`.
    #[arg(long, env = "NELI_DEV_BROKER_CONTROL", value_name = "PATH")]
    pub control: Option<std::path::PathBuf>,

    /// Address to advertise to clients, when it differs from --listen
    /// (e.g. listening on 0.0.0.0 for clients in other network namespaces).
    #[arg(long, env = "NELI_DEV_BROKER_ADVERTISE", value_name = "HOST:PORT")]
    pub advertise: Option<String>,

    /// Refuse access to TOPIC, as a broker with ACLs refuses a principal
    /// without permission (repeatable): to see what clients do then.
    #[arg(long, env = "NELI_DEV_BROKER_DENY_TOPIC", value_name = "TOPIC")]
    pub deny_topic: Vec<String>,

    /// Give every topic N partitions, whatever its creator asks for, as a
    /// topic created by hand with more than one: to see what members do
    /// then (a member joining may take partition 0 from a leader, which
    /// then stops its command). Without it, a topic gets what CreateTopics
    /// asks for, and one partition when a producer's Metadata request
    /// creates it.
    #[arg(long, env = "NELI_DEV_BROKER_PARTITIONS", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub partitions: Option<u16>,

    /// Who answers the group APIs (JoinGroup, SyncGroup, Heartbeat,
    /// LeaveGroup, and with `kafka` also OffsetCommit, OffsetFetch,
    /// DescribeGroups and ListGroups).
    ///
    /// `kafka`: a coordinator with Kafka's timing (a join ends as soon as
    /// every member has rejoined; a session ends at exactly its last
    /// heartbeat plus the session timeout), so handovers take what they
    /// take on a Kafka cluster. `mock`: librdkafka's mock, an independent
    /// implementation of the protocol, which waits the session timeout less
    /// one second after any change in the group, and serves librdkafka
    /// clients only (kafka-python cannot join a group on it, and kafkajs
    /// cannot read its LeaveGroup answer).
    #[arg(long, env = "NELI_DEV_BROKER_GROUP_COORDINATOR", value_enum, default_value_t = GroupCoordinator::Kafka)]
    pub group_coordinator: GroupCoordinator,

    /// With --group-coordinator kafka: how long a group that starts from
    /// empty waits for more members before its first assignment (Kafka's
    /// group.initial.rebalance.delay.ms, 3s by default on a cluster).
    #[arg(long, env = "NELI_DEV_BROKER_INITIAL_REBALANCE_DELAY", default_value = "0s", value_name = "DURATION",
          value_parser = humantime::parse_duration)]
    pub initial_rebalance_delay: std::time::Duration,

    /// Require a SASL login as USER with PASSWORD (repeatable).
    ///
    /// Clients then need -X security.protocol=SASL_PLAINTEXT and
    /// sasl.mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, as with a Kafka
    /// listener that requires SASL: to try credentials and --kafka-config
    /// files before using them against Kafka. It tests clients' SASL; it is
    /// not access control: any user who logs in may do everything, nothing
    /// is encrypted, and the mock behind it listens only on a unix socket in
    /// a directory private to the broker's user.
    #[arg(long, env = "NELI_DEV_BROKER_SASL_USER", value_name = "USER:PASSWORD")]
    pub sasl_user: Vec<String>,
}

/// `neli-run dev-broker event`.
#[cfg(feature = "dev-broker")]
#[derive(Debug, Subcommand)]
pub enum DevBrokerEvent {
    /// Make one cluster event on the dev broker at --control, and say what
    /// it did.
    ///
    /// EVENT is one of:
    ///   leader TOPIC PARTITION BROKER   move a partition's leadership;
    ///   offline TOPIC PARTITION         leave it without a leader;
    ///   coordinator BROKER              move the group coordinator (its
    ///                                   members' sessions start afresh);
    ///   stop BROKER                     a controlled shutdown: leaderships
    ///                                   and the coordinator moved first;
    ///   crash BROKER [DURATION]         connections cut at once, what it led
    ///                                   moved after DURATION [default: 9s,
    ///                                   KRaft's broker.session.timeout.ms];
    ///   start BROKER                    start it again, as a follower;
    ///   cut CLIENT BROKER               hold every byte between a client
    ///                                   (its client.id: a member's --name)
    ///                                   and one broker, as a network cut;
    ///   heal [CLIENT [BROKER]]          end cuts;
    ///   describe                        brokers, coordinator, leaders, cuts.
    #[command(verbatim_doc_comment)]
    Event {
        /// The dev broker's --control socket.
        #[arg(long, env = "NELI_DEV_BROKER_CONTROL", value_name = "PATH")]
        control: std::path::PathBuf,

        /// The event and its arguments, e.g. `stop 2`.
        #[arg(required = true, value_name = "EVENT", trailing_var_arg = true)]
        words: Vec<String>,
    },
}

/// Who answers a dev broker's group APIs (see --group-coordinator).
#[cfg(feature = "dev-broker")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupCoordinator {
    /// Kafka's timing, answered by the dev broker itself.
    Kafka,
    /// librdkafka's mock cluster.
    Mock,
}

/// A duration flag's value (humantime: 500ms, 6s, 1m, 1h 30m), so that clap
/// reports a bad one against its flag; `config` checks the bounds.
fn duration(value: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(value.trim()).map_err(|e| format!("{e}; use a number with a unit, e.g. 500ms, 6s, 1m"))
}

/// Options for running a command (the default mode).
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// How long a crashed leader blocks takeover (Kafka's session
    /// timeout): the one timing flag most users set.
    ///
    /// The others follow from it unless given, all safe together:
    /// --heartbeat-deadline S - 700ms, --heartbeat-interval S/12 (at most
    /// 500ms), --grace S/2 (at most 3s) and the coordinator heartbeat
    /// (heartbeat.interval.ms) S/10 (at most 200ms). At 6s: 5.3s, 500ms, 3s
    /// and 200ms. At least 1s. Most brokers refuse less than 6s
    /// (group.min.session.timeout.ms).
    #[arg(long, env = "NELI_SESSION_TIMEOUT", default_value = "6s", value_name = "DURATION", value_parser = duration,
          help_heading = "Timing")]
    pub session_timeout: std::time::Duration,

    /// How often the leader writes a heartbeat record to partition 0
    /// [default: --session-timeout / 12, at most 500ms].
    #[arg(long, env = "NELI_HEARTBEAT_INTERVAL", value_name = "DURATION", value_parser = duration,
          help_heading = "Timing")]
    pub heartbeat_interval: Option<std::time::Duration>,

    /// Kill the command when no own heartbeat has come back for this long
    /// [default: --session-timeout - 700ms].
    ///
    /// This is the fence: a leader cut off from Kafka kills its command
    /// before the group can elect another. A network blip shorter than it
    /// does not stop the command. Must leave room within --session-timeout
    /// for the coordinator heartbeat and a margin of 500ms (checked at
    /// start-up).
    #[arg(long, env = "NELI_HEARTBEAT_DEADLINE", value_name = "DURATION", value_parser = duration,
          help_heading = "Timing")]
    pub heartbeat_deadline: Option<std::time::Duration>,

    /// Time between the stop signal and SIGKILL [default: --session-timeout
    /// / 2, at most 3s].
    ///
    /// A new leader waits for this stop, so it must fit within
    /// --session-timeout (checked at start-up).
    #[arg(long, env = "NELI_GRACE", value_name = "DURATION", value_parser = duration, help_heading = "Timing")]
    pub grace: Option<std::time::Duration>,

    /// Signal that asks the command to stop (name or number).
    #[arg(
        long,
        env = "NELI_STOP_SIGNAL",
        default_value = "SIGTERM",
        value_name = "SIGNAL",
        help_heading = "The command"
    )]
    pub stop_signal: String,

    /// What to do when the command exits while leader.
    ///
    /// never: exit with its status and let a standby take over.
    #[arg(long, env = "NELI_RESTART", value_enum, default_value = "never", help_heading = "The command")]
    pub restart: Restart,

    /// Pause before restarting the command.
    #[arg(long, env = "NELI_RESTART_DELAY", default_value = "1s", value_name = "DURATION", value_parser = duration, help_heading = "The command")]
    pub restart_delay: std::time::Duration,

    /// With --restart never: members started within this long of a run's
    /// wave run the command once between them [default: 30s; 0 turns it off].
    ///
    /// The same crontab line on every host starts one member per host for
    /// each tick: a wave. The leader runs the command; when its run ends,
    /// every member of the wave exits with the run's status without running
    /// it again, naming who ran it. A wave begins when its first attempt
    /// starts; a member started later than this after that begins the next
    /// wave. Keep it well below the schedule's period (30s fits cron's
    /// every-minute ticks) and above the skew between the hosts' starts. If
    /// the leader crashes, is fenced or is stopped mid-run, the next leader
    /// runs it again (at least once; NELI_ATTEMPT counts the attempts).
    #[arg(long, env = "NELI_ONCE_WITHIN", value_name = "DURATION", value_parser = duration, help_heading = "Cron and schedules")]
    pub once_within: Option<std::time::Duration>,

    /// With --restart never: what a wave does when its run fails (exits
    /// non-zero) [default: retry].
    #[arg(long, env = "NELI_FAILED_RUN", value_enum, value_name = "POLICY", help_heading = "Cron and schedules")]
    pub failed_run: Option<FailedRun>,

    /// Stop a run that takes longer than this (stop signal, --grace,
    /// SIGKILL) [default: no limit].
    ///
    /// The stopped run counts as ended with the status that gives (143
    /// after SIGTERM): --restart and, once per wave, --failed-run decide
    /// what follows, as for a run that failed by itself.
    #[arg(long, env = "NELI_MAX_RUNTIME", value_name = "DURATION", value_parser = duration, help_heading = "The command")]
    pub max_runtime: Option<std::time::Duration>,

    /// Run the command every DURATION while leader, and stay up between
    /// runs (e.g. 5m; at least 1s).
    ///
    /// For a long-lived service (systemd, a container) in place of a
    /// crontab line on every host. Due times lie on a grid counted from the
    /// Unix epoch, so every member computes the same ones: 5m is due at :00,
    /// :05 ... of every hour, 1d at midnight UTC (--cron for other times).
    /// Only the leader runs it. Each run's due time, start, end, status and
    /// fencing token go on the group's topic, so a new leader neither
    /// repeats a run that ended nor forgets one that was due: one cut short
    /// by a crash, a fence or a stop runs again (NELI_ATTEMPT 2), and due
    /// times that passed with nobody to run them follow --missed. Runs never
    /// overlap. The command gets NELI_DUE, its due time (RFC 3339 UTC).
    #[arg(long, env = "NELI_EVERY", value_name = "DURATION", value_parser = duration, conflicts_with = "cron", help_heading = "Cron and schedules")]
    pub every: Option<std::time::Duration>,

    /// Run the command at the times of a cron expression while leader, and
    /// stay up between runs, e.g. "30 2 * * *" (daily at 02:30).
    ///
    /// Five fields: minute, hour, day of month, month, day of week (names
    /// such as MON and JAN too); a sixth in front gives seconds. In
    /// --time-zone. Otherwise as --every.
    #[arg(long, env = "NELI_CRON", value_name = "EXPRESSION", help_heading = "Cron and schedules")]
    pub cron: Option<String>,

    /// The time zone of --cron: an IANA name such as Europe/Berlin, UTC, or
    /// local (the TZ variable, else /etc/localtime) [default: local].
    ///
    /// Give the same zone on every member: due times must agree.
    #[arg(long, env = "NELI_TIME_ZONE", value_name = "ZONE", help_heading = "Cron and schedules")]
    pub time_zone: Option<String>,

    /// With --every or --cron: what happens to due times that passed with
    /// nobody to run them (nobody led, or the previous run still went on)
    /// [default: once].
    #[arg(long, env = "NELI_MISSED", value_enum, value_name = "POLICY", help_heading = "Cron and schedules")]
    pub missed: Option<Missed>,

    /// With --every or --cron: skip a due run that cannot start within this
    /// long of its due time [default: no limit].
    ///
    /// As a Kubernetes CronJob's startingDeadlineSeconds: a run that would
    /// start too late to be useful is skipped, and the next is waited for.
    #[arg(long, env = "NELI_STARTING_DEADLINE", value_name = "DURATION", value_parser = duration, help_heading = "Cron and schedules")]
    pub starting_deadline: Option<std::time::Duration>,

    /// This member's name in logs and heartbeats [default: <HOSTNAME>-<PID>].
    #[arg(long, env = "NELI_NAME", help_heading = "Operating")]
    pub name: Option<String>,

    /// This member's priority, 0 to 100: when a leader stops, the live
    /// member of the highest priority leads [default: 0].
    ///
    /// Whoever Kafka assigns partition 0 hands it to a live member of
    /// higher priority before it starts the command (a few hundred ms
    /// more). A leader keeps leading when a member of higher priority joins
    /// (unless --preempt). Members write a small record to the group's
    /// topic every 2 × --heartbeat-interval (1s) while they wait, so that
    /// the leader and `neli-run status` know them.
    #[arg(long, env = "NELI_PRIORITY", default_value_t = 0, value_name = "N",
          value_parser = clap::value_parser!(u8).range(0..=100), allow_negative_numbers = true,
          help_heading = "Operating")]
    pub priority: u8,

    /// While leading, hand over to a member of higher --priority as soon
    /// as one is live (it joined, or came back).
    ///
    /// The leader stops its command (stop signal, --grace) as for `neli-run
    /// yield --to`. Without it, a leader keeps leading until it stops, and
    /// the priorities choose only the next leader.
    #[arg(long, env = "NELI_PREEMPT", help_heading = "Operating")]
    pub preempt: bool,

    /// Never lead: watch the group, log who leads, and be listed by
    /// `neli-run status`, without ever running COMMAND (which may be left
    /// out).
    ///
    /// For a status host, or a host being drained: it never joins the
    /// consumer group, so Kafka can never give it partition 0. Exits 0 on
    /// SIGTERM or SIGINT. It writes a small record to the group's topic
    /// every 2 × --heartbeat-interval, and reads the topic.
    ///
    /// It has no use for the options of a member that may lead: the
    /// options of the command and of Cron and schedules, Hooks, Health and
    /// Warm standbys, and --priority, --preempt, --acquire-timeout,
    /// --metrics-addr and --leader-file. Given on the command line they are
    /// refused; from the environment they are ignored, with a warning that
    /// names them, so that one EnvironmentFile serves both kinds of host.
    #[arg(long, env = "NELI_NEVER_LEAD", help_heading = "Operating",
          conflicts_with_all = ["priority", "preempt", "acquire_timeout", "metrics_addr", "leader_file", "restart",
                                "restart_delay", "stop_signal", "max_runtime", "once_within", "failed_run", "every",
                                "cron", "time_zone", "missed", "starting_deadline", "on_lead", "on_unlead", "on_exit",
                                "hook_timeout", "health_cmd", "health_interval", "health_timeout", "health_retries",
                                "warm", "lead_signal", "unlead_signal"])]
    pub never_lead: bool,

    /// Give up (exit 75) if not leader within this time [default: wait forever].
    #[arg(long, env = "NELI_ACQUIRE_TIMEOUT", value_name = "DURATION", value_parser = duration, help_heading = "Operating")]
    pub acquire_timeout: Option<std::time::Duration>,

    /// Serve /metrics (Prometheus), /livez, /readyz and /leader on this
    /// address.
    ///
    /// /livez: 200 while the shell's loop runs (a liveness probe: a Kafka outage
    /// does not fail it). /readyz: 200 while Kafka answers too (/healthz is
    /// its older name). /leader answers 200 only on the member running the
    /// command: point a load balancer's health check at it.
    #[arg(long, env = "NELI_METRICS_ADDR", value_name = "HOST:PORT", help_heading = "Operating")]
    pub metrics_addr: Option<String>,

    /// A file that exists while this member leads: written (atomically)
    /// when it starts leading, removed when it stops and when neli-run
    /// exits. Lines of key=value: token, name, group, pid, since.
    ///
    /// For scripts on the host that ask whether this member leads. Advisory:
    /// written once it leads (the command started, or due under --every or
    /// --cron), removed once it stops leading (its command being stopped or
    /// killed, maybe not yet gone); left behind by a kill
    /// -9 (its pid= names a process that is gone; the next start removes
    /// it). Its directory must exist and be writable (checked at start).
    ///
    /// neli-run replaces or removes only a leader file it wrote, or one
    /// whose pid= is gone, and never writes through a link: a path holding
    /// anything else (another file, a link, the leader file of another
    /// neli-run that runs) is refused at start and left as it is. Give each
    /// member on a host a path of its own.
    #[arg(long, env = "NELI_LEADER_FILE", value_name = "PATH", help_heading = "Operating")]
    pub leader_file: Option<std::path::PathBuf>,

    /// Run CMD with /bin/sh -c when this member starts leading.
    ///
    /// One string, run by the shell: "curl -s -d led=$NELI_NAME https://..."
    /// works. A hook runs on a thread of its own, one at a time, in order,
    /// with stdin from /dev/null and neli-run's stdout and stderr; it never
    /// delays a fence, a revoke or a handover, and it gets the command's
    /// environment (not the NELI_* settings neli-run read) plus NELI_HOOK
    /// (lead, unlead, exit), NELI_FENCING_TOKEN and NELI_REASON. Its failure
    /// is logged and changes nothing. What it leaves running is killed once
    /// it exits. Behind one that hangs, a lead or unlead hook still waiting
    /// is replaced by the next: only the latest state is told.
    #[arg(long, env = "NELI_ON_LEAD", value_name = "CMD", help_heading = "Hooks")]
    pub on_lead: Option<String>,

    /// Run CMD with /bin/sh -c when this member stops leading; NELI_REASON
    /// says why: fenced, revoked, lost, yielded, unhealthy (--health-cmd) or
    /// exiting.
    ///
    /// Its command is being stopped or killed meanwhile (it may not be gone
    /// yet). See --on-lead.
    #[arg(long, env = "NELI_ON_UNLEAD", value_name = "CMD", help_heading = "Hooks")]
    pub on_unlead: Option<String>,

    /// Run CMD with /bin/sh -c after each run of the command ends;
    /// NELI_EXIT_STATUS is its status (128+N for signal N), NELI_REASON
    /// exited (by itself), stopped (by neli-run) or fenced.
    ///
    /// For failure-only alerts: '[ "$NELI_EXIT_STATUS" = 0 ] || page-me'.
    /// See --on-lead.
    #[arg(long, env = "NELI_ON_EXIT", value_name = "CMD", help_heading = "Hooks")]
    pub on_exit: Option<String>,

    /// How long a hook may run before it and all it started are sent
    /// SIGKILL (at most 10m) [default: 10s].
    ///
    /// At exit neli-run leaves the group first, then waits for the hooks
    /// still queued, all of them within this bound and 1s (a second SIGTERM
    /// cuts it short): a stop fits systemd's TimeoutStopSec=30s at the
    /// defaults.
    #[arg(long, env = "NELI_HOOK_TIMEOUT", value_name = "DURATION", value_parser = duration, help_heading = "Hooks")]
    pub hook_timeout: Option<std::time::Duration>,

    /// Lead only while CMD, run with /bin/sh -c, exits 0: a member whose
    /// check fails --health-retries times in a row hands over, and stays
    /// out of the group until it passes again.
    ///
    /// A member joins the group only once its first check passes. An
    /// unhealthy leader stops its command (stop signal, grace) and stands
    /// aside as `neli-run yield` makes it; an unhealthy standby leaves the
    /// group, so it is never given partition 0. A check runs on a thread of
    /// its own, with stdin and stdout on /dev/null (the log says its exit
    /// status and the last line of its stderr) and the command's
    /// environment; one that outlasts --health-timeout is sent SIGKILL, with
    /// all it started, and counts as failed, and what one leaves running is
    /// killed once it exits. It never delays a fence, a revoke or a
    /// handover.
    #[arg(long, env = "NELI_HEALTH_CMD", value_name = "CMD", help_heading = "Health")]
    pub health_cmd: Option<String>,

    /// How long after a check ends the next one starts [default: 5s].
    #[arg(long, env = "NELI_HEALTH_INTERVAL", value_name = "DURATION", value_parser = duration,
          help_heading = "Health")]
    pub health_interval: Option<std::time::Duration>,

    /// How long a check may run before it and all it started are sent
    /// SIGKILL, and it counts as failed [default: 5s].
    #[arg(long, env = "NELI_HEALTH_TIMEOUT", value_name = "DURATION", value_parser = duration,
          help_heading = "Health")]
    pub health_timeout: Option<std::time::Duration>,

    /// How many checks in a row must fail before this member is unhealthy
    /// [default: 3]; one that passes makes it healthy again.
    #[arg(long, env = "NELI_HEALTH_RETRIES", value_name = "N", help_heading = "Health")]
    pub health_retries: Option<u32>,

    /// Run the command on every member, and only tell it when it leads:
    /// the leader's gets --lead-signal, with its fencing token in the file
    /// $NELI_TOKEN_FILE, and --unlead-signal (the file emptied first) when
    /// it stops leading.
    ///
    /// For a command that is slow to get ready (a cache to warm, a pool to
    /// open). The trade: at most one command *acts as leader* only if each
    /// honours --unlead-signal at once; a fence still SIGKILLs the
    /// leader's (it starts again as a standby), and the token stays the
    /// downstream guard. Needs --restart on-failure or always: a command
    /// that dies on any member is started again after --restart-delay.
    #[arg(long, env = "NELI_WARM", help_heading = "Warm standbys")]
    pub warm: bool,

    /// With --warm: the signal that tells the command it leads (name or
    /// number).
    #[arg(
        long,
        env = "NELI_LEAD_SIGNAL",
        default_value = "SIGUSR1",
        value_name = "SIGNAL",
        help_heading = "Warm standbys"
    )]
    pub lead_signal: String,

    /// With --warm: the signal that tells the command it no longer leads
    /// (name or number).
    #[arg(
        long,
        env = "NELI_UNLEAD_SIGNAL",
        default_value = "SIGUSR2",
        value_name = "SIGNAL",
        help_heading = "Warm standbys"
    )]
    pub unlead_signal: String,

    /// The command to run while leader, and its arguments (no shell).
    #[arg(last = true, required_unless_present = "never_lead", value_name = "COMMAND", help_heading = "The command")]
    pub command: Vec<OsString>,

    /// Which options took their value from the environment (`parse_argv`).
    #[arg(skip)]
    pub from_env: FromEnv,

    /// The variables --never-lead ignored (`parse_argv`): the config warns.
    #[arg(skip)]
    pub ignored: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// --never-lead's help says what it has no use for: the options under
    /// five headings and five more. Its `conflicts_with_all` must say the
    /// same, which `parse_argv` refuses and ignores by.
    #[test]
    fn never_lead_refuses_what_its_help_says() {
        let command = Cli::command();
        let arg = |id: &str| command.get_arguments().find(|a| a.get_id() == id).unwrap();
        let mut refused: Vec<&str> =
            command.get_arg_conflicts_with(arg("never_lead")).iter().map(|a| a.get_id().as_str()).collect();
        let headings = ["The command", "Cron and schedules", "Hooks", "Health", "Warm standbys"];
        let named = ["priority", "preempt", "acquire_timeout", "metrics_addr", "leader_file"];
        let mut said: Vec<&str> = command
            .get_arguments()
            .filter(|a| a.get_help_heading().is_some_and(|h| headings.contains(&h)) && !a.is_positional())
            .map(|a| a.get_id().as_str())
            .chain(named)
            .collect();
        refused.sort();
        said.sort();
        assert_eq!(refused, said);
    }

    #[test]
    fn an_option_from_the_environment_is_named_with_its_variable() {
        let from_env = FromEnv(vec![("--restart".into(), "NELI_RESTART=always (from the environment)".into())]);
        assert_eq!(from_env.name("--restart"), "NELI_RESTART=always (from the environment)");
        assert_eq!(from_env.name_with("--restart", "always"), "NELI_RESTART=always (from the environment)");
        assert_eq!(from_env.name("--every"), "--every");
        assert_eq!(from_env.name_with("--once-within", "0"), "--once-within 0");
    }
}
