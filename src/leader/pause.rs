//! `pause` and `resume` on a seat's partition (`neli-run pause`, read as
//! the request or carried by a record there): while paused no command
//! starts, and `--stop` stops the one that runs. A seat of its own concern,
//! beside the leadership it does not change: a paused leader keeps its
//! partition, heartbeats and fence.

use super::seat::{Child, Ctx, Plan, Seat};
use super::{say, Pause, PauseNote};
use crate::clock::BootTime;

impl Seat {
    /// The pause in force on this seat, as far as we know.
    pub(super) fn paused(&self) -> bool {
        self.pause.as_ref().is_some_and(|p| p.paused)
    }

    /// A pause or resume, read as the request on our partition or carried
    /// by a record there: the newest by offset holds. While paused no
    /// command starts (`start_at`); `--stop` also stops a running one, and
    /// the plan to start it again waits for the resume (a run it cut short
    /// counts as one a fence cut short). Our next record says it at once:
    /// the asker waits for that.
    pub(super) fn on_pause(&mut self, cx: &mut Ctx, pause: Pause, now: BootTime) {
        if self.pause.as_ref().is_some_and(|known| known.offset >= pause.offset) {
            return;
        }
        let running = self.child == Child::Running;
        say::pause(&pause, running);
        let stop = pause.paused && pause.stop;
        let resumed = !pause.paused && self.paused();
        self.pause = Some(pause);
        if let (true, Plan::Start(_)) = (resumed, self.plan) {
            // A schedule's due times that passed while paused are missed,
            // as when nobody led: --missed decides.
            self.plan = Plan::Start(now);
        }
        if let Some(tenure) = self.tenure.as_mut() {
            tenure.next_heartbeat = now;
        }
        if stop && running {
            if let Plan::Serve | Plan::Start(_) = self.plan {
                self.plan = Plan::Start(now);
            }
            self.stop(cx, now);
        }
    }

    /// The pause as our records carry it.
    pub(super) fn pause_note(&self) -> Option<PauseNote> {
        let running = self.child != Child::Idle;
        self.pause.clone().map(|request| PauseNote { request, running })
    }
}
