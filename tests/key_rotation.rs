//! Rotating the sealing key across three nodes, one node at a time, as
//! `docs/auth.md` describes: add the new key beside the current one everywhere,
//! then make it current everywhere, then (once the old key's tokens have
//! expired) drop the old one. At every step, a multi round-trip round
//! (`requestState`) and a pagination cursor begun on any node complete on every
//! node, and rounds begun before a step complete after it; and the nodes'
//! Redis bus, authenticated with keys derived from each node's set, carries
//! every node's messages to every other node at every step (a node reloads
//! its set as `SIGHUP` does, one restarts), while a message tagged with the
//! dropped key is refused at the end; and every node's fleet key check
//! (`/readyz` "keys") finds it in step at every step. The naive rotation
//! (replacing the key node by node) is shown to lose rounds, so the check can
//! fail; and the fleet key check flags only the node that is out of step (one
//! odd key, one key made current too early), never the nodes it differs from.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::redis_server::{RedisServer, block_on, bus_config};
use common::sink::Recorder;
use common::{call, headers, post, request, wait_until};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::pubsub::redis::{BusKeys, DropReason, dropped_messages};
use genmcp::pubsub::{BusSubscription, Inbox};
use genmcp::suite::{FleetKeys, InputRequired, KeySet, SealingKeys};
use serde_json::{Value, json};

const OLD: [u8; 32] = [0x0a; 32];
const NEW: [u8; 32] = [0x0b; 32];

struct Node {
    srv: ServerThread,
    keys: SealingKeys,
    bus: Option<NodeBus>,
}

const PREFIX: &str = "t-rotation:";
const TOPIC: &str = "flow";

/// A node's Redis bus, authenticated with the bus keys of its key set as
/// `genmcp serve --bus --key-file` starts it, listening on [`TOPIC`].
struct NodeBus {
    bus: Bus<u32>,
    keys: BusKeys,
    heard: Arc<Recorder>,
    _sub: BusSubscription<u32>,
}

impl NodeBus {
    fn start(redis: &RedisServer, set: &KeySet) -> NodeBus {
        let keys = set.bus_keys();
        let bus: Bus<u32> = block_on(Bus::redis(
            bus_config(&redis.url(), PREFIX).keys(keys.clone()),
        ))
        .expect("the bus connects");
        let heard = Arc::new(Recorder::default());
        let sub = bus.subscribe(TOPIC, Inbox::from_sink(heard.clone()));
        block_on(bus.subscribed());
        NodeBus {
            bus,
            keys,
            heard,
            _sub: sub,
        }
    }
}

/// A new key set on `n`, as `genmcp serve` applies it on `SIGHUP`: to the
/// suite's sealing keys and to the bus's keys.
fn reload(n: &Node, set: KeySet) {
    if let Some(bus) = &n.bus {
        set.update_bus_keys(&bus.keys);
    }
    n.keys.replace(set);
}

/// Node `n` restarted with `set` (its key file): the bus is started again
/// from it (the sealing keys are replaced as a start installs them).
fn restart(redis: &RedisServer, n: &mut Node, set: KeySet) {
    n.bus = Some(NodeBus::start(redis, &set));
    n.keys.replace(set);
}

/// Every node's message reaches every other node over the bus. `tag` makes
/// the messages of each check distinct.
fn bus_flows(nodes: &[Node], tag: u32, step: &str) {
    for (i, from) in nodes.iter().enumerate() {
        let from = from
            .bus
            .as_ref()
            .unwrap_or_else(|| panic!("{step}: node {i} has no bus"));
        let msg = tag * 10 + u32::try_from(i).unwrap();
        let heard = wait_until(Duration::from_secs(10), || {
            let _ = from.bus.try_publish(TOPIC, msg);
            std::thread::sleep(Duration::from_millis(20));
            nodes
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .all(|(_, n)| n.bus.as_ref().is_some_and(|b| b.heard.has(msg)))
        });
        let deaf: Vec<usize> = nodes
            .iter()
            .enumerate()
            .filter(|(j, n)| *j != i && !n.bus.as_ref().is_some_and(|b| b.heard.has(msg)))
            .map(|(j, _)| j)
            .collect();
        assert!(
            heard,
            "{step}: node {i}'s bus messages do not reach nodes {deaf:?} (dropped as forged: {:?})",
            dropped_messages()
        );
    }
}

/// Every node with a bus runs its fleet key check (twice over, so each
/// check reads every node's entry as it is now) and finds itself in step:
/// `/readyz` stays ready through a correct rotation. (The entry of node 2
/// before its restart lingers for three check periods, as a stopped node's
/// does: one stale node does not put the others out of step.)
fn in_step(nodes: &[Node], step: &str) {
    let fleet: Vec<FleetKeys> = nodes
        .iter()
        .filter_map(|n| {
            let once = n.bus.as_ref()?.bus.once()?;
            Some(FleetKeys::new(once, n.keys.clone()))
        })
        .collect();
    for _ in 0..2 {
        for f in &fleet {
            block_on(f.check()).expect("Redis answers");
        }
    }
    for (i, f) in fleet.iter().enumerate() {
        assert!(
            f.in_step(),
            "{step}: node {i} is not in step: {:?}",
            f.problem()
        );
    }
}

fn forged() -> u64 {
    dropped_messages()
        .into_iter()
        .find(|(r, _)| *r == DropReason::Forged)
        .map_or(0, |(_, n)| n)
}

fn node(keys: KeySet) -> Node {
    node_on(keys, None)
}

/// A node with `keys`, and with a bus on `redis` when given.
fn node_on(keys: KeySet, redis: Option<&RedisServer>) -> Node {
    let bus = redis.map(|r| NodeBus::start(r, &keys));
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
    Node {
        srv,
        keys: live,
        bus,
    }
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
    in_step(nodes, step);
    static CHECKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    bus_flows(
        nodes,
        CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        step,
    );
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
    let redis = RedisServer::start();
    let mut nodes: Vec<Node> = (0..3)
        .map(|_| node_on(KeySet::new(OLD), Some(&redis)))
        .collect();
    let mut pending = all_complete(&nodes, &[], "start");

    // 1. The new key beside the current one, node by node (SIGHUP).
    for (i, n) in nodes.iter().enumerate() {
        reload(n, KeySet::new(OLD).with_key(NEW).unwrap());
        pending = all_complete(&nodes, &pending, &format!("adding the new key on node {i}"));
    }
    // 2. The new key current, node by node: nodes 0 and 1 by SIGHUP, node 2
    // restarted with the new file. In between, nodes publish under different
    // current keys.
    for i in 0..nodes.len() {
        let set = KeySet::new(NEW).with_key(OLD).unwrap();
        if i == 2 {
            restart(&redis, &mut nodes[i], set);
        } else {
            reload(&nodes[i], set);
        }
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
    // 3. The old key dropped, node by node (SIGHUP).
    for (i, n) in nodes.iter().enumerate() {
        reload(n, KeySet::new(NEW));
        pending = all_complete(
            &nodes,
            &pending,
            &format!("dropping the old key on node {i}"),
        );
    }
    drop(pending);
    assert_eq!(nodes[2].keys.get().ids(), [genmcp::suite::key_id(&NEW)]);

    // The dropped key no longer authenticates anything on the bus: a node
    // still on the old key is heard by none (each drops its message as forged).
    let stale = NodeBus::start(&redis, &KeySet::new(OLD));
    let before = forged();
    let refused = wait_until(Duration::from_secs(10), || {
        let _ = stale.bus.try_publish(TOPIC, 7);
        std::thread::sleep(Duration::from_millis(20));
        forged() >= before + 3
            || nodes
                .iter()
                .any(|n| n.bus.as_ref().is_some_and(|b| b.heard.has(7)))
    });
    assert!(
        refused,
        "the old key's message was neither refused nor heard"
    );
    for (j, n) in nodes.iter().enumerate() {
        assert!(
            !n.bus.as_ref().is_some_and(|b| b.heard.has(7)),
            "node {j} accepted a message tagged with the dropped key"
        );
    }
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

/// The fleet key check of three nodes on one Redis, each with `sets[i]`;
/// returns each node's verdict after every node checked twice.
fn fleet_verdicts(redis: &RedisServer, prefix: &str, sets: [KeySet; 3]) -> Vec<(bool, String)> {
    let buses: Vec<Bus<u32>> = sets
        .iter()
        .map(|set| {
            block_on(Bus::redis(
                bus_config(&redis.url(), prefix).keys(set.bus_keys()),
            ))
            .expect("the bus connects")
        })
        .collect();
    let fleet: Vec<FleetKeys> = buses
        .iter()
        .zip(sets)
        .map(|(b, set)| FleetKeys::new(b.once().expect("a Redis bus"), SealingKeys::new(set)))
        .collect();
    for _ in 0..2 {
        for f in &fleet {
            block_on(f.check()).expect("Redis answers");
        }
    }
    fleet
        .iter()
        .map(|f| (f.in_step(), f.problem().unwrap_or_default()))
        .collect()
}

#[test]
fn only_the_node_out_of_step_with_the_fleet_is_flagged() {
    let redis = RedisServer::start();
    // One node started with another key: it alone is out of step; the two
    // others only log it.
    let v = fleet_verdicts(
        &redis,
        "t-fleet-odd:",
        [KeySet::new(OLD), KeySet::new(OLD), KeySet::new(NEW)],
    );
    assert!(
        v[0].0 && v[1].0,
        "the two nodes that agree stay in step: {v:?}"
    );
    assert!(!v[2].0, "the odd node is out of step: {v:?}");
    assert!(v[0].1.contains("does not hold"), "{v:?}");
    // One node sealing with a key the others cannot open (made current too
    // early), though it opens theirs: it alone is out of step.
    let v = fleet_verdicts(
        &redis,
        "t-fleet-early:",
        [
            KeySet::new(OLD),
            KeySet::new(OLD),
            KeySet::new(NEW).with_key(OLD).unwrap(),
        ],
    );
    assert!(v[0].0 && v[1].0 && !v[2].0, "{v:?}");
    assert!(v[2].1.contains("cannot open"), "{v:?}");
    // Mid-rotation: different current keys, each held by every node.
    let v = fleet_verdicts(
        &redis,
        "t-fleet-rolling:",
        [
            KeySet::new(NEW).with_key(OLD).unwrap(),
            KeySet::new(OLD).with_key(NEW).unwrap(),
            KeySet::new(OLD).with_key(NEW).unwrap(),
        ],
    );
    assert!(v.iter().all(|(ok, p)| *ok && p.is_empty()), "{v:?}");
    // Three different keys: no node agrees with most of the fleet.
    let v = fleet_verdicts(
        &redis,
        "t-fleet-apart:",
        [KeySet::new(OLD), KeySet::new(NEW), KeySet::new([0x0c; 32])],
    );
    assert!(v.iter().all(|(ok, _)| !*ok), "{v:?}");
}
