//! neli-run: run a command on exactly one machine of a group, elected through
//! a Kafka consumer group (the Fast NELI protocol). See the README for the
//! user's view; each module opens with the part of the design it owns.
//!
//! This library is the `neli-run` binary's body, not an API: `main` is all
//! the binary calls, and `for_tests` names what the integration tests write
//! by hand. Every module is private to the crate. The proof harness (the
//! soak and benchmark runners, the overlap detector) is the `neli-proof`
//! crate in proof/.
//!
//! - `leader`: the pure leadership state machine (events in, actions out).
//! - `shell`: the loop that feeds it and carries out its actions.
//! - `kafka`: the rdkafka adapter (group membership, heartbeats, topic).
//! - `child`: the supervisor and its shim (process group, lease, reaping).
//! - `cli` / `config`: the command line (cli/: the options of running a
//!   command, the connection, the subcommands), and the checks that make it
//!   safe.
//! - `clock`: the clocks that decide (boot time, the wall clock, the anchor
//!   that pairs them); `calendar`: the due times of --every and --cron;
//!   `exit`: every exit status, one map and one table.
//! - `neli-run dev-broker`: an in-memory Kafka-protocol broker for trying and
//!   testing, the crate `neli_dev_broker` in dev-broker/ (the `dev-broker`
//!   feature, on by default).
//! - `status`: `status`, `yield`, `pause` and `resume`, and the member that
//!   runs with `--never-lead`: who leads a group, read from partition 0 from
//!   outside the group (status/: the reader, the view and its rendering, the
//!   control records, the watcher).
//! - `runs`: every run on the record (the `<topic>.runs` topic, written
//!   off the loop by a recorder of its own) and `history`, its reader.
//! - `env`: the environment of what neli-run starts (the command, jobs,
//!   hooks, the health check): what it removes from the caller's.
//! - `files`: files written for others to read, never through a link, never over another's.
//! - `layers_off`: debug-build switches that let a test see one safety layer alone.
//! - `stderr`: reports that never block or panic, whatever reads our stderr.
//! - `notify`: systemd's `Type=notify` protocol; `metrics`: /metrics, /livez, /readyz
//!   (/healthz), /leader; `http`: the request head it and the console read.

mod calendar;
mod child;
mod cli;
mod clock;
mod config;
mod console;
mod crontab;
mod env;
mod exit;
mod files;
mod http;
mod kafka;
mod layers_off;
mod leader;
mod metrics;
mod notify;
mod printable;
mod runs;
mod shell;
mod size;
mod status;
mod stderr;

use std::ffi::OsString;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, LogArgs, LogFormat, Sub};

/// Public for the integration tests only, not API: tests/docs.rs renders
/// the man page and completions from `Cli`, and the exit statuses of the man
/// pages and the README from `STATUSES`; tests/faults.rs writes
/// hand-made heartbeat records (a ghost member's claim) to a group's topic,
/// and tests/standbys.rs a drain at a moment of its choosing.
#[doc(hidden)]
pub mod for_tests {
    pub use crate::cli::Cli;
    pub use crate::clock::{wall_ms, BootTime};
    pub use crate::exit::{meanings, Status, STATUSES};
    pub use crate::kafka::heartbeat::{Content, Heartbeat, Member};
    pub use crate::kafka::yield_request::DrainRequest;
    pub use crate::leader::{Attempt, Record, Runner, Stance};
}

/// Whether `sub` talks to Kafka, and so reads NELI_KAFKA_PROPERTIES (`cron
/// check` and the dev broker do not: a bad value is no error of theirs).
fn reads_kafka(sub: &Option<Sub>) -> bool {
    match sub {
        #[cfg(feature = "dev-broker")]
        Some(Sub::DevBroker(_)) => false,
        Some(Sub::Cron(cli::CronArgs { command: cli::CronCommand::Check(_) })) => false,
        _ => true,
    }
}

/// The `neli-run` binary: parse, set up logging, run, exit with one status.
/// (The shim and the keeper are this binary re-executed with a first
/// argument of their own.)
pub fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == child::shim::ARG) {
        child::shim::main(&argv[2..]);
    }
    if argv.get(1).is_some_and(|a| a == child::keeper::ARG) {
        child::keeper::main(&argv[2..]);
    }
    // Before anything can be logged, and before the log reader can be gone.
    stderr::init();
    let cli = match Cli::parse_argv(&argv) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { exit::Kind::Usage.code() } else { 0 });
        }
    };
    init_logging(&cli.log);
    // Read by hand, not through clap's env: clap would add a flag (shown in
    // completions) that puts a password on the command line, in ps.
    let env_properties = match config::env_properties() {
        Ok(properties) => properties,
        Err(err) if reads_kafka(&cli.subcommand) => return ExitCode::from(said(Err(err))),
        Err(_) => None,
    };
    let run_args = match cli.subcommand {
        #[cfg(feature = "dev-broker")]
        Some(Sub::DevBroker(args)) => return end_beside_librdkafka(exit_code(dev_broker(args).map(|()| 0))),
        Some(Sub::Status(args)) => return end_beside_librdkafka(said(status::main(args, env_properties))),
        Some(Sub::History(args)) => return end_beside_librdkafka(said(runs::history_main(args, env_properties))),
        Some(Sub::Logs(args)) => return end_beside_librdkafka(said(runs::logs_main(args, env_properties))),
        Some(Sub::Console(args)) => return end_beside_librdkafka(said(console::main(args, env_properties))),
        Some(Sub::Yield(args)) => return end_beside_librdkafka(said(status::yield_main(args, env_properties))),
        Some(Sub::Pause(args)) => {
            let asked =
                status::pause_main(args.kafka, (true, args.stop), args.role, args.timeout.into(), env_properties);
            return end_beside_librdkafka(said(asked));
        }
        Some(Sub::Resume(args)) => {
            let asked = status::pause_main(args.kafka, (false, false), args.role, args.timeout.into(), env_properties);
            return end_beside_librdkafka(said(asked));
        }
        Some(Sub::Drain(args)) => {
            let asked = status::drain_main(args.kafka, args.member, (true, args.force), args.timeout, env_properties);
            return end_beside_librdkafka(said(asked));
        }
        Some(Sub::Undrain(args)) => {
            let asked = status::drain_main(args.kafka, args.member, (false, false), args.timeout, env_properties);
            return end_beside_librdkafka(said(asked));
        }
        Some(Sub::Cron(cli::CronArgs { command: cli::CronCommand::Check(args) })) => {
            return ExitCode::from(said(crontab::check_main(args)));
        }
        Some(Sub::Cron(cli::CronArgs { command: cli::CronCommand::History(args) })) => {
            return end_beside_librdkafka(said(runs::history_main(args.into(), env_properties)));
        }
        Some(Sub::Cron(cli::CronArgs { command: cli::CronCommand::Pause(args) })) => {
            return end_beside_librdkafka(said(status::cron_pause_main(args, true, env_properties)));
        }
        Some(Sub::Cron(cli::CronArgs { command: cli::CronCommand::Resume(args) })) => {
            return end_beside_librdkafka(said(status::cron_pause_main(args, false, env_properties)));
        }
        Some(Sub::Cron(cli::CronArgs { command: cli::CronCommand::Trigger(args) })) => {
            return end_beside_librdkafka(said(status::cron_trigger_main(args, env_properties)));
        }
        None => cli.run,
    };
    let config = match config::Config::from_args(run_args, env_properties) {
        Ok(config) => config,
        Err(err) => return ExitCode::from(said(Err(err))),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    match runtime {
        Ok(runtime) => {
            let outcome = match config.never_lead {
                true => runtime.block_on(status::never_lead(config)),
                false => runtime.block_on(shell::run(config)),
            };
            // Do not wait for a connection attempt still blocked in librdkafka.
            runtime.shutdown_background();
            end_beside_librdkafka(exit_code(outcome))
        }
        Err(err) => {
            stderr::line(format_args!("error: cannot start the async runtime: {err}"));
            ExitCode::from(exit::Kind::Internal.code())
        }
    }
}

/// `neli-run dev-broker`: the command line's options handed to the dev
/// broker's crate, and its error mapped to an exit status.
#[cfg(feature = "dev-broker")]
fn dev_broker(args: cli::DevBrokerArgs) -> Result<(), exit::Failure> {
    use neli_dev_broker::{Error, GroupCoordinator};
    let failure = |err| match err {
        Error::Usage(message) => exit::Failure::new(exit::Kind::Usage, message),
        Error::Internal(message) => exit::Failure::new(exit::Kind::Internal, message),
    };
    if let Some(cli::DevBrokerEvent::Event { control, words }) = args.event {
        let said = neli_dev_broker::event(&control, &words).map_err(failure)?;
        // `requests` on a broker that has received none says nothing.
        if !said.is_empty() {
            println!("{said}");
        }
        return Ok(());
    }
    let options = neli_dev_broker::Options {
        listen: args.listen,
        advertise: args.advertise,
        brokers: args.brokers,
        control: args.control,
        deny_topic: args.deny_topic,
        partitions: args.partitions,
        group_coordinator: match args.group_coordinator {
            cli::GroupCoordinator::Kafka => GroupCoordinator::Kafka,
            cli::GroupCoordinator::Mock => GroupCoordinator::Mock,
        },
        initial_rebalance_delay: args.initial_rebalance_delay,
        leave_pause: args.leave_pause,
        sasl_user: args.sasl_user,
    };
    neli_dev_broker::main(options).map_err(failure)
}

/// The status of a command that ends before anything is logged (`status`,
/// `yield`, a configuration refused): a failure is said on stderr as one
/// line, "error: ...".
fn said(outcome: Result<u8, exit::Failure>) -> u8 {
    outcome.unwrap_or_else(|err| {
        stderr::line(format_args!("error: {err}"));
        err.code()
    })
}

/// The exit status for an outcome: the status, or the failure's, which is
/// logged first (once, here).
fn exit_code(outcome: Result<u8, exit::Failure>) -> u8 {
    outcome.unwrap_or_else(|failure| {
        tracing::error!("{failure}");
        failure.code()
    })
}

/// Ends the process with `code` at once, without exit's handlers: they
/// free what librdkafka uses (OpenSSL's cleanup among them), and a client
/// may still be in use or being destroyed beside them, on a thread of its
/// own (a leave given up on, a connection attempt still blocked in it, or
/// one whose last reference another thread dropped a moment ago). CI saw
/// a corrupted heap and an abort in place of the status due three times,
/// each after another such holder had been joined before exiting; so the
/// handlers never run, whatever is left. Nothing is lost: stdout is flushed
/// here, and everything else neli-run writes is written unbuffered. With
/// -v, it says when librdkafka's own threads still run.
fn end_beside_librdkafka(code: u8) -> ExitCode {
    let threads = librdkafka_threads();
    if threads != Some(0) {
        tracing::debug!(?threads, "librdkafka may still run: exiting without exit handlers");
    }
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // SAFETY: _exit ends the process at once; nothing is left to unwind.
    unsafe { libc::_exit(code.into()) }
}

/// How many of this process's threads are librdkafka's (it names them
/// "rdk:main", "rdk:broker1" and so on); None without a /proc to count them
/// in (a container or a namespace without it).
fn librdkafka_threads() -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let named = |task: std::fs::DirEntry| std::fs::read_to_string(task.path().join("comm")).ok();
    Some(tasks.flatten().filter_map(named).filter(|comm| comm.starts_with("rdk:")).count())
}

fn init_logging(args: &LogArgs) {
    let level = match (args.verbose, args.quiet) {
        (0, 0) => "info",
        (1, _) => "debug",
        (v, _) if v >= 2 => "trace",
        (_, 1) => "warn",
        _ => "error",
    };
    // rdkafka's consumer logs an error when it is dropped already closed,
    // and neli-run closes its group's consumer itself, to wake the others
    // the moment the group answers its leave (kafka/wake.rs).
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{level},rdkafka::consumer::base_consumer=off")));
    // A log line that cannot be written now is dropped: a dead or stalled
    // log reader must never stop neli-run (see `stderr`).
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| stderr::Log)
        .log_internal_errors(false)
        .with_target(false);
    match args.log_format {
        LogFormat::Text => logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
}
