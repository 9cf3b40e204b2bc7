use super::*;
use crate::cli::Cli;
use clap::Parser;

fn config(extra: &[&str]) -> Result<Config, Failure> {
    let mut argv = vec!["neli-run", "-g", "billing"];
    argv.extend_from_slice(extra);
    argv.extend_from_slice(&["--", "true"]);
    let cli = Cli::try_parse_from(argv).expect("parses");
    Config::from_args(cli.run, None)
}

#[test]
fn defaults_are_safe_and_derive_topic_and_name() {
    let c = config(&[]).unwrap();
    assert_eq!(c.kafka.topic, "billing.neli");
    assert!(c.name.ends_with(&format!("-{}", std::process::id())));
    assert_eq!(c.timing.session_timeout, Duration::from_secs(6));
    assert_eq!(c.timing.max_poll_interval, Duration::from_secs(12));
    assert_eq!(c.leader.stop_signal, crate::leader::Signal(Signal::SIGTERM as i32));
}

#[test]
fn missed_latest_is_once_as_a_crontab_says_it() {
    for (given, missed) in [("once", Missed::Once), ("latest", Missed::Once), ("all", Missed::All)] {
        let c = config(&["--every", "1m", "--missed", given]).unwrap();
        assert_eq!(c.leader.schedule.map(|s| s.missed), Some(missed), "{given}");
    }
}

#[test]
fn a_schedule_of_flags_names_its_line_so_members_on_other_flags_tell_its_runs_apart() {
    let line = |flags: &[&str]| config(flags).unwrap().leader.schedule.and_then(|s| s.line).expect("a line");
    assert_eq!(line(&["--every", "1m"]), line(&["--every", "60s", "--missed", "all"]));
    assert_ne!(line(&["--every", "1m"]), line(&["--every", "15s"]));
    let cron = line(&["--cron", "*/5 * * * *", "--time-zone", "Europe/Paris"]);
    assert_ne!(cron, line(&["--cron", "*/5 * * * *", "--time-zone", "UTC"]));
    assert_ne!(cron, line(&["--cron", "*/5 * * * *"]));
    assert_ne!(cron, line(&["--cron", "*/10 * * * *", "--time-zone", "Europe/Paris"]));
}

#[test]
fn bad_durations_name_the_flag_and_the_format() {
    // Parsed by clap, which reports it against the flag.
    let e = Cli::try_parse_from(["neli-run", "-g", "g", "--grace", "5 parsecs", "--", "true"]).unwrap_err();
    let e = e.to_string();
    assert!(e.contains("'--grace <DURATION>'") && e.contains("parsecs") && e.contains("500ms"), "{e}");
}

#[test]
fn deadline_must_cover_two_heartbeats() {
    let e = config(&["--heartbeat-interval", "2s", "--heartbeat-deadline", "3s"]).unwrap_err();
    assert!(e.message.contains("twice"), "{e}");
}

#[test]
fn deadline_must_fence_before_the_session_expires() {
    let e = config(&["--heartbeat-deadline", "5500ms"]).unwrap_err();
    assert!(e.message.contains("at most 5s") && e.message.contains("at least 6s 500ms"), "{e}");
    assert!(config(&["--heartbeat-deadline", "5000ms"]).is_ok());
}

#[test]
fn grace_must_end_before_the_session_expires() {
    let e = config(&["--grace", "10s"]).unwrap_err();
    assert!(e.message.contains("--grace") && e.message.contains("at least 11s"), "{e}");
    assert!(config(&["--grace", "10s", "--session-timeout", "11s"]).is_ok());
}

#[test]
fn coordinator_heartbeat_and_poll_interval_rules() {
    let e = config(&["-X", "heartbeat.interval.ms=3000"]).unwrap_err();
    assert!(e.message.contains("a third"), "{e}");
    let e = config(&["-X", "max.poll.interval.ms=5000"]).unwrap_err();
    assert!(e.message.contains("at least --session-timeout"), "{e}");
    let e = config(&["-X", "max.poll.interval.ms=6000", "--grace", "3s", "--session-timeout", "6s"]);
    assert!(e.is_ok());
}

#[test]
fn properties_owned_by_flags_are_refused() {
    let e = config(&["-X", "group.id=x"]).unwrap_err();
    assert!(e.message.contains("--group"), "{e}");
    let e = config(&["-X", "novalue"]).unwrap_err();
    assert!(e.message.contains("KEY=VALUE"), "{e}");
}

#[test]
fn compression_from_any_origin_is_not_used() {
    let dir = std::env::temp_dir().join(format!("neli-compression-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("producer.properties");
    std::fs::write(&file, "compression.type=gzip\nlinger.ms=5\n").unwrap();
    let c = config(&[
        "--kafka-config",
        file.to_str().unwrap(),
        "-X",
        "compression.codec=lz4",
        "-X",
        "compression.type=zstd",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    let c = c.unwrap();
    assert_eq!(c.kafka.properties, vec![("linger.ms".into(), "5".into())]);
    let client = c.kafka.client_config(&[]);
    assert_eq!((client.get("compression.type"), client.get("compression.codec")), (None, None));
}

#[test]
fn env_properties_come_first_and_flags_win() {
    let cli = Cli::try_parse_from(["neli-run", "-g", "g", "-X", "client.rack=2", "--", "true"]).unwrap();
    let c = Config::from_args(cli.run, Some("client.rack=1;linger.ms=3;".into())).unwrap();
    assert_eq!(
        c.kafka.properties,
        vec![("client.rack".into(), "1".into()), ("linger.ms".into(), "3".into()), ("client.rack".into(), "2".into())]
    );
    assert_eq!(c.kafka.origins, vec![Origin::Env(1), Origin::Env(2), Origin::Flag]);
    assert_eq!(c.kafka.origin("client.rack"), "-X");
    assert_eq!(c.kafka.origin("linger.ms"), "NELI_KAFKA_PROPERTIES entry 2");
}

#[test]
fn unknown_properties_are_refused_with_a_suggestion_and_no_value() {
    let e = config(&["-X", "sasl.pasword=TOPSECRET"]).unwrap_err();
    assert_eq!(e.kind, Kind::KafkaConfig);
    assert!(e.message.contains("sasl.pasword") && e.message.contains("did you mean sasl.password?"), "{e}");
    assert!(!e.message.contains("TOPSECRET"), "{e}");
    let e = config(&["-X", "security.protocol=bogus"]).unwrap_err();
    assert_eq!(e.kind, Kind::KafkaConfig);
    assert!(e.message.contains("security.protocol") && e.message.contains("-X"), "{e}");
}

#[test]
fn absurd_durations_are_refused_without_overflow() {
    for flag in ["--session-timeout", "--heartbeat-interval", "--heartbeat-deadline", "--grace"] {
        let e = config(&[flag, "10000000000000000000s"]).unwrap_err();
        assert!(e.message.contains(flag) && e.message.contains("at most 30m"), "{e}");
    }
    let e = config(&["--session-timeout", "99999999h"]).unwrap_err();
    assert!(e.message.contains("group.max.session.timeout.ms"), "{e}");
    assert!(config(&["--session-timeout", "30m"]).is_ok());
    let e = config(&["--restart-delay", "10000000000000000000s"]).unwrap_err();
    assert!(e.message.contains("--restart-delay"), "{e}");
    let e = config(&["--acquire-timeout", "10000000000000000000s"]).unwrap_err();
    assert!(e.message.contains("--acquire-timeout"), "{e}");
    let e = config(&["-X", "max.poll.interval.ms=18446744073709551615"]).unwrap_err();
    assert!(e.message.contains("86400000") && !e.message.contains("-1"), "{e}");
    assert_eq!(e.message.lines().count(), 1);
    let e = config(&["-X", "heartbeat.interval.ms=18446744073709551615"]).unwrap_err();
    assert!(e.message.contains("3600000"), "{e}");
    assert_eq!(timing::default_max_poll_interval(Duration::MAX, Duration::MAX), Duration::MAX);
}

#[test]
fn empty_command_is_not_found() {
    let cli = Cli::try_parse_from(["neli-run", "-g", "g", "--", ""]).unwrap();
    let e = Config::from_args(cli.run, None).unwrap_err();
    assert_eq!(e.kind, Kind::NotFound);
    assert!(e.message.contains("empty"), "{e}");
}

#[test]
fn signals_by_name_or_number() {
    assert_eq!(parse_signal("INT").unwrap(), Signal::SIGINT);
    assert_eq!(parse_signal("sigquit").unwrap(), Signal::SIGQUIT);
    assert_eq!(parse_signal("9").unwrap(), Signal::SIGKILL);
    assert!(parse_signal("SIGNOPE").is_err());
    assert!(parse_signal("99").is_err());
}

#[test]
fn stop_signals_that_cannot_stop_are_refused() {
    for sig in ["STOP", "KILL", "CHLD", "CONT", "WINCH", "URG", "TSTP", "TTIN", "TTOU", "9"] {
        let e = stop_signal(sig).unwrap_err();
        assert!(e.message.contains("SIGTERM"), "{sig}: {e}");
    }
    for sig in ["TERM", "INT", "QUIT", "HUP", "USR1", "USR2"] {
        assert!(stop_signal(sig).is_ok(), "{sig}");
    }
}
