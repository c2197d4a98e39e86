//! [`RedisOnce`]: set-once keys (`SET NX`) on the bus's Redis server, run on
//! the bus's Redis thread.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::link::Link;
use crate::pubsub::BusError;
use crate::pubsub::local::lock;

/// Set-once keys with an expiry on a Redis bus's server, sharing the bus's
/// command connection ([`Bus::once`]). Cheap to clone; it does not keep the
/// bus alive (once the bus is dropped, every claim fails).
///
/// Commands run on the bus's Redis thread: a claim never blocks the caller's
/// thread, works from any async runtime, and is answered within
/// [`RedisBusConfig::command_timeout`].
///
/// [`Bus::once`]: crate::pubsub::Bus::once
/// [`RedisBusConfig::command_timeout`]: super::RedisBusConfig::command_timeout
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
    /// Claims through the command connection of `link`.
    pub(super) fn new(link: Arc<Link>) -> Self {
        RedisOnce { link }
    }

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
    ///
    /// [`RedisBusConfig::command_timeout`]: super::RedisBusConfig::command_timeout
    /// [`RedisBusConfig::max_claims`]: super::RedisBusConfig::max_claims
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
