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
fn unknown_flag_is_a_usage_error() {
    let (code, out) = run(&["--frobnicate", "-g", "g", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--frobnicate"), "{out}");
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
