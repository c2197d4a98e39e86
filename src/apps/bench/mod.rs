//! The stream benchmark behind `genmcp bench`.
//!
//! An external load generator (one client thread, real loopback HTTP) drives
//! two servers with the same load, each a fresh process started by the bench:
//!
//! - **baseline**: `genmcp bench-baseline`, raw actix-web SSE writing
//!   pre-encoded frames from a bounded channel straight into each response
//!   body ([`baseline`]);
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
//! p50 / p99), `memory` (S idle streams; the server's resident memory per
//! stream). The ratio genmcp / baseline measured in the same run is what
//! compares across machines and commits.

pub mod baseline;
pub mod fanout;
pub mod load;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Which notification the streams receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/resources/updated` for one URI every stream subscribed to.
    Resources,
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

/// What to measure, and against what.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BenchConfig {
    /// Concurrent streams (default 100).
    pub streams: usize,
    /// Events per stream (default 1,000).
    pub events: usize,
    /// Rounds; each measures baseline then genmcp (default 3).
    pub rounds: usize,
    /// Notification kind (default tools).
    pub kind: Kind,
    /// Mode (default throughput).
    pub mode: Mode,
    /// Events per second in latency mode (default 200).
    pub rate: u32,
    /// Drive this server instead of starting baseline and genmcp.
    pub url: Option<String>,
    /// The process to read resident memory from, with `url` in memory mode.
    pub pid: Option<u32>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            streams: 100,
            events: 1_000,
            rounds: 3,
            kind: Kind::Tools,
            mode: Mode::Throughput,
            rate: 200,
            url: None,
            pid: None,
        }
    }
}

/// One measurement of one server.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// Frames received per second, all streams together (throughput mode).
    pub frames_per_sec: f64,
    /// Median publish-to-receive latency (latency mode).
    pub p50: Duration,
    /// 99th percentile publish-to-receive latency (latency mode).
    pub p99: Duration,
    /// Server resident memory per open stream, KiB (memory mode).
    pub kib_per_stream: f64,
}

/// The figure a mode compares: larger is better for throughput, smaller for
/// latency (p50) and memory.
fn figure(mode: Mode, s: &Sample) -> f64 {
    match mode {
        Mode::Throughput => s.frames_per_sec,
        Mode::Latency => s.p50.as_secs_f64(),
        Mode::Memory => s.kib_per_stream,
    }
}

/// The process's resident memory in KiB (Linux, from `/proc/<pid>/status`), or 0.
pub fn resident_kib_of(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// This process's resident memory in KiB, or 0 where not available.
pub fn resident_kib() -> u64 {
    resident_kib_of("self")
}

/// A server process started for one measurement, killed when dropped.
struct ServerProcess {
    child: Child,
    addr: SocketAddr,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn start(exe: &std::path::Path, args: &[&str]) -> std::io::Result<ServerProcess> {
    let port = free_port()?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .args(["--port", &port.to_string()])
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let child = cmd.spawn()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let process = ServerProcess { child, addr };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            return Err(std::io::Error::other(format!("{args:?} did not start")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(process)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Measures the server at `addr` (`path` is its MCP endpoint) once;
/// `pid` is read for memory mode.
pub fn measure(
    cfg: &BenchConfig,
    addr: SocketAddr,
    path: &str,
    pid: Option<u32>,
) -> std::io::Result<Sample> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match cfg.mode {
            Mode::Throughput => {
                let streams = load::open_many(addr, path, cfg.streams, cfg.kind).await?;
                let start = Instant::now();
                let readers: Vec<_> = streams
                    .into_iter()
                    .map(|s| tokio::spawn(s.receive(cfg.events, false)))
                    .collect();
                load::burst(addr, path, cfg.events, cfg.kind).await?;
                for r in readers {
                    r.await.map_err(std::io::Error::other)??;
                }
                let elapsed = start.elapsed().as_secs_f64();
                Ok(Sample {
                    frames_per_sec: (cfg.streams * cfg.events) as f64 / elapsed,
                    ..Sample::default()
                })
            }
            Mode::Latency => {
                let streams = load::open_many(addr, path, cfg.streams, cfg.kind).await?;
                let readers: Vec<_> = streams
                    .into_iter()
                    .map(|s| tokio::spawn(s.receive(cfg.events, true)))
                    .collect();
                let period = Duration::from_secs_f64(1.0 / f64::from(cfg.rate.max(1)));
                let mut sent = Vec::with_capacity(cfg.events);
                let mut next = Instant::now();
                for _ in 0..cfg.events {
                    tokio::time::sleep_until(next.into()).await;
                    sent.push(Instant::now());
                    load::burst(addr, path, 1, cfg.kind).await?;
                    next += period;
                }
                let mut all = Vec::with_capacity(cfg.streams * cfg.events);
                for r in readers {
                    let times = r.await.map_err(std::io::Error::other)??;
                    all.extend(times.iter().zip(&sent).map(|(got, at)| *got - *at));
                }
                all.sort();
                Ok(Sample {
                    p50: percentile(&all, 0.50),
                    p99: percentile(&all, 0.99),
                    ..Sample::default()
                })
            }
            Mode::Memory => {
                let pid = pid
                    .ok_or_else(|| std::io::Error::other("memory mode needs the server's pid"))?
                    .to_string();
                // One stream first, so one-time allocations are not counted.
                let warm = load::open_many(addr, path, 1, cfg.kind).await?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let before = resident_kib_of(&pid);
                let more = cfg.streams.saturating_sub(1).max(1);
                let streams = load::open_many(addr, path, more, cfg.kind).await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
                let after = resident_kib_of(&pid);
                drop((warm, streams));
                Ok(Sample {
                    kib_per_stream: after.saturating_sub(before) as f64 / more as f64,
                    ..Sample::default()
                })
            }
        }
    })
}

/// One round: baseline and genmcp, each in a fresh process, back to back.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    /// Raw SSE on actix-web.
    pub baseline: Sample,
    /// `genmcp serve`.
    pub genmcp: Sample,
}

/// Runs `cfg.rounds` rounds; `exe` is the genmcp binary.
pub fn run(exe: &std::path::Path, cfg: &BenchConfig) -> std::io::Result<Vec<Round>> {
    let one = |args: &[&str]| -> std::io::Result<Sample> {
        let server = start(exe, args)?;
        measure(cfg, server.addr, "/mcp", Some(server.child.id()))
    };
    (0..cfg.rounds)
        .map(|_| {
            Ok(Round {
                baseline: one(&["bench-baseline"])?,
                genmcp: one(&["serve"])?,
            })
        })
        .collect()
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Throughput => "throughput",
        Mode::Latency => "latency",
        Mode::Memory => "memory",
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Tools => "tools/list_changed",
        Kind::Resources => "resources/updated",
    }
}

fn cell(mode: Mode, s: &Sample) -> String {
    match mode {
        Mode::Throughput => format!("{:.0} frames/s", s.frames_per_sec),
        Mode::Latency => format!(
            "p50 {:.2} ms, p99 {:.2} ms",
            s.p50.as_secs_f64() * 1e3,
            s.p99.as_secs_f64() * 1e3
        ),
        Mode::Memory => format!("{:.1} KiB/stream", s.kib_per_stream),
    }
}

/// The rounds as a table, with the median ratio genmcp / baseline.
pub fn report(cfg: &BenchConfig, rounds: &[Round]) -> String {
    let mut out = format!(
        "{} · {} streams × {} events · {} · {} rounds\nround | baseline (raw SSE) | genmcp | ratio genmcp/baseline\n",
        mode_name(cfg.mode),
        cfg.streams,
        cfg.events,
        kind_name(cfg.kind),
        rounds.len()
    );
    let mut ratios = Vec::new();
    for (i, r) in rounds.iter().enumerate() {
        let ratio = figure(cfg.mode, &r.genmcp) / figure(cfg.mode, &r.baseline);
        ratios.push(ratio);
        out.push_str(&format!(
            "{} | {} | {} | {:.2}\n",
            i + 1,
            cell(cfg.mode, &r.baseline),
            cell(cfg.mode, &r.genmcp),
            ratio
        ));
    }
    ratios.sort_by(|a, b| a.total_cmp(b));
    if let Some(m) = ratios.get(ratios.len() / 2) {
        out.push_str(&format!("median ratio genmcp/baseline: {m:.2}\n"));
    }
    out
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

/// `genmcp bench ...`: runs and prints the report. `exe` is the `genmcp`
/// binary to start servers from.
pub fn cli(cfg: BenchConfig, exe: &std::path::Path) -> ExitCode {
    if let Some(url) = &cfg.url {
        let (addr, path) = match parse_url(url) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        for round in 1..=cfg.rounds {
            match measure(&cfg, addr, &path, cfg.pid) {
                Ok(s) => println!("{round} | {url} | {}", cell(cfg.mode, &s)),
                Err(e) => {
                    eprintln!("benchmark failed: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        return ExitCode::SUCCESS;
    }
    match run(exe, &cfg) {
        Ok(rounds) => {
            print!("{}", report(&cfg, &rounds));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `genmcp bench-baseline --port P`: the raw SSE baseline server.
pub fn baseline_cli(port: u16) -> ExitCode {
    match baseline::serve(port, 2) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
