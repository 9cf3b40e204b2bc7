//! The pairing of a run's records and what `history` makes of a run with
//! no end.

use super::history::{assemble, Filter, State};
use super::{Event, RunRecord};

fn record(run: &str, event: Event, role: i32, job: Option<&str>, start_ms: u64) -> RunRecord {
    RunRecord {
        v: 1,
        run: run.into(),
        event,
        group: "g".into(),
        topic: "g.neli".into(),
        role,
        roles: None,
        job: job.map(String::from),
        member: "a".into(),
        host: "h".into(),
        pid: 1,
        token: 7,
        due_ms: None,
        wave_ms: None,
        attempt: None,
        start_ms,
        end_ms: (event == Event::End).then_some(start_ms + 5),
        exit_code: (event == Event::End).then_some(3),
        signal: None,
        warm: false,
        unlead: false,
        duration_ms: (event == Event::End).then_some(5),
        output: None,
        output_base64: None,
        output_bytes: None,
    }
}

fn all() -> Filter {
    Filter { role: None, job: None, since: None, until: None }
}

#[test]
fn a_run_is_its_end_when_written_else_its_start() {
    let runs = assemble(vec![record("x-1", Event::Start, 0, None, 10), record("x-1", Event::End, 0, None, 10)], &all());
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].state, runs[0].record.exit_code), (State::Ended, Some(3)));
    let runs = assemble(vec![record("x-1", Event::Start, 0, None, 10)], &all());
    assert_eq!(runs[0].state, State::Running);
}

#[test]
fn a_run_with_no_end_and_a_newer_run_of_its_seat_ended_unseen() {
    let records = vec![
        record("a-1", Event::Start, 0, None, 10),
        record("b-1", Event::Start, 1, None, 15),
        record("c-1", Event::Start, 0, None, 20),
    ];
    let runs = assemble(records, &all());
    let states: Vec<(&str, State)> = runs.iter().map(|r| (r.record.run.as_str(), r.state)).collect();
    // Role 1's run has no newer one: it runs still.
    assert_eq!(states, [("a-1", State::NoEnd), ("b-1", State::Running), ("c-1", State::Running)]);
}

#[test]
fn the_filters_keep_a_role_a_job_and_a_time() {
    let records = vec![
        record("a-1", Event::End, 0, Some("report"), 10),
        record("a-2", Event::End, 1, Some("ping"), 20),
        record("a-3", Event::End, 1, Some("ping"), 30),
    ];
    let runs = |filter: Filter| -> Vec<String> {
        assemble(records.clone(), &filter).into_iter().map(|r| r.record.run).collect()
    };
    assert_eq!(runs(Filter { role: Some(1), ..all() }), ["a-2", "a-3"]);
    assert_eq!(runs(Filter { job: Some("report".into()), ..all() }), ["a-1"]);
    assert_eq!(runs(Filter { since: Some(20), ..all() }), ["a-2", "a-3"]);
}

#[test]
fn a_record_reads_back_as_written_and_leaves_out_what_it_lacks() {
    let start = record("x-1", Event::Start, 0, None, 10);
    let json = serde_json::to_string(&start).unwrap();
    assert!(!json.contains("exit_code") && !json.contains("job"), "{json}");
    assert_eq!(serde_json::from_str::<RunRecord>(&json).unwrap(), start);
}

#[test]
fn a_warm_commands_run_says_so_and_one_ended_by_the_unlead_signal_reads_unlead() {
    let mut end = record("w-1", Event::End, 0, None, 10);
    (end.exit_code, end.warm, end.unlead) = (None, true, true);
    let json = serde_json::to_string(&end).unwrap();
    assert!(json.contains(r#""warm":true"#) && json.contains(r#""unlead":true"#), "{json}");
    assert_eq!(serde_json::from_str::<RunRecord>(&json).unwrap(), end);
    // Older records, and the default mode's, have neither key.
    let plain = serde_json::to_string(&record("x-1", Event::End, 0, None, 10)).unwrap();
    assert!(!plain.contains("warm") && !plain.contains("unlead"), "{plain}");
    assert_eq!(super::render::how_ended(&end), "unlead");
    // `logs` says why it has no output, not that its member kept none.
    let run = super::history::Run { record: end, state: State::Ended };
    let said = super::logs::kept(&run).unwrap_err().message;
    assert!(said.contains("ended with the unlead signal") && !said.contains("--keep-output 0"), "{said}");
}
