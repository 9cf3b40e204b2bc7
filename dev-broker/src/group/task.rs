//! The coordinator task: the one tokio task that holds every group's
//! [`Coordinator`], takes the forwarder's group requests, turns its timer,
//! and sends each response when the machine says it falls due.

use super::{Coordinator, Reply, Request};
use crate::wire::NOT_COORDINATOR;

/// What the coordinator task takes.
pub enum Message {
    /// A group request, with where its response goes.
    Ask(Request, tokio::sync::oneshot::Sender<Vec<u8>>),
    /// Its broker went away (see [`Coordinator::unload`]).
    Unload,
    /// Its groups loaded on a broker (see [`Coordinator::load`]).
    Load,
}

/// Where the forwarder sends group requests: to the one coordinator task
/// ([`spawn`]) that holds every group, whichever connection and broker they
/// came in on (the forwarder answers NOT_COORDINATOR on the others).
pub type CoordinatorTx = tokio::sync::mpsc::UnboundedSender<Message>;

/// Starts the coordinator task; it runs until every sender is gone.
pub fn spawn(initial_delay: std::time::Duration, leave_pause: std::time::Duration) -> CoordinatorTx {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(coordinate(rx, initial_delay, leave_pause));
    tx
}

/// Sends a group request and waits for its answer: None when the
/// coordinator is gone.
pub async fn ask(coordinator: &CoordinatorTx, request: Request) -> Option<Vec<u8>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    coordinator.send(Message::Ask(request, tx)).ok()?;
    rx.await.ok()
}

/// Runs the Kafka-timed group coordinator: requests in, responses out as
/// they fall due, and its timer (joins that time out, sessions that end),
/// which stands still while no broker has its groups loaded.
async fn coordinate(
    mut requests: tokio::sync::mpsc::UnboundedReceiver<Message>,
    initial_delay: std::time::Duration,
    leave_pause: std::time::Duration,
) {
    let start = tokio::time::Instant::now();
    let now = || start.elapsed().as_millis() as u64;
    let mut core =
        Coordinator::new(initial_delay.as_millis() as u64).pausing_after_leaves(leave_pause.as_millis() as u64);
    let mut waiting = std::collections::HashMap::new();
    let mut loaded = true;
    for id in 0u64.. {
        let due = core.next_deadline().filter(|_| loaded).map(|at| start + std::time::Duration::from_millis(at));
        let replies = tokio::select! {
            message = requests.recv() => match message {
                None => return,
                Some(Message::Ask(request, reply)) if !loaded => {
                    let _ = reply.send(request.error(NOT_COORDINATOR));
                    continue;
                }
                Some(Message::Ask(request, reply)) => {
                    tracing::debug!(at_ms = now(), group = %request.group, "{:?}", request.body);
                    waiting.insert(id, reply);
                    core.handle(id, request, now())
                }
                Some(Message::Unload) => {
                    loaded = false;
                    core.unload()
                }
                Some(Message::Load) => {
                    loaded = true;
                    core.load(now())
                }
            },
            _ = async { tokio::time::sleep_until(due.expect("guarded")).await }, if due.is_some() => core.tick(now()),
        };
        for Reply { to, frame } in replies {
            if let Some(reply) = waiting.remove(&to) {
                let _ = reply.send(frame); // a closed connection no longer waits
            }
        }
    }
}
