//! The crontab's reading: every line kind, every refusal with its line and
//! column, and the calendars it builds (daylight-saving days included).

use super::*;

const UTC: Zone = Zone::Named(chrono_tz::UTC);

fn one(text: &str) -> Job {
    let tab = parse(text, UTC);
    assert!(tab.problems.is_empty(), "{:?}", tab.problems);
    assert_eq!(tab.jobs.len(), 1);
    tab.jobs.into_iter().next().unwrap()
}

/// The one problem of a one-line file: "LINE:COLUMN: error: message".
fn refused(text: &str) -> String {
    let tab = parse(text, UTC);
    let names: Vec<_> = tab.jobs.iter().map(|j| &j.name).collect();
    assert!(names.is_empty(), "{text:?} read as jobs {names:?}");
    assert_eq!(tab.problems.len(), 1, "{:?}", tab.problems);
    assert!(tab.has_errors());
    tab.problems[0].to_string()
}

fn ms(rfc3339: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339).unwrap().timestamp_millis() as u64
}

#[test]
fn the_issues_crontab_reads_as_three_jobs() {
    let text = "# the fleet's jobs\nCRON_TZ=Europe/Berlin\n\
                */5 * * * *   billing   /usr/local/bin/billing-job --queue nightly\n\
                30 2 * * *    report    /usr/local/bin/report > /var/log/report.log\r\n\
                \n   @every 90s    ping      curl -fsS https://example.internal/health   \n";
    let tab = parse(text, UTC);
    assert!(tab.problems.is_empty(), "{:?}", tab.problems);
    let names: Vec<_> = tab.jobs.iter().map(|j| (j.name.as_str(), j.line, j.when.as_str())).collect();
    assert_eq!(names, [("billing", 3, "*/5 * * * *"), ("report", 4, "30 2 * * *"), ("ping", 6, "@every 90s")]);
    let [billing, report, ping] = &tab.jobs[..] else { unreachable!() };
    assert_eq!(billing.command, "/usr/local/bin/billing-job --queue nightly");
    assert_eq!(report.command, "/usr/local/bin/report > /var/log/report.log");
    assert_eq!(ping.command, "curl -fsS https://example.internal/health");
    assert!(matches!(report.zone, Some(Zone::Named(chrono_tz::Europe::Berlin))));
    assert!(ping.zone.is_none(), "@every counts from the epoch");
    assert_eq!(report.env, [("CRON_TZ".to_string(), "Europe/Berlin".to_string())]);
    assert_eq!(report.shell, "/bin/sh");
    assert_eq!(report.schedule.missed, Missed::Once);
    // 02:30 in Berlin is 01:30 UTC in winter.
    assert_eq!(report.schedule.calendar.after(ms("2026-11-26T00:00:00Z")), Some(ms("2026-11-26T01:30:00Z")));
    assert_eq!(ping.schedule.calendar.after(ms("2026-11-26T00:00:00Z")), Some(ms("2026-11-26T00:00:00Z") + 90_000));
    assert_eq!(billing.schedule.calendar.after(ms("2026-11-26T00:01:00Z")), Some(ms("2026-11-26T00:05:00Z")));
}

#[test]
fn nicknames_are_crons_expressions() {
    let at = ms("2026-11-26T10:20:00Z");
    for (nick, next) in [
        ("@hourly", "2026-11-26T11:00:00Z"),
        ("@daily", "2026-11-27T00:00:00Z"),
        ("@midnight", "2026-11-27T00:00:00Z"),
        ("@weekly", "2026-11-29T00:00:00Z"),
        ("@monthly", "2026-12-01T00:00:00Z"),
        ("@yearly", "2027-01-01T00:00:00Z"),
        ("@annually", "2027-01-01T00:00:00Z"),
    ] {
        let job = one(&format!("{nick} j true"));
        assert_eq!(job.when, nick);
        assert_eq!(job.schedule.calendar.after(at), Some(ms(next)), "{nick}");
    }
}

#[test]
fn assignments_hold_for_the_jobs_below_them() {
    let tab = parse(
        "A=1\n@daily first true\nA = \"two words\"\nSHELL=/bin/bash\nCRON_TZ='Asia/Tokyo'\n@daily second true\n\
         CRON_TZ=UTC\n0 9 * * * third true\n",
        Zone::Named(chrono_tz::Europe::Berlin),
    );
    assert!(tab.problems.is_empty(), "{:?}", tab.problems);
    let [first, second, third] = &tab.jobs[..] else { panic!("{:?}", tab.jobs) };
    assert_eq!(first.env, [("A".into(), "1".into())]);
    assert!(matches!(first.zone, Some(Zone::Named(chrono_tz::Europe::Berlin))), "the default zone");
    assert_eq!(first.shell, "/bin/sh");
    let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    assert_eq!(second.env, env(&[("A", "two words"), ("SHELL", "/bin/bash"), ("CRON_TZ", "Asia/Tokyo")]));
    assert_eq!(second.shell, "/bin/bash");
    assert!(matches!(second.zone, Some(Zone::Named(chrono_tz::Asia::Tokyo))));
    assert!(matches!(third.zone, Some(Zone::Named(chrono_tz::UTC))));
    assert_eq!(third.schedule.calendar.after(ms("2026-11-26T10:00:00Z")), Some(ms("2026-11-27T09:00:00Z")));
}

#[test]
fn options_in_brackets_set_a_jobs_policies() {
    let job = one("30 2 * * * report[missed=all,starting-deadline=10m,max-runtime=1h,tz=America/New_York] ./r");
    assert_eq!(job.name, "report");
    assert_eq!(job.schedule.missed, Missed::All);
    assert_eq!(job.schedule.starting_deadline, Some(Duration::from_secs(600)));
    assert_eq!(job.max_runtime, Some(Duration::from_secs(3600)));
    assert!(matches!(job.zone, Some(Zone::Named(chrono_tz::America::New_York))));
    assert_eq!(job.schedule.retry, None, "no retry unless asked, as cron");
    let delay = |s| Duration::from_secs(s);
    assert_eq!(one("@daily j[retries=2] true").schedule.retry, Some(Retry { times: 2, delay: delay(10) }));
    assert_eq!(
        one("@daily j[retry-delay=1m,retries=3] true").schedule.retry,
        Some(Retry { times: 3, delay: delay(60) })
    );
    assert_eq!(one("@daily j[retries=0] true").schedule.retry, None);
    assert_eq!(job.schedule.overlap, None, "due times during a run are missed unless overlap= says");
    assert_eq!(one("@daily j[overlap=replace] true").schedule.overlap, Some(Overlap::Replace));
    // 02:30 in New York is 07:30 UTC in November.
    assert_eq!(job.schedule.calendar.after(ms("2026-11-26T00:00:00Z")), Some(ms("2026-11-26T07:30:00Z")));
    assert_eq!(one("@daily d[missed=skip] true").schedule.missed, Missed::Skip);
    assert_eq!(one("@daily d[missed=latest] true").schedule.missed, Missed::Once);
    // A nickname in another zone.
    // Its own failure notice, in place of --on-failure: a word (a script's
    // path), which may hold '=' but no ',' (the next option) nor a space.
    assert_eq!(job.on_failure, None);
    let notice = one("@daily d[on-failure=/usr/local/bin/page-ops,missed=all] true");
    assert_eq!((notice.on_failure.as_deref(), notice.schedule.missed), (Some("/usr/local/bin/page-ops"), Missed::All));
    assert_eq!(one("@daily d[on-failure=A=1] true").on_failure.as_deref(), Some("A=1"));
    let tokyo = one("@daily d[tz=Asia/Tokyo] true");
    assert_eq!(tokyo.schedule.calendar.after(ms("2026-11-26T00:00:00Z")), Some(ms("2026-11-26T15:00:00Z")));
}

#[test]
fn a_bad_line_names_its_line_and_column() {
    for (line, said) in [
        ("61 * * * * j true", "1:1: error: minute field '61': number out of bounds (minute: 0-59)"),
        ("0 25 * * * j true", "1:3: error: hour field '25'"),
        ("0 0 * 13 * j true", "1:7: error: month field '13'"),
        ("0 0 * * 8 j true", "1:9: error: day of week field '8'"),
        ("0 0 30 2 * j true", "1:1: error: '0 0 30 2 *': it never comes"),
        ("*/5 * * * billing /bin/x", "1:11: error: a job's time is five fields"),
        ("*/5 * * * * /usr/bin/billing-job", "1:13: error: '/usr/bin/billing-job' looks like a command: a job needs"),
        ("@daily report", "1:14: error: job 'report' has no command"),
        ("@daily", "1:7: error: a job needs a name and a command"),
        ("@reboot j true", "1:1: error: @reboot has no due time"),
        ("@fortnightly j true", "1:1: error: unknown '@fortnightly'"),
        ("@every j true", "1:8: error: @every j: "),
        ("@every", "1:1: error: @every needs a duration"),
        ("@every 500ms j true", "1:8: error: @every 500ms: at least 1s"),
        ("@daily -j true", "1:8: error: '-j' is not a job name"),
        ("@daily j[missed=often] true", "1:10: error: missed=often: use skip, latest"),
        ("@daily j[missed=all,retry=3] true", "1:21: error: unknown option 'retry'"),
        ("@daily j[overlap=allow] true", "1:10: error: overlap=allow is not offered: a job runs once at a time"),
        ("@daily j[overlap=forbid] true", "1:10: error: overlap=forbid: use skip, queue or replace"),
        ("@daily j[retries=-1] true", "1:10: error: retries=-1: a number of retries, 0 to 100"),
        ("@daily j[retries=101] true", "1:10: error: retries=101: a number"),
        ("@daily j[retry-delay=soon,retries=1] true", "1:10: error: retry-delay=soon: "),
        ("@daily j[retry-delay=5s] true", "1:10: error: retry-delay applies to retries: give retries=N too"),
        ("@daily j[retries=0,retry-delay=5s] true", "1:20: error: retry-delay applies to retries"),
        ("@daily j[missed] true", "1:10: error: option 'missed' needs a value"),
        ("@daily j[missed=all true", "1:20: error: options end with ']'"),
        ("@daily j[max-runtime=0s] true", "1:10: error: max-runtime=0s: must be more than 0"),
        ("@daily j[on-failure=] true", "1:10: error: on-failure needs a command, e.g. on-failure=/usr/local/bin/"),
        ("@daily j[on-failure='page ops'] true", "1:26: error: options end with ']' and hold no spaces"),
        ("@every 1m j[tz=UTC] true", "1:13: error: tz applies only to a cron time"),
        ("@daily j[tz=Mars/Base] true", "1:10: error: unknown time zone 'Mars/Base'"),
        ("CRON_TZ=Mars/Base", "1:9: error: unknown time zone 'Mars/Base'"),
        ("CRON_TZ=", "1:9: error: CRON_TZ needs a zone"),
    ] {
        let got = refused(line);
        assert!(got.starts_with(said), "{line:?}: {got}");
    }
    let long = format!("@daily {} true", "x".repeat(65));
    assert!(refused(&long).contains("is too long"));
}

#[test]
fn a_bad_line_costs_only_itself() {
    let tab = parse("@daily a true\n61 * * * * b true\n@daily a again\nMAILTO=ops@example.com\n@daily c true\n", UTC);
    let names: Vec<_> = tab.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["a", "c"]);
    let said: Vec<_> = tab.problems.iter().map(|p| (p.line, p.column, p.error)).collect();
    assert_eq!(said, [(2, 1, true), (3, 8, true), (4, 8, false)]);
    assert!(tab.problems[1].message.contains("a second job named 'a' (the first is on line 1)"));
    assert!(tab.problems[2].to_string().starts_with("4:8: warning: neli-run sends no mail"));
}

#[test]
fn names_of_months_and_days_are_fields_not_names() {
    let job = one("0 9 * JAN,jul MON-FRI j true");
    assert_eq!(job.when, "0 9 * JAN,jul MON-FRI");
    assert_eq!(job.name, "j");
}

/// The two days the clocks change in Berlin (2027-03-28 skips 02:00 to
/// 03:00; 2026-10-25 goes from 03:00 back to 02:00): a daily job runs once
/// on each, an hourly one once per hour that passes.
#[test]
fn daylight_saving_days_run_a_daily_job_once() {
    let berlin = Zone::Named(chrono_tz::Europe::Berlin);
    let tab = parse("30 2 * * * daily true\n0 * * * * hourly true\n*/30 2 * * * twice true\n", berlin);
    assert!(tab.problems.is_empty(), "{:?}", tab.problems);
    let [daily, hourly, twice] = &tab.jobs[..] else { unreachable!() };
    let due = |job: &Job, from: &str, to: &str| {
        let (from, to) = (ms(from) - 1, ms(to));
        let all = std::iter::successors(job.schedule.calendar.after(from), |&d| job.schedule.calendar.after(d));
        all.take_while(|&d| d < to).map(|d| berlin.show(d)).collect::<Vec<_>>()
    };
    // Spring: 02:30 does not exist; the run is at 03:00, once.
    assert_eq!(due(daily, "2027-03-27T23:00:00Z", "2027-03-28T22:00:00Z"), ["2027-03-28 03:00:00 +02:00"]);
    // Autumn: 02:30 comes twice; the run is at the first, once.
    assert_eq!(due(daily, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"), ["2026-10-25 02:30:00 +02:00"]);
    // Hourly: 23 runs on the short day, 25 on the long one.
    assert_eq!(due(hourly, "2027-03-27T23:00:00Z", "2027-03-28T22:00:00Z").len(), 23);
    assert_eq!(due(hourly, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z").len(), 25);
    // Every 30 minutes within 02:00: by the wall clock, none on the short
    // day (the hour does not exist), four on the long one.
    assert!(due(twice, "2027-03-27T23:00:00Z", "2027-03-28T22:00:00Z").is_empty());
    assert_eq!(due(twice, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z").len(), 4);
    // at_or_before agrees with after across the change.
    let back = daily.schedule.calendar.at_or_before(ms("2026-10-25T12:00:00Z"));
    assert_eq!(back.map(|d| berlin.show(d)).as_deref(), Some("2026-10-25 02:30:00 +02:00"));
}

/// neli-run's variables are its own (audit E7): an assignment of one is
/// said as a warning and never reaches a job, whose other assignments do.
#[test]
fn an_assignment_of_a_variable_of_neli_run_is_not_passed() {
    let text =
        "NELI_GROUP=evil\nNOTIFY_SOCKET=/run/systemd/notify\nNELI_MINE=1\nNELI_KAFKA_PROPERTIES=x=y\n@daily j true\n";
    let tab = parse(text, UTC);
    assert_eq!(tab.jobs[0].env, [("NELI_MINE".to_string(), "1".to_string())]);
    let said: Vec<_> = tab.problems.iter().map(|p| (p.line, p.error)).collect();
    assert_eq!(said, [(1, false), (2, false), (4, false)]);
    assert!(tab.problems[0].to_string().contains("NELI_GROUP is neli-run's"), "{}", tab.problems[0]);
}

/// A word where a field takes numbers is said in our words, not croner's
/// (findings C-9: "cronpattern contains illegal character 'f' in part 'foo'").
#[test]
fn a_word_in_a_numeric_field_is_said_plainly() {
    let tab = parse("* * * * FOO job true\n", Zone::Local);
    let problem = &tab.problems[0];
    assert_eq!((problem.line, problem.column), (1, 9));
    assert!(problem.message.starts_with("day of week field 'FOO': not a number, a range"), "{}", problem.message);
    assert!(!problem.message.contains("cronpattern"), "{}", problem.message);
}
