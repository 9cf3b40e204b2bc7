//! The `neli-run` binary: parse, set up logging, run, exit with one status.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use neli_run::cli::{Cli, LogArgs, LogFormat, Sub};
use neli_run::{child, config, dev_broker, exit, run, status, stderr};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == child::shim::ARG) {
        child::shim::main(&argv[2..]);
    }
    // Before anything can be logged, and before the log reader can be gone.
    stderr::init();
    let cli = match Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    init_logging(&cli.log);
    let run_args = match cli.subcommand {
        Some(Sub::DevBroker(args)) => return dev_broker::main(args),
        Some(Sub::Status(args)) => return status::main(args, std::env::var("NELI_KAFKA_PROPERTIES").ok()),
        Some(Sub::Yield(args)) => return status::yield_main(args, std::env::var("NELI_KAFKA_PROPERTIES").ok()),
        None => cli.run,
    };
    let config = match config::Config::from_args(run_args, std::env::var("NELI_KAFKA_PROPERTIES").ok()) {
        Ok(config) => config,
        Err(err) => {
            stderr::line(format_args!("error: {err}"));
            return ExitCode::from(err.code());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    match runtime {
        Ok(runtime) => {
            let code = runtime.block_on(run::run(config));
            // Do not wait for a connection attempt still blocked in librdkafka.
            runtime.shutdown_background();
            ExitCode::from(code)
        }
        Err(err) => {
            stderr::line(format_args!("error: cannot start the async runtime: {err}"));
            ExitCode::from(exit::INTERNAL)
        }
    }
}

fn init_logging(args: &LogArgs) {
    let level = match (args.verbose, args.quiet) {
        (0, 0) => "info",
        (1, _) => "debug",
        (v, _) if v >= 2 => "trace",
        (_, 1) => "warn",
        _ => "error",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    // A log line that cannot be written now is dropped: a dead or stalled
    // log reader must never stop neli-run (see `stderr`).
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(stderr::Log)
        .log_internal_errors(false)
        .with_target(false);
    match args.log_format {
        LogFormat::Text => logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
}
