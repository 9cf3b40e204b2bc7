//! The bell: what a Kafka thread sleeps on between polls. A poll of a
//! librdkafka client cannot be woken, so a thread that polls in slices
//! either answers late (a request of the shell's loop waited for the end of
//! the consumer thread's poll, up to 20 ms of every graceful handover) or
//! wakes often for nothing (a producer thread polling every 100 ms for its
//! delivery reports). Instead each sleeps on a pipe that librdkafka writes
//! to with each event for the client's queue once it was empty
//! (`rd_kafka_queue_io_event_enable`), and that whoever needs the thread
//! writes to as well (a request, a stop). Without a pipe (none could be
//! made) the threads poll in slices, as they did.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use rdkafka::client::Client;
use rdkafka::ClientContext;

/// A pipe to wake one thread with.
pub(super) struct Bell(Option<(OwnedFd, OwnedFd)>);

impl Default for Bell {
    fn default() -> Bell {
        Bell(nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).ok())
    }
}

impl Bell {
    pub(super) fn ring(&self) {
        if let Some((_, write)) = &self.0 {
            // A full pipe already wakes the thread.
            let _ = nix::unistd::write(write, &[1]);
        }
    }

    /// Whether the pipe has something to read within `within` (a bound on
    /// an event, not a timing claim).
    #[cfg(test)]
    pub(super) fn rung_within(&self, within: Duration) -> bool {
        let (read, _) = self.0.as_ref().expect("a pipe");
        let timeout = PollTimeout::try_from(within).expect("a timeout");
        poll(&mut [PollFd::new(read.as_fd(), PollFlags::POLLIN)], timeout).expect("poll") > 0
    }

    /// Waits until rung or `slice` has passed, and empties the pipe.
    fn wait(read: &OwnedFd, slice: Duration) {
        let timeout = PollTimeout::try_from(slice).unwrap_or(PollTimeout::MAX);
        let _ = poll(&mut [PollFd::new(read.as_fd(), PollFlags::POLLIN)], timeout);
        while nix::unistd::read(read, &mut [0; 64]).is_ok_and(|n| n > 0) {}
    }
}

/// A client's queue, with its events ringing a bell: dropped (the ringing
/// stopped) before the pipe can close, since librdkafka would write to
/// whatever file took its number. librdkafka rings once until the queue is
/// polled: whoever waits on it polls until it is empty (`queued`).
pub(super) struct Rung<'a> {
    queue: *mut rdkafka_sys::rd_kafka_queue_t,
    read: &'a OwnedFd,
}

impl<'a> Rung<'a> {
    /// A consumer's queue: its records, rebalances and errors.
    pub(super) fn consumer<C: ClientContext>(client: &Client<C>, bell: &'a Bell) -> Option<Rung<'a>> {
        // SAFETY: a live client; the handle is destroyed on drop.
        Rung::of(unsafe { rdkafka_sys::rd_kafka_queue_get_consumer(client.native_ptr()) }, bell)
    }

    /// A client's main queue: a producer's delivery reports and errors.
    pub(super) fn main<C: ClientContext>(client: &Client<C>, bell: &'a Bell) -> Option<Rung<'a>> {
        // SAFETY: as above.
        Rung::of(unsafe { rdkafka_sys::rd_kafka_queue_get_main(client.native_ptr()) }, bell)
    }

    /// `queue` ringing `bell`. The client must outlive the handle (the
    /// thread that waits holds both); the payload is copied.
    fn of(queue: *mut rdkafka_sys::rd_kafka_queue_t, bell: &'a Bell) -> Option<Rung<'a>> {
        if queue.is_null() {
            return None;
        }
        let Some((read, write)) = bell.0.as_ref() else {
            // SAFETY: a live queue handle, given back once.
            unsafe { rdkafka_sys::rd_kafka_queue_destroy(queue) };
            return None;
        };
        // SAFETY: a live queue handle, and a pipe that outlives this Rung.
        unsafe { rdkafka_sys::rd_kafka_queue_io_event_enable(queue, write.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        Some(Rung { queue, read })
    }

    /// Waits up to `slice` unless an event is queued already, and empties
    /// the pipe.
    pub(super) fn wait(&self, slice: Duration) {
        if self.queued() == 0 {
            Bell::wait(self.read, slice);
        }
    }

    /// How many events wait in the queue.
    pub(super) fn queued(&self) -> usize {
        // SAFETY: a live queue handle.
        unsafe { rdkafka_sys::rd_kafka_queue_length(self.queue) }
    }
}

impl Drop for Rung<'_> {
    fn drop(&mut self) {
        // SAFETY: a live queue handle, given back once.
        unsafe {
            rdkafka_sys::rd_kafka_queue_io_event_enable(self.queue, -1, std::ptr::null(), 0);
            rdkafka_sys::rd_kafka_queue_destroy(self.queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::Offset;

    fn config(
        cluster: &MockCluster<'_, rdkafka::producer::DefaultProducerContext>,
        group: Option<&str>,
    ) -> rdkafka::ClientConfig {
        let mut c = rdkafka::ClientConfig::new();
        c.set("bootstrap.servers", cluster.bootstrap_servers());
        if let Some(group) = group {
            c.set("group.id", group);
        }
        c
    }

    #[test]
    fn a_ring_wakes_the_wait_which_empties_the_pipe() {
        let bell = Bell::default();
        // More than one read takes (64 bytes).
        for _ in 0..100 {
            bell.ring();
        }
        assert!(bell.rung_within(Duration::from_secs(30)));
        let (read, _) = bell.0.as_ref().expect("a pipe");
        Bell::wait(read, Duration::from_secs(600));
        assert!(!bell.rung_within(Duration::ZERO), "the wait empties the pipe");
    }

    /// The consumer thread's wait ends on an event librdkafka queues for
    /// the consumer (here a fetched record, on librdkafka's mock cluster),
    /// not at the end of a slice.
    #[test]
    fn a_record_fetched_rings_the_consumers_bell() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("t", 1, 1).expect("a topic");
        let consumer: BaseConsumer = config(&cluster, Some("g")).create().expect("a consumer");
        let bell = Bell::default();
        let rung = Rung::consumer(consumer.client(), &bell).expect("the queue rings the bell");
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset("t", 0, Offset::Beginning).expect("a partition");
        consumer.assign(&tpl).expect("assigned");
        // Whatever the assignment queued, served, and the pipe emptied.
        while consumer.poll(Duration::ZERO).is_some() || rung.queued() > 0 {}
        rung.wait(Duration::ZERO);
        assert!(!bell.rung_within(Duration::ZERO), "nothing queued");
        let producer: BaseProducer = config(&cluster, None).create().expect("a producer");
        producer.send(BaseRecord::<(), _>::to("t").partition(0).payload("x")).map_err(|(e, _)| e).expect("queued");
        producer.flush(Duration::from_secs(30)).expect("written");
        assert!(bell.rung_within(Duration::from_secs(30)), "the record fetched rang nothing");
        let got = consumer.poll(Duration::from_secs(30)).and_then(Result::ok).map(|m| m.payload().map(<[u8]>::to_vec));
        assert_eq!(got, Some(Some(b"x".to_vec())));
    }

    /// The producer thread's wait ends on a delivery report (the write of
    /// a heartbeat confirmed), which it serves then, rather than at its
    /// next turn.
    #[test]
    fn a_delivery_report_rings_the_producers_bell() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("t", 1, 1).expect("a topic");
        let producer: BaseProducer = config(&cluster, None).create().expect("a producer");
        let bell = Bell::default();
        let rung = Rung::main(producer.client(), &bell).expect("the queue rings the bell");
        assert!(!bell.rung_within(Duration::ZERO), "nothing queued");
        producer.send(BaseRecord::<(), _>::to("t").partition(0).payload("x")).map_err(|(e, _)| e).expect("queued");
        assert!(bell.rung_within(Duration::from_secs(30)), "the delivery report rang nothing");
        assert!(rung.queued() > 0, "the report waits in the main queue");
        for _ in 0..rung.queued() {
            producer.poll(Duration::ZERO);
        }
        assert_eq!((rung.queued(), producer.in_flight_count()), (0, 0), "served");
        // Dropped, the queue rings no more (librdkafka would write to
        // whatever file takes the pipe's number next).
        rung.wait(Duration::ZERO);
        assert!(!bell.rung_within(Duration::ZERO), "the pipe emptied");
        drop(rung);
        producer.send(BaseRecord::<(), _>::to("t").partition(0).payload("y")).map_err(|(e, _)| e).expect("queued");
        producer.flush(Duration::from_secs(30)).expect("written, its report queued and served");
        assert!(!bell.rung_within(Duration::ZERO), "a report after the drop rang the bell");
    }
}
