//! The environment of what neli-run starts (the command, a crontab's job,
//! the hooks and the health check): one rule, in one place.
//!
//! - What neli-run sets wins: `NELI_GROUP`, `NELI_TOPIC` ... ([`GIVEN`])
//!   are set afresh for each start (the group's: `Config::given_env`), and
//!   a crontab cannot assign them.
//! - Every variable neli-run owns ([`removed`]: those it sets, every
//!   option's `NELI_*`, `NELI_KAFKA_PROPERTIES`, systemd's notify and
//!   watchdog variables) is removed from what the caller gave neli-run
//!   before a start, so a run sees only those set for it: a single
//!   leader's command never sees a `NELI_ROLE`, `NELI_DUE` or
//!   `NELI_TOKEN_FILE` left by whatever started neli-run (audit E8: a job
//!   or hook that starts another neli-run passed its own on), and
//!   `NOTIFY_SOCKET` stays neli-run's to answer.
//! - Any other variable, `NELI_`-prefixed or not, passes as cron passes
//!   it: the caller's, and a crontab's assignments above the job.
//!
//! The list is built once (the options' variables are read from clap's
//! definition, so a new option's variable is removed without a word here).

use std::ffi::OsString;
use std::sync::OnceLock;

/// What neli-run sets for some run of a command, hook or check. Not every
/// run gets each (NELI_ROLE only under --roles, NELI_DUE only for a
/// scheduled run ...): one that does not get it set has it removed.
pub const GIVEN: &[&str] = &[
    "NELI_GROUP",
    "NELI_TOPIC",
    "NELI_NAME",
    "NELI_BROKERS",
    "NELI_FENCING_TOKEN",
    "NELI_TOKEN_FILE",
    "NELI_ATTEMPT",
    "NELI_WAVE",
    "NELI_DUE",
    "NELI_ROLE",
    "NELI_ROLES",
    "NELI_JOB",
    "NELI_HOOK",
    "NELI_REASON",
    "NELI_EXIT_STATUS",
    "NELI_EXIT_CODE",
    "NELI_SIGNAL",
    "NELI_FAILURES",
    "NELI_RUN",
    "NELI_HOST",
    "NELI_STARTED_AT",
    "NELI_ENDED_AT",
    "NELI_DURATION_MS",
];

/// What neli-run reads beside its options' variables: librdkafka's
/// properties (a password, maybe) and systemd's protocol, ours to answer.
const READ: &[&str] = &["NELI_KAFKA_PROPERTIES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// Every variable neli-run owns, removed from the caller's environment
/// before anything neli-run starts: [`GIVEN`], what it reads, and each
/// option's variable (every subcommand's).
pub fn removed() -> &'static [OsString] {
    static REMOVED: OnceLock<Vec<OsString>> = OnceLock::new();
    REMOVED.get_or_init(|| {
        fn walk(cmd: &clap::Command, out: &mut Vec<OsString>) {
            out.extend(cmd.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_os_string()));
            cmd.get_subcommands().for_each(|sub| walk(sub, out));
        }
        let mut names: Vec<OsString> = GIVEN.iter().chain(READ).map(OsString::from).collect();
        walk(&<crate::cli::Cli as clap::CommandFactory>::command(), &mut names);
        names.sort();
        names.dedup();
        names
    })
}

/// Whether `name` is neli-run's: a crontab's assignment of it is not
/// passed to the job (neli-run's value, or none, is what the job gets).
pub fn reserved(name: &str) -> bool {
    removed().iter().any(|n| n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_neli_run_sets_reads_or_takes_as_an_option_is_reserved() {
        for name in GIVEN.iter().chain(READ).chain(&["NELI_RESTART_DELAY", "NELI_YIELD_TO", "NELI_CRONTAB"]) {
            assert!(reserved(name), "{name}");
        }
        for name in ["PATH", "HOME", "NELI_MY_OWN", "MAILTO", "SHELL", "CRON_TZ"] {
            assert!(!reserved(name), "{name}");
        }
    }

    /// Each `NELI_*` variable the sources set for a start (`"NELI_X".into()`,
    /// `("NELI_X", ...)`, `set_env("NELI_X"`) is in GIVEN: a new one that is
    /// not would reach a run that does not set it from neli-run's caller.
    #[test]
    fn every_variable_the_shell_sets_is_given() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/shell");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for (at, _) in text.match_indices("(\"NELI_") {
                let name: String = text[at + 2..].chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                assert!(GIVEN.contains(&name.as_str()), "{name} is set for a start but not in GIVEN");
            }
        }
    }
}
