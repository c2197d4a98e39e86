//! Tasks shared by two real `genmcp serve --conformance --bus` processes on
//! one Redis, under a real fault: the owner node is paused (`SIGSTOP`, then
//! `SIGCONT`). A forwarded `tasks/cancel` the owner cannot hear is answered
//! with an error (never a silent success) and is not applied later; a node
//! paused past its lease ends its task with the same terminal status as the
//! other node read; a task result the bus cannot carry is refused at start;
//! a principal's tasks past their TTL still count while their work runs.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::redis_server::RedisServer;
use common::{headers, post, request, wait_until};
use serde_json::{Value, json};

/// A `genmcp serve --conformance --bus <url>` child, killed on drop.
struct Node {
    child: Child,
    addr: SocketAddr,
}

impl Node {
    fn start(url: &str, extra: &[&str]) -> Node {
        let mut args = vec!["--conformance", "--port", "0", "--bus", url];
        args.extend_from_slice(extra);
        let (child, addr) = common::serve_child::spawn_serve(&args, &[]);
        Node { child, addr }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the process; after `STOP`, returns
    /// only once every thread of it is stopped ([`common::signal_process`]).
    fn signal(&self, signal: &str) {
        let ok = common::signal_process(self.child.id(), &format!("-{signal}"));
        assert!(ok, "kill -{signal}");
    }

    /// `method` with `params` (the tasks extension declared), unauthenticated:
    /// every request belongs to the client address, the same on both nodes.
    fn send(&self, method: &str, name: &str, params: Value) -> Value {
        self.send_as(None, method, name, params)
    }

    /// [`Node::send`] with `Authorization: Bearer <token>` when given.
    fn send_as(&self, token: Option<&str>, method: &str, name: &str, params: Value) -> Value {
        let mut params = params;
        params["_meta"] = common::tasks::meta(true);
        let mut h = headers(method, Some(name));
        if let Some(token) = token {
            h.push(("Authorization".into(), format!("Bearer {token}")));
        }
        post(self.addr, &h, &request(json!(1), method, params)).json()
    }

    fn get(&self, id: &str) -> Value {
        self.send("tasks/get", id, json!({"taskId": id}))
    }

    fn status(&self, id: &str) -> String {
        self.get(id)["result"]["status"]
            .as_str()
            .unwrap_or("<none>")
            .to_owned()
    }

    /// Starts `slow_compute` for `seconds` as a task; its id.
    fn slow(&self, seconds: f64) -> String {
        let r = self.send(
            "tools/call",
            "slow_compute",
            json!({"name": "slow_compute", "arguments": {"seconds": seconds}}),
        );
        assert_eq!(r["result"]["resultType"], "task", "{r}");
        r["result"]["taskId"].as_str().expect("taskId").to_owned()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-CONT")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

#[test]
fn a_cancel_forwarded_to_a_paused_owner_is_an_error_and_never_applied_later() {
    let redis = RedisServer::start();
    let a = Node::start(&redis.url(), &[]);
    let b = Node::start(&redis.url(), &[]);
    let id = a.slow(60.0);
    assert!(wait_until(Duration::from_secs(10), || b.status(&id) == "working"));

    // The owner cannot hear its control topic while it is stopped.
    a.signal("STOP");
    let refused = b.send("tasks/cancel", &id, json!({"taskId": id}));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("retry")),
        "{refused}"
    );
    a.signal("CONT");
    // The owner now reads the message it missed; the client was told the
    // cancel failed, so it must not be applied. A request answered by A
    // shows it runs again; then give it time to act on the old message.
    assert!(wait_until(Duration::from_secs(10), || a.status(&id) == "working"));
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(a.status(&id), "working");
    assert_eq!(b.status(&id), "working");

    // A retry, with the owner listening, is confirmed and applied (a busy
    // machine may need more than one, as a client would).
    let mut cancelled = Value::Null;
    let confirmed = wait_until(Duration::from_secs(20), || {
        cancelled = b.send("tasks/cancel", &id, json!({"taskId": id}));
        cancelled["result"]["resultType"] == "complete"
    });
    assert!(confirmed, "{cancelled}");
    assert_eq!(a.status(&id), "cancelled");
    assert_eq!(b.status(&id), "cancelled");
}

#[test]
fn a_node_paused_past_its_lease_ends_with_the_status_the_other_node_read() {
    let redis = RedisServer::start();
    let lease = ["--task-lease", "1"];
    let a = Node::start(&redis.url(), &lease);
    let b = Node::start(&redis.url(), &lease);
    let id = a.slow(3.0);
    assert!(wait_until(Duration::from_secs(10), || b.status(&id) == "working"));

    a.signal("STOP");
    let mut seen = Value::Null;
    let lost = wait_until(Duration::from_secs(10), || {
        seen = b.get(&id);
        seen["result"]["status"] == "failed"
    });
    assert!(lost, "B never read A's task failed: {seen}");
    // Past the task's own three seconds: A's work would finish at once.
    std::thread::sleep(Duration::from_millis(2_500));
    a.signal("CONT");

    let mut on_a = String::new();
    let agreed = wait_until(Duration::from_secs(10), || {
        on_a = a.status(&id);
        on_a == "failed"
    });
    assert!(agreed, "A ended its task {on_a}, B read failed");
    // And it stays so, on both: a terminal status never changes.
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(a.status(&id), "failed");
    assert_eq!(b.status(&id), "failed");
    assert!(terminal(&b.status(&id)));
}

#[test]
fn a_task_result_larger_than_the_bus_carries_is_refused_at_start() {
    let redis = RedisServer::start();
    let out = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args([
            "serve",
            "--conformance",
            "--port",
            "0",
            "--bus",
            &redis.url(),
        ])
        .args(["--max-task-result-bytes", "2000000"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("genmcp runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--max-task-result-bytes") && stderr.contains("max_payload"),
        "{stderr}"
    );
}

#[test]
fn tasks_past_their_ttl_count_against_the_principal_while_their_work_runs() {
    let redis = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("genmcp-ttl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "tok-ada ada\n").expect("token file");
    let node = Node::start(
        &redis.url(),
        &[
            "--auth-tokens",
            tokens.to_str().expect("utf-8 path"),
            "--task-ttl",
            "1",
            "--max-tasks-per-principal",
            "3",
        ],
    );
    let call = |seconds: f64| {
        node.send_as(
            Some("tok-ada"),
            "tools/call",
            "slow_compute",
            json!({"name": "slow_compute", "arguments": {"seconds": seconds}}),
        )
    };
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let r = call(30.0);
            assert_eq!(r["result"]["resultType"], "task", "{r}");
            r["result"]["taskId"].as_str().expect("taskId").to_owned()
        })
        .collect();
    // Past their one-second TTL, their work runs on: still there, still
    // counted.
    std::thread::sleep(Duration::from_millis(1_500));
    let refused = call(30.0);
    assert_eq!(
        refused["error"]["data"]["limit"], "max_tasks_per_principal",
        "{refused}"
    );
    for id in &ids {
        let read = node.send_as(Some("tok-ada"), "tasks/get", id, json!({"taskId": id}));
        assert_eq!(read["result"]["status"], "working", "{read}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_node_paused_past_its_lease_stops_a_task_another_node_ended() {
    let redis = RedisServer::start();
    let lease = ["--task-lease", "1"];
    let a = Node::start(&redis.url(), &lease);
    let b = Node::start(&redis.url(), &lease);
    // Long enough that its work is still running when A wakes: nothing but
    // A's lease renewal can tell A its task ended elsewhere.
    let id = a.slow(60.0);
    assert!(wait_until(Duration::from_secs(10), || b.status(&id) == "working"));
    a.signal("STOP");
    let lost = wait_until(Duration::from_secs(10), || b.status(&id) == "failed");
    assert!(lost, "B never read A's task failed");
    a.signal("CONT");
    let mut on_a = String::new();
    let agreed = wait_until(Duration::from_secs(10), || {
        on_a = a.status(&id);
        on_a == "failed"
    });
    assert!(agreed, "A still answers {on_a} for a task B read failed");
    assert_eq!(
        a.get(&id)["result"]["error"],
        b.get(&id)["result"]["error"],
        "the same terminal answer on both nodes"
    );
}

#[test]
fn an_update_forwarded_to_a_paused_owner_is_an_error_and_never_applied_later() {
    let redis = RedisServer::start();
    let a = Node::start(&redis.url(), &[]);
    let b = Node::start(&redis.url(), &[]);
    let r = a.send(
        "tools/call",
        "confirm_delete",
        json!({"name": "confirm_delete", "arguments": {"filename": "f.txt"}}),
    );
    let id = r["result"]["taskId"].as_str().expect("a task").to_owned();
    let mut asked = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        asked = b.get(&id);
        asked["result"]["status"] == "input_required"
    }));
    let key = asked["result"]["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("an input request");
    let update = json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}});

    a.signal("STOP");
    let refused = b.send("tasks/update", &id, update.clone());
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    a.signal("CONT");
    assert!(wait_until(Duration::from_secs(10), || a.status(&id)
        == "input_required"));
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(a.status(&id), "input_required");

    let mut answered = Value::Null;
    let confirmed = wait_until(Duration::from_secs(20), || {
        answered = b.send("tasks/update", &id, update.clone());
        answered["result"]["resultType"] == "complete"
    });
    assert!(confirmed, "{answered}");
    let mut done = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        done = b.get(&id);
        done["result"]["status"] == "completed"
    }));
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "Deleted f.txt"
    );
}

#[test]
fn a_task_that_ends_while_redis_is_down_reads_ended_on_every_node_once_redis_is_back() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let a = Node::start(&url, &["--task-lease", "10"]);
    let b = Node::start(&url, &["--task-lease", "10"]);
    let id = a.slow(3.0);
    assert!(wait_until(Duration::from_secs(10), || b.status(&id) == "working"));
    // Redis goes away; the task completes on A meanwhile (within its 3 s),
    // so its copy cannot be written; then Redis comes back (empty: no
    // persistence).
    redis.kill();
    std::thread::sleep(Duration::from_millis(5_000));
    // A does not show an end the other nodes cannot read yet: it fails
    // closed (retry later) until its copy is in Redis.
    let during = a.get(&id);
    assert!(
        during["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unavailable")),
        "A answered {during} while its copy was not in Redis"
    );
    redis.restart();
    // The copy that could not be written is written once Redis answers: B
    // reads the task's end, as A does.
    let agreed = wait_until(Duration::from_secs(20), || {
        b.status(&id) == "completed" && a.status(&id) == "completed"
    });
    assert!(agreed, "B reads {} (A: {})", b.status(&id), a.status(&id));
}

#[test]
fn a_node_woken_past_its_lease_answers_at_once_what_the_other_node_read() {
    let redis = RedisServer::start();
    let lease = ["--task-lease", "1"];
    let a = Node::start(&redis.url(), &lease);
    let b = Node::start(&redis.url(), &lease);
    for round in 0..3 {
        let id = a.slow(60.0);
        assert!(wait_until(Duration::from_secs(10), || b.status(&id) == "working"));
        a.signal("STOP");
        let lost = wait_until(Duration::from_secs(10), || b.status(&id) == "failed");
        assert!(lost, "round {round}: B never read A's task failed");
        a.signal("CONT");
        // The first answer after waking, before any renewal had a chance to
        // tell A: the same as B's.
        let first = a.status(&id);
        assert_eq!(first, "failed", "round {round}: A answered {first} at once");
    }
}

#[test]
fn a_node_cut_off_from_redis_past_its_lease_answers_no_status_it_cannot_confirm() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let a = Node::start(&url, &["--task-lease", "1"]);
    let b = Node::start(&url, &["--task-lease", "1"]);
    let id = a.slow(60.0);
    assert!(wait_until(Duration::from_secs(10), || b.status(&id) == "working"));
    // Redis goes away past A's lease: once it is back, B may end A's task
    // `failed` before A can renew, so A cannot know its task is still
    // `working` and says so (retry later) instead of guessing.
    redis.kill();
    std::thread::sleep(Duration::from_millis(2_000));
    let during = a.get(&id);
    assert!(
        during["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unavailable")),
        "A answered {during} for its own task while its lease was in doubt"
    );
    redis.restart();
    // Once Redis is back, both nodes agree again.
    let agreed = wait_until(Duration::from_secs(20), || {
        let (sa, sb) = (a.status(&id), b.status(&id));
        sa == sb && sa != "<none>"
    });
    assert!(
        agreed,
        "A reads {} and B reads {}",
        a.status(&id),
        b.status(&id)
    );
}

#[test]
fn a_task_that_ends_while_its_copy_waits_on_a_paused_redis_is_not_shown_ended_yet() {
    let redis = RedisServer::start();
    let url = redis.url();
    let a = Node::start(&url, &["--task-lease", "30"]);
    let b = Node::start(&url, &["--task-lease", "30"]);
    let id = a.slow(2.5);
    assert!(wait_until(Duration::from_secs(10), || b.status(&id) == "working"));
    // Redis answers nothing for 8 s; the task ends on A meanwhile (within
    // its 2.5 s), so its copy waits. A does not show the end before the
    // other nodes can read it.
    let paused = redis.command(&["CLIENT", "PAUSE", "8000", "ALL"]);
    assert_eq!(paused.as_deref().map(str::trim), Some("+OK"));
    std::thread::sleep(Duration::from_millis(3_500));
    let during = a.get(&id);
    assert!(
        during["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unavailable")),
        "A answered {during} while its copy was on its way to a paused Redis"
    );
    // Once Redis answers, both nodes read the end.
    let agreed = wait_until(Duration::from_secs(20), || {
        b.status(&id) == "completed" && a.status(&id) == "completed"
    });
    assert!(agreed, "B reads {} (A: {})", b.status(&id), a.status(&id));
}
