//! The console's page: HTML with its CSS inline, drawn from what `status
//! --json` says and the runs read, every string someone chose (member
//! names, hosts, jobs, output) escaped twice over: control characters as
//! `status` prints them (`printable`), then HTML's five.

use std::fmt::Write;

use serde_json::Value;

use super::runs::{Run, Store};
use super::timeline::{self, Range};
use super::Shared;
use crate::printable::printable;

/// How many of the newest runs the page lists.
const LISTED: usize = 50;

/// `s` safe inside HTML text or a quoted attribute (and SVG): control
/// characters escaped as `status` escapes them, then `& < > " '`.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in printable(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A run's output: each line escaped (`html`), its line breaks kept.
fn html_lines(s: &str) -> String {
    s.split('\n').map(html).collect::<Vec<_>>().join("\n")
}

/// A JSON value as text: a string as it is, null as "-".
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => html(s),
        other => html(&other.to_string()),
    }
}

/// A wall-clock time as RFC 3339 UTC, to the second.
pub fn time(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A duration as a person reads it: 850ms, 12.3s, 4m05s, 2h03m.
fn short(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1em 2em;color:#222}\
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}\
table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left;\
vertical-align:top}th{background:#f3f3f3}.ok{color:#1a7f37}.bad{color:#cf222e}.run{color:#0969da}\
.dim{color:#888}pre{background:#f6f8fa;padding:6px;max-height:20em;overflow:auto;white-space:pre-wrap}\
nav a{margin-right:1em}svg text{font:11px system-ui,sans-serif}";

/// The whole page: the head, and `main` (which the script replaces).
pub fn page(shared: &Shared, range: Range, now: u64) -> String {
    let group = html(&shared.group);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>neli-run console: {group}</title>\
         <style>{STYLE}</style></head><body><h1>neli-run console: group {group}</h1>\
         <nav><a href=\"?range=hour\">last hour</a><a href=\"?range=day\">last day</a></nav>\
         <main id=\"main\" data-range=\"{}\">{}</main><script src=\"console.js\"></script></body></html>\n",
        range.name(),
        main(shared, range, now)
    )
}

/// What the page shows, refreshed every few seconds.
pub fn main(shared: &Shared, range: Range, now: u64) -> String {
    let status = &shared.status;
    let mut out = String::with_capacity(64 * 1024);
    let fresh = status["fresh"].as_bool().unwrap_or(false);
    let _ = write!(
        out,
        "<p>topic {} &middot; {} &middot; as of {}</p>",
        text(&status["topic"]),
        if fresh { "<span class=\"ok\">led</span>" } else { "<span class=\"bad\">not (all) led</span>" },
        time(now)
    );
    if let Some(error) = &shared.error {
        let _ = write!(out, "<p class=\"bad\">{}</p>", html(error));
    }
    members(&mut out, status);
    roles(&mut out, status, &shared.store);
    let _ = write!(out, "<h2>Timeline, last {}</h2>", range.name());
    out += &timeline::svg(shared, range, now);
    runs(&mut out, &shared.store, now);
    out
}

/// The members: those that lead a role or say a crontab, and the standbys.
fn members(out: &mut String, status: &Value) {
    out.push_str(
        "<h2>Members</h2><table id=\"members\"><tr><th>member</th><th>host</th><th>pid</th><th>leads</th></tr>",
    );
    let mut row = |name: &Value, host: &Value, pid: &Value, leads: String| {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{leads}</td></tr>",
            text(name),
            text(host),
            text(pid)
        );
    };
    if let Some(leader) = status["leader"].as_object() {
        let token = leader.get("token").map_or("-".into(), text);
        row(&leader["name"], &leader["host"], &leader["pid"], format!("the command (token {token})"));
    }
    for m in status["members"].as_array().into_iter().flatten() {
        let leads: Vec<String> = m["leads"].as_array().into_iter().flatten().map(text).collect();
        let leads = if leads.is_empty() { "-".into() } else { format!("roles {}", leads.join(", ")) };
        row(&m["name"], &m["host"], &m["pid"], leads);
    }
    for s in status["standbys"].as_array().into_iter().flatten() {
        let healthy = s["healthy"].as_bool().unwrap_or(true);
        let what = match (s["drained"].as_bool().unwrap_or(false), healthy) {
            (true, _) => "standby (drained)",
            (false, false) => "standby (unhealthy)",
            (false, true) => "standby",
        };
        row(&s["name"], &s["host"], &s["pid"], what.into());
    }
    out.push_str("</table>");
}

/// Each role (or crontab job) and who holds it, its next due time and its
/// newest run.
fn roles(out: &mut String, status: &Value, store: &Store) {
    let Some(roles) = status["roles"].as_array() else { return };
    let crontab = roles.iter().any(|r| r["job"].is_string());
    let newest = newest_runs(store);
    out.push_str(if crontab { "<h2>Jobs</h2>" } else { "<h2>Roles</h2>" });
    out.push_str("<table id=\"roles\"><tr><th>role</th><th>job</th><th>held by</th><th>token</th><th>next due</th><th>last run</th></tr>");
    for r in roles {
        let role = r["role"].as_i64().unwrap_or(-1);
        let held = match (&r["leader"], r["fresh"].as_bool().unwrap_or(false)) {
            (Value::Object(l), true) => text(&l["name"]),
            (Value::Object(l), false) => {
                format!("<span class=\"bad\">none</span> <span class=\"dim\">(last {})</span>", text(&l["name"]))
            }
            _ => "<span class=\"bad\">none</span>".into(),
        };
        let paused = if r["paused"].as_bool().unwrap_or(false) { " <span class=\"bad\">paused</span>" } else { "" };
        let token = r["leader"].get("token").map_or("-".into(), text);
        let due = r["schedule"].get("next_due").map_or("-".into(), text);
        let last = newest.get(&(role, r["job"].as_str().map(String::from))).map_or("-".into(), |run| ended(run));
        let _ = write!(
            out,
            "<tr><td>{role}</td><td>{}</td><td>{held}{paused}</td><td>{token}</td><td>{due}</td><td>{last}</td></tr>",
            text(&r["job"])
        );
    }
    out.push_str("</table>");
}

/// The newest run of each role or job.
fn newest_runs(store: &Store) -> std::collections::HashMap<(i64, Option<String>), &Run> {
    let mut newest: std::collections::HashMap<(i64, Option<String>), &Run> = std::collections::HashMap::new();
    for run in store.runs.values() {
        let r = run.record();
        let seat = (i64::from(r.role), r.job.clone());
        if newest.get(&seat).is_none_or(|known| known.record().start_ms < r.start_ms) {
            newest.insert(seat, run);
        }
    }
    newest
}

/// How a run ended, as a short cell: its start and its end.
fn ended(run: &Run) -> String {
    let r = run.record();
    format!("{} {}", time(r.start_ms), outcome(run))
}

/// exit N, a signal, or running.
fn outcome(run: &Run) -> String {
    match &run.end {
        Some(end) => match (end.exit_code, end.signal) {
            (Some(0), _) => "<span class=\"ok\">exit 0</span>".into(),
            (Some(code), _) => format!("<span class=\"bad\">exit {code}</span>"),
            (None, Some(sig)) => format!("<span class=\"bad\">signal {sig}</span>"),
            // A `--warm` command told it no longer leads, running on.
            (None, None) if end.unlead => "<span class=\"ok\">unlead</span>".into(),
            (None, None) => "ended".into(),
        },
        None => "<span class=\"run\">running</span>".into(),
    }
}

/// The newest runs, newest first, each with its output when kept.
fn runs(out: &mut String, store: &Store, now: u64) {
    out.push_str("<h2>Recent runs</h2>");
    if let Some(note) = &store.note {
        let _ = write!(out, "<p class=\"dim\">{}</p>", html(note));
    }
    let mut newest: Vec<&Run> = store.runs.values().collect();
    let key = |run: &&Run| (run.record().start_ms, run.record().run.clone());
    newest.sort_by_key(|run| std::cmp::Reverse(key(run)));
    out.push_str(
        "<table id=\"runs\"><tr><th>started</th><th>role/job</th><th>member@host</th><th>token</th><th>due</th>\
         <th>ended</th><th>duration</th><th>output</th></tr>",
    );
    for run in newest.into_iter().take(LISTED) {
        let r = run.record();
        let seat = r.job.as_deref().map_or_else(|| format!("role {}", r.role), html);
        let duration = match (&run.end, r.duration_ms) {
            (Some(_), Some(ms)) => short(ms),
            (None, _) => format!("{} so far", short(now.saturating_sub(r.start_ms))),
            _ => "-".into(),
        };
        let output = run.output.as_deref().map_or(String::new(), |o| {
            format!("<details><summary>output</summary><pre>{}</pre></details>", html_lines(o))
        });
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{seat}</td><td>{}@{}</td><td>{}</td><td>{}</td><td>{}</td><td>{duration}</td><td>{output}</td></tr>",
            time(r.start_ms),
            html(&r.member),
            html(&r.host),
            r.token,
            r.due_ms.map_or("-".into(), time),
            outcome(run),
        );
    }
    out.push_str("</table>");
}

/// The script: fetches `main` again every few seconds while the page is
/// open (no external asset, no framework).
pub const SCRIPT: &str = "(function(){var m=document.getElementById('main');\
function tick(){fetch('main?range='+m.dataset.range,{cache:'no-store'}).then(function(r){\
if(r.ok)return r.text();throw new Error(r.status)}).then(function(t){m.innerHTML=t})\
.catch(function(){}).finally(function(){setTimeout(tick,3000)})}setTimeout(tick,3000)})();\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_markup_quotes_and_terminal_escapes() {
        assert_eq!(html("<script>alert('x')</script>"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
        assert_eq!(html("a&b \"c\""), "a&amp;b &quot;c&quot;");
        assert_eq!(html("evil\u{1b}[2J"), r"evil\u{1b}[2J");
        assert_eq!(html_lines("one\n<two>\u{7}"), "one\n&lt;two&gt;\\u{7}");
    }

    #[test]
    fn a_warm_commands_run_ended_by_its_unlead_signal_reads_unlead_not_a_failure() {
        let mut store = super::super::runs::Store::default();
        let end = r#"{"v":1,"run":"w-1","event":"end","group":"g","topic":"t","role":0,"member":"m","host":"h","pid":1,"token":1,"start_ms":1,"end_ms":2"#;
        store.take(format!(r#"{end},"warm":true,"unlead":true}}"#).as_bytes());
        store.take(format!(r#"{},"exit_code":0}}"#, end.replace("w-1", "w-2")).as_bytes());
        assert_eq!(outcome(&store.runs["w-1"]), "<span class=\"ok\">unlead</span>");
        assert_eq!(outcome(&store.runs["w-2"]), "<span class=\"ok\">exit 0</span>");
    }
}
