//! The flags of `genmcp bench`, mapped onto `apps::bench::BenchConfig`.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use genmcp::apps::bench::{BenchConfig, Kind, Mode, Outputs};

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// What to measure.
    #[arg(long, value_enum, default_value_t = BenchMode::Throughput)]
    mode: BenchMode,
    /// Which notification the streams receive.
    #[arg(long, value_enum, default_value_t = BenchKind::Tools)]
    kind: BenchKind,
    /// Concurrent streams (default 100). Above about 10,000 the bench raises
    /// its open-file limit (or says what to run) and spreads its connections
    /// over many loopback source addresses.
    #[arg(long, value_name = "S")]
    streams: Option<NonZeroUsize>,
    /// Events per stream (default: throughput 1,000,000 / S; latency 10 s
    /// at --rate, at most 1,000; memory: none, with K one burst of K events
    /// that every stream reads before its memory is read idle).
    #[arg(long, value_name = "K")]
    events: Option<NonZeroUsize>,
    /// Rounds; each measures baseline then genmcp (default 3).
    #[arg(long, value_name = "R")]
    rounds: Option<NonZeroUsize>,
    /// Events per second in latency mode (default 20,000 / S, between 1
    /// and 200: a frame rate the client and both servers keep up with).
    #[arg(long, value_name = "N")]
    rate: Option<NonZeroU32>,
    /// Threads of the load generator (default: half the cores, 1 to 4).
    #[arg(long, value_name = "N")]
    client_threads: Option<NonZeroUsize>,
    /// Write every round, the summary, the command line, versions and
    /// machine facts to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// After the run, print the change of each summary figure against an
    /// earlier --json FILE (before, after, after/before).
    #[arg(long, value_name = "FILE")]
    compare: Option<PathBuf>,
    /// Draw the rounds (throughput or memory per round; latency
    /// percentiles) to FILE as SVG, genmcp beside the baseline.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
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
        let mode = match self.mode {
            BenchMode::Throughput => Mode::Throughput,
            BenchMode::Latency => Mode::Latency,
            BenchMode::Memory => Mode::Memory,
        };
        let streams = self.streams.map_or(100, NonZeroUsize::get);
        let mut cfg = BenchConfig::new(mode, streams);
        if let Some(n) = self.rate {
            // The default event count follows the rate.
            cfg = BenchConfig::with_rate(mode, streams, n.get());
        }
        cfg.kind = match self.kind {
            BenchKind::Tools => Kind::Tools,
            BenchKind::Resources => Kind::Resources,
        };
        if let Some(n) = self.events {
            cfg.events = n.get();
        }
        if let Some(n) = self.rounds {
            cfg.rounds = n.get();
        }
        if let Some(n) = self.client_threads {
            cfg.client_threads = n.get();
        }
        cfg.url.clone_from(&self.url);
        cfg.pid = self.pid;
        cfg.cross_node.clone_from(&self.cross_node);
        cfg
    }
}

/// Runs `genmcp bench`, starting servers from this very binary.
pub(crate) fn run(args: &BenchArgs) -> ExitCode {
    match std::env::current_exe() {
        Ok(exe) => {
            let mut outputs = Outputs::default();
            outputs.json.clone_from(&args.json);
            outputs.compare.clone_from(&args.compare);
            outputs.plot.clone_from(&args.plot);
            outputs.command = std::env::args().collect();
            genmcp::apps::bench::cli(args.config(), &exe, &outputs)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
