//! The Redis engine of [`super::Bus`]: several nodes share one Redis server,
//! and an event published on any node reaches the subscribers of every node.
//!
//! - A publish is handed to this node's subscribers at once (no Redis round
//!   trip), then serialized **once** (JSON behind a header: the publishing
//!   node's id, its sequence number and, with a key, an HMAC tag; see
//!   [`wire`]) and queued for Redis `PUBLISH` on the channel
//!   `<prefix><topic>`.
//! - Each node holds **one** Redis subscription connection for all the topics
//!   of a bus (one per `Bus`; the demo has one bus):
//!   it `SUBSCRIBE`s a channel when the topic's first local subscriber
//!   appears and `UNSUBSCRIBE`s when the last one goes.
//! - A node skips the messages it published itself (they carry its id), so
//!   nothing is delivered twice.
//! - With a key ([`RedisBusConfig::key`], derived from the nodes' shared
//!   sealing key) a node delivers only messages with a valid tag (else
//!   `forged`) and a sequence number newer than the last seen from their node
//!   (else `replayed`); every dropped message is counted
//!   ([`dropped_messages`], `genmcp_bus_messages_dropped_total`). Without a
//!   key the bus logs at start that messages are not authenticated.
//!
//! **Guarantee: at most once, in order per topic per publishing node.** An
//! event may be lost (Redis down, a subscriber too slow, a topic subscribed
//! after the event was published) but is never duplicated, and two events
//! published on the same node on the same topic arrive everywhere in the order
//! they were published. Events from different nodes have no relative order.
//!
//! All Redis I/O runs on one dedicated thread (`genmcp-redis`, a
//! current-thread tokio runtime): a slow or hung Redis never blocks a worker
//! thread. The bounds between the bus and that thread:
//!
//! | bound | default | when hit |
//! |---|---|---|
//! | publishes waiting for Redis ([`RedisBusConfig::publish_queue`]) | 4,096 | [`super::Bus::try_publish`] fails with [`BusError::Backlog`]; `publish_wait` waits |
//! | one encoded publish or burst ([`RedisBusConfig::max_payload`]) | 1 MiB | local subscribers have it; [`BusError::TooLarge`], not sent |
//! | wait for room in this node's mailboxes, per event from another node, shared by all its streams ([`RedisBusConfig::stall`]) | 250 ms | the streams still full are ended as `Overflow` |
//! | a Redis command's answer ([`RedisBusConfig::command_timeout`]) | 2 s | the connection is treated as lost |
//! | keep-alive `PING` on the subscription connection ([`RedisBusConfig::ping_interval`]) | 5 s | no answer within `command_timeout`: lost |
//! | [`RedisOnce::claim`]s waiting for Redis ([`RedisBusConfig::max_claims`]) | 1,024 | the claim fails at once with [`BusError::Busy`] |
//! | a message from Redis ([`RedisBusConfig::max_payload`]) | 1 MiB | dropped (`oversized`) |
//! | checked messages from Redis waiting for delivery ([`RedisBusConfig::max_inbound`]) | 1,024 | dropped (`backlog`); the connection is treated as lost |
//! | with a key: publishing nodes remembered ([`RedisBusConfig::max_nodes`]) | 4,096 | the longest silent is forgotten |
//! | with a key: publish time vs this node's clock ([`RedisBusConfig::replay_window`]) | ±60 s | dropped (`replayed`) |
//!
//! The redis crate reads the subscription connection into an unbounded queue
//! of its own; the Redis thread empties it as messages arrive (checking each
//! at once) into the bounded `max_inbound` queue, so the crate's queue only
//! holds what arrives between two turns of the thread. One message is read
//! whole before it can be checked: Redis's `proto-max-bulk-len` bounds it.
//!
//! The bus also lends its command connection to [`RedisOnce`] ([`Bus::once`]):
//! set-once keys with an expiry, which the nodes use to honour a sealed
//! `requestState` at most once across all of them (`docs/bus.md`).
//!
//! When the connection is lost every local subscriber is asked to complete
//! ([`super::Inbox::complete`]: its stream ends with its completion result,
//! the client listens again), except the durable ones
//! ([`super::Bus::subscribe_durable`]), which stay subscribed; publishes fail
//! with [`BusError::Unavailable`],
//! and the thread reconnects with exponential back-off from
//! [`RedisBusConfig::reconnect_min`] (100 ms) doubling up to
//! [`RedisBusConfig::reconnect_max`] (5 s), for as long as the bus lives. The
//! back-off also grows after a connection that was lost within
//! `reconnect_max` (a Redis that accepts connections but refuses commands is
//! not retried in a hot loop); it starts again from `reconnect_min` only
//! after a connection that lasted at least `reconnect_max`. The bus reports
//! [`BusHealth::Connected`] once the channels its streams need are
//! subscribed, not merely when the connection is open, durable subscriptions
//! included; then it raises its epoch ([`super::Bus::epoch`]).
//! Streams opened while disconnected stay open: they get this node's events at
//! once and the other nodes' from the reconnection on.
//!
//! **Durable subscriptions** ([`super::Bus::subscribe_durable`]) are what a
//! node depends on (its control topics, a watch that lives as long as a
//! client's stream). What holds: a durable subscription hears every event
//! published after the bus reports [`BusHealth::Connected`] again (on a
//! cluster: after its shard's return, which raises the epoch too). What is
//! published while the link is down is lost, as for any subscription: its
//! user re-reads the state those events would have changed on each new epoch
//! ([`super::Bus::epochs`]). [`super::Bus::subscribed`] waits until the
//! topics subscribed so far are subscribed on Redis: subscribe, wait, then
//! read, and no event falls in between.
//!
//! **On a Redis Cluster** (`redis+cluster://HOST:PORT,HOST:PORT,...`, seed
//! nodes) the same bus uses sharded pub/sub: each topic's channel is
//! `SSUBSCRIBE`d and `SPUBLISH`ed on the master serving its hash slot only,
//! over one connection per master driven by the slot map; losing a master
//! completes only the streams whose topics hash to its slots (not the durable
//! subscriptions: they are `SSUBSCRIBE`d again on the shard's return, which
//! raises the epoch), and publishes to those topics fail until it (or its
//! replacement) is reached again.
//! [`RedisOnce`] commands go through the redis crate's cluster connection.
//! Sequence numbers are checked per publishing node per shard. See `cluster`
//! and `docs/bus.md`.
//!
//! The module by idea: `config` (the settings and their bounds), `link` (what
//! the bus and the Redis thread share), `remote` (the publishing side),
//! `task` (the Redis thread), `cluster` (the Redis thread on a cluster),
//! `conn` (the command connection, one server or a cluster), `slot` (hash
//! slots), `once` (set-once keys), [`wire`] (the frame and
//! its tag), `inbound` (the checks on each message from Redis: size, tag,
//! replay), `dropped` (the count of refused messages).
//!
//! [`BusHealth::Connected`]: super::BusHealth::Connected

mod cluster;
mod config;
mod conn;
mod dropped;
mod inbound;
mod keys;
mod lifecycle;
mod link;
mod once;
mod publish;
mod remote;
mod slot;
mod task;
pub mod wire;

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};

pub use config::{RedisBusConfig, StartMode, display_url};
pub use dropped::{DropReason, dropped_messages};
pub use keys::{BusKeys, MAX_BUS_KEYS};
pub use once::RedisOnce;

use super::{Bus, BusError};
use link::Link;
use remote::RedisRemote;

impl<M> Bus<M>
where
    M: Clone + Send + Serialize + DeserializeOwned + 'static,
{
    /// A bus shared with the other nodes connected to the same Redis server,
    /// or Redis Cluster with a `redis+cluster://` URL (see the
    /// [module docs](self) for the guarantee and the bounds). Waits
    /// for the first connection (at most [`RedisBusConfig::connect_timeout`]);
    /// if it fails, returns [`BusError::Unavailable`] or, with
    /// [`StartMode::Degraded`], a disconnected bus that keeps trying. Works
    /// from any async runtime or none: the Redis I/O runs on its own thread.
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub async fn redis(config: RedisBusConfig) -> Result<Bus<M>, BusError> {
        let seeds = config::cluster_seeds(&config.url).transpose()?;
        let client = match seeds {
            Some(_) => None,
            None => Some(
                ::redis::Client::open(config.url.as_str())
                    .map_err(|e| BusError::Config(format!("bad Redis URL: {e}")))?,
            ),
        };
        config.validate()?;
        if config.key.is_none() {
            tracing::warn!(
                url = %display_url(&config.url),
                "event bus messages are NOT authenticated: anyone who can reach this Redis \
                 can publish to every node's streams; give the nodes a shared key \
                 (--key-file) to authenticate them"
            );
        }
        let mut node = [0u8; 8];
        getrandom::fill(&mut node)
            .map_err(|e| BusError::Config(format!("no random node id: {e}")))?;
        let (tx, rx) = mpsc::channel(config.publish_queue);
        let link = Arc::new(Link::new(&config, u64::from_le_bytes(node)));
        let link_is_cluster = link.cluster;
        let remote_link = link.clone();
        let bus = Bus::with_remote(move |_| Box::new(RedisRemote::<M>::new(remote_link, tx)));
        let (started_tx, started_rx) = oneshot::channel();
        match (client, seeds) {
            (Some(client), _) => task::spawn(
                client,
                config,
                link,
                Arc::downgrade(&bus.inner),
                rx,
                started_tx,
            )?,
            (None, Some(seeds)) => cluster::spawn(
                seeds,
                config,
                link,
                Arc::downgrade(&bus.inner),
                rx,
                started_tx,
            )?,
            (None, None) => return Err(BusError::Config("no Redis URL".into())),
        }
        if !link_is_cluster {
            let weak: std::sync::Weak<crate::pubsub::BusInner<M>> = Arc::downgrade(&bus.inner);
            crate::pubsub::synced::register(weak);
        }
        match started_rx.await {
            Ok(Ok(())) => Ok(bus),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(BusError::Config("the Redis thread ended at start".into())),
        }
    }
}
