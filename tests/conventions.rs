//! The OpenTelemetry MCP semantic conventions without any exporter: the
//! request span of every transport and both eras carries the conventions'
//! attributes (as a `tracing` JSON subscriber shows them), tool errors and
//! protocol errors are told apart, arguments never show up, and the Prometheus
//! exposition has `mcp_server_operation_duration_seconds` and
//! `mcp_server_session_duration_seconds` with bounded labels.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::log_capture::Capture;
use common::{call, legacy};
use genmcp::prelude::*;
use genmcp::runtime::Server;
use genmcp::transport::stdio::{StdioConfig, serve_io};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A value no span, log line or metric may contain: it only travels in
/// tool arguments.
const SECRET: &str = "hunter2-do-not-export";

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| Capture::install("genmcp=debug"))
}

/// The demo suite (its listen streams) with two tools of the test's own.
fn suite() -> Suite<genmcp_cli::demo::NotesSubscriptions> {
    let (suite, _bus) = genmcp_cli::demo::suite();
    suite.catalog().add_tool(
        ToolBuilder::new("echo")
            .description("echoes its arguments")
            .handler(|c| async move {
                Ok(CallToolResult::text(Value::Object(c.arguments).to_string()).into())
            }),
    );
    suite.catalog().add_tool(
        ToolBuilder::new("slow")
            .description("sends progress (if asked), notes that it started, never answers")
            .handler(|c| async move {
                let key = c.arguments.get("key").and_then(Value::as_str).unwrap_or("");
                let _ = c.channel.send_progress(1.0, None, Some("started"));
                started().lock().unwrap().push(key.to_owned());
                std::future::pending::<()>().await;
                Ok(CallToolResult::text("never").into())
            }),
    );
    suite.catalog().add_tool(
        ToolBuilder::new("broken")
            .description("always a tool error")
            .handler(|_| async move {
                let mut r = CallToolResult::text("it broke");
                r.is_error = true;
                Ok(r.into())
            }),
    );
    suite
}

/// The `key` argument of every `slow` call that started.
fn started() -> &'static std::sync::Mutex<Vec<String>> {
    static STARTED: OnceLock<std::sync::Mutex<Vec<String>>> = OnceLock::new();
    STARTED.get_or_init(Default::default)
}

fn has_started(key: &str) -> bool {
    started().lock().unwrap().iter().any(|k| k == key)
}

/// The span of the `request answered` line of request `id`.
fn request_span(id: &str) -> Value {
    let lines = capture().lines();
    lines
        .iter()
        .find(|l| {
            l["fields"]["message"] == "request answered" && l["span"]["jsonrpc.request.id"] == id
        })
        .map(|l| l["span"].clone())
        .unwrap_or_else(|| panic!("no request line for {id}"))
}

/// The span of request `id` once its task wrote `request answered` (the
/// 2025 paths log no such line: their span is read from any line in it).
fn span_of(id: &str) -> Value {
    let mut found = None;
    common::wait_until(Duration::from_secs(10), || {
        found = capture()
            .lines()
            .into_iter()
            .rev()
            .find(|l| l["span"]["jsonrpc.request.id"] == id && l["span"]["outcome"].is_string())
            .map(|l| l["span"].clone());
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("no span for request {id}"))
}

fn assert_nothing_secret() {
    let lines = capture().lines();
    for line in lines {
        assert!(
            !line.to_string().contains(SECRET),
            "an argument reached a log line: {line}"
        );
    }
}

#[test]
fn http_requests_carry_the_conventions_attributes_and_metrics() {
    capture();
    let mut config = common::config();
    config.compat = Some(genmcp::http::CompatConfig::default());
    let srv = genmcp::http::ServerThread::spawn(suite, config).expect("starts");

    let ok = call(
        srv.addr,
        json!("h-ok"),
        "tools/call",
        json!({"name": "echo", "arguments": {"password": SECRET}}),
    );
    assert_eq!(ok.status, 200);
    let span = request_span("h-ok");
    assert_eq!(span["otel.name"], "tools/call echo");
    assert_eq!(span["otel.kind"], "server");
    assert_eq!(span["mcp.method.name"], "tools/call");
    assert_eq!(span["gen_ai.tool.name"], "echo");
    assert_eq!(span["gen_ai.operation.name"], "execute_tool");
    assert_eq!(span["mcp.protocol.version"], "2026-07-28");
    assert_eq!(span["network.transport"], "tcp");
    assert_eq!(span["outcome"], "ok");
    assert!(span.get("error.type").is_none(), "{span}");

    let broken = call(
        srv.addr,
        json!(31),
        "tools/call",
        json!({"name": "broken", "arguments": {}}),
    );
    assert_eq!(broken.json()["result"]["isError"], true);
    let span = request_span("31");
    assert_eq!(span["error.type"], "tool_error");
    assert_eq!(span["otel.status_code"], "ERROR");
    assert!(span.get("rpc.response.status_code").is_none(), "{span}");

    // An unknown tool: a protocol error, and a label folded into `_OTHER`.
    let unknown = call(
        srv.addr,
        json!("h-unknown"),
        "tools/call",
        json!({"name": "no-such-tool-xyzzy", "arguments": {}}),
    );
    assert_eq!(unknown.json()["error"]["code"], -32602);
    let span = request_span("h-unknown");
    assert_eq!(span["error.type"], "-32602");
    assert_eq!(span["rpc.response.status_code"], "-32602");
    // The client's text is not a span name: only tools the catalog defines.
    assert_eq!(span["otel.name"], "tools/call");
    assert_eq!(span["gen_ai.tool.name"], "no-such-tool-xyzzy");

    // A resource URI: never in the span name, and its attribute without
    // userinfo, query or fragment (where signed URLs keep their secrets).
    let read = call(
        srv.addr,
        json!("h-uri"),
        "resources/read",
        json!({"uri": format!("https://user:{SECRET}@files.example/doc?sig={SECRET}#{SECRET}")}),
    );
    assert_eq!(read.status, 200);
    let span = request_span("h-uri");
    assert_eq!(span["otel.name"], "resources/read");
    assert_eq!(span["mcp.resource.uri"], "https://files.example/doc");

    let list = call(srv.addr, json!("h-list"), "tools/list", json!({}));
    assert_eq!(list.status, 200);
    assert_eq!(request_span("h-list")["otel.name"], "tools/list");

    // A 2025 session's request: the negotiated version, the same names.
    let session = legacy::initialize(srv.addr);
    let resp = legacy::request(
        srv.addr,
        &session,
        json!("h-legacy"),
        "tools/call",
        json!({"name": "echo", "arguments": {"password": SECRET}}),
    );
    assert_eq!(resp.status, 200);
    let span = span_of("h-legacy");
    assert_eq!(span["otel.name"], "tools/call echo");
    assert_eq!(span["mcp.protocol.version"], legacy::LEGACY);
    assert_eq!(span["network.transport"], "tcp");
    // Its end (DELETE) is a session in the session histogram.
    assert_eq!(legacy::delete(srv.addr, &session).status, 200);

    // A listen stream: its span and its life in the session histogram.
    let mut stream = common::listen(
        srv.addr,
        json!("h-listen"),
        json!({"toolsListChanged": true}),
    );
    stream.next_message().expect("ack");
    let admin = genmcp::admin::Admin::new(srv.server.clone(), Vec::new());
    // Shutdown completes the stream (a clean end: no error.type).
    srv.stop();
    assert_eq!(
        stream.next_message().expect("completion")["result"]["resultType"],
        "complete"
    );
    let session_series = "mcp_server_session_duration_seconds_count{genmcp_session_kind=\"listen\",\
                          error_type=\"\",network_transport=\"tcp\",mcp_protocol_version=\"2026-07-28\"} 1";
    assert!(
        common::wait_until(Duration::from_secs(10), || admin
            .metrics_text()
            .contains(session_series)),
        "{}",
        admin.metrics_text()
    );
    let stream_line = capture()
        .lines()
        .into_iter()
        .find(|l| {
            l["fields"]["message"] == "stream closed"
                && l["span"]["jsonrpc.request.id"] == "h-listen"
        })
        .expect("the stream's close line");
    assert_eq!(
        stream_line["span"]["genmcp.stream.filter"],
        "toolsListChanged"
    );
    assert_eq!(stream_line["span"]["reason"], "shutdown");
    assert_eq!(stream_line["span"]["frames"], 2, "ack and completion");

    let text = admin.metrics_text();
    for series in [
        "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"echo\",\
         error_type=\"\",network_transport=\"tcp\",mcp_protocol_version=\"2026-07-28\"} 1",
        "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"broken\",\
         error_type=\"tool_error\",network_transport=\"tcp\",mcp_protocol_version=\"2026-07-28\"} 1",
        "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"_OTHER\",\
         error_type=\"-32602\",network_transport=\"tcp\",mcp_protocol_version=\"2026-07-28\"} 1",
        "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/list\",gen_ai_tool_name=\"\",\
         error_type=\"\",network_transport=\"tcp\",mcp_protocol_version=\"2026-07-28\"} 1",
        "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"echo\",\
         error_type=\"\",network_transport=\"tcp\",mcp_protocol_version=\"2025-11-25\"} 1",
        "mcp_server_session_duration_seconds_count{genmcp_session_kind=\"session\",error_type=\"\",\
         network_transport=\"tcp\",mcp_protocol_version=\"2025-11-25\"} 1",
        // The listen's answer (its acknowledgement), as a request.
        "mcp_server_operation_duration_seconds_count{mcp_method_name=\"subscriptions/listen\",\
         gen_ai_tool_name=\"\",error_type=\"\",network_transport=\"tcp\",\
         mcp_protocol_version=\"2026-07-28\"} 1",
    ] {
        assert!(text.contains(series), "missing {series} in\n{text}");
    }
    assert!(
        !text.contains("xyzzy"),
        "an unknown tool name became a label"
    );
    assert!(!text.contains(SECRET));
    assert_nothing_secret();
}

/// Runs `serve_io` on an in-memory pipe, writes `requests` and returns the
/// responses to those with an id, in order of arrival.
async fn stdio(requests: &[Value]) -> Vec<Value> {
    let (client, server_side) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_side);
    let task = actix_rt::spawn(async move {
        let config = StdioConfig::default();
        serve_io(
            suite(),
            Server::new(config.limits.clone()),
            &config,
            server_read,
            server_write,
        )
        .await
    });
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let mut answers = Vec::new();
    for request in requests {
        write
            .write_all(format!("{request}\n").as_bytes())
            .await
            .expect("write");
        if request.get("id").is_none() {
            continue;
        }
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("an answer in time")
            .expect("read")
            .expect("a line");
        answers.push(serde_json::from_str::<Value>(&line).expect("JSON"));
    }
    write.shutdown().await.expect("EOF");
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    answers
}

#[actix_rt::test]
async fn stdio_requests_of_both_eras_carry_the_conventions_attributes() {
    capture();
    let modern = stdio(&[common::request(
        json!("p-ok"),
        "tools/call",
        json!({"name": "echo", "arguments": {"password": SECRET}}),
    )])
    .await;
    assert!(modern[0]["result"].is_object(), "{modern:?}");
    let span = span_of("p-ok");
    assert_eq!(span["otel.name"], "tools/call echo");
    assert_eq!(span["network.transport"], "pipe");
    assert_eq!(span["mcp.protocol.version"], "2026-07-28");

    let old = stdio(&[
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": "p-legacy", "method": "tools/call",
               "params": {"name": "broken", "arguments": {"password": SECRET}}}),
    ])
    .await;
    assert_eq!(old[1]["result"]["isError"], true, "{old:?}");
    let span = span_of("p-legacy");
    assert_eq!(span["otel.name"], "tools/call broken");
    assert_eq!(span["network.transport"], "pipe");
    assert_eq!(span["mcp.protocol.version"], "2025-06-18");
    assert_eq!(span["error.type"], "tool_error");
    assert_nothing_secret();
}

/// The `tools/call slow` series of `mcp.server.operation.duration` with
/// `error.type = cancelled`, on `transport`.
fn cancelled_series(transport: &str) -> String {
    format!(
        "mcp_server_operation_duration_seconds_count{{mcp_method_name=\"tools/call\",\
         gen_ai_tool_name=\"slow\",error_type=\"cancelled\",network_transport=\"{transport}\",\
         mcp_protocol_version=\"2026-07-28\"}} 1"
    )
}

#[test]
fn a_call_whose_client_went_away_is_recorded_as_cancelled() {
    capture();
    let mut config = common::config();
    // The disconnect is seen when a write fails: a keep-alive comment soon.
    config.keep_alive = Duration::from_millis(100);
    let srv = genmcp::http::ServerThread::spawn(suite, config).expect("starts");
    let admin = genmcp::admin::Admin::new(srv.server.clone(), Vec::new());
    let mut body = common::request(
        json!("h-gone"),
        "tools/call",
        json!({"name": "slow", "arguments": {"key": "h-gone", "password": SECRET}}),
    );
    body["params"]["_meta"]["progressToken"] = json!("h-gone-progress");
    let mut exchange = common::Exchange::open(
        srv.addr,
        &common::headers("tools/call", Some("slow")),
        body.to_string().as_bytes(),
    );
    assert_eq!(
        exchange.next_message().expect("progress")["method"],
        "notifications/progress"
    );
    assert!(has_started("h-gone"));
    exchange.disconnect();
    let series = cancelled_series("tcp");
    assert!(
        common::wait_until(Duration::from_secs(10), || admin
            .metrics_text()
            .contains(&series)),
        "missing {series} in\n{}",
        admin.metrics_text()
    );
    let span = span_of("h-gone");
    assert_eq!(span["outcome"], "cancelled");
    assert_eq!(span["error.type"], "cancelled");
    assert_eq!(span["otel.status_code"], "ERROR");
    srv.stop();
    assert_nothing_secret();
}

#[actix_rt::test]
async fn a_stdio_call_cancelled_by_the_client_is_recorded_as_cancelled() {
    capture();
    let (client, server_side) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_side);
    let config = StdioConfig::default();
    let server = Server::new(config.limits.clone());
    let admin = genmcp::admin::Admin::new(server.clone(), Vec::new());
    let task = actix_rt::spawn(async move {
        serve_io(suite(), server, &config, server_read, server_write).await
    });
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let call = common::request(
        json!("p-cancel"),
        "tools/call",
        json!({"name": "slow", "arguments": {"key": "p-cancel"}}),
    );
    write
        .write_all(format!("{call}\n").as_bytes())
        .await
        .expect("write");
    for _ in 0..200 {
        if has_started("p-cancel") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(has_started("p-cancel"), "the slow tool never started");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": "p-cancel"}});
    let ping = common::request(json!("p-after"), "ping", json!({}));
    write
        .write_all(format!("{cancel}\n{ping}\n").as_bytes())
        .await
        .expect("write");
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("an answer in time")
        .expect("read")
        .expect("a line");
    let answer: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(answer["id"], "p-after", "{answer}");
    let series = cancelled_series("pipe");
    for _ in 0..200 {
        if admin.metrics_text().contains(&series) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        admin.metrics_text().contains(&series),
        "missing {series} in\n{}",
        admin.metrics_text()
    );
    write.shutdown().await.expect("EOF");
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}
