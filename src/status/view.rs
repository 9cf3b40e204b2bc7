//! What the records on partition 0 say (`View`): who leads and whether it
//! is fresh, the runs of a wave or a schedule, the pause in force, and the
//! live standbys. Read by `status`, `yield` and the `--never-lead` member;
//! `render` writes it out.

use crate::kafka::candidacy;
use crate::kafka::heartbeat::{Heartbeat, WireAttempt, WirePause};
use crate::kafka::yield_request::PauseRequest;
use crate::leader::HotList;

/// How many of a schedule's runs `status` shows: the newest. Older ones
/// are in the retained records only while the topic keeps them; the newest
/// always is, since every record carries it forward.
const RUNS: usize = 10;

/// What the records say.
#[derive(Debug, Default)]
pub(super) struct View {
    /// The newest record carrying a token.
    pub(super) leader: Option<Heartbeat>,
    /// When its writer took that claim back (the wall clock of its first
    /// newer record without a token), if it did.
    pub(super) withdrawn_ms: Option<u64>,
    /// Its writer's newest record says its health check fails.
    pub(super) unhealthy: bool,
    /// The newest run of a wave the records name (once per wave), as the
    /// members read it: the larger token, or of one run, its ending.
    pub(super) job: Option<WireAttempt>,
    /// A schedule's newest runs the records name, oldest first.
    pub(super) runs: Vec<WireAttempt>,
    /// When the schedule next runs, as the newest record that said
    /// planned it.
    pub(super) next_ms: Option<u64>,
    /// That next run is a retry of the newest run's due time.
    pub(super) next_retry: bool,
    /// The newest pause or resume request (by offset) the records name.
    pub(super) pause: Option<WirePause>,
    /// The newest candidacy of each member that does not own partition 0
    /// (live or not: `standbys` says which are).
    pub(super) candidacies: Vec<candidacy::Record>,
    /// The --roles of the newest heartbeat's writer, above 1: a group of
    /// roles, each on its own partition.
    pub(super) roles: Option<u32>,
    /// Under a crontab, the job this partition holds: the first claim, or
    /// the newest record that carries a name (as the members read it).
    pub(super) placed: Option<String>,
    /// Each writer's newest heartbeat on this partition (by name and
    /// incarnation): what `--roles` it says it runs with (`agree.rs`).
    pub(super) writers: Vec<Writer>,
    /// The hot standbys the newest record that names them names (the
    /// control partition's owner's word, docs/hot-set.md); None while no
    /// record did (an older owner's names none).
    pub(super) hot: Option<HotList>,
}

/// A writer of heartbeats, as its newest record on a partition says.
#[derive(Clone, Debug)]
pub(super) struct Writer {
    pub(super) name: String,
    pub(super) incarnation: String,
    pub(super) host: String,
    pub(super) pid: u32,
    /// Its --roles (1: the single leader, whose records carry none).
    pub(super) roles: u32,
    pub(super) at_ms: u64,
    pub(super) deadline_ms: u64,
    /// Under a crontab, its file's digest and the partitions whose jobs
    /// that file has (`Heartbeat::crontab`, `jobs_on`; None from a member
    /// of before them).
    pub(super) crontab: Option<String>,
    pub(super) jobs_on: Option<String>,
}

impl Writer {
    /// A member that owns no partition, as its candidacy says it.
    pub(super) fn of_candidacy(c: &candidacy::Record) -> Writer {
        Writer {
            name: c.name.clone(),
            incarnation: c.incarnation.clone(),
            host: c.host.clone(),
            pid: c.pid,
            roles: c.roles.unwrap_or(1),
            at_ms: c.at_ms,
            deadline_ms: c.live_ms,
            crontab: c.crontab.clone(),
            jobs_on: c.jobs_on.clone(),
        }
    }

    /// Whether its newest record is within its own deadline at `now_ms`:
    /// a live member.
    pub(super) fn live(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.at_ms) < self.deadline_ms
    }
}

impl View {
    /// Takes in the record at `offset`: a heartbeat, a candidacy, or a pause or resume
    /// request (anything else is not ours to read).
    pub(super) fn read(&mut self, payload: Option<&[u8]>, offset: i64) {
        let Some(payload) = payload else { return };
        if let Some(mut hb) = Heartbeat::decode(payload) {
            // A record names only an earlier request (as the members read it).
            if let Some(pause) = hb.pause.clone().filter(|p| p.offset < offset) {
                self.note_pause(pause);
            }
            hb.pause = hb.pause.filter(|p| p.offset < offset);
            self.roles = hb.roles.filter(|&n| n > 1);
            if hb.hot.is_some() {
                self.hot.clone_from(&hb.hot);
            }
            self.note_writer(&hb);
            if let Some(placed) = hb.placed_job().filter(|p| p.replaces(self.placed.as_deref())) {
                self.placed = Some(placed.job);
            }
            self.add(hb);
        } else if let Some(c) = candidacy::Record::decode(payload) {
            self.candidacies.retain(|known| known.name != c.name);
            self.candidacies.push(c);
        } else if let Some(request) = PauseRequest::decode(payload) {
            let p = request.at(offset);
            let running = false;
            self.note_pause(WirePause { offset, paused: p.paused, stop: p.stop, at_ms: p.at_ms, by: p.by, running });
        }
    }

    /// Takes in a candidacy read from the roster (`roster.rs`): unless
    /// what partition 0 said of its writer's name is as new (a member
    /// invited since writes its candidacies there, and its heartbeats once
    /// it owns partition 0).
    pub(super) fn roster(&mut self, c: candidacy::Record) {
        let newer = |at_ms: u64| at_ms >= c.at_ms;
        let known = self.candidacies.iter().any(|k| k.name == c.name && newer(k.at_ms))
            || self.writers.iter().any(|w| w.name == c.name && w.incarnation == c.incarnation && newer(w.at_ms));
        if !known {
            self.candidacies.retain(|k| k.name != c.name);
            self.candidacies.push(c);
        }
    }

    fn note_writer(&mut self, hb: &Heartbeat) {
        self.writers.retain(|w| w.name != hb.name || w.incarnation != hb.incarnation);
        self.writers.push(Writer {
            name: hb.name.clone(),
            incarnation: hb.incarnation.clone(),
            host: hb.host.clone(),
            pid: hb.pid,
            roles: hb.roles.unwrap_or(1).max(1),
            at_ms: hb.at_ms,
            deadline_ms: hb.deadline_ms,
            crontab: hb.crontab.clone(),
            jobs_on: hb.jobs_on.clone(),
        });
    }

    fn note_pause(&mut self, pause: WirePause) {
        if self.pause.as_ref().is_none_or(|known| pause.offset > known.offset) {
            self.pause = Some(pause);
        }
    }

    /// The pause in force, if the group is paused.
    pub(super) fn paused(&self) -> Option<&WirePause> {
        self.pause.as_ref().filter(|p| p.paused)
    }

    /// The members whose candidacy is live at `now_ms`: by priority, the
    /// highest first, then by name.
    pub(super) fn standbys(&self, now_ms: u64) -> Vec<&candidacy::Record> {
        let mut live: Vec<_> = self.candidacies.iter().filter(|c| c.live(now_ms)).collect();
        live.sort_by(|a, b| b.priority.cmp(&a.priority).then_with(|| a.name.cmp(&b.name)));
        live
    }

    /// Whether the member `name`, holding no seat, is hot: named in the
    /// list, or the list is short, which keeps every member in the group
    /// (None while no list is known).
    pub(super) fn hot(&self, name: &str) -> Option<bool> {
        self.hot.as_ref().map(|list| list.keeps(name))
    }

    /// How many live standbys at `now_ms` are not `me`: the group a
    /// `--never-lead` member's candidacy interval grows with.
    pub(super) fn other_standbys(&self, me: &crate::kafka::heartbeat::Member, now_ms: u64) -> usize {
        self.standbys(now_ms).iter().filter(|c| !c.is_from(me)).count()
    }

    pub(super) fn add(&mut self, mut hb: Heartbeat) {
        // Its writer owns partition 0, or left it: no standby now.
        self.candidacies.retain(|c| c.name != hb.name || c.incarnation != hb.incarnation);
        if hb.next_ms.is_some() {
            (self.next_ms, self.next_retry) = (hb.next_ms, hb.next_retry);
        }
        if let Some(job) = hb.attempt.take() {
            let newer = |known: &WireAttempt| {
                let key = |j: &WireAttempt| (j.token, j.due_ms, j.attempt, j.code);
                crate::leader::supersedes(key(&job), key(known))
            };
            if job.due_ms.is_some() {
                let run = |r: &WireAttempt| (r.token, r.due_ms, r.attempt);
                match self.runs.iter_mut().find(|r| run(r) == run(&job)) {
                    Some(known) if newer(known) => *known = job.clone(),
                    Some(_) => {}
                    None => {
                        self.runs.push(job.clone());
                        self.runs.sort_by_key(|r| (r.due_ms, r.attempt, r.token));
                        if self.runs.len() > RUNS {
                            self.runs.remove(0);
                        }
                    }
                }
            }
            if self.job.as_ref().is_none_or(newer) {
                self.job = Some(job);
            }
        }
        if self.leader.as_ref().is_some_and(|l| l.name == hb.name && l.incarnation == hb.incarnation) {
            self.unhealthy = hb.unhealthy;
        }
        if hb.token.is_some() {
            self.unhealthy = hb.unhealthy;
            self.leader = Some(hb);
            self.withdrawn_ms = None;
        } else if self.withdrawn_ms.is_none()
            && self.leader.as_ref().is_some_and(|l| l.name == hb.name && l.incarnation == hb.incarnation)
        {
            // A leader that released (or was fenced) runs nothing: without
            // this it showed as leading until its deadline.
            self.withdrawn_ms = Some(hb.at_ms);
        }
    }

    /// Whether the records are a schedule's (`--every`, `--cron`).
    pub(super) fn scheduled(&self) -> bool {
        !self.runs.is_empty() || self.next_ms.is_some()
    }

    /// The leader, if its newest heartbeat is within its own deadline and
    /// it has not taken its claim back since.
    pub(super) fn fresh_leader(&self, now_ms: u64) -> Option<&Heartbeat> {
        self.leader
            .as_ref()
            .filter(|hb| self.withdrawn_ms.is_none() && now_ms.saturating_sub(hb.at_ms) < hb.deadline_ms)
    }

    /// A one-line summary that changes exactly when the answer does.
    pub(super) fn key(&self, now_ms: u64) -> String {
        let leader = match self.fresh_leader(now_ms) {
            Some(hb) => format!("{} {}", hb.name, hb.token.unwrap_or_default()),
            None => "none".into(),
        };
        let running = |hb: &Heartbeat| hb.pause.as_ref().map(|p| p.running);
        let paused = match self.paused() {
            Some(p) => format!(" paused {} {:?}", p.offset, self.fresh_leader(now_ms).and_then(running)),
            None => String::new(),
        };
        // Who may lead next, and whether they can: not when they last wrote.
        let standbys: String = self
            .standbys(now_ms)
            .iter()
            .map(|c| {
                let (name, id) = (&c.name, &c.incarnation);
                format!(" {name}/{id} {} {} {} {}", c.priority, c.never_lead, c.unhealthy, c.drained)
            })
            .collect();
        let hot = self.hot.as_ref().map_or(String::new(), |l| format!(" hot {} {:?}", l.k, l.names));
        format!("{leader}{paused}{standbys}{hot}")
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::kafka::heartbeat::{Content, Member, WireStance};
    use crate::leader::{Record, Stance};

    pub(in crate::status) fn hb(name: &str, token: Option<i64>, at_ms: u64) -> Heartbeat {
        let stance = token.map_or(Stance::Contending, |token| Stance::Leading { token });
        let mut hb = Heartbeat::new(
            &Member::this_process(name.into()),
            1,
            crate::clock::BootTime::from_nanos(1),
            at_ms,
            Content { record: Record::saying(1, stance), since_ms: Some(at_ms), deadline_ms: 3000 },
        );
        hb.at_ms = at_ms;
        hb
    }

    #[test]
    fn a_watchers_others_are_the_live_standbys_but_itself() {
        let me = Member::this_process("w".into());
        let now = crate::clock::wall_ms();
        let mut v = View::default();
        for name in ["w", "a", "b"] {
            let member = if name == "w" { me.clone() } else { Member::this_process(name.into()) };
            let c =
                candidacy::Record::new(&member, 0, name == "w", now, std::time::Duration::from_secs(1), false, false);
            v.read(Some(&c.encode()), 1);
        }
        assert_eq!(v.standbys(now).len(), 3);
        assert_eq!(v.other_standbys(&me, now), 2);
    }

    #[test]
    fn the_hot_list_is_the_newest_one_a_record_names_and_a_change_of_it_is_news() {
        let mut v = View::default();
        v.add(hb("a", Some(1), 1_000));
        assert_eq!((v.hot("b"), v.key(1_100)), (None, "a 1".to_string()), "an older owner names none");
        let list = HotList { k: 2, names: vec!["b".into(), "c".into()] };
        let named = Heartbeat { hot: Some(list.clone()), ..hb("a", Some(1), 1_200) };
        v.read(Some(&named.encode()), 2);
        assert_eq!((v.hot("b"), v.hot("c"), v.hot("d")), (Some(true), Some(true), Some(false)));
        assert_eq!(v.key(1_300), r#"a 1 hot 2 ["b", "c"]"#, "status --watch says a new list");
        v.read(Some(&hb("a", Some(1), 1_400).encode()), 3);
        assert_eq!(v.hot.as_ref(), Some(&list), "a record without one keeps the newest named");
        // A short list keeps every member in the group: none is cold.
        let short = Heartbeat { hot: Some(HotList { k: 2, names: vec!["b".into()] }), ..hb("a", Some(1), 1_500) };
        v.read(Some(&short.encode()), 4);
        assert_eq!((v.hot("b"), v.hot("d")), (Some(true), Some(true)));
    }

    #[test]
    fn the_newest_token_bearing_record_leads_while_within_its_deadline() {
        let mut v = View::default();
        v.add(hb("a", Some(1), 1_000));
        v.add(hb("b", None, 2_000)); // a candidate: not a leader yet
        assert_eq!(v.fresh_leader(3_999).map(|h| h.name.as_str()), Some("a"));
        assert!(v.fresh_leader(4_000).is_none(), "stale after its own deadline");
        v.add(hb("b", Some(5), 4_100));
        assert_eq!(v.key(4_200), "b 5");
    }

    #[test]
    fn a_newer_record_of_the_leader_without_a_token_takes_its_claim_back() {
        let mut v = View::default();
        let a = hb("a", Some(1), 1_000);
        let mut other_a = hb("a", None, 1_100);
        other_a.incarnation = "restarted".into();
        v.add(a.clone());
        v.add(other_a); // another incarnation of the same name: not the leader
        assert_eq!(v.key(1_200), "a 1");
        let mut released = a.clone();
        (released.token, released.stance, released.at_ms) = (None, Some(WireStance::Released), 1_300);
        v.add(released);
        assert!(v.fresh_leader(1_400).is_none(), "released, long before its deadline");
        assert_eq!(v.withdrawn_ms, Some(1_300));
        assert_eq!(v.leader.as_ref().map(|h| h.name.as_str()), Some("a"), "still shown as the last leader");
        v.add(hb("a", Some(2), 1_500));
        assert_eq!(v.key(1_600), "a 2", "a new token-bearing record leads again");
    }
}
