//! `status`'s answer: a `View` as text for people (every string read from
//! the topic escaped, [`printable`]) or as JSON (`--json`).

use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use super::view::View;
use crate::clock::wall_ms;
use crate::config::Target;
use crate::kafka::heartbeat::{Heartbeat, WireAttempt, WirePause};
use crate::printable::printable;

/// `status --json`'s format (docs/operations.md, "Who leads?"): raised when a key
/// changes meaning or goes away; new keys may appear without it.
const JSON_VERSION: u32 = 1;

fn ago(now_ms: u64, then_ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(now_ms.saturating_sub(then_ms))).to_string()
}

fn rfc3339(ms: u64) -> String {
    written(ms, |t| humantime::format_rfc3339_seconds(t).to_string())
}

/// As [`rfc3339`], to the millisecond: when a run started and ended.
pub(super) fn rfc3339_ms(ms: u64) -> String {
    written(ms, |t| humantime::format_rfc3339_millis(t).to_string())
}

/// A record's time as `format` writes it. The time is the writer's word:
/// one past what SystemTime holds must not panic here.
fn written(ms: u64, format: impl Fn(std::time::SystemTime) -> String) -> String {
    match UNIX_EPOCH.checked_add(Duration::from_millis(ms)).filter(|_| ms < 253_402_300_800_000) {
        Some(t) => format(t),
        None => format!("{ms} ms after the epoch"),
    }
}

pub(super) fn render(target: &Target, view: &View, json_out: bool) -> String {
    let now = wall_ms();
    let fresh = view.fresh_leader(now);
    if json_out {
        let leader = view.leader.as_ref().map(|hb| {
            let mut leader = leader_json(hb, now);
            leader["withdrawn_age_ms"] = json!(view.withdrawn_ms.map(|ms| now.saturating_sub(ms)));
            leader["unhealthy"] = json!(view.unhealthy);
            leader["timing"] = json!(hb.timing);
            leader
        });
        let schedule = schedule_json(view, fresh);
        let last_run = view.job.as_ref().map(|job| {
            json!({
                "due": job.due_ms.map(rfc3339),
                "wave": rfc3339(job.wave_ms),
                "attempt": job.attempt,
                "token": job.token,
                "name": job.name,
                "host": job.host,
                "status": job.code,
                "state": run_state(job, fresh),
            })
        });
        let paused = view.paused().map(|p| {
            json!({
                "since": rfc3339(p.at_ms),
                "by": p.by,
                "asker": p.by.describe(),
                "stop": p.stop,
                "offset": p.offset,
                "leader_command_running": fresh.and_then(|hb| hb.pause.as_ref()).map(|n| n.running),
            })
        });
        return json!({
            "version": JSON_VERSION,
            "group": target.group,
            "topic": target.topic,
            "fresh": fresh.is_some(),
            "leader": leader,
            "last_run": last_run,
            "schedule": schedule,
            "paused": paused,
            "hot_standbys": view.hot,
            "standbys": view.standbys(now).iter().map(|c| json!({
                "name": c.name,
                "host": c.host,
                "pid": c.pid,
                "priority": c.priority,
                "never_lead": c.never_lead,
                "healthy": !c.unhealthy,
                "drained": c.drained,
                "hot": view.hot(&c.name),
                "since": rfc3339(c.since_ms),
                "last_seen_ms": now.saturating_sub(c.at_ms),
            })).collect::<Vec<_>>(),
        })
        .to_string();
    }
    let paused = view.paused().map_or(String::new(), |p| pause_line(p, fresh, now, "`neli-run resume`"));
    let standbys = standby_lines(view, now);
    if view.scheduled() {
        return leadership(target, view, fresh, now)
            + &paused
            + &schedule_lines(view, fresh, now, usize::MAX, view.next_ms)
            + &standbys;
    }
    let last_run = view.job.as_ref().map_or(String::new(), |job| run_line(job, fresh, now));
    leadership(target, view, fresh, now) + &paused + &last_run + &standbys
}

/// A leader's record as `status --json` names it: who, its token, since
/// when, and how fresh.
fn leader_json(hb: &Heartbeat, now: u64) -> serde_json::Value {
    json!({
        "name": hb.name,
        "host": hb.host,
        "pid": hb.pid,
        "token": hb.token,
        "leader_since": hb.since_ms.map(rfc3339),
        "heartbeat_age_ms": now.saturating_sub(hb.at_ms),
        "heartbeat_deadline_ms": hb.deadline_ms,
    })
}

/// A group of roles (`--roles`): who leads each role, one line each, then
/// the members without a role; `views[j]` is role j's partition.
pub(super) fn render_roles(target: &Target, views: &[View], partitions: Option<u32>, json_out: bool) -> String {
    let now = wall_ms();
    let agreement = super::agree::Agreement::of(views, partitions, now);
    fn role(now: u64, (j, view): (usize, &View)) -> (usize, Option<&Heartbeat>, Option<&Heartbeat>) {
        let fresh = view.fresh_leader(now);
        (j, fresh, view.leader.as_ref().filter(|_| fresh.is_none()))
    }
    let role = |jv| role(now, jv);
    if json_out {
        let roles: Vec<_> = views
            .iter()
            .enumerate()
            .map(role)
            .map(|(j, fresh, stale)| {
                let hb = fresh.or(stale);
                let (state, has_job) = agreement.job_json(views, j, now);
                let mut schedule = schedule_json(&views[j], fresh);
                if let Some(planned) = schedule.as_mut().filter(|_| agreement.unplanned(views, j, now)) {
                    (planned["next_due"], planned["next_retry"]) = (json!(null), json!(null));
                }
                json!({
                    "role": j,
                    "job": views[j].placed,
                    "fresh": fresh.is_some(),
                    "runs": agreement.runs(views, j, now),
                    "state": state,
                    "has_job": has_job,
                    "leader": hb.map(|hb| leader_json(hb, now)),
                    "schedule": schedule,
                    "paused": views[j].paused().is_some(),
                })
            })
            .collect();
        let control = views.first();
        let standbys = control.map(|v| v.standbys(now)).unwrap_or_default();
        let (members, disagree) = agreement.json(control.and_then(|v| v.hot.as_ref()));
        return json!({
            "version": JSON_VERSION,
            "group": target.group,
            "topic": target.topic,
            "partitions": partitions,
            "fresh": agreement.all_run(views, now),
            "roles": roles,
            "members": members,
            "roles_disagree": disagree,
            "crontab_disagree": agreement.crontabs_disagree(),
            "hot_standbys": control.and_then(|v| v.hot.as_ref()),
            "standbys": standbys.iter().map(|c| json!({
                "name": c.name,
                "host": c.host,
                "pid": c.pid,
                "healthy": !c.unhealthy,
                "drained": c.drained,
                "hot": control.and_then(|v| v.hot(&c.name)),
                "since": rfc3339(c.since_ms),
                "last_seen_ms": now.saturating_sub(c.at_ms),
            })).collect::<Vec<_>>(),
        })
        .to_string();
    }
    let led = (0..views.len()).filter(|&j| agreement.runs(views, j, now)).count();
    let mut out = format!(
        "group {} (topic {}): {led} of {} roles led",
        printable(&target.group),
        printable(&target.topic),
        views.len()
    );
    match agreement.removed(views, now) {
        0 => {}
        n => out += &format!(" ({n} removed from every member's crontab)"),
    }
    for (j, fresh, stale) in views.iter().enumerate().map(role) {
        // A crontab's partition is named by its job.
        let what =
            views[j].placed.as_ref().map_or(format!("role {j}"), |job| format!("job {} (role {j})", printable(job)));
        out += &match (fresh, stale) {
            (Some(hb), _) => format!(
                "
  {what}: {} (host {}, pid {}), token {}{}",
                printable(&hb.name),
                printable(&hb.host),
                hb.pid,
                hb.token.unwrap_or_default(),
                hb.since_ms.map_or(String::new(), |ms| format!(", since {} ({} ago)", rfc3339(ms), ago(now, ms))),
            ),
            (None, Some(hb)) => format!(
                "
  {what}: no leader (last: {} (host {}), heard {} ago)",
                printable(&hb.name),
                printable(&hb.host),
                ago(now, hb.at_ms)
            ),
            (None, None) => format!("\n  {what}: no leader (none heard yet)"),
        };
        // A role paused (`pause --role J`), or a crontab's job (`cron pause JOB`).
        if let Some(pause) = views[j].paused() {
            let resume = match &views[j].placed {
                Some(job) => format!("`neli-run cron resume {}`", printable(job)),
                None => format!("`neli-run resume --role {j}`"),
            };
            out += &pause_line(pause, fresh, now, &resume).replace("\n  ", "\n    ");
        }
        // A role on a schedule: its next due time and newest run, under it
        // (`--json` has its retained runs); a crontab's job that does not
        // run, or was removed, has no next due time.
        let next = views[j].next_ms.filter(|_| !agreement.unplanned(views, j, now));
        out += &agreement.job_line(views, j, now);
        out += &schedule_lines(&views[j], fresh, now, 1, next).replace("\n  ", "\n    ");
    }
    out += &agreement.lines();
    out += &agreement.crontab_lines();
    out + &views.first().map_or(String::new(), |control| no_role_lines(control, now))
}

/// `history --job JOB`'s words on the job's partition `partition`: its
/// owner now, its pause, and the due time it runs next (a due time with no
/// run yet, or a retry's), which the runs topic cannot know.
pub(super) fn job(job: &str, partition: i32, view: &View) -> super::JobNow {
    let now = wall_ms();
    let fresh = view.fresh_leader(now);
    let retry = retried(view).map(|(due, attempt)| json!({ "due": rfc3339(due), "attempt": attempt }));
    let json = json!({
        "job": job,
        "partition": partition,
        "owner": fresh.map(|hb| leader_json(hb, now)),
        "paused": view.paused().is_some(),
        "next_due": view.next_ms.map(rfc3339),
        "next_retry": retry,
    });
    let owner = fresh.map_or("no owner now".to_string(), |hb| {
        format!(
            "owned by {} (host {}, pid {}), token {}",
            printable(&hb.name),
            printable(&hb.host),
            hb.pid,
            hb.token.unwrap_or_default()
        )
    });
    let resume = format!("`neli-run cron resume {}`", printable(job));
    let paused = view.paused().map_or(String::new(), |p| pause_line(p, fresh, now, &resume));
    let text = format!("job {} (role {partition}): {owner}", printable(job))
        + &paused
        + &schedule_lines(view, fresh, now, 0, view.next_ms);
    super::JobNow { text, json, owner_token: fresh.and_then(|hb| hb.token) }
}

/// The pause line: since when, by whom, with --stop whether the leader's
/// command is gone yet, and the command (`resume`) that ends it.
fn pause_line(pause: &WirePause, fresh: Option<&Heartbeat>, now: u64, resume: &str) -> String {
    let since = format!("{} ({} ago)", rfc3339(pause.at_ms), ago(now, pause.at_ms));
    let command = match (pause.stop, fresh.and_then(|hb| hb.pause.as_ref()).map(|n| n.running)) {
        (_, None) => "",
        (true, Some(true)) => ": the leader's command is stopping (--stop)",
        (true, Some(false)) => ": the leader's command is stopped (--stop)",
        (false, Some(true)) => ": the leader's command runs on until it ends, and does not start again",
        (false, Some(false)) => ": the leader does not start its command",
    };
    format!("\n  paused since {since} by {}{command}; {resume} ends it", pause.by.describe())
}

/// The live members besides the leader, a line each: who may lead next
/// (the highest priority first), who may not while its health check fails,
/// and who only watches (--never-lead).
fn standby_lines(view: &View, now: u64) -> String {
    let mut out = hot_line(view);
    for c in view.standbys(now) {
        let what = match (c.never_lead, c.unhealthy) {
            (true, _) => "watcher".to_string(),
            (false, _) if c.drained => {
                format!("standby, priority {}, drained (`neli-run undrain` brings it back)", c.priority)
            }
            (false, false) => format!("standby, priority {}", c.priority),
            (false, true) => {
                format!("standby, priority {}, unhealthy (--health-cmd fails: it may not lead)", c.priority)
            }
        };
        out += &format!(
            "\n  {what}: {n} (host {h}, pid {p}) since {s} ({sa} ago), last seen {a} ago{hot}",
            hot = if c.never_lead { "" } else { hot_word(view, &c.name) },
            n = printable(&c.name),
            h = printable(&c.host),
            p = c.pid,
            s = rfc3339(c.since_ms),
            sa = ago(now, c.since_ms),
            a = ago(now, c.at_ms),
        );
    }
    out
}

/// A group of roles' members without one, as the control partition's
/// records (`control`) say them, after the hot standbys its owner names.
fn no_role_lines(control: &View, now: u64) -> String {
    let mut out = hot_line(control);
    for c in control.standbys(now) {
        out += &format!(
            "\n  no role: {} (host {}, pid {}){}, last seen {} ago{}",
            printable(&c.name),
            printable(&c.host),
            c.pid,
            match (c.drained, c.unhealthy) {
                (true, _) => ", drained (`neli-run undrain` brings it back)",
                (false, true) => ", unhealthy (--health-cmd fails: it takes no role)",
                (false, false) => "",
            },
            ago(now, c.at_ms),
            hot_word(control, &c.name),
        );
    }
    out
}

/// The hot standbys the control partition's owner names (docs/hot-set.md),
/// if its records name them.
fn hot_line(view: &View) -> String {
    let Some(list) = &view.hot else { return String::new() };
    let names: Vec<String> = list.names.iter().map(|n| printable(n)).collect();
    let names = if names.is_empty() { "none".to_string() } else { names.join(", ") };
    format!("\n  hot standbys: {names} (--hot-standbys {})", list.k)
}

/// A member without a seat, hot (named in the list) or cold, once a list
/// is known.
fn hot_word(view: &View, name: &str) -> &'static str {
    match view.hot(name) {
        Some(true) => ", hot",
        Some(false) => ", cold (not among the hot standbys)",
        None => "",
    }
}

/// The last line of a command run once per wave, or of a service (whose
/// run is a wave of one that never ends): what it does now, in the words
/// of a service while it runs; attempts only once it ended or was cut
/// short.
fn run_line(job: &WireAttempt, fresh: Option<&Heartbeat>, now: u64) -> String {
    let by = format!("by {} (host {}), token {}", printable(&job.name), printable(&job.host), job.token);
    let retried = match job.attempt {
        1 => String::new(),
        a => format!(", attempt {a} (earlier attempts of the run started {} were cut short)", rfc3339(job.wave_ms)),
    };
    match (job.code, run_state(job, fresh)) {
        (Some(code), _) => {
            format!("\n  last run: exited {code}, started {}, {by}{retried}", rfc3339(job.wave_ms))
        }
        (None, "running") => {
            // This attempt's start: the wave's for a first attempt, else
            // its leader's (who started it on becoming leader).
            let start = match job.attempt {
                1 => Some(job.wave_ms),
                _ => fresh.and_then(|hb| hb.since_ms),
            };
            let since = start.map_or(String::new(), |ms| format!(" since {} ({} ago)", rfc3339(ms), ago(now, ms)));
            format!("\n  command running{since}, {by}")
        }
        (None, _) if fresh.is_some_and(|hb| hb.pause.as_ref().is_some_and(|p| p.paused && !p.running)) => {
            format!(
                "\n  last run: stopped by the pause (it runs again on resume), started {}, {by}",
                rfc3339(job.wave_ms)
            )
        }
        (None, _) => format!(
            "\n  last run: cut short (its leader crashed, was fenced or stopped: the next leader runs it again), \
             started {}, {by}{retried}",
            rfc3339(job.wave_ms)
        ),
    }
}

/// The text's first lines: who leads, or led last.
pub(super) fn leadership(target: &Target, view: &View, fresh: Option<&Heartbeat>, now: u64) -> String {
    let group = printable(&target.group);
    let health = match (view.unhealthy, fresh) {
        (false, _) => "",
        (true, Some(_)) => "\n  its health check fails (--health-cmd): it is handing over",
        (true, None) => "\n  it stood aside: its health check fails (--health-cmd)",
    };
    let lines = match (fresh, &view.leader) {
        (Some(hb), _) => format!(
            "group {group}: leader {n} (host {h}, pid {p}), token {t}\n  leader since {s} ({sa} ago)\n  last heartbeat {a} ago (deadline {d})",
            n = printable(&hb.name),
            h = printable(&hb.host),
            p = hb.pid,
            t = hb.token.unwrap_or_default(),
            s = hb.since_ms.map_or("?".into(), rfc3339),
            sa = hb.since_ms.map_or("?".into(), |s| ago(now, s)),
            a = ago(now, hb.at_ms),
            d = humantime::format_duration(Duration::from_millis(hb.deadline_ms)),
        ),
        (None, Some(hb)) => format!(
            "group {group}: no fresh leader (last: {n}, token {t}, {a} ago)",
            n = printable(&hb.name),
            t = hb.token.unwrap_or_default(),
            a = match view.withdrawn_ms {
                Some(ms) => format!("stopped leading {}", ago(now, ms)),
                None => format!("last heartbeat {}", ago(now, hb.at_ms)),
            },
        ),
        (None, None) => {
            format!("group {group}: no leader in the retained heartbeats of {}", printable(&target.topic))
        }
    };
    lines + health
}

/// A schedule in JSON (None without one): when it is next due, and its
/// newest runs.
fn schedule_json(view: &View, fresh: Option<&Heartbeat>) -> Option<serde_json::Value> {
    view.scheduled().then(|| {
        let runs: Vec<_> = view
            .runs
            .iter()
            .map(|run| {
                json!({
                    "due": run.due_ms.map(rfc3339),
                    "started": rfc3339_ms(run.wave_ms),
                    "ended": run.ended_ms.map(rfc3339_ms),
                    "status": run.code,
                    "state": run_state(run, fresh),
                    "attempt": run.attempt,
                    "token": run.token,
                    "name": run.name,
                    "host": run.host,
                })
            })
            .collect();
        let retry = retried(view).map(|(due, attempt)| json!({ "due": rfc3339(due), "attempt": attempt }));
        json!({ "next_due": view.next_ms.map(rfc3339), "next_retry": retry, "runs": runs })
    })
}

/// The due time and attempt number of the retry that runs next, if the
/// next run is one: the newest run's due time, as its next attempt.
fn retried(view: &View) -> Option<(u64, u32)> {
    let newest = view.runs.last().filter(|_| view.next_retry)?;
    Some((newest.due_ms?, newest.attempt + 1))
}

/// A schedule's lines: when it is `next` due (the view's, unless it is
/// not to be shown), and its `newest` runs.
fn schedule_lines(view: &View, fresh: Option<&Heartbeat>, now: u64, newest: usize, next: Option<u64>) -> String {
    let retry = retried(view).filter(|_| next.is_some());
    let mut out = match (next, retry) {
        (Some(next), Some((due, attempt))) => format!(
            "\n  next run: attempt {attempt} of the run due {}, {}",
            rfc3339(due),
            match next >= now {
                true => format!("at {} (in {})", rfc3339(next), ago(next, now)),
                false => format!("overdue since {} ({} ago)", rfc3339(next), ago(now, next)),
            }
        ),
        (Some(next), None) if next >= now => format!("\n  next run due {} (in {})", rfc3339(next), ago(next, now)),
        // The owner names a due time next until its run ends: not overdue.
        (Some(next), None) if running_due(view, fresh) == Some(next) => {
            format!("\n  next run: after the one due {}, running now", rfc3339(next))
        }
        (Some(next), None) => format!("\n  next run was due {} ({} ago)", rfc3339(next), ago(now, next)),
        (None, _) => String::new(),
    };
    let runs = &view.runs[view.runs.len().saturating_sub(newest)..];
    match runs.len() {
        0 => {}
        1 if newest == 1 => out += "\n  last run:",
        _ => out += "\n  runs (oldest first):",
    }
    for run in runs {
        out += &format!(
            "\n    due {d}: started {s}, {e}, by {n} (host {h}), token {t}{a}",
            d = run.due_ms.map_or("?".into(), rfc3339),
            s = rfc3339_ms(run.wave_ms),
            e = match (run.code, run.ended_ms) {
                (Some(code), Some(ended)) => format!("ended {} with status {code}", rfc3339_ms(ended)),
                (Some(code), None) => format!("exited {code}"),
                (None, _) => run_state(run, fresh).replace('-', " "),
            },
            n = printable(&run.name),
            h = printable(&run.host),
            t = run.token,
            a = if run.attempt > 1 { format!(", attempt {}", run.attempt) } else { String::new() },
        );
    }
    out
}

/// Where a wave's run stands: "exited", "running" (its leader leads, fresh,
/// its command runs, and it is that leader's newest run) or "cut-short"
/// (its leader crashed, was fenced or stopped, or `pause --stop` stopped
/// it: it runs again, unless a later due time came meanwhile and ran in
/// its place under the same token, findings C-5).
/// The due time of the newest run, if it is running.
fn running_due(view: &View, fresh: Option<&Heartbeat>) -> Option<u64> {
    view.runs.last().filter(|run| run_state(run, fresh) == "running")?.due_ms
}

fn run_state(job: &WireAttempt, fresh: Option<&Heartbeat>) -> &'static str {
    let newest = |hb: &Heartbeat| {
        hb.attempt.as_ref().is_none_or(|n| (n.wave_ms, n.attempt, n.due_ms) == (job.wave_ms, job.attempt, job.due_ms))
    };
    let runs =
        |hb: &Heartbeat| hb.token == Some(job.token) && newest(hb) && hb.pause.as_ref().is_none_or(|p| p.running);
    match (job.code, fresh) {
        (Some(_), _) => "exited",
        (None, Some(hb)) if runs(hb) => "running",
        (None, _) => "cut-short",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::heartbeat::{Content, Member, WireStance};
    use crate::kafka::yield_request::PauseRequest;
    use crate::leader::{Asker, Pause, PauseNote, Record, Stance};
    use crate::status::view::tests::hb;

    #[test]
    fn a_leader_whose_health_check_fails_is_shown_handing_over_then_standing_aside() {
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(["neli-run", "-g", "g", "--", "true"]);
        let target = crate::config::Config::from_args(cli.expect("arguments").run, None).expect("valid").kafka;
        let now = wall_ms();
        let mut v = View::default();
        let a = hb("a", Some(1), now - 100);
        v.add(a.clone());
        v.add(hb("b", None, now - 90));
        assert!(!leadership(&target, &v, v.fresh_leader(now), now).contains("health"));
        let mut failing = Heartbeat { unhealthy: true, ..a.clone() };
        failing.at_ms = now - 50;
        v.add(failing.clone());
        let text = leadership(&target, &v, v.fresh_leader(now), now);
        assert!(
            text.contains("leader a") && text.contains("health check fails (--health-cmd): it is handing over"),
            "{text}"
        );
        (failing.token, failing.stance, failing.at_ms) = (None, Some(WireStance::Released), now - 10);
        v.add(failing);
        let text = leadership(&target, &v, v.fresh_leader(now), now);
        assert!(text.contains("no fresh leader") && text.contains("it stood aside: its health check fails"), "{text}");
        v.add(hb("b", Some(9), now));
        assert!(!leadership(&target, &v, v.fresh_leader(now), now).contains("health"), "a new leader, healthy");
    }

    /// Leader a's record carrying `pause` (its command `running` or not).
    fn leading(pause: Option<Pause>, running: bool, at_ms: u64) -> Vec<u8> {
        let note = pause.map(|request| PauseNote { request, running });
        let record = Record { pause: note, ..Record::saying(1, Stance::Leading { token: 1 }) };
        let content = Content { record, since_ms: Some(at_ms), deadline_ms: 3000 };
        Heartbeat::new(&Member::this_process("a".into()), 1, crate::clock::BootTime::from_nanos(1), at_ms, content)
            .encode()
    }

    fn target() -> Target {
        let (brokers, group, topic) = ("b:9092".into(), "g".into(), "g.neli".into());
        Target { brokers, group, topic, properties: Vec::new(), origins: Vec::new() }
    }

    #[test]
    fn the_newest_request_read_or_carried_is_the_pause_shown_with_who_asked() {
        let now = wall_ms();
        let mut v = View::default();
        let mut request = PauseRequest::new(true, true);
        request.by =
            Asker { user: Some("al\u{1b}ice".into()), uid: Some(7), host: Some("h".into()), ..Asker::default() };
        v.read(Some(&request.encode()), 4);
        assert_eq!(v.paused().map(|p| (p.offset, p.stop)), Some((4, true)));
        // The leader still stops its command, then says it is gone.
        let pause = PauseRequest::decode(&request.encode()).unwrap().at(4);
        v.read(Some(&leading(Some(pause.clone()), true, now)), 5);
        let text = render(&target(), &v, false);
        assert!(text.contains(r"by user al\u{1b}ice (uid 7) on host h: the leader's command is stopping"), "{text}");
        v.read(Some(&leading(Some(pause), false, now)), 6);
        let text = render(&target(), &v, false);
        assert!(text.contains("the leader's command is stopped (--stop)"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&render(&target(), &v, true)).unwrap();
        assert_eq!(json["paused"]["stop"], true);
        assert_eq!(json["paused"]["by"]["uid"], 7);
        assert_eq!(json["paused"]["leader_command_running"], false);
        // A record cannot name a request at or after its own offset.
        let forged = Pause { offset: 9, paused: false, stop: false, at_ms: now, by: Asker::default() };
        v.read(Some(&leading(Some(forged), true, now)), 7);
        assert!(v.paused().is_some(), "a forged resume is not read");
        // A resume, carried by a later record, ends it.
        v.read(Some(&PauseRequest::new(false, false).encode()), 8);
        assert!(v.paused().is_none());
        assert!(!render(&target(), &v, false).contains("paused"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&render(&target(), &v, true)).unwrap()["paused"],
            serde_json::Value::Null
        );
    }

    /// The first attempt of the run due at `due`, by `a` under token 1,
    /// with no end.
    fn run_due(due: u64) -> WireAttempt {
        WireAttempt {
            wave_ms: due,
            wave_token: Some(1),
            attempt: 1,
            token: 1,
            code: None,
            name: "a".into(),
            host: "h".into(),
            due_ms: Some(due),
            ended_ms: None,
            line: None,
        }
    }

    #[test]
    fn a_retry_waiting_is_shown_as_its_due_times_next_attempt_and_not_as_a_due_time() {
        let now = wall_ms();
        let (due, retry_at) = (now - 60_000, now + 8_000);
        let failed = WireAttempt { code: Some(1), ended_ms: Some(due + 10), ..run_due(due) };
        let record = |next_retry: bool| Heartbeat {
            attempt: Some(failed.clone()),
            next_ms: Some(retry_at),
            next_retry,
            ..hb("a", Some(1), now - 100)
        };
        let mut v = View::default();
        v.add(record(true));
        let text = schedule_lines(&v, None, now, 1, v.next_ms);
        assert!(
            text.contains(&format!("next run: attempt 2 of the run due {}, at {}", rfc3339(due), rfc3339(retry_at))),
            "{text}"
        );
        assert!(!text.contains("next run due"), "{text}");
        let json = schedule_json(&v, None).expect("a schedule");
        assert_eq!(json["next_retry"], json!({ "due": rfc3339(due), "attempt": 2 }), "{json}");
        assert_eq!(json["next_due"], json!(rfc3339(retry_at)), "{json}");
        // Once a record plans a due time of the schedule, that is shown.
        v.add(record(false));
        let text = schedule_lines(&v, None, now, 1, v.next_ms);
        assert!(text.contains(&format!("next run due {}", rfc3339(retry_at))), "{text}");
        assert_eq!(schedule_json(&v, None).expect("a schedule")["next_retry"], serde_json::Value::Null);
    }

    #[test]
    fn a_run_stopped_by_a_pause_and_passed_over_by_a_later_due_time_is_cut_short_not_running() {
        // C-5: `cron pause --stop` stopped the run due at `due`; on resume
        // its owner ran the later due time under the same token.
        let now = wall_ms();
        let (stopped, later) = (run_due(now - 20_000), run_due(now - 2_000));
        let leader = Heartbeat { attempt: Some(later.clone()), ..hb("a", Some(1), now - 100) };
        assert_eq!(run_state(&stopped, Some(&leader)), "cut-short");
        assert_eq!(run_state(&later, Some(&leader)), "running");
        let mut v = View::default();
        v.add(Heartbeat { attempt: Some(stopped.clone()), ..hb("a", Some(1), now - 15_000) });
        v.add(leader.clone());
        let states: Vec<_> = schedule_json(&v, Some(&leader)).expect("a schedule")["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r["state"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(states, ["cut-short", "running"]);
    }

    #[test]
    fn a_due_time_whose_run_is_running_is_not_shown_overdue() {
        // The owner names a due time next until its run ends: a `status`
        // read meanwhile said "was due ... ago" of a run going on.
        let now = wall_ms();
        let due = now - 50;
        let running = run_due(due);
        let leader = Heartbeat { attempt: Some(running.clone()), next_ms: Some(due), ..hb("a", Some(1), now - 10) };
        let mut v = View::default();
        v.add(leader.clone());
        let text = schedule_lines(&v, Some(&leader), now, 1, v.next_ms);
        assert!(text.contains(&format!("next run: after the one due {}, running now", rfc3339(due))), "{text}");
        assert!(!text.contains("was due"), "{text}");
        // Once its owner is gone, nothing runs it: overdue.
        let text = schedule_lines(&v, None, now, 1, v.next_ms);
        assert!(text.contains(&format!("next run was due {}", rfc3339(due))), "{text}");
    }
}
