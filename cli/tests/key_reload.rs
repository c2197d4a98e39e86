//! `genmcp serve --key-file` with several keys, re-read on `SIGHUP`: a round
//! begun under the old key completes after the new key became current, the
//! new current key seals from then on, a dropped key's rounds are refused, and
//! an unusable file leaves the keys in use unchanged.

#![cfg(unix)]

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Child;
use std::time::Duration;

use common::{headers, post, request};
use genmcp::suite::key_id;
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
    let (mut child, addr) = common::serve_child::spawn_serve(
        &[
            "--conformance",
            "--port",
            "0",
            "--key-file",
            file.to_str().unwrap(),
        ],
        &[],
    );

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
    std::thread::sleep(Duration::from_millis(300));
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
