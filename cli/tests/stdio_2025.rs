//! 2025-era hosts over stdio: the real `genmcp serve --stdio` driven with a
//! 2025-11-25 client's exact messages (as the TypeScript and Python SDKs send
//! them), and the pipe's legacy stream in process (handle_close at EOF, no
//! final frame at shutdown).

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/common/scripted.rs"]
mod scripted;
#[path = "../../tests/common/stdio_pipe.rs"]
mod stdio_pipe;

use std::time::Duration;

use common::stdio_child::Peer;
use genmcp::prelude::*;
use serde_json::{Value, json};

/// How long "nothing more comes" is watched (a bound, not a speed claim).
const QUIET: Duration = Duration::from_millis(500);

fn rpc(id: Value, method: &str, params: Value) -> Value {
    json!({"method": method, "params": params, "jsonrpc": "2.0", "id": id})
}

/// A 2025 client's handshake: `initialize` and `notifications/initialized`.
fn handshake(p: &mut Peer, version: &str, capabilities: Value) -> Value {
    p.send(&rpc(
        json!(0),
        "initialize",
        json!({"protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "host-2025", "version": "1.0.0"}}),
    ));
    let init = p.next();
    assert_eq!(init["id"], 0, "{init}");
    p.send(&json!({"method": "notifications/initialized", "jsonrpc": "2.0"}));
    init
}

fn result_text(v: &Value) -> &str {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn a_2025_host_initializes_lists_calls_and_hears_list_changes_without_a_listen() {
    let mut p = Peer::start();
    let init = handshake(&mut p, "2025-11-25", json!({}));
    let r = &init["result"];
    assert_eq!(r["protocolVersion"], "2025-11-25");
    assert_eq!(r["serverInfo"]["name"], "genmcp-notes");
    assert_eq!(r["capabilities"]["tools"]["listChanged"], true, "{r}");
    assert!(r.get("resultType").is_none() && r["capabilities"].get("extensions").is_none());

    p.send(&json!({"method": "tools/list", "jsonrpc": "2.0", "id": 1}));
    let list = p.next();
    assert_eq!(list["id"], 1);
    assert!(list["result"].get("resultType").is_none(), "{list}");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"toggle_extra_tool"), "{names:?}");

    // The change is pushed on the pipe: no subscriptions/listen, no
    // subscription id, no acknowledgement.
    p.send(&rpc(
        json!(2),
        "tools/call",
        json!({"name": "toggle_extra_tool", "arguments": {}}),
    ));
    let mut got = (None, None);
    while got.0.is_none() || got.1.is_none() {
        let v = p.next();
        if v["id"] == 2 {
            got.0 = Some(v);
        } else {
            assert_eq!(v["method"], "notifications/tools/list_changed", "{v}");
            assert!(
                v.get("id").is_none() && v["params"].get("_meta").is_none(),
                "{v}"
            );
            got.1 = Some(v);
        }
    }
    assert_eq!(result_text(got.0.as_ref().unwrap()), "extra_tool added");

    p.send(&json!({"method": "ping", "jsonrpc": "2.0", "id": 3}));
    assert_eq!(p.next(), json!({"jsonrpc": "2.0", "id": 3, "result": {}}));

    // 2026-07-28 methods are not routed in a 2025 session; nor is a second
    // initialize.
    p.send(&json!({"method": "server/discover", "jsonrpc": "2.0", "id": 4}));
    assert_eq!(p.next()["error"]["code"], -32601);
    p.send(&rpc(
        json!(5),
        "subscriptions/listen",
        json!({"notifications": {}}),
    ));
    assert_eq!(p.next()["error"]["code"], -32601);
    p.send(&rpc(
        json!(6),
        "initialize",
        json!({"protocolVersion": "2025-11-25"}),
    ));
    assert_eq!(p.next()["error"]["code"], -32600);

    // EOF: a clean exit, nothing more on stdout.
    p.close_stdin();
    assert!(p.exit_status().is_some_and(|s| s.success()));
    assert!(p.rest().is_empty());
}

#[test]
fn subscribed_uris_get_updates_until_unsubscribed_and_unknown_resources_are_32002() {
    let mut p = Peer::start();
    handshake(&mut p, "2025-06-18", json!({}));
    p.send(&rpc(
        json!(1),
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": "one"}}),
    ));
    let (added, _) = p.until(|v| v["id"] == 1);
    let uri = result_text(&added).to_owned();
    assert!(uri.starts_with("note://"), "{added}");

    p.send(&rpc(json!(2), "resources/subscribe", json!({"uri": uri})));
    let (sub, _) = p.until(|v| v["id"] == 2);
    assert_eq!(sub["result"], json!({}));
    p.send(&rpc(
        json!(3),
        "tools/call",
        json!({"name": "add_note", "arguments": {"uri": uri, "text": "two"}}),
    ));
    let (updated, _) = p.until(|v| v["method"] == "notifications/resources/updated");
    assert_eq!(updated["params"], json!({"uri": uri}));

    p.send(&rpc(json!(4), "resources/unsubscribe", json!({"uri": uri})));
    let (unsub, _) = p.until(|v| v["id"] == 4);
    assert_eq!(unsub["result"], json!({}));
    p.send(&rpc(
        json!(5),
        "tools/call",
        json!({"name": "add_note", "arguments": {"uri": uri, "text": "three"}}),
    ));
    let (done, _) = p.until(|v| v["id"] == 5);
    assert!(done.get("result").is_some(), "{done}");
    while let Ok(v) = p.lines.recv_timeout(QUIET) {
        assert_ne!(v["method"], "notifications/resources/updated", "{v}");
    }

    p.send(&rpc(
        json!(6),
        "resources/read",
        json!({"uri": "note://nope"}),
    ));
    let (missing, _) = p.until(|v| v["id"] == 6);
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    p.send(&rpc(json!(7), "resources/subscribe", json!({"uri": ""})));
    let (bad, _) = p.until(|v| v["id"] == 7);
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[test]
fn set_level_sends_log_messages_at_or_above_the_level_only() {
    let mut p = Peer::start_with(&["serve", "--stdio", "--conformance"]);
    let init = handshake(&mut p, "2025-11-25", json!({}));
    assert!(
        init["result"]["capabilities"].get("logging").is_some(),
        "{init}"
    );
    let call = |p: &mut Peer, id: i64| {
        p.send(&rpc(
            json!(id),
            "tools/call",
            json!({"name": "test_tool_with_logging", "arguments": {}}),
        ));
        let (done, logs) = p.until(|v| v["id"] == id);
        assert!(done.get("result").is_some(), "{done}");
        logs
    };
    // No level set: no log notifications.
    assert!(call(&mut p, 1).is_empty());

    p.send(&rpc(json!(2), "logging/setLevel", json!({"level": "info"})));
    assert_eq!(p.next(), json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    let logs = call(&mut p, 3);
    assert_eq!(logs.len(), 3, "{logs:?}");
    for log in &logs {
        assert_eq!(log["method"], "notifications/message");
        assert_eq!(log["params"]["level"], "info");
        assert_eq!(log["params"]["logger"], "test_tool_with_logging");
    }

    p.send(&rpc(
        json!(4),
        "logging/setLevel",
        json!({"level": "error"}),
    ));
    assert_eq!(p.next()["id"], 4);
    assert!(call(&mut p, 5).is_empty());

    p.send(&rpc(json!(6), "logging/setLevel", json!({"level": "loud"})));
    assert_eq!(p.next()["error"]["code"], -32602);
}

#[test]
fn elicitation_is_asked_and_answered_on_the_pipe() {
    let mut p = Peer::start_with(&["serve", "--stdio", "--conformance"]);
    handshake(&mut p, "2025-11-25", json!({"elicitation": {}}));
    p.send(&rpc(
        json!(1),
        "tools/call",
        json!({"name": "test_elicitation", "arguments": {"message": "who?"}}),
    ));
    let ask = p.next();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert!(ask["id"].as_str().is_some_and(|i| i.starts_with("genmcp-")));
    assert_eq!(ask["params"]["message"], "who?");
    p.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {
        "action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}}));
    let done = p.next();
    assert_eq!(done["id"], 1, "{done}");
    assert!(result_text(&done).contains("ada"), "{done}");
    assert!(done["result"].get("resultType").is_none());

    // Without the capability: -32602 (2025's code for -32021).
    let mut q = Peer::start_with(&["serve", "--stdio", "--conformance"]);
    handshake(&mut q, "2025-11-25", json!({}));
    q.send(&rpc(
        json!(1),
        "tools/call",
        json!({"name": "test_elicitation", "arguments": {"message": "who?"}}),
    ));
    assert_eq!(q.next()["error"]["code"], -32602);
}

#[test]
fn a_cancelled_request_gets_no_response_and_its_late_answer_is_ignored() {
    let mut p = Peer::start_with(&["serve", "--stdio", "--conformance"]);
    handshake(&mut p, "2025-11-25", json!({"elicitation": {}}));
    p.send(&rpc(
        json!("call"),
        "tools/call",
        json!({"name": "test_elicitation", "arguments": {"message": "who?"}}),
    ));
    let ask = p.next();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    p.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "call", "reason": "user gave up"}}),
    );
    // The answer arrives after the cancel: ignored, no response for "call".
    p.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}));
    p.send(&json!({"method": "ping", "jsonrpc": "2.0", "id": "after"}));
    let (pong, skipped) = p.until(|v| v["id"] == "after");
    assert_eq!(pong["result"], json!({}));
    assert!(skipped.is_empty(), "{skipped:?}");
    assert!(p.silent_for(QUIET));
    // The id is free again.
    p.send(&json!({"method": "ping", "jsonrpc": "2.0", "id": "call"}));
    assert_eq!(p.next()["id"], "call");
}

#[test]
fn the_first_request_decides_the_era_of_the_pipe() {
    // 2026-07-28 first: a later initialize is refused as today (-32022).
    let mut p = Peer::start();
    p.request(json!(1), "server/discover", json!({}));
    assert_eq!(
        p.next()["result"]["supportedVersions"],
        json!(["2026-07-28"])
    );
    p.send(&rpc(
        json!(2),
        "initialize",
        json!({"protocolVersion": "2025-11-25"}),
    ));
    assert_eq!(p.next()["error"]["code"], -32022);

    // An unknown version is answered with the newest 2025 one.
    let mut q = Peer::start();
    let init = handshake(&mut q, "2024-11-05", json!({}));
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn sigterm_ends_a_2025_session_cleanly_with_only_json_on_stdout() {
    let mut p = Peer::start();
    handshake(&mut p, "2025-11-25", json!({}));
    p.send(&json!({"method": "ping", "jsonrpc": "2.0", "id": 1}));
    assert_eq!(p.next()["id"], 1);
    p.terminate();
    assert!(p.exit_status().is_some_and(|s| s.success()));
    // Every line left is JSON (the reader panics otherwise), and none is a
    // frame of the internal legacy stream.
    for v in p.rest() {
        assert!(
            v.get("id")
                .is_none_or(|id| !id.to_string().contains("legacy")),
            "{v}"
        );
    }
    let stderr = p.stderr.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes on a pipe: {stderr}"
    );
}

/// In process: the pipe's legacy stream is a real stream (its handler's
/// subscribe runs at initialize, handle_close at EOF) and ends at shutdown
/// without a frame the client would not know.
#[actix_rt::test]
async fn the_legacy_stream_of_a_pipe_closes_like_every_stream() {
    use stdio_pipe::{Pipe, limits};
    let init = rpc(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    let mut eof = Pipe::start(limits(64, 64, Duration::from_secs(5)));
    eof.send(&init).await;
    assert_eq!(eof.next().await["result"]["protocolVersion"], "2025-11-25");
    eof.wait("the legacy stream open", |p| {
        p.server.metrics().open_streams == 1
    })
    .await;
    eof.finish().await;
    assert_eq!(eof.closed(CloseReason::Disconnected), 1);
    assert_eq!(eof.record.closed.lock().unwrap().len(), 1);
    assert_eq!(eof.transcript.len(), 1, "{:?}", eof.transcript);

    let mut shut = Pipe::start(limits(64, 64, Duration::from_secs(5)));
    shut.send(&init).await;
    shut.next().await;
    shut.wait("the legacy stream open", |p| {
        p.server.metrics().open_streams == 1
    })
    .await;
    shut.server.shutdown();
    shut.drain().await.expect("serve_io ends cleanly");
    assert_eq!(shut.closed(CloseReason::Shutdown), 1);
    assert_eq!(shut.transcript.len(), 1, "{:?}", shut.transcript);
}

/// In process: a legacy stream that overflows writes nothing for its internal
/// id (a 2025 client could not place it) and the client's next request opens
/// it again.
#[actix_rt::test]
async fn an_overflowing_legacy_stream_leaves_no_stray_reply_and_reopens() {
    use stdio_pipe::{Pipe, burst, limits};
    let mut p = Pipe::start(limits(4, 4, Duration::from_secs(30)));
    p.send(&rpc(
        json!(0),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    ))
    .await;
    p.next().await;
    p.wait("the legacy stream open", |p| {
        p.server.metrics().open_streams == 1
    })
    .await;
    // One callback: 4 frames fill the outbox, 4 the spill, the rest overflow.
    p.bus.publish(
        "all",
        burst("genmcp-legacy-1", 50, scripted::Then::Continue),
    );
    p.wait("the burst", |p| p.handled() == 1).await;
    p.wait("the stream's end", |p| p.server.metrics().open_streams == 0)
        .await;
    assert_eq!(p.closed(CloseReason::Overflow), 1);
    p.send(&json!({"method": "ping", "jsonrpc": "2.0", "id": 1}))
        .await;
    p.until(|v| v["id"] == 1).await;
    p.wait("the legacy stream open again", |p| {
        p.server.metrics().open_streams == 1
    })
    .await;
    p.finish().await;
    let replies: Vec<&Value> = p
        .transcript
        .iter()
        .filter(|v| v.get("id").is_some())
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(
        p.transcript.iter().all(|v| v
            .get("method")
            .is_none_or(|m| m == "notifications/tools/list_changed")),
        "{:?}",
        p.transcript
    );
}

#[test]
fn an_overlong_line_is_refused_with_its_bound_and_the_session_goes_on() {
    let mut p = Peer::start();
    handshake(&mut p, "2025-11-25", json!({}));
    // One byte over the default 4 MiB bound, inside a JSON string.
    let mut line = br#"{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":""#.to_vec();
    line.resize(4 * 1024 * 1024 + 1, b'a');
    line.extend_from_slice(b"\"}}\n");
    p.send_raw(&line);
    let refused = p.next();
    assert_eq!(refused["id"], Value::Null, "{refused}");
    assert_eq!(refused["error"]["code"], -32600);
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("line longer than 4194304 bytes")),
        "{refused}"
    );
    p.send(&json!({"method": "ping", "jsonrpc": "2.0", "id": 10}));
    assert_eq!(p.next(), json!({"jsonrpc": "2.0", "id": 10, "result": {}}));
}
