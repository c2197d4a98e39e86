#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn
//! `cargo bench --bench unary`: one trivial `tools/call` (the demo's `whoami`)
//! through the whole actix-web service, in process, against the raw
//! actix-web baseline (`genmcp_cli::bench::baseline`) answering the same
//! request in the same run.
//!
//! No socket and no HTTP/1 parser: what is left is the request path of the
//! two services (header checks, `_meta` validation, JSON parse, dispatch,
//! the handler, encoding), so a change to it shows here even when the
//! machine's noise hides it under `wrk`. Compare the two rows of one run;
//! the over-the-wire figure is `docs/benchmark.md`'s `wrk` table.
//!
//! The time reported is the bench thread's time on a CPU
//! (`/proc/thread-self/schedstat`, Linux), not wall time: on a shared machine
//! the time the thread waited for a CPU is the neighbours' noise, not the
//! request path's cost. Elsewhere it falls back to wall time. The kernel
//! brings that figure up to date at each scheduler tick, so every sample is
//! made long (flat sampling, 20 samples): a tick is about 1 % of one.
//!
//! `BENCH_OTLP=1` runs the same with OpenTelemetry export on (feature
//! `otel`): the process's subscriber is the OTLP layer, sending to a sink in
//! this process that answers every export 200. Compare the genmcp/baseline
//! ratio of a run with it and one without. The exporter's own thread
//! (encoding, HTTP) is not the bench thread: its CPU is not in the figure.

use std::time::{Duration, Instant};

use actix_web::http::header;
use actix_web::{App, test, web};
use criterion::{Criterion, criterion_group};

const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// The request every iteration sends (built fresh each time: a request is
/// consumed by the service).
fn request() -> test::TestRequest {
    test::TestRequest::post()
        .uri("/mcp")
        .insert_header((header::HOST, "127.0.0.1"))
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .insert_header((header::ACCEPT, "application/json, text/event-stream"))
        .insert_header(("Mcp-Method", "tools/call"))
        .insert_header(("Mcp-Name", "whoami"))
        .insert_header(("MCP-Protocol-Version", "2026-07-28"))
        .set_payload(BODY)
}

/// This thread's time on a CPU so far, where the kernel reports it.
fn on_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Times `iters` requests through `app` (on-CPU time, see the module doc),
/// each answered 200 with a body read to the end.
async fn drive<S, R, B>(app: &S, make: impl Fn() -> R, iters: u64) -> Duration
where
    S: actix_web::dev::Service<
            R,
            Response = actix_web::dev::ServiceResponse<B>,
            Error = actix_web::Error,
        >,
    B: actix_web::body::MessageBody,
{
    let (wall, cpu) = (Instant::now(), on_cpu());
    for _ in 0..iters {
        let resp = test::call_service(app, make()).await;
        assert!(resp.status().is_success(), "{}", resp.status());
        let body = test::read_body(resp).await;
        assert!(body.starts_with(b"{\"jsonrpc\":\"2.0\""));
    }
    match (cpu, on_cpu()) {
        (Some(before), Some(after)) => after.saturating_sub(before),
        _ => wall.elapsed(),
    }
}

/// The baseline's service and genmcp's (the demo suite's endpoint), built
/// on `$system`. A macro: the services' types cannot be named.
macro_rules! services {
    ($system:expr) => {{
        let baseline = $system.block_on(test::init_service(
            App::new().configure(genmcp_cli::bench::baseline::configure),
        ));
        let (suite, _bus) = genmcp_cli::demo::suite();
        let endpoint = genmcp::http::Endpoint::new(suite, genmcp::http::HttpConfig::default());
        let genmcp = $system.block_on(test::init_service(
            App::new()
                .app_data(web::PayloadConfig::new(1 << 20))
                .service(endpoint.service()),
        ));
        (baseline, genmcp)
    }};
}

/// With `BENCH_OTLP` set: OTLP export on, to a sink on a loopback port that
/// reads each request and answers 200 (its bodies are dropped).
#[cfg(feature = "otel")]
fn export_if_asked() -> Option<genmcp::otel::Otel> {
    use std::io::{BufRead, BufReader, Read, Write};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    std::env::var_os("BENCH_OTLP")?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the sink");
    let addr = listener.local_addr().expect("sink address");
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut out = conn.try_clone().expect("clone");
                let mut reader = BufReader::new(conn);
                loop {
                    let (mut line, mut len) = (String::new(), 0usize);
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err()
                        || out
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                            .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    let otel = genmcp::otel::Otel::init(
        genmcp::otel::OtelConfig::from_env().endpoint(format!("http://{addr}")),
    )
    .expect("OTLP exporter");
    tracing_subscriber::registry().with(otel.layer()).init();
    eprintln!("OTLP export on, to the sink at {addr}");
    Some(otel)
}

#[cfg(not(feature = "otel"))]
fn export_if_asked() -> Option<std::convert::Infallible> {
    if std::env::var_os("BENCH_OTLP").is_some() {
        eprintln!("BENCH_OTLP needs the otel feature");
        std::process::exit(2);
    }
    None
}

fn unary(c: &mut Criterion) {
    // Kept for the process's life.
    std::mem::forget(export_if_asked());
    let system = actix_rt::System::new();
    let (baseline, genmcp) = services!(system);
    let mut group = c.benchmark_group("unary tools/call");
    group.throughput(criterion::Throughput::Elements(1));
    group.sampling_mode(criterion::SamplingMode::Flat);
    group.sample_size(20);
    group.bench_function("baseline", |b| {
        b.iter_custom(|iters| system.block_on(drive(&baseline, || request().to_request(), iters)));
    });
    group.bench_function("genmcp", |b| {
        b.iter_custom(|iters| system.block_on(drive(&genmcp, || request().to_request(), iters)));
    });
    group.finish();
}

criterion_group!(benches, unary);

/// `cargo bench --bench unary -- --count N SERVICE`: instead of criterion,
/// answer N requests with SERVICE (`baseline` or `genmcp`) and exit, for an
/// instruction counter, which the noise of a shared machine does not move:
///
/// ```text
/// valgrind --tool=callgrind target/release/deps/unary-HASH --count 2000 genmcp
/// ```
///
/// Both services are built whatever SERVICE is, so the difference between
/// two counts (N and 0 requests) divided by N is the instructions per request.
fn count(n: u64, service: &str) {
    let export = export_if_asked();
    let system = actix_rt::System::new();
    let (baseline, genmcp) = services!(system);
    match service {
        "baseline" => system.block_on(drive(&baseline, || request().to_request(), n)),
        "genmcp" => system.block_on(drive(&genmcp, || request().to_request(), n)),
        other => {
            eprintln!("--count N SERVICE: SERVICE is baseline or genmcp, not {other:?}");
            std::process::exit(2);
        }
    };
    // Everything exported before the count ends (its encoding and sending
    // are counted too).
    #[cfg(feature = "otel")]
    if let Some(otel) = export {
        otel.shutdown();
    }
    #[cfg(not(feature = "otel"))]
    drop(export);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--count") {
        Some(i) => {
            let Some(n) = args.get(i + 1).and_then(|n| n.parse().ok()) else {
                eprintln!("--count N SERVICE: N is a number of requests");
                std::process::exit(2);
            };
            count(n, args.get(i + 2).map_or("genmcp", String::as_str));
        }
        None => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}
