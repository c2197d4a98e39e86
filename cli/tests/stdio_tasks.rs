//! Tasks over stdio (`genmcp serve --stdio --conformance`, the real binary on
//! real pipes): a listen watching a task hears its states; on SIGTERM a task
//! still running at the drain deadline ends `failed` and the watcher hears
//! that before its stream completes.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::VERSION;
use common::stdio_child::Peer;
use serde_json::{Value, json};

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    })
}

fn rpc(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn sigterm_fails_a_running_task_and_its_watcher_hears_it_before_completion() {
    let mut p = Peer::start_with(&["serve", "--stdio", "--conformance"]);
    p.send(&rpc(
        json!(1),
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
    ));
    let (created, _) = p.until(|v| v["id"] == 1);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    p.send(&rpc(
        json!("w"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}}),
    ));
    let (ack, _) = p.until(|v| v["method"] == "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));
    let (first, _) = p.until(|v| v["method"] == "notifications/tasks");
    assert_eq!(first["params"]["status"], "working", "{first}");
    assert_eq!(
        first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "w"
    );

    p.terminate();
    let (failed, _) =
        p.until(|v| v["method"] == "notifications/tasks" && v["params"]["status"] != "working");
    assert_eq!(failed["params"]["status"], "failed", "{failed}");
    assert_eq!(
        failed["params"]["error"]["message"],
        "Internal error: server shutting down"
    );
    let (end, _) = p.until(|v| v["id"] == "w");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert!(p.exit_status().is_some_and(|s| s.success()));
}
