//! `mcp.server.session.duration` of the 2025 sessions left to expire: a
//! session's token lives its TTL from `initialize`, and a client that never
//! sends `DELETE` still ended it then. [`SessionClock`] remembers each live
//! session's expiry (bounded) and records its duration when it passes; a
//! `DELETE` takes the session off the clock (its own end is recorded then).
//!
//! With shared sessions (a Redis bus) the node that ran `initialize` times
//! the session, and a `DELETE` may land on any other node, which records it
//! there. Both claim the session's end in Redis first (an atomic `SET NX` of
//! its end key, [`EndClaims`]) and record it only with the claim, so each
//! session ends once in the fleet's metrics, whichever comes first; when
//! Redis cannot answer a claim, that end is not recorded (never twice).
//!
//! Bounded by `CompatConfig::max_session_states` sessions at once: a session
//! begun past it is not timed at its expiry (its `DELETE` still is).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::compat::EndClaims;
use crate::runtime::{NetworkTransport, Server, SessionLabels};
use crate::suite::sealing::seal;

/// The longest the sweeper sleeps between two looks at the clock.
const MAX_SLEEP: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Inner {
    /// Live sessions: id → (its expiry, in ms since the epoch; version label).
    live: HashMap<String, (u64, &'static str)>,
    /// Due times, soonest first (a DELETEd session's entry stays until its
    /// time, and is then skipped).
    by_expiry: BinaryHeap<Reverse<(u64, String)>>,
    /// A sweeper task runs.
    sweeping: bool,
}

/// The live sessions of one endpoint, by expiry.
pub(crate) struct SessionClock {
    inner: Mutex<Inner>,
    max: usize,
    ttl: Duration,
    /// With shared sessions: claims a session's end for the fleet.
    claims: Option<EndClaims>,
}

impl SessionClock {
    /// A clock for at most `max` sessions at once, each living `ttl`; with
    /// `claims` (shared sessions), an expiry is recorded only with the
    /// session's end claim (not when a `DELETE` on any node claimed it).
    pub(crate) fn new(max: usize, ttl: Duration, claims: Option<EndClaims>) -> Self {
        SessionClock {
            inner: Mutex::new(Inner::default()),
            max,
            ttl,
            claims,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Times the session `sid` (expiring at `expires`, ms since the epoch):
    /// its duration is recorded in `server` when it expires unless
    /// [`SessionClock::ended`] comes first. Runs the sweeper task if none
    /// runs (call on an actix arbiter).
    pub(crate) fn start(
        self: &Arc<Self>,
        server: &Server,
        sid: &str,
        expires: u64,
        version: &'static str,
    ) {
        if self.time(sid, expires, version) {
            actix_rt::spawn(sweeper(Arc::downgrade(self), server.clone()));
        }
    }

    /// Puts `sid` on the clock: whether a sweeper is to be started.
    fn time(&self, sid: &str, expires: u64, version: &'static str) -> bool {
        let mut inner = self.lock();
        if inner.by_expiry.len() >= self.max {
            compact(&mut inner);
        }
        if inner.by_expiry.len() >= self.max {
            tracing::debug!(
                max = self.max,
                "2025 session not timed for its expiry: the clock is full"
            );
            return false;
        }
        inner.live.insert(sid.to_owned(), (expires, version));
        inner.by_expiry.push(Reverse((expires, sid.to_owned())));
        !std::mem::replace(&mut inner.sweeping, true)
    }

    /// Takes `sid` (expiring at `expires`) off the clock: its client ended
    /// it. Whether the end is this caller's to record: it is unless the
    /// sweeper took the session as expired already (a DELETE admitted just
    /// before the expiry and handled just after it), so that one end is
    /// recorded once. A session the clock never timed (it was full) is the
    /// caller's while it has not expired. Once most expiries kept are of
    /// sessions already ended, they are dropped (amortized O(1)).
    pub(crate) fn ended(&self, sid: &str, expires: u64) -> bool {
        let mut inner = self.lock();
        let timed = inner.live.remove(sid).is_some();
        if inner.by_expiry.len() > 2 * inner.live.len() + 64 {
            compact(&mut inner);
        }
        // Not on the clock: the sweeper takes a session only once it is due.
        timed || seal::now_ms() < expires
    }

    /// Takes every session that is due off the clock: its id, expiry and
    /// version label.
    fn take_due(&self, inner: &mut Inner) -> Vec<(String, u64, &'static str)> {
        let now = seal::now_ms();
        let mut due = Vec::new();
        while let Some(Reverse((at, _))) = inner.by_expiry.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, sid))) = inner.by_expiry.pop() else {
                break;
            };
            // Still live, and this is its entry (not an older one of a
            // DELETEd session whose id came back).
            if inner.live.get(&sid).is_some_and(|(e, _)| *e == at)
                && let Some((_, version)) = inner.live.remove(&sid)
            {
                due.push((sid, at, version));
            }
        }
        due
    }

    /// Records the expiry of `sid` (at `expires`), unless a `DELETE` claimed
    /// its end first (or the claim cannot be made).
    async fn expired(&self, server: &Server, sid: String, expires: u64, version: &'static str) {
        if let Some(claim) = &self.claims {
            match claim(sid, expires).await {
                Ok(true) => {}
                Ok(false) => return, // recorded by the node that took the DELETE
                Err(e) => {
                    tracing::debug!(error = %e, "2025 session expiry not recorded: the shared store did not answer");
                    return;
                }
            }
        }
        server.record_session(
            SessionLabels {
                kind: "session",
                error_type: "",
                transport: NetworkTransport::Tcp,
                version,
            },
            self.ttl,
        );
    }
}

/// How long until the next session is due, `None` when none is left.
fn next_due(inner: &Inner) -> Option<Duration> {
    let now = seal::now_ms();
    inner
        .by_expiry
        .peek()
        .map(|Reverse((at, _))| Duration::from_millis(at.saturating_sub(now)))
}

/// Drops the due times of sessions no longer live.
fn compact(inner: &mut Inner) {
    let Inner {
        live, by_expiry, ..
    } = inner;
    by_expiry.retain(|Reverse((at, sid))| live.get(sid).is_some_and(|(e, _)| e == at));
}

/// Sleeps until the next expiry (at most [`MAX_SLEEP`]) and records it, until
/// no session is left on the clock or the clock is gone.
async fn sweeper(clock: Weak<SessionClock>, server: Server) {
    loop {
        let Some(clock) = clock.upgrade() else {
            return;
        };
        let due = clock.take_due(&mut clock.lock());
        for (sid, expires, version) in due {
            clock.expired(&server, sid, expires, version).await;
        }
        let next = {
            let mut inner = clock.lock();
            // Read after the checks: sessions may have started meanwhile.
            match next_due(&inner) {
                Some(next) => next,
                None => {
                    inner.sweeping = false;
                    return;
                }
            }
        };
        drop(clock);
        tokio::time::sleep(next.clamp(Duration::from_millis(10), MAX_SLEEP)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "2025-11-25";

    fn clock(max: usize) -> SessionClock {
        SessionClock::new(max, Duration::from_secs(60), None)
    }

    #[test]
    fn a_delete_before_the_sweeper_takes_the_end_and_the_expiry_is_not_recorded() {
        let c = clock(8);
        let due = seal::now_ms() - 1;
        assert!(c.time("a", due, V), "the first session starts a sweeper");
        assert!(!c.time("b", seal::now_ms() + 60_000, V), "one sweeper");
        assert!(c.ended("a", due), "the DELETE records the end");
        assert!(
            c.take_due(&mut c.lock()).is_empty(),
            "and the sweeper does not"
        );
        assert!(c.ended("b", seal::now_ms() + 60_000));
    }

    #[test]
    fn a_delete_handled_after_the_sweeper_took_the_expiry_does_not_record_it_again() {
        let c = clock(8);
        let due = seal::now_ms() - 1;
        c.time("a", due, V);
        let taken = c.take_due(&mut c.lock());
        assert_eq!(taken, vec![("a".to_owned(), due, V)]);
        assert!(!c.ended("a", due), "recorded by the expiry once");
    }

    #[test]
    fn a_session_the_full_clock_never_timed_is_recorded_by_its_delete_until_it_expires() {
        let c = clock(0);
        let later = seal::now_ms() + 60_000;
        assert!(!c.time("a", later, V));
        assert!(c.ended("a", later));
        assert!(!c.ended("a", seal::now_ms() - 1));
    }
}
