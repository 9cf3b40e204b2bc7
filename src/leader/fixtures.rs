//! What the core's test modules share: times as plain milliseconds on a
//! machine whose clocks are fixed (so no test depends on when it runs), and
//! the signals they send.

use super::{Anchor, BootTime, Signal};

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

/// A start `n` ms after boot, on both clocks (for `Leader::new`).
pub fn started(n: u64) -> Anchor {
    Anchor { boot: ms(n), wall_ms: wall(n) }
}
