//! What a Kafka event means: the core's input, and what the shell keeps
//! for itself. Pure, so that the mapping is tested on its own; the shell
//! logs and acts on the result (`Shell::next_input`).

use std::sync::mpsc::SyncSender;

use crate::exit::Kind;
use crate::kafka::Event;
use crate::leader::{Input, Partition};

/// What the shell keeps from a Kafka event beside the core's input.
#[derive(Debug)]
pub(super) enum Keep {
    Nothing,
    /// We are in the group, as a standby or the owner of partition 0:
    /// systemd may hear READY=1.
    Joined,
    /// The release of a seat's partition that a revoke's blocked rebalance
    /// callback waits for, which the shell sends when that seat's core says
    /// so (`Action::ReleaseRevoke`). The callback returns once every seat
    /// revoked with it is released.
    Release(Partition, SyncSender<()>),
}

/// What `neli-run drain` and `undrain` have said of us: the watcher and the
/// consumer may both hear a request, in either order, so the newest by
/// offset counts.
#[derive(Debug, Default)]
pub(super) struct Drain {
    pub(super) drained: bool,
    heard: Option<i64>,
}

impl Drain {
    /// Takes in a request at `offset`: the new state if it changes it.
    pub(super) fn hear(&mut self, drained: bool, offset: i64) -> Option<bool> {
        if self.heard.is_some_and(|heard| heard >= offset) {
            return None;
        }
        self.heard = Some(offset);
        (self.drained != drained).then(|| {
            self.drained = drained;
            drained
        })
    }
}

/// Maps a Kafka event (None: the Kafka thread stopped) to the core's input,
/// if the core has to hear of it. `claims` is false when the claims layer
/// is switched off (`layers_off`): other members' heartbeats are then not
/// heard at all. A seat's event carries its partition through, to the
/// release kept and to the input.
pub(super) fn input(event: Option<Event>, claims: bool) -> (Option<Input>, Keep) {
    let input = match event {
        Some(Event::Standby) => return (Some(Input::Standby), Keep::Joined),
        Some(Event::Assigned { partition }) => return (Some(Input::Assigned { partition }), Keep::Joined),
        Some(Event::Revoked { partition, lost, release }) => {
            return (Some(Input::Revoked { partition, lost }), Keep::Release(partition, release))
        }
        Some(Event::OwnHeartbeat { partition, offset, sent, more }) => {
            Input::OwnHeartbeat { partition, offset, sent, more }
        }
        Some(Event::Delivered { partition, offset, sent }) => Input::Delivered { partition, offset, sent },
        Some(Event::CaughtUp { partition }) => Input::CaughtUp { partition },
        Some(Event::OtherHeartbeat(..)) if !claims => return (None, Keep::Nothing),
        Some(Event::OtherHeartbeat(partition, other)) => Input::OtherHeartbeat(partition, other),
        Some(Event::Yield { to }) => Input::Yield { to },
        Some(Event::Pause(partition, pause)) => Input::Pause(partition, pause),
        Some(Event::Trigger(partition, trigger)) => Input::Trigger(partition, trigger),
        Some(Event::Candidacy(candidacy)) => Input::Candidacy(candidacy),
        Some(Event::Hot(list)) => Input::Hot(list),
        Some(Event::Echo) => Input::Echo,
        Some(Event::RosterRead) => Input::RosterRead,
        Some(Event::HandedTo(age)) => Input::HandedTo(age),
        Some(Event::Drain { drained, .. }) => Input::Drain(drained),
        Some(Event::Fatal(failure)) => Input::Fatal(failure.code()),
        None => Input::Fatal(Kind::Internal.code()),
    };
    (Some(input), Keep::Nothing)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::BootTime;
    use crate::exit::Failure;
    use crate::leader::{Other, Stance};

    fn other() -> Other {
        Other {
            writer: "b-1".into(),
            seq: 1,
            offset: 7,
            term: Some(3),
            start: Some(5),
            stance: Stance::Leading { token: 5 },
            age: Duration::from_millis(20),
            deadline: Duration::from_secs(10),
            attempt: None,
            pause: None,
            to: None,
            job: None,
            hot: None,
        }
    }

    #[test]
    fn the_newest_drain_or_undrain_counts_and_each_change_is_said_once() {
        let mut d = Drain::default();
        assert_eq!(d.hear(false, 3), None, "not drained already");
        assert_eq!(d.hear(true, 5), Some(true));
        assert_eq!(d.hear(true, 5), None, "heard again (the consumer after the watcher)");
        assert_eq!(d.hear(false, 4), None, "older than the drain: stale");
        assert!(d.drained);
        assert_eq!(d.hear(true, 6), None, "drained already");
        assert_eq!(d.hear(false, 8), Some(false));
        assert_eq!(d.hear(true, 7), None, "older than the undrain");
        assert_eq!(d.hear(true, 9), Some(true));
    }

    #[test]
    fn joining_is_kept_for_ready() {
        assert!(matches!(input(Some(Event::Standby), true), (Some(Input::Standby), Keep::Joined)));
        assert!(matches!(
            input(Some(Event::Assigned { partition: 0 }), true),
            (Some(Input::Assigned { partition: 0 }), Keep::Joined)
        ));
    }

    #[test]
    fn a_revoke_keeps_its_release_under_its_partition() {
        for (partition, lost) in [(0, false), (0, true), (3, false)] {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            let (got, keep) = input(Some(Event::Revoked { partition, lost, release: tx }), true);
            assert_eq!(got, Some(Input::Revoked { partition, lost }));
            let Keep::Release(kept, release) = keep else { panic!("the release is kept: {keep:?}") };
            assert_eq!(kept, partition);
            release.send(()).unwrap();
            assert_eq!(rx.try_recv(), Ok(()), "the kept sender is the callback's");
        }
    }

    #[test]
    fn heartbeats_and_yield_pass_through() {
        let sent = BootTime::from_nanos(42);
        let (got, keep) = input(Some(Event::OwnHeartbeat { partition: 0, offset: 9, sent, more: true }), true);
        assert_eq!(got, Some(Input::OwnHeartbeat { partition: 0, offset: 9, sent, more: true }));
        assert!(matches!(keep, Keep::Nothing));
        let (got, keep) = input(Some(Event::OtherHeartbeat(0, other())), true);
        assert_eq!(got, Some(Input::OtherHeartbeat(0, other())));
        assert!(matches!(keep, Keep::Nothing));
        let (got, keep) = input(Some(Event::CaughtUp { partition: 0 }), true);
        assert_eq!(got, Some(Input::CaughtUp { partition: 0 }));
        assert!(matches!(keep, Keep::Nothing));
        let to = Some("b".to_string());
        assert_eq!(input(Some(Event::Yield { to: to.clone() }), true).0, Some(Input::Yield { to }));
        let pause = crate::leader::Pause { offset: 3, paused: true, stop: false, at_ms: 1, by: Default::default() };
        let (got, keep) = input(Some(Event::Pause(0, pause.clone())), true);
        assert_eq!(got, Some(Input::Pause(0, pause)));
        assert!(matches!(keep, Keep::Nothing));
    }

    #[test]
    fn without_the_claims_layer_others_are_not_heard() {
        assert!(matches!(input(Some(Event::OtherHeartbeat(0, other())), false), (None, Keep::Nothing)));
        // Only others' heartbeats: our own still count.
        let sent = BootTime::from_nanos(1);
        let (got, _) = input(Some(Event::OwnHeartbeat { partition: 0, offset: 1, sent, more: false }), false);
        assert_eq!(got, Some(Input::OwnHeartbeat { partition: 0, offset: 1, sent, more: false }));
    }

    #[test]
    fn kafka_failures_are_fatal_with_their_code() {
        let failure = Failure::new(Kind::Denied, "refused");
        let code = failure.code();
        assert_eq!(input(Some(Event::Fatal(failure)), true).0, Some(Input::Fatal(code)));
        // The Kafka thread stopped: nothing more will come from it.
        assert_eq!(input(None, true).0, Some(Input::Fatal(Kind::Internal.code())));
    }
}
