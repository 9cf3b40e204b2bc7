//! The proof harness: what `neli-soak`, `neli-bench` and the integration
//! tests share to run real processes against real brokers and judge them
//! without trusting neli-run's opinion of itself.
//!
//! - `detector`: the `flock` overlap detector every child runs under.
//! - `netns`: network namespaces whose link can be cut (a real partition).
//! - `brokers`: a dev broker, tansu or etcd, started on a free port.

pub mod brokers;
pub mod detector;
pub mod netns;

use std::time::{Duration, Instant};

/// The timing flags every proof run gives neli-run, scaled from the session
/// timeout (the defaults' proportions: deadline S/2, grace S/3, heartbeats
/// every S/12, coordinator heartbeats every S/10).
pub fn timing_args(session: Duration) -> Vec<String> {
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    [
        ("--session-timeout", ms(session)),
        ("--heartbeat-interval", ms(session / 12)),
        ("--heartbeat-deadline", ms(session / 2)),
        ("--grace", ms(session / 3)),
        ("-X", format!("heartbeat.interval.ms={}", (session / 10).as_millis())),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// Makes the process `cmd` starts die (SIGKILL) when the runner that
/// started it dies, even by `kill -9` or `timeout`: a run leaves nothing
/// behind. Spawn from the thread that lives as long as the runner.
pub fn die_with_runner(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: only prctl, which is async-signal-safe, runs between fork and
    // exec (set_pdeathsig neither allocates nor locks; its error converts to
    // an io::Error by number).
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            Ok(())
        })
    }
}

/// Polls `cond` every 10 ms until it holds or `within` passes; whether it held.
pub fn wait_for(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() >= within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The `p` quantile (0.0..=1.0) of sorted samples (nearest rank).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A small reproducible generator (xorshift64*): a seed printed by a run
/// replays its fault sequence.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next_u64() % items.len() as u64) as usize]
    }

    /// Uniform in [lo, hi).
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        lo + (hi - lo).mul_f64((self.next_u64() % 10_000) as f64 / 10_000.0)
    }
}
