//! The Redis thread of a bus on a Redis Cluster (`redis+cluster://`): sharded
//! pub/sub, one connection per master.
//!
//! - Commands ([`super::RedisOnce`]) go through the redis crate's cluster
//!   connection, which routes each to the master of its key's slot.
//! - Events: each master (shard) gets its own RESP3 connection, driven by the
//!   slot map (`CLUSTER SLOTS`). A topic's channel `<prefix><topic>` hashes to
//!   one slot ([`super::slot`]); the node `SSUBSCRIBE`s it, and `SPUBLISH`es
//!   to it, on the connection of the master serving that slot only, so a
//!   topic's messages go through its shard alone.
//! - Losing a shard's connection completes only the streams whose topics hash
//!   to that shard's slots ([`super::super::Inbox::complete`]); publishes to
//!   those topics fail with [`BusError::Unavailable`] until the slot map
//!   (read again with the usual back-off) names a reachable master for them.
//!   The other shards keep going.
//! - A sequence number is checked per publishing node **per shard** (each
//!   shard's connection delivers in order, the shards relative to each other
//!   do not), with one [`Verifier`] per master address kept across
//!   reconnections.
//!
//! Why not the redis crate's own cluster pub/sub: it resubscribes on its own
//! after a disconnection and does not say which node was lost, so a node could
//! not tell which streams missed events; a connection per shard can.
//!
//! The module by idea: `slot_map` (`CLUSTER SLOTS`: the masters and their
//! slots), `connect` (a shard's connection, reaching lost masters again),
//! `shard` (one shard's session), `engine` (the thread's loop: lives of the
//! cluster connection, publishes routed by slot, lost shards restarted).

mod connect;
mod engine;
mod shard;
mod slot_map;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};

use ::redis::cluster::ClusterClientBuilder;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};

use super::RedisBusConfig;
use super::inbound::Verifier;
use super::link::{Link, Outgoing};
use crate::pubsub::{BusError, BusInner};

/// Starts the Redis thread of a cluster bus (see [`super::task::spawn`]).
pub(super) fn spawn<M: Clone + Send + DeserializeOwned + 'static>(
    seeds: Vec<String>,
    config: RedisBusConfig,
    link: Arc<Link>,
    bus: Weak<BusInner<M>>,
    rx: mpsc::Receiver<Outgoing>,
    started: oneshot::Sender<Result<(), BusError>>,
) -> Result<(), BusError> {
    let base = ::redis::Client::open(seeds.first().map(String::as_str).unwrap_or_default())
        .map_err(|e| BusError::Config(format!("bad Redis Cluster seed: {e}")))?
        .get_connection_info()
        .clone();
    let client = ClusterClientBuilder::new(seeds)
        .connection_timeout(config.connect_timeout)
        // A backstop: each command is bounded by `command_timeout` where it is sent.
        .response_timeout(config.command_timeout.saturating_mul(2))
        .retries(2)
        .build()
        .map_err(|e| BusError::Config(format!("bad Redis Cluster URL: {e}")))?;
    let task = ClusterTask {
        client,
        base,
        config,
        link,
        bus,
        rx,
        verifiers: HashMap::new(),
        seq: Arc::new(AtomicU64::new(0)),
    };
    super::lifecycle::spawn(task, started)
}

/// The Redis thread's state on a cluster.
struct ClusterTask<M> {
    client: ::redis::cluster::ClusterClient,
    /// The first seed's settings (credentials, database): every shard
    /// connection uses them, with the shard's address.
    base: ::redis::ConnectionInfo,
    config: RedisBusConfig,
    link: Arc<Link>,
    bus: Weak<BusInner<M>>,
    rx: mpsc::Receiver<Outgoing>,
    /// The checks on messages, one per master address, kept across
    /// reconnections.
    verifiers: HashMap<String, Verifier>,
    /// The sequence number of this node's last publish (all shards).
    seq: Arc<AtomicU64>,
}
