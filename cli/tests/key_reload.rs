//! `genmcp serve --key-file` with several keys, re-read on `SIGHUP`: a round
//! begun under the old key completes after the new key became current, the
//! new current key seals from then on, a dropped key's rounds are refused, and
//! an unusable file leaves the keys in use unchanged (and says so in the log);
//! without a key file `SIGHUP` is ignored. With `--bus`, the reload
//! applies to the bus too: the node tags its messages under the new current
//! key and accepts messages tagged under any key of the new set.

#![cfg(unix)]

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Child;
use std::time::Duration;

use common::redis_server::{RedisServer, block_on, bus_config};
use common::{headers, listen, post, request, wait_until};
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp::pubsub::{DeliverFuture, Inbox, InboxError, InboxSink};
use genmcp::suite::KeySet;
use genmcp::suite::key_id;
use genmcp_cli::demo::topics;
use serde_json::{Value, json};

const STATE_TOOL: &str = "test_input_required_result_request_state";

fn hex(key: &[u8; 32]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn meta() -> Value {
    let mut meta = common::meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    meta
}

fn begin(addr: std::net::SocketAddr) -> String {
    let r = post(
        addr,
        &headers("tools/call", Some(STATE_TOOL)),
        &request(
            json!(1),
            "tools/call",
            json!({"name": STATE_TOOL, "arguments": {}, "_meta": meta()}),
        ),
    )
    .json();
    r["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("a requestState: {r}"))
        .to_owned()
}

fn finish(addr: std::net::SocketAddr, state: &str) -> Value {
    post(
        addr,
        &headers("tools/call", Some(STATE_TOOL)),
        &request(
            json!(2),
            "tools/call",
            json!({"name": STATE_TOOL, "arguments": {}, "requestState": state,
                "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
                "_meta": meta()}),
        ),
    )
    .json()
}

fn hangup(child: &Child) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// `genmcp serve ARGS` with JSON logs on a pipe: its address, and each log
/// line's message as it comes.
fn spawn_logged(
    args: &[&str],
) -> (
    Child,
    std::net::SocketAddr,
    std::sync::mpsc::Receiver<String>,
) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(common::genmcp_bin())
        .args(["--log-format", "json", "serve"])
        .args(args)
        .env("RUST_LOG", "genmcp=info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("genmcp starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            let message = v["fields"]["message"].as_str().unwrap_or_default();
            let text = match v["fields"]["addr"].as_str() {
                Some(addr) => format!("{message} {addr}"),
                None => message.to_owned(),
            };
            if tx.send(text).is_err() {
                break;
            }
        }
    });
    let addr = wait_for(&rx, "genmcp listening")
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .expect("genmcp listens");
    (child, addr, rx)
}

/// The next log message starting with `start`, waiting at most 20 s.
fn wait_for(rx: &std::sync::mpsc::Receiver<String>, start: &str) -> Option<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        let line = rx.recv_timeout(left).ok()?;
        if line.starts_with(start) {
            return Some(line);
        }
    }
}

/// Waits (bounded) until a new round names `kid`.
fn sealed_with(addr: std::net::SocketAddr, kid: &str) -> bool {
    common::wait_until(Duration::from_secs(10), || begin(addr).starts_with(kid))
}

#[test]
fn sighup_rereads_the_key_file() {
    let (old, new) = ([0x31u8; 32], [0x32u8; 32]);
    let dir = std::env::temp_dir().join(format!("genmcp-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("keys");
    std::fs::write(&file, format!("{}\n", hex(&old))).unwrap();
    let (mut child, addr, logs) = spawn_logged(&[
        "--conformance",
        "--port",
        "0",
        "--key-file",
        file.to_str().unwrap(),
    ]);

    let under_old = begin(addr);
    let dropped_later = begin(addr);
    assert!(under_old.starts_with(&key_id(&old)), "{under_old}");

    // The new key current, the old one kept.
    std::fs::write(&file, format!("# rotated\n{}\n{}\n", hex(&new), hex(&old))).unwrap();
    hangup(&child);
    assert!(
        sealed_with(addr, &key_id(&new)),
        "the new key seals after SIGHUP"
    );
    let done = finish(addr, &under_old);
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("state-ok"),
        "a round begun under the old key completes: {done}"
    );

    // An unusable file changes nothing.
    std::fs::write(&file, "not a key\n").unwrap();
    hangup(&child);
    assert!(
        wait_for(&logs, "SIGHUP: the key file is not usable").is_some(),
        "the SIGHUP was handled and the unusable file reported"
    );
    assert!(begin(addr).starts_with(&key_id(&new)));

    // The old key dropped (and a third one current, to see the reload): its
    // rounds are refused.
    let third = [0x33; 32];
    std::fs::write(&file, format!("{}\n{}\n", hex(&third), hex(&new))).unwrap();
    hangup(&child);
    assert!(sealed_with(addr, &key_id(&third)));
    let refused = finish(addr, &dropped_later);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Counts what a bus delivers.
#[derive(Default)]
struct Count(std::sync::atomic::AtomicUsize);

impl Count {
    fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl InboxSink<SharedNotification> for Count {
    fn try_deliver(&self, _msg: SharedNotification) -> Result<(), InboxError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    fn deliver(&self, msg: SharedNotification) -> DeliverFuture {
        let r = self.try_deliver(msg);
        Box::pin(async move { r })
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn complete(&self) {}
}

/// A bus on `redis` (the prefix `genmcp serve` uses) authenticated with `set`.
fn keyed_bus(redis: &RedisServer, set: &KeySet) -> Bus<SharedNotification> {
    block_on(Bus::redis(
        bus_config(&redis.url(), "genmcp:").keys(set.bus_keys()),
    ))
    .expect("the bus connects")
}

/// Adds notes on `addr` until `heard` counts one more (bounded).
fn heard_after_add_note(addr: std::net::SocketAddr, heard: &Count) -> bool {
    let before = heard.get();
    wait_until(Duration::from_secs(10), || {
        let _ = common::call(
            addr,
            json!(9),
            "tools/call",
            json!({"name": "add_note", "arguments": {"text": "n"}}),
        );
        std::thread::sleep(Duration::from_millis(50));
        heard.get() > before
    })
}

#[test]
fn sighup_rotates_the_bus_key_too() {
    let (old, new) = ([0x41u8; 32], [0x42u8; 32]);
    let redis = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("genmcp-bus-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("keys");
    std::fs::write(&file, format!("{}\n", hex(&old))).unwrap();
    let (mut child, addr) = common::serve_child::spawn_serve(
        &[
            "--port",
            "0",
            "--bus",
            &redis.url(),
            "--key-file",
            file.to_str().unwrap(),
        ],
        &[],
    );
    // Listeners that accept only one key each.
    let under_old = std::sync::Arc::new(Count::default());
    let under_new = std::sync::Arc::new(Count::default());
    let old_bus = keyed_bus(&redis, &KeySet::new(old));
    let new_bus = keyed_bus(&redis, &KeySet::new(new));
    let _o = old_bus.subscribe(topics::NOTES, Inbox::from_sink(under_old.clone()));
    let _n = new_bus.subscribe(topics::NOTES, Inbox::from_sink(under_new.clone()));
    block_on(old_bus.subscribed());
    block_on(new_bus.subscribed());
    assert!(
        heard_after_add_note(addr, &under_old),
        "the node tags under the key it started with"
    );

    // The new key current, the old one kept: the node's messages are tagged
    // under the new key from the reload on.
    std::fs::write(&file, format!("{}\n{}\n", hex(&new), hex(&old))).unwrap();
    hangup(&child);
    assert!(
        heard_after_add_note(addr, &under_new),
        "after SIGHUP the node tags its bus messages under the new current key"
    );

    // And it accepts messages tagged under the new key (a node that switched
    // before it would send those).
    let mut stream = listen(addr, json!(1), json!({"toolsListChanged": true}));
    stream.next_message().expect("acknowledged");
    stream.set_timeout(Duration::from_secs(10));
    assert!(wait_until(Duration::from_secs(10), || redis
        .subscribers("genmcp:tools")
        >= 1));
    assert!(
        new_bus
            .try_publish(topics::TOOLS, Notification::tools_list_changed().into())
            .is_ok()
    );
    let got = stream
        .next_message()
        .expect("a message tagged under the new key is delivered after SIGHUP");
    assert_eq!(got["method"], "notifications/tools/list_changed", "{got}");

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_key_file_sighup_is_ignored() {
    let (mut child, addr, logs) = spawn_logged(&["--port", "0"]);
    hangup(&child);
    assert!(
        wait_for(&logs, "SIGHUP: no key file to re-read").is_some(),
        "the SIGHUP was logged, not fatal: {:?}",
        child.try_wait()
    );
    let discover = common::call(addr, json!(1), "server/discover", json!({})).json();
    assert!(discover["result"].is_object(), "still serving: {discover}");
    assert!(matches!(child.try_wait(), Ok(None)), "still running");
    let _ = child.kill();
    let _ = child.wait();
}
