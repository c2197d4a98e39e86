//! A fleet GET stream outliving its holder's node: when the node holding a
//! 2025 session's GET stream drains, the node its client resumes on takes
//! the stream over, and the client gets every event once and in order,
//! those published while it was away and those published after the
//! draining node is gone. Two real nodes on one real `redis-server`.

mod common;

use std::time::Duration;

use common::fleet_notes::{Events, add_note, get, next_updated, notes_node_with, subscribe};
use common::legacy;
use common::redis_server::{RedisServer, redis_bus};
use common::{Event, Exchange};
use genmcp::http::CompatConfig;
use genmcp::protocol::Notification;
use serde_json::json;

/// The updates left on `stream` until it ends, and the last event id it
/// carried.
fn rest_of(mut stream: Exchange) -> (Vec<String>, Option<String>) {
    let mut got = Vec::new();
    while let Some(uri) = next_updated(&mut stream) {
        got.push(uri);
    }
    (got, stream.last_id.clone())
}

/// The value of field `field` of the session's hash in Redis (`""`: none).
fn session_field(redis: &RedisServer, prefix: &str, session: &str, field: &str) -> String {
    let sid = legacy::sid_of(session);
    let key = format!("{prefix}sess:{{sessions}}:{sid}");
    let reply = redis
        .command(&["HGET", &key, field])
        .expect("redis answers");
    // A bulk string (`$<len>\r\n<value>\r\n`) or nil (`$-1`).
    reply.lines().nth(1).unwrap_or("").to_owned()
}

#[test]
fn a_draining_holders_get_stream_is_taken_over_where_its_client_resumes() {
    let redis = RedisServer::start();
    let prefix = "t-handoff:";
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let a = notes_node_with(&buses[0], CompatConfig::default());
    let b = notes_node_with(&buses[1], CompatConfig::default());
    let (a_addr, b_addr) = (a.addr, b.addr);

    let session = legacy::initialize(a_addr);
    let uris: Vec<String> = (0..12)
        .map(|i| add_note(a_addr, &session, json!({"text": format!("note {i}")})))
        .collect();
    for uri in &uris {
        subscribe(a_addr, &session, uri);
    }
    let mut stream = get(a_addr, &session, None);
    assert_eq!(stream.status, 200);
    add_note(b_addr, &session, json!({"uri": uris[0], "text": "before"}));
    assert_eq!(next_updated(&mut stream).as_deref(), Some(uris[0].as_str()));
    let holder_a = session_field(&redis, prefix, &session, "h");

    // Node A drains: its response ends with a `retry` hint, its stream
    // keeps recording while it offers the stream to another node.
    let drain = std::thread::spawn(move || a.stop());
    let (mut got, last) = rest_of(stream);
    got.insert(0, uris[0].clone());
    // Published while the client is away.
    for uri in &uris[1..4] {
        add_note(b_addr, &session, json!({"uri": uri, "text": "away"}));
    }
    // The client resumes on node B, which takes the stream over.
    let last = last.expect("the stream carried ids");
    let mut resumed = get(b_addr, &session, Some(&last));
    assert_eq!(resumed.status, 200);
    for _ in got.len()..4 {
        got.push(next_updated(&mut resumed).expect("a missed update"));
    }
    let holder_b = session_field(&redis, prefix, &session, "h");
    assert_ne!(holder_b, holder_a, "node B holds the stream now");
    assert!(!holder_b.is_empty());
    // Node A is gone; the stream goes on from node B.
    drain.join().expect("node A stopped");
    for uri in &uris[4..12] {
        add_note(b_addr, &session, json!({"uri": uri, "text": "after"}));
    }
    for _ in 4..12 {
        got.push(next_updated(&mut resumed).expect("an update after the handoff"));
    }
    assert_eq!(got, uris, "every update once, in order");
    // Nothing twice: the next update is the next one made.
    add_note(b_addr, &session, json!({"uri": uris[0], "text": "again"}));
    assert_eq!(
        next_updated(&mut resumed).as_deref(),
        Some(uris[0].as_str())
    );
    // No handoff mark is left behind.
    assert_eq!(session_field(&redis, prefix, &session, "ho"), "");
    assert_eq!(session_field(&redis, prefix, &session, "hc"), "");
    drop(b);
}

#[test]
fn events_published_throughout_a_handoff_arrive_once_in_order_or_the_resumption_says_gone() {
    let redis = RedisServer::start();
    let prefix = "t-handoff-busy:";
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let a = notes_node_with(&buses[0], CompatConfig::default());
    let b = notes_node_with(&buses[1], CompatConfig::default());
    let (a_addr, b_addr) = (a.addr, b.addr);
    let session = legacy::initialize(a_addr);
    let uris: Vec<String> = (0..4)
        .map(|i| add_note(a_addr, &session, json!({"text": format!("note {i}")})))
        .collect();
    for uri in &uris {
        subscribe(a_addr, &session, uri);
    }
    let mut stream = get(a_addr, &session, None);
    assert_eq!(stream.status, 200);
    add_note(b_addr, &session, json!({"uri": uris[0], "text": "0"}));
    assert_eq!(next_updated(&mut stream).as_deref(), Some(uris[0].as_str()));

    // A third node publishes updates of the notes in turn, 2 ms apart,
    // for the whole handoff (straight on the bus: the order it publishes in
    // is the order every node hears).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = {
        let (stop, uris) = (stop.clone(), uris.clone());
        let bus: Events = redis_bus(&redis.url(), prefix);
        std::thread::spawn(move || {
            let mut made = vec![uris[0].clone()];
            for i in 1..800 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let uri = &uris[i % uris.len()];
                let update = Notification::resource_updated(uri.as_str()).into();
                bus.try_publish("note-updates", update).expect("published");
                made.push(uri.clone());
                std::thread::sleep(Duration::from_millis(2));
            }
            made
        })
    };
    // Node A drains; the publisher stops half a second after it is gone.
    let drain = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            a.stop();
            std::thread::sleep(Duration::from_millis(500));
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let (mut got, mut last) = rest_of(stream);
    got.insert(0, uris[0].clone());
    // The client resumes on node B until it is gone or the publisher is
    // done and nothing more comes (bounded: 20 resumptions).
    let mut gone = false;
    for _ in 0..20 {
        let id = last.clone().expect("events carry ids");
        let resumed = get(b_addr, &session, Some(&id));
        if resumed.status == 410 {
            gone = true;
            break;
        }
        assert_eq!(resumed.status, 200);
        let (more, next) = read_until_quiet(resumed);
        let quiet = more.is_empty();
        got.extend(more);
        last = next.or(last);
        if quiet && stop.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let made = publisher.join().expect("publisher");
    drain.join().expect("node A stopped");
    // Until every update came or the stream is gone (bounded; a stream
    // whose handoff was refused ends once node A's lease lapses).
    for _ in 0..30 {
        if gone || got.len() >= made.len() {
            break;
        }
        let id = last.clone().expect("events carry ids");
        let resumed = get(b_addr, &session, Some(&id));
        if resumed.status == 410 {
            gone = true;
            break;
        }
        assert_eq!(resumed.status, 200);
        let (more, next) = read_until_quiet(resumed);
        got.extend(more);
        last = next.or(last);
    }
    // Never a duplicate or a gap: what arrived is the start of what was
    // made, in order; all of it unless the resumption said gone.
    assert!(
        made.starts_with(&got),
        "got {} updates, not a prefix of the {} made: {got:?}",
        got.len(),
        made.len()
    );
    assert!(gone || got == made, "neither all updates nor gone");
    drop(b);
}

/// The updates of `stream` until it ends or no update came for 2 s (it is
/// then cut; keep-alives do not count), and the last id it carried.
fn read_until_quiet(mut stream: Exchange) -> (Vec<String>, Option<String>) {
    stream.set_timeout(Duration::from_secs(2));
    let mut got = Vec::new();
    let mut since = std::time::Instant::now();
    while since.elapsed() < Duration::from_secs(2) {
        match stream.try_next_event() {
            Ok(Some(Event::Message(m))) if m["method"] == "notifications/resources/updated" => {
                got.push(m["params"]["uri"].as_str().expect("a uri").to_owned());
                since = std::time::Instant::now();
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    let last = stream.last_id.clone();
    stream.disconnect();
    (got, last)
}

#[test]
fn a_draining_node_that_publishes_withdraws_its_offer_and_the_resumption_ends_in_gone() {
    let redis = RedisServer::start();
    let prefix = "t-handoff-own:";
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let a = notes_node_with(&buses[0], CompatConfig::default());
    let b = notes_node_with(&buses[1], CompatConfig::default());
    let (a_addr, b_addr) = (a.addr, b.addr);
    let session = legacy::initialize(a_addr);
    let uri = add_note(a_addr, &session, json!({"text": "note"}));
    subscribe(a_addr, &session, &uri);
    let mut stream = get(a_addr, &session, None);
    assert_eq!(stream.status, 200);
    add_note(b_addr, &session, json!({"uri": uri, "text": "1"}));
    assert_eq!(next_updated(&mut stream).as_deref(), Some(uri.as_str()));
    let holder_a = session_field(&redis, prefix, &session, "h");

    let drain = std::thread::spawn(move || a.stop());
    let (got, last) = rest_of(stream);
    assert!(got.is_empty(), "{got:?}");
    assert!(
        common::wait_until(Duration::from_secs(5), || !session_field(
            &redis, prefix, &session, "ho"
        )
        .is_empty()),
        "node A offered its stream"
    );
    // Node A publishes while it drains: an event its stream heard before
    // Redis ordered it. The offer is withdrawn, and no node takes over.
    let update = Notification::resource_updated(uri.as_str()).into();
    buses[0].publish("note-updates", update);
    assert!(
        common::wait_until(Duration::from_secs(5), || session_field(
            &redis, prefix, &session, "ho"
        )
        .is_empty()),
        "the offer was withdrawn"
    );
    let last = last.expect("ids");
    let (more, next) = read_until_quiet(get(b_addr, &session, Some(&last)));
    assert_eq!(more, vec![uri.clone()], "the holder recorded its own update");
    assert_eq!(session_field(&redis, prefix, &session, "h"), holder_a);
    drain.join().expect("node A stopped");
    // Node A is gone with the stream it kept: what follows is gone.
    let next = next.unwrap_or(last);
    let mut gone = false;
    for _ in 0..20 {
        let resumed = get(b_addr, &session, Some(&next));
        if resumed.status == 410 {
            gone = true;
            break;
        }
        let (more, _) = read_until_quiet(resumed);
        assert!(more.is_empty(), "an update after the holder left: {more:?}");
    }
    assert!(gone, "the resumption after the drain is 410");
    drop(b);
}
