//! Each safety layer on its own. The layers cover for each other: the revoke
//! barrier, the claims a new owner waits out, the shim's lease and neli-run's
//! own fence. So a layer that broke would go unnoticed until the one covering
//! it changed too. Here a debug build switches the others off in one member
//! (NELI_TEST_LAYERS_OFF, see src/layers_off.rs; a release build cannot)
//! and the remaining layer gets work only it can do.

use crate::util::{wait_until, Broker, Group, LONG, LONG_LEASE};

fn layers_off(layers: &str) -> Option<Vec<String>> {
    Some(vec!["env".into(), format!("NELI_TEST_LAYERS_OFF={layers}")])
}

/// The barrier: a leader whose partition 0 is revoked holds the rebalance
/// until its command is gone, so the group cannot hand partition 0 on
/// earlier. On a topic with four partitions a member joining takes partition
/// 0 from the leader (cooperative-sticky evens them out) while the leader
/// stays in the group, and under Kafka's group timing the join ends as soon
/// as the leader rejoins, which the barrier delays. The command takes 4 s to
/// honour SIGTERM: the leader's lease is off (it would kill the command at
/// its deadline), and the newcomer ignores the leader's claims (it would wait
/// them out); without the barrier the newcomer leads about a second after
/// the revoke, while the old command still runs.
#[test]
fn the_revoke_barrier_alone_keeps_a_command_slow_to_stop_from_overlapping_the_next() {
    let broker = Broker::dev_with("127.0.0.1", &["--partitions", "4", "--group-coordinator", "kafka"]);
    let g = Group::on(broker, "barrier");
    let bye = g.dir.path().join("a-stopped");
    let slow = format!("trap 'sleep 4; touch {}; exit 0' TERM; while :; do sleep 0.05; done", bye.display());
    let mut args = LONG_LEASE.to_vec();
    args.extend(["--grace", "8s"]);
    let a = g.member_in(layers_off("lease"), "a", &args, &["sh", "-c", &slow]);
    wait_until(LONG, "a leads", || g.starts().len() == 1);
    let b = g.member_in(layers_off("claims"), "b", &[], &["sleep", "1000"]);
    wait_until(LONG, "b's command starts (or is refused: an overlap)", || {
        g.starts().iter().any(|(name, _)| name == "b") || !g.overlaps().is_empty()
    });
    for (m, layer) in [(&a, "lease"), (&b, "claims")] {
        assert!(m.log().contains(&format!("layer=\"{layer}\"")), "the switch is on: {}", m.log());
    }
    assert!(!b.log().contains("waiting until its command must be gone"), "b waited out a's claim: {}", b.log());
    g.assert_no_overlap();
    assert!(bye.exists(), "a's command stopped on SIGTERM, in its own time: {}", a.log());
}
