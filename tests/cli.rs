//! Command-line contract: help, and every input a user can get wrong.

use crate::util::run;

#[test]
fn help_teaches_usage_and_exit_codes() {
    let (code, out) = run(&["--help"]);
    assert_eq!(code, 0);
    for needle in ["--group", "--heartbeat-deadline", "NELI_FENCING_TOKEN", "dev-broker", "75"] {
        assert!(out.contains(needle), "--help lacks {needle}:\n{out}");
    }
}

#[test]
fn version_names_the_commit_librdkafka_and_its_features() {
    let expect_commit = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short=10", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
    for flag in ["--version", "-V"] {
        let (code, out) = run(&[flag]);
        assert_eq!(code, 0, "{out}");
        let field = |name: &str| {
            let prefix = format!("{name}: ");
            let line = out.lines().find(|l| l.starts_with(&prefix));
            line.unwrap_or_else(|| panic!("{flag} has no {name}:\n{out}"))[prefix.len()..].to_string()
        };
        assert_eq!(out.lines().next(), Some(concat!("neli-run ", env!("CARGO_PKG_VERSION"))), "{out}");
        let commit = field("commit");
        match &expect_commit {
            Some(head) => assert_eq!(&commit, head, "built from this work tree's HEAD: {out}"),
            // A source tarball: the crate's .cargo_vcs_info.json, or unknown.
            None => assert!(commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()), "{out}"),
        }
        assert_eq!(field("librdkafka"), librdkafka, "{out}");
        let features = field("builtin.features");
        let features: Vec<&str> = features.split(',').collect();
        let has = |f: &str| features.contains(&f);
        assert!(has("ssl") && has("sasl_plain") && has("sasl_scram"), "TLS and SASL/SCRAM are always built: {out}");
        // librdkafka's parts that are cargo features here (see Cargo.toml).
        assert_eq!(has("sasl_gssapi"), cfg!(feature = "gssapi"), "GSSAPI: {out}");
        assert_eq!(has("zstd"), cfg!(any(feature = "zstd", feature = "static")), "zstd: {out}");
        assert_eq!(has("oidc"), cfg!(any(feature = "oidc", feature = "static")), "OIDC: {out}");
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let (code, out) = run(&["--frobnicate", "-g", "g", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--frobnicate"), "{out}");
}

#[test]
fn logging_flags_may_come_before_a_subcommand_and_run_options_may_not() {
    // Parsed, and on to Kafka (unreachable here: 69), not a usage error.
    for flags in [&["-v"][..], &["--log-format", "json"], &["-q"]] {
        let args = [flags, &["status", "-g", "x", "-b", "127.0.0.1:1"]].concat();
        let (code, out) = run(&args);
        assert_eq!(code, 69, "{args:?}: {out}");
    }
    let (code, out) = run(&["--every", "5m", "status", "-g", "x", "-b", "127.0.0.1:1"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--every before 'status' is an option of running a command"), "{out}");
}

#[test]
fn missing_group_is_a_usage_error() {
    let (code, out) = run(&["--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--group"), "{out}");
}

#[test]
fn missing_command_is_a_usage_error() {
    let (code, out) = run(&["-g", "g"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("COMMAND"), "{out}");
}

#[test]
fn bad_duration_names_the_flag() {
    let (code, out) = run(&["-g", "g", "--grace", "soon", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--grace") && out.contains("500ms"), "{out}");
}

/// A bad value from a flag's environment variable names the variable (what
/// to fix, in a unit's EnvironmentFile say), beside clap's naming of the
/// flag; a value given on the command line does not.
#[test]
fn a_bad_value_from_the_environment_names_the_variable() {
    let cases: [(&str, &str, &[&str]); 3] = [
        ("NELI_SESSION_TIMEOUT", "soon", &["-g", "g", "--", "true"]),
        ("NELI_RESTART", "sometimes", &["-g", "g", "--", "true"]),
        ("NELI_DEV_BROKER_PARTITIONS", "0", &["dev-broker"]),
    ];
    for (var, value, args) in cases {
        let (code, out) = run_env(&[(var, value)], args);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains(&format!("the value comes from the environment: {var}={value}")), "{out}");
    }
    // The flag given too: its value is the bad one, and no variable is named.
    let (code, out) = run_env(&[("NELI_GRACE", "1s")], &["-g", "g", "--grace", "soon", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--grace") && !out.contains("environment"), "{out}");
}

#[test]
fn unsafe_timing_is_refused_with_the_fix() {
    let (code, out) = run(&["-g", "g", "--heartbeat-deadline", "8s", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--session-timeout") && out.contains("at least"), "{out}");
}

#[test]
fn bad_broker_address_is_a_usage_error() {
    let (code, out) = run(&["-g", "g", "-b", "localhost:ninety", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("localhost:ninety"), "{out}");
}

#[test]
fn command_not_found_exits_127_before_joining() {
    // Port 1 is closed: were Kafka reached first, this would hang.
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--", "no-such-command-neli"]);
    assert_eq!(code, 127, "{out}");
    assert!(out.contains("command not found: no-such-command-neli"), "{out}");
}

#[test]
fn command_not_executable_exits_126() {
    let dir = crate::util::tempdir::Dir::new("not-executable");
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "not a program").unwrap();
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--", file.to_str().unwrap()]);
    assert_eq!(code, 126, "{out}");
    assert!(out.contains("not an executable"), "{out}");
}

#[test]
fn unknown_kafka_property_is_a_config_error() {
    let (code, out) = run(&["-g", "g", "-X", "no.such.property=1", "--", "true"]);
    assert_eq!(code, 78, "{out}");
    assert!(out.contains("no.such.property"), "{out}");
}

#[test]
fn unreachable_broker_retries_quietly_then_gives_up_at_acquire_timeout() {
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--acquire-timeout", "3s", "--", "true"]);
    assert_eq!(code, 75, "{out}");
    assert_eq!(out.matches("unreachable").count(), 1, "one line per state change:\n{out}");
    assert!(out.contains("--acquire-timeout"), "{out}");
}

#[test]
fn bad_dev_broker_address_is_a_usage_error() {
    let (code, out) = run(&["dev-broker", "--listen", "nowhere"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("HOST:PORT"), "{out}");
}

#[test]
fn topic_without_permission_exits_77_naming_the_acls() {
    let broker = crate::util::Broker::dev_with("127.0.0.1", &["--deny-topic", "secret.neli"]);
    let (code, out) = run(&["-g", "secret", "-b", &broker.address, "--", "true"]);
    assert_eq!(code, 77, "{out}");
    assert!(out.contains("secret.neli") && out.contains("DESCRIBE, READ and WRITE"), "{out}");
}

#[test]
fn logs_never_show_secrets_even_at_full_debug() {
    let (code, out) = run(&[
        "-vv",
        "--log-format",
        "json",
        "-g",
        "g",
        "-b",
        "127.0.0.1:1",
        "--acquire-timeout",
        "2s",
        "-X",
        "security.protocol=sasl_plaintext",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        "sasl.username=neli",
        "-X",
        "sasl.password=hunter2-secret",
        "-X",
        "debug=all",
        "--",
        "true",
    ]);
    assert_eq!(code, 75, "{out}");
    assert!(out.lines().count() > 10, "debug logging was on:\n{out}");
    assert!(!out.contains("hunter2-secret"), "a secret reached the log:\n{out}");
    let first = out.lines().next().unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(first).is_ok(), "not JSON: {first}");
}

#[test]
fn tls_and_sasl_are_built_in() {
    // Without OpenSSL in the build, librdkafka refuses these at start (78).
    let (code, out) = run(&[
        "-g",
        "g",
        "-b",
        "127.0.0.1:1",
        "--acquire-timeout",
        "1s",
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        "sasl.mechanism=SCRAM-SHA-256",
        "-X",
        "sasl.username=u",
        "-X",
        "sasl.password=p",
        "--",
        "true",
    ]);
    assert_eq!(code, 75, "{out}");
}

#[test]
fn kafka_config_file_supplies_brokers_and_properties() {
    let broker = crate::util::Broker::dev();
    let dir = crate::util::tempdir::Dir::new("kafka-config");
    let file = dir.path().join("client.properties");
    let props = format!(
        "# what a Java client would use\nbootstrap.servers={}\nsecurity.protocol=PLAINTEXT\nkey.serializer=org.example.S\n",
        broker.address
    );
    std::fs::write(&file, props).unwrap();
    let (code, out) = run(&["-g", "from-file", "--kafka-config", file.to_str().unwrap(), "--", "true"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("brokers={}", broker.address)), "{out}");

    std::fs::write(&file, "ssl.truststore.location=/etc/kafka/truststore.jks\n").unwrap();
    let (code, out) = run(&["-g", "g", "--kafka-config", file.to_str().unwrap(), "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("ssl.ca.location"), "{out}");

    let (code, out) = run(&["-g", "g", "--kafka-config", "/nonexistent/client.properties", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("/nonexistent/client.properties"), "{out}");
}

/// Extra environment variables for a run.
type Env<'a> = &'a [(&'a str, &'a str)];

/// A member of group g with `flags`, against a broker nobody listens on,
/// run with `env`: what a refusal at start-up says.
fn run_member(env: Env, flags: &[&str]) -> (i32, String) {
    let args: Vec<&str> =
        ["-g", "g", "-b", "127.0.0.1:1"].iter().chain(flags).chain(&["--", "true"]).copied().collect();
    run_env(env, &args)
}

/// `run`, with extra environment variables.
fn run_env(env: Env, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(crate::util::bin())
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run neli-run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn write_mode(path: &std::path::Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_mistyped_secret_key_names_the_key_and_a_fix_never_the_value() {
    let dir = crate::util::tempdir::Dir::new("typo-secret");
    let file = dir.path().join("client.properties");
    write_mode(&file, "sasl.pasword=TOPSECRET-typo\n", 0o600);
    let file = file.to_str().unwrap();
    let cases: [(Env, Vec<&str>, &str); 4] = [
        (&[], vec!["-X", "sasl.pasword=TOPSECRET-typo"], "(-X)"),
        (&[], vec!["--log-format", "json", "-X", "sasl.pasword=TOPSECRET-typo"], "(-X)"),
        (&[], vec!["--kafka-config", file], "line 1"),
        (&[("NELI_KAFKA_PROPERTIES", "sasl.pasword=TOPSECRET-typo")], vec![], "NELI_KAFKA_PROPERTIES"),
    ];
    for (env, extra, origin) in cases {
        let (code, out) = run_member(env, &extra);
        assert_eq!(code, 78, "{out}");
        assert!(!out.contains("TOPSECRET"), "the value was printed: {out}");
        assert!(out.contains("sasl.pasword") && out.contains("did you mean sasl.password?"), "{out}");
        assert!(out.contains(origin), "{origin}: {out}");
        assert_eq!(out.lines().count(), 1, "{out}");
    }
    // `status` refuses it the same way.
    let (code, out) = run(&["status", "-g", "g", "-b", "127.0.0.1:1", "-X", "sasl.pasword=TOPSECRET-typo"]);
    assert_ne!(code, 0, "{out}");
    assert!(!out.contains("TOPSECRET") && out.contains("did you mean sasl.password?"), "{out}");
}

#[test]
fn help_says_where_secrets_belong() {
    let (code, out) = run(&["--help"]);
    assert_eq!(code, 0);
    for needle in ["/proc/PID/cmdline", "mode 600", "--kafka-secret", "CREDENTIALS_DIRECTORY", "NELI_KAFKA_SECRETS"] {
        assert!(out.contains(needle), "--help lacks {needle}:\n{out}");
    }
}

#[test]
fn kafka_secret_errors_name_the_key_and_file_never_the_content() {
    let dir = crate::util::tempdir::Dir::new("secret-errors");
    let missing = dir.path().join("missing");
    let spec = format!("sasl.password={}", missing.display());
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--kafka-secret", &spec, "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--kafka-secret sasl.password=") && out.contains(missing.to_str().unwrap()), "{out}");
    let list = format!("security.protocol=/dev/null,{spec}");
    let (code, out) = run_env(&[("NELI_KAFKA_SECRETS", &list)], &["-g", "g", "-b", "127.0.0.1:1", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("sasl.password") && out.contains("missing"), "{out}");

    let nul = dir.path().join("nul");
    std::fs::write(&nul, "TOPSECRET\0x\n").unwrap();
    let spec = format!("sasl.password={}", nul.display());
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--kafka-secret", &spec, "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("sasl.password") && out.contains("NUL") && out.contains(nul.to_str().unwrap()), "{out}");
    assert!(!out.contains("TOPSECRET"), "{out}");
}

#[test]
fn kafka_config_with_a_secret_readable_by_others_warns_once() {
    let dir = crate::util::tempdir::Dir::new("config-mode");
    let file = dir.path().join("client.properties");
    // An unknown property makes the run stop (78) right after the check.
    let text = "sasl.password=TOPSECRET\nno.such.property=1\n";
    write_mode(&file, text, 0o644);
    let args = ["-g", "g", "-b", "127.0.0.1:1", "--kafka-config", file.to_str().unwrap(), "--", "true"];
    let (code, out) = run(&args);
    assert_eq!(code, 78, "{out}");
    let warnings: Vec<&str> = out.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{out}");
    assert!(warnings[0].contains("sasl.password") && warnings[0].contains("644") && warnings[0].contains("chmod 600"));
    assert!(!out.contains("TOPSECRET"), "{out}");
    write_mode(&file, text, 0o600);
    let (code, out) = run(&args);
    assert_eq!(code, 78, "{out}");
    assert!(!out.contains("WARN"), "{out}");
}

/// Static membership is refused, whichever way it is given: measured on the
/// dev broker, it would make every graceful handover wait out the session
/// (docs/proof.md, "Static membership").
#[test]
fn static_membership_is_refused_from_every_origin_and_says_why() {
    let dir = crate::util::tempdir::Dir::new("static-membership");
    let file = dir.path().join("client.properties");
    write_mode(&file, "group.instance.id=a\n", 0o600);
    let file = file.to_str().unwrap();
    let secret = format!("group.instance.id={file}");
    let cases: [(Env, Vec<&str>, &str); 4] = [
        (&[], vec!["-X", "group.instance.id=a"], "-X:"),
        (&[], vec!["--kafka-config", file], "line 1"),
        (&[], vec!["--kafka-secret", &secret], "--kafka-secret"),
        (&[("NELI_KAFKA_PROPERTIES", "group.instance.id=a")], vec![], "NELI_KAFKA_PROPERTIES"),
    ];
    for (env, extra, origin) in cases {
        let (code, out) = run_member(env, &extra);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains("group.instance.id: static membership is not supported"), "{out}");
        assert!(out.contains("graceful handover") && out.contains("remove it"), "{out}");
        assert!(out.contains(origin), "{origin}: {out}");
    }
}

#[test]
fn env_properties_errors_name_the_variable_and_never_a_fragment() {
    let env = [("NELI_KAFKA_PROPERTIES", "security.protocol=PLAINTEXT;sasl.password=pw;with;semicolon")];
    let (code, out) = run_env(&env, &["-g", "g", "-b", "127.0.0.1:1", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("NELI_KAFKA_PROPERTIES entry 3") && out.contains("\\;"), "{out}");
    assert!(!out.contains("-X") && !out.contains("with") && !out.contains("semicolon"), "{out}");
    let env = [("NELI_KAFKA_PROPERTIES", "=TOPSECRET")];
    let (code, out) = run_env(&env, &["-g", "g", "-b", "127.0.0.1:1", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("NELI_KAFKA_PROPERTIES") && !out.contains("TOPSECRET"), "{out}");
}

/// One password with a trailing space, a tab, a non-ASCII character and a
/// ';' reaches librdkafka intact from a Java properties file (escapes
/// decoded, trailing space kept), from NELI_KAFKA_PROPERTIES (`\;`), from a
/// --kafka-secret file, and inside sasl.jaas.config (`\"`, `\\`).
#[test]
fn secrets_with_awkward_characters_log_in_from_every_source() {
    let password = "p w;\t\u{20ac} ";
    let jaas_password = "q\"uote\\";
    let broker = crate::util::Broker::dev_with(
        "127.0.0.1",
        &["--sasl-user", &format!("alice:{password}"), "--sasl-user", &format!("bob:{jaas_password}")],
    );
    let dir = crate::util::tempdir::Dir::new("awkward-secrets");
    let common = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n";
    let props = dir.path().join("client.properties");
    write_mode(&props, &format!("{common}sasl.username=alice\nsasl.password=p w\\;\\t\\u20AC \n"), 0o600);
    let jaas = dir.path().join("jaas.properties");
    let jaas_text = r#"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
        username="bob" password="q\\"uote\\\\";"#;
    write_mode(&jaas, &format!("{common}{jaas_text}\n"), 0o600);
    let secret = dir.path().join("kafka-password");
    write_mode(&secret, &format!("{password}\n"), 0o600);
    let secret_spec = format!("sasl.password={}", secret.display());
    let env_list = format!(
        "security.protocol=SASL_PLAINTEXT;sasl.mechanism=PLAIN;sasl.username=alice;sasl.password={}",
        password.replace(';', "\\;")
    );

    let timing = broker.timing.args();
    let user = dir.path().join("kafka-user");
    write_mode(&user, "alice", 0o600);
    let env_secrets = format!("sasl.username={};sasl.password={}", user.display(), secret.display());
    let cases: [(&str, Env, Vec<&str>); 5] = [
        ("file", &[], vec!["--kafka-config", props.to_str().unwrap()]),
        ("jaas", &[], vec!["--kafka-config", jaas.to_str().unwrap()]),
        ("env", &[("NELI_KAFKA_PROPERTIES", &env_list)], vec![]),
        (
            "secret",
            &[],
            vec![
                "-X",
                "security.protocol=SASL_PLAINTEXT",
                "-X",
                "sasl.mechanism=PLAIN",
                "-X",
                "sasl.username=alice",
                "--kafka-secret",
                &secret_spec,
            ],
        ),
        (
            "env-secrets",
            &[("NELI_KAFKA_SECRETS", &env_secrets)],
            vec!["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN"],
        ),
    ];
    for (group, env, extra) in cases {
        let mut args = vec!["-g", group, "-b", &broker.address, "--acquire-timeout", "60s"];
        args.extend(timing.iter().map(String::as_str));
        args.extend(extra);
        args.extend(["--", "true"]);
        let (code, out) = run_env(env, &args);
        assert_eq!(code, 0, "{group}: {out}");
        assert!(out.contains("child started"), "{group}: {out}");
    }
}

#[test]
fn a_nul_byte_in_kafka_config_names_the_file_line_and_key() {
    let dir = crate::util::tempdir::Dir::new("config-nul");
    let file = dir.path().join("client.properties");
    write_mode(&file, "# c\nsecurity.protocol=PLAINTEXT\nsasl.password=TOP\0SECRET\n", 0o600);
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--kafka-config", file.to_str().unwrap(), "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("{} line 3", file.display())) && out.contains("sasl.password"), "{out}");
    assert!(out.contains("NUL") && !out.contains("TOP") && !out.contains("SECRET"), "{out}");
    // The same through a \u0000 escape, and a malformed \u escape.
    write_mode(&file, "sasl.password=a\\u0000b\nx=\\u12\n", 0o600);
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--kafka-config", file.to_str().unwrap(), "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("line 2") && out.contains("\\uXXXX") && out.contains(" x"), "{out}");
}

#[test]
fn absurd_durations_are_refused_in_one_line_without_a_panic() {
    let cases = [
        (["--session-timeout", "10000000000000000000s"], "--session-timeout"),
        (["--heartbeat-interval", "10000000000000000000s"], "--heartbeat-interval"),
        (["--heartbeat-deadline", "10000000000000000000s"], "--heartbeat-deadline"),
        (["--grace", "10000000000000000000s"], "--grace"),
        (["--restart-delay", "10000000000000000000s"], "--restart-delay"),
        (["--acquire-timeout", "10000000000000000000s"], "--acquire-timeout"),
        (["--session-timeout", "99999999h"], "group.max.session.timeout.ms"),
        (["-X", "max.poll.interval.ms=18446744073709551615"], "86400000"),
        (["-X", "heartbeat.interval.ms=18446744073709551615"], "3600000"),
    ];
    for (args, needle) in cases {
        let (code, out) = run_member(&[], &args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(needle), "{args:?}: {out}");
        assert_eq!(out.lines().count(), 1, "{args:?}: {out}");
    }
    let (code, out) =
        run(&["-g", "g", "-b", "127.0.0.1:1", "-X", "fetch.wait.max.ms=18446744073709551615", "--", "true"]);
    assert_eq!(code, 78, "{out}");
    assert!(out.contains("fetch.wait.max.ms") && out.contains("out of range"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
}

#[test]
fn stop_signals_that_cannot_stop_a_command_are_refused() {
    for (signal, why) in [
        ("SIGSTOP", "suspends"),
        ("KILL", "after --grace"),
        ("CHLD", "ignored by default"),
        ("CONT", "resumes"),
        ("WINCH", "ignored by default"),
        ("URG", "ignored by default"),
        ("TSTP", "suspends"),
        ("TTIN", "suspends"),
        ("TTOU", "suspends"),
    ] {
        let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--stop-signal", signal, "--", "true"]);
        assert_eq!(code, 2, "{signal}: {out}");
        assert!(out.contains(why) && out.contains("SIGTERM"), "{signal}: {out}");
        assert_eq!(out.lines().count(), 1, "{signal}: {out}");
    }
    let (code, out) = run_env(&[("NELI_STOP_SIGNAL", "STOP")], &["-g", "g", "-b", "127.0.0.1:1", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("NELI_STOP_SIGNAL"), "{out}");
}

#[test]
fn an_empty_command_is_not_found() {
    let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--", ""]);
    assert_eq!(code, 127, "{out}");
    assert!(out.contains("the command is empty"), "{out}");
}

#[test]
fn a_nonsense_broker_list_from_the_environment_is_refused_by_name() {
    for brokers in [":::", "::1", "k:1:2"] {
        let (code, out) = run_env(&[("NELI_BROKERS", brokers)], &["-g", "g", "--", "true"]);
        assert_eq!(code, 2, "{brokers}: {out}");
        assert!(out.contains("NELI_BROKERS") && out.contains("[::1]:9092"), "{brokers}: {out}");
    }
}

#[test]
fn a_leader_file_where_none_can_be_written_is_refused_with_the_fix() {
    let dir = std::env::temp_dir();
    let missing = dir.join("neli-no-such-dir").join("leader");
    let cases = [
        (missing.to_str().unwrap().to_string(), "does not exist (create it first)"),
        (dir.to_str().unwrap().to_string(), "is a directory; name a file in it"),
    ];
    for (path, why) in cases {
        let (code, out) = run(&["-g", "g", "-b", "127.0.0.1:1", "--leader-file", &path, "--", "true"]);
        assert_eq!(code, 2, "{path}: {out}");
        assert!(out.contains("--leader-file") && out.contains(why), "{path}: {out}");
    }
}

/// `neli-run FLAGS -- true` is a usage error (2) whose message says `why`.
fn refused(flags: &[&str], why: &str) {
    let (code, out) = run_member(&[], flags);
    assert_eq!(code, 2, "{flags:?}: {out}");
    assert!(out.contains(why), "{flags:?}: {out}");
}

#[test]
fn hooks_that_cannot_work_are_refused_with_the_fix() {
    let cases: [(&[&str], &str); 5] = [
        (&["--on-lead", " "], "--on-lead is empty: give a shell command line"),
        (&["--on-exit", ""], "--on-exit is empty: give a shell command line"),
        (&["--on-unlead", "true", "--hook-timeout", "0s"], "--hook-timeout must be more than 0"),
        (&["--on-unlead", "true", "--hook-timeout", "1h"], "--hook-timeout 1h: too long, at most 10m"),
        (&["--on-unlead", "true", "--hook-timeout", "soon"], "e.g. 500ms, 6s, 1m"),
    ];
    for (flags, why) in cases {
        refused(flags, why);
    }
}

#[test]
fn health_checks_that_cannot_work_are_refused_with_the_fix() {
    let cases: [(&[&str], &str); 6] = [
        (&["--health-cmd", " "], "--health-cmd is empty: give a shell command line"),
        (&["--health-cmd", "true", "--health-interval", "0s"], "--health-interval must be more than 0, e.g. 5s"),
        (&["--health-cmd", "true", "--health-timeout", "2h"], "--health-timeout 2h: too long, at most 10m"),
        (&["--health-cmd", "true", "--health-retries", "0"], "--health-retries must be at least 1"),
        (&["--health-cmd", "true", "--health-retries", "many"], "invalid value 'many' for '--health-retries <N>'"),
        // A threshold without a check would silently do nothing.
        (&["--health-interval", "1s"], "--health-cmd <CMD>"),
    ];
    for (flags, why) in cases {
        refused(flags, why);
    }
}

#[test]
fn warm_combinations_that_cannot_work_are_refused_with_the_fix() {
    let r = ["--restart", "always"];
    let cases: [(Vec<&str>, &str); 9] = [
        (vec!["--warm"], "--warm needs --restart on-failure or always"),
        (vec!["--warm", "--every", "5m"], "--warm and --every do not go together"),
        ([&r[..], &["--warm", "--once-within", "10s"]].concat(), "--warm and --once-within do not go together"),
        ([&r[..], &["--warm", "--max-runtime", "1m"]].concat(), "--warm and --max-runtime do not go together"),
        (
            [&r[..], &["--warm", "--lead-signal", "KILL"]].concat(),
            "--lead-signal SIGKILL: the command must be able to catch it",
        ),
        ([&r[..], &["--warm", "--unlead-signal", "TERM"]].concat(), "it is not the stop signal SIGTERM"),
        ([&r[..], &["--warm", "--lead-signal", "USR2"]].concat(), "--lead-signal and --unlead-signal are both SIGUSR2"),
        ([&r[..], &["--warm", "--lead-signal", "NOPE"]].concat(), "--lead-signal 'NOPE': not a signal name"),
        (vec!["--lead-signal", "HUP"], "--warm"),
    ];
    for (flags, why) in cases {
        refused(&flags, why);
    }
}

/// The README's env file with NELI_NEVER_LEAD=true, under the shipped
/// unit's `neli-run -- $NELI_COMMAND`: "the same unit file serves both kinds
/// of host" (docs/operations.md). What --never-lead has no use for is
/// ignored, with one warning that names the variables, and the member
/// watches the group.
#[test]
fn never_lead_from_the_environment_ignores_the_settings_it_does_not_use() {
    use nix::sys::signal::Signal;
    let g = crate::util::Group::new("never-lead-env");
    let env = [
        "NELI_NEVER_LEAD=true",
        "NELI_RESTART=always",
        "NELI_PRIORITY=0",
        "NELI_ON_LEAD=logger led",
        "NELI_HEALTH_INTERVAL=1s",
        "NELI_LEAD_SIGNAL=USR1",
        "NELI_PREEMPT=false",
    ];
    let prefix = std::iter::once("env").chain(env).map(String::from).collect();
    let mut w = g.member_in(Some(prefix), "w", &[], &["/usr/bin/billing-worker", "--queue", "nightly run"]);
    let t = g.broker.timing;
    crate::util::wait_until(t.takeover(), "w watches the group", || w.log().contains("watching the group"));
    w.signal(Signal::SIGTERM);
    assert_eq!(w.wait_exit(t.takeover()).code(), Some(0), "{}", w.log());
    let log = w.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN") && l.contains("NELI_")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    for var in ["NELI_RESTART", "NELI_PRIORITY", "NELI_ON_LEAD", "NELI_HEALTH_INTERVAL", "NELI_LEAD_SIGNAL"] {
        assert!(warnings[0].contains(var), "{var}: {log}");
    }
    // A flag set to false is not a setting.
    assert!(!warnings[0].contains("NELI_PREEMPT") && warnings[0].contains("--never-lead ignores"), "{log}");
    assert!(g.starts().is_empty(), "a member that never leads ran its command: {:?}", g.starts());
}

/// A conflict or a missing option that involves a value from the
/// environment names the variable and its value (what to fix); on the
/// command line, --never-lead still refuses what it does not use, the
/// default value too.
#[test]
fn conflicts_from_the_environment_name_the_variable() {
    let never_lead: Env = &[("NELI_NEVER_LEAD", "true")];
    let cases: [(Env, &[&str], &str); 9] = [
        (
            never_lead,
            &["--restart", "always"],
            "NELI_NEVER_LEAD=true (from the environment) cannot be used with '--restart <RESTART>'",
        ),
        (&[], &["--never-lead", "--priority", "0"], "the argument '--never-lead' cannot be used with '--priority <N>'"),
        (
            &[("NELI_RESTART", "always")],
            &["--never-lead", "--priority", "0"],
            "'--never-lead' cannot be used with '--priority <N>'",
        ),
        (&[("NELI_LEAD_SIGNAL", "USR1")], &[], "NELI_LEAD_SIGNAL=USR1 (from the environment) needs '--warm'"),
        (&[("NELI_WARM", "false")], &["--lead-signal", "HUP"], "the argument '--lead-signal <SIGNAL>' needs '--warm'"),
        (
            &[("NELI_HEALTH_RETRIES", "2")],
            &[],
            "NELI_HEALTH_RETRIES=2 (from the environment) needs '--health-cmd <CMD>'",
        ),
        (
            &[("NELI_EVERY", "5m"), ("NELI_CRON", "0 * * * *")],
            &[],
            "NELI_EVERY=5m (from the environment) cannot be used with NELI_CRON=0 * * * * (from the environment)",
        ),
        (
            &[("NELI_RESTART", "always")],
            &["--once-within", "5s"],
            "with NELI_RESTART=always (from the environment) the command runs as a service",
        ),
        (
            &[("NELI_WARM", "true"), ("NELI_RESTART", "always")],
            &["--max-runtime", "1m"],
            "NELI_WARM=true (from the environment) and --max-runtime do not go together",
        ),
    ];
    for (env, flags, why) in cases {
        let (code, out) = run_member(env, flags);
        assert_eq!(code, 2, "{env:?} {flags:?}: {out}");
        assert!(out.contains(why), "{env:?} {flags:?}: {out}");
    }
    // Set to false in the environment, --never-lead is not in force.
    let (code, out) = run_member(&[("NELI_NEVER_LEAD", "false")], &["--restart", "always", "--acquire-timeout", "1s"]);
    assert_eq!(code, 75, "{out}");
}

/// -X shows a secret to every local user (/proc/PID/cmdline): a warning
/// names the key and the safer places, never the value.
#[test]
fn a_secret_given_with_x_is_warned_about_without_its_value() {
    let flags = ["-X", "sasl.password=HUNTER2", "-X", "ssl.key.password=HUNTER3", "--acquire-timeout", "1s"];
    let (code, out) = run_member(&[], &flags);
    assert_eq!(code, 75, "{out}");
    let warnings: Vec<&str> = out.lines().filter(|l| l.contains("WARN") && l.contains("/proc/PID/cmdline")).collect();
    assert_eq!(warnings.len(), 1, "{out}");
    for needle in ["-X sasl.password", "-X ssl.key.password", "--kafka-secret", "NELI_KAFKA_SECRETS", "mode 600"] {
        assert!(warnings[0].contains(needle), "{needle}: {out}");
    }
    assert!(!out.contains("HUNTER"), "a secret was printed: {out}");
    // Not a secret, or not on the command line: no warning.
    let env = [("NELI_KAFKA_PROPERTIES", "sasl.password=HUNTER2")];
    let (code, out) = run_member(&env, &["-X", "ssl.key.location=/x.pem", "--acquire-timeout", "1s"]);
    assert_eq!(code, 75, "{out}");
    assert!(!out.contains("/proc/PID/cmdline") && !out.contains("HUNTER"), "{out}");
}

/// A negative --priority is said to be out of range, not taken for a
/// command (clap's tip `-- -1` would have made -1 the command).
#[test]
fn a_negative_priority_is_out_of_range() {
    let (code, out) = run_member(&[], &["--priority", "-1"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("-1 is not in 0..=100") && !out.contains("'-- -1'"), "{out}");
}

/// A --hot-standbys that is no count, from the flag or the environment,
/// is refused with what to give instead.
#[test]
fn a_hot_standbys_that_is_no_count_names_the_fix() {
    for (env, flags) in [
        (&[][..], &["--hot-standbys", "two"][..]),
        (&[][..], &["--hot-standbys", "-1"][..]),
        (&[("NELI_HOT_STANDBYS", "101")][..], &[][..]),
    ] {
        let (code, out) = run_member(env, flags);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains("--hot-standbys") && out.contains("not a count of 0 to 100; use how many"), "{out}");
    }
}

/// `--help` lists each command's exit statuses from src/exit.rs's one
/// table (the man pages' EXIT STATUS), not a copy kept by hand.
#[test]
fn help_lists_every_exit_status_of_each_command() {
    use neli_run::for_tests::{Status, STATUSES};
    type Meaning = fn(&Status) -> Option<&'static str>;
    let commands: [(&[&str], Meaning); 7] = [
        (&[], |s| s.run),
        (&["status"], |s| s.status),
        (&["yield"], |s| s.yield_),
        (&["pause"], |s| s.pause),
        (&["resume"], |s| s.pause),
        (&["dev-broker"], |s| s.dev_broker),
        (&["dev-broker", "event"], |s| s.event),
    ];
    for (sub, meaning) in commands {
        let (code, out) = run(&[sub, &["--help"]].concat());
        assert_eq!(code, 0, "{out}");
        let (_, listed) = out.split_once("\nExit status:\n").unwrap_or_else(|| panic!("{sub:?}: {out}"));
        let all: Vec<String> = STATUSES.iter().map(|s| s.code.label()).collect();
        let labels = listed.lines().filter_map(|l| l.strip_prefix("  ")?.split("  ").next());
        let labels: Vec<&str> = labels.filter(|l| all.iter().any(|a| a == l)).collect();
        let expected: Vec<String> = STATUSES.iter().filter(|s| meaning(s).is_some()).map(|s| s.code.label()).collect();
        assert_eq!(labels, expected, "{sub:?}: {out}");
        assert!(!out.contains("Exit status: ") && out.matches("Exit status").count() == 1, "{sub:?}: {out}");
    }
}
