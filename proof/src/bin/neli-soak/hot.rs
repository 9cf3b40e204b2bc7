//! The hot set's faults (`--hot-standbys K`, more than 1 + K candidates):
//! only the leader and K hot standbys are in the consumer group, every
//! other member is cold (docs/how-it-works.md, "A large group").
//!
//! Which members are hot is what `neli-run status --json` says: the list
//! the owner of partition 0 last wrote (`hot_standbys`), the one source
//! every member acts on. The members' logs say when each went cold or
//! joined, but a log line lags and a member killed with -9 says nothing;
//! the list is written by the one member that decides.
//!
//! A hot standby's fault (`hot-kill-9`, `hot-unhealthy`) is planned to
//! leave leadership where it is: it is over once the list names K others
//! (a cold member called in its place) and the fault has ended. Its time
//! to that list is the summary's refill; the leader's command stopping
//! meanwhile is a needless stop, no list within --stall a stall.

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{kill, Signal};

use neli_proof::Rng;

use crate::faults::{wall, watch, End, Fault, Injection, Leaderless, Run};
use crate::members::Soak;

/// The list the owner of partition 0 names: (K, names), if `status` read one.
pub fn hot_list(soak: &Soak) -> Option<(usize, Vec<String>)> {
    let out = std::process::Command::new(&soak.neli)
        .args(["status", "-b", &soak.brokers, "-g", &soak.group, "--json"])
        .output()
        .ok()?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let list = json.get("hot_standbys")?;
    let names = list.get("names")?.as_array()?.iter().filter_map(|n| Some(n.as_str()?.to_string())).collect();
    Some((usize::try_from(list.get("k")?.as_u64()?).ok()?, names))
}

/// How often a hot standby's fault asks `status` for the list.
const POLL: Duration = Duration::from_millis(500);

impl Soak {
    /// `Fault::HotSetKill9`'s strike: kill -9 of the leader in `slot` and
    /// of every member held (the hot standbys `episode` marked), all kept
    /// down until `end`.
    pub fn kill_hot_set(&self, slot: usize) {
        self.slots[slot].hold.set(Some(Instant::now() + Duration::from_secs(86_400)));
        for (i, s) in self.slots.iter().enumerate() {
            if s.hold.get().is_some() && s.member.is_some() {
                let _ = kill(self.pid(i), Signal::SIGKILL);
            }
        }
    }
}

/// Injects a hot-set fault (`f.fault`) and watches it to its end; None if
/// no list names a hot standby alive here (the fault is not drawn then).
pub fn episode(
    soak: &mut Soak,
    f: &Injection,
    rng: &mut Rng,
    stall: Duration,
    interrupted: &AtomicBool,
    run: &mut Run,
) -> Option<End> {
    let (k, names) = hot_list(soak)?;
    let leader = soak.slots[f.slot].member.as_ref().map(|(n, _)| n.clone());
    let hot: Vec<(usize, String)> = names
        .iter()
        .filter(|n| Some(*n) != leader.as_ref())
        .filter_map(|n| Some((soak.slot_named(n)?, n.clone())))
        .collect();
    if hot.is_empty() {
        return None;
    }
    if f.fault == Fault::HotSetKill9 {
        for (slot, _) in &hot {
            soak.slots[*slot].hold.set(Some(Instant::now() + Duration::from_secs(86_400)));
        }
        return Some(watch(soak, f, rng, stall, interrupted));
    }
    let (slot, name) = hot[(rng.next_u64() % hot.len() as u64) as usize].clone();
    let injected = Instant::now();
    let injected_at = SystemTime::now();
    let before = &f.before;
    let sick = soak.health_file(Fault::Unhealthy, &name);
    if f.fault == Fault::HotKill9 {
        let down = rng.between(soak.session / 5, soak.session * 2);
        soak.slots[slot].hold.set(Some(injected + down));
        let _ = kill(soak.pid(slot), Signal::SIGKILL);
    } else {
        let _ = fs::write(&sick, "");
    }
    let mut healed = false;
    let (mut leaderless, mut refilled, mut polled) = (Leaderless::default(), None, injected);
    loop {
        soak.fill();
        let now = Instant::now();
        let held = soak.detector.lock_held();
        leaderless.note(held, now);
        if refilled.is_none() && now >= polled + POLL {
            polled = now;
            let full = hot_list(soak).is_some_and(|(k2, n)| k2 == k && n.len() >= k && !n.contains(&name));
            if full {
                refilled = Some(injected.elapsed());
            }
        }
        // The sick one heals once replaced; the killed one comes back
        // (cold, a new name) when its hold is up.
        if !healed && refilled.is_some() && f.fault == Fault::HotUnhealthy {
            let _ = fs::remove_file(&sick);
            healed = true;
        }
        healed |= f.fault == Fault::HotKill9 && soak.slots[slot].hold.get().is_none_or(|until| now >= until);
        let starts = soak.detector.starts();
        let moved = starts.len() > before.len() && starts[before.len()..].iter().any(|s| Some(&s.0) != leader.as_ref());
        let stopped = interrupted.load(Ordering::Relaxed);
        let stalled = injected.elapsed() > stall;
        let over = held && healed && refilled.is_some();
        if !(over || stopped || stalled) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let _ = fs::remove_file(&sick);
        soak.slots[slot].hold.set(None);
        if let Some(took) = refilled {
            run.refills.entry(f.fault).or_default().push(took);
        }
        if over {
            return Some(End::Over { leaderless: leaderless.total, moved, struck_stopped: false });
        }
        if stopped {
            return Some(End::Interrupted);
        }
        eprintln!(
            "neli-soak: {} injected at {} into hot standby {name}: after {stall:?} no list of {k} without it \
             (refilled {refilled:?}, lock held {held})",
            f.fault.name(),
            wall(injected_at),
        );
        return Some(End::Stalled { moved });
    }
}

/// What the members' logs say of the hot set's churn: (cold members that
/// joined the group, by why, and members that went cold).
pub fn churn(dir: &std::path::Path) -> (Vec<(&'static str, usize)>, usize) {
    // neli-run's lines (src/leader/cold.rs, `settle_cold`).
    let joins = [
        ("named hot", "named a hot standby: joining the group"),
        ("the list short", "names fewer hot standbys than it wants: joining the group"),
        ("the hot set silent", "joining the group in case every hot member is gone"),
    ];
    let mut counts: Vec<(&'static str, usize)> = joins.iter().map(|(why, _)| (*why, 0)).collect();
    let mut cold = 0;
    for (_, line) in crate::judge::member_lines(dir) {
        if line.contains("a cold standby: leaving the group") {
            cold += 1;
        }
        for (i, (_, says)) in joins.iter().enumerate() {
            counts[i].1 += usize::from(line.contains(says));
        }
    }
    (counts, cold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_churn_counts_each_join_by_why_and_each_member_gone_cold() {
        let dir = std::env::temp_dir().join(format!("neli-soak-hot-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let t = "2026-11-30T02:32:26.779868Z  INFO";
        // say.rs's line beside cold.rs's: one member gone cold, not two.
        let a = format!(
            "{t} a cold standby: not among the hot standbys the owner of partition 0 names hot=b k=2\n\
             {t} a cold standby: leaving the group until the owner of partition 0 names this member or goes silent hot=b\n\
             {t} the owner of partition 0 names fewer hot standbys than it wants: joining the group hot=b\n"
        );
        let b = format!(
            "{t} named a hot standby: joining the group hot=b, c\n\
             {t} no live record of the owner of partition 0 read: joining the group in case every hot member is gone\n"
        );
        fs::write(dir.join("a-1.log"), a).unwrap();
        fs::write(dir.join("b-2.log"), b).unwrap();
        fs::write(dir.join("modes"), "named a hot standby: joining the group\n").unwrap();
        let counted = churn(&dir);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(counted, (vec![("named hot", 1), ("the list short", 1), ("the hot set silent", 1)], 1));
    }
}
