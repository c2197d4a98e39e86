//! [`FleetKeys`]: whether this node's sealing key set is in step with the
//! other nodes of its Redis bus. (Everything here talks to Redis: with the
//! optional `redis` feature this whole file is gated by it.)
//!
//! Each node publishes, in the hash `<prefix>sealing-keys` (one key, so it
//! works on a Redis Cluster too), a field named by its bus node id holding its
//! key ids (`{"current": kid, "ids": [kid, ...], "exp": ms}`; ids are hashes,
//! never keys), refreshed every [`FleetKeys::every`] and kept for three
//! periods. Two nodes **agree** when each can open what the other seals: the
//! other's current id is in each one's set. A node is **in step** with the
//! fleet unless it disagrees with more than half of the nodes present (itself
//! included): one misconfigured node out of three is out of step while the two
//! others stay in step, and a rolling rotation (nodes holding different
//! current keys, each holding the others') keeps every node in step. When the
//! fleet is split evenly no side can be told wrong: every node logs the
//! disagreement and stays in step. [`FleetKeys::in_step`] is what `/readyz`
//! reads; any disagreement is logged (at start and whenever it changes) and
//! kept in [`FleetKeys::problem`]. While Redis cannot be asked the last
//! verdict stands (the bus's own check reports Redis).
//!
//! Reads are bounded: at most [`MAX_FLEET_NODES`] entries of at most
//! [`MAX_FLEET_ENTRY_BYTES`] each are read per check (filtered on the Redis
//! side); entries past either bound are skipped and counted in the problem.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::seal::{SealingKeys, now_ms};
use crate::pubsub::{BusError, RedisOnce};

/// Default of [`FleetKeys::every`].
pub const DEFAULT_FLEET_KEYS_EVERY: Duration = Duration::from_secs(10);

/// Most other nodes' entries one check reads (default and bound; entries past
/// it are skipped, and the skip is reported as a problem).
pub const MAX_FLEET_NODES: usize = 256;

/// Largest entry (node id plus its JSON) one check reads; a larger one is
/// skipped and reported (a well-formed entry of [`super::keys::MAX_KEYS`]
/// ids is under 400 bytes).
pub const MAX_FLEET_ENTRY_BYTES: usize = 2048;

/// The hash the nodes publish their key ids in (after the bus's prefix).
const HASH: &str = "sealing-keys";

/// Publishes this node's entry (`ARGV[1]` field, `ARGV[2]` value) and returns
/// the skip count then up to `ARGV[3]` (field, value) pairs of at most
/// `ARGV[4]` bytes each, so the answer is bounded whatever the hash holds.
const PUBLISH_AND_READ: &str = r#"
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
local most = tonumber(ARGV[3])
local size = tonumber(ARGV[4])
local out = {'0'}
local kept = 0
local skipped = 0
for i = 1, #all, 2 do
  if all[i] ~= ARGV[1] then
    if kept < most and #all[i] + #all[i + 1] <= size then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
      kept = kept + 1
    else
      skipped = skipped + 1
    end
  end
end
out[1] = tostring(skipped)
return out
"#;

/// Whether this node's key set is in step with its fleet's. Cheap to clone.
///
/// Each node publishes, in the Redis hash `<prefix>sealing-keys`, a field
/// named by its bus node id holding its key ids (never keys), refreshed every
/// [`FleetKeys::every`] and kept for three periods. Two nodes agree when each
/// holds the other's current key; a node is in step unless it disagrees with
/// more than half of the nodes present, itself included (so one odd node is
/// flagged, not the fleet it differs from). A disagreement is logged (at
/// start and when it changes) and `/readyz` reads [`FleetKeys::in_step`].
#[derive(Clone)]
pub struct FleetKeys {
    once: RedisOnce,
    keys: SealingKeys,
    every: Duration,
    in_step: Arc<AtomicBool>,
    last_problem: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for FleetKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetKeys")
            .field("node", &self.once.node())
            .field("in_step", &self.in_step())
            .finish()
    }
}

/// One other node's published ids.
struct Entry {
    node: String,
    current: String,
    ids: Vec<String>,
}

impl FleetKeys {
    /// Checks `keys` against the other nodes of the bus `once` belongs to
    /// ([`crate::pubsub::Bus::once`]); in step until a check says otherwise.
    pub fn new(once: RedisOnce, keys: SealingKeys) -> Self {
        FleetKeys {
            once,
            keys,
            every: DEFAULT_FLEET_KEYS_EVERY,
            in_step: Arc::new(AtomicBool::new(true)),
            last_problem: Arc::new(Mutex::new(None)),
        }
    }

    /// How often the ids are published and compared (default
    /// [`DEFAULT_FLEET_KEYS_EVERY`], at least 100 ms; a node's entry lasts
    /// three periods). Every node of a fleet should use the same period.
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every.max(Duration::from_millis(100));
        self
    }

    /// The verdict of the last check: false when this node disagrees with
    /// more than half of the nodes present, itself included.
    pub fn in_step(&self) -> bool {
        self.in_step.load(Ordering::Acquire)
    }

    /// What disagreed at the last check, if anything (also while still in
    /// step, e.g. with the odd node of the fleet).
    pub fn problem(&self) -> Option<String> {
        self.last_problem
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Publishes this node's ids, reads the others' and updates the verdict
    /// (logged when it changes); returns [`FleetKeys::in_step`]. Fails when
    /// Redis cannot be asked (the verdict is then unchanged).
    pub async fn check(&self) -> Result<bool, BusError> {
        let set = self.keys.get();
        let me = self.once.node();
        let now = now_ms();
        let ttl = u64::try_from(self.every.as_millis()).unwrap_or(u64::MAX);
        let entry = json!({"current": set.current_id(), "ids": set.ids(),
            "exp": now.saturating_add(ttl.saturating_mul(3))});
        let mut eval = ::redis::cmd("EVAL");
        eval.arg(PUBLISH_AND_READ)
            .arg(1)
            .arg(self.once.key(HASH))
            .arg(&me)
            .arg(entry.to_string())
            .arg(MAX_FLEET_NODES)
            .arg(MAX_FLEET_ENTRY_BYTES);
        let answer: Vec<String> = self.once.query(eval).await?;
        let mut answer = answer.into_iter();
        let skipped: usize = answer
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_default();
        let mut others = Vec::new();
        let mut stale = Vec::new();
        while let (Some(node), Some(text)) = (answer.next(), answer.next()) {
            match parse_entry(&text, now) {
                Some((current, ids)) => others.push(Entry { node, current, ids }),
                None => stale.push(node),
            }
        }
        if !stale.is_empty() {
            let mut hdel = ::redis::cmd("HDEL");
            hdel.arg(self.once.key(HASH)).arg(stale);
            let _: Result<i64, _> = self.once.query(hdel).await;
        }
        let mut problems = Vec::new();
        let mut disagree = 0usize;
        for other in &others {
            let (node, current) = (&other.node, &other.current);
            let mut agrees = true;
            if !set.contains(current) {
                agrees = false;
                problems.push(format!(
                    "node {node} seals with key {current}, which this node does not hold"
                ));
            }
            if !other.ids.iter().any(|i| i == set.current_id()) {
                agrees = false;
                problems.push(format!(
                    "node {node} cannot open this node's current key {}",
                    set.current_id()
                ));
            }
            if !agrees {
                disagree += 1;
            }
        }
        if skipped > 0 {
            problems.push(format!(
                "{skipped} entries of the fleet were not read (more than {MAX_FLEET_NODES}, \
                 or larger than {MAX_FLEET_ENTRY_BYTES} bytes)"
            ));
        }
        let nodes = others.len() + 1;
        let in_step = disagree.saturating_mul(2) <= nodes;
        let problem = (!problems.is_empty()).then(|| problems.join("; "));
        let was = self.in_step.swap(in_step, Ordering::AcqRel);
        let mut last = self.last_problem.lock().unwrap_or_else(|p| p.into_inner());
        let detail = problem.as_deref().unwrap_or_default();
        if !in_step && (was || *last != problem) {
            tracing::error!(keys = ?set.ids(), disagree, nodes, problem = detail,
                "this node's sealing key set disagrees with most of the fleet's: tokens sealed \
                 on one node will not open on another (see docs/auth.md, rotating the sealing key)");
        } else if in_step && problem.is_some() && *last != problem {
            tracing::warn!(keys = ?set.ids(), disagree, nodes, problem = detail,
                "some nodes' sealing key sets disagree with this node's, which is in step with \
                 most of the fleet (see docs/auth.md, rotating the sealing key)");
        } else if in_step && !was {
            tracing::info!(keys = ?set.ids(), "this node's sealing key set is in step with the fleet's again");
        }
        *last = problem;
        Ok(in_step)
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

/// An entry's current id and ids, `None` when it is malformed or expired.
fn parse_entry(text: &str, now: u64) -> Option<(String, Vec<String>)> {
    let other = serde_json::from_str::<Value>(text).ok()?;
    if other["exp"].as_u64().is_none_or(|exp| exp < now) {
        return None;
    }
    let current = other["current"].as_str()?.to_owned();
    let ids = other["ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Some((current, ids))
}
