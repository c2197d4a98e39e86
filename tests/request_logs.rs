//! What a server logging at INFO (`genmcp serve`'s default) writes about
//! requests: no per-request span (it is a DEBUG span, see `tests/spans.rs`),
//! and the warnings and errors of a request say which request they are about
//! (its method and id) by themselves.

mod common;

use std::time::Duration;

use common::call;
use common::log_capture::Capture;
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use serde_json::json;

fn failing_suite() -> Suite<NoSubscriptions> {
    Suite::builder(Implementation::new("failing", "1"))
        .tool(
            ToolBuilder::new("explode")
                .description("panics")
                .handler(|_| async move {
                    if true {
                        panic!("the tool failed");
                    }
                    Ok(CallToolResult::text("unreachable").into())
                }),
        )
        .tool(
            ToolBuilder::new("hang")
                .description("never returns")
                .handler(|_| async move {
                    std::future::pending::<()>().await;
                    Ok(CallToolResult::text("unreachable").into())
                }),
        )
        .build()
}

#[test]
fn at_info_a_requests_warnings_name_the_request_and_no_request_span_is_made() {
    let capture = Capture::install("genmcp=info");

    let mut config = common::config();
    config.request_timeout = Duration::from_millis(300);
    let srv = ServerThread::spawn(failing_suite, config).expect("server starts");
    let panicked = call(
        srv.addr,
        json!("boom-1"),
        "tools/call",
        json!({"name": "explode"}),
    );
    assert_eq!(panicked.json()["error"]["code"], -32603);
    let timed_out = call(srv.addr, json!(42), "tools/call", json!({"name": "hang"}));
    assert_eq!(timed_out.json()["error"]["message"], "Request timed out");
    srv.stop();

    let lines = capture.lines();
    let line = |message: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} line in {lines:#?}"))
    };
    let panic_line = line("request handler panicked");
    assert_eq!(panic_line["level"], "ERROR");
    assert_eq!(panic_line["fields"]["method"], "tools/call");
    assert_eq!(panic_line["fields"]["request_id"], "\"boom-1\"");
    let timeout_line = line("request timed out; handler dropped");
    assert_eq!(timeout_line["level"], "WARN");
    assert_eq!(timeout_line["fields"]["method"], "tools/call");
    assert_eq!(timeout_line["fields"]["request_id"], "42");
    assert!(
        lines.iter().all(|l| l["span"]["name"] != "request"
            && l["spans"]
                .as_array()
                .is_none_or(|spans| spans.iter().all(|s| s["name"] != "request"))),
        "no request span at INFO: {lines:#?}"
    );
}
