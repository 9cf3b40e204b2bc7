//! What a roles soak runs and strikes: each role's command (a service, or
//! one run per due time), the crontab of `--crontab`, and the faults.

use std::fs;
use std::time::Duration;

use crate::faults::Fault;
use crate::Args;

/// Each role's command, by NELI_ROLE mod 4 (see `KINDS`): a plain service;
/// one with two children; one that leaves two daemons (setsid'd, one
/// ignoring SIGTERM) holding the role's lock, which only its shim can reap;
/// one that ignores SIGTERM (killed after --grace).
pub(super) const COMMAND: &str = r#"case $((NELI_ROLE % 4)) in
  1) sleep 100000 & sleep 100000 & wait ;;
  2) (setsid sh -c 'trap "" TERM; exec sleep 100000' &); setsid sleep 100000 & exec sleep 100000 ;;
  3) trap '' TERM; exec sleep 100000 ;;
  *) exec sleep 100000 ;;
esac"#;

/// What each role's command is, by role mod 4 (the summary's words).
pub const KINDS: [&str; 4] = ["plain", "children", "daemons", "ignores TERM"];

/// Each role's run under --schedule (`$0` the role's work directory, RUN
/// seconds long, as the single leader's: longer than the heartbeat
/// deadline, so a frozen owner's lease cuts it short), by NELI_ROLE mod 4
/// as `COMMAND`: a plain run; one with two children; one that leaves two
/// daemons (setsid'd, one ignoring SIGTERM) holding the role's lock, which
/// the shim must reap once the run ends, before the next; one that ignores
/// SIGTERM. It writes "start DUE ATTEMPT TOKEN MS NAME LINE EVERY" (LINE and
/// EVERY: `--crontab`'s version of the job's line and its period in ms) and,
/// if it gets to its end, "end DUE TOKEN NAME", then exits with `judge::role_code`: the
/// member's line saying a run's ending is on the topic names no role, and
/// its status tells which.
pub(super) const SCHEDULED: &str = r#"if [ "$NELI_FLAKY" = 1 ] && [ "$NELI_ATTEMPT" = 1 ]; then
  echo "fail $NELI_DUE $NELI_ATTEMPT $NELI_FENCING_TOKEN $(date +%s%3N) $NELI_NAME" >> "$0/runs"; exit 200
fi
echo "start $NELI_DUE $NELI_ATTEMPT $NELI_FENCING_TOKEN $(date +%s%3N) $NELI_NAME ${LINE:-0} ${EVERY:-0}" >> "$0/runs"
case $((NELI_ROLE % 4)) in
  1) sleep "$RUN" & sleep "$RUN" & wait ;;
  2) (setsid sh -c 'trap "" TERM; exec sleep 100000' &); setsid sleep 100000 & sleep "$RUN" ;;
  3) trap '' TERM; sleep "$RUN" ;;
  *) sleep "$RUN" ;;
esac
echo "end $NELI_DUE $NELI_FENCING_TOKEN $NELI_NAME" >> "$0/runs"
exit $((NELI_ROLE % 128))"#;

/// `--crontab`: a crontab of the first `jobs` of `roles` jobs in `dir`
/// (renamed over the file, as an editor does: a member never reads half of
/// one), job jNN role NN's
/// run on its schedule (`@every`, `missed=all`), told NELI_ROLE by the
/// line above it. Names sort as their roles do, so that members placing
/// them on a new topic put job jNN on partition NN, as the judge reads.
/// Odd jobs are flaky (`NELI_FLAKY=1`): each due time's first attempt
/// fails at once (`judge::FAILED`), and the job's `retries=1` runs it again
/// a quarter period later. Every third job (j % 3 == 2) runs for one and a
/// half periods with `overlap=replace`: each run is stopped at its next due
/// time, which runs in its place. `lines` holds each job's line version
/// (`Fault::Reschedule` bumps one): its period is `period(every, version)`,
/// and its runs say the version (`LINE=`) and the period (`EVERY=`).
pub(super) fn write_crontab(
    dir: &std::path::Path,
    (jobs, roles): (usize, usize),
    schedule: Option<(Duration, Duration)>,
    lines: &[u32],
) -> std::path::PathBuf {
    let (run, base) = schedule.expect("--crontab requires --schedule");
    let script = dir.join("scheduled.sh");
    fs::write(&script, SCHEDULED).expect("the runs' script");
    let guard = dir.join("guarded.sh");
    let width = (roles - 1).to_string().len();
    let mut text = String::from("# neli-soak --crontab: one job per role\n");
    for j in 0..jobs {
        let work = dir.join("roles").join(j.to_string());
        let line = lines.get(j).copied().unwrap_or(0);
        let every = period(base, line);
        let flaky = j % 2;
        let mut options = String::from("missed=all");
        if flaky == 1 {
            options += &format!(",retries=1,retry-delay={}ms", every.as_millis() / 4);
        }
        let mut runs = run.as_secs_f64();
        if j % 3 == 2 {
            options += ",overlap=replace";
            runs = every.as_secs_f64() * 1.5;
        }
        let ms = every.as_millis();
        text += &format!(
            "NELI_ROLE={j}\nNELI_FLAKY={flaky}\nRUN={runs:.1}\nLINE={line}\nEVERY={ms}\n\
             @every {ms}ms  j{j:0width$}[{options}]  {} {} sh -c '. {}' {}\n",
            guard.display(),
            work.display(),
            script.display(),
            work.display()
        );
    }
    let file = dir.join("fleet.crontab");
    install(&file, &text);
    file
}

/// `text` renamed over `file`, as an editor does: a member never reads half
/// of one.
pub(super) fn install(file: &std::path::Path, text: &str) {
    let new = file.with_extension("new");
    fs::write(&new, text).expect("the crontab");
    fs::rename(&new, file).expect("the crontab in place");
}

/// A job's period at line version `line`: the soak's period for even
/// versions, four fifths of it for odd ones (a grid from the epoch that
/// meets the other only every four periods).
pub fn period(every: Duration, line: u32) -> Duration {
    match line % 2 {
        0 => every,
        _ => every * 4 / 5,
    }
}

/// Refuses what a roles soak cannot do.
pub fn check(args: &Args, roles: usize) -> Result<(), String> {
    if roles < args.candidates {
        return Err(format!(
            "--roles {roles} needs at least as many roles as --candidates ({}): the soak tells a settled group \
             by every member holding its share",
            args.candidates
        ));
    }
    Ok(())
}

/// The faults of a roles soak: on members, on the broker (one of ours;
/// no restart of tansu's in-memory log), network cuts with namespaces, the
/// cluster's own life with --cluster.
pub fn faults(args: &Args, netns: bool, own_broker: bool) -> Vec<Fault> {
    let mut faults = vec![
        Fault::Kill9,
        Fault::Sigterm,
        Fault::SigstopCont,
        Fault::Join,
        Fault::Drain,
        Fault::ChildCrash,
        Fault::BrokenLogKill9,
        Fault::BrokenLogStop,
    ];
    // A role paused (`pause --role J`): a service's, whose command must not
    // start while paused (a schedule's due times would be missed).
    if !args.schedule && !args.crontab {
        faults.push(Fault::Pause);
    }
    // A crontab's own paths (issue 65): a job's holder cut off just before
    // its due time, and a job's line changed by a rolled-out reload.
    if args.crontab {
        faults.push(Fault::Reschedule);
        if netns {
            faults.push(Fault::CutBeforeDue);
        }
    }
    faults.extend(crate::environment_faults(args, netns, own_broker));
    faults
}

/// Why a fault of the single leader's soak is not one of the roles soak.
pub fn refused(name: &str) -> Option<&'static str> {
    match name {
        "unhealthy" => Some("a member of roles that fails its health check is drained: `drain`"),
        "undrain" => Some("it follows each drain once the group settled"),
        "sigterm-after-thaw" => Some("it times a single leader's handover after a thaw (sigstop-cont covers freezes)"),
        "none (finish)" => Some("a role's command is a service (--restart always)"),
        _ => None,
    }
}

/// Whether the fault strikes one member (a live one, chosen at random; for
/// a drain, one holding a role).
pub(super) fn strikes_a_member(fault: Fault) -> bool {
    matches!(
        fault,
        Fault::Kill9
            | Fault::Drain
            | Fault::Sigterm
            | Fault::SigstopCont
            | Fault::BrokenLogKill9
            | Fault::BrokenLogStop
            | Fault::NetCut
            | Fault::NetBlip
            | Fault::CutBeforeDue
            | Fault::CoordinatorCut
            | Fault::LeaderCut
    )
}

/// Whether the fault stops its member's neli-run: a leave or a crash.
pub(super) fn stops_its_member(fault: Fault) -> bool {
    matches!(fault, Fault::Kill9 | Fault::Sigterm | Fault::BrokenLogKill9)
}
