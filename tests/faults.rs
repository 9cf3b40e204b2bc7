//! Faults: a frozen leader, a frozen broker, and a leader cut off from the
//! network. In each, the child must die within the heartbeat deadline, no
//! two children may overlap, and leadership must come back.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use neli_run::for_tests::{Record, Stance};

use crate::util::{stays_false, wait_until, Broker, Group, Member, LONG};

/// Bound for "the child died because heartbeats stopped": the deadline plus
/// generous room for a loaded machine.
fn fence_bound(g: &Group) -> Duration {
    g.broker.timing.deadline + Duration::from_secs(3)
}

#[test]
fn sigstop_of_the_leader_fences_through_the_shim_and_sigcont_does_not_overlap() {
    let g = Group::new("sigstop");
    let members = g.sleepers(&["a", "b"]);
    let t = g.broker.timing;
    wait_until(t.takeover(), "a leader runs its child", || g.lock_held());
    let i = g.leader_among(&members);
    let stopped = Instant::now();
    members[i].signal(Signal::SIGSTOP);
    // neli-run is frozen: only the shim's lease can kill the child.
    wait_until(fence_bound(&g), "the frozen leader's child is fenced", || !g.lock_held());
    assert!(stopped.elapsed() >= t.deadline / 2, "fenced too early: {:?}", stopped.elapsed());
    wait_until(t.takeover(), "the standby takes over", || g.starts().len() == 2 && g.lock_held());
    members[i].signal(Signal::SIGCONT);
    // The old leader wakes up revoked; the new one keeps leading.
    assert!(
        crate::util::stays_false(t.session * 2, || g.starts().len() > 2),
        "leadership moved again: {:?}",
        g.starts()
    );
    assert!(g.lock_held(), "nobody leads after SIGCONT");
    g.assert_no_overlap();
    assert!(members[i].log().contains("lease expired"), "{}", members[i].log());
}

/// Regression (issue 28): a graceful stop of the leader just after another
/// member came back from a freeze longer than the session. On its return
/// the frozen member's librdkafka, which had lost its assignment, rejoined
/// with no member id while its core gave partition 0 back by rejoining too:
/// when the second rejoin came after the first JoinGroup had gone out (about
/// one time in two), it dropped that JoinGroup's answer, and the member id
/// in it stayed pending at the coordinator for a session timeout (as on
/// Kafka), holding the whole join phase. The leader's LeaveGroup waited
/// behind its own parked JoinGroup: the handover took what was left of the
/// session (5.9 s of 6 s here, 3 s in the issue) instead of a fraction of a
/// second. Three rounds, so that the old code fails nearly always; the bound
/// is half the session: several times a normal handover, well below the old.
#[test]
fn a_graceful_handover_right_after_a_member_came_back_from_a_freeze_is_not_held_up() {
    let session = Duration::from_secs(6);
    let mut broker = Broker::dev();
    broker.timing = broker.timing.with_session(session);
    let g = Group::on(broker, "thawed-handover");
    let join = |name: &str| g.member(name, &[], &["sleep", "1000"]);
    let mut members: Vec<Member> = ["a", "b", "c"].into_iter().map(join).collect();
    for (round, newcomer) in ["d", "e", "f"].into_iter().enumerate() {
        wait_until(LONG, "a leader runs its child", || g.lock_held());
        let before = g.starts().len();
        let frozen = g.leader_among(&members);
        members[frozen].signal(Signal::SIGSTOP);
        // Its session runs out; another member takes over.
        wait_until(LONG, "another member takes over", || g.starts().len() == before + 1 && g.lock_held());
        let next = g.leader_among(&members);
        // The fault itself: frozen on past the takeover, as in the issue
        // (9 s at a 6 s session). librdkafka sends a member's JoinGroups at
        // least 1 s apart (rkcg_join_intvl): a thaw right at the takeover's
        // rebalance would add that second to the handover, another case.
        std::thread::sleep(Duration::from_millis(1500));
        let gave_back = members[frozen].log().matches("giving the partition back").count();
        members[frozen].signal(Signal::SIGCONT);
        wait_until(LONG, "the thawed member gives partition 0 back", || {
            members[frozen].log().matches("giving the partition back").count() > gave_back
        });
        let stopped = Instant::now();
        members[next].signal(Signal::SIGTERM);
        wait_until(LONG, "another member's run starts", || g.starts().len() == before + 2 && g.lock_held());
        let handover = stopped.elapsed();
        let starts = g.starts();
        eprintln!("round {round}: handover {handover:?}, {starts:?}");
        assert_ne!(starts[before + 1].0, members[next].name, "the stopped leader led again: {starts:?}");
        assert!(handover < session / 2, "round {round}: the handover took {handover:?}, held up by the thawed rejoin");
        members[next].wait_exit(LONG);
        // Three members again, each in the group, for the next round.
        members[next] = join(newcomer);
        wait_until(LONG, "the newcomer stands by", || members[next].joined_as_standby());
    }
    g.assert_no_overlap();
}

/// neli-run's own fence, alone: the shim is frozen, so its lease cannot
/// kill, and the session (10 s) outlasts the bound, so librdkafka cannot
/// report the assignment lost (a revoke that kills too): only the run
/// loop's timer, which SIGKILLs everything below neli-run but the shim, can
/// end the command when the broker stops answering.
#[test]
fn the_shell_loops_own_fence_kills_the_command_while_the_shim_is_frozen() {
    let g = Group::on(Broker::dev(), "own-fence");
    let mut a = g.member("a", &["--session-timeout", "10s"], &["sleep", "1000"]);
    let t = g.broker.timing;
    wait_until(t.takeover(), "a leads", || g.lock_held());
    let shim = a.forked_pid().expect("neli-run's child is the shim");
    nix::sys::signal::kill(shim, Signal::SIGSTOP).unwrap();
    g.broker.signal(Signal::SIGSTOP);
    wait_until(fence_bound(&g), "neli-run fenced the command by itself", || !g.lock_held());
    g.broker.signal(Signal::SIGCONT);
    assert!(a.log().contains("fenced"), "{}", a.log());
    wait_until(Duration::from_secs(60), "it leads again", || g.lock_held());
    assert!(!a.exited(), "{}", a.log());
    g.assert_no_overlap();
}

#[test]
fn paused_broker_fences_the_leader_and_leadership_returns() {
    let g = Group::on(Broker::dev(), "broker-pause");
    let _members = g.sleepers(&["a", "b"]);
    let t = g.broker.timing;
    wait_until(t.takeover(), "a leader runs its child", || g.lock_held());
    g.broker.signal(Signal::SIGSTOP);
    wait_until(fence_bound(&g), "the leader fences while the broker is frozen", || !g.lock_held());
    g.broker.signal(Signal::SIGCONT);
    wait_until(t.takeover(), "someone leads again", || g.lock_held());
    let tokens: Vec<i64> = g.starts().iter().map(|s| s.1).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens must increase: {tokens:?}");
    g.assert_no_overlap();
}

/// A leave given up on (a second SIGTERM while the broker is frozen) ends
/// neli-run at once with the status due, and without exit's handlers, which
/// would run beside librdkafka's threads and free what they use.
#[test]
fn a_second_sigterm_while_leaving_a_frozen_broker_exits_at_once_with_the_status_due() {
    let g = Group::on(Broker::dev(), "leave-given-up");
    let t = g.broker.timing;
    let mut m = g.member("a", &["-v"], &["sleep", "1000"]);
    wait_until(t.takeover(), "a leads", || g.lock_held());
    g.broker.signal(Signal::SIGSTOP);
    m.signal(Signal::SIGTERM);
    wait_until(fence_bound(&g), "a leaves the group", || m.log().contains("leaving the group"));
    m.signal(Signal::SIGTERM);
    let status = m.wait_exit(Duration::from_secs(5));
    g.broker.signal(Signal::SIGCONT);
    assert_eq!(status.code(), Some(143), "{}", m.log());
    let log = m.log();
    assert!(log.contains("asked again: exiting without waiting"), "{log}");
    assert!(log.contains("librdkafka may still run: exiting without exit handlers"), "{log}");
    g.assert_no_overlap();
}

/// The broker restarts (it keeps its log, as Kafka does): once for less
/// than a session, once for longer, so that the coordinator expires every
/// session while it is down. The leader must fence while it is away, and
/// leadership come back with a larger token.
///
/// Regression (found by this fault, about one run in three before the fix):
/// the fenced leader's rejoin was merged by librdkafka into the join it had
/// already started on reconnecting; it kept partition 0 with nothing newly
/// assigned, was never told, and nobody led again.
#[test]
fn broker_restart_fences_the_leader_and_leadership_returns() {
    let mut g = Group::on(Broker::dev(), "broker-restart");
    let t = g.broker.timing;
    let _members: Vec<Member> = g.sleepers(&["a", "b", "c"]);
    for down_for in [Duration::ZERO, t.session] {
        wait_until(t.takeover(), "someone leads", || g.lock_held());
        let before = g.starts().len();
        g.broker.signal(Signal::SIGUSR1);
        wait_until(fence_bound(&g), "the leader fences while the broker is down", || !g.lock_held());
        std::thread::sleep(down_for); // the fault itself: how long the broker stays down
        g.broker.signal(Signal::SIGUSR2);
        wait_until(t.takeover(), "someone leads again", || g.starts().len() > before && g.lock_held());
        assert!(g.broker.running(), "the dev broker survived its restart");
    }
    let tokens: Vec<i64> = g.starts().iter().map(|s| s.1).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens must increase: {tokens:?}");
    g.assert_no_overlap();
}

/// The leader runs in a network namespace; the standby does not.
fn cut_setup(test: &str, session: &str) -> Option<(crate::util::NetNs, Group, Member)> {
    let ns = crate::util::netns()?;
    let mut broker = Broker::dev_at(&ns.host_ip);
    broker.timing.session = humantime::parse_duration(session).unwrap();
    let g = Group::on(broker, test);
    let a = g.member_in(Some(ns.exec_prefix()), "a", &[], &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "the member in the namespace leads", || {
        g.starts().first().is_some_and(|s| s.0 == "a") && g.lock_held()
    });
    Some((ns, g, a))
}

#[test]
fn network_cut_shorter_than_the_session_fences_then_resumes_with_a_new_token() {
    // A session long enough that the group keeps us while we are cut off,
    // and while TCP backs off its retransmissions after the heal.
    let Some((ns, g, a)) = cut_setup("cut-short", "15s") else { return };
    let b = g.member("b", &[], &["sleep", "1000"]);
    wait_until(Duration::from_secs(30), "b is a standby", || b.joined_as_standby());
    let cut = Instant::now();
    ns.cut();
    wait_until(fence_bound(&g), "the cut-off leader fences its child", || !g.lock_held());
    let fenced_after = cut.elapsed();
    assert!(fenced_after >= g.broker.timing.deadline / 2, "fenced too early: {fenced_after:?}");
    ns.heal();
    wait_until(g.broker.timing.takeover(), "the leader resumes", || g.starts().len() == 2 && g.lock_held());
    let starts = g.starts();
    assert_eq!(starts[1].0, "a", "the same member resumes: {starts:?}");
    assert!(starts[1].1 > starts[0].1, "with a new, larger token: {starts:?}");
    assert!(a.log().contains("fenced") && a.log().contains("resumed"), "{}", a.log());
    g.assert_no_overlap();
}

#[test]
fn network_cut_longer_than_the_session_hands_over_without_overlap() {
    let Some((ns, g, a)) = cut_setup("cut-long", "3s") else { return };
    let b = g.member("b", &[], &["sleep", "1000"]);
    wait_until(Duration::from_secs(30), "b is a standby", || b.joined_as_standby());
    ns.cut();
    wait_until(fence_bound(&g), "the cut-off leader fences its child", || !g.lock_held());
    wait_until(g.broker.timing.takeover(), "the standby takes over", || {
        g.starts().last().is_some_and(|s| s.0 == "b") && g.lock_held()
    });
    ns.heal();
    // a comes back to find its session gone: it must stand by, not overlap.
    wait_until(g.broker.timing.takeover(), "a rejoins as a standby", || a.log().matches("standby").count() >= 1);
    assert!(
        crate::util::stays_false(g.broker.timing.session * 2, || g.starts().len() > 2),
        "leadership moved again: {:?}",
        g.starts()
    );
    g.assert_no_overlap();
}

/// Issue 28: a network blip between the leader and the broker, well within
/// half the session timeout, at the product's default timing (session 6 s,
/// heartbeat deadline 5 s). TCP's retransmission backoff stretches the
/// 2 s of loss to 3.2-3.9 s without a heartbeat (docs/proof.md, "Network
/// blips"); the deadline rides it out, and a connection still silent after
/// the request timeout (3 s) would be replaced. The command runs on,
/// with the same token, and nothing fences.
#[test]
fn network_blip_at_the_default_timing_leaves_the_command_running() {
    let Some(ns) = crate::util::netns() else { return };
    let g = Group::on(Broker::dev_at(&ns.host_ip), "blip");
    let a = g.member_untimed_in(ns.exec_prefix(), "a", &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "a leads", || g.lock_held());
    let b = g.member_untimed("b", &[], &["sleep", "1000"]);
    wait_until(Duration::from_secs(30), "b is a standby", || b.joined_as_standby());
    let before = g.starts();
    ns.cut();
    std::thread::sleep(Duration::from_secs(2)); // the fault itself: the blip
    ns.heal();
    let back = "own heartbeats back after a gap";
    wait_until(Duration::from_secs(15), "a's own heartbeats are back", || a.log().contains(back));
    assert_eq!(g.starts(), before, "the command was restarted:\n{}", a.log());
    assert!(g.lock_held(), "the command stopped:\n{}", a.log());
    assert!(!a.log().contains("fenced"), "{}", a.log());
    g.assert_no_overlap();
}

/// Regression (found by neli-soak, seed 11): the broker paused for a whole
/// session timeout. On its return the fenced leader read a backlog heartbeat
/// that was still fresh and resumed, while the coordinator had expired its
/// session and given partition 0 to another member: two leaders. A gap in
/// our own heartbeats longer than the group waits now means rejoin, never
/// resume.
#[test]
fn regression_broker_paused_for_a_session_the_old_leader_does_not_resume() {
    let g = Group::on(Broker::dev(), "pause-session");
    let t = g.broker.timing;
    let _members: Vec<Member> = g.sleepers(&["a", "b", "c"]);
    for round in 1..=3 {
        wait_until(t.takeover(), "someone leads", || g.lock_held());
        let before = g.starts().len();
        g.broker.signal(Signal::SIGSTOP);
        std::thread::sleep(t.session); // the fault itself: a pause of one session
        g.broker.signal(Signal::SIGCONT);
        wait_until(t.takeover(), "someone leads again", || g.starts().len() > before && g.lock_held());
        g.assert_no_overlap();
        eprintln!("round {round}: {:?}", g.starts());
    }
}

/// Regression (found by neli-soak): the broker paused while members were
/// joining. The mock never answered their pending JoinGroup, and librdkafka
/// waits for that answer as long as the rebalance timeout (then 5 minutes):
/// no standby could take over. The default rebalance timeout is now short.
#[test]
fn regression_broker_paused_during_joins_members_are_not_stuck() {
    let g = Group::on(Broker::dev(), "pause-joins");
    let t = g.broker.timing;
    // librdkafka's protocol log says when a JoinGroup went out and when
    // its answer came back: pause the broker while one is unanswered.
    let verbose = ["-v", "-X", "debug=protocol"];
    let unanswered = |m: &Member| {
        let log = m.log();
        log.matches("Sent JoinGroupRequest").count() > log.matches("Received JoinGroupResponse").count()
    };
    // Each member that joins starts a rebalance, whose JoinGroup waits for
    // the members already in to rejoin (up to a coordinator heartbeat). But
    // members that reach the coordinator in the same instant share one
    // rebalance and leave no such wait: seen on a loaded machine, where all
    // three were held up, then joined within 5 ms and were answered at once.
    // So one more member joins while no JoinGroup has been seen waiting.
    let mut members: Vec<Member> = ["a", "b", "c"].iter().map(|n| g.member(n, &verbose, &["sleep", "1000"])).collect();
    let mut more = ["d", "e", "f"].into_iter();
    while stays_false(t.takeover(), || members.iter().any(unanswered)) {
        let name = more.next().expect("a JoinGroup request seen waiting for its answer, with up to six members");
        members.push(g.member(name, &verbose, &["sleep", "1000"]));
    }
    g.broker.signal(Signal::SIGSTOP);
    std::thread::sleep(t.session); // the fault: a pause of one session
    g.broker.signal(Signal::SIGCONT);
    let settled = |m: &Member| m.joined_as_standby() || m.log().contains("child started");
    // 5 minutes before the fix; the default rebalance timeout is 2 × session now.
    wait_until(t.session * 6 + Duration::from_secs(10), "every member has joined", || members.iter().all(settled));
    wait_until(t.takeover(), "someone leads", || g.lock_held());
    g.assert_no_overlap();
}

/// Found by neli-soak: the leader's network cut for longer than the resume
/// window but less than the session. It gives partition 0 back (a resume
/// could no longer be trusted) while still cut off; once healed, the group
/// must elect someone promptly, without overlap.
#[test]
fn network_cut_past_the_resume_window_gives_partition_0_back_and_someone_leads() {
    let Some((ns, g, a)) = cut_setup("cut-window", "3s") else { return };
    let b = g.member("b", &[], &["sleep", "1000"]);
    wait_until(Duration::from_secs(30), "b is a standby", || b.joined_as_standby());
    // Counted here, not assumed 1: on a loaded machine a may already have
    // fenced and resumed once (a new start) before the cut.
    let before = g.starts().len();
    ns.cut();
    wait_until(g.broker.timing.takeover(), "a gives partition 0 back", || {
        a.log().contains("giving the partition back")
    });
    ns.heal();
    wait_until(g.broker.timing.takeover(), "someone leads again", || g.starts().len() > before && g.lock_held());
    g.assert_no_overlap();
}

/// Writes a heartbeat of member `ghost` to the group's partition 0, as
/// another member would: saying `record`, sent now, with a deadline.
fn write_record(g: &Group, ghost: &neli_run::for_tests::Member, record: Record, deadline_ms: u64) {
    use neli_run::for_tests::{wall_ms, BootTime, Content, Heartbeat};
    let content = Content { record, since_ms: None, deadline_ms };
    // Each newer than the last, as a writer counts its records.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    g.produce(&Heartbeat::new(ghost, seq, BootTime::now(), wall_ms(), content).encode());
}

fn leading(token: i64) -> Record {
    Record {
        term: 1,
        start: None,
        stance: Stance::Leading { token },
        attempt: None,
        next: None,
        pause: None,
        to: None,
        job: None,
    }
}

/// Regression (found by neli-soak on tansu): the broker gave partition 0 to
/// a new member 0.26 s after the old leader had written a claim, while that
/// leader's heartbeats were stalled and its command still ran; the new
/// member read partition 0 from the end, never saw the claim, and started
/// its command too. The test plays the stalled old leader: a fresh claim
/// with a 4 s deadline is in the partition when the new member is assigned.
/// Its command must not start before the claim has run out.
#[test]
fn regression_a_new_owner_waits_out_a_claim_written_just_before_its_assignment() {
    let g = Group::on(Broker::dev(), "claim-before");
    let ghost = neli_run::for_tests::Member::this_process("ghost".into());
    // Before the write: the record is stamped at its start, and the flush
    // after it took over a second on a loaded machine (the member, right,
    // then led 3.4 s after the write returned and 4.5 s after the stamp).
    let written = Instant::now();
    write_record(&g, &ghost, leading(1_000_000), 4000);
    let a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover() + Duration::from_secs(5), "a leads once the claim ran out", || g.lock_held());
    // The claim's deadline: its command is dead 4 s after it was written.
    assert!(written.elapsed() >= Duration::from_secs(4), "led {:?} after the claim", written.elapsed());
    assert!(a.log().contains("waiting until its command must be gone"), "{}", a.log());

    // A claim its writer withdrew (a graceful stop disclaims) holds nobody back.
    let g = Group::on(Broker::dev(), "claim-withdrawn");
    write_record(&g, &ghost, leading(1_000_000), 60_000);
    write_record(&g, &ghost, Record::saying(1, Stance::Released), 60_000);
    let a = g.member("a", &[], &["sleep", "1000"]);
    // Well within the 60 s the claim would hold it back.
    wait_until(g.broker.timing.takeover(), "a leads without waiting out the withdrawn claim", || g.lock_held());
    // Nor does it say it waits: it read the claim, then the disclaimer,
    // before its own record came back (the log said "waiting" on reading the
    // claim, and started the command milliseconds later).
    assert!(!a.log().contains("waiting"), "{}", a.log());
}

/// Regression (found by neli-soak on tansu, seed 48): the broker gave
/// partition 0 to two members 73 ms apart; both were candidates, neither
/// had a claim to read before its watch ended, and both led. Now the member
/// whose run came first on partition 0 goes first, and both read that from
/// the same log. The test plays the other member ("ghost"), writing its
/// records by hand: first as the earlier contender, then as one that a
/// leader finds out about only after it led.
#[test]
fn regression_of_two_owners_at_once_the_term_first_on_the_partition_leads() {
    let g = Group::on(Broker::dev(), "two-owners");
    // The ghost's records hold for 10 s: long enough that a loaded machine
    // cannot age one out before a reads it (2 s did, once in a full run);
    // the test ends each hold with a release, never by waiting it out.
    const HOLD_MS: u64 = 10_000;
    let ghost = neli_run::for_tests::Member::this_process("ghost".into());
    let contending = |start| Record { start, ..Record::saying(1, Stance::Contending) };
    write_record(&g, &ghost, contending(None), HOLD_MS);
    let a = g.member("a", &[], &["sleep", "1000"]);
    wait_until(g.broker.timing.takeover(), "a sees the earlier contender", || a.log().contains("it goes first"));
    // While the ghost keeps contending, a waits (its watch is long over).
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        write_record(&g, &ghost, contending(Some(0)), HOLD_MS);
        assert!(g.starts().is_empty(), "a led while an earlier run contended:\n{}", a.log());
    }
    write_record(&g, &ghost, Record::saying(1, Stance::Released), HOLD_MS);
    wait_until(g.broker.timing.takeover(), "a leads once the ghost withdraws", || g.lock_held());

    // a leads; now a record says a run that began at offset 0, before a's,
    // still contends: the group gave the partition to both, so a fences.
    let late = neli_run::for_tests::Member::this_process("late".into());
    write_record(&g, &late, contending(Some(0)), HOLD_MS);
    wait_until(fence_bound(&g), "a fences", || !g.lock_held());
    assert!(a.log().contains("since before our leadership began; fencing"), "{}", a.log());
    write_record(&g, &late, Record::saying(1, Stance::Released), HOLD_MS);
    wait_until(g.broker.timing.takeover(), "a resumes once it withdraws", || g.starts().len() == 2 && g.lock_held());
    g.assert_no_overlap();
}
