//! `genmcp serve`: checks the flags, builds the demo (or fixture) suite on
//! the configured bus and key, and serves it over HTTP or stdio until a
//! shutdown signal has drained every stream.

use std::process::ExitCode;

use genmcp::apps::node::NodeConfig;
use genmcp::http::{self, HttpConfig};

use crate::serve_args::ServeArgs;

/// What `genmcp serve` runs, resolved from its flags.
struct Serve {
    config: HttpConfig,
    node: NodeConfig,
    conformance: bool,
    stdio: bool,
    tasks: genmcp::suite::TaskConfig,
}

/// Whether `host` names the loopback interface only.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Runs `genmcp serve`; the exit code says how it ended (2: bad flags or
/// files).
pub(crate) fn run(args: ServeArgs) -> ExitCode {
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
        tasks: args.task_config(),
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
                let suite =
                    genmcp::apps::fixtures::suite_for_node_with_tasks(secret, spent, serve.tasks);
                http::serve(suite, serve.config).await
            }
            (true, true) => {
                let suite =
                    genmcp::apps::fixtures::suite_for_node_with_tasks(secret, spent, serve.tasks);
                genmcp::transport::stdio::serve(suite, stdio_config).await
            }
            (false, false) => {
                let suite = genmcp::apps::demo::suite_with_tasks(bus, secret, serve.tasks).0;
                http::serve(suite, serve.config).await
            }
            (false, true) => {
                let suite = genmcp::apps::demo::suite_with_tasks(bus, secret, serve.tasks).0;
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
    use super::is_loopback;

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
