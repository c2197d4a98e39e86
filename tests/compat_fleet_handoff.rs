//! A fleet GET stream outliving its holder's node: when the node holding a
//! 2025 session's GET stream drains, the node its client resumes on takes
//! the stream over, and the client gets every event once and in order,
//! those published while it was away and those published after the
//! draining node is gone. Two real nodes on one real `redis-server`.

mod common;

use std::time::Duration;

use common::Exchange;
use common::fleet_notes::{
    Events, Resumed, add_note, get, next_updated, notes_node_with, read_until_quiet, resume_once,
    resume_until, session_on,
};
use common::legacy;
use common::redis_server::{RedisServer, redis_bus};
use genmcp::http::{CompatConfig, ServerThread};
use genmcp::protocol::Notification;
use serde_json::json;

/// How long a resumed stream is read without an update before it is cut.
const QUIET: Duration = Duration::from_secs(2);

/// Two notes nodes on one `redis-server`, their buses under `prefix`.
struct Pair {
    redis: RedisServer,
    buses: Vec<Events>,
    a: ServerThread,
    b: ServerThread,
}

fn pair(prefix: &str) -> Pair {
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    let a = notes_node_with(&buses[0], CompatConfig::default());
    let b = notes_node_with(&buses[1], CompatConfig::default());
    Pair { redis, buses, a, b }
}

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
    let prefix = "t-handoff:";
    let Pair { redis, a, b, .. } = pair(prefix);
    let (a_addr, b_addr) = (a.addr, b.addr);
    let (session, uris, stream) = session_on(a_addr, b_addr, 12);
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
    let prefix = "t-handoff-busy:";
    let Pair { redis, a, b, .. } = pair(prefix);
    let (a_addr, b_addr) = (a.addr, b.addr);
    let (session, uris, stream) = session_on(a_addr, b_addr, 4);

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
        match resume_once(b_addr, &session, (&mut got, &mut last), QUIET) {
            Resumed::Gone => {
                gone = true;
                break;
            }
            Resumed::Read(0) if stop.load(std::sync::atomic::Ordering::SeqCst) => break,
            Resumed::Read(_) => {}
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let made = publisher.join().expect("publisher");
    drain.join().expect("node A stopped");
    // Until every update came or the stream is gone (bounded; a stream
    // whose handoff was refused ends once node A's lease lapses).
    if !gone {
        let wanted = (made.len(), QUIET, 30);
        gone = resume_until(b_addr, &session, (&mut got, &mut last), wanted);
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

#[test]
fn a_draining_node_that_publishes_withdraws_its_offer_and_the_resumption_ends_in_gone() {
    let prefix = "t-handoff-own:";
    let Pair {
        redis, buses, a, b, ..
    } = pair(prefix);
    let (a_addr, b_addr) = (a.addr, b.addr);
    let (session, uris, stream) = session_on(a_addr, b_addr, 1);
    let uri = uris[0].clone();
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
    let (more, next) = read_until_quiet(get(b_addr, &session, Some(&last)), QUIET);
    assert_eq!(
        more,
        vec![uri.clone()],
        "the holder recorded its own update"
    );
    assert_eq!(session_field(&redis, prefix, &session, "h"), holder_a);
    drain.join().expect("node A stopped");
    // Node A is gone with the stream it kept: what follows is gone.
    let mut last = Some(next.unwrap_or(last));
    let mut after = Vec::new();
    let mut gone = false;
    for _ in 0..20 {
        if resume_once(b_addr, &session, (&mut after, &mut last), QUIET) == Resumed::Gone {
            gone = true;
            break;
        }
        assert!(
            after.is_empty(),
            "an update after the holder left: {after:?}"
        );
    }
    assert!(gone, "the resumption after the drain is 410");
    drop(b);
}

#[test]
fn a_drain_shorter_than_the_configured_one_ends_an_offered_stream_within_it() {
    use actix_web::{App, HttpServer};
    use common::user_server::UserServer;
    use genmcp::http::Endpoint;

    let prefix = "t-handoff-short:";
    let redis = RedisServer::start();
    let buses: Vec<Events> = (0..2).map(|_| redis_bus(&redis.url(), prefix)).collect();
    // Node A, mounted by an application whose drain is configured for 30 s
    // but which drains for 2 s when it stops.
    let mut config = common::config();
    config.workers = 2;
    config.keep_alive = Duration::from_millis(100);
    config.drain_timeout = Duration::from_secs(30);
    config.compat = Some(CompatConfig::default());
    let bus = buses[0].clone();
    let a = UserServer::spawn(move || {
        let suite = genmcp_cli::demo::suite_with(bus, Some(common::fleet_notes::key())).0;
        let mcp = Endpoint::new(suite, config);
        let drain = mcp.drain_handle();
        let http = HttpServer::new(move || App::new().configure(genmcp::http::mount(&mcp)))
            .workers(2)
            .disable_signals()
            .shutdown_timeout(1)
            .bind(("127.0.0.1", 0))?;
        let addr = http.addrs()[0];
        Ok((http.run(), addr, drain))
    });
    let b = notes_node_with(&buses[1], CompatConfig::default());
    let (_session, _uris, stream) = session_on(a.addr, b.addr, 2);
    // Nobody resumes: the offered stream must still end within the 2 s
    // drain, not at the configured 30 s.
    let drain = std::thread::spawn(move || a.stop_within(Duration::from_secs(2)));
    let (_, last) = rest_of(stream);
    assert!(last.is_some(), "the stream carried ids");
    assert!(
        drain.join().expect("node A stopped"),
        "the 2 s drain finished in time"
    );
    drop(b);
}
