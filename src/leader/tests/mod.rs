//! The core's scenarios: each test tells one story of rebalances, records,
//! child exits and signals, and asserts the exact actions. One file per
//! theme; what several share is here.

use super::fixtures::*;
use super::*;
use Action::*;

mod cold;
mod control;
mod crontab;
mod exits;
mod fencing;
mod hot;
mod reload;
mod roles;
mod seats;
mod standbys;
mod tenure;

/// Member `writer`'s record as a version 1 writer put it: written `age`
/// ms ago, claiming `token` or nothing.
fn other(writer: &str, token: Option<i64>, age: u64) -> Input {
    let stance = token.map_or(Stance::Released, |token| Stance::Leading { token });
    Input::OtherHeartbeat(P, Other { age: Duration::from_millis(age), ..record_of(writer, 0, None, None, stance) })
}

/// Member `name`'s candidacy of `priority`: written just now, counting for
/// 3 s, healthy, undrained, and it may lead.
fn candidacy_of(name: &str, priority: u8) -> Candidacy {
    Candidacy {
        writer: format!("{name}/1"),
        name: name.into(),
        priority,
        never_lead: false,
        leaving: false,
        unhealthy: false,
        drained: false,
        age: Duration::ZERO,
        live_for: Duration::from_millis(3000),
        cold: false,
    }
}

/// Member `writer`'s record at `offset` in its term `term` (which it says
/// began at `start`), written `age` ms ago.
fn contender(writer: &str, offset: i64, term: u64, start: Option<i64>, stance: Stance, age: u64) -> Input {
    Input::OtherHeartbeat(
        P,
        Other { age: Duration::from_millis(age), ..record_of(writer, offset, Some(term), start, stance) },
    )
}

/// Our disclaimer, ending term `term`.
fn gone(term: u64) -> Action {
    Disclaim(P, Record::saying(term, Stance::Released))
}

/// A pause (`paused`) or resume asked at `offset`.
fn asked(offset: i64, paused: bool, stop: bool) -> Pause {
    Pause { offset, paused, stop, at_ms: wall(0), by: Asker::default() }
}
