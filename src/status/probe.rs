//! The clients' context (`Probe`) of `status`, `yield`, `pause`, `resume`
//! and the `--never-lead` member: what librdkafka reported on the side
//! (a failed login, a refused write, where a record landed), so that a
//! failure reads as what it is.

use std::sync::Mutex;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use tracing::debug;

use super::Stop;
use crate::config::Target;
use crate::exit::{Failure, Kind};
use crate::printable::printable;

/// The clients' context: librdkafka's chatter goes to debug level (-v
/// shows it), and the errors it reports only there are kept, so that a
/// wrong password reads as one and not as "all brokers down".
pub(super) struct Probe {
    topic: String,
    group: String,
    /// The first error no retry fixes (authentication, authorization).
    pub(super) fatal: Mutex<Option<Failure>>,
    /// The latest other error, for "unreachable" messages.
    last: Mutex<Option<String>>,
    /// Why a record we wrote was not delivered, if it was not.
    pub(super) undelivered: Mutex<Option<String>>,
    /// Where the record we wrote landed, once delivered.
    pub(super) delivered: Mutex<Option<i64>>,
}

impl Probe {
    pub(super) fn new(target: &Target) -> Probe {
        Probe {
            topic: target.topic.clone(),
            group: target.group.clone(),
            fatal: Mutex::new(None),
            last: Mutex::new(None),
            undelivered: Mutex::new(None),
            delivered: Mutex::new(None),
        }
    }

    fn note(&self, err: &KafkaError, reason: &str) {
        let Some(code) = err.rdkafka_error_code() else { return };
        use RDKafkaErrorCode::*;
        let what = match code {
            Authentication | SaslAuthenticationFailed => format!("Kafka authentication failed: {reason}"),
            TopicAuthorizationFailed | GroupAuthorizationFailed | ClusterAuthorizationFailed => {
                format!("Kafka denied access: {err}")
            }
            _ => format!("{err}: {reason}"),
        };
        match crate::kafka::fatal(code, what, &self.topic, &self.group) {
            Some(fatal) => {
                self.fatal.lock().expect("probe lock").get_or_insert(fatal);
            }
            None => {
                let what = match code {
                    SSL => format!("TLS handshake failed: {reason}"),
                    _ => reason.to_string(),
                };
                *self.last.lock().expect("probe lock") = Some(what);
            }
        }
    }

    /// What to say when Kafka did not answer (`what` failed): the fatal
    /// error seen meanwhile, if any, else "unreachable" (69).
    pub(super) fn failure(&self, what: String) -> Stop {
        // librdkafka's reasons quote what brokers said: one line, escaped.
        if let Some(fatal) = self.fatal.lock().expect("probe lock").clone() {
            return Stop::Fail(Failure::new(fatal.kind, printable(&fatal.message)));
        }
        match self.last.lock().expect("probe lock").as_deref() {
            Some(last) if !what.contains(last) => {
                Stop::Fail(Failure::new(Kind::Unavailable, format!("{what} ({})", printable(last))))
            }
            _ => Stop::Fail(Failure::new(Kind::Unavailable, what)),
        }
    }
}

impl ClientContext for Probe {
    fn log(&self, _: RDKafkaLogLevel, fac: &str, message: &str) {
        debug!(target: "librdkafka", "{fac} {message}");
    }

    fn error(&self, err: KafkaError, reason: &str) {
        debug!(target: "librdkafka", %err, "{reason}");
        self.note(&err, reason);
    }
}

impl ConsumerContext for Probe {}

impl ProducerContext for Probe {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(msg) => *self.delivered.lock().expect("probe lock") = Some(msg.offset()),
            Err((err, _)) => {
                self.note(err, &err.to_string());
                *self.undelivered.lock().expect("probe lock") = Some(err.to_string());
            }
        }
    }
}
