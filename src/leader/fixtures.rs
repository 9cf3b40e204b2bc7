//! What the core's test modules share: times as plain milliseconds on a
//! machine whose clocks are fixed (so no test depends on when it runs), the
//! signals they send, and the settings and leader the scenarios start from.

pub use std::time::Duration;

pub use crate::exit::ChildStatus;

use super::*;
use Action::*;

pub const SIGTERM: Signal = Signal(15);
pub const SIGHUP: Signal = Signal(1);

/// The wall clock at boot: 2023-11-14T22:13:20Z.
pub const WALL: u64 = 1_700_000_000_000;

/// `n` ms after boot.
pub fn ms(n: u64) -> BootTime {
    BootTime::from_nanos(n * 1_000_000)
}

/// The wall clock (ms since the epoch) `n` ms after boot.
pub fn wall(n: u64) -> u64 {
    WALL + n
}

/// `--every` `period` ms, the calendar the schedule tests run on.
pub fn every(period: u64) -> std::sync::Arc<dyn Calendar> {
    std::sync::Arc::new(crate::calendar::Every::new(Duration::from_millis(period)).expect("a period of 1 ms or more"))
}

/// A start `n` ms after boot, on both clocks (for `Leader::new`).
pub fn started(n: u64) -> Anchor {
    Anchor { boot: ms(n), wall_ms: wall(n) }
}

pub const HB: Duration = Duration::from_millis(200);
pub const DEADLINE: Duration = Duration::from_millis(1000);
pub const GRACE: Duration = Duration::from_millis(500);
pub const RESUME_WINDOW: Duration = Duration::from_millis(2200);

pub fn settings(restart: Restart) -> Settings {
    Settings {
        heartbeat_interval: HB,
        heartbeat_deadline: DEADLINE,
        grace: GRACE,
        stop_signal: SIGTERM,
        restart,
        restart_delay: Duration::from_millis(100),
        acquire_timeout: None,
        max_runtime: None,
        resume_window: RESUME_WINDOW,
        claim_margin: Duration::ZERO,
        waves: None,
        schedule: None,
        health_checked: false,
        name: "me".into(),
        priority: 1,
        preempt: false,
        candidacy_interval: Duration::from_millis(1000),
        hot_standbys: 2,
        owner_silence: Duration::from_millis(3000),
        roles: 1,
        overlap: false,
        jobs: None,
    }
}

/// The seat the scenarios play on.
pub const P: Partition = 0;

pub fn hb(offset: i64, sent: u64) -> Input {
    Input::OwnHeartbeat { partition: P, offset, sent: ms(sent), more: false }
}

/// The group assigned us the seat's partition.
pub fn assigned() -> Input {
    Input::Assigned { partition: P }
}

/// The seat's partition was taken from us (`lost`: without a warning).
pub fn revoked(lost: bool) -> Input {
    Input::Revoked { partition: P, lost }
}

/// The seat's command is gone, with `status`.
pub fn exited(status: ChildStatus) -> Input {
    Input::ChildExited(P, status)
}

/// Every record fetched with our heartbeat has been heard.
pub fn caught_up() -> Input {
    Input::CaughtUp { partition: P }
}

/// Start the seat's command under `token` until `lease` (no attempt).
pub fn spawn(token: i64, lease: BootTime) -> Action {
    Spawn { partition: P, token, lease, attempt: None, begin: None }
}

/// Our heartbeat in term `term` (begun at `start`): leading with `token`,
/// or contending.
pub fn says(term: u64, start: Option<i64>, token: Option<i64>) -> Action {
    let stance = token.map_or(Stance::Contending, |token| Stance::Leading { token });
    SendHeartbeat(P, Record { start, ..Record::saying(term, stance) })
}

/// What the leader made by `leading` says.
pub fn led() -> Action {
    says(1, Some(7), Some(7))
}

/// A leader with a running child: assigned at 1000, own heartbeat sent
/// at 1000 read back at 1010 with offset 7.
pub fn leading(restart: Restart) -> Leader {
    let mut l = Leader::new(settings(restart), started(0));
    assert_eq!(l.step(assigned(), ms(1000)), vec![says(1, None, None)]);
    assert_eq!(l.standing(P), Standing::Candidate);
    // The new leader announces its token with a heartbeat at once.
    assert_eq!(l.step(hb(7, 1000), ms(1010)), vec![spawn(7, ms(2000)), led()]);
    assert_eq!(l.standing(P), Standing::Leader { token: 7 });
    l
}

/// Member `writer`'s record at `offset` on our seat's partition, in its
/// term `term` (begun at `start`), written just now with our deadline and
/// carrying nothing: what the scenarios' records are built from. Each is
/// newer than the one built before it (its writer's sequence number).
pub fn record_of(writer: &str, offset: i64, term: Option<u64>, start: Option<i64>, stance: Stance) -> Other {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    Other {
        writer: writer.into(),
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        offset,
        term,
        start,
        stance,
        age: Duration::ZERO,
        deadline: DEADLINE,
        attempt: None,
        pause: None,
        to: None,
        job: None,
        hot: None,
    }
}
