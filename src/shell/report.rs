//! What the shell tells the operator after each turn of its loop, from one
//! view of each seat (`Leader::views`): the metrics' snapshot, systemd's
//! READY=1 and status line, the hooks and the leader files. The single
//! leader is the one-seat case: role 0's seat is the one the member's own
//! series and status line show (with more roles, the status line names each
//! role held and the metrics have each role's series too).

use std::collections::BTreeMap;

use tokio::time::Interval;

use super::hooks::Hooks;
use super::input;
use super::leader_file::LeaderFile;
use crate::clock::BootTime;
use crate::leader::{Partition, SeatView, Standing};
use crate::metrics;
use crate::notify::Notifier;

/// The seat whose standing the member's own series and the single leader's
/// status line show: role 0's, the one seat there is without roles.
const FIRST: Partition = 0;

/// What the shell tells the operator: the metrics' snapshot and systemd.
pub(super) struct Report {
    pub(super) metrics: metrics::Shared,
    pub(super) notifier: Option<Notifier>,
    pub(super) watchdog: Option<Interval>,
    /// With --metrics-addr, the loop notes that it turns at least every
    /// LOOP_TICK, however long it would sleep: /livez tells a stuck loop
    /// from a standby's quiet one by that.
    pub(super) turning: Option<Interval>,
    /// In the group, or (with --health-cmd) connected and kept out by the
    /// check: started either way, as systemd's READY=1 means.
    pub(super) joined: bool,
    pub(super) ready: bool,
    /// The health check's verdict, once it has one (`--health-cmd`).
    pub(super) healthy: Option<bool>,
    /// `neli-run drain` named us.
    pub(super) drain: input::Drain,
    /// The single leader's status line as last sent: what it said it of.
    pub(super) shown: Option<(Standing, Option<bool>, bool)>,
    /// With roles, systemd's status line as last sent (`roles_status`).
    pub(super) shown_roles: Option<String>,
    /// `--leader-file`, one per seat, and the lines each holds besides the
    /// token and since (the role's first, with roles).
    pub(super) leader_files: BTreeMap<Partition, (LeaderFile, String)>,
    /// `--on-lead`, `--on-unlead`, `--on-exit`.
    pub(super) hooks: Option<Hooks>,
}

impl Report {
    /// Shows where the loop stands after a turn: `views` of every seat,
    /// `up` whether a seat's command runs as its leader's, `reachable`
    /// whether Kafka answers, at `now` (and its wall clock time).
    pub(super) fn show(
        &mut self,
        views: &[SeatView<'_>],
        up: impl Fn(Partition) -> bool,
        reachable: bool,
        now: (BootTime, u64),
    ) {
        self.metrics(views, up, reachable, now);
        if let Some(hooks) = self.hooks.as_mut() {
            for view in views {
                hooks.follow(view.partition, &view.taken, view.why_standby);
            }
        }
        for view in views {
            let Some((file, about)) = self.leader_files.get_mut(&view.partition) else { continue };
            let since = humantime::format_rfc3339_millis(std::time::SystemTime::now());
            file.show(token(view.standing), |token| format!("token={token}\n{about}since={since}\n"));
        }
        if self.joined && !self.ready {
            self.ready = true;
            self.notify("READY=1");
        }
        // The status line follows READY=1.
        if self.ready {
            self.status_line(views);
        }
    }

    /// The metrics' snapshot: the member's own series from role 0's seat,
    /// each role's with several, and each crontab job's on its seat.
    fn metrics(&self, views: &[SeatView<'_>], up: impl Fn(Partition) -> bool, reachable: bool, now: (BootTime, u64)) {
        let (now, wall) = now;
        let mut m = self.metrics.lock().expect("metrics lock");
        let first = views.iter().find(|v| v.partition == FIRST);
        for &standing in first.map_or(&[][..], |v| &v.taken[..]) {
            m.set_standing(standing, wall);
        }
        m.set_standing(first.map_or(Standing::Standby, |v| v.standing), wall);
        m.fresh = first.and_then(|v| v.fresh);
        m.child_up = up(FIRST);
        m.paused = first.is_some_and(|v| v.paused);
        m.note_run(first.and_then(|v| v.last_run), first.is_some_and(|v| v.child_alive));
        m.next_due_ms = first.and_then(|v| v.next_due.filter(|_| token(v.standing).is_some())).map(|n| n.at_ms);
        m.loop_seen = Some(now);
        m.kafka_reachable = reachable;
        if views.len() > 1 {
            for view in views {
                let stat = m.roles.entry(view.partition).or_default();
                stat.token = token(view.standing);
                stat.up = up(view.partition);
                stat.paused = view.paused;
            }
        }
        // A crontab's jobs, each on its seat (one read again keeps the
        // series of a job removed: what is known of it stays true).
        for stat in m.jobs.values_mut() {
            (stat.owned, stat.next_due_ms) = (false, None);
        }
        m.lacked.clear();
        for view in views {
            let leads = token(view.standing).is_some();
            let Some(job) = view.job else {
                m.lacked.extend(view.placed.filter(|_| leads).map(str::to_owned));
                continue;
            };
            // Named once: this runs at every turn of the loop.
            if !m.jobs.contains_key(job) {
                m.jobs.insert(job.to_owned(), metrics::JobStat::default());
            }
            let Some(stat) = m.jobs.get_mut(job) else { continue };
            stat.owned = leads;
            stat.next_due_ms = view.next_due.map(|n| n.at_ms).filter(|_| leads);
            stat.note_run(view.last_run, view.child_alive);
        }
    }

    /// systemd's status line, sent when it changes: the single leader's
    /// standing, or with roles the roles held.
    fn status_line(&mut self, views: &[SeatView<'_>]) {
        if views.len() > 1 {
            let mut held = roles_status(views.iter().map(|v| (v.partition, v.standing)));
            if self.drain.drained {
                held = format!("drained (`neli-run undrain` ends it): {held}");
            }
            if self.shown_roles.as_ref() != Some(&held) {
                self.notify(&format!("STATUS={held}"));
                self.shown_roles = Some(held);
            }
            return;
        }
        let standing = views.iter().find(|v| v.partition == FIRST).map_or(Standing::Standby, |v| v.standing);
        let shown = (standing, self.healthy, self.drain.drained);
        if self.shown == Some(shown) {
            return;
        }
        self.shown = Some(shown);
        self.notify(&match standing {
            Standing::Standby if self.drain.drained => {
                "STATUS=drained: out of the group until `neli-run undrain`".into()
            }
            Standing::Standby if self.healthy == Some(false) => {
                "STATUS=unhealthy: out of the group until the health check passes".into()
            }
            Standing::Standby => "STATUS=standby".into(),
            Standing::Candidate => "STATUS=candidate: confirming leadership".into(),
            Standing::Leader { token } => format!("STATUS=leader, fencing token {token}"),
            Standing::Fenced => "STATUS=fenced: no fresh heartbeat, command killed".into(),
        });
    }

    /// Sends a notification to systemd, if it asked for them.
    pub(super) fn notify(&self, message: &str) {
        self.notifier.iter().for_each(|n| n.send(message));
    }
}

/// The token a seat leads under, if it leads.
fn token(standing: Standing) -> Option<i64> {
    match standing {
        Standing::Leader { token } => Some(token),
        _ => None,
    }
}

/// systemd's status line for a member of several roles: the roles it
/// leads, with their tokens, and those it is confirming or fenced on.
fn roles_status(standings: impl Iterator<Item = (Partition, Standing)>) -> String {
    let (mut leading, mut other) = (Vec::new(), Vec::new());
    for (role, standing) in standings {
        match standing {
            Standing::Leader { token } => leading.push(format!("{role} (token {token})")),
            Standing::Candidate => other.push(format!("{role} confirming")),
            Standing::Fenced => other.push(format!("{role} fenced")),
            Standing::Standby => {}
        }
    }
    match (leading.is_empty(), other.is_empty()) {
        (true, true) => "standby: no role".into(),
        (false, true) => format!("leading role(s) {}", leading.join(", ")),
        (true, false) => format!("role(s) {}", other.join(", ")),
        (false, false) => format!("leading role(s) {}; role(s) {}", leading.join(", "), other.join(", ")),
    }
}
