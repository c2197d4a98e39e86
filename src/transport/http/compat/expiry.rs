//! `mcp.server.session.duration` of the 2025 sessions left to expire: a
//! session's token lives its TTL from `initialize`, and a client that never
//! sends `DELETE` still ended it then. [`SessionClock`] remembers each live
//! session's expiry (bounded) and records its duration when it passes; a
//! `DELETE` takes the session off the clock (its own end is recorded then).
//!
//! Bounded by `CompatConfig::max_session_states` sessions at once: a session
//! begun past it is not timed at its expiry (its `DELETE` still is). With
//! shared sessions (a Redis bus) the clock is off: any node may end a
//! session, so only `DELETE`s are recorded.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::runtime::{NetworkTransport, Server, SessionLabels};
use crate::suite::sealing::seal;

/// The longest the sweeper sleeps between two looks at the clock.
const MAX_SLEEP: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Inner {
    /// Live sessions: id → (expiry in ms since the epoch, version label).
    live: HashMap<String, (u64, &'static str)>,
    /// Expiries, soonest first (a DELETEd session's entry stays until its
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
}

impl SessionClock {
    /// A clock for at most `max` sessions at once, each living `ttl`.
    pub(crate) fn new(max: usize, ttl: Duration) -> Self {
        SessionClock {
            inner: Mutex::new(Inner::default()),
            max,
            ttl,
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
        let spawn = {
            let mut inner = self.lock();
            if inner.by_expiry.len() >= self.max {
                self.sweep(&mut inner, server);
            }
            if inner.by_expiry.len() >= self.max {
                tracing::debug!(
                    max = self.max,
                    "2025 session not timed for its expiry: the clock is full"
                );
                return;
            }
            inner.live.insert(sid.to_owned(), (expires, version));
            inner.by_expiry.push(Reverse((expires, sid.to_owned())));
            !std::mem::replace(&mut inner.sweeping, true)
        };
        if spawn {
            actix_rt::spawn(sweeper(Arc::downgrade(self), server.clone()));
        }
    }

    /// Takes `sid` off the clock (its client ended it). Once most expiries
    /// kept are of sessions already ended, they are dropped (amortized O(1)).
    pub(crate) fn ended(&self, sid: &str) {
        let mut inner = self.lock();
        inner.live.remove(sid);
        if inner.by_expiry.len() > 2 * inner.live.len() + 64 {
            let Inner {
                live, by_expiry, ..
            } = &mut *inner;
            by_expiry
                .retain(|Reverse((expires, sid))| live.get(sid).is_some_and(|(e, _)| e == expires));
        }
    }

    /// Records every session whose expiry has passed; returns how long until
    /// the next one, `None` when none is left (the sweeper then stops).
    fn sweep(&self, inner: &mut Inner, server: &Server) -> Option<Duration> {
        let now = seal::now_ms();
        while let Some(Reverse((expires, _))) = inner.by_expiry.peek() {
            if *expires > now {
                break;
            }
            let Some(Reverse((expires, sid))) = inner.by_expiry.pop() else {
                break;
            };
            // Still live, and this is its entry (not an older one of a
            // DELETEd session whose id came back).
            if inner.live.get(&sid).is_some_and(|(e, _)| *e == expires)
                && let Some((_, version)) = inner.live.remove(&sid)
            {
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
        inner
            .by_expiry
            .peek()
            .map(|Reverse((expires, _))| Duration::from_millis(expires.saturating_sub(now)))
    }
}

/// Sleeps until the next expiry (at most [`MAX_SLEEP`]) and records it, until
/// no session is left on the clock or the clock is gone.
async fn sweeper(clock: Weak<SessionClock>, server: Server) {
    loop {
        let next = {
            let Some(clock) = clock.upgrade() else {
                return;
            };
            let mut inner = clock.lock();
            match clock.sweep(&mut inner, &server) {
                Some(next) => next,
                None => {
                    inner.sweeping = false;
                    return;
                }
            }
        };
        tokio::time::sleep(next.clamp(Duration::from_millis(10), MAX_SLEEP)).await;
    }
}
