//! What a member seats: `--roles` (a command per role it owns) and a
//! crontab's jobs (`--crontab`, each on the partition it was placed on),
//! checked, and the `{role}` in a command's arguments.

use std::collections::BTreeMap;

use super::{err, restart, Config};
use crate::cli::RunArgs;
use crate::exit::{Failure, Kind};
use crate::leader::Restart;

impl Config {
    /// Seats the crontab's jobs on the partitions `placed` names, of the
    /// topic's `partitions` (each a seat: what each holds is read on it).
    pub fn place(&mut self, placed: &BTreeMap<String, crate::leader::Partition>, partitions: i32) {
        self.leader.roles = u32::try_from(partitions).unwrap_or(1);
        self.seat_jobs(placed);
    }

    /// Takes in the crontab read again (`jobs`, placed on `placed`, of the
    /// topic's `partitions`): each job on its partition, one added to the
    /// topic since we started too (its seat is made when Kafka assigns it
    /// or we read it: `Shell::seat`).
    pub fn reload(
        &mut self,
        (jobs, digest): (Vec<crate::crontab::Job>, String),
        placed: &BTreeMap<String, crate::leader::Partition>,
        partitions: i32,
    ) {
        if let Some(cron) = self.crontab.as_mut() {
            (cron.jobs, cron.digest) = (jobs, digest);
        }
        self.leader.roles = self.leader.roles.max(u32::try_from(partitions).unwrap_or(1));
        self.seat_jobs(placed);
    }

    fn seat_jobs(&mut self, placed: &BTreeMap<String, crate::leader::Partition>) {
        let Some(cron) = self.crontab.as_mut() else { return };
        // --max-runtime bounds the jobs with no bound of their own.
        let bound = self.leader.max_runtime;
        cron.placed = cron.jobs.iter().filter_map(|job| Some((*placed.get(&job.name)?, job.clone()))).collect();
        self.leader.jobs = Some(
            cron.placed
                .iter()
                .map(|(&p, job)| {
                    let line = crate::crontab::digest(&match &job.zone {
                        Some(zone) => format!("{} in {zone}", job.when),
                        None => job.when.clone(),
                    });
                    let schedule = crate::leader::Schedule { line: Some(line), ..job.schedule.clone() };
                    let max_runtime = job.max_runtime.or(bound);
                    (p, crate::leader::Job { name: job.name.clone(), schedule, max_runtime })
                })
                .collect(),
        );
    }
}

/// `--crontab`: the file's jobs, and where each sits once placed.
#[derive(Clone, Debug)]
pub struct CronRun {
    pub file: std::path::PathBuf,
    /// The zone of jobs with no CRON_TZ above them (`--time-zone`).
    pub zone: crate::calendar::Zone,
    /// The good lines' jobs, in the file's order.
    pub jobs: Vec<crate::crontab::Job>,
    /// Each job by the partition it was placed on (`Config::place`).
    pub placed: BTreeMap<crate::leader::Partition, crate::crontab::Job>,
    /// The file's digest (`crontab::digest`), said in our records.
    pub digest: String,
}

/// `--crontab FILE`, read and checked: its bad lines are said (file, line,
/// column) and skipped, the good ones run; a file with no job is refused,
/// and so are the options that do not apply to a crontab's jobs.
pub(super) fn crontab(args: &RunArgs) -> Result<Option<CronRun>, Failure> {
    let Some(file) = &args.crontab else { return Ok(None) };
    let flag = args.from_env.name("--crontab");
    let refused = [
        ("--every", args.every.is_some(), "the file says when each job runs"),
        ("--cron", args.cron.is_some(), "the file says when each job runs"),
        ("--roles", args.roles.is_some(), "each job is a role of its own"),
        ("--restart", args.restart.is_some(), "each job runs once per due time"),
        ("--once-within", args.once_within.is_some(), "each job runs once per due time"),
        ("--failed-run", args.failed_run.is_some(), "each job runs once per due time"),
        ("--missed", args.missed.is_some(), "give it per job: name[missed=skip]"),
        ("--starting-deadline", args.starting_deadline.is_some(), "give it per job: name[starting-deadline=5m]"),
        ("--overlap", args.overlap, "a job's runs never overlap"),
        ("--warm", args.warm, "a job's run ends"),
        ("--priority", args.priority != 0, "not supported with a crontab yet"),
        ("--preempt", args.preempt, "not supported with a crontab yet"),
        ("--leader-file", args.leader_file.is_some(), "not supported with a crontab yet"),
        ("--on-lead", args.on_lead.is_some(), "not supported with a crontab yet"),
        ("--on-unlead", args.on_unlead.is_some(), "not supported with a crontab yet"),
        ("--on-exit", args.on_exit.is_some(), "not supported with a crontab yet"),
    ];
    if let Some((other, _, why)) = refused.iter().find(|(_, given, _)| *given) {
        return err(format!("{} does not go with {flag}: {why}", args.from_env.name(other)));
    }
    let zone = match args.time_zone.as_deref() {
        None => crate::calendar::Zone::Local,
        Some(zone) => zone.parse().map_err(|e| Failure::new(Kind::Usage, format!("--time-zone: {e}")))?,
    };
    let (jobs, digest) = read_crontab(file, zone).map_err(|e| Failure::new(Kind::Usage, format!("{flag} {e}")))?;
    Ok(Some(CronRun { file: file.clone(), zone, jobs, placed: BTreeMap::new(), digest }))
}

/// The jobs of the crontab `file` (`zone` for lines with no CRON_TZ), its
/// problems said in the log by `FILE:LINE:COLUMN`; Err (naming the file
/// and the fix) if it is refused whole (`crontab::read`: it cannot be read,
/// another user could write it, it is not a regular file or too big) or
/// holds no job: at start and on each reload, as `cron check` refuses it.
/// With the jobs, the file's digest (`crontab::digest`).
pub fn read_crontab(
    file: &std::path::Path,
    zone: crate::calendar::Zone,
) -> Result<(Vec<crate::crontab::Job>, String), String> {
    let shown = file.display();
    let tab = crate::crontab::read(file, zone)?;
    for problem in &tab.problems {
        match problem.error {
            true => {
                tracing::error!("{shown}:{problem} (the line is skipped; `neli-run cron check {shown}` checks a file)")
            }
            false => tracing::warn!("{shown}:{problem}"),
        }
    }
    if tab.jobs.is_empty() {
        return Err(crate::crontab::no_job(file));
    }
    Ok((tab.jobs, tab.digest))
}

/// `--roles`, checked: above 1, each role's command is a service, and what
/// is not yet per role is refused by name (the single leader, `--roles 1`,
/// takes every option).
pub(super) fn roles(args: &RunArgs) -> Result<Option<u32>, Failure> {
    let Some(n) = args.roles.filter(|&n| n > 1) else { return Ok(args.roles) };
    let roles = args.from_env.name_with("--roles", &n.to_string());
    // A schedule's runs are once per due time (the schedule's own check
    // wants --restart never); otherwise each role's command is a service.
    if !args.scheduled() && args.restart() != Restart::Always {
        return err(format!(
            "{roles} runs each role's command as a service, or once per due time of --every or --cron: {} is for \
             a command run once per tick from cron, which roles do not support yet; use --restart always (the \
             default with --roles), a schedule, or --roles 1",
            restart(args)
        ));
    }
    let given = [("--warm", args.warm), ("--priority", args.priority != 0), ("--preempt", args.preempt)];
    if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
        return err(format!(
            "{} does not work with {roles} yet: with roles, neli-run supports --restart always, --overlap, --restart-delay, \
             --every, --cron and the schedule's options, --max-runtime, --health-cmd, --leader-file, the hooks, --grace, \
             --stop-signal, --acquire-timeout, --metrics-addr, the timing and Kafka options (or run the single leader, \
             --roles 1, which takes every option)",
            args.from_env.name(flag)
        ));
    }
    Ok(Some(n))
}

/// `{role}` in the command's arguments is replaced only with `--roles`:
/// without it the command would get `{role}` as it is, so it is refused
/// (findings R-4), naming the flag that gives it a number.
pub(super) fn role_named(args: &RunArgs, roles: Option<u32>) -> Result<(), Failure> {
    let named = args.command.iter().find(|arg| names_role(arg)).filter(|_| roles.is_none() && args.crontab.is_none());
    match named {
        Some(arg) => err(format!(
            "the command's argument {} holds {{role}}, which neli-run replaces only with --roles (role j of N): \
             pass --roles N, or --roles 1 for one role ({{role}} is then 0)",
            crate::printable::printable(&arg.to_string_lossy())
        )),
        None => Ok(()),
    }
}

/// What a command's arguments and `--leader-file` say for "this role".
const ROLE: &[u8] = b"{role}";

/// Whether `arg` names the role (holds `{role}`).
pub(super) fn names_role(arg: &std::ffi::OsStr) -> bool {
    arg.as_encoded_bytes().windows(ROLE.len()).any(|w| w == ROLE)
}

/// `arg` with every `{role}` in it replaced by `role`'s number.
pub fn with_role(arg: &std::ffi::OsStr, role: crate::leader::Partition) -> std::ffi::OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let (bytes, pattern, number) = (arg.as_bytes(), ROLE, role.to_string());
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(pattern.len()).position(|w| w == pattern) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(number.as_bytes());
        rest = &rest[at + pattern.len()..];
    }
    out.extend_from_slice(rest);
    std::ffi::OsString::from_vec(out)
}
