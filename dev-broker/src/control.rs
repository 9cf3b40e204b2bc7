//! Cluster events on demand (`--control PATH`): a unix socket, private to
//! the dev broker's user, that takes one event per line ([`Event`]'s
//! grammar) and answers one line, "ok ..." or "error ...". `neli-run
//! dev-broker event` is its client ([`send`]); tests and the soak write to
//! the socket directly. One word is a question, not an event: `requests`,
//! answered "ok" and then one line per client and API, the first on the
//! "ok" line ([`crate::requests::Requests::lines`]); and `fetch-waits`, one
//! line per client with the longest wait its fetches for any record asked
//! for: ask either
//! alone on a connection and read until the broker closes.
//!
//! Each event is carried out as Kafka's controller would: a controlled stop
//! moves leaderships and the coordinator off the broker before closing its
//! connections; a crash closes them at once and moves what it led only once
//! the crash is noticed (KRaft's broker.session.timeout.ms later), leaving
//! partitions with no other replica up offline; a broker started again
//! comes back as a follower.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tracing::{info, warn};

use crate::cluster::{BrokerId, Event};
use crate::group::Message;
use crate::relay::Shared;
use crate::Error;

/// The control socket, removed when dropped.
pub struct Control {
    path: PathBuf,
    listener: tokio::net::UnixListener,
}

impl Control {
    /// Binds `path` (mode 0600: only this user may send events). A socket
    /// left there by a dev broker that was killed is replaced; one that
    /// answers is another dev broker's, and refused; anything else there
    /// (a file, a link, a directory) is refused and left as it is (audit
    /// E2: a file at PATH was deleted).
    pub fn bind(path: &Path) -> Result<Control, Error> {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(Error::Usage(format!(
                "--control {}: another dev broker listens there (stop it, or pick another path)",
                path.display()
            )));
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => {
                let _ = std::fs::remove_file(path);
            }
            Ok(meta) => {
                let what = if meta.is_dir() {
                    "a directory"
                } else if meta.file_type().is_symlink() {
                    "a symbolic link"
                } else {
                    "a file that is not a socket"
                };
                return Err(Error::Usage(format!(
                    "--control {}: {what} is there, left as it is: give a path where nothing is, or a dead dev \
                     broker's socket",
                    path.display()
                )));
            }
            Err(_) => {}
        }
        let refused = |err: std::io::Error| Error::Usage(format!("--control {}: {err}", path.display()));
        let listener = tokio::net::UnixListener::bind(path).map_err(refused)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(refused)?;
        Ok(Control { path: path.to_path_buf(), listener })
    }

    /// Takes events until the dev broker stops.
    pub async fn serve(&self, shared: Arc<Shared>) {
        loop {
            let Ok((stream, _)) = self.listener.accept().await else { continue };
            let shared = shared.clone();
            tokio::spawn(async move {
                let (rx, mut tx) = stream.into_split();
                let mut lines = tokio::io::BufReader::new(rx).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let answer = match Event::parse(&line) {
                        Ok(event) => apply(&shared, event),
                        Err(why) => Err(why),
                    };
                    let answer = match answer {
                        Ok(said) if said.is_empty() => "ok\n".to_string(),
                        Ok(said) => format!("ok {said}\n"),
                        Err(why) => format!("error {why}\n"),
                    };
                    if tx.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Sends one event (its words) to the dev broker at `path` and returns its
/// answer: Ok with what it did, or Err with why not.
pub fn send(path: &Path, words: &[String]) -> Result<String, Error> {
    let mut stream = std::os::unix::net::UnixStream::connect(path).map_err(|err| {
        Error::Usage(format!(
            "cannot reach a dev broker at --control {}: {err} (start one with `neli-run dev-broker --control {0}`)",
            path.display()
        ))
    })?;
    writeln!(stream, "{}", words.join(" ")).map_err(|e| Error::Internal(e.to_string()))?;
    stream.shutdown(std::net::Shutdown::Write).map_err(|e| Error::Internal(e.to_string()))?;
    // One answer: the broker closes once it has read our end.
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|e| Error::Internal(e.to_string()))?;
    let answer = answer.trim_end();
    match answer.split_once(' ') {
        _ if answer == "ok" => Ok(String::new()),
        Some(("ok", said)) => Ok(said.to_string()),
        Some(("error", why)) => Err(Error::Usage(why.to_string())),
        _ => Err(Error::Internal(format!("the dev broker answered {answer:?}"))),
    }
}

/// Carries out one event; says what it did, or why it cannot.
pub fn apply(shared: &Arc<Shared>, event: Event) -> Result<String, String> {
    let cluster = &shared.cluster;

    let up = |b: BrokerId| -> Result<(), String> {
        cluster.check(b)?;
        if cluster.is_up(b) {
            Ok(())
        } else {
            Err(format!("broker {b} is down (start it first)"))
        }
    };
    let said = match event {
        Event::Leader { topic, partition, to } => {
            up(to)?;
            lead(shared, &topic, partition, to)?;
            format!("partition {partition} of {topic} is led by broker {to}")
        }
        Event::Offline { topic, partition } => {
            lead(shared, &topic, partition, -1)?;
            format!("partition {partition} of {topic} has no leader")
        }
        Event::Coordinator { to } => {
            if shared.coordinator.is_none() {
                return Err(
                    "the coordinator moves only under --group-coordinator kafka (the mock places its own)".into()
                );
            }
            up(to)?;
            coordinate(shared, to);
            format!("broker {to} coordinates the groups")
        }
        Event::Stop { broker } => {
            up(broker)?;
            let moved = move_off(shared, broker);
            down(shared, broker);
            format!("broker {broker} stopped, the controlled way: {moved}")
        }
        Event::Crash { broker, after } => {
            up(broker)?;
            let downs = down(shared, broker);
            let shared = shared.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                if shared.cluster.downs(broker) == downs && !shared.cluster.is_up(broker) {
                    let moved = move_off(&shared, broker);
                    info!(broker, "the crash of broker {broker} noticed: {moved}");
                }
            });
            let after = humantime::format_duration(after);
            format!("broker {broker} crashed; what it led moves in {after}, unless it starts again first")
        }
        Event::Start { broker } => {
            cluster.check(broker)?;
            if cluster.is_up(broker) {
                return Err(format!("broker {broker} is up already"));
            }
            // A broker that comes back holds no leadership: what it still
            // led (a crash not yet noticed) moves first, as KRaft fences the
            // old incarnation; partitions left offline come back with it.
            let moved = move_off(shared, broker);
            let offline = cluster.offline();
            let took = offline.iter().filter(|(topic, p)| lead(shared, topic, *p, broker).is_ok()).count();
            shared.mock.set_up(broker, true);
            cluster.set_up(broker, true);
            let coordinates = cluster.coordinator() == broker;
            if coordinates {
                // Nobody else could take the groups: they load here again.
                coordinate(shared, broker);
            }
            let crashed = match moved.to {
                Some(_) if moved.led > 0 || moved.coordinated => {
                    format!("; first, as Kafka fences a crashed broker's old incarnation, {moved}")
                }
                _ => String::new(),
            };
            format!("broker {broker} started{}{crashed}", Started { took, coordinates })
        }
        Event::Cut { client, broker } => {
            cluster.check(broker)?;
            cluster.cut(&client, broker);
            format!("{client} is cut off from broker {broker}")
        }
        Event::CutAt { client, broker, text } => {
            cluster.check(broker)?;
            cluster.cut_at(&client, broker, &text);
            format!("{client} is cut off from broker {broker} once it sends it a record carrying {text}")
        }
        Event::Heal { client, broker } => {
            let healed = cluster.heal(client.as_deref(), broker);
            format!("{healed} cut(s) healed")
        }
        Event::Alter { topic, denied } => {
            cluster.deny_alter(&topic, denied);
            format!("partitions of {topic} may {}be added", if denied { "not " } else { "" })
        }
        Event::Rewind { topic, partition } => {
            cluster.has_partition(&topic, partition)?;
            shared.rewinds.ask(&topic, partition);
            format!("the next fetch of partition {partition} of {topic} is answered OFFSET_OUT_OF_RANGE")
        }
        Event::Describe => match shared.rewinds.pending() {
            pending if pending.is_empty() => cluster.describe(),
            pending => format!("{}; rewinds {}", cluster.describe(), pending.join(" ")),
        },
        // A question, asked often (neli-bench): not logged as an event.
        Event::Requests => return Ok(shared.requests.lines()),
        Event::FetchWaits => return Ok(shared.requests.fetch_waits()),
    };
    info!("cluster event: {said}");
    Ok(said)
}

/// Makes `leader` lead a partition (-1: nobody), in the mock and then in
/// the cluster's record: `describe` says a leader moved once clients see it
/// moved (the mock takes a few hundred milliseconds for each).
fn lead(shared: &Shared, topic: &str, partition: i32, leader: BrokerId) -> Result<(), String> {
    shared.cluster.has_partition(topic, partition)?;
    shared.mock.set_leader(topic, partition, Some(leader).filter(|l| *l > 0))?;
    // A fetch parked on the old leader is answered now, as Kafka answers
    // one for a partition its broker no longer leads.
    shared.wakes.moved();
    shared.cluster.set_leader(topic, partition, leader)
}

/// Moves the group coordination to `to`: the groups unload where they were
/// and load there (sessions start afresh), and FindCoordinator names it.
fn coordinate(shared: &Shared, to: BrokerId) {
    shared.cluster.set_coordinator(to);
    if let Some(tx) = &shared.coordinator {
        let _ = tx.send(Message::Unload);
        let _ = tx.send(Message::Load);
    }
}

/// Moves every leadership and the coordination off `broker` to the next
/// broker up; what has nowhere to go goes offline (a partition) or unloads
/// (the groups). Says what moved.
fn move_off(shared: &Shared, broker: BrokerId) -> Moved {
    let cluster = &shared.cluster;
    let to = cluster.successor(broker);
    let led = cluster.led_by(broker);
    for (topic, partition) in &led {
        if let Err(err) = lead(shared, topic, *partition, to.unwrap_or(-1)) {
            warn!(topic, partition, %err, "cannot move a partition's leadership");
        }
    }
    let coordinated = cluster.coordinator() == broker;
    if coordinated {
        match to {
            Some(to) => coordinate(shared, to),
            None => {
                if let Some(tx) = &shared.coordinator {
                    let _ = tx.send(Message::Unload);
                }
            }
        }
    }
    Moved { led: led.len(), coordinated, to }
}

/// What `move_off` moved off a broker, and where: said as a clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Moved {
    /// Partitions it led.
    led: usize,
    /// Whether it coordinated the groups.
    coordinated: bool,
    /// Where they went (None: no other broker is up).
    to: Option<BrokerId>,
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let partitions = |n: usize| if n == 1 { "1 partition".to_string() } else { format!("{n} partitions") };
        match (self.led, self.coordinated, self.to) {
            (0, false, _) => write!(f, "it led nothing"),
            (n, coordinated, Some(to)) => {
                let what = match (n, coordinated) {
                    (0, _) => "the group coordinator".to_string(),
                    (n, false) => format!("the leadership of {}", partitions(n)),
                    (n, true) => format!("the leadership of {} and the group coordinator", partitions(n)),
                };
                write!(f, "{what} moved to broker {to}")
            }
            (n, coordinated, None) => {
                let offline = match n {
                    0 => String::new(),
                    1 => "the partition it led is offline".to_string(),
                    n => format!("the {n} partitions it led are offline"),
                };
                let groups = if coordinated { "the groups have no coordinator" } else { "" };
                let and = if offline.is_empty() || groups.is_empty() { "" } else { " and " };
                write!(f, "no other broker is up, so {offline}{and}{groups}")
            }
        }
    }
}

/// What a broker started again took on: the partitions left without a
/// leader, and the groups if nobody else coordinates them.
struct Started {
    took: usize,
    coordinates: bool,
}

impl std::fmt::Display for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let leads = match self.took {
            0 => String::new(),
            1 => "leads the partition that had no leader".to_string(),
            n => format!("leads the {n} partitions that had no leader"),
        };
        match (leads.is_empty(), self.coordinates) {
            (true, false) => write!(f, ", as a follower"),
            (true, true) => write!(f, ": it coordinates the groups"),
            (false, false) => write!(f, ": it {leads}"),
            (false, true) => write!(f, ": it {leads} and coordinates the groups"),
        }
    }
}

/// Takes a broker down: its connections closed, new ones refused, its
/// groups unloaded if it coordinates them. Returns how many times it went
/// down.
pub fn down(shared: &Shared, broker: BrokerId) -> u64 {
    let downs = shared.cluster.set_up(broker, false);
    shared.backends[broker as usize - 1].lock().unwrap_or_else(|e| e.into_inner()).down(&shared.mock);
    if shared.cluster.coordinator() == broker {
        if let Some(tx) = &shared.coordinator {
            let _ = tx.send(Message::Unload);
        }
    }
    downs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_moved_is_said_in_a_sentence() {
        let said = |led, coordinated, to| Moved { led, coordinated, to }.to_string();
        assert_eq!(said(0, false, None), "it led nothing");
        assert_eq!(said(1, false, Some(2)), "the leadership of 1 partition moved to broker 2");
        assert_eq!(said(0, true, Some(1)), "the group coordinator moved to broker 1");
        assert_eq!(
            said(3, true, Some(1)),
            "the leadership of 3 partitions and the group coordinator moved to broker 1"
        );
        assert_eq!(
            said(1, true, None),
            "no other broker is up, so the partition it led is offline and the groups have no coordinator"
        );
        assert_eq!(said(2, false, None), "no other broker is up, so the 2 partitions it led are offline");
        assert_eq!(said(0, true, None), "no other broker is up, so the groups have no coordinator");
        let started = |took, coordinates| Started { took, coordinates }.to_string();
        assert_eq!(started(0, false), ", as a follower");
        assert_eq!(started(1, true), ": it leads the partition that had no leader and coordinates the groups");
        assert_eq!(started(0, true), ": it coordinates the groups");
        assert_eq!(started(2, false), ": it leads the 2 partitions that had no leader");
    }
}
