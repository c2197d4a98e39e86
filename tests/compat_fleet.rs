//! 2025-era sessions on any node: three real `genmcp` nodes sharing one real
//! `redis-server` (and one sealing key) behind a round-robin proxy, so every
//! request of one session lands on the next node. The GET stream is held by
//! one node; `resources/subscribe` / `unsubscribe`, `logging/setLevel` and
//! DELETE land on the others and still apply; Redis down fails session
//! requests clearly; the per-principal bounds hold across the nodes.

mod common;

use common::fleet_notes::{add_note, message};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::Response;
use common::legacy::{self, LEGACY, reader};
use common::redis_server::{RedisCluster, RedisServer, redis_bus};
use genmcp::http::{CompatConfig, ServerThread};
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp_cli::demo;
use serde_json::{Value, json};

type Events = Bus<SharedNotification>;

fn key() -> [u8; 32] {
    genmcp::suite::secret::parse_secret(&"5a".repeat(32)).expect("key")
}

fn config(compat: Option<CompatConfig>) -> genmcp::http::HttpConfig {
    let mut config = common::config();
    config.workers = 2;
    // A gone client shows at the next keep-alive.
    config.keep_alive = Duration::from_millis(100);
    if let Some(c) = compat {
        config.compat = Some(c);
    }
    config
}

/// A notes-demo node (notes in Redis, tasks and sessions shared) on `bus`.
fn notes_node(bus: &Events, compat: Option<CompatConfig>) -> ServerThread {
    let bus = bus.clone();
    ServerThread::spawn(move || demo::suite_with(bus, Some(key())).0, config(compat))
        .expect("node starts")
}

/// A conformance-fixtures node (with `test_logging_tool`) sharing `bus`.
fn fixture_node(bus: &Events, compat: Option<CompatConfig>) -> ServerThread {
    let bus = bus.clone();
    ServerThread::spawn(
        move || {
            genmcp_cli::fixtures::suite_for_node_with_tasks(
                Some(key()),
                None,
                TaskConfig::default(),
                Some(&bus),
            )
        },
        config(compat),
    )
    .expect("node starts")
}

/// A round-robin HTTP proxy: each request (the test client sends one per
/// connection, `Connection: close`) goes to the next node, its response
/// (an SSE stream included) comes back as it is written.
struct Proxy {
    addr: SocketAddr,
    next: Arc<AtomicUsize>,
    /// The node each request went to, in order.
    log: Arc<Mutex<Vec<usize>>>,
    nodes: usize,
}

/// Copies `from` to `to`; once either side is done, both are closed (a
/// client that leaves closes its upstream connection, as a proxy does).
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

impl Proxy {
    fn start(nodes: Vec<SocketAddr>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let next = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (n, l) = (next.clone(), log.clone());
        let count = nodes.len();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let i = n.fetch_add(1, Ordering::SeqCst) % nodes.len();
                l.lock().unwrap().push(i);
                let Ok(upstream) = TcpStream::connect(nodes[i]) else {
                    continue;
                };
                let (c2, u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                std::thread::spawn(move || pipe(client, upstream));
                std::thread::spawn(move || pipe(u2, c2));
            }
        });
        Proxy {
            addr,
            next,
            log,
            nodes: count,
        }
    }

    /// The node the next request goes to.
    fn upcoming(&self) -> usize {
        self.next.load(Ordering::SeqCst) % self.nodes
    }

    /// The node the last request went to.
    fn last(&self) -> usize {
        *self
            .log
            .lock()
            .unwrap()
            .last()
            .expect("a request went through")
    }

    /// Sends `ping`s of `session` until the next request goes to `node`.
    fn turn_to(&self, session: &str, node: usize) {
        while self.upcoming() != node {
            let r = legacy::request(self.addr, session, json!("turn"), "ping", json!({}));
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        }
    }
}

/// Waits (at most `within`) for `notifications/resources/updated` of `uri` on
/// the GET stream; skips other notifications.
fn updated_within(get: &mpsc::Receiver<Option<Value>>, uri: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match get.recv_timeout(left) {
            Ok(Some(m)) => {
                if m["method"] == "notifications/resources/updated" && m["params"]["uri"] == uri {
                    return true;
                }
            }
            Ok(None) => panic!("the GET stream ended"),
            Err(_) => return false,
        }
    }
}

fn three_fixture_nodes(
    redis: &RedisServer,
    prefix: &str,
    compat: Option<CompatConfig>,
) -> (Vec<Events>, Vec<ServerThread>) {
    fixture_nodes(redis, prefix, 3, compat)
}

/// `count` conformance-fixtures nodes on one Redis bus (`prefix`).
fn fixture_nodes(
    redis: &RedisServer,
    prefix: &str,
    count: usize,
    compat: Option<CompatConfig>,
) -> (Vec<Events>, Vec<ServerThread>) {
    let buses: Vec<Events> = (0..count)
        .map(|_| redis_bus(&redis.url(), prefix))
        .collect();
    let nodes = buses
        .iter()
        .map(|b| fixture_node(b, compat.clone()))
        .collect();
    (buses, nodes)
}

fn three_notes_nodes(
    redis: &RedisServer,
    prefix: &str,
    compat: Option<CompatConfig>,
) -> (Vec<Events>, Vec<ServerThread>) {
    three_notes_nodes_on(&redis.url(), prefix, compat)
}

/// Three notes nodes on the bus at `url` (one Redis server, or a cluster's
/// seeds as `redis+cluster://...`).
fn three_notes_nodes_on(
    url: &str,
    prefix: &str,
    compat: Option<CompatConfig>,
) -> (Vec<Events>, Vec<ServerThread>) {
    let buses: Vec<Events> = (0..3).map(|_| redis_bus(url, prefix)).collect();
    let nodes = buses
        .iter()
        .map(|b| notes_node(b, compat.clone()))
        .collect();
    (buses, nodes)
}

#[test]
fn a_session_is_served_by_every_node() {
    let redis = RedisServer::start();
    session_flow(&redis.url(), "t-fleet:");
}

/// The same flow with the bus on a three-master Redis Cluster (sharded
/// pub/sub; the session's keys in one slot, its owner's in another).
#[test]
fn a_session_is_served_by_every_node_on_a_cluster() {
    let cluster = RedisCluster::start();
    let session = session_flow(&cluster.url(), "t-fleet-cluster:");
    // The DELETE mark is in Redis, on the master serving the sessions' slot
    // (every key of the sessions' state carries the `{sessions}` hash tag).
    let key = format!(
        "t-fleet-cluster:sess:{{sessions}}:{}",
        legacy::sid_of(&session)
    );
    let master = cluster.owner(cluster.keyslot(&key));
    let mark = cluster.nodes[master].command(&["HGET", &key, "d"]);
    assert_eq!(
        mark.as_deref(),
        Some("$1\r\n1\r\n"),
        "{key} on master {master}"
    );
}

/// initialize, GET (held by one node; a second GET elsewhere is 409),
/// subscribe on another node, an update through a third heard on the stream,
/// unsubscribe elsewhere (no more updates), DELETE elsewhere (the stream
/// ends, every node answers 404): each step on another node than the last.
/// Returns the session's token.
fn session_flow(url: &str, prefix: &str) -> String {
    let (_buses, nodes) = three_notes_nodes_on(url, prefix, None);
    let proxy = Proxy::start(nodes.iter().map(|n| n.addr).collect());
    let session = legacy::initialize(proxy.addr);
    let uri = add_note(proxy.addr, &session, json!({"text": "first"}));

    // The GET stream is held by one node; a second GET on another is 409.
    let get = legacy::get(proxy.addr, Some(&session));
    assert_eq!(get.status, 200);
    let holder = proxy.last();
    let get = reader(get);
    proxy.turn_to(&session, (holder + 1) % 3);
    let second = legacy::get(proxy.addr, Some(&session));
    let status = second.status;
    second.disconnect();
    assert_eq!(status, 409, "a second GET stream on another node");

    // Subscribed on another node than the holder's.
    proxy.turn_to(&session, (holder + 1) % 3);
    let r = legacy::request(
        proxy.addr,
        &session,
        json!(1),
        "resources/subscribe",
        json!({"uri": uri}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    assert_ne!(proxy.last(), holder);

    // Updated through yet another node: the holder's stream hears it (the
    // subscribe was answered once the holder applied it).
    proxy.turn_to(&session, (holder + 2) % 3);
    add_note(proxy.addr, &session, json!({"uri": uri, "text": "changed"}));
    assert!(
        updated_within(&get, &uri, Duration::from_secs(10)),
        "the GET stream never heard the update"
    );

    // Unsubscribed on another node: no more updates.
    proxy.turn_to(&session, (holder + 2) % 3);
    let r = legacy::request(
        proxy.addr,
        &session,
        json!(2),
        "resources/unsubscribe",
        json!({"uri": uri}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    proxy.turn_to(&session, (holder + 1) % 3);
    add_note(proxy.addr, &session, json!({"uri": uri, "text": "unheard"}));
    assert!(
        !updated_within(&get, &uri, Duration::from_millis(1500)),
        "an update after unsubscribe"
    );

    // DELETE on another node than the holder's: the stream ends and every
    // node answers 404.
    proxy.turn_to(&session, (holder + 1) % 3);
    let deleted = legacy::delete(proxy.addr, &session);
    assert_eq!(deleted.status, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match get.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(None) => break,
            Ok(Some(_)) => continue,
            Err(_) => panic!("the GET stream did not end after DELETE"),
        }
    }
    for node in &nodes {
        let r = legacy::request(node.addr, &session, json!(3), "ping", json!({}));
        assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
        let g = legacy::get(node.addr, Some(&session));
        let status = g.status;
        g.disconnect();
        assert_eq!(status, 404);
    }
    session
}

#[test]
fn a_get_stream_that_ended_may_open_again_on_another_node() {
    let redis = RedisServer::start();
    let (_buses, nodes) = three_notes_nodes(&redis, "t-fleet-reopen:", None);
    let proxy = Proxy::start(nodes.iter().map(|n| n.addr).collect());
    let session = legacy::initialize(proxy.addr);
    let get = legacy::get(proxy.addr, Some(&session));
    assert_eq!(get.status, 200);
    let holder = proxy.last();
    get.disconnect();
    proxy.turn_to(&session, (holder + 1) % 3);
    let reopened = common::wait_until(Duration::from_secs(5), || {
        let again = legacy::get(nodes[(holder + 1) % 3].addr, Some(&session));
        if again.status == 200 {
            again.disconnect();
            return true;
        }
        assert_eq!(again.status, 409);
        false
    });
    assert!(reopened, "the ended GET stream still counted");
}

#[test]
fn a_log_level_set_on_one_node_applies_on_the_others() {
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..3)
        .map(|_| redis_bus(&redis.url(), "t-fleet-log:"))
        .collect();
    let nodes: Vec<ServerThread> = buses.iter().map(|b| fixture_node(b, None)).collect();
    let proxy = Proxy::start(nodes.iter().map(|n| n.addr).collect());
    let session = legacy::initialize(proxy.addr);
    let levels = |r: &Response| -> Vec<String> {
        r.sse_messages()
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .filter_map(|m| m["params"]["level"].as_str().map(str::to_owned))
            .collect()
    };
    for (level, expected) in [
        ("warning", vec!["warning", "error"]),
        ("info", vec!["info", "warning", "error"]),
    ] {
        let r = legacy::request(
            proxy.addr,
            &session,
            json!(1),
            "logging/setLevel",
            json!({"level": level}),
        );
        assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
        let set_on = proxy.last();
        for _ in 0..2 {
            let r = legacy::request(
                proxy.addr,
                &session,
                json!(2),
                "tools/call",
                json!({"name": "test_logging_tool", "arguments": {}}),
            );
            assert_ne!(proxy.last(), set_on);
            assert_eq!(levels(&r), expected, "level {level}");
        }
    }
}

#[test]
fn without_redis_session_requests_fail_clearly() {
    let mut redis = RedisServer::start();
    let (_buses, nodes) = three_fixture_nodes(&redis, "t-fleet-down:", None);
    let proxy = Proxy::start(nodes.iter().map(|n| n.addr).collect());
    let session = legacy::initialize(proxy.addr);
    let r = legacy::request(
        proxy.addr,
        &session,
        json!(1),
        "logging/setLevel",
        json!({"level": "info"}),
    );
    assert_eq!(message(&r)["result"], json!({}));
    redis.kill();
    for node in &nodes {
        for method in ["ping", "logging/setLevel", "resources/subscribe"] {
            let params = match method {
                "logging/setLevel" => json!({"level": "debug"}),
                "resources/subscribe" => json!({"uri": "note://x"}),
                _ => json!({}),
            };
            let r = legacy::request(node.addr, &session, json!(7), method, params);
            let m = message(&r);
            assert_eq!(m["error"]["code"], -32603, "{method}: {m}");
            assert!(
                m["error"]["message"]
                    .as_str()
                    .is_some_and(|s| s.contains("shared session store is unavailable")),
                "{method}: {m}"
            );
            assert_eq!(m["id"], 7);
        }
        let g = legacy::get(node.addr, Some(&session));
        let status = g.status;
        g.disconnect();
        assert_eq!(status, 503);
        let d = legacy::delete(node.addr, &session);
        assert_eq!(d.status, 503, "{}", String::from_utf8_lossy(&d.body));
        assert!(String::from_utf8_lossy(&d.body).contains("shared session store is unavailable"));
    }
    // A new session needs no state: initialize still works.
    let fresh = legacy::initialize_with(nodes[0].addr, LEGACY, json!({}));
    assert_eq!(fresh.status, 200);
}

/// `logging/setLevel` `info` for session `s`.
fn set_info_level(addr: SocketAddr, s: &str) -> Response {
    legacy::request(
        addr,
        s,
        json!(1),
        "logging/setLevel",
        json!({"level": "info"}),
    )
}

/// `resources/subscribe` (`on`) or `unsubscribe` of `uri` for session `s`.
fn change_uri(addr: SocketAddr, s: &str, uri: &str, on: bool) -> Response {
    let method = if on {
        "resources/subscribe"
    } else {
        "resources/unsubscribe"
    };
    legacy::request(addr, s, json!(2), method, json!({"uri": uri}))
}

#[test]
fn per_principal_bounds_hold_across_nodes() {
    let redis = RedisServer::start();
    let mut compat = CompatConfig::default();
    compat.max_session_states_per_principal = 2;
    compat.max_subscribed_uris_per_principal = 3;
    let (_buses, nodes) = three_fixture_nodes(&redis, "t-fleet-bounds:", Some(compat));
    let proxy = Proxy::start(nodes.iter().map(|n| n.addr).collect());
    let sessions: Vec<String> = (0..3).map(|_| legacy::initialize(proxy.addr)).collect();
    let set_level = |s: &str| set_info_level(proxy.addr, s);
    // Two sessions with state, each set on its own node; the third is refused.
    assert_eq!(set_level(&sessions[0]).status, 200);
    assert_eq!(set_level(&sessions[1]).status, 200);
    let refused = set_level(&sessions[2]);
    assert_eq!(
        refused.status,
        429,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert!(refused.header("retry-after").is_some());
    assert_eq!(
        refused.json()["error"]["data"]["limit"],
        "max_sessions_per_principal"
    );
    // Three URIs across the two sessions and the nodes; a fourth is refused.
    let subscribe = |s: &str, uri: &str, on: bool| change_uri(proxy.addr, s, uri, on);
    for (s, uri) in [(0, "note://a"), (1, "note://b"), (0, "note://c")] {
        let r = subscribe(&sessions[s], uri, true);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let over = subscribe(&sessions[1], "note://d", true);
    assert_eq!(over.status, 429, "{}", String::from_utf8_lossy(&over.body));
    assert_eq!(
        over.json()["error"]["data"]["limit"],
        "max_subscribed_uris_per_principal"
    );
    // An unsubscribe on another node frees room for it.
    assert_eq!(subscribe(&sessions[0], "note://a", false).status, 200);
    assert_eq!(subscribe(&sessions[1], "note://d", true).status, 200);
    // DELETE drops a session's URIs (and keeps its mark, so it still counts).
    assert_eq!(legacy::delete(proxy.addr, &sessions[0]).status, 200);
    assert_eq!(subscribe(&sessions[1], "note://e", true).status, 200);
    assert_eq!(set_level(&sessions[2]).status, 429);
}

/// Marks `session`'s GET stream as held by a node that is gone (it holds
/// no lease), as such a node leaves the session's hash in Redis.
fn held_by_a_gone_node(redis: &RedisServer, session: &str) {
    let sid = legacy::sid_of(session);
    let pattern = format!("*sess:{{sessions}}:{sid}*");
    let keys = redis.command(&["KEYS", &pattern]).expect("KEYS answers");
    let key = keys
        .lines()
        .find_map(|l| l.find(&sid).map(|at| &l[..at + sid.len()]))
        .expect("a key of the session")
        .to_owned();
    let set = redis
        .command(&["HSET", &key, "h", "00000000deadbeef:1"])
        .expect("HSET answers");
    assert!(set.starts_with(':'), "{set}");
}

#[test]
fn a_get_stream_held_by_a_node_without_a_lease_is_taken_over() {
    let redis = RedisServer::start();
    let (_buses, nodes) = three_fixture_nodes(&redis, "t-fleet-lease:", None);
    let session = legacy::initialize(nodes[0].addr);
    let r = legacy::request(
        nodes[0].addr,
        &session,
        json!(1),
        "logging/setLevel",
        json!({"level": "info"}),
    );
    assert_eq!(message(&r)["result"], json!({}));
    held_by_a_gone_node(&redis, &session);
    let get = legacy::get(nodes[1].addr, Some(&session));
    let status = get.status;
    assert_eq!(status, 200, "a holder without a lease still counted");
    // Now this node holds it: a GET elsewhere is 409.
    let other = legacy::get(nodes[2].addr, Some(&session));
    let second = other.status;
    other.disconnect();
    assert_eq!(second, 409);
    get.disconnect();
}

/// A holder mark left by a node that is gone (no lease) does not block the
/// session: a subscribe on another node is recorded and answered at once
/// (no stream runs to apply it to), the next GET stream opens with it, and
/// a DELETE does not wait for the gone node.
#[test]
fn a_session_whose_holders_node_is_gone_still_takes_changes_and_deletes() {
    let redis = RedisServer::start();
    let (_buses, nodes) = three_notes_nodes(&redis, "t-fleet-gone:", None);
    let session = legacy::initialize(nodes[0].addr);
    let first = add_note(nodes[0].addr, &session, json!({"text": "n0"}));
    let uri = add_note(nodes[0].addr, &session, json!({"text": "n"}));
    // Some state, so that the session has its hash in Redis.
    let r = change_uri(nodes[0].addr, &session, &first, true);
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    held_by_a_gone_node(&redis, &session);
    let r = change_uri(nodes[1].addr, &session, &uri, true);
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    // The next GET stream has it.
    let get = reader(legacy::get(nodes[2].addr, Some(&session)));
    add_note(nodes[0].addr, &session, json!({"text": "edit", "uri": uri}));
    assert!(updated_within(&get, &uri, Duration::from_secs(10)));
    drop(get);
    // A DELETE while a gone node holds the stream: answered, not 503.
    std::thread::sleep(Duration::from_millis(300));
    held_by_a_gone_node(&redis, &session);
    let deleted = legacy::delete(nodes[1].addr, &session);
    assert_eq!(
        deleted.status,
        200,
        "{}",
        String::from_utf8_lossy(&deleted.body)
    );
}

/// A node whose subscription handler refuses every 2025 URI change in place.
fn refusing_node(events: &Events, record: Arc<common::probe::Record>) -> ServerThread {
    use common::probe::{Mode, Probe};
    let events = events.clone();
    ServerThread::spawn(
        move || {
            Suite::builder(Implementation::new("refusing", "1"))
                .secret(key())
                .subscriptions(Probe {
                    bus: Bus::new(),
                    mode: Mode::RefuseChanges(McpError::invalid_params(
                        "Invalid params: not this one",
                    )),
                    // A stream that serves something besides its URIs.
                    caps: SubscriptionCapabilities::none()
                        .with_tools_list_changed(true)
                        .with_resources_updated(true),
                    record: record.clone(),
                })
                .shared_tasks(&events)
                .build()
        },
        config(None),
    )
    .expect("node starts")
}

#[test]
fn a_change_refused_by_the_holders_handler_is_an_error_on_any_node() {
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..2)
        .map(|_| redis_bus(&redis.url(), "t-fleet-refuse:"))
        .collect();
    let record = Arc::new(common::probe::Record::default());
    let nodes: Vec<ServerThread> = buses
        .iter()
        .map(|b| refusing_node(b, record.clone()))
        .collect();
    let session = legacy::initialize(nodes[0].addr);
    let get = legacy::get(nodes[0].addr, Some(&session));
    assert_eq!(get.status, 200);
    // Its stream runs (the handler's subscribe ran).
    assert!(common::wait_until(Duration::from_secs(10), || {
        *record.subscribes.lock().unwrap() >= 1
    }));
    // Asked on the other node: answered once the holder's handler refused.
    let r = legacy::request(
        nodes[1].addr,
        &session,
        json!(1),
        "resources/subscribe",
        json!({"uri": "a://1"}),
    );
    let m = message(&r);
    assert_eq!(m["error"]["code"], -32602, "{m}");
    assert_eq!(m["error"]["message"], "Invalid params: not this one");
    // A URI Redis records already while the stream does not have it (a
    // refused change whose undo was refused in turn): asked again, it is
    // still the holder's answer, never a success the stream does not serve.
    let uris = format!(
        "t-fleet-refuse:sess:{{sessions}}:{}:uris",
        legacy::sid_of(&session)
    );
    let added = redis
        .command(&["SADD", &uris, "a://2"])
        .expect("SADD answers");
    assert!(added.starts_with(':'), "{added}");
    let r = legacy::request(
        nodes[1].addr,
        &session,
        json!(2),
        "resources/subscribe",
        json!({"uri": "a://2"}),
    );
    let m = message(&r);
    assert_eq!(m["error"]["code"], -32602, "{m}");
    get.disconnect();
}

#[test]
fn the_global_bounds_hold_across_nodes() {
    let redis = RedisServer::start();
    let mut compat = CompatConfig::default();
    compat.max_session_states = 2;
    compat.max_subscribed_uris = 1;
    let (_buses, nodes) = three_fixture_nodes(&redis, "t-fleet-global:", Some(compat));
    let proxy = Proxy::start(nodes.iter().map(|n| n.addr).collect());
    let sessions: Vec<String> = (0..3).map(|_| legacy::initialize(proxy.addr)).collect();
    let set_level = |s: &str| set_info_level(proxy.addr, s);
    // Two sessions with state in the whole fleet, each set on its own node;
    // the third is refused on the next node, as one node refuses it.
    assert_eq!(message(&set_level(&sessions[0]))["result"], json!({}));
    assert_eq!(message(&set_level(&sessions[1]))["result"], json!({}));
    let refused = message(&set_level(&sessions[2]));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Server busy")),
        "{refused}"
    );
    // One URI in the whole fleet.
    let subscribe = |s: &str, uri: &str| change_uri(proxy.addr, s, uri, true);
    assert_eq!(
        message(&subscribe(&sessions[0], "note://a"))["result"],
        json!({})
    );
    let over = message(&subscribe(&sessions[1], "note://b"));
    assert_eq!(over["error"]["code"], -32603, "{over}");
    // A DELETE (on another node) frees both.
    assert_eq!(legacy::delete(proxy.addr, &sessions[0]).status, 200);
    assert_eq!(
        message(&subscribe(&sessions[1], "note://b"))["result"],
        json!({})
    );
}

#[test]
fn a_delete_whose_control_message_was_lost_still_ends_the_get_stream() {
    let redis = RedisServer::start();
    let (_buses, nodes) = three_notes_nodes(&redis, "t-fleet-lost:", None);
    let proxy = Proxy::start(nodes.iter().map(|n| n.addr).collect());
    let session = legacy::initialize(proxy.addr);
    let get = legacy::get(proxy.addr, Some(&session));
    assert_eq!(get.status, 200);
    let get = reader(get);
    // The DELETE mark written straight into Redis: no node sends the holder
    // a control message, as when the bus lost it.
    let key = format!(
        "t-fleet-lost:sess:{{sessions}}:{}",
        legacy::sid_of(&session)
    );
    let reply = redis.command(&["HSET", &key, "d", "1"]);
    assert!(reply.is_some_and(|r| r.starts_with(':')), "HSET {key}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match get.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(None) => break,
            Ok(Some(_)) => continue,
            Err(_) => panic!("the GET stream of a deleted session kept running"),
        }
    }
    for node in &nodes {
        let r = legacy::request(node.addr, &session, json!(3), "ping", json!({}));
        assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
    }
}

/// The `mcp.server.session.duration` series of 2025 sessions that ended.
fn sessions_ended(node: &ServerThread) -> String {
    let text = genmcp::admin::Admin::new(node.server.clone(), Vec::new()).metrics_text();
    let series = format!(
        "mcp_server_session_duration_seconds_count{{genmcp_session_kind=\"session\",error_type=\"\",\
         network_transport=\"tcp\",mcp_protocol_version=\"{LEGACY}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or("0")
        .to_owned()
}

/// A session's end is recorded once in the fleet: by the node that took its
/// DELETE, or, for one left to expire, by the node that began it (whichever
/// claims the end first: a session DELETEd elsewhere is not recorded a second
/// time at its expiry).
#[test]
fn a_sessions_end_is_recorded_once_in_the_fleet() {
    let redis = RedisServer::start();
    let mut compat = CompatConfig::default();
    compat.session_ttl = Duration::from_secs(5);
    let (_buses, nodes) = fixture_nodes(&redis, "t-fleet-expiry:", 2, Some(compat));
    let deleted = legacy::initialize(nodes[0].addr);
    assert_eq!(legacy::delete(nodes[1].addr, &deleted).status, 200);
    assert_eq!(
        sessions_ended(&nodes[1]),
        "1",
        "the DELETE is recorded where it landed"
    );
    let _left = legacy::initialize(nodes[0].addr);
    // Both sessions began on node 0; the one left to expire is recorded there
    // once its time comes (the deleted one's came first).
    assert!(
        common::wait_until(Duration::from_secs(20), || sessions_ended(&nodes[0]) != "0"),
        "node 0 never recorded the session left to expire"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        sessions_ended(&nodes[0]),
        "1",
        "recorded once, the DELETEd one not again"
    );
    assert_eq!(sessions_ended(&nodes[1]), "1");
}

/// The expiry (ms since the epoch) inside a 2025 session token.
fn expiry_of(token: &str) -> u64 {
    use base64::Engine as _;
    let body = token.split('.').nth(1).expect("a sealed token");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .expect("base64url");
    let payload: Value = serde_json::from_slice(&bytes).expect("JSON");
    payload["exp"].as_u64().expect("an expiry")
}

/// A DELETE landing on another node in the last moments before the session's
/// expiry, while the node that began it is about to record that expiry: the
/// session still ends once in the fleet's metrics (the DELETE's node claimed
/// its end first), and the claim is kept in the sessions' hash slot.
#[test]
fn a_delete_just_before_the_expiry_is_recorded_once_in_the_fleet() {
    let redis = RedisServer::start();
    let mut compat = CompatConfig::default();
    compat.session_ttl = Duration::from_secs(8);
    let (_buses, nodes) = fixture_nodes(&redis, "t-fleet-late:", 2, Some(compat));
    let session = legacy::initialize(nodes[0].addr);
    let expires = expiry_of(&session);
    let now = || {
        u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after the epoch")
                .as_millis(),
        )
        .expect("ms fit")
    };
    // One second before the expiry: after any look node 0 could take ahead
    // of it, before the token is refused.
    std::thread::sleep(Duration::from_millis(
        expires.saturating_sub(1000).saturating_sub(now()),
    ));
    assert_eq!(legacy::delete(nodes[1].addr, &session).status, 200);
    assert_eq!(sessions_ended(&nodes[1]), "1", "recorded where it landed");
    // Past the expiry, node 0's clock has come and gone.
    std::thread::sleep(Duration::from_millis(
        (expires + 2000).saturating_sub(now()),
    ));
    assert_eq!(
        sessions_ended(&nodes[0]),
        "0",
        "the expiry of a session DELETEd elsewhere is not recorded again"
    );
    assert_eq!(sessions_ended(&nodes[1]), "1");
    // The claim, in the sessions' slot (`{sessions}`: one Redis Cluster node).
    let end = format!(
        "t-fleet-late:sess:{{sessions}}:{}:end",
        legacy::sid_of(&session)
    );
    assert_eq!(
        redis.command(&["EXISTS", &end]).as_deref().map(str::trim),
        Some(":1")
    );
}

/// Sends the GET stream's holder a URI change as another node forwards it:
/// its acknowledgement key set to `pending`, then the control message on
/// the holder's control topic. Returns the holder's recorded outcome.
fn forward_late_change(bus: &Events, holder: &str, sid: &str, uri: &str, on: bool) -> String {
    use genmcp::protocol::Notification;
    let once = bus.once().expect("a Redis bus");
    let n: u64 = rand_u64();
    let ack = format!("sess:{{{sid}}}:ack:{n:016x}");
    let expiry = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
        + 30_000;
    common::redis_server::block_on(once.put(&ack, b"\"pending\"", expiry)).expect("put");
    let mut params = serde_json::Map::new();
    params.insert("sid".into(), json!(sid));
    params.insert("uri".into(), json!(uri));
    params.insert("ack".into(), json!(ack));
    params.insert(
        "op".into(),
        json!(if on { "subscribe" } else { "unsubscribe" }),
    );
    let control = SharedNotification::new(Notification::new("genmcp/sessions/control", params));
    let topic = format!("sess-ctl/{holder}");
    common::redis_server::block_on(bus.publish_remote_wait(&topic, &[control])).expect("sent");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = common::redis_server::block_on(once.get(&ack)).expect("get");
        let text = got.map(|v| String::from_utf8_lossy(&v).into_owned());
        match text.as_deref() {
            Some("\"pending\"" | "\"applying\"") | None if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => return text.unwrap_or_default(),
        }
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now())
}

/// The node holding the session's GET stream, as Redis records it.
fn holder_node(redis: &RedisServer, prefix: &str, session: &str) -> String {
    let key = format!("{prefix}sess:{{sessions}}:{}", legacy::sid_of(session));
    let reply = redis.command(&["HGET", &key, "h"]).expect("HGET answers");
    let holder = reply.lines().nth(1).expect("a holder").to_owned();
    holder
        .rsplit_once(':')
        .map(|(node, _)| node.to_owned())
        .expect("<node>:<n>")
}

/// Changes of one URI forwarded from different nodes may reach the holder
/// in another order than Redis recorded them. A change whose message comes
/// after a newer change of the same URI is recorded does not undo it: the
/// holder applies the URI as Redis records it, so the stream neither loses
/// the updates of a URI the session subscribes to nor gets those of one it
/// unsubscribed.
#[test]
fn a_change_whose_message_came_late_does_not_undo_a_newer_one() {
    let prefix = "t-fleet-late:";
    let redis = RedisServer::start();
    let (buses, nodes) = three_notes_nodes(&redis, prefix, None);
    let session = legacy::initialize(nodes[0].addr);
    let kept = add_note(nodes[0].addr, &session, json!({"text": "kept"}));
    let dropped = add_note(nodes[0].addr, &session, json!({"text": "dropped"}));
    let marker = add_note(nodes[0].addr, &session, json!({"text": "marker"}));
    let get = reader(legacy::get(nodes[0].addr, Some(&session)));
    for uri in [&kept, &marker] {
        let r = change_uri(nodes[0].addr, &session, uri, true);
        assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    }
    let holder = holder_node(&redis, prefix, &session);
    let sid = legacy::sid_of(&session);
    // `kept` is subscribed in Redis: an unsubscribe recorded before that
    // subscribe, whose message only comes now, changes nothing. Nor does a
    // late subscribe of `dropped`, which Redis does not record.
    let late = forward_late_change(&buses[1], &holder, &sid, &kept, false);
    assert_eq!(late, "\"ok\"");
    let late = forward_late_change(&buses[2], &holder, &sid, &dropped, true);
    assert_eq!(late, "\"ok\"");
    // Updated in this order by one node: the marker's update comes last.
    for uri in [&dropped, &kept, &marker] {
        add_note(nodes[1].addr, &session, json!({"uri": uri, "text": "edit"}));
    }
    let mut heard = vec![];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !heard.contains(&marker) {
        match get.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Some(m)) if m["method"] == "notifications/resources/updated" => {
                heard.push(m["params"]["uri"].as_str().unwrap_or("").to_owned());
            }
            Ok(Some(_)) => {}
            Ok(None) => panic!("the GET stream ended"),
            Err(_) => panic!("the marker's update never came; heard {heard:?}"),
        }
    }
    assert_eq!(heard, [kept, marker], "the updates of the session's set");
}

/// Marks the session's GET stream as held by a node that holds a lease but
/// never answers (its control messages go nowhere): every change forwarded
/// to it is withdrawn after the wait, and undone.
fn held_by_a_silent_node(redis: &RedisServer, prefix: &str, session: &str) {
    let node = "00000000feedf00d";
    let lease = format!("{prefix}task-node:{node}");
    let set = redis
        .command(&["SET", &lease, "1", "PX", "60000"])
        .expect("SET answers");
    assert!(set.starts_with("+OK"), "{set}");
    let key = format!("{prefix}sess:{{sessions}}:{}", legacy::sid_of(session));
    let set = redis
        .command(&["HSET", &key, "h", &format!("{node}:1")])
        .expect("HSET answers");
    assert!(set.starts_with(':'), "{set}");
}

/// A change withdrawn (its holder never claimed it) is undone only while it
/// is the session's last change: undoing it under a newer change could
/// erase that one. It then stays recorded, and the client is told so.
#[test]
fn a_withdrawn_change_is_undone_only_while_no_newer_one_was_recorded() {
    let prefix = "t-fleet-undo:";
    let redis = RedisServer::start();
    let (_buses, nodes) = three_notes_nodes(&redis, prefix, None);
    let session = legacy::initialize(nodes[0].addr);
    let older = add_note(nodes[0].addr, &session, json!({"text": "older"}));
    let newer = add_note(nodes[0].addr, &session, json!({"text": "newer"}));
    assert_eq!(set_info_level(nodes[0].addr, &session).status, 200);
    held_by_a_silent_node(&redis, prefix, &session);
    let (a0, a1) = (nodes[0].addr, nodes[1].addr);
    let first = {
        let (session, uri) = (session.clone(), older.clone());
        std::thread::spawn(move || change_uri(a0, &session, &uri, true))
    };
    // Recorded while the first still waits for the silent holder (2 s):
    // as soon as the first is recorded.
    let uris = format!(
        "{prefix}sess:{{sessions}}:{}:uris",
        legacy::sid_of(&session)
    );
    assert!(
        common::wait_until(Duration::from_secs(20), || redis
            .command(&["SISMEMBER", &uris, &older])
            .as_deref()
            == Some(":1\r\n")),
        "the first change is recorded"
    );
    let second = change_uri(a1, &session, &newer, true);
    let first = first.join().expect("the first subscribe answers");
    let first = message(&first);
    assert!(
        first["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("still recorded")),
        "{first}"
    );
    let second = message(&second);
    assert!(
        second["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing changed")),
        "{second}"
    );
    let member = |uri: &str| redis.command(&["SISMEMBER", &uris, uri]);
    assert_eq!(
        member(&older).as_deref(),
        Some(":1\r\n"),
        "the first stays recorded"
    );
    assert_eq!(
        member(&newer).as_deref(),
        Some(":0\r\n"),
        "the second, the last change, is undone"
    );
}
