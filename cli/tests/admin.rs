//! The admin listener of the real binary (`genmcp --log-format json serve
//! --admin 127.0.0.1:0`): `/metrics` is well-formed Prometheus text with every
//! required family, three readers that stop reading are cut and counted as
//! `overflow` exactly three times, and `/readyz` answers 503 while a SIGTERM
//! drain runs, after which the admin listener is gone too.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Exchange, Response, headers, listen, request, wait_until};
use serde_json::{Value, json};

/// `genmcp serve` with an admin listener, both on free loopback ports; the
/// addresses come from its JSON log lines.
struct Genmcp {
    child: Child,
    mcp: SocketAddr,
    admin: SocketAddr,
}

impl Genmcp {
    fn start() -> Genmcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_genmcp"))
            .args([
                "--log-format",
                "json",
                "serve",
                "--port",
                "0",
                "--workers",
                "2",
            ])
            .args(["--admin", "127.0.0.1:0"])
            .env("RUST_LOG", "genmcp=info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("genmcp starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel::<Value>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let parsed: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("--log-format json wrote a non-JSON line ({e}): {line}")
                });
                let _ = tx.send(parsed);
            }
        });
        let (mut mcp, mut admin) = (None, None);
        let deadline = Instant::now() + Duration::from_secs(20);
        while mcp.is_none() || admin.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).expect("the listening lines");
            let addr: Option<SocketAddr> =
                line["fields"]["addr"].as_str().and_then(|a| a.parse().ok());
            match line["fields"]["message"].as_str() {
                Some("genmcp listening") => mcp = addr,
                Some(m) if m.starts_with("admin listening") => admin = addr,
                _ => {}
            }
        }
        let (mcp, admin) = (mcp.unwrap(), admin.unwrap());
        assert_ne!(
            mcp.port(),
            admin.port(),
            "the admin listener is never the MCP port"
        );
        Genmcp { child, mcp, admin }
    }

    fn get(&self, path: &str) -> Response {
        Exchange::open_at(self.admin, "GET", path, &[], b"").into_response()
    }

    fn metrics(&self) -> Metrics {
        let resp = self.get("/metrics");
        assert_eq!(resp.status, 200);
        assert!(
            resp.header("content-type")
                .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")),
            "{:?}",
            resp.header("content-type")
        );
        parse(&String::from_utf8(resp.body).expect("UTF-8 metrics"))
    }

    /// Sends SIGTERM (the orchestrator's stop).
    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }
}

impl Drop for Genmcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A parsed exposition: samples by `name{labels}` as written, and each
/// family's TYPE.
struct Metrics {
    samples: HashMap<String, f64>,
    types: HashMap<String, String>,
}

impl Metrics {
    fn value(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no sample {series}; have {:?}", self.samples.keys()))
    }
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Checks a label set `{k="v",...}` (the braces removed) is well formed.
fn check_labels(labels: &str, line: &str) {
    let mut rest = labels;
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once("=\"")
            .unwrap_or_else(|| panic!("label without =\" in {line:?}"));
        assert!(is_name(key), "bad label name {key:?} in {line:?}");
        // The value runs to the first unescaped quote.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let end = end.unwrap_or_else(|| panic!("unterminated label value in {line:?}"));
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Parses Prometheus text (0.0.4), panicking on any malformed line.
fn parse(text: &str) -> Metrics {
    let mut samples = HashMap::new();
    let mut types = HashMap::new();
    let mut helps = HashMap::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("HELP"), Some(name), Some(help)) => {
                    assert!(is_name(name), "{line:?}");
                    helps.insert(name.to_owned(), help.to_owned());
                }
                (Some("TYPE"), Some(name), Some(kind)) => {
                    assert!(is_name(name), "{line:?}");
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                        "{line:?}"
                    );
                    types.insert(name.to_owned(), kind.to_owned());
                }
                _ => {}
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value in {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let name = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels in {line:?}"));
                check_labels(labels, line);
                name
            }
            None => series,
        };
        assert!(is_name(name), "bad metric name in {line:?}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE for {line:?}");
        assert!(helps.contains_key(family), "no HELP for {line:?}");
        assert!(
            samples.insert(series.to_owned(), value).is_none(),
            "duplicate series {series}"
        );
    }
    Metrics { samples, types }
}

const OVERFLOW: &str = "genmcp_streams_closed_total{reason=\"overflow\"}";

/// Calls the demo's `burst` (count frames to every tools stream) on its own
/// thread: it returns once every frame was handed over or every slow stream
/// was cut.
fn burst(mcp: SocketAddr, count: u64) -> std::thread::JoinHandle<u16> {
    std::thread::spawn(move || {
        let body = request(
            json!("burst"),
            "tools/call",
            json!({"name": "burst", "arguments": {"count": count}}),
        );
        let ex = Exchange::open(
            mcp,
            &headers("tools/call", Some("burst")),
            body.to_string().as_bytes(),
        );
        ex.set_timeout(Duration::from_secs(90));
        ex.into_response().status
    })
}

/// Opens a `toolsListChanged` listen, reads its acknowledgement and then
/// nothing more.
fn slow_reader(mcp: SocketAddr, id: &str) -> Exchange {
    let mut s = listen(mcp, json!(id), json!({"toolsListChanged": true}));
    assert_eq!(s.status, 200);
    let ack = s.next_message().expect("ack");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    s
}

#[test]
fn metrics_are_prometheus_text_and_three_cut_slow_readers_count_as_overflow() {
    let srv = Genmcp::start();
    let health = srv.get("/healthz");
    assert_eq!((health.status, health.body.as_slice()), (200, &b"ok\n"[..]));
    let ready = srv.get("/readyz");
    assert_eq!(
        (ready.status, ready.body.as_slice()),
        (200, &b"ready\n"[..])
    );
    assert_eq!(srv.get("/nope").status, 404);

    let before = srv.metrics();
    for (family, kind) in [
        ("genmcp_streams_open", "gauge"),
        ("genmcp_streams_opened_total", "counter"),
        ("genmcp_streams_closed_total", "counter"),
        ("genmcp_frames_sent_total", "counter"),
        ("genmcp_requests_total", "counter"),
        ("genmcp_request_duration_seconds", "histogram"),
    ] {
        assert_eq!(
            before.types.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }
    for reason in [
        "completed",
        "disconnected",
        "cancelled",
        "overflow",
        "panicked",
        "rejected",
        "shutdown",
    ] {
        before.value(&format!(
            "genmcp_streams_closed_total{{reason=\"{reason}\"}}"
        ));
    }
    let overflowed = before.value(OVERFLOW);

    // Three readers that stop reading after the acknowledgement ...
    let _slow: Vec<Exchange> = (0..3)
        .map(|i| slow_reader(srv.mcp, &format!("slow{i}")))
        .collect();
    assert!(wait_until(Duration::from_secs(10), || srv
        .metrics()
        .value("genmcp_streams_open")
        == 3.0));
    // ... and more frames than the socket buffers and queues hold: each stream
    // stalls and is cut when its outbox stays full past the stall timeout.
    let burst = burst(srv.mcp, 200_000);
    assert!(
        wait_until(Duration::from_secs(60), || srv.metrics().value(OVERFLOW)
            >= overflowed + 3.0),
        "the slow readers were not cut"
    );
    assert_eq!(burst.join().expect("burst answered"), 200);
    let after = srv.metrics();
    assert_eq!(after.value(OVERFLOW), overflowed + 3.0, "exactly three");
    assert_eq!(after.value("genmcp_streams_open"), 0.0);
    assert_eq!(after.value("genmcp_streams_opened_total"), 3.0);
    assert!(after.value("genmcp_frames_sent_total") >= 3.0);
    assert_eq!(
        after.value("genmcp_requests_total{method=\"subscriptions/listen\",outcome=\"ok\"}"),
        3.0
    );
    assert_eq!(
        after.value("genmcp_requests_total{method=\"tools/call\",outcome=\"ok\"}"),
        1.0
    );
    assert_eq!(
        after.value("genmcp_request_duration_seconds_count{method=\"tools/call\"}"),
        1.0
    );

    // Made-up methods all land on one bounded label.
    for i in 0..5 {
        let resp = common::call(srv.mcp, json!(i), &format!("made/up/{i}"), json!({}));
        assert_eq!(resp.status, 404);
    }
    let last = srv.metrics();
    assert_eq!(
        last.value("genmcp_requests_total{method=\"other\",outcome=\"refused\"}"),
        5.0
    );
    assert!(
        !last.samples.keys().any(|k| k.contains("made/up")),
        "a client-chosen method name became a label"
    );
}

#[test]
fn readyz_is_503_while_a_sigterm_drain_runs_then_the_admin_listener_stops() {
    let mut srv = Genmcp::start();
    assert_eq!(srv.get("/readyz").status, 200);
    // A stream whose client does not read: its completion result cannot be
    // written, so the drain lasts (until the drain timeout).
    let _slow = slow_reader(srv.mcp, "held");
    let _burst = burst(srv.mcp, 200_000);
    // Its buffers are full once the frame count stops moving (three
    // samples, 200 ms apart, well past the acknowledgement).
    let (mut last, mut still) = (-1.0, 0);
    assert!(
        wait_until(Duration::from_secs(30), || {
            std::thread::sleep(Duration::from_millis(200));
            let sent = srv.metrics().value("genmcp_frames_sent_total");
            still = if sent == last && sent > 1_000.0 {
                still + 1
            } else {
                0
            };
            last = sent;
            still == 3
        }),
        "the reader's buffers never filled"
    );
    assert_eq!(srv.metrics().value("genmcp_streams_open"), 1.0);

    srv.terminate();
    let mut draining = None;
    assert!(
        wait_until(Duration::from_secs(5), || {
            let resp = srv.get("/readyz");
            if resp.status == 503 {
                draining = Some(resp);
                true
            } else {
                false
            }
        }),
        "/readyz never answered 503 during the drain"
    );
    assert_eq!(draining.unwrap().body, b"draining\n");
    // Still serving during the drain: the stream is still open, and says so.
    let during = srv.metrics();
    assert_eq!(during.value("genmcp_draining"), 1.0);
    assert_eq!(during.value("genmcp_streams_open"), 1.0);

    let mut exited = None;
    assert!(wait_until(Duration::from_secs(30), || {
        exited = srv.child.try_wait().expect("try_wait");
        exited.is_some()
    }));
    assert!(exited.unwrap().success(), "{exited:?}");
    assert!(
        std::net::TcpStream::connect(srv.admin).is_err(),
        "the admin listener stopped with the process"
    );
}

/// The library side, in process: a named readiness check (what a bus's health
/// flag plugs into) turns `/readyz` to 503 naming it, and back.
#[test]
fn a_failing_named_check_makes_readyz_503_naming_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let bus_up = Arc::new(AtomicBool::new(true));
    let mut config = common::config();
    let flag = bus_up.clone();
    config.admin = Some(
        genmcp::admin::AdminConfig::new("127.0.0.1:0".parse().unwrap())
            .check("bus", move || flag.load(Ordering::SeqCst))
            .check("always", || true),
    );
    let srv =
        genmcp::http::ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).expect("starts");
    let admin = srv.admin_addr.expect("admin listener");
    let readyz = || Exchange::open_at(admin, "GET", "/readyz", &[], b"").into_response();
    assert_eq!(readyz().status, 200);
    bus_up.store(false, Ordering::SeqCst);
    let down = readyz();
    assert_eq!(
        (down.status, down.body.as_slice()),
        (503, &b"down: bus\n"[..])
    );
    // Liveness does not depend on the bus.
    let health = Exchange::open_at(admin, "GET", "/healthz", &[], b"").into_response();
    assert_eq!(health.status, 200);
    bus_up.store(true, Ordering::SeqCst);
    assert_eq!(readyz().status, 200);
    srv.stop();
    // actix closes its listening socket on its accept thread just after `stop`
    // returns: allow that thread a bounded moment.
    let closed = (0..100).any(|_| {
        let refused = std::net::TcpStream::connect(admin).is_err();
        if !refused {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        refused
    });
    assert!(closed, "the admin listener stops with the server");
}

#[test]
fn an_admin_address_on_the_mcp_port_is_refused() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    drop(taken);
    let mut config = common::config();
    config.port = port;
    config.admin = Some(genmcp::admin::AdminConfig::new(
        format!("127.0.0.1:{port}").parse().unwrap(),
    ));
    let err = genmcp::http::ServerThread::spawn(|| genmcp_cli::demo::suite().0, config)
        .err()
        .expect("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}
