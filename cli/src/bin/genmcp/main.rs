//! The `genmcp` command: `genmcp serve` runs the notes demo (or, with
//! `--conformance`, the conformance fixture server) over Streamable HTTP or
//! stdio; `genmcp bench` measures it. The flags are parsed by clap and mapped
//! onto the library's configuration types, whose defaults they keep.

mod allocator;
mod bench;
mod keys;
mod serve;
mod serve_args;

use std::process::ExitCode;

/// The binary's allocator, chosen by cargo feature (docs/benchmark.md,
/// "Allocators"): jemalloc by default (tuned at start by
/// [`allocator::tune`]), mimalloc with `--features mimalloc`, the system
/// allocator with `--no-default-features`.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use clap::{Parser, Subcommand, ValueEnum};
use genmcp_cli::logging::LogFormat;

use bench::{BenchArgs, BenchBaseline};
use serve_args::ServeArgs;

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
    Serve(Box<ServeArgs>),
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
        /// Which baseline: the raw server, or the same with an actix actor per
        /// stream in front of each body (what an actor per stream costs;
        /// docs/benchmark.md).
        #[arg(long, value_enum, default_value_t = BenchBaseline::Raw)]
        baseline: BenchBaseline,
    },
}

fn main() -> ExitCode {
    allocator::tune();
    let cli = Cli::parse();
    let format = match cli.log_format {
        LogFormatArg::Text => LogFormat::Text,
        LogFormatArg::Json => LogFormat::Json,
    };
    match cli.command {
        Command::Serve(args) => serve_with_telemetry(format, *args),
        Command::Bench(args) => {
            genmcp_cli::logging::init(format);
            bench::run(&args)
        }
        Command::BenchBaseline { port, baseline } => {
            genmcp_cli::logging::init(format);
            genmcp_cli::bench::baseline_cli(port, baseline.into())
        }
    }
}

/// `genmcp serve` with its logging and, when asked for (`--otlp` or the
/// `OTEL_*` variables), OTLP export, flushed at exit.
fn serve_with_telemetry(format: LogFormat, args: serve_args::ServeArgs) -> ExitCode {
    if let Err(e) = genmcp_cli::logging::init_with_otlp(format, args.otlp.as_deref()) {
        eprintln!("genmcp: {e}");
        return ExitCode::from(2);
    }
    let code = serve::run(args);
    // Sends the spans and metrics still buffered.
    genmcp_cli::logging::shutdown_export();
    code
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn each_baseline_flag_value_is_the_name_the_bench_passes_on() {
        // `genmcp bench` starts `genmcp bench-baseline --baseline NAME`.
        use clap::ValueEnum;
        for value in super::BenchBaseline::value_variants() {
            let flag = value.to_possible_value().map(|v| v.get_name().to_owned());
            let name = genmcp_cli::bench::Baseline::from(*value).name();
            assert_eq!(flag.as_deref(), Some(name));
        }
    }
}
