//! What the simulated shell feeds the core: one input it could report now
//! (assignments, revokes, records of ours and of others, child exits,
//! signals, time), drawn at random from the walk's seed.

use super::*;

impl Sim {
    /// One input the shell could report now.
    pub(super) fn next_input(&mut self) -> Input {
        let now = self.now;
        if let Some(child) = self.child.as_mut() {
            if !child.killed && now >= child.lease {
                // The shim's lease ran out: it kills the group by itself.
                child.killed = true;
                child.exits_at = Some(child.exits_at.map_or(now, |t| t.min(now)));
            }
            if child.exits_at.is_some_and(|t| now >= t) {
                let code = self.rng.u8(..2);
                let status = if child.killed { ChildStatus::Signaled(9) } else { ChildStatus::Exited(code) };
                if !child.killed && !child.stopped {
                    self.ended_at = Some(now);
                    self.exited = Some((code, self.wall0 + now));
                }
                self.child = None;
                return exited(status);
            }
        }
        if self.leaving && self.owned && !self.revoke_waits {
            self.leaving = false;
            self.owned = false;
            self.revoke_waits = true;
            return revoked(false);
        }
        loop {
            match self.rng.u8(..100) {
                0..=9 => return Input::Tick,
                10..=15 if !self.owned && !self.revoke_waits && !self.leaving => {
                    self.owned = true;
                    return assigned();
                }
                16..=17 if self.owned && !self.revoke_waits => {
                    self.owned = false;
                    self.revoke_waits = true;
                    return revoked(self.rng.u8(..3) == 0);
                }
                18..=49 if !self.outbox.is_empty() => {
                    let (record, sent) = self.outbox.pop_front().expect("not empty");
                    if self.rng.u8(..8) == 0 {
                        continue; // lost on the way
                    }
                    let offset = self.log;
                    self.log += 1;
                    self.own_start.entry(record.term).or_insert(offset);
                    if let Some(run) = record.attempt.as_ref().filter(|j| j.code.is_none()) {
                        self.named_read.insert(super::run_key(run));
                    }
                    // Now and then with records fetched behind it, heard
                    // before `CaughtUp`.
                    let more = self.rng.u8(..4) == 0;
                    self.catching_up = more;
                    return Input::OwnHeartbeat { partition: P, offset, sent: ms(sent), more };
                }
                50..=71 => return self.their_record(),
                72..=75 if self.child.as_ref().is_some_and(|c| c.exits_at.is_none()) => {
                    // The command ends by itself.
                    self.child.as_mut().expect("alive").exits_at = Some(now);
                    continue;
                }
                // Half as often in a scheduled walk, which needs a long life
                // to reach a second run among all the other inputs.
                76 if self.settings.schedule.is_none() || self.rng.bool() => return Input::Shutdown,
                77 if self.rng.bool() => return Input::Fatal(78),
                78..=80 => return Input::Forward(SIGHUP),
                81..=83 => return Input::Yield { to: self.someone() },
                // Rarer in a scheduled walk, where a pause holds its second
                // run back as long as it lasts.
                84..=86 if self.settings.schedule.is_none() || self.rng.u8(..3) == 0 => {
                    let offset = self.log;
                    self.log += 1;
                    let paused = self.rng.bool();
                    let stop = paused && self.rng.bool();
                    return Input::Pause(P, Pause { offset, paused, stop, at_ms: 0, by: Asker::default() });
                }
                87..=88 if self.settings.health_checked => {
                    self.healthy = !self.healthy;
                    return Input::Health(self.healthy);
                }
                // Drained now and then, and not for long: a drained member
                // runs nothing, and a walk must reach its runs.
                89 if !self.drained && self.rng.u8(..4) == 0 => {
                    self.drained = true;
                    return Input::Drain(true);
                }
                89..=91 if self.drained => {
                    self.drained = false;
                    return Input::Drain(false);
                }
                90..=91 => return Input::Standby,
                92..=95 => return self.their_candidacy(),
                96..=98 if self.catching_up => {
                    self.catching_up = false;
                    return caught_up();
                }
                _ => {}
            }
        }
    }

    /// Nobody, us, another member, or one never heard of.
    fn someone(&mut self) -> Option<String> {
        [None, Some("me"), Some("a"), Some("b"), Some("z")][self.rng.usize(..5)].map(String::from)
    }

    /// Another member's candidacy: live or not, of any priority, leaving
    /// now and then, never leading now and then, unhealthy now and then.
    fn their_candidacy(&mut self) -> Input {
        let name = ["a", "b", "me"][self.rng.usize(..3)].to_string();
        let (priority, never_lead) = (self.rng.u8(..4), self.rng.u8(..5) == 0);
        // One draw for both, as many draws as before health came in: the
        // walks stay the same.
        let out = self.rng.u8(..10);
        Input::Candidacy(Candidacy {
            writer: name.clone(),
            name,
            priority,
            never_lead,
            leaving: out < 2,
            unhealthy: (2..4).contains(&out),
            drained: false,
            age: Duration::from_millis(self.rng.u64(0..3000)),
            live_for: Duration::from_millis(self.rng.u64(0..3000)),
            // Read from the roster now and then (no draw of its own).
            cold: out >= 8,
        })
    }

    /// Another member's record, from a v1 or v2 writer, old or new.
    fn their_record(&mut self) -> Input {
        let writer = ["a", "b"][self.rng.usize(..2)].to_string();
        let offset = self.log;
        self.log += 1;
        let term = self.their_term.entry(writer.clone()).or_insert(1);
        if self.rng.u8(..10) == 0 {
            *term += 1;
        }
        let term = (self.rng.u8(..10) != 0).then_some(*term);
        let start = (self.rng.bool() && offset > 0).then(|| self.rng.i64(0..offset));
        let stance = match self.rng.u8(..3) {
            0 => Stance::Leading { token: self.rng.i64(0..=offset) },
            1 if self.rng.u8(..20) == 0 => Stance::Leading { token: offset + self.rng.i64(0..1000) },
            1 => Stance::Contending,
            _ => Stance::Released,
        };
        let age = self.rng.u64(0..1500).min(self.now);
        let other = Other {
            writer: writer.clone(),
            // One record per offset, in the order written: a count of them.
            seq: offset.unsigned_abs(),
            offset,
            term,
            start,
            stance,
            age: Duration::from_millis(age),
            deadline: Duration::from_millis(D),
            attempt: (self.rng.u8(..4) == 0).then(|| {
                let token = self.rng.i64(0..=offset);
                Attempt {
                    // Now and then from a clock ahead of ours.
                    wave_ms: self.wall0 + (self.now + 1000).saturating_sub(self.rng.u64(0..30_000)),
                    wave_token: self.rng.i64(0..=token),
                    number: self.rng.u32(1..4),
                    token,
                    code: self.rng.bool().then(|| self.rng.u8(..3)),
                    by: None,
                    due: None,
                    ended: None,
                    line: None,
                }
            }),
            // Now and then a pause or resume carried forward, older or
            // (forged) not older than the record itself.
            pause: (self.rng.u8(..5) == 0).then(|| {
                let paused = self.rng.bool();
                let offset = self.rng.i64(0..=offset + 1);
                Pause { offset, paused, stop: paused && self.rng.bool(), at_ms: 0, by: Asker::default() }
            }),
            // Rarer in a scheduled walk: a hand-over to another holds its
            // runs back as long as it is fresh.
            to: if stance == Stance::Released && (self.settings.schedule.is_none() || self.rng.u8(..4) == 0) {
                self.someone()
            } else {
                None
            },
            job: None,
            hot: None,
        };
        // The rules, as the README states them.
        let until = self.now - age + D + self.settings.claim_margin.as_millis() as u64;
        match stance {
            Stance::Leading { token } => {
                if token < offset {
                    self.newest_theirs = Some(self.newest_theirs.map_or(token, |t| t.max(token)));
                }
                let held = self.claims.entry(writer.clone()).or_insert(until);
                *held = (*held).max(until);
            }
            Stance::Contending | Stance::Released => {
                self.claims.remove(&writer);
            }
        }
        match (term, stance) {
            (Some(id), Stance::Leading { .. } | Stance::Contending) => {
                let start = start.unwrap_or(offset).min(offset);
                let fresh = TheirTerm { id, start, until, contending: false };
                let r = self.terms.entry(writer).or_insert(fresh);
                if r.id != id || r.until + 60_000 <= self.now {
                    *r = fresh;
                }
                r.start = r.start.min(start);
                r.until = r.until.max(until);
                r.contending = stance == Stance::Contending;
            }
            _ => {
                self.terms.remove(&writer);
            }
        }
        if self.heard.len() == 32 {
            self.heard.pop_front();
        }
        self.heard.push_back((other.clone(), self.now));
        Input::OtherHeartbeat(P, other)
    }

    /// One of the records of others fed lately, read again now (older by
    /// the time since): the rules' claims and terms stay as they are.
    pub(super) fn read_again(&mut self) -> Option<Input> {
        let (other, fed) = self.heard.get(self.again.usize(..self.heard.len().max(1)))?.clone();
        let age = other.age + Duration::from_millis(self.now - fed);
        Some(Input::OtherHeartbeat(P, Other { age, ..other }))
    }
}
