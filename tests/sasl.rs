//! SASL against a broker that requires it: `neli-run dev-broker
//! --sasl-user`, whose forwarder implements Kafka's SASL exchange (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512). The client side is librdkafka's own, as
//! neli-run configures it from -X and from a Java properties file. (Neither
//! broker here logs in otherwise: the mock has no SASL, and tansu 0.6 keeps
//! no users in its memory storage.)

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{run, wait_until, Broker, Group};

fn sasl_group(test: &str) -> Group {
    Group::on(Broker::dev_with("127.0.0.1", &["--sasl-user", "alice:s3cret", "--sasl-user", "bob:other"]), test)
}

fn sasl(mechanism: &str, password: &str) -> Vec<String> {
    ["security.protocol=SASL_PLAINTEXT", &format!("sasl.mechanism={mechanism}"), "sasl.username=alice"]
        .into_iter()
        .map(String::from)
        .chain([format!("sasl.password={password}")])
        .flat_map(|p| ["-X".to_string(), p])
        .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// One member per mechanism in one group (the last one configured from a
/// Java client properties file): each logs in and joins, one leads, and
/// after a graceful stop another takes over.
#[test]
fn each_mechanism_logs_in_and_the_group_elects_and_hands_over() {
    let g = sasl_group("sasl");
    let props = g.dir.path().join("client.properties");
    std::fs::write(
        &props,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=\
         org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"s3cret\";\n",
    )
    .unwrap();
    let (plain, sha256) = (sasl("PLAIN", "s3cret"), sasl("SCRAM-SHA-256", "s3cret"));
    let members = [
        g.member("plain", &strs(&plain), &["sleep", "1000"]),
        g.member("sha256", &strs(&sha256), &["sleep", "1000"]),
        g.member("sha512", &["--kafka-config", &props.display().to_string()], &["sleep", "1000"]),
    ];
    let t = g.broker.timing;
    let joined = |m: &crate::util::Member| m.log().contains("standby") || m.log().contains("child started");
    wait_until(t.takeover(), "every member has logged in and joined", || members.iter().all(joined));
    wait_until(t.takeover(), "one leads", || g.lock_held());
    let leader = g.leader_among(&members);
    members[leader].signal(Signal::SIGTERM);
    wait_until(t.takeover(), "another member takes over", || g.starts().len() == 2 && g.lock_held());
    assert_ne!(g.starts()[1].0, members[leader].name);
    g.assert_no_overlap();
}

#[test]
fn a_wrong_password_exits_77_naming_what_to_check_and_never_the_password() {
    let g = sasl_group("sasl-wrong");
    let wrong = sasl("SCRAM-SHA-256", "n0pe-p4ss");
    let mut m = g.member_unguarded("m", &strs(&wrong), &["true"]);
    let status = m.wait_exit(Duration::from_secs(30));
    let log = m.log();
    assert_eq!(status.code(), Some(77), "{log}");
    assert!(log.contains("SASL authentication error"), "names the failure: {log}");
    assert!(log.contains("sasl.username") && log.contains("sasl.mechanism"), "names what to check: {log}");
    assert!(!log.contains("n0pe-p4ss"), "the password reached the log: {log}");
    assert!(g.starts().is_empty());
}

#[test]
fn dev_broker_refuses_a_sasl_user_without_a_password() {
    let (code, out) = run(&["dev-broker", "--listen", "127.0.0.1:0", "--sasl-user", "alice"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("USER:PASSWORD"), "{out}");
}
