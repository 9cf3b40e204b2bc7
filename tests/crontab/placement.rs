//! A crontab's jobs placed on the group topic's partitions: members whose
//! files differ agree on each job's partition, a file read again adds and
//! removes jobs and moves no other, and a job with no partition of its own
//! gets one added where the broker and the ACLs allow it (else it is
//! refused, naming the fix).

use super::Fleet;

/// The partition each job was placed on, as `member`'s log says.
fn placed(member: &crate::util::Member) -> std::collections::BTreeMap<String, String> {
    member
        .log()
        .lines()
        .filter(|l| l.contains("job placed"))
        .filter_map(|l| {
            let field = |k: &str| l.split(&format!(" {k}=")).nth(1)?.split(' ').next().map(str::to_string);
            Some((field("job")?, field("partition")?))
        })
        .collect()
}

#[test]
fn members_whose_files_differ_place_each_job_on_one_partition_and_run_only_their_own() {
    let fleet = Fleet::new("crontab-differ", &["a", "b", "c"], "1s", "0.1");
    let reversed = fleet.write("reversed.crontab", &["c", "b", "a"]);
    let only_b = fleet.write("b.crontab", &["b"]);
    // Two members placing the same jobs at once, their files in opposite
    // orders, then one whose file has only b.
    let one = fleet.member("one");
    let two = fleet.member_of("two", &reversed);
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "both placed their jobs", || {
        placed(&one).len() == 3 && placed(&two).len() == 3
    });
    assert_eq!(placed(&one), placed(&two), "{}\n{}", one.log(), two.log());
    let partitions: std::collections::BTreeSet<_> = placed(&one).into_values().collect();
    assert_eq!(partitions.len(), 3, "each job on a partition of its own: {:?}", placed(&one));
    crate::util::wait_until(takeover * 3, "every job ran", || fleet.newest().is_some());
    let mut three = fleet.member_of("three", &only_b);
    crate::util::wait_until(takeover * 2, "three placed b", || !placed(&three).is_empty());
    assert_eq!(placed(&three), placed(&one).into_iter().filter(|(j, _)| j == "b").collect());
    crate::util::wait_until(takeover * 2, "three owns a partition", || {
        three.log().contains("leader: read own heartbeat")
    });
    // Whatever partition three holds, it runs b only; one that holds
    // another job says so, and that job waits for a member whose file
    // has it (the rule, in docs/operations.md).
    let foreign = three.log().lines().any(|l| l.contains("role{role=") && l.contains("leader: read own heartbeat"));
    let warned = three.log().contains("holds a job our crontab does not have");
    assert_eq!(foreign, warned, "{}", three.log());
    let before = fleet.runs().len();
    three.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(three.wait_exit(takeover).success(), "{}", three.log());
    let runs = fleet.runs();
    assert!(runs.iter().all(|(job, _, m)| m != "three" || job == "b"), "{runs:?}");
    crate::util::wait_until(takeover * 3, "every job runs again once three left", || {
        let after: std::collections::BTreeSet<String> =
            fleet.runs().into_iter().skip(before).map(|(j, _, _)| j).collect();
        after.len() == 3
    });
    fleet.assert_once();
    drop((one, two));
}

/// Creates the group's topic with `partitions` partitions, as an operator
/// leaving room for jobs to come would.
fn create_topic(g: &crate::util::Group, partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", &g.broker.address).create().unwrap();
    let topic = format!("{}.neli", g.name);
    let new = NewTopic::new(&topic, partitions, TopicReplication::Fixed(1));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let created = runtime.block_on(admin.create_topics([&new], &AdminOptions::new())).unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
}

#[test]
fn a_crontab_read_again_changes_adds_and_removes_jobs_and_moves_no_other() {
    let fleet = Fleet::new("crontab-reload", &["a", "b"], "1s", "0.1");
    create_topic(&fleet.g, 3);
    let [addr] = crate::metrics::free_addrs();
    let mut one = fleet.member_with("one", &fleet.file, &["--metrics-addr", &addr]);
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "a and b run", || fleet.newest().is_some());
    let starts = |job: &str| fleet.runs().iter().filter(|(j, _, _)| j == job).count();
    let where_placed = placed(&one);

    // The file changes (an editor's rename): a runs on with its new line,
    // b is gone, c is new and takes the free partition.
    let new = fleet.write_greeting("new.crontab", &["a", "c"], "bye");
    std::fs::rename(&new, &fleet.file).unwrap();
    crate::util::wait_until(takeover * 2, "the file is read again", || one.log().contains("crontab read again"));
    let b_then = starts("b");
    crate::util::wait_until(takeover * 3, "c runs twice and a says bye", || {
        let lines = fleet.lines();
        starts("c") >= 2 && lines.iter().any(|w| w[0] == "start" && w[1] == "a" && w[4] == "bye")
    });
    assert!(starts("b") <= b_then + 1, "b starts no more runs (one may have been starting): {:?}", fleet.runs());
    let now_placed = placed(&one);
    assert_eq!(now_placed.get("a"), where_placed.get("a"), "a stays where it was: {}", one.log());
    assert!(now_placed.get("c").is_some_and(|p| Some(p) != where_placed.get("b")), "{}", one.log());
    assert!(!one.log().contains("revoked"), "nothing moved: {}", one.log());
    // /metrics has each job's series, by name.
    let (_, metrics) = crate::metrics::get(&addr, "/metrics").unwrap();
    for series in [
        "neli_job_owned{job=\"a\"} 1",
        "neli_job_owned{job=\"c\"} 1",
        // b's partition is still ours, and our file lacks b now.
        "neli_job_lacked{job=\"b\"} 1",
        "neli_job_last_exit_status{job=\"c\"} 0",
        "neli_job_last_lateness_seconds{job=\"a\"} ",
        "neli_job_last_duration_seconds{job=\"a\"} ",
        "neli_job_next_run_timestamp_seconds{job=\"c\"} ",
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }
    let runs = |job: &str| -> u64 {
        let series = format!("neli_job_runs_total{{job=\"{job}\",outcome=\"success\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |n| n.parse().unwrap())
    };
    assert!(runs("c") >= 1 && runs("a") >= 2, "{metrics}");

    // SIGHUP reads it again too; a file with no job changes nothing.
    std::fs::write(&fleet.file, "# nothing\n").unwrap();
    one.signal(nix::sys::signal::Signal::SIGHUP);
    crate::util::wait_until(takeover, "SIGHUP is heard", || one.log().contains("SIGHUP: reading the crontab again"));
    crate::util::wait_until(takeover, "the empty file is refused", || one.log().contains("no job to run"));
    let c_then = starts("c");
    crate::util::wait_until(takeover * 2, "c runs on", || starts("c") > c_then + 1);
    fleet.assert_once();
    one.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(one.wait_exit(takeover).success(), "{}", one.log());
}

/// The topic neli-run created holds a job on every partition: a job added
/// to the file takes a partition added for it (CreatePartitions, which the
/// dev broker serves), and the members seat it without a restart; no other
/// job moves.
#[test]
fn a_job_added_to_a_full_topic_gets_a_partition_added_and_runs_without_a_restart() {
    let mut fleet = Fleet::new("crontab-grow", &["a", "b"], "1s", "0.1");
    let (mut one, mut two) = (fleet.member("one"), fleet.member("two"));
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "a and b run", || fleet.newest().is_some());
    // Each member logs its placements once it has placed both jobs; two may
    // have run them before one is done.
    crate::util::wait_until(takeover * 2, "one placed a and b", || placed(&one).len() == 2);
    let where_placed = placed(&one);
    assert_eq!(where_placed.values().collect::<Vec<_>>(), ["0", "1"], "a partition per job: {}", one.log());
    crate::util::wait_until(takeover * 2, "a and b spread", || {
        let newest = fleet.newest().unwrap();
        newest["a"] != newest["b"]
    });
    let since = (one.log().len(), two.log().len());
    let ran_before = fleet.runs().len();

    // Both members read the file again (the fleet's one file changed):
    // whichever places c first adds a partition for it.
    let new = fleet.write("new.crontab", &["a", "b", "c"]);
    std::fs::rename(&new, &fleet.file).unwrap();
    fleet.jobs.push("c".into());
    crate::util::wait_until(takeover * 3, "c runs twice", || {
        fleet.runs().iter().filter(|(j, _, _)| j == "c").count() >= 2
    });
    let logs = || format!("{}\n{}", &one.log()[since.0..], &two.log()[since.1..]);
    crate::util::wait_until(takeover * 2, "one placed c", || placed(&one).contains_key("c"));
    assert_eq!(placed(&one).get("c").map(String::as_str), Some("2"), "{}", logs());
    assert!(logs().contains("adding partitions to the topic"), "{}", logs());
    assert!(logs().contains("a partition added to the topic: seated"), "{}", logs());
    assert!(!logs().contains("revoked"), "no job moved: {}", logs());
    let (code, out) = crate::util::run(&["status", "-b", &fleet.g.broker.address, "-g", &fleet.g.name]);
    assert_eq!(code, 0, "{out}");
    assert!(out.lines().any(|l| l.starts_with("  job c (role 2): ")), "status names the new job: {out}");
    for job in ["a", "b"] {
        let owners: std::collections::BTreeSet<String> =
            fleet.runs().into_iter().skip(ran_before).filter(|(j, _, _)| j == job).map(|(_, _, m)| m).collect();
        assert_eq!(owners.len(), 1, "{job} stayed where it ran: {:?}", fleet.runs());
    }
    // The new job moves as the others do: its owner's jobs go to the other.
    let c_owner = fleet.newest().unwrap()["c"].clone();
    let (gone, other) = if c_owner == "one" { (&mut one, "two") } else { (&mut two, "one") };
    gone.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(gone.wait_exit(takeover).success(), "{}", gone.log());
    let ran = fleet.runs().len();
    crate::util::wait_until(takeover * 3, "the other member runs every job", || {
        let since: std::collections::BTreeSet<String> =
            fleet.runs().into_iter().skip(ran).filter(|(_, _, m)| m == other).map(|(j, _, _)| j).collect();
        since.len() == 3
    });
    fleet.assert_once();
    drop((one, two));
}

/// A topic made by hand before the fleet starts (as operations.md
/// advises where members may not create topics), with one partition for
/// three jobs: the members add the two missing partitions and claim them
/// in the same placement, though their producer has not yet seen the
/// partitions added. Both members run, and every job runs.
#[test]
fn a_crontab_on_a_hand_made_topic_too_small_for_its_jobs_adds_partitions_and_runs_every_job() {
    let fleet = Fleet::new("crontab-small", &["a", "b", "c"], "1s", "0.1");
    let topic = format!("{}.neli", fleet.g.name);
    crate::dev_broker::create(&crate::dev_broker::admin_of(&fleet.g.broker), &topic, 1).expect("the topic made");
    let (mut one, mut two) = (fleet.member("one"), fleet.member("two"));
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 3, "every job runs", || {
        assert!(!one.exited() && !two.exited(), "a member exited: {}\n{}", one.log(), two.log());
        fleet.newest().is_some()
    });
    let mut partitions: Vec<String> = placed(&one).into_values().collect();
    partitions.sort();
    assert_eq!(partitions, ["0", "1", "2"], "a partition per job: {}", one.log());
    fleet.assert_once();
}

/// On a broker that cannot add partitions (tansu 0.6 serves no
/// CreatePartitions), a job with no partition of its own is refused, with
/// the command that adds one.
#[test]
fn a_job_with_no_partition_is_refused_naming_the_command_where_the_broker_cannot_add_one() {
    if neli_proof::brokers::find("tansu").is_none() {
        crate::util::skip("tansu 0.6.0 is not installed (.ci/run shows how)");
        return;
    }
    let mut fleet = Fleet::new("crontab-full", &["a", "b"], "1s", "0.1");
    let tansu = neli_proof::brokers::Broker::tansu("127.0.0.1", "127.0.0.1", &fleet.g.dir.path().join("tansu.log"));
    let tansu = tansu.unwrap();
    fleet.g.broker.address = tansu.address.clone();
    create_topic(&fleet.g, 1);
    let mut one = fleet.member("one");
    let status = one.wait_exit(fleet.g.broker.timing.takeover() * 2);
    let log = one.log();
    assert_eq!(status.code(), Some(78), "{log}");
    let fix = format!("--alter --topic {}.neli --partitions 2", fleet.g.name);
    assert!(log.contains("adding them failed (") && log.contains(&fix), "{log}");
    assert!(fleet.runs().is_empty(), "nothing ran: {:?}", fleet.runs());
}

/// ALTER denied on the group's topic: a new job is refused (the jobs there
/// go on), and once ALTER is granted, placing it, tried again by itself,
/// adds its partition and it runs, with no SIGHUP and no restart.
#[test]
fn a_job_refused_its_partition_is_placed_once_kafka_allows_it_without_a_reload() {
    let g = crate::util::Group::on(crate::util::Broker::cluster(1), "crontab-retry");
    let mut fleet = Fleet::on(g, &["a"], "1s", "0.1");
    let one = fleet.member("one");
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "a runs", || fleet.newest().is_some());
    let topic = format!("{}.neli", fleet.g.name);
    fleet.g.broker.event(&format!("deny-alter {topic}"));
    let new = fleet.write("new.crontab", &["a", "b"]);
    std::fs::rename(&new, &fleet.file).unwrap();
    crate::util::wait_until(takeover, "b is refused", || one.log().contains("placing is tried again"));
    let log = one.log();
    assert!(log.contains(&format!("--alter --topic {topic} --partitions 2")), "names the fix: {log}");
    let a_then = fleet.runs().len();
    crate::util::wait_until(takeover, "a runs on", || fleet.runs().len() > a_then + 1);
    assert!(fleet.runs().iter().all(|(job, _, _)| job == "a"), "{:?}", fleet.runs());

    fleet.g.broker.event(&format!("allow-alter {topic}"));
    fleet.jobs.push("b".into());
    crate::util::wait_until(takeover * 3, "b runs", || fleet.newest().is_some());
    assert!(one.log().contains("placing the jobs failed before: reading the crontab again"), "{}", one.log());
    assert!(!one.log().contains("SIGHUP"), "{}", one.log());
    fleet.assert_once();
}

/// Audit E3: one record on job J0's partition carrying another job's name
/// (anyone with WRITE on the topic can write it) made a member that started
/// next take the partition for the other job and claim a new partition for
/// J0, which then ran on both at one due time. The seats' own records
/// outvote it: the newcomer places J0 where the others did, claiming
/// nothing.
#[test]
fn one_forged_record_does_not_move_a_job_to_a_second_partition() {
    let fleet = Fleet::new("crontab-forged", &["hourly", "other"], "1h", "0");
    let (a, b) = (fleet.member("a"), fleet.member("b"));
    let takeover = fleet.g.broker.timing.takeover();
    crate::util::wait_until(takeover * 2, "a and b placed their jobs", || {
        placed(&a).len() == 2 && placed(&b).len() == 2
    });
    let at_0 = placed(&a).into_iter().find(|(_, p)| p == "0").map(|(job, _)| job).expect("a job on partition 0");
    let forged_name = if at_0 == "hourly" { "other" } else { "hourly" };
    crate::util::wait_until(takeover * 2, "partition 0's owner heartbeats", || {
        [&a, &b].iter().any(|m| m.log().contains("partition=0}: leader: read own heartbeat back"))
    });
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let forged = format!(
        r#"{{"v":2,"name":"forger","incarnation":"ffff","host":"h","pid":1,"seq":1,"sent_ns":1,"at_ms":{now},"token":null,"role":"released","run":0,"since_ms":null,"deadline_ms":0,"placed":"{forged_name}"}}"#
    );
    fleet.g.produce(forged.as_bytes());
    let c = fleet.member("c");
    crate::util::wait_until(takeover * 2, "c placed its jobs", || placed(&c).len() == 2);
    assert_eq!(placed(&c), placed(&a), "c places each job where a and b did: {}", c.log());
    assert!(!c.log().contains("claiming a partition for the job"), "{}", c.log());
}
