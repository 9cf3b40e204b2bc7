//! `--warm`: the command runs on every member, all the time, and is told
//! when it leads. An adapter between the core's actions, which speak of a
//! command that runs while we lead, and one long-running command: the core
//! is left as it is, and its "command" is the leading part.
//!
//! - The core's start becomes: the command's lease made the leader's (it
//!   is fenced from then on), the token written to the token file, then
//!   --lead-signal (a command started meanwhile reads the file at start:
//!   one not running starts once the file is written).
//! - The core's stop becomes: the token file emptied, then the lease made
//!   a standby's and --unlead-signal, and the leading part reported ended
//!   once the signal is sent, so a revoke, a yield or a pause goes on
//!   without waiting for the command (it must honour the signal).
//! - A command is started before the loop, and again after it dies; it
//!   installs its handlers only once it runs (a script's `trap`s, an
//!   interpreter's start), and until then the lead and unlead signals'
//!   default action kills it. Kafka elects a first member 5-60 ms after it
//!   starts: too soon. So a command started less than `SET_UP` ago is
//!   signalled only once that much time has passed since its start (the
//!   file is written and the lease set at once, as always: a command that
//!   reads the file at start sees it). Held, the signal follows the newest
//!   state: a lead then an unlead within the set-up is the unlead alone
//!   (the command may have read the token at start; a signal means "read
//!   the file", and two sent at once could arrive merged or reordered),
//!   and an unlead is reported to the core once it is sent (a handover
//!   never goes on before the command is told). A command that has run
//!   for `SET_UP` is signalled at once, as before; kills and fences never
//!   wait.
//! - The file is written on a thread of its own (a hung file system must
//!   not stall the loop that fences); the loop hears when a write is done
//!   (`Shell::warm_written`), and only then signals. A command is never
//!   told it leads by a file written before its lease was the leader's,
//!   nor left with a standby's lease while the file says it leads. A file
//!   that cannot be emptied gets the command killed: it would read itself
//!   leader.
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
//! - On the record (`crate::runs`), a run is each time the command leads:
//!   from the file holding the token to the unlead signal sent, or to the
//!   command's exit (its output's tail with it); each recorded after the
//!   signal or the kill, by a queue that never waits.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use tracing::{error, info, warn};

use super::seat::Seat;
use super::supervisor::Supervisor;
use super::Shell;
use crate::clock::BootTime;
use crate::config::Config;
use crate::exit::{ChildStatus, Failure, Kind};
use crate::files;
use crate::leader::{self, Backoff, Input, Partition, Restart, Whose};

/// The warm command's state beside the core's.
pub(super) struct Warm {
    lead: leader::Signal,
    unlead: leader::Signal,
    stop: leader::Signal,
    grace: Duration,
    restart: Restart,
    restart_delay: Duration,
    /// A standby's command that keeps failing waits longer each time, as
    /// a seat's does.
    backoff: Backoff,
    /// The private directory that holds the token file (removed at exit).
    dir: PathBuf,
    file: PathBuf,
    /// The token file's writer thread (None once closed).
    writer: Option<Writer>,
    /// The writes it did, in order: (their number, how each went).
    written: UnboundedReceiver<(u64, std::io::Result<()>)>,
    /// What follows the last write queued, once it is done.
    steps: Steps,
    /// The leader's lease, as the core last set it (a command started once
    /// the file is written starts with it).
    lease: BootTime,
    /// The core thinks its command runs: it has started it and has not
    /// been told that it ended.
    owed: bool,
    /// The token the file says, or is being written to say: the command
    /// leads under it once told.
    leading: Option<i64>,
    /// SIGTERM, SIGINT or a fatal error came: stops and kills are real.
    stopping: bool,
    /// When a dead command starts again as a standby.
    restart_at: Option<tokio::time::Instant>,
    /// The running command's set-up, and the signal held for its end.
    set_up: SetUp,
}

/// How long a command is left to set up before it is sent --lead-signal or
/// --unlead-signal: the time from its start to its handlers being in place
/// (a shell script's `trap`s, an interpreter's start and imports: tens of
/// milliseconds, a few hundred on a loaded host; a second leaves room for
/// that). Until then the signal's default action would kill it. It costs
/// only around a start: a member that comes to lead within it writes the
/// file at once and signals at its end, and an unlead within it holds the
/// handover back until its end (a --grace shorter than what is left of it
/// gets the command killed first, as any command that does not stop in
/// time). A command must install its handlers first and warm up after.
const SET_UP: Duration = Duration::from_secs(1);

/// A signal held until the command has set up.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Told {
    /// --lead-signal, for the token the file was written with.
    Lead(i64),
    /// --unlead-signal; then the core hears that the leading part ended.
    Unlead,
}

/// A command's set-up (`SET_UP` from its start), and the signal held for
/// its end: the newest only.
#[derive(Debug, Default)]
struct SetUp {
    until: Option<tokio::time::Instant>,
    held: Option<Told>,
}

impl SetUp {
    /// A command started at `now`: nothing is held for it yet.
    fn started(&mut self, now: tokio::time::Instant) {
        self.until = Some(now + SET_UP);
        self.held = None;
    }

    /// Holds `told` if the command is still setting up at `now`, in place
    /// of what was held (a lead then an unlead is the unlead alone); false
    /// if it is to be sent now.
    fn hold(&mut self, told: Told, now: tokio::time::Instant) -> bool {
        let setting_up = self.until.is_some_and(|until| until > now);
        if setting_up {
            self.held = Some(told);
        }
        setting_up
    }

    /// When the held signal is due, if one is.
    fn due(&self) -> Option<tokio::time::Instant> {
        self.until.filter(|_| self.held.is_some())
    }

    /// The held signal, once the set-up has ended by `now`: a lead is
    /// dropped unless the file still says (or is being written to say) its
    /// token, `leading` (else an unlead is on its way).
    fn take(&mut self, now: tokio::time::Instant, leading: Option<i64>) -> Option<Told> {
        if self.until.is_some_and(|until| until > now) {
            return None;
        }
        match self.held.take()? {
            Told::Lead(token) if leading != Some(token) => None,
            told => Some(told),
        }
    }

    /// Nothing is to be told: the command is stopped, killed, or gone.
    fn drop(&mut self) {
        self.held = None;
    }
}

/// The token file's writer: a thread that writes it, in order, and says
/// when each write is done.
struct Writer {
    ops: Sender<Op>,
    /// Told once the thread is done (its queue closed and emptied).
    done: oneshot::Receiver<()>,
}

enum Op {
    /// Write this token, or empty the file (numbered, for the loop).
    Write(u64, Option<i64>),
    /// Remove the directory: the last thing at exit.
    RemoveDir,
}

/// What the loop does once a write is done.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Then {
    /// The file holds the token: send the running command --lead-signal.
    Lead(i64),
    /// The file holds the token: start the command (it reads it at start).
    Start(i64),
    /// The file holds the token; the last command is still ending (its end
    /// is this run's, and --restart starts it again).
    Ending(i64),
    /// The file is emptied: make the lease a standby's, send
    /// --unlead-signal, and tell the core the leading part ended.
    Unlead,
}

/// The writes queued, numbered, and the step that follows the last: only
/// the last write's is taken (an earlier one's was overtaken: the command
/// is being told otherwise).
#[derive(Debug, Default)]
struct Steps {
    queued: u64,
    then: Option<(u64, Then)>,
}

impl Steps {
    /// Numbers a new write, whose step is `then` (an earlier one's is dropped).
    fn queue(&mut self, then: Option<Then>) -> u64 {
        self.queued += 1;
        self.then = then.map(|then| (self.queued, then));
        self.queued
    }

    /// The write numbered `n` is done: its step, if it was the last queued.
    fn done(&mut self, n: u64) -> Option<Then> {
        self.then.take_if(|(last, _)| *last == n).map(|(_, then)| then)
    }

    /// Nothing follows the writes under way.
    fn drop(&mut self) {
        self.then = None;
    }
}

/// How long exiting waits for the token file's directory to be removed (a
/// hung file system must not keep neli-run from exiting).
const WRITER_WAIT: Duration = Duration::from_secs(1);

/// A lease that never runs out: a standby's command is not fenced (the
/// shim still kills it if neli-run dies).
fn no_lease() -> BootTime {
    BootTime::from_nanos(u64::MAX / 2)
}

impl Warm {
    /// With --warm: creates the private directory of the token file (0700,
    /// in $RUNTIME_DIRECTORY if systemd gave one, else the temporary
    /// directory), the file, empty, and its writer, and names the file to
    /// the command as NELI_TOKEN_FILE.
    pub(super) fn new(cfg: &Config, child: &mut Supervisor) -> Result<Option<Warm>, Failure> {
        let Some(signals) = cfg.warm else { return Ok(None) };
        let base = std::env::var_os("RUNTIME_DIRECTORY")
            .and_then(|dirs| std::env::split_paths(&dirs).next())
            .unwrap_or_else(std::env::temp_dir);
        let (dir, file) = private_file(&base).map_err(|err| {
            let at = base.display();
            let why = format!("cannot create --warm's token file in {at}: {err}");
            Failure::new(Kind::Internal, format!("{why}; make {at} writable, or set TMPDIR (RuntimeDirectory= under systemd) to a directory neli-run can write"))
        })?;
        child.set_env("NELI_TOKEN_FILE", file.to_string_lossy().into_owned());
        let (writer, written) = Writer::start(dir.clone(), file.clone());
        Ok(Some(Warm {
            lead: signals.lead_signal,
            unlead: signals.unlead_signal,
            stop: cfg.leader.stop_signal,
            grace: cfg.leader.grace,
            restart: cfg.leader.restart,
            restart_delay: cfg.leader.restart_delay,
            backoff: Backoff::default(),
            dir,
            file,
            writer: Some(writer),
            written,
            steps: Steps::default(),
            lease: no_lease(),
            owed: false,
            leading: None,
            stopping: false,
            restart_at: None,
            set_up: SetUp::default(),
        }))
    }

    /// Starts the command under `lease`, its set-up counted from now; false
    /// if it could not be started (said in the log).
    fn spawn(&mut self, child: &mut Supervisor, lease: BootTime) -> bool {
        self.set_up.drop();
        let started = child.spawn(None, lease, None, None);
        if started {
            self.set_up.started(tokio::time::Instant::now());
            self.backoff.began(BootTime::now());
        }
        started
    }

    /// Holds `told` if the running command is still setting up (a signal
    /// now would come before its handlers); false if it is to be sent now.
    fn hold(&mut self, child: &Supervisor, told: Told) -> bool {
        child.is_running() && self.set_up.hold(told, tokio::time::Instant::now())
    }

    /// When the loop must come back to this command: its restart, or the
    /// end of its set-up if a signal is held for it.
    pub(super) fn due(&self) -> Option<tokio::time::Instant> {
        self.restart_at.into_iter().chain(self.set_up.due()).min()
    }

    /// Whether the command was told it leads (and not told otherwise since).
    pub(super) fn leads(&self) -> bool {
        self.leading.is_some()
    }

    /// Queues a write of the file (`token`, or empty), with what follows
    /// once it is done; an earlier write's step is dropped.
    fn write(&mut self, token: Option<i64>, then: Option<Then>) {
        let n = self.steps.queue(then);
        if let Some(writer) = self.writer.as_ref() {
            let _ = writer.ops.send(Op::Write(n, token));
        }
    }

    /// Has the file emptied, if it says we lead; drops the step a write
    /// still under way would take (the command is being stopped, killed,
    /// or is gone: nothing follows).
    fn unlead(&mut self) {
        self.set_up.drop();
        match self.leading.take() {
            Some(_) => self.write(None, None),
            None => self.steps.drop(),
        }
    }
}

/// Creates a private directory (0700, a name nobody can know beforehand:
/// another user cannot take it first in a shared /tmp, and if one did,
/// creating it fails rather than trusting theirs) in `base`, and the empty
/// token file in it.
fn private_file(base: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    let dir = base.join(format!("neli-run-warm.{}.{:016x}", std::process::id(), files::random()));
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700).create(&dir)?;
    let file = dir.join("token");
    files::create_new(&file).inspect_err(|_| {
        let _ = std::fs::remove_dir(&dir);
    })?;
    Ok((dir, file))
}

impl Writer {
    /// Starts the thread that writes `file` in `dir`; the receiver hears
    /// each write's number and outcome.
    fn start(dir: PathBuf, file: PathBuf) -> (Writer, UnboundedReceiver<(u64, std::io::Result<()>)>) {
        let (ops, queued) = channel();
        let (written_tx, written): (UnboundedSender<_>, _) = unbounded_channel();
        let (done_tx, done) = oneshot::channel();
        std::thread::spawn(move || {
            for op in queued {
                match op {
                    Op::Write(n, token) => {
                        let _ = written_tx.send((n, write(&file, token)));
                    }
                    Op::RemoveDir => {
                        if let Err(err) = std::fs::remove_dir_all(&dir) {
                            warn!(%err, dir = %dir.display(), "cannot remove the token file's directory");
                        }
                    }
                }
            }
            let _ = done_tx.send(());
        });
        (Writer { ops, done }, written)
    }
}

/// Writes `token` to the token file, or empties it: a file that cannot be
/// emptied is removed (it then reads as empty).
fn write(file: &Path, token: Option<i64>) -> std::io::Result<()> {
    let written = files::write_atomically(file, &token.map(|t| format!("{t}\n")).unwrap_or_default());
    match (written, token) {
        (Err(err), None) => {
            error!(%err, file = %file.display(), "cannot empty the token file; removing it");
            std::fs::remove_file(file)
        }
        (written, _) => written,
    }
}

impl Shell {
    /// Starts the warm command as a standby's, before the loop (a lead
    /// signal waits for its set-up: `SET_UP`).
    pub(super) fn warm_start(&mut self) {
        for Seat { child, warm, .. } in self.seats.values_mut() {
            let Some(warm) = warm.as_mut() else { continue };
            if !warm.spawn(child, no_lease()) {
                warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
            }
        }
    }

    /// Takes in an input before the core does; false if the core must not
    /// hear it (a forwarded signal goes to the warm command, whatever we are).
    pub(super) fn warm_heard(&mut self, input: &Input) -> bool {
        let mut heard = true;
        for Seat { child, warm, .. } in self.seats.values_mut() {
            let Some(warm) = warm.as_mut() else { continue };
            match input {
                Input::Forward(sig) => {
                    child.signal(*sig);
                    heard = false;
                }
                Input::Shutdown | Input::Fatal(_) => warm.stopping = true,
                _ => {}
            }
        }
        heard
    }

    /// Carries out one of the core's actions on the command (Spawn, Lease,
    /// SignalGroup, KillGroup); false if it is not one of those.
    pub(super) fn warm_apply(&mut self, seat: Partition, action: &leader::Action) -> bool {
        let Some(Seat { child, warm: Some(warm), .. }) = self.seats.get_mut(&seat) else { return false };
        match *action {
            leader::Action::Spawn { token, lease, .. } => {
                warm.restart_at = None;
                warm.leading = Some(token);
                warm.owed = true;
                warm.lease = lease;
                let then = if child.is_running() {
                    // The lease first: from here the command is fenced as
                    // the leader's, before the file can tell it it leads.
                    child.renew(lease);
                    Then::Lead(token)
                } else if child.is_idle() {
                    Then::Start(token)
                } else {
                    Then::Ending(token)
                };
                warm.write(Some(token), Some(then));
            }
            // The core renews only while its command runs or stops (as in
            // the default mode, a stop keeps the lease); the newest is kept
            // for a command that starts once the file is written.
            leader::Action::Lease(_, until) => {
                warm.lease = until;
                child.renew(until);
            }
            leader::Action::SignalGroup(_, sig) if warm.stopping => {
                warm.unlead();
                child.signal(sig);
                self.owe_if_gone(seat);
            }
            // The core's stop (it sends no other signal: forwarded ones
            // went to the command in `warm_heard`), while the command runs
            // as the leader's: the lease stays the leader's until the file
            // is emptied.
            leader::Action::SignalGroup(..) => {
                warm.leading = None;
                warm.write(None, Some(Then::Unlead));
            }
            leader::Action::KillGroup(_) => {
                // The kill first: it keeps the promise, the file reports.
                child.kill();
                warm.unlead();
                self.owe_if_gone(seat);
            }
            _ => return false,
        }
        true
    }

    /// A write of the token file is done (`n`, as `Warm::write` numbered
    /// it): takes the step that follows it, unless a later write overtook
    /// it. Returns what the core must hear, if anything.
    pub(super) fn warm_written(&mut self, seat: Partition, n: u64, written: std::io::Result<()>) -> Option<Input> {
        let Some(Seat { child, warm: Some(warm), .. }) = self.seats.get_mut(&seat) else { return None };
        let Some(then) = warm.steps.done(n) else {
            if let Err(err) = written {
                error!(%err, file = %warm.file.display(), "cannot write the token file");
            }
            return None;
        };
        let token = match (then, written) {
            (Then::Unlead, Ok(())) => {
                child.renew(no_lease());
                if warm.hold(child, Told::Unlead) {
                    info!(set_up = ?SET_UP, "no longer leading: token file emptied; the unlead signal waits for the command's set-up");
                    return None;
                }
                child.signal(warm.unlead);
                info!("no longer leading: token file emptied, unlead signal sent");
                self.runs.unled(seat);
                return std::mem::take(&mut warm.owed).then_some(Input::ChildExited(seat, ChildStatus::Exited(0)));
            }
            (Then::Unlead, Err(err)) => {
                // It would read itself leader: the kill keeps the promise.
                child.kill();
                error!(%err, file = %warm.file.display(), "cannot empty or remove the token file; command killed");
                return None;
            }
            (Then::Lead(token) | Then::Start(token) | Then::Ending(token), Err(err)) => {
                error!(%err, token, file = %warm.file.display(), "cannot write the token file; not leading");
                warm.leading = None;
                warm.owed = false;
                child.renew(no_lease());
                return Some(Input::ChildExited(seat, ChildStatus::Exited(Kind::Internal.code())));
            }
            (Then::Lead(token), Ok(())) if warm.hold(child, Told::Lead(token)) => {
                info!(token, set_up = ?SET_UP, "leading: token file written; the lead signal waits for the command's set-up");
                token
            }
            (Then::Lead(token), Ok(())) => {
                child.signal(warm.lead);
                info!(token, "leading: token file written, lead signal sent");
                token
            }
            (Then::Start(token), Ok(())) => {
                let lease = warm.lease;
                if child.is_idle() && !warm.spawn(child, lease) {
                    warm.unlead();
                    warm.owed = false;
                    return Some(Input::ChildExited(seat, ChildStatus::Exited(Kind::Internal.code())));
                }
                token
            }
            (Then::Ending(token), Ok(())) => token,
        };
        if let Some(hooks) = self.report.hooks.as_mut() {
            hooks.spawned(seat, token);
        }
        self.report.metrics.lock().expect("metrics lock").child_started(token);
        // The command is told (or is to be, once set up): it leads.
        self.runs.started(seat, None, token, None, None);
        None
    }

    /// The loop's timer for `seat`'s command is due (`Warm::due`): sends
    /// the signal held for its set-up once that has ended, and starts a
    /// dead one again once its restart is due. Returns what the core must
    /// hear, if anything (an unlead's end).
    pub(super) fn warm_due(&mut self, seat: Partition) -> Option<Input> {
        let Some(Seat { child, warm: Some(warm), .. }) = self.seats.get_mut(&seat) else { return None };
        let now = tokio::time::Instant::now();
        let mut input = None;
        match warm.set_up.take(now, warm.leading) {
            Some(Told::Lead(token)) => {
                child.signal(warm.lead);
                info!(token, "the command has set up: lead signal sent");
            }
            Some(Told::Unlead) => {
                child.signal(warm.unlead);
                info!("the command has set up: unlead signal sent");
                self.runs.unled(seat);
                input = std::mem::take(&mut warm.owed).then_some(Input::ChildExited(seat, ChildStatus::Exited(0)));
            }
            None => {}
        }
        if warm.restart_at.is_some_and(|at| at <= now) {
            self.warm_restart(seat);
        }
        input
    }

    /// The core waits for a command that is already gone (it never came
    /// up): tell it at once.
    fn owe_if_gone(&mut self, seat: Partition) {
        let Some(Seat { child, warm: Some(warm), .. }) = self.seats.get_mut(&seat) else { return };
        if warm.owed && child.is_idle() {
            warm.owed = false;
            self.pending.push_back(Input::ChildExited(seat, ChildStatus::Signaled(Signal::SIGKILL as i32)));
        }
    }

    /// The warm command is gone with `status`: the core's run ended if it
    /// thought one ran, else a standby's command died (started again, or
    /// neli-run ends, as --restart says). Returns what the core must hear.
    pub(super) fn warm_exited(&mut self, seat: Partition, status: ChildStatus) -> Option<Input> {
        let Some(Seat { child, warm: Some(warm), .. }) = self.seats.get_mut(&seat) else { return None };
        // Nothing is left to tell.
        warm.set_up.drop();
        let output = child.take_output();
        if std::mem::take(&mut warm.owed) {
            warm.unlead();
            // If we no longer lead then (a fence), it starts as a standby's.
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
            self.ended = Some((seat, status, self.runs.ended(seat, status, output)));
            return Some(Input::ChildExited(seat, status));
        }
        if warm.stopping {
            return None;
        }
        let timing = (warm.restart_delay, status, BootTime::now());
        if let Some(delay) = warm.backoff.after(warm.restart, timing, Whose::WarmStandby) {
            warm.restart_at = Some(tokio::time::Instant::now() + delay);
            return None;
        }
        info!(%status, "the standby's command's run is over; leaving the group");
        Some(Input::Fatal(status.code()))
    }

    /// The restart time of a dead command has come: start it as a
    /// standby's, unless we lead or are about to (the core then starts it,
    /// or ends our part: asked again after --restart-delay).
    fn warm_restart(&mut self, seat: Partition) {
        let Some(Seat { child, warm: Some(warm), .. }) = self.seats.get_mut(&seat) else { return };
        warm.restart_at = None;
        if warm.owed || warm.stopping || !child.is_idle() {
            return;
        }
        if matches!(self.core.standing(seat), leader::Standing::Leader { .. } | leader::Standing::Candidate) {
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
            return;
        }
        if !warm.spawn(child, no_lease()) {
            warm.restart_at = Some(tokio::time::Instant::now() + warm.restart_delay);
        }
    }

    /// Once the core has exited with `code`: stops a warm command still
    /// running (a standby's) as the default mode stops the leader's: the
    /// stop signal, --grace, SIGKILL (at once on a second SIGTERM or
    /// SIGINT), then removes the token file. Returns the exit status: the
    /// command's where the core's is 0.
    pub(super) async fn warm_stop(&mut self, code: u8) -> u8 {
        let mut code = code;
        let seats: Vec<Partition> = self.seats.keys().copied().collect();
        for seat in seats {
            code = self.warm_stop_seat(seat, code).await;
        }
        code
    }

    /// `warm_stop` for one seat's command.
    async fn warm_stop_seat(&mut self, seat: Partition, code: u8) -> u8 {
        let Some(Seat { child, warm: Some(warm), .. }) = self.seats.get_mut(&seat) else { return code };
        warm.stopping = true;
        warm.unlead();
        let mut code = code;
        if !child.is_idle() {
            child.signal(warm.stop);
            let grace = tokio::time::sleep(warm.grace);
            tokio::pin!(grace);
            let mut killed = false;
            loop {
                tokio::select! {
                    _ = self.sigchld.recv() => crate::child::reap(),
                    Some(status) = child.exited() => {
                        info!(%status, "the warm command exited");
                        if code == 0 {
                            code = status.code();
                        }
                        break;
                    }
                    _ = &mut grace, if !killed => {
                        warn!(grace = ?warm.grace, "the warm command still runs after the grace period; sending SIGKILL");
                        child.kill();
                        killed = true;
                    }
                    _ = self.signals.shutdown(), if !killed => {
                        warn!("asked again: killing the warm command now");
                        child.kill();
                        killed = true;
                    }
                }
            }
        }
        // After the writes still queued; bounded, as the file system may hang.
        if let Some(writer) = warm.writer.take() {
            let _ = writer.ops.send(Op::RemoveDir);
            drop(writer.ops);
            if tokio::time::timeout(WRITER_WAIT, writer.done).await.is_err() {
                warn!(wait = ?WRITER_WAIT, dir = %warm.dir.display(), "the token file's directory was not removed in time");
            }
        }
        code
    }
}

/// The next write of the token file done: (its number, how it went); never,
/// without --warm.
pub(super) async fn written(warm: &mut Option<Warm>) -> Option<(u64, std::io::Result<()>)> {
    match warm {
        Some(warm) => warm.written.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_writes_step_is_taken() {
        let mut steps = Steps::default();
        let lead = steps.queue(Some(Then::Lead(7)));
        assert_eq!(steps.done(lead), Some(Then::Lead(7)));
        assert_eq!(steps.done(lead), None, "taken once");
        let (lead, unlead) = (steps.queue(Some(Then::Lead(9))), steps.queue(Some(Then::Unlead)));
        assert_eq!(steps.done(lead), None, "overtaken");
        assert_eq!(steps.done(unlead), Some(Then::Unlead));
        let (start, empty) = (steps.queue(Some(Then::Start(11))), steps.queue(None));
        assert_eq!((steps.done(start), steps.done(empty)), (None, None));
        let ending = steps.queue(Some(Then::Ending(12)));
        steps.drop();
        assert_eq!(steps.done(ending), None);
    }

    #[test]
    fn a_signal_waits_for_the_set_up_and_only_the_newest_is_sent() {
        let start = tokio::time::Instant::now();
        let (during, after) = (start + SET_UP / 2, start + SET_UP);
        let mut set_up = SetUp::default();
        assert!(!set_up.hold(Told::Lead(1), start), "never started: nothing to wait for");
        set_up.started(start);
        assert_eq!(set_up.due(), None, "nothing held");
        // A lead within the set-up waits for its end.
        assert!(set_up.hold(Told::Lead(7), during));
        assert_eq!(set_up.due(), Some(after));
        assert_eq!(set_up.take(during, Some(7)), None, "not yet");
        assert_eq!(set_up.take(after, Some(7)), Some(Told::Lead(7)));
        assert_eq!((set_up.take(after, Some(7)), set_up.due()), (None, None), "sent once");
        // A lead then an unlead within it: the unlead alone.
        set_up.started(start);
        assert!(set_up.hold(Told::Lead(8), start) && set_up.hold(Told::Unlead, during));
        assert_eq!(set_up.take(after, None), Some(Told::Unlead));
        // A lead whose unlead is still being written: dropped (the unlead
        // follows), as one overtaken by a newer token.
        set_up.started(start);
        assert!(set_up.hold(Told::Lead(9), during));
        assert_eq!(set_up.take(after, None), None);
        set_up.started(start);
        assert!(set_up.hold(Told::Lead(9), during));
        assert_eq!(set_up.take(after, Some(10)), None);
        // Once set up, a signal goes at once; a restart starts the count
        // again and forgets what was held for the last command.
        assert!(!set_up.hold(Told::Unlead, after));
        assert!(set_up.hold(Told::Unlead, during));
        set_up.started(after);
        assert_eq!(set_up.due(), None);
        assert!(set_up.hold(Told::Lead(11), after));
        set_up.drop();
        assert_eq!((set_up.due(), set_up.take(after + SET_UP, Some(11))), (None, None));
    }
}
