//! The member and its seats: an input names its seat by partition, and one
//! for a partition that is no seat of ours changes nothing.

use super::*;

/// A partition that is no seat.
const NOT_A_SEAT: Partition = 1;

/// Every seat input, for the partition that is no seat.
fn elsewhere() -> Vec<Input> {
    let p = NOT_A_SEAT;
    vec![
        Input::Assigned { partition: p },
        Input::OwnHeartbeat { partition: p, offset: 99, sent: ms(1050), more: false },
        Input::CaughtUp { partition: p },
        Input::OtherHeartbeat(p, Other { writer: "x".into(), ..other_on(3) }),
        Input::ChildExited(p, ChildStatus::Exited(0)),
        Input::Revoked { partition: p, lost: true },
        Input::Revoked { partition: p, lost: false },
    ]
}

/// Member x's claim at offset 100, written just now, with a token newer
/// than any leader's here: on a seat's partition it would fence.
fn other_on(token: i64) -> Other {
    record_of("x", 100, Some(1), Some(100), Stance::Leading { token: token + 100 })
}

#[test]
fn the_seats_are_one_per_role_from_partition_0() {
    assert_eq!(settings(Restart::Never).seats().collect::<Vec<_>>(), vec![P], "the single leader: partition 0");
    assert!(!settings(Restart::Never).seats().any(|p| p == NOT_A_SEAT));
    let roles = Settings { roles: 3, ..settings(Restart::Always) };
    assert_eq!(roles.seats().collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(Settings { roles: 0, ..roles }.seats().collect::<Vec<_>>(), vec![0], "never no seat at all");
}

#[test]
fn an_input_for_a_partition_that_is_no_seat_is_ignored() {
    // A standby is not assigned, nor does it start anything.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    for input in elsewhere() {
        assert_eq!(l.step(input.clone(), ms(1000)), vec![], "{input:?}");
        assert_eq!(l.standing(P), Standing::Standby);
        assert_eq!(l.standing(NOT_A_SEAT), Standing::Standby);
    }
    // A leader is not fenced, its command not killed, nothing released.
    let mut l = leading(Restart::Never);
    for input in elsewhere() {
        assert_eq!(l.step(input.clone(), ms(1100)), vec![], "{input:?}");
        assert_eq!(l.standing(P), Standing::Leader { token: 7 });
        assert!(l.child_alive(P));
    }
    assert_eq!(l.standings_taken(NOT_A_SEAT), vec![]);
    assert_eq!(l.why_child_ended(NOT_A_SEAT), Reason::Exited);
    // The seat goes on as before: its heartbeat is due, and so is the fence.
    assert_eq!(l.next_deadline(), Some(ms(1210)), "the seat's next heartbeat");
    assert_eq!(l.step(Input::Tick, ms(1210)), vec![led()]);
    assert_eq!(l.step(Input::Tick, ms(2000)).last(), Some(&KillGroup(P)));
    // After the exit, only a revoke of a seat's partition is released.
    let mut l = Leader::new(settings(Restart::Never), started(0));
    assert_eq!(l.step(Input::Shutdown, ms(10)), vec![Exit(0)]);
    assert_eq!(l.step(Input::Revoked { partition: NOT_A_SEAT, lost: false }, ms(20)), vec![]);
    assert_eq!(l.step(revoked(false), ms(30)), vec![ReleaseRevoke(P)]);
}

#[test]
fn member_inputs_reach_the_seat_and_seat_actions_name_it() {
    let mut l = leading(Restart::Never);
    let out = l.step(Input::Forward(SIGHUP), ms(1100));
    assert_eq!(out, vec![SignalGroup(P, SIGHUP)]);
    assert!(out.iter().all(|a| a.partition() == Some(P)));
    let out = l.step(Input::Yield { to: None }, ms(1110));
    assert_eq!(out, vec![SignalGroup(P, SIGTERM)]);
    let out = l.step(exited(ChildStatus::Signaled(15)), ms(1120));
    assert_eq!(out.iter().map(Action::partition).collect::<Vec<_>>(), vec![Some(P), None], "{out:?}");
    assert_eq!(out.last(), Some(&StandAside), "standing aside is the member's: it leaves the group");
}
