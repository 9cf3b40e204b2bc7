//! Exit statuses: the child's, passed on, and neli-run's own failures, each
//! kind mapped to its status in one place (`Kind::code`), and what each
//! status means to a user in one table (`STATUSES`), from which the man
//! pages' EXIT STATUS sections and `--help`'s exit lists are generated and
//! against which the README's table is checked (tests/docs.rs). No other
//! help text states an exit status (tests/docs.rs checks that too).

use std::fmt;

/// What kind of failure ends neli-run on its own account (not the
/// command's): each kind has one exit status, in `code`, the one place that
/// maps failures to statuses (as ripgrep's main does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `status` and `yield`: no member leads (or not the one named), the
    /// answer rather than an error, as grep's 1 is; `pause` and `resume`:
    /// no owner of partition 0 acknowledged.
    NoLeader,
    /// A bad flag, duration, property or unsafe timing (clap uses 2 too).
    Usage,
    /// `status` and `yield`: Kafka could not be reached.
    Unavailable,
    /// `status` and `yield`: stdout could not be written (a closed pipe is
    /// not that: it ends quietly).
    Io,
    /// Not leader within `--acquire-timeout`: try again later.
    AcquireTimeout,
    /// Kafka refused us: authentication or authorization.
    Denied,
    /// Kafka configuration rejected, or a fatal client error.
    KafkaConfig,
    /// neli-run could not do its own work.
    Internal,
    /// The command is not executable (as shells and tini report it).
    NotExecutable,
    /// The command was not found (as shells and tini report it).
    NotFound,
}

impl Kind {
    /// The exit status: `sysexits.h` where it has a word for it, so that
    /// scripts and systemd units can tell the kinds apart; the shell's for
    /// a command that cannot run. `STATUSES` says what each means.
    pub fn code(self) -> u8 {
        match self {
            Kind::NoLeader => 1,
            Kind::Usage => 2,
            Kind::Unavailable => 69,
            Kind::Internal => 70,
            Kind::Io => 74,
            Kind::AcquireTimeout => 75,
            Kind::Denied => 77,
            Kind::KafkaConfig => 78,
            Kind::NotExecutable => 126,
            Kind::NotFound => 127,
        }
    }
}

impl Kind {
    /// Every kind, so that a test can hold `STATUSES` to one row each.
    pub const ALL: [Kind; 10] = [
        Kind::NoLeader,
        Kind::Usage,
        Kind::Unavailable,
        Kind::Io,
        Kind::AcquireTimeout,
        Kind::Denied,
        Kind::KafkaConfig,
        Kind::Internal,
        Kind::NotExecutable,
        Kind::NotFound,
    ];
}

/// A status neli-run can end with: one passed on from the command, or one
/// of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// The command's own exit status, passed on (`ChildStatus::Exited`).
    Command,
    /// 128+N for a command killed by signal N (`ChildStatus::Signaled`).
    Signal,
    /// 0 when neli-run itself ends well.
    Success,
    /// A failure of neli-run's own, with its kind's status.
    Failure(Kind),
}

impl Code {
    /// How the status is written in a table: a number, or what stands for one.
    pub fn label(self) -> String {
        match self {
            Code::Command => "the command's".to_string(),
            Code::Signal => "128+N".to_string(),
            Code::Success => "0".to_string(),
            Code::Failure(kind) => kind.code().to_string(),
        }
    }
}

/// What one status means for each of neli-run's commands (None: that command
/// never ends with it). Backquotes mark flags and commands, as in Markdown.
#[derive(Clone, Copy, Debug)]
pub struct Status {
    pub code: Code,
    /// `neli-run [OPTIONS] -- COMMAND`: a member.
    pub run: Option<&'static str>,
    /// `neli-run status`.
    pub status: Option<&'static str>,
    /// `neli-run yield`.
    pub yield_: Option<&'static str>,
    /// `neli-run pause` and `resume`.
    pub pause: Option<&'static str>,
    /// `neli-run drain` and `undrain`.
    pub drain: Option<&'static str>,
    /// `neli-run dev-broker`.
    pub dev_broker: Option<&'static str>,
    /// `neli-run dev-broker event`.
    pub event: Option<&'static str>,
    /// `neli-run cron check`.
    pub cron: Option<&'static str>,
    /// `neli-run history` (and `cron history`, its view of one job).
    pub runs: Option<&'static str>,
    /// `neli-run logs`.
    pub logs: Option<&'static str>,
    /// `neli-run cron pause` and `cron resume`.
    pub job_pause: Option<&'static str>,
    /// `neli-run cron trigger`.
    pub trigger: Option<&'static str>,
    /// `neli-run console`.
    pub console: Option<&'static str>,
}

/// The one exit-status table: the man pages and the README are generated
/// from it or checked against it, so a status means the same everywhere.
pub const STATUSES: &[Status] = &[
    Status {
        code: Code::Command,
        run: Some(
            "The command ended the run (`--restart never`, or `on-failure` after a success); a member that did \
             not run it exits with the status of its wave's run.",
        ),
        status: None,
        yield_: None,
        pause: None,
        drain: None,
        dev_broker: None,
        event: None,
        cron: None,
        runs: None,
        logs: None,
        job_pause: None,
        trigger: None,
        console: None,
    },
    Status {
        code: Code::Signal,
        run: Some("The command was killed by signal N (143 after a graceful SIGTERM)."),
        status: None,
        yield_: None,
        pause: None,
        drain: None,
        dev_broker: None,
        event: None,
        cron: None,
        runs: None,
        logs: None,
        job_pause: None,
        trigger: None,
        console: None,
    },
    Status {
        code: Code::Success,
        run: Some("A standby (no command running), or a `--never-lead` member, was asked to stop."),
        status: Some("A fresh leader exists (also: stdout was closed, e.g. `| head -1`)."),
        yield_: Some("Leadership moved to another member."),
        pause: Some("The owner of partition 0 acknowledged it (with `--stop`: its command is gone)."),
        drain: Some("The member said it is drained, its commands gone (`undrain`: back in the group), or it was so already."),
        dev_broker: Some("Stopped by SIGINT or SIGTERM."),
        event: Some("The event was made (the line printed says what it did)."),
        cron: Some("Every job line is fine (warnings may be printed)."),
        runs: Some("The runs were printed, or none matched (also: stdout was closed)."),
        logs: Some("The run's output was printed (with `--follow`: until interrupted; also: stdout was closed)."),
        job_pause: Some("The job's owner acknowledged it (with `--stop`: its run is gone)."),
        trigger: Some("The job's owner started the run (also: stdout was closed)."),
        console: Some("Stopped by SIGINT or SIGTERM."),
    },
    Status {
        code: Code::Failure(Kind::NoLeader),
        run: None,
        status: Some(
            "No fresh leader, or no topic yet (no member has run); with `--roles`, a role led by nobody or by a \
             member whose `--roles` does not reach it (the members that disagree are named); with `--crontab`, a \
             job owned by a member whose file lacks it, or by nobody, while some member's file has it (a job no \
             member's file has is shown removed, and does not count).",
        ),
        yield_: Some(
            "It did not move: no fresh leader, `--name` does not lead, or nobody took over within `--timeout`.",
        ),
        pause: Some(
            "Nobody acknowledged within `--timeout` (no member owns partition 0: the request stands and the next \
             owner honours it), or no topic yet.",
        ),
        drain: Some(
            "The member is not live, no other member may take over (without `--force`), it did not acknowledge \
             within `--timeout` (is it still running?), or no topic yet.",
        ),
        dev_broker: None,
        event: None,
        cron: None,
        runs: Some("No run recorded yet: the group has no runs topic (no member has run its command since runs are recorded), or the group is misnamed (the message says whether its own topic exists); of a crontab job (`--job`, `cron history`): no run of it is recorded and no member placed a job of that name (the group's jobs are named), or no topic yet."),
        logs: Some("No such run: none recorded of that role or job (or no runs topic), it is still running or has no end, or its member kept no output (`--keep-output 0`); the message says which."),
        job_pause: Some("No member placed a job of that name (the group's jobs are named), or nobody acknowledged within `--timeout` (the request stands and the job's next owner honours it)."),
        trigger: Some("No member placed a job of that name (the group's jobs are named), or no run started within `--timeout` (the trigger stands: the job's owner, or its next, runs it once)."),
        console: None,
    },
    Status {
        code: Code::Failure(Kind::Usage),
        run: Some("Usage error: a bad flag, duration, address, or unsafe timing; `{role}` in the command without `--roles`; a `--crontab` file refused (as `cron check` refuses it)."),
        status: Some("Usage error."),
        yield_: Some(
            "Usage error (also `--timeout` over 24h), or the group runs roles (`--roles`): `yield` moves a single \
             leader; `drain` moves a member's roles.",
        ),
        pause: Some("Usage error (also `--timeout` over 24h)."),
        drain: Some("Usage error (also an empty MEMBER, or `--timeout` over 24h)."),
        dev_broker: Some("Usage error: a bad `--listen` or `--sasl-user`, or the address is in use."),
        event: Some("Refused (the reason is said), or no dev broker at `--control`."),
        cron: Some(
            "A line is refused (each printed as FILE:LINE:COLUMN), the file holds no job, or it is refused whole: \
             unreadable, writable by another user, not a regular file, or over 1 MiB.",
        ),
        runs: Some("Usage error (also a `--since` that is neither a duration nor an RFC 3339 time)."),
        logs: Some("Usage error (also an `--at` that is neither a duration nor an RFC 3339 time, or no `--role`/`--job` for a group of roles or jobs)."),
        job_pause: Some("Usage error (also `--timeout` over 24h)."),
        trigger: Some("Usage error (also `--timeout` over 24h)."),
        console: Some("Usage error: a bad `--listen` or one in use, an address beyond loopback without a token (`--token-file` or NELI_CONSOLE_TOKEN), or a token file unreadable or empty."),
    },
    Status {
        code: Code::Failure(Kind::Unavailable),
        run: None,
        status: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        yield_: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        pause: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        drain: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        dev_broker: None,
        event: None,
        cron: None,
        runs: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        logs: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        job_pause: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        trigger: Some("Kafka unreachable (closed port, DNS, TLS handshake)."),
        console: None,
    },
    Status {
        code: Code::Failure(Kind::Internal),
        run: Some("Internal error."),
        status: Some("Internal error."),
        yield_: Some("Internal error."),
        pause: Some("Internal error."),
        drain: Some("Internal error."),
        dev_broker: Some("Internal error."),
        event: Some("Internal error (the control socket failed mid-answer)."),
        cron: None,
        runs: Some("Internal error."),
        logs: Some("Internal error."),
        job_pause: Some("Internal error."),
        trigger: Some("Internal error."),
        console: Some("Internal error."),
    },
    Status {
        code: Code::Failure(Kind::Io),
        run: None,
        status: Some("stdout could not be written (other than closed)."),
        yield_: Some("stdout could not be written (other than closed)."),
        pause: Some("stdout could not be written (other than closed)."),
        drain: Some("stdout could not be written (other than closed)."),
        dev_broker: None,
        event: None,
        cron: Some("stdout could not be written (other than closed)."),
        runs: Some("stdout could not be written (other than closed)."),
        logs: Some("stdout could not be written (other than closed)."),
        job_pause: Some("stdout could not be written (other than closed)."),
        trigger: Some("stdout could not be written (other than closed)."),
        console: None,
    },
    Status {
        code: Code::Failure(Kind::AcquireTimeout),
        run: Some("Not leader within `--acquire-timeout`."),
        status: None,
        yield_: None,
        pause: None,
        drain: None,
        dev_broker: None,
        event: None,
        cron: None,
        runs: None,
        logs: None,
        job_pause: None,
        trigger: None,
        console: None,
    },
    Status {
        code: Code::Failure(Kind::Denied),
        run: Some("Kafka denied access (authentication or authorization)."),
        status: Some("Authentication failed (wrong password, mechanism) or access denied."),
        yield_: Some("Authentication failed or access denied, also no WRITE on the topic."),
        pause: Some("Authentication failed or access denied, also no WRITE on the topic."),
        drain: Some("Authentication failed or access denied, also no WRITE on the topic."),
        dev_broker: None,
        event: None,
        cron: None,
        runs: Some("Authentication failed or access denied (it needs READ and DESCRIBE on the runs topic; of a crontab job, READ on the group's topic too)."),
        logs: Some("Authentication failed or access denied (it needs READ and DESCRIBE on the runs topic)."),
        job_pause: Some("Authentication failed or access denied, also no WRITE on the topic."),
        trigger: Some("Authentication failed or access denied, also no WRITE on the topic."),
        console: None,
    },
    Status {
        code: Code::Failure(Kind::KafkaConfig),
        run: Some(
            "Kafka configuration rejected (an unknown property, or a value librdkafka refuses), or the group's topic \
             has fewer partitions than `--roles` needs or, with `--roles` above 1, more than it uses.",
        ),
        status: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        yield_: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        pause: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        drain: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        dev_broker: None,
        event: None,
        cron: None,
        runs: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        logs: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        job_pause: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        trigger: Some("Kafka client configuration rejected (an unknown `-X` property)."),
        console: None,
    },
    Status {
        code: Code::Failure(Kind::NotExecutable),
        run: Some("The command is not executable (checked before joining)."),
        status: None,
        yield_: None,
        pause: None,
        drain: None,
        dev_broker: None,
        event: None,
        cron: None,
        runs: None,
        logs: None,
        job_pause: None,
        trigger: None,
        console: None,
    },
    Status {
        code: Code::Failure(Kind::NotFound),
        run: Some("The command is not found, or empty (checked before joining)."),
        status: None,
        yield_: None,
        pause: None,
        drain: None,
        dev_broker: None,
        event: None,
        cron: None,
        runs: None,
        logs: None,
        job_pause: None,
        trigger: None,
        console: None,
    },
];

/// The meaning of each status for one of neli-run's commands, named as the
/// command line spells it: "" for running a command, "status", "dev-broker
/// event" ... (a name it does not know has none).
pub fn meanings(command: &str) -> fn(&Status) -> Option<&'static str> {
    match command {
        "" => |s| s.run,
        "status" => |s| s.status,
        "yield" => |s| s.yield_,
        "pause" | "resume" => |s| s.pause,
        "drain" | "undrain" => |s| s.drain,
        "dev-broker" => |s| s.dev_broker,
        "dev-broker event" => |s| s.event,
        "cron" | "cron check" => |s| s.cron,
        "history" | "cron history" => |s| s.runs,
        "logs" => |s| s.logs,
        "cron pause" | "cron resume" => |s| s.job_pause,
        "cron trigger" => |s| s.trigger,
        "console" => |s| s.console,
        _ => |_| None,
    }
}

/// `--help`'s list of the exit statuses of `command` (see `meanings`), from
/// `STATUSES` as the man pages' EXIT STATUS sections are.
pub fn help(command: &str) -> String {
    let meaning = meanings(command);
    let rows: Vec<(String, &str)> = STATUSES.iter().filter_map(|s| Some((s.code.label(), meaning(s)?))).collect();
    let width = rows.iter().map(|(label, _)| label.len()).max().unwrap_or(0);
    let mut out = String::from("Exit status:");
    for (label, text) in rows {
        out += &format!("\n  {label:width$}  {}", text.replace('`', ""));
    }
    out
}

/// A failure: its kind, and a message that says what to do about it.
/// (Display and Error by hand, not thiserror's derive: the shim compiles
/// this file too, and links nothing it does not need.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into() }
    }

    /// The exit status it ends neli-run with.
    pub fn code(&self) -> u8 {
        self.kind.code()
    }
}

/// How the child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildStatus {
    /// It called exit with this code.
    Exited(u8),
    /// A signal killed it.
    Signaled(i32),
}

impl ChildStatus {
    /// The status neli-run passes on: the code, or 128+N for signal N.
    pub fn code(self) -> u8 {
        match self {
            ChildStatus::Exited(code) => code,
            ChildStatus::Signaled(sig) => 128u8.wrapping_add(sig as u8),
        }
    }

    /// Whether `--restart on-failure` counts it as a success.
    pub fn success(self) -> bool {
        self == ChildStatus::Exited(0)
    }
}

impl fmt::Display for ChildStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChildStatus::Exited(code) => write!(f, "exit code {code}"),
            ChildStatus::Signaled(sig) => match nix::sys::signal::Signal::try_from(sig) {
                Ok(s) => write!(f, "killed by {s}"),
                Err(_) => write!(f, "killed by signal {sig}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_deaths_map_to_128_plus_n() {
        assert_eq!(ChildStatus::Signaled(9).code(), 137);
        assert_eq!(ChildStatus::Signaled(15).code(), 143);
        assert_eq!(ChildStatus::Exited(3).code(), 3);
        assert!(ChildStatus::Exited(0).success());
        assert!(!ChildStatus::Signaled(15).success());
        assert_eq!(ChildStatus::Signaled(15).to_string(), "killed by SIGTERM");
    }

    #[test]
    fn every_kind_has_one_row_and_its_own_status() {
        for kind in Kind::ALL {
            let rows = STATUSES.iter().filter(|s| s.code == Code::Failure(kind)).count();
            assert_eq!(rows, 1, "{kind:?} has {rows} rows in STATUSES");
            let same = Kind::ALL.iter().filter(|k| k.code() == kind.code()).count();
            assert_eq!(same, 1, "{kind:?} shares its status {}", kind.code());
        }
        // A new kind stops this match compiling: list it in ALL and STATUSES too.
        for kind in Kind::ALL {
            match kind {
                Kind::NoLeader
                | Kind::Usage
                | Kind::Unavailable
                | Kind::Io
                | Kind::AcquireTimeout
                | Kind::Denied
                | Kind::KafkaConfig
                | Kind::Internal
                | Kind::NotExecutable
                | Kind::NotFound => {}
            }
        }
        for name in ["", "status", "yield", "pause", "resume", "dev-broker", "dev-broker event"] {
            assert!(STATUSES.iter().any(|s| meanings(name)(s).is_some()), "no status for {name:?}");
        }
        let codes: Vec<String> = STATUSES.iter().map(|s| s.code.label()).collect();
        let unique: std::collections::BTreeSet<&String> = codes.iter().collect();
        assert_eq!(unique.len(), codes.len(), "a status twice in STATUSES: {codes:?}");
    }
}
