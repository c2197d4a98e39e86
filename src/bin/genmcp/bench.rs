//! The flags of `genmcp bench`, mapped onto `apps::bench::BenchConfig`.

use std::num::{NonZeroU32, NonZeroUsize};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use genmcp::apps::bench::{BenchConfig, Kind, Mode};

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
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

/// Runs `genmcp bench`, starting servers from this very binary.
pub(crate) fn run(args: &BenchArgs) -> ExitCode {
    match std::env::current_exe() {
        Ok(exe) => genmcp::apps::bench::cli(args.config(), &exe),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
