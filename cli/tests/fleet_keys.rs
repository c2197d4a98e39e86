//! With `--bus` and `--key-file`, a node whose sealing key set disagrees with
//! most of the other nodes' says so in `/readyz` ("keys") from its start, and
//! is ready again once `SIGHUP` gave it a set that agrees; the nodes it
//! differs from stay ready after they have checked it.

#![cfg(unix)]

#[path = "../../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::redis_server::RedisServer;
use common::wait_until;

struct Node(std::process::Child, SocketAddr);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(redis: &RedisServer, key_file: &Path) -> Node {
    let (child, _, admin) = common::serve_child::spawn_serve_with_admin(
        &[
            "--port",
            "0",
            "--bus",
            &redis.url(),
            "--key-file",
            key_file.to_str().unwrap(),
            "--key-check-every",
            "1",
        ],
        &[],
    );
    let node = Node(child, admin);
    assert!(
        wait_until(Duration::from_secs(20), || readyz(&node).is_some()),
        "the admin listener answers"
    );
    node
}

/// Each node's entry in the fleet's key hash: (node id, its `exp`).
fn entries(redis: &RedisServer) -> Vec<(String, u64)> {
    let Some(keys) = redis.command(&["KEYS", "*sealing-keys"]) else {
        return Vec::new();
    };
    let Some(hash) = keys.lines().find(|l| l.ends_with("sealing-keys")) else {
        return Vec::new();
    };
    let reply = redis.command(&["HGETALL", hash]).unwrap_or_default();
    let values: Vec<&str> = reply
        .lines()
        .filter(|l| !l.starts_with('*') && !l.starts_with('$'))
        .collect();
    values
        .chunks(2)
        .filter_map(|pair| {
            let entry: serde_json::Value = serde_json::from_str(pair.get(1)?).ok()?;
            Some((pair[0].to_owned(), entry["exp"].as_u64()?))
        })
        .collect()
}

fn readyz(node: &Node) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let addr = node.1;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.get(9..12)?.parse().ok()?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    Some((status, body))
}

#[test]
fn a_node_whose_keys_disagree_with_the_fleet_is_not_ready_until_they_agree() {
    let redis = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("genmcp-fleet-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (k1, k2) = ("1a".repeat(32), "2b".repeat(32));
    let shared = dir.join("shared");
    std::fs::write(&shared, format!("{k1}\n")).unwrap();
    let other = dir.join("other");
    std::fs::write(&other, format!("{k2}\n")).unwrap();

    let a = start(&redis, &shared);
    let b = start(&redis, &shared);
    let c = start(&redis, &other);
    // Every node checks again after C's entry is in Redis (its entry
    // refreshed after this snapshot): A and B have then seen C's keys.
    let seen = entries(&redis);
    assert_eq!(seen.len(), 3, "{seen:?}");
    let mut last = Vec::new();
    assert!(
        wait_until(Duration::from_secs(30), || {
            last = entries(&redis);
            last.len() == 3 && last.iter().all(|e| !seen.contains(e))
        }),
        "every node checked again: {seen:?} then {last:?}"
    );
    for n in [&a, &b] {
        assert_eq!(readyz(n).map(|r| r.0), Some(200), "{:?}", readyz(n));
    }
    let (status, body) = readyz(&c).unwrap_or_default();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("keys"), "{body}");

    // C takes the fleet's current key, keeping its own to open its tokens.
    std::fs::write(&other, format!("{k1}\n{k2}\n")).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &c.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let mut last = None;
    assert!(
        wait_until(Duration::from_secs(25), || {
            last = readyz(&c);
            last.as_ref().is_some_and(|(s, _)| *s == 200)
        }),
        "ready once its keys agree: {last:?}"
    );
    for n in [&a, &b] {
        assert_eq!(readyz(n).map(|r| r.0), Some(200), "{:?}", readyz(n));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
