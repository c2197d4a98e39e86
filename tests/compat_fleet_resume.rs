//! 2025 GET streams resumed on another node of a fleet: two real nodes on one
//! real `redis-server`. The node holding a session's GET stream keeps its
//! events in a Redis stream; a client that reconnects with `Last-Event-ID`
//! to the other node gets every event published while it was away, then the
//! live ones, each once and in order; a resumption while the nodes' Redis
//! connections are cut is 503, and once they are back it gets every event in
//! order or 410, never a silent gap.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::legacy::{self, LEGACY};
use common::redis_server::{RedisServer, redis_bus};
use common::{Event, Exchange, Response};
use genmcp::http::ServerThread;
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp_cli::demo;
use serde_json::{Value, json};

type Events = Bus<SharedNotification>;

fn key() -> [u8; 32] {
    genmcp::suite::secret::parse_secret(&"5a".repeat(32)).expect("key")
}

fn notes_node(bus: &Events) -> ServerThread {
    let bus = bus.clone();
    let mut config = common::config();
    config.workers = 2;
    config.keep_alive = Duration::from_millis(100);
    ServerThread::spawn(move || demo::suite_with(bus, Some(key())).0, config).expect("node starts")
}

fn message(r: &Response) -> Value {
    if r.header("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        return r.sse_messages().pop().expect("an SSE message");
    }
    r.json()
}

fn add_note(addr: SocketAddr, session: &str, args: Value) -> String {
    let r = legacy::request(
        addr,
        session,
        json!("add"),
        "tools/call",
        json!({"name": "add_note", "arguments": args}),
    );
    let m = message(&r);
    m["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("add_note answered {m}"))
        .to_owned()
}

fn subscribe(addr: SocketAddr, session: &str, uri: &str) {
    let r = legacy::request(
        addr,
        session,
        json!("sub"),
        "resources/subscribe",
        json!({"uri": uri}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
}

fn get(addr: SocketAddr, session: &str, last_event_id: Option<&str>) -> Exchange {
    let mut h = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
    ];
    if let Some(id) = last_event_id {
        h.push(("Last-Event-ID".to_owned(), id.to_owned()));
    }
    let e = Exchange::open_with(addr, "GET", &h, b"");
    e.set_timeout(Duration::from_secs(10));
    e
}

/// The URI of the next `notifications/resources/updated` (other
/// notifications and keep-alives skipped, at most 300 of them: about 30 s of
/// keep-alives), `None` when the stream ended.
fn next_updated(stream: &mut Exchange) -> Option<String> {
    for _ in 0..300 {
        match stream.try_next_event().expect("an event within 10 s")? {
            Event::Message(m) if m["method"] == "notifications/resources/updated" => {
                return Some(m["params"]["uri"].as_str().expect("a uri").to_owned());
            }
            _ => {}
        }
    }
    panic!("no update within 300 events");
}

fn sid_of(token: &str) -> String {
    use base64::Engine as _;
    let body = token
        .split('.')
        .nth(1)
        .expect("a sealed token (kid.payload.tag)");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .expect("base64url");
    let payload: Value = serde_json::from_slice(&bytes).expect("JSON");
    payload["sid"].as_str().expect("a sid").to_owned()
}

/// Waits (bounded) until the session's Redis stream holds `n` entries.
fn wait_kept(redis: &RedisServer, key: &str, n: usize) {
    let want = format!(":{n}\r\n");
    for _ in 0..200 {
        if redis.command(&["XLEN", key]).as_deref() == Some(want.as_str()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the holder never kept {n} events in {key}");
}

/// The GET resumed after `last`, retried (at most 300 times, 100 ms apart)
/// while it gets 503 (the nodes' Redis connections coming back after a
/// cut): 200, or 410 when the stream ended meanwhile.
fn resume_once_redis_is_back(addr: SocketAddr, session: &str, last: &str) -> Exchange {
    for _ in 0..300 {
        let resumed = get(addr, session, Some(last));
        match resumed.status {
            200 => return resumed,
            503 => std::thread::sleep(Duration::from_millis(100)),
            410 => return resumed,
            other => panic!("resumed with {other}"),
        }
    }
    let r = get(addr, session, Some(last)).into_response();
    panic!("still 503 after 30 s: {}", String::from_utf8_lossy(&r.body));
}

/// Cuts every node's Redis connections (commands and subscriptions; the
/// buses reconnect).
fn cut(f: &Fleet) {
    for kind in ["normal", "pubsub"] {
        f.redis
            .command(&["CLIENT", "KILL", "TYPE", kind])
            .expect("redis answers");
    }
}

struct Fleet {
    redis: RedisServer,
    a: ServerThread,
    b: ServerThread,
    _buses: Vec<Events>,
}

fn fleet(prefix: &str) -> Fleet {
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let a = notes_node(&buses[0]);
    let b = notes_node(&buses[1]);
    Fleet {
        redis,
        a,
        b,
        _buses: buses,
    }
}

/// A session on node A with `n` notes subscribed and its GET stream open on
/// A (one update heard): the session, the notes' URIs, the stream.
fn session_with_notes(f: &Fleet, n: usize) -> (String, Vec<String>, Exchange) {
    let session = legacy::initialize(f.a.addr);
    let uris: Vec<String> = (0..n)
        .map(|i| add_note(f.a.addr, &session, json!({"text": format!("note {i}")})))
        .collect();
    for uri in &uris {
        subscribe(f.a.addr, &session, uri);
    }
    let mut stream = get(f.a.addr, &session, None);
    assert_eq!(stream.status, 200);
    add_note(f.b.addr, &session, json!({"uri": uris[0], "text": "first"}));
    assert_eq!(next_updated(&mut stream).as_deref(), Some(uris[0].as_str()));
    (session, uris, stream)
}

#[test]
fn a_get_stream_resumed_on_another_node_replays_each_event_once_in_order() {
    let f = fleet("t-fresume:");
    let (session, uris, stream) = session_with_notes(&f, 10);
    let seen = stream.last_id.clone().expect("events carry ids");
    stream.disconnect();

    // Published while the client is away (through node B).
    for uri in &uris[1..6] {
        add_note(f.b.addr, &session, json!({"uri": uri, "text": "away"}));
    }
    // Reconnected to node B: the missed events, then live ones.
    let mut resumed = get(f.b.addr, &session, Some(&seen));
    assert_eq!(resumed.status, 200);
    for uri in &uris[6..10] {
        add_note(f.a.addr, &session, json!({"uri": uri, "text": "live"}));
    }
    let got: Vec<String> = (1..10)
        .map(|_| next_updated(&mut resumed).expect("an update"))
        .collect();
    assert_eq!(got, uris[1..10].to_vec());
    // Nothing twice: the next update is the next one made.
    add_note(f.b.addr, &session, json!({"uri": uris[0], "text": "again"}));
    assert_eq!(
        next_updated(&mut resumed).as_deref(),
        Some(uris[0].as_str())
    );

    // An id of another session names nothing of this one: 400.
    let other = legacy::initialize(f.b.addr);
    let foreign = resumed.last_id.clone().expect("an id");
    let refused = get(f.b.addr, &other, Some(&foreign));
    assert_eq!(refused.status, 400);
}

#[test]
fn a_resumption_while_redis_connections_are_cut_is_an_error_never_a_gap() {
    let f = fleet("t-fresume-cut:");
    let (session, uris, stream) = session_with_notes(&f, 6);
    let seen = stream.last_id.clone().expect("events carry ids");
    stream.disconnect();
    let ev = format!("t-fresume-cut:sess:{{sessions}}:{}:ev", sid_of(&session));
    let mut expected = Vec::new();
    for round in 0..50 {
        let uri = &uris[round % uris.len()];
        add_note(
            f.b.addr,
            &session,
            json!({"uri": uri, "text": format!("r{round}")}),
        );
        expected.push(uri.clone());
    }
    // The first update and the 50 made while away are kept.
    wait_kept(&f.redis, &ev, 51);

    // Every node's Redis connections cut, then a resumption on node B:
    // 503 (Redis could not be read; never answered as if there were nothing
    // to replay).
    cut(&f);
    let refused = get(f.b.addr, &session, Some(&seen));
    assert_eq!(refused.status, 503, "a resumption while Redis is cut");
    drop(refused);

    // Once the nodes are back: every event after the id, once and in order,
    // or, when the cut ended the session's stream on its node (the bus ends
    // streams when it loses Redis), 410, the documented answer; never a
    // silent gap.
    let mut resumed = resume_once_redis_is_back(f.b.addr, &session, &seen);
    if resumed.status == 410 {
        return;
    }
    let got: Vec<String> = (0..expected.len())
        .map(|_| next_updated(&mut resumed).expect("an update"))
        .collect();
    assert_eq!(got, expected, "a gap or a repeat");
}
