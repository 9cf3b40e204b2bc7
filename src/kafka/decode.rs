//! What a record of the group's topic tells the core: bytes and where they
//! were read, in; an `Event`, if any, out. Pure (but for a log line naming
//! who asked for a yield), so that every kind of record is tested without
//! a broker; the consumer thread (consumer.rs) feeds it what it polls.

use std::time::Duration;

use tracing::info;

use super::candidacy;
use super::heartbeat::{Heartbeat, Member};
use super::yield_request::{DrainRequest, PauseRequest, TriggerRequest, Yield};
use super::{Event, Partition, CONTROL_PARTITION};
use crate::clock::BootTime;

/// Where a record was read, and its value.
#[derive(Clone, Copy, Debug)]
pub(super) struct Read<'a> {
    pub(super) topic: &'a str,
    pub(super) partition: Partition,
    pub(super) offset: i64,
    pub(super) payload: Option<&'a [u8]>,
}

/// What decoding needs to know besides the record: who we are, which
/// partitions are whose, and whether a yield may be meant for us.
pub(super) struct Decoder<'a> {
    /// The group's topic: a record of any other is not ours to read.
    pub(super) topic: &'a str,
    /// The seats' partitions: where heartbeats are.
    pub(super) seats: &'a super::Seats,
    pub(super) me: &'a Member,
    /// Our --heartbeat-deadline: assumed for records that do not carry one.
    pub(super) deadline: Duration,
    /// Some(offset) while we own the control partition: a yield written
    /// from that offset on (its end when it was assigned to us) is meant
    /// for us; one before it, in the backlog, was meant for an earlier
    /// owner. None: no yield is ours (we read from outside the group).
    pub(super) yields_from: Option<i64>,
    /// Some(offset): a drain or undrain written from there on (the control
    /// partition's end when we started) names this process; one before it
    /// was for an earlier one. None: we do not know where that was.
    pub(super) drains_from: Option<i64>,
    /// Our wall clock now, to age the records by.
    pub(super) wall_ms: u64,
}

impl Decoder<'_> {
    /// What `read` tells the core, if anything: on a seat's partition,
    /// another member's heartbeat or one of our own (`more` false: the
    /// caller says whether records are queued behind it), and a pause or
    /// resume; on the control partition, another member's candidacy and a
    /// yield meant for us (`yields_from`). Anything else (another topic or
    /// partition, our own candidacy, bytes that are none of these) is
    /// nothing.
    pub(super) fn event(&self, read: Read<'_>) -> Option<Event> {
        let Read { topic, partition, offset, payload } = read;
        let control = partition == CONTROL_PARTITION;
        let seat = self.seats.contains(partition);
        if topic != self.topic || !(control || seat) {
            return None;
        }
        let payload = payload?;
        if let Some(c) = candidacy::Record::decode(payload) {
            return (control && !c.is_from(self.me)).then(|| Event::Candidacy(c.as_core(self.wall_ms)));
        }
        match (Heartbeat::decode(payload), Yield::decode(payload)) {
            (Some(_), _) if !seat => None,
            (Some(hb), _) if hb.is_from(self.me) => {
                Some(Event::OwnHeartbeat { partition, offset, sent: BootTime::from_nanos(hb.sent_ns), more: false })
            }
            (Some(hb), _) => {
                super::agree::check(self.seats, &hb);
                Some(Event::OtherHeartbeat(partition, hb.as_other(offset, self.deadline, self.wall_ms)))
            }
            (None, Some(y))
                if control && self.yields_from.is_some_and(|from| offset >= from) && y.applies_to(&self.me.name) =>
            {
                // Anyone who may write to the topic can ask: say who did
                // (escaped: every field is the writer's choice).
                info!(offset, "yield requested by {}", y.asker());
                Some(Event::Yield { to: y.to })
            }
            // A pause or trigger is a seat's, a drain the control
            // partition's. The core logs who asked, once it is news to it.
            (None, None) => {
                let request = seat.then(|| seat_request(payload, partition, offset)).flatten();
                request.or_else(|| control.then(|| drain_event(payload, self.me, offset, self.drains_from)).flatten())
            }
            _ => None,
        }
    }
}

/// A pause or a trigger read at `offset` of a seat's `partition`.
fn seat_request(payload: &[u8], partition: Partition, offset: i64) -> Option<Event> {
    match PauseRequest::decode(payload) {
        Some(request) => Some(Event::Pause(partition, request.at(offset))),
        None => TriggerRequest::decode(payload).map(|request| Event::Trigger(partition, request.at(offset))),
    }
}

/// A drain or undrain read at `offset` of the control partition, if it
/// names `me` and was written `from` our start on (where known): the
/// consumer's rule and the watcher's.
pub(super) fn drain_event(payload: &[u8], me: &Member, offset: i64, from: Option<i64>) -> Option<Event> {
    let d = DrainRequest::decode(payload)?;
    let ours = d.member == me.name && from.is_some_and(|from| offset >= from);
    ours.then(|| Event::Drain { drained: d.drains(), offset, by: d.by.describe() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::Content;
    use crate::leader::{Record, Stance};

    use super::super::Seats;

    const TOPIC: &str = "g.neli";

    fn me() -> Member {
        Member::this_process("me".into())
    }

    static ONE_SEAT: std::sync::LazyLock<Seats> = std::sync::LazyLock::new(|| Seats { known: vec![0], every: false });

    /// A decoder for `me`, seats [0], owning the control partition since
    /// offset 10.
    fn decoder(me: &Member) -> Decoder<'_> {
        Decoder {
            topic: TOPIC,
            seats: &ONE_SEAT,
            me,
            deadline: Duration::from_secs(5),
            yields_from: Some(10),
            drains_from: Some(8),
            wall_ms: crate::clock::wall_ms(),
        }
    }

    fn at(partition: Partition, offset: i64, payload: &[u8]) -> Read<'_> {
        Read { topic: TOPIC, partition, offset, payload: Some(payload) }
    }

    /// `member`'s heartbeat, leading with token 4 when `leads`.
    fn heartbeat(member: &Member, leads: bool) -> Vec<u8> {
        let mut record = Record::contending(1);
        if leads {
            record.stance = Stance::Leading { token: 4 };
        }
        let content = Content { record, since_ms: None, deadline_ms: 5000 };
        Heartbeat::new(member, 7, BootTime::from_nanos(99), crate::clock::wall_ms(), content).encode()
    }

    #[test]
    fn our_own_heartbeat_says_where_and_when_it_was_sent() {
        let me = me();
        let got = decoder(&me).event(at(0, 12, &heartbeat(&me, true)));
        let Some(Event::OwnHeartbeat { partition: 0, offset: 12, sent, more: false }) = got else { panic!("{got:?}") };
        assert_eq!(sent, BootTime::from_nanos(99));
    }

    #[test]
    fn another_members_heartbeat_is_theirs_on_its_partition() {
        let me = me();
        let other = Member::this_process("b".into());
        let got = decoder(&me).event(at(0, 3, &heartbeat(&other, true)));
        let Some(Event::OtherHeartbeat(0, o)) = got else { panic!("{got:?}") };
        assert_eq!((o.offset, o.stance), (3, Stance::Leading { token: 4 }));
        // The same name, another incarnation (a restart): not ours.
        let again = Member::this_process("me".into());
        assert!(matches!(decoder(&me).event(at(0, 4, &heartbeat(&again, false))), Some(Event::OtherHeartbeat(0, _))));
    }

    #[test]
    fn candidacies_are_heard_but_our_own() {
        let me = me();
        let of = |m: &Member| candidacy::Record::new(m, 2, false, 0, Duration::from_secs(1), false, false).encode();
        let got = decoder(&me).event(at(0, 5, &of(&Member::this_process("b".into()))));
        assert!(matches!(&got, Some(Event::Candidacy(c)) if c.name == "b"), "{got:?}");
        assert!(decoder(&me).event(at(0, 6, &of(&me))).is_none());
    }

    #[test]
    fn a_yield_is_ours_only_from_our_assignment_on_and_if_it_names_us() {
        let me = me();
        let d = decoder(&me);
        let to = Some("c".to_string());
        let ask = |target: Option<&str>| Yield::new(target.map(Into::into), to.clone()).encode();
        assert!(matches!(d.event(at(0, 10, &ask(None))), Some(Event::Yield { to: Some(t) }) if t == "c"));
        assert!(matches!(d.event(at(0, 11, &ask(Some("me")))), Some(Event::Yield { .. })));
        assert!(d.event(at(0, 9, &ask(None))).is_none(), "a backlog yield was meant for an earlier owner");
        assert!(d.event(at(0, 12, &ask(Some("b")))).is_none(), "meant for another member");
        let outside = Decoder { yields_from: None, ..decoder(&me) };
        assert!(outside.event(at(0, 12, &ask(None))).is_none(), "read from outside the group: for whoever leads");
    }

    #[test]
    fn a_drain_is_ours_if_it_names_us_on_the_control_partition_since_we_started() {
        let me = me();
        let d = decoder(&me);
        let drain = |member: &str, drained| DrainRequest::new(member.into(), drained).encode();
        let got = d.event(at(0, 8, &drain("me", true)));
        assert!(matches!(&got, Some(Event::Drain { drained: true, offset: 8, by }) if by.contains("pid")), "{got:?}");
        assert!(matches!(d.event(at(0, 9, &drain("me", false))), Some(Event::Drain { drained: false, .. })));
        assert!(d.event(at(0, 7, &drain("me", true))).is_none(), "written before we started: an earlier process's");
        assert!(d.event(at(0, 9, &drain("b", true))).is_none(), "another member's");
        let seats = Decoder { seats: &Seats { known: vec![0, 2], every: false }, ..decoder(&me) };
        assert!(seats.event(at(2, 9, &drain("me", true))).is_none(), "drains are the control partition's");
        let control_only = Decoder { seats: &Seats { known: vec![2], every: false }, ..decoder(&me) };
        assert!(matches!(control_only.event(at(0, 9, &drain("me", true))), Some(Event::Drain { .. })), "no seat there");
        let (pause, trigger) = (PauseRequest::new(true, false).encode(), TriggerRequest::new().encode());
        assert!(control_only.event(at(0, 10, &pause)).is_none(), "a pause is a seat's, and 0 is none here");
        assert!(control_only.event(at(0, 11, &trigger)).is_none(), "so is a trigger");
        let unknown = Decoder { drains_from: None, ..decoder(&me) };
        assert!(unknown.event(at(0, 9, &drain("me", true))).is_none(), "no start known: none is ours");
    }

    #[test]
    fn a_pause_is_heard_in_the_backlog_too() {
        let me = me();
        let pause = PauseRequest::new(true, false).encode();
        for d in [decoder(&me), Decoder { yields_from: None, ..decoder(&me) }] {
            let got = d.event(at(0, 2, &pause));
            assert!(matches!(&got, Some(Event::Pause(0, p)) if p.paused && p.offset == 2), "{got:?}");
        }
    }

    #[test]
    fn records_of_another_partition_or_topic_are_ignored() {
        let me = me();
        let other = heartbeat(&Member::this_process("b".into()), true);
        let pause = PauseRequest::new(true, false).encode();
        let d = decoder(&me);
        assert!(d.event(at(1, 3, &other)).is_none(), "partition 1 is no seat");
        assert!(d.event(at(1, 3, &pause)).is_none(), "nor the control partition");
        assert!(d.event(Read { topic: "other.neli", ..at(0, 3, &other) }).is_none());
        // With a seat on partition 2: heartbeats there are heard, and a
        // pause there holds that seat (`cron pause JOB`); a yield there is
        // not heard (yields are partition 0's).
        let seats = Decoder { seats: &Seats { known: vec![0, 2], every: false }, ..decoder(&me) };
        assert!(matches!(seats.event(at(2, 3, &other)), Some(Event::OtherHeartbeat(2, _))));
        assert!(matches!(seats.event(at(2, 3, &pause)), Some(Event::Pause(2, p)) if p.offset == 3));
        let trigger = TriggerRequest::new().encode();
        assert!(matches!(seats.event(at(2, 4, &trigger)), Some(Event::Trigger(2, t)) if t.offset == 4));
        assert!(seats.event(at(1, 4, &trigger)).is_none(), "partition 1 is no seat");
        assert!(seats.event(at(2, 30, &Yield::new(None, None).encode())).is_none());
        // A fleet crontab's seats are every partition, one added since too.
        let every = Decoder { seats: &Seats { known: vec![0, 1], every: true }, ..decoder(&me) };
        assert!(matches!(every.event(at(5, 3, &other)), Some(Event::OtherHeartbeat(5, _))));
    }

    #[test]
    fn garbage_and_empty_records_are_ignored() {
        let me = me();
        let d = decoder(&me);
        for junk in [&b""[..], b"not json", b"{}", b"{\"type\":\"nonsense\"}", b"[1,2]", &[0xff, 0xfe]] {
            assert!(d.event(at(0, 20, junk)).is_none(), "{junk:?}");
        }
        assert!(d.event(Read { payload: None, ..at(0, 20, b"") }).is_none());
    }
}
