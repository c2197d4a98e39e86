//! The stream-throughput benchmark behind `genmcp bench` and `cargo bench`.
//!
//! Two servers run in the same process, each on its own thread, and are driven
//! identically: S SSE streams on loopback, each read by a real client thread,
//! receive K `notifications/tools/list_changed` frames, published with
//! back-pressure (the publisher waits for room, nothing is dropped).
//!
//! - **baseline**: raw SSE on actix-web. Pre-encoded frames go from a bounded
//!   tokio channel straight into the response body: no actors, no handler, no
//!   stamping; the floor for "SSE over actix-web on this machine".
//! - **genmcp**: the full path. `subscriptions/listen` streams (one actor each,
//!   under its connection supervisor), events published on the embedded bus
//!   with `Inbox::send`, `handle_message` → `Channel::send_notification`
//!   (filter check, subscription-id stamping, encoding) → outbox → SSE body.
//!
//! The ratio genmcp/baseline is what to compare across machines and commits; the
//! absolute numbers depend on the (shared, noisy) machine.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use bytes::Bytes;
use serde_json::json;
use tokio::sync::mpsc;

use crate::http::{HttpConfig, ServerThread};
use crate::mux::Channel;
use crate::protocol::{Implementation, Notification, SubscriptionCapabilities, SubscriptionFilter};
use crate::pubsub::{Bus, BusSubscription, Inbox};
use crate::subscription::{Flow, Subscribe, SubscribeCx, SubscriptionHandler};
use crate::suite::Suite;

/// What to measure.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BenchConfig {
    /// Concurrent streams (default 100).
    pub streams: usize,
    /// Events per stream (default 2,000).
    pub events: usize,
    /// Rounds; each round measures baseline then genmcp (default 3).
    pub rounds: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            streams: 100,
            events: 2_000,
            rounds: 3,
        }
    }
}

/// One measurement.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Frames delivered to clients per second (all streams together).
    pub frames_per_sec: f64,
    /// Wall time from the first publish to the last frame read.
    pub elapsed: Duration,
    /// Resident memory the (fresh) process grew by while the S streams were
    /// opened, server and client sockets together, per stream, in KiB (0 where
    /// `/proc/self/status` is not available).
    pub kib_per_stream: f64,
}

/// One round: baseline and genmcp, measured back to back.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    /// Raw SSE on actix-web.
    pub baseline: Sample,
    /// The genmcp stream path.
    pub genmcp: Sample,
}

impl Round {
    /// genmcp throughput / baseline throughput.
    pub fn ratio(&self) -> f64 {
        self.genmcp.frames_per_sec / self.baseline.frames_per_sec
    }
}

const TOPIC: &str = "bench";

struct BenchHandler {
    bus: Bus<()>,
}

impl SubscriptionHandler for BenchHandler {
    type Message = ();
    type State = BusSubscription<()>;

    fn subscribe(
        &self,
        _f: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, ()>,
    ) -> Subscribe<Self::State> {
        Subscribe::Accept(self.bus.subscribe(TOPIC, cx.inbox()))
    }

    fn handle_message(&self, _msg: (), channel: &Channel, _state: &mut Self::State) -> Flow {
        let _ = channel.send_notification(Notification::tools_list_changed());
        Flow::Continue
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_tools_list_changed(true)
    }
}

fn connect(addr: SocketAddr, body: &str, headers: &str) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.set_nodelay(true)?;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())?;
    Ok(s)
}

/// Reads from `s` until `want` SSE data frames were seen; returns when done.
fn count_frames(mut s: TcpStream, want: usize) -> std::io::Result<()> {
    const PAT: &[u8] = b"data: {";
    let mut seen = 0usize;
    let mut buf = vec![0u8; 16 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    while seen < want {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "stream ended after {seen} of {want} frames"
            )));
        }
        carry.extend_from_slice(&buf[..n]);
        seen += carry.windows(PAT.len()).filter(|w| *w == PAT).count();
        let keep = carry.len().min(PAT.len() - 1);
        carry.drain(..carry.len() - keep);
    }
    Ok(())
}

/// Opens S streams (`open` returns a connected socket whose first frame is the
/// greeting), starts a reader per stream, calls `publish`, and times until every
/// reader has seen `events` frames after the greeting.
fn measure(
    streams: usize,
    events: usize,
    open: impl Fn(usize) -> std::io::Result<TcpStream>,
    ready: impl Fn() -> bool,
    publish: impl FnOnce() + Send + 'static,
) -> std::io::Result<Sample> {
    let rss_before = resident_kib();
    let sockets: Vec<TcpStream> = (0..streams).map(&open).collect::<Result<_, _>>()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        if Instant::now() > deadline {
            return Err(std::io::Error::other("streams did not open"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let kib_per_stream = resident_kib().saturating_sub(rss_before) as f64 / streams as f64;
    let start = Instant::now();
    let readers: Vec<_> = sockets
        .into_iter()
        .map(|s| std::thread::spawn(move || count_frames(s, events + 1)))
        .collect();
    let publisher = std::thread::spawn(publish);
    for r in readers {
        r.join()
            .map_err(|_| std::io::Error::other("reader panicked"))??;
    }
    let elapsed = start.elapsed();
    publisher
        .join()
        .map_err(|_| std::io::Error::other("publisher panicked"))?;
    Ok(Sample {
        frames_per_sec: (streams * events) as f64 / elapsed.as_secs_f64(),
        elapsed,
        kib_per_stream,
    })
}

/// The process's resident memory in KiB (Linux, from `/proc/self/status`), or 0.
pub fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn frame_bytes(id: usize) -> Bytes {
    let json = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id}}});
    Bytes::from(format!("event: message\ndata: {json}\n\n"))
}

type Senders = Arc<Mutex<Vec<(usize, mpsc::Sender<Bytes>)>>>;

fn run_baseline(cfg: &BenchConfig) -> std::io::Result<Sample> {
    let senders: Senders = Arc::new(Mutex::new(Vec::new()));
    let registry = senders.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let server = HttpServer::new(move || {
                let registry = registry.clone();
                App::new().route(
                    "/mcp",
                    web::post().to(move || {
                        let registry = registry.clone();
                        async move {
                            let (tx, rx) = mpsc::channel::<Bytes>(64);
                            let id = {
                                let mut r = registry.lock().unwrap_or_else(|p| p.into_inner());
                                let id = r.len();
                                // The greeting frame, like genmcp's acknowledgement.
                                let _ = tx.try_send(frame_bytes(id));
                                r.push((id, tx));
                                id
                            };
                            let _ = id;
                            let body = futures_util::stream::unfold(rx, |mut rx| async move {
                                rx.recv()
                                    .await
                                    .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
                            });
                            HttpResponse::Ok()
                                .content_type("text/event-stream")
                                .streaming(body)
                        }
                    }),
                )
            })
            .workers(2)
            .disable_signals()
            .bind(("127.0.0.1", 0))?;
            let addr = server.addrs()[0];
            let running = server.run();
            let handle = running.handle();
            let _ = tx.send(addr);
            let waiter = actix_rt::spawn(running);
            let _ = actix_rt::task::spawn_blocking(move || stop_rx.recv()).await;
            handle.stop(false).await;
            let _ = waiter.await;
            Ok::<_, std::io::Error>(())
        })
    });
    let addr = rx
        .recv()
        .map_err(|_| std::io::Error::other("baseline server did not start"))?;
    let events = cfg.events;
    let s = senders.clone();
    let sample = measure(
        cfg.streams,
        events,
        |_| connect(addr, "{}", ""),
        || s.lock().map(|v| v.len()).unwrap_or(0) >= cfg.streams,
        move || {
            let all: Vec<(usize, mpsc::Sender<Bytes>)> =
                senders.lock().map(|v| v.clone()).unwrap_or_default();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(futures_util::future::join_all(all.into_iter().map(
                    |(id, tx)| async move {
                        let frame = frame_bytes(id);
                        for _ in 0..events {
                            if tx.send(frame.clone()).await.is_err() {
                                break;
                            }
                        }
                    },
                )));
            }
        },
    );
    let _ = stop_tx.send(());
    let _ = thread.join();
    sample
}

fn run_genmcp(cfg: &BenchConfig) -> std::io::Result<Sample> {
    let bus: Bus<()> = Bus::new();
    let b = bus.clone();
    let config = HttpConfig {
        port: 0,
        workers: 2,
        ..Default::default()
    };
    let server = ServerThread::spawn(
        move || {
            Suite::builder(Implementation::new("bench", env!("CARGO_PKG_VERSION")))
                .subscriptions(BenchHandler { bus: b })
                .build()
        },
        config,
    )?;
    let addr = server.addr;
    let events = cfg.events;
    let probe = bus.clone();
    let sample = measure(
        cfg.streams,
        events,
        |i| {
            let body = json!({"jsonrpc": "2.0", "id": i, "method": "subscriptions/listen", "params": {
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}},
                "notifications": {"toolsListChanged": true}}});
            connect(
                addr,
                &body.to_string(),
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n",
            )
        },
        || probe.subscribers(TOPIC).len() >= cfg.streams,
        move || {
            let inboxes: Vec<Inbox<()>> = bus.subscribers(TOPIC);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(futures_util::future::join_all(inboxes.into_iter().map(
                    |inbox| async move {
                        for _ in 0..events {
                            if inbox.send(()).await.is_err() {
                                break;
                            }
                        }
                    },
                )));
            }
        },
    );
    server.stop();
    sample
}

/// Which server a measurement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Side {
    /// Raw SSE on actix-web.
    Baseline,
    /// The genmcp stream path.
    Genmcp,
}

impl Side {
    /// The name used on the command line (`baseline`, `genmcp`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Genmcp => "genmcp",
        }
    }

    /// Parses [`Side::as_str`].
    pub fn parse(s: &str) -> Option<Side> {
        match s {
            "baseline" => Some(Side::Baseline),
            "genmcp" => Some(Side::Genmcp),
            _ => None,
        }
    }
}

/// Measures one side once, in this process.
pub fn run_one(side: Side, cfg: &BenchConfig) -> std::io::Result<Sample> {
    match side {
        Side::Baseline => run_baseline(cfg),
        Side::Genmcp => run_genmcp(cfg),
    }
}

/// The line `genmcp bench-one` prints: one sample as JSON.
pub fn sample_json(sample: &Sample) -> String {
    json!({
        "frames_per_sec": sample.frames_per_sec,
        "elapsed_ms": sample.elapsed.as_secs_f64() * 1000.0,
        "kib_per_stream": sample.kib_per_stream,
    })
    .to_string()
}

fn parse_sample(line: &str) -> Option<Sample> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    Some(Sample {
        frames_per_sec: v["frames_per_sec"].as_f64()?,
        elapsed: Duration::from_secs_f64(v["elapsed_ms"].as_f64()? / 1000.0),
        kib_per_stream: v["kib_per_stream"].as_f64()?,
    })
}

/// Runs the benchmark: `rounds` × (baseline, genmcp), each measurement in a fresh
/// process (`exe bench-one --side ...`, where `exe` is the genmcp binary), so
/// that neither side inherits the other's heap and the memory per stream is
/// that side's own.
pub fn run(exe: &std::path::Path, cfg: &BenchConfig) -> std::io::Result<Vec<Round>> {
    let one = |side: Side| -> std::io::Result<Sample> {
        let out = std::process::Command::new(exe)
            .args([
                "bench-one",
                "--side",
                side.as_str(),
                "--streams",
                &cfg.streams.to_string(),
                "--events",
                &cfg.events.to_string(),
            ])
            .stderr(std::process::Stdio::inherit())
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        match (
            out.status.success(),
            text.lines().last().and_then(parse_sample),
        ) {
            (true, Some(sample)) => Ok(sample),
            _ => Err(std::io::Error::other(format!(
                "{} measurement failed ({}): {text}",
                side.as_str(),
                out.status
            ))),
        }
    };
    (0..cfg.rounds)
        .map(|_| {
            Ok(Round {
                baseline: one(Side::Baseline)?,
                genmcp: one(Side::Genmcp)?,
            })
        })
        .collect()
}

/// Prints the rounds as a table and the median ratio.
pub fn report(cfg: &BenchConfig, rounds: &[Round]) -> String {
    let mut out = format!(
        "stream throughput: {} streams x {} events, {} rounds (frames/s, all streams; \
         KiB of resident memory per open stream)\n\
         round  baseline(raw SSE)  genmcp      ratio  baseline KiB/stream  genmcp KiB/stream\n",
        cfg.streams, cfg.events, cfg.rounds
    );
    for (i, r) in rounds.iter().enumerate() {
        out.push_str(&format!(
            "{:>5}  {:>17.0}  {:>10.0}  {:>5.2}  {:>19.1}  {:>17.1}\n",
            i + 1,
            r.baseline.frames_per_sec,
            r.genmcp.frames_per_sec,
            r.ratio(),
            r.baseline.kib_per_stream,
            r.genmcp.kib_per_stream
        ));
    }
    let mut ratios: Vec<f64> = rounds.iter().map(Round::ratio).collect();
    ratios.sort_by(|a, b| a.total_cmp(b));
    if let Some(m) = ratios.get(ratios.len() / 2) {
        out.push_str(&format!("median ratio genmcp/baseline: {m:.2}\n"));
    }
    out
}
