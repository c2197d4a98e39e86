//! The 2025-era GET stream over real HTTP: run by the same stream actor as a
//! listen, without acknowledgement, subscription ids or completion result; one
//! per session (409); ended by DELETE (handle_close runs), by a handler panic
//! (that stream only) and by shutdown; fed by resources/subscribe.

mod common;

use std::time::Duration;

use common::legacy;
use common::probe::{self, Mode, Msg, send, sub_id};
use common::{Exchange, listen, wait_until};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn caps() -> SubscriptionCapabilities {
    SubscriptionCapabilities::none()
        .with_tools_list_changed(true)
        .with_resources_updated(true)
}

/// The next message of a stream within 5 s.
fn next(stream: &mut Exchange) -> Option<Value> {
    stream.set_timeout(Duration::from_secs(5));
    stream.next_message()
}

fn id(n: u64) -> RequestId {
    RequestId::String(format!("get-{n}"))
}

#[test]
fn compat_get_stream_has_no_ack_and_a_second_get_is_409() {
    let mut config = probe::config();
    // A gone client is noticed at the next write: keep-alives come often.
    config.keep_alive = Duration::from_millis(50);
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let mut stream = legacy::get(srv.addr(), Some(&session));
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    srv.wait_subscribers(1);
    let second = legacy::get(srv.addr(), Some(&session)).into_response();
    assert_eq!(second.status, 409);
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    let n = next(&mut stream).expect("a notification");
    assert_eq!(
        n,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}})
    );
    // Once the first GET is gone, the session may open another: it reads
    // the same stream, which ran on meanwhile (see compat_resume.rs).
    // (409 until the server noticed the client left, at its next write.)
    stream.disconnect();
    let mut again = legacy::get(srv.addr(), Some(&session));
    for _ in 0..100 {
        if again.status != 409 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        again = legacy::get(srv.addr(), Some(&session));
    }
    assert_eq!(again.status, 200);
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert!(next(&mut again).is_some());
    assert!(srv.closed().is_empty(), "the stream was not closed");
}

#[test]
fn compat_delete_runs_handle_close_and_ends_the_get_stream() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    let mut stream = legacy::get(srv.addr(), Some(&session));
    srv.wait_subscribers(1);
    assert_eq!(legacy::delete(srv.addr(), &session).status, 200);
    assert_eq!(srv.closed(), vec![id(1)]);
    assert!(next(&mut stream).is_none(), "the GET body ends");
    assert_eq!(srv.metrics().closed(CloseReason::Disconnected), 1);
    assert_eq!(srv.metrics().open_streams, 0);
}

#[test]
fn compat_a_panicking_handler_ends_that_get_stream_only() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let a = legacy::initialize(srv.addr());
    let b = legacy::initialize(srv.addr());
    let mut first = legacy::get(srv.addr(), Some(&a));
    srv.wait_subscribers(1);
    let mut second = legacy::get(srv.addr(), Some(&b));
    srv.wait_subscribers(2);
    srv.bus.publish("all", Msg::PanicFor(id(1)));
    assert!(
        next(&mut first).is_none(),
        "the panicking stream ends, no frame"
    );
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert_eq!(
        next(&mut second).expect("the other stream lives")["method"],
        "notifications/tools/list_changed"
    );
    assert_eq!(srv.metrics().closed(CloseReason::Panicked), 1);
    assert!(
        srv.closed().is_empty(),
        "handle_close does not run after a panic"
    );
}

#[test]
fn compat_shutdown_ends_get_streams_cleanly() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    let mut stream = legacy::get(srv.addr(), Some(&session));
    srv.wait_subscribers(1);
    let probe::ProbeServer {
        server,
        bus: _bus,
        record,
    } = srv;
    let metrics = server.server.clone();
    let stopper = std::thread::spawn(move || server.stop());
    assert!(next(&mut stream).is_none(), "the body ends without a frame");
    // ... and with a retry hint (SSE polling): the client reconnects, to
    // another node of a fleet or to this one once it is back.
    assert_eq!(stream.retry, Some(1000));
    stopper.join().unwrap();
    assert_eq!(record.closed.lock().unwrap().clone(), vec![id(1)]);
    assert_eq!(metrics.metrics().closed(CloseReason::Shutdown), 1);
    assert_eq!(metrics.metrics().open_streams, 0);
}

#[test]
fn compat_a_2025_and_a_2026_client_both_receive_the_same_change() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    let mut old = legacy::get(srv.addr(), Some(&session));
    let mut modern = listen(srv.addr(), json!(9), json!({"toolsListChanged": true}));
    let ack = next(&mut modern).unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    srv.wait_subscribers(2);
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    let a = next(&mut old).unwrap();
    let b = next(&mut modern).unwrap();
    assert_eq!(a["method"], "notifications/tools/list_changed");
    assert_eq!(b["method"], "notifications/tools/list_changed");
    assert!(a["params"].get("_meta").is_none());
    assert_eq!(sub_id(&b), &json!(9));
}

#[test]
fn compat_subscribe_and_unsubscribe_change_the_live_get_streams_uris() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    let mut stream = legacy::get(srv.addr(), Some(&session));
    srv.wait_subscribers(1);
    let sub = |method: &str| {
        let resp = legacy::request(
            srv.addr(),
            &session,
            json!(1),
            method,
            json!({"uri": "a://x"}),
        );
        assert_eq!(resp.json()["result"], json!({}), "{method}");
    };
    // Before subscribing, an update for a://x is outside the filter.
    srv.bus
        .publish("all", send(Notification::resource_updated("a://x")));
    sub("resources/subscribe");
    srv.bus
        .publish("all", send(Notification::resource_updated("a://x")));
    let n = next(&mut stream).unwrap();
    assert_eq!(
        n,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "a://x"}})
    );
    sub("resources/unsubscribe");
    srv.bus
        .publish("all", send(Notification::resource_updated("a://x")));
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert_eq!(
        next(&mut stream).unwrap()["method"],
        "notifications/tools/list_changed",
        "no update after unsubscribe"
    );
    // This handler takes no URI in place (the default `change_uri`): the
    // subscribe restarted the actor and the replaced one ran handle_close; the
    // unsubscribe needed no new actor (the channel stops the URI's updates).
    assert!(wait_until(Duration::from_secs(5), || srv.closed().len() == 1));
    assert_eq!(srv.subscribes(), 2);
    assert_eq!(srv.metrics().open_streams, 1);
}

#[test]
fn compat_a_subscribe_whose_stream_cannot_restart_is_an_error_and_changes_nothing() {
    let mut config = probe::config();
    // The restarted actor runs beside the old one for a moment: with room for
    // one stream per connection, the restart fails.
    config.limits.max_streams_per_connection = 1;
    let srv = probe::start(Mode::Accept, caps(), config);
    let session = legacy::initialize(srv.addr());
    let mut stream = legacy::get(srv.addr(), Some(&session));
    srv.wait_subscribers(1);
    let resp = legacy::request(
        srv.addr(),
        &session,
        json!(1),
        "resources/subscribe",
        json!({"uri": "a://x"}),
    );
    assert_eq!(resp.json()["error"]["code"], -32603, "{:?}", resp.json());
    assert!(resp.json().get("result").is_none());
    // The stream keeps serving its earlier filter, without the URI.
    srv.bus
        .publish("all", send(Notification::resource_updated("a://x")));
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert_eq!(
        next(&mut stream).unwrap()["method"],
        "notifications/tools/list_changed"
    );
    // The session's set was rolled back: a fresh GET has no a://x either.
    assert_eq!(legacy::delete(srv.addr(), &session).status, 200);
    assert!(next(&mut stream).is_none());
}
