//! A fleet crontab (`neli-run cron check FILE`; `--crontab FILE` builds on
//! it): cron's syntax with a name per job, read into jobs whose calendars
//! every member computes alike. Text in, jobs and problems out (pure but
//! for `SHELL=`, looked for on this host), so that a bad line is found the
//! same way at start, on reload and by `cron check` (which read the file
//! alike: `file::read`), and never takes the good lines with it.
//!
//! ```text
//! # comments and blank lines are skipped
//! CRON_TZ=Europe/Berlin                  # the zone of the jobs below it
//! PATH=/usr/local/bin:/usr/bin:/bin      # in the environment of the jobs below it
//! */5 * * * *   billing   /usr/local/bin/billing-job --queue nightly
//! 30 2 * * *    report[missed=all,max-runtime=1h,on-failure=/usr/local/bin/page-ops]  /usr/local/bin/report
//! @every 90s    ping      curl -fsS https://example.internal/health
//! ```
//!
//! A line is an assignment (`NAME=value`, as cron's: it holds for the lines
//! below it) or a job: when (five fields, `@hourly` and the other
//! nicknames, or `@every DURATION`), the job's name with its options in
//! brackets, and the command, run by `/bin/sh -c` (or `SHELL`) as cron runs
//! it. `%` is not special (as in supercronic): write `date +%F`, not `\%`.

mod check;
mod file;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use crate::calendar::{Cron, Every, Zone, MAX_EVERY, MIN_EVERY};
use crate::leader::{Calendar, Missed, Overlap, Retry, Schedule};

pub use check::check_main;
pub use file::{digest, no_job, read};

/// The longest job name: it goes into records, labels and logs.
const MAX_NAME: usize = 64;

/// The most bytes the kernel passes as one argument or variable, its NUL
/// included (MAX_ARG_STRLEN, 32 pages): `sh -c` gets a job's command whole,
/// so a longer one could never start.
const MAX_ARG: usize = 128 * 1024;

/// What a crontab says: its jobs, in the file's order, and what is wrong
/// with the lines that are not jobs.
#[derive(Debug, Default)]
pub struct Crontab {
    pub jobs: Vec<Job>,
    pub problems: Vec<Problem>,
    /// The file's digest (`file::digest`; empty for text not read from a
    /// file).
    pub digest: String,
}

impl Crontab {
    /// Whether any line was refused (warnings do not count).
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(|p| p.error)
    }
}

/// One job: a name, when it is due, and the command line.
#[derive(Clone, Debug)]
pub struct Job {
    /// Its line in the file (1-based), for messages.
    pub line: usize,
    pub name: String,
    /// When, as written (`*/5 * * * *`, `@daily`, `@every 90s`).
    pub when: String,
    /// Its due times (in its zone), and what becomes of those missed,
    /// late, failed or overlapping: as the seat that runs it takes it.
    pub schedule: Schedule,
    /// The zone of a cron expression (None for `@every`, which counts from
    /// the Unix epoch).
    pub zone: Option<Zone>,
    /// The shell command line.
    pub command: String,
    /// The shell that runs it (`SHELL`, else /bin/sh).
    pub shell: String,
    /// The assignments above the job, in order.
    pub env: Vec<(String, String)>,
    /// How long one run may take before it is stopped.
    pub max_runtime: Option<Duration>,
    /// `on-failure=CMD`: what a failed run of this job runs, in place of
    /// `--on-failure`.
    pub on_failure: Option<String>,
    /// `output=SIZE`: the bytes of a run's output its record keeps (None:
    /// the member's `--keep-output`).
    pub output: Option<usize>,
}

/// What is wrong with a line, and where (1-based line and column, in
/// characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub column: usize,
    /// An error refuses the line; a warning only says something about it.
    pub error: bool,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.error { "error" } else { "warning" };
        write!(f, "{}:{}: {kind}: {}", self.line, self.column, self.message)
    }
}

/// A piece of a line and the column it starts at.
#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    text: &'a str,
    column: usize,
    /// Its byte offset in the line (where the rest of the line starts).
    at: usize,
}

/// The whitespace-separated pieces of `line`, each with its column.
fn tokens(line: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    for (column, (at, c)) in line.char_indices().enumerate() {
        match (c.is_whitespace(), start) {
            (true, Some((begin, col))) => {
                out.push(Token { text: &line[begin..at], column: col + 1, at: begin });
                start = None;
            }
            (false, None) => start = Some((at, column)),
            _ => {}
        }
    }
    if let Some((begin, col)) = start {
        out.push(Token { text: &line[begin..], column: col + 1, at: begin });
    }
    out
}

/// The column of byte offset `at` in `line`.
fn column_of(line: &str, at: usize) -> usize {
    line[..at].chars().count() + 1
}

/// What the lines above a job said, as the parse goes down the file.
struct Above {
    zone: Zone,
    shell: String,
    env: Vec<(String, String)>,
    /// The line of a `CRON_TZ=` refused (until one taken): the jobs below
    /// it are refused too, not run in the zone above it.
    zone_refused: Option<usize>,
    /// The line of a `SHELL=` refused, alike.
    shell_refused: Option<usize>,
}

type LineResult<T> = Result<T, (usize, String)>;

/// How many jobs a crontab may hold: one partition each, as many as
/// `--roles` may have (audit E9: 1,100 jobs made a topic of 1,100
/// partitions, placed one claim at a time, with no word).
pub const MAX_JOBS: usize = crate::leader::MAX_ROLES as usize;

/// Reads a crontab; `zone` is the zone of jobs with no `CRON_TZ` above them.
pub fn parse(text: &str, zone: Zone) -> Crontab {
    let mut tab = Crontab::default();
    let mut above = Above { zone, shell: "/bin/sh".into(), env: Vec::new(), zone_refused: None, shell_refused: None };
    // Each job's line, by name: a second of a name is refused (a map, not
    // a search of the jobs read: 20,000 jobs took seconds).
    let mut named: HashMap<String, usize> = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let said = match assignment(line) {
            Some((name, value, value_at)) => {
                assign(&mut above, (name, value), line, value_at, number).map(|warning| warning.map(|w| (value_at, w)))
            }
            None => match job(line, number, &above) {
                Ok(job) => {
                    let at = || tokens(line).iter().find(|t| t.text.starts_with(&job.name)).map_or(1, |t| t.column);
                    if let Some(first) = named.get(&job.name) {
                        Err((at(), format!("a second job named '{}' (the first is on line {first})", job.name)))
                    } else if tab.jobs.len() >= MAX_JOBS {
                        Err((
                            1,
                            format!(
                                "more than {MAX_JOBS} jobs: each job has a partition of its own, and a group \
                                         has at most {MAX_JOBS}; split the file between groups (-g)"
                            ),
                        ))
                    } else {
                        named.insert(job.name.clone(), job.line);
                        tab.jobs.push(job);
                        Ok(None)
                    }
                }
                Err(e) => Err(e),
            },
        };
        match said {
            Ok(None) => {}
            Ok(Some((at, message))) => {
                tab.problems.push(Problem { line: number, column: column_of(line, at), error: false, message })
            }
            Err((column, message)) => tab.problems.push(Problem { line: number, column, error: true, message }),
        }
    }
    tab
}

/// `NAME=value` (spaces around `=` allowed, the value optionally quoted):
/// the name, the value and the value's byte offset. A job's first field is
/// never a name (minutes are digits, `*` or `@...`), so nothing else looks
/// like this.
fn assignment(line: &str) -> Option<(&str, &str, usize)> {
    let start = line.len() - line.trim_start().len();
    let rest = &line[start..];
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    let name = &rest[..end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let after = rest[end..].trim_start();
    let value = after.strip_prefix('=')?;
    let value_at = line.len() - value.trim_start().len();
    let value = value.trim();
    let unquoted = match value.as_bytes() {
        [q @ (b'"' | b'\''), .., last] if q == last && value.len() >= 2 => &value[1..value.len() - 1],
        _ => value,
    };
    Some((name, unquoted, value_at))
}

/// Takes an assignment (on line `number`) into `above`; Ok(Some(warning))
/// for one that neli-run takes but does not act on. A `CRON_TZ` or `SHELL`
/// refused marks the jobs below it refused too.
fn assign(
    above: &mut Above,
    (name, value): (&str, &str),
    line: &str,
    value_at: usize,
    number: usize,
) -> LineResult<Option<String>> {
    let at = column_of(line, value_at);
    let taken = passable(value, (name, name.len() + 1), line, value_at).and_then(|()| match name {
        "CRON_TZ" if value.is_empty() => Err((at, "CRON_TZ needs a zone, e.g. CRON_TZ=Europe/Berlin".into())),
        "CRON_TZ" => value.parse().map(|zone| above.zone = zone).map_err(|e: String| (at, e)),
        "SHELL" => shell(value).map(|()| above.shell = value.to_owned()).map_err(|e| (at, e)),
        _ => Ok(()),
    });
    match name {
        "CRON_TZ" => above.zone_refused = taken.is_err().then_some(number),
        "SHELL" => above.shell_refused = taken.is_err().then_some(number),
        _ => {}
    }
    taken?;
    // neli-run's own wins (see `crate::env`): NELI_GROUP=x would point a
    // job's `neli-run yield` at another group, NOTIFY_SOCKET would let it
    // speak for neli-run to systemd.
    if crate::env::reserved(name) {
        return Ok(Some(format!("{name} is neli-run's: a job gets neli-run's value or none, never this assignment's")));
    }
    above.env.retain(|(n, _)| n != name);
    above.env.push((name.to_owned(), value.to_owned()));
    Ok((name == "MAILTO")
        .then(|| "neli-run sends no mail: a job's output goes where neli-run's goes (the journal)".into()))
}

/// The nicknames cron takes for an expression.
const NICKNAMES: &[(&str, &str)] = &[
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// The names of a cron expression's five fields, in order, and what each
/// takes.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day of week", "0-7 or SUN-SAT, 0 and 7 both Sunday"),
];

/// Err unless `text` (at byte `at` of `line`; `what` says what it is, and
/// how many bytes go before it: `NAME=` of a variable) can be passed to a
/// command: no NUL byte, and within the kernel's bound on one argument or
/// variable.
fn passable(text: &str, (what, before): (&str, usize), line: &str, at: usize) -> LineResult<()> {
    if let Some(nul) = text.find('\0') {
        return Err((column_of(line, at + nul), format!("{what}: a NUL byte, which no command can be given")));
    }
    let size = before + text.len() + 1;
    if size > MAX_ARG {
        return Err((
            column_of(line, at),
            format!(
                "{what}: {size} bytes, over the {MAX_ARG} the kernel passes to a command as one argument or \
                 variable (MAX_ARG_STRLEN; `sh -c` gets a job's command whole): put it in a script and run that"
            ),
        ));
    }
    Ok(())
}

/// Err unless `SHELL=value` names a program that can be run, as a job's
/// command would find out at every due time.
fn shell(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("SHELL needs a shell, e.g. SHELL=/bin/bash (without SHELL, /bin/sh)".into());
    }
    crate::child::check_executable(std::ffi::OsStr::new(value))
        .map_err(|e| format!("SHELL={value}: {}; every job below would fail", e.message))
}

/// A job line.
fn job(line: &str, number: usize, above: &Above) -> LineResult<Job> {
    let tokens = tokens(line);
    let first = tokens[0];
    for (refused, what, why) in [
        (above.zone_refused, "CRON_TZ", "would run in another zone than it names"),
        (above.shell_refused, "SHELL", "would run in another shell than it names"),
    ] {
        if let Some(at) = refused {
            return Err((
                first.column,
                format!("the {what} on line {at} was refused, and this job {why}: fix that line"),
            ));
        }
    }
    // When, and how many tokens it took.
    let (when, calendar, zone, used): (String, Arc<dyn Calendar>, Option<Zone>, usize) = if first.text.starts_with('@')
    {
        if first.text == "@every" {
            let Some(period) = tokens.get(1) else {
                return Err((first.column, "@every needs a duration, e.g. @every 90s".into()));
            };
            let every = every(period.text).map_err(|e| (period.column, e))?;
            (format!("@every {}", period.text), Arc::new(every), None, 2)
        } else if first.text == "@reboot" {
            return Err((
                first.column,
                "@reboot has no due time a fleet can share: run the command as a service instead \
                     (neli-run --group G -- COMMAND)"
                    .into(),
            ));
        } else {
            let Some((_, expr)) = NICKNAMES.iter().find(|(n, _)| *n == first.text) else {
                let names: Vec<_> = NICKNAMES.iter().map(|(n, _)| *n).collect();
                return Err((
                    first.column,
                    format!("unknown '{}': use {}, @every DURATION or five fields", first.text, names.join(", ")),
                ));
            };
            let cron = cron(expr, &tokens[..1], above)?;
            (first.text.to_owned(), Arc::new(cron), Some(above.zone), 1)
        }
    } else {
        if tokens.len() < 5 || tokens[..5].iter().any(|t| looks_like_name(t.text)) {
            let short = tokens.iter().take(5).position(|t| looks_like_name(t.text)).unwrap_or(tokens.len());
            let at = tokens.get(short).map_or(line.trim_end().chars().count() + 1, |t| t.column);
            return Err((
                at,
                format!(
                    "a job's time is five fields ({}), or @hourly, @daily... or @every DURATION; found {short}",
                    FIELDS.map(|(name, _)| name).join(", ")
                ),
            ));
        }
        let expr = tokens[..5].iter().map(|t| t.text).collect::<Vec<_>>().join(" ");
        let cron = cron(&expr, &tokens[..5], above)?;
        (expr, Arc::new(cron), Some(above.zone), 5)
    };
    let Some(named) = tokens.get(used) else {
        let end = line.trim_end().chars().count() + 1;
        return Err((
            end,
            "a job needs a name and a command after its time: e.g. `@daily report /usr/local/bin/report`".into(),
        ));
    };
    let (name, options) = name_and_options(named)?;
    let Some(command) = tokens.get(used + 1) else {
        return Err((
            named.column + named.text.chars().count(),
            format!("job '{name}' has no command: the rest of the line after its name is the shell command"),
        ));
    };
    let (command_text, command_at) = (line[command.at..].trim_end(), command.at);
    passable(command_text, (&format!("job '{name}''s command"), 0), line, command_at)?;
    let mut job = Job {
        line: number,
        name: name.to_owned(),
        when,
        schedule: Schedule::of(calendar),
        zone,
        command: command_text.to_owned(),
        shell: above.shell.clone(),
        env: above.env.clone(),
        max_runtime: None,
        on_failure: None,
        output: None,
    };
    let mut delay_at = None;
    for (key, value, column) in options {
        option(&mut job, key, value).map_err(|e| (column, e))?;
        delay_at = delay_at.or((key == "retry-delay").then_some(column));
    }
    if job.schedule.retry.is_some_and(|r| r.times == 0) {
        if let Some(column) = delay_at {
            return Err((
                column,
                "retry-delay applies to retries: give retries=N too (0, the default, retries nothing)".into(),
            ));
        }
        job.schedule.retry = None;
    }
    Ok(job)
}

/// Whether a token can only be a job's name or command (a field never
/// holds a letter other than a month's or a day's three, nor `/` at its
/// start, nor brackets).
fn looks_like_name(token: &str) -> bool {
    token.starts_with('/') || token.contains('[') || {
        let letters: String = token.chars().filter(|c| c.is_ascii_alphabetic()).collect();
        letters.len() > 3 && !is_cron_names(token)
    }
}

/// Whether every run of letters in `token` is a month's or a day's name
/// (`MON-FRI`, `JAN,JUL`).
fn is_cron_names(token: &str) -> bool {
    const NAMES: &[&str] = &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", "sun", "mon", "tue", "wed",
        "thu", "fri", "sat",
    ];
    token
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .all(|w| NAMES.contains(&w.to_ascii_lowercase().as_str()))
}

/// `@every`'s period.
fn every(text: &str) -> Result<Every, String> {
    let period = humantime::parse_duration(text)
        .map_err(|e| format!("@every {text}: {e}; use a number with a unit, e.g. 90s, 5m, 1h"))?;
    if period < MIN_EVERY {
        return Err(format!("@every {text}: at least 1s (a schedule, not a loop)"));
    }
    if period > MAX_EVERY {
        return Err(format!("@every {text}: at most a year (use five fields for a yearly job)"));
    }
    Ok(Every::new(period).expect("at least 1s"))
}

/// A five-field expression in the zone above, its problem pinned to the
/// field that has it (each field alone beside `*`s).
fn cron(expr: &str, fields: &[Token<'_>], above: &Above) -> LineResult<Cron> {
    Cron::new(expr, above.zone).map_err(|e| {
        // croner says "Component error: Number out of bounds.", or of a
        // word, "...: cronpattern contains illegal character 'f' in part
        // 'foo'": its own words, said plainly.
        let e = match e.contains("illegal character") {
            true => "not a number, a range, a step, a list or a name the field takes".to_string(),
            false => e.trim_start_matches("Component error: ").trim_end_matches('.').to_lowercase(),
        };
        let field = (fields.len() == 5)
            .then(|| {
                fields.iter().zip(FIELDS).enumerate().find_map(|(i, (field, (name, takes)))| {
                    let mut alone = ["*"; 5];
                    alone[i] = field.text;
                    croner::Cron::from_str(&alone.join(" ")).is_err().then_some((field, name, takes))
                })
            })
            .flatten();
        match field {
            Some((field, name, takes)) => {
                (field.column, format!("{name} field '{}': {e} ({name}: {takes})", field.text))
            }
            None => (fields[0].column, format!("'{expr}': {e}")),
        }
    })
}

/// An option as written: key, value, and the column it starts at.
type Setting<'a> = (&'a str, &'a str, usize);

/// A job's token: its name, and its options (`name[key=value,...]`) each
/// with its column.
fn name_and_options<'a>(token: &Token<'a>) -> LineResult<(&'a str, Vec<Setting<'a>>)> {
    let (name, rest) = match token.text.find('[') {
        Some(at) => (&token.text[..at], Some(&token.text[at..])),
        None => (token.text, None),
    };
    let bad = |why: String| Err((token.column, why));
    let rule = "a job's name is letters, digits, '_', '.' and '-', starts with a letter or digit";
    if name.contains('/') {
        return bad(format!(
            "'{name}' looks like a command: a job needs a name between its time and its command, e.g. \
             `*/5 * * * * billing /usr/local/bin/billing-job`"
        ));
    }
    if name.is_empty()
        || !name.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return bad(format!("'{name}' is not a job name: {rule}"));
    }
    if name.len() > MAX_NAME {
        return bad(format!("'{name}' is too long for a job name: at most {MAX_NAME} characters"));
    }
    let Some(rest) = rest else { return Ok((name, Vec::new())) };
    let close = token.column + token.text.chars().count();
    let Some(inner) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return Err((
            close,
            "options end with ']' and hold no spaces: e.g. report[missed=all,max-runtime=1h] (for an on-failure= \
             command with spaces, put it in a script and give the script's path)"
                .into(),
        ));
    };
    let mut column = token.column + name.chars().count() + 1;
    let mut options = Vec::new();
    for item in inner.split(',') {
        let Some((key, value)) = item.split_once('=') else {
            return Err((column, format!("option '{item}' needs a value: key=value ({})", OPTIONS.join(", "))));
        };
        options.push((key, value, column));
        column += item.chars().count() + 1;
    }
    Ok((name, options))
}

/// The options a job takes in brackets.
const OPTIONS: &[&str] = &[
    "tz=ZONE",
    "missed=skip|latest|all",
    "starting-deadline=DURATION",
    "max-runtime=DURATION",
    "overlap=skip|queue|replace",
    "retries=N",
    "retry-delay=DURATION",
    "on-failure=CMD",
    "output=SIZE",
];

/// The most retries a job takes: a run that fails that often wants a look.
const MAX_RETRIES: u32 = 100;

/// How long a failed run waits for its retry unless `retry-delay=` says.
const RETRY_DELAY: Duration = Duration::from_secs(10);

/// One option of a job.
fn option(job: &mut Job, key: &str, value: &str) -> Result<(), String> {
    let positive = |what: &str| match humantime::parse_duration(value) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(format!("{what}={value}: must be more than 0 (leave it out for no limit)")),
        Err(e) => Err(format!("{what}={value}: {e}; use a number with a unit, e.g. 30s, 10m")),
    };
    match key {
        "tz" => {
            let zone: Zone = value.parse()?;
            if job.zone.is_none() {
                return Err("tz applies only to a cron time (@every counts from the Unix epoch, in UTC)".into());
            }
            let expr = NICKNAMES.iter().find(|(n, _)| *n == job.when).map_or(job.when.as_str(), |(_, e)| e);
            job.schedule.calendar = Arc::new(Cron::new(expr, zone)?);
            job.zone = Some(zone);
        }
        "missed" => {
            job.schedule.missed = match value {
                "skip" => Missed::Skip,
                "latest" | "once" => Missed::Once,
                "all" => Missed::All,
                _ => return Err(format!("missed={value}: use skip, latest (the default) or all")),
            }
        }
        "starting-deadline" => job.schedule.starting_deadline = Some(positive("starting-deadline")?),
        "max-runtime" => job.max_runtime = Some(positive("max-runtime")?),
        "on-failure" if value.is_empty() => {
            return Err("on-failure needs a command, e.g. on-failure=/usr/local/bin/page-ops (or leave it out)".into())
        }
        "on-failure" => job.on_failure = Some(value.to_owned()),
        "overlap" => {
            job.schedule.overlap = Some(match value {
                "skip" => Overlap::Skip,
                "queue" => Overlap::Queue,
                "replace" => Overlap::Replace,
                "allow" => {
                    return Err("overlap=allow is not offered: a job runs once at a time across the fleet, \
                                that is neli-run's promise; use skip, queue or replace"
                        .into())
                }
                _ => return Err(format!("overlap={value}: use skip, queue or replace")),
            })
        }
        "retries" => {
            let times = match value.parse::<u32>() {
                Ok(n) if n <= MAX_RETRIES => n,
                _ => return Err(format!("retries={value}: a number of retries, 0 to {MAX_RETRIES}")),
            };
            let delay = job.schedule.retry.map_or(RETRY_DELAY, |r| r.delay);
            job.schedule.retry = Some(Retry { times, delay });
        }
        "retry-delay" => {
            let delay = match humantime::parse_duration(value) {
                Ok(d) if d <= crate::calendar::MAX_EVERY => d,
                Ok(_) => return Err(format!("retry-delay={value}: at most a year")),
                Err(e) => return Err(format!("retry-delay={value}: {e}; use a number with a unit, e.g. 30s, 10m")),
            };
            let times = job.schedule.retry.map_or(0, |r| r.times);
            job.schedule.retry = Some(Retry { times, delay });
        }
        "output" => job.output = Some(crate::size::output(value).map_err(|e| format!("output={e}"))?),
        _ => return Err(format!("unknown option '{key}': a job takes {}", OPTIONS.join(", "))),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
