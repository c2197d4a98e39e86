//! Connections to the masters: one shard's RESP3 connection, and the attempt
//! to reach the masters lost.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ::redis::aio::MultiplexedConnection;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{AsyncConnectionConfig, ConnectionAddr, ProtocolVersion, PushInfo, PushKind};
use tokio::sync::mpsc;

use super::super::RedisBusConfig;
use super::super::dropped::{self, DropReason};
use super::slot_map::{Master, slot_map};

/// A shard connection and its push messages (sharded messages,
/// `sunsubscribe`s, the disconnection).
pub(super) type ShardConn = (MultiplexedConnection, Pushes);

/// A shard connection's push messages, at most
/// [`RedisBusConfig::max_inbound`] waiting (the shard's session takes them as
/// they come). Past that the connection drops the newest, counted `backlog`,
/// and the session ends as lost at its next read (it reconnects): the node
/// does not keep up, as on one server.
pub(super) struct Pushes {
    rx: mpsc::Receiver<PushInfo>,
    overflowed: Arc<AtomicBool>,
    capacity: usize,
}

impl Pushes {
    /// The next push message, or why the connection is lost.
    pub(super) async fn recv(&mut self) -> Result<PushInfo, String> {
        let push = self.rx.recv().await;
        if self.overflowed.load(Ordering::Acquire) {
            return Err(format!(
                "{} push messages from Redis already waited (max_inbound): this node cannot keep up",
                self.capacity
            ));
        }
        push.ok_or_else(|| "connection closed".to_owned())
    }
}

/// Whether the shard's session reads pushes of `kind`: sharded messages,
/// `sunsubscribe`s (its own, or the server's when a slot moved) and the
/// disconnection. The connection also copies each `ssubscribe`
/// confirmation there (the command's reply already says it): those are
/// left out, so that subscribing many channels at once cannot fill the
/// queue.
fn wanted(kind: &PushKind) -> bool {
    matches!(
        kind,
        PushKind::SMessage | PushKind::SUnsubscribe | PushKind::Disconnection
    )
}

/// A bounded queue of push messages and the sender the connection uses.
fn pushes(capacity: usize) -> (impl ::redis::aio::AsyncPushSender, Pushes) {
    let capacity = capacity.max(1);
    let (tx, rx) = mpsc::channel(capacity);
    let overflowed = Arc::new(AtomicBool::new(false));
    let flag = overflowed.clone();
    let sender = move |info: PushInfo| {
        if !wanted(&info.kind) {
            return Ok(());
        }
        tx.try_send(info).map_err(|e| {
            if matches!(e, mpsc::error::TrySendError::Full(_)) {
                flag.store(true, Ordering::Release);
                dropped::count(DropReason::Backlog, "");
            }
        })
    };
    let pushes = Pushes {
        rx,
        overflowed,
        capacity,
    };
    (sender, pushes)
}

/// A RESP3 connection to `master` with the settings of `base` (credentials,
/// database).
pub(super) async fn connect_shard(
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
    let (sender, rx) = pushes(config.max_inbound);
    let settings = AsyncConnectionConfig::new()
        .set_push_sender(sender)
        .set_connection_timeout(Some(config.connect_timeout))
        // A backstop: each command is bounded by `command_timeout` where it is sent.
        .set_response_timeout(Some(config.command_timeout.saturating_mul(2)));
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
pub(super) type Reached = (Vec<Master>, Vec<(Master, Result<ShardConn, String>)>);

/// Reads the slot map again and connects to the masters not in `running`,
/// all at once. Runs beside the shards' sessions (never holding them up).
pub(super) async fn reach(
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

#[cfg(test)]
mod tests {
    use ::redis::PushKind;
    use ::redis::aio::AsyncPushSender as _;

    use super::*;

    fn message(n: usize) -> PushInfo {
        PushInfo {
            kind: PushKind::SMessage,
            data: vec![::redis::Value::Int(n as i64)],
        }
    }

    #[tokio::test]
    async fn push_messages_past_the_bound_are_dropped_and_end_the_session() {
        let (sender, mut pushes) = pushes(2);
        let backlog_before = dropped::dropped_messages()[4].1;
        assert!(sender.send(message(1)).is_ok());
        assert!(sender.send(message(2)).is_ok());
        assert!(sender.send(message(3)).is_err(), "a third push waits");
        assert!(dropped::dropped_messages()[4].1 > backlog_before);
        let lost = pushes.recv().await.expect_err("the session ends");
        assert!(lost.contains("max_inbound"), "{lost}");
    }

    #[tokio::test]
    async fn push_messages_within_the_bound_come_in_order() {
        let (sender, mut pushes) = pushes(2);
        for n in 1..=5 {
            assert!(sender.send(message(n)).is_ok());
            let push = pushes.recv().await.expect("a push");
            assert_eq!(push.data, vec![::redis::Value::Int(n as i64)]);
        }
        drop(sender);
        assert_eq!(
            pushes.recv().await.expect_err("closed"),
            "connection closed"
        );
    }
}
