//! Runs `examples/actix_app.rs` itself (built with `cargo build --example
//! actix_app`, a no-op when `cargo test` already built it) and talks to it over
//! real HTTP: its own `GET /health`, `server/discover` at `/mcp`, a listen on
//! `room://messages` that receives `notifications/resources/updated` after a
//! `post`, `resources/read`, the `Logger` lines, and the drain on SIGTERM.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Exchange, call};
use serde_json::{Value, json};

const ROOM: &str = "room://messages";

/// Builds the example and returns its executable.
fn build_example() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--example", "actix_app", "--message-format=json"])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .stderr(Stdio::inherit());
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build --example actix_app failed"
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "actix_app")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("the example's executable")
}

/// The running example; killed if the test fails half-way.
struct App {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl App {
    fn start() -> App {
        let mut child = Command::new(build_example())
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the example starts");
        // "actix_app listening on http://127.0.0.1:PORT (...)"
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("stderr");
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        App { child, addr, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_actix_app_example_serves_its_routes_and_mcp() {
    let app = App::start();
    let addr = app.addr;

    // The application's own route.
    let health = Exchange::open_at(addr, "GET", "/health", &[], b"").into_response();
    assert_eq!((health.status, health.body.as_slice()), (200, &b"ok"[..]));

    // genmcp at /mcp.
    let discover = call(addr, json!(1), "server/discover", json!({})).json();
    let caps = &discover["result"]["capabilities"];
    assert_eq!(caps["resources"]["subscribe"], true, "{discover}");
    assert!(caps["tools"].is_object(), "{discover}");
    let tools = call(addr, json!(2), "tools/list", json!({})).json();
    let post = &tools["result"]["tools"][0];
    assert_eq!(post["name"], "post");
    assert_eq!(post["inputSchema"]["properties"]["text"]["type"], "string");

    // A listen on the room, then a post: the stream hears about it.
    let mut stream = common::listen(
        addr,
        json!("room"),
        json!({"resourceSubscriptions": [ROOM]}),
    );
    let ack = stream.next_message().expect("ack");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([ROOM])
    );
    for (i, text) in ["hello", "second message"].iter().enumerate() {
        let sent = Instant::now();
        let posted = call(
            addr,
            json!(10 + i),
            "tools/call",
            json!({"name": "post", "arguments": {"text": text}}),
        )
        .json();
        assert_eq!(
            posted["result"]["structuredContent"]["messages"],
            i + 1,
            "{posted}"
        );
        let update = stream.next_message().expect("resources/updated");
        assert_eq!(update["method"], "notifications/resources/updated");
        assert_eq!(update["params"]["uri"], ROOM);
        assert_eq!(
            update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "room"
        );
        assert!(sent.elapsed() < Duration::from_secs(10));
    }

    // The text, one message per line; a multi-line message is a tool error.
    let read = call(addr, json!(20), "resources/read", json!({"uri": ROOM})).json();
    assert_eq!(
        read["result"]["contents"][0]["text"], "hello\nsecond message\n",
        "{read}"
    );
    let refused = call(
        addr,
        json!(21),
        "tools/call",
        json!({"name": "post", "arguments": {"text": "two\nlines"}}),
    )
    .json();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let bad = call(
        addr,
        json!(22),
        "tools/call",
        json!({"name": "post", "arguments": {"text": 5}}),
    )
    .json();
    // Arguments the schema refuses: a tool execution error too (SEP-1303).
    assert_eq!(bad["result"]["isError"], true, "{bad}");

    // The Logger middleware logs the MCP requests like any other.
    assert!(common::wait_until(Duration::from_secs(5), || {
        let log = app.log();
        log.contains("\"GET /health HTTP/1.1\" 200") && log.contains("\"POST /mcp HTTP/1.1\" 200")
    }));

    // SIGTERM: the open stream gets its completion result, then the process ends.
    #[cfg(unix)]
    {
        let mut app = app;
        let status = Command::new("kill")
            .args(["-TERM", &app.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let last = stream.next_message().expect("completion result");
        assert_eq!(last["id"], "room");
        assert_eq!(last["result"]["resultType"], "complete");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = app.child.try_wait().expect("wait") {
                assert!(status.success(), "{status}");
                break;
            }
            assert!(Instant::now() < deadline, "the example did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
