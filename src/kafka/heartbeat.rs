//! The heartbeat record: what a candidate or leader writes to partition 0.
//!
//! JSON, so that `kcat` and `neli-run status` can read it. A member is
//! its name plus a random incarnation: a restarted process with the same
//! name (the default name is reused when a PID is) must never mistake the
//! previous incarnation's records for its own. `sent_ns` is CLOCK_BOOTTIME
//! of the writer and so means something only to the writer itself.
//!
//! Version 2 adds `role`, `run` and `start` (see [`crate::leader::Record`]);
//! a version 1 record reads as leading while it has a token and as released
//! otherwise, which is all version 1 meant. `job` (once per wave) is an
//! optional field of version 2: older readers ignore it, and so are the
//! schedule's `due_ms`, `ended_ms` and a crontab job's `line` in it and
//! `next_ms` beside it,
//! `pause`, `unhealthy`, set while its writer's health check fails (what
//! `neli-run status` says of a leader handing over for it), a
//! disclaimer's `to` (the member its writer hands over to), `roles`,
//! its writer's --roles above 1 (the partition is then the role), and
//! under a crontab `crontab` and `jobs_on`: its writer's file's digest and
//! the partitions whose jobs that file has (a record without them reads as
//! from a member that runs whatever it owns, as before them), and `hot`,
//! the hot standbys the control partition's owner names (a record without
//! it names none, as an older owner's).

use serde::{Deserialize, Serialize};

use crate::clock::BootTime;
use crate::leader::{Asker, Attempt, HotList, Pause, PauseNote, Record, Runner, Stance};
use crate::printable::printable;

/// Who we are on the topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub incarnation: String,
    pub host: String,
    pub pid: u32,
}

impl Member {
    /// This process, with a fresh random incarnation.
    pub fn this_process(name: String) -> Member {
        let incarnation = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
            .map(|uuid| uuid.trim().replace('-', "")[..16].to_string())
            .unwrap_or_else(|_| format!("{:016x}", BootTime::now().as_nanos() ^ u64::from(std::process::id()) << 40));
        Member {
            name,
            incarnation,
            host: nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default(),
            pid: std::process::id(),
        }
    }
}

/// One heartbeat record's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Format version.
    pub v: u32,
    pub name: String,
    pub incarnation: String,
    pub host: String,
    pub pid: u32,
    pub seq: u64,
    pub sent_ns: u64,
    /// Wall clock (ms since the Unix epoch) when sent: for other machines.
    #[serde(default)]
    pub at_ms: u64,
    /// The writer's fencing token while its command may run.
    #[serde(default)]
    pub token: Option<i64>,
    /// "leading", "contending" or "released" (from version 2; "role" on
    /// the wire, from before NELI roles took the word).
    #[serde(default, rename = "role", skip_serializing_if = "Option::is_none")]
    pub stance: Option<WireStance>,
    /// The writer's term ([`crate::leader::Record::term`]; "run" on the
    /// wire since version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// The offset of the term's first record, once its writer read it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    /// Wall clock (ms since the epoch) when this leadership began.
    #[serde(default)]
    pub since_ms: Option<u64>,
    /// The writer's --heartbeat-deadline: older than this, it is not fresh.
    #[serde(default)]
    pub deadline_ms: u64,
    /// The newest attempt of a wave, or run of a schedule, its writer knew
    /// of ("job" on the wire, from before the crontab's jobs took the word).
    #[serde(default, rename = "job", skip_serializing_if = "Option::is_none")]
    pub attempt: Option<WireAttempt>,
    /// Wall clock (ms since the epoch) when its writer's schedule next
    /// runs, as it plans it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_ms: Option<u64>,
    /// That next run is a retry: the newest run's due time again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub next_retry: bool,
    /// The writer's timing in force, derived or given: for `status --json`,
    /// since most of it follows from --session-timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<WireTiming>,
    /// The group's newest pause or resume its writer knew of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<WirePause>,
    /// Its writer's health check (--health-cmd) fails: it hands over.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unhealthy: bool,
    /// A disclaimer's: the member (by name) its writer hands partition 0
    /// over to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Its writer's --roles, above 1: this record's partition is the role
    /// it leads (`neli-run status` reads every role's partition by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<u32>,
    /// Under a crontab, the job placed on this record's partition, as its
    /// writer knows it (see [`crate::leader::Placed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<String>,
    /// The record is a claim: written to place `placed` on a partition
    /// that held no job.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub claim: bool,
    /// Under a crontab, its writer's file's digest (`crontab::digest`):
    /// members that run by different files are told, and `status` names
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crontab: Option<String>,
    /// Under a crontab, the partitions whose jobs its writer's file has, as
    /// ranges (`0-4,6`, [`ranges`]): `status` tells an owner that does not
    /// run its partition's job, and a job that no member's file has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_on: Option<String>,
    /// On the control partition, the hot standbys its owner names and the
    /// `--hot-standbys` it chose them for (docs/hot-set.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot: Option<HotList>,
    /// Spaces, in the heartbeat whose list first names a member or whose
    /// disclaimer hands partition 0 to a member it does not name hot:
    /// enough for the parked fetches of cold members' watchers
    /// (`wake::CALL_BYTES`) to be answered by it, so that an invite or a
    /// hand-over costs one fetch round trip.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pad: String,
}

/// `partitions` (ascending) as ranges, `0-4,6`: a crontab member's
/// `jobs_on` stays a few bytes whatever its jobs.
pub fn ranges(partitions: impl IntoIterator<Item = i32>) -> String {
    let mut spans: Vec<(i32, i32)> = Vec::new();
    for p in partitions {
        match spans.last_mut() {
            Some((_, high)) if p == *high + 1 => *high = p,
            _ => spans.push((p, p)),
        }
    }
    let span = |&(low, high): &(i32, i32)| if low == high { low.to_string() } else { format!("{low}-{high}") };
    spans.iter().map(span).collect::<Vec<_>>().join(",")
}

/// Whether `ranges` (as [`ranges`] writes them) holds `partition`; a
/// piece that is no range holds nothing.
pub fn in_ranges(ranges: &str, partition: i32) -> bool {
    ranges.split(',').any(|piece| {
        let (low, high) = piece.split_once('-').unwrap_or((piece, piece));
        matches!((low.parse::<i32>(), high.parse::<i32>()), (Ok(low), Ok(high)) if (low..=high).contains(&partition))
    })
}

/// A [`PauseNote`] on the wire: the request as its record said it, and
/// whether the writer's command still ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WirePause {
    /// The request's offset: the newest wins.
    pub offset: i64,
    /// A pause; false for a resume.
    pub paused: bool,
    #[serde(default)]
    pub stop: bool,
    /// When it was asked (the asker's wall clock, ms since the epoch).
    pub at_ms: u64,
    #[serde(default)]
    pub by: Asker,
    /// Whether the writer's command may still run.
    #[serde(default)]
    pub running: bool,
}

impl WirePause {
    /// The request it names.
    pub fn request(&self) -> Pause {
        Pause { offset: self.offset, paused: self.paused, stop: self.stop, at_ms: self.at_ms, by: self.by.clone() }
    }
}

/// [`crate::config::timing::Timing`] on the wire, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireTiming {
    pub session_timeout_ms: u64,
    pub heartbeat_deadline_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub grace_ms: u64,
    pub coordinator_heartbeat_ms: u64,
}

impl From<&crate::config::timing::Timing> for WireTiming {
    fn from(t: &crate::config::timing::Timing) -> WireTiming {
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        WireTiming {
            session_timeout_ms: ms(t.session_timeout),
            heartbeat_deadline_ms: ms(t.heartbeat_deadline),
            heartbeat_interval_ms: ms(t.heartbeat_interval),
            grace_ms: ms(t.grace),
            coordinator_heartbeat_ms: ms(t.coordinator_heartbeat),
        }
    }
}

/// An [`Attempt`] on the wire (a record's `attempt`, `job` in its JSON):
/// wall-clock times, and who
/// ran it by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireAttempt {
    /// Wall clock (ms since the epoch) when the wave's first attempt started.
    pub wave_ms: u64,
    /// That attempt's token (absent from the first records with a job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_token: Option<i64>,
    pub attempt: u32,
    pub token: i64,
    /// Its exit status, once it ended on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u8>,
    /// Who ran it: its writer's name and host.
    pub name: String,
    pub host: String,
    /// Wall clock (ms since the epoch) of the due time it runs (a
    /// schedule's run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_ms: Option<u64>,
    /// Wall clock (ms since the epoch) when it ended on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// A crontab job's run: the digest of the line it ran by
    /// ([`crate::leader::Schedule::line`]); absent before it, which changes
    /// nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// [`Stance`] on the wire, for readers such as `kcat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireStance {
    Leading,
    Contending,
    Released,
}

/// What a heartbeat says beyond who wrote it and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub record: Record,
    /// Wall clock (ms since the epoch) when the leadership began.
    pub since_ms: Option<u64>,
    pub deadline_ms: u64,
}

impl Heartbeat {
    /// The record `member` sends as its `seq`th heartbeat at `sent`, which
    /// is `at_ms` on the wall clock (the caller reads the clocks).
    pub fn new(member: &Member, seq: u64, sent: BootTime, at_ms: u64, content: Content) -> Heartbeat {
        let Record { term, start, stance, attempt, next, pause, to, job: placed } = content.record;
        let wire_stance = match stance {
            Stance::Leading { .. } => WireStance::Leading,
            Stance::Contending => WireStance::Contending,
            Stance::Released => WireStance::Released,
        };
        let token = stance.token();
        Heartbeat {
            v: 2,
            name: member.name.clone(),
            incarnation: member.incarnation.clone(),
            host: member.host.clone(),
            pid: member.pid,
            seq,
            sent_ns: sent.as_nanos(),
            at_ms,
            token,
            stance: Some(wire_stance),
            run: Some(term),
            start,
            since_ms: content.since_ms.filter(|_| token.is_some()),
            deadline_ms: content.deadline_ms,
            attempt: attempt.map(|attempt| {
                let Runner { name, host } =
                    attempt.by.unwrap_or_else(|| Runner { name: member.name.clone(), host: member.host.clone() });
                WireAttempt {
                    wave_ms: attempt.wave_ms,
                    wave_token: Some(attempt.wave_token),
                    attempt: attempt.number,
                    token: attempt.token,
                    code: attempt.code,
                    name,
                    host,
                    due_ms: attempt.due,
                    ended_ms: attempt.ended,
                    line: attempt.line,
                }
            }),
            next_ms: next.map(|n| n.at_ms),
            next_retry: next.is_some_and(|n| n.retry),
            timing: None,
            pause: pause.map(|PauseNote { request: p, running }| WirePause {
                offset: p.offset,
                paused: p.paused,
                stop: p.stop,
                at_ms: p.at_ms,
                by: p.by,
                running,
            }),
            unhealthy: false,
            to,
            roles: None,
            placed,
            claim: false,
            crontab: None,
            jobs_on: None,
            hot: None,
            pad: String::new(),
        }
    }

    /// What it says of the crontab job placed on its partition.
    pub fn placed_job(&self) -> Option<crate::leader::Placed> {
        self.placed.clone().map(|job| crate::leader::Placed { job, claim: self.claim })
    }

    /// Serialized record value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a heartbeat always serializes")
    }

    /// Parses a record value; anything else on the topic is ignored.
    pub fn decode(bytes: &[u8]) -> Option<Heartbeat> {
        serde_json::from_slice(bytes).ok()
    }

    /// What the leadership core needs of another member's record, read at
    /// `offset` when our wall clock says `now_ms`. A record without a send
    /// time or deadline (older versions) is taken as just written with
    /// `ours`: the cautious reading.
    pub fn as_other(&self, offset: i64, ours: std::time::Duration, now_ms: u64) -> crate::leader::Other {
        let ms = std::time::Duration::from_millis;
        let stance = match (self.token, self.stance) {
            (Some(token), _) => Stance::Leading { token },
            (None, Some(WireStance::Contending)) => Stance::Contending,
            _ => Stance::Released,
        };
        crate::leader::Other {
            // Escaped: the leader logs it, and the writer chose it.
            // (printable is one-to-one, so distinct writers stay distinct.)
            writer: format!("{}/{}", printable(&self.name), printable(&self.incarnation)),
            seq: self.seq,
            offset,
            term: self.run,
            start: self.start,
            stance,
            age: if self.at_ms == 0 { ms(0) } else { ms(now_ms.saturating_sub(self.at_ms)) },
            deadline: if self.deadline_ms == 0 { ours } else { ms(self.deadline_ms) },
            attempt: self.attempt.as_ref().map(|job| Attempt {
                wave_ms: job.wave_ms,
                wave_token: job.wave_token.unwrap_or(job.token),
                number: job.attempt,
                token: job.token,
                code: job.code,
                by: Some(Runner { name: job.name.clone(), host: job.host.clone() }),
                due: job.due_ms,
                ended: job.ended_ms,
                line: job.line.clone(),
            }),
            pause: self.pause.as_ref().map(WirePause::request),
            to: self.to.clone(),
            job: self.placed_job(),
            hot: self.hot.clone(),
        }
    }

    /// Whether `member` wrote this record.
    pub fn is_from(&self, member: &Member) -> bool {
        self.name == member.name && self.incarnation == member.incarnation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::NextRun;

    /// 2023-11-14T22:13:20Z: the wall clock the tests' records are written at.
    const AT: u64 = 1_700_000_000_000;

    #[test]
    fn a_crontab_members_jobs_are_said_as_ranges_and_a_record_without_them_decodes() {
        assert_eq!(ranges([0, 1, 2, 3, 4, 6, 9, 10]), "0-4,6,9-10");
        assert_eq!(ranges([]), "");
        assert!(in_ranges("0-4,6,9-10", 4) && in_ranges("0-4,6,9-10", 6) && in_ranges("0-4,6,9-10", 10));
        assert!(!in_ranges("0-4,6,9-10", 5) && !in_ranges("", 0) && !in_ranges("x,-,2-", 2));
        let old = br#"{"v":2,"name":"a","incarnation":"i","host":"h","pid":1,"seq":1,"sent_ns":1,"placed":"j"}"#;
        let hb = Heartbeat::decode(old).expect("a record of before crontab and jobs_on");
        assert_eq!((hb.crontab, hb.jobs_on), (None, None));
        let hb = Heartbeat { crontab: Some("ab".into()), jobs_on: Some("0-2".into()), ..hb };
        assert_eq!(Heartbeat::decode(&hb.encode()), Some(hb));
    }

    #[test]
    fn the_hot_list_reads_back_an_older_record_names_none_and_an_older_reader_ignores_it() {
        let old = br#"{"v":2,"name":"a","incarnation":"i","host":"h","pid":1,"seq":1,"sent_ns":1,"at_ms":5,"token":3}"#;
        let hb = Heartbeat::decode(old).expect("a record of before the hot set");
        assert_eq!((hb.hot.clone(), hb.as_other(9, std::time::Duration::from_secs(3), AT).hot), (None, None));
        let plain = String::from_utf8(hb.encode()).unwrap();
        assert!(!plain.contains("hot"), "not written when there is none: {plain}");
        let hot = HotList { k: 2, names: vec!["b".into(), "c".into()] };
        let hb = Heartbeat { hot: Some(hot.clone()), ..hb };
        let bytes = hb.encode();
        assert!(String::from_utf8(bytes.clone()).unwrap().contains(r#""hot":{"k":2,"names":["b","c"]}"#));
        let back = Heartbeat::decode(&bytes).expect("a record with a list");
        assert_eq!(back.as_other(9, std::time::Duration::from_secs(3), AT).hot, Some(hot));
        // An older reader (serde ignores fields it does not know) reads the
        // rest as before.
        #[derive(Deserialize)]
        struct Older {
            name: String,
            token: Option<i64>,
            seq: u64,
        }
        let old: Older = serde_json::from_slice(&bytes).unwrap();
        assert_eq!((old.name.as_str(), old.token, old.seq), ("a", Some(3), 1));
    }

    #[test]
    fn round_trips_and_recognises_only_its_own_incarnation() {
        let me = Member::this_process("a".into());
        let record = Record { start: Some(5), ..Record::saying(2, Stance::Leading { token: 9 }) };
        let hb = Heartbeat::new(
            &me,
            3,
            BootTime::from_nanos(42),
            AT,
            Content { record, since_ms: Some(1), deadline_ms: 3000 },
        );
        let back = Heartbeat::decode(&hb.encode()).unwrap();
        assert_eq!(back, hb);
        assert!(back.is_from(&me));
        let restarted = Member::this_process("a".into());
        assert_ne!(restarted.incarnation, me.incarnation);
        assert!(!back.is_from(&restarted));
        assert_eq!(Heartbeat::decode(b"not json"), None);
    }

    #[test]
    fn an_attempt_reads_back_as_written_naming_its_runner_and_wave() {
        let me = Member::this_process("a".into());
        let wave_ms = AT - 5000;
        let job = Attempt {
            wave_ms,
            wave_token: 2,
            number: 2,
            token: 3,
            code: Some(0),
            by: None,
            due: None,
            ended: None,
            line: None,
        };
        let record = Record { attempt: Some(job.clone()), ..Record::saying(1, Stance::Released) };
        let content = Content { record, since_ms: None, deadline_ms: 1 };
        let hb = Heartbeat::decode(&Heartbeat::new(&me, 1, BootTime::from_nanos(1), AT, content).encode()).unwrap();
        let read = hb.as_other(4, std::time::Duration::from_secs(3), AT).attempt.unwrap();
        let by = Some(Runner { name: "a".into(), host: me.host.clone() });
        assert_eq!(read, Attempt { by, ..job });
        // The first records with a job had no wave token: the attempt's own.
        let mut old = hb.clone();
        old.attempt.as_mut().unwrap().wave_token = None;
        assert_eq!(old.as_other(4, std::time::Duration::from_secs(3), AT).attempt.unwrap().wave_token, 3);
    }

    #[test]
    fn a_scheduled_run_reads_back_with_its_due_time_ending_and_the_next_due_time() {
        let me = Member::this_process("a".into());
        // Before this machine booted: due times are wall clock, not BootTime.
        let (due, ended, next) = (1_700_000_000_000, 1_700_000_001_234, 1_700_000_300_000);
        let job = Attempt {
            wave_ms: AT,
            wave_token: 7,
            number: 1,
            token: 7,
            code: Some(3),
            by: None,
            due: Some(due),
            ended: Some(ended),
            line: Some("3f1c0a9b2e7d4c65".into()),
        };
        let record = Record {
            start: Some(7),
            attempt: Some(job.clone()),
            next: Some(NextRun { at_ms: next, retry: true }),
            ..Record::saying(1, Stance::Leading { token: 7 })
        };
        let hb =
            Heartbeat::new(&me, 1, BootTime::from_nanos(1), AT, Content { record, since_ms: None, deadline_ms: 1 });
        let json = String::from_utf8(hb.encode()).unwrap();
        assert!(json.contains(r#""due_ms":1700000000000"#) && json.contains(r#""ended_ms":1700000001234"#), "{json}");
        assert!(json.contains(r#""next_ms":1700000300000"#) && json.contains(r#""next_retry":true"#), "{json}");
        assert!(json.contains(r#""line":"3f1c0a9b2e7d4c65""#), "{json}");
        let read = |json: &str| {
            Heartbeat::decode(json.as_bytes())
                .unwrap()
                .as_other(8, std::time::Duration::from_secs(3), AT)
                .attempt
                .unwrap()
        };
        let by = Some(Runner { name: "a".into(), host: me.host.clone() });
        assert_eq!(read(&json), Attempt { by: by.clone(), ..job.clone() });
        // A record of before lines reads as a run that says none.
        let old = json.replace(r#","line":"3f1c0a9b2e7d4c65""#, "");
        assert_eq!(read(&old), Attempt { by, line: None, ..job });
    }

    #[test]
    fn a_carried_pause_reads_back_as_written_with_who_asked() {
        let me = Member::this_process("a".into());
        let by = Asker { user: Some("alice".into()), uid: Some(1000), ..Asker::default() };
        let request = Pause { offset: 3, paused: true, stop: true, at_ms: AT - 1, by };
        let record = Record {
            pause: Some(PauseNote { request: request.clone(), running: false }),
            ..Record::saying(1, Stance::Leading { token: 4 })
        };
        let content = Content { record, since_ms: None, deadline_ms: 1 };
        let json = Heartbeat::new(&me, 1, BootTime::from_nanos(1), AT, content).encode();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(text.contains(r#""pause":{"offset":3,"paused":true,"stop":true"#), "{text}");
        assert!(text.contains(r#""user":"alice""#) && text.contains(r#""running":false"#), "{text}");
        let read = Heartbeat::decode(&json).unwrap().as_other(8, std::time::Duration::from_secs(3), AT);
        assert_eq!(read.pause, Some(request));
    }

    #[test]
    fn records_read_as_the_stance_their_writer_meant_across_versions() {
        let deadline = std::time::Duration::from_secs(3);
        let v1 = |token: &str| {
            let json = format!(
                r#"{{"v":1,"name":"a","incarnation":"i","host":"h","pid":1,"seq":1,"sent_ns":1,"token":{token}}}"#
            );
            Heartbeat::decode(json.as_bytes()).unwrap().as_other(40, deadline, AT)
        };
        assert_eq!(v1("7").stance, Stance::Leading { token: 7 });
        assert_eq!(v1("null").stance, Stance::Released, "a version 1 candidate contends for nothing");
        assert_eq!(v1("null").term, None);
        let me = Member::this_process("b".into());
        let record = Record::contending(4);
        let hb =
            Heartbeat::new(&me, 1, BootTime::from_nanos(1), AT, Content { record, since_ms: Some(9), deadline_ms: 1 });
        assert_eq!(hb.since_ms, None, "only leadership has a beginning");
        let other = Heartbeat::decode(&hb.encode()).unwrap().as_other(41, deadline, AT + 250);
        assert_eq!((other.stance, other.term, other.start, other.offset), (Stance::Contending, Some(4), None, 41));
        // Its age is our wall clock against its writer's; a version 1
        // record (no wall clock) reads as just written.
        assert_eq!((other.age, v1("7").age), (std::time::Duration::from_millis(250), std::time::Duration::ZERO));
        assert!(String::from_utf8(hb.encode()).unwrap().contains(r#""role":"contending""#));
    }

    #[test]
    fn a_disclaimer_names_whom_it_hands_over_to_and_others_read_it() {
        let me = Member::this_process("a".into());
        let record = Record { to: Some("b".into()), ..Record::saying(1, Stance::Released) };
        let hb =
            Heartbeat::new(&me, 1, BootTime::from_nanos(1), AT, Content { record, since_ms: None, deadline_ms: 1 });
        let bytes = hb.encode();
        let other = Heartbeat::decode(&bytes).unwrap().as_other(3, std::time::Duration::from_secs(3), AT);
        assert_eq!((other.stance, other.to.as_deref()), (Stance::Released, Some("b")));
        // A heartbeat that hands over to nobody says nothing of it.
        let plain = Record::saying(1, Stance::Released);
        let hb = Heartbeat::new(
            &me,
            2,
            BootTime::from_nanos(2),
            AT,
            Content { record: plain, since_ms: None, deadline_ms: 1 },
        );
        assert!(!String::from_utf8(hb.encode()).unwrap().contains(r#""to""#));
        // Older readers (serde ignores fields it does not know) read it as a
        // plain disclaimer.
        #[derive(Deserialize)]
        struct Older {
            name: String,
            token: Option<i64>,
        }
        let old: Older = serde_json::from_slice(&bytes).unwrap();
        assert_eq!((old.name.as_str(), old.token), ("a", None));
    }
}
