//! The stream benchmark behind `genmcp bench`.
//!
//! An external load generator (real loopback HTTP, [`load`]) drives two
//! servers with the same load, each a fresh process started by the bench:
//!
//! - **baseline**: `genmcp bench-baseline`, raw actix-web SSE writing
//!   pre-encoded frames from a bounded channel straight into each response
//!   body ([`baseline`]); with `--baseline actor-hop` the same server with a
//!   bare actix actor per stream between `burst` and the body, to measure what
//!   the actor per stream costs on its own;
//! - **genmcp**: `genmcp serve`, the notes demo, whose `burst` tool publishes on
//!   the embedded bus: one `Stream` actor per listen, `handle_message`,
//!   the filter check, a notification encoded once per fan-out, the outbox and
//!   the SSE writer.
//!
//! Both implement the *burst contract*: `subscriptions/listen` opens an SSE
//! stream that starts with an acknowledgement; `tools/call` of `burst` with
//! `{"count": K}` (or `{"count": K, "kind": "resources", "uri": U}`) hands K
//! `notifications/tools/list_changed` (or `resources/updated` for U) to every
//! open stream, in order, waiting for room, and answers once all were handed
//! over. `--url` drives any server that implements it.
//!
//! Modes: `throughput` (S streams × K events, frames per second), `latency`
//! (one event at a time at a fixed rate below saturation; publish-to-receive
//! percentiles), `memory` (S idle streams, optionally after one burst of K
//! events each; the server's resident memory per stream). The ratio genmcp / baseline measured in the same run is what
//! compares across machines and commits. With `--cross-node REDIS_URL`
//! (throughput or latency) the comparison is one `genmcp serve --bus` node
//! against three sharing the Redis server, `burst` on node 1 and the listens
//! on nodes 2 and 3.
//!
//! `genmcp bench --mode tasks` ([`tasks`]) is of another kind: one server,
//! the resident memory of N finished tasks against the same server idle.
//!
//! A run can be kept as JSON ([`json`]), compared with an earlier one
//! ([`json::compare`]) and drawn ([`plot`]).

pub mod baseline;
pub mod counter;
pub mod fanout;
mod hop;
pub mod json;
pub mod load;
pub mod measure;
pub mod plot;
pub mod progress;
pub mod report;
pub mod servers;
pub mod source;
pub mod tasks;

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

pub use measure::{measure_across, resident_kib_of};
pub use report::{Results, report};

/// Which notification the streams receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/resources/updated` for one URI every stream subscribed to.
    Resources,
}

/// The server genmcp is measured against (`genmcp bench --baseline`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Baseline {
    /// Raw SSE on actix-web: pre-encoded frames from one bounded channel per
    /// stream straight into its body (`genmcp bench-baseline`).
    #[default]
    Raw,
    /// The same, with an actix actor per stream between `burst` and the body
    /// that takes every frame ready, up to 256 a wake-up, as genmcp's feed
    /// does (`genmcp bench-baseline --baseline actor-hop`): what an actor per stream
    /// costs with none of genmcp's work.
    ActorHop,
    /// The same actor taking its inbox the usual actix way, as a stream added
    /// to its context (`genmcp bench-baseline --baseline actor-hop-handler`; actix polls it
    /// 16 items at a time).
    ActorHopHandler,
}

impl Baseline {
    /// The baseline's name: the value of `--baseline` (of `genmcp bench` and
    /// `genmcp bench-baseline`) and of `config.baseline` in a `--json` file.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Raw => "raw",
            Baseline::ActorHop => "actor-hop",
            Baseline::ActorHopHandler => "actor-hop-handler",
        }
    }

    /// The style of the actor hop, for the hop baselines.
    pub(crate) fn hop(self) -> Option<hop::Style> {
        match self {
            Baseline::Raw => None,
            Baseline::ActorHop => Some(hop::Style::Drain),
            Baseline::ActorHopHandler => Some(hop::Style::Handler),
        }
    }
}

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Frames per second, all streams together.
    Throughput,
    /// Publish-to-receive latency at a fixed rate.
    Latency,
    /// Resident memory per idle open stream.
    Memory,
}

/// Notifications per throughput round when `--events` is not given: long
/// enough (hundreds of milliseconds) that start-up and the last stragglers do
/// not pull every ratio towards 1.
pub const THROUGHPUT_NOTIFICATIONS: usize = 1_000_000;
/// Frames per second the latency mode asks for by default (events per second
/// × streams), at most 200 events per second: well below what the client
/// and either server handle, so the figure is latency, not queueing. (At
/// 10,000 streams: 2 events per second, each a fan-out of 10,000 frames.)
pub const LATENCY_FRAMES_PER_SEC: usize = 20_000;

/// What to measure, and against what.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BenchConfig {
    /// Concurrent streams (default 100).
    pub streams: usize,
    /// Events per stream (default: throughput 1,000,000 / streams; latency
    /// 10 s of events, at most 1,000; memory 0: with K, one burst of K
    /// events every stream reads before memory is read, idle).
    pub events: usize,
    /// Rounds; each measures baseline then genmcp (default 3).
    pub rounds: usize,
    /// Notification kind (default tools).
    pub kind: Kind,
    /// The server genmcp is compared with (default the raw SSE server).
    pub baseline: Baseline,
    /// Mode (default throughput).
    pub mode: Mode,
    /// Events per second in latency mode (default 20,000 / streams, between
    /// 1 and 200).
    pub rate: u32,
    /// Drive this server instead of starting baseline and genmcp.
    pub url: Option<String>,
    /// The process to read resident memory from, with `url` in memory mode.
    pub pid: Option<u32>,
    /// Cross-node mode (throughput or latency): the Redis server
    /// (`redis://HOST:PORT`) that three `genmcp serve --bus` nodes share; each
    /// round measures one node alone (listens and `burst` on it), then three
    /// (`burst` on node 1, the listens split over nodes 2 and 3). Default none.
    pub cross_node: Option<String>,
    /// Threads of the load generator (default: half the cores, 1 to 4; on
    /// 2 cores one thread leaves more to the server and measured faster).
    pub client_threads: usize,
    /// Rewrite a progress line on stderr while measuring (default: when
    /// stderr is a terminal).
    pub live_progress: bool,
}

impl BenchConfig {
    /// The defaults of `mode` for `streams` streams: events per stream and
    /// the latency rate follow from them (see the fields).
    pub fn new(mode: Mode, streams: usize) -> BenchConfig {
        let rate = (LATENCY_FRAMES_PER_SEC / streams.max(1)).clamp(1, 200) as u32;
        BenchConfig::with_rate(mode, streams, rate)
    }

    /// [`BenchConfig::new`] with latency events at `rate` per second (the
    /// default event count of latency mode follows the rate).
    pub fn with_rate(mode: Mode, streams: usize, rate: u32) -> BenchConfig {
        let streams = streams.max(1);
        let events = match mode {
            Mode::Throughput => (THROUGHPUT_NOTIFICATIONS / streams).max(1),
            Mode::Latency => (rate.max(1) as usize * 10).min(1_000),
            Mode::Memory => 0,
        };
        BenchConfig {
            streams,
            events,
            rounds: 3,
            kind: Kind::Tools,
            baseline: Baseline::Raw,
            mode,
            rate,
            url: None,
            pid: None,
            cross_node: None,
            client_threads: default_client_threads(),
            live_progress: std::io::stderr().is_terminal(),
        }
    }
}

/// Half the cores, 1 to 4.
fn default_client_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4))
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig::new(Mode::Throughput, 100)
    }
}

/// One measurement of one server.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// Frames received per second, all streams together (throughput mode).
    pub frames_per_sec: f64,
    /// Frames received, all streams together (throughput, latency).
    pub frames: u64,
    /// How long the measurement took: the burst until the last frame
    /// (throughput), the first event until the last frame (latency),
    /// opening the streams (memory).
    pub elapsed: Duration,
    /// CPU the load generator used while receiving, in cores (throughput,
    /// latency; 1.0 = one core busy all the time). Its capacity is about
    /// `frames / elapsed / client_cpu` frames per second.
    pub client_cpu: f64,
    /// Median publish-to-receive latency (latency mode).
    pub p50: Duration,
    /// 90th percentile (latency mode).
    pub p90: Duration,
    /// 99th percentile (latency mode).
    pub p99: Duration,
    /// 99.9th percentile (latency mode).
    pub p999: Duration,
    /// The slowest frame (latency mode).
    pub max: Duration,
    /// Server resident memory per open stream, KiB (memory mode).
    pub kib_per_stream: f64,
}

/// The figure a mode compares: larger is better for throughput, smaller for
/// latency (p50) and memory.
pub fn figure(mode: Mode, s: &Sample) -> f64 {
    match mode {
        Mode::Throughput => s.frames_per_sec,
        Mode::Latency => s.p50.as_secs_f64(),
        Mode::Memory => s.kib_per_stream,
    }
}

/// This process's resident memory in KiB, or 0 where not available.
pub fn resident_kib() -> u64 {
    resident_kib_of("self")
}

/// Measures the server at `addr` (`path` is its MCP endpoint) once;
/// `pid` is read for memory mode.
pub fn measure(
    cfg: &BenchConfig,
    addr: SocketAddr,
    path: &str,
    pid: Option<u32>,
) -> std::io::Result<Sample> {
    measure_across(cfg, &[addr], addr, path, pid, &addr.to_string())
}

/// One round: baseline and genmcp, each in a fresh process, back to back.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    /// Raw SSE on actix-web.
    pub baseline: Sample,
    /// `genmcp serve`.
    pub genmcp: Sample,
}

/// Prints the plain per-round line on stderr.
fn round_done(cfg: &BenchConfig, i: usize, columns: &[(&str, &Sample)]) {
    let cells: Vec<String> = columns
        .iter()
        .map(|(name, s)| format!("{name} {}", report::cell(cfg.mode, s)))
        .collect();
    eprintln!("round {}/{}: {}", i + 1, cfg.rounds, cells.join(", "));
}

/// Cross-node rounds: one `genmcp serve --bus URL` node alone (in
/// [`Round::baseline`]), then three sharing the Redis server (in
/// [`Round::genmcp`]), each a fresh set of processes.
fn run_cross_node(exe: &Path, cfg: &BenchConfig, url: &str) -> std::io::Result<Vec<Round>> {
    if cfg.mode == Mode::Memory {
        return Err(std::io::Error::other(
            "--cross-node measures throughput or latency",
        ));
    }
    let node = || servers::start(exe, &["serve", "--bus", url], &[]);
    (0..cfg.rounds)
        .map(|i| {
            let round = format!("round {}/{}", i + 1, cfg.rounds);
            let single = {
                let n = node()?;
                measure_across(
                    cfg,
                    &[n.addr],
                    n.addr,
                    "/mcp",
                    None,
                    &format!("{round} · one node"),
                )?
            };
            let nodes = [node()?, node()?, node()?];
            let cross = measure_across(
                cfg,
                &[nodes[1].addr, nodes[2].addr],
                nodes[0].addr,
                "/mcp",
                None,
                &format!("{round} · three nodes"),
            )?;
            round_done(cfg, i, &[("one node", &single), ("three nodes", &cross)]);
            Ok(Round {
                baseline: single,
                genmcp: cross,
            })
        })
        .collect()
}

/// Runs `cfg.rounds` rounds; `exe` is the genmcp binary.
pub fn run(exe: &Path, cfg: &BenchConfig) -> std::io::Result<Vec<Round>> {
    if let Some(url) = &cfg.cross_node {
        return run_cross_node(exe, cfg, url);
    }
    (0..cfg.rounds)
        .map(|i| {
            let round = format!("round {}/{}", i + 1, cfg.rounds);
            let baseline = {
                let server = servers::baseline(exe, cfg.streams, cfg.baseline)?;
                measure_across(
                    cfg,
                    &[server.addr],
                    server.addr,
                    "/mcp",
                    Some(server.pid()),
                    &format!("{round} · baseline"),
                )?
            };
            let genmcp = {
                let server = servers::genmcp(exe, cfg.streams)?;
                measure_across(
                    cfg,
                    &[server.addr],
                    server.addr,
                    "/mcp",
                    Some(server.pid()),
                    &format!("{round} · genmcp"),
                )?
            };
            round_done(cfg, i, &[("baseline", &baseline), ("genmcp", &genmcp)]);
            Ok(Round { baseline, genmcp })
        })
        .collect()
}

/// Splits `http://host:port/path` into a socket address and a path.
fn parse_url(url: &str) -> Result<(SocketAddr, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("--url must start with http://")?;
    let (host, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/mcp"),
    };
    use std::net::ToSocketAddrs as _;
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("--url: {e}"))?
        .next()
        .ok_or("--url: no address")?;
    Ok((addr, path.to_owned()))
}

/// Where `genmcp bench` writes (or reads) besides its report on stdout.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Outputs {
    /// `--json FILE`: every round, the summary, the command, versions and
    /// machine facts.
    pub json: Option<PathBuf>,
    /// `--compare FILE`: an earlier `--json` file to print the change against.
    pub compare: Option<PathBuf>,
    /// `--plot FILE.svg`: the rounds drawn.
    pub plot: Option<PathBuf>,
    /// The command line, as recorded in the JSON file.
    pub command: Vec<String>,
}

fn measure_url(cfg: &BenchConfig, url: &str) -> Result<Results, String> {
    let (addr, path) = parse_url(url)?;
    let mut samples = Vec::with_capacity(cfg.rounds);
    for i in 0..cfg.rounds {
        let label = format!("round {}/{} · {url}", i + 1, cfg.rounds);
        let s = measure_across(cfg, &[addr], addr, &path, cfg.pid, &label)
            .map_err(|e| format!("benchmark failed: {e}"))?;
        round_done(cfg, i, &[(url, &s)]);
        samples.push(s);
    }
    Ok(Results::single(url, samples))
}

fn run_all(cfg: &BenchConfig, exe: &Path, outputs: &Outputs) -> Result<(), String> {
    // Read the earlier run first: a bad file fails before minutes of work.
    let before = match &outputs.compare {
        Some(path) => Some(json::read(path)?),
        None => None,
    };
    source::ensure_open_files(cfg.streams)?;
    let started = json::now_unix();
    let results = match &cfg.url {
        Some(url) => measure_url(cfg, url)?,
        None => {
            let rounds = run(exe, cfg).map_err(|e| format!("benchmark failed: {e}"))?;
            Results::from_rounds(cfg, &rounds)
        }
    };
    print!("{}", results.table(cfg));
    let doc = json::document(cfg, &results, &outputs.command, started);
    if let Some(path) = &outputs.json {
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some(path) = &outputs.plot {
        let svg = plot::svg(cfg, &results)?;
        std::fs::write(path, svg).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let (Some(before), Some(path)) = (before, &outputs.compare) {
        print!(
            "{}",
            json::compare(&before, &doc, &path.display().to_string())
        );
    }
    Ok(())
}

/// `genmcp bench ...`: runs, prints the report (and writes or compares what
/// `outputs` asks for). `exe` is the `genmcp` binary to start servers from.
pub fn cli(cfg: BenchConfig, exe: &Path, outputs: &Outputs) -> ExitCode {
    match run_all(&cfg, exe, outputs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `genmcp bench-baseline --port P [--baseline KIND]`: the baseline
/// server of `kind`, with `GENMCP_BENCH_WORKERS` workers (default 2).
pub fn baseline_cli(port: u16, kind: Baseline) -> ExitCode {
    let workers = std::env::var(servers::BASELINE_WORKERS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    match baseline::serve(port, workers, kind) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
