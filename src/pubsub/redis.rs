//! The Redis engine of [`super::Bus`]: several nodes share one Redis server,
//! and an event published on any node reaches the subscribers of every node.
//!
//! - A publish is handed to this node's subscribers at once (no Redis round
//!   trip), then serialized **once** (JSON, prefixed with the publishing
//!   node's id) and queued for Redis `PUBLISH` on the channel
//!   `<prefix><topic>`.
//! - Each node holds **one** Redis subscription connection for all the topics
//!   of a bus (one per `Bus`; the demo has one bus):
//!   it `SUBSCRIBE`s a channel when the topic's first local subscriber
//!   appears and `UNSUBSCRIBE`s when the last one goes.
//! - A node skips the messages it published itself (they carry its id), so
//!   nothing is delivered twice.
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
//!
//! The bus also lends its command connection to [`RedisOnce`] ([`Bus::once`]):
//! set-once keys with an expiry, which the nodes use to honour a sealed
//! `requestState` at most once across all of them (`docs/bus.md`).
//!
//! When the connection is lost every local subscriber is asked to complete
//! ([`super::Inbox::complete`]: its stream ends with its completion result,
//! the client listens again), publishes fail with [`BusError::Unavailable`],
//! and the thread reconnects with exponential back-off from
//! [`RedisBusConfig::reconnect_min`] (100 ms) doubling up to
//! [`RedisBusConfig::reconnect_max`] (5 s), for as long as the bus lives. The
//! back-off also grows after a connection that was lost within
//! `reconnect_max` (a Redis that accepts connections but refuses commands is
//! not retried in a hot loop); it starts again from `reconnect_min` only
//! after a connection that lasted at least `reconnect_max`. The bus reports
//! [`BusHealth::Connected`] once the channels its streams need are
//! subscribed, not merely when the connection is open.
//! Streams opened while disconnected stay open: they get this node's events at
//! once and the other nodes' from the reconnection on.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ::redis::aio::{MultiplexedConnection, PubSub};
use futures_util::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};

use super::local::lock;
use super::{Bus, BusError, BusHealth, BusInner, Remote};

/// What to do when Redis cannot be reached when the bus starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartMode {
    /// Fail: [`Bus::redis`] returns [`BusError::Unavailable`] (the default;
    /// `genmcp serve` exits non-zero).
    #[default]
    Require,
    /// Start disconnected ([`BusHealth::Disconnected`], logged), serving local
    /// subscribers and reconnecting in the background.
    Degraded,
}

/// How a Redis-backed bus connects, and its bounds. Every field has a default;
/// only the URL is needed.
///
/// ```
/// use genmcp::pubsub::RedisBusConfig;
/// let config = RedisBusConfig::new("redis://127.0.0.1:6380");
/// assert_eq!(config.prefix, "genmcp:");
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisBusConfig {
    /// `redis://[user:password@]HOST:PORT[/DB]`.
    pub url: String,
    /// Prefix of the Redis channel names (default `genmcp:`): a topic `t` is
    /// the channel `genmcp:t`. Deployments sharing one Redis use different ones.
    pub prefix: String,
    /// When Redis cannot be reached at start (default [`StartMode::Require`]).
    pub start: StartMode,
    /// Publishes waiting to be sent to Redis (default 4,096). It counts
    /// publishes, not bytes: with [`RedisBusConfig::max_payload`] the queue
    /// holds at most `publish_queue` × `max_payload` bytes (4 GiB with the
    /// defaults in the worst case; ordinary notifications are a few hundred
    /// bytes each).
    pub publish_queue: usize,
    /// The largest encoded publish (one message, or one `publish_batch`
    /// burst, as JSON) sent to Redis (default 1 MiB). A larger one reaches
    /// this node's subscribers only, and fails with [`BusError::TooLarge`].
    pub max_payload: usize,
    /// How long connecting may take (default 2 s).
    pub connect_timeout: Duration,
    /// How long a Redis command may take before the connection is treated as
    /// lost (default 2 s).
    pub command_timeout: Duration,
    /// The keep-alive `PING` on the subscription connection (default 5 s).
    pub ping_interval: Duration,
    /// First reconnection delay (default 100 ms); it doubles after each failure.
    pub reconnect_min: Duration,
    /// Largest reconnection delay (default 5 s).
    pub reconnect_max: Duration,
    /// How long one message from another node may wait, **in all**, for room
    /// in the mailboxes of this node's streams (default 250 ms). Every stream
    /// is first offered the message without waiting; the full ones are then
    /// waited on together until this deadline, and those still full are ended
    /// as `Overflow`. So a stream that stops reading costs the other streams
    /// at most one such wait, and the redis crate's buffer of unread
    /// messages grows by at most `stall` × the inbound message rate.
    pub stall: Duration,
    /// [`RedisOnce::claim`]s waiting for Redis at once (default 1,024); one
    /// more fails with [`BusError::Busy`].
    pub max_claims: usize,
}

/// The password stays out of `{:?}` (see [`display_url`]).
impl std::fmt::Debug for RedisBusConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBusConfig")
            .field("url", &display_url(&self.url))
            .field("prefix", &self.prefix)
            .field("start", &self.start)
            .field("publish_queue", &self.publish_queue)
            .field("max_payload", &self.max_payload)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("ping_interval", &self.ping_interval)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field("stall", &self.stall)
            .field("max_claims", &self.max_claims)
            .finish()
    }
}

impl RedisBusConfig {
    /// The defaults, for the server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        RedisBusConfig {
            url: url.into(),
            prefix: "genmcp:".into(),
            start: StartMode::Require,
            publish_queue: 4096,
            max_payload: 1 << 20,
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(2),
            ping_interval: Duration::from_secs(5),
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(5),
            stall: Duration::from_millis(250),
            max_claims: 1024,
        }
    }

    /// Sets the start mode.
    pub fn start(mut self, start: StartMode) -> Self {
        self.start = start;
        self
    }

    /// Sets the channel prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The bounds that cannot work: [`BusError::Config`] naming the field.
    fn validate(&self) -> Result<(), BusError> {
        let bad = |what: &str| Err(BusError::Config(what.into()));
        if self.publish_queue == 0 {
            return bad("publish_queue must be at least 1");
        }
        if self.max_claims == 0 {
            return bad("max_claims must be at least 1");
        }
        if self.max_payload <= NODE_LEN {
            return bad("max_payload must be larger than 16 bytes");
        }
        if self.ping_interval.is_zero() {
            return bad("ping_interval must be longer than zero");
        }
        if self.reconnect_min.is_zero() {
            return bad("reconnect_min must be longer than zero (the back-off doubles it)");
        }
        if self.reconnect_max < self.reconnect_min {
            return bad("reconnect_max must be at least reconnect_min");
        }
        Ok(())
    }
}

/// `url` without its credentials (`redis://***@HOST:PORT`), for logs, errors
/// and `Debug` output.
///
/// ```
/// use genmcp::pubsub::redis::display_url;
/// assert_eq!(display_url("redis://u:pw@h:6379"), "redis://***@h:6379");
/// ```
pub fn display_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// One publish on its way to Redis.
struct Outgoing {
    channel: String,
    payload: Vec<u8>,
}

/// What the bus and the Redis thread share.
struct Link {
    node: u64,
    prefix: String,
    url: String,
    connected: AtomicBool,
    last_error: Mutex<String>,
    capacity: usize,
    max_payload: usize,
    topics_changed: Notify,
    /// The command connection while connected (for [`RedisOnce`]).
    conn: Mutex<Option<MultiplexedConnection>>,
    /// The Redis thread's runtime, where [`RedisOnce`] commands run.
    runtime: std::sync::OnceLock<tokio::runtime::Handle>,
    command_timeout: Duration,
    claims: Arc<Semaphore>,
    max_claims: usize,
}

impl Link {
    fn unavailable(&self) -> BusError {
        BusError::Unavailable {
            url: self.url.clone(),
            reason: lock(&self.last_error).clone(),
        }
    }

    fn set_lost(&self, reason: String) {
        *lock(&self.last_error) = reason;
        *lock(&self.conn) = None;
        self.connected.store(false, Ordering::Release);
    }

    fn unavailable_because(&self, reason: String) -> BusError {
        BusError::Unavailable {
            url: self.url.clone(),
            reason,
        }
    }
}

/// Set-once keys with an expiry on a Redis bus's server, sharing the bus's
/// command connection ([`Bus::once`]). Cheap to clone; it does not keep the
/// bus alive (once the bus is dropped, every claim fails).
///
/// Commands run on the bus's Redis thread: a claim never blocks the caller's
/// thread, works from any async runtime, and is answered within
/// [`RedisBusConfig::command_timeout`].
#[derive(Clone)]
pub struct RedisOnce {
    link: Arc<Link>,
}

impl std::fmt::Debug for RedisOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisOnce")
            .field("url", &self.link.url)
            .field("prefix", &self.link.prefix)
            .finish()
    }
}

impl RedisOnce {
    /// Claims the key `<prefix><name>` until `expires_at_ms` (milliseconds
    /// since the Unix epoch, by Redis's clock): `SET key 1 NX PXAT
    /// expires_at_ms`. `Ok(true)`: this call set it (the first claim, on any
    /// node); `Ok(false)`: it was already set and has not expired. Redis
    /// forgets the key at `expires_at_ms`, so its memory is bounded by the
    /// claims made within one lifetime. Needs Redis 6.2 or later (`PXAT`).
    ///
    /// Fails with [`BusError::Unavailable`] when the bus is not connected, the
    /// command fails, or no answer comes within
    /// [`RedisBusConfig::command_timeout`] (the key may then be set or not),
    /// and with [`BusError::Busy`] when [`RedisBusConfig::max_claims`] claims
    /// already wait.
    pub async fn claim(&self, name: &str, expires_at_ms: u64) -> Result<bool, BusError> {
        let link = &self.link;
        if !link.connected.load(Ordering::Acquire) {
            return Err(link.unavailable());
        }
        let conn = lock(&link.conn).clone();
        let (Some(mut conn), Some(runtime)) = (conn, link.runtime.get()) else {
            return Err(link.unavailable());
        };
        let permit = link
            .claims
            .clone()
            .try_acquire_owned()
            .map_err(|_| BusError::Busy {
                capacity: link.max_claims,
            })?;
        let key = format!("{}{name}", link.prefix);
        let timeout = link.command_timeout;
        let task = runtime.spawn(async move {
            let _permit = permit;
            let mut set = ::redis::cmd("SET");
            set.arg(key).arg(1).arg("NX").arg("PXAT").arg(expires_at_ms);
            tokio::time::timeout(timeout, set.query_async::<Option<String>>(&mut conn)).await
        });
        match task.await {
            Ok(Ok(Ok(set))) => Ok(set.is_some()),
            Ok(Ok(Err(e))) => Err(link.unavailable_because(format!("SET failed: {e}"))),
            Ok(Err(_)) => Err(link.unavailable_because(format!("SET unanswered in {timeout:?}"))),
            Err(_) => Err(link.unavailable_because("the bus was dropped".into())),
        }
    }
}

/// The node id that prefixes every payload: 16 lowercase hex digits.
const NODE_LEN: usize = 16;

/// The bus's side of the link. It alone holds the queue's sender: when the bus
/// is dropped the Redis thread sees the queue close and ends.
struct RedisRemote<M> {
    link: Arc<Link>,
    queue: mpsc::Sender<Outgoing>,
    _messages: PhantomData<fn(M)>,
}

impl<M: Serialize> RedisRemote<M> {
    fn outgoing(&self, topic: &str, msgs: &[M]) -> Result<Outgoing, BusError> {
        if !self.link.connected.load(Ordering::Acquire) {
            return Err(self.link.unavailable());
        }
        let mut payload = Vec::with_capacity(NODE_LEN + 64 * msgs.len());
        payload.extend_from_slice(format!("{:016x}", self.link.node).as_bytes());
        serde_json::to_writer(&mut payload, msgs).map_err(|e| BusError::Encode(e.to_string()))?;
        if payload.len() > self.link.max_payload {
            return Err(BusError::TooLarge {
                size: payload.len(),
                max: self.link.max_payload,
            });
        }
        Ok(Outgoing {
            channel: format!("{}{topic}", self.link.prefix),
            payload,
        })
    }
}

impl<M: Serialize + Send + 'static> Remote<M> for RedisRemote<M> {
    fn publish(&self, topic: &str, msgs: &[M]) -> Result<(), BusError> {
        let out = self.outgoing(topic, msgs)?;
        self.queue.try_send(out).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => BusError::Backlog {
                capacity: self.link.capacity,
            },
            mpsc::error::TrySendError::Closed(_) => self.link.unavailable(),
        })
    }

    fn publish_wait<'a>(
        &'a self,
        topic: &'a str,
        msgs: &'a [M],
    ) -> super::BoxFuture<'a, Result<(), BusError>> {
        let out = self.outgoing(topic, msgs);
        Box::pin(async move {
            let out = out?;
            self.queue
                .send(out)
                .await
                .map_err(|_| self.link.unavailable())
        })
    }

    fn topics_changed(&self) {
        self.link.topics_changed.notify_one();
    }

    fn once(&self) -> Option<RedisOnce> {
        Some(RedisOnce {
            link: self.link.clone(),
        })
    }

    fn health(&self) -> BusHealth {
        if self.link.connected.load(Ordering::Acquire) {
            BusHealth::Connected
        } else {
            BusHealth::Disconnected
        }
    }
}

impl<M> Bus<M>
where
    M: Clone + Send + Serialize + DeserializeOwned + 'static,
{
    /// A bus shared with the other nodes connected to the same Redis server
    /// (see the [module docs](self) for the guarantee and the bounds). Waits
    /// for the first connection (at most [`RedisBusConfig::connect_timeout`]);
    /// if it fails, returns [`BusError::Unavailable`] or, with
    /// [`StartMode::Degraded`], a disconnected bus that keeps trying. Works
    /// from any async runtime or none: the Redis I/O runs on its own thread.
    pub async fn redis(config: RedisBusConfig) -> Result<Bus<M>, BusError> {
        let client = ::redis::Client::open(config.url.as_str())
            .map_err(|e| BusError::Config(format!("bad Redis URL: {e}")))?;
        config.validate()?;
        let mut node = [0u8; 8];
        getrandom::fill(&mut node)
            .map_err(|e| BusError::Config(format!("no random node id: {e}")))?;
        let (tx, rx) = mpsc::channel(config.publish_queue);
        let link = Arc::new(Link {
            node: u64::from_le_bytes(node),
            prefix: config.prefix.clone(),
            url: display_url(&config.url),
            connected: AtomicBool::new(false),
            last_error: Mutex::new("not connected yet".into()),
            capacity: config.publish_queue,
            max_payload: config.max_payload,
            topics_changed: Notify::new(),
            conn: Mutex::new(None),
            runtime: std::sync::OnceLock::new(),
            command_timeout: config.command_timeout,
            claims: Arc::new(Semaphore::new(config.max_claims)),
            max_claims: config.max_claims,
        });
        let remote_link = link.clone();
        let bus = Bus::with_remote(move |_| {
            Box::new(RedisRemote::<M> {
                link: remote_link,
                queue: tx,
                _messages: PhantomData,
            })
        });
        let (started_tx, started_rx) = oneshot::channel();
        let task = Task {
            client,
            config,
            link,
            bus: Arc::downgrade(&bus.inner),
            rx,
        };
        std::thread::Builder::new()
            .name("genmcp-redis".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => {
                        let _ = task.link.runtime.set(rt.handle().clone());
                        rt.block_on(task.run(started_tx))
                    }
                    Err(e) => {
                        let _ = started_tx.send(Err(BusError::Config(format!(
                            "cannot start the Redis thread's runtime: {e}"
                        ))));
                    }
                }
            })
            .map_err(|e| BusError::Config(format!("cannot start the Redis thread: {e}")))?;
        match started_rx.await {
            Ok(Ok(())) => Ok(bus),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(BusError::Config("the Redis thread ended at start".into())),
        }
    }
}

/// Why a connection's session ended.
enum End {
    /// The bus was dropped: the thread ends.
    Shutdown,
    /// The connection failed.
    Lost(String),
}

/// The Redis thread's state.
struct Task<M> {
    client: ::redis::Client,
    config: RedisBusConfig,
    link: Arc<Link>,
    bus: Weak<BusInner<M>>,
    rx: mpsc::Receiver<Outgoing>,
}

impl<M: Clone + Send + DeserializeOwned + 'static> Task<M> {
    async fn connect(&self) -> Result<(PubSub, MultiplexedConnection), String> {
        let connect = async {
            let pubsub = self.client.get_async_pubsub().await?;
            let conn = self.client.get_multiplexed_async_connection().await?;
            Ok::<_, ::redis::RedisError>((pubsub, conn))
        };
        match tokio::time::timeout(self.config.connect_timeout, connect).await {
            Ok(Ok(pair)) => Ok(pair),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "no connection within {:?}",
                self.config.connect_timeout
            )),
        }
    }

    async fn run(mut self, started: oneshot::Sender<Result<(), BusError>>) {
        let mut started = Some(started);
        let mut backoff = self.config.reconnect_min;
        loop {
            if self.bus.strong_count() == 0 {
                return;
            }
            let reason = match self.connect().await {
                Ok((pubsub, conn)) => {
                    *lock(&self.link.conn) = Some(conn.clone());
                    let began = std::time::Instant::now();
                    match self.session(pubsub, conn, &mut started).await {
                        End::Shutdown => {
                            // Claims made through a RedisOnce fail from now on.
                            self.link.set_lost("the bus was dropped".into());
                            return;
                        }
                        End::Lost(reason) => {
                            self.link.set_lost(reason.clone());
                            // Publishes queued before the loss are dropped (at most once).
                            while self.rx.try_recv().is_ok() {}
                            let ended = self
                                .bus
                                .upgrade()
                                .map(|bus| bus.local.complete_all())
                                .unwrap_or(0);
                            tracing::warn!(
                                url = %self.link.url, %reason, streams_completed = ended,
                                "event bus lost Redis: its streams were completed; reconnecting"
                            );
                            backoff = backoff_after_session(backoff, began.elapsed(), &self.config);
                            reason
                        }
                    }
                }
                Err(reason) => {
                    self.link.set_lost(reason.clone());
                    reason
                }
            };
            if let Some(s) = started.take() {
                if self.config.start == StartMode::Require {
                    let _ = s.send(Err(self.link.unavailable()));
                    return;
                }
                tracing::warn!(
                    url = %self.link.url, %reason,
                    "event bus starting DEGRADED: Redis unreachable, events stay on this node until it connects"
                );
                let _ = s.send(Ok(()));
            } else {
                tracing::debug!(url = %self.link.url, %reason, retry_in = ?backoff, "event bus: Redis still unreachable");
            }
            if !self.pause(backoff).await {
                return;
            }
            backoff = next_backoff(backoff, &self.config);
        }
    }

    /// Waits `delay`, discarding stale publishes; false if the bus was dropped.
    async fn pause(&mut self, delay: Duration) -> bool {
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => return self.bus.strong_count() > 0,
                item = self.rx.recv() => if item.is_none() { return false },
            }
        }
    }

    /// One connection's life. The bus is reported connected (and `started`
    /// answered) only once the channels its streams need are subscribed.
    async fn session(
        &mut self,
        pubsub: PubSub,
        mut conn: MultiplexedConnection,
        started: &mut Option<oneshot::Sender<Result<(), BusError>>>,
    ) -> End {
        let (mut sink, mut messages) = pubsub.split();
        let command_timeout = self.config.command_timeout;
        let rx = &mut self.rx;
        let publishing = async {
            let mut batch: Vec<Outgoing> = Vec::with_capacity(256);
            loop {
                if rx.recv_many(&mut batch, 256).await == 0 {
                    return End::Shutdown;
                }
                let mut pipe = ::redis::pipe();
                for out in batch.drain(..) {
                    pipe.publish(out.channel, out.payload).ignore();
                }
                match tokio::time::timeout(command_timeout, pipe.exec_async(&mut conn)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return End::Lost(format!("PUBLISH failed: {e}")),
                    Err(_) => {
                        return End::Lost(format!("PUBLISH unanswered in {command_timeout:?}"));
                    }
                }
            }
        };
        let link = &self.link;
        let bus = &self.bus;
        let config = &self.config;
        let receiving = async {
            let mut subscribed: HashSet<String> = HashSet::new();
            let mut ping = tokio::time::interval(config.ping_interval);
            ping.tick().await;
            // Whether the local topics may differ from the subscribed channels.
            let mut dirty = true;
            loop {
                if !dirty {
                    tokio::select! {
                        msg = messages.next() => match msg {
                            Some(msg) => self_deliver(bus, link, config, &msg).await,
                            None => return End::Lost("connection closed".into()),
                        },
                        _ = link.topics_changed.notified() => dirty = true,
                        _ = ping.tick() => {
                            match tokio::time::timeout(command_timeout, sink.ping::<::redis::Value>()).await {
                                Ok(Ok(_)) => {}
                                Ok(Err(e)) => return End::Lost(format!("PING failed: {e}")),
                                Err(_) => return End::Lost(format!("PING unanswered in {command_timeout:?}")),
                            }
                        }
                    }
                    continue;
                }
                dirty = false;
                let Some(inner) = bus.upgrade() else {
                    return End::Shutdown;
                };
                let wanted: HashSet<String> = inner
                    .local
                    .names()
                    .into_iter()
                    .map(|t| format!("{}{t}", link.prefix))
                    .collect();
                drop(inner);
                let add: Vec<&String> = wanted.difference(&subscribed).collect();
                if !add.is_empty() {
                    match tokio::time::timeout(command_timeout, sink.subscribe(&add)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return End::Lost(format!("SUBSCRIBE failed: {e}")),
                        Err(_) => return End::Lost("SUBSCRIBE unanswered".into()),
                    }
                }
                let remove: Vec<&String> = subscribed.difference(&wanted).collect();
                if !remove.is_empty() {
                    match tokio::time::timeout(command_timeout, sink.unsubscribe(&remove)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return End::Lost(format!("UNSUBSCRIBE failed: {e}")),
                        Err(_) => return End::Lost("UNSUBSCRIBE unanswered".into()),
                    }
                }
                subscribed = wanted;
                if !link.connected.swap(true, Ordering::AcqRel) {
                    if let Some(s) = started.take() {
                        let _ = s.send(Ok(()));
                    }
                    tracing::info!(url = %link.url, node = %format!("{:016x}", link.node), "event bus connected to Redis");
                }
            }
        };
        tokio::select! {
            end = publishing => end,
            end = receiving => end,
        }
    }
}

/// The back-off after a failed attempt: doubled, at most `reconnect_max`.
fn next_backoff(backoff: Duration, config: &RedisBusConfig) -> Duration {
    backoff.saturating_mul(2).min(config.reconnect_max)
}

/// The back-off before reconnecting after a session that `lasted`: back to
/// `reconnect_min` only if the session lasted at least `reconnect_max` (a
/// healthy connection that broke); otherwise the current one, still growing
/// (a Redis that accepts connections but refuses commands, such as `-LOADING`
/// or an ACL `NOPERM`, is not retried in a hot loop).
fn backoff_after_session(backoff: Duration, lasted: Duration, config: &RedisBusConfig) -> Duration {
    if lasted >= config.reconnect_max {
        config.reconnect_min
    } else {
        backoff
    }
}

/// Hands one message from Redis to this node's subscribers of its topic,
/// unless this node published it.
async fn self_deliver<M: Clone + Send + DeserializeOwned + 'static>(
    bus: &Weak<BusInner<M>>,
    link: &Link,
    config: &RedisBusConfig,
    msg: &::redis::Msg,
) {
    let Some(topic) = msg.get_channel_name().strip_prefix(link.prefix.as_str()) else {
        return;
    };
    let payload = msg.get_payload_bytes();
    let Some((node, body)) = payload.split_at_checked(NODE_LEN) else {
        tracing::warn!(topic, "event bus: a message without a node id was ignored");
        return;
    };
    let Some(node) = std::str::from_utf8(node)
        .ok()
        .and_then(|n| u64::from_str_radix(n, 16).ok())
    else {
        tracing::warn!(topic, "event bus: a message with a bad node id was ignored");
        return;
    };
    if node == link.node {
        return;
    }
    let msgs: Vec<M> = match serde_json::from_slice(body) {
        Ok(msgs) => msgs,
        Err(e) => {
            tracing::warn!(topic, error = %e, "event bus: an undecodable message was ignored");
            return;
        }
    };
    let Some(inner) = bus.upgrade() else {
        return;
    };
    inner.local.deliver_wait(topic, &msgs, config.stall).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_to_the_max_and_resets_only_after_a_lasting_session() {
        let config = RedisBusConfig::new("redis://127.0.0.1:1");
        let (min, max) = (config.reconnect_min, config.reconnect_max);
        // Redis accepts connections but refuses the first command, every time:
        // each short session still grows the pause, as failed connects do.
        let mut backoff = min;
        let mut pauses = vec![];
        for _ in 0..8 {
            backoff = backoff_after_session(backoff, Duration::ZERO, &config);
            pauses.push(backoff.as_millis());
            backoff = next_backoff(backoff, &config);
        }
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        // A session that lasted `reconnect_max` was healthy: start again low.
        assert_eq!(backoff_after_session(max, max, &config), min);
        assert_eq!(backoff_after_session(max, max / 2, &config), max);
    }

    #[tokio::test]
    async fn impossible_bounds_are_refused_before_connecting() {
        let mut configs = vec![];
        for set in [
            (|c: &mut RedisBusConfig| c.ping_interval = Duration::ZERO) as fn(&mut RedisBusConfig),
            |c| c.reconnect_min = Duration::ZERO,
            |c| c.publish_queue = 0,
            |c| c.max_claims = 0,
            |c| c.max_payload = 0,
            |c| c.reconnect_max = Duration::from_millis(1),
        ] {
            // Port 1: nothing listens, so only validation can answer Config.
            let mut c = RedisBusConfig::new("redis://127.0.0.1:1");
            c.connect_timeout = Duration::from_millis(200);
            set(&mut c);
            configs.push(c);
        }
        for config in configs {
            let what = format!("{config:?}");
            match Bus::<u32>::redis(config).await {
                Err(BusError::Config(msg)) => assert!(!msg.is_empty()),
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn debug_output_hides_the_password() {
        let config = RedisBusConfig::new("redis://user:s3cret@10.0.0.1:6379/0");
        let debug = format!("{config:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("redis://***@10.0.0.1:6379/0"), "{debug}");
    }

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            display_url("redis://u:secret@10.0.0.1:6379/0"),
            "redis://***@10.0.0.1:6379/0"
        );
        assert_eq!(display_url("redis://127.0.0.1:1"), "redis://127.0.0.1:1");
    }
}
