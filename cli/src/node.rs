//! What makes a `genmcp serve` process one node of several: the event bus it
//! publishes on and the key it seals tokens with. `genmcp serve --bus URL
//! --key-file PATH` fills a [`NodeConfig`]; a program embedding genmcp can use
//! it the same way, or call [`Bus::redis`] and
//! [`genmcp::suite::SuiteBuilder::secret`] directly.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use genmcp_cli::node::NodeConfig;
//! let mut node = NodeConfig::default();
//! node.bus = Some("redis://127.0.0.1:6380".into());
//! node.key_file = Some("/etc/genmcp/key".into());
//! let secret = node.secret()?;
//! let bus = node.bus(secret.as_ref()).await?;
//! let (suite, _bus) = genmcp_cli::demo::suite_with(bus, secret);
//! # Ok(()) }
//! ```

use std::path::PathBuf;

use serde::Serialize;
use serde::de::DeserializeOwned;

use genmcp::pubsub::redis::{BusKeys, display_url};
use genmcp::pubsub::{Bus, BusError, BusHealth, RedisBusConfig, StartMode};
use genmcp::suite::secret::{self, KEY_ENV, SecretError};
use genmcp::suite::{KeySet, KeySetError};

/// A node's bus and sealing key. Every field has a default: an embedded bus
/// and a random key, i.e. a single node.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct NodeConfig {
    /// `--bus` (or `GENMCP_BUS`): the Redis server shared by the nodes
    /// (`redis://[user:password@]HOST:PORT`), or a Redis Cluster
    /// (`redis+cluster://[user:password@]HOST:PORT,HOST:PORT,...`, seed
    /// nodes: sharded pub/sub, see `docs/bus.md`); `None` (default): an embedded
    /// bus. `{:?}` of a `NodeConfig` hides the password. The nodes
    /// also record spent `requestState`s there
    /// ([`genmcp::suite::shared_spent::RedisSpentRecord::for_bus`]).
    pub bus: Option<String>,
    /// `--bus-degraded`: start even when Redis cannot be reached (disconnected,
    /// logged, reconnecting) instead of failing (default false).
    pub degraded: bool,
    /// `--key-file`: the file holding the sealing key (64 hex digits, see
    /// [`genmcp::suite::secret`]). Default none: then the environment variable
    /// [`KEY_ENV`] (`GENMCP_KEY`), then a random key of this process.
    pub key_file: Option<PathBuf>,
    /// Delete `key_file` once it is read (default false): `genmcp serve` hands
    /// `GENMCP_KEY` to itself this way when it re-executes without the
    /// variable in its environment.
    pub remove_key_file: bool,
}

/// The bus URL's password stays out of `{:?}` (see
/// [`genmcp::pubsub::redis::display_url`]).
impl std::fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeConfig")
            .field("bus", &self.bus.as_deref().map(display_url))
            .field("degraded", &self.degraded)
            .field("key_file", &self.key_file)
            .field("remove_key_file", &self.remove_key_file)
            .finish()
    }
}

impl NodeConfig {
    /// The sealing key (the current key of [`NodeConfig::keys`]).
    pub fn secret(&self) -> Result<Option<[u8; 32]>, KeySetError> {
        Ok(self.keys()?.map(|k| k.current_key()))
    }

    /// The sealing keys: from `key_file` (one key per line, the current
    /// first; see [`genmcp::suite::KeySet`]), else from `GENMCP_KEY` (the same
    /// format), else `None` (a random key; logged, since tokens sealed here then
    /// open nowhere else).
    pub fn keys(&self) -> Result<Option<KeySet>, KeySetError> {
        if let Some(path) = &self.key_file {
            let key = KeySet::load_file(path);
            if self.remove_key_file {
                if let Err(e) = std::fs::remove_file(path) {
                    tracing::warn!(file = %path.display(), error = %e, "cannot delete the key file");
                }
                let key = key?;
                tracing::info!(
                    var = KEY_ENV,
                    current = key.current_id(),
                    keys = key.len(),
                    "sealing key loaded (and removed from the environment): multi-node sealing on"
                );
                return Ok(Some(key));
            }
            let key = key?;
            tracing::info!(file = %path.display(), current = key.current_id(), keys = key.len(),
                "sealing keys loaded: multi-node sealing on");
            return Ok(Some(key));
        }
        match secret::secret_from_env(KEY_ENV) {
            Some(_) => {
                let text = std::env::var(KEY_ENV).unwrap_or_default();
                let key = KeySet::parse(&text).map_err(|e| match e {
                    KeySetError::Key(SecretError::Format { found, .. }) => {
                        KeySetError::Key(SecretError::Format {
                            origin: KEY_ENV.to_owned(),
                            found,
                        })
                    }
                    other => other,
                })?;
                tracing::info!(
                    var = KEY_ENV,
                    "sealing key loaded: multi-node sealing on (the variable stays in this \
                     process's environment, where child processes inherit it: prefer --key-file)"
                );
                Ok(Some(key))
            }
            None => {
                tracing::info!(
                    "no sealing key configured (--key-file or {KEY_ENV}): this process uses a \
                     random key, multi-node sealing is OFF (requestState and cursors only \
                     open on this node)"
                );
                Ok(None)
            }
        }
    }

    /// The event bus: embedded, or connected to `bus` (waiting for the first
    /// connection; see [`StartMode`] for `degraded`), its messages
    /// authenticated with a key derived from `secret` (the sealing key of
    /// [`NodeConfig::secret`]; without one they are not, and the log says so).
    pub async fn bus<M>(&self, secret: Option<&[u8; 32]>) -> Result<Bus<M>, BusError>
    where
        M: Clone + Send + Serialize + DeserializeOwned + 'static,
    {
        self.bus_with_keys(secret.map(BusKeys::new)).await
    }

    /// [`NodeConfig::bus`] authenticated with a key set (the bus keys of
    /// [`NodeConfig::keys`], [`KeySet::bus_keys`]): messages are tagged with
    /// the current key's bus key and accepted under any key of the set; keep
    /// a clone of `keys` to follow a reload ([`KeySet::update_bus_keys`]).
    pub async fn bus_with_keys<M>(&self, keys: Option<BusKeys>) -> Result<Bus<M>, BusError>
    where
        M: Clone + Send + Serialize + DeserializeOwned + 'static,
    {
        let Some(url) = &self.bus else {
            if keys.is_some() {
                tracing::info!(
                    "a sealing key without --bus: spent requestStates are recorded per \
                     node (in memory), so a state sealed here may be honoured once on \
                     each node sharing the key; give the nodes a --bus to share the record"
                );
            }
            return Ok(Bus::new());
        };
        let start = if self.degraded {
            StartMode::Degraded
        } else {
            StartMode::Require
        };
        let mut config = RedisBusConfig::new(url.clone()).start(start);
        if let Some(keys) = keys {
            config = config.keys(keys);
        }
        let bus = Bus::redis(config).await?;
        if bus.health() == BusHealth::Disconnected {
            tracing::warn!(
                "serving DEGRADED: the event bus is not connected; events stay on this node"
            );
        }
        Ok(bus)
    }
}
