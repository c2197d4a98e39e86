//! Request and stream spans, as `--log-format json` writes them: a request's
//! span carries its method, id, principal and outcome; a stream's carries its
//! subscription id, principal and close reason. The principal is the subject
//! of the `Principal` in the assigns, or what `HttpConfig::principal_of` names.

mod common;

use std::sync::Arc;

use common::log_capture::Capture;
use common::{Exchange, headers, request};
use genmcp::prelude::*;
use serde_json::json;

/// The authenticated user, as an application's assigns hook attaches it.
struct User(String);

fn with_token(method: &str, token: &str) -> Vec<(String, String)> {
    let mut h = headers(method, None);
    h.push(("Authorization".into(), format!("Bearer {token}")));
    h
}

#[test]
fn request_and_stream_spans_carry_method_ids_principal_outcome_and_reason() {
    let capture = Capture::install("genmcp=debug");

    let mut config = common::config();
    config.assigns = Some(Arc::new(|req: &actix_web::HttpRequest| {
        let user = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("anonymous");
        Ok(Assigns::new().with(User(user.to_owned())))
    }));
    config.principal_of = Some(Arc::new(|a: &Assigns| a.get::<User>().map(|u| u.0.clone())));
    let srv = ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).expect("starts");

    let list = request(json!(7), "tools/list", json!({}));
    let resp = Exchange::open(
        srv.addr,
        &with_token("tools/list", "ada"),
        list.to_string().as_bytes(),
    )
    .into_response();
    assert_eq!(resp.status, 200);

    let listen = request(
        json!("s1"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut stream = Exchange::open(
        srv.addr,
        &with_token("subscriptions/listen", "grace"),
        listen.to_string().as_bytes(),
    );
    stream.next_message().expect("ack");
    srv.stop();
    assert_eq!(
        stream.next_message().expect("completion")["result"]["resultType"],
        "complete"
    );

    // Without `principal_of`: the subject of the authenticator's `Principal`.
    let mut config = common::config();
    config.assigns = Some(Arc::new(|_req: &actix_web::HttpRequest| {
        Ok(Assigns::new().with(genmcp::mux::Principal::new("linus")))
    }));
    let plain = ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).expect("starts");
    let list = request(json!(8), "tools/list", json!({}));
    let resp = common::post(plain.addr, &headers("tools/list", None), &list);
    assert_eq!(resp.status, 200);
    plain.stop();

    let lines = capture.lines();
    let answered_for = |id: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["message"] == "request answered" && l["span"]["request_id"] == id)
            .unwrap_or_else(|| panic!("no request line for {id} in {lines:#?}"))
    };
    assert_eq!(answered_for("8")["span"]["principal"], "linus");
    let answered = answered_for("7");
    assert_eq!(
        answered["span"],
        json!({"name": "request", "method": "tools/list", "request_id": "7",
               "principal": "ada", "outcome": "ok",
               "otel.name": "tools/list", "otel.kind": "server",
               "mcp.method.name": "tools/list", "mcp.protocol.version": "2026-07-28",
               "jsonrpc.request.id": "7", "network.transport": "tcp"})
    );
    let closed = lines
        .iter()
        .find(|l| l["fields"]["message"] == "stream closed")
        .unwrap_or_else(|| panic!("no stream line in {lines:#?}"));
    assert_eq!(
        closed["span"],
        json!({"name": "stream", "method": "subscriptions/listen",
               "subscription_id": "\"s1\"", "principal": "grace", "reason": "shutdown",
               "frames": 2, "otel.name": "subscriptions/listen", "otel.kind": "server",
               "mcp.method.name": "subscriptions/listen", "mcp.protocol.version": "2026-07-28",
               "jsonrpc.request.id": "s1", "network.transport": "tcp",
               "genmcp.stream.filter": "toolsListChanged"})
    );
}
