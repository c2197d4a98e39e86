//! The `genmcp` command: `genmcp serve` runs the notes demo (or, with
//! `--conformance`, the conformance fixture server) over Streamable HTTP.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use genmcp::http::auth::{AuthConfig, AuthError, JwtAuthenticator, TokenTable};
use genmcp::http::{self, HttpConfig, RateLimit};

use clap::{Args, Parser, Subcommand, ValueEnum};
use genmcp::apps::bench::{BenchConfig, Kind, Mode};
use genmcp::apps::logging::LogFormat;
use genmcp::apps::node::NodeConfig;

/// genmcp: an MCP (2026-07-28) server runtime.
#[derive(Parser, Debug)]
#[command(
    name = "genmcp",
    version,
    after_help = "Logging: RUST_LOG (default genmcp=info)."
)]
struct Cli {
    /// Log lines on stderr as text (default) or JSON lines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormatArg {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, with the request and stream span fields.
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the notes demo on http://HOST:PORT/mcp (default 127.0.0.1:8080).
    ///
    /// Without --auth-tokens or --jwks the demo has no authentication, and its `burst` and catalog-changing
    /// tools let any client make the server work and notify every stream: they
    /// are for loopback benchmarking and testing. Binding a non-loopback HOST
    /// logs a warning; do not expose the demo. Bounds and deadlines (body size,
    /// body and request deadlines, requests in flight, ids, _meta, filters) are
    /// listed in docs/security.md.
    Serve(ServeArgs),
    /// Drive `genmcp serve` and a raw-SSE baseline (`genmcp bench-baseline`),
    /// each a fresh process, with the same loopback load generator and report
    /// the ratio.
    ///
    /// --url drives any server with the burst contract instead (see
    /// docs/benchmark.md).
    Bench(BenchArgs),
    /// The raw actix-web SSE baseline server that `genmcp bench` measures against.
    #[command(hide = true)]
    BenchBaseline {
        /// The loopback port to listen on.
        #[arg(long)]
        port: u16,
    },
}

#[derive(Args, Debug)]
struct ServeArgs {
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
    stdio: bool,
    /// Serve the conformance fixture catalog instead of the demo.
    #[arg(long)]
    conformance: bool,
    /// Share the demo's events with the other nodes on this Redis server
    /// (redis://[user:password@]HOST:PORT), and record spent requestStates
    /// there (each is honoured once across the nodes; refused while Redis is
    /// unreachable). Default: an embedded bus (one node). Prefer GENMCP_BUS
    /// for a URL with a password: it then stays out of `ps`.
    #[arg(long, value_name = "URL", env = "GENMCP_BUS", hide_env_values = true)]
    bus: Option<BusUrl>,
    /// With --bus: start even when Redis is unreachable (degraded, reconnecting)
    /// instead of exiting with an error.
    #[arg(long, requires = "bus")]
    bus_degraded: bool,
    /// The key sealing requestState and cursors: a file holding 64 hex digits
    /// (`openssl rand -hex 32`). Default: $GENMCP_KEY, else a random key
    /// (multi-node sealing off).
    #[arg(long, value_name = "PATH")]
    key_file: Option<std::path::PathBuf>,
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
    /// Open listen streams per principal, or per client address without one
    /// (default: no limit besides 10,000 in all); past it 429.
    #[arg(long, value_name = "N")]
    max_streams_per_principal: Option<NonZeroUsize>,
    /// Requests per second per principal, or per client address without one,
    /// with a burst of as many (default: no limit); past it 429.
    #[arg(long, value_name = "N", conflicts_with = "stdio")]
    max_requests_per_second: Option<NonZeroU32>,
    /// Run the admin listener (GET /metrics, /healthz, /readyz) on this
    /// address, e.g. 127.0.0.1:9090; never the MCP port (default: off).
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    admin: Option<std::net::SocketAddr>,
}

impl ServeArgs {
    /// The HTTP configuration: the library defaults with the flags given.
    fn http_config(&self) -> HttpConfig {
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
        if let Some(n) = self.max_streams_per_principal {
            config.limits.max_streams_per_principal = Some(n.get());
        }
        if let Some(n) = self.max_requests_per_second {
            config.rate_limit = Some(RateLimit::per_second(n.get()));
        }
        config.admin = self.admin.map(genmcp::admin::AdminConfig::new);
        config
    }

    /// The bus and key: the library defaults with the flags given.
    fn node_config(&self) -> NodeConfig {
        let mut node = NodeConfig::default();
        node.bus = self.bus.as_ref().map(|b| b.0.clone());
        node.degraded = self.bus_degraded;
        node.key_file.clone_from(&self.key_file);
        node
    }

    /// The authentication of --auth-tokens or --jwks (reading their files).
    fn auth_config(&self) -> Result<Option<AuthConfig>, AuthError> {
        let mut auth = match (&self.auth_tokens, &self.jwks) {
            (Some(tokens), _) => AuthConfig::new(TokenTable::from_file(tokens)?),
            (None, Some(jwks)) => {
                let (issuer, audience) = (
                    self.issuer.clone().unwrap_or_default(),
                    self.audience.clone().unwrap_or_default(),
                );
                return Ok(Some(AuthConfig::jwt(JwtAuthenticator::from_jwks_file(
                    jwks, issuer, audience,
                )?)));
            }
            (None, None) => return Ok(None),
        };
        if let Some(issuer) = &self.issuer {
            auth = auth.authorization_server(issuer.clone());
        }
        if let Some(audience) = &self.audience {
            auth = auth.resource(audience.clone());
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

#[derive(Args, Debug)]
struct BenchArgs {
    /// What to measure.
    #[arg(long, value_enum, default_value_t = BenchMode::Throughput)]
    mode: BenchMode,
    /// Which notification the streams receive.
    #[arg(long, value_enum, default_value_t = BenchKind::Tools)]
    kind: BenchKind,
    /// Concurrent streams (default 100).
    #[arg(long, value_name = "S")]
    streams: Option<NonZeroUsize>,
    /// Events per stream (default 1000).
    #[arg(long, value_name = "K")]
    events: Option<NonZeroUsize>,
    /// Rounds; each measures baseline then genmcp (default 3).
    #[arg(long, value_name = "R")]
    rounds: Option<NonZeroUsize>,
    /// Events per second in latency mode (default 200).
    #[arg(long, value_name = "N")]
    rate: Option<NonZeroU32>,
    /// Drive this server (http://HOST:PORT/PATH) instead of starting baseline and genmcp.
    #[arg(long)]
    url: Option<String>,
    /// With --url in memory mode: the process to read resident memory from.
    #[arg(long, requires = "url")]
    pid: Option<u32>,
    /// Cross-node mode: start `genmcp serve --bus URL` nodes sharing this Redis
    /// server and compare one node with three (burst on node 1, listens on
    /// nodes 2 and 3); throughput or latency.
    #[arg(long, value_name = "REDIS_URL", conflicts_with = "url")]
    cross_node: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BenchMode {
    /// Frames per second, all streams together.
    Throughput,
    /// Publish-to-receive latency at a fixed rate.
    Latency,
    /// Resident memory per idle open stream.
    Memory,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BenchKind {
    /// notifications/tools/list_changed.
    Tools,
    /// notifications/resources/updated for one URI.
    Resources,
}

impl BenchArgs {
    fn config(&self) -> BenchConfig {
        let mut cfg = BenchConfig::default();
        cfg.mode = match self.mode {
            BenchMode::Throughput => Mode::Throughput,
            BenchMode::Latency => Mode::Latency,
            BenchMode::Memory => Mode::Memory,
        };
        cfg.kind = match self.kind {
            BenchKind::Tools => Kind::Tools,
            BenchKind::Resources => Kind::Resources,
        };
        if let Some(n) = self.streams {
            cfg.streams = n.get();
        }
        if let Some(n) = self.events {
            cfg.events = n.get();
        }
        if let Some(n) = self.rounds {
            cfg.rounds = n.get();
        }
        if let Some(n) = self.rate {
            cfg.rate = n.get();
        }
        cfg.url.clone_from(&self.url);
        cfg.pid = self.pid;
        cfg.cross_node.clone_from(&self.cross_node);
        cfg
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    genmcp::apps::logging::init(match cli.log_format {
        LogFormatArg::Text => LogFormat::Text,
        LogFormatArg::Json => LogFormat::Json,
    });
    match cli.command {
        Command::Serve(serve) => run_serve(serve),
        Command::Bench(bench) => match std::env::current_exe() {
            Ok(exe) => genmcp::apps::bench::cli(bench.config(), &exe),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::BenchBaseline { port } => genmcp::apps::bench::baseline_cli(port),
    }
}

/// What `genmcp serve` runs, resolved from its flags.
struct Serve {
    config: HttpConfig,
    node: NodeConfig,
    conformance: bool,
    stdio: bool,
}

/// Whether `host` names the loopback interface only.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn run_serve(args: ServeArgs) -> ExitCode {
    let mut config = args.http_config();
    match args.auth_config() {
        Ok(auth) => config.auth = auth,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let serve = Serve {
        config,
        node: args.node_config(),
        conformance: args.conformance,
        stdio: args.stdio,
    };
    if !serve.stdio
        && !is_loopback(&serve.config.host)
        && serve.config.assigns.is_none()
        && serve.config.auth.is_none()
    {
        tracing::warn!(
            host = %serve.config.host,
            "!!! binding a non-loopback address with NO authentication configured: any \
             client that can reach this port can call every tool, including the demo's \
             `burst` and catalog-changing tools (meant for loopback benchmarking only). \
             Put an authenticating proxy in front, or bind 127.0.0.1 !!!"
        );
        eprintln!(
            "WARNING: genmcp is serving {} without authentication; see --help",
            serve.config.host
        );
    }
    let secret = match serve.node.secret() {
        Ok(secret) => secret,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let system = actix_rt::System::new();
    let stdio = serve.stdio;
    let result = system.block_on(async move {
        let mut serve = serve;
        let bus = serve.node.bus().await.map_err(std::io::Error::other)?;
        if bus.is_distributed()
            && let Some(admin) = serve.config.admin.take()
        {
            // /readyz answers 503 "down: bus" while Redis is not connected.
            let health = bus.clone();
            serve.config.admin = Some(admin.check("bus", move || health.is_connected()));
        }
        let stdio_config = {
            let mut c = genmcp::transport::stdio::StdioConfig::default();
            c.limits = serve.config.limits.clone();
            c
        };
        // With --bus redis://…, spent requestStates are recorded in Redis.
        let spent = genmcp::apps::shared_spent::RedisSpentRecord::for_bus(&bus);
        match (serve.conformance, serve.stdio) {
            (true, false) => {
                let suite = genmcp::apps::fixtures::suite_for_node(secret, spent);
                http::serve(suite, serve.config).await
            }
            (true, true) => {
                let suite = genmcp::apps::fixtures::suite_for_node(secret, spent);
                genmcp::transport::stdio::serve(suite, stdio_config).await
            }
            (false, false) => {
                let suite = genmcp::apps::demo::suite_with(bus, secret).0;
                http::serve(suite, serve.config).await
            }
            (false, true) => {
                let suite = genmcp::apps::demo::suite_with(bus, secret).0;
                genmcp::transport::stdio::serve(suite, stdio_config).await
            }
        }
    });
    if let Err(e) = &result {
        eprintln!("error: {e}");
    }
    if stdio {
        // tokio reads stdin on a blocking thread that a shutdown cannot interrupt;
        // everything is flushed, so leave without waiting for it.
        std::process::exit(if result.is_ok() { 0 } else { 1 });
    }
    if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::{Cli, is_loopback};
    use clap::{CommandFactory, Parser};

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_flags_override_only_what_they_name() {
        let cli = Cli::try_parse_from(["genmcp", "serve", "--port", "0", "--keep-alive", "0.5"])
            .expect("valid flags");
        let super::Command::Serve(serve) = cli.command else {
            panic!("serve expected")
        };
        let config = serve.http_config();
        assert_eq!(config.port, 0);
        assert_eq!(config.keep_alive, std::time::Duration::from_millis(500));
        assert_eq!(config.host, genmcp::http::HttpConfig::default().host);
        assert_eq!(config.limits.max_streams_per_principal, None);
        assert!(config.rate_limit.is_none());
        let cli = Cli::try_parse_from([
            "genmcp",
            "serve",
            "--max-streams-per-principal",
            "2",
            "--max-requests-per-second",
            "5",
        ])
        .expect("valid flags");
        let super::Command::Serve(serve) = cli.command else {
            panic!("serve expected")
        };
        let config = serve.http_config();
        assert_eq!(config.limits.max_streams_per_principal, Some(2));
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
        assert!(matches!(cli.log_format, super::LogFormatArg::Json));
        let super::Command::Serve(serve) = cli.command else {
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
        let super::Command::Serve(serve) = cli.command else {
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
        let super::Command::Serve(serve) = plain.command else {
            panic!("serve expected")
        };
        let node = serve.node_config();
        assert!(node.bus.is_none() && !node.degraded && node.key_file.is_none());
        assert!(Cli::try_parse_from(["genmcp", "serve", "--bus-degraded"]).is_err());
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

    #[test]
    fn loopback_hosts_are_recognised() {
        for h in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
            "localhost",
            "LOCALHOST",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["0.0.0.0", "::", "10.0.0.1", "example.com"] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
