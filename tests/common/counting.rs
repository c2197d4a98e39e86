//! `count`, a tool whose reply is an SSE stream of progress notifications
//! before its response, and a 2025 client's reading of that reply: for the
//! resumable POST stream tests.

use std::net::SocketAddr;
use std::time::Duration;

use genmcp::prelude::*;
use serde_json::{Value, json};

use super::{Event, Exchange, legacy};

/// The `tag` arguments of the `count` calls that have started.
static STARTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Whether a `count` call with argument `"tag": tag` has started running.
pub fn started(tag: &str) -> bool {
    STARTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .any(|t| t == tag)
}

/// `count`: `n` progress notifications `gap_ms` apart (its SSE reply closed
/// for polling first with `poll`), then `counted <n>`. A call with a
/// `tag` argument is noted as started ([`started`]).
pub fn counting_tool() -> impl Tool {
    ToolBuilder::new("count")
        .description("Reports progress n times, gap_ms apart, then answers")
        .handler(|call| async move {
            if let Some(tag) = call.arguments.get("tag").and_then(Value::as_str) {
                STARTED
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(tag.to_owned());
            }
            let n = call
                .arguments
                .get("n")
                .and_then(Value::as_u64)
                .unwrap_or(10);
            let gap = call
                .arguments
                .get("gap_ms")
                .and_then(Value::as_u64)
                .unwrap_or(100);
            if call.arguments.get("poll") == Some(&json!(true)) {
                let _ = call.channel.close_sse_stream();
            }
            for i in 0..n {
                tokio::time::sleep(Duration::from_millis(gap)).await;
                #[allow(clippy::cast_precision_loss)]
                let _ = call.channel.send_progress(i as f64, Some(n as f64), None);
            }
            Ok(CallToolResult::text(format!("counted {n}")).into())
        })
}

/// Calls `count` with `args`: its reply, open.
pub fn call(addr: SocketAddr, session: &str, args: Value) -> Exchange {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "count", "arguments": args, "_meta": {"progressToken": "p"}}});
    let e = Exchange::open(
        addr,
        &legacy::headers(Some(session)),
        body.to_string().as_bytes(),
    );
    e.set_timeout(Duration::from_secs(15));
    e
}

/// What one message of the reply is: `P<progress>` or `R<result text>`.
fn label(m: &Value) -> String {
    if m["method"] == "notifications/progress" {
        return format!("P{}", m["params"]["progress"]);
    }
    match m["result"]["content"][0]["text"].as_str() {
        Some(text) => format!("R{text}"),
        None => panic!("unexpected message {m}"),
    }
}

/// Up to `limit` messages of the reply (all until its body ends when
/// `limit` is `None`), as labels.
pub fn read(stream: &mut Exchange, limit: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    while limit.is_none_or(|l| out.len() < l) {
        match stream.try_next_event().expect("an event within 15 s") {
            Some(Event::Message(m)) => out.push(label(&m)),
            Some(_) => {}
            None => break,
        }
    }
    out
}

pub fn expected(n: u64) -> Vec<String> {
    let mut all: Vec<String> = (0..n).map(|i| format!("P{i}")).collect();
    all.push(format!("Rcounted {n}"));
    all
}
