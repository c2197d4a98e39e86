//! Every request gets its span and its `mcp.server.operation.duration`, the
//! ones a transport refuses before any handler sees them too (malformed JSON,
//! missing or wrong headers, an unserved version, authentication, a body too
//! large, the rate limit, a method not routed, an unknown 2025 session), on
//! the 2026 POST, the 2025 session POST and stdio of both eras; the 2025
//! methods the compatibility layer answers itself (`initialize`, `ping`,
//! `logging/setLevel`, `resources/subscribe`) are traced like the others; a
//! 2025 GET stream and a session left to expire are in
//! `mcp.server.session.duration` under the session's version; and garbage
//! method or tool names never become labels.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::log_capture::Capture;
use common::{headers, legacy, post, post_raw, request};
use genmcp::http::auth::{AuthConfig, TokenTable};
use genmcp::http::{CompatConfig, RateLimit};
use genmcp::prelude::*;
use genmcp::runtime::Server;
use genmcp::transport::stdio::{StdioConfig, serve_io};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const TABLE: &str = "tok-user bob\n";

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| Capture::install("genmcp=debug"))
}

/// The demo suite (listen streams, resource updates) plus an `echo` tool.
fn suite() -> Suite<genmcp_cli::demo::NotesSubscriptions> {
    let (suite, _bus) = genmcp_cli::demo::suite();
    suite.catalog().add_tool(
        ToolBuilder::new("echo")
            .description("echoes its arguments")
            .handler(|c| async move {
                Ok(CallToolResult::text(Value::Object(c.arguments).to_string()).into())
            }),
    );
    suite
}

fn with_token(mut h: Vec<(String, String)>) -> Vec<(String, String)> {
    h.push(("Authorization".into(), "Bearer tok-user".into()));
    h
}

/// The count of one `mcp_server_operation_duration_seconds` series.
fn operations(
    text: &str,
    method: &str,
    tool: &str,
    error: &str,
    transport: &str,
    version: &str,
) -> u64 {
    let series = format!(
        "mcp_server_operation_duration_seconds_count{{mcp_method_name=\"{method}\",\
         gen_ai_tool_name=\"{tool}\",error_type=\"{error}\",network_transport=\"{transport}\",\
         mcp_protocol_version=\"{version}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// How many `mcp_server_operation_duration_seconds` series there are.
fn operation_series(text: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("mcp_server_operation_duration_seconds_count{"))
        .count()
}

/// The span of the first line with `message` whose span satisfies `pred`.
fn span_where(message: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let mut found = None;
    common::wait_until(Duration::from_secs(10), || {
        found = capture()
            .lines()
            .into_iter()
            .find(|l| l["fields"]["message"] == message && pred(&l["span"]))
            .map(|l| l["span"].clone());
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("no {message:?} line with the span looked for"))
}

/// The span of the refused request with id `id`.
fn refused(id: &str) -> Value {
    span_where("request refused", |s| s["jsonrpc.request.id"] == id)
}

fn assert_refused(span: &Value, method: &str, error: &str, code: Option<&str>) {
    assert_eq!(span["mcp.method.name"], method, "{span}");
    assert_eq!(span["error.type"], error, "{span}");
    assert_eq!(span["otel.status_code"], "ERROR", "{span}");
    assert_eq!(span["otel.kind"], "server", "{span}");
    assert_eq!(span["outcome"], "refused", "{span}");
    match code {
        Some(code) => assert_eq!(span["rpc.response.status_code"], code, "{span}"),
        None => assert!(span.get("rpc.response.status_code").is_none(), "{span}"),
    }
}

#[test]
fn requests_refused_on_the_2026_post_get_a_span_and_a_duration() {
    capture();
    let mut config = common::config();
    config.auth = Some(AuthConfig::new(TokenTable::parse(TABLE).unwrap()));
    config.max_body = 4096;
    let srv = ServerThread::spawn(suite, config).expect("starts");
    let admin = genmcp::admin::Admin::new(srv.server.clone(), Vec::new());

    // 401 before the body is read: the routing headers name the request.
    let body = request(
        json!("r-401"),
        "tools/call",
        json!({"name": "echo", "arguments": {}}),
    );
    let resp = post(srv.addr, &headers("tools/call", Some("echo")), &body);
    assert_eq!(resp.status, 401);
    let span = span_where("request refused", |s| {
        s["error.type"] == "401" && s["gen_ai.tool.name"] == "echo"
    });
    assert_refused(&span, "tools/call", "401", Some("-32600"));
    assert_eq!(span["otel.name"], "tools/call echo");
    assert_eq!(span["mcp.protocol.version"], "2026-07-28");
    assert_eq!(span["network.transport"], "tcp");

    // A 401 naming a tool the server does not define: the name is the
    // client's text, kept out of the span name.
    let body = request(
        json!("r-401-unknown"),
        "tools/call",
        json!({"name": "client-text-zzz", "arguments": {}}),
    );
    let resp = post(
        srv.addr,
        &headers("tools/call", Some("client-text-zzz")),
        &body,
    );
    assert_eq!(resp.status, 401);
    let span = span_where("request refused", |s| {
        s["error.type"] == "401" && s["gen_ai.tool.name"] == "client-text-zzz"
    });
    assert_eq!(span["otel.name"], "tools/call");

    // Malformed JSON: -32700.
    let resp = post_raw(
        srv.addr,
        &with_token(headers("tools/list", None)),
        b"{\"jsonrpc\": \"2.0\", \"id\": \"r-json\", ",
    );
    assert_eq!(resp.status, 400);
    let span = span_where("request refused", |s| {
        s["error.type"] == "-32700" && s["mcp.method.name"] == "tools/list"
    });
    assert_refused(&span, "tools/list", "-32700", Some("-32700"));

    // A required header missing: -32020, with the body's method and id.
    let mut h = with_token(headers("tools/list", None));
    h.retain(|(k, _)| k != "Mcp-Method");
    let resp = post(
        srv.addr,
        &h,
        &request(json!("r-header"), "tools/list", json!({})),
    );
    assert_eq!(resp.status, 400);
    assert_refused(&refused("r-header"), "tools/list", "-32020", Some("-32020"));

    // A version this server does not serve: -32022, its label folded.
    let mut h = with_token(headers("tools/list", None));
    for (k, v) in &mut h {
        if k == "MCP-Protocol-Version" {
            *v = "1999-01-01".into();
        }
    }
    let mut meta = common::meta();
    meta["io.modelcontextprotocol/protocolVersion"] = json!("1999-01-01");
    let resp = post(
        srv.addr,
        &h,
        &request(json!("r-version"), "tools/list", json!({"_meta": meta})),
    );
    assert_eq!(resp.status, 400);
    let span = refused("r-version");
    assert_refused(&span, "tools/list", "-32022", Some("-32022"));
    assert_eq!(span["mcp.protocol.version"], "_OTHER");

    // A body past `max_body`: 413.
    let big = "x".repeat(8192);
    let resp = post(
        srv.addr,
        &with_token(headers("tools/call", Some("echo"))),
        &request(
            json!("r-413"),
            "tools/call",
            json!({"name": "echo", "arguments": {"big": big}}),
        ),
    );
    assert_eq!(resp.status, 413);

    // A listen the client cannot read as SSE: 406, after routing.
    let mut h = with_token(headers("subscriptions/listen", None));
    for (k, v) in &mut h {
        if k == "Accept" {
            *v = "application/json".into();
        }
    }
    let resp = post(
        srv.addr,
        &h,
        &request(
            json!("r-406"),
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        ),
    );
    assert_eq!(resp.status, 406);
    assert_refused(
        &refused("r-406"),
        "subscriptions/listen",
        "406",
        Some("-32600"),
    );

    // An id longer than the envelope allows: refused, and not repeated in
    // the span.
    let long = "i".repeat(300);
    let resp = post(
        srv.addr,
        &with_token(headers("tools/list", None)),
        &request(json!(long), "tools/list", json!({})),
    );
    assert_eq!(resp.status, 400);
    span_where("request refused", |s| {
        s["error.type"] == "-32600" && s["mcp.method.name"] == "tools/list"
    });
    assert!(
        !capture()
            .lines()
            .iter()
            .any(|l| l.to_string().contains(&long)),
        "an oversized id reached a span"
    );

    // A method not routed: -32601, its name folded into `_OTHER`.
    let resp = post(
        srv.addr,
        &with_token(headers("zz/not-a-method", None)),
        &request(json!("r-404"), "zz/not-a-method", json!({})),
    );
    assert_eq!(resp.status, 404);
    let span = refused("r-404");
    assert_refused(&span, "_OTHER", "-32601", Some("-32601"));

    let text = admin.metrics_text();
    let v = "2026-07-28";
    for (method, tool, error, version) in [
        ("tools/call", "echo", "401", v),
        ("tools/list", "", "-32700", v),
        ("tools/list", "", "-32020", v),
        ("tools/list", "", "-32022", "_OTHER"),
        ("tools/list", "", "-32600", v),
        ("tools/call", "echo", "413", v),
        ("subscriptions/listen", "", "406", v),
        ("_OTHER", "", "-32601", v),
    ] {
        assert_eq!(
            operations(&text, method, tool, error, "tcp", version),
            1,
            "{method} {error} in\n{text}"
        );
    }

    // Garbage names, refused before and after the body is read, never
    // become labels: the series do not grow with them.
    let garbage = |round: usize| {
        for i in 0..20 {
            let name = format!("garbage-{round}-{i}");
            let resp = post(
                srv.addr,
                &headers(&name, Some(&name)),
                &request(json!(i), &name, json!({})),
            );
            assert_eq!(resp.status, 401);
            let resp = post(
                srv.addr,
                &headers("tools/call", Some(&name)),
                &request(json!(i), "tools/call", json!({"name": name})),
            );
            assert_eq!(resp.status, 401);
            let resp = post(
                srv.addr,
                &with_token(headers(&name, None)),
                &request(json!(i), &name, json!({})),
            );
            assert_eq!(resp.status, 404);
            let resp = post(
                srv.addr,
                &with_token(headers("tools/call", Some(&name))),
                &request(json!(i), "tools/call", json!({"name": name})),
            );
            assert_eq!(resp.status, 200, "{}", resp.json());
        }
    };
    garbage(0);
    let after_one = admin.metrics_text();
    garbage(1);
    let after_two = admin.metrics_text();
    assert_eq!(
        operation_series(&after_one),
        operation_series(&after_two),
        "{after_two}"
    );
    assert!(!after_two.contains("garbage"), "{after_two}");
    assert_eq!(
        operations(&after_two, "_OTHER", "", "401", "tcp", v),
        40,
        "{after_two}"
    );
    // And the 401 naming `client-text-zzz` above.
    assert_eq!(
        operations(&after_two, "tools/call", "_OTHER", "401", "tcp", v),
        41,
        "{after_two}"
    );
    srv.stop();
}

#[test]
fn a_request_over_the_rate_limit_gets_a_span_and_a_duration() {
    capture();
    let mut config = common::config();
    // One request, then a refill every 100 s: the test never sees one.
    let mut rate = RateLimit::per_second(1).burst(1);
    rate.per_second = 0.01;
    config.rate_limit = Some(rate);
    let srv = ServerThread::spawn(suite, config).expect("starts");
    let list = |id: &str| {
        post(
            srv.addr,
            &headers("tools/list", None),
            &request(json!(id), "tools/list", json!({})),
        )
    };
    assert_eq!(list("rate-ok").status, 200);
    assert_eq!(list("rate-429").status, 429);
    let span = span_where("request refused", |s| {
        s["error.type"] == "429" && s["mcp.method.name"] == "tools/list"
    });
    assert_refused(&span, "tools/list", "429", Some("-32603"));
    let text = genmcp::admin::Admin::new(srv.server.clone(), Vec::new()).metrics_text();
    assert_eq!(
        operations(&text, "tools/list", "", "429", "tcp", "2026-07-28"),
        1,
        "{text}"
    );
    assert_eq!(
        operations(&text, "tools/list", "", "", "tcp", "2026-07-28"),
        1,
        "{text}"
    );
    srv.stop();
}

#[test]
fn the_2025_session_path_traces_every_request_and_its_get_stream() {
    capture();
    let mut config = common::config();
    config.compat = Some(CompatConfig::default());
    let srv = ServerThread::spawn(suite, config).expect("starts");
    let admin = genmcp::admin::Admin::new(srv.server.clone(), Vec::new());
    let l = legacy::LEGACY;

    let session = legacy::initialize(srv.addr);
    let ping = legacy::request(srv.addr, &session, json!("l-ping"), "ping", json!({}));
    assert_eq!(ping.json()["result"], json!({}));
    let span = span_where("request answered", |s| s["jsonrpc.request.id"] == "l-ping");
    assert_eq!(span["otel.name"], "ping");
    assert_eq!(span["mcp.protocol.version"], l);
    assert_eq!(span["network.transport"], "tcp");
    assert_eq!(span["outcome"], "ok");
    let level = legacy::request(
        srv.addr,
        &session,
        json!("l-level"),
        "logging/setLevel",
        json!({"level": "info"}),
    );
    assert_eq!(level.status, 200);
    let sub = legacy::request(
        srv.addr,
        &session,
        json!("l-sub"),
        "resources/subscribe",
        json!({"uri": "notes://n1"}),
    );
    assert_eq!(sub.status, 200);
    let span = span_where("request answered", |s| s["jsonrpc.request.id"] == "l-sub");
    // A URI is unbounded: never in the span name.
    assert_eq!(span["otel.name"], "resources/subscribe");
    assert_eq!(span["mcp.resource.uri"], "notes://n1");

    // A session this server never made: 404 before dispatch.
    let resp = legacy::request(
        srv.addr,
        "forged-session",
        json!("l-404"),
        "tools/list",
        json!({}),
    );
    assert_eq!(resp.status, 404);
    let span = refused("l-404");
    assert_refused(&span, "tools/list", "404", Some("-32600"));
    assert_eq!(span["mcp.protocol.version"], l);

    // A method the 2025 path does not route: -32601 in band.
    let resp = legacy::request(
        srv.addr,
        &session,
        json!("l-unrouted"),
        "subscriptions/listen",
        json!({}),
    );
    assert_eq!(resp.json()["error"]["code"], -32601);
    assert_refused(
        &refused("l-unrouted"),
        "subscriptions/listen",
        "-32601",
        Some("-32601"),
    );

    // The GET stream, ended by the session's DELETE.
    let mut get = legacy::get(srv.addr, Some(&session));
    assert_eq!(get.status, 200);
    assert_eq!(legacy::delete(srv.addr, &session).status, 200);
    let _ = get.read_to_end();
    // Its span: no JSON-RPC request opened it, so no method or request id.
    let span = span_where("stream closed", |s| {
        s["otel.name"] == "session stream" && s["mcp.protocol.version"] == l
    });
    assert!(span.get("mcp.method.name").is_none(), "{span}");
    assert!(span.get("jsonrpc.request.id").is_none(), "{span}");

    let get_series = format!(
        "mcp_server_session_duration_seconds_count{{genmcp_session_kind=\"get\",error_type=\"\",\
         network_transport=\"tcp\",mcp_protocol_version=\"{l}\"}} 1"
    );
    assert!(
        common::wait_until(Duration::from_secs(10), || admin
            .metrics_text()
            .contains(&get_series)),
        "{}",
        admin.metrics_text()
    );
    let text = admin.metrics_text();
    assert!(!text.contains("genmcp_session_kind=\"get\",error_type=\"\",network_transport=\"tcp\",mcp_protocol_version=\"_OTHER\""), "{text}");
    for (method, error) in [
        ("initialize", ""),
        ("ping", ""),
        // The demo suite does not advertise logging: -32601 in band.
        ("logging/setLevel", "-32601"),
        ("resources/subscribe", ""),
        ("tools/list", "404"),
        ("subscriptions/listen", "-32601"),
    ] {
        assert_eq!(
            operations(&text, method, "", error, "tcp", l),
            1,
            "{method} in\n{text}"
        );
    }
    srv.stop();
}

#[test]
fn a_2025_session_left_to_expire_is_recorded_when_it_expires() {
    let mut config = common::config();
    let mut compat = CompatConfig::default();
    compat.session_ttl = Duration::from_millis(500);
    config.compat = Some(compat);
    let srv = ServerThread::spawn(suite, config).expect("starts");
    let admin = genmcp::admin::Admin::new(srv.server.clone(), Vec::new());
    let session = legacy::initialize(srv.addr);
    let ended = format!(
        "mcp_server_session_duration_seconds_count{{genmcp_session_kind=\"session\",error_type=\"\",\
         network_transport=\"tcp\",mcp_protocol_version=\"{}\"}} 1",
        legacy::LEGACY
    );
    assert!(
        common::wait_until(Duration::from_secs(10), || admin
            .metrics_text()
            .contains(&ended)),
        "{}",
        admin.metrics_text()
    );
    // Expired: its id is refused, and nothing is recorded twice.
    let resp = legacy::request(srv.addr, &session, json!(1), "ping", json!({}));
    assert_eq!(resp.status, 404);
    std::thread::sleep(Duration::from_millis(600));
    assert!(admin.metrics_text().contains(&ended));
    srv.stop();
}

/// Runs `serve_io` on an in-memory pipe with `server`, writes `lines` and
/// returns the responses, in order of arrival (`expect` of them).
async fn stdio(server: Server, lines: &[&str], expect: usize) -> Vec<Value> {
    let (client, server_side) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_side);
    let task = actix_rt::spawn(async move {
        let config = StdioConfig::default();
        serve_io(suite(), server, &config, server_read, server_write).await
    });
    let (read, mut write) = tokio::io::split(client);
    let mut reader = BufReader::new(read).lines();
    for line in lines {
        write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
    }
    let mut answers = Vec::new();
    while answers.len() < expect {
        let line = tokio::time::timeout(Duration::from_secs(10), reader.next_line())
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
async fn requests_refused_on_stdio_of_both_eras_get_a_span_and_a_duration() {
    capture();
    let server = Server::new(StdioConfig::default().limits);
    let admin = genmcp::admin::Admin::new(server.clone(), Vec::new());
    let unknown = request(json!("p-unknown"), "zz/nope", json!({})).to_string();
    let bad_meta =
        json!({"jsonrpc": "2.0", "id": "p-meta", "method": "tools/list", "params": {}}).to_string();
    let answers = stdio(
        server.clone(),
        &["{\"jsonrpc\": \"2.0\", \"id\": ", &unknown, &bad_meta],
        3,
    )
    .await;
    assert_eq!(answers[0]["error"]["code"], -32700, "{answers:?}");
    assert_eq!(answers[1]["error"]["code"], -32601, "{answers:?}");
    assert_eq!(answers[2]["error"]["code"], -32602, "{answers:?}");
    let span = refused("p-unknown");
    assert_refused(&span, "_OTHER", "-32601", Some("-32601"));
    assert_eq!(span["network.transport"], "pipe");
    assert_refused(&refused("p-meta"), "tools/list", "-32602", Some("-32602"));

    let legacy_server = Server::new(StdioConfig::default().limits);
    let legacy_admin = genmcp::admin::Admin::new(legacy_server.clone(), Vec::new());
    let init = json!({"jsonrpc": "2.0", "id": "p-init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let ping = json!({"jsonrpc": "2.0", "id": "p-ping", "method": "ping"}).to_string();
    let again = init.replace("p-init", "p-again");
    let answers = stdio(
        legacy_server,
        &[&init, &initialized, &ping, &again, "not json"],
        4,
    )
    .await;
    assert!(answers[0]["result"].is_object(), "{answers:?}");
    assert_eq!(answers[1]["result"], json!({}), "{answers:?}");
    assert_eq!(answers[2]["error"]["code"], -32600, "{answers:?}");
    assert_eq!(answers[3]["error"]["code"], -32700, "{answers:?}");
    let span = span_where("request answered", |s| s["jsonrpc.request.id"] == "p-ping");
    assert_eq!(span["mcp.protocol.version"], "2025-06-18");
    assert_eq!(span["network.transport"], "pipe");
    let span = refused("p-again");
    assert_refused(&span, "initialize", "-32600", Some("-32600"));
    assert_eq!(span["mcp.protocol.version"], "2025-06-18");

    let text = admin.metrics_text();
    let v = "2026-07-28";
    assert_eq!(
        operations(&text, "_OTHER", "", "-32700", "pipe", "_OTHER"),
        1,
        "{text}"
    );
    assert_eq!(
        operations(&text, "_OTHER", "", "-32601", "pipe", v),
        1,
        "{text}"
    );
    assert_eq!(
        operations(&text, "tools/list", "", "-32602", "pipe", "_OTHER"),
        1,
        "{text}"
    );
    let l = "2025-06-18";
    // The session's stream, ended by EOF, under the session's version.
    let stream = format!(
        "mcp_server_session_duration_seconds_count{{genmcp_session_kind=\"get\",error_type=\"\",\
         network_transport=\"pipe\",mcp_protocol_version=\"{l}\"}} 1"
    );
    assert!(
        common::wait_until(Duration::from_secs(10), || legacy_admin
            .metrics_text()
            .contains(&stream)),
        "{}",
        legacy_admin.metrics_text()
    );
    let text = legacy_admin.metrics_text();
    for (method, error) in [
        ("initialize", ""),
        ("ping", ""),
        ("initialize", "-32600"),
        ("_OTHER", "-32700"),
    ] {
        assert_eq!(
            operations(&text, method, "", error, "pipe", l),
            1,
            "{method} {error} in\n{text}"
        );
    }
}
