//! [`RedisSpentRecord`]: the spent `requestState` record shared by the nodes
//! of one Redis bus, so a sealed state is honoured at most once across all of
//! them (not once per node).
//!
//! Spending the state with nonce `n` (the random 64-bit number sealed into
//! it) is `SET <prefix>spent:<n as 16 hex digits> 1 NX PXAT <exp + margin>`
//! on the bus's Redis server, through the bus's own connection
//! ([`crate::pubsub::RedisOnce`]): the first `SET` on any node wins, every
//! later one (on any node) is a replay. `<prefix>` is the bus's
//! [`crate::pubsub::RedisBusConfig::prefix`] (default `genmcp:`), so
//! deployments sharing one Redis stay apart.
//!
//! - **Memory.** Redis forgets each key at the state's sealed expiry `exp`
//!   plus [`DEFAULT_CLOCK_MARGIN`]: it holds at most the states spent within
//!   one `request_state_ttl` + margin (about 120 bytes each
//!   on Redis 7.0: see `docs/auth.md`). Nothing is kept
//!   on the node.
//! - **Clocks.** `exp` is set by the sealing node's clock and checked by the
//!   spending node's; the key expires by Redis's clock. The margin keeps a key
//!   while any node may still accept its state, as long as the clocks are
//!   within the margin of each other.
//! - **Failure: closed.** Redis unreachable, slow (more than the bus's
//!   `command_timeout`, 2 s by default) or refusing the command: the retry is
//!   refused with `-32603` "cannot check requestState against replay ... retry
//!   later" and the state is not honoured. Too many spends waiting for Redis
//!   (the bus's `max_claims`): `-32603` / HTTP 429 with `Retry-After: 1`.

use std::sync::Arc;
use std::time::Duration;

use crate::pubsub::{Bus, BusError, RedisOnce};
use crate::suite::{BoxFuture, Spend, SpentError, SpentRecord};

/// How long a spent state's key outlives the state's own expiry (default of
/// [`RedisSpentRecord::clock_margin`]): the clock difference between nodes
/// and Redis that is tolerated.
pub const DEFAULT_CLOCK_MARGIN: Duration = Duration::from_secs(60);

/// Spent request states recorded in Redis (see the [module docs](self)).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use genmcp::suite::shared_spent::RedisSpentRecord;
/// use genmcp::mux::SharedNotification;
/// use genmcp::prelude::*;
/// use genmcp::pubsub::RedisBusConfig;
/// let bus: Bus<SharedNotification> =
///     Bus::redis(RedisBusConfig::new("redis://127.0.0.1:6380")).await?;
/// let mut builder = Suite::builder(Implementation::new("app", "1.0.0")).secret([7; 32]);
/// if let Some(record) = RedisSpentRecord::for_bus(&bus) {
///     builder = builder.spent_record(record);
/// }
/// let suite = builder.build();
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedisSpentRecord {
    once: RedisOnce,
    margin_ms: u64,
}

impl RedisSpentRecord {
    /// A record in the keys of `once`, with the default clock margin.
    pub fn new(once: RedisOnce) -> Self {
        RedisSpentRecord {
            once,
            margin_ms: millis(DEFAULT_CLOCK_MARGIN),
        }
    }

    /// The record of a Redis `bus`, ready for
    /// [`crate::suite::SuiteBuilder::spent_record`]; `None` for an embedded
    /// bus (a single node: the suite's in-memory record is right).
    pub fn for_bus<M>(bus: &Bus<M>) -> Option<Arc<dyn SpentRecord>>
    where
        M: Clone + Send + 'static,
    {
        bus.once()
            .map(|once| Arc::new(Self::new(once)) as Arc<dyn SpentRecord>)
    }

    /// How long a key outlives its state's expiry (default
    /// [`DEFAULT_CLOCK_MARGIN`]).
    pub fn clock_margin(mut self, margin: Duration) -> Self {
        self.margin_ms = millis(margin);
        self
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl SpentRecord for RedisSpentRecord {
    fn spend(&self, nonce: u64, expires_at_ms: u64) -> BoxFuture<Result<Spend, SpentError>> {
        let once = self.once.clone();
        let until = expires_at_ms.saturating_add(self.margin_ms);
        Box::pin(async move {
            match once.claim(&format!("spent:{nonce:016x}"), until).await {
                Ok(true) => Ok(Spend::Fresh),
                Ok(false) => Ok(Spend::Replayed),
                Err(BusError::Busy { .. }) => Ok(Spend::Full(1_000)),
                Err(e) => Err(SpentError::Unavailable(e.to_string())),
            }
        })
    }
}
