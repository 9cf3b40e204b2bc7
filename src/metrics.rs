//! `--metrics-addr`: what an operator's tools ask of a running member.
//!
//! - `/metrics`: Prometheus text (leader or not, fencing token, heartbeat age,
//!   transitions by kind, fences, child restarts, child up, Kafka reachable;
//!   with a schedule, runs by outcome, the last success and the next due
//!   time).
//! - `/healthz`: 200 while Kafka is reachable, 503 otherwise.
//! - `/leader`: 200 only on the member running the command: for load
//!   balancers and readiness probes.
//!
//! Three GET endpoints with fixed answers do not need an HTTP framework: the
//! server reads one request head, answers, and closes the connection.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::clock::BootTime;
use crate::leader::{Job, Role};

/// What the run loop reports; read by the HTTP server.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub role: Option<Role>,
    /// Send time of the newest own heartbeat read back, while we own p0.
    pub fresh: Option<BootTime>,
    pub child_up: bool,
    pub kafka_reachable: bool,
    pub transitions: BTreeMap<&'static str, u64>,
    pub child_restarts: u64,
    last_start_token: Option<i64>,
    /// This member's runs (of a wave or a schedule) by how they ended.
    runs: BTreeMap<&'static str, u64>,
    /// The last of our runs counted: (token, due time, attempt).
    counted: Option<(i64, Option<u64>, u32)>,
    /// When the newest successful scheduled run we know of ended (wall ms).
    last_success_ms: Option<u64>,
    /// When the schedule is next due, as we plan it (wall ms).
    pub next_due_ms: Option<u64>,
}

/// Shared between the run loop and the server.
pub type Shared = Arc<Mutex<Snapshot>>;

impl Snapshot {
    /// Records a change of role, counting it by kind.
    pub fn set_role(&mut self, role: Role) {
        let kind = match (self.role, role) {
            (Some(old), new) if old == new => return,
            (_, Role::Standby) if self.role.is_none() => "joined",
            (_, Role::Standby) => "revoked",
            (_, Role::Candidate) => "candidate",
            (Some(Role::Fenced), Role::Leader { .. }) => "resumed",
            (_, Role::Leader { .. }) => "leader",
            (_, Role::Fenced) => "fenced",
        };
        *self.transitions.entry(kind).or_default() += 1;
        self.role = Some(role);
    }

    /// Records a start of the command; a second start under the same token
    /// is a restart (`--restart`), a new token a new leadership or a resume.
    pub fn child_started(&mut self, token: i64) {
        if self.last_start_token == Some(token) {
            self.child_restarts += 1;
        }
        self.last_start_token = Some(token);
    }

    /// Takes in the newest run the core knows of: counts our own once it
    /// is over (`child_up` false), and notes a success's end.
    pub fn note_run(&mut self, job: Option<&Job>, child_up: bool) {
        let Some(job) = job else { return };
        if let (Some(0), Some(ended)) = (job.code, job.ended) {
            self.last_success_ms = Some(self.last_success_ms.map_or(ended, |t| t.max(ended)));
        }
        let key = (job.token, job.due, job.attempt);
        if job.by.is_none() && !child_up && self.counted != Some(key) {
            self.counted = Some(key);
            let outcome = match job.code {
                Some(0) => "success",
                Some(_) => "failure",
                None => "cut_short",
            };
            *self.runs.entry(outcome).or_default() += 1;
        }
    }

    fn is_leader(&self) -> bool {
        matches!(self.role, Some(Role::Leader { .. })) && self.child_up
    }

    /// The Prometheus text exposition.
    pub fn render(&self, now: BootTime) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let one = |v: f64| vec![(String::new(), v)];
        let token = match self.role {
            Some(Role::Leader { token }) => token as f64,
            _ => -1.0,
        };
        metric(
            "neli_leader",
            "gauge",
            "1 while this member leads and runs the command.",
            &one(self.is_leader() as u8 as f64),
        );
        metric(
            "neli_fencing_token",
            "gauge",
            "Fencing token of the current leadership, -1 when not leading.",
            &one(token),
        );
        if let Some(fresh) = self.fresh {
            let age = now.since(fresh).as_secs_f64();
            metric("neli_heartbeat_age_seconds", "gauge", "Age of the newest own heartbeat read back.", &one(age));
        }
        let kinds: Vec<(String, f64)> = ["joined", "candidate", "leader", "fenced", "resumed", "revoked"]
            .iter()
            .map(|k| (format!("{{kind=\"{k}\"}}"), *self.transitions.get(k).unwrap_or(&0) as f64))
            .collect();
        metric("neli_transitions_total", "counter", "Changes of role, by the role entered.", &kinds);
        let fences = *self.transitions.get("fenced").unwrap_or(&0) as f64;
        metric("neli_fences_total", "counter", "Times the command was killed for stale heartbeats.", &one(fences));
        let restarts = self.child_restarts as f64;
        metric("neli_child_restarts_total", "counter", "Starts of the command within one leadership.", &one(restarts));
        metric("neli_child_up", "gauge", "1 while the command runs.", &one(self.child_up as u8 as f64));
        metric("neli_kafka_reachable", "gauge", "1 while Kafka answers.", &one(self.kafka_reachable as u8 as f64));
        let outcomes: Vec<(String, f64)> = ["success", "failure", "cut_short"]
            .iter()
            .map(|k| (format!("{{outcome=\"{k}\"}}"), *self.runs.get(k).unwrap_or(&0) as f64))
            .collect();
        metric(
            "neli_runs_total",
            "counter",
            "Runs of the command this member started (of a wave or a schedule), by how they ended.",
            &outcomes,
        );
        let seconds = |ms: u64| ms as f64 / 1000.0;
        if let Some(ms) = self.last_success_ms {
            let help = "When the newest successful scheduled run this member knows of ended (Unix time).";
            metric("neli_last_success_timestamp_seconds", "gauge", help, &one(seconds(ms)));
        }
        if let Some(ms) = self.next_due_ms {
            let help = "When the schedule's next run is due, while this member leads (Unix time).";
            metric("neli_next_run_timestamp_seconds", "gauge", help, &one(seconds(ms)));
        }
        out
    }
}

/// Binds `addr` now, so a bad address fails at start-up, and serves it.
pub async fn serve(addr: SocketAddr, shared: Shared) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream, shared.clone()));
        }
    });
    Ok(())
}

async fn answer(mut stream: TcpStream, shared: Shared) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    });
    if read.await.is_err() {
        return;
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, body) = {
        let s = shared.lock().expect("metrics lock");
        match (method, path.split('?').next().unwrap_or("")) {
            ("GET", "/metrics") => ("200 OK", s.render(BootTime::now())),
            ("GET", "/healthz") if s.kafka_reachable => ("200 OK", "ok\n".into()),
            ("GET", "/healthz") => ("503 Service Unavailable", "Kafka unreachable\n".into()),
            ("GET", "/leader") if s.is_leader() => ("200 OK", "leader\n".into()),
            ("GET", "/leader") => ("503 Service Unavailable", "not leader\n".into()),
            ("GET", _) => ("404 Not Found", "try /metrics, /healthz or /leader\n".into()),
            _ => ("405 Method Not Allowed", "GET only\n".into()),
        }
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_are_counted_by_kind_and_render_as_prometheus_text() {
        let mut s = Snapshot::default();
        s.set_role(Role::Standby);
        s.set_role(Role::Candidate);
        s.set_role(Role::Leader { token: 7 });
        s.set_role(Role::Leader { token: 7 });
        s.set_role(Role::Fenced);
        s.set_role(Role::Leader { token: 9 });
        s.child_up = true;
        for token in [7, 7, 9] {
            s.child_started(token); // a start, a restart, a resume
        }
        s.fresh = Some(BootTime::from_nanos(1_000_000_000));
        let text = s.render(BootTime::from_nanos(1_500_000_000));
        for line in [
            "neli_leader 1",
            "neli_fencing_token 9",
            "neli_heartbeat_age_seconds 0.5",
            "neli_transitions_total{kind=\"joined\"} 1",
            "neli_transitions_total{kind=\"leader\"} 1",
            "neli_transitions_total{kind=\"resumed\"} 1",
            "neli_fences_total 1",
            "neli_child_restarts_total 1",
            "neli_child_up 1",
            "neli_runs_total{outcome=\"success\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;
    use crate::leader::Runner;

    fn run(token: i64, due: u64, code: Option<u8>, by: Option<&str>) -> Job {
        let by = by.map(|name| Runner { name: name.into(), host: "h".into() });
        let wave = BootTime::from_nanos(1);
        Job { wave, wave_token: token, attempt: 1, token, code, by, due: Some(due), ended: code.map(|_| due + 500) }
    }

    #[test]
    fn runs_are_counted_once_by_outcome_and_the_last_success_is_kept() {
        let mut s = Snapshot::default();
        s.note_run(Some(&run(7, 2000, None, None)), true); // running: not yet
        s.note_run(Some(&run(7, 2000, Some(0), None)), false);
        s.note_run(Some(&run(7, 2000, Some(0), None)), false); // the same run again
        s.note_run(Some(&run(7, 4000, Some(2), None)), false);
        s.note_run(Some(&run(7, 6000, None, None)), false); // stopped by us
        s.note_run(Some(&run(9, 8000, Some(0), Some("b"))), false); // b's, read
        s.next_due_ms = Some(10_000);
        let text = s.render(BootTime::from_nanos(1));
        for line in [
            "neli_runs_total{outcome=\"success\"} 1",
            "neli_runs_total{outcome=\"failure\"} 1",
            "neli_runs_total{outcome=\"cut_short\"} 1",
            "neli_last_success_timestamp_seconds 8.5",
            "neli_next_run_timestamp_seconds 10",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
    }
}
