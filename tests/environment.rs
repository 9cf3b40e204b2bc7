//! The command's environment (audit E7, E8): what neli-run sets wins over
//! a crontab's assignments and the caller's environment, and a `NELI_*`
//! variable of neli-run's that a run does not get set is not in it at all.
//! (supervision.rs has the variables a command gets, and those neli-run
//! reads removed.) And what neli-run reads from its own: a
//! NELI_KAFKA_PROPERTIES that is not UTF-8 is refused (audit E6).

use std::path::Path;

use crate::util::{wait_until, Group, Member, LONG};

/// What the caller of neli-run may leave in its environment: variables
/// neli-run sets only for some runs (a role, a due time, a hook's), and
/// one of the user's own.
const CALLERS: &[&str] = &[
    "NELI_ROLE=evil",
    "NELI_JOB=evil",
    "NELI_DUE=1999",
    "NELI_ATTEMPT=42",
    "NELI_WAVE=1999",
    "NELI_TOKEN_FILE=/etc/shadow",
    "NELI_HOOK=lead",
    "NELI_REASON=x",
    "NELI_EXIT_STATUS=3",
    "NELI_MINE=kept",
];

/// Behind `env` with the caller's variables.
fn callers_env() -> Vec<String> {
    std::iter::once("env").chain(CALLERS.iter().copied()).map(String::from).collect()
}

/// The `NAME=value` lines of an `env` dump, once it is written.
fn dumped(file: &Path) -> Vec<String> {
    wait_until(LONG, "the command's environment is written", || {
        std::fs::read_to_string(file).is_ok_and(|t| t.ends_with('\n'))
    });
    std::fs::read_to_string(file).unwrap().lines().map(String::from).collect()
}

/// None of the caller's `NELI_*` values reached the command (neli-run's
/// own may stand in their place), and none of `unset` is there at all.
fn assert_none_of_the_callers(env: &[String], unset: &[&str]) {
    for set in CALLERS.iter().filter(|v| !v.starts_with("NELI_MINE")) {
        assert!(!env.iter().any(|l| l == set), "the caller's {set} reached the command:\n{env:#?}");
    }
    for name in unset {
        assert!(!env.iter().any(|l| l.starts_with(&format!("{name}="))), "{name} reached the command:\n{env:#?}");
    }
    assert!(env.contains(&"NELI_MINE=kept".to_string()), "a variable of the user's own passes:\n{env:#?}");
}

/// What neli-run sets for no run of a single leader's command or a job.
const NOT_GIVEN: &[&str] =
    &["NELI_ROLE", "NELI_ROLES", "NELI_TOKEN_FILE", "NELI_HOOK", "NELI_REASON", "NELI_EXIT_STATUS"];

#[test]
fn a_command_gets_none_of_the_callers_neli_variables_that_it_is_not_given() {
    let g = Group::new("env-callers");
    let out = g.dir.path().join("env");
    let script = format!("env > {0}.tmp && mv {0}.tmp {0}", out.display());
    let mut m = g.member_in(Some(callers_env()), "a", &[], &["sh", "-c", &script]);
    assert_eq!(m.wait_exit(LONG).code(), Some(0), "{}", m.log());
    let env = dumped(&out);
    // A wave's run (--restart never) gets NELI_ATTEMPT and NELI_WAVE, never a NELI_DUE.
    assert_none_of_the_callers(&env, &[NOT_GIVEN, &["NELI_DUE", "NELI_JOB"]].concat());
    assert!(env.contains(&format!("NELI_GROUP={}", g.name)), "{env:#?}");
    assert!(env.contains(&"NELI_ATTEMPT=1".to_string()), "{env:#?}");
}

#[test]
fn a_crontab_job_gets_neli_runs_variables_over_the_files_assignments() {
    let g = Group::new("env-crontab");
    let out = g.dir.path().join("env");
    let file = g.dir.path().join("jobs.crontab");
    let text = format!(
        "NELI_GROUP=evil\nNELI_BROKERS=evil:9092\nNELI_JOB=forged\nNOTIFY_SOCKET=/run/systemd/notify\nMINE=kept\n\
         @every 1s j env > {0}.tmp && mv {0}.tmp {0}\n",
        out.display()
    );
    std::fs::write(&file, text).unwrap();
    let mut argv = vec!["-b".to_string(), g.broker.address.clone(), "-g".into(), g.name.clone(), "--name".into()];
    argv.extend(["a".into(), "--crontab".into(), file.display().to_string()]);
    argv.extend(g.broker.timing.args());
    let mut m = Member::spawn("a", &callers_env(), &argv, &g.dir.path().join("a.log"), None);
    let env = dumped(&out);
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit(LONG);
    for ours in [format!("NELI_GROUP={}", g.name), format!("NELI_BROKERS={}", g.broker.address), "NELI_JOB=j".into()] {
        assert!(env.contains(&ours), "{ours}:\n{env:#?}");
    }
    assert!(!env.iter().any(|l| l.starts_with("NOTIFY_SOCKET=")), "{env:#?}");
    assert!(env.contains(&"MINE=kept".to_string()), "the file's other assignments pass:\n{env:#?}");
    // A job's run gets NELI_ATTEMPT and NELI_DUE, never a NELI_WAVE.
    assert_none_of_the_callers(&env, &[NOT_GIVEN, &["NELI_WAVE"]].concat());
    let log = m.log();
    assert!(log.contains("NELI_GROUP is neli-run's"), "the member says it ignores the assignment:\n{log}");
}

/// `neli-run ARGS` with NELI_KAFKA_PROPERTIES set to `value`: status and output.
fn with_properties(value: &[u8], args: &[&str]) -> (i32, String) {
    use std::os::unix::ffi::OsStrExt as _;
    let out = std::process::Command::new(crate::util::bin())
        .args(args)
        .env("NELI_KAFKA_PROPERTIES", std::ffi::OsStr::from_bytes(value))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = [out.stdout, out.stderr].concat();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&text).into_owned())
}

/// Read as unset, a password with a Latin-1 byte connected without SASL,
/// with no word (the audit's rc 0); now every command that talks to Kafka
/// refuses it as a usage error, naming the variable and the entry, never
/// the value.
#[test]
fn kafka_properties_that_are_not_utf8_are_refused_by_name() {
    let g = Group::new("env-kafka-properties");
    let value = b"security.protocol=SASL_PLAINTEXT;sasl.mechanism=PLAIN;sasl.username=u;sasl.password=p\xe9ss";
    let run = ["-b", &g.broker.address, "-g", &g.name, "--", "true"];
    let status = ["status", "-b", &g.broker.address, "-g", &g.name];
    for args in [&run[..], &status[..]] {
        let (code, out) = with_properties(value, args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains("NELI_KAFKA_PROPERTIES entry 4 is not valid UTF-8"), "{args:?}: {out}");
        assert!(!out.contains("\u{FFFD}ss") && !out.contains("sasl.password"), "the value is not shown: {out}");
    }
    // A crontab check reads no Kafka: the variable is not its business.
    let file = g.dir.path().join("ok.crontab");
    std::fs::write(&file, "@daily j true\n").unwrap();
    let (code, out) = with_properties(b"\xff", &["cron", "check", file.to_str().unwrap(), "--next", "1"]);
    assert_eq!(code, 0, "{out}");
}
