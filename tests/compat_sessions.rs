//! The 2025-era compatibility path over real HTTP: `initialize` and version
//! negotiation, sessions as sealed expiring tokens (missing 400, forged or
//! expired 404, deleted 404), the 2025 surface and its error codes.

mod common;

use std::time::Duration;

use common::legacy::{self, LEGACY};
use common::post;
use common::probe::{self, Mode};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn caps() -> SubscriptionCapabilities {
    SubscriptionCapabilities::none()
        .with_tools_list_changed(true)
        .with_resources_updated(true)
}

fn error_code(resp: &common::Response) -> i64 {
    resp.json()["error"]["code"].as_i64().unwrap_or_default()
}

#[test]
fn compat_initialize_negotiates_and_mints_a_visible_ascii_session() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    for (asked, offered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2024-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let resp = legacy::initialize_with(srv.addr(), asked, json!({}));
        assert_eq!(resp.status, 200);
        let result = &resp.json()["result"];
        assert_eq!(result["protocolVersion"], offered, "asked {asked}");
        assert_eq!(result["serverInfo"]["name"], "probe");
        assert_eq!(result["instructions"], "probe server");
        assert_eq!(
            result["capabilities"],
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}})
        );
        assert!(result.get("resultType").is_none());
        let session = resp.header("mcp-session-id").expect("session id");
        assert!(session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    }
}

#[test]
fn compat_missing_session_is_400_and_forged_or_expired_sessions_are_404() {
    let mut config = probe::config();
    let mut compat = genmcp::http::CompatConfig::default();
    compat.session_ttl = Duration::from_millis(300);
    config.compat = Some(compat);
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});

    let ok = post(srv.addr(), &legacy::headers(Some(&session)), &ping);
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["result"], json!({}));

    let missing = post(srv.addr(), &legacy::headers(None), &ping);
    assert_eq!(missing.status, 400);
    assert_eq!(legacy::get(srv.addr(), None).into_response().status, 400);

    // Forged: a changed payload, a changed tag, garbage.
    let (payload, tag) = session.rsplit_once('.').expect("kid.payload.tag");
    for forged in [
        format!("{}A.{tag}", payload),
        format!("{payload}.{}", tag.chars().rev().collect::<String>()),
        "not-a-session".to_owned(),
    ] {
        let resp = post(srv.addr(), &legacy::headers(Some(&forged)), &ping);
        assert_eq!(resp.status, 404, "{forged}");
        assert_eq!(
            legacy::get(srv.addr(), Some(&forged))
                .into_response()
                .status,
            404
        );
        assert_eq!(legacy::delete(srv.addr(), &forged).status, 404);
    }

    std::thread::sleep(Duration::from_millis(400));
    let expired = post(srv.addr(), &legacy::headers(Some(&session)), &ping);
    assert_eq!(expired.status, 404);
    assert_eq!(
        legacy::get(srv.addr(), Some(&session))
            .into_response()
            .status,
        404
    );
}

#[test]
fn compat_a_deleted_session_is_404() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    assert_eq!(legacy::delete(srv.addr(), &session).status, 200);
    let resp = legacy::request(srv.addr(), &session, json!(1), "ping", json!({}));
    assert_eq!(resp.status, 404);
    assert_eq!(legacy::delete(srv.addr(), &session).status, 404);
    // Another session is unaffected.
    let other = legacy::initialize(srv.addr());
    let resp = legacy::request(srv.addr(), &other, json!(1), "ping", json!({}));
    assert_eq!(resp.status, 200);
}

#[test]
fn compat_the_2025_surface_and_its_error_codes() {
    let srv = genmcp::http::ServerThread::spawn(genmcp_cli::fixtures::suite, common::config())
        .expect("server starts");
    let session = legacy::initialize(srv.addr);
    let call = |id: i64, method: &str, params: Value| {
        legacy::request(srv.addr, &session, json!(id), method, params)
    };
    // Unrouted methods, and the 2026-only ones, are -32601.
    for (i, method) in ["unknown/method", "server/discover", "subscriptions/listen"]
        .into_iter()
        .enumerate()
    {
        assert_eq!(
            error_code(&call(i as i64, method, json!({}))),
            -32601,
            "{method}"
        );
    }
    // Resource not found is -32002 in 2025.
    let resp = call(10, "resources/read", json!({"uri": "test://missing"}));
    assert_eq!(error_code(&resp), -32002);
    assert_eq!(resp.json()["error"]["data"]["uri"], "test://missing");
    // A bad log level is -32602; a good one is {}.
    assert_eq!(
        error_code(&call(11, "logging/setLevel", json!({"level": "loud"}))),
        -32602
    );
    assert_eq!(
        call(12, "logging/setLevel", json!({"level": "debug"})).json()["result"],
        json!({})
    );
    // Results carry no 2026-only fields.
    let list = call(13, "tools/list", json!({})).json();
    let result = list["result"].as_object().expect("a result");
    assert!(result.contains_key("tools"));
    for key in ["resultType", "ttlMs", "cacheScope", "_meta"] {
        assert!(!result.contains_key(key), "{key}");
    }
    // The session's log level reaches the request's channel.
    let resp = call(
        14,
        "tools/call",
        json!({"name": "test_tool_with_logging", "arguments": {}}),
    );
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let frames = resp.sse_messages();
    let logs = frames
        .iter()
        .filter(|f| f["method"] == "notifications/message")
        .count();
    assert_eq!(logs, 3, "{frames:?}");
    assert_eq!(frames.last().unwrap()["id"], 14);
    // An unsupported MCP-Protocol-Version header is 400.
    let mut h = legacy::headers(Some(&session));
    h.retain(|(k, _)| k != "MCP-Protocol-Version");
    h.push(("MCP-Protocol-Version".into(), "1999-01-01".into()));
    let resp = post(
        srv.addr,
        &h,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    );
    assert_eq!(resp.status, 400);
    let _ = LEGACY;
}

#[test]
fn compat_elicitation_goes_to_the_client_and_the_answer_comes_back_by_post() {
    let srv = genmcp::http::ServerThread::spawn(genmcp_cli::fixtures::suite, common::config())
        .expect("server starts");
    let init = legacy::initialize_with(srv.addr, LEGACY, json!({"elicitation": {}}));
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "test_elicitation", "arguments": {"message": "Who are you?"}}});
    let mut call = common::Exchange::open(
        srv.addr,
        &legacy::headers(Some(&session)),
        body.to_string().as_bytes(),
    );
    assert_eq!(call.header("content-type"), Some("text/event-stream"));
    let request = call.next_message().expect("a server-to-client request");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Who are you?");
    // An answer from another session is ignored.
    let other = legacy::initialize(srv.addr);
    let answer = |id: &Value| {
        json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept",
            "content": {"username": "ada", "email": "ada@example.com"}}})
    };
    let resp = post(
        srv.addr,
        &legacy::headers(Some(&other)),
        &answer(&request["id"]),
    );
    assert_eq!(resp.status, 202);
    let resp = post(
        srv.addr,
        &legacy::headers(Some(&session)),
        &answer(&request["id"]),
    );
    assert_eq!(resp.status, 202);
    let result = call.next_message().expect("the tool result");
    assert_eq!(result["id"], 5);
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("action=accept") && text.contains("ada@example.com"),
        "{text}"
    );
    assert!(call.next_message().is_none());
}

/// 2025-era requests over HTTP are counted in `genmcp_requests_total` by
/// method and outcome, as 2026 ones and stdio's are.
#[test]
fn compat_requests_over_http_are_counted_by_method_and_outcome() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    for (id, method) in [(1, "ping"), (2, "tools/list")] {
        let r = legacy::request(srv.addr(), &session, json!(id), method, json!({}));
        assert_eq!(r.status, 200, "{method}");
    }
    // Refused before they ran: an unknown method, and a forged session.
    let r = legacy::request(srv.addr(), &session, json!(3), "nope/method", json!({}));
    assert_eq!(error_code(&r), -32601);
    let r = legacy::request(srv.addr(), "forged", json!(4), "tools/list", json!({}));
    assert_eq!(r.status, 404);
    let text = genmcp::admin::Admin::new(srv.server.server.clone(), Vec::new()).metrics_text();
    let count = |method: &str, outcome: &str| -> u64 {
        let series = format!("genmcp_requests_total{{method=\"{method}\",outcome=\"{outcome}\"}}");
        text.lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    for method in ["initialize", "ping", "tools/list"] {
        assert_eq!(count(method, "ok"), 1, "{method} in\n{text}");
    }
    assert_eq!(count("other", "refused"), 1, "in\n{text}");
    assert_eq!(count("tools/list", "refused"), 1, "in\n{text}");
}
