//! The signals neli-run answers, as streams the shell's `select!` waits on.

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

use crate::leader::{self, Input};

/// The signals neli-run handles, as streams.
pub(super) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    forwarded: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    pub(super) fn new() -> std::io::Result<Signals> {
        let forwarded = [
            (Signal::SIGHUP, SignalKind::hangup()),
            (Signal::SIGUSR1, SignalKind::user_defined1()),
            (Signal::SIGUSR2, SignalKind::user_defined2()),
            (Signal::SIGWINCH, SignalKind::window_change()),
        ];
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            forwarded: forwarded
                .into_iter()
                .map(|(sig, kind)| Ok((sig, signal(kind)?)))
                .collect::<std::io::Result<_>>()?,
        })
    }

    /// The next SIGTERM or SIGINT, where nothing else is asked of us.
    pub(super) async fn shutdown(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// The next shutdown or forwarded signal, as core input.
    pub(super) async fn next(&mut self) -> Input {
        let forwarded = any_of(&mut self.forwarded);
        tokio::select! {
            _ = self.term.recv() => Input::Shutdown,
            _ = self.int.recv() => Input::Shutdown,
            sig = forwarded => Input::Forward(leader::Signal(sig as i32)),
        }
    }
}

async fn any_of(streams: &mut [(Signal, tokio::signal::unix::Signal)]) -> Signal {
    std::future::poll_fn(|cx| {
        for (sig, stream) in streams.iter_mut() {
            if stream.poll_recv(cx).is_ready() {
                return std::task::Poll::Ready(*sig);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Sleeps for `d`, or forever if None (no deadline).
pub(super) async fn sleep_for(d: Option<std::time::Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
