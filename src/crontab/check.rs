//! `neli-run cron check FILE`: reads a crontab as a member would and says
//! what it found (each job, its zone and its next due times) and what it
//! refused (FILE:LINE:COLUMN, on stderr, as compilers say it), before the
//! file goes to a fleet: as `crontab -T` and `nginx -t` do.

use std::io::Write;

use serde_json::json;

use crate::calendar::Zone;
use crate::cli::CronCheckArgs;
use crate::exit::{Failure, Kind};

/// Runs `neli-run cron check`: 0 when every line is fine, Usage when one
/// is refused or the file cannot be read.
pub fn check_main(args: CronCheckArgs) -> Result<u8, Failure> {
    let usage = |message: String| Failure::new(Kind::Usage, message);
    let zone: Zone = match &args.time_zone {
        Some(zone) => zone.parse().map_err(|e| usage(format!("--time-zone: {e}")))?,
        None => Zone::Local,
    };
    let path = args.file.display();
    // Read and refused as a member reads it (`super::read`), so that what
    // passes here runs there.
    let tab = super::read(&args.file, zone).map_err(usage)?;
    let now = match &args.from {
        None => crate::clock::wall_ms(),
        Some(from) => {
            let at = chrono::DateTime::parse_from_rfc3339(from)
                .map_err(|_| usage(format!("--from {from}: not an RFC 3339 time; e.g. 2027-03-28T00:00:00+01:00")))?;
            u64::try_from(at.timestamp_millis()).map_err(|_| {
                usage(format!("--from {from}: before 1970, where no due time is reckoned; give a later time"))
            })?
        }
    };
    let mut out = String::new();
    if args.json {
        let jobs: Vec<_> = tab.jobs.iter().map(|job| job_json(job, now, usize::from(args.next))).collect();
        let problems: Vec<_> = tab
            .problems
            .iter()
            .map(|p| json!({"line": p.line, "column": p.column, "error": p.error, "message": p.message}))
            .collect();
        let file = json!({"file": path.to_string(), "digest": tab.digest, "jobs": jobs, "problems": problems});
        out += &file.to_string();
        out.push('\n');
    } else {
        for job in &tab.jobs {
            out += &job_text(job, now, usize::from(args.next));
        }
        // What a member running this file says of it: `status` shows it.
        out +=
            &format!("{path}: digest {} (as a member running it says: `neli-run status` shows each's)\n", tab.digest);
        let errors = tab.problems.iter().filter(|p| p.error).count();
        let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        out += &format!("{path}: {}, {} refused\n", count(tab.jobs.len(), "job"), count(errors, "line"));
    }
    // The problems on stderr, where an editor or CI looks for FILE:LINE:COL,
    // and a file with no job, which a member refuses.
    let mut said = String::new();
    for problem in &tab.problems {
        said += &format!("{path}:{problem}\n");
    }
    let no_job = tab.jobs.is_empty();
    if no_job {
        said += &format!("{path}: error: no job to run: a member refuses a file without one (exit 2)\n");
    }
    // Written whole, waiting for a slow reader (a CI log, `| less`): the
    // best-effort writer of a member's log (crate::stderr) would drop what
    // a full pipe cannot take at once, and here nothing waits on us.
    write_all(&mut std::io::stderr().lock(), &said).map_err(|e| Failure::new(Kind::Io, format!("stderr: {e}")))?;
    write_all(&mut std::io::stdout().lock(), &out)
        .map_err(|e| Failure::new(Kind::Io, format!("cannot write to stdout: {e}")))?;
    Ok(if tab.has_errors() || no_job { Kind::Usage.code() } else { 0 })
}

/// Writes `text` whole to `to`; a reader gone (a closed pipe) is not an
/// error: nobody is left to tell.
fn write_all(to: &mut impl Write, text: &str) -> std::io::Result<()> {
    match to.write_all(text.as_bytes()).and_then(|()| to.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        done => done,
    }
}

/// The next `n` due times after `now`.
fn next(job: &super::Job, now: u64, n: usize) -> Vec<u64> {
    std::iter::successors(job.schedule.calendar.after(now), |&due| job.schedule.calendar.after(due)).take(n).collect()
}

/// A job as text: its name, line and time, then its next due times (in its
/// zone, or UTC for `@every`) and its command.
fn job_text(job: &super::Job, now: u64, n: usize) -> String {
    let zone = job.zone.unwrap_or(Zone::Named(chrono_tz::UTC));
    let mut out = format!("{}  (line {})  {}  {}\n", job.name, job.line, job.when, zone);
    let due: Vec<String> = next(job, now, n).into_iter().map(|ms| zone.show(ms)).collect();
    out += &format!("  next:    {}\n", due.join(", "));
    out += &format!("  command: {}\n", job.command);
    if let Some(notice) = &job.on_failure {
        out += &format!("  on failure: {notice}\n");
    }
    out
}

/// A job as JSON: as the text, with every setting.
fn job_json(job: &super::Job, now: u64, n: usize) -> serde_json::Value {
    let ms = |d: Option<std::time::Duration>| d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    json!({
        "name": job.name,
        "line": job.line,
        "when": job.when,
        "zone": job.zone.map(|z| z.to_string()),
        "next_ms": next(job, now, n),
        "command": job.command,
        "shell": job.shell,
        "env": job.env.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "missed": match job.schedule.missed {
            crate::leader::Missed::Skip => "skip",
            crate::leader::Missed::Once => "latest",
            crate::leader::Missed::All => "all",
        },
        "starting_deadline_ms": ms(job.schedule.starting_deadline),
        "max_runtime_ms": ms(job.max_runtime),
        "overlap": job.schedule.overlap.map(|o| format!("{o:?}").to_lowercase()),
        "retries": job.schedule.retry.map_or(0, |r| r.times),
        "retry_delay_ms": ms(job.schedule.retry.map(|r| r.delay)),
        "on_failure": job.on_failure,
    })
}
