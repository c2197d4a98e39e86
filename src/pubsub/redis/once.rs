//! [`RedisOnce`]: keys with an expiry on the bus's Redis server or Redis
//! Cluster (set-once claims, revisioned records), run on the bus's Redis
//! thread.

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
        let mut set = ::redis::cmd("SET");
        set.arg(self.key(name))
            .arg(1)
            .arg("NX")
            .arg("PXAT")
            .arg(expires_at_ms);
        let set: Option<String> = self.run("SET", set).await?;
        Ok(set.is_some())
    }

    /// This node's id on the bus (random per process, 16 hex digits): what
    /// its messages carry, and a name for what it owns in Redis.
    pub fn node(&self) -> String {
        format!("{:016x}", self.link.node)
    }

    /// Stores `value` under `<prefix><name>` until `expires_at_ms` (by
    /// Redis's clock), unless the key holds a newer revision: the value's
    /// first bytes must be `{"rev":N,` and it is stored only when `N` is
    /// greater than the stored one's (so concurrent writers never leave an
    /// older value last). Returns whether it was stored. Fails as
    /// [`RedisOnce::claim`] does.
    pub async fn put_newer(
        &self,
        name: &str,
        rev: u64,
        value: Vec<u8>,
        expires_at_ms: u64,
    ) -> Result<bool, BusError> {
        const SCRIPT: &str = r#"
local cur = redis.call('GET', KEYS[1])
if cur then
  local rev = tonumber(string.match(cur, '^{"rev":(%d+),'))
  if rev and rev >= tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[3])
return 1
"#;
        let mut eval = ::redis::cmd("EVAL");
        eval.arg(SCRIPT)
            .arg(1)
            .arg(self.key(name))
            .arg(value)
            .arg(rev)
            .arg(expires_at_ms);
        let stored: i64 = self.run("EVAL", eval).await?;
        Ok(stored == 1)
    }

    /// Sets `<prefix><name>` to `value` until `expires_at_ms`. Fails as
    /// [`RedisOnce::claim`] does.
    pub async fn put(&self, name: &str, value: &[u8], expires_at_ms: u64) -> Result<(), BusError> {
        let mut set = ::redis::cmd("SET");
        set.arg(self.key(name))
            .arg(value)
            .arg("PXAT")
            .arg(expires_at_ms);
        let _: Option<String> = self.run("SET", set).await?;
        Ok(())
    }

    /// The value of `<prefix><name>`, `None` when unset or expired. Fails as
    /// [`RedisOnce::claim`] does.
    pub async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, BusError> {
        let mut get = ::redis::cmd("GET");
        get.arg(self.key(name));
        self.run("GET", get).await
    }

    /// `<prefix><name>`: the key `name` stands for (the bus's
    /// [`RedisBusConfig::prefix`](super::RedisBusConfig::prefix), so
    /// deployments sharing one Redis stay apart).
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.link.prefix)
    }

    /// Runs `cmd` (its keys from [`RedisOnce::key`]) on the bus's Redis
    /// thread; fails as [`RedisOnce::claim`] does. On a Redis Cluster the
    /// command goes to the master of its first key's slot: a command or
    /// script naming several keys must give them one hash tag
    /// (`key("{x}")`, `key("{x}:next")`), or Redis refuses it (`CROSSSLOT`).
    /// The notes demo keeps its notes this way (a hash and a counter).
    pub async fn query<T>(&self, cmd: ::redis::Cmd) -> Result<T, BusError>
    where
        T: ::redis::FromRedisValue + Send + 'static,
    {
        self.run("command", cmd).await
    }

    /// The largest encoded publish or burst the bus carries
    /// ([`RedisBusConfig::max_payload`]).
    ///
    /// [`RedisBusConfig::max_payload`]: super::RedisBusConfig::max_payload
    pub fn max_payload(&self) -> usize {
        self.link.max_payload
    }

    /// Runs `cmd` as [`RedisOnce::query`] does, but without one of the
    /// `max_claims` permits: for a caller that is its own bound (one command
    /// at a time, e.g. a node renewing its task lease), so that client
    /// traffic holding every permit cannot make it fail.
    pub(crate) async fn query_reserved<T>(&self, cmd: ::redis::Cmd) -> Result<T, BusError>
    where
        T: ::redis::FromRedisValue + Send + 'static,
    {
        self.send("command", cmd, None).await
    }

    /// Runs `cmd` on the bus's Redis thread within the command timeout,
    /// holding one of the `max_claims` permits.
    async fn run<T>(&self, what: &str, cmd: ::redis::Cmd) -> Result<T, BusError>
    where
        T: ::redis::FromRedisValue + Send + 'static,
    {
        let link = &self.link;
        if !link.connected.load(Ordering::Acquire) {
            return Err(link.unavailable());
        }
        let permit = link
            .claims
            .clone()
            .try_acquire_owned()
            .map_err(|_| BusError::Busy {
                capacity: link.max_claims,
            })?;
        self.send(what, cmd, Some(permit)).await
    }

    /// Runs `cmd` on the bus's Redis thread within the command timeout,
    /// holding `permit` (if any) until it is answered.
    async fn send<T>(
        &self,
        what: &str,
        cmd: ::redis::Cmd,
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<T, BusError>
    where
        T: ::redis::FromRedisValue + Send + 'static,
    {
        let link = &self.link;
        if !link.connected.load(Ordering::Acquire) {
            return Err(link.unavailable());
        }
        let conn = lock(&link.conn).clone();
        let (Some(mut conn), Some(runtime)) = (conn, link.runtime.get()) else {
            return Err(link.unavailable());
        };
        let timeout = link.command_timeout;
        let task = runtime.spawn(async move {
            let _permit = permit;
            tokio::time::timeout(timeout, cmd.query_async::<T>(&mut conn)).await
        });
        match task.await {
            Ok(Ok(Ok(answer))) => Ok(answer),
            Ok(Ok(Err(e))) => Err(link.unavailable_because(format!("{what} failed: {e}"))),
            Ok(Err(_)) => {
                Err(link.unavailable_because(format!("{what} unanswered in {timeout:?}")))
            }
            Err(_) => Err(link.unavailable_because("the bus was dropped".into())),
        }
    }

    /// Takes every permit, as client traffic waiting on Redis would (tests).
    #[cfg(test)]
    pub(crate) fn hold_every_permit(&self) -> tokio::sync::OwnedSemaphorePermit {
        let n = u32::try_from(self.link.max_claims).unwrap_or(u32::MAX);
        self.link
            .claims
            .clone()
            .try_acquire_many_owned(n)
            .expect("every permit free")
    }
}
