//! A command that keeps failing under --restart backs off: the wait
//! doubles from --restart-delay up to 30 s, each longer wait said once
//! (audit E11: 1,992 starts in 10 s at --restart-delay 0).

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{wait_until, Group, LONG};

/// The backoff warnings said so far, by their count of failed runs.
fn backoff_counts(log: &str) -> Vec<u32> {
    let counts = log.lines().filter(|l| l.contains("the command keeps failing: backing off"));
    counts.filter_map(|l| l.split("failed_runs=").nth(1)?.split(' ').next()?.parse().ok()).collect()
}

#[test]
fn a_command_that_keeps_failing_is_restarted_after_a_doubling_wait() {
    let g = Group::new("backoff");
    for policy in ["always", "on-failure"] {
        let name = format!("m-{policy}");
        let mut m = g.member(&name, &["--restart", policy, "--restart-delay", "0"], &["false"]);
        // Waits 0, 0.2, 0.4, 0.8 and 1.6 s: the sixth failure about 3 s in.
        // The bound is for a loaded machine; without backoff it never comes.
        wait_until(Duration::from_secs(40), "the sixth failed run in a row", || backoff_counts(&m.log()).contains(&6));
        let starts = g.starts().iter().filter(|s| s.0 == name).count();
        // The next start waits 3.2 s; the 1,992 starts of the audit's 10 s are gone.
        assert!((6..=7).contains(&starts), "{starts} starts\n{}", m.log());
        let counts = backoff_counts(&m.log());
        assert_eq!(counts[..5], [2, 3, 4, 5, 6], "each longer wait said once, in order\n{}", m.log());
        assert!(m.log().contains("delay=3.2s"), "{}", m.log());
        assert!(!m.exited(), "{policy} goes on\n{}", m.log());
        m.signal(Signal::SIGTERM);
        m.wait_exit(LONG);
    }
}
