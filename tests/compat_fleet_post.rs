//! A 2025 tool call whose POST SSE reply is cut resumes on any node of a
//! fleet (`--bus`): the reply's events are kept in Redis, so a client that
//! reconnects with `GET` and `Last-Event-ID` to another node gets the rest
//! of that reply, its response last, each event once and in order. Another
//! session's id names nothing; a reply whose node died is gone (410), never
//! a wait for nothing; a DELETE takes the history with it.
//!
//! Two in-process nodes on one real `redis-server`, a real HTTP client.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::Exchange;
use common::counting::{call, counting_tool, expected, read};
use common::legacy::{self, LEGACY};
use common::redis_server::{RedisServer, redis_bus};
use genmcp::http::{CompatConfig, ServerThread};
use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use genmcp_cli::demo;
use serde_json::json;

type Events = Bus<SharedNotification>;

fn key() -> [u8; 32] {
    genmcp::suite::secret::parse_secret(&"5a".repeat(32)).expect("key")
}

fn node(
    bus: &Events,
    compat: CompatConfig,
    max_streams_per_principal: Option<usize>,
) -> ServerThread {
    let bus = bus.clone();
    let mut config = common::config();
    config.workers = 2;
    config.keep_alive = Duration::from_millis(100);
    config.compat = Some(compat);
    config.limits.max_streams_per_principal = max_streams_per_principal;
    ServerThread::spawn(
        move || {
            let (suite, _) = demo::suite_with(bus, Some(key()));
            suite.catalog().add_tool(counting_tool());
            suite
        },
        config,
    )
    .expect("node starts")
}

struct Fleet {
    redis: RedisServer,
    a: Option<ServerThread>,
    b: ServerThread,
    _buses: Vec<Events>,
}

impl Fleet {
    fn a(&self) -> SocketAddr {
        self.a.as_ref().expect("node A runs").addr
    }
}

fn fleet(prefix: &str, compat: CompatConfig) -> Fleet {
    fleet_limited(prefix, compat, None)
}

/// A fleet whose node B allows `b_streams` streams per principal.
fn fleet_limited(prefix: &str, compat: CompatConfig, b_streams: Option<usize>) -> Fleet {
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let a = node(&buses[0], compat.clone(), None);
    let b = node(&buses[1], compat, b_streams);
    Fleet {
        redis,
        a: Some(a),
        b,
        _buses: buses,
    }
}

fn resume(addr: SocketAddr, session: &str, last_event_id: &str) -> Exchange {
    let h = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("Last-Event-ID".to_owned(), last_event_id.to_owned()),
    ];
    let e = Exchange::open_with(addr, "GET", &h, b"");
    e.set_timeout(Duration::from_secs(15));
    e
}

#[test]
fn a_post_reply_cut_resumes_on_another_node_with_its_response_last() {
    let f = fleet("t-fpost1:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 12, "gap_ms": 100}));
    assert_eq!(post.status, 200);
    assert_eq!(post.header("content-type"), Some("text/event-stream"));
    let first = read(&mut post, Some(3));
    assert_eq!(first, expected(12)[..3].to_vec());
    let seen = post.last_id.clone().expect("events carry ids");
    post.disconnect();

    // Another session's GET with that id: nothing of this reply.
    let other = legacy::initialize(f.b.addr);
    assert_eq!(resume(f.b.addr, &other, &seen).into_response().status, 400);
    // A made-up POST stream of this session: nothing either.
    let mut parts: Vec<&str> = seen.splitn(3, '-').collect();
    parts[1] = "0123456789abcdef";
    let forged = parts.join("-");
    assert_eq!(
        resume(f.b.addr, &session, &forged).into_response().status,
        400
    );

    // On node B: the rest of the reply, once and in order, then the body ends.
    let mut resumed = resume(f.b.addr, &session, &seen);
    assert_eq!(resumed.status, 200);
    let rest = read(&mut resumed, None);
    assert_eq!(rest, expected(12)[3..].to_vec());
}

#[test]
fn a_post_reply_closed_for_polling_resumes_across_nodes_losing_nothing() {
    let mut compat = CompatConfig::default();
    compat.max_stream_duration = Some(Duration::from_millis(400));
    let f = fleet("t-fpost2:", compat);
    let session = legacy::initialize(f.a());
    // Closed by its tool at once, then by the server every 400 ms.
    let mut stream = call(
        f.a(),
        &session,
        json!({"n": 15, "gap_ms": 80, "poll": true}),
    );
    assert_eq!(stream.status, 200);
    let mut got = Vec::new();
    let mut closes = 0;
    for round in 0..100 {
        got.extend(read(&mut stream, None));
        if got.last().is_some_and(|l| l.starts_with('R')) {
            break;
        }
        assert!(stream.retry.is_some(), "closed with a retry hint");
        closes += 1;
        let last = stream.last_id.clone().expect("an id to resume from");
        let addr = if round % 2 == 0 { f.b.addr } else { f.a() };
        stream = resume(addr, &session, &last);
        assert_eq!(stream.status, 200, "round {round}");
    }
    assert_eq!(
        got,
        expected(15),
        "each event once, in order, over {closes} closes"
    );
    assert!(closes >= 3, "the reply was closed and resumed ({closes})");
}

#[test]
fn a_drained_node_finishes_its_post_replies_for_clients_resuming_elsewhere() {
    let mut f = fleet("t-fpost9:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 10, "gap_ms": 100}));
    let mut got = read(&mut post, Some(2));
    // Node A drains (a graceful stop): the reply is closed with a retry
    // hint, and the request runs on to its response meanwhile.
    let a = f.a.take().expect("node A");
    let stopping = std::thread::spawn(move || a.stop());
    got.extend(read(&mut post, None));
    assert!(post.retry.is_some(), "closed with a retry hint");
    let last = post.last_id.clone().expect("an id");
    let mut resumed = resume(f.b.addr, &session, &last);
    assert_eq!(resumed.status, 200);
    got.extend(read(&mut resumed, None));
    assert_eq!(
        got,
        expected(10),
        "each event once, in order, the response last"
    );
    stopping.join().expect("node A stopped");
}

/// One reader of a reply at a time, as on one node: a client that resumed
/// it elsewhere (its first connection half-open, say) takes it over, and the
/// response that was reading it ends with a `retry` hint instead of
/// delivering the rest a second time.
#[test]
fn a_resumption_takes_a_post_reply_over_from_the_response_reading_it() {
    let f = fleet("t-fpost11:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 12, "gap_ms": 200}));
    assert_eq!(read(&mut post, Some(3)), expected(12)[..3].to_vec());
    let seen = post.last_id.clone().expect("an id");
    // The first response stays open; the client resumes on node B.
    let mut resumed = resume(f.b.addr, &session, &seen);
    assert_eq!(resumed.status, 200);
    let rest_of_first = read(&mut post, None);
    assert!(
        !rest_of_first.contains(&"Rcounted 12".to_owned()),
        "the first response went on to the end: {rest_of_first:?}"
    );
    assert_eq!(post.retry, Some(1000), "it ended with a retry hint");
    assert_eq!(read(&mut resumed, None), expected(12)[3..].to_vec());
}

#[test]
fn resumptions_of_a_post_reply_count_against_the_stream_limits() {
    let f = fleet_limited("t-fpost10:", CompatConfig::default(), Some(1));
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 30, "gap_ms": 100}));
    assert_eq!(read(&mut post, Some(2)), expected(30)[..2].to_vec());
    let last = post.last_id.clone().expect("an id");
    post.disconnect();
    let mut first = resume(f.b.addr, &session, &last);
    assert_eq!(first.status, 200);
    assert_eq!(read(&mut first, Some(1)), vec!["P2".to_owned()]);
    // One stream per principal on node B: a second reader is refused.
    let second = resume(f.b.addr, &session, &last).into_response();
    assert_eq!(
        second.status,
        429,
        "{}",
        String::from_utf8_lossy(&second.body)
    );
    assert!(second.header("retry-after").is_some());
    // A refused resumption did not take the reply over: the first reads on.
    assert_eq!(read(&mut first, Some(1)), vec!["P3".to_owned()]);
    first.disconnect();
    // Its slot is freed once the first reader's connection is gone (at its
    // next write).
    let mut again = None;
    for _ in 0..50 {
        let r = resume(f.b.addr, &session, &last);
        if r.status == 200 {
            again = Some(r);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut again = again.expect("resumed once the first reader left");
    assert_eq!(read(&mut again, Some(1)), vec!["P2".to_owned()]);
}

#[test]
fn a_post_reply_whose_node_died_is_gone_not_awaited() {
    let mut f = fleet("t-fpost3:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 100, "gap_ms": 100}));
    assert_eq!(read(&mut post, Some(2)), expected(100)[..2].to_vec());
    let seen = post.last_id.clone().expect("an id");
    post.disconnect();
    // Node A goes, its request with it.
    drop(f.a.take());
    // On node B: what A appended, then the body ends once A's lease lapsed
    // (no response will come); resuming again is 410.
    let mut resumed = resume(f.b.addr, &session, &seen);
    assert_eq!(resumed.status, 200);
    let rest = read(&mut resumed, None);
    assert!(
        rest.iter().all(|l| l.starts_with('P')),
        "no response from a dead node: {rest:?}"
    );
    assert_eq!(rest, expected(100)[2..2 + rest.len()].to_vec());
    let last = resumed.last_id.clone().unwrap_or(seen);
    assert_eq!(
        resume(f.b.addr, &session, &last).into_response().status,
        410
    );
}

#[test]
fn a_delete_takes_a_running_post_replys_history_and_it_is_not_recreated() {
    let f = fleet("t-fpost4:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 20, "gap_ms": 100}));
    assert_eq!(read(&mut post, Some(2)), expected(20)[..2].to_vec());
    let seen = post.last_id.clone().expect("an id");
    assert_eq!(legacy::delete(f.b.addr, &session).status, 200);
    // The reply ends (its history went), and the request's later frames do
    // not bring the history back.
    let rest = read(&mut post, None);
    assert!(
        rest.len() <= 2,
        "the reply ended with its session (within a frame or two): {rest:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let sid = legacy::sid_of(&session);
    let keys = f
        .redis
        .command(&["KEYS", &format!("t-fpost4:sess:{{sessions}}:{sid}:pev*")])
        .expect("redis answers");
    assert!(
        !keys.contains("pev"),
        "a deleted session's POST history is gone: {keys}"
    );
    let score = f
        .redis
        .command(&["ZSCORE", "t-fpost4:sess-all:{sessions}:pev", &sid])
        .expect("redis answers");
    assert_eq!(score.trim(), "$-1", "no longer counted");
    assert_eq!(
        resume(f.b.addr, &session, &seen).into_response().status,
        404
    );
}

#[test]
fn past_the_fleets_bound_a_post_reply_is_served_whole_without_ids() {
    let mut compat = CompatConfig::default();
    compat.max_session_states = 1;
    let f = fleet("t-fpost5:", compat);
    let first = legacy::initialize(f.a());
    let mut kept = call(f.a(), &first, json!({"n": 3, "gap_ms": 50}));
    assert_eq!(read(&mut kept, None), expected(3));
    assert!(kept.last_id.is_some(), "the first session's reply has ids");
    // The fleet keeps one session's POST history (for the resume window):
    // another session's reply comes whole, without ids (nothing to resume).
    let second = legacy::initialize(f.b.addr);
    let mut plain = call(f.b.addr, &second, json!({"n": 3, "gap_ms": 50}));
    assert_eq!(plain.status, 200);
    assert_eq!(read(&mut plain, None), expected(3));
    assert_eq!(plain.last_id, None, "no ids past the bound");
}

/// Reads `post` to its end, then resumes it (on node B, then A, in turns)
/// until its response came or a resumption is 410; 503 (Redis coming back)
/// is retried, at most 300 times 100 ms apart. What was received, and
/// whether the last resumption was 410.
fn read_resuming(
    f: &Fleet,
    session: &str,
    mut post: Exchange,
    mut got: Vec<String>,
) -> (Vec<String>, bool) {
    let mut tries = 0;
    loop {
        got.extend(read(&mut post, None));
        if got.last().is_some_and(|l| l.starts_with('R')) {
            return (got, false);
        }
        // Only this body's ids, as an SDK resumes: every body has one.
        let Some(last) = post.last_id.clone() else {
            panic!("a body ended without an id to resume from: {got:?}");
        };
        loop {
            tries += 1;
            assert!(tries < 300, "no answer but 503 for 30 s: {got:?}");
            let addr = if tries % 2 == 0 { f.a() } else { f.b.addr };
            let resumed = resume(addr, session, &last);
            match resumed.status {
                200 => {
                    post = resumed;
                    break;
                }
                410 => return (got, true),
                503 => std::thread::sleep(Duration::from_millis(100)),
                other => panic!("resumed with {other}"),
            }
        }
    }
}

/// `got` is the reply's events from its start, each once and in order, and
/// all of them unless the reply was gone.
fn assert_exact(got: &[String], n: u64, gone: bool) {
    let all = expected(n);
    assert!(got.len() <= all.len(), "more than sent: {got:?}");
    assert_eq!(got, &all[..got.len()], "a gap or a repeat");
    if !gone {
        assert_eq!(got, all.as_slice(), "not gone, so whole");
    }
}

#[test]
fn a_post_reply_whose_redis_connections_are_cut_is_whole_or_gone_never_gapped() {
    let f = fleet("t-fpost6:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 20, "gap_ms": 50}));
    let first = read(&mut post, Some(3));
    for kind in ["normal", "pubsub"] {
        f.redis
            .command(&["CLIENT", "KILL", "TYPE", kind])
            .expect("redis answers");
    }
    let (got, gone) = read_resuming(&f, &session, post, first);
    assert_exact(&got, 20, gone);
}

#[test]
fn a_post_reply_while_redis_is_paused_past_the_writers_lease_is_gone_not_gapped() {
    let f = fleet("t-fpost7:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 30, "gap_ms": 100}));
    let first = read(&mut post, Some(3));
    // Paused 6 s (the writer's lease is 5 s): what was appended before
    // stays, nothing after it can be, so the reply is gone.
    f.redis.signal("-STOP");
    std::thread::sleep(Duration::from_secs(6));
    f.redis.signal("-CONT");
    let (got, gone) = read_resuming(&f, &session, post, first);
    assert!(gone, "the writer lost its lease: {got:?}");
    assert_exact(&got, 30, gone);
}

#[test]
fn a_post_reply_across_a_redis_restart_is_gone_not_gapped() {
    let mut f = fleet("t-fpost8:", CompatConfig::default());
    let session = legacy::initialize(f.a());
    let mut post = call(f.a(), &session, json!({"n": 30, "gap_ms": 100}));
    let first = read(&mut post, Some(3));
    // Restarted empty: the history went with it.
    f.redis.restart();
    let (got, gone) = read_resuming(&f, &session, post, first);
    assert!(gone, "its history went with Redis: {got:?}");
    assert_exact(&got, 30, gone);
}
