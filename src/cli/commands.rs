//! The subcommands: `status`, `yield`, `pause`, `resume`, `drain`,
//! `undrain` and `cron` (which read and write the group's topic:
//! `crate::status`) and `dev-broker` (the crate neli-dev-broker), each with
//! its options.

use clap::{Args, Subcommand};

use super::KafkaArgs;

/// Commands other than running a child.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Run a Kafka-protocol broker in memory, to try neli-run without Kafka.
    ///
    /// It is librdkafka's mock cluster (one broker, or a cluster with
    /// --brokers) behind fixed addresses, with a group coordinator of its
    /// own that keeps Kafka's timing.
    /// Topics are created as on Kafka: by CreateTopics, or by a producer
    /// (one partition), never by a client that only looks. Everything lives
    /// in this process's memory and is lost when it stops. Other Kafka
    /// clients work too (kafka-python and kafkajs are checked: produce, join
    /// a group, consume, leave, create a topic). For development and tests
    /// only. Stops on Ctrl-C.
    ///
    /// SIGUSR1 takes every broker down (every connection closed, new ones
    /// refused) and SIGUSR2 brings them back with their state, as Kafka
    /// brokers restarting over their logs: to see what clients do then.
    /// With --control, `neli-run dev-broker event` makes one cluster event
    /// at a time (a leader or the coordinator moved, a broker stopped or
    /// crashed, a client cut off from one broker).
    #[cfg(feature = "dev-broker")]
    DevBroker(DevBrokerArgs),

    /// Show who leads a group now, and its standbys, read from its records.
    ///
    /// Works on any broker (it needs no group APIs) and does not join the
    /// group. Names and hosts read from the topic are printed with control
    /// characters escaped.
    Status(StatusArgs),

    /// Show the group's runs: who ran the command when, and how it ended,
    /// read from any host.
    ///
    /// Every member records each run of its command (the single leader's,
    /// each role's, each crontab job's, each scheduled run and each wave's
    /// attempt) on the topic <TOPIC>.runs (e.g. billing.neli.runs), which
    /// the first member to run creates with a week's retention: a record
    /// when a run starts and one when it ends, best effort (a run whose
    /// record Kafka refused or lost is missing; the member's log says so).
    /// `history` reads it (it never joins the group) and prints one line
    /// per run, the newest last: when it
    /// started, the role or job, member@host, its fencing token, its due
    /// time, how it ended (exit N, a signal, "running", or "no end" for a
    /// run whose member died with it: a newer run of the same role or job
    /// has started since), and how long it ran. Names read from the topic
    /// are printed with control characters escaped. With --job, then the
    /// job's owner now, its pause and its next due time, read from its
    /// partition of the group's topic (`cron history JOB` is this view).
    ///
    ///   neli-run history -g billing
    ///   neli-run history -g nightly --job report --since 2d
    ///   neli-run history -g shards --role 3 --limit 100 --json
    #[command(verbatim_doc_comment)]
    History(HistoryArgs),

    /// Print a run's output, read from any host: the last run's, or the
    /// one that ran at --at.
    ///
    /// A member keeps the tail of each run's output (--keep-output SIZE,
    /// 8KiB by default; a crontab job's output=SIZE) in the run's end
    /// record on the runs topic, which `logs` reads (it never joins the
    /// group). Name the run's role (--role) or crontab job (--job); with
    /// neither, the single leader's command. Control characters and bytes
    /// that are not UTF-8 are printed escaped (\u{1b}, \x{ff}) unless
    /// --raw; the run's one-line header goes to stderr. With --follow it
    /// goes on reading, and prints each run's output as the run ends, each
    /// after a one-line header, until Ctrl-C.
    ///
    ///   neli-run logs -g billing
    ///   neli-run logs -g nightly --job report --at 2026-11-29T02:30:00Z
    ///   neli-run logs -g shards --role 3 --follow
    #[command(verbatim_doc_comment)]
    Logs(LogsArgs),

    /// Serve a web page of the group: its members, who holds each role,
    /// each job's next due time and last run, the recent runs with their
    /// output, and a timeline of leaderships and runs.
    ///
    /// A reader, not a member: it never joins the group. It follows the
    /// group's topic and its runs topic (one consumer each, assigned) and
    /// draws each page from memory. Loopback only unless it has a token
    /// (--token-file, or NELI_CONSOLE_TOKEN), which a browser gives as the
    /// password of basic auth (any user) and a script as `Authorization:
    /// Bearer TOKEN`. Runs until stopped (Ctrl-C, SIGTERM).
    ///
    ///   neli-run console -g nightly                 # http://127.0.0.1:9465/
    ///   NELI_CONSOLE_TOKEN_FILE=/etc/neli-run/console.token \
    ///     neli-run console -g nightly --listen 0.0.0.0:9465
    #[command(verbatim_doc_comment)]
    Console(ConsoleArgs),

    /// Ask the leader to hand over to another member.
    ///
    /// Writes a control record to partition 0; the leader (the one named by
    /// --name, if given) stops its command as on a revoke, leaves the group
    /// and rejoins only once another member leads (or, if it is alone, after
    /// three session timeouts). With --to, the member named leads next.
    /// Waits for the new leader and names it. The request says who asked
    /// (user, host, pid) and the leader logs it; anyone with WRITE on the
    /// topic can ask.
    Yield(YieldArgs),

    /// Pause the group for maintenance: no member starts the command until
    /// `neli-run resume`.
    ///
    /// Writes a control record to partition 0 that every member honours,
    /// now and later (its owner carries it forward in every record): whoever
    /// leads keeps leading without starting the command; --stop also stops
    /// the running one (stop signal, grace, SIGKILL). Waits until the owner
    /// of partition 0 says it honours the pause; without one the pause
    /// still stands, for whoever comes. The request says who asked and the
    /// leader logs it; `neli-run status` shows it. A group of roles
    /// (--roles) is paused role by role, each on its own partition: every
    /// role, or the one --role names.
    Pause(PauseArgs),

    /// End a pause: the owner of partition 0 starts the command again.
    ///
    /// Writes a control record to partition 0 and waits until the owner
    /// of partition 0 says it honours it. A schedule's runs due while
    /// paused count as missed (--missed decides). A group of roles is
    /// resumed role by role: every role, or the one --role names.
    Resume(ResumeArgs),

    /// Drain a member without stopping it: its commands stop, it leaves the
    /// group, and the others take what it ran, until `neli-run undrain`.
    ///
    /// Writes a control record to partition 0 that names the member (its
    /// --name); the member stops its commands as on a revoke, leaves the
    /// group and stays out, still running and saying "drained" (in `neli-run
    /// status`, its log, systemd's status line and /metrics). Waits until
    /// the member says it is drained, its commands gone. A drain is the
    /// running process's: one started again joins as any member does (for a
    /// drain that outlives restarts: --health-cmd 'test ! -e FILE', then
    /// touch FILE). Refused when no other member may take over, unless
    /// --force. The request says who asked and the member logs it.
    Drain(DrainArgs),

    /// End a drain: the member joins the group again and takes its share.
    ///
    /// Writes a control record to partition 0 that names the member, and
    /// waits until it says it is back in the group.
    Undrain(UndrainArgs),

    /// A fleet crontab: one file of jobs, each run once per due time across
    /// the group.
    ///
    /// `neli-run cron check FILE` reads a crontab as a member reads it and
    /// says what each line means. The file's lines: `NAME=value` (for the
    /// jobs below it; `CRON_TZ=ZONE` is their time zone, `SHELL` their
    /// shell), and jobs: a time (five fields, @hourly, @daily, @weekly,
    /// @monthly, @yearly, or @every DURATION), a name (letters, digits, _ .
    /// -), optionally options in brackets, and the command, run by /bin/sh
    /// -c as cron runs it:
    ///
    ///   CRON_TZ=Europe/Berlin
    ///   */5 * * * *  billing  /usr/local/bin/billing-job --queue nightly
    ///   30 2 * * *   report[missed=all,max-runtime=1h]  /usr/local/bin/report
    ///   @every 90s   ping     curl -fsS https://example.internal/health
    ///
    /// Options: tz=ZONE, missed=skip|latest|all (as --missed),
    /// starting-deadline=DURATION and max-runtime=DURATION (as the flags),
    /// overlap=skip|queue|replace (a due time that comes while the run goes
    /// on: dropped, run after it, or run in its place; without it, missed),
    /// retries=N and retry-delay=DURATION (a failed run's retries, the same
    /// due time with NELI_ATTEMPT one more; 0 and 10s unless given).
    #[command(verbatim_doc_comment)]
    Cron(CronArgs),
}

/// `neli-run cron`.
#[derive(Debug, Args)]
pub struct CronArgs {
    #[command(subcommand)]
    pub command: CronCommand,
}

/// What `neli-run cron` does.
#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// Read a crontab and say what each job means: its time, zone, next
    /// due times and command; refused lines as FILE:LINE:COLUMN on stderr.
    ///
    /// Reads only the file (no Kafka): for a CI step or a hook before the
    /// file goes to the fleet. Daylight-saving days follow cron's rule: a
    /// job at a fixed time runs once on both (in the hour the clocks skip,
    /// at the hour's end; in the hour they repeat, the first time), a job
    /// at every minute or hour runs by the wall clock.
    Check(CronCheckArgs),

    /// Show a job's runs: `neli-run history --job JOB`, the same reader
    /// and the same answer.
    ///
    /// Each run from the runs topic (a week of them): when it started,
    /// who ran it, its token, due time, how it ended and after how long;
    /// then the job's owner now, its pause and its next due time (a due
    /// time with no run yet, or a retry's), from the job's partition.
    History(CronHistoryArgs),

    /// Pause one job: no member starts its runs until `cron resume JOB`.
    ///
    /// Writes a pause on the job's partition, which its owner honours, now
    /// and later (it carries it forward in every record there), and waits
    /// until the owner says so; the other jobs run on. Due times that pass
    /// while paused count as missed (the job's `missed=` decides on the
    /// resume). --stop also stops the run under way (stop signal, grace,
    /// SIGKILL): it runs again on the resume.
    Pause(CronPauseArgs),

    /// End a job's pause: its owner runs it again from its next due time.
    Resume(CronPauseArgs),

    /// Run a job now, once, across the fleet: its owner starts a run due
    /// now, recorded as any run.
    ///
    /// Writes a trigger on the job's partition and waits until the job's
    /// owner says the run started. A run due at or after the trigger
    /// answers it (a run under way finishes first); a trigger written while
    /// nobody owns the job is run by its next owner. The run is once per
    /// trigger as a due time is: one cut short runs again.
    Trigger(CronTriggerArgs),
}

/// Options of `neli-run cron trigger`.
#[derive(Debug, Args)]
pub struct CronTriggerArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// The job, by its name in the crontab.
    #[arg(value_name = "JOB")]
    pub job: String,

    /// How long to wait for the job's owner to start the run (at most 24h).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

/// Options of `neli-run cron pause` and `cron resume`.
#[derive(Debug, Args)]
pub struct CronPauseArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// The job, by its name in the crontab.
    #[arg(value_name = "JOB")]
    pub job: String,

    /// `cron pause`: also stop the job's run under way.
    #[arg(long)]
    pub stop: bool,

    /// How long to wait for the job's owner to acknowledge (at most 24h).
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

/// Options of `neli-run cron history`: `history --job JOB`'s.
#[derive(Debug, Args)]
pub struct CronHistoryArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// The job, by its name in the crontab.
    #[arg(value_name = "JOB")]
    pub job: String,

    #[command(flatten)]
    pub shown: HistoryShown,
}

impl From<CronHistoryArgs> for HistoryArgs {
    fn from(args: CronHistoryArgs) -> HistoryArgs {
        HistoryArgs { kafka: args.kafka, role: None, job: Some(args.job), shown: args.shown }
    }
}

/// Options of `neli-run cron check`.
#[derive(Debug, Args)]
pub struct CronCheckArgs {
    /// The crontab to read.
    #[arg(value_name = "FILE")]
    pub file: std::path::PathBuf,

    /// The time zone of jobs with no CRON_TZ above them: an IANA name such
    /// as Europe/Berlin, UTC, or local [default: local].
    #[arg(long, env = "NELI_TIME_ZONE", value_name = "ZONE")]
    pub time_zone: Option<String>,

    /// How many due times to show per job.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub next: u16,

    /// Show the due times after this moment instead of now: an RFC 3339
    /// time such as 2027-03-28T00:00:00+01:00 (to see what a
    /// daylight-saving day or a month's end does to a job).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,

    /// Print one JSON object (jobs and problems) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options of `neli-run pause`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Also stop the command that runs now (stop signal, --grace, SIGKILL).
    #[arg(long, env = "NELI_PAUSE_STOP")]
    pub stop: bool,

    /// In a group of roles (--roles), pause role J only (its partition, 0
    /// to roles - 1); without it, every role.
    #[arg(long, env = "NELI_PAUSE_ROLE", value_name = "J")]
    pub role: Option<u32>,

    /// How long to wait for the owner of partition 0 (of each role paused)
    /// to acknowledge (at most 24h).
    #[arg(long, env = "NELI_PAUSE_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

/// Options of `neli-run resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// In a group of roles (--roles), resume role J only; without it,
    /// every role.
    #[arg(long, env = "NELI_RESUME_ROLE", value_name = "J")]
    pub role: Option<u32>,

    /// How long to wait for the owner of partition 0 (of each role resumed)
    /// to acknowledge (at most 24h).
    #[arg(long, env = "NELI_RESUME_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

/// Options of `neli-run drain`.
#[derive(Debug, Args)]
pub struct DrainArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// The member to drain: its --name, as `neli-run status` lists it.
    #[arg(value_name = "MEMBER")]
    pub member: String,

    /// How long to wait for the member to say it is drained (at most 24h).
    #[arg(long, env = "NELI_DRAIN_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,

    /// Drain it even when no other member may take over (none live, or
    /// every one unhealthy, drained or --never-lead): its commands stop and
    /// nothing runs them until another member joins.
    #[arg(long, env = "NELI_DRAIN_FORCE")]
    pub force: bool,
}

/// Options of `neli-run undrain`.
#[derive(Debug, Args)]
pub struct UndrainArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// The member to bring back: its --name.
    #[arg(value_name = "MEMBER")]
    pub member: String,

    /// How long to wait for the member to say it is back (at most 24h).
    #[arg(long, env = "NELI_UNDRAIN_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

/// Options of `neli-run yield`.
#[derive(Debug, Args)]
pub struct YieldArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Only if this member leads (its --name).
    #[arg(long, env = "NELI_YIELD_NAME", value_name = "NAME")]
    pub name: Option<String>,

    /// Hand over to this member (its --name): it must be live (`neli-run
    /// status` lists the standbys). Without it, the live member of the
    /// highest --priority leads, whichever Kafka picks among equals.
    #[arg(long, env = "NELI_YIELD_TO", value_name = "NAME")]
    pub to: Option<String>,

    /// The role to move: 0, the single leader's. A group of roles
    /// (--roles) refuses it, naming what moves roles instead: Kafka's
    /// cooperative-sticky assignor would hand one role given back straight
    /// back to the same member.
    #[arg(long, env = "NELI_YIELD_ROLE", value_name = "J")]
    pub role: Option<u32>,

    /// How long to wait for another member to lead (at most 24h).
    #[arg(long, env = "NELI_YIELD_TIMEOUT", default_value = "30s", value_name = "DURATION")]
    pub timeout: humantime::Duration,

    /// Yield even when no member may take over (none live, or every one
    /// unhealthy or --never-lead, as `neli-run status` lists them): the
    /// command stops and nothing runs until a member leads, the same one
    /// after 3 session timeouts if it is alone. Without it such a yield is
    /// refused.
    #[arg(long, env = "NELI_YIELD_FORCE")]
    pub force: bool,
}

/// Options of `neli-run history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Only the runs of role J (--roles; the single leader is role 0).
    #[arg(long, value_name = "J")]
    pub role: Option<i32>,

    /// Only the runs of the crontab job NAME.
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,

    #[command(flatten)]
    pub shown: HistoryShown,
}

/// Which runs `history` and `cron history` show, and how.
#[derive(Debug, Args)]
pub struct HistoryShown {
    /// Only the runs that started since then: a duration back from now
    /// (90m, 2d) or an RFC 3339 time (2026-11-29T08:00:00Z).
    #[arg(long, value_name = "DURATION|TIME")]
    pub since: Option<String>,

    /// Show the newest N runs (0: every run kept).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub limit: usize,

    /// Print one JSON object (the group, the topic, the runs; of a crontab
    /// job, its owner, pause and next due time too) instead of text.
    #[arg(long, env = "NELI_JSON")]
    pub json: bool,
}

/// Options of `neli-run logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// The run of role J (--roles; the single leader is role 0).
    #[arg(long, value_name = "J", conflicts_with = "job")]
    pub role: Option<i32>,

    /// The run of the crontab job NAME.
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,

    /// The run that started last at or before this time (an RFC 3339 time,
    /// or a duration back from now: 2h). A time to the second, as `history`
    /// prints STARTED, counts the whole second. Without it, the last run.
    #[arg(long, value_name = "TIME|DURATION")]
    pub at: Option<String>,

    /// Keep reading: print each run's output as the run ends, after a
    /// one-line header (until Ctrl-C).
    #[arg(long, short = 'f', conflicts_with = "at")]
    pub follow: bool,

    /// Write the output's bytes as they are, control characters and all
    /// (for a file or a pipe; never a terminal you do not trust it on).
    #[arg(long)]
    pub raw: bool,
}

/// Options of `neli-run console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Where to serve the page: HOST:PORT. Loopback by default, so that
    /// only this host (or an `ssh -L` tunnel) sees it; any other address
    /// needs a token.
    #[arg(long, env = "NELI_CONSOLE_LISTEN", default_value = "127.0.0.1:9465", value_name = "HOST:PORT")]
    pub listen: String,

    /// A file holding the token every request must carry (one line). Kept
    /// off the command line; NELI_CONSOLE_TOKEN may hold the token itself.
    #[arg(long, env = "NELI_CONSOLE_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

/// Options of `neli-run status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,

    /// Print JSON instead of text.
    #[arg(long, env = "NELI_JSON")]
    pub json: bool,

    /// Keep watching; print a line each time the leader, its freshness, a
    /// pause or the standbys change (until Ctrl-C).
    #[arg(long, env = "NELI_WATCH")]
    pub watch: bool,
}

/// Options of `neli-run dev-broker`.
#[cfg(feature = "dev-broker")]
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DevBrokerArgs {
    /// Make one cluster event on a running dev broker, instead of running one.
    #[command(subcommand)]
    pub event: Option<DevBrokerEvent>,

    /// Address to listen on and advertise to clients (broker 1's; broker i
    /// listens on PORT + i - 1).
    #[arg(long, env = "NELI_DEV_BROKER_LISTEN", default_value = "127.0.0.1:9092", value_name = "HOST:PORT")]
    pub listen: String,

    /// Run a cluster of N brokers (1 to 9), on consecutive ports.
    ///
    /// Every topic is replicated on all of them, partition p led by broker
    /// p mod N + 1 (so partition 0 by broker 1), and the group coordinator
    /// is the last broker (the others answer NOT_COORDINATOR, as Kafka's
    /// brokers do): with N > 1, partition 0's leader and the coordinator
    /// are apart, as on most clusters.
    #[arg(long, env = "NELI_DEV_BROKER_BROKERS", default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=9))]
    pub brokers: u16,

    /// Take cluster events on a unix socket at PATH (mode 600), from
    /// `neli-run dev-broker event --control PATH EVENT`.
    #[arg(long, env = "NELI_DEV_BROKER_CONTROL", value_name = "PATH")]
    pub control: Option<std::path::PathBuf>,

    /// Address to advertise to clients, when it differs from --listen
    /// (e.g. listening on 0.0.0.0 for clients in other network namespaces).
    #[arg(long, env = "NELI_DEV_BROKER_ADVERTISE", value_name = "HOST:PORT")]
    pub advertise: Option<String>,

    /// Refuse access to TOPIC, as a broker with ACLs refuses a principal
    /// without permission (repeatable): to see what clients do then. A
    /// TOPIC ending in `*` refuses every topic it prefixes, existing or
    /// not, as a PREFIXED ACL (e.g. 'g.neli.wake-*').
    #[arg(long, env = "NELI_DEV_BROKER_DENY_TOPIC", value_name = "TOPIC")]
    pub deny_topic: Vec<String>,

    /// Give every topic N partitions, whatever its creator asks for, as a
    /// topic created by hand with more than one: to see what members do
    /// then (a member joining may take partition 0 from a leader, which
    /// then stops its command). Without it, a topic gets what CreateTopics
    /// asks for, and one partition when a producer's Metadata request
    /// creates it.
    #[arg(long, env = "NELI_DEV_BROKER_PARTITIONS", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub partitions: Option<u16>,

    /// Who answers the group APIs (JoinGroup, SyncGroup, Heartbeat,
    /// LeaveGroup, and with `kafka` also OffsetCommit, OffsetFetch,
    /// DescribeGroups and ListGroups).
    ///
    /// `kafka`: a coordinator with Kafka's timing (a join ends as soon as
    /// every member has rejoined; a session ends at exactly its last
    /// heartbeat plus the session timeout), so handovers take what they
    /// take on a Kafka cluster. `mock`: librdkafka's mock, an independent
    /// implementation of the protocol, which waits the session timeout less
    /// one second after any change in the group, and serves librdkafka
    /// clients only (kafka-python cannot join a group on it, and kafkajs
    /// cannot read its LeaveGroup answer).
    #[arg(long, env = "NELI_DEV_BROKER_GROUP_COORDINATOR", value_enum, default_value_t = GroupCoordinator::Kafka)]
    pub group_coordinator: GroupCoordinator,

    /// With --group-coordinator kafka: how long a group that starts from
    /// empty waits for more members before its first assignment (Kafka's
    /// group.initial.rebalance.delay.ms, 3s by default on a cluster).
    #[arg(long, env = "NELI_DEV_BROKER_INITIAL_REBALANCE_DELAY", default_value = "0s", value_name = "DURATION",
          value_parser = humantime::parse_duration)]
    pub initial_rebalance_delay: std::time::Duration,

    /// With --group-coordinator kafka: how long a rebalance that a member's
    /// leave began holds every join before it completes with the members
    /// that joined meanwhile (tansu 0.6 pauses 3s; Kafka waits for its
    /// slowest member). For tests of what a slow rebalance does.
    #[arg(long, env = "NELI_DEV_BROKER_LEAVE_PAUSE", default_value = "0s", value_name = "DURATION",
          value_parser = humantime::parse_duration)]
    pub leave_pause: std::time::Duration,

    /// Require a SASL login as USER with PASSWORD (repeatable).
    ///
    /// Clients then need -X security.protocol=SASL_PLAINTEXT and
    /// sasl.mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, as with a Kafka
    /// listener that requires SASL: to try credentials and --kafka-config
    /// files before using them against Kafka. It tests clients' SASL; it is
    /// not access control: any user who logs in may do everything, nothing
    /// is encrypted, and the mock behind it listens only on a unix socket in
    /// a directory private to the broker's user.
    #[arg(long, env = "NELI_DEV_BROKER_SASL_USER", value_name = "USER:PASSWORD")]
    pub sasl_user: Vec<String>,
}

/// `neli-run dev-broker event`.
#[cfg(feature = "dev-broker")]
#[derive(Debug, Subcommand)]
pub enum DevBrokerEvent {
    /// Make one cluster event on the dev broker at --control, and say what
    /// it did.
    ///
    /// EVENT is one of:
    ///   leader TOPIC PARTITION BROKER   move a partition's leadership;
    ///   offline TOPIC PARTITION         leave it without a leader;
    ///   coordinator BROKER              move the group coordinator (its
    ///                                   members' sessions start afresh);
    ///   stop BROKER                     a controlled shutdown: leaderships
    ///                                   and the coordinator moved first;
    ///   crash BROKER [DURATION]         connections cut at once, what it led
    ///                                   moved after DURATION [default: 9s,
    ///                                   KRaft's broker.session.timeout.ms];
    ///   start BROKER                    start it again, as a follower;
    ///   cut CLIENT BROKER               hold every byte between a client
    ///                                   (its client.id: a member's --name)
    ///                                   and one broker, as a network cut;
    ///   cut-at CLIENT BROKER TEXT       cut them once the client sends the
    ///                                   broker a record carrying TEXT (that
    ///                                   request held, and all after it);
    ///   heal [CLIENT [BROKER]]          end cuts (and disarm cut-at);
    ///   deny-alter TOPIC                refuse CreatePartitions on it, as
    ///                                   an ACL for ALTER revoked does;
    ///   allow-alter TOPIC               allow it again (the default);
    ///   rewind TOPIC PARTITION          answer the next fetch of the
    ///                                   partition (any client's)
    ///                                   OFFSET_OUT_OF_RANGE, as a broker
    ///                                   whose log lags: the client resets
    ///                                   its position (auto.offset.reset);
    ///   describe                        brokers, coordinator, leaders, cuts,
    ///                                   rewinds not yet served;
    ///   requests                        the requests each client sent since
    ///                                   the start, by API: one line
    ///                                   `CLIENT API COUNT` each, sorted by
    ///                                   client, then API key (CLIENT the
    ///                                   client.id, whitespace shown as `_`,
    ///                                   `-` if none; API Kafka's name, e.g.
    ///                                   Fetch, or the key's number), to see
    ///                                   what an idle member costs a broker.
    #[command(verbatim_doc_comment)]
    Event {
        /// The dev broker's --control socket.
        #[arg(long, env = "NELI_DEV_BROKER_CONTROL", value_name = "PATH")]
        control: std::path::PathBuf,

        /// The event and its arguments, e.g. `stop 2`.
        #[arg(required = true, value_name = "EVENT", trailing_var_arg = true)]
        words: Vec<String>,
    },
}

/// Who answers a dev broker's group APIs (see --group-coordinator).
#[cfg(feature = "dev-broker")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupCoordinator {
    /// Kafka's timing, answered by the dev broker itself.
    Kafka,
    /// librdkafka's mock cluster.
    Mock,
}
