//! The `genmcp` command: `genmcp serve` runs the notes demo (or, with
//! `--conformance`, the conformance fixture server) over Streamable HTTP.

use std::process::ExitCode;
use std::time::Duration;

use genmcp::http::{self, HttpConfig};

const USAGE: &str = "\
genmcp: an MCP (2026-07-28) server runtime

USAGE:
    genmcp serve [--host HOST] [--port PORT] [--keep-alive SECS] [--workers N] [--conformance]
    genmcp serve --stdio [--conformance]
    genmcp bench [--mode throughput|latency|memory] [--kind tools|resources]
                 [--streams S] [--events K] [--rounds R] [--rate N] [--url URL [--pid PID]]

    serve          run the notes demo on http://HOST:PORT/mcp (default 127.0.0.1:8080).
                   The demo has no authentication, and its `burst` and catalog-changing
                   tools let any client make the server work and notify every stream:
                   they are for loopback benchmarking and testing. Binding a
                   non-loopback HOST logs a warning; do not expose the demo.
    --stdio        serve on stdin/stdout (newline-delimited JSON-RPC) instead of HTTP
    --conformance  serve the conformance fixture catalog instead of the demo
    --keep-alive   SSE keep-alive interval in seconds (default 15)
    --workers      HTTP worker threads (default: number of CPUs)

    Bounds and deadlines (body size, body and request deadlines, requests in
    flight, ids, _meta, filters) are listed in docs/security.md.

    bench          drive `genmcp serve` and a raw-SSE baseline (`genmcp bench-baseline`),
                   each a fresh process, with the same loopback load generator and
                   report the ratio (defaults: throughput, tools, 100 streams x 1000
                   events, 3 rounds); --url drives any server with the burst contract
                   (see docs/benchmark.md)

Logging: RUST_LOG (default genmcp=info).";

struct ServeArgs {
    config: HttpConfig,
    conformance: bool,
    stdio: bool,
}

fn parse_serve(args: &[String]) -> Result<ServeArgs, String> {
    let mut config = HttpConfig::default();
    let mut conformance = false;
    let mut stdio = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--host" => config.host = value("--host")?,
            "--port" => {
                config.port = value("--port")?
                    .parse()
                    .map_err(|_| "--port must be a number from 0 to 65535".to_owned())?
            }
            "--keep-alive" => {
                let secs: f64 = value("--keep-alive")?
                    .parse()
                    .map_err(|_| "--keep-alive must be a number of seconds".to_owned())?;
                if !(secs > 0.0 && secs.is_finite()) {
                    return Err("--keep-alive must be positive".into());
                }
                config.keep_alive = Duration::from_secs_f64(secs);
            }
            "--workers" => {
                config.workers = value("--workers")?
                    .parse()
                    .ok()
                    .filter(|n: &usize| *n > 0)
                    .ok_or_else(|| "--workers must be a positive number".to_owned())?
            }
            "--conformance" => conformance = true,
            "--stdio" => stdio = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(ServeArgs {
        config,
        conformance,
        stdio,
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("genmcp=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => match parse_serve(&args[1..]) {
            Ok(serve) => run_serve(serve),
            Err(e) => {
                eprintln!("error: {e}\n\n{USAGE}");
                ExitCode::from(2)
            }
        },
        Some("bench") => match std::env::current_exe() {
            Ok(exe) => genmcp::apps::bench::cli(&args[1..], &exe),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Some("bench-baseline") => genmcp::apps::bench::baseline_cli(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Whether `host` names the loopback interface only.
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn run_serve(serve: ServeArgs) -> ExitCode {
    if !serve.stdio && !is_loopback(&serve.config.host) && serve.config.assigns.is_none() {
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
    let system = actix_rt::System::new();
    let stdio = serve.stdio;
    let result = system.block_on(async move {
        let stdio_config = {
            let mut c = genmcp::transport::stdio::StdioConfig::default();
            c.limits = serve.config.limits.clone();
            c
        };
        match (serve.conformance, serve.stdio) {
            (true, false) => http::serve(genmcp::apps::fixtures::suite(), serve.config).await,
            (true, true) => {
                genmcp::transport::stdio::serve(genmcp::apps::fixtures::suite(), stdio_config).await
            }
            (false, false) => http::serve(genmcp::apps::demo::suite().0, serve.config).await,
            (false, true) => {
                genmcp::transport::stdio::serve(genmcp::apps::demo::suite().0, stdio_config).await
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
