//! The supervised command as the shell holds it: how to start it, the
//! running one, and its status once everything it started is gone.
//!
//! One per seat: everything about a command's life is here, and
//! the shell only routes the core's actions to it. Each owns its shim's
//! registration with the reaper and hears its own shim's exit (`exited`):
//! the shell's SIGCHLD handler calls the reaper once (`child::reap`), which
//! hands each status to its owner. A seat's kill reaches only what is below
//! its own shim, and its sweep only orphans, never another seat's command.

use nix::sys::signal::Signal;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::{error, info};

use crate::child::{self, Running};
use crate::clock::BootTime;
use crate::config::Config;
use crate::env;
use crate::exit::ChildStatus;
use crate::leader;

/// One supervised command.
pub(super) struct Supervisor {
    command: child::Command,
    running: Option<Running>,
    /// The shim has exited and its leftovers are being swept: nothing new
    /// may start until `exited` says so (a new shim would be spared by the
    /// sweep, but the leftovers would outlive its start).
    ending: bool,
    /// The command's status, sent once everything it started is gone: the
    /// wait for that runs beside the loop, which keeps heartbeating meanwhile.
    gone_tx: UnboundedSender<ChildStatus>,
    gone: UnboundedReceiver<ChildStatus>,
    /// The tail of the last run's output, handed over by its shim.
    output: Option<child::output::Kept>,
}

impl Supervisor {
    /// The command `cfg` names for `role`, none started.
    pub(super) fn new(cfg: &Config, role: leader::Partition) -> Supervisor {
        let (gone_tx, gone) = unbounded_channel();
        Supervisor { command: command(cfg, role), running: None, ending: false, gone_tx, gone, output: None }
    }

    /// The command `cfg` names for `role` from now on (a crontab read
    /// again): a command running goes on as it started.
    pub(super) fn set_command(&mut self, cfg: &Config, role: leader::Partition) {
        self.command = command(cfg, role);
    }

    /// Whether the shim is still there (its leftovers may not be gone yet).
    pub(super) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Whether nothing is left of the last command: a new one may start.
    pub(super) fn is_idle(&self) -> bool {
        self.running.is_none() && !self.ending
    }

    /// The crontab job this seat runs, if any (its NELI_JOB): what its
    /// runs are recorded under.
    pub(super) fn job(&self) -> Option<String> {
        self.command.env.iter().find(|(name, _)| name == "NELI_JOB").map(|(_, job)| job.clone())
    }

    /// Gives the command one more variable (`--warm`'s NELI_TOKEN_FILE).
    pub(super) fn set_env(&mut self, name: &str, value: String) {
        self.command.env.push((name.into(), value));
    }

    /// Starts the command under `token` (None: told through a file), fenced
    /// at `lease`, once the wall clock reads `begin_ms` if given (a scheduled
    /// run's due time: its shim waits for it); false if it could not be
    /// started (said in the log).
    pub(super) fn spawn(
        &mut self,
        token: Option<i64>,
        lease: BootTime,
        attempt: Option<leader::Attempt>,
        begin_ms: Option<u64>,
    ) -> bool {
        match Running::spawn(&with_attempt(&self.command, attempt), token, lease, begin_ms) {
            Ok(child) => {
                info!(pid = child.pgid().as_raw(), token, "child started");
                self.running = Some(child);
                true
            }
            Err(err) => {
                error!(%err, "cannot start the child");
                false
            }
        }
    }

    /// Moves the running command's lease forward.
    pub(super) fn renew(&mut self, until: BootTime) {
        if let Some(child) = self.running.as_mut() {
            if let Err(err) = child.renew(until) {
                error!(%err, "cannot renew the child's lease; it will be fenced");
            }
        }
    }

    /// The tail of the last run's output (once: for its end record).
    pub(super) fn take_output(&mut self) -> Option<child::output::Kept> {
        self.output.take()
    }

    /// Sends `sig` to the running command's group.
    pub(super) fn signal(&self, sig: leader::Signal) {
        if let (Some(child), Ok(sig)) = (self.running.as_ref(), Signal::try_from(sig.0)) {
            child.signal(sig);
        }
    }

    /// SIGKILLs everything the running command started (all below its
    /// shim: no other seat's). This runs on the loop, and is its one piece
    /// of synchronous work that grows with the machine: one pass over /proc
    /// (a read of each process's stat, no wait on any process). It stays on
    /// the loop because it names the shim by pid (the walk below it, the
    /// SIGCONT that wakes a stopped shim): only the loop reaps
    /// (`child::reap`), so a shim not reaped yet cannot be reaped, and its
    /// pid reused, before the kill is done.
    pub(super) fn kill(&self) {
        self.running.iter().for_each(Running::kill)
    }

    /// The status of a command whose whole tree is gone (never None: the
    /// sender is ours). Waits first for the reaper to hand over the shim's
    /// status; what the shim leaves is then killed off the loop (up to
    /// seconds, for a process in uninterruptible sleep), and its status
    /// comes back after that. Cancel-safe: each step is taken as soon as
    /// its wait ends, with no wait in between.
    pub(super) async fn exited(&mut self) -> Option<ChildStatus> {
        loop {
            tokio::select! {
                status = shim_exited(&mut self.running) => self.sweep(status),
                status = self.gone.recv() => {
                    self.ending = false;
                    return status;
                }
            }
        }
    }

    /// The shim was reaped with `status`: sweeps its leftovers off the
    /// loop, then sends the status on to `exited`.
    fn sweep(&mut self, status: ChildStatus) {
        self.output = self.running.take().and_then(|shim| shim.output());
        self.ending = true;
        let gone_tx = self.gone_tx.clone();
        tokio::spawn(async move {
            child::all_gone().await;
            let _ = gone_tx.send(status);
        });
    }
}

/// The running shim's status, once reaped (else never ends).
async fn shim_exited(running: &mut Option<Running>) -> ChildStatus {
    match running {
        Some(running) => running.exited().await,
        None => std::future::pending().await,
    }
}

/// The command `cfg` names, with the environment neli-run gives it; with
/// `--roles`, as role `role` runs it (`{role}` in its arguments replaced,
/// NELI_ROLE and NELI_ROLES set); with `--crontab`, the job placed on
/// partition `role`, through its shell.
fn command(cfg: &Config, role: leader::Partition) -> child::Command {
    let mut command = child::Command {
        program: cfg.program.clone(),
        args: cfg.args.clone(),
        stop_signal: cfg.leader.stop_signal.0,
        grace: cfg.leader.grace,
        env: cfg.given_env(),
        env_remove: env::removed().to_vec(),
        // A `--warm` command's too: its tail goes on the run it exits in.
        keep_output: cfg.keep_output,
    };
    if let Some(cron) = &cfg.crontab {
        // A job's line, through its shell as cron runs it; a seat where
        // none of ours sits never starts its command.
        if let Some(job) = cron.placed.get(&role) {
            command.program = job.shell.clone().into();
            command.args = vec!["-c".into(), job.command.clone().into()];
            command.env.extend(job.env.iter().cloned());
            command.env.push(("NELI_JOB".into(), job.name.clone()));
            command.keep_output = job.output.unwrap_or(cfg.keep_output);
        }
    } else if let Some(roles) = cfg.roles {
        command.args = command.args.iter().map(|arg| crate::config::with_role(arg, role)).collect();
        command.env.push(("NELI_ROLE".into(), role.to_string()));
        command.env.push(("NELI_ROLES".into(), roles.to_string()));
    }
    command
}

/// The command as one attempt of a wave runs it: NELI_ATTEMPT (1, then 2
/// for the first retry ...) and NELI_WAVE (when the wave's first attempt
/// started, RFC 3339 UTC): a command that must not repeat work can key it
/// by the wave and check it on a retry. A schedule's run gets NELI_DUE (its
/// due time, RFC 3339 UTC) in place of NELI_WAVE: the key its attempts share.
fn with_attempt(command: &child::Command, attempt: Option<leader::Attempt>) -> std::borrow::Cow<'_, child::Command> {
    let Some(attempt) = attempt else { return std::borrow::Cow::Borrowed(command) };
    let rfc3339 = |ms| humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms));
    let mut command = command.clone();
    command.env.push(("NELI_ATTEMPT".into(), attempt.number.to_string()));
    command.env.push(match attempt.due {
        None => ("NELI_WAVE".into(), rfc3339(attempt.wave_ms).to_string()),
        Some(due) => ("NELI_DUE".into(), rfc3339(due).to_string()),
    });
    std::borrow::Cow::Owned(command)
}
