//! How a Redis bus connects, and its bounds: [`RedisBusConfig`], checked
//! before connecting, and [`display_url`], which keeps passwords out of logs.

use std::time::Duration;

use super::keys::BusKeys;
use super::wire::HEADER_LEN;
use crate::pubsub::BusError;

/// What to do when Redis cannot be reached when the bus starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartMode {
    /// Fail: [`Bus::redis`] returns [`BusError::Unavailable`] (the default;
    /// `genmcp serve` exits non-zero).
    ///
    /// [`Bus::redis`]: crate::pubsub::Bus::redis
    #[default]
    Require,
    /// Start disconnected ([`BusHealth::Disconnected`], logged), serving local
    /// subscribers and reconnecting in the background.
    ///
    /// [`BusHealth::Disconnected`]: crate::pubsub::BusHealth::Disconnected
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
    /// `redis://[user:password@]HOST:PORT[/DB]`, or a Redis Cluster's seed
    /// nodes, `redis+cluster://[user:password@]HOST:PORT[,HOST:PORT...]`
    /// (sharded pub/sub; see the [module docs](super)).
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
    /// burst, as JSON, with its 58-byte header) sent to or accepted from
    /// Redis (default 1 MiB). A larger publish reaches this node's
    /// subscribers only, and fails with [`BusError::TooLarge`]; a larger
    /// message from Redis is dropped (counted as `oversized`).
    pub max_payload: usize,
    /// The keys authenticating every message between the nodes (default
    /// none: messages are not authenticated, and the bus says so in the log
    /// when it starts). Set them with [`RedisBusConfig::key`] from the nodes'
    /// shared sealing key, or [`RedisBusConfig::keys`] from a key set (a
    /// live [`BusKeys`]: the current key tags, any key of the set is
    /// accepted): a message without a valid tag is dropped (`forged`), one
    /// sent again is dropped (`replayed`). See [`super::wire`].
    pub key: Option<BusKeys>,
    /// Messages from Redis checked and waiting for delivery to this node's
    /// streams (default 1,024). One more means the node cannot keep up: it is
    /// dropped (`backlog`), the connection is treated as lost (the streams
    /// complete, the node reconnects).
    pub max_inbound: usize,
    /// With a key: how far a message's publish time may be from this node's
    /// clock (default 60 s, the clock margin the nodes already need for
    /// `requestState`). Older (or later) messages are dropped as `replayed`.
    pub replay_window: std::time::Duration,
    /// With a key: how many publishing nodes' last sequence numbers are kept
    /// (default 4,096). Nodes not heard from for twice `replay_window` are
    /// forgotten first.
    pub max_nodes: usize,
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
    /// at most one such wait; meanwhile messages from Redis wait in a queue
    /// of at most [`RedisBusConfig::max_inbound`].
    pub stall: Duration,
    /// [`RedisOnce::claim`]s waiting for Redis at once (default 1,024); one
    /// more fails with [`BusError::Busy`].
    ///
    /// [`RedisOnce::claim`]: super::RedisOnce::claim
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
            .field("key", &self.key)
            .field("max_inbound", &self.max_inbound)
            .field("replay_window", &self.replay_window)
            .field("max_nodes", &self.max_nodes)
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
            key: None,
            max_inbound: 1024,
            replay_window: Duration::from_secs(60),
            max_nodes: 4096,
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

    /// Authenticates the bus's messages with a key derived from `secret`,
    /// the sealing key every node shares ([`super::wire::BusKey::derive`]).
    pub fn key(mut self, secret: &[u8; 32]) -> Self {
        self.key = Some(BusKeys::new(secret));
        self
    }

    /// Authenticates the bus's messages with a key set: tagged with its
    /// current key's bus key, accepted under any of its keys; a later
    /// [`BusKeys::set`] on a clone applies at once (a key rotation without a
    /// reconnection).
    pub fn keys(mut self, keys: BusKeys) -> Self {
        self.key = Some(keys);
        self
    }

    /// Sets the channel prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The bounds that cannot work: [`BusError::Config`] naming the field.
    pub(super) fn validate(&self) -> Result<(), BusError> {
        let bad = |what: &str| Err(BusError::Config(what.into()));
        if self.publish_queue == 0 {
            return bad("publish_queue must be at least 1");
        }
        if self.max_claims == 0 {
            return bad("max_claims must be at least 1");
        }
        if self.max_payload <= HEADER_LEN {
            return bad("max_payload must be larger than 58 bytes");
        }
        if self.max_inbound == 0 {
            return bad("max_inbound must be at least 1");
        }
        if self.max_nodes == 0 {
            return bad("max_nodes must be at least 1");
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

/// `url` without its credentials, for logs, errors and `Debug` output: the
/// `user:password@` of `redis://`/`rediss://` becomes `***@`, and the `pass`
/// (or `password`) query parameter of `redis+unix://`/`unix://` becomes
/// `pass=***`.
///
/// ```
/// use genmcp::pubsub::redis::display_url;
/// assert_eq!(display_url("redis://u:pw@h:6379"), "redis://***@h:6379");
/// assert_eq!(
///     display_url("redis+unix:///run/redis.sock?db=1&pass=pw"),
///     "redis+unix:///run/redis.sock?db=1&pass=***"
/// );
/// ```
pub fn display_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut out = match (base.find("://"), base.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &base[..scheme], &base[at + 1..])
        }
        _ => base.to_owned(),
    };
    if let Some(query) = query {
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((k, _))
                    if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
                {
                    out.push_str(k);
                    out.push_str("=***");
                }
                _ => out.push_str(pair),
            }
        }
    }
    out
}

/// The seed nodes of a Redis Cluster URL,
/// `redis+cluster://[user:password@]HOST:PORT[,HOST:PORT...]`, each as a
/// `redis://[user:password@]HOST:PORT` URL; `None` for any other URL.
pub(super) fn cluster_seeds(url: &str) -> Option<Result<Vec<String>, BusError>> {
    let rest = url.strip_prefix("redis+cluster://")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (auth, hosts) = match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    };
    let mut seeds = Vec::new();
    for host in hosts.split(',') {
        let well_formed = host
            .rsplit_once(':')
            .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok());
        if !well_formed {
            return Some(Err(BusError::Config(format!(
                "bad Redis Cluster URL {}: each seed node is HOST:PORT",
                display_url(url)
            ))));
        }
        seeds.push(format!("redis://{auth}{host}"));
    }
    Some(Ok(seeds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::Bus;

    #[tokio::test]
    async fn impossible_bounds_are_refused_before_connecting() {
        let mut configs = vec![];
        for set in [
            (|c: &mut RedisBusConfig| c.ping_interval = Duration::ZERO) as fn(&mut RedisBusConfig),
            |c| c.reconnect_min = Duration::ZERO,
            |c| c.publish_queue = 0,
            |c| c.max_claims = 0,
            |c| c.max_payload = 0,
            |c| c.max_inbound = 0,
            |c| c.max_nodes = 0,
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
    fn cluster_urls_name_their_seed_nodes() {
        let seeds = cluster_seeds("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001/");
        assert_eq!(
            seeds.and_then(Result::ok),
            Some(vec![
                "redis://u:p@10.0.0.1:7000".to_owned(),
                "redis://u:p@10.0.0.2:7001".to_owned()
            ])
        );
        assert!(cluster_seeds("redis://h:1").is_none());
        for bad in [
            "redis+cluster://",
            "redis+cluster://h:1,",
            "redis+cluster://h:x",
        ] {
            assert!(matches!(cluster_seeds(bad), Some(Err(_))), "{bad}");
        }
        assert_eq!(
            display_url("redis+cluster://u:pw@h:1,h:2"),
            "redis+cluster://***@h:1,h:2"
        );
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
        assert_eq!(
            display_url("redis+unix:///run/r.sock?user=u&pass=s3cret&db=2"),
            "redis+unix:///run/r.sock?user=u&pass=***&db=2"
        );
        assert_eq!(
            display_url("unix:///run/r.sock?password=s3cret"),
            "unix:///run/r.sock?password=***"
        );
        let config = RedisBusConfig::new("redis+unix:///run/r.sock?pass=s3cret").key(&[3; 32]);
        let debug = format!("{config:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("BusKeys(*** x1)"), "{debug}");
    }
}
