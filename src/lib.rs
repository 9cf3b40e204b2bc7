//! neli-run: run a command on exactly one machine of a group, elected through
//! a Kafka consumer group (the Fast NELI protocol). See the README for the
//! user's view; each module opens with the part of the design it owns.
//!
//! - `leader`: the pure leadership state machine (events in, actions out).
//! - `run`: the shell that feeds it and carries out its actions.
//! - `kafka`: the rdkafka adapter (group membership, heartbeats, topic).
//! - `child`: the supervisor and its shim (process group, lease, reaping).
//! - `cli` / `config`: the command line, and the checks that make it safe.
//! - `dev_broker`: an in-memory Kafka-protocol broker for trying and testing.
//! - `status`: who leads a group, read from its heartbeat records.
//! - `proof`: the harness of neli-soak, neli-bench and the tests.
//! - `layers_off`: debug-build switches that let a test see one safety layer alone.
//! - `stderr`: reports that never block or panic, whatever reads our stderr.
//! - `notify`: systemd's `Type=notify` protocol; `metrics`: /metrics, /healthz, /leader.

pub mod child;
pub mod cli;
pub mod clock;
pub mod config;
pub mod dev_broker;
pub mod exit;
pub mod kafka;
#[doc(hidden)]
pub mod layers_off;
pub mod leader;
pub mod metrics;
pub mod notify;
#[doc(hidden)]
pub mod proof;
pub mod run;
pub mod status;
pub mod stderr;
