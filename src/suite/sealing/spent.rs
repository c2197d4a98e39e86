//! [`SpentStates`]: the bounded, expiring record of MRTR `requestState`s
//! already honoured, so each is honoured at most once.
//!
//! A state is identified by its random 64-bit nonce (inside the MAC, so a
//! client cannot choose it) and remembered until its own expiry: after that
//! the state is refused as expired anyway, so forgetting it is safe. The
//! record never forgets a spent state that is still unexpired: when it holds
//! `capacity` unexpired states, a further retry is refused ("retry later",
//! HTTP 429, the state stays unspent and works once room frees up) instead of
//! evicting one, which would reopen a replay window.
//!
//! Memory: per spent state a nonce of 8 bytes in a hash set and an
//! (expiry, nonce) pair of 16 bytes in a heap, each structure at most 131,072
//! slots at the default capacity of 100,000 (they round up to a power of
//! two): about 3.3 MB. Filling it takes
//! `capacity` distinct states issued and spent within one `request_state_ttl`.
//!
//! That record is per process. Nodes that share a sealing key must share the
//! record too, or a state spent on one node can be replayed once on each
//! other node: [`SpentRecord`] is the seam
//! ([`crate::suite::SuiteBuilder::spent_record`]); `genmcp serve --bus redis://…`
//! plugs in a Redis-backed one (`crate::suite::shared_spent`, `docs/auth.md`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::suite::common::BoxFuture;

/// Default number of unexpired spent request states remembered per suite.
pub const DEFAULT_MAX_SPENT_REQUEST_STATES: usize = 100_000;

/// What spending a request state found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Spend {
    /// First use: recorded, honour it.
    Fresh,
    /// Already spent: refuse it (the client gets the same `-32602` as for a
    /// tampered state).
    Replayed,
    /// The record is full: refuse for now (`-32603`, HTTP 429 with
    /// `Retry-After`), the state stays unspent. Carries the milliseconds after
    /// which a retry may succeed.
    Full(u64),
}

/// Why a [`SpentRecord`] could not say whether a state was spent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpentError {
    /// The record cannot be reached (a shared store is down or too slow).
    /// The suite refuses the retry (fail closed): `-32603` "cannot check
    /// requestState" (see `docs/auth.md`), never honouring it unchecked.
    #[error("the spent request-state record is unavailable: {0}")]
    Unavailable(String),
}

/// Where a suite records the MRTR `requestState`s it has honoured, so that
/// each is honoured at most once. The default is an in-memory record of this
/// process ([`crate::suite::SuiteBuilder::max_spent_request_states`]); nodes sharing
/// a sealing key share one through this trait
/// ([`crate::suite::SuiteBuilder::spent_record`]).
///
/// `spend` is called only for a state whose seal, binding (method, name,
/// arguments, principal) and expiry have been verified. It must record
/// `nonce` atomically: of two concurrent calls with the same nonce, on any
/// node, at most one gets [`Spend::Fresh`]. It may forget a nonce once
/// `expires_at_ms` has passed (the state is refused as expired anyway).
///
/// ```
/// use genmcp::suite::{BoxFuture, Spend, SpentError, SpentRecord};
/// use std::collections::HashSet;
/// use std::sync::Mutex;
///
/// /// Remembers forever (a sketch: a real record forgets expired states).
/// struct Forever(Mutex<HashSet<u64>>);
///
/// impl SpentRecord for Forever {
///     fn spend(&self, nonce: u64, _expires_at_ms: u64) -> BoxFuture<Result<Spend, SpentError>> {
///         let fresh = self.0.lock().map(|mut s| s.insert(nonce)).map_err(|_| ());
///         Box::pin(async move {
///             match fresh {
///                 Ok(true) => Ok(Spend::Fresh),
///                 Ok(false) => Ok(Spend::Replayed),
///                 Err(_) => Err(SpentError::Unavailable("poisoned".into())),
///             }
///         })
///     }
/// }
/// ```
pub trait SpentRecord: Send + Sync + 'static {
    /// Spends the state `nonce` (a random 64-bit number sealed into the
    /// state), which expires at `expires_at_ms` (milliseconds since the Unix
    /// epoch, the sealed `exp`).
    fn spend(&self, nonce: u64, expires_at_ms: u64) -> BoxFuture<Result<Spend, SpentError>>;
}

/// Retries whose `requestState` the spent record refused, since start, by
/// why: exported as `genmcp_spent_refusals_total{reason}` on the admin
/// listener ([`crate::suite::Suite::spent_refusals`]).
///
/// ```
/// let refusals = genmcp::suite::SpentRefusals::default();
/// assert!(refusals.counts().iter().all(|(_, n)| *n == 0));
/// ```
#[derive(Debug, Default)]
pub struct SpentRefusals {
    replayed: AtomicU64,
    full: AtomicU64,
    unavailable: AtomicU64,
}

impl SpentRefusals {
    /// `(reason, count)` for every reason: `replayed` (a state used twice, or
    /// by another principal's retry of it), `full` (the record was full: 429),
    /// `unavailable` (the record could not be reached: refused, fail closed).
    pub fn counts(&self) -> [(&'static str, u64); 3] {
        [
            ("replayed", self.replayed.load(Ordering::Relaxed)),
            ("full", self.full.load(Ordering::Relaxed)),
            ("unavailable", self.unavailable.load(Ordering::Relaxed)),
        ]
    }

    fn count(&self, outcome: &Result<Spend, SpentError>) {
        let counter = match outcome {
            Ok(Spend::Fresh) => return,
            Ok(Spend::Replayed) => &self.replayed,
            Ok(Spend::Full(_)) => &self.full,
            Err(_) => &self.unavailable,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The record a suite uses: the in-memory one (spent synchronously, no
/// allocation) or a pluggable one.
pub(crate) enum Store {
    /// This process's record (the default).
    Local(SpentStates),
    /// A record given to [`crate::suite::SuiteBuilder::spent_record`].
    Shared(Arc<dyn SpentRecord>),
}

/// The suite's record and the count of what it refused.
pub(crate) struct Spender {
    record: Store,
    refusals: Arc<SpentRefusals>,
}

impl Spender {
    pub(crate) fn new(record: Store) -> Self {
        Spender {
            record,
            refusals: Arc::default(),
        }
    }

    /// Spends `nonce`, expiring at `exp`, at time `now` (the local record's clock).
    pub(crate) async fn spend(&self, nonce: u64, exp: u64, now: u64) -> Result<Spend, SpentError> {
        let outcome = match &self.record {
            Store::Local(states) => Ok(states.spend(nonce, exp, now)),
            Store::Shared(record) => record.spend(nonce, exp).await,
        };
        self.refusals.count(&outcome);
        outcome
    }

    /// Spent states remembered here and the most that can be (`(0, 0)` for a
    /// pluggable record: it keeps its own count).
    pub(crate) fn stats(&self) -> (usize, usize) {
        match &self.record {
            Store::Local(states) => (states.len(), states.capacity()),
            Store::Shared(_) => (0, 0),
        }
    }

    /// The refusals counted so far (shared: it keeps counting).
    pub(crate) fn refusals(&self) -> Arc<SpentRefusals> {
        self.refusals.clone()
    }
}

impl std::fmt::Debug for Spender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.record {
            Store::Local(states) => states.fmt(f),
            Store::Shared(_) => f.write_str("SpentRecord(..)"),
        }
    }
}

#[derive(Default)]
struct Record {
    by_nonce: HashSet<u64>,
    by_expiry: BinaryHeap<Reverse<(u64, u64)>>,
}

/// Spent request states of one suite (per process: see `docs/security.md`).
pub(crate) struct SpentStates {
    capacity: usize,
    record: Mutex<Record>,
}

impl std::fmt::Debug for SpentStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpentStates")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

impl SpentStates {
    /// A record of at most `capacity` (at least 1) unexpired spent states.
    pub(crate) fn new(capacity: usize) -> Self {
        SpentStates {
            capacity: capacity.max(1),
            record: Mutex::new(Record::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spends the state `nonce` expiring at `exp` (ms since the epoch), at
    /// time `now`.
    pub(crate) fn spend(&self, nonce: u64, exp: u64, now: u64) -> Spend {
        let mut r = self.lock();
        while let Some(Reverse((e, n))) = r.by_expiry.peek().copied() {
            if e > now {
                break;
            }
            r.by_expiry.pop();
            r.by_nonce.remove(&n);
        }
        if r.by_nonce.contains(&nonce) {
            return Spend::Replayed;
        }
        if r.by_nonce.len() >= self.capacity {
            let oldest = r.by_expiry.peek().map_or(0, |Reverse((e, _))| *e);
            return Spend::Full(oldest.saturating_sub(now));
        }
        r.by_nonce.insert(nonce);
        r.by_expiry.push(Reverse((exp, nonce)));
        Spend::Fresh
    }

    /// Spent states remembered now (some may have expired since the last spend).
    pub(crate) fn len(&self) -> usize {
        self.lock().by_nonce.len()
    }

    /// The most states ever remembered at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Allocated slots of the two structures (for the memory bound test).
    #[cfg(test)]
    fn allocated(&self) -> (usize, usize) {
        let r = self.lock();
        (r.by_nonce.capacity(), r.by_expiry.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Down;

    impl SpentRecord for Down {
        fn spend(&self, _: u64, _: u64) -> BoxFuture<Result<Spend, SpentError>> {
            Box::pin(async { Err(SpentError::Unavailable("down".into())) })
        }
    }

    fn count(spender: &Spender, reason: &str) -> u64 {
        let counts = spender.refusals().counts();
        counts
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }

    #[actix_rt::test]
    async fn refusals_are_counted_by_reason_and_fresh_spends_are_not() {
        let local = Spender::new(Store::Local(SpentStates::new(1)));
        assert_eq!(local.spend(1, 1_000, 0).await, Ok(Spend::Fresh));
        assert_eq!(local.spend(1, 1_000, 1).await, Ok(Spend::Replayed));
        assert!(matches!(local.spend(2, 1_000, 1).await, Ok(Spend::Full(_))));
        assert_eq!((count(&local, "replayed"), count(&local, "full")), (1, 1));
        assert_eq!(count(&local, "unavailable"), 0);
        let down = Spender::new(Store::Shared(Arc::new(Down)));
        assert!(down.spend(3, 1_000, 0).await.is_err());
        assert_eq!(count(&down, "unavailable"), 1);
        assert_eq!(count(&down, "replayed"), 0);
    }

    #[test]
    fn a_state_is_spent_once() {
        let s = SpentStates::new(10);
        assert_eq!(s.spend(7, 1_000, 0), Spend::Fresh);
        assert_eq!(s.spend(7, 1_000, 1), Spend::Replayed);
        assert_eq!(s.spend(8, 1_000, 1), Spend::Fresh);
        // Forgotten only once expired (when it is refused as expired anyway).
        assert_eq!(s.spend(9, 2_000, 1_000), Spend::Fresh);
        assert_eq!(s.len(), 1);
    }

    /// 150,000 distinct spent states that all stay unexpired, at the default
    /// capacity: the record stops at 100,000 and refuses the rest (never
    /// forgetting a live one), and its allocations stay within the documented
    /// bound (at most 131,072 slots per structure, of 8 and 16 bytes: about 3.3 MB).
    #[test]
    fn a_flood_of_unexpired_states_stops_at_the_bound() {
        let cap = DEFAULT_MAX_SPENT_REQUEST_STATES;
        let s = SpentStates::new(cap);
        let mut full = 0;
        for nonce in 0..150_000u64 {
            match s.spend(nonce, u64::MAX, 0) {
                Spend::Fresh => {}
                Spend::Full(_) => full += 1,
                Spend::Replayed => panic!("distinct nonce {nonce} seen as replayed"),
            }
        }
        assert_eq!(s.len(), cap);
        assert_eq!(full, 150_000 - cap);
        let (map, heap) = s.allocated();
        assert!(map <= 131_072 && heap <= 131_072, "{map} {heap}");
        // Every remembered one is still refused as a replay.
        assert_eq!(s.spend(0, u64::MAX, 0), Spend::Replayed);
        assert_eq!(s.spend(cap as u64 - 1, u64::MAX, 0), Spend::Replayed);
    }

    /// 100,000 distinct states spent over time, each living 1,000 ms, one per
    /// ms: the record holds about one lifetime's worth, never more than its
    /// capacity, and refuses none.
    #[test]
    fn expired_states_make_room() {
        let s = SpentStates::new(DEFAULT_MAX_SPENT_REQUEST_STATES);
        let mut most = 0;
        for i in 0..100_000u64 {
            assert_eq!(s.spend(i, i + 1_000, i), Spend::Fresh);
            most = most.max(s.len());
        }
        assert!(most <= 1_000, "{most}");
        let (map, heap) = s.allocated();
        assert!(map <= 4_096 && heap <= 4_096, "{map} {heap}");
    }
}
