//! The flags of `genmcp serve`, and how they map onto the library's
//! configuration (`HttpConfig`, `AuthConfig`, `NodeConfig`): a flag not given
//! leaves the library default.

use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use genmcp::http::auth::{AuthConfig, AuthError, JwtAuthenticator, TokenTable};
use genmcp::http::{HttpConfig, RateLimit};
use genmcp_cli::node::NodeConfig;

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// The address to bind (default 127.0.0.1).
    #[arg(long)]
    host: Option<String>,
    /// The port to bind (default 8080; 0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
    /// SSE keep-alive interval in seconds (default 15).
    #[arg(long, value_name = "SECS", value_parser = positive_seconds)]
    keep_alive: Option<Duration>,
    /// HTTP worker threads (default: number of CPUs).
    #[arg(long, value_name = "N")]
    workers: Option<NonZeroUsize>,
    /// Serve on stdin/stdout (newline-delimited JSON-RPC) instead of HTTP.
    #[arg(long)]
    pub(crate) stdio: bool,
    /// Serve the conformance fixture catalog instead of the demo.
    #[arg(long)]
    pub(crate) conformance: bool,
    /// Serve the skills in this directory (the skills extension: each
    /// directory holding a SKILL.md is a skill; see docs/skills.md), with
    /// resources/directory/read; re-read when it changes (checked every
    /// --skills-poll seconds). With --conformance the default is the
    /// fixture skills.
    #[arg(long, value_name = "DIR")]
    pub(crate) skills: Option<PathBuf>,
    /// Serve the demo's MCP Apps example too: the `show_notes` tool and its
    /// `ui://notes/board` HTML view (docs/apps.md).
    #[arg(long, conflicts_with = "conformance")]
    pub(crate) apps: bool,
    /// How often --skills DIR is checked for changes, in seconds (default 2).
    #[arg(long, value_name = "SECS", value_parser = positive_seconds, requires = "skills")]
    pub(crate) skills_poll: Option<Duration>,
    /// Export the request and stream spans and the MCP convention metrics
    /// over OTLP/HTTP (protobuf) to the collector at URL (its base,
    /// http://HOST:4318). Without it, export is on when
    /// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
    /// set; OTEL_SDK_DISABLED=true turns it off. The other OTEL_* variables
    /// apply (see docs/operations.md).
    #[arg(long, value_name = "URL")]
    pub(crate) otlp: Option<String>,
    /// Share the demo's events with the other nodes on this Redis server
    /// (redis://[user:password@]HOST:PORT), or on a Redis Cluster with sharded
    /// pub/sub (redis+cluster://[user:password@]HOST:PORT,HOST:PORT,... seed
    /// nodes), and record spent requestStates
    /// there (each is honoured once across the nodes; refused while Redis is
    /// unreachable). Default: an embedded bus (one node). Prefer GENMCP_BUS
    /// for a URL with a password: it then stays out of `ps`.
    #[arg(long, value_name = "URL", env = "GENMCP_BUS", hide_env_values = true)]
    bus: Option<BusUrl>,
    /// With --bus: start even when Redis is unreachable (degraded, reconnecting)
    /// instead of exiting with an error.
    #[arg(long, requires = "bus")]
    bus_degraded: bool,
    /// The keys sealing requestState and cursors (and authenticating the bus):
    /// a file holding one key per line, 64 hex digits each (`openssl rand -hex
    /// 32`), the current key first (it seals; every key listed opens), e.g. a
    /// systemd credential ($CREDENTIALS_DIRECTORY/genmcp-key). Re-read on
    /// SIGHUP (see docs/auth.md for rotating keys). Default: $GENMCP_KEY
    /// (removed from the environment once read), else a random key
    /// (multi-node sealing off).
    #[arg(long, value_name = "PATH")]
    pub(crate) key_file: Option<std::path::PathBuf>,
    /// With --bus and a key: how often this node publishes its key ids and
    /// compares them with the other nodes' (/readyz "keys"), in seconds
    /// (default 10; use the same on every node).
    #[arg(long, value_name = "SECS", value_parser = positive_seconds, requires = "bus")]
    pub(crate) key_check_every: Option<Duration>,
    /// A key file to read once and delete: how `genmcp serve` hands
    /// $GENMCP_KEY to itself when it re-executes without it in its
    /// environment (internal).
    #[arg(long, value_name = "PATH", hide = true, conflicts_with = "key_file")]
    pub(crate) key_file_once: Option<std::path::PathBuf>,
    /// Require a bearer token from this table (lines `TOKEN PRINCIPAL [admin]`;
    /// HTTP only; see docs/auth.md).
    #[arg(
        long,
        value_name = "FILE",
        group = "auth_source",
        conflicts_with = "stdio"
    )]
    auth_tokens: Option<PathBuf>,
    /// Require a JWT access token signed by a key of this JWKS file, from
    /// --issuer, for --audience (HTTP only; see docs/auth.md).
    #[arg(
        long,
        value_name = "FILE",
        group = "auth_source",
        requires_all = ["issuer", "audience"],
        conflicts_with = "stdio"
    )]
    jwks: Option<PathBuf>,
    /// The authorization server: the JWT `iss`, and `authorization_servers` of
    /// the protected resource metadata.
    #[arg(long, value_name = "URL", requires = "auth_source")]
    issuer: Option<String>,
    /// This server's resource URL: the JWT `aud`, and `resource` of the
    /// protected resource metadata (default with --auth-tokens: from each request).
    #[arg(long, value_name = "URL", requires = "auth_source")]
    audience: Option<String>,
    /// Open listen streams in all (default 10,000); past it a listen gets
    /// `-32603` "Subscription limit reached".
    #[arg(long, value_name = "N")]
    max_streams: Option<NonZeroUsize>,
    /// --resource-url, --auth-failures-per-minute, --trusted-proxy,
    /// --ipv6-prefix (boxed: the subcommand enum stays small).
    #[command(flatten)]
    edge: Box<EdgeArgs>,
    /// Open listen streams per principal, or per client address without one
    /// (default: no limit besides --max-streams in all); past it 429.
    #[arg(long, value_name = "N")]
    max_streams_per_principal: Option<NonZeroUsize>,
    /// Requests per second per principal, or per client address without one,
    /// with a burst of as many (default: no limit); past it 429.
    #[arg(long, value_name = "N", conflicts_with = "stdio")]
    max_requests_per_second: Option<NonZeroU32>,
    /// SSE polling for 2025-era clients (SEP-1699): close each 2025 SSE
    /// stream after this many seconds with a `retry` hint; the client
    /// reconnects with Last-Event-ID and resumes without losing an event
    /// (default: streams stay open).
    #[arg(long, value_name = "SECS", value_parser = positive_seconds, conflicts_with = "stdio")]
    max_stream_duration: Option<Duration>,
    /// Run the admin listener (GET /metrics, /healthz, /readyz) on this
    /// address, e.g. 127.0.0.1:9090; never the MCP port (default: off).
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    admin: Option<std::net::SocketAddr>,
    /// How long a task stays readable after it was created, in seconds
    /// (`ttlMs`; default 3600); an unfinished task is stopped when it expires.
    #[arg(long, value_name = "SECONDS")]
    task_ttl: Option<NonZeroU64>,
    /// Unfinished tasks per principal, or per client address without one
    /// (default 1,000); past it 429.
    #[arg(long, value_name = "N")]
    max_tasks_per_principal: Option<NonZeroUsize>,
    /// With `--bus`: how long a node's lease on its running tasks lasts
    /// without renewal, in seconds (default 30); when a node dies its
    /// unfinished tasks read `failed` at most this long after.
    #[arg(long, value_name = "SECONDS")]
    task_lease: Option<NonZeroU64>,
    /// Task records kept, finished or not, until their TTL ends (default
    /// 100,000); past it new tasks get 429.
    #[arg(long, value_name = "N")]
    max_retained_tasks: Option<NonZeroUsize>,
    /// Largest encoded result one task keeps, in bytes (default 1,032,192:
    /// 1 MiB less 16 KiB); a larger one ends its task `failed`. With --bus it
    /// must leave 16 KiB of the bus's largest message (1 MiB), or the server
    /// refuses to start.
    #[arg(long, value_name = "BYTES")]
    max_task_result_bytes: Option<NonZeroUsize>,
}

/// How the server names itself and counts clients: the resource URL, the
/// failed-authentication limit, trusted proxies, IPv6 grouping.
#[derive(Args, Debug)]
pub(crate) struct EdgeArgs {
    /// The URL clients reach this MCP endpoint at (e.g.
    /// https://mcp.example.com/mcp): `resource` of the protected resource
    /// metadata and the origin of its URL in challenges. Default: --audience
    /// if given, else the bind address and /mcp (never the client's Host).
    #[arg(long, value_name = "URL", requires = "auth_source")]
    resource_url: Option<String>,
    /// Failed authentications allowed per client address per minute (a burst
    /// of as many); past it 429 before the token is checked (default 20).
    #[arg(long, value_name = "N", requires = "auth_source")]
    auth_failures_per_minute: Option<NonZeroU32>,
    /// A reverse proxy whose X-Forwarded-For / -Proto / -Host are believed
    /// (repeat for several; default: none, the headers are ignored).
    #[arg(long = "trusted-proxy", value_name = "IP", conflicts_with = "stdio")]
    trusted_proxies: Vec<std::net::IpAddr>,
    /// Limits per client address count IPv6 clients by this prefix length
    /// (default 64; 128 counts each address).
    #[arg(long, value_name = "BITS", conflicts_with = "stdio",
          value_parser = clap::value_parser!(u8).range(1..=128))]
    ipv6_prefix: Option<u8>,
}

impl ServeArgs {
    /// The HTTP configuration: the library defaults with the flags given.
    pub(crate) fn http_config(&self) -> HttpConfig {
        let mut config = HttpConfig::default();
        if let Some(host) = &self.host {
            config.host.clone_from(host);
        }
        if let Some(port) = self.port {
            config.port = port;
        }
        if let Some(keep_alive) = self.keep_alive {
            config.keep_alive = keep_alive;
        }
        if let Some(workers) = self.workers {
            config.workers = workers.get();
        }
        if let Some(n) = self.max_streams {
            config.limits.max_streams = n.get();
        }
        if let Some(n) = self.max_streams_per_principal {
            config.limits.max_streams_per_principal = Some(n.get());
        }
        if let Some(n) = self.max_requests_per_second {
            config.rate_limit = Some(RateLimit::per_second(n.get()));
        }
        if let (Some(d), Some(compat)) = (self.max_stream_duration, config.compat.as_mut()) {
            compat.max_stream_duration = Some(d);
        }
        config.admin = self.admin.map(genmcp::admin::AdminConfig::new);
        config
            .trusted_proxies
            .clone_from(&self.edge.trusted_proxies);
        if let Some(bits) = self.edge.ipv6_prefix {
            config.ipv6_prefix = bits;
        }
        config
    }

    /// The lifetime and bounds of tasks: the library defaults with the flags given.
    pub(crate) fn task_config(&self) -> genmcp::suite::TaskConfig {
        let mut config = genmcp::suite::TaskConfig::default();
        if let Some(secs) = self.task_ttl {
            config = config.ttl(std::time::Duration::from_secs(secs.get()));
        }
        if let Some(n) = self.max_tasks_per_principal {
            config = config.max_tasks_per_principal(n.get());
        }
        if let Some(secs) = self.task_lease {
            config = config.lease(std::time::Duration::from_secs(secs.get()));
        }
        if let Some(n) = self.max_retained_tasks {
            config = config.max_retained_tasks(n.get());
        }
        if let Some(n) = self.max_task_result_bytes {
            config = config.max_result_bytes(n.get());
        }
        config
    }

    /// The bus and key: the library defaults with the flags given.
    pub(crate) fn node_config(&self) -> NodeConfig {
        let mut node = NodeConfig::default();
        node.bus = self.bus.as_ref().map(|b| b.0.clone());
        node.degraded = self.bus_degraded;
        node.key_file.clone_from(&self.key_file);
        if let Some(once) = &self.key_file_once {
            node.key_file = Some(once.clone());
            node.remove_key_file = true;
        }
        node
    }

    /// The authentication of --auth-tokens or --jwks (reading their files).
    pub(crate) fn auth_config(&self) -> Result<Option<AuthConfig>, AuthError> {
        let mut auth = match (&self.auth_tokens, &self.jwks) {
            (Some(tokens), _) => AuthConfig::new(TokenTable::from_file(tokens)?),
            (None, Some(jwks)) => {
                let (issuer, audience) = (
                    self.issuer.clone().unwrap_or_default(),
                    self.audience.clone().unwrap_or_default(),
                );
                AuthConfig::jwt(JwtAuthenticator::from_jwks_file(jwks, issuer, audience)?)
            }
            (None, None) => return Ok(None),
        };
        if self.auth_tokens.is_some() {
            if let Some(issuer) = &self.issuer {
                auth = auth.authorization_server(issuer.clone());
            }
            if let Some(audience) = &self.audience {
                auth = auth.resource(audience.clone());
            }
        }
        if let Some(url) = &self.edge.resource_url {
            auth = auth.resource(url.clone());
        }
        if let Some(n) = self.edge.auth_failures_per_minute {
            auth = auth.failure_limit(Some(RateLimit::per_minute(n.get())));
        }
        Ok(Some(auth))
    }
}

/// A `--bus` URL whose password stays out of `{:?}`.
#[derive(Clone)]
struct BusUrl(String);

impl std::str::FromStr for BusUrl {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(BusUrl(s.to_owned()))
    }
}

impl std::fmt::Debug for BusUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&genmcp::pubsub::redis::display_url(&self.0))
    }
}

fn positive_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| "must be a number of seconds")?;
    if secs > 0.0 && secs.is_finite() {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err("must be a positive number of seconds".into())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Cli, Command, LogFormatArg};
    use clap::Parser;

    #[test]
    fn serve_flags_override_only_what_they_name() {
        let cli = Cli::try_parse_from(["genmcp", "serve", "--port", "0", "--keep-alive", "0.5"])
            .expect("valid flags");
        let Command::Serve(serve) = cli.command else {
            panic!("serve expected")
        };
        let config = serve.http_config();
        assert_eq!(config.port, 0);
        assert_eq!(config.keep_alive, std::time::Duration::from_millis(500));
        assert_eq!(config.host, genmcp::http::HttpConfig::default().host);
        assert_eq!(config.limits.max_streams_per_principal, None);
        assert_eq!(config.limits.max_streams, 10_000);
        assert!(config.rate_limit.is_none());
        let compat = config.compat.as_ref().expect("2025 clients served");
        assert_eq!(compat.max_stream_duration, None, "streams stay open");
        let cli = Cli::try_parse_from(["genmcp", "serve", "--max-stream-duration", "2.5"])
            .expect("valid flags");
        let Command::Serve(serve) = cli.command else {
            panic!("serve expected")
        };
        let config = serve.http_config();
        assert_eq!(
            config.compat.and_then(|c| c.max_stream_duration),
            Some(std::time::Duration::from_millis(2500))
        );
        assert!(Cli::try_parse_from(["genmcp", "serve", "--max-stream-duration", "0"]).is_err());
        let cli = Cli::try_parse_from([
            "genmcp",
            "serve",
            "--max-streams",
            "100016",
            "--max-streams-per-principal",
            "2",
            "--max-requests-per-second",
            "5",
        ])
        .expect("valid flags");
        let Command::Serve(serve) = cli.command else {
            panic!("serve expected")
        };
        let config = serve.http_config();
        assert_eq!(config.limits.max_streams_per_principal, Some(2));
        assert_eq!(config.limits.max_streams, 100_016);
        assert_eq!(config.rate_limit.map(|r| r.burst), Some(5));
        assert!(
            config.admin.is_none(),
            "the admin listener is off by default"
        );
        let cli = Cli::try_parse_from([
            "genmcp",
            "serve",
            "--admin",
            "127.0.0.1:9090",
            "--log-format",
            "json",
        ])
        .expect("valid flags");
        assert!(matches!(cli.log_format, LogFormatArg::Json));
        let Command::Serve(serve) = cli.command else {
            panic!("serve expected")
        };
        let admin = serve.http_config().admin.expect("--admin sets it");
        assert_eq!(admin.addr, "127.0.0.1:9090".parse().unwrap());
        for bad in [
            &["genmcp", "serve", "--keep-alive", "0"][..],
            &["genmcp", "serve", "--workers", "0"],
            &["genmcp", "serve", "--port", "70000"],
            &["genmcp", "serve", "--bogus"],
            &["genmcp", "serve", "--admin", "nowhere"],
            &["genmcp", "serve", "--stdio", "--admin", "127.0.0.1:9090"],
            // HTTP-only flags are refused on stdio rather than silently ignored.
            &["genmcp", "serve", "--stdio", "--auth-tokens", "t.txt"],
            &[
                "genmcp",
                "serve",
                "--stdio",
                "--max-requests-per-second",
                "5",
            ],
            &["genmcp", "serve", "--log-format", "xml"],
            &["genmcp", "bench", "--pid", "1"],
            &["genmcp", "bench", "--mode", "speed"],
            &[
                "genmcp",
                "serve",
                "--jwks",
                "k.json",
                "--issuer",
                "https://as",
            ],
            &["genmcp", "serve", "--jwks", "k.json", "--auth-tokens", "t"],
            &["genmcp", "serve", "--issuer", "https://as"],
            &["genmcp", "serve", "--max-streams-per-principal", "0"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn auth_limit_proxy_and_resource_flags_fill_the_config() {
        let parse = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).expect("valid flags");
            let Command::Serve(serve) = cli.command else {
                panic!("serve expected")
            };
            serve
        };
        let serve = parse(&["genmcp", "serve"]);
        let config = serve.http_config();
        assert!(config.trusted_proxies.is_empty());
        assert_eq!(config.ipv6_prefix, genmcp::http::DEFAULT_IPV6_PREFIX);
        let serve = parse(&[
            "genmcp",
            "serve",
            "--trusted-proxy",
            "10.0.0.1",
            "--trusted-proxy",
            "::1",
            "--ipv6-prefix",
            "56",
        ]);
        let config = serve.http_config();
        assert_eq!(
            config.trusted_proxies,
            vec![
                "10.0.0.1".parse::<std::net::IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert_eq!(config.ipv6_prefix, 56);
        let dir = std::env::temp_dir().join(format!("genmcp-serve-args-{}", std::process::id()));
        std::fs::write(&dir, "tok bob\n").unwrap();
        let tokens = dir.display().to_string();
        let auth = parse(&["genmcp", "serve", "--auth-tokens", &tokens])
            .auth_config()
            .unwrap()
            .unwrap();
        assert_eq!(auth.resource, None);
        assert_eq!(
            auth.failure_limit.map(|l| l.burst),
            Some(genmcp::http::auth::DEFAULT_AUTH_FAILURES_PER_MINUTE)
        );
        let auth = parse(&[
            "genmcp",
            "serve",
            "--auth-tokens",
            &tokens,
            "--resource-url",
            "https://mcp.example.com/mcp",
            "--auth-failures-per-minute",
            "5",
        ])
        .auth_config()
        .unwrap()
        .unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(
            auth.resource.as_deref(),
            Some("https://mcp.example.com/mcp")
        );
        assert_eq!(auth.failure_limit.map(|l| l.burst), Some(5));
        for bad in [
            &["genmcp", "serve", "--resource-url", "https://x/mcp"][..],
            &["genmcp", "serve", "--auth-failures-per-minute", "5"],
            &[
                "genmcp",
                "serve",
                "--auth-tokens",
                "t",
                "--auth-failures-per-minute",
                "0",
            ],
            &["genmcp", "serve", "--ipv6-prefix", "0"],
            &["genmcp", "serve", "--ipv6-prefix", "129"],
            &["genmcp", "serve", "--trusted-proxy", "proxy.local"],
            &["genmcp", "serve", "--stdio", "--trusted-proxy", "10.0.0.1"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn bus_and_key_flags_fill_the_node_config() {
        let cli = Cli::try_parse_from([
            "genmcp",
            "serve",
            "--bus",
            "redis://127.0.0.1:6380",
            "--bus-degraded",
            "--key-file",
            "/etc/genmcp.key",
        ])
        .expect("valid flags");
        let Command::Serve(serve) = cli.command else {
            panic!("serve expected")
        };
        let node = serve.node_config();
        assert_eq!(node.bus.as_deref(), Some("redis://127.0.0.1:6380"));
        assert!(node.degraded);
        assert_eq!(
            node.key_file.as_deref(),
            Some(std::path::Path::new("/etc/genmcp.key"))
        );
        let secret = Cli::try_parse_from(["genmcp", "serve", "--bus", "redis://u:s3cret@h:1"])
            .expect("valid flags");
        let debug = format!("{secret:?}");
        assert!(
            !debug.contains("s3cret") && debug.contains("redis://***@h:1"),
            "{debug}"
        );
        let plain = Cli::try_parse_from(["genmcp", "serve"]).expect("no flags");
        let Command::Serve(serve) = plain.command else {
            panic!("serve expected")
        };
        let node = serve.node_config();
        assert!(node.bus.is_none() && !node.degraded && node.key_file.is_none());
        assert!(Cli::try_parse_from(["genmcp", "serve", "--bus-degraded"]).is_err());
        // The re-executed server's hand-over file: read, then deleted.
        let once = Cli::try_parse_from(["genmcp", "serve", "--key-file-once", "/dev/shm/k"])
            .expect("valid flags");
        let Command::Serve(serve) = once.command else {
            panic!("serve expected")
        };
        let node = serve.node_config();
        assert!(node.remove_key_file);
        assert_eq!(
            node.key_file.as_deref(),
            Some(std::path::Path::new("/dev/shm/k"))
        );
        assert!(
            Cli::try_parse_from(["genmcp", "serve", "--key-file", "a", "--key-file-once", "b"])
                .is_err()
        );
        assert!(
            Cli::try_parse_from([
                "genmcp",
                "bench",
                "--cross-node",
                "redis://x",
                "--url",
                "http://y"
            ])
            .is_err()
        );
    }
}
