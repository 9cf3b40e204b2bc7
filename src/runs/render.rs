//! `history`'s output: one line per run as text, or one JSON object.
//! Every string in a record is someone's choice (a member's name, a host,
//! a job): text escapes control characters in them (`printable`), JSON
//! escapes them as JSON does.

use super::history::{Filter, Run, State};
use super::RunRecord;
use crate::config::Target;
use crate::printable::printable;
use crate::status::JobNow;

/// The runs as a table, oldest first, with a header, or a line that says
/// no run matched; then, for `--job`, what the job's partition says now.
pub(super) fn text(target: &Target, filter: &Filter, runs: &[Run], job: Option<&JobNow>) -> String {
    let table = table(target, filter, runs);
    match job {
        Some(job) => format!("{table}\n{}", job.text),
        None => table,
    }
}

fn table(target: &Target, filter: &Filter, runs: &[Run]) -> String {
    if runs.is_empty() {
        let mut what = String::new();
        if let Some(role) = filter.role {
            what += &format!(" of role {role}");
        }
        if let Some(job) = &filter.job {
            what += &format!(" of job {}", printable(job));
        }
        if filter.since.is_some() {
            what += " since then";
        }
        return format!("no run{what} recorded in group {}", printable(&target.group));
    }
    let header = ["STARTED", "ROLE/JOB", "MEMBER@HOST", "TOKEN", "DUE", "ENDED", "DURATION"].map(String::from);
    let rows: Vec<[String; 7]> = std::iter::once(header).chain(runs.iter().map(row)).collect();
    let mut widths = [0usize; 7];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row.iter().zip(widths).map(|(cell, width)| format!("{cell:width$}")).collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect();
    lines.join("\n")
}

/// One run's cells.
fn row(run: &Run) -> [String; 7] {
    let r = &run.record;
    let seat = match (&r.job, r.roles) {
        (Some(job), _) => printable(job),
        (None, Some(_)) => format!("role {}", r.role),
        (None, None) => "leader".to_string(),
    };
    let attempt = r.attempt.filter(|&n| n > 1).map_or(String::new(), |n| format!(" (attempt {n})"));
    let ended = match run.state {
        State::Ended => how_ended(r),
        State::Running => "running".to_string(),
        State::NoEnd => "no end".to_string(),
    };
    let duration = match (run.state, r.duration_ms) {
        (State::Ended, Some(ms)) => short(ms),
        (State::Running, _) => format!("{} so far", short(crate::clock::wall_ms().saturating_sub(r.start_ms))),
        _ => "-".to_string(),
    };
    [
        time(r.start_ms),
        seat + &attempt,
        format!("{}@{}", printable(&r.member), printable(&r.host)),
        r.token.to_string(),
        r.due_ms.map_or_else(|| "-".to_string(), time),
        ended,
        duration,
    ]
}

/// How an ended run ended: `exit N`, the signal's name, or `unlead` (a
/// `--warm` command told it no longer leads, running on).
pub(super) fn how_ended(r: &RunRecord) -> String {
    match (r.exit_code, r.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => signal_name(sig),
        (None, None) if r.unlead => "unlead".to_string(),
        (None, None) => "ended".to_string(),
    }
}

/// A wall-clock time as RFC 3339 UTC, to the second.
pub(super) fn time(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A duration as a person reads it: 850ms, 12.3s, 4m05s, 2h03m.
pub(super) fn short(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// SIGKILL, or "signal N" for a number that names none.
pub(super) fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}

/// The runs as one JSON object: the group, its topics, and each run's
/// record with its state ("ended", "running" or "no_end"); for `--job`,
/// the job's partition's keys too (`JobNow::json`).
pub(super) fn json(target: &Target, runs: &[Run], job: Option<&JobNow>) -> String {
    let runs: Vec<serde_json::Value> = runs
        .iter()
        .map(|run| {
            let mut value = serde_json::to_value(&run.record).unwrap_or_default();
            if let Some(object) = value.as_object_mut() {
                object.remove("event");
                object.remove("v");
                // The output is `logs`'s to print: a line per run here.
                object.remove("output");
                object.remove("output_base64");
                let state = match run.state {
                    State::Ended => "ended",
                    State::Running => "running",
                    State::NoEnd => "no_end",
                };
                object.insert("state".into(), state.into());
            }
            value
        })
        .collect();
    let mut out = serde_json::json!({
        "group": target.group,
        "topic": target.topic,
        "runs_topic": super::topic_of(&target.topic),
        "runs": runs,
    });
    if let (Some(out), Some(serde_json::Value::Object(job))) = (out.as_object_mut(), job.map(|j| &j.json)) {
        out.extend(job.clone());
    }
    out.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_reads_them() {
        assert_eq!(short(850), "850ms");
        assert_eq!(short(12_345), "12.3s");
        assert_eq!(short(245_000), "4m05s");
        assert_eq!(short(7_380_000), "2h03m");
    }

    #[test]
    fn a_signal_is_named() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(99), "signal 99");
    }
}
