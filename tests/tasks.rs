//! Tasks (the `io.modelcontextprotocol/tasks` extension) over real HTTP: every
//! status transition and its races (cancel vs completion, update vs cancel,
//! TTL expiry vs completion), panics and errors, principal isolation, and the
//! per-principal bound (HTTP 429).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::tasks::{EXT, as_principal, bearer_config, meta, send_as};
use common::{headers, post, request, wait_until};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn text(t: impl Into<String>) -> Result<ToolOutcome, McpError> {
    Ok(CallToolResult::text(t).into())
}

fn ms_schema() -> Value {
    json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}})
}

fn ms(call: &ToolCall) -> Duration {
    Duration::from_millis(
        call.arguments
            .get("ms")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    )
}

/// The test catalog. `finished` is set when `stubborn` runs to its end.
fn suite(config: TaskConfig, finished: Arc<AtomicBool>) -> Suite {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("sleep")
            .description("sleeps ms, stops when cancelled")
            .input_schema(ms_schema())
            .task_support(TaskSupport::Optional)
            .handler(|call| async move {
                let d = ms(&call);
                let Some(task) = call.task() else {
                    tokio::time::sleep(d).await;
                    return text("slept");
                };
                task.set_status_message("sleeping");
                tokio::select! {
                    _ = tokio::time::sleep(d) => text("slept"),
                    _ = task.cancelled() => text("stopped"),
                }
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("stubborn")
            .description("sleeps ms and ignores cancellation")
            .input_schema(ms_schema())
            .task_support(TaskSupport::Required)
            .handler(move |call| {
                let finished = finished.clone();
                async move {
                    tokio::time::sleep(ms(&call)).await;
                    finished.store(true, Ordering::SeqCst);
                    text("finished anyway")
                }
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("ask")
            .description("asks twice, one after the other")
            .task_support(TaskSupport::Required)
            .handler(|call| async move {
                let Some(task) = call.task() else {
                    return text("no task");
                };
                task.set_status_message("asking");
                let a = task.elicit("first?", json!({"type": "object"})).await;
                let b = task.elicit("second?", json!({"type": "object"})).await;
                let word = |r: Result<Value, _>| {
                    r.ok()
                        .and_then(|v| v["content"]["word"].as_str().map(str::to_owned))
                        .unwrap_or_default()
                };
                text(format!("{} {}", word(a), word(b)))
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("panics")
            .description("panics inside the task")
            .task_support(TaskSupport::Required)
            .handler(|_call| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                panic!("boom");
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("app_error")
            .description("fails with an application error")
            .task_support(TaskSupport::Required)
            .handler(|_call| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(McpError::Application {
                    code: 4001,
                    message: "quota exhausted".into(),
                    data: None,
                })
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("tool_error")
            .description("reports a tool error")
            .task_support(TaskSupport::Required)
            .handler(|_call| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(CallToolResult::error("bad input").into())
            }),
    );
    Suite::builder(Implementation::new("tasks", "1"))
        .catalog(catalog)
        .tasks(config)
        .build()
}

/// A server whose requests belong to the principal named by `Authorization:
/// Bearer <name>`.
fn serve(config: TaskConfig) -> (ServerThread, Arc<AtomicBool>) {
    let finished = Arc::new(AtomicBool::new(false));
    let flag = finished.clone();
    let srv =
        ServerThread::spawn(move || suite(config, flag), bearer_config()).expect("server starts");
    (srv, finished)
}

fn send(
    srv: &ServerThread,
    who: &str,
    method: &str,
    name: &str,
    params: Value,
    declared: bool,
) -> common::Response {
    send_as(srv.addr, who, method, name, params, declared)
}

/// `tools/call` declaring the extension; the whole response.
fn call_tool(srv: &ServerThread, who: &str, tool: &str, args: Value) -> common::Response {
    send(
        srv,
        who,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": args}),
        true,
    )
}

/// Starts `tool` as a task; its id.
fn start(srv: &ServerThread, who: &str, tool: &str, args: Value) -> String {
    let r = call_tool(srv, who, tool, args).json();
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    r["result"]["taskId"].as_str().expect("taskId").to_owned()
}

fn task_req(srv: &ServerThread, who: &str, method: &str, id: &str, extra: Value) -> Value {
    let mut params = extra;
    params["taskId"] = json!(id);
    send(srv, who, method, id, params, true).json()
}

/// An empty acknowledgement: `resultType: "complete"`, no task fields.
fn assert_ack(v: &Value) {
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    for absent in ["taskId", "status", "result", "error", "inputRequests"] {
        assert!(v["result"].get(absent).is_none(), "{absent} in {v}");
    }
}

fn get(srv: &ServerThread, who: &str, id: &str) -> Value {
    task_req(srv, who, "tasks/get", id, json!({}))
}

fn status(srv: &ServerThread, who: &str, id: &str) -> String {
    get(srv, who, id)["result"]["status"]
        .as_str()
        .unwrap_or("<none>")
        .to_owned()
}

fn wait_status(srv: &ServerThread, who: &str, id: &str, want: &str) -> Value {
    let mut last = Value::Null;
    let ok = wait_until(Duration::from_secs(10), || {
        last = get(srv, who, id);
        last["result"]["status"] == want
    });
    assert!(ok, "task {id} never reached {want}: {last}");
    last["result"].clone()
}

#[test]
fn a_task_is_created_durably_and_completes_with_its_result_inlined() {
    let (srv, _) = serve(TaskConfig::default());
    let created = call_tool(&srv, "ada", "sleep", json!({"ms": 200})).json();
    let created = &created["result"];
    assert_eq!(created["resultType"], "task");
    assert_eq!(created["status"], "working");
    assert_eq!(created["ttlMs"], 3_600_000);
    for absent in ["result", "error", "inputRequests", "requestState", "task"] {
        assert!(created.get(absent).is_none(), "{absent} in {created}");
    }
    let id = created["taskId"].as_str().expect("taskId");
    // 128 random bits: 32 hex digits, and no two alike.
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(id, start(&srv, "ada", "sleep", json!({"ms": 10_000})));
    let working = get(&srv, "ada", id);
    assert_eq!(working["result"]["resultType"], "complete");
    assert_eq!(working["result"]["statusMessage"], "sleeping");
    let done = wait_status(&srv, "ada", id, "completed");
    assert_eq!(done["result"]["content"][0]["text"], "slept");
    assert!(done.get("error").is_none());
}

#[test]
fn without_the_extension_a_call_is_answered_directly_and_task_methods_get_32021() {
    let (srv, _) = serve(TaskConfig::default());
    let r = send(
        &srv,
        "ada",
        "tools/call",
        "sleep",
        json!({"name": "sleep", "arguments": {"ms": 1}}),
        false,
    )
    .json();
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "slept");
    let r = send(
        &srv,
        "ada",
        "tools/call",
        "stubborn",
        json!({"name": "stubborn", "arguments": {}}),
        false,
    );
    assert_eq!(r.status, 400);
    let e = r.json();
    assert_eq!(e["error"]["code"], -32021);
    assert_eq!(
        e["error"]["data"]["requiredCapabilities"]["extensions"][EXT],
        json!({})
    );
    // Checked before the lookup: an unknown id gets -32021 too.
    let r = send(
        &srv,
        "ada",
        "tasks/get",
        "nope",
        json!({"taskId": "nope"}),
        false,
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32021))
    );
    // Mcp-Name must match taskId.
    let id = start(&srv, "ada", "sleep", json!({"ms": 5_000}));
    let mut params = json!({"taskId": id, "_meta": meta(true)});
    params["taskId"] = json!(id);
    let h = as_principal(headers("tasks/get", Some("another-id")), "ada");
    let r = post(srv.addr, &h, &request(json!(2), "tasks/get", params));
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32020))
    );
    for removed in ["tasks/result", "tasks/list"] {
        let r = send(&srv, "ada", removed, &id, json!({"taskId": id}), true);
        assert_eq!(r.json()["error"]["code"], -32601, "{removed}");
    }
}

#[test]
fn input_requests_move_the_task_between_input_required_and_working() {
    let (srv, _) = serve(TaskConfig::default());
    let id = start(&srv, "ada", "ask", json!({}));
    let first = wait_status(&srv, "ada", &id, "input_required");
    let keys: Vec<String> = first["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 1);
    assert_eq!(
        first["inputRequests"][&keys[0]]["method"],
        "elicitation/create"
    );
    // Unknown keys are ignored; the task keeps waiting.
    let ack = task_req(
        &srv,
        "ada",
        "tasks/update",
        &id,
        json!({"inputResponses": {"nope": {}}}),
    );
    assert_ack(&ack);
    assert_eq!(status(&srv, "ada", &id), "input_required");
    let answer = json!({"action": "accept", "content": {"word": "hello"}});
    task_req(
        &srv,
        "ada",
        "tasks/update",
        &id,
        json!({"inputResponses": {&keys[0]: answer}}),
    );
    // The next request for input gets a new key, never a reused one.
    let second = wait_until(Duration::from_secs(10), || {
        let t = get(&srv, "ada", &id)["result"].clone();
        t["status"] == "input_required" && t["inputRequests"].get(&keys[0]).is_none()
    });
    assert!(second, "second input request never came");
    let t = get(&srv, "ada", &id)["result"].clone();
    let key2 = t["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    assert_ne!(key2, keys[0]);
    // An answer to the old key again changes nothing.
    task_req(
        &srv,
        "ada",
        "tasks/update",
        &id,
        json!({"inputResponses": {&keys[0]: {}}}),
    );
    assert_eq!(status(&srv, "ada", &id), "input_required");
    let answer = json!({"action": "accept", "content": {"word": "world"}});
    task_req(
        &srv,
        "ada",
        "tasks/update",
        &id,
        json!({"inputResponses": {&key2: answer}}),
    );
    let done = wait_status(&srv, "ada", &id, "completed");
    assert_eq!(done["result"]["content"][0]["text"], "hello world");
}

#[test]
fn errors_end_failed_and_tool_errors_end_completed() {
    let (srv, _) = serve(TaskConfig::default());
    let id = start(&srv, "ada", "panics", json!({}));
    let t = wait_status(&srv, "ada", &id, "failed");
    assert_eq!(t["error"]["code"], -32603);
    assert!(t.get("result").is_none());
    let id = start(&srv, "ada", "app_error", json!({}));
    let t = wait_status(&srv, "ada", &id, "failed");
    assert_eq!(t["error"]["code"], 4001);
    assert_eq!(t["error"]["message"], "quota exhausted");
    let id = start(&srv, "ada", "tool_error", json!({}));
    let t = wait_status(&srv, "ada", &id, "completed");
    assert_eq!(t["result"]["isError"], true);
    // The worker lives on.
    let id = start(&srv, "ada", "sleep", json!({"ms": 10}));
    wait_status(&srv, "ada", &id, "completed");
}

#[test]
fn cancel_settles_cancelled_and_a_late_completion_never_overwrites_it() {
    let (srv, finished) = serve(TaskConfig::default().cancel_grace(Duration::from_secs(5)));
    let id = start(&srv, "ada", "stubborn", json!({"ms": 300}));
    let ack = task_req(&srv, "ada", "tasks/cancel", &id, json!({}));
    assert_ack(&ack);
    assert_eq!(status(&srv, "ada", &id), "cancelled");
    // The work ignores the cancel and finishes within the grace period...
    assert!(wait_until(Duration::from_secs(10), || finished.load(Ordering::SeqCst)));
    std::thread::sleep(Duration::from_millis(100));
    // ...but the first terminal status stays.
    let t = get(&srv, "ada", &id)["result"].clone();
    assert_eq!(t["status"], "cancelled");
    assert!(t.get("result").is_none(), "{t}");
}

#[test]
fn a_cancel_after_completion_keeps_the_result() {
    let (srv, _) = serve(TaskConfig::default());
    let id = start(&srv, "ada", "sleep", json!({"ms": 50}));
    wait_status(&srv, "ada", &id, "completed");
    let ack = task_req(&srv, "ada", "tasks/cancel", &id, json!({}));
    assert_ack(&ack);
    let t = get(&srv, "ada", &id)["result"].clone();
    assert_eq!(t["status"], "completed");
    assert_eq!(t["result"]["content"][0]["text"], "slept");
}

#[test]
fn work_that_ignores_cancel_is_aborted_after_the_grace_period() {
    let (srv, finished) = serve(TaskConfig::default().cancel_grace(Duration::from_millis(50)));
    let id = start(&srv, "ada", "stubborn", json!({"ms": 3_000}));
    task_req(&srv, "ada", "tasks/cancel", &id, json!({}));
    std::thread::sleep(Duration::from_millis(3_500));
    assert!(
        !finished.load(Ordering::SeqCst),
        "the stubborn work ran to its end"
    );
    assert_eq!(status(&srv, "ada", &id), "cancelled");
}

#[test]
fn an_update_after_cancel_is_acknowledged_and_changes_nothing() {
    let (srv, _) = serve(TaskConfig::default());
    let id = start(&srv, "ada", "ask", json!({}));
    let t = wait_status(&srv, "ada", &id, "input_required");
    let key = t["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    task_req(&srv, "ada", "tasks/cancel", &id, json!({}));
    let ack = task_req(
        &srv,
        "ada",
        "tasks/update",
        &id,
        json!({"inputResponses": {&key: {"action": "accept", "content": {"word": "late"}}}}),
    );
    assert_ack(&ack);
    let t = get(&srv, "ada", &id)["result"].clone();
    assert_eq!(t["status"], "cancelled");
    assert!(t.get("inputRequests").is_none());
    assert!(t.get("result").is_none());
}

#[test]
fn an_unfinished_task_outlives_its_ttl_and_counts_until_its_work_stops() {
    let (srv, finished) = serve(
        TaskConfig::default()
            .ttl(Duration::from_secs(1))
            .max_tasks_per_principal(2),
    );
    let id = start(&srv, "ada", "stubborn", json!({"ms": 5_000}));
    start(&srv, "ada", "sleep", json!({"ms": 60_000}));
    assert_eq!(get(&srv, "ada", &id)["result"]["ttlMs"], 1_000);
    // Past the TTL of both: their work runs on, so they are still there and
    // still count against the principal's bound.
    std::thread::sleep(Duration::from_millis(1_300));
    assert_eq!(status(&srv, "ada", &id), "working");
    let r = call_tool(&srv, "ada", "sleep", json!({"ms": 60_000}));
    assert_eq!(r.status, 429);
    assert_eq!(
        r.json()["error"]["data"]["limit"],
        "max_tasks_per_principal"
    );
    // Its work ends: the result is there (one more TTL from its end), and
    // its place is free once the work has stopped.
    let done = wait_status(&srv, "ada", &id, "completed");
    assert_eq!(done["result"]["content"][0]["text"], "finished anyway");
    assert!(finished.load(Ordering::SeqCst));
    assert!(wait_until(Duration::from_secs(5), || {
        call_tool(&srv, "ada", "sleep", json!({"ms": 60_000})).json()["result"]["resultType"]
            == "task"
    }));
    let gone = wait_until(Duration::from_secs(5), || {
        get(&srv, "ada", &id)["error"]["code"] == -32602
    });
    assert!(gone, "the finished task outlived one TTL after its end");
}

/// A task left waiting for input (nobody answers) fails when its TTL runs
/// out, and its place under the principal's bound comes back: abandoned
/// tasks cannot hold a principal's (or the server's) bound for good.
#[test]
fn a_task_left_waiting_for_input_fails_at_its_ttl_and_frees_its_place() {
    let (srv, _) = serve(
        TaskConfig::default()
            .ttl(Duration::from_secs(1))
            .max_tasks_per_principal(1),
    );
    let id = start(&srv, "ada", "ask", json!({}));
    wait_status(&srv, "ada", &id, "input_required");
    let r = call_tool(&srv, "ada", "ask", json!({}));
    assert_eq!(r.status, 429, "one task at a time for ada");
    let failed = wait_status(&srv, "ada", &id, "failed");
    let message = failed["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("input was not provided within its TTL"),
        "{failed}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || {
            call_tool(&srv, "ada", "ask", json!({})).json()["result"]["resultType"] == "task"
        }),
        "the place under ada's bound came back"
    );
}

#[test]
fn the_purge_of_an_expired_cancelled_task_stops_its_work() {
    let (srv, finished) = serve(
        TaskConfig::default()
            .ttl(Duration::from_secs(1))
            .cancel_grace(Duration::from_secs(30)),
    );
    let id = start(&srv, "ada", "stubborn", json!({"ms": 2_500}));
    assert_ack(&task_req(&srv, "ada", "tasks/cancel", &id, json!({})));
    // Its record expires while its work (which ignores the cancel) has a
    // long grace left: the purge drops the record and must stop the work.
    let gone = wait_until(Duration::from_secs(5), || {
        get(&srv, "ada", &id)["error"]["code"] == -32602
    });
    assert!(gone, "the cancelled task outlived its ttl");
    std::thread::sleep(Duration::from_millis(2_000));
    assert!(
        !finished.load(Ordering::SeqCst),
        "the dropped task's work ran on"
    );
}

#[test]
fn another_principals_task_looks_exactly_like_an_unknown_one() {
    let (srv, _) = serve(TaskConfig::default());
    let id = start(&srv, "alice", "ask", json!({}));
    let t = wait_status(&srv, "alice", &id, "input_required");
    let key = t["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let unknown = "0123456789abcdef0123456789abcdef";
    for (method, extra) in [
        ("tasks/get", json!({})),
        (
            "tasks/update",
            json!({"inputResponses": {&key: {"action": "accept", "content": {"word": "x"}}}}),
        ),
        ("tasks/cancel", json!({})),
    ] {
        let theirs = task_req(&srv, "mallory", method, &id, extra.clone());
        let none = task_req(&srv, "mallory", method, unknown, extra);
        assert_eq!(theirs["error"]["code"], -32602, "{method}: {theirs}");
        assert_eq!(theirs["error"], none["error"], "{method}");
    }
    // Alice's task was not touched.
    let t = get(&srv, "alice", &id)["result"].clone();
    assert_eq!(t["status"], "input_required");
    assert!(t["inputRequests"].get(&key).is_some());
}

#[test]
fn unfinished_tasks_are_bounded_per_principal_with_429_and_retry_after() {
    let (srv, _) = serve(TaskConfig::default().max_tasks_per_principal(2));
    let a = start(&srv, "ada", "sleep", json!({"ms": 60_000}));
    start(&srv, "ada", "sleep", json!({"ms": 60_000}));
    let r = call_tool(&srv, "ada", "sleep", json!({"ms": 60_000}));
    assert_eq!(r.status, 429);
    assert!(r.header("retry-after").is_some());
    let e = r.json();
    assert_eq!(e["error"]["code"], -32603);
    assert_eq!(e["error"]["data"]["limit"], "max_tasks_per_principal");
    // Another principal is not affected.
    start(&srv, "bob", "sleep", json!({"ms": 60_000}));
    // A finished (here: cancelled) task frees its place once its work
    // has stopped.
    task_req(&srv, "ada", "tasks/cancel", &a, json!({}));
    assert!(wait_until(Duration::from_secs(5), || {
        call_tool(&srv, "ada", "sleep", json!({"ms": 60_000})).json()["result"]["resultType"]
            == "task"
    }));
}
