//! A seat as the shell holds it: one command, elected on one partition of
//! the group's topic (one per NELI role, `leader::Settings::seats`; the
//! single leader's on partition 0).
//!
//! The member's part of the shell (Kafka, signals, the health check, hooks,
//! metrics, systemd) stays in `Shell`; a seat owns what one command needs:
//! its supervisor (the command, its shim and lease), its `--warm` adapter,
//! and the release that its revoke's rebalance callback waits for. The
//! core's actions name their seat by partition (`Action::partition`), and a
//! command's exit comes back through its own seat's supervisor: the reaper
//! routes each status by pid to the shim that owns it, and a seat's kill
//! reaches only what is below its own shim.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::SyncSender;
use std::task::Poll;

use super::supervisor::Supervisor;
use super::warm::{self, Warm};
use crate::config::Config;
use crate::exit::{ChildStatus, Failure};
use crate::leader::Partition;

/// One command's part of the shell.
pub(super) struct Seat {
    pub(super) child: Supervisor,
    /// `--warm`: the command runs all the time and is told when it leads.
    pub(super) warm: Option<Warm>,
    /// The rebalance callback that a revoke of this seat's partition
    /// blocks, until the core releases it (the command is gone).
    release: Option<SyncSender<()>>,
}

/// What a seat heard, beside the loop's other inputs.
pub(super) enum Heard {
    /// Its command's whole tree is gone, with the command's status.
    Exited(ChildStatus),
    /// `--warm`: a write of its token file is done (its number, how it went).
    Written(u64, std::io::Result<()>),
}

impl Seat {
    /// Every seat `cfg` runs, by partition: one command each, none started.
    pub(super) fn all(cfg: &Config) -> Result<BTreeMap<Partition, Seat>, Failure> {
        cfg.leader.seats().map(|partition| Ok((partition, Seat::new(cfg, partition)?))).collect()
    }

    /// The seat on `partition`, its command not started.
    pub(super) fn new(cfg: &Config, partition: Partition) -> Result<Seat, Failure> {
        let mut child = Supervisor::new(cfg, partition);
        let warm = Warm::new(cfg, &mut child)?;
        Ok(Seat { child, warm, release: None })
    }

    /// Keeps the release of a revoke of this seat's partition. One
    /// rebalance callback runs at a time (on the consumer thread), and it
    /// returns before another revoke of the same partition can come: a
    /// release still kept then is spent, and dropping it changes nothing.
    pub(super) fn hold(&mut self, release: SyncSender<()>) {
        self.release = Some(release);
    }

    /// Lets the rebalance callback that waits for this seat return: the
    /// core says its command is gone.
    pub(super) fn release(&mut self) {
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
    }
}

/// One seat's wait in `heard`.
type Wait<'a> = Pin<Box<dyn Future<Output = (Partition, Heard)> + 'a>>;

/// The next thing any seat hears, with its partition (never ends while no
/// seat has anything to say). Cancel-safe, as each seat's waits are.
pub(super) async fn heard(seats: &mut BTreeMap<Partition, Seat>) -> (Partition, Heard) {
    // Only a seat with a command (or its leftovers) or a warm token file
    // can hear anything: a big group's member owns few of its seats.
    let mut waits: Vec<Wait<'_>> = seats
        .iter_mut()
        .filter(|(_, seat)| !seat.child.is_idle() || seat.warm.is_some())
        .map(|(&partition, seat)| -> Wait<'_> {
            Box::pin(async move {
                tokio::select! {
                    Some(status) = seat.child.exited() => (partition, Heard::Exited(status)),
                    Some((n, done)) = warm::written(&mut seat.warm) => (partition, Heard::Written(n, done)),
                    else => std::future::pending().await,
                }
            })
        })
        .collect();
    std::future::poll_fn(move |cx| {
        for wait in waits.iter_mut() {
            if let Poll::Ready(heard) = wait.as_mut().poll(cx) {
                return Poll::Ready(heard);
            }
        }
        Poll::Pending
    })
    .await
}
