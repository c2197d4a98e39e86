//! Several genmcp nodes behind one real redis-server (started by the test on a
//! free loopback port): events cross nodes exactly once and in order per
//! publisher, a shared key lets any node open another's `requestState`, and
//! losing Redis completes the streams, fails publishes, and heals on restart.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::redis_server::{RedisServer, block_on, bus_config, redis_bus};
use common::request_state::state_call;
use common::{call, listen, wait_until};
use genmcp::http::ServerThread;
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp::pubsub::{BusError, BusHealth, StartMode};
use genmcp_cli::demo::{self, topics};
use serde_json::{Value, json};

type Events = Bus<SharedNotification>;

/// A notes-demo node on its own port, publishing on `bus`.
fn node(bus: &Events, key: Option<[u8; 32]>) -> ServerThread {
    let mut config = common::config();
    config.workers = 2;
    let bus = bus.clone();
    ServerThread::spawn(move || demo::suite_with(bus, key).0, config).expect("node starts")
}

fn wait_streams(srv: &ServerThread, n: usize) {
    assert!(
        wait_until(Duration::from_secs(10), || srv
            .server
            .metrics()
            .open_streams
            == n),
        "{n} streams open"
    );
}

fn wait_subscribed(redis: &RedisServer, channel: &str, nodes: usize) {
    assert!(
        wait_until(Duration::from_secs(10), || redis.subscribers(channel)
            == nodes),
        "{nodes} nodes subscribed to {channel}"
    );
}

/// `tools/list_changed` tagged with its publisher and sequence number.
fn numbered(node: usize, seq: usize) -> SharedNotification {
    let mut params = serde_json::Map::new();
    params.insert("node".into(), json!(node));
    params.insert("seq".into(), json!(seq));
    Notification::new("notifications/tools/list_changed", params).into()
}

fn tool(addr: SocketAddr, id: i64, name: &str) -> Value {
    let r = call(
        addr,
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": {}}),
    );
    assert_eq!(r.status, 200);
    r.json()["result"].clone()
}

const PER_NODE: usize = 20;

#[test]
fn three_nodes_deliver_every_event_once_in_publish_order() {
    let redis = RedisServer::start();
    let prefix = "t-fanout:";
    let buses: Vec<Events> = (0..3).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let nodes: Vec<ServerThread> = buses.iter().map(|b| node(b, None)).collect();
    let streams: Vec<_> = (0..100)
        .map(|i| {
            let mut s = listen(
                nodes[i % 3].addr,
                json!(i),
                json!({"toolsListChanged": true}),
            );
            let ack = s.next_message().expect("acknowledged");
            assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
            s
        })
        .collect();
    for (i, n) in nodes.iter().enumerate() {
        wait_streams(n, 34 - usize::from(i > 0));
    }
    wait_subscribed(&redis, &format!("{prefix}{}", topics::TOOLS), 3);

    // Interleaved publishes on all three nodes, then one through a real tool.
    for seq in 0..PER_NODE {
        for (n, bus) in buses.iter().enumerate() {
            assert!(bus.try_publish(topics::TOOLS, numbered(n, seq)).is_ok());
        }
    }
    let toggled = tool(nodes[2].addr, 1, "toggle_extra_tool");
    assert_eq!(toggled["isError"], json!(null), "{toggled}");

    let readers: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            std::thread::spawn(move || {
                // Shorter than the keep-alive: a missing event fails, not hangs.
                s.set_timeout(Duration::from_secs(5));
                let mut seen: Vec<Vec<usize>> = vec![vec![]; 3];
                let mut markers = 0;
                while seen.iter().map(Vec::len).sum::<usize>() < 3 * PER_NODE || markers == 0 {
                    let n = s
                        .next_message()
                        .unwrap_or_else(|| panic!("stream {i} ended early"));
                    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
                    match (n["params"]["node"].as_u64(), n["params"]["seq"].as_u64()) {
                        (Some(node), Some(seq)) => seen[node as usize].push(seq as usize),
                        _ => markers += 1,
                    }
                }
                // Nothing more: no duplicate arrives late.
                s.set_timeout(Duration::from_millis(400));
                let extra = s.try_next_event();
                assert!(extra.is_err(), "stream {i}: unexpected {extra:?}");
                (seen, markers)
            })
        })
        .collect();
    let in_order: Vec<usize> = (0..PER_NODE).collect();
    for (i, r) in readers.into_iter().enumerate() {
        let (seen, markers) = r.join().expect("reader");
        assert_eq!(markers, 1, "stream {i}: the tool's event once");
        for (node, seqs) in seen.iter().enumerate() {
            assert_eq!(seqs, &in_order, "stream {i}, events of node {node}");
        }
    }
}

fn fixture_node(key: Option<[u8; 32]>) -> ServerThread {
    ServerThread::spawn(
        move || genmcp_cli::fixtures::suite_with_secret(key),
        common::config(),
    )
    .expect("node starts")
}

#[test]
fn a_request_state_sealed_on_one_node_opens_on_another_only_with_the_shared_key() {
    let key = genmcp::suite::secret::parse_secret(&"5a".repeat(32)).expect("key");
    let other = genmcp::suite::secret::parse_secret(&"a5".repeat(32)).expect("key");
    let node1 = fixture_node(Some(key));
    let node2 = fixture_node(Some(key));
    let stranger = fixture_node(Some(other));
    let unkeyed = fixture_node(None);

    let first = state_call(node1.addr, 1, json!({}));
    let state = first["result"]["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    let answer = json!({
        "requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
    });
    let ok = state_call(node2.addr, 2, answer.clone());
    let text = ok["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("state-ok"),
        "node 2 opens node 1's state: {ok}"
    );
    for (what, srv) in [("another key", &stranger), ("a random key", &unkeyed)] {
        let refused = state_call(srv.addr, 3, answer.clone());
        assert_eq!(refused["error"]["code"], -32602, "{what}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("requestState"),
            "{what}: {refused}"
        );
    }
}

/// Reads until the listen's final frame: its completion result (5 s at most
/// per read: less than the keep-alive interval, so a stream that does not end
/// fails the test instead of hanging it).
fn expect_completion(s: &mut common::Exchange, id: usize) {
    s.set_timeout(Duration::from_secs(5));
    loop {
        let m = s
            .next_message()
            .unwrap_or_else(|| panic!("stream {id} ended without a completion result"));
        if m.get("method").is_some() {
            continue;
        }
        assert_eq!(m["id"], json!(id), "{m}");
        assert_eq!(m["result"]["resultType"], "complete", "{m}");
        break;
    }
    assert!(s.next_message().is_none(), "the body ends after the result");
}

#[test]
fn losing_redis_completes_streams_fails_publishes_and_heals_without_restart() {
    let mut redis = RedisServer::start();
    let prefix = "t-loss:";
    let channel = format!("{prefix}{}", topics::TOOLS);
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let nodes: Vec<ServerThread> = buses.iter().map(|b| node(b, None)).collect();
    let open = |ids: std::ops::Range<usize>| -> Vec<common::Exchange> {
        ids.map(|i| {
            let mut s = listen(
                nodes[i % 2].addr,
                json!(i),
                json!({"toolsListChanged": true}),
            );
            s.next_message().expect("acknowledged");
            s.set_timeout(Duration::from_secs(5));
            s
        })
        .collect()
    };
    let mut streams = open(0..4);
    wait_subscribed(&redis, &channel, 2);
    assert!(buses[0].try_publish(topics::TOOLS, numbered(0, 0)).is_ok());
    for s in &mut streams {
        assert_eq!(s.next_message().expect("event")["params"]["seq"], 0);
    }

    redis.kill();
    for (i, s) in streams.iter_mut().enumerate() {
        expect_completion(s, i);
    }
    for bus in &buses {
        assert!(wait_until(Duration::from_secs(5), || bus.health()
            == BusHealth::Disconnected));
        match bus.try_publish(topics::TOOLS, numbered(0, 1)) {
            Err((_, BusError::Unavailable { url, .. })) => assert_eq!(url, redis.url()),
            other => panic!("publish while Redis is down: {other:?}"),
        }
    }
    let refused = tool(nodes[0].addr, 1, "toggle_extra_tool");
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains("event bus unavailable"),
        "{refused}"
    );
    // The client learns that the bus is down, never where Redis is or why.
    let r = call(
        nodes[1].addr,
        json!(2),
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": "while down"}}),
    );
    // The notes live in Redis too: nothing is stored, and the client is told
    // so (never where Redis is).
    let added = r.json();
    assert_eq!(added["error"]["code"], -32603, "{added}");
    assert_eq!(
        added["error"]["message"],
        "Internal error: the notes store is unavailable; retry later"
    );
    for leak in [
        &redis.url()[..],
        "127.0.0.1",
        "os error",
        "refused",
        "Redis",
    ] {
        assert!(!refused.to_string().contains(leak), "{leak} in {refused}");
        assert!(!added.to_string().contains(leak), "{leak} in {added}");
    }

    // Listens opened while Redis is down are served locally and get the
    // other nodes' events once the bus is back.
    let mut during = open(20..22);

    redis.restart();
    for bus in &buses {
        assert!(
            wait_until(Duration::from_secs(10), || bus.is_connected()),
            "reconnected"
        );
    }
    let mut again = open(10..14);
    wait_subscribed(&redis, &channel, 2);
    assert!(buses[1].try_publish(topics::TOOLS, numbered(1, 7)).is_ok());
    for s in again.iter_mut().chain(during.iter_mut()) {
        let m = s.next_message().expect("event after the restart");
        assert_eq!(m["params"]["seq"], 7, "{m}");
        assert_eq!(m["params"]["node"], 1, "{m}");
    }
}

#[test]
fn an_unreachable_redis_fails_the_start_or_starts_degraded_and_recovers() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.kill();
    let err = block_on(Bus::<SharedNotification>::redis(bus_config(
        &url, "t-start:",
    )))
    .expect_err("no Redis, no bus");
    assert!(matches!(err, BusError::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains(&url), "{err}");

    let degraded = block_on(Bus::<SharedNotification>::redis(
        bus_config(&url, "t-start:").start(StartMode::Degraded),
    ))
    .expect("a degraded bus starts");
    assert_eq!(degraded.health(), BusHealth::Disconnected);
    redis.restart();
    assert!(
        wait_until(Duration::from_secs(10), || degraded.is_connected()),
        "the degraded bus connects once Redis is up"
    );
    assert_eq!(
        redis.clients(),
        2,
        "one subscription and one publishing connection"
    );
    drop(degraded);
    assert!(
        wait_until(Duration::from_secs(10), || redis.clients() == 0),
        "a dropped bus closes its connections (its thread ends)"
    );
}

#[test]
fn genmcp_serve_exits_non_zero_when_its_bus_is_unreachable() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.kill();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["serve", "--port", "0", "--bus", &url])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("genmcp runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("event bus unavailable") && stderr.contains(&url),
        "{stderr}"
    );
    // The same from GENMCP_BUS (out of `ps`), and the password is never printed.
    let secret_url = url.replace("redis://", "redis://user:s3cret@");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["serve", "--port", "0"])
        .env("GENMCP_BUS", &secret_url)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("genmcp runs");
    assert!(!out.status.success(), "GENMCP_BUS is used");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("event bus unavailable"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn a_bad_key_file_or_variable_stops_genmcp_serve_with_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("genmcp-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("bad.key");
    std::fs::write(&bad, "not-a-key-0123456789\n").expect("write");
    let run = |args: &[&str], env: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_genmcp"));
        cmd.args(["serve", "--port", "0"]).args(args);
        cmd.env_remove("GENMCP_KEY");
        if let Some(v) = env {
            cmd.env("GENMCP_KEY", v);
        }
        cmd.stdin(std::process::Stdio::null())
            .output()
            .expect("genmcp runs")
    };
    let path = bad.to_string_lossy().into_owned();
    for (what, out) in [
        ("--key-file", run(&["--key-file", &path], None)),
        ("GENMCP_KEY", run(&[], Some("abc"))),
        (
            "missing file",
            run(&["--key-file", "/nonexistent/genmcp.key"], None),
        ),
    ] {
        assert!(!out.status.success(), "{what}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("64 hexadecimal digits") || stderr.contains("cannot read"),
            "{what}: {stderr}"
        );
        assert!(
            !stderr.contains("not-a-key"),
            "{what}: the key is not echoed"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET path` on `addr`: the status and body, or `None` while nothing listens.
fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.get(9..12)?.parse().ok()?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    Some((status, body))
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_degraded_node_is_not_ready_until_its_bus_connects() {
    let mut redis = RedisServer::start();
    redis.kill();
    let (child, _, admin) = common::serve_child::spawn_serve_with_admin(
        &["--port", "0", "--bus", &redis.url(), "--bus-degraded"],
        &[],
    );
    let _node = Child(child);
    let mut last = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            last = http_get(admin, "/readyz");
            last.is_some()
        }),
        "the admin listener answers"
    );
    let (status, body) = last.clone().unwrap_or_default();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("bus"), "{body}");
    redis.restart();
    assert!(
        wait_until(Duration::from_secs(10), || {
            last = http_get(admin, "/readyz");
            last.as_ref().is_some_and(|(s, _)| *s == 200)
        }),
        "ready once Redis is up: {last:?}"
    );
}

/// A `list_changed` of about 8 KiB from node 0, numbered (`done` ends a reader).
fn padded(seq: usize, done: bool) -> SharedNotification {
    let mut params = serde_json::Map::new();
    params.insert("node".into(), json!(0));
    params.insert("seq".into(), json!(seq));
    params.insert("done".into(), json!(done));
    params.insert("pad".into(), json!("x".repeat(8192)));
    Notification::new("notifications/tools/list_changed", params).into()
}

#[test]
fn a_stream_that_never_reads_is_ended_and_does_not_hold_up_the_others() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let redis = RedisServer::start();
    let prefix = "t-stuck:";
    let topic = topics::TOOLS;
    let publisher = redis_bus(&redis.url(), prefix);
    let mut config = bus_config(&redis.url(), prefix);
    // Generous, so the reading stream is never mistaken for a stuck one on a
    // busy machine; well under the runtime's own 10 s write stall, so the
    // bus's bound is what ends the stuck stream within a round.
    config.stall = Duration::from_secs(1);
    let receiver: Events = block_on(Bus::redis(config)).expect("the bus connects");
    let node_b = node(&receiver, None);
    let open = |id: &str| {
        let mut s = listen(node_b.addr, json!(id), json!({"toolsListChanged": true}));
        s.next_message().expect("acknowledged");
        s
    };
    // Held open, never read: the socket, then its mailbox, fill up.
    let _stuck = open("stuck");
    let mut active = open("active");
    wait_streams(&node_b, 2);
    wait_subscribed(&redis, &format!("{prefix}{topic}"), 1);

    let received = Arc::new(AtomicUsize::new(0));
    let counter = received.clone();
    let reader = std::thread::spawn(move || {
        active.set_timeout(Duration::from_secs(10));
        let mut seqs = vec![];
        loop {
            let m = active
                .next_message()
                .expect("the reading stream stays open");
            if m["params"]["done"] == true {
                return seqs;
            }
            seqs.push(m["params"]["seq"].as_u64().unwrap_or(u64::MAX) as usize);
            counter.fetch_add(1, Ordering::Release);
        }
    });

    // Rounds of 100 events from the other node; each round must reach the
    // reading stream within 5 s (one bus stall of 1 s, with room to spare;
    // less than the 10 s it takes the runtime to end the stuck stream on its
    // own) before the next. Stop once the stuck stream is gone.
    const ROUNDS: usize = 200;
    let mut sent = 0;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    for _ in 0..ROUNDS {
        for _ in 0..100 {
            rt.block_on(publisher.publish_remote_wait(topic, &[padded(sent, false)]))
                .expect("published");
            sent += 1;
        }
        assert!(
            wait_until(Duration::from_secs(5), || received.load(Ordering::Acquire)
                == sent),
            "the reading stream got {} of {sent} events",
            received.load(Ordering::Acquire)
        );
        if receiver.subscribers(topic).len() == 1 {
            break;
        }
    }
    assert_eq!(
        receiver.subscribers(topic).len(),
        1,
        "the stuck stream was dropped after {sent} events"
    );
    rt.block_on(publisher.publish_remote_wait(topic, &[padded(sent, true)]))
        .expect("published");
    let seqs = reader.join().expect("reader");
    assert_eq!(seqs, (0..sent).collect::<Vec<_>>(), "every event, in order");
    assert!(
        wait_until(Duration::from_secs(10), || node_b
            .server
            .metrics()
            .closed(CloseReason::Overflow)
            == 1),
        "the stuck stream was ended as Overflow: {:?}",
        node_b.server.metrics()
    );
}

#[test]
fn a_publish_over_max_payload_fails_clearly_and_a_smaller_one_is_sent() {
    let redis = RedisServer::start();
    let mut config = bus_config(&redis.url(), "t-size:");
    config.max_payload = 4096;
    let bus: Events = block_on(Bus::redis(config)).expect("the bus connects");
    match bus.try_publish_batch(topics::TOOLS, &[padded(0, false)]) {
        Err((0, BusError::TooLarge { size, max })) => {
            assert_eq!(max, 4096);
            assert!(size > 8192, "{size}");
        }
        other => panic!("an 8 KiB publish with a 4 KiB bound: {other:?}"),
    }
    assert!(bus.try_publish(topics::TOOLS, numbered(0, 1)).is_ok());
}

#[test]
fn every_node_reads_and_changes_the_same_notes() {
    let redis = RedisServer::start();
    let prefix = "t-notes:";
    let buses: Vec<Events> = (0..3).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let nodes: Vec<ServerThread> = buses.iter().map(|b| node(b, None)).collect();
    let tool_call = |n: usize, name: &str, args: Value| -> Value {
        let r = call(
            nodes[n].addr,
            json!(1),
            "tools/call",
            json!({"name": name, "arguments": args}),
        );
        r.json()["result"].clone()
    };
    let read = |n: usize, uri: &str| -> Value {
        call(
            nodes[n].addr,
            json!(2),
            "resources/read",
            json!({"uri": uri}),
        )
        .json()
    };
    // Added on node 0 and on node 1 at once: distinct URIs, both everywhere.
    let a = tool_call(0, "add_note", json!({"text": "from zero"}));
    let b = tool_call(1, "add_note", json!({"text": "from one"}));
    let (a, b) = (
        a["content"][0]["text"].as_str().unwrap().to_owned(),
        b["content"][0]["text"].as_str().unwrap().to_owned(),
    );
    assert_ne!(a, b);
    for (n, srv) in nodes.iter().enumerate() {
        assert_eq!(read(n, &a)["result"]["contents"][0]["text"], "from zero");
        assert_eq!(read(n, &b)["result"]["contents"][0]["text"], "from one");
        let listed = call(srv.addr, json!(3), "resources/list", json!({})).json();
        let uris: Vec<&str> = listed["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["uri"].as_str())
            .collect();
        assert_eq!(uris, vec![a.as_str(), b.as_str()], "node {n}");
    }
    // Updated on node 2, deleted on node 1: every node sees it (a missing
    // resource is -32602 at 2026-07-28).
    let updated = tool_call(2, "add_note", json!({"uri": a, "text": "changed"}));
    assert_eq!(updated["isError"], Value::Null, "{updated}");
    assert_eq!(read(0, &a)["result"]["contents"][0]["text"], "changed");
    tool_call(1, "delete_note", json!({"uri": b}));
    assert_eq!(read(0, &b)["error"]["code"], -32602);
    assert_eq!(read(2, &b)["error"]["code"], -32602);
}
