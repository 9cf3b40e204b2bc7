//! systemd's notify protocol (`Type=notify`), spoken only when systemd asks
//! for it through NOTIFY_SOCKET: READY=1 once neli-run has joined its group,
//! STATUS= the current role, WATCHDOG=1 at half of WatchdogSec while the run
//! loop is alive (the `--never-lead` member's loop keeps a [`Watchdog`]),
//! STOPPING=1 on the way out. A datagram per message, as
//! sd_notify(3) sends them; failures are ignored as sd_notify's are.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// Where to send notifications, if systemd gave us a socket.
pub struct Notifier {
    socket: UnixDatagram,
    addr: std::os::unix::net::SocketAddr,
}

impl Notifier {
    /// From NOTIFY_SOCKET (a path, or `@name` for an abstract socket).
    pub fn from_env() -> Option<Notifier> {
        let target = std::env::var("NOTIFY_SOCKET").ok()?;
        let addr = match target.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).ok()?
            }
            None => std::os::unix::net::SocketAddr::from_pathname(&target).ok()?,
        };
        Some(Notifier { socket: UnixDatagram::unbound().ok()?, addr })
    }

    /// Sends one notification, e.g. "READY=1".
    pub fn send(&self, message: &str) {
        let _ = self.socket.send_to_addr(message.as_bytes(), &self.addr);
    }

    /// How often to send WATCHDOG=1: half the interval systemd expects, if it
    /// expects one from this process.
    pub fn watchdog_interval() -> Option<Duration> {
        if let Ok(pid) = std::env::var("WATCHDOG_PID") {
            if pid.parse::<u32>().ok()? != std::process::id() {
                return None;
            }
        }
        let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
        (usec > 0).then(|| Duration::from_micros(usec / 2))
    }
}

/// WATCHDOG=1 from a loop that turns without a timer of its own (the
/// `--never-lead` member's; the shell's loop ticks a tokio interval of
/// `Notifier::watchdog_interval` instead): sent when due.
pub struct Watchdog {
    every: Duration,
    last: Option<Instant>,
}

impl Watchdog {
    /// If systemd expects WATCHDOG=1 from this process.
    pub fn from_env() -> Option<Watchdog> {
        Some(Watchdog { every: Notifier::watchdog_interval()?, last: None })
    }

    /// Sends WATCHDOG=1 through `notifier`, if due.
    pub fn beat(&mut self, notifier: &Notifier) {
        if self.last.is_none_or(|last| last.elapsed() >= self.every) {
            notifier.send("WATCHDOG=1");
            self.last = Some(Instant::now());
        }
    }
}
