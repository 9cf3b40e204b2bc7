//! Exit statuses: the child's, and neli-run's own codes for the outcomes that
//! are not the child's. The numbers follow `sysexits.h` so that scripts and
//! systemd units can tell them apart; the README keeps the table.

use std::fmt;

/// Usage error: a bad flag, duration or unsafe timing (clap uses it too).
pub const USAGE: u8 = 2;
/// `status` and `yield`: Kafka could not be reached (EX_UNAVAILABLE).
pub const UNAVAILABLE: u8 = 69;
/// `status` and `yield`: stdout could not be written (EX_IOERR; a closed
/// pipe is not that, it ends quietly).
pub const IOERR: u8 = 74;
/// Not leader within `--acquire-timeout` (EX_TEMPFAIL: try again later).
pub const ACQUIRE_TIMEOUT: u8 = 75;
/// Kafka refused us: authentication or authorization (EX_NOPERM).
pub const KAFKA_DENIED: u8 = 77;
/// Kafka configuration rejected, or a fatal client error (EX_CONFIG).
pub const KAFKA_CONFIG: u8 = 78;
/// The command is not executable (as shells and tini report it).
pub const NOT_EXECUTABLE: u8 = 126;
/// The command was not found (as shells and tini report it).
pub const NOT_FOUND: u8 = 127;
/// An internal error: neli-run could not do its own work (EX_SOFTWARE).
pub const INTERNAL: u8 = 70;

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
