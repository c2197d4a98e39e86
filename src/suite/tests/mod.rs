//! Unit tests of the suite dispatch (no transport: requests go straight to
//! [`Suite::call`] with an in-memory outbox). By idea: `lists` (listing,
//! cursors, capabilities), `tools` (validation, schemas, headers, progress),
//! `requests` (MRTR, resources, prompts, completion, logging).

mod lists;
mod requests;
mod tools;

use crate::mux::{OutboxReceiver, outbox};
use serde_json::json;

use super::*;
use crate::mux::Assigns;
use crate::protocol::{ClientCapabilities, RequestId, RequestMeta};

fn channel_with(caps: Value) -> (Channel, OutboxReceiver) {
    let (tx, rx) = outbox(16);
    let mut meta = RequestMeta::current();
    meta.client_capabilities = ClientCapabilities(caps.as_object().cloned().unwrap_or_default());
    (
        Channel::for_request(RequestId::Number(1), meta, Assigns::new(), tx),
        rx,
    )
}

fn channel() -> Channel {
    channel_with(json!({})).0
}

fn params(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

async fn call<H: SubscriptionHandler>(
    suite: &Suite<H>,
    method: &str,
    p: Value,
) -> Result<Map<String, Value>, McpError> {
    suite.call(method, params(p), channel()).await
}

fn echo(name: &str) -> FnTool {
    ToolBuilder::new(name)
        .description("echo")
        .handler(|c| async move {
            Ok(CallToolResult::text(Value::Object(c.arguments).to_string()).into())
        })
}

fn suite_with_tools(n: usize, page: usize) -> Suite {
    let mut b = Suite::builder(Implementation::new("t", "1")).page_size(page);
    for i in 0..n {
        b = b.tool(echo(&format!("tool_{i:02}")));
    }
    b.build()
}

fn names(result: &Map<String, Value>, key: &str) -> Vec<String> {
    result[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
