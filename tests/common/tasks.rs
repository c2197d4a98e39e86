//! Helpers for the tasks tests: requests owned by a named principal, with
//! or without the tasks extension declared.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use genmcp::prelude::*;
use serde_json::{Value, json};

use super::{Response, VERSION, headers, post, request};

/// The tasks extension id.
pub const EXT: &str = "io.modelcontextprotocol/tasks";

/// The test server config where a request belongs to the principal named by
/// `Authorization: Bearer <name>` (without one, to its client address).
pub fn bearer_config() -> HttpConfig {
    let mut config = super::config();
    config.assigns = Some(Arc::new(|req: &actix_web::HttpRequest| {
        let who = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        Ok(match who {
            Some(who) => Assigns::new().with(Principal::new(who)),
            None => Assigns::new(),
        })
    }));
    config
}

/// `_meta` for a request, declaring the extension (and elicitation) or not.
pub fn meta(declared: bool) -> Value {
    let caps = if declared {
        json!({"elicitation": {}, "extensions": {EXT: {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

/// `Authorization: Bearer <who>` added to `h`.
pub fn as_principal(mut h: Vec<(String, String)>, who: &str) -> Vec<(String, String)> {
    h.push(("Authorization".into(), format!("Bearer {who}")));
    h
}

/// `method` (routing name `name`) as `who`, its `_meta` from [`meta`].
pub fn send_as(
    addr: SocketAddr,
    who: &str,
    method: &str,
    name: &str,
    mut params: Value,
    declared: bool,
) -> Response {
    params["_meta"] = meta(declared);
    let h = as_principal(headers(method, Some(name)), who);
    post(addr, &h, &request(json!(1), method, params))
}

/// [`send_as`] declaring the extension; the body.
pub fn call_as(addr: SocketAddr, who: &str, method: &str, name: &str, params: Value) -> Value {
    send_as(addr, who, method, name, params, true).json()
}

/// Starts `tool` (no arguments) as a task owned by `who`; its id.
pub fn start_task(addr: SocketAddr, who: &str, tool: &str) -> String {
    let r = call_as(
        addr,
        who,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": {}}),
    );
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    r["result"]["taskId"].as_str().expect("taskId").to_owned()
}
