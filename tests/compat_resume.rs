//! Resumable 2025 streams over real HTTP: every event of a session's GET
//! stream carries an `id:`, a client that reconnects with `Last-Event-ID`
//! gets what it missed and then the live events, in order and once; an id of
//! another session replays nothing (400); an id older than what is kept gets
//! 410, never a silent gap; SSE polling (`max_stream_duration`) closes a
//! stream with a `retry` hint and loses nothing; the 2026-07-28 path has no
//! ids and ignores `Last-Event-ID`.

mod common;

use std::time::Duration;

use common::legacy;
use common::probe::{self, Mode, send};
use common::{Exchange, Response, wait_until};
use genmcp::prelude::*;
use serde_json::{Map, Value, json};

fn caps() -> SubscriptionCapabilities {
    SubscriptionCapabilities::none().with_tools_list_changed(true)
}

/// A list change numbered `n` (in its `_meta`, which a 2025 stream keeps).
fn numbered(n: u64) -> probe::Msg {
    let mut params = Map::new();
    params.insert("_meta".into(), json!({"n": n}));
    send(Notification::new(
        "notifications/tools/list_changed",
        params,
    ))
}

fn number(v: &Value) -> u64 {
    v["params"]["_meta"]["n"]
        .as_u64()
        .expect("a numbered event")
}

/// The session's GET stream, resumed after `last_event_id` when given.
fn get(addr: std::net::SocketAddr, session: &str, last_event_id: Option<&str>) -> Exchange {
    let mut h = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("MCP-Protocol-Version".to_owned(), legacy::LEGACY.to_owned()),
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
    ];
    if let Some(id) = last_event_id {
        h.push(("Last-Event-ID".to_owned(), id.to_owned()));
    }
    Exchange::open_with(addr, "GET", &h, b"")
}

/// Reads `count` numbered events within 10 s.
fn read_numbers(stream: &mut Exchange, count: usize) -> Vec<u64> {
    stream.set_timeout(Duration::from_secs(10));
    (0..count)
        .map(|_| number(&stream.next_message().expect("an event")))
        .collect()
}

fn error_message(resp: &Response) -> String {
    resp.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn compat_a_get_stream_cut_while_events_are_published_resumes_each_event_once_in_order() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    let mut stream = get(srv.addr(), &session, None);
    assert_eq!(stream.status, 200);
    srv.wait_subscribers(1);
    for n in 0..20 {
        srv.bus.publish("all", numbered(n));
    }
    assert_eq!(read_numbers(&mut stream, 20), (0..20).collect::<Vec<_>>());
    let seen = stream.last_id.clone().expect("events carry ids");
    stream.disconnect();
    // Published while the client is away: the session's stream runs on.
    for n in 20..50 {
        srv.bus.publish("all", numbered(n));
    }
    assert!(srv.closed().is_empty(), "the stream was not closed");
    let mut resumed = get(srv.addr(), &session, Some(&seen));
    assert_eq!(resumed.status, 200);
    for n in 50..60 {
        srv.bus.publish("all", numbered(n));
    }
    assert_eq!(read_numbers(&mut resumed, 40), (20..60).collect::<Vec<_>>());
    // Nothing twice: the next event is the next one published.
    srv.bus.publish("all", numbered(60));
    assert_eq!(read_numbers(&mut resumed, 1), vec![60]);
    // Resuming once more from a later id replays only what followed it.
    let later = resumed.last_id.clone().expect("an id");
    resumed.disconnect();
    srv.bus.publish("all", numbered(61));
    let mut again = get(srv.addr(), &session, Some(&later));
    assert_eq!(read_numbers(&mut again, 1), vec![61]);
    assert_eq!(srv.metrics().open_streams, 1, "one stream actor throughout");
}

#[test]
fn compat_a_last_event_id_of_another_session_replays_nothing() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let a = legacy::initialize(srv.addr());
    let b = legacy::initialize(srv.addr());
    let mut stream_a = get(srv.addr(), &a, None);
    srv.wait_subscribers(1);
    srv.bus.publish("all", numbered(1));
    assert_eq!(read_numbers(&mut stream_a, 1), vec![1]);
    let a_id = stream_a.last_id.clone().expect("an id");
    let mut stream_b = get(srv.addr(), &b, None);
    srv.wait_subscribers(2);
    srv.bus.publish("all", numbered(2));
    assert_eq!(read_numbers(&mut stream_b, 1), vec![2]);
    stream_b.disconnect();
    // B presents A's id: nothing of A's (nor of B's) is replayed.
    let refused = get(srv.addr(), &b, Some(&a_id));
    assert_eq!(refused.status, 400);
    let refused = refused.into_response();
    assert!(error_message(&refused).contains("Last-Event-ID"));
    assert!(!String::from_utf8_lossy(&refused.body).contains("\"n\""));
    // A forged id of the right shape is refused the same way.
    let forged = format!("{}-0-0", "0".repeat(16));
    assert_eq!(get(srv.addr(), &b, Some(&forged)).status, 400);
    // A's own stream goes on.
    srv.bus.publish("all", numbered(3));
    assert_eq!(read_numbers(&mut stream_a, 2), vec![2, 3]);
}

#[test]
fn compat_an_id_older_than_what_is_kept_gets_410_not_a_gap() {
    let mut config = probe::config();
    let mut compat = genmcp::http::CompatConfig::default();
    compat.max_events_per_session = 5;
    config.compat = Some(compat);
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let mut stream = get(srv.addr(), &session, None);
    srv.wait_subscribers(1);
    srv.bus.publish("all", numbered(0));
    assert_eq!(read_numbers(&mut stream, 1), vec![0]);
    let old = stream.last_id.clone().expect("an id");
    stream.disconnect();
    for n in 1..=12 {
        srv.bus.publish("all", numbered(n));
    }
    // A GET without an id reads on from the live end; once it saw event 13,
    // every earlier one is in the log (one stream, in order).
    let mut fresh = get(srv.addr(), &session, None);
    assert_eq!(fresh.status, 200);
    srv.bus.publish("all", numbered(13));
    fresh.set_timeout(Duration::from_secs(10));
    while number(&fresh.next_message().expect("an event")) != 13 {}
    // The old id is older than the 5 events kept: 410, not a silent gap.
    let gone = get(srv.addr(), &session, Some(&old));
    assert_eq!(gone.status, 410);
    let gone = gone.into_response();
    assert!(error_message(&gone).contains("at most 5 events"));
    // The stream itself lives on.
    srv.bus.publish("all", numbered(14));
    assert_eq!(read_numbers(&mut fresh, 1), vec![14]);
}

#[test]
fn compat_sse_polling_closes_the_stream_with_a_retry_hint_and_loses_nothing() {
    let mut config = probe::config();
    let mut compat = genmcp::http::CompatConfig::default();
    compat.max_stream_duration = Some(Duration::from_millis(300));
    compat.retry = Duration::from_millis(50);
    config.compat = Some(compat);
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let mut stream = get(srv.addr(), &session, None);
    srv.wait_subscribers(1);
    let mut got = Vec::new();
    let mut next = 0u64;
    // Five rounds: ten events on the open stream, the server closes it (after
    // 300 ms) with a retry hint, ten more while the client is away, and the
    // client reconnects with the last id it saw.
    for _ in 0..5 {
        for _ in 0..10 {
            srv.bus.publish("all", numbered(next));
            next += 1;
        }
        stream.set_timeout(Duration::from_secs(10));
        while let Some(v) = stream.next_message() {
            got.push(number(&v));
        }
        assert_eq!(stream.retry, Some(50), "a retry hint before the close");
        for _ in 0..10 {
            srv.bus.publish("all", numbered(next));
            next += 1;
        }
        let last = stream.last_id.clone().expect("an id before the close");
        stream = get(srv.addr(), &session, Some(&last));
        assert_eq!(stream.status, 200);
    }
    while let Some(v) = stream.next_message() {
        got.push(number(&v));
    }
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    assert!(srv.closed().is_empty(), "one stream actor throughout");
}

#[test]
fn compat_a_stream_whose_client_stays_away_ends_after_the_resume_window() {
    let mut config = probe::config();
    config.keep_alive = Duration::from_millis(50);
    let mut compat = genmcp::http::CompatConfig::default();
    compat.resume_window = Duration::from_millis(600);
    config.compat = Some(compat);
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let mut stream = get(srv.addr(), &session, None);
    srv.wait_subscribers(1);
    srv.bus.publish("all", numbered(1));
    assert_eq!(read_numbers(&mut stream, 1), vec![1]);
    let seen = stream.last_id.clone().expect("an id");
    stream.disconnect();
    // handle_close runs once the window passed without a client.
    assert!(wait_until(Duration::from_secs(10), || srv
        .closed()
        .contains(&RequestId::String("get-1".into()))));
    assert_eq!(get(srv.addr(), &session, Some(&seen)).status, 410);
    // A new stream opens.
    let mut again = get(srv.addr(), &session, None);
    assert_eq!(again.status, 200);
    srv.wait_subscribers(1);
    srv.bus.publish("all", numbered(2));
    assert_eq!(read_numbers(&mut again, 1), vec![2]);
    // The old stream's id names nothing of the new one: 410, not a replay
    // with a silent gap.
    assert_eq!(get(srv.addr(), &session, Some(&seen)).status, 410);
}

#[test]
fn compat_an_event_larger_than_the_session_bound_still_reaches_a_connected_client() {
    let mut config = probe::config();
    let mut compat = genmcp::http::CompatConfig::default();
    compat.max_event_bytes_per_session = 4096;
    config.compat = Some(compat);
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let mut stream = get(srv.addr(), &session, None);
    srv.wait_subscribers(1);
    srv.bus.publish("all", numbered(1));
    assert_eq!(read_numbers(&mut stream, 1), vec![1]);
    // 16 KiB in one event, four times the session's byte bound.
    let mut params = Map::new();
    params.insert(
        "_meta".into(),
        json!({"n": 2, "pad": "x".repeat(16 * 1024)}),
    );
    srv.bus.publish(
        "all",
        send(Notification::new(
            "notifications/tools/list_changed",
            params,
        )),
    );
    assert_eq!(read_numbers(&mut stream, 1), vec![2]);
    srv.bus.publish("all", numbered(3));
    assert_eq!(read_numbers(&mut stream, 1), vec![3]);
}

#[test]
fn compat_a_get_stream_opens_with_a_priming_event_and_2026_streams_have_no_ids() {
    let mut config = probe::config();
    config.keep_alive = Duration::from_millis(100);
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let mut stream = get(srv.addr(), &session, None);
    srv.wait_subscribers(1);
    srv.bus.publish("all", numbered(7));
    stream.set_timeout(Duration::from_secs(5));
    let mut raw = String::new();
    let mut buf = [0u8; 4096];
    while !raw.contains("\"n\":7") {
        let n = stream.read_raw(&mut buf);
        assert!(n > 0, "the stream ended: {raw}");
        raw.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    // The priming event first: an id, a retry hint, empty data; then each
    // event with an id of its own.
    assert!(raw.starts_with("id: "), "{raw}");
    let (priming, rest) = raw.split_once("\n\n").expect("a whole event");
    assert!(priming.ends_with("\nretry: 1000\ndata: "), "{raw}");
    let rest = rest.trim_start_matches(": keepalive\n\n");
    assert!(rest.starts_with("id: "), "{raw}");
    assert!(rest.contains("\nevent: message\ndata: {"), "{raw}");
    assert_ne!(
        priming.lines().next(),
        rest.lines().next(),
        "each event has its own id"
    );

    // 2026-07-28: a listen stream with Last-Event-ID has no ids, as before.
    let mut h = common::headers("subscriptions/listen", None);
    h.push(("Last-Event-ID".into(), "whatever-0-0".into()));
    let body = common::request(
        json!("l1"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut listen = Exchange::open(srv.addr(), &h, body.to_string().as_bytes());
    assert_eq!(listen.status, 200);
    srv.wait_subscribers(2);
    srv.bus.publish("all", numbered(8));
    listen.set_timeout(Duration::from_secs(5));
    let mut messages = 0;
    while messages < 2 {
        match listen.next_event().expect("an event") {
            common::Event::Message(_) => messages += 1,
            common::Event::Comment(_) => {}
        }
    }
    assert_eq!(listen.last_id, None, "no ids on a 2026-07-28 stream");
    assert_eq!(listen.retry, None);
}

fn with_token(mut h: Vec<(String, String)>, token: &str) -> Vec<(String, String)> {
    h.push(("Authorization".to_owned(), format!("Bearer {token}")));
    h
}

/// A 2025 session of principal `token`.
fn initialize_as(addr: std::net::SocketAddr, token: &str) -> String {
    let mut h = with_token(legacy::headers(None), token);
    h.retain(|(k, _)| k != "MCP-Protocol-Version");
    let resp = common::post(
        addr,
        &h,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": legacy::LEGACY, "capabilities": {},
            "clientInfo": {"name": "legacy-tests", "version": "1"}}}),
    );
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let session = resp.header("mcp-session-id").expect("a session").to_owned();
    let n = common::post(
        addr,
        &with_token(legacy::headers(Some(&session)), token),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(n.status, 202);
    session
}

fn get_as(
    addr: std::net::SocketAddr,
    token: &str,
    session: &str,
    last_event_id: Option<&str>,
) -> Exchange {
    let mut h = with_token(
        vec![
            ("Accept".to_owned(), "text/event-stream".to_owned()),
            ("MCP-Protocol-Version".to_owned(), legacy::LEGACY.to_owned()),
            ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ],
        token,
    );
    if let Some(id) = last_event_id {
        h.push(("Last-Event-ID".to_owned(), id.to_owned()));
    }
    Exchange::open_with(addr, "GET", &h, b"")
}

#[test]
fn compat_a_last_event_id_of_another_principal_replays_nothing() {
    let mut config = probe::config();
    config.assigns = Some(std::sync::Arc::new(|req: &actix_web::HttpRequest| {
        let user = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("anonymous");
        Ok(Assigns::new().with(genmcp::mux::Principal::new(user)))
    }));
    let srv = probe::start(Mode::Accept, caps(), config);
    let ada = initialize_as(srv.addr(), "ada");
    let bob = initialize_as(srv.addr(), "bob");
    let mut stream = get_as(srv.addr(), "ada", &ada, None);
    assert_eq!(stream.status, 200);
    srv.wait_subscribers(1);
    srv.bus.publish("all", numbered(1));
    assert_eq!(read_numbers(&mut stream, 1), vec![1]);
    let ada_id = stream.last_id.clone().expect("an id");
    stream.disconnect();
    srv.bus.publish("all", numbered(2));
    // Bob presents ada's id on his own session: nothing is replayed.
    let refused = get_as(srv.addr(), "bob", &bob, Some(&ada_id));
    assert_eq!(refused.status, 400);
    // Nor on ada's session: it is not his.
    let refused = get_as(srv.addr(), "bob", &ada, Some(&ada_id));
    assert_eq!(refused.status, 404);
    // Ada herself resumes after it.
    let mut resumed = get_as(srv.addr(), "ada", &ada, Some(&ada_id));
    assert_eq!(resumed.status, 200);
    assert_eq!(read_numbers(&mut resumed, 1), vec![2]);
}

/// A POST reply whose first frame comes after its session was DELETEd is
/// served whole but keeps nothing: the deleted session's log is not made
/// again (it would hold a place of `max_session_states` for the resume
/// window).
#[test]
fn compat_a_post_reply_begun_after_its_session_was_deleted_keeps_no_log() {
    use common::counting::{call, counting_tool, expected, read};
    let mut compat = genmcp::http::CompatConfig::default();
    compat.max_session_states = 1;
    let mut config = common::config();
    config.compat = Some(compat);
    let srv = genmcp::http::ServerThread::spawn(
        || {
            let (suite, _) = genmcp_cli::demo::suite();
            suite.catalog().add_tool(counting_tool());
            suite
        },
        config,
    )
    .expect("server starts");
    let addr = srv.addr;
    let first = legacy::initialize(addr);
    let reply = {
        let first = first.clone();
        // Its first frame comes 1 s in: the DELETE goes before it.
        std::thread::spawn(move || {
            let args = json!({"n": 2, "gap_ms": 1000, "tag": "deleted-while-running"});
            let mut post = call(addr, &first, args);
            (post.status, read(&mut post, None), post.last_id.clone())
        })
    };
    assert!(
        wait_until(Duration::from_secs(20), || common::counting::started(
            "deleted-while-running"
        )),
        "the call started"
    );
    assert_eq!(legacy::delete(addr, &first).status, 200);
    let (status, got, last_id) = reply.join().expect("the call");
    assert_eq!(status, 200);
    assert_eq!(got, expected(2), "the request ran to its end");
    assert_eq!(last_id, None, "nothing kept for a deleted session");
    // The one place for a session's log is free for another session.
    let second = legacy::initialize(addr);
    let mut post = call(addr, &second, json!({"n": 1, "gap_ms": 10}));
    assert_eq!(read(&mut post, None), expected(1));
    assert!(post.last_id.is_some(), "the next session's reply has ids");
}
