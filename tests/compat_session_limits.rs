//! 2025-era session state is bounded per principal over real HTTP: one
//! principal at its bound is refused (429 with `Retry-After`) and nobody else
//! is; a DELETE never evicts anything, so a deleted session stays 404.

mod common;

use std::sync::Arc;

use common::legacy;
use common::probe::{self, Mode};
use common::{Response, post};
use genmcp::http::{CompatConfig, HttpConfig};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn caps() -> SubscriptionCapabilities {
    SubscriptionCapabilities::none()
        .with_tools_list_changed(true)
        .with_resources_updated(true)
}

/// Requests name their principal in `X-User` (an assigns hook, as an
/// application authenticating in its own middleware would).
fn config_with_users() -> HttpConfig {
    let mut config = probe::config();
    config.assigns = Some(Arc::new(|req: &actix_web::HttpRequest| {
        let user = req
            .headers()
            .get("x-user")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| "X-User is required".to_owned())?;
        Ok(Assigns::new().with(Principal::new(user)))
    }));
    config
}

fn user_headers(user: &str, session: Option<&str>) -> Vec<(String, String)> {
    let mut h = legacy::headers(session);
    h.push(("X-User".to_owned(), user.to_owned()));
    h
}

fn initialize(addr: std::net::SocketAddr, user: &str) -> String {
    let mut h = user_headers(user, None);
    h.retain(|(k, _)| k != "MCP-Protocol-Version");
    let resp = post(
        addr,
        &h,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": legacy::LEGACY, "capabilities": {}}}),
    );
    assert_eq!(resp.status, 200);
    resp.header("mcp-session-id").expect("session").to_owned()
}

fn request(
    addr: std::net::SocketAddr,
    user: &str,
    session: &str,
    method: &str,
    params: Value,
) -> Response {
    post(
        addr,
        &user_headers(user, Some(session)),
        &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
    )
}

fn set_level(addr: std::net::SocketAddr, user: &str, session: &str) -> Response {
    request(
        addr,
        user,
        session,
        "logging/setLevel",
        json!({"level": "info"}),
    )
}

fn delete(addr: std::net::SocketAddr, user: &str, session: &str) -> Response {
    let h = vec![
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("X-User".to_owned(), user.to_owned()),
    ];
    common::Exchange::open_with(addr, "DELETE", &h, b"").into_response()
}

fn assert_limited(resp: &Response, limit: &str) {
    assert_eq!(resp.status, 429, "{}", String::from_utf8_lossy(&resp.body));
    let secs: u64 = resp
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!(secs >= 1);
    assert_eq!(resp.json()["error"]["code"], -32603);
    assert_eq!(resp.json()["error"]["data"]["limit"], limit);
}

#[test]
fn compat_one_principal_at_its_session_bound_is_refused_and_nobody_else() {
    // Defaults: 1,000 sessions with state per principal.
    let srv = genmcp::http::ServerThread::spawn(genmcp_cli::fixtures::suite, config_with_users())
        .expect("server starts");
    let addr = srv.addr;
    let mut alice = Vec::new();
    for _ in 0..1_000 {
        let s = initialize(addr, "alice");
        assert_eq!(set_level(addr, "alice", &s).status, 200);
        alice.push(s);
    }
    let extra = initialize(addr, "alice");
    assert_limited(
        &set_level(addr, "alice", &extra),
        "max_sessions_per_principal",
    );
    // A DELETE she cannot record is refused too (nothing is evicted for it).
    assert_limited(&delete(addr, "alice", &extra), "max_sessions_per_principal");
    // Her existing sessions keep working, and a DELETE of one is remembered.
    assert_eq!(delete(addr, "alice", &alice[0]).status, 200);
    assert_eq!(
        request(addr, "alice", &alice[0], "ping", json!({})).status,
        404
    );
    assert_eq!(
        request(addr, "alice", &alice[1], "ping", json!({})).status,
        200
    );
    // Another principal is not affected.
    let bob = initialize(addr, "bob");
    assert_eq!(set_level(addr, "bob", &bob).status, 200);
    assert_eq!(delete(addr, "bob", &bob).status, 200);
    assert_eq!(request(addr, "bob", &bob, "ping", json!({})).status, 404);
}

#[test]
fn compat_a_delete_on_a_full_store_evicts_nobody_and_deleted_sessions_stay_404() {
    let mut config = config_with_users();
    let mut compat = CompatConfig::default();
    compat.max_session_states = 2;
    config.compat = Some(compat);
    let srv = genmcp::http::ServerThread::spawn(genmcp_cli::fixtures::suite, config)
        .expect("server starts");
    let addr = srv.addr;
    let bob = initialize(addr, "bob");
    assert_eq!(delete(addr, "bob", &bob).status, 200);
    let alice = initialize(addr, "alice");
    assert_eq!(set_level(addr, "alice", &alice).status, 200);
    // The store is full: a third session's DELETE is refused, not recorded by
    // evicting bob's mark or alice's level.
    let carol = initialize(addr, "carol");
    let refused = delete(addr, "carol", &carol);
    assert_eq!(refused.status, 503);
    assert_eq!(request(addr, "bob", &bob, "ping", json!({})).status, 404);
    assert_eq!(
        request(addr, "carol", &carol, "ping", json!({})).status,
        200
    );
}

#[test]
fn compat_subscribed_uris_are_bounded_per_principal_across_sessions() {
    let mut config = config_with_users();
    let mut compat = CompatConfig::default();
    compat.max_subscribed_uris_per_principal = 5;
    config.compat = Some(compat);
    let srv = probe::start(Mode::Accept, caps(), config);
    let addr = srv.addr();
    let subscribe = |user: &str, session: &str, uri: &str| {
        request(
            addr,
            user,
            session,
            "resources/subscribe",
            json!({"uri": uri}),
        )
    };
    let (a1, a2) = (initialize(addr, "alice"), initialize(addr, "alice"));
    for i in 0..3 {
        assert_eq!(
            subscribe("alice", &a1, &format!("test://a1/{i}")).status,
            200
        );
    }
    for i in 0..2 {
        assert_eq!(
            subscribe("alice", &a2, &format!("test://a2/{i}")).status,
            200
        );
    }
    // Subscribing again to a URI she holds costs nothing.
    assert_eq!(subscribe("alice", &a2, "test://a2/0").status, 200);
    assert_limited(
        &subscribe("alice", &a2, "test://a2/2"),
        "max_subscribed_uris_per_principal",
    );
    let bob = initialize(addr, "bob");
    assert_eq!(subscribe("bob", &bob, "test://b/0").status, 200);
    // Unsubscribing, or deleting a session, frees her room.
    let unsub = request(
        addr,
        "alice",
        &a2,
        "resources/unsubscribe",
        json!({"uri": "test://a2/0"}),
    );
    assert_eq!(unsub.status, 200);
    assert_eq!(subscribe("alice", &a2, "test://a2/2").status, 200);
    assert_eq!(delete(addr, "alice", &a1).status, 200);
    for i in 3..6 {
        assert_eq!(
            subscribe("alice", &a2, &format!("test://a2/{i}")).status,
            200
        );
    }
}
