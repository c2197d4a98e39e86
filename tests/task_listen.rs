//! `notifications/tasks` on listen streams over real HTTP: a listen naming
//! `taskIds` (with the tasks extension declared) is acknowledged with the ids
//! it may watch (the caller's own, known tasks), then hears each task's state
//! (the current one first), identical to `tasks/get`, ending with the
//! terminal one.

mod common;

use std::time::Duration;

use common::tasks::{EXT, as_principal, bearer_config, call_as, meta, start_task};
use common::{Exchange, headers, request};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn suite() -> Suite {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("steps")
            .description("a status message, one question, then the answer")
            .task_support(TaskSupport::Required)
            .handler(|call| async move {
                let Some(task) = call.task() else {
                    return Ok(CallToolResult::text("no task").into());
                };
                tokio::time::sleep(Duration::from_millis(50)).await;
                task.set_status_message("thinking");
                let answer = task.elicit("word?", json!({"type": "object"})).await;
                let word = answer
                    .ok()
                    .and_then(|v| v["content"]["word"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                Ok(CallToolResult::text(format!("got {word}")).into())
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("quick")
            .description("ends at once as a task")
            .task_support(TaskSupport::Required)
            .handler(|_call| async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(CallToolResult::text("quick").into())
            }),
    );
    Suite::builder(Implementation::new("task-listen", "1"))
        .catalog(catalog)
        .build()
}

fn serve() -> ServerThread {
    ServerThread::spawn(suite, bearer_config()).expect("server starts")
}

fn send(srv: &ServerThread, who: &str, method: &str, name: &str, params: Value) -> Value {
    call_as(srv.addr, who, method, name, params)
}

fn start(srv: &ServerThread, who: &str, tool: &str) -> String {
    start_task(srv.addr, who, tool)
}

fn get(srv: &ServerThread, who: &str, id: &str) -> Value {
    send(srv, who, "tasks/get", id, json!({"taskId": id}))["result"].clone()
}

fn listen(srv: &ServerThread, who: &str, declared: bool, notifications: Value) -> Exchange {
    let body = request(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": notifications, "_meta": meta(declared)}),
    );
    let h = as_principal(headers("subscriptions/listen", None), who);
    let stream = Exchange::open(srv.addr, &h, body.to_string().as_bytes());
    stream.set_timeout(Duration::from_secs(10));
    stream
}

/// The next `notifications/tasks` of `stream`, as `tasks/get` would show it
/// (the subscription id left out).
fn next_status(stream: &mut Exchange) -> Value {
    let v = stream.next_message().expect("a notification");
    assert_eq!(v["method"], "notifications/tasks", "{v}");
    assert_eq!(
        v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L"
    );
    let mut params = v["params"].clone();
    params.as_object_mut().unwrap().remove("_meta");
    params
}

/// A `tasks/get` result as a notification carries it: no `resultType`, no
/// server stamp.
fn without_result_type(mut v: Value) -> Value {
    let map = v.as_object_mut().unwrap();
    map.remove("resultType");
    map.remove("_meta");
    v
}

#[test]
fn a_listen_hears_each_state_of_its_own_tasks_ending_with_the_terminal_one() {
    let srv = serve();
    let mine = start(&srv, "alice", "steps");
    let theirs = start(&srv, "bob", "steps");
    let mut stream = listen(
        &srv,
        "alice",
        true,
        json!({"taskIds": [mine, theirs, "no-such-task"]}),
    );
    let ack = stream.next_message().expect("ack");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // Only alice's known task: bob's looks exactly like an unknown one.
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [mine]}));

    // Its state now, then each change, until it asks its question.
    let mut seen = vec![next_status(&mut stream)];
    while seen.last().unwrap()["status"] != "input_required" {
        seen.push(next_status(&mut stream));
    }
    assert!(seen.iter().all(|s| s["taskId"] == mine), "{seen:?}");
    assert_eq!(seen[0]["status"], "working");
    let asking = seen.last().unwrap().clone();
    assert_eq!(asking["statusMessage"], "thinking");
    // What the notification said is what tasks/get says.
    assert_eq!(asking, without_result_type(get(&srv, "alice", &mine)));
    let key = asking["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("an input request");

    let answered = send(
        &srv,
        "alice",
        "tasks/update",
        &mine,
        json!({"taskId": mine, "inputResponses": {key: {"action": "accept", "content": {"word": "kiwi"}}}}),
    );
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    let mut last = next_status(&mut stream);
    while last["status"] == "working" {
        assert_eq!(last["taskId"], mine.as_str());
        last = next_status(&mut stream);
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["result"]["content"][0]["text"], "got kiwi");
    assert_eq!(last, without_result_type(get(&srv, "alice", &mine)));
    // Bob's task (asking its own question meanwhile) never reached alice's
    // stream: every state it carried was alice's task's. Bob's task runs on
    // its own clock: on a busy machine it may ask after alice's has ended.
    assert_eq!(last["taskId"], mine.as_str());
    assert!(
        common::wait_until(
            Duration::from_secs(10),
            || get(&srv, "bob", &theirs)["status"] == "input_required"
        ),
        "bob's task asks its question: {}",
        get(&srv, "bob", &theirs)
    );
}

#[test]
fn a_finished_task_is_told_at_once_and_task_ids_need_the_extension() {
    let srv = serve();
    let id = start(&srv, "alice", "quick");
    assert!(common::wait_until(Duration::from_secs(10), || get(
        &srv, "alice", &id
    )["status"]
        == "completed"));
    let mut stream = listen(&srv, "alice", true, json!({"taskIds": [id]}));
    let ack = stream.next_message().expect("ack");
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));
    let done = next_status(&mut stream);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"]["content"][0]["text"], "quick");

    // Without the extension declared: -32021 (HTTP 400), no stream.
    let refused = listen(&srv, "alice", false, json!({"taskIds": [id]})).into_response();
    assert_eq!(refused.status, 400);
    let body = refused.json();
    assert_eq!(body["id"], "L");
    assert_eq!(body["error"]["code"], -32021, "{body}");
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {EXT: {}}})
    );
}

#[test]
fn a_listen_for_nothing_but_unknown_tasks_completes_at_once() {
    let srv = serve();
    let mut stream = listen(&srv, "alice", true, json!({"taskIds": ["nope"]}));
    let ack = stream.next_message().expect("ack");
    assert_eq!(ack["params"]["notifications"], json!({}), "{ack}");
    let end = stream.next_message().expect("completion");
    assert_eq!(end["id"], "L");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
}
