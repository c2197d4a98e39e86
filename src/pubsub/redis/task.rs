//! The Redis thread on one server: keeps one subscription connection in step with
//! this node's topics, delivers the other nodes' events, sends the queued
//! publishes; `lifecycle` reconnects it with back-off.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ::redis::aio::{MultiplexedConnection, PubSub};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot};

use super::RedisBusConfig;
use super::conn::CommandConn;
use super::dropped::{self, DropReason};
use super::inbound::{Verifier, check_and_queue};
use super::lifecycle::{self, Engine, Started};
use super::link::{Link, Outgoing};
use super::publish::Publisher;
use super::wire;
use crate::pubsub::local::lock;
use crate::pubsub::{BusError, BusInner};

/// Starts the Redis thread (`genmcp-redis`, a current-thread tokio runtime)
/// for the bus `bus`; `started` is answered once the first connection is
/// made or has failed (see [`StartMode`]).
pub(super) fn spawn<M: Clone + Send + DeserializeOwned + 'static>(
    client: ::redis::Client,
    config: RedisBusConfig,
    link: Arc<Link>,
    bus: Weak<BusInner<M>>,
    rx: mpsc::Receiver<Outgoing>,
    started: oneshot::Sender<Result<(), BusError>>,
) -> Result<(), BusError> {
    let verifier = Verifier::new(
        config.key.clone(),
        link.node,
        config.max_payload,
        config.replay_window,
        config.max_nodes,
    );
    let task = Task {
        client,
        config,
        link,
        bus,
        rx,
        verifier,
        seq: 0,
    };
    lifecycle::spawn(task, started)
}

/// Why a connection's session ended.
pub(super) enum End {
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
    /// The checks on messages from Redis (kept across reconnections).
    verifier: Verifier,
    /// The sequence number of this node's last publish.
    seq: u64,
}

/// Milliseconds since the Unix epoch by this machine's clock.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl<M: Clone + Send + DeserializeOwned + 'static> Task<M> {
    async fn connect_pair(&self) -> Result<(PubSub, MultiplexedConnection), String> {
        let connect = async {
            let pubsub = self.client.get_async_pubsub().await?;
            // The crate's own bounds would cut every command at 500 ms and
            // every connection at 1 s, whatever the configuration says:
            // each command is bounded by `command_timeout` where it is sent
            // (a clear "unanswered" error), so the crate's bound is only a
            // backstop behind it.
            let settings = ::redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(self.config.connect_timeout))
                .set_response_timeout(Some(self.config.command_timeout.saturating_mul(2)));
            let conn = self
                .client
                .get_multiplexed_async_connection_with_config(&settings)
                .await?;
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

    /// One connection's life. The bus is reported connected (and `started`
    /// answered) only once the channels its streams need are subscribed.
    async fn session_on(
        &mut self,
        pubsub: PubSub,
        conn: MultiplexedConnection,
        started: &mut Started,
    ) -> End {
        let (mut sink, mut messages) = pubsub.split();
        let command_timeout = self.config.command_timeout;
        let rx = &mut self.rx;
        let seq = &mut self.seq;
        let publisher = Publisher::new("PUBLISH", &self.link, &self.config);
        // Numbered here, in the order of the PUBLISHes.
        let publishing = publisher.run(rx, conn, || {
            *seq += 1;
            *seq
        });
        let link = &self.link;
        let bus = &self.bus;
        let config = &self.config;
        // Messages from Redis are checked as soon as the redis crate hands
        // them over (its queue is unbounded: it is kept near empty), then wait
        // in this bounded queue for delivery, which may wait for mailboxes.
        let (checked_tx, mut checked) = mpsc::channel::<::redis::Msg>(config.max_inbound);
        let verifier = &mut self.verifier;
        let draining = async {
            loop {
                let Some(msg) = messages.next().await else {
                    return End::Lost("connection closed".into());
                };
                // A sync marker of this node's: no header to check; it keeps
                // its place among the messages.
                if msg.get_channel_name() == link.sync_channel {
                    if checked_tx.try_send(msg).is_err() {
                        return End::Lost("messages from Redis backed up".into());
                    }
                    continue;
                }
                if let Err(reason) = check_and_queue(verifier, msg, &checked_tx, now_ms()) {
                    return End::Lost(reason);
                }
            }
        };
        let receiving = async {
            let mut subscribed: HashSet<String> = HashSet::new();
            let mut ping = tokio::time::interval(config.ping_interval);
            ping.tick().await;
            // Whether the local topics may differ from the subscribed channels.
            let mut dirty = true;
            loop {
                if !dirty {
                    tokio::select! {
                        msg = checked.recv() => match msg {
                            Some(msg) if msg.get_channel_name() == link.sync_channel => {
                                link.sync_back(msg.get_payload_bytes());
                            }
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
                // Before the topics are read: what this pass answers.
                let ticket = link.ticket();
                let mut wanted: HashSet<String> = inner
                    .local
                    .names()
                    .into_iter()
                    .map(|t| format!("{}{t}", link.prefix))
                    .collect();
                wanted.insert(link.sync_channel.clone());
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
                link.synced_to(ticket);
                if !link.connected.swap(true, Ordering::AcqRel) {
                    // Every topic, durable ones included, is subscribed on
                    // this session: it is a new epoch.
                    if let Some(inner) = bus.upgrade() {
                        inner.next_epoch();
                    }
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
            end = draining => end,
        }
    }
}

impl<M: Clone + Send + DeserializeOwned + 'static> Engine<M> for Task<M> {
    type Conn = (PubSub, MultiplexedConnection);
    const WHAT: &'static str = "Redis";

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
        let (pubsub, conn) = self.connect_pair().await?;
        *lock(&self.link.conn) = Some(CommandConn::Single(conn.clone()));
        Ok((pubsub, conn))
    }

    async fn session(&mut self, (pubsub, conn): Self::Conn, started: &mut Started) -> End {
        self.session_on(pubsub, conn, started).await
    }
}

/// The back-off after a failed attempt: doubled, at most `reconnect_max`.
pub(super) fn next_backoff(backoff: Duration, config: &RedisBusConfig) -> Duration {
    backoff.saturating_mul(2).min(config.reconnect_max)
}

/// The back-off before reconnecting after a session that `lasted`: back to
/// `reconnect_min` only if the session lasted at least `reconnect_max` (a
/// healthy connection that broke); otherwise the current one, still growing
/// (a Redis that accepts connections but refuses commands, such as `-LOADING`
/// or an ACL `NOPERM`, is not retried in a hot loop).
pub(super) fn backoff_after_session(
    backoff: Duration,
    lasted: Duration,
    config: &RedisBusConfig,
) -> Duration {
    if lasted >= config.reconnect_max {
        config.reconnect_min
    } else {
        backoff
    }
}

/// Hands one checked message from Redis to this node's subscribers of its
/// topic.
pub(super) async fn self_deliver<M: Clone + Send + DeserializeOwned + 'static>(
    bus: &Weak<BusInner<M>>,
    link: &Link,
    config: &RedisBusConfig,
    msg: &::redis::Msg,
) {
    let Some(topic) = msg.get_channel_name().strip_prefix(link.prefix.as_str()) else {
        return;
    };
    let Some(body) = msg.get_payload_bytes().get(wire::HEADER_LEN..) else {
        return;
    };
    let msgs: Vec<M> = match serde_json::from_slice(body) {
        Ok(msgs) => msgs,
        Err(_) => {
            dropped::count(DropReason::Malformed, topic);
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
}
