//! One measurement of one server (or of a set of nodes) in one mode.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::load::{self, Arrivals, Listen, Progress};
use super::progress::Ticker;
use super::{BenchConfig, Kind, Mode, Sample};

/// A run that counts no new frame for this long has stalled.
const STALL: Duration = Duration::from_secs(60);

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

/// Resident memory stops counting as falling when it has not gone below its
/// lowest reading by more than this fraction for [`SETTLE_QUIET`].
const SETTLE_SLACK: f64 = 0.002;
/// How long resident memory must hold still to count as settled.
const SETTLE_QUIET: Duration = Duration::from_secs(2);
/// The longest memory mode waits for resident memory to settle.
const SETTLE_MAX: Duration = Duration::from_secs(30);

/// The resident memory of `pid` (KiB) once it has stopped falling: read every
/// 250 ms until no reading for [`SETTLE_QUIET`] went below the lowest so far
/// by more than [`SETTLE_SLACK`], at most [`SETTLE_MAX`]. An allocator that
/// returns freed pages on a timer (jemalloc's decay, mimalloc's purge delay)
/// is read after it has returned them, not half-way.
async fn settled_resident_kib(pid: &str) -> u64 {
    let start = Instant::now();
    let mut low = resident_kib_of(pid);
    let mut since = Instant::now();
    while start.elapsed() < SETTLE_MAX && since.elapsed() < SETTLE_QUIET {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = resident_kib_of(pid);
        if (now as f64) < low as f64 * (1.0 - SETTLE_SLACK) {
            since = Instant::now();
        }
        low = low.min(now);
    }
    low
}

/// CPU time this process has used (user + system, all threads), from
/// `/proc/self/stat` (Linux, in 10 ms ticks), or `None`.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Cores this process kept busy since `before` was read, `elapsed` ago.
fn cores_busy(before: Option<Duration>, elapsed: Duration) -> f64 {
    match (before, cpu_time()) {
        (Some(a), Some(b)) => b.saturating_sub(a).as_secs_f64() / elapsed.as_secs_f64(),
        _ => 0.0,
    }
}

fn percentile(sorted: &[u32], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    Duration::from_micros(u64::from(sorted[i.min(sorted.len() - 1)]))
}

/// Opens `n` listens spread evenly over `addrs`.
async fn open_spread(
    addrs: &[SocketAddr],
    path: &str,
    n: usize,
    kind: Kind,
    progress: &Progress,
) -> std::io::Result<Vec<Listen>> {
    let mut all = Vec::with_capacity(n);
    for (i, addr) in addrs.iter().enumerate() {
        let share = n / addrs.len() + usize::from(i < n % addrs.len());
        all.extend(load::open_many(*addr, path, share, kind, progress).await?);
    }
    if addrs.len() > 1 {
        // The nodes subscribe to Redis as their first listen arrives; give
        // that round trip time before the first event.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(all)
}

/// Memory mode with `--events K`: one burst of K events to every open
/// stream, each read in full, the streams kept open (idle again).
async fn burst_and_drain(
    cfg: &BenchConfig,
    addr: SocketAddr,
    path: &str,
    streams: &mut [Listen],
    progress: &Arc<Progress>,
) -> std::io::Result<()> {
    if cfg.events == 0 {
        return Ok(());
    }
    let readers = streams
        .iter_mut()
        .map(|s| s.receive_more(cfg.events, None, progress.clone()));
    let (_, received) = tokio::try_join!(
        load::burst(addr, path, cfg.events, cfg.kind),
        futures_util::future::try_join_all(readers),
    )?;
    drop(received);
    Ok(())
}

type Readers = Vec<JoinHandle<std::io::Result<Arrivals>>>;

fn spawn_readers(
    streams: Vec<Listen>,
    want: usize,
    epoch: Option<Instant>,
    progress: &Arc<Progress>,
) -> Readers {
    streams
        .into_iter()
        .map(|s| tokio::spawn(s.receive(want, epoch, progress.clone())))
        .collect()
}

/// Waits for every reader; fails when no frame arrived for [`STALL`].
async fn wait_all(
    readers: Readers,
    progress: &Progress,
    total: u64,
) -> std::io::Result<Vec<Arrivals>> {
    let all = futures_util::future::join_all(readers);
    tokio::pin!(all);
    let mut last = (progress.frames.load(Ordering::Relaxed), Instant::now());
    loop {
        tokio::select! {
            results = &mut all => {
                return results
                    .into_iter()
                    .map(|r| r.map_err(std::io::Error::other)?)
                    .collect();
            }
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                let now = progress.frames.load(Ordering::Relaxed);
                if now != last.0 {
                    last = (now, Instant::now());
                } else if last.1.elapsed() > STALL {
                    return Err(std::io::Error::other(format!(
                        "stalled: no frame for {} s after {now} of {total}",
                        STALL.as_secs()
                    )));
                }
            }
        }
    }
}

/// Measures once with the listens spread over `listen_at` and `burst` called
/// on `burst_at` (the same server, or, across nodes, another one); `pid` is
/// read in memory mode; `label` names the measurement on the progress line.
pub fn measure_across(
    cfg: &BenchConfig,
    listen_at: &[SocketAddr],
    burst_at: SocketAddr,
    path: &str,
    pid: Option<u32>,
    label: &str,
) -> std::io::Result<Sample> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.client_threads.max(1))
        .enable_all()
        .build()?;
    let progress = Progress::shared();
    let total = (cfg.streams * cfg.events) as u64;
    let _ticker = cfg.live_progress.then(|| {
        let want = if cfg.mode == Mode::Memory { 0 } else { total };
        Ticker::start(label.to_owned(), progress.clone(), cfg.streams, want)
    });
    rt.block_on(async {
        match cfg.mode {
            Mode::Throughput => {
                let streams =
                    open_spread(listen_at, path, cfg.streams, cfg.kind, &progress).await?;
                let cpu_before = cpu_time();
                let start = Instant::now();
                let readers = spawn_readers(streams, cfg.events, None, &progress);
                load::burst(burst_at, path, cfg.events, cfg.kind).await?;
                wait_all(readers, &progress, total).await?;
                let elapsed = start.elapsed();
                let client_cpu = cores_busy(cpu_before, elapsed);
                Ok(Sample {
                    frames_per_sec: total as f64 / elapsed.as_secs_f64(),
                    frames: total,
                    elapsed,
                    client_cpu,
                    ..Sample::default()
                })
            }
            Mode::Latency => {
                let streams =
                    open_spread(listen_at, path, cfg.streams, cfg.kind, &progress).await?;
                let cpu_before = cpu_time();
                let epoch = Instant::now();
                let readers = spawn_readers(streams, cfg.events, Some(epoch), &progress);
                let period = Duration::from_secs_f64(1.0 / f64::from(cfg.rate.max(1)));
                let mut sent = Vec::with_capacity(cfg.events);
                let mut next = Instant::now();
                for _ in 0..cfg.events {
                    tokio::time::sleep_until(next.into()).await;
                    sent.push(u32::try_from(epoch.elapsed().as_micros()).unwrap_or(u32::MAX));
                    load::burst(burst_at, path, 1, cfg.kind).await?;
                    next += period;
                }
                let arrivals = wait_all(readers, &progress, total).await?;
                let elapsed = epoch.elapsed();
                let client_cpu = cores_busy(cpu_before, elapsed);
                let mut all = Vec::with_capacity(cfg.streams * cfg.events);
                for times in arrivals {
                    all.extend(
                        times
                            .iter()
                            .zip(&sent)
                            .map(|(got, at)| got.saturating_sub(*at)),
                    );
                }
                all.sort_unstable();
                Ok(Sample {
                    frames: total,
                    elapsed,
                    client_cpu,
                    p50: percentile(&all, 0.50),
                    p90: percentile(&all, 0.90),
                    p99: percentile(&all, 0.99),
                    p999: percentile(&all, 0.999),
                    max: percentile(&all, 1.0),
                    ..Sample::default()
                })
            }
            Mode::Memory => {
                let pid = pid
                    .ok_or_else(|| std::io::Error::other("memory mode needs the server's pid"))?
                    .to_string();
                // One stream first (and, with events, one burst), so one-time
                // allocations are not counted.
                let mut warm = load::open_many(burst_at, path, 1, cfg.kind, &progress).await?;
                burst_and_drain(cfg, burst_at, path, &mut warm, &progress).await?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let before = resident_kib_of(&pid);
                let start = Instant::now();
                let more = cfg.streams.saturating_sub(1).max(1);
                let mut streams =
                    load::open_many(burst_at, path, more, cfg.kind, &progress).await?;
                let elapsed = start.elapsed();
                // With events: every stream (the warm one too) gets a burst,
                // reads it all, and is idle again when memory is read.
                streams.append(&mut warm);
                burst_and_drain(cfg, burst_at, path, &mut streams, &progress).await?;
                let after = settled_resident_kib(&pid).await;
                drop(streams);
                Ok(Sample {
                    kib_per_stream: after.saturating_sub(before) as f64 / more as f64,
                    elapsed,
                    ..Sample::default()
                })
            }
        }
    })
}
