//! Exit statuses: the child's, passed on, and neli-run's own failures, each
//! kind mapped to its status in one place (`Kind::code`).

use std::fmt;

/// What kind of failure ends neli-run on its own account (not the
/// command's): each kind has one exit status, in `code`, the one place that
/// maps failures to statuses (as ripgrep's main does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `status` and `yield`: no member leads (or not the one named), the
    /// answer rather than an error, as grep's 1 is.
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
    /// a command that cannot run. The README keeps the table.
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

/// A failure: its kind, and a message that says what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

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
}
