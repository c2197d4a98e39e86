//! SIGTERM with tasks running (`genmcp serve --conformance`, the real binary):
//! a task that finishes within the drain timeout completes and stays readable
//! meanwhile; one still running at the deadline ends `failed` ("server
//! shutting down") before the process exits, and a listen watching it hears
//! that status before its stream completes.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{VERSION, headers, post, request, wait_until};
use serde_json::{Value, json};

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    })
}

fn send(addr: SocketAddr, method: &str, name: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    post(
        addr,
        &headers(method, Some(name)),
        &request(json!(1), method, params),
    )
    .json()
}

fn start(addr: SocketAddr, seconds: u64) -> String {
    let r = send(
        addr,
        "tools/call",
        "slow_compute",
        json!({"name": "slow_compute", "arguments": {"seconds": seconds}}),
    );
    r["result"]["taskId"].as_str().expect("a task").to_owned()
}

#[test]
fn sigterm_lets_short_tasks_finish_and_fails_the_rest() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args([
            "--log-format",
            "json",
            "serve",
            "--conformance",
            "--port",
            "0",
        ])
        .env("RUST_LOG", "genmcp=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("genmcp starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let next = |until: Instant| -> Option<Value> {
        rx.recv_timeout(until.saturating_duration_since(Instant::now()))
            .ok()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr: SocketAddr = loop {
        let line = next(deadline).expect("the listening line");
        if line["fields"]["message"] == "genmcp listening" {
            break line["fields"]["addr"].as_str().unwrap().parse().unwrap();
        }
    };
    let long = start(addr, 60);
    let short = start(addr, 1);
    let body = request(
        json!("watch"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [long]}, "_meta": meta()}),
    );
    let mut watch = common::Exchange::open(
        addr,
        &headers("subscriptions/listen", None),
        body.to_string().as_bytes(),
    );
    watch.set_timeout(Duration::from_secs(20));
    let ack = watch.next_message().expect("ack");
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [long]}));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    // The short task finishes during the drain, and can be read meanwhile.
    let done = wait_until(Duration::from_secs(4), || {
        send(addr, "tasks/get", &short, json!({"taskId": short}))["result"]["status"] == "completed"
    });
    assert!(done, "the short task did not complete during the drain");
    // The long one is ended at the deadline, before the process exits.
    let mut failed = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while let Some(line) = next(until) {
        if line["fields"]["message"] == "task ended failed: server shutting down" {
            failed.push(
                line["fields"]["task"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    assert_eq!(failed, vec![long]);
    let exit = child.wait().expect("genmcp exits");
    assert!(exit.success(), "{exit:?}");
    // The watcher heard the task working, then failed, then its stream ended
    // with the completion result.
    let mut last = watch.next_message().expect("a status");
    while last["method"] == "notifications/tasks" && last["params"]["status"] == "working" {
        last = watch.next_message().expect("a status");
    }
    assert_eq!(last["params"]["status"], "failed", "{last}");
    assert_eq!(
        last["params"]["error"]["message"],
        "Internal error: server shutting down"
    );
    let end = watch.next_message().expect("the completion result");
    assert_eq!(end["id"], "watch");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
}
