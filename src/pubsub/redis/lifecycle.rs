//! The reconnecting life of a Redis engine, one server or a cluster alike:
//! connect, run a session until it ends, and when it was lost complete the
//! streams (not the durable subscriptions: the next session subscribes them
//! again), back off and connect again, for as long as the bus lives.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::link::{Link, Outgoing};
use super::task::{End, backoff_after_session, next_backoff};
use super::{RedisBusConfig, StartMode};
use crate::pubsub::{BusError, BusInner};

/// Answered once the first connection is made or has failed.
pub(super) type Started = Option<oneshot::Sender<Result<(), BusError>>>;

/// What [`run`] needs of an engine.
pub(super) trait Engine<M: Clone + Send + 'static> {
    /// What one session runs on.
    type Conn;
    /// What the log calls the other side ("Redis", "the Redis Cluster").
    const WHAT: &'static str;
    /// What the bus and the engine share.
    fn link(&self) -> &Arc<Link>;
    /// The bus's settings.
    fn config(&self) -> &RedisBusConfig;
    /// The bus (gone: the engine ends).
    fn bus(&self) -> &Weak<BusInner<M>>;
    /// The publishes on their way to Redis.
    fn publishes(&mut self) -> &mut mpsc::Receiver<Outgoing>;
    /// Connects within the connect timeout and lends the command connection
    /// to [`super::RedisOnce`].
    async fn connect(&mut self) -> Result<Self::Conn, String>;
    /// One life of the connection.
    async fn session(&mut self, conn: Self::Conn, started: &mut Started) -> End;
    /// What the engine forgets of a lost session, before its streams are
    /// completed.
    fn lost(&mut self) {}
}

/// Runs `engine` on a thread of its own (`genmcp-redis`, a current-thread
/// tokio runtime, where [`super::RedisOnce`] commands run too), so a slow or
/// hung Redis never blocks a worker thread.
pub(super) fn spawn<M, E>(
    engine: E,
    started: oneshot::Sender<Result<(), BusError>>,
) -> Result<(), BusError>
where
    M: Clone + Send + 'static,
    E: Engine<M> + Send + 'static,
{
    std::thread::Builder::new()
        .name("genmcp-redis".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => {
                    let _ = engine.link().runtime.set(rt.handle().clone());
                    rt.block_on(run(engine, started))
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

/// Runs `engine` until its bus is dropped (or, with [`StartMode::Require`],
/// until the first connection fails).
async fn run<M, E>(mut engine: E, started: oneshot::Sender<Result<(), BusError>>)
where
    M: Clone + Send + 'static,
    E: Engine<M>,
{
    let mut started = Some(started);
    let mut backoff = engine.config().reconnect_min;
    loop {
        if engine.bus().strong_count() == 0 {
            return;
        }
        let reason = match engine.connect().await {
            Ok(conn) => {
                let began = std::time::Instant::now();
                match engine.session(conn, &mut started).await {
                    End::Shutdown => {
                        // Claims made through a RedisOnce fail from now on.
                        engine.link().set_lost("the bus was dropped".into());
                        return;
                    }
                    End::Lost(reason) => {
                        engine.link().set_lost(reason.clone());
                        engine.lost();
                        // Publishes queued before the loss are dropped (at most once).
                        while engine.publishes().try_recv().is_ok() {}
                        let ended = engine
                            .bus()
                            .upgrade()
                            .map(|bus| bus.local.complete_all())
                            .unwrap_or(0);
                        tracing::warn!(
                            url = %engine.link().url, %reason, streams_completed = ended,
                            "event bus lost {}: its streams were completed; reconnecting",
                            E::WHAT
                        );
                        backoff = backoff_after_session(backoff, began.elapsed(), engine.config());
                        reason
                    }
                }
            }
            Err(reason) => {
                engine.link().set_lost(reason.clone());
                reason
            }
        };
        if let Some(s) = started.take() {
            if engine.config().start == StartMode::Require {
                let _ = s.send(Err(engine.link().unavailable()));
                return;
            }
            tracing::warn!(
                url = %engine.link().url, %reason,
                "event bus starting DEGRADED: {} unreachable, events stay on this node until it connects",
                E::WHAT
            );
            let _ = s.send(Ok(()));
        } else {
            tracing::debug!(url = %engine.link().url, %reason, retry_in = ?backoff, "event bus: {} still unreachable", E::WHAT);
        }
        if !pause(&mut engine, backoff).await {
            return;
        }
        backoff = next_backoff(backoff, engine.config());
    }
}

/// Waits `delay`, discarding stale publishes; false if the bus was dropped.
async fn pause<M, E>(engine: &mut E, delay: Duration) -> bool
where
    M: Clone + Send + 'static,
    E: Engine<M>,
{
    let sleep = tokio::time::sleep(delay);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            _ = &mut sleep => return engine.bus().strong_count() > 0,
            item = engine.publishes().recv() => if item.is_none() { return false },
        }
    }
}
