//! What one request may make the server keep: capped ids, progress tokens and
//! filter URIs, over real HTTP.

mod common;

use common::probe::{self, Mode};
use common::{Exchange, call, headers, request};
use genmcp::prelude::*;
use genmcp::protocol::jsonrpc::MAX_ID_LEN;
use genmcp::protocol::meta::MAX_PROGRESS_TOKEN_LEN;
use genmcp::protocol::types::MAX_RESOURCE_URI_LEN;
use serde_json::{Value, json};

fn caps() -> SubscriptionCapabilities {
    SubscriptionCapabilities::all()
}

fn listen_body(id: Value, notifications: Value) -> Vec<u8> {
    request(
        id,
        "subscriptions/listen",
        json!({"notifications": notifications}),
    )
    .to_string()
    .into_bytes()
}

#[test]
fn a_1_mib_id_on_a_listen_is_refused() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let id = "i".repeat(1024 * 1024);
    let r = Exchange::open(
        srv.addr(),
        &headers("subscriptions/listen", None),
        &listen_body(json!(id), json!({"toolsListChanged": true})),
    )
    .into_response();
    assert_eq!(r.status, 400);
    let body = r.json();
    assert_eq!(body["error"]["code"], -32600);
    assert_eq!(body["id"], Value::Null, "a refused id is never echoed");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&MAX_ID_LEN.to_string())),
        "{body}"
    );
    assert!(r.body.len() < 1024, "the reply stays small");
    assert_eq!(srv.metrics().open_streams, 0);

    // At the cap, the same listen is accepted and its id echoed on the ack.
    let id = "i".repeat(MAX_ID_LEN);
    let mut ok = Exchange::open(
        srv.addr(),
        &headers("subscriptions/listen", None),
        &listen_body(json!(id), json!({"toolsListChanged": true})),
    );
    assert_eq!(ok.status, 200);
    let ack = ok.next_message().expect("ack");
    assert_eq!(probe::sub_id(&ack), &json!(id));
}

#[test]
fn a_long_progress_token_is_invalid_params() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let mut meta = common::meta();
    meta["progressToken"] = json!("p".repeat(MAX_PROGRESS_TOKEN_LEN + 1));
    let r = call(srv.addr(), json!(1), "tools/list", json!({"_meta": meta}));
    assert_eq!(r.status, 400);
    let body = r.json();
    assert_eq!(body["error"]["code"], -32602);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("progressToken")),
        "{body}"
    );
    meta["progressToken"] = json!("p".repeat(MAX_PROGRESS_TOKEN_LEN));
    let r = call(srv.addr(), json!(2), "tools/list", json!({"_meta": meta}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn a_long_resource_uri_in_a_listen_filter_is_invalid_params() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let long = format!("res://{}", "u".repeat(MAX_RESOURCE_URI_LEN));
    let r = Exchange::open(
        srv.addr(),
        &headers("subscriptions/listen", None),
        &listen_body(
            json!(1),
            json!({"resourceSubscriptions": ["res://ok", long]}),
        ),
    )
    .into_response();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32602);
    assert_eq!(srv.metrics().open_streams, 0);
}

#[test]
fn duplicate_uris_are_honoured_once() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let uris: Vec<String> = (0..1000).map(|i| format!("res://{}", i % 3)).collect();
    let mut s = Exchange::open(
        srv.addr(),
        &headers("subscriptions/listen", None),
        &listen_body(json!("dups"), json!({"resourceSubscriptions": uris})),
    );
    assert_eq!(s.status, 200);
    let ack = s.next_message().expect("ack");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["res://0", "res://1", "res://2"])
    );
}
