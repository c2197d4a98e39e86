//! Tasks shared by nodes of one Redis bus (a real `redis-server`, nodes on
//! loopback): a task created on one node is read, answered, cancelled and
//! watched from another; a node that dies leaves its unfinished tasks
//! `failed` within its lease; with Redis down, creating a task fails clearly
//! and reads fail closed.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::redis_server::{RedisServer, block_on, bus_config, redis_bus};
use common::tasks::{self, as_principal, bearer_config, call_as, start_task};
use common::{Exchange, headers, post, request, wait_until};
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use serde_json::{Value, json};

type Events = Bus<SharedNotification>;

fn suite(bus: Events, lease: Duration) -> Suite {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("ask")
            .description("asks one question, then answers with it")
            .task_support(TaskSupport::Required)
            .handler(|call| async move {
                let Some(task) = call.task() else {
                    return Ok(CallToolResult::text("no task").into());
                };
                let answer = task.elicit("word?", json!({"type": "object"})).await;
                let word = answer
                    .ok()
                    .and_then(|v| v["content"]["word"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                Ok(CallToolResult::text(format!("got {word}")).into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("long")
            .description("runs a minute unless cancelled")
            .task_support(TaskSupport::Required)
            .handler(|call| async move {
                let Some(task) = call.task() else {
                    return Ok(CallToolResult::text("no task").into());
                };
                task.set_status_message("working hard");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                    _ = task.cancelled() => {}
                }
                Ok(CallToolResult::text("stopped").into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("big")
            .description("answers 100 KB of text after a moment")
            .task_support(TaskSupport::Required)
            .handler(|_call| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(CallToolResult::text("x".repeat(100_000)).into())
            }),
    );
    Suite::builder(Implementation::new("shared-tasks", "1"))
        .catalog(catalog)
        .tasks(TaskConfig::default().lease(lease))
        .shared_tasks(&bus)
        .build()
}

/// A node on its own port; requests belong to `Authorization: Bearer <name>`
/// (without one, to the client address).
fn node(bus: &Events, lease: Duration) -> ServerThread {
    let bus = bus.clone();
    ServerThread::spawn(move || suite(bus, lease), bearer_config()).expect("node starts")
}

fn meta() -> Value {
    tasks::meta(true)
}

fn send(srv: &ServerThread, who: &str, method: &str, name: &str, params: Value) -> Value {
    call_as(srv.addr, who, method, name, params)
}

fn start(srv: &ServerThread, who: &str, tool: &str) -> String {
    start_task(srv.addr, who, tool)
}

fn get(srv: &ServerThread, who: &str, id: &str) -> Value {
    send(srv, who, "tasks/get", id, json!({"taskId": id}))
}

fn wait_status(srv: &ServerThread, who: &str, id: &str, want: &str) -> Value {
    let mut last = Value::Null;
    let reached = wait_until(Duration::from_secs(10), || {
        last = get(srv, who, id);
        last["result"]["status"] == want
    });
    assert!(reached, "task {id} never read {want}: {last}");
    last["result"].clone()
}

fn listen(srv: &ServerThread, who: &str, ids: &[&str]) -> Exchange {
    let body = request(
        json!("w"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": ids}, "_meta": meta()}),
    );
    let h = as_principal(headers("subscriptions/listen", None), who);
    let stream = Exchange::open(srv.addr, &h, body.to_string().as_bytes());
    stream.set_timeout(Duration::from_secs(10));
    stream
}

#[test]
fn a_task_is_read_answered_cancelled_and_watched_from_another_node() {
    let redis = RedisServer::start();
    let (bus_a, bus_b): (Events, Events) = (
        redis_bus(&redis.url(), "t-shared:"),
        redis_bus(&redis.url(), "t-shared:"),
    );
    let a = node(&bus_a, Duration::from_secs(30));
    let b = node(&bus_b, Duration::from_secs(30));

    let id = start(&a, "alice", "ask");
    // Durable before the handle was sent: node B reads it at once.
    let asked = wait_status(&b, "alice", &id, "input_required");
    assert_eq!(asked["taskId"], id.as_str());
    // Another principal sees nothing, on either node.
    assert_eq!(get(&b, "bob", &id)["error"]["code"], -32602);

    let mut watch = listen(&b, "alice", &[&id]);
    let ack = watch.next_message().expect("ack");
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));
    let first = watch.next_message().expect("its state");
    assert_eq!(first["params"]["status"], "input_required", "{first}");
    let key = first["params"]["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("an input request");

    // Answered on B, applied on A (where the work runs).
    let answered = send(
        &b,
        "alice",
        "tasks/update",
        &id,
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"word": "fig"}}}}),
    );
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    let done = wait_status(&a, "alice", &id, "completed");
    assert_eq!(done["result"]["content"][0]["text"], "got fig");
    // B's watcher heard it, ending with the terminal state and its result.
    let mut last = watch.next_message().expect("a status");
    while last["params"]["status"] != "completed" {
        last = watch.next_message().expect("a status");
    }
    assert_eq!(last["params"]["result"]["content"][0]["text"], "got fig");
    assert_eq!(
        wait_status(&b, "alice", &id, "completed")["result"],
        done["result"]
    );

    // Cancelled on B, the work on A stops.
    let long = start(&a, "alice", "long");
    wait_status(&b, "alice", &long, "working");
    let cancelled = send(&b, "alice", "tasks/cancel", &long, json!({"taskId": long}));
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    wait_status(&a, "alice", &long, "cancelled");
    wait_status(&b, "alice", &long, "cancelled");
}

/// `genmcp serve --bus <url> --task-lease 1` (the notes demo, unauthenticated
/// bus); its address.
fn binary_node(url: &str) -> (std::process::Child, std::net::SocketAddr) {
    common::serve_child::spawn_serve(&["--port", "0", "--bus", url, "--task-lease", "1"], &[])
}

/// Starts the demo's `export_notes` as a task on the node at `addr`
/// (unauthenticated: it belongs to the client address); its id.
fn export_task(addr: std::net::SocketAddr) -> String {
    let call = request(
        json!(1),
        "tools/call",
        json!({"name": "export_notes", "arguments": {}, "_meta": meta()}),
    );
    let created = post(addr, &headers("tools/call", Some("export_notes")), &call).json();
    created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned()
}

#[test]
fn a_killed_nodes_unfinished_tasks_read_failed_within_its_lease() {
    let redis = RedisServer::start();
    // The binary's bus uses the default prefix and no key: so does node B.
    let bus_b: Events = redis_bus(&redis.url(), "genmcp:");
    let b = node(&bus_b, Duration::from_secs(1));
    let (mut a, addr) = binary_node(&redis.url());
    let id = export_task(addr);
    // Unauthenticated on both: the task belongs to the client address.
    let anonymous = |method: &str, params: Value| -> Value {
        let mut params = params;
        params["_meta"] = meta();
        post(
            b.addr,
            &headers(method, Some(&id)),
            &request(json!(1), method, params),
        )
        .json()
    };
    let read = anonymous("tasks/get", json!({"taskId": id}));
    assert_eq!(read["result"]["taskId"], id.as_str(), "{read}");
    assert!(
        !["failed", "completed", "cancelled"]
            .contains(&read["result"]["status"].as_str().unwrap_or(""))
    );
    // Node A dies without a drain.
    a.kill().expect("kill");
    let _ = a.wait();
    let mut last = Value::Null;
    let lost = wait_until(Duration::from_secs(10), || {
        last = anonymous("tasks/get", json!({"taskId": id}));
        last["result"]["status"] == "failed"
    });
    assert!(lost, "{last}");
    assert_eq!(
        last["result"]["error"]["message"],
        "Internal error: the node running this task was lost"
    );
}

/// A listen on another node watching a task whose node died hears it end
/// `failed` once that node's lease lapsed, with nobody reading the task
/// (the dead node publishes nothing more).
#[test]
fn a_watcher_on_another_node_hears_a_killed_nodes_task_fail() {
    let redis = RedisServer::start();
    let bus_b: Events = redis_bus(&redis.url(), "genmcp:");
    let b = node(&bus_b, Duration::from_secs(1));
    let (mut a, addr) = binary_node(&redis.url());
    let id = export_task(addr);
    // Unauthenticated on both: the task belongs to the client address.
    let body = request(
        json!("w"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}, "_meta": meta()}),
    );
    let mut watch = Exchange::open(
        b.addr,
        &headers("subscriptions/listen", None),
        body.to_string().as_bytes(),
    );
    watch.set_timeout(Duration::from_secs(10));
    let ack = watch.next_message().expect("ack");
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));
    a.kill().expect("kill");
    let _ = a.wait();
    let mut last = watch.next_message().expect("its state");
    while last["params"]["status"] != "failed" {
        last = watch
            .next_message()
            .unwrap_or_else(|| panic!("the stream never heard the task fail: {last}"));
    }
    assert_eq!(
        last["params"]["error"]["message"], "Internal error: the node running this task was lost",
        "{last}"
    );
}

#[test]
fn without_redis_no_task_is_created_and_other_nodes_tasks_are_not_read() {
    let mut redis = RedisServer::start();
    let (bus_a, bus_b): (Events, Events) = (
        redis_bus(&redis.url(), "t-down:"),
        redis_bus(&redis.url(), "t-down:"),
    );
    let a = node(&bus_a, Duration::from_secs(30));
    let b = node(&bus_b, Duration::from_secs(30));
    let id = start(&a, "alice", "long");
    wait_status(&b, "alice", &id, "working");
    redis.kill();
    assert!(wait_until(Duration::from_secs(10), || !bus_a
        .is_connected()
        && !bus_b.is_connected()));
    let refused = send(
        &a,
        "alice",
        "tools/call",
        "long",
        json!({"name": "long", "arguments": {}}),
    );
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("task store is unavailable")),
        "{refused}"
    );
    // B cannot read A's task: an error, never "unknown".
    let closed = get(&b, "alice", &id);
    assert_eq!(closed["error"]["code"], -32603, "{closed}");
    // A still answers for its own task.
    assert_eq!(get(&a, "alice", &id)["result"]["status"], "working");
}

#[test]
fn a_drained_nodes_running_tasks_read_failed_everywhere_at_once() {
    let redis = RedisServer::start();
    let bus_b: Events = redis_bus(&redis.url(), "t-drain:");
    let b = node(&bus_b, Duration::from_secs(30));
    let bus_a: Events = redis_bus(&redis.url(), "t-drain:");
    let a = node(&bus_a, Duration::from_secs(30));
    let id = start(&a, "alice", "long");
    wait_status(&b, "alice", &id, "working");
    // A graceful stop (the drain), far within the 30 s lease: node B reads
    // how the task ended, not a lost node.
    drop(a);
    let failed = wait_status(&b, "alice", &id, "failed");
    assert_eq!(
        failed["error"]["message"],
        "Internal error: server shutting down"
    );
}

#[test]
fn a_result_the_bus_cannot_announce_fails_its_task_on_every_node() {
    let redis = RedisServer::start();
    // A bus carrying at most 64 KiB a message; results may be larger.
    let small = || -> Events {
        let mut config = bus_config(&redis.url(), "t-big:");
        config.max_payload = 64 * 1024;
        block_on(Bus::redis(config)).expect("the bus connects")
    };
    let (bus_a, bus_b) = (small(), small());
    let a = node(&bus_a, Duration::from_secs(30));
    let b = node(&bus_b, Duration::from_secs(30));
    let id = start(&a, "alice", "big");
    // Never stored unannounced: it fails, with a clear error, everywhere.
    let failed = wait_status(&a, "alice", &id, "failed");
    assert!(
        failed["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("larger than the bus carries")),
        "{failed}"
    );
    assert_eq!(
        wait_status(&b, "alice", &id, "failed")["error"],
        failed["error"]
    );
}
