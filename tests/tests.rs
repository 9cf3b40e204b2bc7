//! Integration tests: the real binary, real processes, real signals and a
//! real Kafka-protocol broker over TCP. One test binary (see Cargo.toml).

mod util;

mod backoff;
mod broken_log;
mod cli;
mod cluster;
mod crontab;
mod crontab_agree;
mod crontab_parity;
mod crontab_trust;
mod cut_schedule;
mod cut_wave;
mod daemons;
mod daylight_saving;
mod detector;
mod dev_broker;
mod docs;
mod election;
mod environment;
mod faults;
mod fetch_wait;
mod health;
mod history;
mod hooks;
mod layers;
mod leader_file;
mod limits;
mod metrics;
mod pause;
mod reload;
mod rewind;
mod roles;
mod roles_disagree;
mod roles_rollout;
mod sasl;
mod schedule;
mod standbys;
mod status;
mod supervision;
mod systemd;
mod tls;
mod wake;
mod wake_acl;
mod warm;
mod waves;
