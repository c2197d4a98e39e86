//! Nodes sharing a sealing key and a Redis bus share the record of spent
//! `requestState`s (`suite::shared_spent::RedisSpentRecord`): a state is
//! honoured at most once across all of them, and while Redis cannot be
//! reached a retry is refused (fail closed) instead of being honoured
//! unchecked. Against a real redis-server on a free loopback port.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::redis_server::{RedisServer, block_on, redis_bus};
use common::request_state::state_call;
use common::wait_until;
use genmcp::http::ServerThread;
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp::pubsub::{BusHealth, RedisBusConfig};
use genmcp::suite::shared_spent::RedisSpentRecord;
use serde_json::{Value, json};

type Events = Bus<SharedNotification>;

fn key() -> [u8; 32] {
    genmcp::suite::secret::parse_secret(&"3c".repeat(32)).expect("key")
}

/// A conformance-fixture node sealing with the shared key and recording spent
/// states through `bus` (what `genmcp serve --conformance --bus … --key-file …` runs).
fn node(bus: &Events) -> ServerThread {
    let spent = RedisSpentRecord::for_bus(bus);
    assert!(spent.is_some(), "a Redis bus has a shared record");
    ServerThread::spawn(
        move || genmcp_cli::fixtures::suite_for_node(Some(key()), spent),
        common::config(),
    )
    .expect("node starts")
}

/// A fresh `requestState` from `addr`, and the retry that answers it.
fn issue(addr: SocketAddr, id: i64) -> (String, Value) {
    let first = state_call(addr, id, json!({}));
    let state = first["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("a requestState: {first}"))
        .to_owned();
    let retry = json!({
        "requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
    });
    (state, retry)
}

fn honoured(r: &Value) -> bool {
    r["result"]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("state-ok"))
}

#[test]
fn a_request_state_spent_on_one_node_is_refused_on_the_others() {
    let redis = RedisServer::start();
    let prefix = "t-spent:";
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let nodes: Vec<ServerThread> = buses.iter().map(node).collect();

    // What a tampered state gets: a replay must be indistinguishable from it.
    let (state, _) = issue(nodes[0].addr, 1);
    let tampered = state_call(
        nodes[1].addr,
        2,
        json!({"requestState": format!("{state}x"),
               "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}}),
    );
    assert_eq!(tampered["error"]["code"], -32602, "{tampered}");

    // Issued on node 1, spent once on node 1, then refused on node 2 and on node 1.
    let (_, retry) = issue(nodes[0].addr, 3);
    let ok = state_call(nodes[0].addr, 4, retry.clone());
    assert!(honoured(&ok), "first use on node 1: {ok}");
    for (i, n) in [1, 0].into_iter().enumerate() {
        let replay = state_call(nodes[n].addr, 5 + i as i64, retry.clone());
        assert_eq!(replay["error"], tampered["error"], "replay on node {n}");
    }

    // Issued on node 1, spent first on node 2: node 1 refuses it afterwards.
    let (_, retry) = issue(nodes[0].addr, 10);
    let ok = state_call(nodes[1].addr, 11, retry.clone());
    assert!(honoured(&ok), "first use on node 2: {ok}");
    let replay = state_call(nodes[0].addr, 12, retry);
    assert_eq!(replay["error"], tampered["error"], "replay on node 1");

    // Two spent states, two keys, each forgotten by Redis at the state's
    // expiry (10 min) plus the clock margin (60 s), never kept longer.
    let keys = redis
        .command(&["KEYS", &format!("{prefix}spent:*")])
        .expect("KEYS");
    let names: Vec<&str> = keys.lines().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(names.len(), 2, "{keys}");
    for name in names {
        assert_eq!(name.len(), prefix.len() + "spent:".len() + 16, "{name}");
        let pttl = redis.command(&["PTTL", name]).expect("PTTL");
        let ms: i64 = pttl
            .trim()
            .trim_start_matches(':')
            .parse()
            .unwrap_or_else(|_| panic!("PTTL {name}: {pttl:?}"));
        assert!(ms > 9 * 60_000 && ms <= 11 * 60_000, "PTTL {name}: {ms}");
    }
}

#[test]
fn with_redis_down_a_retry_is_refused_and_honoured_once_redis_is_back() {
    let mut redis = RedisServer::start();
    let bus = redis_bus(&redis.url(), "t-spent-down:");
    let srv = node(&bus);
    let (_, retry) = issue(srv.addr, 1);

    redis.kill();
    assert!(
        wait_until(Duration::from_secs(5), || bus.health()
            == BusHealth::Disconnected),
        "the bus sees Redis go"
    );
    let refused = state_call(srv.addr, 2, retry.clone());
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot check requestState against replay"),
        "{refused}"
    );
    assert!(
        !message.contains("integrity"),
        "not the tampered error: {refused}"
    );

    // Refusing it did not spend it: once Redis is back it is honoured, once.
    redis.restart();
    assert!(
        wait_until(Duration::from_secs(10), || bus.is_connected()),
        "the bus reconnects"
    );
    let ok = state_call(srv.addr, 3, retry.clone());
    assert!(honoured(&ok), "{ok}");
    let replay = state_call(srv.addr, 4, retry);
    assert_eq!(replay["error"]["code"], -32602, "{replay}");
}

/// The same state presented 16 times at once, half on each node: exactly one
/// is honoured (`SET NX` is atomic in Redis), the rest get the replay error.
#[test]
fn concurrent_retries_on_two_nodes_honour_one() {
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..2)
        .map(|_| redis_bus(&redis.url(), "t-spent-race:"))
        .collect();
    let nodes: Vec<ServerThread> = buses.iter().map(node).collect();
    let (_, retry) = issue(nodes[0].addr, 1);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(16));
    let answers: Vec<Value> = (0..16)
        .map(|i| {
            let (addr, retry, barrier) = (nodes[i % 2].addr, retry.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                state_call(addr, 100 + i as i64, retry)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("caller"))
        .collect();
    let ok = answers.iter().filter(|a| honoured(a)).count();
    let replays = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32602)
        .count();
    assert_eq!((ok, replays), (1, 15), "{answers:?}");
}

/// `RedisOnce::claim` under a Redis that holds writes (`CLIENT PAUSE … WRITE`):
/// a claim is answered within `command_timeout` (as unavailable, not after
/// the pause), one more than `max_claims` fails at once as busy, and the
/// timed-out `SET` lands when Redis resumes (so that state is then refused as
/// spent, as `docs/auth.md` says).
#[test]
fn a_stalled_redis_times_claims_out_and_bounds_the_waiting_ones() {
    use genmcp::pubsub::BusError;
    let redis = RedisServer::start();
    let mut c = RedisBusConfig::new(redis.url()).prefix("t-spent-stall:");
    c.command_timeout = Duration::from_secs(1);
    c.max_claims = 1;
    let bus: Events = block_on(Bus::redis(c)).expect("the bus connects");
    let once = bus.once().expect("a Redis bus has set-once keys");
    let until = ten_minutes_from_now();
    assert_eq!(block_on(once.claim("first", until)), Ok(true));
    assert_eq!(block_on(once.claim("first", until)), Ok(false));

    let paused = redis.command(&["CLIENT", "PAUSE", "6000", "WRITE"]);
    assert_eq!(paused.as_deref(), Some("+OK\r\n"));
    let started = std::time::Instant::now();
    let (stalled, busy) = block_on(async {
        let waiting = {
            let once = once.clone();
            tokio::spawn(async move { once.claim("stalled", until).await })
        };
        // Let the first claim take the only slot (it waits up to 1 s).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let busy = once.claim("other", until).await;
        (waiting.await.expect("claim task"), busy)
    });
    assert_eq!(busy, Err(BusError::Busy { capacity: 1 }));
    match stalled {
        Err(BusError::Unavailable { reason, .. }) => {
            assert!(reason.contains("unanswered"), "{reason}")
        }
        other => panic!("a stalled SET: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "answered by the timeout, not by the end of the pause: {:?}",
        started.elapsed()
    );
    // Once Redis resumes, the timed-out SET has been applied.
    assert!(
        wait_until(Duration::from_secs(10), || block_on(
            once.claim("probe", until)
        )
        .is_ok()),
        "Redis takes writes again"
    );
    assert_eq!(block_on(once.claim("stalled", until)), Ok(false));
}

/// `command_timeout` is the bound on a command, not the redis crate's own
/// default (500 ms): a claim Redis answers after about a second, within a
/// 3 s `command_timeout`, succeeds.
#[test]
fn a_claim_answered_within_the_command_timeout_succeeds_after_half_a_second() {
    let redis = RedisServer::start();
    let mut c = RedisBusConfig::new(redis.url()).prefix("t-spent-slow:");
    c.command_timeout = Duration::from_secs(3);
    let bus: Events = block_on(Bus::redis(c)).expect("the bus connects");
    let once = bus.once().expect("a Redis bus has set-once keys");
    let until = ten_minutes_from_now();
    let paused = redis.command(&["CLIENT", "PAUSE", "1000", "WRITE"]);
    assert_eq!(paused.as_deref(), Some("+OK\r\n"));
    let started = std::time::Instant::now();
    let claimed = block_on(once.claim("slow", until));
    let took = started.elapsed();
    assert_eq!(claimed, Ok(true), "answered after {took:?}");
    assert!(
        took >= Duration::from_millis(500),
        "Redis held the claim past the crate's default bound ({took:?})"
    );
}

/// The real binary: two `genmcp serve --conformance --bus … --key-file …`
/// processes; a state spent on the first is refused on the second.
#[test]
fn genmcp_serve_with_a_bus_shares_the_spent_record() {
    struct Node(std::process::Child);
    impl Drop for Node {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let redis = RedisServer::start();
    let key_file = std::env::temp_dir().join(format!("genmcp-spent-key-{}", std::process::id()));
    std::fs::write(&key_file, "3c".repeat(32)).expect("key file");
    let spawn = || {
        // The port of the server's own choosing, read from its listening
        // line (a port picked here could be taken by another test first).
        let (child, addr) = common::serve_child::spawn_serve(
            &[
                "--conformance",
                "--workers",
                "1",
                "--port",
                "0",
                "--bus",
                &redis.url(),
                "--key-file",
                key_file.to_str().expect("a UTF-8 path"),
            ],
            &[],
        );
        (Node(child), addr)
    };
    let (_n1, a1) = spawn();
    let (_n2, a2) = spawn();
    let (_, retry) = issue(a1, 1);
    let ok = state_call(a1, 2, retry.clone());
    assert!(honoured(&ok), "{ok}");
    let replay = state_call(a2, 3, retry);
    assert_eq!(replay["error"]["code"], -32602, "{replay}");
    let _ = std::fs::remove_file(&key_file);
}

/// Unix milliseconds ten minutes from now: how long a claim is kept.
fn ten_minutes_from_now() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms")
        + 600_000
}
