//! The options of running a command (the default mode), and the core's
//! policies as flag values.

use std::ffi::OsString;

use clap::Args;

use super::{FromEnv, KafkaArgs};
use crate::leader::{Missed, Restart};

// The core's restart policy, as a flag value (the core knows nothing of clap).
impl clap::ValueEnum for Restart {
    fn value_variants<'a>() -> &'a [Self] {
        &[Restart::Never, Restart::OnFailure, Restart::Always]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Restart::Never => PossibleValue::new("never").help("Exit with the child's status (and leave the group)"),
            Restart::OnFailure => {
                PossibleValue::new("on-failure").help("Start it again unless it exited with status 0")
            }
            Restart::Always => PossibleValue::new("always").help("Start it again whatever its status"),
        })
    }
}

// The core's missed-run policy, as a flag value.
impl clap::ValueEnum for Missed {
    fn value_variants<'a>() -> &'a [Self] {
        &[Missed::Skip, Missed::Once, Missed::All]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Missed::Skip => PossibleValue::new("skip")
                .help("Skip them (a run cut short by a crash too): wait for the next due time"),
            Missed::Once => {
                PossibleValue::new("once").alias("latest").help("Run the latest of them once, at once [default]")
            }
            Missed::All => PossibleValue::new("all").help("Run each of them, oldest first, one after another"),
        })
    }
}

/// What a wave does when its run exits with a failure (see --once-within).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailedRun {
    /// The next member runs it again, as after a crash [default]: each
    /// member runs it at most once, and a service fails over.
    Retry,
    /// Every member of the wave exits with the run's status.
    Exit,
}

/// A duration flag's value (humantime: 500ms, 6s, 1m, 1h 30m), so that clap
/// reports a bad one against its flag; `config` checks the bounds.
fn duration(value: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(value.trim()).map_err(|e| format!("{e}; use a number with a unit, e.g. 500ms, 6s, 1m"))
}

/// The most `--hot-standbys`: more than any group needs ready at once.
pub const MAX_HOT_STANDBYS: u32 = 100;

fn hot_standbys(value: &str) -> Result<u32, String> {
    match value.trim().parse::<u32>() {
        Ok(k) if k <= MAX_HOT_STANDBYS => Ok(k),
        _ => Err(format!(
            "not a count of 0 to {MAX_HOT_STANDBYS}; use how many standbys to keep ready besides the leader, e.g. 2"
        )),
    }
}

/// Options for running a command (the default mode).
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// How long a crashed leader blocks takeover (Kafka's session
    /// timeout): the one timing flag most users set.
    ///
    /// The others follow from it unless given, all safe together:
    /// the coordinator heartbeat (heartbeat.interval.ms) H = S/10 (at most
    /// 500ms), --heartbeat-deadline S - H - 500ms, --heartbeat-interval
    /// S/12 (at most 500ms) and --grace S/2 (at most 3s). At 6s: 500ms, 5s,
    /// 500ms and 3s. At least 1s. Most brokers refuse less than 6s
    /// (group.min.session.timeout.ms).
    #[arg(long, env = "NELI_SESSION_TIMEOUT", default_value = "6s", value_name = "DURATION", value_parser = duration,
          help_heading = "Timing")]
    pub session_timeout: std::time::Duration,

    /// Neither wake the others when leaving nor rejoin on their wakes: a
    /// handover then waits for the standbys' coordinator heartbeats (up to
    /// 0.8s at the defaults).
    ///
    /// A member that stops or yields writes a wake record once it has left
    /// the group, and the others rejoin on it at once. Use this where the
    /// broker's group coordinator mishandles a rejoin that comes right
    /// after a leave: tansu 0.6 can leave another member's first join
    /// unanswered for good. The member still watches partition 0 for
    /// `neli-run drain`.
    #[arg(long, env = "NELI_NO_WAKE", help_heading = "Timing")]
    pub no_wake: bool,

    /// How often the leader writes a heartbeat record to partition 0
    /// [default: --session-timeout / 12, at most 500ms].
    #[arg(long, env = "NELI_HEARTBEAT_INTERVAL", value_name = "DURATION", value_parser = duration,
          help_heading = "Timing")]
    pub heartbeat_interval: Option<std::time::Duration>,

    /// Kill the command when no own heartbeat has come back for this long
    /// [default: --session-timeout - 700ms].
    ///
    /// This is the fence: a leader cut off from Kafka kills its command
    /// before the group can elect another. A network blip shorter than it
    /// does not stop the command. Must leave room within --session-timeout
    /// for the coordinator heartbeat and a margin of 500ms (checked at
    /// start-up).
    #[arg(long, env = "NELI_HEARTBEAT_DEADLINE", value_name = "DURATION", value_parser = duration,
          help_heading = "Timing")]
    pub heartbeat_deadline: Option<std::time::Duration>,

    /// Time between the stop signal and SIGKILL [default: --session-timeout
    /// / 2, at most 3s].
    ///
    /// A new leader waits for this stop, so it must fit within
    /// --session-timeout (checked at start-up).
    #[arg(long, env = "NELI_GRACE", value_name = "DURATION", value_parser = duration, help_heading = "Timing")]
    pub grace: Option<std::time::Duration>,

    /// Signal that asks the command to stop (name or number).
    #[arg(
        long,
        env = "NELI_STOP_SIGNAL",
        default_value = "SIGTERM",
        value_name = "SIGNAL",
        help_heading = "The command"
    )]
    pub stop_signal: String,

    /// What to do when the command exits while leader [default: never;
    /// always with --roles above 1, unless on a schedule].
    ///
    /// never: exit with its status and let a standby take over.
    #[arg(long, env = "NELI_RESTART", value_enum, help_heading = "The command")]
    pub restart: Option<Restart>,

    /// NELI's roles: run the command once per role, each role on exactly
    /// one member of the group at a time [default: 1, the single leader].
    ///
    /// On every host: `neli-run -g ingest --roles 12 -- ./worker --shard
    /// {role}`. Role j is elected on partition j of the group's topic
    /// (created with N partitions; an existing topic with fewer is refused). Each role's
    /// command gets `{role}` in its arguments replaced by the role's
    /// number, NELI_ROLE and NELI_ROLES in its environment, and its own
    /// fencing token, which grows with every new owner of that role. Every
    /// rule of the single leader holds per role: a revoke stops only the
    /// roles it takes, a fence kills only its role's command. Members
    /// share the roles evenly, and a member joining or leaving moves only
    /// its share (Kafka's cooperative-sticky assignment). Above 1, the
    /// commands are services (--restart always by default), or each role's
    /// command runs once per due time of --every or --cron (the role's
    /// owner runs it: each (role, due time) once across the group); the
    /// options not yet made per role are refused, each by name.
    #[arg(long, env = "NELI_ROLES", value_name = "N", help_heading = "The command", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=crate::leader::MAX_ROLES as i64))]
    pub roles: Option<u32>,

    /// NELI's non-exclusive mode: a revoke does not wait for the command,
    /// which gets --grace to finish while the next owner starts its own.
    ///
    /// The trade: for a moment two commands of one role (or of the single
    /// leader) may run, and in exchange a handover leaves no gap. For work
    /// where a gap costs more than a duplicate (a cache warmer, a
    /// metrics scraper), never for work that must not run twice. A lost
    /// partition (its session expired) still kills the command at once,
    /// and a fence still kills it.
    #[arg(long, env = "NELI_OVERLAP", help_heading = "The command")]
    pub overlap: bool,

    /// Pause before restarting the command (--restart); a command that
    /// keeps failing waits longer.
    ///
    /// The first failed run (non-zero, or killed) waits this; each further
    /// failed run in a row doubles the wait (from 100 ms when this is
    /// shorter), up to 30 s (or this, if longer), and says so once as a
    /// warning. A run that lasted 30 s or more, or exited 0, ends the
    /// streak: the next restart waits this again.
    #[arg(long, env = "NELI_RESTART_DELAY", default_value = "1s", value_name = "DURATION", value_parser = duration, help_heading = "The command")]
    pub restart_delay: std::time::Duration,

    /// With --restart never: members started within this long of a run's
    /// wave run the command once between them [default: 30s; 0 turns it off].
    ///
    /// The same crontab line on every host starts one member per host for
    /// each tick: a wave. The leader runs the command; when its run ends,
    /// every member of the wave exits with the run's status without running
    /// it again, naming who ran it. A wave begins when its first attempt
    /// starts; a member started later than this after that begins the next
    /// wave. Keep it well below the schedule's period (30s fits cron's
    /// every-minute ticks) and above the skew between the hosts' starts. If
    /// the leader crashes, is fenced or is stopped mid-run, the next leader
    /// runs it again (at least once; NELI_ATTEMPT counts the attempts).
    #[arg(long, env = "NELI_ONCE_WITHIN", value_name = "DURATION", value_parser = duration, help_heading = "Cron and schedules")]
    pub once_within: Option<std::time::Duration>,

    /// With --restart never: what a wave does when its run fails (exits
    /// non-zero) [default: retry].
    #[arg(long, env = "NELI_FAILED_RUN", value_enum, value_name = "POLICY", help_heading = "Cron and schedules")]
    pub failed_run: Option<FailedRun>,

    /// Stop a run that takes longer than this (stop signal, --grace,
    /// SIGKILL) [default: no limit].
    ///
    /// The stopped run counts as ended with the status that gives (143
    /// after SIGTERM): --restart and, once per wave, --failed-run decide
    /// what follows, as for a run that failed by itself.
    #[arg(long, env = "NELI_MAX_RUNTIME", value_name = "DURATION", value_parser = duration, help_heading = "The command")]
    pub max_runtime: Option<std::time::Duration>,

    /// How much of each run's output goes on the record: the last SIZE
    /// bytes of its stdout and stderr together (as written, interleaved),
    /// in the run's end record on the runs topic, for `neli-run logs` to
    /// print from any host. At most 128KiB. 0 keeps none, and the command
    /// then writes to neli-run's stdout and stderr itself.
    ///
    /// The output still goes where it went (the journal, the container's
    /// log). Whoever may read the runs topic reads what is kept: a command
    /// that prints secrets needs 0 here (or `output=0` on its crontab job).
    /// A crontab job's `output=SIZE` overrides it for that job. A --warm
    /// command's tail is its process's, on the record of the run (the
    /// stretch of leading) in which it exits.
    #[arg(long, env = "NELI_KEEP_OUTPUT", value_name = "SIZE", default_value = crate::size::DEFAULT_OUTPUT,
          value_parser = crate::size::output, help_heading = "The command")]
    pub keep_output: usize,

    /// Run the command every DURATION while leader, and stay up between
    /// runs (e.g. 5m; at least 1s).
    ///
    /// For a long-lived service (systemd, a container) in place of a
    /// crontab line on every host. Due times lie on a grid counted from the
    /// Unix epoch, so every member computes the same ones: 5m is due at :00,
    /// :05 ... of every hour, 1d at midnight UTC (--cron for other times).
    /// Only the leader runs it. Each run's due time, start, end, status and
    /// fencing token go on the group's topic, so a new leader neither
    /// repeats a run that ended nor forgets one that was due: one cut short
    /// by a crash, a fence or a stop runs again (NELI_ATTEMPT 2), and due
    /// times that passed with nobody to run them follow --missed. Runs never
    /// overlap. The command gets NELI_DUE, its due time (RFC 3339 UTC).
    #[arg(long, env = "NELI_EVERY", value_name = "DURATION", value_parser = duration, conflicts_with = "cron", help_heading = "Cron and schedules")]
    pub every: Option<std::time::Duration>,

    /// Run the command at the times of a cron expression while leader, and
    /// stay up between runs, e.g. "30 2 * * *" (daily at 02:30).
    ///
    /// Five fields: minute, hour, day of month, month, day of week (names
    /// such as MON and JAN too); a sixth in front gives seconds. In
    /// --time-zone. Otherwise as --every.
    #[arg(long, env = "NELI_CRON", value_name = "EXPRESSION", help_heading = "Cron and schedules")]
    pub cron: Option<String>,

    /// Run a whole crontab, each job once per due time across the group,
    /// instead of one command: the same file on every host.
    ///
    /// `neli-run -g fleet --crontab /etc/neli-run/fleet.crontab`. Cron's
    /// syntax with a name per job (`*/5 * * * *  billing  ./billing-job`;
    /// `@hourly`, `@every 90s`, CRON_TZ= and assignments too; check a file
    /// with `neli-run cron check FILE`). Each job is placed on a partition
    /// of the group's topic of its own, the same for every member, and run
    /// by the member that owns that partition: jobs spread over the
    /// members, and a member that leaves or dies moves only its own. Each
    /// run goes through `/bin/sh -c` (or the file's SHELL) as cron runs it,
    /// told NELI_JOB, NELI_DUE and its fencing token, and is recorded on the
    /// topic as --cron's are: once per due time. A bad line is said with
    /// its line and column and skipped; the good lines run. SIGHUP, or a
    /// change to the file, reads it again: no other job stops or moves. As
    /// cron's /etc/cron.d, the file is refused unless it is neli-run's
    /// user's (or root's) and nobody else may write it, and it is a regular
    /// file of at most 1 MiB.
    #[arg(
        long,
        env = "NELI_CRONTAB",
        value_name = "FILE",
        conflicts_with = "command",
        help_heading = "Cron and schedules"
    )]
    pub crontab: Option<std::path::PathBuf>,

    /// The time zone of --cron: an IANA name such as Europe/Berlin, UTC, or
    /// local (the TZ variable, else /etc/localtime) [default: local].
    ///
    /// Give the same zone on every member: due times must agree.
    #[arg(long, env = "NELI_TIME_ZONE", value_name = "ZONE", help_heading = "Cron and schedules")]
    pub time_zone: Option<String>,

    /// With --every or --cron: what happens to due times that passed with
    /// nobody to run them (nobody led, or the previous run still went on)
    /// [default: once].
    #[arg(long, env = "NELI_MISSED", value_enum, value_name = "POLICY", help_heading = "Cron and schedules")]
    pub missed: Option<Missed>,

    /// With --every or --cron: skip a due run that cannot start within this
    /// long of its due time [default: no limit].
    ///
    /// As a Kubernetes CronJob's startingDeadlineSeconds: a run that would
    /// start too late to be useful is skipped, and the next is waited for.
    #[arg(long, env = "NELI_STARTING_DEADLINE", value_name = "DURATION", value_parser = duration, help_heading = "Cron and schedules")]
    pub starting_deadline: Option<std::time::Duration>,

    /// This member's name in logs and heartbeats [default: <HOSTNAME>-<PID>].
    #[arg(long, env = "NELI_NAME", help_heading = "Operating")]
    pub name: Option<String>,

    /// This member's priority, 0 to 100: when a leader stops, the live
    /// member of the highest priority leads [default: 0].
    ///
    /// Whoever Kafka assigns partition 0 hands it to a live member of
    /// higher priority before it starts the command (a few hundred ms
    /// more). A leader keeps leading when a member of higher priority joins
    /// (unless --preempt). Members write a small record to the group's
    /// topic every 2 × --heartbeat-interval (1s) while they wait, so that
    /// the leader and `neli-run status` know them.
    #[arg(long, env = "NELI_PRIORITY", default_value_t = 0, value_name = "N",
          value_parser = clap::value_parser!(u8).range(0..=100), allow_negative_numbers = true,
          help_heading = "Operating")]
    pub priority: u8,

    /// While leading, hand over to a member of higher --priority as soon
    /// as one is live (it joined, or came back).
    ///
    /// The leader stops its command (stop signal, --grace) as for `neli-run
    /// yield --to`. Without it, a leader keeps leading until it stops, and
    /// the priorities choose only the next leader.
    #[arg(long, env = "NELI_PREEMPT", help_heading = "Operating")]
    pub preempt: bool,

    /// How many standbys the group keeps ready to lead next, besides the
    /// members holding a role: the best by --priority, then by name.
    ///
    /// The owner of partition 0 names them in its records, and `neli-run
    /// status` shows each member hot (named, or leading) or cold. A cold
    /// member (no role, not named by a list of K names) leaves the
    /// consumer group, so that a group's rebalances and heartbeats cost
    /// what K+1 members cost; it joins again when named, or when no live
    /// owner or hot standby is heard (docs/operations.md, "The hot set").
    /// Give the same value to every member.
    #[arg(long, env = "NELI_HOT_STANDBYS", default_value_t = 2, value_name = "K", value_parser = hot_standbys,
          allow_negative_numbers = true,
          help_heading = "Operating")]
    pub hot_standbys: u32,

    /// Never lead: watch the group, log who leads, and be listed by
    /// `neli-run status`, without ever running COMMAND (which may be left
    /// out).
    ///
    /// For a status host, or a host being drained: it never joins the
    /// consumer group, so Kafka can never give it partition 0. It writes a
    /// small record to the group's topic every 2 × --heartbeat-interval,
    /// and reads the topic.
    ///
    /// It has no use for the options of a member that may lead: the
    /// options of the command and of Cron and schedules, Hooks, Health and
    /// Warm standbys, and --priority, --preempt, --acquire-timeout,
    /// --metrics-addr and --leader-file. Given on the command line they are
    /// refused; from the environment they are ignored, with a warning that
    /// names them, so that one EnvironmentFile serves both kinds of host.
    #[arg(long, env = "NELI_NEVER_LEAD", help_heading = "Operating",
          conflicts_with_all = ["priority", "preempt", "acquire_timeout", "metrics_addr", "leader_file", "restart",
                                "restart_delay", "stop_signal", "max_runtime", "once_within", "failed_run", "every",
                                "cron", "time_zone", "missed", "starting_deadline", "on_lead", "on_unlead", "on_exit", "on_failure",
                                "hook_timeout", "health_cmd", "health_interval", "health_timeout", "health_retries",
                                "warm", "lead_signal", "unlead_signal", "roles", "overlap", "crontab", "keep_output"])]
    pub never_lead: bool,

    /// Give up if not leader within this time [default: wait forever].
    #[arg(long, env = "NELI_ACQUIRE_TIMEOUT", value_name = "DURATION", value_parser = duration, help_heading = "Operating")]
    pub acquire_timeout: Option<std::time::Duration>,

    /// Serve /metrics (Prometheus), /livez, /readyz and /leader on this
    /// address.
    ///
    /// /livez: 200 while the shell's loop runs (a liveness probe: a Kafka outage
    /// does not fail it). /readyz: 200 while Kafka answers too (/healthz is
    /// its older name). /leader answers 200 only on the member running the
    /// command: point a load balancer's health check at it.
    #[arg(long, env = "NELI_METRICS_ADDR", value_name = "HOST:PORT", help_heading = "Operating")]
    pub metrics_addr: Option<String>,

    /// A file that exists while this member leads: written (atomically)
    /// when it starts leading, removed when it stops and when neli-run
    /// exits. Lines of key=value: token, name, group, pid, since.
    ///
    /// For scripts on the host that ask whether this member leads. Advisory:
    /// written once it leads (the command started, or due under --every or
    /// --cron), removed once it stops leading (its command being stopped or
    /// killed, maybe not yet gone); left behind by a kill
    /// -9 (its pid= names a process that is gone; the next start removes
    /// it). Its directory must exist and be writable (checked at start).
    ///
    /// neli-run replaces or removes only a leader file it wrote, or one
    /// whose pid= is gone, and never writes through a link: a path holding
    /// anything else (another file, a link, the leader file of another
    /// neli-run that runs) is refused at start and left as it is. Give each
    /// member on a host a path of its own.
    ///
    /// With --roles, each role has a file of its own, which exists while
    /// this member leads that role: put {role} in the path
    /// (/run/neli-run/leader-{role}); each file says role= too.
    #[arg(long, env = "NELI_LEADER_FILE", value_name = "PATH", help_heading = "Operating")]
    pub leader_file: Option<std::path::PathBuf>,

    /// Run CMD with /bin/sh -c when this member starts leading.
    ///
    /// One string, run by the shell: "curl -s -d led=$NELI_NAME https://..."
    /// works. A hook runs on a thread of its own, one at a time, in order,
    /// with stdin from /dev/null and neli-run's stdout and stderr; it never
    /// delays a fence, a revoke or a handover, and it gets the command's
    /// environment (not the NELI_* settings neli-run read) plus NELI_HOOK
    /// (lead, unlead, exit, failure), NELI_FENCING_TOKEN and NELI_REASON. Its failure
    /// is logged and changes nothing. What it leaves running is killed once
    /// it exits. Behind one that hangs, a lead or unlead hook still waiting
    /// is replaced by the next: only the latest state is told.
    ///
    /// With --roles, each role's hooks follow that role (one thread runs
    /// them all, in order), told NELI_ROLE and NELI_ROLES too.
    #[arg(long, env = "NELI_ON_LEAD", value_name = "CMD", help_heading = "Hooks")]
    pub on_lead: Option<String>,

    /// Run CMD with /bin/sh -c when this member stops leading; NELI_REASON
    /// says why: fenced, revoked, lost, yielded, unhealthy (--health-cmd) or
    /// exiting.
    ///
    /// Its command is being stopped or killed meanwhile (it may not be gone
    /// yet). See --on-lead.
    #[arg(long, env = "NELI_ON_UNLEAD", value_name = "CMD", help_heading = "Hooks")]
    pub on_unlead: Option<String>,

    /// Run CMD with /bin/sh -c after each run of the command ends;
    /// NELI_EXIT_STATUS is its status (128+N for signal N), NELI_REASON
    /// exited (by itself), stopped (by neli-run), overran (stopped past
    /// --max-runtime) or fenced.
    ///
    /// For failure-only alerts, --on-failure. See --on-lead.
    #[arg(long, env = "NELI_ON_EXIT", value_name = "CMD", help_heading = "Hooks")]
    pub on_exit: Option<String>,

    /// Run CMD with /bin/sh -c once for each run that fails, never for one
    /// that succeeds: a page, a ticket, a chat message.
    ///
    /// A run fails when it exits non-zero, is killed by a signal neli-run
    /// did not send (a crash, the OOM killer), cannot start (127: not
    /// found), or is stopped for running too long (--max-runtime, a job's
    /// max-runtime=). A run neli-run stops (a revoke, a fence, a yield, a
    /// drain, `cron pause --stop`, SIGTERM) has not failed. The member that
    /// saw the run end runs CMD, told NELI_HOOK=failure, NELI_REASON
    /// (exited or overran), NELI_EXIT_STATUS, NELI_EXIT_CODE or NELI_SIGNAL,
    /// NELI_FENCING_TOKEN, NELI_STARTED_AT, NELI_ENDED_AT, NELI_DURATION_MS,
    /// NELI_HOST, NELI_RUN (its id in `neli-run history`), and NELI_ROLE,
    /// NELI_JOB, NELI_DUE, NELI_ATTEMPT where the run had them. Behind a
    /// hook that hangs, one failure hook per role or job waits, the latest:
    /// NELI_FAILURES says how many failed runs it stands for.
    ///
    /// With --crontab, a job's `on-failure=CMD` (a script's path) runs in
    /// its place for that job, with the job's assignments. See --on-lead.
    #[arg(long, env = "NELI_ON_FAILURE", value_name = "CMD", help_heading = "Hooks")]
    pub on_failure: Option<String>,

    /// How long a hook may run before it and all it started are sent
    /// SIGKILL (at most 10m) [default: 10s].
    ///
    /// At exit neli-run leaves the group first, then waits for the hooks
    /// still queued, all of them within this bound and 1s (a second SIGTERM
    /// cuts it short): a stop fits systemd's TimeoutStopSec=30s at the
    /// defaults.
    #[arg(long, env = "NELI_HOOK_TIMEOUT", value_name = "DURATION", value_parser = duration, help_heading = "Hooks")]
    pub hook_timeout: Option<std::time::Duration>,

    /// Lead only while CMD, run with /bin/sh -c, exits 0: a member whose
    /// check fails --health-retries times in a row hands over, and stays
    /// out of the group until it passes again.
    ///
    /// A member joins the group only once its first check passes. An
    /// unhealthy leader stops its command (stop signal, grace) and stands
    /// aside as `neli-run yield` makes it; an unhealthy standby leaves the
    /// group, so it is never given partition 0. A check runs on a thread of
    /// its own, with stdin and stdout on /dev/null (the log says its exit
    /// status and the last line of its stderr) and the command's
    /// environment; one that outlasts --health-timeout is sent SIGKILL, with
    /// all it started, and counts as failed, and what one leaves running is
    /// killed once it exits. It never delays a fence, a revoke or a
    /// handover.
    ///
    /// With --roles it is the member's: unhealthy, it stops every role's
    /// command and leaves the group, and only its roles move. That is how
    /// to drain a member and bring it back without stopping it:
    /// --health-cmd 'test ! -e /run/neli-run/drain', then touch or remove
    /// the file.
    #[arg(long, env = "NELI_HEALTH_CMD", value_name = "CMD", help_heading = "Health")]
    pub health_cmd: Option<String>,

    /// How long after a check ends the next one starts [default: 5s].
    #[arg(long, env = "NELI_HEALTH_INTERVAL", value_name = "DURATION", value_parser = duration,
          help_heading = "Health")]
    pub health_interval: Option<std::time::Duration>,

    /// How long a check may run before it and all it started are sent
    /// SIGKILL, and it counts as failed [default: 5s].
    #[arg(long, env = "NELI_HEALTH_TIMEOUT", value_name = "DURATION", value_parser = duration,
          help_heading = "Health")]
    pub health_timeout: Option<std::time::Duration>,

    /// How many checks in a row must fail before this member is unhealthy
    /// [default: 3]; one that passes makes it healthy again.
    #[arg(long, env = "NELI_HEALTH_RETRIES", value_name = "N", help_heading = "Health")]
    pub health_retries: Option<u32>,

    /// Run the command on every member, and only tell it when it leads:
    /// the leader's gets --lead-signal, with its fencing token in the file
    /// $NELI_TOKEN_FILE, and --unlead-signal (the file emptied first) when
    /// it stops leading.
    ///
    /// For a command that is slow to get ready (a cache to warm, a pool to
    /// open). The trade: at most one command *acts as leader* only if each
    /// honours --unlead-signal at once; a fence still SIGKILLs the
    /// leader's (it starts again as a standby), and the token stays the
    /// downstream guard. Needs --restart on-failure or always: a command
    /// that dies on any member is started again after --restart-delay.
    /// Neither signal goes to a command in its first second, whose handlers
    /// may not be set yet: the file says it at once, the signal comes at
    /// the second's end.
    #[arg(long, env = "NELI_WARM", help_heading = "Warm standbys")]
    pub warm: bool,

    /// With --warm: the signal that tells the command it leads (name or
    /// number).
    #[arg(
        long,
        env = "NELI_LEAD_SIGNAL",
        default_value = "SIGUSR1",
        value_name = "SIGNAL",
        help_heading = "Warm standbys"
    )]
    pub lead_signal: String,

    /// With --warm: the signal that tells the command it no longer leads
    /// (name or number).
    #[arg(
        long,
        env = "NELI_UNLEAD_SIGNAL",
        default_value = "SIGUSR2",
        value_name = "SIGNAL",
        help_heading = "Warm standbys"
    )]
    pub unlead_signal: String,

    /// The command to run while leader, and its arguments (no shell).
    #[arg(last = true, required_unless_present_any = ["never_lead", "crontab"], value_name = "COMMAND", help_heading = "The command")]
    pub command: Vec<OsString>,

    /// Which options took their value from the environment (`parse_argv`).
    #[arg(skip)]
    pub from_env: FromEnv,

    /// The variables --never-lead ignored (`parse_argv`): the config warns.
    #[arg(skip)]
    pub ignored: Vec<String>,
}

impl RunArgs {
    /// A schedule of its own: --every or --cron.
    pub fn scheduled(&self) -> bool {
        self.every.is_some() || self.cron.is_some()
    }

    /// The restart policy: as given, else never for the single leader and
    /// for a schedule (a run per due time), and always for roles (each
    /// role's command is a service).
    pub fn restart(&self) -> Restart {
        let service = self.roles.unwrap_or(1) > 1 && !self.scheduled();
        self.restart.unwrap_or(if service { Restart::Always } else { Restart::Never })
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use crate::cli::Cli;

    /// --never-lead's help says what it has no use for: the options under
    /// five headings and five more. Its `conflicts_with_all` must say the
    /// same, which `parse_argv` refuses and ignores by.
    #[test]
    fn never_lead_refuses_what_its_help_says() {
        let command = Cli::command();
        let arg = |id: &str| command.get_arguments().find(|a| a.get_id() == id).unwrap();
        let mut refused: Vec<&str> =
            command.get_arg_conflicts_with(arg("never_lead")).iter().map(|a| a.get_id().as_str()).collect();
        let headings = ["The command", "Cron and schedules", "Hooks", "Health", "Warm standbys"];
        let named = ["priority", "preempt", "acquire_timeout", "metrics_addr", "leader_file"];
        let mut said: Vec<&str> = command
            .get_arguments()
            .filter(|a| a.get_help_heading().is_some_and(|h| headings.contains(&h)) && !a.is_positional())
            .map(|a| a.get_id().as_str())
            .chain(named)
            .collect();
        refused.sort();
        said.sort();
        assert_eq!(refused, said);
    }
}
