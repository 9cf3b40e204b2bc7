//! The command line as the user types it: clap definitions only, no side
//! effects. `config` turns these raw values into a checked `Config`; the
//! man pages and shell completions are generated from these files.
//!
//! This file: `Cli` and how `parse_argv` reads it (options that cannot go
//! together, or came from the environment), the logging options, and what
//! `--help` and `--version` add at run time; `run.rs` the options of running
//! a command, `kafka.rs` how to reach the group's topic, `commands.rs` the
//! subcommands (`status`, `yield`, `pause`, `resume`, `dev-broker`).

mod commands;
mod kafka;
mod run;

use std::ffi::OsString;

use clap::{Args, Parser};

pub use commands::{
    ConsoleArgs, CronArgs, CronCheckArgs, CronCommand, CronPauseArgs, CronTriggerArgs, HistoryArgs, LogsArgs,
    StatusArgs, Sub, YieldArgs,
};
#[cfg(feature = "dev-broker")]
pub use commands::{DevBrokerArgs, DevBrokerEvent, GroupCoordinator};
pub use kafka::KafkaArgs;
pub use run::{FailedRun, RunArgs};

/// Run a command on exactly one machine of a group, elected through Kafka.
///
/// Every machine runs the same `neli-run --group G -- COMMAND`. They all join
/// the Kafka consumer group G on the topic `G.neli`; the member that Kafka
/// assigns partition 0 becomes leader once it reads its own heartbeat back
/// from that partition, and only the leader runs COMMAND. The others wait as
/// hot standbys and take over when the leader stops, crashes or loses Kafka:
/// a leader that stops or yields wakes them once it has left the group (a
/// record they watch for), so they take over within milliseconds; after a
/// crash, within the session timeout.
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

/// How log lines look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
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
