//! How a seat lets its partition go: a yield or hand-over (stop the
//! command, then stand aside), giving the partition back after a tenure
//! that could not confirm, the revoke's release, the disclaimer, a
//! shutdown, and exiting. The seat's part of each is here; what only the
//! member can do (leave the group, exit) the seat asks for with a
//! [`Leave`].

use tracing::{info, warn};

use super::seat::{Child, Ctx, Plan, Seat};
use super::{say, Action, Reason, Record, Stance};
use crate::clock::BootTime;

/// What a seat asks of its member that only the member can do, once the
/// seat has done its own part (disclaimed, given its tenure up). Leaving
/// the group and exiting are member-wide: with one seat they are that
/// seat's decision; with several (NELI roles), leaving the group drops
/// every seat's partition, and an exit waits for every seat's command
/// (`Leader::exit_when_idle`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Leave {
    /// Leave the group and join it again (`Action::Rejoin`).
    Rejoin,
    /// Leave the group until another member leads (`Action::StandAside`),
    /// or until `to`, the member our disclaimer names, does
    /// (`Action::HandOver`).
    StandAside { to: Option<String> },
    /// Leave the group and exit with this status.
    Exit(u8),
}

impl Seat {
    /// Hands over (`why`: "yielded" when asked, "unhealthy" when the
    /// health check failed, "preempted" for a member of higher priority;
    /// `to` the member named, if any): stops the command, then stands aside.
    pub(super) fn on_yield(&mut self, cx: &mut Ctx, why: Reason, to: Option<String>, now: BootTime) {
        let Some(tenure) = self.tenure else { return };
        if let Plan::StandAside(_) | Plan::Exit(_) | Plan::Done = self.plan {
            return;
        }
        if to.as_deref() == Some(cx.v.settings.name.as_str()) {
            info!("asked to hand over to this member, which owns the partition already: nothing to do");
            return;
        }
        say::yielding(tenure.phase, to.as_deref(), why);
        *cx.hand_to = to;
        self.plan = Plan::StandAside(why);
        match self.child {
            Child::Idle => self.stand_aside(cx, why),
            Child::Running => self.stop(cx, now),
            Child::Stopping { .. } => {}
        }
    }

    /// Gives the partition back after a tenure that could not confirm. The
    /// first time, by rejoining: the fault may be the partition's (no
    /// leader), and whoever the group gives it to, us again most likely,
    /// confirms as soon as it is back. The second time in a row the fault
    /// is likely ours (cut off from the partition's leader while the
    /// coordinator still hears us), and the sticky assignor would hand the
    /// partition straight back to us for as long as it lasts: we stand
    /// aside so that another member can lead. Not while the command may
    /// still live: standing aside leaves without the revoke barrier.
    pub(super) fn give_back(&mut self, cx: &mut Ctx) {
        let again = std::mem::replace(&mut self.gave_back, true);
        if again && self.child == Child::Idle && self.serving() {
            warn!("the partition came back to us twice and we could not use it: standing aside for another member");
            return self.stand_aside(cx, Reason::Yielded);
        }
        self.tenure = None;
        self.stood_down = Reason::GaveBack;
        self.note_standing();
        self.disclaim(cx);
        self.ask(Leave::Rejoin);
    }

    /// Gives the tenure up and asks the member to leave the group until
    /// another member leads: the one our disclaimer hands over to, if it
    /// names one.
    pub(super) fn stand_aside(&mut self, cx: &mut Ctx, why: Reason) {
        self.plan = Plan::Serve;
        self.tenure = None;
        self.stood_down = why;
        self.note_standing();
        let to = cx.hand_to.clone();
        self.disclaim(cx);
        self.ask(Leave::StandAside { to });
    }

    /// Lets the revoke go: our command is gone.
    pub(super) fn release(&mut self, cx: &mut Ctx) {
        self.disclaim(cx);
        cx.out.push(Action::ReleaseRevoke(self.partition));
    }

    /// Says, before giving the partition up, that our command is gone and
    /// that we contend no more. Not while it may still live (giving the
    /// partition back after a long freeze kills it in the same step): our
    /// last claim then runs out by itself, and the disclaimer follows the
    /// revoke once the command is gone. Found by the invariant test.
    fn disclaim(&mut self, cx: &mut Ctx) {
        let to = cx.hand_to.take();
        if self.child == Child::Idle && std::mem::take(&mut self.spoke) {
            let record = Record {
                term: self.term,
                start: None,
                stance: Stance::Released,
                attempt: self.attempt.clone(),
                next: None,
                pause: self.pause_note(),
                to,
                job: self.job.clone(),
            };
            cx.out.push(Action::Disclaim(self.partition, record));
        }
    }

    /// SIGTERM, SIGINT or a fatal error (`code`): stop the command, then
    /// exit; asked again, kill it now.
    pub(super) fn on_shutdown(&mut self, cx: &mut Ctx, code: Option<u8>, now: BootTime) {
        if let Plan::Exit(_) = self.plan {
            if self.child != Child::Idle {
                warn!("asked again: killing the child now");
                self.kill(cx);
            }
            return;
        }
        self.plan = Plan::Exit(code);
        match self.child {
            Child::Idle => self.exit(cx, code.unwrap_or(0)),
            Child::Running => self.stop(cx, now),
            Child::Stopping { .. } => {}
        }
    }

    /// The seat's part of exiting: it is done, and says so.
    pub(super) fn retire(&mut self, cx: &mut Ctx) {
        self.plan = Plan::Done;
        self.tenure = None;
        self.stood_down = Reason::Exiting;
        self.note_standing();
        self.disclaim(cx);
    }

    /// Retires, and asks the member to exit with `code`.
    pub(super) fn exit(&mut self, cx: &mut Ctx, code: u8) {
        self.retire(cx);
        self.ask(Leave::Exit(code));
    }

    /// Asks the member to leave or exit once this call returns: at most
    /// once per call (each of these ends the seat's part of a step).
    fn ask(&mut self, leave: Leave) {
        debug_assert!(self.leaving.is_none(), "{:?} asked after {:?}", leave, self.leaving);
        self.leaving = Some(leave);
    }
}
