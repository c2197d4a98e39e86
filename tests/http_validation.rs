//! Streamable HTTP validation over real HTTP: every refusal has its status and
//! JSON-RPC code, echoes the request id, and nothing is a 500 or a hang.

mod common;

use common::{Exchange, Response, headers, post, post_raw, request};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn server() -> ServerThread {
    let config = common::config();
    ServerThread::spawn(
        || {
            let (suite, _bus) = genmcp_cli::demo::suite();
            suite
        },
        config,
    )
    .expect("server starts")
}

fn with(mut h: Vec<(String, String)>, name: &str, value: &str) -> Vec<(String, String)> {
    h.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    h.push((name.to_owned(), value.to_owned()));
    h
}

fn without(mut h: Vec<(String, String)>, name: &str) -> Vec<(String, String)> {
    h.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    h
}

fn expect(resp: &Response, status: u16, id: Value, code: i64) {
    assert_eq!(
        resp.status,
        status,
        "{}",
        String::from_utf8_lossy(&resp.body)
    );
    let body = resp.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], id, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

fn discover(id: i64) -> Value {
    request(json!(id), "server/discover", json!({}))
}

#[test]
fn get_and_delete_are_405_with_allow_post() {
    let srv = server();
    for method in ["GET", "DELETE", "PUT"] {
        let resp = Exchange::open_with(srv.addr, method, &headers("server/discover", None), b"")
            .into_response();
        assert_eq!(resp.status, 405, "{method}");
        assert_eq!(resp.header("allow"), Some("POST"));
    }
}

#[test]
fn foreign_host_or_origin_is_403_and_loopback_is_served() {
    let srv = server();
    let h = headers("server/discover", None);
    let resp = post(
        srv.addr,
        &with(h.clone(), "Host", "evil.example.com"),
        &discover(1),
    );
    assert_eq!(resp.status, 403);
    let resp = post(
        srv.addr,
        &with(h.clone(), "Origin", "http://evil.example.com"),
        &discover(1),
    );
    assert_eq!(resp.status, 403);
    let local = format!("http://{}", srv.addr);
    let resp = post(srv.addr, &with(h.clone(), "Origin", &local), &discover(1));
    assert_eq!(resp.status, 200);
    let resp = post(
        srv.addr,
        &with(h, "Host", &format!("localhost:{}", srv.addr.port())),
        &discover(1),
    );
    assert_eq!(resp.status, 200);
}

#[test]
fn accept_and_content_type_are_checked() {
    let srv = server();
    let h = headers("server/discover", None);
    assert_eq!(
        post(
            srv.addr,
            &with(h.clone(), "Accept", "text/html"),
            &discover(1)
        )
        .status,
        406
    );
    let resp = post(
        srv.addr,
        &with(h.clone(), "Content-Type", "text/plain"),
        &discover(1),
    );
    // Its body is a JSON-RPC error whose id is not known: `null`.
    expect(&resp, 415, Value::Null, -32600);
    assert!(resp.json().get("id").is_some(), "{:?}", resp.json());
    // Accept in the other order is fine.
    let ok = post(
        srv.addr,
        &with(h, "Accept", "text/event-stream, application/json"),
        &discover(1),
    );
    assert_eq!(ok.status, 200);
    // A listen must accept SSE.
    let body = request(
        json!(2),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let resp = post(
        srv.addr,
        &with(
            headers("subscriptions/listen", None),
            "Accept",
            "application/json",
        ),
        &body,
    );
    assert_eq!(resp.status, 406);
}

#[test]
fn malformed_bodies_are_clear_400s() {
    let srv = server();
    let h = headers("server/discover", None);
    let resp = post_raw(srv.addr, &h, b"{not json");
    expect(&resp, 400, Value::Null, -32700);
    let resp = post(srv.addr, &h, &json!([discover(1)]));
    expect(&resp, 400, Value::Null, -32600);
    let resp = post(
        srv.addr,
        &h,
        &json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
    );
    expect(&resp, 400, json!(3), -32600);
    let resp = post(
        srv.addr,
        &h,
        &json!({"jsonrpc": "2.0", "id": null, "method": "server/discover", "params": {}}),
    );
    expect(&resp, 400, Value::Null, -32600);
    let resp = post(
        srv.addr,
        &h,
        &json!({"jsonrpc": "1.0", "id": 4, "method": "server/discover"}),
    );
    expect(&resp, 400, json!(4), -32600);
}

#[test]
fn a_five_mib_body_is_413_not_a_500_or_a_hang() {
    let srv = server();
    let filler = "x".repeat(5 * 1024 * 1024);
    let body = request(json!(1), "server/discover", json!({"filler": filler}));
    let resp = post(srv.addr, &headers("server/discover", None), &body);
    assert_eq!(resp.status, 413);
    assert_eq!(resp.json()["error"]["code"], -32600);
    // The server still serves.
    assert_eq!(
        post(srv.addr, &headers("server/discover", None), &discover(2)).status,
        200
    );
}

#[test]
fn notifications_are_accepted_with_202_and_no_body() {
    let srv = server();
    let n =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    let resp = post(srv.addr, &headers("notifications/cancelled", None), &n);
    assert_eq!(resp.status, 202);
    assert!(resp.body.is_empty());
    // Unless its header names a version the server does not serve.
    let h = with(
        headers("notifications/cancelled", None),
        "MCP-Protocol-Version",
        "1900-01-01",
    );
    let resp = post(srv.addr, &h, &n);
    expect(&resp, 400, Value::Null, -32022);
    assert_eq!(resp.json()["error"]["data"]["requested"], "1900-01-01");
}

#[test]
fn header_and_meta_checks_follow_the_reference_order() {
    let srv = server();
    let h = headers("server/discover", None);
    // Header version differs from the body: -32020, even when the body's is unknown.
    let mut body = discover(10);
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    expect(&post(srv.addr, &h, &body), 400, json!(10), -32020);
    // Both unknown: -32022 with the supported list and the requested version.
    let resp = post(
        srv.addr,
        &with(h.clone(), "MCP-Protocol-Version", "v999.0.0"),
        &body,
    );
    expect(&resp, 400, json!(10), -32022);
    assert_eq!(
        resp.json()["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "v999.0.0"})
    );
    // _meta problems: -32602, even with the header present.
    for broken in [
        json!({"jsonrpc": "2.0", "id": 11, "method": "server/discover"}),
        json!({"jsonrpc": "2.0", "id": 11, "method": "server/discover", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 11, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}}),
        json!({"jsonrpc": "2.0", "id": 11, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
    ] {
        expect(&post(srv.addr, &h, &broken), 400, json!(11), -32602);
    }
    // A bad log level.
    let mut body = discover(12);
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("chatty");
    expect(&post(srv.addr, &h, &body), 400, json!(12), -32602);
    // clientInfo is optional.
    let mut body = discover(13);
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    assert_eq!(post(srv.addr, &h, &body).status, 200);
    // Missing routing headers: -32020.
    expect(
        &post(
            srv.addr,
            &without(h.clone(), "MCP-Protocol-Version"),
            &discover(14),
        ),
        400,
        json!(14),
        -32020,
    );
    expect(
        &post(srv.addr, &without(h.clone(), "Mcp-Method"), &discover(15)),
        400,
        json!(15),
        -32020,
    );
    // Mcp-Method must equal the body's method, case-sensitively.
    expect(
        &post(
            srv.addr,
            &with(h.clone(), "Mcp-Method", "SERVER/DISCOVER"),
            &discover(16),
        ),
        400,
        json!(16),
        -32020,
    );
    // Surrounding whitespace in header values is ignored.
    assert_eq!(
        post(
            srv.addr,
            &with(h, "Mcp-Method", "  server/discover "),
            &discover(17)
        )
        .status,
        200
    );
}

#[test]
fn mcp_name_must_match_the_body_and_may_be_base64() {
    let srv = server();
    let call = request(
        json!("c"),
        "tools/call",
        json!({"name": "toggle_extra_tool", "arguments": {}}),
    );
    let h = headers("tools/call", None);
    expect(&post(srv.addr, &h, &call), 400, json!("c"), -32020);
    expect(
        &post(srv.addr, &with(h.clone(), "Mcp-Name", "other"), &call),
        400,
        json!("c"),
        -32020,
    );
    expect(
        &post(
            srv.addr,
            &with(h.clone(), "Mcp-Name", "=?base64?!!!?="),
            &call,
        ),
        400,
        json!("c"),
        -32020,
    );
    // "toggle_extra_tool" in base64.
    let resp = post(
        srv.addr,
        &with(h.clone(), "Mcp-Name", "=?base64?dG9nZ2xlX2V4dHJhX3Rvb2w=?="),
        &call,
    );
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let resp = post(srv.addr, &with(h, "Mcp-Name", "toggle_extra_tool"), &call);
    assert_eq!(resp.status, 200);
}

#[test]
fn unknown_and_removed_methods_are_404_with_a_json_rpc_body() {
    let srv = server();
    for (i, method) in [
        "unknown/method",
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    ]
    .into_iter()
    .enumerate()
    {
        let resp = post(
            srv.addr,
            &headers(method, None),
            &request(json!(i), method, json!({})),
        );
        expect(&resp, 404, json!(i), -32601);
    }
}

#[test]
fn a_legacy_initialize_learns_the_supported_versions_when_compat_is_off() {
    // With the compatibility path off (`HttpConfig::compat = None`) a 2025-era
    // initialize gets -32022 naming the served versions; with it on (the
    // default) it is served: see tests/compat_sessions.rs.
    let mut config = common::config();
    config.compat = None;
    let srv = ServerThread::spawn(
        || {
            let (suite, _bus) = genmcp_cli::demo::suite();
            suite
        },
        config,
    )
    .expect("server starts");
    // A 2025-era client: no modern _meta, no MCP-Protocol-Version, no Mcp-Method.
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}});
    let h = without(
        without(headers("initialize", None), "MCP-Protocol-Version"),
        "Mcp-Method",
    );
    let resp = post(srv.addr, &h, &body);
    expect(&resp, 400, json!(0), -32022);
    assert_eq!(
        resp.json()["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
    );
}

#[test]
fn unknown_tool_is_an_in_band_invalid_params() {
    let srv = server();
    let resp = common::call(
        srv.addr,
        json!(1),
        "tools/call",
        json!({"name": "nope", "arguments": {}}),
    );
    expect(&resp, 200, json!(1), -32602);
}
