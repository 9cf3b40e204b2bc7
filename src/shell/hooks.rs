//! `--on-lead`, `--on-unlead`, `--on-exit`: shell command lines run when
//! this member starts leading, stops leading, and when a run of its command
//! ends (a page on failure, a note to a chat, a load balancer told).
//!
//! A report, never part of what keeps the safety promise: the loop only
//! queues a hook, after it has acted; a thread of its own runs them one at
//! a time, in order, each within --hook-timeout (then it and everything it
//! started are sent SIGKILL), and a failure is logged, never raised. A hook that hangs
//! delays the hooks after it, nothing else.
//!
//! neli-run is a subreaper and reaps every process below it on the loop;
//! so a hook is started through `child::Beside`, which gets its status back
//! from the loop's `reap` and keeps the command's kills from sweeping it,
//! under a keeper (`child::keeper`) that kills what the hook left once it
//! has exited: nothing a hook starts outlives it.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{error, info, warn};

use super::supervisor::{consumed_env, given_env};
use crate::child::Beside;
use crate::config::Config;
use crate::exit::ChildStatus;
use crate::leader::Role;

/// One hook to run: which, its command line, and its environment.
struct Job {
    hook: &'static str,
    line: String,
    env: Vec<(String, String)>,
}

/// The hooks of this member, and what they have been told so far.
pub(super) struct Hooks {
    lines: crate::config::Hooks,
    env: Vec<(String, String)>,
    jobs: Sender<Job>,
    worker: JoinHandle<()>,
    queued: usize,
    done: Arc<AtomicUsize>,
    /// Set when neli-run stops waiting: nothing more is started.
    stop: Arc<AtomicBool>,
    /// What the hooks know of our role: the token --on-lead ran for,
    /// and the last role seen.
    led: Option<i64>,
    last: Role,
    /// The token the command runs (or last ran) with.
    command_token: Option<i64>,
}

impl Hooks {
    /// Starts the thread that runs the hooks; None if none is set.
    pub(super) fn start(cfg: &Config) -> Option<Hooks> {
        let lines = cfg.hooks.clone();
        if lines.on_lead.is_none() && lines.on_unlead.is_none() && lines.on_exit.is_none() {
            return None;
        }
        let (jobs, queue) = channel::<Job>();
        let (done, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (counted, stopped, timeout, remove) = (done.clone(), stop.clone(), lines.timeout, consumed_env());
        let worker = std::thread::spawn(move || {
            for job in queue {
                if !stopped.load(Ordering::SeqCst) {
                    run(&job, &remove, timeout);
                }
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        Some(Hooks {
            lines,
            env: given_env(cfg),
            jobs,
            worker,
            queued: 0,
            done,
            stop,
            led: None,
            last: Role::Standby,
            command_token: None,
        })
    }

    /// Follows the roles taken since the last turn, in order: --on-lead
    /// for each new token, --on-unlead when leading ends (`why_standby`:
    /// the core's word for a change to standby).
    pub(super) fn follow(&mut self, roles: &[Role], why_standby: &'static str) {
        for (hook, token, reason) in changes(&mut self.led, &mut self.last, roles, why_standby) {
            self.queue(hook, token, vec![("NELI_REASON", reason.into())]);
        }
    }

    /// Notes the token the command was just started with.
    pub(super) fn spawned(&mut self, token: i64) {
        self.command_token = Some(token);
    }

    /// The command's run ended with `status`, `why` as the core says.
    pub(super) fn exited(&mut self, status: ChildStatus, why: &'static str) {
        let Some(token) = self.command_token else { return };
        let env = vec![("NELI_REASON", why.into()), ("NELI_EXIT_STATUS", status.code().to_string())];
        self.queue("exit", token, env);
    }

    /// Queues `hook` (if set) under `token`, with `extra` in its environment.
    fn queue(&mut self, hook: &'static str, token: i64, extra: Vec<(&str, String)>) {
        let line = match hook {
            "lead" => &self.lines.on_lead,
            "unlead" => &self.lines.on_unlead,
            "exit" => &self.lines.on_exit,
            _ => return,
        };
        let Some(line) = line.clone() else { return };
        let mut env = self.env.clone();
        env.push(("NELI_HOOK".into(), hook.into()));
        env.push(("NELI_FENCING_TOKEN".into(), token.to_string()));
        env.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
        if self.jobs.send(Job { hook, line, env }).is_ok() {
            self.queued += 1;
        }
    }

    /// At exit, once the group is left: --on-unlead if we still lead, then
    /// waits for the hooks queued, each within --hook-timeout; `hurry` (a
    /// second SIGTERM) cuts the wait short. What still runs then is sent
    /// SIGKILL. Someone must reap meanwhile (the loop no longer does).
    pub(super) async fn finish(mut self, hurry: impl std::future::Future<Output = ()>) {
        self.follow(&[Role::Standby], "exiting");
        let Hooks { jobs, worker, queued, done, stop, lines, .. } = self;
        drop(jobs);
        let left = queued.saturating_sub(done.load(Ordering::SeqCst));
        if left == 0 {
            return;
        }
        let bound = (lines.timeout + KILL_WAIT) * left as u32;
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
        stop.store(true, Ordering::SeqCst);
        let killed = Beside::kill_all();
        error!(killed, "{cut}; exiting (those still running, and all they started, were sent SIGKILL)");
    }
}

/// The hooks a sequence of roles calls for, as (hook, token, reason):
/// "lead" on each new token (reason "elected", or "resumed" after a
/// fence), "unlead" when leading ends ("fenced", or `why_standby`).
fn changes(
    led: &mut Option<i64>,
    last: &mut Role,
    roles: &[Role],
    why_standby: &'static str,
) -> Vec<(&'static str, i64, &'static str)> {
    let mut out = Vec::new();
    for &role in roles {
        let before = std::mem::replace(last, role);
        match role {
            Role::Leader { token } if *led == Some(token) => {}
            Role::Leader { token } => {
                *led = Some(token);
                out.push(("lead", token, if before == Role::Fenced { "resumed" } else { "elected" }));
            }
            Role::Fenced | Role::Standby | Role::Candidate => {
                if let Some(token) = led.take() {
                    out.push(("unlead", token, if role == Role::Fenced { "fenced" } else { why_standby }));
                }
            }
        }
    }
    out
}

/// How long a hook sent SIGKILL may take to be reaped before its thread
/// goes on (a process in uninterruptible sleep).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Runs one hook to its end or its timeout, and logs how it went.
fn run(job: &Job, remove: &[OsString], timeout: Duration) {
    let hook = job.hook;
    let mut cmd = Beside::shell(&job.line);
    cmd.stdin(Stdio::null());
    for name in remove {
        cmd.env_remove(name);
    }
    cmd.envs(job.env.iter().map(|(k, v)| (k, v)));
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

    #[test]
    fn the_hooks_follow_leading_with_its_token_and_why_it_ended() {
        let (mut led, mut last) = (None, Role::Standby);
        let mut follow = |roles: &[Role], why| changes(&mut led, &mut last, roles, why);
        let leader = |token| Role::Leader { token };
        assert_eq!(follow(&[Role::Candidate], "revoked"), vec![], "no lead, no unlead");
        assert_eq!(follow(&[leader(7)], "revoked"), vec![("lead", 7, "elected")]);
        assert_eq!(follow(&[leader(7)], "revoked"), vec![], "the same token: nothing new");
        // A fence and a resume within one turn are two changes.
        assert_eq!(
            follow(&[Role::Fenced, leader(9)], "revoked"),
            vec![("unlead", 7, "fenced"), ("lead", 9, "resumed")]
        );
        assert_eq!(follow(&[Role::Standby], "yielded"), vec![("unlead", 9, "yielded")]);
        assert_eq!(follow(&[Role::Standby], "exiting"), vec![], "unlead once");
        assert_eq!(
            follow(&[Role::Candidate, leader(12), Role::Standby], "lost"),
            [("lead", 12, "elected"), ("unlead", 12, "lost")]
        );
    }
}
