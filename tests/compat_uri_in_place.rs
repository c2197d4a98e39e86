//! A 2025 session's `resources/subscribe` and `unsubscribe` while its GET
//! stream runs: a handler that implements `change_uri` takes one URI in place
//! (no new stream, no copy of the set); a refusal changes nothing; a panic
//! ends that stream only.

mod common;

use std::time::Duration;

use common::legacy;
use common::probe::{self, Mode, send};
use common::{Exchange, wait_until};
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

fn change(srv: &probe::ProbeServer, session: &str, method: &str, uri: &str) -> Value {
    let resp = legacy::request(srv.addr(), session, json!(1), method, json!({"uri": uri}));
    resp.json()
}

fn updated(uri: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
}

#[test]
fn compat_uri_changes_are_taken_in_place_without_a_new_stream() {
    let srv = probe::start(Mode::InPlace, caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    let mut stream = legacy::get(srv.addr(), Some(&session));
    srv.wait_subscribers(1);
    let uris: Vec<String> = (0..50).map(|i| format!("a://{i}")).collect();
    for uri in &uris {
        let reply = change(&srv, &session, "resources/subscribe", uri);
        assert_eq!(reply["result"], json!({}), "{reply}");
    }
    // A second subscribe of the same URI changes nothing.
    change(&srv, &session, "resources/subscribe", "a://7");
    for uri in &uris {
        srv.bus
            .publish("all", send(Notification::resource_updated(uri.clone())));
    }
    for uri in &uris {
        assert_eq!(next(&mut stream).unwrap(), updated(uri));
    }
    let reply = change(&srv, &session, "resources/unsubscribe", "a://3");
    assert_eq!(reply["result"], json!({}), "{reply}");
    srv.bus
        .publish("all", send(Notification::resource_updated("a://3")));
    srv.bus
        .publish("all", send(Notification::resource_updated("a://4")));
    assert_eq!(
        next(&mut stream).unwrap(),
        updated("a://4"),
        "a://3 is gone"
    );
    // One stream all along: subscribe ran once, no handle_close ran, and the
    // handler heard each change once.
    assert_eq!(srv.subscribes(), 1);
    assert!(srv.closed().is_empty(), "{:?}", srv.closed());
    let mut expected: Vec<(String, bool)> = uris.iter().map(|u| (u.clone(), true)).collect();
    expected.push(("a://3".into(), false));
    assert_eq!(srv.changes(), expected);
    assert_eq!(srv.metrics().open_streams, 1);
}

#[test]
fn compat_a_refused_uri_change_is_an_error_and_changes_nothing() {
    let refusal = McpError::invalid_params("Invalid params: not this one");
    let srv = probe::start(Mode::RefuseChanges(refusal), caps(), probe::config());
    let session = legacy::initialize(srv.addr());
    let mut stream = legacy::get(srv.addr(), Some(&session));
    srv.wait_subscribers(1);
    let reply = change(&srv, &session, "resources/subscribe", "a://x");
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(reply["error"]["message"], "Invalid params: not this one");
    srv.bus
        .publish("all", send(Notification::resource_updated("a://x")));
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert_eq!(
        next(&mut stream).unwrap()["method"],
        "notifications/tools/list_changed",
        "no update for the refused URI"
    );
    // The session's set was rolled back: an unsubscribe finds nothing to
    // change, so the handler is not asked (it would refuse nothing anyway).
    let reply = change(&srv, &session, "resources/unsubscribe", "a://x");
    assert_eq!(reply["result"], json!({}), "{reply}");
    assert_eq!(srv.subscribes(), 1);
    assert!(srv.closed().is_empty());
}

#[test]
fn compat_a_panicking_change_uri_ends_that_stream_only() {
    let srv = probe::start(Mode::PanicOnChange, caps(), probe::config());
    let a = legacy::initialize(srv.addr());
    let b = legacy::initialize(srv.addr());
    let mut stream_a = legacy::get(srv.addr(), Some(&a));
    let mut stream_b = legacy::get(srv.addr(), Some(&b));
    srv.wait_subscribers(2);
    let reply = change(&srv, &a, "resources/subscribe", "a://x");
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert!(next(&mut stream_a).is_none(), "a's stream ended");
    assert!(wait_until(Duration::from_secs(5), || srv
        .metrics()
        .closed(CloseReason::Panicked)
        == 1));
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert_eq!(
        next(&mut stream_b).unwrap()["method"],
        "notifications/tools/list_changed"
    );
}
