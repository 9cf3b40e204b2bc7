//! Checked configuration: parses durations, signals, broker addresses and
//! `-X` properties, and refuses timing that cannot be safe (`timing`), before
//! anything joins a group.

mod java_props;
pub mod properties;
mod seats;
mod target;
pub mod timing;

pub use properties::Origin;
use seats::{crontab, names_role, role_named, roles};
pub use seats::{read_crontab, with_role, CronRun};
pub(crate) use target::creation_error;
use target::given_as;
pub use target::{env_properties, Target};

use std::collections::BTreeMap;
use std::ffi::OsString;

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::cli::{FailedRun, RunArgs};

use crate::exit::{Failure, Kind};
use crate::files::{holder, Holder};
use crate::printable::printable;

use crate::leader::{Missed, Restart, Schedule, Settings, Waves};

use timing::{Requested, Timing, MARGIN};

/// The longest --session-timeout: Kafka's default
/// group.max.session.timeout.ms (brokers refuse longer sessions unless
/// reconfigured; librdkafka's own limit is 1 h).
pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// librdkafka's ranges for the two timing properties neli-run reads.
const MAX_COORDINATOR_HEARTBEAT_MS: u64 = 3_600_000;

const MAX_POLL_INTERVAL_MS: u64 = 86_400_000;

/// Bounds of the durations that are not tied to the session timeout.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(24 * 3600);

const MAX_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

const MAX_RUNTIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// --once-within's default: half of cron's shortest period.
pub const DEFAULT_ONCE_WITHIN: Duration = Duration::from_secs(30);

/// A wave's records must still be on the topic when its last member reads
/// them: the retention neli-run creates the topic with.
const MAX_ONCE_WITHIN: Duration = Duration::from_secs(3600);

/// A configuration the user must fix: a usage error unless said otherwise.
/// The message never carries a property's value.
fn err<T>(msg: impl Into<String>) -> Result<T, Failure> {
    Err(Failure::new(Kind::Usage, msg))
}

/// Once per wave: on by default with `--restart never`, and only there.
fn waves(args: &RunArgs) -> Result<Option<Waves>, Failure> {
    let (once_within, failed_run) = (args.once_within, args.failed_run);
    let named = |flag| args.from_env.name(flag);
    if args.restart() != Restart::Never {
        if once_within.is_some() || failed_run.is_some() {
            let flag = named(if once_within.is_some() { "--once-within" } else { "--failed-run" });
            return err(format!(
                "{flag} applies only to --restart never (a command run once per tick, as from cron); \
                 with {} the command runs as a service and has no waves",
                restart(args)
            ));
        }
        return Ok(None);
    }
    let within = match once_within {
        None => DEFAULT_ONCE_WITHIN,
        Some(v) => duration(
            ("--once-within", "NELI_ONCE_WITHIN"),
            v,
            MAX_ONCE_WITHIN,
            "the topic keeps a wave's records for an hour (the retention neli-run creates it with)",
        )?,
    };
    let retry_failed = failed_run != Some(FailedRun::Exit);
    if within.is_zero() {
        if failed_run.is_some() {
            return err(format!(
                "{} has no effect with {} (every member runs the command)",
                named("--failed-run"),
                args.from_env.name_with("--once-within", "0")
            ));
        }
        return Ok(None);
    }
    Ok(Some(Waves { within, retry_failed }))
}

/// `--restart always` as the user gave it, for messages.
fn restart(args: &RunArgs) -> String {
    let value = clap::ValueEnum::to_possible_value(&args.restart()).map(|v| v.get_name().to_string());
    args.from_env.name_with("--restart", &value.unwrap_or_default())
}

/// A schedule of its own (--every or --cron), and the flags that go with
/// one, or with none.
fn schedule(args: &RunArgs) -> Result<Option<Schedule>, Failure> {
    let calendar: std::sync::Arc<dyn crate::leader::Calendar> = match (&args.every, &args.cron) {
        (Some(every), _) => {
            let every =
                duration(("--every", "NELI_EVERY"), *every, crate::calendar::MAX_EVERY, "use --cron for a yearly job")?;
            if every < crate::calendar::MIN_EVERY {
                return err("--every must be at least 1s (a schedule, not a loop: see --restart always)");
            }
            std::sync::Arc::new(crate::calendar::Every::new(every).expect("at least 1s"))
        }
        (None, Some(expr)) => {
            let zone = match args.time_zone.as_deref() {
                None => crate::calendar::Zone::Local,
                Some(zone) => zone.parse().map_err(|e| Failure::new(Kind::Usage, format!("--time-zone: {e}")))?,
            };
            match crate::calendar::Cron::new(expr, zone) {
                Ok(cron) => std::sync::Arc::new(cron),
                Err(e) => {
                    return err(format!(
                        "--cron '{expr}': {e} (five fields: minute hour day-of-month month day-of-week, \
                         e.g. \"*/5 * * * *\"; a sixth in front gives seconds)"
                    ))
                }
            }
        }
        (None, None) => {
            let without = [
                ("--time-zone", args.time_zone.is_some()),
                ("--missed", args.missed.is_some()),
                ("--starting-deadline", args.starting_deadline.is_some()),
            ];
            if let Some((flag, _)) = without.iter().find(|(_, given)| *given) {
                return err(format!("{} applies only to a schedule: give --every or --cron", args.from_env.name(flag)));
            }
            return Ok(None);
        }
    };
    let flag = args.from_env.name(if args.every.is_some() { "--every" } else { "--cron" });
    if args.every.is_some() && args.time_zone.is_some() {
        return err(format!(
            "{} applies only to --cron (--every counts from the Unix epoch, in UTC)",
            args.from_env.name("--time-zone")
        ));
    }
    if args.restart() != Restart::Never {
        return err(format!(
            "{flag} runs the command at its due times and keeps leading between runs; {} is for a \
             command run as a service: leave one of them out",
            restart(args)
        ));
    }
    for (other, given) in [("--once-within", args.once_within.is_some()), ("--failed-run", args.failed_run.is_some())] {
        if given {
            let other = args.from_env.name(other);
            return err(format!(
                "{other} applies to a command run once per tick from cron on every host; with {flag} neli-run \
                 keeps the schedule itself and runs each due time once (leave {other} out)"
            ));
        }
    }
    let starting_deadline = match args.starting_deadline {
        None => None,
        Some(v) => match duration(
            ("--starting-deadline", "NELI_STARTING_DEADLINE"),
            v,
            crate::calendar::MAX_EVERY,
            "leave it out for no limit",
        )? {
            d if d.is_zero() => return err("--starting-deadline must be more than 0 (leave it out for no limit)"),
            d => Some(d),
        },
    };
    // The line as given (a zone named or the host's), so that members on
    // other flags know the runs on record are not this line's.
    let line = match (&args.every, &args.cron) {
        (Some(every), _) => format!("--every {}", humantime::format_duration(*every)),
        (None, cron) => format!(
            "--cron {} in {}",
            cron.as_deref().unwrap_or_default(),
            args.time_zone.as_deref().unwrap_or("local")
        ),
    };
    Ok(Some(Schedule {
        calendar,
        missed: args.missed.unwrap_or(Missed::Once),
        starting_deadline,
        retry: None,
        overlap: None,
        since: None,
        line: Some(crate::crontab::digest(&line)),
    }))
}

/// The timing asked for by flags (`asked`) and by -X heartbeat.interval.ms
/// and max.poll.interval.ms, each duration within its bound;
/// `Timing::derive` fills in the rest and checks the rules.
fn timing(asked: Requested, kafka: &Target) -> Result<Timing, Failure> {
    let within = |names, given: Option<Duration>| {
        let why = "it must fit within --session-timeout, at most 30m";
        given.map(|d| duration(names, d, MAX_SESSION_TIMEOUT, why)).transpose()
    };
    let property = |key, max| kafka.property(key).map(|(v, origin)| millis_property(key, v, origin, max)).transpose();
    Timing::derive(Requested {
        session_timeout: duration(
            ("--session-timeout", "NELI_SESSION_TIMEOUT"),
            asked.session_timeout,
            MAX_SESSION_TIMEOUT,
            "Kafka's default group.max.session.timeout.ms: brokers refuse longer sessions",
        )?,
        coordinator_heartbeat: property("heartbeat.interval.ms", MAX_COORDINATOR_HEARTBEAT_MS)?,
        heartbeat_interval: within(("--heartbeat-interval", "NELI_HEARTBEAT_INTERVAL"), asked.heartbeat_interval)?,
        heartbeat_deadline: within(("--heartbeat-deadline", "NELI_HEARTBEAT_DEADLINE"), asked.heartbeat_deadline)?,
        grace: within(("--grace", "NELI_GRACE"), asked.grace)?,
        max_poll_interval: property("max.poll.interval.ms", MAX_POLL_INTERVAL_MS)?,
    })
}

/// Everything `run` needs, checked.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the group's topic is.
    pub kafka: Target,
    pub name: String,
    /// The timing in force (the core's share of it is in `leader` too).
    pub timing: Timing,
    pub leader: Settings,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Where each seat's leader file goes (`--leader-file`, with `{role}`
    /// replaced per role), each directory checked; empty without one.
    pub leader_files: BTreeMap<crate::leader::Partition, std::path::PathBuf>,
    pub hooks: Hooks,
    /// `--health-cmd` and its thresholds, if set.
    pub health: Option<Health>,
    /// `--warm`: the command runs on every member and is told when it leads.
    pub warm: Option<Warm>,
    /// `--never-lead`: watch the group, never join it.
    pub never_lead: bool,
    /// `--no-wake`: no wake written when leaving, none watched for.
    pub no_wake: bool,
    /// `--roles`, as given: with it, each role's command gets `{role}`
    /// replaced and NELI_ROLE (the core's `Settings::roles` counts them).
    pub roles: Option<u32>,
    /// `--crontab`: its jobs instead of one command.
    pub crontab: Option<CronRun>,
    /// `--keep-output`: the bytes of a run's output its record keeps.
    pub keep_output: usize,
}

/// The health check (`--health-cmd`): a shell command line, when it runs,
/// how long it may take, and how many failures in a row make a member
/// unhealthy.
#[derive(Clone, Debug)]
pub struct Health {
    pub cmd: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub retries: u32,
}

/// `--warm`'s signals, checked: they tell the command, they must not stop it.
#[derive(Clone, Copy, Debug)]
pub struct Warm {
    pub lead_signal: crate::leader::Signal,
    pub unlead_signal: crate::leader::Signal,
}

/// The hooks (`--on-lead`, `--on-unlead`, `--on-exit`, `--on-failure`):
/// shell command lines, none empty, and how long each may run.
#[derive(Clone, Debug)]
pub struct Hooks {
    pub on_lead: Option<String>,
    pub on_unlead: Option<String>,
    pub on_exit: Option<String>,
    pub on_failure: Option<String>,
    pub timeout: Duration,
}

impl Config {
    /// What neli-run tells every command, hook and check about its group
    /// (`crate::env` has the rule for the rest of their environment).
    pub fn given_env(&self) -> Vec<(String, String)> {
        vec![
            ("NELI_GROUP".into(), self.kafka.group.clone()),
            ("NELI_TOPIC".into(), self.kafka.topic.clone()),
            ("NELI_NAME".into(), self.name.clone()),
            ("NELI_BROKERS".into(), self.kafka.brokers.clone()),
        ]
    }

    /// Checks `args`; `env_properties` is NELI_KAFKA_PROPERTIES, if set.
    pub fn from_args(args: RunArgs, env_properties: Option<String>) -> Result<Config, Failure> {
        let crontab = crontab(&args)?;
        let (program, rest) = command(&args, crontab.is_some())?;
        if !args.ignored.is_empty() {
            tracing::warn!(
                "--never-lead ignores {} from the environment: a member that never leads has no use for them \
                 (on the command line they are refused)",
                args.ignored.join(", ")
            );
        }
        let roles = roles(&args)?;
        role_named(&args, roles)?;
        let restart = args.restart();
        let overlap = overlap(&args)?;
        let schedule = schedule(&args)?;
        let hooks = hooks(&args)?;
        let health = health(&args)?;
        let warm = warm(&args)?;
        let waves = match (&schedule, &crontab) {
            (None, None) => waves(&args)?,
            _ => None,
        };
        let asked = Requested {
            session_timeout: args.session_timeout,
            heartbeat_interval: args.heartbeat_interval,
            heartbeat_deadline: args.heartbeat_deadline,
            grace: args.grace,
            ..Requested::default()
        };
        let kafka = Target::from_args(args.kafka, env_properties)?;
        let name = name(args.name)?;
        let timing = timing(asked, &kafka)?;
        let stop_signal = crate::leader::Signal(stop_signal(&args.stop_signal)? as i32);
        let restart_delay = duration(
            ("--restart-delay", "NELI_RESTART_DELAY"),
            args.restart_delay,
            MAX_RESTART_DELAY,
            "a pause, not a schedule",
        )?;
        let acquire_timeout = acquire_timeout(args.acquire_timeout)?;
        let max_runtime = max_runtime(args.max_runtime)?;
        let leader = Settings {
            resume_window: timing.session_timeout.saturating_sub(timing.coordinator_heartbeat.saturating_add(MARGIN)),
            claim_margin: MARGIN,
            heartbeat_interval: timing.heartbeat_interval,
            heartbeat_deadline: timing.heartbeat_deadline,
            grace: timing.grace,
            stop_signal,
            restart,
            restart_delay,
            acquire_timeout,
            max_runtime,
            waves,
            schedule,
            health_checked: health.is_some(),
            name: name.clone(),
            priority: args.priority,
            preempt: args.preempt,
            candidacy_interval: 2 * timing.heartbeat_interval,
            hot_standbys: args.hot_standbys,
            // The watcher's parked fetch waits less than a request timeout.
            owner_silence: 3 * 2 * timing.heartbeat_interval + timing.request_timeout(),
            roles: roles.unwrap_or(1),
            overlap,
            // Placed once the topic is read (`Config::place`).
            jobs: None,
        };
        let metrics_addr = metrics_addr(args.metrics_addr.as_deref())?;
        let leader_files = leader_files(args.leader_file, roles, &leader)?;
        let config = Config {
            kafka,
            name,
            timing,
            leader,
            program,
            args: rest,
            metrics_addr,
            leader_files,
            hooks,
            health,
            warm,
            never_lead: args.never_lead,
            no_wake: args.no_wake,
            roles,
            crontab,
            keep_output: args.keep_output,
        };
        Ok(config)
    }
}

/// The program to run and its arguments: `/bin/sh` under `--crontab` (each
/// job's command line goes to its shell: `CronRun::jobs`), none for a
/// member that never leads (it has nothing to run).
fn command(args: &RunArgs, crontab: bool) -> Result<(OsString, Vec<OsString>), Failure> {
    let (program, rest) = match args.command.split_first() {
        Some((program, rest)) => (program.clone(), rest.to_vec()),
        None if crontab => (OsString::from("/bin/sh"), Vec::new()),
        None if args.never_lead => (OsString::new(), Vec::new()),
        None => return err("no command given: neli-run [OPTIONS] -- COMMAND [ARGS]..."),
    };
    if program.is_empty() && !args.never_lead {
        // An empty name can never be found, so this is "command not
        // found": 127, as `env ""` and shells report it. Refused here
        // because the PATH search would otherwise try "<dir>/" and
        // report a directory as not executable (126).
        return Err(Failure::new(Kind::NotFound, "the command is empty (\"\"): give the program to run after --"));
    }
    Ok((program, rest))
}

/// `--name`, not empty; HOST-PID without one.
fn name(name: Option<String>) -> Result<String, Failure> {
    match name {
        Some(name) if name.trim().is_empty() => err("--name must not be empty"),
        Some(name) => Ok(name),
        None => Ok(format!(
            "{}-{}",
            nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "host".into()),
            std::process::id()
        )),
    }
}

/// `--acquire-timeout`, checked; None waits for ever.
fn acquire_timeout(given: Option<Duration>) -> Result<Option<Duration>, Failure> {
    given
        .map(|v| {
            duration(
                ("--acquire-timeout", "NELI_ACQUIRE_TIMEOUT"),
                v,
                MAX_ACQUIRE_TIMEOUT,
                "leave it out to wait for ever",
            )
        })
        .transpose()
}

/// `--max-runtime`, checked: more than 0; None for no limit.
fn max_runtime(given: Option<Duration>) -> Result<Option<Duration>, Failure> {
    let Some(v) = given else { return Ok(None) };
    match duration(("--max-runtime", "NELI_MAX_RUNTIME"), v, MAX_RUNTIME, "leave it out for no limit")? {
        d if d.is_zero() => err("--max-runtime must be more than 0 (leave it out for no limit)"),
        d => Ok(Some(d)),
    }
}

/// `--metrics-addr HOST:PORT`, resolved.
fn metrics_addr(given: Option<&str>) -> Result<Option<std::net::SocketAddr>, Failure> {
    let Some(addr) = given else { return Ok(None) };
    match std::net::ToSocketAddrs::to_socket_addrs(addr).map(|mut a| a.next()) {
        Ok(Some(addr)) => Ok(Some(addr)),
        _ => err(format!("--metrics-addr '{addr}': expected HOST:PORT, e.g. 0.0.0.0:9464")),
    }
}

/// `--overlap`, checked: for a command that runs as a service. A run once
/// per wave or per due time is told apart by its records, which a second
/// command running beside it would blur, and a warm command is never
/// stopped by a revoke at all.
fn overlap(args: &RunArgs) -> Result<bool, Failure> {
    if !args.overlap {
        return Ok(false);
    }
    let overlap = args.from_env.name("--overlap");
    for (flag, given) in [("--every", args.every.is_some()), ("--cron", args.cron.is_some()), ("--warm", args.warm)] {
        if given {
            return err(format!(
                "{overlap} does not go with {}: it is for a command run as a service",
                args.from_env.name(flag)
            ));
        }
    }
    if args.restart() == Restart::Never {
        return err(format!(
            "{overlap} needs --restart on-failure or always (or --roles): with {} a run is once per wave, \
             which two commands at once would blur",
            restart(args)
        ));
    }
    Ok(true)
}

/// `--warm` and its signals, checked: a warm command runs for ever on every
/// member, so what bounds or schedules one run does not apply, and it must
/// be started again when it dies.
fn warm(args: &RunArgs) -> Result<Option<Warm>, Failure> {
    if !args.warm {
        return Ok(None);
    }
    let why = "a warm command runs all the time on every member";
    let warm = args.from_env.name("--warm");
    if args.scheduled() {
        let flag = args.from_env.name(if args.every.is_some() { "--every" } else { "--cron" });
        return err(format!("{warm} and {flag} do not go together: {why}, not at due times (leave one out)"));
    }
    for (flag, given) in [
        ("--once-within", args.once_within.is_some()),
        ("--failed-run", args.failed_run.is_some()),
        ("--max-runtime", args.max_runtime.is_some()),
    ] {
        if given {
            let given = args.from_env.name(flag);
            return err(format!("{warm} and {given} do not go together: {why}; {flag} is for a run that ends"));
        }
    }
    if args.restart() == Restart::Never {
        return err(format!(
            "{warm} needs --restart on-failure or always: {why}, and one that dies must be started again \
             (--restart never is for a run once per tick, as from cron)"
        ));
    }
    let stop = stop_signal(&args.stop_signal)?;
    let signal = |flag: &str, env: &str, value: &str| -> Result<Signal, Failure> {
        let flag = given_as(flag, env, value);
        let sig = parse_signal(value).map_err(|e| Failure::new(e.kind, e.message.replace("--stop-signal", flag)))?;
        if matches!(sig, Signal::SIGKILL | Signal::SIGSTOP | Signal::SIGCONT) || sig == stop {
            return err(format!(
                "{flag} {}: the command must be able to catch it and go on running (and it is not the stop \
                 signal {}); use SIGUSR1, SIGUSR2 or SIGHUP",
                sig.as_str(),
                stop.as_str()
            ));
        }
        Ok(sig)
    };
    let lead = signal("--lead-signal", "NELI_LEAD_SIGNAL", &args.lead_signal)?;
    let unlead = signal("--unlead-signal", "NELI_UNLEAD_SIGNAL", &args.unlead_signal)?;
    if lead == unlead {
        return err(format!(
            "--lead-signal and --unlead-signal are both {}: the command must tell them apart",
            lead.as_str()
        ));
    }
    Ok(Some(Warm {
        lead_signal: crate::leader::Signal(lead as i32),
        unlead_signal: crate::leader::Signal(unlead as i32),
    }))
}

/// The hooks asked for, checked.
fn hooks(args: &RunArgs) -> Result<Hooks, Failure> {
    let line = |name: &str, cmd: &Option<String>| match cmd {
        Some(cmd) if cmd.trim().is_empty() => {
            err(format!("{name} is empty: give a shell command line, e.g. {name} 'logger led' (or leave it out)"))
        }
        _ => Ok(cmd.clone()),
    };
    let timeout = match args.hook_timeout {
        None => DEFAULT_HOOK_TIMEOUT,
        Some(d) => match duration(
            ("--hook-timeout", "NELI_HOOK_TIMEOUT"),
            d,
            MAX_HOOK_TIMEOUT,
            "a hook is a notice: run longer work as the command",
        )? {
            d if d.is_zero() => return err("--hook-timeout must be more than 0, e.g. 10s"),
            d => d,
        },
    };
    Ok(Hooks {
        on_lead: line("--on-lead", &args.on_lead)?,
        on_unlead: line("--on-unlead", &args.on_unlead)?,
        on_exit: line("--on-exit", &args.on_exit)?,
        on_failure: line("--on-failure", &args.on_failure)?,
        timeout,
    })
}

/// The health check asked for, checked.
fn health(args: &RunArgs) -> Result<Option<Health>, Failure> {
    let Some(cmd) = args.health_cmd.clone() else { return Ok(None) };
    if cmd.trim().is_empty() {
        return err("--health-cmd is empty: give a shell command line, e.g. --health-cmd 'curl -fs localhost:8080/ready' (or leave it out)");
    }
    let positive = |names: (&str, &str), d: Option<Duration>, default: Duration| match d {
        None => Ok(default),
        Some(d) if d.is_zero() => {
            err(format!("{} must be more than 0, e.g. {}", names.0, humantime::format_duration(default)))
        }
        Some(d) => duration(names, d, MAX_HEALTH_DURATION, "a health check runs often and quickly"),
    };
    let retries = match args.health_retries {
        None => DEFAULT_HEALTH_RETRIES,
        Some(0) => {
            return err(
                "--health-retries must be at least 1 (the failures in a row that make a member unhealthy), e.g. 3",
            )
        }
        Some(n) => n,
    };
    Ok(Some(Health {
        cmd,
        interval: positive(
            ("--health-interval", "NELI_HEALTH_INTERVAL"),
            args.health_interval,
            DEFAULT_HEALTH_INTERVAL,
        )?,
        timeout: positive(("--health-timeout", "NELI_HEALTH_TIMEOUT"), args.health_timeout, DEFAULT_HEALTH_TIMEOUT)?,
        retries,
    }))
}

/// --health-interval, --health-timeout and --health-retries unless given
/// (Docker's are 30s, 30s and 3: a handover waits on them, so shorter).
const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(5);
const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_HEALTH_RETRIES: u32 = 3;

/// The longest --health-interval and --health-timeout.
const MAX_HEALTH_DURATION: Duration = Duration::from_secs(600);

/// How long a hook may run unless --hook-timeout says otherwise.
const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest --hook-timeout.
const MAX_HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// `--leader-file`, one per seat: with `--roles`, `{role}` in the path is
/// replaced by each role's number, and above one role the path must hold
/// it (the roles of a member would otherwise share one file).
fn leader_files(
    path: Option<std::path::PathBuf>,
    roles: Option<u32>,
    leader: &Settings,
) -> Result<BTreeMap<crate::leader::Partition, std::path::PathBuf>, Failure> {
    let Some(path) = path else { return Ok(BTreeMap::new()) };
    if roles.is_none() {
        return Ok(BTreeMap::from([(0, checked_leader_file(path)?)]));
    }
    if leader.roles > 1 && !names_role(path.as_os_str()) {
        return err(format!(
            "--leader-file {}: with --roles {}, each role has a leader file of its own: put {{role}} in the path \
             (e.g. /run/neli-run/leader-{{role}}), which names the role",
            path.display(),
            leader.roles
        ));
    }
    leader.seats().map(|role| Ok((role, checked_leader_file(with_role(path.as_os_str(), role).into())?))).collect()
}

/// A --leader-file whose directory exists (neli-run creates the file, not
/// its directory) and takes new files, and that is free: nothing there, or
/// a leader file whose writer is gone (anything else would be replaced,
/// then removed: a typo must not cost the file it names).
fn checked_leader_file(path: std::path::PathBuf) -> Result<std::path::PathBuf, Failure> {
    let at = path.display();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => std::path::Path::new("."),
    };
    if path.is_dir() {
        return err(format!("--leader-file {at}: is a directory; name a file in it, e.g. {at}/leader"));
    }
    if !dir.is_dir() {
        return err(format!("--leader-file {at}: directory {} does not exist (create it first)", dir.display()));
    }
    if let Err(why) = crate::files::probe_dir(dir) {
        return err(format!(
            "--leader-file {at}: directory {} cannot hold it: {why}; name a directory the user neli-run runs as can \
             write (under systemd, RuntimeDirectory=neli gives /run/neli)",
            dir.display()
        ));
    }
    if let Some(sticky) = crate::files::writable_by_all(dir) {
        // Warned, not refused: what a neighbour can do there is deny a
        // start or mislead a reader of the file, never run the command.
        let also = if sticky { "" } else { " and, as it is not sticky, replace or remove this member's" };
        tracing::warn!(
            "--leader-file {at}: directory {} is writable by every user: another one can put a file or link at \
             the path first (neli-run then refuses to start) or a forged leader file while this member does not \
             lead{also}; name a directory of neli-run's own (under systemd, RuntimeDirectory=neli gives /run/neli)",
            dir.display()
        );
    }
    match holder(&path) {
        Holder::Nobody | Holder::Us | Holder::Gone { .. } => Ok(path),
        Holder::Other { pid, group } => err(format!(
            "--leader-file {at}: it is the leader file of another neli-run that runs (pid {pid}, group {}); give each \
             member a path of its own",
            printable(&group)
        )),
        Holder::Foreign(why) => err(format!(
            "--leader-file {at}: it {why}: neli-run replaces and removes that path, so it must be free or hold a \
             leader file neli-run wrote; name another path (or remove that file, if it is one neli-run left)"
        )),
    }
}

/// Parses a humantime duration ("500ms", "6s", "1m 30s") of at most `max`.
fn duration(names: (&str, &str), d: Duration, max: Duration, why: &str) -> Result<Duration, Failure> {
    if d > max {
        let from_env = std::env::var(names.1).ok().and_then(|v| humantime::parse_duration(v.trim()).ok()) == Some(d);
        let flag = if from_env { names.1 } else { names.0 };
        let (d, max) = (humantime::format_duration(d), humantime::format_duration(max));
        return err(format!("{flag} {d}: too long, at most {max} ({why})"));
    }
    Ok(d)
}

/// A property in milliseconds that neli-run reads itself, within
/// librdkafka's range 1..=max.
fn millis_property(key: &str, value: &str, origin: &Origin, max: u64) -> Result<Duration, Failure> {
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 && ms <= max => Ok(Duration::from_millis(ms)),
        Ok(ms) if ms > 0 => err(format!(
            "{origin}: {key} is more than librdkafka's limit of {max} ms ({})",
            humantime::format_duration(Duration::from_millis(max))
        )),
        _ => err(format!("{origin}: {key}: expected a positive number of milliseconds")),
    }
}

/// Accepts "TERM", "SIGTERM", "sigterm" or "15".
pub fn parse_signal(value: &str) -> Result<Signal, Failure> {
    let v = value.trim();
    let parsed = match v.parse::<i32>() {
        Ok(n) => Signal::try_from(n).ok(),
        Err(_) => {
            let upper = v.to_ascii_uppercase();
            let name = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
            name.parse::<Signal>().ok()
        }
    };
    match parsed {
        Some(sig) => Ok(sig),
        None => err(format!("--stop-signal '{value}': not a signal name or number (e.g. SIGTERM, INT, 15)")),
    }
}

/// A --stop-signal: one that asks a command to stop. Signals that cannot
/// stop it are refused with the reason.
pub fn stop_signal(value: &str) -> Result<Signal, Failure> {
    use Signal::*;
    let flag = given_as("--stop-signal", "NELI_STOP_SIGNAL", value);
    let sig = parse_signal(value).map_err(|e| Failure::new(e.kind, e.message.replace("--stop-signal", flag)))?;
    let why = match sig {
        SIGKILL => "neli-run already sends SIGKILL after --grace; the stop signal is the request before it",
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU => "it suspends the command instead of stopping it",
        SIGCONT => "it resumes a suspended command; it stops nothing",
        SIGCHLD | SIGWINCH | SIGURG => "it is ignored by default, so the command would run on until SIGKILL",
        _ => return Ok(sig),
    };
    err(format!(
        "{flag} {}: {why}. Use a signal the command stops on: SIGTERM (the default), SIGINT, SIGQUIT, SIGHUP or \
         one it handles (SIGUSR1, SIGUSR2)",
        sig.as_str()
    ))
}

#[cfg(test)]
mod tests;
