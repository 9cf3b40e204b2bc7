//! `--on-lead`, `--on-unlead`, `--on-exit`, `--on-failure`: shell command
//! lines run when this member starts leading, stops leading, when a run of
//! its command ends, and when one fails (a page, a note to a chat, a load
//! balancer told).
//!
//! A run fails (`run_failed`) when it ended by itself and not with 0, or we
//! stopped it for running too long; one we stopped for any other reason (a
//! revoke, a fence, a yield, a stop) did not fail: neli-run ended it. With
//! `--crontab`, a job's `on-failure=` stands in for `--on-failure`.
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
//! a failure hook queued replaces the role's (or job's) one still waiting,
//! and says in NELI_FAILURES how many failed runs it stands for (a job
//! failing every second behind a hook that hangs queues one hook, not one
//! a second), and at most `MAX_EXIT_HOOKS` exit hooks wait, the oldest
//! dropped. At exit
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
use crate::runs::RunRecord;

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
    /// --on-failure, or a crontab job's `on-failure=`.
    Failure,
}

impl Hook {
    /// As NELI_HOOK says it, and the log.
    fn name(self) -> &'static str {
        match self {
            Hook::Lead => "lead",
            Hook::Unlead => "unlead",
            Hook::Exit => "exit",
            Hook::Failure => "failure",
        }
    }
}

/// One hook to run: which, for which role's seat, its command line, and
/// its environment; a failure hook, how many failed runs it stands for
/// (itself and those it replaced while waiting).
struct Queued {
    hook: Hook,
    role: Partition,
    line: String,
    env: Vec<(String, String)>,
    failures: u32,
}

/// What the hooks' thread is to run, shared with the loop (which holds
/// its lock only to queue: never across a hook).
#[derive(Default)]
struct Queue {
    /// In order: at most one lead or unlead hook per role (the latest), at
    /// most one failure hook per role (the latest), and at most
    /// `MAX_EXIT_HOOKS` exit hooks.
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
    /// With --crontab, each placed job's `on-failure=` (if any) and its
    /// assignments, by its seat.
    jobs: BTreeMap<Partition, JobHook>,
}

/// What a crontab's job gives its failure hook: its own command line, and
/// the assignments above it (a `PATH=` finds the hook as it finds the job).
struct JobHook {
    on_failure: Option<String>,
    env: Vec<(String, String)>,
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
    /// Starts the thread that runs the hooks; None if none is set (a
    /// crontab read again that sets a job's `on-failure=` starts it then).
    pub(super) fn start(cfg: &Config) -> Option<Hooks> {
        let lines = cfg.hooks.clone();
        let jobs = job_hooks(cfg);
        let none = [&lines.on_lead, &lines.on_unlead, &lines.on_exit, &lines.on_failure].iter().all(|l| l.is_none());
        if none && jobs.values().all(|job| job.on_failure.is_none()) {
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
        Some(Hooks { lines, env: cfg.given_env(), roles: cfg.roles, shared, worker, told: BTreeMap::new(), jobs })
    }

    /// Takes in a crontab read again: each job's `on-failure=` from now on.
    pub(super) fn set_jobs(&mut self, cfg: &Config) {
        self.jobs = job_hooks(cfg);
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

    /// `role`'s command's run ended with `status`, `why` as the core says:
    /// if it failed (`run_failed`), its failure hook, told the run's facts
    /// (`run`: its record, if it was recorded).
    pub(super) fn failed(&mut self, role: Partition, status: ChildStatus, why: Reason, run: Option<&RunRecord>) {
        if !run_failed(status, why) {
            return;
        }
        let command_token = self.told.get(&role).and_then(|t| t.command_token);
        let Some(token) = run.map(|r| r.token).or(command_token) else { return };
        let mut env =
            vec![("NELI_REASON".into(), why.as_str().into()), ("NELI_EXIT_STATUS".into(), status.code().to_string())];
        env.push(match status {
            ChildStatus::Exited(code) => ("NELI_EXIT_CODE".into(), code.to_string()),
            ChildStatus::Signaled(sig) => ("NELI_SIGNAL".into(), signal_name(sig)),
        });
        env.extend(run.map(run_env).unwrap_or_default());
        env.extend(self.jobs.get(&role).map(|job| job.env.clone()).unwrap_or_default());
        self.queue(Hook::Failure, role, token, env);
    }

    /// Queues `hook` (if set) for `role` under `token`, with `extra` in its
    /// environment, in place of what it overtakes (`overtaken`).
    fn queue(&mut self, hook: Hook, role: Partition, token: i64, extra: Vec<(impl Into<String>, String)>) {
        let line = match hook {
            Hook::Lead => &self.lines.on_lead,
            Hook::Unlead => &self.lines.on_unlead,
            Hook::Exit => &self.lines.on_exit,
            // A job's own, else --on-failure.
            Hook::Failure => match self.jobs.get(&role) {
                Some(job @ JobHook { on_failure: Some(_), .. }) => &job.on_failure,
                _ => &self.lines.on_failure,
            },
        };
        let Some(line) = line.clone() else { return };
        let mut env = self.env.clone();
        env.push(("NELI_HOOK".into(), hook.name().into()));
        env.push(("NELI_FENCING_TOKEN".into(), token.to_string()));
        if let Some(roles) = self.roles {
            env.push(("NELI_ROLE".into(), role.to_string()));
            env.push(("NELI_ROLES".into(), roles.to_string()));
        }
        env.extend(extra.into_iter().map(|(k, v)| (k.into(), v)));
        let dropped = enqueue(&mut self.shared.lock().waiting, Queued { hook, role, line, env, failures: 1 });
        self.shared.changed.notify_all();
        match dropped {
            Some(stale) if hook == Hook::Failure => warn!(
                role,
                job = stale.env.iter().find(|(k, _)| k == "NELI_JOB").map(|(_, job)| job.as_str()),
                failures = stale.failures + 1,
                "failure hook dropped before it started: a later failure of the same role or job replaces it, and \
                 says in NELI_FAILURES how many failed runs it stands for"
            ),
            Some(stale) => info!(
                hook = stale.hook.name(),
                by = hook.name(),
                "hook dropped before it started: overtaken by a later one"
            ),
            None => {}
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
/// waiting (there is at most one: each replaces the last), a failure hook
/// the role's failure hook, an exit hook the oldest exit hook once
/// `MAX_EXIT_HOOKS` wait.
fn overtaken(waiting: &VecDeque<Queued>, hook: Hook, role: Partition) -> Option<usize> {
    let change = |h: Hook| matches!(h, Hook::Lead | Hook::Unlead);
    match hook {
        Hook::Exit => {
            let exits = waiting.iter().filter(|q| q.hook == Hook::Exit).count();
            (exits >= MAX_EXIT_HOOKS).then(|| waiting.iter().position(|q| q.hook == Hook::Exit)).flatten()
        }
        Hook::Failure => waiting.iter().position(|q| q.hook == Hook::Failure && q.role == role),
        Hook::Lead | Hook::Unlead => waiting.iter().position(|q| change(q.hook) && q.role == role),
    }
}

/// Queues `queued` in `waiting` in place of the hook it overtakes
/// (`overtaken`), which it returns; a failure hook that replaces one stands
/// for its failures too, and says how many in NELI_FAILURES.
fn enqueue(waiting: &mut VecDeque<Queued>, mut queued: Queued) -> Option<Queued> {
    let dropped = overtaken(waiting, queued.hook, queued.role).and_then(|at| waiting.remove(at));
    if queued.hook == Hook::Failure {
        queued.failures += dropped.as_ref().map_or(0, |d| d.failures);
        queued.env.push(("NELI_FAILURES".into(), queued.failures.to_string()));
    }
    waiting.push_back(queued);
    dropped
}

/// Whether a run that ended with `status`, `why` as the core says, failed:
/// it ended by itself and not with 0 (a non-zero exit, a signal neli-run
/// did not send, a command not found), or we stopped it for running too
/// long. One we stopped otherwise (a revoke, a fence, a yield, a drain, a
/// pause, a shutdown) did not fail: neli-run ended it, whatever its status.
fn run_failed(status: ChildStatus, why: Reason) -> bool {
    match why {
        Reason::Overran => true,
        Reason::Exited => !status.success(),
        _ => false,
    }
}

/// A signal's name (SIGSEGV), or its number when it has none.
fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig).map_or_else(|_| sig.to_string(), |s| s.as_str().to_string())
}

/// What a failure hook is told of its run, from the run's record: the
/// names the command had (NELI_JOB, NELI_DUE or NELI_WAVE, NELI_ATTEMPT,
/// in the same form), and when and where it ran.
fn run_env(run: &RunRecord) -> Vec<(String, String)> {
    let rfc3339 = |ms| humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string();
    let mut env = vec![
        ("NELI_RUN".to_string(), run.run.clone()),
        ("NELI_HOST".to_string(), run.host.clone()),
        ("NELI_STARTED_AT".to_string(), rfc3339(run.start_ms)),
    ];
    let optional = [
        ("NELI_JOB", run.job.clone()),
        ("NELI_DUE", run.due_ms.map(rfc3339)),
        ("NELI_WAVE", run.wave_ms.map(rfc3339)),
        ("NELI_ATTEMPT", run.attempt.map(|n| n.to_string())),
        ("NELI_ENDED_AT", run.end_ms.map(rfc3339)),
        ("NELI_DURATION_MS", run.duration_ms.map(|ms| ms.to_string())),
    ];
    env.extend(optional.into_iter().filter_map(|(name, value)| Some((name.to_string(), value?))));
    env
}

/// Each placed crontab job's failure hook and assignments, by its seat.
fn job_hooks(cfg: &Config) -> BTreeMap<Partition, JobHook> {
    let placed = cfg.crontab.iter().flat_map(|cron| &cron.placed);
    placed.map(|(&seat, job)| (seat, JobHook { on_failure: job.on_failure.clone(), env: job.env.clone() })).collect()
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
                    Hook::Exit | Hook::Failure => false,
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
            enqueue(&mut shared.lock().waiting, waiting(hook, role));
        }
        shared.lock().told_lead = told_lead.iter().copied().collect();
        shared.lock().lead_hook = true;
        shared.lock().closed = true;
        std::iter::from_fn(|| next(&shared)).map(|queued| (queued.hook, queued.role)).collect()
    }

    fn waiting(hook: Hook, role: Partition) -> Queued {
        Queued { hook, role, line: String::new(), env: Vec::new(), failures: 1 }
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

    #[test]
    fn behind_a_hook_that_hangs_one_failure_hook_per_role_waits_and_counts_the_failures_it_stands_for() {
        use Hook::Failure;
        // A job failing again and again: one hook waits, standing for all.
        let mut waiting_now = VecDeque::new();
        for _ in 0..5 {
            enqueue(&mut waiting_now, waiting(Failure, 3));
        }
        let failures: Vec<_> = waiting_now.iter().map(|q| (q.hook, q.role, q.failures)).collect();
        assert_eq!(failures, [(Failure, 3, 5)]);
        assert_eq!(waiting_now[0].env, [("NELI_FAILURES".to_string(), "5".to_string())]);
        // Each role's (each job's) own; changes and exits are not overtaken.
        let queued = [(Failure, 0), (Failure, 1), (Lead, 0), (Exit, 0), (Failure, 0)];
        assert_eq!(ran_of(&queued, &[]), [(Failure, 1), (Lead, 0), (Exit, 0), (Failure, 0)]);
        assert_eq!(ran_of(&[(Lead, 0), (Failure, 0), (Unlead, 0)], &[0]), [(Failure, 0), (Unlead, 0)]);
    }

    #[test]
    fn a_run_failed_when_it_ended_by_itself_not_with_0_or_overran_never_when_neli_run_stopped_it() {
        use ChildStatus::{Exited, Signaled};
        let cases = [
            (Exited(3), Reason::Exited, true),
            (Exited(127), Reason::Exited, true),
            (Signaled(11), Reason::Exited, true),
            (Exited(0), Reason::Exited, false),
            // --max-runtime: whatever the status its stop gave.
            (Signaled(15), Reason::Overran, true),
            (Exited(0), Reason::Overran, true),
            (Signaled(15), Reason::Stopped, false),
            (Exited(1), Reason::Stopped, false),
            (Signaled(9), Reason::Fenced, false),
        ];
        for (status, why, failed_run) in cases {
            assert_eq!(run_failed(status, why), failed_run, "{status:?} {why:?}");
        }
        assert_eq!((signal_name(11), signal_name(99)), ("SIGSEGV".to_string(), "99".to_string()));
    }
}
