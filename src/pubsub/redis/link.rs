//! What the bus and the Redis thread share: the [`Link`] and the publishes on
//! their way to Redis.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, oneshot, watch};

use super::conn::CommandConn;
use super::{RedisBusConfig, display_url};
use crate::pubsub::BusError;
use crate::pubsub::local::lock;

/// One publish on its way to Redis: a frame ([`super::wire`]) whose header
/// the Redis thread writes when it sends it (so sequence numbers follow the
/// order of the `PUBLISH`es).
pub(super) struct Outgoing {
    pub(super) channel: String,
    pub(super) payload: Vec<u8>,
    /// A sync marker ([`Link::sync_channel`]): sent as it is, without a
    /// header or a sequence number.
    pub(super) marker: bool,
}

/// Sync markers ([`crate::pubsub::Bus::sync`]) waiting to come back at most.
pub(super) const MAX_SYNCS: usize = 1024;

/// What the bus and the Redis thread share.
pub(super) struct Link {
    pub(super) node: u64,
    pub(super) prefix: String,
    pub(super) url: String,
    pub(super) connected: AtomicBool,
    last_error: Mutex<String>,
    pub(super) capacity: usize,
    pub(super) max_payload: usize,
    pub(super) topics_changed: Notify,
    /// Tickets of [`crate::pubsub::Bus::subscribed`] calls, numbered from 1;
    /// the Redis thread reads it before it reads the local topics.
    pub(super) requested: AtomicU64,
    /// The last ticket whose topics are all subscribed on Redis (on a
    /// cluster: on every running shard).
    pub(super) synced: watch::Sender<u64>,
    /// The command connection while connected (for [`super::RedisOnce`]).
    pub(super) conn: Mutex<Option<CommandConn>>,
    /// On a Redis Cluster: the slot ranges of the shards this node has lost
    /// (until it reaches them again); publishes to their topics fail.
    pub(super) down: Mutex<Vec<(u16, u16)>>,
    /// The Redis thread's runtime, where [`super::RedisOnce`] commands run.
    pub(super) runtime: std::sync::OnceLock<tokio::runtime::Handle>,
    pub(super) command_timeout: Duration,
    pub(super) claims: Arc<Semaphore>,
    pub(super) max_claims: usize,
    /// This node's own channel for sync markers (no topic has its name: a
    /// topic's channel is the prefix and the topic, and this one holds a NUL).
    pub(super) sync_channel: String,
    /// Sync markers sent and not back yet, by token; emptied (each waiter
    /// answered with an error) when the session is lost.
    syncs: Mutex<HashMap<u64, oneshot::Sender<()>>>,
    next_sync: AtomicU64,
    /// On a Redis Cluster no one channel orders every topic: no sync.
    pub(super) cluster: bool,
}

impl Link {
    /// The shared state of a bus with `config`, as node `node`, not connected.
    pub(super) fn new(config: &RedisBusConfig, node: u64) -> Self {
        Link {
            node,
            prefix: config.prefix.clone(),
            url: display_url(&config.url),
            connected: AtomicBool::new(false),
            last_error: Mutex::new("not connected yet".into()),
            capacity: config.publish_queue,
            max_payload: config.max_payload,
            topics_changed: Notify::new(),
            requested: AtomicU64::new(0),
            synced: watch::Sender::new(0),
            conn: Mutex::new(None),
            down: Mutex::new(Vec::new()),
            runtime: std::sync::OnceLock::new(),
            command_timeout: config.command_timeout,
            claims: Arc::new(Semaphore::new(config.max_claims)),
            max_claims: config.max_claims,
            sync_channel: format!("{}genmcp\0sync/{node:016x}", config.prefix),
            syncs: Mutex::new(HashMap::new()),
            next_sync: AtomicU64::new(1),
            cluster: super::config::cluster_seeds(&config.url).is_some(),
        }
    }

    /// The ticket a pass over the local topics answers: read before the
    /// topics are.
    pub(super) fn ticket(&self) -> u64 {
        self.requested.load(Ordering::SeqCst)
    }

    /// The topics read after `ticket` was taken are subscribed.
    pub(super) fn synced_to(&self, ticket: u64) {
        self.synced.send_if_modified(|s| {
            let newer = ticket > *s;
            if newer {
                *s = ticket;
            }
            newer
        });
    }

    pub(super) fn unavailable(&self) -> BusError {
        BusError::Unavailable {
            url: self.url.clone(),
            reason: lock(&self.last_error).clone(),
        }
    }

    pub(super) fn set_lost(&self, reason: String) {
        *lock(&self.last_error) = reason;
        *lock(&self.conn) = None;
        self.connected.store(false, Ordering::Release);
        // Markers of the lost session never come back: their waiters fail.
        lock(&self.syncs).clear();
    }

    /// A new sync marker: its token and what answers when it is back.
    /// `None` when [`MAX_SYNCS`] already wait.
    pub(super) fn new_sync(&self) -> Option<(u64, oneshot::Receiver<()>)> {
        let mut syncs = lock(&self.syncs);
        if syncs.len() >= MAX_SYNCS {
            return None;
        }
        // Random (a counter besides, should the OS refuse): a marker
        // someone else PUBLISHes on this node's channel cannot be guessed.
        let mut bytes = [0u8; 8];
        let random = getrandom::fill(&mut bytes).map_or(0, |()| u64::from_le_bytes(bytes));
        let token = random ^ self.next_sync.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        syncs.insert(token, tx);
        Some((token, rx))
    }

    /// Forgets a marker whose waiter gave up.
    pub(super) fn forget_sync(&self, token: u64) {
        lock(&self.syncs).remove(&token);
    }

    /// A marker came back on [`Link::sync_channel`] after every message
    /// Redis ran before it was handed to this node's subscribers.
    pub(super) fn sync_back(&self, payload: &[u8]) {
        let Ok(bytes) = <[u8; 8]>::try_from(payload) else {
            return;
        };
        if let Some(tx) = lock(&self.syncs).remove(&u64::from_le_bytes(bytes)) {
            let _ = tx.send(());
        }
    }

    /// Whether the shard of `channel` is lost (always false on one server).
    pub(super) fn shard_down(&self, channel: &str) -> bool {
        let down = lock(&self.down);
        !down.is_empty() && super::slot::within(super::slot::of(channel.as_bytes()), &down)
    }

    pub(super) fn unavailable_because(&self, reason: String) -> BusError {
        BusError::Unavailable {
            url: self.url.clone(),
            reason,
        }
    }
}
