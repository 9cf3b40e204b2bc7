//! The timing of a member: `--session-timeout` and what follows from it.
//!
//! One flag sets a safe timing, as consul lock and etcdctl lock take one TTL:
//! every other duration that guards safety is derived from the session
//! timeout S unless the user gives it, and what the user gives is checked
//! against the safety inequalities below (docs/how-it-works.md, "The timing rules"), with
//! the flag to change named in the refusal.
//!
//! 1. `heartbeat_deadline >= 2 * heartbeat_interval`: one late record must
//!    not fence a healthy leader.
//! 2. `heartbeat_deadline + coordinator_heartbeat + MARGIN <= session_timeout`:
//!    a leader cut off from Kafka kills its command before the coordinator
//!    can expire its session and hand partition 0 to someone else. The
//!    coordinator's clock started at our last coordinator heartbeat, which
//!    can be one coordinator heartbeat interval before our last record.
//! 3. `grace + coordinator_heartbeat + MARGIN <= session_timeout`: the revoke
//!    barrier must end before the coordinator could expel us for going
//!    quiet in the callback (librdkafka's mock cluster does; see docs/how-it-works.md).
//! 4. `grace + MARGIN <= max.poll.interval.ms`: Kafka's rebalance timeout.
//! 5. `3 * coordinator_heartbeat <= session_timeout` and
//!    `session_timeout <= max.poll.interval.ms` (librdkafka's own rules).

use std::time::Duration;

use crate::exit::{Failure, Kind};

/// Slack for the timer, the kill and the scheduler in every inequality.
pub const MARGIN: Duration = Duration::from_millis(500);
/// The longest coordinator heartbeat interval derived. A graceful handover
/// no longer waits for it (the wake carries it: docs/how-it-works.md, "How
/// long a handover takes"); what it still sets is how soon the standbys
/// hear that a crashed leader's session ran out (up to one interval after
/// it), a handover to a member without the wake (an older version, or
/// `--no-wake`), and the requests every member sends: two a second. Not
/// longer, because rule 2 takes it off the heartbeat deadline: at the
/// default session of 6 s, 500 ms leaves a deadline of 5 s and a request
/// timeout of 3 s, the half a session that network blips are promised
/// (200 ms sent five a second for a handover the wake now makes).
pub const COORDINATOR_HEARTBEAT: Duration = Duration::from_millis(500);
/// The longest heartbeat interval derived: two records a second.
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);
/// The longest grace derived: as long as it was before the timing was
/// derived, and shorter than every common stop timeout (systemd's 90 s,
/// docker's 10 s).
const GRACE: Duration = Duration::from_secs(3);
/// How often librdkafka looks for requests past their timeout (fixed, in
/// rd_kafka_broker_serve): a stuck request is noticed up to this late.
const TIMEOUT_SCAN: Duration = Duration::from_secs(1);
/// How long the broker may hold an owner's fetch of its own partitions
/// (`Timing::read_back_wait`).
const READ_BACK_WAIT: Duration = Duration::from_millis(250);
/// librdkafka warns when `socket.timeout.ms` is below `fetch.wait.max.ms`
/// plus this.
const FETCH_WAIT_ROOM: Duration = Duration::from_secs(1);
/// The longest: librdkafka's default, never raised.
const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The shortest session timeout the others are derived from: below it the
/// margin leaves no room for a heartbeat deadline.
pub const MIN_DERIVED_SESSION: Duration = Duration::from_secs(1);

/// What the user asked for: the session timeout, and each other duration if
/// given (with -X for the two librdkafka properties).
#[derive(Clone, Copy, Debug, Default)]
pub struct Requested {
    pub session_timeout: Duration,
    pub coordinator_heartbeat: Option<Duration>,
    pub heartbeat_interval: Option<Duration>,
    pub heartbeat_deadline: Option<Duration>,
    pub grace: Option<Duration>,
    pub max_poll_interval: Option<Duration>,
}

/// The timing in force, every value safe together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub session_timeout: Duration,
    /// librdkafka's `heartbeat.interval.ms`: how often a member tells the
    /// group coordinator it lives.
    pub coordinator_heartbeat: Duration,
    /// How often the leader writes a heartbeat record to partition 0.
    pub heartbeat_interval: Duration,
    /// How long without an own heartbeat read back before the fence.
    pub heartbeat_deadline: Duration,
    /// Between the stop signal and SIGKILL.
    pub grace: Duration,
    /// librdkafka's `max.poll.interval.ms`, Kafka's rebalance timeout.
    pub max_poll_interval: Duration,
}

/// `max.poll.interval.ms` unless set with -X: Kafka's rebalance timeout,
/// which is also how long librdkafka waits for a JoinGroup answer. Its
/// default of 5 minutes left members stuck that long after a broker pause
/// (found by neli-soak); the consumer thread polls every 100 ms and blocks
/// at most for the revoke barrier, so a short one is safe.
pub fn default_max_poll_interval(session: Duration, grace: Duration) -> Duration {
    session.saturating_mul(2).max(session.saturating_add(grace).saturating_add(MARGIN))
}

/// The longest heartbeat deadline the rules allow with this session timeout
/// and coordinator heartbeat: S - H - MARGIN.
fn budget(session: Duration, coordinator_heartbeat: Duration) -> Duration {
    session.saturating_sub(coordinator_heartbeat.saturating_add(MARGIN))
}

fn d(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn unsafe_timing<T>(msg: String) -> Result<T, Failure> {
    Err(Failure::new(Kind::Usage, format!("unsafe timing: {msg}")))
}

impl Timing {
    /// The timing for `req`: what was not given follows from the session
    /// timeout S. The coordinator heartbeat H = min(500ms, S/10); the
    /// heartbeat deadline D = S - H - 500ms, the longest the rules allow, so
    /// that a network blip shorter than it never stops the command; the
    /// heartbeat interval min(500ms, S/12); the grace min(3s, S/2), within
    /// the same bound as D. A value the user gave that breaks a rule is
    /// refused, naming it.
    pub fn derive(req: Requested) -> Result<Timing, Failure> {
        let session = req.session_timeout;
        let derives = req.coordinator_heartbeat.is_none()
            || req.heartbeat_interval.is_none()
            || req.heartbeat_deadline.is_none()
            || req.grace.is_none();
        if derives && session < MIN_DERIVED_SESSION {
            return Err(Failure::new(
                Kind::Usage,
                format!(
                    "--session-timeout {} is too short: the other timings follow from it after a margin of {} \
                     for timers and kills, so it must be at least {}",
                    d(session),
                    d(MARGIN),
                    d(MIN_DERIVED_SESSION)
                ),
            ));
        }
        let coordinator_heartbeat = req.coordinator_heartbeat.unwrap_or(COORDINATOR_HEARTBEAT.min(session / 10));
        let budget = budget(session, coordinator_heartbeat);
        let heartbeat_interval = req.heartbeat_interval.unwrap_or(HEARTBEAT_INTERVAL.min(session / 12));
        let grace = req.grace.unwrap_or(GRACE.min(session / 2).min(budget));
        let timing = Timing {
            session_timeout: session,
            coordinator_heartbeat,
            heartbeat_interval,
            heartbeat_deadline: req.heartbeat_deadline.unwrap_or(budget),
            grace,
            max_poll_interval: req.max_poll_interval.unwrap_or(default_max_poll_interval(session, grace)),
        };
        timing.check(&req)?;
        Ok(timing)
    }

    /// librdkafka's `socket.timeout.ms` for both clients (unless set with
    /// -X): a request unanswered this long takes its connection down
    /// (`socket.max.fails` 1), and the next one goes out on a new one.
    ///
    /// After a network blip, a connection whose packets were dropped stays
    /// silent until TCP retransmits, and TCP backs off (on a LAN 0.2, 0.6,
    /// 1.4, 3.0, 6.2 s after the first send): a blip of 3.5 s kept every
    /// connection silent for 6.2 s, past the heartbeat deadline. A heartbeat sent in the blip is now
    /// either through, or its connection replaced, within this timeout
    /// and librdkafka's once-a-second scan for timeouts: with the heartbeat
    /// before it one interval earlier and the margin for the reconnect and
    /// the read-back, `interval + this + scan + MARGIN` is the deadline, so
    /// any blip shorter than this timeout leaves the command running.
    /// That is 3 s at the default session timeout of 6 s, the half
    /// a session (3 s) that blips are promised. Only connections change:
    /// the fence still fires at the deadline whatever this is.
    pub fn request_timeout(&self) -> Duration {
        let stuck = self.heartbeat_deadline.saturating_sub(self.heartbeat_interval + TIMEOUT_SCAN + MARGIN);
        stuck.clamp(self.read_back_wait() + FETCH_WAIT_ROOM, MAX_REQUEST_TIMEOUT)
    }

    /// How long the broker may hold an owner's fetch of its own partitions
    /// (`fetch.wait.max.ms`): 250 ms, whatever the session.
    ///
    /// Kafka (and the dev broker) answer a held fetch as soon as a record
    /// arrives, so there the wait only sets how many fetches an idle owner
    /// sends: about 4 a second at 250 ms (2 records and the empty answers
    /// between), 2 at 500 ms, 10 at 100 ms. Only owners fetch with the
    /// group's consumer; a standby sends none. A broker that holds a fetch
    /// whatever arrives reads our heartbeats back late: tansu 0.6 sleeps
    /// after every look at the partition, half the wait left from 250 ms
    /// up and all of it below, so a record comes back up to about the wait
    /// late at 250 ms and up (a fetch with records there is answered after
    /// half the wait), twice the wait below it (librdkafka's mock holds an
    /// empty fetch for the whole wait). At the former 500 ms a leader's
    /// heartbeats came back on tansu 0.5-0.9 s late under load, and the
    /// read-back after a network blip took a wait more: blips of 0.8 s and
    /// 1.3 s fenced it (issue 65). 250 ms is about the least lateness
    /// there (at 100 ms, up to 200 ms) for less than half the fetches.
    pub fn read_back_wait(&self) -> Duration {
        READ_BACK_WAIT
    }

    /// `socket.timeout.ms` of the group's consumer, whose fetches wait up
    /// to `wait`: the request timeout less that wait. librdkafka gives a fetch
    /// `socket.timeout.ms + fetch.wait.max.ms` (rd_kafka_broker_fetch_toppars),
    /// so a read-back stuck after a blip is given up within
    /// `request_timeout`, as every other request, and the deadline's sum
    /// holds for it too.
    pub fn read_back_timeout(&self, wait: Duration) -> Duration {
        self.request_timeout().saturating_sub(wait).max(wait + FETCH_WAIT_ROOM)
    }

    /// The safety inequalities of the module doc. Every duration is bounded
    /// by now; the arithmetic saturates all the same. A rule broken only by
    /// values derived from the session timeout cannot happen at or above
    /// MIN_DERIVED_SESSION, so each refusal names a value the user gave.
    fn check(&self, req: &Requested) -> Result<(), Failure> {
        let session = self.session_timeout;
        let hb = self.coordinator_heartbeat;
        let twice = |d: Duration| d.saturating_mul(2);
        let deadline = self.heartbeat_deadline;
        // What to say of the heartbeat deadline when it is not the user's.
        let or_leave_out = |given: bool, flag: &str| match given {
            true => String::new(),
            false => format!(" ({flag} follows from --session-timeout unless given)"),
        };
        if self.heartbeat_interval.is_zero() {
            return Err(Failure::new(Kind::Usage, "--heartbeat-interval must be more than 0"));
        }
        if deadline < twice(self.heartbeat_interval) {
            let fix = match req.heartbeat_deadline {
                Some(_) => format!(
                    "Raise --heartbeat-deadline to at least {} or lower --heartbeat-interval to at most {}.",
                    d(twice(self.heartbeat_interval)),
                    d(deadline / 2)
                ),
                None => format!("Lower --heartbeat-interval to at most {}.", d(deadline / 2)),
            };
            return unsafe_timing(format!(
                "--heartbeat-deadline {}{} is less than twice --heartbeat-interval {}, so one late heartbeat \
                 would fence a healthy leader. {fix}",
                d(deadline),
                or_leave_out(req.heartbeat_deadline.is_some(), "it"),
                d(self.heartbeat_interval),
            ));
        }
        if hb.saturating_mul(3) > session {
            return unsafe_timing(format!(
                "the coordinator heartbeat (heartbeat.interval.ms) {} must be at most a third of \
                 --session-timeout {}. Lower -X heartbeat.interval.ms to at most {} (or leave it out) or raise \
                 --session-timeout to at least {}.",
                d(hb),
                d(session),
                d(session / 3),
                d(hb.saturating_mul(3))
            ));
        }
        let budget = budget(session, hb);
        if deadline > budget {
            return unsafe_timing(format!(
                "--heartbeat-deadline {} + coordinator heartbeat {} + margin {} exceeds --session-timeout {}: a \
                 leader cut off from Kafka could still run its command after the group gave partition 0 to \
                 another member. Lower --heartbeat-deadline to at most {} (or leave it out: it follows from \
                 --session-timeout), or raise --session-timeout to at least {}.",
                d(deadline),
                d(hb),
                d(MARGIN),
                d(session),
                d(budget),
                d(deadline.saturating_add(hb).saturating_add(MARGIN))
            ));
        }
        if self.grace > budget {
            return unsafe_timing(format!(
                "--grace {} + coordinator heartbeat {} + margin {} exceeds --session-timeout {}: while the old \
                 leader waits for its command to stop, the group could expel it and start another. Lower --grace \
                 to at most {} (or leave it out: it follows from --session-timeout), or raise --session-timeout \
                 to at least {}.",
                d(self.grace),
                d(hb),
                d(MARGIN),
                d(session),
                d(budget),
                d(self.grace.saturating_add(hb).saturating_add(MARGIN))
            ));
        }
        if session > self.max_poll_interval {
            return Err(Failure::new(
                Kind::Usage,
                format!(
                    "max.poll.interval.ms {} must be at least --session-timeout {} (librdkafka's rule).",
                    d(self.max_poll_interval),
                    d(session)
                ),
            ));
        }
        if self.grace.saturating_add(MARGIN) > self.max_poll_interval {
            return unsafe_timing(format!(
                "--grace {} + margin {} exceeds the rebalance timeout (max.poll.interval.ms {}). Raise -X \
                 max.poll.interval.ms to at least {}.",
                d(self.grace),
                d(MARGIN),
                d(self.max_poll_interval),
                self.grace.saturating_add(MARGIN).as_millis()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn session(s: Duration) -> Requested {
        Requested { session_timeout: s, ..Requested::default() }
    }

    #[test]
    fn the_default_session_derives_the_documented_timing() {
        let t = Timing::derive(session(ms(6000))).unwrap();
        assert_eq!(
            t,
            Timing {
                session_timeout: ms(6000),
                coordinator_heartbeat: ms(500),
                heartbeat_interval: ms(500),
                heartbeat_deadline: ms(5000),
                grace: ms(3000),
                max_poll_interval: ms(12000),
            }
        );
        assert_eq!(t.request_timeout(), ms(3000));
        assert_eq!((t.read_back_wait(), t.read_back_timeout(t.read_back_wait())), (ms(250), ms(2750)));
    }

    #[test]
    fn a_short_session_alone_derives_a_safe_timing() {
        let t = Timing::derive(session(ms(2000))).unwrap();
        assert_eq!((t.coordinator_heartbeat, t.heartbeat_deadline, t.grace), (ms(200), ms(1300), ms(1000)));
        assert_eq!(t.heartbeat_interval, ms(2000) / 12);
        assert_eq!(t.read_back_wait(), ms(250));
        let t = Timing::derive(session(ms(1000))).unwrap();
        assert_eq!((t.coordinator_heartbeat, t.heartbeat_deadline, t.grace), (ms(100), ms(400), ms(400)));
        assert_eq!((t.read_back_wait(), t.request_timeout()), (ms(250), ms(1250)));
        // At the floor librdkafka's own rule wins: a wait and a second.
        assert_eq!(t.read_back_timeout(t.read_back_wait()), ms(1250));
    }

    #[test]
    fn every_derived_timing_keeps_every_rule() {
        // From the floor to Kafka's longest session, in 10 ms steps below a
        // minute and 1 s steps above: check() is the rules themselves.
        let short = (1000..60_000).step_by(10);
        let long = (60_000..=1_800_000).step_by(1000);
        for s in short.chain(long) {
            let t = Timing::derive(session(ms(s))).unwrap_or_else(|e| panic!("{s} ms: {e}"));
            assert!(t.heartbeat_deadline + t.coordinator_heartbeat + MARGIN <= t.session_timeout, "{t:?}");
            if s >= 2000 {
                // Room for a network blip of half the session timeout, and
                // the retransmission that ends it.
                assert!(t.heartbeat_deadline >= t.session_timeout / 2 + ms(300), "{t:?}");
            }
            // A blip that the request timeout ends leaves the heartbeats
            // back before the deadline (when it is not the floor).
            let stuck = t.request_timeout();
            assert!(stuck >= t.read_back_wait() + FETCH_WAIT_ROOM, "{t:?}");
            if stuck > t.read_back_wait() + FETCH_WAIT_ROOM && stuck < MAX_REQUEST_TIMEOUT {
                assert_eq!(t.heartbeat_interval + stuck + TIMEOUT_SCAN + MARGIN, t.heartbeat_deadline, "{t:?}");
            }
            // The read-back's fetch, given its wait on top of the consumer's
            // socket timeout, is given up no later than any other request.
            let fetch = t.read_back_timeout(t.read_back_wait()) + t.read_back_wait();
            assert!(fetch <= stuck.max(t.read_back_wait() * 2 + FETCH_WAIT_ROOM), "{t:?}");
            if t.read_back_timeout(t.read_back_wait()) > t.read_back_wait() + FETCH_WAIT_ROOM {
                assert_eq!(fetch, stuck, "{t:?}");
            }
            // From the default session timeout up (to librdkafka's default,
            // never raised): the stuck connections of a blip of half a
            // session are replaced only after it, not while it lasts.
            if s >= 6000 && stuck < MAX_REQUEST_TIMEOUT {
                assert!(stuck >= t.session_timeout / 2, "{t:?}");
            }
        }
    }

    #[test]
    fn a_session_too_short_to_derive_from_is_refused_naming_it() {
        let e = Timing::derive(session(ms(900))).unwrap_err();
        assert!(e.message.contains("--session-timeout 900ms is too short") && e.message.contains("at least 1s"));
        // Every value given: the rules alone decide.
        let all = Requested {
            session_timeout: ms(900),
            coordinator_heartbeat: Some(ms(50)),
            heartbeat_interval: Some(ms(100)),
            heartbeat_deadline: Some(ms(300)),
            grace: Some(ms(300)),
            max_poll_interval: None,
        };
        assert!(Timing::derive(all).is_ok());
    }

    #[test]
    fn a_given_value_that_breaks_a_rule_is_named() {
        let req = |f: fn(&mut Requested)| {
            let mut r = session(ms(6000));
            f(&mut r);
            Timing::derive(r).unwrap_err().message
        };
        let e = req(|r| r.heartbeat_deadline = Some(ms(5500)));
        assert!(e.contains("at most 5s") && e.contains("at least 6s 500ms"), "{e}");
        let e = req(|r| r.heartbeat_interval = Some(ms(3000)));
        assert!(e.contains("Lower --heartbeat-interval to at most 2s 500ms") && !e.contains("Raise --heartbeat"));
        let e = req(|r| r.grace = Some(ms(10_000)));
        assert!(e.contains("--grace") && e.contains("at least 11s"), "{e}");
        let e = req(|r| r.coordinator_heartbeat = Some(ms(3000)));
        assert!(e.contains("a third") && e.contains("at most 2s"), "{e}");
    }

    #[test]
    fn the_user_s_values_win_over_derived_ones() {
        let r = Requested {
            heartbeat_deadline: Some(ms(3000)),
            grace: Some(ms(1000)),
            coordinator_heartbeat: Some(ms(500)),
            ..session(ms(6000))
        };
        let t = Timing::derive(r).unwrap();
        assert_eq!((t.heartbeat_deadline, t.grace, t.coordinator_heartbeat), (ms(3000), ms(1000), ms(500)));
        assert_eq!(t.heartbeat_interval, ms(500));
        assert_eq!(t.max_poll_interval, ms(12000));
    }
}
