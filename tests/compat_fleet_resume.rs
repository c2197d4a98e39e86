//! 2025 GET streams resumed on another node of a fleet: two real nodes on one
//! real `redis-server`. The node holding a session's GET stream keeps its
//! events in a Redis stream; a client that reconnects with `Last-Event-ID`
//! to the other node gets every event published while it was away, then the
//! live ones, each once and in order; a resumption while the nodes' Redis
//! connections are cut is 503, and once they are back it gets every event in
//! order or 410, never a silent gap; a replay cut by Redis midway ends
//! cleanly after the last event written; a flooded session's history in
//! Redis stays within its bounds and goes with DELETE.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::fleet_notes::{
    Events, add_note, get, message, next_updated, notes_node_with, session_on, subscribe,
};
use common::legacy;
use common::redis_server::{RedisCluster, RedisServer, redis_bus};
use common::{Event, Exchange};
use genmcp::http::{CompatConfig, ServerThread};
use genmcp::prelude::*;
use serde_json::{Value, json};

/// Waits (bounded) until the session's Redis stream holds `n` entries or
/// more.
fn wait_kept(redis: &RedisServer, key: &str, n: usize) {
    for _ in 0..200 {
        let kept = redis
            .command(&["XLEN", key])
            .and_then(|r| r.trim().trim_start_matches(':').parse::<usize>().ok());
        if kept.is_some_and(|k| k >= n) {
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
    fleet_with(prefix, CompatConfig::default())
}

fn fleet_with(prefix: &str, compat: CompatConfig) -> Fleet {
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let a = notes_node_with(&buses[0], compat.clone());
    let b = notes_node_with(&buses[1], compat);
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
    session_on(f.a.addr, f.b.addr, n)
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
    let ev = format!(
        "t-fresume-cut:sess:{{sessions}}:{}:ev",
        legacy::sid_of(&session)
    );
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
    // The stream's start, the first update and the 50 made while away are
    // kept.
    wait_kept(&f.redis, &ev, 52);

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
    // A response whose read of Redis fails ends with a `retry` hint after
    // the last event it wrote: the client resumes from there (at most five
    // times here).
    let mut got: Vec<String> = Vec::new();
    let mut last = seen;
    for _ in 0..5 {
        let mut resumed = resume_once_redis_is_back(f.b.addr, &session, &last);
        if resumed.status == 410 {
            return;
        }
        while got.len() < expected.len() {
            match next_updated(&mut resumed) {
                Some(uri) => got.push(uri),
                None => break,
            }
        }
        assert_eq!(got, expected[..got.len()].to_vec(), "a gap or a repeat");
        if got.len() == expected.len() {
            return;
        }
        last = resumed.last_id.clone().expect("an id");
    }
    panic!(
        "{} of {} events after five resumptions",
        got.len(),
        expected.len()
    );
}

/// The integer of a RESP reply (`:n`, or a bulk string holding a number).
fn int_reply(reply: Option<String>) -> i64 {
    let reply = reply.expect("redis answers");
    reply
        .lines()
        .filter_map(|l| l.trim_start_matches(':').trim().parse::<i64>().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no integer in {reply:?}"))
}

/// The entry ids in a RESP reply, in order.
fn entry_ids(reply: &str) -> Vec<String> {
    reply
        .lines()
        .filter(|l| {
            l.split_once('-').is_some_and(|(ms, n)| {
                !ms.is_empty()
                    && !n.is_empty()
                    && ms.bytes().all(|b| b.is_ascii_digit())
                    && n.bytes().all(|b| b.is_ascii_digit())
            })
        })
        .map(str::to_owned)
        .collect()
}

/// A field of `XINFO STREAM key` (the line after its name).
fn xinfo(redis: &RedisServer, key: &str, field: &str) -> String {
    let reply = redis
        .command(&["XINFO", "STREAM", key])
        .expect("XINFO answers");
    let mut lines = reply.lines();
    while let Some(l) = lines.next() {
        if l == field {
            let mut v = lines.next().unwrap_or_default();
            if v.starts_with('$') {
                v = lines.next().unwrap_or_default();
            }
            return v.trim_start_matches(':').to_owned();
        }
    }
    panic!("no {field} in XINFO {key} (the stream ended?): {reply}");
}

/// Publishes an update of each URI in turn, as a note's edit does (paced:
/// 10 every 10 ms), then waits (bounded) until the holder appended them all.
fn flood(bus: &Events, redis: &RedisServer, ev: &str, uris: &[String]) {
    let before: i64 = xinfo(redis, ev, "entries-added").parse().expect("a count");
    for (i, uri) in uris.iter().enumerate() {
        bus.publish(
            genmcp_cli::demo::topics::NOTE_UPDATES,
            Notification::resource_updated(uri.as_str()).into(),
        );
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let want = before + i64::try_from(uris.len()).expect("a count");
    for _ in 0..600 {
        let added: i64 = xinfo(redis, ev, "entries-added").parse().expect("a count");
        if added >= want {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the holder never appended the {} updates", uris.len());
}

/// A flood of events while the client is away: the session's history in
/// Redis keeps at most `max_events_per_session` entries and
/// `max_event_bytes_per_session` bytes, the oldest dropped first; a
/// resumption from before what is kept gets 410, one from within it gets
/// exactly what followed; the history expires within 30 s unless its
/// stream refreshes it, and DELETE removes it.
#[test]
fn a_flooded_sessions_history_in_redis_stays_within_its_bounds_and_goes_with_delete() {
    let mut compat = CompatConfig::default();
    compat.max_events_per_session = 100;
    compat.max_event_bytes_per_session = 4096;
    let f = fleet_with("t-fresume-flood:", compat);
    let (session, uris, stream) = session_with_notes(&f, 4);
    let seen = stream.last_id.clone().expect("events carry ids");
    stream.disconnect();
    let sid = legacy::sid_of(&session);
    let ev = format!("t-fresume-flood:sess:{{sessions}}:{sid}:ev");
    let evb = format!("{ev}b");

    let published: Vec<String> = (0..2000).map(|i| uris[i % uris.len()].clone()).collect();
    flood(&f._buses[0], &f.redis, &ev, &published);
    let kept = int_reply(f.redis.command(&["XLEN", &ev]));
    let bytes = int_reply(f.redis.command(&["GET", &evb]));
    let memory = int_reply(f.redis.command(&["MEMORY", "USAGE", &ev, "SAMPLES", "0"]));
    eprintln!("after 2000 events: {kept} kept, {bytes} bytes of messages, MEMORY USAGE {memory}");
    assert!(kept > 0 && kept <= 100, "{kept} entries kept");
    assert!(bytes > 0 && bytes <= 4096, "{bytes} bytes kept");
    let ttl = int_reply(f.redis.command(&["PTTL", &ev]));
    assert!(ttl > 0 && ttl <= 30_000, "the history expires in {ttl} ms");

    // Older than what is kept: 410, never a silent gap.
    let refused = get(f.b.addr, &session, Some(&seen));
    assert_eq!(refused.status, 410);
    drop(refused);
    // From within what is kept: exactly the events that followed.
    let last6 = f
        .redis
        .command(&["XREVRANGE", &ev, "+", "-", "COUNT", "6"])
        .expect("XREVRANGE answers");
    let ids = entry_ids(&last6);
    assert_eq!(ids.len(), 6, "{last6}");
    let (tag, _) = seen.split_once("-0-").expect("a fleet id");
    let mut resumed = get(f.b.addr, &session, Some(&format!("{tag}-0-{}", ids[5])));
    assert_eq!(resumed.status, 200);
    let got: Vec<String> = (0..5)
        .map(|_| next_updated(&mut resumed).expect("an update"))
        .collect();
    assert_eq!(got, published[published.len() - 5..].to_vec());
    drop(resumed);

    // DELETE removes the history with the session.
    let deleted = legacy::delete(f.a.addr, &session);
    assert_eq!(deleted.status, 200);
    let left = f
        .redis
        .command(&["KEYS", &format!("*{sid}:ev*")])
        .expect("KEYS answers");
    assert_eq!(left.trim(), "*0", "history left after DELETE: {left}");
}

/// A replay that Redis stops answering midway (its connections cut, the
/// server stalled) ends cleanly after the last event it wrote: what the
/// client got is an exact prefix of what was published, in order; once
/// Redis is back a resumption from the last id gets exactly the rest, or
/// 410; never a gap.
#[test]
fn a_replay_cut_by_redis_midway_ends_cleanly_and_resumes_without_a_gap() {
    let mut compat = CompatConfig::default();
    compat.max_events_per_session = 5_000;
    compat.max_event_bytes_per_session = 16 * 1024 * 1024;
    let f = fleet_with("t-fresume-midway:", compat);
    let session = legacy::initialize(f.a.addr);
    // Long URIs: each event is about 1.9 KB, so the replay (about 7.6 MB)
    // outgrows the sockets' buffers and waits on the client midway.
    let uris: Vec<String> = (0..8)
        .map(|i| format!("note://long/{i}/{}", "x".repeat(1800)))
        .collect();
    for uri in &uris {
        subscribe(f.a.addr, &session, uri);
    }
    let mut stream = get(f.a.addr, &session, None);
    assert_eq!(stream.status, 200);
    let ev = format!(
        "t-fresume-midway:sess:{{sessions}}:{}:ev",
        legacy::sid_of(&session)
    );
    flood(&f._buses[0], &f.redis, &ev, &uris[..1]);
    assert_eq!(next_updated(&mut stream).as_deref(), Some(uris[0].as_str()));
    let seen = stream.last_id.clone().expect("events carry ids");
    stream.disconnect();
    let published: Vec<String> = (0..4000).map(|i| uris[i % uris.len()].clone()).collect();
    flood(&f._buses[0], &f.redis, &ev, &published);

    // Replayed on node B; the client reads one event, then lags.
    let mut replay = get(f.b.addr, &session, Some(&seen));
    assert_eq!(replay.status, 200);
    replay.set_timeout(Duration::from_secs(20));
    let mut got = vec![next_updated(&mut replay).expect("an update")];
    std::thread::sleep(Duration::from_millis(500));
    // Redis goes away midway: connections cut, the server stalled.
    cut(&f);
    f.redis.signal("-STOP");
    while got.len() <= published.len() {
        match replay.try_next_event() {
            Ok(Some(Event::Message(m))) if m["method"] == "notifications/resources/updated" => {
                got.push(m["params"]["uri"].as_str().expect("a uri").to_owned());
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    f.redis.signal("-CONT");
    assert!(
        got.len() < published.len(),
        "the replay was not cut midway ({} events)",
        got.len()
    );
    assert_eq!(got, published[..got.len()].to_vec(), "a gap or a repeat");
    let last = replay.last_id.clone().expect("an id");

    let mut resumed = resume_once_redis_is_back(f.a.addr, &session, &last);
    eprintln!(
        "replay cut after {} of {} events; resumed with {}",
        got.len(),
        published.len(),
        resumed.status
    );
    if resumed.status == 410 {
        return;
    }
    let rest: Vec<String> = (got.len()..published.len())
        .map(|_| next_updated(&mut resumed).expect("an update"))
        .collect();
    assert_eq!(rest, published[got.len()..].to_vec(), "a gap or a repeat");
}

/// The figures of `docs/compat-2025.md`: at the default bounds (1,000
/// events, 1 MiB of messages per session), a session flooded with small
/// events keeps 1,000 of them, and one flooded with about 1.9 KB events
/// keeps at most 1 MiB of them; Redis's `MEMORY USAGE` of the stream is
/// printed (`--nocapture`).
#[test]
fn a_flooded_sessions_history_in_redis_stays_within_the_default_bounds() {
    let f = fleet("t-fresume-defaults:");
    let (session, uris, stream) = session_with_notes(&f, 4);
    let long: Vec<String> = (0..4)
        .map(|i| format!("note://long/{i}/{}", "x".repeat(1800)))
        .collect();
    for uri in &long {
        subscribe(f.a.addr, &session, uri);
    }
    stream.disconnect();
    let ev = format!(
        "t-fresume-defaults:sess:{{sessions}}:{}:ev",
        legacy::sid_of(&session)
    );
    let evb = format!("{ev}b");
    for (what, pool, n) in [("small", &uris, 3000), ("1.9 KB", &long, 1500)] {
        let published: Vec<String> = (0..n).map(|i| pool[i % pool.len()].clone()).collect();
        flood(&f._buses[0], &f.redis, &ev, &published);
        let kept = int_reply(f.redis.command(&["XLEN", &ev]));
        let bytes = int_reply(f.redis.command(&["GET", &evb]));
        let memory = int_reply(f.redis.command(&["MEMORY", "USAGE", &ev, "SAMPLES", "0"]));
        eprintln!(
            "{n} {what} events: {kept} kept, {bytes} bytes of messages, MEMORY USAGE {memory} bytes"
        );
        assert!(kept <= 1000, "{kept} entries kept");
        assert!(bytes <= 1024 * 1024, "{bytes} bytes kept");
    }
}

/// The same on a Redis Cluster: a session's history shares the `{sessions}`
/// slot with its hash, so every script runs there; a GET stream cut while
/// events are published resumes on the other node, each event once and in
/// order.
#[test]
fn a_get_stream_resumes_on_another_node_of_a_redis_cluster_fleet() {
    let cluster = RedisCluster::start();
    let prefix = "t-fresume-cluster:";
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&cluster.url(), prefix)).collect();
    let a = notes_node_with(&buses[0], CompatConfig::default());
    let b = notes_node_with(&buses[1], CompatConfig::default());
    let session = legacy::initialize(a.addr);
    let uris: Vec<String> = (0..4)
        .map(|i| add_note(a.addr, &session, json!({"text": format!("note {i}")})))
        .collect();
    for uri in &uris {
        subscribe(a.addr, &session, uri);
    }
    let mut stream = get(a.addr, &session, None);
    assert_eq!(stream.status, 200);
    add_note(b.addr, &session, json!({"uri": uris[0], "text": "first"}));
    assert_eq!(next_updated(&mut stream).as_deref(), Some(uris[0].as_str()));
    let seen = stream.last_id.clone().expect("events carry ids");
    stream.disconnect();
    for uri in &uris[1..] {
        add_note(b.addr, &session, json!({"uri": uri, "text": "away"}));
    }
    let mut resumed = get(b.addr, &session, Some(&seen));
    assert_eq!(resumed.status, 200);
    let got: Vec<String> = (1..4)
        .map(|_| next_updated(&mut resumed).expect("an update"))
        .collect();
    assert_eq!(got, uris[1..].to_vec());
}

/// The next message of `method` (others and keep-alives skipped, at most 300
/// events), `None` when the stream ended.
fn next_of(stream: &mut Exchange, method: &str) -> Option<Value> {
    for _ in 0..300 {
        match stream.try_next_event().expect("an event within 10 s")? {
            Event::Message(m) if m["method"] == method => return Some(m),
            _ => {}
        }
    }
    panic!("no {method} within 300 events");
}

/// A stream whose client left is history, not a live session: it stops
/// counting against the fleet's bound (another session takes the one
/// place), its resumption is refused while the fleet is full (503, the
/// fleet's answer, never served uncounted), and once there is room again
/// the resumption gets what was published meanwhile, refused attempt
/// included.
#[test]
fn a_stream_whose_client_left_counts_again_only_when_resumed() {
    let mut compat = CompatConfig::default();
    compat.max_session_states = 1;
    let f = fleet_with("t-fresume-count:", compat);
    const LIST: &str = "notifications/resources/list_changed";
    let first = legacy::initialize(f.a.addr);
    let mut stream = get(f.a.addr, &first, None);
    assert_eq!(stream.status, 200);
    add_note(f.b.addr, &first, json!({"text": "one"}));
    next_of(&mut stream, LIST).expect("a list change");
    let seen = stream.last_id.clone().expect("events carry ids");
    stream.disconnect();

    // The one place of the fleet goes to another session once the first
    // one's client left.
    let second = legacy::initialize(f.b.addr);
    let uri = add_note(f.b.addr, &second, json!({"text": "two"}));
    let took = (0..100).any(|_| {
        let r = legacy::request(
            f.b.addr,
            &second,
            json!("sub"),
            "resources/subscribe",
            json!({"uri": uri}),
        );
        let ok = message(&r).get("result").is_some();
        if !ok {
            std::thread::sleep(Duration::from_millis(100));
        }
        ok
    });
    assert!(took, "the stream whose client left still counted");

    // Published while the first client is away; its resumption is refused
    // while the fleet is full.
    add_note(f.a.addr, &second, json!({"text": "three"}));
    let refused = get(f.b.addr, &first, Some(&seen));
    assert_eq!(refused.status, 503, "a resumption served uncounted");
    let body = refused.into_response().body;
    assert!(String::from_utf8_lossy(&body).contains("Server busy"));

    // Room again: the resumption gets what it missed.
    let r = legacy::request(
        f.b.addr,
        &second,
        json!("unsub"),
        "resources/unsubscribe",
        json!({"uri": uri}),
    );
    assert_eq!(message(&r)["result"], json!({}), "{}", message(&r));
    let mut resumed = get(f.b.addr, &first, Some(&seen));
    assert_eq!(resumed.status, 200);
    // Two list changes: "two" and "three" were added while away.
    next_of(&mut resumed, LIST).expect("a list change");
    next_of(&mut resumed, LIST).expect("a list change");
}
