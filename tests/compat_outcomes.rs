//! 2025-era requests are counted in `genmcp_requests_total` by the same
//! rules as 2026 ones, over HTTP and over stdio alike: invalid params
//! `refused`, a panicking handler `panicked`, a handler past its deadline
//! `timeout`, a stdio request past the in-flight limit `error` (its span
//! says the same, on either revision), and a body that is not a
//! well-formed JSON-RPC request not at all.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::legacy::{self, LEGACY};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::runtime::Server;
use genmcp::transport::stdio::{StdioConfig, serve_io};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The handlers' deadline: `hang` is still in flight when the next line is
/// read (at once) long before it passes.
const DEADLINE: Duration = Duration::from_millis(1_500);

fn capture() -> &'static common::log_capture::Capture {
    static CAPTURE: OnceLock<common::log_capture::Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| common::log_capture::Capture::install("genmcp=debug"))
}

/// The `outcome` of the span of the request refused with id `id`.
fn refused_outcome(id: &str) -> Value {
    let mut found = Value::Null;
    common::wait_until(Duration::from_secs(10), || {
        found = capture()
            .lines()
            .into_iter()
            .find(|l| {
                l["fields"]["message"] == "request refused" && l["span"]["jsonrpc.request.id"] == id
            })
            .map(|l| l["span"]["outcome"].clone())
            .unwrap_or(Value::Null);
        !found.is_null()
    });
    found
}

/// Tools that panic and that never return.
fn suite() -> Suite<NoSubscriptions> {
    Suite::builder(Implementation::new("outcomes", "1"))
        .logging()
        .tool(
            ToolBuilder::new("explode")
                .description("panics")
                .handler(|_| async {
                    if true {
                        panic!("tool panics on purpose");
                    }
                    Ok(CallToolResult::text("unreachable").into())
                }),
        )
        .tool(
            ToolBuilder::new("hang")
                .description("never returns")
                .handler(|_| async {
                    std::future::pending::<()>().await;
                    Ok(CallToolResult::text("unreachable").into())
                }),
        )
        .build()
}

/// The sample of `genmcp_requests_total` for `method` and `outcome` (0 when
/// the series does not exist).
fn count(server: &Server, method: &str, outcome: &str) -> u64 {
    let text = genmcp::admin::Admin::new(server.clone(), Vec::new()).metrics_text();
    let series = format!("genmcp_requests_total{{method=\"{method}\",outcome=\"{outcome}\"}}");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn tool_call(name: &str) -> Value {
    json!({"name": name, "arguments": {}})
}

#[test]
fn over_http_2025_requests_are_counted_as_2026_ones_are() {
    let mut config = common::config();
    config.request_timeout = DEADLINE;
    let srv = ServerThread::spawn(suite, config).expect("server starts");
    let session = legacy::initialize(srv.addr);
    let call = |id: i64, method: &str, params: Value| {
        legacy::request(srv.addr, &session, json!(id), method, params)
    };
    let r = call(1, "logging/setLevel", json!({"level": "loudest"}));
    assert_eq!(r.json()["error"]["code"], -32602, "{:?}", r.json());
    let r = call(2, "tools/call", tool_call("explode"));
    assert_eq!(r.json()["error"]["code"], -32603, "{:?}", r.json());
    let r = call(3, "tools/call", tool_call("hang"));
    assert_eq!(r.json()["error"]["message"], "Request timed out");
    // Not well-formed requests: an id of another type, params not an object.
    let headers = legacy::headers(Some(&session));
    let body = json!({"jsonrpc": "2.0", "id": true, "method": "ping"});
    assert_eq!(common::post(srv.addr, &headers, &body).status, 400);
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": 5});
    let r = common::post(srv.addr, &headers, &body);
    assert_eq!(r.json()["error"]["code"], -32602, "{:?}", r.json());

    let server = &srv.server;
    assert_eq!(count(server, "logging/setLevel", "refused"), 1);
    assert_eq!(count(server, "logging/setLevel", "error"), 0);
    assert_eq!(count(server, "tools/call", "panicked"), 1);
    assert_eq!(count(server, "tools/call", "timeout"), 1);
    assert_eq!(count(server, "tools/call", "error"), 0);
    for outcome in ["ok", "refused", "error"] {
        assert_eq!(count(server, "ping", outcome), 0, "ping {outcome}");
    }
}

/// A 2025 client on a stdio pipe: its lines in, the server's replies out.
struct Pipe {
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    server: Server,
}

impl Pipe {
    fn start(max_in_flight: usize) -> Pipe {
        let (client, server_end) = tokio::io::duplex(64 * 1024);
        let (server_read, server_write) = tokio::io::split(server_end);
        let server = Server::default();
        let mut config = StdioConfig::default();
        config.request_timeout = DEADLINE;
        config.max_in_flight = max_in_flight;
        actix_rt::spawn({
            let server = server.clone();
            async move { serve_io(suite(), server, &config, server_read, server_write).await }
        });
        let (read, write) = tokio::io::split(client);
        Pipe {
            lines: tokio::io::BufReader::new(read).lines(),
            write,
            server,
        }
    }

    async fn send(&mut self, v: Value) {
        self.write
            .write_all(format!("{v}\n").as_bytes())
            .await
            .expect("the pipe takes a line");
    }

    /// The reply to request `id` (other lines skipped).
    async fn reply(&mut self, id: i64) -> Value {
        self.reply_to(json!(id)).await
    }

    async fn reply_to(&mut self, id: Value) -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
                .await
                .expect("a reply in time")
                .expect("the pipe reads")
                .expect("the pipe is open");
            let v: Value = serde_json::from_str(&line).expect("JSON");
            if v["id"] == id {
                return v;
            }
        }
    }

    async fn initialize(&mut self) {
        self.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "outcomes", "version": "1"}}}),
        )
        .await;
        let r = self.reply(0).await;
        assert_eq!(r["result"]["protocolVersion"], LEGACY, "{r}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.reply(id).await
    }
}

#[actix_rt::test]
async fn over_stdio_2025_requests_are_counted_as_2026_ones_are() {
    capture();
    let mut pipe = Pipe::start(1);
    pipe.initialize().await;
    let r = pipe
        .request(1, "logging/setLevel", json!({"level": "loudest"}))
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = pipe.request(2, "tools/call", tool_call("explode")).await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    // One in flight (the limit): the next one is past it.
    pipe.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": tool_call("hang")}),
    )
    .await;
    pipe.send(
        json!({"jsonrpc": "2.0", "id": "s25-past", "method": "tools/call",
        "params": tool_call("explode")}),
    )
    .await;
    let r = pipe.reply_to(json!("s25-past")).await;
    assert_eq!(r["error"]["message"], "Too many requests in flight", "{r}");
    let r = pipe.reply(3).await;
    assert_eq!(r["error"]["message"], "Request timed out", "{r}");

    let server = &pipe.server;
    assert_eq!(count(server, "logging/setLevel", "refused"), 1);
    assert_eq!(count(server, "tools/call", "panicked"), 1);
    assert_eq!(count(server, "tools/call", "timeout"), 1);
    assert_eq!(
        count(server, "tools/call", "error"),
        1,
        "past the in-flight limit"
    );
    assert_eq!(count(server, "tools/call", "refused"), 0);
    assert_eq!(refused_outcome("s25-past"), "error", "its span");
}

#[actix_rt::test]
async fn over_stdio_a_2026_request_past_the_in_flight_limit_is_an_error_in_its_span_too() {
    capture();
    let mut pipe = Pipe::start(1);
    let call = |id: &str, name: &str| {
        let mut v = common::request(json!(id), "tools/call", tool_call(name));
        v["params"]["_meta"] = common::meta();
        v
    };
    pipe.send(call("m-hang", "hang")).await;
    pipe.send(call("m-past", "explode")).await;
    let r = pipe.reply_to(json!("m-past")).await;
    assert_eq!(r["error"]["message"], "Too many requests in flight", "{r}");
    assert_eq!(count(&pipe.server, "tools/call", "error"), 1);
    assert_eq!(refused_outcome("m-past"), "error", "its span");
}
