//! The event bus: topics, `publish`, bounded delivery into [`Inbox`]es, on
//! one node or across many.
//!
//! An [`Inbox`] is how an application reaches one subscription stream. Delivery is
//! always bounded: [`Inbox::try_send`] fails at once when the stream's mailbox is
//! full, and the runtime then ends that stream with the close reason `Overflow`
//! (the client is not keeping up and must re-listen). [`Inbox::send`] waits for
//! room instead, for producers that want back-pressure rather than loss.
//!
//! A [`Bus`] has one API and two engines, chosen when it is made:
//!
//! - **embedded** ([`Bus::new`]): topics live in this process, nothing leaves it;
//! - **Redis** (`Bus::redis`, module `redis`, with the `redis` feature): the
//!   same local delivery, and every publish also goes, serialized once, to
//!   the other nodes sharing a Redis server, which hand it to their own
//!   subscribers. See `docs/bus.md` for the guarantee (at most once, in order
//!   per topic per publishing node) and the failure behaviour.
//!
//! When a Redis session is lost, ordinary subscriptions are completed (their
//! streams end, clients listen again). What a node depends on is subscribed
//! with [`Bus::subscribe_durable`] instead: kept, and subscribed again by the
//! next session before the bus reports [`BusHealth::Connected`]. It hears
//! every event published after that; what was published during the gap is
//! lost, so the bus counts its sessions ([`Bus::epoch`], [`Bus::epochs`]) and
//! a durable subscriber re-reads its state on each new epoch.
//! [`Bus::subscribed`] waits until the subscriptions made so far are on
//! Redis: subscribe, wait, then read, and nothing falls in between.
//!
//! ```
//! use genmcp::pubsub::Bus;
//! let bus: Bus<&'static str> = Bus::new();
//! // Nobody listens yet: the event reaches no one and is not kept.
//! assert_eq!(bus.publish("tools", "changed"), 0);
//! ```

mod inbox;
mod local;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
#[cfg(all(test, feature = "redis"))]
pub(crate) mod redis_child;
pub(crate) mod synced;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

pub use inbox::{DeliverFuture, Inbox, InboxError, InboxSink};
pub(crate) use inbox::{OverflowSignal, Taps};
use local::Topics;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis::{RedisBusConfig, RedisOnce, StartMode};
#[cfg(feature = "redis")]
pub(crate) use synced::sync_all;
pub(crate) use synced::{Synced, SyncedBuses};

/// Why a publish could not reach the other nodes, or a bus could not start.
/// Local subscribers have already received a failed publish's events.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// The bus is not connected to its Redis server (lost or never reached);
    /// it is reconnecting in the background.
    #[error("event bus unavailable: not connected to Redis at {url} ({reason})")]
    Unavailable {
        /// The server's address (without credentials).
        url: String,
        /// The last connection error.
        reason: String,
    },
    /// The bounded queue of publishes waiting for Redis is full (Redis is
    /// slower than the publishers): this publish was dropped.
    #[error("event bus backlog full: {capacity} publishes already wait for Redis")]
    Backlog {
        /// The queue's bound (`RedisBusConfig::publish_queue`).
        capacity: usize,
    },
    /// The encoded publish (one message, or one burst) is larger than
    /// `RedisBusConfig::max_payload`: local subscribers have it, the other
    /// nodes do not.
    #[error("event bus: the encoded publish is {size} bytes, more than the {max} allowed")]
    TooLarge {
        /// The encoded size in bytes.
        size: usize,
        /// The bound (`RedisBusConfig::max_payload`).
        max: usize,
    },
    /// The configuration cannot work (a bad URL, for example).
    #[error("event bus configuration: {0}")]
    Config(String),
    /// A message could not be serialized.
    #[error("event bus: cannot serialize the message: {0}")]
    Encode(String),
    /// Too many `RedisOnce::claim`s already wait for Redis: this one was
    /// not sent.
    #[error("event bus busy: {capacity} claims already wait for Redis")]
    Busy {
        /// The bound (`RedisBusConfig::max_claims`, or the sync markers'
        /// 1,024 for [`Bus::sync`]).
        capacity: usize,
    },
    /// This bus cannot do what was asked ([`Bus::sync`] on a Redis Cluster).
    #[error("event bus: {0}")]
    Unsupported(&'static str),
}

impl BusError {
    /// A short message that is the same for every error of this kind, for a
    /// client's reply: `event bus unavailable`, `event bus backlog full`,
    /// `event too large for the event bus`, `event bus misconfigured`,
    /// `event could not be encoded`, `event bus busy`. The `Display` text
    /// carries the details (the server's address, the OS error): it is for
    /// the log, never for a client.
    ///
    /// ```
    /// use genmcp::pubsub::BusError;
    /// let e = BusError::Busy { capacity: 3 };
    /// assert_eq!(e.public_message(), "event bus busy");
    /// ```
    pub fn public_message(&self) -> &'static str {
        match self {
            BusError::Unavailable { .. } => "event bus unavailable",
            BusError::Backlog { .. } => "event bus backlog full",
            BusError::TooLarge { .. } => "event too large for the event bus",
            BusError::Config(_) => "event bus misconfigured",
            BusError::Encode(_) => "event could not be encoded",
            BusError::Busy { .. } => "event bus busy",
            BusError::Unsupported(_) => "not supported by this event bus",
        }
    }
}

/// The state of a bus's link to the other nodes, cheap to query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BusHealth {
    /// An embedded bus: there is nothing to lose.
    Embedded,
    /// Connected to Redis: events cross nodes.
    Connected,
    /// Not connected to Redis (never yet, or lost): local subscribers are
    /// served, publishes fail with [`BusError::Unavailable`], the bus is
    /// reconnecting.
    Disconnected,
}

impl BusHealth {
    /// Whether the bus can serve its purpose now (embedded, or connected).
    pub fn is_ready(self) -> bool {
        !matches!(self, BusHealth::Disconnected)
    }

    /// A short lowercase name: `embedded`, `connected`, `disconnected`.
    pub fn as_str(self) -> &'static str {
        match self {
            BusHealth::Embedded => "embedded",
            BusHealth::Connected => "connected",
            BusHealth::Disconnected => "disconnected",
        }
    }
}

/// A boxed `Send` future.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What carries a bus's events to and from the other nodes.
pub(crate) trait Remote<M>: Send + Sync {
    /// Sends `msgs` (one publish) to the other nodes without waiting.
    fn publish(&self, topic: &str, msgs: &[M]) -> Result<(), BusError>;
    /// Sends `msgs`, waiting for room in the queue to Redis.
    fn publish_wait<'a>(
        &'a self,
        topic: &'a str,
        msgs: &'a [M],
    ) -> BoxFuture<'a, Result<(), BusError>>;
    /// The set of local topics changed (one appeared or went away).
    fn topics_changed(&self);
    /// Set-once keys on the shared server, if the link has one.
    #[cfg(feature = "redis")]
    fn once(&self) -> Option<RedisOnce>;
    /// The link's state.
    fn health(&self) -> BusHealth;
    /// Resolves once every topic with a local subscriber when this is called
    /// is subscribed on Redis (see [`Bus::subscribed`]).
    fn subscribed(&self) -> BoxFuture<'static, ()>;
    /// Resolves once every message Redis ran before a marker sent now has
    /// been handed to this node's subscribers (see [`Bus::sync`]).
    fn sync(&self) -> BoxFuture<'static, Result<(), BusError>>;
}

pub(crate) struct BusInner<M> {
    pub(crate) local: Topics<M>,
    remote: Option<Box<dyn Remote<M>>>,
    /// The reconnect epoch ([`Bus::epoch`]): raised by the engine each time
    /// it has subscribed this node's topics on a new session (or a cluster
    /// shard's return).
    pub(crate) epoch: tokio::sync::watch::Sender<u64>,
    /// Publishes handed to the remote link so far ([`Synced::publishes`]).
    published: std::sync::atomic::AtomicU64,
}

impl<M> BusInner<M> {
    fn count_publish(&self) {
        self.published
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// A new session carries the node's topics: the next epoch begins.
    #[cfg(feature = "redis")]
    pub(crate) fn next_epoch(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }
}

/// Follows a bus's reconnect epoch ([`Bus::epochs`]), for a user that must
/// re-read what it may have missed while the bus was disconnected.
#[derive(Debug)]
pub struct BusEpochs {
    rx: tokio::sync::watch::Receiver<u64>,
}

impl BusEpochs {
    /// The epoch now.
    pub fn current(&self) -> u64 {
        *self.rx.borrow()
    }

    /// Waits for an epoch this handle has not seen yet and returns it
    /// (several reconnections in a row are seen as one: the latest);
    /// `None` once the bus is dropped. An embedded bus's epoch never
    /// changes: this waits until the bus is dropped. Cancel-safe.
    pub async fn changed(&mut self) -> Option<u64> {
        self.rx.changed().await.ok()?;
        Some(*self.rx.borrow_and_update())
    }
}

/// A publish/subscribe bus of typed messages, cheap to clone and `Send`:
/// embedded ([`Bus::new`]) or shared by several nodes through Redis
/// (`Bus::redis`, with the `redis` feature), with the same API either way.
pub struct Bus<M> {
    inner: Arc<BusInner<M>>,
}

impl<M> Clone for Bus<M> {
    fn clone(&self) -> Self {
        Bus {
            inner: self.inner.clone(),
        }
    }
}

impl<M: Clone + Send + 'static> Default for Bus<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M> std::fmt::Debug for Bus<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("remote", &self.inner.remote.is_some())
            .finish()
    }
}

/// Keeps an inbox subscribed to a topic; dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes at once"]
pub struct BusSubscription<M> {
    bus: Weak<BusInner<M>>,
    topic: String,
    id: u64,
}

impl<M> Drop for BusSubscription<M> {
    fn drop(&mut self) {
        if let Some(bus) = self.bus.upgrade() {
            bus.unsubscribe(&self.topic, self.id);
        }
    }
}

impl<M> BusInner<M> {
    fn unsubscribe(&self, topic: &str, id: u64) {
        if self.local.remove(topic, id) {
            self.topic_gone();
        }
    }

    fn topic_gone(&self) {
        if let Some(remote) = &self.remote {
            remote.topics_changed();
        }
    }
}

impl<M: Clone + Send + 'static> Bus<M> {
    /// An empty embedded bus.
    pub fn new() -> Self {
        Bus {
            inner: Arc::new(BusInner {
                local: Topics::new(),
                remote: None,
                epoch: tokio::sync::watch::Sender::new(0),
                published: Default::default(),
            }),
        }
    }

    /// A bus whose remote link is made by `make` from a handle on the bus.
    #[cfg(feature = "redis")]
    pub(crate) fn with_remote(make: impl FnOnce(Weak<BusInner<M>>) -> Box<dyn Remote<M>>) -> Self {
        Bus {
            inner: Arc::new_cyclic(|weak| BusInner {
                local: Topics::new(),
                remote: Some(make(weak.clone())),
                epoch: tokio::sync::watch::Sender::new(0),
                published: Default::default(),
            }),
        }
    }

    /// Subscribes `inbox` to `topic` until the returned guard is dropped. On a
    /// Redis bus the node starts receiving `topic` from the other nodes when
    /// its first local subscriber appears (asynchronously: events published
    /// elsewhere before the node's `SUBSCRIBE` reached Redis are not received;
    /// [`Bus::subscribed`] waits for it). When the Redis session is lost the
    /// subscription is completed ([`Inbox::complete`]) and forgotten.
    pub fn subscribe(&self, topic: impl Into<String>, inbox: Inbox<M>) -> BusSubscription<M> {
        self.add(topic.into(), inbox, false)
    }

    /// Subscribes `inbox` to `topic`, like [`Bus::subscribe`], for as long
    /// as the guard lives **whatever happens to the Redis link**: a lost
    /// session (or, on a Redis Cluster, a lost shard) neither completes nor
    /// forgets it, and the next session subscribes its topic again before
    /// the bus reports [`BusHealth::Connected`] again and raises its epoch
    /// ([`Bus::epoch`]). It hears every event published after that; the
    /// events published while the link was down are lost, so a user that
    /// keeps state from them re-reads it on each new epoch
    /// ([`Bus::epochs`]). For what a node depends on for its whole life
    /// (control topics), or while a client's stream lives (its watches).
    ///
    /// ```
    /// use genmcp::pubsub::{Bus, Inbox};
    /// # use std::sync::{Arc, Mutex};
    /// # struct Keep(Mutex<Vec<u32>>);
    /// # impl genmcp::pubsub::InboxSink<u32> for Keep {
    /// #     fn try_deliver(&self, m: u32) -> Result<(), genmcp::pubsub::InboxError> { self.0.lock().unwrap().push(m); Ok(()) }
    /// #     fn deliver(&self, m: u32) -> genmcp::pubsub::DeliverFuture { let r = self.try_deliver(m); Box::pin(async move { r }) }
    /// #     fn is_closed(&self) -> bool { false }
    /// # }
    /// let bus: Bus<u32> = Bus::new();
    /// let keep = Arc::new(Keep(Mutex::new(Vec::new())));
    /// let _control = bus.subscribe_durable("ctl/node-1", Inbox::from_sink(keep.clone()));
    /// bus.publish("ctl/node-1", 7);
    /// assert_eq!(*keep.0.lock().unwrap(), [7]);
    /// ```
    pub fn subscribe_durable(
        &self,
        topic: impl Into<String>,
        inbox: Inbox<M>,
    ) -> BusSubscription<M> {
        self.add(topic.into(), inbox, true)
    }

    fn add(&self, topic: String, inbox: Inbox<M>, durable: bool) -> BusSubscription<M> {
        let weak: Weak<BusInner<M>> = Arc::downgrade(&self.inner);
        inbox.note_bus(weak);
        let (id, new) = self.inner.local.add(&topic, inbox, durable);
        if new && let Some(remote) = &self.inner.remote {
            remote.topics_changed();
        }
        BusSubscription {
            bus: Arc::downgrade(&self.inner),
            topic,
            id,
        }
    }

    /// Waits until every topic subscribed on this node before the call is
    /// subscribed on Redis too, so that an event another node publishes from
    /// then on reaches it. Subscribe, await this, then read the state the
    /// events change: nothing falls between the read and the subscription.
    /// At once on an embedded bus. While the bus is disconnected this waits
    /// for the reconnection (bound the wait with a timeout; a durable
    /// subscription is subscribed then, and the epoch says so). On a Redis
    /// Cluster it waits for the shards that are reachable; a lost shard's
    /// topics are subscribed on its return, which raises the epoch.
    pub fn subscribed(&self) -> impl Future<Output = ()> + Send + 'static {
        let wait = self.inner.remote.as_ref().map(|r| r.subscribed());
        async move {
            if let Some(wait) = wait {
                wait.await;
            }
        }
    }

    /// Waits until every message Redis ran before this call (this node's
    /// own publishes made before it included) has been handed to this
    /// node's subscribers: a marker goes to Redis behind this node's queued
    /// publishes, on a channel of this node's own, and comes back on the
    /// connection that carries the topics. At once on an embedded bus.
    /// Fails when the bus is disconnected or the marker does not come back
    /// within twice `RedisBusConfig::command_timeout`, when 1,024 markers
    /// already wait ([`BusError::Busy`]), and on a Redis Cluster
    /// ([`BusError::Unsupported`]: its shards order messages apart).
    pub fn sync(&self) -> impl Future<Output = Result<(), BusError>> + Send + 'static {
        let wait = self.inner.remote.as_ref().map(|r| r.sync());
        async move {
            match wait {
                Some(wait) => wait.await,
                None => Ok(()),
            }
        }
    }

    /// The bus's reconnect epoch: 0 until the first connection to Redis,
    /// then raised each time a Redis session (or, on a Redis Cluster, a lost
    /// shard's return) has subscribed this node's topics again, just after
    /// the bus reports [`BusHealth::Connected`]. Events published while the
    /// bus was disconnected are lost: a new epoch tells a durable subscriber
    /// ([`Bus::subscribe_durable`]) to re-read what they would have changed.
    /// Always 0 on an embedded bus. Cheap: one uncontended read lock.
    pub fn epoch(&self) -> u64 {
        *self.inner.epoch.borrow()
    }

    /// A handle that waits for the next epoch ([`BusEpochs::changed`]); it
    /// does not keep the bus alive.
    pub fn epochs(&self) -> BusEpochs {
        BusEpochs {
            rx: self.inner.epoch.subscribe(),
        }
    }

    /// How many topics have at least one subscriber. A topic is removed with
    /// its last subscription, so a bus whose streams have all ended has none.
    pub fn topic_count(&self) -> usize {
        self.inner.local.len()
    }

    /// The live inboxes subscribed to `topic` on this node.
    pub fn subscribers(&self, topic: &str) -> Vec<Inbox<M>> {
        self.inner.local.subscribers(topic)
    }

    /// The state of the link to the other nodes ([`BusHealth::Embedded`] for
    /// an embedded bus). Cheap: one atomic load.
    pub fn health(&self) -> BusHealth {
        match &self.inner.remote {
            Some(remote) => remote.health(),
            None => BusHealth::Embedded,
        }
    }

    /// Whether events published here reach the other nodes now (always true
    /// for an embedded bus, which has none).
    pub fn is_connected(&self) -> bool {
        self.health().is_ready()
    }

    /// Whether this bus carries events between nodes.
    pub fn is_distributed(&self) -> bool {
        self.inner.remote.is_some()
    }

    /// Set-once keys on the Redis server this bus shares with the other
    /// nodes, through the bus's own connection; `None` for an embedded bus.
    /// See [`RedisOnce::claim`].
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn once(&self) -> Option<RedisOnce> {
        self.inner.remote.as_ref().and_then(|r| r.once())
    }

    /// Publishes without waiting: each local subscriber gets `msg` or, if its
    /// mailbox is full, is ended as `Overflow` and dropped from the topic; on a
    /// Redis bus the message also goes to the other nodes (see
    /// [`Bus::try_publish`] to learn whether it could). Returns how many local
    /// subscribers took the message. The message is appended once to the
    /// topic's log; per subscriber a publish raises one backlog count (no
    /// clone, no allocation, no lock), and each stream copies its backlog out
    /// of the log when it next runs. The messages of `publish` and
    /// `publish_batch` reach a stream in publish order; those it gets through
    /// its mailbox ([`Bus::publish_wait`], other nodes, [`Inbox::send`])
    /// interleave with them in no set order.
    pub fn publish(&self, topic: &str, msg: M) -> usize {
        self.publish_batch(topic, std::slice::from_ref(&msg))
    }

    /// Publishes a burst without waiting: each subscriber gets every message of
    /// `msgs`, in order, before the next subscriber gets any. The result is the
    /// same as publishing them one by one, except that a subscriber whose
    /// backlog has no room for the whole burst takes none of it (it is ended
    /// as `Overflow` and dropped from the topic either way). On a Redis bus
    /// the burst crosses to the other nodes as one message. Returns how many
    /// local subscribers took the whole burst.
    pub fn publish_batch(&self, topic: &str, msgs: &[M]) -> usize {
        match self.try_publish_batch(topic, msgs) {
            Ok(n) => n,
            Err((n, e)) => {
                tracing::debug!(topic, error = %e, "publish did not reach the other nodes");
                n
            }
        }
    }

    /// Like [`Bus::publish`], and says whether the other nodes could be
    /// reached: on error the local subscribers have their message (the error
    /// carries how many took it) and the other nodes do not.
    pub fn try_publish(&self, topic: &str, msg: M) -> Result<usize, (usize, BusError)> {
        self.try_publish_batch(topic, std::slice::from_ref(&msg))
    }

    /// Like [`Bus::publish_batch`], and says whether the other nodes could be
    /// reached (see [`Bus::try_publish`]).
    pub fn try_publish_batch(&self, topic: &str, msgs: &[M]) -> Result<usize, (usize, BusError)> {
        let (delivered, gone) = self.inner.local.deliver(topic, msgs);
        if gone {
            self.inner.topic_gone();
        }
        match &self.inner.remote {
            Some(remote) if !msgs.is_empty() => {
                self.inner.count_publish();
                remote
                    .publish(topic, msgs)
                    .map(|()| delivered)
                    .map_err(|e| (delivered, e))
            }
            _ => Ok(delivered),
        }
    }

    /// Publishes and waits until every live local subscriber has taken `msg`
    /// (back-pressure instead of overflow), through each subscriber's mailbox
    /// (see [`Bus::publish`] on order). Returns how many took it. On a
    /// Redis bus the message also goes to the other nodes, waiting for room in
    /// the queue to Redis; a failure there is logged.
    pub async fn publish_wait(&self, topic: &str, msg: M) -> usize {
        let subs = self.subscribers(topic);
        let results = futures_util::future::join_all(
            subs.iter().map(|inbox| inbox.send_from_bus(msg.clone())),
        )
        .await;
        if self.inner.remote.is_some() {
            self.inner.count_publish();
        }
        if let Some(remote) = &self.inner.remote
            && let Err(e) = remote.publish_wait(topic, std::slice::from_ref(&msg)).await
        {
            tracing::debug!(topic, error = %e, "publish did not reach the other nodes");
        }
        results.iter().filter(|r| r.is_ok()).count()
    }

    /// Sends `msgs` to the other nodes only (not to this node's subscribers),
    /// waiting for room in the queue to Redis. Ok at once on an embedded bus.
    /// For producers that feed local subscribers themselves, with
    /// back-pressure (the demo's `burst`).
    pub async fn publish_remote_wait(&self, topic: &str, msgs: &[M]) -> Result<(), BusError> {
        match &self.inner.remote {
            Some(remote) if !msgs.is_empty() => {
                self.inner.count_publish();
                remote.publish_wait(topic, msgs).await
            }
            _ => Ok(()),
        }
    }
}

/// A recording [`InboxSink`] for the tests of event sources.
#[cfg(test)]
pub(crate) mod test_sink {
    use super::*;
    use local::lock;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A mailbox of `cap` messages that ends as overflowed when full.
    pub(crate) struct Recorder {
        pub(crate) got: Mutex<Vec<u32>>,
        cap: usize,
        pub(crate) closed: AtomicBool,
    }

    impl InboxSink<u32> for Recorder {
        fn try_deliver(&self, msg: u32) -> Result<(), InboxError> {
            if self.closed.load(Ordering::SeqCst) {
                return Err(InboxError::Closed);
            }
            let mut got = lock(&self.got);
            if got.len() >= self.cap {
                self.closed.store(true, Ordering::SeqCst);
                return Err(InboxError::Full);
            }
            got.push(msg);
            Ok(())
        }
        fn deliver(&self, msg: u32) -> DeliverFuture {
            let r = self.try_deliver(msg);
            Box::pin(async move { r })
        }
        fn is_closed(&self) -> bool {
            self.closed.load(Ordering::SeqCst)
        }
    }

    pub(crate) fn recorder(cap: usize) -> Arc<Recorder> {
        Arc::new(Recorder {
            got: Mutex::new(vec![]),
            cap,
            closed: AtomicBool::new(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use test_sink::recorder;

    #[test]
    fn publish_reaches_subscribers_in_order_and_drop_unsubscribes() {
        let bus = Bus::new();
        let r = recorder(100);
        let sub = bus.subscribe("t", Inbox::from_sink(r.clone()));
        for i in 0..5 {
            assert_eq!(bus.publish("t", i), 1);
        }
        assert_eq!(*r.got.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(bus.topic_count(), 1);
        drop(sub);
        assert_eq!(bus.publish("t", 9), 0);
        assert!(bus.subscribers("t").is_empty());
        assert_eq!(bus.topic_count(), 0);
    }

    #[test]
    fn a_batch_reaches_each_subscriber_in_order() {
        let bus = Bus::new();
        let a = recorder(100);
        let slow = recorder(2);
        let _a = bus.subscribe("t", Inbox::from_sink(a.clone()));
        let _s = bus.subscribe("t", Inbox::from_sink(slow.clone()));
        assert_eq!(bus.publish_batch("t", &[1, 2, 3]), 1);
        assert_eq!(*a.got.lock().unwrap(), vec![1, 2, 3]);
        assert_eq!(*slow.got.lock().unwrap(), vec![1, 2]);
        assert_eq!(bus.subscribers("t").len(), 1, "the slow one was dropped");
        assert_eq!(bus.publish_batch("none", &[1]), 0);
    }

    /// What a stream's feed would read now from the topic logs handed to it.
    fn read_taps(readers: &mut [super::inbox::TapReader<u32>]) -> Vec<Option<u32>> {
        use futures_util::{FutureExt as _, StreamExt as _};
        let mut got = vec![];
        for reader in readers {
            while let Some(m) = reader.next().now_or_never() {
                got.push(m);
                if m.is_none() {
                    break;
                }
            }
        }
        got
    }

    #[test]
    fn a_publish_to_a_stream_whose_backlog_is_full_ends_it_as_overflow() {
        let (inbox, _rx, signal, taps) = Inbox::<u32>::channel(2);
        let bus = Bus::new();
        let _sub = bus.subscribe("t", inbox.clone());
        assert_eq!(bus.publish("t", 1), 1);
        assert_eq!(bus.publish_batch("t", &[2]), 1);
        assert!(!signal.is_set());
        assert_eq!(bus.publish("t", 3), 0, "no room: not taken");
        assert!(signal.is_set(), "ended as Overflow by the publish");
        assert!(inbox.is_closed());
        assert!(bus.subscribers("t").is_empty(), "dropped from the topic");
        assert_eq!(bus.publish("t", 4), 0);
        let mut readers = taps.take();
        assert_eq!(readers.len(), 1, "the topic's log was handed to the stream");
        // Ended as overflowed, as with a full mailbox: what it had not read
        // is not handed out (nor anything else in its place).
        assert_eq!(read_taps(&mut readers), [None]);
    }

    #[test]
    fn an_unsubscribed_stream_reads_what_it_took_then_nothing_more_of_the_topic() {
        let (inbox, _rx, _signal, taps) = Inbox::<u32>::channel(8);
        let bus = Bus::new();
        let sub = bus.subscribe("t", inbox.clone());
        let _other = bus.subscribe("t", Inbox::<u32>::channel(8).0);
        bus.publish_batch("t", &[1, 2]);
        drop(sub);
        assert_eq!(bus.publish("t", 3), 1, "only the other subscriber is left");
        let mut readers = taps.take();
        assert_eq!(read_taps(&mut readers), [Some(1), Some(2), None]);
        assert!(!inbox.is_closed(), "the stream itself goes on");
    }

    #[cfg(feature = "redis")]
    #[test]
    fn complete_ends_a_stream_inbox_and_is_seen_by_the_feed() {
        let (inbox, _rx, signal, _) = Inbox::<u32>::channel(4);
        let bus = Bus::new();
        let _sub = bus.subscribe("t", inbox.clone());
        assert_eq!(bus.inner.local.complete_all(), 1);
        assert!(signal.is_completed() && !signal.is_set());
        assert!(inbox.is_closed());
        assert_eq!(bus.topic_count(), 0, "the subscribers were forgotten");
    }

    #[cfg(feature = "redis")]
    #[test]
    fn a_lost_link_keeps_the_durable_subscribers_and_their_topics() {
        let bus = Bus::new();
        let (plain, _rx, signal, _) = Inbox::<u32>::channel(4);
        let kept = recorder(8);
        let _plain = bus.subscribe("shared", plain.clone());
        let _kept = bus.subscribe_durable("shared", Inbox::from_sink(kept.clone()));
        let (only_plain, _rx2, _, _) = Inbox::<u32>::channel(4);
        let _gone = bus.subscribe("plain", only_plain);
        let also_kept = recorder(8);
        let _ctl = bus.subscribe_durable("ctl", Inbox::from_sink(also_kept.clone()));
        assert_eq!(bus.inner.local.complete_all(), 2, "the two ordinary ones");
        assert!(signal.is_completed());
        let mut names = bus.inner.local.names();
        names.sort();
        assert_eq!(
            names,
            ["ctl", "shared"],
            "a topic with a durable subscriber stays"
        );
        assert_eq!(bus.publish("shared", 1), 1);
        assert_eq!(bus.publish("ctl", 2), 1);
        assert_eq!(*kept.got.lock().unwrap(), [1]);
        assert_eq!(*also_kept.got.lock().unwrap(), [2]);
        // A cluster shard's loss: only its topics, and again the durable stay.
        assert_eq!(bus.inner.local.complete_where(|t| t == "ctl"), 0);
        assert_eq!(bus.topic_count(), 2);
        drop(_kept);
        drop(_ctl);
        assert_eq!(bus.topic_count(), 0, "the guards still unsubscribe");
    }

    #[cfg(feature = "redis")]
    #[tokio::test]
    async fn events_from_other_nodes_wait_for_room_then_overflow_a_stuck_stream() {
        let bus = Bus::new();
        let (fast, mut fast_rx, _, _) = Inbox::<u32>::channel(2);
        let (stuck, _stuck_rx, stuck_signal, _) = Inbox::<u32>::channel(2);
        let _a = bus.subscribe("t", fast);
        let _b = bus.subscribe("t", stuck);
        let drain = async {
            let mut got = vec![];
            while got.len() < 3 {
                got.push(std::future::poll_fn(|cx| fast_rx.poll_recv(cx)).await);
            }
            got
        };
        let stall = std::time::Duration::from_millis(50);
        let (took, got) =
            futures_util::future::join(bus.inner.local.deliver_wait("t", &[1, 2, 3], stall), drain)
                .await;
        assert_eq!(took, 1, "the reading stream took all three");
        assert_eq!(got, vec![Some(1), Some(2), Some(3)]);
        assert!(stuck_signal.is_set(), "the stuck one was ended as Overflow");
    }

    #[cfg(feature = "redis")]
    #[tokio::test]
    async fn a_slow_reader_gets_one_shared_wait_per_message_from_other_nodes() {
        // A stream that frees one slot every 60 ms would, waited on per event,
        // take a burst of 6 in ~360 ms and hold up every other stream as long.
        // One deadline (100 ms) for the whole burst: it is ended as Overflow.
        let bus = Bus::new();
        let (slow, mut slow_rx, slow_signal, _) = Inbox::<u32>::channel(1);
        let (fast, mut fast_rx, _, _) = Inbox::<u32>::channel(16);
        let _a = bus.subscribe("t", slow.clone());
        let _b = bus.subscribe("t", fast);
        assert!(slow.try_send(0).is_ok(), "the slow mailbox starts full");
        let slow_reader = async {
            let mut read = 0;
            for _ in 0..10 {
                tokio::time::sleep(std::time::Duration::from_millis(60)).await;
                if slow_signal.is_set() {
                    break;
                }
                let next = std::future::poll_fn(|cx| slow_rx.poll_recv(cx));
                if let Some(Some(_)) = futures_util::FutureExt::now_or_never(next) {
                    read += 1;
                }
            }
            read
        };
        let stall = std::time::Duration::from_millis(100);
        let burst = [1, 2, 3, 4, 5, 6];
        let deliver = async {
            let took = bus.inner.local.deliver_wait("t", &burst, stall).await;
            (took, slow_signal.is_set())
        };
        let ((took, overflowed), _) = futures_util::future::join(deliver, slow_reader).await;
        assert!(overflowed, "the slow stream was ended as Overflow");
        assert_eq!(took, 1, "only the fast stream took the whole burst");
        let mut got = vec![];
        while let Some(Some(m)) =
            futures_util::FutureExt::now_or_never(std::future::poll_fn(|cx| fast_rx.poll_recv(cx)))
        {
            got.push(m);
        }
        assert_eq!(got, burst, "the fast stream got the burst in order");
        // Ended: never waited on again.
        assert_eq!(bus.inner.local.deliver_wait("t", &[7], stall).await, 1);
    }

    /// A sink whose first delivery blocks until released: a fan-out that
    /// takes long.
    struct Blocking {
        entered: Mutex<Option<std::sync::mpsc::Sender<()>>>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl InboxSink<u32> for Blocking {
        fn try_deliver(&self, _msg: u32) -> Result<(), InboxError> {
            if let Some(entered) = local::lock(&self.entered).take() {
                let _ = entered.send(());
                let _ = local::lock(&self.release).recv();
            }
            Ok(())
        }
        fn deliver(&self, msg: u32) -> DeliverFuture {
            let r = self.try_deliver(msg);
            Box::pin(async move { r })
        }
        fn is_closed(&self) -> bool {
            false
        }
    }

    #[test]
    fn a_publish_does_not_wait_for_another_topics_fan_out() {
        use std::sync::mpsc::channel;
        use std::time::Duration;
        let bus: Bus<u32> = Bus::new();
        let (entered_tx, entered) = channel();
        let (release, release_rx) = channel();
        let blocking = Arc::new(Blocking {
            entered: Mutex::new(Some(entered_tx)),
            release: Mutex::new(release_rx),
        });
        let _b = bus.subscribe("b", Inbox::from_sink(blocking));
        let a = recorder(10);
        let _a = bus.subscribe("a", Inbox::from_sink(a.clone()));
        let on_b = std::thread::spawn({
            let bus = bus.clone();
            move || bus.publish("b", 1)
        });
        entered
            .recv_timeout(Duration::from_secs(10))
            .expect("the fan-out on b started");
        // b's fan-out is in progress (its subscriber holds it): a publish on a
        // and the bus's bookkeeping must not wait for it.
        let (done_tx, done) = channel();
        let on_a = std::thread::spawn({
            let bus = bus.clone();
            move || {
                let n = bus.publish("a", 2);
                let other = bus.subscribe("c", Inbox::from_sink(recorder(1)));
                let topics = bus.topic_count();
                drop(other);
                let _ = done_tx.send((n, topics));
            }
        });
        let finished = done.recv_timeout(Duration::from_secs(10));
        // Released whatever happened, so that the test ends by itself.
        let _ = release.send(());
        assert_eq!(on_b.join().expect("b's publisher"), 1);
        on_a.join().expect("a's publisher");
        assert_eq!(
            finished.expect("the publish on a finished while b's fan-out was in progress"),
            (1, 3)
        );
        assert_eq!(*a.got.lock().unwrap(), vec![2]);
        assert_eq!(bus.topic_count(), 2);
    }

    #[cfg(feature = "redis")]
    #[test]
    fn a_topic_emptied_while_a_subscriber_arrives_stays_consistent() {
        // Subscribe, unsubscribe and publish on one topic from several
        // threads: whatever the interleaving, every live subscription is in
        // the map and an empty topic is not.
        let bus: Bus<u32> = Bus::new();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let bus = bus.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        let r = recorder(1_000_000);
                        let sub = bus.subscribe("t", Inbox::from_sink(r.clone()));
                        bus.publish("t", i);
                        assert!(
                            r.got.lock().unwrap().contains(&i),
                            "a subscription sees a publish made after it"
                        );
                        drop(sub);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no panic");
        }
        assert_eq!(bus.topic_count(), 0);
        assert!(bus.inner.local.names().is_empty());
    }

    #[test]
    fn a_full_subscriber_is_dropped_not_buffered() {
        let bus = Bus::new();
        let slow = recorder(2);
        let fast = recorder(100);
        let _a = bus.subscribe("t", Inbox::from_sink(slow.clone()));
        let _b = bus.subscribe("t", Inbox::from_sink(fast.clone()));
        for i in 0..10 {
            bus.publish("t", i);
        }
        assert_eq!(slow.got.lock().unwrap().len(), 2);
        assert_eq!(fast.got.lock().unwrap().len(), 10);
        assert_eq!(bus.subscribers("t").len(), 1);
    }
}
