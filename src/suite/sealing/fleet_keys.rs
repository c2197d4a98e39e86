//! [`FleetKeys`]: whether this node's sealing key set agrees with the other
//! nodes of its Redis bus. (Everything here talks to Redis: with the optional
//! `redis` feature this whole file is gated by it.)
//!
//! Each node publishes, in the hash `<prefix>sealing-keys` (one key, so it
//! works on a Redis Cluster too), a field named by its bus node id holding its
//! key ids (`{"current": kid, "ids": [kid, ...], "exp": ms}`; ids are hashes,
//! never keys), refreshed every [`FleetKeys::every`] and kept for three
//! periods. The node **agrees** with the fleet when, for every other node
//! still present, each can open what the other seals: the other's current id
//! is in this node's set and this node's current id is in the other's. A
//! node that does not agree says so in its log (at start and whenever the
//! verdict changes) and, through [`FleetKeys::agrees`], in `/readyz`. While
//! Redis cannot be asked the last verdict stands (the bus's own check reports
//! Redis).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::seal::{SealingKeys, now_ms};
use crate::pubsub::{BusError, RedisOnce};

/// Default of [`FleetKeys::every`].
pub const DEFAULT_FLEET_KEYS_EVERY: Duration = Duration::from_secs(10);

/// The hash the nodes publish their key ids in (after the bus's prefix).
const HASH: &str = "sealing-keys";

/// Whether this node's key set agrees with its fleet's. Cheap to clone.
///
/// Each node publishes, in the Redis hash `<prefix>sealing-keys`, a field
/// named by its bus node id holding its key ids (never keys), refreshed every
/// [`FleetKeys::every`] and kept for three periods. The node agrees when, for
/// every other node still present, each holds the other's current key. A
/// disagreement is logged (at start and when the verdict changes) and read by
/// `/readyz` through [`FleetKeys::agrees`].
#[derive(Clone)]
pub struct FleetKeys {
    once: RedisOnce,
    keys: SealingKeys,
    every: Duration,
    agrees: Arc<AtomicBool>,
    last_problem: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for FleetKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetKeys")
            .field("node", &self.once.node())
            .field("agrees", &self.agrees())
            .finish()
    }
}

impl FleetKeys {
    /// Checks `keys` against the other nodes of the bus `once` belongs to
    /// ([`crate::pubsub::Bus::once`]); agrees until a check says otherwise.
    pub fn new(once: RedisOnce, keys: SealingKeys) -> Self {
        FleetKeys {
            once,
            keys,
            every: DEFAULT_FLEET_KEYS_EVERY,
            agrees: Arc::new(AtomicBool::new(true)),
            last_problem: Arc::new(Mutex::new(None)),
        }
    }

    /// How often the ids are published and compared (default
    /// [`DEFAULT_FLEET_KEYS_EVERY`]; a node's entry lasts three periods).
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every.max(Duration::from_millis(100));
        self
    }

    /// The verdict of the last check.
    pub fn agrees(&self) -> bool {
        self.agrees.load(Ordering::Acquire)
    }

    /// What disagreed at the last check, if anything.
    pub fn problem(&self) -> Option<String> {
        self.last_problem
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Publishes this node's ids, reads the others' and updates the verdict
    /// (logged when it changes); returns it. Fails when Redis cannot be asked
    /// (the verdict is then unchanged).
    pub async fn check(&self) -> Result<bool, BusError> {
        let set = self.keys.get();
        let me = self.once.node();
        let now = now_ms();
        let ttl = u64::try_from(self.every.as_millis()).unwrap_or(u64::MAX);
        let entry = json!({"current": set.current_id(), "ids": set.ids(),
            "exp": now.saturating_add(ttl.saturating_mul(3))});
        let mut hset = ::redis::cmd("HSET");
        hset.arg(self.once.key(HASH))
            .arg(&me)
            .arg(entry.to_string());
        let _: i64 = self.once.query(hset).await?;
        let mut all = ::redis::cmd("HGETALL");
        all.arg(self.once.key(HASH));
        let fields: Vec<(String, String)> = self.once.query(all).await?;
        let mut problems = Vec::new();
        let mut stale = Vec::new();
        for (node, text) in fields {
            if node == me {
                continue;
            }
            let Ok(other) = serde_json::from_str::<Value>(&text) else {
                stale.push(node);
                continue;
            };
            if other["exp"].as_u64().is_none_or(|exp| exp < now) {
                stale.push(node);
                continue;
            }
            let current = other["current"].as_str().unwrap_or_default();
            let ids: Vec<&str> = other["ids"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if !set.contains(current) {
                problems.push(format!(
                    "node {node} seals with key {current}, which this node does not hold"
                ));
            }
            if !ids.contains(&set.current_id()) {
                problems.push(format!(
                    "node {node} cannot open this node's current key {}",
                    set.current_id()
                ));
            }
        }
        if !stale.is_empty() {
            let mut hdel = ::redis::cmd("HDEL");
            hdel.arg(self.once.key(HASH)).arg(stale);
            let _: Result<i64, _> = self.once.query(hdel).await;
        }
        let agrees = problems.is_empty();
        let problem = (!agrees).then(|| problems.join("; "));
        let was = self.agrees.swap(agrees, Ordering::AcqRel);
        let mut last = self.last_problem.lock().unwrap_or_else(|p| p.into_inner());
        if !agrees && (was || *last != problem) {
            tracing::error!(keys = ?set.ids(), problem = problem.as_deref().unwrap_or_default(),
                "this node's sealing key set disagrees with the fleet's: tokens sealed on one node \
                 will not open on another (see docs/auth.md, rotating the sealing key)");
        } else if agrees && !was {
            tracing::info!(keys = ?set.ids(), "this node's sealing key set agrees with the fleet's again");
        }
        *last = problem;
        Ok(agrees)
    }

    /// Runs [`FleetKeys::check`] every [`FleetKeys::every`] on a task of the
    /// current actix/tokio runtime (the first at once); a failed check is
    /// logged at debug level and leaves the verdict. Ends with the runtime.
    pub fn spawn(&self) -> tokio::task::JoinHandle<()> {
        let fleet = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(fleet.every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = fleet.check().await {
                    tracing::debug!(error = %e, "the fleet's key ids could not be checked");
                }
            }
        })
    }
}
