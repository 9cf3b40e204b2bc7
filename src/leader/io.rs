//! The core's contract with the shell (and with `config`): the settings it
//! is built with, what happened ([`Input`]), what to do ([`Action`]), and
//! the records it writes ([`Record`]) and reads ([`Other`]). Plain data; the
//! policy that maps one to the other is in `mod.rs` (the member) and
//! `seat.rs` (one command on one partition). What concerns a seat carries
//! its [`Partition`]; what concerns the whole member does not.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Attempt, Schedule, Waves};
use crate::clock::BootTime;
use crate::exit::ChildStatus;

/// A partition of the topic: a seat is keyed by the partition it leads on.
pub type Partition = i32;

/// The most roles a group may have (`--roles`): a topic of that many
/// partitions is still small, and every member reads the partitions it
/// owns only.
pub const MAX_ROLES: u32 = 1024;

/// Where the member-wide records go (yield, pause, candidacy): partition 0,
/// whatever the seats. A different idea from "seat 0" (role 0), which
/// happens to sit on the same partition.
pub const CONTROL_PARTITION: Partition = 0;

/// What to do when the child exits on its own while we lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Exit with the child's status (and leave the group).
    Never,
    /// Start it again unless it exited with status 0.
    OnFailure,
    /// Start it again whatever its status.
    Always,
}

impl Restart {
    /// Whether a command that exited with `status` starts again: the one
    /// policy, for the leader's command and for `--warm`'s standby's.
    pub fn again(self, status: ChildStatus) -> bool {
        match self {
            Restart::Never => false,
            Restart::OnFailure => !status.success(),
            Restart::Always => true,
        }
    }
}

/// Why a seat stopped leading, or its run ended, or it began to lead: one
/// word each, what the log and the hooks' `NELI_REASON` say
/// (docs/operations.md lists them for --on-lead, --on-unlead and --on-exit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Not led since neli-run started.
    Started,
    /// Its partition was taken away in a rebalance.
    Revoked,
    /// Taken without a rebalance's warning (a session lost).
    Lost,
    /// `neli-run yield`.
    Yielded,
    /// Handed to the member our disclaimer named.
    HandedOver,
    /// The health check failed.
    Unhealthy,
    /// `neli-run drain`.
    Drained,
    /// A live member of higher priority (`--preempt`).
    Preempted,
    /// A tenure that could not confirm gave its partition back.
    GaveBack,
    /// neli-run is exiting.
    Exiting,
    /// The run ended by itself, as far as we know.
    Exited,
    /// No fresh heartbeat: the command was killed by a fence.
    Fenced,
    /// We stopped or killed it: a revoke, a yield, a shutdown, a drain.
    Stopped,
    /// We stopped it for running too long (--max-runtime, a job's
    /// `max-runtime=`, or `overlap=replace`'s next due time): it did not
    /// finish, so --on-failure hears of it.
    Overran,
    /// A new fencing token (--on-lead).
    Elected,
    /// Leading again under a new token after a fence (--on-lead).
    Resumed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Started => "started",
            Reason::Revoked => "revoked",
            Reason::Lost => "lost",
            Reason::Yielded => "yielded",
            Reason::HandedOver => "handed over",
            Reason::Unhealthy => "unhealthy",
            Reason::Drained => "drained",
            Reason::Preempted => "preempted",
            Reason::GaveBack => "gave back",
            Reason::Exiting => "exiting",
            Reason::Exited => "exited",
            Reason::Fenced => "fenced",
            Reason::Stopped => "stopped",
            Reason::Overran => "overran",
            Reason::Elected => "elected",
            Reason::Resumed => "resumed",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A signal, by number: the core decides when one goes to the command's
/// group, the supervisor sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal(pub i32);

/// The timing and policy the core needs; validated by `config`.
///
/// Most of it is the seats' (heartbeats, the fence and the resume window,
/// grace and the stop signal, --restart, --max-runtime, claims, waves and
/// the schedule: what one command on one partition follows), the rest the
/// member's (--acquire-timeout, the health check, --name, --priority,
/// --preempt, the candidacy interval). It stays one struct while one seat
/// exists: the Kafka adapter, the supervisor, `--warm` and `status` read
/// both halves through `Config::leader`. Once seats can differ (NELI
/// roles), the seat's half becomes a struct of its own, given to each seat.
#[derive(Clone, Debug)]
pub struct Settings {
    pub heartbeat_interval: Duration,
    pub heartbeat_deadline: Duration,
    pub grace: Duration,
    pub stop_signal: Signal,
    pub restart: Restart,
    pub restart_delay: Duration,
    pub acquire_timeout: Option<Duration>,
    /// How long one run may take before it is stopped (stop signal, grace,
    /// SIGKILL) and counts as ended with the status that gives.
    pub max_runtime: Option<Duration>,
    /// The longest gap in our own heartbeats after which we may still
    /// trust that the group kept partition 0 for us: session timeout minus
    /// a coordinator heartbeat and the margin. After a longer gap the
    /// coordinator may already have given the partition to another member,
    /// so we rejoin the group instead of resuming.
    pub resume_window: Duration,
    /// How long past its writer's deadline another member's claim still
    /// holds us back: room for the writers' wall clocks to disagree and for
    /// a kill to land.
    pub claim_margin: Duration,
    /// Once per wave, or None to run the command whenever we come to lead.
    pub waves: Option<Waves>,
    /// Run the command at due times while we lead, instead of once when we
    /// come to lead (never with waves).
    pub schedule: Option<Schedule>,
    /// A health check gates leadership (`--health-cmd`): unhealthy until
    /// the shell says its first check passed.
    pub health_checked: bool,
    /// Our --name: a hand-over names its target by it.
    pub name: String,
    /// Our --priority: an owner that has not started the command hands
    /// partition 0 to a live member of higher priority.
    pub priority: u8,
    /// --preempt: a leader hands over to a live member of higher priority.
    pub preempt: bool,
    /// How often a member that does not own partition 0 says it is there
    /// (a candidacy record); one counts for three of them.
    pub candidacy_interval: Duration,
    /// `--hot-standbys`: how many standbys besides the seat holders the
    /// owner of the control partition names hot (docs/hot-set.md).
    pub hot_standbys: u32,
    /// How long a cold standby waits for a live record of the control
    /// partition's owner before it joins the group anyway (every hot
    /// member may be gone): three candidacy intervals, plus a request
    /// timeout, which the wait of the watcher's parked fetch is under (it
    /// brings the owner's records only at its end).
    pub owner_silence: Duration,
    /// NELI's roles (`--roles`): one seat per role, role j on partition j.
    /// 1 is the single leader, on partition 0.
    pub roles: u32,
    /// `--overlap`: a revoke is released at once while the command stops,
    /// and a new owner starts without waiting out the old owner's claim.
    pub overlap: bool,
    /// A fleet crontab (`--crontab`): our jobs by the partition each was
    /// placed on. A seat on any other partition runs nothing, and only
    /// carries what its partition's records say (the job placed there and
    /// its newest run) for the member that has that job. None: every seat
    /// runs the one command.
    pub jobs: Option<BTreeMap<Partition, Job>>,
}

/// One job of a fleet crontab, as the seat it was placed on runs it: its
/// name goes into every record on its partition, so that the placement
/// outlives the records that made it.
#[derive(Clone, Debug)]
pub struct Job {
    pub name: String,
    pub schedule: Schedule,
    pub max_runtime: Option<Duration>,
}

impl Settings {
    /// Whether what a seat logs names its role (a span): with several, and
    /// under a crontab (the job).
    pub fn names_roles(&self) -> bool {
        self.roles > 1 || self.jobs.is_some()
    }

    /// How often a seat that leads with no run under way writes its
    /// heartbeat: a crontab's has nothing to fence, and a third of the
    /// deadline keeps its leadership fresh for the next run's start (which
    /// writes at once) through one lost record, at a fraction of the cost
    /// (the fleet has a seat per job). Every other seat, every interval.
    pub fn idle_heartbeat(&self) -> Duration {
        match self.jobs {
            Some(_) => self.heartbeat_interval.max(self.heartbeat_deadline / 3),
            None => self.heartbeat_interval,
        }
    }

    /// The seats' partitions, one per role: the one place that names them.
    pub fn seats(&self) -> impl Iterator<Item = Partition> {
        0..Partition::try_from(self.roles.max(1)).unwrap_or(Partition::MAX)
    }

    /// The schedule the seat on `partition` runs its command by: its job's
    /// under a crontab, else the one of --every or --cron.
    pub fn schedule_of(&self, partition: Partition) -> Option<&Schedule> {
        match &self.jobs {
            Some(jobs) => jobs.get(&partition).map(|job| &job.schedule),
            None => self.schedule.as_ref(),
        }
    }

    /// Whether the seats follow due times: with a schedule, and every seat
    /// under a crontab (one that runs nothing still carries its partition's
    /// newest run for the member that will run it).
    pub fn scheduled(&self) -> bool {
        self.jobs.is_some() || self.schedule.is_some()
    }

    /// Whether the seat on `partition` has a command to run: under a
    /// crontab, only a seat where one of our jobs was placed.
    pub fn runs_on(&self, partition: Partition) -> bool {
        self.jobs.as_ref().is_none_or(|jobs| jobs.contains_key(&partition))
    }

    /// How long one run on `partition` may take.
    pub fn max_runtime_of(&self, partition: Partition) -> Option<Duration> {
        match &self.jobs {
            Some(jobs) => jobs.get(&partition).and_then(|job| job.max_runtime),
            None => self.max_runtime,
        }
    }

    /// The line the seat on `partition` runs by ([`Schedule::line`]).
    pub fn line_of(&self, partition: Partition) -> Option<&str> {
        self.schedule_of(partition)?.line.as_deref()
    }

    /// The name of our job placed on `partition`, under a crontab.
    pub fn job_on(&self, partition: Partition) -> Option<&str> {
        self.jobs.as_ref()?.get(&partition).map(|job| job.name.as_str())
    }
}

/// When a schedule's next run starts, and whether it is a due time's or a
/// failed run's retry: `status` must not show a retry's moment as a due
/// time of the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextRun {
    /// Wall-clock ms.
    pub at_ms: u64,
    /// It runs the newest run's due time again, as its next attempt.
    pub retry: bool,
}

/// What one of our heartbeat records says. The core decides it, so that a
/// record never claims less than is true.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Which of our terms it belongs to: a term is one stretch of ownership
    /// whose records others can have counted without a break (raft's word).
    pub term: u64,
    /// The offset of the term's first record, once read back: the term's
    /// place in the one order every member reads.
    pub start: Option<i64>,
    pub stance: Stance,
    /// The newest attempt of a wave, or run of the schedule, we know of.
    pub attempt: Option<Attempt>,
    /// When the schedule's next run starts, as its writer plans it.
    pub next: Option<NextRun>,
    /// The group's newest pause or resume its writer knows of, carried
    /// forward in every record as `attempt` is: a member that comes to own
    /// partition 0 reads it in the backlog, long after the request.
    pub pause: Option<PauseNote>,
    /// A disclaimer's: the member its writer hands partition 0 over to
    /// (by name), which other owners let lead while it is live.
    pub to: Option<String>,
    /// Under a crontab, the job placed on this partition, as far as its
    /// writer knows: carried in every record, so that it outlives the claim
    /// that placed it.
    pub job: Option<String>,
}

impl Record {
    /// A record of `term` that says its stance and nothing else: what the
    /// placement writes as its claim (with the job), and what tests write
    /// by hand with the one thing they look at.
    pub fn saying(term: u64, stance: Stance) -> Record {
        Record { term, start: None, stance, attempt: None, next: None, pause: None, to: None, job: None }
    }

    /// A candidate's record of `term`, saying nothing else.
    #[cfg(test)]
    pub fn contending(term: u64) -> Record {
        Record::saying(term, Stance::Contending)
    }
}

/// What a record says of the group's pause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseNote {
    pub request: Pause,
    /// Whether its writer's command may still run: `pause --stop` is
    /// honoured once its owner's record says no.
    pub running: bool,
}

/// A `neli-run cron trigger JOB` request: a run of the job, once, due when
/// asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    /// The request's offset on the job's partition: the newest counts.
    pub offset: i64,
    /// When it was asked, on the asker's wall clock (ms since the epoch):
    /// the run's due time, which the records then carry, so that a run due
    /// at or after it (this one, or the schedule's next) answers it once
    /// for every owner to come.
    pub at_ms: u64,
    pub by: Asker,
}

/// A `neli-run pause` or `resume` request: the newest one (by offset) is
/// the group's state, wherever it was read (the request itself, or a record
/// that carried it forward).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pause {
    /// The request's offset on partition 0.
    pub offset: i64,
    /// A pause; false for a resume.
    pub paused: bool,
    /// `pause --stop`: a running command is stopped too.
    pub stop: bool,
    /// When it was asked, on the asker's wall clock (ms since the epoch).
    pub at_ms: u64,
    pub by: Asker,
}

/// Who asked for a yield, pause or resume. Whoever can write to the topic
/// can write any of these: they say who asked, they do not prove it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Asker {
    /// The asker's NELI_NAME when it runs inside a member's command, else
    /// its host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The asker's local user name, when its uid has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

impl Asker {
    /// Who asked, for a log line, every string escaped (`printable`):
    /// "user alice (uid 1000) on host web-2 (pid 4242)".
    pub fn describe(&self) -> String {
        use crate::printable::printable;
        if self.host.is_none() && self.user.is_none() && self.pid.is_none() {
            return "an unknown asker (a neli-run older than the version 2 record, or another writer)".into();
        }
        let user = match (&self.user, self.uid) {
            (Some(user), Some(uid)) => format!("user {} (uid {uid})", printable(user)),
            (Some(user), None) => format!("user {}", printable(user)),
            (None, Some(uid)) => format!("uid {uid}"),
            (None, None) => "an unknown user".into(),
        };
        let host = self.host.as_deref().map_or_else(|| "?".into(), printable);
        let mut out = format!("{user} on host {host}");
        match (self.pid, self.name.as_deref().filter(|n| Some(*n) != self.host.as_deref())) {
            (Some(pid), Some(name)) => out += &format!(" (pid {pid}, name {})", printable(name)),
            (Some(pid), None) => out += &format!(" (pid {pid})"),
            (None, Some(name)) => out += &format!(" (name {})", printable(name)),
            (None, None) => {}
        }
        out
    }
}

/// A record writer's part in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stance {
    /// Its command may be running, under this fencing token.
    Leading { token: i64 },
    /// It owns partition 0 and may lead soon: a candidate, or a fenced
    /// leader that may resume.
    Contending,
    /// It runs no command and contends for nothing: the disclaimer (and
    /// any record of a version that did not say more).
    Released,
}

impl Stance {
    /// The fencing token it claims, if any.
    pub fn token(self) -> Option<i64> {
        match self {
            Stance::Leading { token } => Some(token),
            Stance::Contending | Stance::Released => None,
        }
    }
}

/// Another member's heartbeat record, as the core needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Other {
    /// Its name and incarnation.
    pub writer: String,
    /// Its writer's sequence number: one count for all its records, so a
    /// larger one is newer.
    pub seq: u64,
    /// Where it sits on partition 0.
    pub offset: i64,
    /// The writer's term; None from versions that did not say, whose
    /// records never contend.
    pub term: Option<u64>,
    /// The offset of that term's first record, if the writer had read it
    /// back when it wrote this one.
    pub start: Option<i64>,
    pub stance: Stance,
    /// How long ago it was written: our wall clock against the writer's.
    pub age: Duration,
    /// The writer's heartbeat deadline: its command is dead this long after
    /// its newest record was written, unless it writes another.
    pub deadline: Duration,
    /// The newest attempt of a wave its writer knew of.
    pub attempt: Option<Attempt>,
    /// The newest pause or resume its writer knew of.
    pub pause: Option<Pause>,
    /// Whom its writer hands partition 0 over to (see [`Record::to`]).
    pub to: Option<String>,
    /// The crontab job placed on this partition, as its writer says.
    pub job: Option<Placed>,
    /// The hot standbys its writer names, as the owner of the control
    /// partition (None from an older writer, or another partition).
    pub hot: Option<super::HotList>,
}

/// What a record says of the crontab job placed on its partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub job: String,
    /// A claim, written to place a job on a partition no job holds: of
    /// claims, the first counts. Else a record that carries the name
    /// forward, from a writer that read the partition: the newest counts.
    pub claim: bool,
}

impl Placed {
    /// Whether this is the job its partition holds once it is read after
    /// records that said `known`: of claims the first counts, of records
    /// that carry a name the newest. The one rule, for the seats, `status`
    /// and the placement alike.
    pub fn replaces(&self, known: Option<&str>) -> bool {
        !self.claim || known.is_none()
    }
}

/// Another member's candidacy record: it is in the group (or watching, with
/// `never_lead`) without owning partition 0, and may lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidacy {
    /// Its name and incarnation, as in [`Other::writer`].
    pub writer: String,
    /// Its --name, as a hand-over names it.
    pub name: String,
    pub priority: u8,
    /// It never leads: never a hand-over's target.
    pub never_lead: bool,
    /// It leaves (the withdrawal).
    pub leaving: bool,
    /// Its health check fails, or it is drained: it may not lead until it
    /// says otherwise.
    pub unhealthy: bool,
    /// `neli-run drain` named it (unhealthy says so too): the hot set's
    /// choice names the reason apart.
    pub drained: bool,
    /// How long ago it was written (our wall clock against the writer's).
    pub age: Duration,
    /// How long after it was written it counts (its writer's word).
    pub live_for: Duration,
    /// Read from the roster: its writer was cold. Named hot, it writes to
    /// partition 0 at once; one that does not within a candidacy's life
    /// is passed over (`Standbys::pass_over_silent`), not named for the
    /// rest of its roster record's (three roster intervals).
    pub cold: bool,
}

/// Something that happened, as the shell reports it.
// A record is a few hundred bytes and comes a few times a second: moved,
// not boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The group assigned us a seat's partition.
    Assigned { partition: Partition },
    /// A seat's partition was taken from us. `lost` means the group already
    /// moved on without us (session expired), so there is no time for grace.
    Revoked { partition: Partition, lost: bool },
    /// One of our own heartbeat records (this very incarnation) was read
    /// back from a seat's partition; `sent` is when we produced it. `more`:
    /// records fetched after it are still to come, before `CaughtUp`.
    OwnHeartbeat { partition: Partition, offset: i64, sent: BootTime, more: bool },
    /// One of our own heartbeat records was written to a seat's partition,
    /// as the broker acknowledged (said with several seats). While a
    /// rebalance's revoke holds the reader, none is read back: it keeps the
    /// seats we keep leading without fencing them (a join's revoke must
    /// stop no other role), within the session's bound; it never promotes.
    Delivered { partition: Partition, offset: i64, sent: BootTime },
    /// Every record fetched so far from the partition has been heard (after
    /// an own heartbeat that said `more`).
    CaughtUp { partition: Partition },
    /// Another member's heartbeat record was read from a seat's partition.
    OtherHeartbeat(Partition, Other),
    /// The seat's child's whole process group is gone.
    ChildExited(Partition, ChildStatus),
    /// SIGTERM or SIGINT: stop the child, leave the group, exit. A second
    /// one kills the child at once.
    Shutdown,
    /// Kafka said something we cannot recover from; exit with this code
    /// after stopping the child.
    Fatal(u8),
    /// A signal to pass on to the child's group.
    Forward(Signal),
    /// `neli-run yield` asked us to hand leadership over (to the member
    /// named, with `yield --to`).
    Yield { to: Option<String> },
    /// A pause or resume request read on a seat's partition (`neli-run
    /// pause` writes it on partition 0, `cron pause JOB` on the job's): it
    /// holds that seat.
    Pause(Partition, Pause),
    /// A `cron trigger JOB` request read on the job's partition: run it
    /// once, now, unless a run due at or after it has begun.
    Trigger(Partition, Trigger),
    /// The health check (`--health-cmd`) turned healthy (true) or
    /// unhealthy (false), past its thresholds.
    Health(bool),
    /// `neli-run drain` (true) or `undrain` (false) named this member: out
    /// of the group, as an unhealthy one is, until undrained.
    Drain(bool),
    /// We are in the group and another member owns partition 0.
    Standby,
    /// Another member's candidacy record was read from partition 0.
    Candidacy(Candidacy),
    /// A live record of the control partition's owner, read by the
    /// watcher, and the hot standbys it names (None: it names none): when
    /// they change, and at least every `kafka::wake::HOT_REPEAT` while it
    /// writes, so that a cold member hears that the owner is alive.
    Hot(Option<super::HotList>),
    /// Our watcher read back a candidacy of ours from the control
    /// partition: what it reads is current (see `cold::ECHOES`).
    Echo,
    /// As the control partition's owner, our reader of the roster has read
    /// it to its end (or there is none to read): every cold member's
    /// candidacy is known, and the hot list may be named (`hot_list`).
    RosterRead,
    /// A disclaimer that hands the control partition to us, written `age`
    /// ago, read by the watcher while we are cold (our consumer reads
    /// nothing then): we join the group to take it (`Standbys::handed_us`).
    HandedTo(std::time::Duration),
    /// Nothing but the passing of time (the shell's timer fired).
    Tick,
}

impl Input {
    /// The seat's partition it concerns; None for the whole member's.
    pub fn partition(&self) -> Option<Partition> {
        match *self {
            Input::Assigned { partition }
            | Input::Revoked { partition, .. }
            | Input::OwnHeartbeat { partition, .. }
            | Input::Delivered { partition, .. }
            | Input::CaughtUp { partition }
            | Input::OtherHeartbeat(partition, _)
            | Input::Pause(partition, _)
            | Input::Trigger(partition, _)
            | Input::ChildExited(partition, _) => Some(partition),
            Input::Shutdown
            | Input::Fatal(_)
            | Input::Forward(_)
            | Input::Yield { .. }
            | Input::Health(_)
            | Input::Drain(_)
            | Input::Standby
            | Input::Candidacy(_)
            | Input::Hot(_)
            | Input::Echo
            | Input::RosterRead
            | Input::HandedTo(_)
            | Input::Tick => None,
        }
    }
}

/// Something for the shell to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Produce this heartbeat record on the seat's partition now.
    SendHeartbeat(Partition, Record),
    /// Start the seat's child with this fencing token; the shim must kill
    /// it by itself at `lease` unless the lease is extended. `attempt` says
    /// which attempt of which wave it is (once per wave, or a scheduled
    /// run's). With `begin`, the command itself starts then, not at once: a
    /// scheduled run's shim is started `HEAD_START` ahead of its due time,
    /// so that the command starts on it. The child counts as running from
    /// the spawn all the same: every kill and fence applies from there.
    Spawn { partition: Partition, token: i64, lease: BootTime, attempt: Option<Attempt>, begin: Option<BootTime> },
    /// Move the seat's running child's lease forward.
    Lease(Partition, BootTime),
    /// Send a signal to the seat's child's process group.
    SignalGroup(Partition, Signal),
    /// SIGKILL the seat's child's process group.
    KillGroup(Partition),
    /// Let the blocked rebalance callback return for this partition: the
    /// seat's child is gone.
    ReleaseRevoke(Partition),
    /// Leave the group and join it again: our claim on partition 0 is
    /// too old to trust, so get a fresh assignment from the coordinator.
    Rejoin,
    /// Leave the group and rejoin only once another member leads (or after
    /// a while, if none does): the end of a yield, once the child is gone.
    StandAside,
    /// As StandAside, but rejoin at the latest once a hand-over to `to` has
    /// gone stale (it may have died): the member our disclaimer names.
    HandOver { to: String },
    /// Write our candidacy record (the withdrawal when `leaving`, given a
    /// moment to land before what follows).
    SendCandidacy { leaving: bool },
    /// Leave the group now and stay out: the member is exiting, and with
    /// `--overlap` lets its partitions go before its commands are gone, so
    /// that the next owners start while they finish.
    LeaveGroup,
    /// Leave the group and exit with this status.
    Exit(u8),
    /// Stay out of the group as a cold standby (true), or join it again
    /// (false): see `cold.rs`.
    Cold(bool),
    /// Write this record on the seat's partition (it claims nothing), and
    /// give it a moment to land: the next owner then reads that our command
    /// is gone instead of waiting out our last record. Comes before giving
    /// the partition up.
    Disclaim(Partition, Record),
}

impl Action {
    /// The seat's partition it concerns (the shell routes it there); None
    /// for the whole member's.
    pub fn partition(&self) -> Option<Partition> {
        match *self {
            Action::SendHeartbeat(partition, _)
            | Action::Spawn { partition, .. }
            | Action::Lease(partition, _)
            | Action::SignalGroup(partition, _)
            | Action::KillGroup(partition)
            | Action::ReleaseRevoke(partition)
            | Action::Disclaim(partition, _) => Some(partition),
            Action::Rejoin
            | Action::StandAside
            | Action::HandOver { .. }
            | Action::SendCandidacy { .. }
            | Action::LeaveGroup
            | Action::Cold(_)
            | Action::Exit(_) => None,
        }
    }
}
