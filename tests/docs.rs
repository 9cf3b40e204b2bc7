//! The man pages and shell completions are generated from the clap
//! definition; this test fails when the committed files are stale. Run with
//! NELI_BLESS=1 to regenerate them. Each subcommand has a page of its own
//! (neli-run-status.1 ...), and every page has EXIT STATUS and ENVIRONMENT
//! sections, written here.

use std::path::Path;

use clap::CommandFactory;
use neli_run::for_tests::Cli;
use roff::{bold, roman, Roff};

fn check(path: &Path, fresh: &[u8], stale: &mut Vec<String>) {
    if std::env::var_os("NELI_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, fresh).unwrap();
    } else if std::fs::read(path).ok().as_deref() != Some(fresh) {
        stale.push(path.display().to_string());
    }
}

/// What the command's environment holds and what neli-run reads.
const RUN_ENVIRONMENT: &[(&str, &str)] = &[
    ("NELI_*", "Each option's variable, as listed with it above: the option's value when the flag is not given."),
    (
        "NELI_KAFKA_PROPERTIES",
        "librdkafka properties as a ';'-separated list (\\; for a ';' in a value, \\\\ for a backslash); -X wins.",
    ),
    ("RUST_LOG", "Log filter (tracing's EnvFilter syntax); overrides -v and -q."),
    ("NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID", "systemd's notify protocol and watchdog (Type=notify)."),
    (
        "The command receives",
        "NELI_GROUP, NELI_TOPIC, NELI_NAME, NELI_BROKERS and NELI_FENCING_TOKEN; NELI_ATTEMPT and NELI_WAVE for a \
         wave's run (cron, --once-within); NELI_ATTEMPT and NELI_DUE for a scheduled run (--every, --cron). Every \
         variable above that neli-run reads (the options', NELI_KAFKA_PROPERTIES, systemd's) is removed from its \
         environment.",
    ),
];

const READER_ENVIRONMENT: &[(&str, &str)] = &[
    ("NELI_*", "Each option's variable, as listed with it above."),
    ("NELI_KAFKA_PROPERTIES", "librdkafka properties as a ';'-separated list; -X wins."),
    ("RUST_LOG", "Log filter; overrides -v and -q."),
];

const RUN_EXIT: &[(&str, &str)] = &[
    ("the command's", "The command ended the run; a member that did not run it exits with its wave's run's status."),
    ("128+N", "The command was killed by signal N (143 after a graceful SIGTERM)."),
    ("0", "A standby (no command running) was asked to stop."),
    ("2", "Usage error: a bad flag, duration, address, or unsafe timing."),
    ("70", "Internal error."),
    ("75", "Not leader within --acquire-timeout."),
    ("77", "Kafka denied access (authentication or authorization)."),
    ("78", "Kafka configuration rejected (an unknown property, or a value librdkafka refuses)."),
    ("126, 127", "The command is not executable, or not found (checked before joining)."),
];

const STATUS_EXIT: &[(&str, &str)] = &[
    ("0", "A fresh leader exists (also: stdout was closed, e.g. | head -1)."),
    ("1", "No fresh leader, or no topic yet (no member has run)."),
    ("2", "Usage error."),
    ("69", "Kafka unreachable (closed port, DNS, TLS handshake)."),
    ("70", "Internal error."),
    ("74", "stdout could not be written (other than closed)."),
    ("77", "Authentication failed or access denied."),
    ("78", "Kafka client configuration rejected."),
];

const YIELD_EXIT: &[(&str, &str)] = &[
    ("0", "Leadership moved to another member."),
    ("1", "It did not: no fresh leader, --name does not lead, or nobody took over within --timeout."),
    ("2", "Usage error (also --timeout over 24h)."),
    ("69, 70, 74, 78", "As for neli-run status."),
    ("77", "As for neli-run status; also no WRITE on the topic."),
];

const BROKER_EXIT: &[(&str, &str)] = &[
    ("0", "Stopped by SIGINT or SIGTERM."),
    ("2", "Usage error: a bad --listen or --sasl-user, or the address is in use."),
    ("70", "Internal error."),
];

fn section(roff: &mut Roff, title: &str, items: &[(&str, &str)]) {
    roff.control("SH", [title]);
    for (term, text) in items {
        roff.control("TP", []).text([bold(*term)]).text([roman(*text)]);
    }
}

/// A page: clap_mangen's sections, then ours, then the version.
fn page(cmd: &clap::Command, exit: &[(&str, &str)], environment: &[(&str, &str)]) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out).unwrap();
    man.render_name_section(&mut out).unwrap();
    man.render_synopsis_section(&mut out).unwrap();
    man.render_description_section(&mut out).unwrap();
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out).unwrap();
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out).unwrap();
    }
    let mut roff = Roff::new();
    section(&mut roff, "EXIT STATUS", exit);
    section(&mut roff, "ENVIRONMENT", environment);
    roff.to_writer(&mut out).unwrap();
    if cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some() {
        man.render_extra_section(&mut out).unwrap();
    }
    if cmd.get_version().is_some() || cmd.get_long_version().is_some() {
        man.render_version_section(&mut out).unwrap();
    }
    out
}

#[test]
fn man_pages_and_completions_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();

    // No `help` subcommand page: `neli-run help X` is `neli-run X --help`.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    check(&root.join("man/neli-run.1"), &page(&cmd, RUN_EXIT, RUN_ENVIRONMENT), &mut stale);
    let mut pages = vec!["neli-run.1".to_string()];
    for sub in cmd.get_subcommands() {
        let (exit, environment) = match sub.get_name() {
            "status" => (STATUS_EXIT, READER_ENVIRONMENT),
            "yield" => (YIELD_EXIT, READER_ENVIRONMENT),
            "dev-broker" => (BROKER_EXIT, READER_ENVIRONMENT),
            other => panic!("no EXIT STATUS written for the subcommand {other}"),
        };
        let file = format!("{}.1", sub.get_display_name().expect("built: neli-run-NAME"));
        check(&root.join("man").join(&file), &page(sub, exit, environment), &mut stale);
        pages.push(file);
    }
    // Every page the main page cites exists, and no page is left over.
    let main = String::from_utf8(std::fs::read(root.join("man/neli-run.1")).unwrap()).unwrap();
    for sub in cmd.get_subcommands() {
        let cited = format!("{}-{}(1)", cmd.get_name(), sub.get_name()).replace('-', "\\-");
        assert!(main.contains(&cited), "neli-run.1 cites {cited}");
    }
    for entry in std::fs::read_dir(root.join("man")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(pages.contains(&name), "man/{name} is not generated: remove it");
    }

    use clap_complete::Shell;
    for (shell, file) in [(Shell::Bash, "neli-run.bash"), (Shell::Zsh, "_neli-run"), (Shell::Fish, "neli-run.fish")] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "neli-run", &mut out);
        check(&root.join("completions").join(file), &out, &mut stale);
    }
    assert!(stale.is_empty(), "stale generated files {stale:?}: run NELI_BLESS=1 cargo test --test tests docs");
}
