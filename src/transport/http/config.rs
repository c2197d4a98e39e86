//! [`HttpConfig`]: every bound and setting of the HTTP transport, mounted or
//! served on its own.

use std::sync::Arc;
use std::time::Duration;

use actix_web::HttpRequest;

use super::auth::AuthConfig;
use super::rate::RateLimit;
use crate::admin::AdminConfig;
use crate::mux::Assigns;
use crate::runtime::{Limits, PrincipalOf};

/// Default [`HttpConfig::ipv6_prefix`]: IPv6 clients in one /64 count as one
/// address.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// Builds the [`Assigns`] of a request from its HTTP head (e.g. an authenticated
/// principal from `Authorization`). Returning `Err(message)` answers 401. It runs
/// before the body is read, so an unauthenticated client cannot make the server
/// read and parse a body.
///
/// With [`HttpConfig::auth`] set it runs after the authenticator accepted the
/// token, and finds the [`crate::mux::Principal`] in the request's extensions
/// (`req.extensions().get::<Principal>()`); the principal is put into the
/// assigns it returns in any case.
///
/// When genmcp is mounted in your own `App`, your middleware runs first, so the
/// hook can read what it left in the request's extensions
/// (`req.extensions().get::<User>()`).
pub type AssignsHook = Arc<dyn Fn(&HttpRequest) -> Result<Assigns, String> + Send + Sync>;

/// Configuration of the HTTP transport. Every bound has a default.
///
/// When the endpoint is mounted in your own `App` ([`super::Endpoint`]), `host`,
/// `port` and `workers` are not used (your `HttpServer` binds and runs), and
/// `path` is only the default of [`super::Endpoint::service`]; every other
/// field applies the same way.
///
/// ```
/// let mut config = genmcp::http::HttpConfig::default();
/// config.max_body = 1024 * 1024;
/// config.allowed_hosts.push("mcp.example.com".into());
/// assert_eq!(config.path, "/mcp");
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// Address to bind (default `127.0.0.1`); `start`/`serve` only.
    pub host: String,
    /// Port to bind (default 8080; 0 picks a free port); `start`/`serve` only.
    pub port: u16,
    /// The MCP endpoint path (default `/mcp`); relative to the enclosing
    /// `web::scope` when mounted.
    pub path: String,
    /// SSE keep-alive comment interval on idle streams (default 15 s). It is also
    /// how a dead client is noticed: within about two intervals.
    pub keep_alive: Duration,
    /// Largest request body (default 4 MiB); larger is 413.
    pub max_body: usize,
    /// How long reading a request body may take (default 10 s), from the end of
    /// the head; past it the request is answered 408 and the connection closed
    /// (a slow-drip body cannot hold a connection and a buffer).
    pub body_timeout: Duration,
    /// How long a unary request's handler may run (default 60 s); past it the
    /// handler's future is dropped and the client gets `-32603` "Request timed
    /// out".
    pub request_timeout: Duration,
    /// HTTP requests in flight at once (default 1,024): from the head until a
    /// unary request is answered, or until a listen stream is set up (an open
    /// stream then counts against `Limits::max_streams` instead). Past it: 503
    /// with `Retry-After` and a `-32603` body, without reading the body.
    pub max_in_flight: usize,
    /// Hostnames accepted in `Host` and `Origin` (default loopback only:
    /// `127.0.0.1`, `localhost`, `::1`); `"*"` accepts any. Others get 403.
    pub allowed_hosts: Vec<String>,
    /// Worker threads (default: the number of CPUs); `start`/`serve` only.
    pub workers: usize,
    /// How long a graceful shutdown waits for streams to finish (default 5 s):
    /// the timeout of [`super::DrainHandle::drain_and_stop`].
    pub drain_timeout: Duration,
    /// Runtime limits.
    pub limits: Limits,
    /// Optional hook that attaches application data to each request.
    pub assigns: Option<AssignsHook>,
    /// Bearer-token authentication as an OAuth resource server, and the
    /// Protected Resource Metadata (default `None`: no authentication). See
    /// [`super::auth`].
    pub auth: Option<AuthConfig>,
    /// Requests per second per principal, or per client address without one
    /// (default `None`: no rate limit). See [`RateLimit`].
    pub rate_limit: Option<RateLimit>,
    /// Addresses of reverse proxies whose `X-Forwarded-For`,
    /// `X-Forwarded-Proto` and `X-Forwarded-Host` are believed (default: none,
    /// so those headers are ignored). From such a peer the client address
    /// (limits per address, [`crate::mux::ClientAddr`]) is the nearest
    /// forwarded hop that is not a trusted proxy, and the default `resource`
    /// of the Protected Resource Metadata uses the forwarded scheme and host.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// How IPv6 clients are grouped by limits per client address: by this
    /// prefix length (default 64, the block one host usually has to pick
    /// addresses from; 128 counts each address). IPv4 clients count per
    /// address.
    pub ipv6_prefix: u8,
    /// The 2025-era compatibility path (`initialize`, sessions, the GET
    /// stream; see `docs/compat-2025.md`); `None` serves 2026-07-28 only.
    pub compat: Option<CompatConfig>,
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`) that
    /// [`super::start`] and [`super::serve`] run beside the MCP port (default
    /// `None`: off). Not used when mounted (see [`crate::admin`]).
    pub admin: Option<AdminConfig>,
    /// Names the principal of a request from its assigns, for the `principal`
    /// field of request and stream spans (default `None`: the subject of the
    /// [`crate::mux::Principal`] the authenticator attached, if any).
    pub principal_of: Option<PrincipalOf>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            host: "127.0.0.1".into(),
            port: 8080,
            path: "/mcp".into(),
            keep_alive: Duration::from_secs(15),
            max_body: 4 * 1024 * 1024,
            body_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_in_flight: 1_024,
            allowed_hosts: vec!["127.0.0.1".into(), "localhost".into(), "::1".into()],
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            drain_timeout: Duration::from_secs(5),
            limits: Limits::default(),
            assigns: None,
            auth: None,
            rate_limit: None,
            trusted_proxies: Vec::new(),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
            compat: Some(CompatConfig::default()),
            admin: None,
            principal_of: None,
        }
    }
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("path", &self.path)
            .field("keep_alive", &self.keep_alive)
            .field("max_body", &self.max_body)
            .field("body_timeout", &self.body_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_in_flight", &self.max_in_flight)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("workers", &self.workers)
            .field("drain_timeout", &self.drain_timeout)
            .field("limits", &self.limits)
            .field("compat", &self.compat)
            .field("assigns", &self.assigns.is_some())
            .field("admin", &self.admin)
            .field("principal_of", &self.principal_of.is_some())
            .field("auth", &self.auth)
            .field("rate_limit", &self.rate_limit)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("ipv6_prefix", &self.ipv6_prefix)
            .finish()
    }
}

/// Settings of the 2025-era compatibility path (`HttpConfig::compat`; `None`
/// there serves 2026-07-28 only).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompatConfig {
    /// How long a session lives from its `initialize` (default 24 h); then its
    /// id answers 404 and the client initializes again.
    pub session_ttl: Duration,
    /// Sessions that hold state at once in the whole server (a log level,
    /// resource subscriptions, a GET stream, or the mark of a DELETE), default
    /// 100,000: the memory bound, reached only by many principals (see
    /// `max_session_states_per_principal`). Past it a `logging/setLevel` or
    /// `resources/subscribe` gets `-32603` "Server busy", a GET or DELETE 503;
    /// expired and empty entries are swept first, nothing else is evicted.
    /// With sessions shared in Redis (a suite with
    /// `SuiteBuilder::shared_tasks`) it bounds the whole fleet, counted in
    /// Redis (`docs/compat-2025.md`).
    pub max_session_states: usize,
    /// Sessions with state per principal (or per client address without one),
    /// default 1,000. Past it that principal's `logging/setLevel`,
    /// `resources/subscribe`, GET and DELETE of a session without state get
    /// HTTP 429 with `Retry-After` and `-32603`, `data.limit =
    /// "max_sessions_per_principal"`; other principals are not affected.
    pub max_session_states_per_principal: usize,
    /// `resources/subscribe` URIs per principal (or per client address without
    /// one) across its sessions, default 4,096. Past it: 429 with
    /// `Retry-After`, `data.limit = "max_subscribed_uris_per_principal"`.
    pub max_subscribed_uris_per_principal: usize,
    /// `resources/subscribe` URIs in the whole server, default 131,072 (each at
    /// most 2 KiB). Past it: `-32603` "Server busy". Like
    /// `max_session_states`, the whole fleet's bound when sessions are
    /// shared in Redis.
    pub max_subscribed_uris: usize,
    /// Server-to-client requests waiting for the client's answer, in the whole
    /// server (default 1,024). Past it the tool call gets `-32603`.
    pub max_pending_requests: usize,
    /// Server-to-client requests waiting for the client's answer, per
    /// principal (or per client address without one), across its sessions
    /// (default 64): one principal cannot take the whole
    /// `max_pending_requests` table. Past it the tool call that asks gets
    /// `-32603` "Server busy: at most N requests per principal may wait for
    /// client input at once"; other principals are not affected.
    pub max_pending_requests_per_principal: usize,
    /// Events kept per session for replay to a client that reconnects with
    /// `Last-Event-ID`, across its GET stream and POST SSE responses
    /// (default 1,000); the oldest go first. See `docs/compat-2025.md`.
    pub max_events_per_session: usize,
    /// Bytes of events (their JSON text) kept per session (default 1 MiB);
    /// the oldest go first. A single larger event is kept alone, so a
    /// connected client still gets it.
    pub max_event_bytes_per_session: usize,
    /// Bytes of events kept in the whole server (default 64 MiB): past it
    /// the oldest events of the whole server go first, whichever session
    /// holds them.
    pub max_event_bytes: usize,
    /// How long a session's GET stream keeps running (and its events kept)
    /// after its client went away, and an ended POST stream's response is
    /// kept for its client to resume it (default 120 s).
    pub resume_window: Duration,
    /// SSE polling (SEP-1699): the server closes each 2025 stream after this
    /// long, with a `retry` hint; the client reconnects with `Last-Event-ID`
    /// and resumes (default `None`: streams stay open).
    pub max_stream_duration: Option<Duration>,
    /// The `retry` hint (how long a client waits before it reconnects) sent
    /// in a stream's priming event and when the server closes a stream
    /// (default 1 s).
    pub retry: Duration,
    /// With a Redis bus on one server: when a node drains, the GET streams
    /// it holds are offered to the node their client resumes on, which
    /// takes each over with nothing lost or written twice, or refuses it
    /// (the resumption is then a 410 once the draining node stops it);
    /// see `docs/compat-2025.md`. A stream fed by anything but a
    /// distributed bus is never offered; turn this off when a subscription
    /// handler's streams get events the runtime cannot see (a sink of its
    /// own behind the inbox). Default `true`.
    pub handoff_on_drain: bool,
}

impl Default for CompatConfig {
    fn default() -> Self {
        CompatConfig {
            session_ttl: Duration::from_secs(24 * 60 * 60),
            max_session_states: 100_000,
            max_session_states_per_principal: 1_000,
            max_subscribed_uris_per_principal: 4_096,
            max_subscribed_uris: 131_072,
            max_pending_requests: 1_024,
            max_pending_requests_per_principal: 64,
            max_events_per_session: 1_000,
            max_event_bytes_per_session: 1024 * 1024,
            max_event_bytes: 64 * 1024 * 1024,
            resume_window: Duration::from_secs(120),
            max_stream_duration: None,
            retry: Duration::from_secs(1),
            handoff_on_drain: true,
        }
    }
}
