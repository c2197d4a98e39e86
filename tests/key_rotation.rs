//! Rotating the sealing key across three nodes, one node at a time, as
//! `docs/auth.md` describes: add the new key beside the current one everywhere,
//! then make it current everywhere, then (once the old key's tokens have
//! expired) drop the old one. At every step, a multi round-trip round
//! (`requestState`) and a pagination cursor begun on any node complete on every
//! node, and rounds begun before a step complete after it. The naive rotation
//! (replacing the key node by node) is shown to lose them, so the check can
//! fail.

mod common;

use common::{call, headers, post, request};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{InputRequired, KeySet, SealingKeys};
use serde_json::{Value, json};

const OLD: [u8; 32] = [0x0a; 32];
const NEW: [u8; 32] = [0x0b; 32];

struct Node {
    srv: ServerThread,
    keys: SealingKeys,
}

fn node(keys: KeySet) -> Node {
    let live = SealingKeys::new(keys);
    let handle = live.clone();
    let srv = ServerThread::spawn(
        move || {
            let mut builder = Suite::builder(Implementation::new("rotation", "1.0.0"))
                .keys(handle)
                .page_size(1);
            for name in ["a", "b"] {
                builder = builder.tool(
                    ToolBuilder::new(name)
                        .description("listed")
                        .handler(|_call| async { Ok(CallToolResult::text("ok").into()) }),
                );
            }
            builder
                .tool(
                    ToolBuilder::new("confirm")
                        .description("asks, then answers with its state")
                        .handler(|call| async move {
                            if call.request_state == Some(json!({"phase": "asked"}))
                                && call.elicited("ok").is_some()
                            {
                                return Ok(CallToolResult::text("state-ok").into());
                            }
                            Ok(InputRequired::new()
                                .elicit("ok", "Confirm?", json!({"type": "object"}))
                                .with_state(json!({"phase": "asked"}))
                                .into())
                        }),
                )
                .build()
        },
        common::config(),
    )
    .expect("node starts");
    Node { srv, keys: live }
}

fn caps_meta() -> Value {
    let mut meta = common::meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    meta
}

/// Tokens begun on a node: a `tools/list` cursor and a `requestState`.
struct Begun {
    cursor: Value,
    state: Value,
}

fn begin(n: &Node) -> Begun {
    let page = call(n.srv.addr, json!(1), "tools/list", json!({})).json();
    let cursor = page["result"]["nextCursor"].clone();
    assert!(cursor.is_string(), "{page}");
    let r = post(
        n.srv.addr,
        &headers("tools/call", Some("confirm")),
        &request(
            json!(2),
            "tools/call",
            json!({"name": "confirm", "arguments": {}, "_meta": caps_meta()}),
        ),
    )
    .json();
    let state = r["result"]["requestState"].clone();
    assert!(state.is_string(), "{r}");
    Begun { cursor, state }
}

/// Whether both tokens complete on `n`.
fn completes(n: &Node, b: &Begun) -> bool {
    let page = call(
        n.srv.addr,
        json!(3),
        "tools/list",
        json!({"cursor": b.cursor}),
    )
    .json();
    let cursor_ok = page["result"]["tools"].is_array();
    let r = post(
        n.srv.addr,
        &headers("tools/call", Some("confirm")),
        &request(
            json!(4),
            "tools/call",
            json!({"name": "confirm", "arguments": {}, "requestState": b.state,
                "inputResponses": {"ok": {"action": "accept", "content": {}}},
                "_meta": caps_meta()}),
        ),
    )
    .json();
    let state_ok = r["result"]["content"][0]["text"] == "state-ok";
    cursor_ok && state_ok
}

/// Every round begun on any node, and every round in `pending` (begun before
/// the last step), completes on every node (each node honours a requestState
/// once, so each round is used once per node). Returns rounds begun now, not
/// used yet, to finish after the next step.
fn all_complete(nodes: &[Node], pending: &[Begun], step: &str) -> Vec<Begun> {
    for (i, b) in pending.iter().enumerate() {
        for (j, n) in nodes.iter().enumerate() {
            assert!(
                completes(n, b),
                "{step}: a round begun before it (#{i}) fails on node {j}"
            );
        }
    }
    let begun: Vec<Begun> = nodes.iter().map(begin).collect();
    for (i, b) in begun.iter().enumerate() {
        for (j, n) in nodes.iter().enumerate() {
            assert!(
                completes(n, b),
                "{step}: a round begun on node {i} fails on node {j}"
            );
        }
    }
    nodes.iter().map(begin).collect()
}

#[test]
fn a_rolling_rotation_of_three_nodes_loses_no_round_or_cursor() {
    let nodes: Vec<Node> = (0..3).map(|_| node(KeySet::new(OLD))).collect();
    let mut pending = all_complete(&nodes, &[], "start");

    // 1. The new key beside the current one, node by node.
    for (i, n) in nodes.iter().enumerate() {
        n.keys.replace(KeySet::new(OLD).with_key(NEW));
        pending = all_complete(&nodes, &pending, &format!("adding the new key on node {i}"));
    }
    // 2. The new key current, node by node.
    for (i, n) in nodes.iter().enumerate() {
        n.keys.replace(KeySet::new(NEW).with_key(OLD));
        pending = all_complete(&nodes, &pending, &format!("making it current on node {i}"));
    }
    // Every token sealed from now on names the new key.
    let fresh = begin(&nodes[0]);
    assert!(
        fresh
            .cursor
            .as_str()
            .unwrap()
            .starts_with(&genmcp::suite::key_id(&NEW)),
        "{}",
        fresh.cursor
    );
    // (Wait for the old key's tokens to expire: the rounds begun from here on
    // are sealed with the new key.)
    pending = all_complete(&nodes, &[], "after the wait");
    // 3. The old key dropped, node by node.
    for (i, n) in nodes.iter().enumerate() {
        n.keys.replace(KeySet::new(NEW));
        pending = all_complete(
            &nodes,
            &pending,
            &format!("dropping the old key on node {i}"),
        );
    }
    drop(pending);
    assert_eq!(nodes[2].keys.get().ids(), [genmcp::suite::key_id(&NEW)]);
}

#[test]
fn replacing_the_key_node_by_node_loses_rounds() {
    let nodes: Vec<Node> = (0..3).map(|_| node(KeySet::new(OLD))).collect();
    let before = begin(&nodes[1]);
    nodes[0].keys.replace(KeySet::new(NEW));
    assert!(
        !completes(&nodes[0], &before),
        "a round of the old key fails on a node that only has the new one"
    );
    let after = begin(&nodes[0]);
    assert!(
        !completes(&nodes[1], &after),
        "a round of the new key fails on a node that only has the old one"
    );
}
