//! Authentication, limits per principal and replay-proof request state over
//! real HTTP, with a static token table.

mod common;

use std::time::Duration;

use common::legacy::{self, LEGACY};
use common::{Exchange, Response, headers, post, request};
use genmcp::http::RateLimit;
use genmcp::http::auth::{AuthConfig, TokenTable};
use genmcp::prelude::*;
use serde_json::{Value, json};

const TABLE: &str = "# test tokens\ntok-admin ada admin\ntok-user bob\ntok-carol carol\n";

fn auth() -> AuthConfig {
    AuthConfig::new(TokenTable::parse(TABLE).unwrap()).authorization_server("https://as.test")
}

fn spawn<H: SubscriptionHandler>(
    make: impl FnOnce() -> Suite<H> + Send + 'static,
    edit: impl FnOnce(&mut HttpConfig),
) -> ServerThread {
    let mut config = common::config();
    config.auth = Some(auth());
    edit(&mut config);
    ServerThread::spawn(make, config).expect("server starts")
}

fn demo(edit: impl FnOnce(&mut HttpConfig)) -> ServerThread {
    spawn(|| genmcp_cli::demo::suite().0, edit)
}

fn with_token(mut h: Vec<(String, String)>, token: Option<&str>) -> Vec<(String, String)> {
    if let Some(t) = token {
        h.push(("Authorization".into(), format!("Bearer {t}")));
    }
    h
}

fn tool(srv: &ServerThread, token: Option<&str>, name: &str, args: Value) -> Response {
    let h = with_token(headers("tools/call", Some(name)), token);
    post(
        srv.addr,
        &h,
        &request(
            json!(1),
            "tools/call",
            json!({"name": name, "arguments": args}),
        ),
    )
}

fn listen(srv: &ServerThread, token: Option<&str>, id: i64, notifications: Value) -> Exchange {
    let h = with_token(headers("subscriptions/listen", None), token);
    let body = request(
        json!(id),
        "subscriptions/listen",
        json!({ "notifications": notifications }),
    );
    Exchange::open(srv.addr, &h, body.to_string().as_bytes())
}

fn metadata_url_of(challenge: &str) -> String {
    let start = challenge
        .find("resource_metadata=\"")
        .expect("resource_metadata")
        + 19;
    let end = challenge[start..].find('"').unwrap() + start;
    challenge[start..end].to_owned()
}

#[test]
fn no_token_is_401_with_the_metadata_url_and_the_document_names_the_resource() {
    let srv = demo(|_| {});
    let resp = tool(&srv, None, "whoami", json!({}));
    assert_eq!(resp.status, 401);
    let challenge = resp.header("www-authenticate").unwrap().to_owned();
    // No token: no error code (RFC 6750 §3.1).
    assert!(!challenge.contains("error="), "{challenge}");
    let url = metadata_url_of(&challenge);
    let base = format!("http://{}", srv.addr);
    assert_eq!(
        url,
        format!("{base}/.well-known/oauth-protected-resource/mcp")
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let doc = Exchange::open_at(srv.addr, "GET", path, &[], b"").into_response();
        assert_eq!(doc.status, 200, "{path}");
        let doc = doc.json();
        assert_eq!(doc["resource"], format!("{base}/mcp"), "{path}");
        assert_eq!(doc["authorization_servers"], json!(["https://as.test"]));
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }
    // An unknown token: 401 invalid_token, same metadata URL.
    let resp = tool(&srv, Some("forged"), "whoami", json!({}));
    assert_eq!(resp.status, 401);
    let challenge = resp.header("www-authenticate").unwrap();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert_eq!(metadata_url_of(challenge), url);
}

#[test]
fn a_valid_token_reaches_the_tool_with_its_principal() {
    let srv = demo(|_| {});
    for (token, who, admin) in [("tok-admin", "ada", true), ("tok-user", "bob", false)] {
        let resp = tool(&srv, Some(token), "whoami", json!({}));
        assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
        assert_eq!(
            resp.json()["result"]["structuredContent"],
            json!({"principal": who, "admin": admin})
        );
    }
}

/// The seed's downgrade: the demo's `subscribe` gives admins what they asked
/// for and narrows other principals to `toolsListChanged`.
#[test]
fn admins_get_their_filter_and_other_principals_are_narrowed() {
    let srv = demo(|_| {});
    let asked = json!({"toolsListChanged": true, "resourcesListChanged": true});
    let ack = |token| {
        let mut s = listen(&srv, Some(token), 1, asked.clone());
        assert_eq!(s.status, 200);
        s.next_message().unwrap()["params"]["notifications"].clone()
    };
    assert_eq!(ack("tok-admin"), asked);
    assert_eq!(ack("tok-user"), json!({"toolsListChanged": true}));
}

#[test]
fn a_missing_scope_is_403_insufficient_scope() {
    let srv = demo(|c| {
        c.auth = Some(auth().require_scopes(["admin"]));
    });
    let resp = tool(&srv, Some("tok-user"), "whoami", json!({}));
    assert_eq!(resp.status, 403);
    let challenge = resp.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"admin\""),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata=\""), "{challenge}");
    assert_eq!(
        tool(&srv, Some("tok-admin"), "whoami", json!({})).status,
        200
    );
}

#[test]
fn an_invalid_token_challenge_names_the_required_scopes() {
    let srv = demo(|c| {
        c.auth = Some(auth().require_scopes(["mcp:tools"]));
    });
    let resp = tool(&srv, Some("forged"), "whoami", json!({}));
    assert_eq!(resp.status, 401);
    let challenge = resp.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"invalid_token\"") && challenge.contains("scope=\"mcp:tools\""),
        "{challenge}"
    );
}

/// An authenticator that cannot check tokens (its introspection endpoint is
/// down, say): the server's trouble, not the client's.
struct Unavailable;

impl genmcp::http::auth::Authenticator for Unavailable {
    fn authenticate(&self, _token: &str) -> genmcp::http::auth::AuthFuture {
        Box::pin(async {
            Err(genmcp::http::auth::AuthError::Config(
                "introspection endpoint unreachable".into(),
            ))
        })
    }
}

#[test]
fn an_authenticator_failure_is_503_without_a_challenge() {
    let srv = demo(|c| c.auth = Some(AuthConfig::new(Unavailable)));
    let resp = tool(&srv, Some("tok-user"), "whoami", json!({}));
    assert_eq!(resp.status, 503);
    assert!(
        resp.header("www-authenticate").is_none(),
        "a challenge would send the client to re-authorise in a loop"
    );
    // Without a token the client is still told how to get one.
    assert_eq!(tool(&srv, None, "whoami", json!({})).status, 401);
}

/// The 2025 path is authenticated the same way: initialize, session requests
/// and the GET stream.
#[test]
fn the_2025_compat_path_needs_a_token_too() {
    let srv = demo(|_| {});
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}}});
    let refused = post(srv.addr, &legacy::headers(None), &init);
    assert_eq!(refused.status, 401);
    assert!(
        refused
            .header("www-authenticate")
            .unwrap()
            .contains("resource_metadata=")
    );
    let ok = post(
        srv.addr,
        &with_token(legacy::headers(None), Some("tok-user")),
        &init,
    );
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    let session = ok.header("mcp-session-id").unwrap().to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}});
    assert_eq!(
        post(srv.addr, &legacy::headers(Some(&session)), &call).status,
        401
    );
    let resp = post(
        srv.addr,
        &with_token(legacy::headers(Some(&session)), Some("tok-user")),
        &call,
    );
    assert_eq!(resp.status, 200);
    let text = String::from_utf8_lossy(&resp.body);
    assert!(text.contains(r#"\"principal\":\"bob\""#), "{text}");
    // GET without a token: 401 before the session is looked at.
    let get = legacy::get(srv.addr, Some(&session));
    assert_eq!(get.status, 401);
    // The session is bob's: another principal gets 404, as for no session.
    let stranger = post(
        srv.addr,
        &with_token(legacy::headers(Some(&session)), Some("tok-carol")),
        &call,
    );
    assert_eq!(stranger.status, 404);
}

#[test]
fn a_third_stream_of_one_principal_is_429_and_others_still_open_streams() {
    let srv = demo(|c| {
        c.limits.max_streams_per_principal = Some(2);
        // A dead client is noticed on the next keep-alive write.
        c.keep_alive = Duration::from_millis(100);
    });
    let tools = json!({"toolsListChanged": true});
    let mut held: Vec<Exchange> = (0..2)
        .map(|i| {
            let mut s = listen(&srv, Some("tok-user"), i, tools.clone());
            assert_eq!(s.status, 200);
            s.next_message().unwrap();
            s
        })
        .collect();
    assert_eq!(srv.server.open_streams_of("p:bob"), 2);
    let third = listen(&srv, Some("tok-user"), 3, tools.clone()).into_response();
    assert_eq!(third.status, 429);
    assert_eq!(third.header("retry-after"), Some("1"));
    let body = third.json();
    assert_eq!(body["id"], 3);
    assert_eq!(body["error"]["data"]["limit"], "max_streams_per_principal");
    // Another principal is not affected.
    let mut other = listen(&srv, Some("tok-carol"), 4, tools.clone());
    assert_eq!(other.status, 200);
    assert_eq!(
        other.next_message().unwrap()["method"],
        "notifications/subscriptions/acknowledged"
    );
    // A closed stream gives its slot back, exactly once.
    held.pop().unwrap().disconnect();
    assert!(common::wait_until(Duration::from_secs(10), || {
        srv.server.open_streams_of("p:bob") == 1
    }));
    let mut again = listen(&srv, Some("tok-user"), 5, tools.clone());
    assert_eq!(again.status, 200);
    again.next_message().unwrap();
    assert_eq!(srv.server.open_streams_of("p:bob"), 2);
    drop(again);
    drop(held);
    drop(other);
    assert!(common::wait_until(Duration::from_secs(10), || {
        srv.server.stream_owners() == 0
    }));
}

/// The sample of `genmcp_requests_total` for `method` and `outcome` (0 when
/// the series is absent: only non-zero series are written).
fn requests_total(srv: &ServerThread, method: &str, outcome: &str) -> u64 {
    let text = genmcp::admin::Admin::new(srv.server.clone(), Vec::new()).metrics_text();
    let method = format!("method=\"{method}\"");
    let outcome = format!("outcome=\"{outcome}\"");
    text.lines()
        .filter(|l| l.starts_with("genmcp_requests_total{"))
        .find(|l| l.contains(&method) && l.contains(&outcome))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn refusals_are_counted_as_unauthorized_or_limited_by_method() {
    let srv = demo(|c| {
        c.limits.max_streams_per_principal = Some(1);
        // Refilling one request per 100 s: the test never sees a refill.
        let mut rate = RateLimit::per_second(1).burst(3);
        rate.per_second = 0.01;
        c.rate_limit = Some(rate);
    });
    assert_eq!(tool(&srv, None, "whoami", json!({})).status, 401);
    assert_eq!(tool(&srv, Some("forged"), "whoami", json!({})).status, 401);
    assert_eq!(requests_total(&srv, "tools/call", "unauthorized"), 2);
    let tools = json!({"toolsListChanged": true});
    let mut held = listen(&srv, Some("tok-user"), 1, tools.clone());
    held.next_message().unwrap();
    let second = listen(&srv, Some("tok-user"), 2, tools).into_response();
    assert_eq!(second.status, 429);
    assert_eq!(requests_total(&srv, "subscriptions/listen", "limited"), 1);
    assert_eq!(requests_total(&srv, "subscriptions/listen", "ok"), 1);
    // bob's burst of 3 is spent (two listens, one call): the rate limit.
    assert_eq!(
        tool(&srv, Some("tok-user"), "whoami", json!({})).status,
        200
    );
    assert_eq!(
        tool(&srv, Some("tok-user"), "whoami", json!({})).status,
        429
    );
    assert_eq!(requests_total(&srv, "tools/call", "limited"), 1);
    assert_eq!(requests_total(&srv, "tools/call", "ok"), 1);
}

#[test]
fn without_a_principal_streams_are_counted_per_client_address() {
    let mut config = common::config();
    config.limits.max_streams_per_principal = Some(1);
    let srv = ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).unwrap();
    let mut first = listen(&srv, None, 1, json!({"toolsListChanged": true}));
    first.next_message().unwrap();
    assert_eq!(srv.server.open_streams_of("a:127.0.0.1"), 1);
    let second = listen(&srv, None, 2, json!({"toolsListChanged": true})).into_response();
    assert_eq!(second.status, 429);
}

#[test]
fn over_the_request_rate_is_429_naming_the_limit_and_others_are_served() {
    let srv = demo(|c| c.rate_limit = Some(RateLimit::per_second(1).burst(2)));
    for _ in 0..2 {
        assert_eq!(
            tool(&srv, Some("tok-user"), "whoami", json!({})).status,
            200
        );
    }
    let resp = tool(&srv, Some("tok-user"), "whoami", json!({}));
    assert_eq!(resp.status, 429);
    let wait: u64 = resp.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    assert_eq!(resp.json()["error"]["data"]["limit"], "requests_per_second");
    assert_eq!(
        tool(&srv, Some("tok-carol"), "whoami", json!({})).status,
        200
    );
}

const MRTR_TOOL: &str = "test_input_required_result_request_state";

/// A call of the MRTR fixture tool from a client that can elicit.
fn mrtr_call(srv: &ServerThread, token: &str, extra: Value) -> Value {
    let h = with_token(headers("tools/call", Some(MRTR_TOOL)), Some(token));
    let mut meta = common::meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let mut params = json!({"name": MRTR_TOOL, "arguments": {}, "_meta": meta});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    post(srv.addr, &h, &request(json!(2), "tools/call", params)).json()
}

fn retry_with(srv: &ServerThread, token: &str, state: &Value) -> Value {
    mrtr_call(
        srv,
        token,
        json!({
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
            "requestState": state,
        }),
    )
}

/// A sealed `requestState` is honoured once, for the principal it was issued
/// to: a replay and a use by another principal get the tampered-state error.
#[test]
fn a_request_state_is_spent_once_and_only_by_its_principal() {
    let srv = spawn(genmcp_cli::fixtures::suite, |_| {});
    let first = mrtr_call(&srv, "tok-user", json!({}));
    assert_eq!(first["result"]["resultType"], "input_required");
    let state = first["result"]["requestState"].clone();
    let tampered = retry_with(
        &srv,
        "tok-user",
        &json!(format!("{}x", state.as_str().unwrap())),
    )["error"]
        .clone();
    assert_eq!(tampered["code"], -32602);
    // Another principal: refused, as tampered.
    assert_eq!(retry_with(&srv, "tok-carol", &state)["error"], tampered);
    // Its own principal: once.
    let ok = retry_with(&srv, "tok-user", &state);
    let text = ok["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("state-ok"), "{ok}");
    // The replay: refused, as tampered.
    assert_eq!(retry_with(&srv, "tok-user", &state)["error"], tampered);
}

/// A 2025 GET stream at its principal's stream limit is still restarted by
/// `resources/subscribe` (the replacement may run beside the stream it
/// replaces for a moment): the new URI's updates arrive, and the count is
/// back to one.
#[test]
fn a_get_stream_at_the_limit_still_takes_new_subscriptions() {
    let srv = demo(|c| c.limits.max_streams_per_principal = Some(1));
    let token = Some("tok-admin");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}}});
    let resp = post(srv.addr, &with_token(legacy::headers(None), token), &init);
    let session = resp.header("mcp-session-id").unwrap().to_owned();
    let h = with_token(legacy::headers(Some(&session)), token);
    let call = |id: i64, method: &str, params: Value| {
        post(
            srv.addr,
            &h,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .json()
    };
    let added = call(
        1,
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": "a"}}),
    );
    let uri = added["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let get_headers = with_token(
        vec![
            ("Accept".to_owned(), "text/event-stream".to_owned()),
            ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
            ("Mcp-Session-Id".to_owned(), session.clone()),
        ],
        token,
    );
    let mut stream = Exchange::open_with(srv.addr, "GET", &get_headers, b"");
    assert_eq!(stream.status, 200);
    assert!(common::wait_until(Duration::from_secs(5), || {
        srv.server.open_streams_of("p:ada") == 1
    }));
    assert_eq!(
        call(2, "resources/subscribe", json!({ "uri": uri }))["result"],
        json!({})
    );
    call(
        3,
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": "b", "uri": uri}}),
    );
    stream.set_timeout(Duration::from_secs(5));
    let n = stream
        .next_message()
        .expect("an update on the restarted stream");
    assert_eq!(n["method"], "notifications/resources/updated");
    assert_eq!(n["params"]["uri"], json!(uri));
    assert!(common::wait_until(Duration::from_secs(5), || {
        srv.server.open_streams_of("p:ada") == 1
    }));
}

/// When the record of spent states is full of unexpired ones, a retry is
/// refused with 429 and `Retry-After` (nothing is forgotten), and its state
/// stays unspent.
#[test]
fn a_full_spent_record_refuses_retries_with_429() {
    let srv = spawn(
        || {
            Suite::builder(Implementation::new("spent", "1"))
                .max_spent_request_states(1)
                .tool(ToolBuilder::new("step").handler(|call| async move {
                    Ok(match call.request_state {
                        Some(_) => CallToolResult::text("done").into(),
                        None => InputRequired::new().with_state(json!(1)).into(),
                    })
                }))
                .build()
        },
        |_| {},
    );
    let step = |extra: Value| {
        let mut params = json!({"name": "step", "arguments": {}});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        post(
            srv.addr,
            &with_token(headers("tools/call", Some("step")), Some("tok-user")),
            &request(json!(1), "tools/call", params),
        )
    };
    let a = step(json!({})).json()["result"]["requestState"].clone();
    let b = step(json!({})).json()["result"]["requestState"].clone();
    let done = step(json!({ "requestState": a })).json();
    assert_eq!(done["result"]["content"][0]["text"], "done", "{done}");
    let full = step(json!({ "requestState": b }));
    assert_eq!(full.status, 429);
    assert!(full.header("retry-after").is_some());
    assert_eq!(
        full.json()["error"]["data"]["limit"],
        "max_spent_request_states"
    );
}
