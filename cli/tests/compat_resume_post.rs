//! A 2025 tool call whose POST SSE response is cut (by the client, or by the
//! server for SSE polling) loses nothing: the real `genmcp serve
//! --conformance` keeps running the request, and the client that reconnects
//! with GET and `Last-Event-ID` gets the rest of that stream, its response
//! last, once and in order; another session cannot read it.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::legacy;
use common::serve_child::spawn_serve;
use common::{Event, Exchange};
use serde_json::{Value, json};

fn call(addr: SocketAddr, session: &str, id: i64, name: &str, meta: Value) -> Exchange {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": meta}});
    Exchange::open(
        addr,
        &legacy::headers(Some(session)),
        body.to_string().as_bytes(),
    )
}

fn resume(addr: SocketAddr, session: &str, last_event_id: &str) -> Exchange {
    let h = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("MCP-Protocol-Version".to_owned(), legacy::LEGACY.to_owned()),
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("Last-Event-ID".to_owned(), last_event_id.to_owned()),
    ];
    Exchange::open_with(addr, "GET", &h, b"")
}

/// Every message until the body ends.
fn drain(stream: &mut Exchange) -> Vec<Value> {
    stream.set_timeout(Duration::from_secs(10));
    let mut out = Vec::new();
    while let Some(event) = stream.next_event() {
        if let Event::Message(v) = event {
            out.push(v);
        }
    }
    out
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn compat_a_post_stream_closed_for_polling_is_resumed_with_its_response() {
    let (child, addr) = spawn_serve(&["--conformance", "--port", "0"], &[]);
    let _child = Child(child);
    let session = legacy::initialize(addr);
    let mut post = call(addr, &session, 1, "test_reconnection", json!({}));
    assert_eq!(post.status, 200);
    assert_eq!(post.header("content-type"), Some("text/event-stream"));
    // The priming event (an id, a retry hint), then the server closes.
    assert!(drain(&mut post).is_empty(), "no message before the close");
    assert_eq!(post.retry, Some(1000));
    let primed = post.last_id.clone().expect("a priming id");
    // Another session cannot read it.
    let other = legacy::initialize(addr);
    assert_eq!(
        resume(addr, &other, &primed).status,
        400,
        "another session's Last-Event-ID replays nothing"
    );
    let mut resumed = resume(addr, &session, &primed);
    assert_eq!(resumed.status, 200);
    let got = drain(&mut resumed);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["id"], 1);
    assert_eq!(
        got[0]["result"]["content"][0]["text"],
        "Reconnection test completed"
    );
    // Kept for the resume window (a response written to a connection that
    // was already gone is not read): the same id replays the same response.
    let again = drain(&mut resume(addr, &session, &primed));
    assert_eq!(again, got);
    // Resumed at the response itself: the reply is complete, the body ends
    // at once (no wait, with keep-alives, for events that will not come).
    let at_response = resumed.last_id.clone().expect("the response's id");
    assert_ne!(at_response, primed);
    let mut after = resume(addr, &session, &at_response);
    assert_eq!(after.status, 200);
    assert!(drain(&mut after).is_empty(), "nothing follows the response");
}

/// A 2025-06-18 session (initialized, its `initialized` notification sent).
fn initialize_2025_06_18(addr: SocketAddr) -> String {
    let resp = legacy::initialize_with(addr, "2025-06-18", json!({}));
    assert_eq!(resp.status, 200);
    let session = resp.header("mcp-session-id").expect("a session").to_owned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let n = common::post(addr, &headers_2025_06_18(&session), &note);
    assert_eq!(n.status, 202);
    session
}

fn headers_2025_06_18(session: &str) -> Vec<(String, String)> {
    let mut h = legacy::headers(Some(session));
    for (k, v) in &mut h {
        if k == "MCP-Protocol-Version" {
            "2025-06-18".clone_into(v);
        }
    }
    h
}

/// 2025-06-18 has no SSE polling: a tool asking to close its reply does
/// not cut it before its response (its client could not resume it), on one
/// node and in a fleet.
#[test]
fn compat_a_2025_06_18_reply_is_not_closed_before_its_response() {
    let redis = common::redis_server::RedisServer::start();
    let url = redis.url();
    for args in [
        vec!["--conformance", "--port", "0"],
        vec!["--conformance", "--port", "0", "--bus", &url],
    ] {
        let (child, addr) = spawn_serve(&args, &[]);
        let _child = Child(child);
        let session = initialize_2025_06_18(addr);
        let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "test_reconnection", "arguments": {}}});
        let mut post = Exchange::open(
            addr,
            &headers_2025_06_18(&session),
            body.to_string().as_bytes(),
        );
        assert_eq!(post.status, 200);
        let got = drain(&mut post);
        assert_eq!(got.len(), 1, "{args:?}: {got:?}");
        assert_eq!(
            got[0]["id"], 5,
            "{args:?}: the response on the reply itself"
        );
    }
}

/// Nor is it closed at the longest stream duration, first or resumed: a
/// reply cut by its client after its first progress, resumed with
/// `Last-Event-ID`, runs on to its response past `--max-stream-duration`.
#[test]
fn compat_a_2025_06_18_reply_resumed_is_not_closed_at_the_max_stream_duration() {
    let redis = common::redis_server::RedisServer::start();
    let url = redis.url();
    let polling = [
        "--conformance",
        "--port",
        "0",
        "--max-stream-duration",
        "0.05",
    ];
    for args in [polling.to_vec(), [&polling[..], &["--bus", &url]].concat()] {
        let (child, addr) = spawn_serve(&args, &[]);
        let _child = Child(child);
        let session = initialize_2025_06_18(addr);
        let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "test_tool_with_progress", "arguments": {},
                       "_meta": {"progressToken": "p"}}});
        let mut post = Exchange::open(
            addr,
            &headers_2025_06_18(&session),
            body.to_string().as_bytes(),
        );
        assert_eq!(post.status, 200);
        post.set_timeout(Duration::from_secs(10));
        let first = post.next_message().expect("the first progress");
        assert_eq!(first["params"]["progress"], 0.0, "{args:?}");
        let seen = post.last_id.clone().expect("an id");
        post.disconnect();
        let h = vec![
            ("Accept".to_owned(), "text/event-stream".to_owned()),
            ("MCP-Protocol-Version".to_owned(), "2025-06-18".to_owned()),
            ("Mcp-Session-Id".to_owned(), session.clone()),
            ("Last-Event-ID".to_owned(), seen),
        ];
        let mut resumed = Exchange::open_with(addr, "GET", &h, b"");
        assert_eq!(resumed.status, 200);
        let rest = drain(&mut resumed);
        let last = rest.last().expect("events");
        assert_eq!(
            last["id"], 8,
            "{args:?}: the response, not a close: {rest:?}"
        );
    }
}

#[test]
fn compat_a_post_stream_cut_by_the_client_keeps_running_and_replays_the_rest_in_order() {
    let (child, addr) = spawn_serve(&["--conformance", "--port", "0"], &[]);
    let _child = Child(child);
    let session = legacy::initialize(addr);
    let mut post = call(
        addr,
        &session,
        7,
        "test_tool_with_progress",
        json!({"progressToken": "p"}),
    );
    assert_eq!(post.status, 200);
    post.set_timeout(Duration::from_secs(10));
    let first = post.next_message().expect("the first progress");
    assert_eq!(first["params"]["progress"], 0.0);
    let seen = post.last_id.clone().expect("an id");
    post.disconnect();
    // The request runs to its end meanwhile (a disconnect is not a cancel).
    std::thread::sleep(Duration::from_millis(300));
    let mut resumed = resume(addr, &session, &seen);
    assert_eq!(resumed.status, 200);
    let rest = drain(&mut resumed);
    let progress: Vec<f64> = rest
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().expect("a number"))
        .collect();
    assert_eq!(progress, vec![50.0, 100.0], "{rest:?}");
    let last = rest.last().expect("the response");
    assert_eq!(last["id"], 7, "the response comes last: {rest:?}");
    assert!(last["result"].is_object());
}

#[test]
fn compat_with_a_bus_a_post_stream_closed_past_the_max_stream_duration_resumes_from_redis() {
    let redis = common::redis_server::RedisServer::start();
    let url = redis.url();
    let (child, addr) = spawn_serve(
        &[
            "--conformance",
            "--port",
            "0",
            "--bus",
            &url,
            "--max-stream-duration",
            "0.05",
        ],
        &[],
    );
    let _child = Child(child);
    let session = legacy::initialize(addr);
    // The tool runs about 100 ms, twice the maximum stream duration: the
    // server closes its reply (its events are kept in Redis) and the client
    // resumes it until the response came, losing nothing.
    let mut post = call(
        addr,
        &session,
        3,
        "test_tool_with_progress",
        json!({"progressToken": "p"}),
    );
    assert_eq!(post.status, 200);
    let mut got = drain(&mut post);
    let mut closes = 0;
    while got.last().is_none_or(|m| m.get("id").is_none()) {
        assert!(
            closes < 50,
            "no response after {closes} resumptions: {got:?}"
        );
        assert_eq!(post.retry, Some(1000), "closed with a retry hint");
        let last = post.last_id.clone().expect("an id to resume from");
        post = resume(addr, &session, &last);
        assert_eq!(post.status, 200);
        got.extend(drain(&mut post));
        closes += 1;
    }
    assert!(closes >= 1, "the server closed the reply: {got:?}");
    let progress: Vec<f64> = got
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect();
    assert_eq!(
        progress,
        vec![0.0, 50.0, 100.0],
        "each once, in order: {got:?}"
    );
    let last = got.last().expect("the response");
    assert_eq!(last["id"], 3, "the response last: {got:?}");
    assert!(last["result"].is_object());
    // An id that is no fleet id names no event of this session.
    let refused = resume(addr, &session, "0123456789abcdef-1-2").into_response();
    assert_eq!(refused.status, 400);
}
