//! The revoke barrier, keyed by partition. A rebalance that takes seats'
//! partitions from us blocks librdkafka's callback until the command of
//! every one of those seats is gone: the group cannot finish the rebalance,
//! so no other member owns one of them, meanwhile. One release per revoked
//! seat, each its own channel: the shell lets each go on its own when that
//! seat's core says so (`Action::ReleaseRevoke`), and a release the shell
//! dropped (its loop ended: nothing runs) counts as given.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::Duration;

use rdkafka::TopicPartitionList;

use super::Partition;

/// How often a barrier that waits asks whether we are leaving.
const CLOSING_CHECK: Duration = Duration::from_millis(50);

/// The partitions whose owner runs a command here: the roles' (0 to N - 1,
/// `leader::Settings::seats`), or under a fleet crontab every partition of
/// the topic, however many it has: a partition added for a new job while
/// the member runs is a seat as soon as Kafka assigns it (the shell seats
/// it then).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seats {
    /// The seats when the member started.
    pub known: Vec<Partition>,
    /// Every partition is one (`--crontab`).
    pub every: bool,
}

impl Seats {
    /// Whether `partition` of the group's topic is a seat.
    pub fn contains(&self, partition: Partition) -> bool {
        (self.every && partition >= 0) || self.known.contains(&partition)
    }

    /// The seats among `tpl`'s partitions of `topic`, in order.
    pub fn among(&self, tpl: &TopicPartitionList, topic: &str) -> Vec<Partition> {
        let mut seats: Vec<Partition> =
            tpl.elements_for_topic(topic).iter().map(|e| e.partition()).filter(|&p| self.contains(p)).collect();
        seats.sort_unstable();
        seats.dedup();
        seats
    }
}

/// The seats' partitions a revoke of `revoked` takes from us, which the
/// barrier must hold for: none while we leave (the revoke on close must
/// not block), and none when it takes only partitions that are no seat's
/// (a member joining a topic of more partitions may take those): the
/// commands then run on.
pub(super) fn seats_revoked(revoked: &TopicPartitionList, topic: &str, seats: &Seats, closing: bool) -> Vec<Partition> {
    if closing {
        return Vec::new();
    }
    seats.among(revoked, topic)
}

/// The releases a revoke waits for, one per revoked seat's partition.
#[derive(Default)]
pub(super) struct Barrier {
    held: BTreeMap<Partition, Receiver<()>>,
}

impl Barrier {
    /// Holds the barrier for `partition`: it stays closed until the sender
    /// returned is sent to or dropped.
    pub(super) fn hold(&mut self, partition: Partition) -> SyncSender<()> {
        let (release, released) = mpsc::sync_channel(1);
        self.held.insert(partition, released);
        release
    }

    /// The partitions still held, in order.
    #[cfg(test)]
    fn held(&self) -> impl Iterator<Item = Partition> + '_ {
        self.held.keys().copied()
    }

    /// Lets go of every partition released so far (sent to, or its sender
    /// dropped), without waiting; whether none is held any more.
    pub(super) fn settle(&mut self) -> bool {
        self.held.retain(|_, released| matches!(released.try_recv(), Err(TryRecvError::Empty)));
        self.held.is_empty()
    }

    /// Blocks until every partition held is released, or `closing` says we
    /// leave: the shell's loop leaves only once every command is gone, and
    /// may never read the revoke (it picks among ready branches at random,
    /// and a child exit can win over a queued revoke). Asked every
    /// `CLOSING_CHECK` while one is still held.
    pub(super) fn wait(mut self, closing: impl Fn() -> bool) {
        while !self.settle() {
            let Some((&partition, first)) = self.held.first_key_value() else { return };
            match first.recv_timeout(CLOSING_CHECK) {
                Err(RecvTimeoutError::Timeout) => {
                    if closing() {
                        return;
                    }
                }
                Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                    self.held.remove(&partition);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    fn revoke(topic: &str, partitions: &[i32]) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition(topic, p);
        }
        tpl
    }

    #[test]
    fn only_a_revoke_of_a_seats_partition_holds_the_barrier_and_never_while_leaving() {
        let held = |partitions: &[i32], topic, seats: &[i32], closing| {
            let seats = Seats { known: seats.to_vec(), every: false };
            seats_revoked(&revoke(topic, partitions), "g.neli", &seats, closing)
        };
        assert_eq!(held(&[0], "g.neli", &[0], false), [0]);
        assert_eq!(held(&[2, 0, 3], "g.neli", &[0], false), [0]);
        assert_eq!(held(&[1, 2], "g.neli", &[0], false), [0; 0], "other partitions only");
        assert_eq!(held(&[0], "other.neli", &[0], false), [0; 0], "another topic's partition 0");
        assert_eq!(held(&[0], "g.neli", &[0], true), [0; 0], "leaving");
        assert_eq!(held(&[1], "g.neli", &[0], true), [0; 0]);
        // Several seats: each one revoked, and only those.
        assert_eq!(held(&[3, 2, 0, 1], "g.neli", &[0, 1, 2], false), [0, 1, 2]);
        assert_eq!(held(&[2, 5], "g.neli", &[0, 1, 2], false), [2]);
        assert_eq!(held(&[0, 1, 2], "g.neli", &[0, 1, 2], true), [0; 0], "leaving");
        // A fleet crontab: every partition, those added since it started too.
        let every = Seats { known: vec![0, 1], every: true };
        assert_eq!(seats_revoked(&revoke("g.neli", &[5, 1]), "g.neli", &every, false), [1, 5]);
        assert_eq!(seats_revoked(&revoke("other", &[5]), "g.neli", &every, false), [0; 0], "another topic's");
        assert_eq!(seats_revoked(&revoke("g.neli", &[5]), "g.neli", &every, true), [0; 0], "leaving");
        assert!(every.contains(7) && !every.contains(-1));
        assert!(Seats { known: Vec::new(), every: true }.contains(0), "partition 0 too");
        assert!(!Seats { known: vec![0, 1], every: false }.contains(2));
    }

    #[test]
    fn each_partition_is_released_on_its_own_by_a_send_or_a_drop() {
        let mut barrier = Barrier::default();
        let (zero, one, two) = (barrier.hold(0), barrier.hold(1), barrier.hold(2));
        assert!(!barrier.settle());
        assert_eq!(barrier.held().collect::<Vec<_>>(), [0, 1, 2]);
        one.send(()).unwrap();
        assert!(!barrier.settle());
        assert_eq!(barrier.held().collect::<Vec<_>>(), [0, 2], "a release ends its own partition only");
        drop(two);
        assert!(!barrier.settle());
        assert_eq!(barrier.held().collect::<Vec<_>>(), [0], "a dropped release counts as given");
        // Sent to and still held by the shell: released all the same.
        zero.send(()).unwrap();
        assert!(barrier.settle());
        drop((zero, one));
    }

    /// Runs `barrier.wait` on a thread: its end, and the flag it asks.
    fn waiting(barrier: Barrier) -> (mpsc::Receiver<()>, Arc<AtomicBool>) {
        let (done, ended) = mpsc::channel();
        let closing = Arc::new(AtomicBool::new(false));
        let flag = closing.clone();
        std::thread::spawn(move || {
            barrier.wait(|| flag.load(Ordering::Relaxed));
            let _ = done.send(());
        });
        (ended, closing)
    }

    const A_WHILE: Duration = Duration::from_millis(200);

    /// How long a barrier that should end may take to (its thread may wait
    /// for a core on a loaded machine).
    const ENDS: Duration = Duration::from_secs(30);

    #[test]
    fn the_barrier_holds_until_every_revoked_seat_is_released() {
        let mut barrier = Barrier::default();
        let (zero, one, two) = (barrier.hold(0), barrier.hold(1), barrier.hold(2));
        let (ended, _) = waiting(barrier);
        assert!(ended.recv_timeout(A_WHILE).is_err(), "ended with nothing released");
        // The partition the wait sits on first, then a later one while it
        // sits on the next.
        zero.send(()).unwrap();
        assert!(ended.recv_timeout(A_WHILE).is_err(), "ended with partitions 1 and 2 still held");
        two.send(()).unwrap();
        drop(two);
        assert!(ended.recv_timeout(A_WHILE).is_err(), "ended with partition 1 still held");
        one.send(()).unwrap();
        assert!(ended.recv_timeout(ENDS).is_ok(), "every partition released, still held");
        drop((zero, one));
    }

    #[test]
    fn the_barrier_holds_until_the_last_release_is_dropped() {
        let mut barrier = Barrier::default();
        let (zero, two) = (barrier.hold(0), barrier.hold(2));
        let (ended, _) = waiting(barrier);
        assert!(ended.recv_timeout(A_WHILE).is_err(), "ended with nothing released");
        drop(zero);
        assert!(ended.recv_timeout(A_WHILE).is_err(), "ended with partition 2 still held");
        drop(two);
        assert!(ended.recv_timeout(ENDS).is_ok(), "every release dropped, still held");
    }

    #[test]
    fn leaving_ends_the_barrier_with_releases_outstanding() {
        let mut barrier = Barrier::default();
        let _held = (barrier.hold(0), barrier.hold(1));
        let (ended, closing) = waiting(barrier);
        assert!(ended.recv_timeout(A_WHILE).is_err());
        closing.store(true, Ordering::Relaxed);
        // Within a few closing checks, give or take a loaded machine: a
        // barrier deaf to leaving would wait for the releases for good.
        assert!(ended.recv_timeout(ENDS).is_ok(), "leaving, and still held");
    }

    #[test]
    fn an_empty_barrier_does_not_wait_even_for_a_closing_check() {
        // Many of them, timed together: one may lose its core for longer
        // than a closing check on a loaded machine, all of them together
        // do not, while a barrier that waited one check each would take
        // the whole bound.
        const N: u32 = 20;
        let start = Instant::now();
        for _ in 0..N {
            Barrier::default().wait(|| panic!("asked whether we leave with nothing held"));
        }
        assert!(start.elapsed() < CLOSING_CHECK * N, "{:?} for {N} empty barriers", start.elapsed());
    }
}
