//! The console's timeline: an SVG the server draws, one row per role (or
//! crontab job), its leaderships as bars coloured by member and its runs
//! as marks under them (green ended 0, red failed, blue running, grey
//! no end: its member died with it), over the
//! last hour or day. A day of a job every minute is 1,440 runs a row: runs
//! are drawn per pixel column (the worst in it wins), so a row is at most
//! as many marks as the picture is wide, whatever the count.

use std::fmt::Write;

use super::page::{html, time};
use super::Shared;

/// The timeline's span, from the page's `range` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    Hour,
    Day,
}

impl Range {
    /// `day` is a day; anything else the default hour.
    pub fn parse(query: &str) -> Range {
        match query.split('&').any(|kv| kv == "range=day") {
            true => Range::Day,
            false => Range::Hour,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Range::Hour => "hour",
            Range::Day => "day",
        }
    }

    fn ms(self) -> u64 {
        match self {
            Range::Hour => 3_600_000,
            Range::Day => 86_400_000,
        }
    }

    /// Between two time marks on the axis.
    fn tick_ms(self) -> u64 {
        match self {
            Range::Hour => 600_000,
            Range::Day => 3 * 3_600_000,
        }
    }
}

/// The width of the row labels, and of the plot, in pixels.
const LABEL: u32 = 170;
const WIDTH: u32 = 900;
const ROW: u32 = 16;
const TOP: u32 = 18;

/// How a pixel column's runs went, the worst winning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mark {
    None,
    NoEnd,
    Ok,
    Running,
    Failed,
}

impl Mark {
    fn colour(self) -> &'static str {
        match self {
            Mark::None => "none",
            Mark::NoEnd => "#8c959f",
            Mark::Ok => "#2da44e",
            Mark::Running => "#0969da",
            Mark::Failed => "#cf222e",
        }
    }
}

/// A member's colour: a hue from its name, so each keeps its own.
fn hue(name: &str) -> u32 {
    name.bytes().fold(2166136261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619)) % 360
}

/// The timeline as SVG (inline in the page).
pub fn svg(shared: &Shared, range: Range, now: u64) -> String {
    let rows = row_names(shared);
    let height = TOP + ROW * u32::try_from(rows.len().max(1)).unwrap_or(u32::MAX / ROW - 1) + 4;
    let (from, span) = (now.saturating_sub(range.ms()), range.ms());
    let x = |ms: u64| -> u32 {
        let at = ms.clamp(from, now) - from;
        u32::try_from(u128::from(at) * u128::from(WIDTH) / u128::from(span)).unwrap_or(WIDTH)
    };
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" \
         viewBox=\"0 0 {w} {height}\" role=\"img\" aria-label=\"leaderships and runs per role over the last {}\">",
        range.name(),
        w = LABEL + WIDTH + 10,
    );
    // The axis: a mark every tick, labelled with its UTC time of day.
    let mut tick = (from / range.tick_ms() + 1) * range.tick_ms();
    while tick < now {
        let tx = LABEL + x(tick);
        let label = &time(tick)[11..16];
        let _ = write!(
            out,
            "<line x1=\"{tx}\" y1=\"{TOP}\" x2=\"{tx}\" y2=\"{height}\" stroke=\"#eee\"/>\
             <text x=\"{tx}\" y=\"12\" text-anchor=\"middle\" fill=\"#666\">{label}</text>"
        );
        tick += range.tick_ms();
    }
    let columns = all_marks(shared, rows.len(), from, now, &x);
    for (j, name) in rows.iter().enumerate() {
        let y = TOP + ROW * u32::try_from(j).unwrap_or(0);
        let _ = write!(out, "<text x=\"2\" y=\"{}\">{}</text>", y + 11, html(name));
        // Leaderships: a bar per leadership in the span.
        for lead in shared.leads.get(j).into_iter().flatten().filter(|l| l.to_ms >= from) {
            let (x0, x1) = (x(lead.from_ms), x(if lead.ended { lead.to_ms } else { lead.to_ms.max(now - 1) }));
            let _ = write!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"8\" fill=\"hsl({},55%,60%)\"><title>{} leads {}, token {}, \
                 {} to {}</title></rect>",
                LABEL + x0,
                y + 2,
                (x1 - x0).max(1),
                hue(&lead.name),
                html(&lead.name),
                html(name),
                lead.token,
                time(lead.from_ms),
                time(lead.to_ms)
            );
        }
        marks(&mut out, &columns[j], y + 11);
    }
    out.push_str("</svg>");
    out
}

/// The rows: each role's (a crontab's job's) name, or the single leader's.
fn row_names(shared: &Shared) -> Vec<String> {
    match shared.status["roles"].as_array() {
        Some(roles) => roles
            .iter()
            .map(|r| match r["job"].as_str() {
                Some(job) => job.to_string(),
                None => format!("role {}", r["role"]),
            })
            .collect(),
        None => vec!["leader".to_string()],
    }
}

/// Each row's runs in the span, as the worst mark of each pixel column
/// (one pass over the runs).
fn all_marks(shared: &Shared, rows: usize, from: u64, now: u64, x: &impl Fn(u64) -> u32) -> Vec<Vec<Mark>> {
    let mut columns = vec![vec![Mark::None; WIDTH as usize + 1]; rows];
    // A run with no end and a newer run on its row ended unseen (its
    // member died with it): a mark at its start only.
    let mut newest = vec![0u64; rows];
    for r in shared.store.runs.values().map(super::runs::Run::record) {
        if let Some(n) = usize::try_from(r.role).ok().and_then(|j| newest.get_mut(j)) {
            *n = (*n).max(r.start_ms);
        }
    }
    for run in shared.store.runs.values() {
        let r = run.record();
        let Some(j) = usize::try_from(r.role).ok().filter(|&j| j < rows) else { continue };
        let (end, mark) = match &run.end {
            None if newest[j] > r.start_ms => (r.start_ms, Mark::NoEnd),
            None => (now, Mark::Running),
            Some(end) if end.exit_code == Some(0) || end.unlead => (r.end_ms.unwrap_or(r.start_ms), Mark::Ok),
            Some(_) => (r.end_ms.unwrap_or(r.start_ms), Mark::Failed),
        };
        if end < from {
            continue;
        }
        let (x0, x1) = (x(r.start_ms) as usize, x(end) as usize);
        for column in &mut columns[j][x0.min(x1)..=x1.max(x0)] {
            *column = (*column).max(mark);
        }
    }
    columns
}

/// A row's marks, each stretch of one colour one rect.
fn marks(out: &mut String, columns: &[Mark], y: u32) {
    let mut start = 0;
    for i in 1..=columns.len() {
        if i < columns.len() && columns[i] == columns[start] {
            continue;
        }
        if columns[start] != Mark::None {
            let _ = write!(
                out,
                "<rect class=\"mark\" x=\"{}\" y=\"{y}\" width=\"{}\" height=\"4\" fill=\"{}\"/>",
                LABEL + u32::try_from(start).unwrap_or(0),
                i - start,
                columns[start].colour()
            );
        }
        start = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_an_hour_unless_a_day_is_asked() {
        assert_eq!(Range::parse("range=day"), Range::Day);
        assert_eq!(Range::parse("x=1&range=day"), Range::Day);
        assert_eq!(Range::parse("range=week"), Range::Hour);
        assert_eq!(Range::parse(""), Range::Hour);
    }

    #[test]
    fn a_stretch_of_one_mark_is_one_rect_and_none_is_no_rect() {
        let mut out = String::new();
        let mut columns = vec![Mark::None; 10];
        columns[2..5].fill(Mark::Ok);
        columns[5] = Mark::Failed;
        marks(&mut out, &columns, 0);
        assert_eq!(out.matches("<rect").count(), 2, "{out}");
        assert!(out.contains("width=\"3\" height=\"4\" fill=\"#2da44e\""), "{out}");
    }

    #[test]
    fn a_warm_commands_run_ended_by_its_unlead_signal_is_marked_ok() {
        let now = crate::clock::wall_ms();
        let mut store = super::super::runs::Store::default();
        let run = |id: &str, start: u64, how: &str| {
            format!(
                r#"{{"v":1,"run":"{id}","event":"end","group":"g","topic":"t","role":0,"member":"m","host":"h","pid":1,"token":1,"start_ms":{},"end_ms":{}{how}}}"#,
                now - start,
                now - start + 1000
            )
        };
        store.take(run("w-1", 5000, r#","warm":true,"unlead":true"#).as_bytes());
        store.take(run("w-2", 3000, r#","warm":true,"signal":9"#).as_bytes());
        let shared =
            Shared { group: "g".into(), status: serde_json::Value::Null, leads: Vec::new(), store, error: None };
        // A column a second, from 10 s ago.
        let marks = all_marks(&shared, 1, now - 10_000, now, &|ms| ((ms + 10_000 - now) / 1000) as u32);
        assert_eq!((marks[0][5], marks[0][7]), (Mark::Ok, Mark::Failed), "{:?}", &marks[0][..11]);
    }
}
