//! Unary requests over real HTTP: JSON replies, SSE when request-scoped
//! notifications are sent first, panicking handlers.

mod common;

use common::{Exchange, headers, request};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn server() -> ServerThread {
    let config = common::config();
    ServerThread::spawn(
        || {
            let catalog = Catalog::new();
            catalog.add_tool(ToolBuilder::new("explode").description("Panics").handler(
                |_call| async {
                    if true {
                        panic!("tool panics on purpose");
                    }
                    Ok(CallToolResult::text("unreachable").into())
                },
            ));
            catalog.add_tool(
                ToolBuilder::new("work")
                    .description("Reports progress and logs")
                    .handler(|call| async move {
                        for step in [0.0, 50.0, 100.0] {
                            call.channel
                                .send_progress(step, Some(100.0), Some("working"))
                                .unwrap();
                        }
                        call.channel
                            .send_log(LogLevel::Info, Some("work"), json!("done"))
                            .unwrap();
                        call.channel
                            .send_log(LogLevel::Debug, None, json!("noise"))
                            .unwrap();
                        Ok(CallToolResult::text("finished").into())
                    }),
            );
            Suite::builder(Implementation::new("unary", "1"))
                .catalog(catalog)
                .build()
        },
        config,
    )
    .expect("server starts")
}

fn call_with_meta(srv: &ServerThread, id: i64, tool: &str, meta: Value) -> common::Response {
    let mut body = request(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": {}}),
    );
    for (k, v) in meta.as_object().unwrap() {
        body["params"]["_meta"][k] = v.clone();
    }
    Exchange::open(
        srv.addr,
        &headers("tools/call", Some(tool)),
        body.to_string().as_bytes(),
    )
    .into_response()
}

#[test]
fn a_panicking_tool_is_an_internal_error_and_the_worker_lives_on() {
    let srv = server();
    for id in 0..3 {
        let resp = call_with_meta(&srv, id, "explode", json!({}));
        assert_eq!(resp.status, 200);
        let body = resp.json();
        assert_eq!(body["id"], id);
        assert_eq!(body["error"]["code"], -32603);
    }
    let ok = call_with_meta(&srv, 9, "work", json!({}));
    assert_eq!(ok.json()["result"]["content"][0]["text"], "finished");
}

#[test]
fn without_progress_token_or_log_level_the_reply_is_plain_json() {
    let srv = server();
    let resp = call_with_meta(&srv, 1, "work", json!({}));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let body = resp.json();
    assert_eq!(body["result"]["resultType"], "complete");
    assert_eq!(body["result"]["content"][0]["text"], "finished");
}

/// A client whose `Accept` does not admit `text/event-stream` gets the
/// response alone, as JSON, even when the tool sends progress and logs.
#[test]
fn a_client_that_takes_json_only_gets_the_response_alone() {
    let srv = server();
    let mut body = request(
        json!(5),
        "tools/call",
        json!({"name": "work", "arguments": {}}),
    );
    body["params"]["_meta"]["progressToken"] = json!("p-json");
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let mut h = headers("tools/call", Some("work"));
    h.retain(|(k, _)| !k.eq_ignore_ascii_case("accept"));
    h.push(("Accept".to_owned(), "application/json".to_owned()));
    let resp = Exchange::open(srv.addr, &h, body.to_string().as_bytes()).into_response();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let body = resp.json();
    assert_eq!(body["id"], 5);
    assert_eq!(body["result"]["content"][0]["text"], "finished");
}

#[test]
fn progress_and_logs_stream_as_sse_before_the_response() {
    let srv = server();
    let resp = call_with_meta(
        &srv,
        2,
        "work",
        json!({"progressToken": "p-1", "io.modelcontextprotocol/logLevel": "info"}),
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let msgs = resp.sse_messages();
    let methods: Vec<&str> = msgs.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(
        methods,
        vec![
            "notifications/progress",
            "notifications/progress",
            "notifications/progress",
            "notifications/message"
        ]
    );
    assert_eq!(
        msgs[0]["params"],
        json!({"progressToken": "p-1", "progress": 0, "total": 100, "message": "working"})
    );
    assert_eq!(msgs[2]["params"]["progress"], 100);
    assert_eq!(
        msgs[3]["params"],
        json!({"level": "info", "logger": "work", "data": "done"})
    );
    for m in &msgs[..4] {
        assert!(
            m["params"].get("_meta").is_none(),
            "request-scoped notifications carry no subscription id"
        );
    }
    let last = msgs.last().unwrap();
    assert_eq!(last["id"], 2);
    assert_eq!(last["result"]["content"][0]["text"], "finished");
    assert_eq!(msgs.len(), 5, "the debug log was below the requested level");
}
