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

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ::redis::aio::MultiplexedConnection;
use ::redis::cluster::ClusterClientBuilder;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{AsyncConnectionConfig, ConnectionAddr, ProtocolVersion, PushInfo, PushKind, Value};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot, watch};

use super::conn::CommandConn;
use super::dropped::{self, DropReason};
use super::inbound::{Verdict, Verifier};
use super::link::{Link, Outgoing};
use super::slot;
use super::task::{End, backoff_after_session, next_backoff, now_ms, self_deliver};
use super::wire::{self, Header};
use super::{RedisBusConfig, StartMode};
use crate::pubsub::local::lock;
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
        .response_timeout(config.command_timeout)
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
    std::thread::Builder::new()
        .name("genmcp-redis".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => {
                    let _ = task.link.runtime.set(rt.handle().clone());
                    rt.block_on(task.run(started))
                }
                Err(e) => {
                    let _ = started.send(Err(BusError::Config(format!(
                        "cannot start the Redis thread's runtime: {e}"
                    ))));
                }
            }
        })
        .map(drop)
        .map_err(|e| BusError::Config(format!("cannot start the Redis thread: {e}")))
}

/// One master of the slot map: its address and the slot ranges it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Master {
    host: String,
    port: u16,
    ranges: Vec<(u16, u16)>,
}

impl Master {
    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The masters of the cluster by `CLUSTER SLOTS` (through the cluster
/// connection, so any reachable node answers).
async fn slot_map(cmd: &mut ClusterConnection, timeout: Duration) -> Result<Vec<Master>, String> {
    let mut slots = ::redis::cmd("CLUSTER");
    slots.arg("SLOTS");
    let query = slots.query_async::<Value>(cmd);
    let reply = match tokio::time::timeout(timeout, query).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return Err(format!("CLUSTER SLOTS failed: {e}")),
        Err(_) => return Err(format!("CLUSTER SLOTS unanswered in {timeout:?}")),
    };
    parse_slots(reply)
}

/// The masters of a `CLUSTER SLOTS` reply, each with its slot ranges.
fn parse_slots(reply: Value) -> Result<Vec<Master>, String> {
    let Value::Array(ranges) = reply else {
        return Err("CLUSTER SLOTS: not an array".into());
    };
    let mut masters: Vec<Master> = Vec::new();
    for range in ranges {
        let Value::Array(items) = range else {
            return Err("CLUSTER SLOTS: a range is not an array".into());
        };
        let (Some(Value::Int(lo)), Some(Value::Int(hi)), Some(Value::Array(node))) =
            (items.first(), items.get(1), items.get(2))
        else {
            return Err("CLUSTER SLOTS: a range without its master".into());
        };
        let host = match node.first() {
            Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Value::SimpleString(h)) => h.clone(),
            _ => return Err("CLUSTER SLOTS: a master without its host".into()),
        };
        let Some(Value::Int(port)) = node.get(1) else {
            return Err("CLUSTER SLOTS: a master without its port".into());
        };
        let (Ok(lo), Ok(hi), Ok(port)) =
            (u16::try_from(*lo), u16::try_from(*hi), u16::try_from(*port))
        else {
            return Err("CLUSTER SLOTS: a slot or port out of range".into());
        };
        match masters
            .iter_mut()
            .find(|m| m.host == host && m.port == port)
        {
            Some(m) => m.ranges.push((lo, hi)),
            None => masters.push(Master {
                host,
                port,
                ranges: vec![(lo, hi)],
            }),
        }
    }
    if masters.is_empty() {
        return Err("CLUSTER SLOTS: no slot is served".into());
    }
    Ok(masters)
}

/// A shard connection and its push messages (sharded messages,
/// `sunsubscribe`s, the disconnection).
type ShardConn = (MultiplexedConnection, mpsc::UnboundedReceiver<PushInfo>);

/// A RESP3 connection to `master` with the settings of `base` (credentials,
/// database).
async fn connect_shard(
    base: &::redis::ConnectionInfo,
    config: &RedisBusConfig,
    master: &Master,
) -> Result<ShardConn, String> {
    let redis = base
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let info = base
        .clone()
        .set_addr(ConnectionAddr::Tcp(master.host.clone(), master.port))
        .set_redis_settings(redis);
    let client = ::redis::Client::open(info).map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::unbounded_channel();
    let settings = AsyncConnectionConfig::new()
        .set_push_sender(tx)
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(config.command_timeout));
    match tokio::time::timeout(
        config.connect_timeout,
        client.get_multiplexed_async_connection_with_config(&settings),
    )
    .await
    {
        Ok(Ok(conn)) => Ok((conn, rx)),
        Ok(Err(e)) => Err(format!("{}: {e}", master.addr())),
        Err(_) => Err(format!(
            "{}: no connection within {:?}",
            master.addr(),
            config.connect_timeout
        )),
    }
}

/// What one attempt to reach the lost shards found: the slot map (the last
/// known one if it could not be read) and the masters newly connected or not.
type Reached = (Vec<Master>, Vec<(Master, Result<ShardConn, String>)>);

/// Reads the slot map again and connects to the masters not in `running`,
/// all at once. Runs beside the shards' sessions (never holding them up).
async fn reach(
    mut cmd: ClusterConnection,
    base: ::redis::ConnectionInfo,
    config: RedisBusConfig,
    known: Vec<Master>,
    running: HashSet<String>,
) -> Reached {
    let masters = match slot_map(&mut cmd, config.command_timeout).await {
        Ok(masters) => masters,
        Err(e) => {
            tracing::debug!(reason = %e, "event bus: Redis Cluster slot map unavailable");
            known
        }
    };
    let missing: Vec<Master> = masters
        .iter()
        .filter(|m| !running.contains(&m.addr()))
        .cloned()
        .collect();
    let conns =
        futures_util::future::join_all(missing.iter().map(|m| connect_shard(&base, &config, m)))
            .await;
    (masters, missing.into_iter().zip(conns).collect())
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

/// What the router keeps of a running shard.
struct Running {
    ranges: Arc<Mutex<Vec<(u16, u16)>>>,
    publish: mpsc::Sender<Outgoing>,
    topics: watch::Sender<()>,
}

type ShardFuture = Pin<Box<dyn Future<Output = (String, End, Verifier)>>>;

impl<M: Clone + Send + DeserializeOwned + 'static> ClusterTask<M> {
    async fn connect(&self) -> Result<ClusterConnection, String> {
        match tokio::time::timeout(
            self.config.connect_timeout,
            self.client.get_async_connection(),
        )
        .await
        {
            Ok(Ok(conn)) => Ok(conn),
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
                Ok(conn) => {
                    *lock(&self.link.conn) = Some(CommandConn::Cluster(conn.clone()));
                    let began = std::time::Instant::now();
                    match self.session(conn, &mut started).await {
                        End::Shutdown => {
                            self.link.set_lost("the bus was dropped".into());
                            return;
                        }
                        End::Lost(reason) => {
                            self.link.set_lost(reason.clone());
                            lock(&self.link.down).clear();
                            while self.rx.try_recv().is_ok() {}
                            let ended = self
                                .bus
                                .upgrade()
                                .map(|bus| bus.local.complete_all())
                                .unwrap_or(0);
                            tracing::warn!(
                                url = %self.link.url, %reason, streams_completed = ended,
                                "event bus lost the Redis Cluster: its streams were completed; reconnecting"
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
                    "event bus starting DEGRADED: the Redis Cluster is unreachable, events stay on this node until it connects"
                );
                let _ = s.send(Ok(()));
            } else {
                tracing::debug!(url = %self.link.url, %reason, retry_in = ?backoff, "event bus: Redis Cluster still unreachable");
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

    /// One life of the cluster connection: runs a session per master, routes
    /// the publishes to them by slot, and restarts the shards it loses.
    async fn session(
        &mut self,
        mut cmd: ClusterConnection,
        started: &mut Option<oneshot::Sender<Result<(), BusError>>>,
    ) -> End {
        let timeout = self.config.command_timeout;
        let mut masters = match slot_map(&mut cmd, timeout).await {
            Ok(masters) => masters,
            Err(e) => return End::Lost(e),
        };
        let mut running: HashMap<String, Running> = HashMap::new();
        let mut shards: FuturesUnordered<ShardFuture> = FuturesUnordered::new();
        let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<String>();
        let mut ready: HashSet<String> = HashSet::new();
        // First, every master must be reached (else the session fails, as a
        // single Redis that cannot be reached does).
        let conns = futures_util::future::join_all(
            masters
                .iter()
                .map(|m| connect_shard(&self.base, &self.config, m)),
        )
        .await;
        let mut pending = Vec::new();
        for (master, conn) in masters.iter().zip(conns) {
            match conn {
                Ok(pair) => pending.push((master.clone(), pair)),
                Err(e) => return End::Lost(format!("shard {e}")),
            }
        }
        for (master, (conn, pushes)) in pending {
            let addr = master.addr();
            let verifier = self.take_verifier(&addr);
            let (run, fut) = self.shard(master, conn, pushes, verifier, ready_tx.clone());
            running.insert(addr, run);
            shards.push(fut);
        }
        let mut batch: Vec<Outgoing> = Vec::with_capacity(256);
        let mut backoff = self.config.reconnect_min;
        let mut retry: Option<tokio::time::Instant> = None;
        let mut reaching: Option<Pin<Box<dyn Future<Output = Reached>>>> = None;
        let link = self.link.clone();
        let bus = self.bus.clone();
        loop {
            let retry_at = retry;
            tokio::select! {
                n = self.rx.recv_many(&mut batch, 256) => {
                    if n == 0 {
                        return End::Shutdown;
                    }
                    for out in batch.drain(..) {
                        let slot = slot::of(out.channel.as_bytes());
                        let shard = running
                            .values()
                            .find(|r| slot::within(slot, &lock(&r.ranges)));
                        // No running shard: lost meanwhile (at most once).
                        if let Some(shard) = shard {
                            let _ = shard.publish.try_send(out);
                        }
                    }
                }
                _ = link.topics_changed.notified() => {
                    for r in running.values() {
                        let _ = r.topics.send(());
                    }
                }
                Some(addr) = ready_rx.recv() => {
                    ready.insert(addr);
                    if ready.len() == running.len() && lock(&link.down).is_empty()
                        && !link.connected.swap(true, Ordering::AcqRel)
                    {
                        if let Some(s) = started.take() {
                            let _ = s.send(Ok(()));
                        }
                        tracing::info!(
                            url = %link.url, shards = running.len(),
                            node = %format!("{:016x}", link.node),
                            "event bus connected to the Redis Cluster"
                        );
                    }
                }
                Some((addr, end, verifier)) = shards.next() => {
                    self.verifiers.insert(addr.clone(), verifier);
                    let reason = match end {
                        End::Shutdown => return End::Shutdown,
                        End::Lost(reason) => reason,
                    };
                    ready.remove(&addr);
                    let Some(lost) = running.remove(&addr) else { continue };
                    let ranges = lock(&lost.ranges).clone();
                    lock(&link.down).extend(ranges.iter().copied());
                    let ended = complete_shard(&bus, &link.prefix, &ranges);
                    tracing::warn!(
                        url = %link.url, shard = %addr, %reason, streams_completed = ended,
                        "event bus lost a Redis Cluster shard: the streams of its topics were completed; reconnecting"
                    );
                    if running.is_empty() {
                        return End::Lost(format!("every shard lost; last {addr}: {reason}"));
                    }
                    if !link.connected.load(Ordering::Acquire) {
                        // Not yet started: the start needs every shard.
                        return End::Lost(format!("shard {addr}: {reason}"));
                    }
                    retry = Some(tokio::time::Instant::now() + backoff);
                }
                _ = async {
                    match retry_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                }, if reaching.is_none() => {
                    retry = None;
                    reaching = Some(Box::pin(reach(
                        cmd.clone(),
                        self.base.clone(),
                        self.config.clone(),
                        masters.clone(),
                        running.keys().cloned().collect(),
                    )));
                }
                (map, reached) = async {
                    match reaching.as_mut() {
                        Some(f) => f.await,
                        None => std::future::pending().await,
                    }
                } => {
                    reaching = None;
                    masters = map;
                    for master in &masters {
                        // A master that took over slots serves them now.
                        if let Some(r) = running.get(&master.addr()) {
                            let mut ranges = lock(&r.ranges);
                            if *ranges != master.ranges {
                                ranges.clone_from(&master.ranges);
                                let _ = r.topics.send(());
                            }
                        }
                    }
                    for (master, conn) in reached {
                        let addr = master.addr();
                        if running.contains_key(&addr) {
                            continue;
                        }
                        match conn {
                            Ok((conn, pushes)) => {
                                let verifier = self.take_verifier(&addr);
                                let (run, fut) = self.shard(master, conn, pushes, verifier, ready_tx.clone());
                                running.insert(addr.clone(), run);
                                shards.push(fut);
                                tracing::info!(url = %link.url, shard = %addr, "event bus reached a Redis Cluster shard again");
                            }
                            Err(e) => {
                                tracing::debug!(url = %link.url, shard = %addr, reason = %e, retry_in = ?backoff, "event bus: shard still unreachable");
                            }
                        }
                    }
                    // Down: the slots of every master without a session (one
                    // lost while this attempt ran included).
                    let down: Vec<(u16, u16)> = masters
                        .iter()
                        .filter(|m| !running.contains_key(&m.addr()))
                        .flat_map(|m| m.ranges.iter().copied())
                        .collect();
                    let any_down = !down.is_empty();
                    *lock(&link.down) = down;
                    if any_down {
                        backoff = next_backoff(backoff, &self.config);
                        retry = Some(tokio::time::Instant::now() + backoff);
                    } else {
                        backoff = self.config.reconnect_min;
                    }
                }
            }
        }
    }

    fn take_verifier(&mut self, addr: &str) -> Verifier {
        self.verifiers.remove(addr).unwrap_or_else(|| {
            Verifier::new(
                self.config.key.clone(),
                self.link.node,
                self.config.max_payload,
                self.config.replay_window,
                self.config.max_nodes,
            )
        })
    }

    /// The session of one shard (its router side and its future).
    fn shard(
        &self,
        master: Master,
        conn: MultiplexedConnection,
        pushes: mpsc::UnboundedReceiver<PushInfo>,
        verifier: Verifier,
        ready: mpsc::UnboundedSender<String>,
    ) -> (Running, ShardFuture) {
        let ranges = Arc::new(Mutex::new(master.ranges.clone()));
        let (publish_tx, publish_rx) = mpsc::channel(self.config.publish_queue);
        let (topics_tx, topics_rx) = watch::channel(());
        let shard = Shard {
            addr: master.addr(),
            ranges: ranges.clone(),
            config: self.config.clone(),
            link: self.link.clone(),
            bus: self.bus.clone(),
            seq: self.seq.clone(),
        };
        let fut = Box::pin(shard.run(conn, pushes, publish_rx, topics_rx, verifier, ready));
        (
            Running {
                ranges,
                publish: publish_tx,
                topics: topics_tx,
            },
            fut,
        )
    }
}

/// Completes the streams of the topics whose channel hashes to `ranges`.
fn complete_shard<M: Clone + Send + 'static>(
    bus: &Weak<BusInner<M>>,
    prefix: &str,
    ranges: &[(u16, u16)],
) -> usize {
    let Some(inner) = bus.upgrade() else {
        return 0;
    };
    inner.local.complete_where(|topic| {
        let channel = format!("{prefix}{topic}");
        slot::within(slot::of(channel.as_bytes()), ranges)
    })
}

/// One shard's session: its subscriptions, its publishes, its messages.
struct Shard<M> {
    addr: String,
    ranges: Arc<Mutex<Vec<(u16, u16)>>>,
    config: RedisBusConfig,
    link: Arc<Link>,
    bus: Weak<BusInner<M>>,
    seq: Arc<AtomicU64>,
}

impl<M: Clone + Send + DeserializeOwned + 'static> Shard<M> {
    async fn run(
        self,
        conn: MultiplexedConnection,
        pushes: mpsc::UnboundedReceiver<PushInfo>,
        publish: mpsc::Receiver<Outgoing>,
        topics: watch::Receiver<()>,
        mut verifier: Verifier,
        ready: mpsc::UnboundedSender<String>,
    ) -> (String, End, Verifier) {
        let end = self
            .session(conn, pushes, publish, topics, &mut verifier, ready)
            .await;
        (self.addr, end, verifier)
    }

    async fn session(
        &self,
        conn: MultiplexedConnection,
        mut pushes: mpsc::UnboundedReceiver<PushInfo>,
        mut publish: mpsc::Receiver<Outgoing>,
        mut topics: watch::Receiver<()>,
        verifier: &mut Verifier,
        ready: mpsc::UnboundedSender<String>,
    ) -> End {
        let command_timeout = self.config.command_timeout;
        let key = self.config.key.as_ref();
        let node = self.link.node;
        let seq = &self.seq;
        // The channels subscribed (or being subscribed) on this shard: a
        // `sunsubscribe` push for one of them comes from the server (its slot
        // moved), not from this node.
        let subscribed: std::cell::RefCell<HashSet<String>> = Default::default();
        let mut pub_conn = conn.clone();
        let publishing = async {
            let mut batch: Vec<Outgoing> = Vec::with_capacity(256);
            loop {
                if publish.recv_many(&mut batch, 256).await == 0 {
                    return End::Shutdown;
                }
                let mut pipe = ::redis::pipe();
                let sent_ms = now_ms();
                for mut out in batch.drain(..) {
                    let header = Header {
                        node,
                        seq: seq.fetch_add(1, Ordering::Relaxed) + 1,
                        sent_ms,
                    };
                    wire::seal(&mut out.payload, header, key, out.channel.as_bytes());
                    pipe.cmd("SPUBLISH")
                        .arg(out.channel)
                        .arg(out.payload)
                        .ignore();
                }
                match tokio::time::timeout(command_timeout, pipe.exec_async(&mut pub_conn)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return End::Lost(format!("SPUBLISH failed: {e}")),
                    Err(_) => {
                        return End::Lost(format!("SPUBLISH unanswered in {command_timeout:?}"));
                    }
                }
            }
        };
        let (checked_tx, mut checked) = mpsc::channel::<::redis::Msg>(self.config.max_inbound);
        let max_inbound = self.config.max_inbound;
        let draining = async {
            loop {
                let Some(push) = pushes.recv().await else {
                    return End::Lost("connection closed".into());
                };
                match push.kind {
                    PushKind::SMessage => {}
                    PushKind::Disconnection => return End::Lost("connection closed".into()),
                    PushKind::SUnsubscribe => {
                        let channel = match push.data.first() {
                            Some(Value::BulkString(c)) => String::from_utf8_lossy(c).into_owned(),
                            _ => continue,
                        };
                        if subscribed.borrow().contains(&channel) {
                            return End::Lost(format!(
                                "the server unsubscribed {channel} (its slot moved)"
                            ));
                        }
                        continue;
                    }
                    _ => continue,
                }
                let Some(msg) = ::redis::Msg::from_push_info(push) else {
                    continue;
                };
                let verdict = verifier.check(
                    msg.get_channel_name().as_bytes(),
                    msg.get_payload_bytes(),
                    now_ms(),
                    std::time::Instant::now(),
                );
                match verdict {
                    Verdict::Deliver(_) => {}
                    Verdict::Own => continue,
                    Verdict::Drop(reason) => {
                        dropped::count(reason, msg.get_channel_name());
                        continue;
                    }
                }
                if checked_tx.try_send(msg).is_err() {
                    dropped::count(DropReason::Backlog, "");
                    return End::Lost(format!(
                        "{max_inbound} messages from Redis already wait for delivery (max_inbound): \
                         this node cannot keep up"
                    ));
                }
            }
        };
        let mut sub_conn = conn;
        let receiving = async {
            let mut ping = tokio::time::interval(self.config.ping_interval);
            ping.tick().await;
            let mut dirty = true;
            let mut announced = false;
            loop {
                if !dirty {
                    tokio::select! {
                        msg = checked.recv() => match msg {
                            Some(msg) => self_deliver(&self.bus, &self.link, &self.config, &msg).await,
                            None => return End::Lost("connection closed".into()),
                        },
                        changed = topics.changed() => {
                            if changed.is_err() {
                                return End::Shutdown;
                            }
                            dirty = true;
                        }
                        _ = ping.tick() => {
                            let ping_cmd = ::redis::cmd("PING");
                            let ping = ping_cmd.query_async::<Value>(&mut sub_conn);
                            match tokio::time::timeout(command_timeout, ping).await {
                                Ok(Ok(_)) => {}
                                Ok(Err(e)) => return End::Lost(format!("PING failed: {e}")),
                                Err(_) => return End::Lost(format!("PING unanswered in {command_timeout:?}")),
                            }
                        }
                    }
                    continue;
                }
                dirty = false;
                let Some(inner) = self.bus.upgrade() else {
                    return End::Shutdown;
                };
                let ranges = lock(&self.ranges).clone();
                let wanted: HashSet<String> = inner
                    .local
                    .names()
                    .into_iter()
                    .map(|t| format!("{}{t}", self.link.prefix))
                    .filter(|c| slot::within(slot::of(c.as_bytes()), &ranges))
                    .collect();
                drop(inner);
                let (add, remove) = {
                    let mut subscribed = subscribed.borrow_mut();
                    let add: Vec<String> = wanted.difference(&subscribed).cloned().collect();
                    let remove: Vec<String> = subscribed.difference(&wanted).cloned().collect();
                    // Marked before the commands go: their own confirmations
                    // are then not taken for the server's.
                    *subscribed = wanted;
                    (add, remove)
                };
                // One channel per command: each is answered by one
                // confirmation, which the connection takes as its reply.
                for (verb, channels) in [("SSUBSCRIBE", &add), ("SUNSUBSCRIBE", &remove)] {
                    if channels.is_empty() {
                        continue;
                    }
                    let mut pipe = ::redis::pipe();
                    for c in channels {
                        pipe.cmd(verb).arg(c).ignore();
                    }
                    match tokio::time::timeout(command_timeout, pipe.exec_async(&mut sub_conn))
                        .await
                    {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return End::Lost(format!("{verb} failed: {e}")),
                        Err(_) => {
                            return End::Lost(format!("{verb} unanswered in {command_timeout:?}"));
                        }
                    }
                }
                if !announced {
                    announced = true;
                    let _ = ready.send(self.addr.clone());
                }
            }
        };
        tokio::select! {
            end = publishing => end,
            end = receiving => end,
            end = draining => end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn node(port: i64) -> Value {
        Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")])
    }

    #[test]
    fn the_slot_map_groups_each_masters_ranges() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node(7001),
                node(7004),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(10922), node(7002)]),
            Value::Array(vec![Value::Int(10923), Value::Int(16383), node(7001)]),
        ]);
        let masters = parse_slots(reply).expect("a slot map");
        assert_eq!(
            masters,
            vec![
                Master {
                    host: "127.0.0.1".into(),
                    port: 7001,
                    ranges: vec![(0, 5460), (10923, 16383)],
                },
                Master {
                    host: "127.0.0.1".into(),
                    port: 7002,
                    ranges: vec![(5461, 10922)],
                },
            ]
        );
        for bad in [
            Value::Array(vec![]),
            Value::Int(1),
            Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(1)])]),
            Value::Array(vec![Value::Array(vec![
                Value::Int(0),
                Value::Int(70000),
                node(7001),
            ])]),
        ] {
            assert!(parse_slots(bad).is_err());
        }
    }
}
