//! The Redis thread's loop on a cluster: the cluster connection's lives, the
//! shards' sessions within each, the publishes routed to them by slot, the
//! lost shards' streams completed and their masters reached again.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use ::redis::aio::MultiplexedConnection;
use ::redis::cluster_async::ClusterConnection;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

use super::super::RedisBusConfig;
use super::super::conn::CommandConn;
use super::super::inbound::Verifier;
use super::super::lifecycle::{Engine, Started};
use super::super::link::{Link, Outgoing};
use super::super::slot;
use super::super::task::{End, next_backoff};
use super::ClusterTask;
use super::connect::{Pushes, Reached, connect_shard, reach};
use super::shard::Shard;
use super::slot_map::{Master, slot_map};
use crate::pubsub::BusInner;
use crate::pubsub::local::lock;

/// Shards' "subscribed up to this ticket" announcements waiting for the
/// router (one after each pass over the topics).
const READY_QUEUE: usize = 64;

/// How often the slot map is read again while every shard runs, so a
/// failover that ended no session (a demoted master whose slots had no
/// subscribed channel) is noticed.
const SLOT_MAP_REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// What the router keeps of a running shard.
struct Running {
    ranges: Arc<Mutex<Vec<(u16, u16)>>>,
    publish: mpsc::Sender<Outgoing>,
    topics: watch::Sender<()>,
}

type ShardFuture = Pin<Box<dyn Future<Output = (String, End, Verifier)>>>;

impl<M: Clone + Send + DeserializeOwned + 'static> ClusterTask<M> {
    async fn connect_cluster(&self) -> Result<ClusterConnection, String> {
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

    /// One life of the cluster connection: runs a session per master, routes
    /// the publishes to them by slot, and restarts the shards it loses.
    async fn session_on(&mut self, mut cmd: ClusterConnection, started: &mut Started) -> End {
        let timeout = self.config.command_timeout;
        let mut masters = match slot_map(&mut cmd, timeout).await {
            Ok(masters) => masters,
            Err(e) => return End::Lost(e),
        };
        let mut running: HashMap<String, Running> = HashMap::new();
        let mut shards: FuturesUnordered<ShardFuture> = FuturesUnordered::new();
        // One announcement per shard session, taken at once: a shard waits
        // for room in the rare case that READY_QUEUE are waiting.
        let (ready_tx, mut ready_rx) = mpsc::channel::<(String, u64)>(READY_QUEUE);
        // The running shards that have subscribed their topics, with the
        // ticket of their last pass.
        let mut ready: HashMap<String, u64> = HashMap::new();
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
        let mut refresh = tokio::time::interval(SLOT_MAP_REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        refresh.tick().await;
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
                        // No running shard (lost meanwhile), or its queue
                        // full: the publish is dropped (at most once), and
                        // said so in the log.
                        let sent = shard.is_some_and(|shard| shard.publish.try_send(out).is_ok());
                        if !sent {
                            unsent(shard.is_some());
                        }
                    }
                }
                _ = link.topics_changed.notified() => {
                    for r in running.values() {
                        let _ = r.topics.send(());
                    }
                }
                Some((addr, ticket)) = ready_rx.recv() => {
                    if !running.contains_key(&addr) {
                        continue;
                    }
                    let returned = ready.insert(addr, ticket).is_none();
                    link.synced_to(synced(&running, &ready));
                    if ready.len() == running.len() && lock(&link.down).is_empty()
                        && !link.connected.swap(true, Ordering::AcqRel)
                    {
                        // Every shard has subscribed its topics, durable ones
                        // included: a new epoch.
                        if let Some(inner) = bus.upgrade() {
                            inner.next_epoch();
                        }
                        if let Some(s) = started.take() {
                            let _ = s.send(Ok(()));
                        }
                        tracing::info!(
                            url = %link.url, shards = running.len(),
                            node = %format!("{:016x}", link.node),
                            "event bus connected to the Redis Cluster"
                        );
                    } else if returned && link.connected.load(Ordering::Acquire) {
                        // A lost shard is back and has subscribed its
                        // topics again (its durable ones): a new epoch.
                        if let Some(inner) = bus.upgrade() {
                            inner.next_epoch();
                        }
                    }
                }
                Some((addr, end, verifier)) = shards.next() => {
                    self.verifiers.insert(addr.clone(), verifier);
                    if !running.contains_key(&addr) {
                        // A session let go because its node is no longer a
                        // master (below): its topics are another's now.
                        continue;
                    }
                    let reason = match end {
                        End::Shutdown => return End::Shutdown,
                        End::Lost(reason) => reason,
                    };
                    ready.remove(&addr);
                    let Some(lost) = running.remove(&addr) else { continue };
                    // The lost shard no longer holds the tickets back; its
                    // topics are subscribed on its return (a new epoch).
                    link.synced_to(synced(&running, &ready));
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
                        let end = End::Lost(format!("shard {addr}: {reason}"));
                        return self.end_keeping_replay(running, shards, end).await;
                    }
                    retry = Some(tokio::time::Instant::now() + backoff);
                }
                _ = refresh.tick(), if reaching.is_none() => {
                    // The slot map read again now and then: a failover that
                    // ended no session is still seen.
                    reaching = Some(Box::pin(reach(
                        cmd.clone(),
                        self.base.clone(),
                        self.config.clone(),
                        masters.clone(),
                        running.keys().cloned().collect(),
                    )));
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
                    // A node that is no longer a master (demoted by a
                    // failover, perhaps silently: no channel of its slots
                    // was subscribed) lets its session go: its slots'
                    // channels are subscribed on their new master, and a
                    // replica still subscribed would deliver them twice.
                    let stale: Vec<String> = running
                        .keys()
                        .filter(|addr| !masters.iter().any(|m| m.addr() == **addr))
                        .cloned()
                        .collect();
                    for addr in stale {
                        running.remove(&addr);
                        ready.remove(&addr);
                        tracing::info!(url = %link.url, shard = %addr, "event bus: a Redis Cluster node is no longer a master; its session ends");
                    }
                    link.synced_to(synced(&running, &ready));
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

    /// Ends the session as `end` once the shards still running have ended
    /// (their router side dropped, within the command timeout) and handed
    /// back their replay tables: the next session then still refuses a
    /// frame this one delivered, as a reconnection must.
    async fn end_keeping_replay(
        &mut self,
        running: HashMap<String, Running>,
        mut shards: FuturesUnordered<ShardFuture>,
        end: End,
    ) -> End {
        drop(running);
        let back = async {
            while let Some((addr, _, verifier)) = shards.next().await {
                self.verifiers.insert(addr, verifier);
            }
        };
        if tokio::time::timeout(self.config.command_timeout, back)
            .await
            .is_err()
        {
            tracing::debug!("a shard's replay table not taken back in time");
        }
        end
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
        pushes: Pushes,
        verifier: Verifier,
        ready: mpsc::Sender<(String, u64)>,
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

impl<M: Clone + Send + DeserializeOwned + 'static> Engine<M> for ClusterTask<M> {
    type Conn = ClusterConnection;
    const WHAT: &'static str = "the Redis Cluster";

    fn link(&self) -> &Arc<Link> {
        &self.link
    }

    fn config(&self) -> &RedisBusConfig {
        &self.config
    }

    fn bus(&self) -> &Weak<BusInner<M>> {
        &self.bus
    }

    fn publishes(&mut self) -> &mut mpsc::Receiver<Outgoing> {
        &mut self.rx
    }

    async fn connect(&mut self) -> Result<Self::Conn, String> {
        let conn = self.connect_cluster().await?;
        *lock(&self.link.conn) = Some(CommandConn::Cluster(conn.clone()));
        Ok(conn)
    }

    async fn session(&mut self, conn: Self::Conn, started: &mut Started) -> End {
        self.session_on(conn, started).await
    }

    fn lost(&mut self) {
        lock(&self.link.down).clear();
    }
}

/// The last ticket every running shard has subscribed (0 while one has not
/// yet).
fn synced(running: &HashMap<String, Running>, ready: &HashMap<String, u64>) -> u64 {
    running
        .keys()
        .map(|addr| ready.get(addr).copied().unwrap_or(0))
        .min()
        .unwrap_or(0)
}

/// Completes the streams of the topics whose channel hashes to `ranges`,
/// but not the durable subscriptions: they stay, for the shard's return.
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

/// Publishes this process dropped between the bus's queue and a shard's:
/// logged as a warning the 1st, 2nd, 4th, 8th... time (a shard that stays
/// slow cannot flood the log).
static UNSENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn unsent(shard_full: bool) {
    let n = UNSENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let why = if shard_full {
        "its shard's publish queue was full"
    } else {
        "no reachable master serves its slot"
    };
    if n.is_power_of_two() {
        tracing::warn!(
            unsent = n,
            why,
            "event bus (cluster): a publish was dropped"
        );
    } else {
        tracing::debug!(why, "event bus (cluster): a publish was dropped");
    }
}
