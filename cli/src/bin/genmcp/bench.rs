//! The flags of `genmcp bench`, mapped onto `genmcp_cli::bench::BenchConfig`.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use genmcp_cli::bench::tasks::{DEFAULT_TASKS, TasksConfig};
use genmcp_cli::bench::{Baseline, BenchConfig, Kind, Mode, Outputs};

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// What to measure.
    #[arg(long, value_enum, default_value_t = BenchMode::Throughput)]
    mode: BenchMode,
    /// Which notification the streams receive.
    #[arg(long, value_enum, default_value_t = BenchKind::Tools)]
    kind: BenchKind,
    /// The server genmcp is compared with: the raw SSE server, or the same
    /// with an actix actor per stream between the event source and the body
    /// (what the actor per stream costs with none of genmcp's work).
    #[arg(long, value_enum, default_value_t = BenchBaseline::Raw, conflicts_with_all = ["url", "cross_node"])]
    baseline: BenchBaseline,
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
    /// server (or Redis Cluster, redis+cluster://HOST:PORT,...) and compare
    /// one node with three (burst on node 1, listens on nodes 2 and 3);
    /// throughput or latency.
    #[arg(long, value_name = "REDIS_URL", conflicts_with = "url")]
    cross_node: Option<String>,
    /// Tasks mode: finished tasks per round (default 100,000).
    #[arg(long, value_name = "N")]
    tasks: Option<NonZeroUsize>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BenchMode {
    /// Frames per second, all streams together.
    Throughput,
    /// Publish-to-receive latency at a fixed rate.
    Latency,
    /// Resident memory per idle open stream.
    Memory,
    /// Resident memory per finished task kept (against the same server
    /// idle); one `genmcp serve --conformance` per round.
    Tasks,
}

/// `--baseline` of `genmcp bench` and `genmcp bench-baseline`; its values are
/// [`Baseline::name`]s.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum BenchBaseline {
    /// Raw SSE on actix-web.
    Raw,
    /// Raw SSE with an actix actor per stream taking every frame ready per
    /// wake-up.
    ActorHop,
    /// The same actor taking its inbox as a `StreamHandler`, the usual actix
    /// way.
    ActorHopHandler,
}

impl From<BenchBaseline> for Baseline {
    fn from(b: BenchBaseline) -> Baseline {
        match b {
            BenchBaseline::Raw => Baseline::Raw,
            BenchBaseline::ActorHop => Baseline::ActorHop,
            BenchBaseline::ActorHopHandler => Baseline::ActorHopHandler,
        }
    }
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
            BenchMode::Memory | BenchMode::Tasks => Mode::Memory,
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
        cfg.baseline = self.baseline.into();
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

    /// The flags of the stream modes given with `--mode tasks` (or
    /// `--tasks` without it).
    fn misplaced_flags(&self) -> Vec<&'static str> {
        let tasks = matches!(self.mode, BenchMode::Tasks);
        if !tasks {
            return if self.tasks.is_some() {
                vec!["--tasks"]
            } else {
                Vec::new()
            };
        }
        [
            ("--kind", !matches!(self.kind, BenchKind::Tools)),
            ("--baseline", !matches!(self.baseline, BenchBaseline::Raw)),
            ("--streams", self.streams.is_some()),
            ("--events", self.events.is_some()),
            ("--rate", self.rate.is_some()),
            ("--json", self.json.is_some()),
            ("--compare", self.compare.is_some()),
            ("--plot", self.plot.is_some()),
            ("--url", self.url.is_some()),
            ("--cross-node", self.cross_node.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    fn tasks_config(&self) -> TasksConfig {
        let mut cfg = TasksConfig::new(self.tasks.map_or(DEFAULT_TASKS, NonZeroUsize::get));
        if let Some(n) = self.rounds {
            cfg.rounds = n.get();
        }
        if let Some(n) = self.client_threads {
            cfg.client_threads = n.get();
        }
        cfg
    }
}

/// Runs `genmcp bench`, starting servers from this very binary.
pub(crate) fn run(args: &BenchArgs) -> ExitCode {
    let misplaced = args.misplaced_flags();
    if !misplaced.is_empty() {
        let (these, mode) = if matches!(args.mode, BenchMode::Tasks) {
            (misplaced.join(", "), "the stream modes")
        } else {
            ("--tasks".to_owned(), "--mode tasks")
        };
        eprintln!("error: {these}: only with {mode}");
        return ExitCode::from(2);
    }
    match std::env::current_exe() {
        Ok(exe) if matches!(args.mode, BenchMode::Tasks) => {
            genmcp_cli::bench::tasks::cli(&args.tasks_config(), &exe)
        }
        Ok(exe) => {
            let mut outputs = Outputs::default();
            outputs.json.clone_from(&args.json);
            outputs.compare.clone_from(&args.compare);
            outputs.plot.clone_from(&args.plot);
            outputs.command = std::env::args().collect();
            genmcp_cli::bench::cli(args.config(), &exe, &outputs)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
