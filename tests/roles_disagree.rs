//! Members of one group that disagree on `--roles` (findings ):
//! `status` counts every partition's role, names the members of another
//! `--roles` and exits 1 while a role runs nowhere; a member says, once, by
//! name, that another runs with another `--roles`; `--roles` on a topic with
//! more partitions is refused with the remedy; `{role}` without `--roles`,
//! and `--roles -1`, are clear usage errors.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::util::{run, wait_for, wait_until, Group, Member};

/// Each role's command: writes its member's name to `DIR/role.J`, then sleeps.
fn writing_member(g: &Group, name: &str, roles: &str) -> Member {
    let script = format!("echo \"$NELI_NAME\" > '{}'/role.$NELI_ROLE; exec sleep 1000", g.dir.path().display());
    g.member_unguarded(name, &["--roles", roles], &["sh", "-c", &script])
}

/// The member whose command started role `j` last, if any did.
fn runner(dir: &Path, j: usize) -> Option<String> {
    std::fs::read_to_string(dir.join(format!("role.{j}"))).ok().map(|s| s.trim().to_string())
}

/// Raises the group's topic to `count` partitions, as
/// `kafka-topics.sh --alter --partitions` does.
pub(crate) fn raise_partitions(g: &Group, count: usize) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", &g.broker.address).create().expect("an admin client");
    let topic = format!("{}.neli", g.name);
    let wanted = NewPartitions::new(&topic, count);
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let results = runtime.block_on(admin.create_partitions([&wanted], &opts)).expect("CreatePartitions answered");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}

fn status(g: &Group, json: bool) -> (i32, String) {
    let mut args = vec!["status", "-b", &g.broker.address, "-g", &g.name];
    if json {
        args.push("--json");
    }
    run(&args)
}

/// A group rolled from `--roles 3` to `--roles 6` (its topic raised to 6
/// partitions, then a member with `--roles 6` started): `status` counts 6
/// roles, lists the new member on each role it runs, names who says which
/// `--roles`, and exits 1 exactly while a role runs nowhere (text and JSON
/// alike); once the new member stops, the old one holds roles 3 to 5 and
/// runs none: "3 of 6", exit 1 (before: "3 of 3 roles led", exit 0). A new
/// member that takes the old one's roles says once, by name, that it ran
/// with --roles 3.
#[test]
fn status_counts_every_partition_and_names_the_members_of_another_roles() {
    let g = Group::new("roles-disagree");
    let dir = g.dir.path().to_path_buf();
    let mut m3 = writing_member(&g, "m3", "3");
    let within = g.broker.timing.takeover();
    wait_until(within, "m3 runs roles 0 to 2", || (0..3).all(|j| runner(&dir, j).as_deref() == Some("m3")));
    raise_partitions(&g, 6);
    let mut m6 = writing_member(&g, "m6", "6");
    wait_until(within, "m6 runs a role", || (0..6).any(|j| runner(&dir, j).as_deref() == Some("m6")));
    // Settled: every role m6 runs is listed as m6's, and the exit status
    // says whether every role runs.
    wait_until(within, "status agrees with who runs each role", || {
        let (code, out) = status(&g, false);
        let m6s: Vec<usize> = (0..6).filter(|&j| runner(&dir, j).as_deref() == Some("m6")).collect();
        let all = (0..6).all(|j| runner(&dir, j).is_some()) && out.contains("6 of 6 roles led");
        m6s.iter().all(|j| out.contains(&format!("role {j}: m6 (host")))
            && out.contains("of 6 roles led")
            && code == if all { 0 } else { 1 }
    });
    let (_, out) = status(&g, false);
    assert!(out.contains("members disagree on --roles (the topic has 6 partition(s), so 6 roles)"), "{out}");
    assert!(out.contains("--roles 3: m3 (runs roles 0-2 only"), "{out}");
    assert!(out.contains("--roles 6: m6"), "{out}");
    assert!(out.contains("Changing --roles"), "{out}");
    let (json_code, json) = status(&g, true);
    let json: serde_json::Value = serde_json::from_str(&json).expect(&json);
    assert_eq!(json["roles"].as_array().map(Vec::len), Some(6), "{json}");
    assert_eq!(json["partitions"], 6, "{json}");
    assert_eq!(json["roles_disagree"], true, "{json}");
    let said: Vec<(String, u64)> = json["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m["roles"].as_u64().unwrap()))
        .collect();
    assert!(said.contains(&("m3".into(), 3)) && said.contains(&("m6".into(), 6)), "{json}");
    // (Each its own snapshot: a role may start between the two reads.)
    assert_eq!(json["fresh"] == true, json_code == 0, "{json}");
    wait_until(within, "text and JSON exit alike", || status(&g, false).0 == status(&g, true).0);

    // m6 stops: m3 holds every partition and runs roles 0 to 2 only.
    m6.signal(Signal::SIGTERM);
    assert_eq!(m6.wait_exit(within).code(), Some(0), "{}", m6.log());
    wait_until(within, "status: 3 of 6 roles led, exit 1", || {
        let (code, out) = status(&g, false);
        code == 1 && out.contains("3 of 6 roles led") && out.contains("role 5: no leader")
    });
    let (code, json) = status(&g, true);
    assert_eq!(code, 1, "{json}");
    assert!(json.contains("\"fresh\":false"), "{json}");

    // A member with --roles 6 takes over all of m3's roles: it says once
    // that m3 ran with --roles 3, then runs all 6, and status exits 0.
    let mut m6b = writing_member(&g, "m6b", "6");
    wait_until(within, "m6b runs a role", || (0..6).any(|j| runner(&dir, j).as_deref() == Some("m6b")));
    m3.signal(Signal::SIGTERM);
    assert_eq!(m3.wait_exit(within).code(), Some(0), "{}", m3.log());
    wait_until(within, "m6b runs every role", || (0..6).all(|j| runner(&dir, j).as_deref() == Some("m6b")));
    let said = "member m3 runs with --roles 3, we with --roles 6: give every member of the group the same --roles";
    wait_until(within, "m6b names m3's --roles", || m6b.log().contains(said));
    assert_eq!(m6b.log().matches("member m3 runs with --roles").count(), 1, "once: {}", m6b.log());
    assert!(m6b.log().contains("docs/operations.md, \"Changing --roles\""), "{}", m6b.log());
    let mut last = (0, String::new());
    let agreed = wait_for(within, || {
        last = status(&g, false);
        last.0 == 0 && last.1.contains("6 of 6 roles led") && !last.1.contains("members disagree")
    });
    assert!(agreed, "status: 6 of 6 roles led, exit 0, nothing disagrees: {last:?}");
    m6b.signal(Signal::SIGTERM);
    m6b.wait_exit(within);
}

/// `--roles 3` on a topic of 6 partitions (made by a `--roles 6` member) is
/// refused (78) with the remedies, and no message prints a Rust struct; a
/// single leader there is warned, in words.
#[test]
fn roles_on_a_topic_with_more_partitions_are_refused_with_the_remedy() {
    let g = Group::new("roles-more");
    let mut six = g.member_unguarded("six", &["--roles", "6"], &["sleep", "1000"]);
    let within = g.broker.timing.takeover();
    wait_until(within, "the topic is made", || six.log().contains("leader: read own heartbeat back"));
    let mut three = g.member_unguarded("three", &["--roles", "3"], &["sleep", "1000"]);
    assert_eq!(three.wait_exit(within).code(), Some(78), "{}", three.log());
    let log = three.log();
    let topic = format!("{}.neli", g.name);
    assert!(log.contains(&format!("topic {topic} has 6 partitions, and --roles 3 uses 3")), "{log}");
    assert!(log.contains("run this member with --roles 6 too"), "{log}");
    assert!(log.contains("--topic, or another --group"), "{log}");
    assert!(log.contains(&format!("--delete --topic {topic}")), "{log}");
    assert!(!log.contains("Seats {"), "{log}");
    let mut one = g.member_unguarded("one", &[], &["sleep", "1000"]);
    let warned = "topic has more partitions than this member uses";
    wait_until(within, "the single leader's warning", || one.log().contains(warned));
    assert!(!one.log().contains("Seats {"), "{}", one.log());
    for m in [&mut six, &mut one] {
        m.signal(Signal::SIGTERM);
        m.wait_exit(within);
    }
}

/// `{role}` in the command without `--roles` is refused (it would reach the
/// command as it is), and `--roles -1` reaches the range check instead of
/// clap's tip to write `-- -1`.
#[test]
fn role_without_roles_and_a_negative_roles_are_clear_usage_errors() {
    let (code, out) = run(&["-g", "g", "--", "./worker", "--shard", "{role}"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("the command's argument {role} holds {role}, which neli-run replaces only with --roles"),
        "{out}"
    );
    assert!(out.contains("pass --roles N, or --roles 1"), "{out}");
    let (code, out) = run(&["-g", "g", "--roles", "-1", "--", "true"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("-1 is not in 1..=1024"), "{out}");
    assert!(!out.contains("tip:"), "{out}");
}
