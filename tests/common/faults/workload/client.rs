//! Requests as the workload sends them, each recorded: 2026 requests on a
//! node, 2025 requests of a session through the proxy, notes changed.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Ctx;
use super::{EXT, LEGACY, TIMEOUT, VERSION};
use crate::faults::history::{Kind, Outcome, Pending};
use crate::faults::http::{self, HttpError};
use crate::faults::rng::Rng;

/// `_meta` of a 2026 request declaring the tasks extension and elicitation.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "genmcp-faults", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {EXT: {}}},
    })
}

pub fn bearer(principal: &str) -> (String, String) {
    ("Authorization".into(), format!("Bearer tok-{principal}"))
}

pub fn headers_2026(principal: &str, method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".into(), "application/json".into()),
        (
            "Accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("MCP-Protocol-Version".into(), VERSION.into()),
        ("Mcp-Method".into(), method.into()),
        bearer(principal),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name".into(), n.into()));
    }
    h
}

pub fn headers_2025(principal: &str, session: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".into(), "application/json".into()),
        (
            "Accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("MCP-Protocol-Version".into(), LEGACY.into()),
        bearer(principal),
    ];
    if let Some(s) = session {
        h.push(("Mcp-Session-Id".into(), s.into()));
    }
    h
}

/// The outcome of a JSON-RPC exchange and what to record: the message, or
/// the HTTP error.
pub fn judge(sent: &Result<(http::Reply, u16), HttpError>) -> (Outcome, Value) {
    match sent {
        Err(e) => (e.outcome(), json!({"http": e.to_string()})),
        Ok((reply, _)) => {
            let m = reply.message();
            if reply.status == 200 && m.get("result").is_some() {
                if m["result"]["isError"] == true {
                    (Outcome::Failed, m)
                } else {
                    (Outcome::Ok, m)
                }
            } else if m.is_null() {
                (
                    Outcome::Failed,
                    json!({"status": reply.status, "body": String::from_utf8_lossy(&reply.body)}),
                )
            } else {
                let mut m = m;
                m["httpStatus"] = json!(reply.status);
                (Outcome::Failed, m)
            }
        }
    }
}

/// A 2026 request on `addr`: its outcome and message.
pub fn rpc(
    addr: SocketAddr,
    principal: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (Outcome, Value) {
    rpc_within(addr, principal, method, name, params, TIMEOUT)
}

/// [`rpc`] giving up (unknown) after `timeout`.
pub fn rpc_within(
    addr: SocketAddr,
    principal: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    timeout: Duration,
) -> (Outcome, Value) {
    params["_meta"] = meta();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let sent = http::send(
        addr,
        "POST",
        &headers_2026(principal, method, name),
        body.to_string().as_bytes(),
        timeout,
    );
    judge(&sent)
}

/// Runs `p` as the 2026 request it describes on node `node`; records and
/// returns its outcome and message.
pub fn record_rpc(
    ctx: &Ctx,
    p: Pending,
    node: usize,
    principal: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (Outcome, Value) {
    let (outcome, value) = rpc(ctx.nodes[node], principal, method, name, params);
    p.end(outcome, value.clone());
    (outcome, value)
}

pub fn get_task(
    ctx: &Ctx,
    worker: &str,
    principal: &str,
    node: usize,
    task: &str,
) -> (Outcome, Value) {
    let p = ctx
        .rec
        .begin(worker, Kind::GetTask, Some(node), principal)
        .task(task);
    record_rpc(
        ctx,
        p,
        node,
        principal,
        "tasks/get",
        Some(task),
        json!({"taskId": task}),
    )
}

/// Reads `task` on every node as `kind` (`GetTask` or `FinalGet`).
pub fn read_everywhere(ctx: &Ctx, worker: &str, principal: &str, task: &str, kind: Kind) {
    for node in 0..ctx.nodes.len() {
        let p = ctx
            .rec
            .begin(worker, kind, Some(node), principal)
            .task(task);
        record_rpc(
            ctx,
            p,
            node,
            principal,
            "tasks/get",
            Some(task),
            json!({"taskId": task}),
        );
    }
}

pub fn status(v: &Value) -> &str {
    v["result"]["status"].as_str().unwrap_or("")
}

/// Whether `s` is a terminal task status.
pub fn terminal(s: &str) -> bool {
    matches!(s, "completed" | "failed" | "cancelled")
}

pub fn sleep_unless_stopped(ctx: &Ctx, d: Duration) {
    let deadline = Instant::now() + d;
    while Instant::now() < deadline && !ctx.stopped() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A 2025 request of `session` through the proxy; records it as `p` and
/// returns its outcome and message.
pub fn legacy_rpc(
    ctx: &Ctx,
    mut p: Pending,
    principal: &str,
    session: &str,
    method: &str,
    params: Value,
) -> (Outcome, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let sent = http::send(
        ctx.proxy.addr,
        "POST",
        &headers_2025(principal, Some(session)),
        body.to_string().as_bytes(),
        TIMEOUT,
    );
    if let Ok((_, port)) = &sent {
        p.set_node(ctx.proxy.node_of(*port));
    }
    let (o, v) = judge(&sent);
    p.end(o, v.clone());
    (o, v)
}

/// Adds a note (2026, a random node); its URI.
pub fn new_note(ctx: &Ctx, worker: &str, principal: &str, rng: &mut Rng) -> Option<String> {
    let node = rng.below(ctx.nodes.len());
    let text = ctx.next_note_text(worker);
    let p = ctx.rec.begin(worker, Kind::Publish, Some(node), principal);
    let (o, v) = rpc(
        ctx.nodes[node],
        principal,
        "tools/call",
        Some("add_note"),
        json!({"name": "add_note", "arguments": {"text": text}}),
    );
    let uri = v["result"]["content"][0]["text"]
        .as_str()
        .map(str::to_owned);
    let p = match &uri {
        Some(u) if o == Outcome::Ok => p.uri(u),
        _ => p,
    };
    p.end(o, v);
    uri.filter(|_| o == Outcome::Ok)
}

/// Changes note `uri` (2026, a random node): its `resources/updated`.
pub fn publish(ctx: &Ctx, worker: &str, principal: &str, uri: &str, rng: &mut Rng) {
    let node = rng.below(ctx.nodes.len());
    let text = ctx.next_note_text(worker);
    let p = ctx
        .rec
        .begin(worker, Kind::Publish, Some(node), principal)
        .uri(uri);
    record_rpc(
        ctx,
        p,
        node,
        principal,
        "tools/call",
        Some("add_note"),
        json!({"name": "add_note", "arguments": {"text": text, "uri": uri}}),
    );
}
