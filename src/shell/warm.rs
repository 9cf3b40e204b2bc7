//! `--warm`: the command runs on every member, all the time, and is told
//! when it leads. An adapter between the core's actions, which speak of a
//! command that runs while we lead, and one long-running command: the core
//! is left as it is, and its "command" is the leading part.
//!
//! - The core's start becomes: the token written to the token file, then
//!   --lead-signal (a command started meanwhile reads the file at start).
//! - The core's stop becomes: the token file emptied, then --unlead-signal,
//!   and the leading part reported ended at once, so a revoke, a yield or a
//!   pause goes on without waiting (the command must honour the signal).
//! - The core's kill (a fence, or grace run out) kills the command itself,
//!   as in the default mode, and the shim's lease runs while it leads:
//!   fencing promises what it always did. A dead command starts again as a
//!   standby's after --restart-delay, unless we lead (the core restarts
//!   the leader's, as --restart says).
//! - Once SIGTERM, SIGINT or a fatal error has come, the core's stop and
//!   kill go to the command itself; one still running when the core exits
//!   (a standby's) is stopped as the default mode stops the leader's.
//! - The leader's command that dies is the core's run ending (--restart
//!   decides); a standby's is started again, or ends neli-run, by the same
//!   policy.

use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;
use tracing::{error, info, warn};

use super::Shell;
use crate::clock::BootTime;
use crate::config::Config;
use crate::exit::{ChildStatus, Kind};
use crate::leader::{self, Input, Restart};

/// The warm command's state beside the core's.
pub(super) struct Warm {
    lead: leader::Signal,
    unlead: leader::Signal,
    stop: leader::Signal,
    grace: Duration,
    restart: Restart,
    restart_delay: Duration,
    /// The private directory that holds the token file (removed at exit).
    dir: PathBuf,
    file: PathBuf,
    /// The core thinks its command runs: it has started it and has not
    /// been told that it ended.
    owed: bool,
    /// The token the command was told it leads under.
    leading: Option<i64>,
    /// SIGTERM, SIGINT or a fatal error came: stops and kills are real.
    stopping: bool,
    /// When a dead command starts again as a standby.
    pub(super) restart_at: Option<tokio::time::Instant>,
}

/// A lease that never runs out: a standby's command is not fenced (the
/// shim still kills it if neli-run dies).
fn no_lease() -> BootTime {
    BootTime::from_nanos(u64::MAX / 2)
}

impl Warm {
    /// With --warm: creates the private directory of the token file (0700,
    /// in $RUNTIME_DIRECTORY if systemd gave one, else the temporary
    /// directory) and names the file to the command as NELI_TOKEN_FILE.
    pub(super) fn new(cfg: &Config, child: &mut super::Supervisor) -> std::io::Result<Option<Warm>> {
        let Some(signals) = cfg.warm else { return Ok(None) };
        let base = std::env::var_os("RUNTIME_DIRECTORY")
            .and_then(|dirs| std::env::split_paths(&dirs).next())
            .unwrap_or_else(std::env::temp_dir);
        // Not a name known beforehand (the pid and the clock's nanoseconds):
        // another user cannot simply take it first in a shared /tmp, and if
        // one did, creating it fails rather than trusting theirs.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let dir = base.join(format!("neli-run-warm.{}.{}", std::process::id(), nanos.subsec_nanos()));
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700).create(&dir)?;
        let file = dir.join("token");
        std::fs::write(&file, "")?;
        child.set_env("NELI_TOKEN_FILE", file.to_string_lossy().into_owned());
        Ok(Some(Warm {
            lead: signals.lead_signal,
            unlead: signals.unlead_signal,
            stop: cfg.leader.stop_signal,
            grace: cfg.leader.grace,
            restart: cfg.leader.restart,
            restart_delay: cfg.leader.restart_delay,
            dir,
            file,
            owed: false,
            leading: None,
            stopping: false,
            restart_at: None,
        }))
    }

    /// Whether the command was told it leads (and not told otherwise since).
    pub(super) fn leads(&self) -> bool {
        self.leading.is_some()
    }

    /// Writes the token file atomically: the token, or empty.
    fn write(&self, token: Option<i64>) -> std::io::Result<()> {
        let tmp = self.dir.join(".token");
        std::fs::write(&tmp, token.map(|t| format!("{t}\n")).unwrap_or_default())?;
        std::fs::rename(&tmp, &self.file)
    }

    /// Empties the token file, or removes it if it cannot be written.
    fn unlead(&mut self) {
        if self.leading.take().is_some() {
            if let Err(err) = self.write(None) {
                error!(%err, file = %self.file.display(), "cannot empty the token file; removing it");
                let _ = std::fs::remove_file(&self.file);
            }
        }
    }
}

impl Shell {
    /// Starts the warm command as a standby's, before the loop (it then has
    /// time to set up before any lead signal).
    pub(super) fn warm_start(&mut self) {
        let Some(warm) = self.warm.as_mut() else { return };
        if !self.child.spawn(None, no_lease(), None) {
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
        }
    }

    /// Takes in an input before the core does; false if the core must not
    /// hear it (a forwarded signal goes to the warm command, whatever we are).
    pub(super) fn warm_heard(&mut self, input: &Input) -> bool {
        let Some(warm) = self.warm.as_mut() else { return true };
        match input {
            Input::Forward(sig) => {
                self.child.signal(*sig);
                return false;
            }
            Input::Shutdown | Input::Fatal(_) => warm.stopping = true,
            _ => {}
        }
        true
    }

    /// Carries out one of the core's actions on the command (Spawn, Lease,
    /// SignalGroup, KillGroup); false if it is not one of those.
    pub(super) fn warm_apply(&mut self, action: &leader::Action) -> bool {
        let Some(warm) = self.warm.as_mut() else { return false };
        match *action {
            leader::Action::Spawn { token, lease, .. } => {
                warm.restart_at = None;
                if let Err(err) = warm.write(Some(token)) {
                    error!(%err, file = %warm.file.display(), "cannot write the token file; not leading");
                    self.pending.push_back(Input::ChildExited(ChildStatus::Exited(Kind::Internal.code())));
                    return true;
                }
                warm.leading = Some(token);
                warm.owed = true;
                if let Some(hooks) = self.report.hooks.as_mut() {
                    hooks.spawned(token);
                }
                self.report.metrics.lock().expect("metrics lock").child_started(token);
                if self.child.is_running() {
                    self.child.renew(lease);
                    info!(token, "leading: token file written, lead signal sent");
                    self.child.signal(warm.lead);
                } else if self.child.is_idle() && !self.child.spawn(None, lease, None) {
                    warm.unlead();
                    warm.owed = false;
                    self.pending.push_back(Input::ChildExited(ChildStatus::Exited(Kind::Internal.code())));
                }
                // Else the last command is still ending: its end is this
                // run's, and --restart starts it again.
            }
            leader::Action::Lease(until) => {
                if warm.leading.is_some() {
                    self.child.renew(until);
                }
            }
            leader::Action::SignalGroup(sig) if warm.stopping => {
                warm.unlead();
                self.child.signal(sig);
                self.owe_if_gone();
            }
            leader::Action::SignalGroup(sig) if sig == warm.stop && warm.leading.is_some() => {
                warm.unlead();
                self.child.renew(no_lease());
                self.child.signal(warm.unlead);
                info!("no longer leading: token file emptied, unlead signal sent");
                warm.owed = false;
                self.pending.push_back(Input::ChildExited(ChildStatus::Exited(0)));
            }
            leader::Action::SignalGroup(sig) => self.child.signal(sig),
            leader::Action::KillGroup => {
                // The kill first: it keeps the promise, the file reports.
                self.child.kill();
                warm.unlead();
                self.owe_if_gone();
            }
            _ => return false,
        }
        true
    }

    /// The core waits for a command that is already gone (it never came
    /// up): tell it at once.
    fn owe_if_gone(&mut self) {
        if let Some(warm) = self.warm.as_mut().filter(|w| w.owed && self.child.is_idle()) {
            warm.owed = false;
            self.pending.push_back(Input::ChildExited(ChildStatus::Signaled(Signal::SIGKILL as i32)));
        }
    }

    /// The warm command is gone with `status`: the core's run ended if it
    /// thought one ran, else a standby's command died (started again, or
    /// neli-run ends, as --restart says). Returns what the core must hear.
    pub(super) fn warm_exited(&mut self, status: ChildStatus) -> Option<Input> {
        let warm = self.warm.as_mut()?;
        if std::mem::take(&mut warm.owed) {
            warm.unlead();
            // If we no longer lead then (a fence), it starts as a standby's.
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
            if let Some(hooks) = self.report.hooks.as_mut() {
                hooks.exited(status, self.core.why_child_ends());
            }
            return Some(Input::ChildExited(status));
        }
        if warm.stopping {
            return None;
        }
        let again = match warm.restart {
            Restart::Never => false,
            Restart::OnFailure => !status.success(),
            Restart::Always => true,
        };
        if again {
            info!(%status, delay = ?warm.restart_delay, "the standby's command exited; restarting it (--restart)");
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
            return None;
        }
        info!(%status, "the standby's command's run is over; leaving the group");
        Some(Input::Fatal(status.code()))
    }

    /// The restart time of a dead command has come: start it as a
    /// standby's, unless we lead or are about to (the core then starts it,
    /// or ends our part: asked again after --restart-delay).
    pub(super) fn warm_restart(&mut self) {
        let Some(warm) = self.warm.as_mut() else { return };
        warm.restart_at = None;
        if warm.owed || warm.stopping || !self.child.is_idle() {
            return;
        }
        if matches!(self.core.role(), leader::Role::Leader { .. } | leader::Role::Candidate) {
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
            return;
        }
        if !self.child.spawn(None, no_lease(), None) {
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
        }
    }

    /// Once the core has exited with `code`: stops a warm command still
    /// running (a standby's) as the default mode stops the leader's: the
    /// stop signal, --grace, SIGKILL (at once on a second SIGTERM or
    /// SIGINT), then removes the token file. Returns the exit status: the
    /// command's where the core's is 0.
    pub(super) async fn warm_stop(&mut self, code: u8) -> u8 {
        let Some(warm) = self.warm.as_mut() else { return code };
        warm.stopping = true;
        warm.unlead();
        let mut code = code;
        if !self.child.is_idle() {
            self.child.signal(warm.stop);
            let grace = tokio::time::sleep(warm.grace);
            tokio::pin!(grace);
            let mut killed = false;
            loop {
                tokio::select! {
                    _ = self.sigchld.recv() => self.child.reap(),
                    Some(status) = self.child.exited() => {
                        info!(%status, "the warm command exited");
                        if code == 0 {
                            code = status.code();
                        }
                        break;
                    }
                    _ = &mut grace, if !killed => {
                        warn!(grace = ?warm.grace, "the warm command still runs after the grace period; sending SIGKILL");
                        self.child.kill();
                        killed = true;
                    }
                    _ = self.signals.shutdown(), if !killed => {
                        warn!("asked again: killing the warm command now");
                        self.child.kill();
                        killed = true;
                    }
                }
            }
        }
        if let Err(err) = std::fs::remove_dir_all(&warm.dir) {
            warn!(%err, dir = %warm.dir.display(), "cannot remove the token file's directory");
        }
        code
    }
}
