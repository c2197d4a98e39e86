//! Connections to the masters: one shard's RESP3 connection, and the attempt
//! to reach the masters lost.

use std::collections::HashSet;

use ::redis::aio::MultiplexedConnection;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{AsyncConnectionConfig, ConnectionAddr, ProtocolVersion, PushInfo};
use tokio::sync::mpsc;

use super::super::RedisBusConfig;
use super::slot_map::{Master, slot_map};

/// A shard connection and its push messages (sharded messages,
/// `sunsubscribe`s, the disconnection).
pub(super) type ShardConn = (MultiplexedConnection, mpsc::UnboundedReceiver<PushInfo>);

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
