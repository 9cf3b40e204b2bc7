//! `--on-lead`, `--on-unlead`, `--on-exit`: shell command lines run when
//! this member starts leading, stops leading, and when a run of its command
//! ends (a page on failure, a note to a chat, a load balancer told).
//!
//! With `--roles`, each role's hooks follow that role (told `NELI_ROLE`):
//! one thread and one queue for the member, the rules below per role.
//!
//! A report, never part of what keeps the safety promise: the loop only
//! queues a hook, after it has acted; a thread of its own runs them one at
//! a time, in order, each within --hook-timeout (then it and everything it
//! started are sent SIGKILL), and a failure is logged, never raised. A hook
//! that hangs delays the hooks after it, nothing else.
//!
//! Behind one that hangs, the queue says only what is still news: a lead or
//! unlead hook queued replaces the one still waiting (a lead followed by an
//! unlead before it started never runs, nor does that unlead if the lead
//! hook before was not started either: the world was never told it led),
//! and at most `MAX_EXIT_HOOKS` exit hooks wait, the oldest dropped. At exit
//! the wait for the hooks is bounded as a whole, by one --hook-timeout and
//! `EXIT_MARGIN`, whatever is queued: a stop fits systemd's
//! TimeoutStopSec=30s at the defaults.
//!
//! neli-run is a subreaper and reaps every process below it on the loop;
//! so a hook is started through `child::Beside`, which gets its status back
//! from the loop's `reap` and keeps the command's kills from sweeping it,
//! under a keeper (`child::keeper`) that kills what the hook left once it
//! has exited: nothing a hook starts outlives it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{error, info, warn};

use crate::child::Beside;
use crate::config::Config;
use crate::env;
use crate::exit::ChildStatus;
use crate::leader::{Partition, Reason, Standing};

/// Which hook: each is a flag of its own, and each is overtaken by its own
/// rule (`overtaken`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hook {
    /// --on-lead.
    Lead,
    /// --on-unlead.
    Unlead,
    /// --on-exit.
    Exit,
}

impl Hook {
    /// As NELI_HOOK says it, and the log.
    fn name(self) -> &'static str {
        match self {
            Hook::Lead => "lead",
            Hook::Unlead => "unlead",
            Hook::Exit => "exit",
        }
    }
}

/// One hook to run: which, for which role's seat, its command line, and
/// its environment.
struct Queued {
    hook: Hook,
    role: Partition,
    line: String,
    env: Vec<(String, String)>,
}

/// What the hooks' thread is to run, shared with the loop (which holds
/// its lock only to queue: never across a hook).
#[derive(Default)]
struct Queue {
    /// In order: at most one lead or unlead hook per role (the latest), and
    /// at most `MAX_EXIT_HOOKS` exit hooks.
    waiting: VecDeque<Queued>,
    /// Whether --on-lead is set, and the roles whose last lead or unlead
    /// hook started was a lead: with --on-lead, an unlead runs only to take
    /// one back.
    lead_hook: bool,
    told_lead: BTreeSet<Partition>,
    /// Whether a hook runs now.
    running: bool,
    /// No more hooks come: the thread ends once `waiting` is empty.
    closed: bool,
    /// Set when neli-run stops waiting: nothing more is started.
    stopped: bool,
}

/// The queue and its bell.
#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The hooks of this member, and what they have been told so far.
pub(super) struct Hooks {
    lines: crate::config::Hooks,
    env: Vec<(String, String)>,
    /// With --roles, each hook is told its role, and how many there are.
    roles: Option<u32>,
    shared: Arc<Shared>,
    worker: JoinHandle<()>,
    /// Per seat, what its hooks were told.
    told: BTreeMap<Partition, Told>,
}

/// What one seat's hooks know of its standing: the token --on-lead ran
/// for, the last standing seen, and the token the command runs (or last
/// ran) with.
struct Told {
    led: Option<i64>,
    last: Standing,
    command_token: Option<i64>,
}

impl Default for Told {
    fn default() -> Told {
        Told { led: None, last: Standing::Standby, command_token: None }
    }
}

impl Hooks {
    /// Starts the thread that runs the hooks; None if none is set.
    pub(super) fn start(cfg: &Config) -> Option<Hooks> {
        let lines = cfg.hooks.clone();
        if lines.on_lead.is_none() && lines.on_unlead.is_none() && lines.on_exit.is_none() {
            return None;
        }
        let queue = Queue { lead_hook: lines.on_lead.is_some(), ..Queue::default() };
        let shared = Arc::new(Shared { queue: Mutex::new(queue), changed: Condvar::new() });
        let (queue, timeout, remove) = (shared.clone(), lines.timeout, env::removed());
        let worker = std::thread::spawn(move || {
            while let Some(queued) = next(&queue) {
                run(&queued, remove, timeout);
                queue.lock().running = false;
            }
        });
        Some(Hooks { lines, env: cfg.given_env(), roles: cfg.roles, shared, worker, told: BTreeMap::new() })
    }

    /// Follows the standings `role`'s seat took since the last turn, in
    /// order: --on-lead for each new token, --on-unlead when leading ends
    /// (`why_standby`: the core's word for a change to standby).
    pub(super) fn follow(&mut self, role: Partition, standings: &[Standing], why_standby: Reason) {
        let told = self.told.entry(role).or_default();
        for (hook, token, reason) in changes(&mut told.led, &mut told.last, standings, why_standby) {
            self.queue(hook, role, token, vec![("NELI_REASON", reason.as_str().into())]);
        }
    }

    /// Notes the token `role`'s command was just started with.
    pub(super) fn spawned(&mut self, role: Partition, token: i64) {
        self.told.entry(role).or_default().command_token = Some(token);
    }

    /// `role`'s command's run ended with `status`, `why` as the core says.
    pub(super) fn exited(&mut self, role: Partition, status: ChildStatus, why: Reason) {
        let Some(token) = self.told.get(&role).and_then(|t| t.command_token) else { return };
        let env = vec![("NELI_REASON", why.as_str().into()), ("NELI_EXIT_STATUS", status.code().to_string())];
        self.queue(Hook::Exit, role, token, env);
    }

    /// Queues `hook` (if set) for `role` under `token`, with `extra` in its
    /// environment, in place of what it overtakes (`overtaken`).
    fn queue(&mut self, hook: Hook, role: Partition, token: i64, extra: Vec<(&str, String)>) {
        let line = match hook {
            Hook::Lead => &self.lines.on_lead,
            Hook::Unlead => &self.lines.on_unlead,
            Hook::Exit => &self.lines.on_exit,
        };
        let Some(line) = line.clone() else { return };
        let mut env = self.env.clone();
        env.push(("NELI_HOOK".into(), hook.name().into()));
        env.push(("NELI_FENCING_TOKEN".into(), token.to_string()));
        if let Some(roles) = self.roles {
            env.push(("NELI_ROLE".into(), role.to_string()));
            env.push(("NELI_ROLES".into(), roles.to_string()));
        }
        env.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
        let dropped = {
            let mut queue = self.shared.lock();
            let dropped = overtaken(&queue.waiting, hook, role).map(|at| queue.waiting.remove(at));
            queue.waiting.push_back(Queued { hook, role, line, env });
            dropped.flatten()
        };
        self.shared.changed.notify_all();
        if let Some(stale) = dropped {
            info!(
                hook = stale.hook.name(),
                by = hook.name(),
                "hook dropped before it started: overtaken by a later one"
            );
        }
    }

    /// At exit, once the group is left: --on-unlead if we still lead, then
    /// waits for the hooks queued, all of them within one --hook-timeout
    /// and `EXIT_MARGIN`; `hurry` (a second SIGTERM) cuts the wait short.
    /// What still runs then is sent SIGKILL. Someone must reap meanwhile
    /// (the loop no longer does).
    pub(super) async fn finish(mut self, hurry: impl std::future::Future<Output = ()>) {
        let roles: Vec<Partition> = self.told.keys().copied().collect();
        for role in roles {
            self.follow(role, &[Standing::Standby], Reason::Exiting);
        }
        let Hooks { shared, worker, lines, .. } = self;
        let left = {
            let mut queue = shared.lock();
            queue.closed = true;
            queue.waiting.len() + usize::from(queue.running)
        };
        shared.changed.notify_all();
        if left == 0 {
            return;
        }
        let bound = lines.timeout + EXIT_MARGIN;
        info!(hooks = left, ?bound, "waiting for the hooks queued");
        let finished = async {
            while !worker.is_finished() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let cut = tokio::select! {
            _ = finished => return,
            _ = hurry => "asked again: not waiting for the hooks",
            _ = tokio::time::sleep(bound) => "the hooks take too long",
        };
        shared.lock().stopped = true;
        let killed = Beside::kill_all();
        error!(killed, "{cut}; exiting (those still running, and all they started, were sent SIGKILL)");
    }
}

/// Where the hook that `hook` for `role` overtakes waits in `waiting`, if one
/// does: a lead or unlead hook overtakes the role's lead or unlead hook
/// waiting (there is at most one: each replaces the last), an exit hook the
/// oldest exit hook once `MAX_EXIT_HOOKS` wait.
fn overtaken(waiting: &VecDeque<Queued>, hook: Hook, role: Partition) -> Option<usize> {
    if hook == Hook::Exit {
        let exits = waiting.iter().filter(|q| q.hook == Hook::Exit).count();
        (exits >= MAX_EXIT_HOOKS).then(|| waiting.iter().position(|q| q.hook == Hook::Exit)).flatten()
    } else {
        waiting.iter().position(|q| q.hook != Hook::Exit && q.role == role)
    }
}

/// The next hook to run, once there is one; None once the queue is closed
/// and empty, or neli-run stopped waiting. With --on-lead, an unlead hook is
/// passed over when the last lead or unlead hook started was not a lead:
/// the lead it would take back never ran.
fn next(shared: &Shared) -> Option<Queued> {
    let mut queue = shared.lock();
    loop {
        if queue.stopped {
            return None;
        }
        match queue.waiting.pop_front() {
            Some(queued)
                if queued.hook == Hook::Unlead && queue.lead_hook && !queue.told_lead.contains(&queued.role) =>
            {
                info!(hook = queued.hook.name(), "hook not run: the lead hook it would take back never ran");
            }
            Some(queued) => {
                match queued.hook {
                    Hook::Lead => queue.told_lead.insert(queued.role),
                    Hook::Unlead => queue.told_lead.remove(&queued.role),
                    Hook::Exit => false,
                };
                queue.running = true;
                return Some(queued);
            }
            None if queue.closed => return None,
            None => queue = shared.changed.wait(queue).unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// The hooks a sequence of standings calls for, as (hook, token, reason):
/// "lead" on each new token (reason "elected", or "resumed" after a
/// fence), "unlead" when leading ends ("fenced", or `why_standby`).
fn changes(
    led: &mut Option<i64>,
    last: &mut Standing,
    standings: &[Standing],
    why_standby: Reason,
) -> Vec<(Hook, i64, Reason)> {
    let mut out = Vec::new();
    for &role in standings {
        let before = std::mem::replace(last, role);
        match role {
            Standing::Leader { token } if *led == Some(token) => {}
            Standing::Leader { token } => {
                *led = Some(token);
                out.push((
                    Hook::Lead,
                    token,
                    if before == Standing::Fenced { Reason::Resumed } else { Reason::Elected },
                ));
            }
            Standing::Fenced | Standing::Standby | Standing::Candidate => {
                if let Some(token) = led.take() {
                    out.push((
                        Hook::Unlead,
                        token,
                        if role == Standing::Fenced { Reason::Fenced } else { why_standby },
                    ));
                }
            }
        }
    }
    out
}

/// How long a hook sent SIGKILL may take to be reaped before its thread
/// goes on (a process in uninterruptible sleep).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How long the wait for the hooks at exit may last beyond one
/// --hook-timeout: the hook then running is killed at its timeout, and one
/// started later is cut at this bound. At the defaults (10s, and a --grace
/// of at most 3s, and a group left in milliseconds) a stop takes well
/// within systemd's TimeoutStopSec=30s.
const EXIT_MARGIN: Duration = Duration::from_secs(1);

/// How many exit hooks may wait behind one that hangs (a command that
/// --restart starts again and again): the oldest is dropped beyond.
const MAX_EXIT_HOOKS: usize = 8;

/// Runs one hook to its end or its timeout, and logs how it went.
fn run(queued: &Queued, remove: &[OsString], timeout: Duration) {
    let hook = queued.hook.name();
    let mut cmd = Beside::shell(&queued.line);
    cmd.stdin(Stdio::null());
    for name in remove {
        cmd.env_remove(name);
    }
    cmd.envs(queued.env.iter().map(|(k, v)| (k, v)));
    let (pid, status) = match Beside::spawn(cmd) {
        Ok(started) => started,
        Err(err) => return warn!(hook, %err, "cannot start the hook"),
    };
    info!(hook, pid = pid.as_raw(), "hook started");
    let status = match status.recv_timeout(timeout) {
        Err(RecvTimeoutError::Timeout) => {
            if Beside::kill(pid) {
                warn!(
                    hook,
                    pid = pid.as_raw(),
                    ?timeout,
                    "hook still running after --hook-timeout: it and all it started were sent SIGKILL"
                );
            }
            status.recv_timeout(KILL_WAIT).ok()
        }
        got => got.ok(),
    };
    match status {
        Some(status) if status.success() => info!(hook, "hook done"),
        Some(status) => warn!(hook, %status, "hook failed"),
        None => warn!(hook, pid = pid.as_raw(), "hook not reaped in time; going on"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Hook::{Exit, Lead, Unlead};

    #[test]
    fn the_hooks_follow_leading_with_its_token_and_why_it_ended() {
        let (mut led, mut last) = (None, Standing::Standby);
        let mut follow = |standings: &[Standing], why| changes(&mut led, &mut last, standings, why);
        let leader = |token| Standing::Leader { token };
        assert_eq!(follow(&[Standing::Candidate], Reason::Revoked), vec![], "no lead, no unlead");
        assert_eq!(follow(&[leader(7)], Reason::Revoked), vec![(Lead, 7, Reason::Elected)]);
        assert_eq!(follow(&[leader(7)], Reason::Revoked), vec![], "the same token: nothing new");
        // A fence and a resume within one turn are two changes.
        assert_eq!(
            follow(&[Standing::Fenced, leader(9)], Reason::Revoked),
            vec![(Unlead, 7, Reason::Fenced), (Lead, 9, Reason::Resumed)]
        );
        assert_eq!(follow(&[Standing::Standby], Reason::Yielded), vec![(Unlead, 9, Reason::Yielded)]);
        assert_eq!(follow(&[Standing::Standby], Reason::Exiting), vec![], "unlead once");
        assert_eq!(
            follow(&[Standing::Candidate, leader(12), Standing::Standby], Reason::Lost),
            [(Lead, 12, Reason::Elected), (Unlead, 12, Reason::Lost)]
        );
    }

    /// A queue as the loop fills it, and the hooks it then runs, in order.
    fn ran(queued: &[Hook], told_lead: bool) -> Vec<Hook> {
        ran_of(&queued.iter().map(|&hook| (hook, 0)).collect::<Vec<_>>(), if told_lead { &[0] } else { &[] })
            .into_iter()
            .map(|(hook, _)| hook)
            .collect()
    }

    /// `ran`, of hooks for several roles, `told_lead` the roles told.
    fn ran_of(queued: &[(Hook, Partition)], told_lead: &[Partition]) -> Vec<(Hook, Partition)> {
        let shared = Shared::default();
        for &(hook, role) in queued {
            let mut queue = shared.lock();
            if let Some(at) = overtaken(&queue.waiting, hook, role) {
                queue.waiting.remove(at);
            }
            queue.waiting.push_back(waiting(hook, role));
        }
        shared.lock().told_lead = told_lead.iter().copied().collect();
        shared.lock().lead_hook = true;
        shared.lock().closed = true;
        std::iter::from_fn(|| next(&shared)).map(|queued| (queued.hook, queued.role)).collect()
    }

    fn waiting(hook: Hook, role: Partition) -> Queued {
        Queued { hook, role, line: String::new(), env: Vec::new() }
    }

    #[test]
    fn each_roles_lead_and_unlead_hooks_are_its_own() {
        // Role 1's unlead does not overtake role 0's lead, nor role 0's
        // the other way; each role's latest change waits.
        let queued = [(Lead, 0), (Unlead, 1), (Unlead, 0), (Lead, 1), (Lead, 0)];
        assert_eq!(ran_of(&queued, &[1]), [(Lead, 1), (Lead, 0)]);
        // An unlead takes back its own role's lead only.
        assert_eq!(ran_of(&[(Unlead, 0), (Unlead, 1)], &[1]), [(Unlead, 1)]);
        assert_eq!(ran_of(&[(Lead, 2), (Unlead, 2)], &[]), []);
    }

    #[test]
    fn behind_a_hook_that_hangs_only_the_latest_change_waits_and_an_unlead_only_takes_back_a_lead() {
        // The lead hook ran (and hangs): two yields and a stop queue three
        // changes; the last alone is news.
        assert_eq!(ran(&[Unlead, Lead, Unlead], true), [Unlead]);
        assert_eq!(ran(&[Unlead, Lead], true), [Lead], "a new token: the world hears it");
        // The unlead hook ran last: a lead overtaken by an unlead never
        // runs, and neither does that unlead.
        assert_eq!(ran(&[Lead, Unlead], false), Vec::<Hook>::new());
        assert_eq!(ran(&[Lead], false), [Lead]);
        // Without --on-lead, every unlead is news.
        let shared = Shared::default();
        shared.lock().waiting.push_back(waiting(Unlead, 0));
        shared.lock().closed = true;
        assert_eq!(next(&shared).map(|queued| queued.hook), Some(Unlead));
        // Exit hooks keep their order among the changes, the oldest dropped
        // beyond MAX_EXIT_HOOKS.
        assert_eq!(ran(&[Exit, Unlead, Exit, Lead], true), [Exit, Exit, Lead]);
        let many = vec![Exit; MAX_EXIT_HOOKS + 3];
        assert_eq!(ran(&many, false).len(), MAX_EXIT_HOOKS);
        // Once neli-run stops waiting, nothing more starts.
        let shared = Shared::default();
        shared.lock().waiting.push_back(waiting(Exit, 0));
        shared.lock().stopped = true;
        assert!(next(&shared).is_none());
    }
}
