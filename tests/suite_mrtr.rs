//! Multi round-trip requests over real HTTP: sealed `requestState` (tampering,
//! replay on other arguments or another tool, expiry), capability gating
//! (`-32021` + HTTP 400), and MRTR through `prompts/get` and `resources/read`.

mod common;

use std::time::Duration;

use common::{VERSION, call, headers, post, request};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{ReadOutcome, Resource, ResourceSet};
use serde_json::{Value, json};

fn serve<H: SubscriptionHandler>(make: impl FnOnce() -> Suite<H> + Send + 'static) -> ServerThread {
    ServerThread::spawn(make, common::probe::config()).expect("server starts")
}

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

/// `tools/call name` with `params` (plus `_meta` with `caps`).
fn tool(
    addr: std::net::SocketAddr,
    id: i64,
    name: &str,
    caps: Value,
    mut params: Value,
) -> common::Response {
    params["name"] = json!(name);
    params["_meta"] = meta(caps);
    post(
        addr,
        &headers("tools/call", Some(name)),
        &request(json!(id), "tools/call", params),
    )
}

fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

const STATE_TOOL: &str = "test_input_required_result_request_state";

fn accept_ok() -> Value {
    json!({"confirm": {"action": "accept", "content": {"ok": true}}})
}

#[test]
fn request_state_round_trips_and_rejects_tampering_and_replay() {
    let srv = serve(genmcp_cli::fixtures::suite);
    let r1 = tool(
        srv.addr,
        1,
        STATE_TOOL,
        all_caps(),
        json!({"arguments": {}}),
    )
    .json();
    let result = &r1["result"];
    assert_eq!(result["resultType"], "input_required");
    assert_eq!(
        result["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    assert!(result.get("ttlMs").is_none() && result.get("cacheScope").is_none());
    let state = result["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();

    let ok = tool(
        srv.addr,
        2,
        STATE_TOOL,
        all_caps(),
        json!({"arguments": {}, "requestState": state, "inputResponses": accept_ok()}),
    );
    assert_eq!(ok.status, 200);
    let text = ok.json()["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.contains("state-ok"), "{text}");

    let (payload, tag) = state.rsplit_once('.').expect("kid.payload.tag");
    let mut flipped = payload.as_bytes().to_vec();
    let i = flipped.len() / 2;
    flipped[i] = if flipped[i] == b'A' { b'B' } else { b'A' };
    let forged = format!("{}.{tag}", String::from_utf8(flipped).unwrap());
    let cases = [
        (
            "appended",
            STATE_TOOL,
            json!({}),
            format!("{state}-TAMPERED"),
        ),
        ("payload edited", STATE_TOOL, json!({}), forged),
        (
            "tag cut",
            STATE_TOOL,
            json!({}),
            state[..state.len() - 2].to_owned(),
        ),
        ("garbage", STATE_TOOL, json!({}), "garbage".to_owned()),
        (
            "other arguments",
            STATE_TOOL,
            json!({"x": 1}),
            state.clone(),
        ),
        (
            "other tool",
            "test_input_required_result_tampered_state",
            json!({}),
            state.clone(),
        ),
    ];
    for (id, (what, name, args, token)) in cases.into_iter().enumerate() {
        let r = tool(
            srv.addr,
            10 + id as i64,
            name,
            all_caps(),
            json!({"arguments": args, "requestState": token, "inputResponses": accept_ok()}),
        );
        assert_eq!(r.status, 200, "{what}");
        let body = r.json();
        assert_eq!(body["error"]["code"], -32602, "{what}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("requestState"),
            "{what}"
        );
    }
    // A state is not a cursor either.
    let r = call(srv.addr, json!(30), "tools/list", json!({"cursor": state}));
    assert_eq!(r.json()["error"]["message"], "Invalid cursor");
}

#[test]
fn multi_round_states_differ_and_carry_the_previous_answers() {
    let srv = serve(genmcp_cli::fixtures::suite);
    let name = "test_input_required_result_multi_round";
    let r1 = tool(srv.addr, 1, name, all_caps(), json!({"arguments": {}})).json();
    let s1 = r1["result"]["requestState"].clone();
    let r2 = tool(
        srv.addr,
        2,
        name,
        all_caps(),
        json!({"arguments": {}, "requestState": s1,
        "inputResponses": {"step1": {"action": "accept", "content": {"name": "Ada"}}}}),
    )
    .json();
    assert_eq!(r2["result"]["resultType"], "input_required");
    assert!(r2["result"]["inputRequests"].get("step2").is_some());
    let s2 = r2["result"]["requestState"].clone();
    assert_ne!(s1, s2);
    let r3 = tool(
        srv.addr,
        3,
        name,
        all_caps(),
        json!({"arguments": {}, "requestState": s2,
        "inputResponses": {"step2": {"action": "accept", "content": {"color": "blue"}}}}),
    )
    .json();
    assert_eq!(
        r3["result"]["content"][0]["text"],
        "Hello, Ada! Your favorite color is blue."
    );
}

#[test]
fn an_expired_request_state_is_refused() {
    let srv = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .request_state_ttl(Duration::from_secs(2))
            .tool(
                ToolBuilder::new("slow_confirm")
                    .description("asks once, with state")
                    .handler(|c| async move {
                        if c.request_state.is_some() {
                            return Ok(CallToolResult::text("confirmed").into());
                        }
                        Ok(InputRequired::new().with_state(json!({"n": 1})).into())
                    }),
            )
            .build()
    });
    let r1 = tool(
        srv.addr,
        1,
        "slow_confirm",
        json!({}),
        json!({"arguments": {"a": 1}}),
    )
    .json();
    let state = r1["result"]["requestState"].clone();
    assert!(
        r1["result"].get("inputRequests").is_none(),
        "a state-only round asks nothing"
    );
    let fresh = tool(
        srv.addr,
        2,
        "slow_confirm",
        json!({}),
        json!({"arguments": {"a": 1}, "requestState": state}),
    )
    .json();
    assert_eq!(fresh["result"]["content"][0]["text"], "confirmed");
    std::thread::sleep(Duration::from_millis(2_100));
    let late = tool(
        srv.addr,
        3,
        "slow_confirm",
        json!({}),
        json!({"arguments": {"a": 1}, "requestState": state}),
    )
    .json();
    assert_eq!(late["error"]["code"], -32602);
    assert_eq!(late["error"]["data"]["reason"], "expired");
}

#[test]
fn undeclared_client_capabilities_are_minus_32021_with_http_400() {
    let srv = serve(genmcp_cli::fixtures::suite);
    let r = tool(
        srv.addr,
        1,
        "test_input_required_result_multiple_inputs",
        json!({"elicitation": {}}),
        json!({"arguments": {}}),
    );
    assert_eq!(r.status, 400);
    let body = r.json();
    assert_eq!(body["id"], 1);
    assert_eq!(body["error"]["code"], -32021);
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}, "roots": {}})
    );

    let r = tool(
        srv.addr,
        2,
        "test_missing_capability",
        json!({}),
        json!({"arguments": {}}),
    );
    assert_eq!(
        (
            r.status,
            r.json()["error"]["data"]["requiredCapabilities"].clone()
        ),
        (400, json!({"sampling": {}}))
    );
    let r = tool(
        srv.addr,
        3,
        "test_missing_capability",
        json!({"sampling": {}}),
        json!({"arguments": {}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["result"]["inputRequests"]["capability_probe"]["method"],
        "sampling/createMessage"
    );

    // A tool that adapts to the declared capabilities asks only for those.
    let r = tool(
        srv.addr,
        4,
        "test_input_required_result_capabilities",
        json!({"roots": {}}),
        json!({"arguments": {}}),
    )
    .json();
    let asked: Vec<&String> = r["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(asked, ["client_roots"]);
}

#[test]
fn input_responses_must_be_objects() {
    let srv = serve(genmcp_cli::fixtures::suite);
    let name = "test_input_required_result_elicitation";
    for (id, responses) in [
        (1, json!(null)),
        (2, json!({"user_name": 12345})),
        (3, json!("x")),
    ] {
        let r = tool(
            srv.addr,
            id,
            name,
            all_caps(),
            json!({"arguments": {}, "inputResponses": responses}),
        )
        .json();
        assert_eq!(r["error"]["code"], -32602, "{responses}");
    }
    // Stateless completion from the answer alone, extra keys ignored.
    let r = tool(
        srv.addr,
        4,
        name,
        all_caps(),
        json!({"arguments": {}, "inputResponses": {
        "user_name": {"action": "accept", "content": {"name": "Alice"}}, "extra": {"x": 1}}}),
    )
    .json();
    assert_eq!(r["result"]["content"][0]["text"], "Hello, Alice!");
}

#[test]
fn prompts_and_resource_reads_can_require_input() {
    let srv = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .resources(ResourceSet::new("secret://").dynamic(
                Resource::new("secret://vault", "vault").description("needs a password"),
                |read| async move {
                    match read.elicited("password").and_then(|c| c.get("password")).and_then(Value::as_str) {
                        Some("open sesame") => Ok(ResourceContents::text(read.uri, "text/plain", "treasure").into()),
                        _ => Ok(ReadOutcome::from(InputRequired::new().elicit(
                            "password",
                            "Password?",
                            json!({"type": "object", "properties": {"password": {"type": "string"}}}),
                        ))),
                    }
                },
            ))
            .build()
    });
    let read = |id: i64, extra: Value| {
        let mut params =
            json!({"uri": "secret://vault", "_meta": meta(json!({"elicitation": {}}))});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        post(
            srv.addr,
            &headers("resources/read", Some("secret://vault")),
            &request(json!(id), "resources/read", params),
        )
        .json()
    };
    let r1 = read(1, json!({}));
    assert_eq!(r1["result"]["resultType"], "input_required");
    assert!(r1["result"].get("ttlMs").is_none());
    let r2 = read(
        2,
        json!({"inputResponses": {"password": {"action": "accept", "content": {"password": "open sesame"}}}}),
    );
    assert_eq!(r2["result"]["contents"][0]["text"], "treasure");
    assert_eq!(
        (
            r2["result"]["ttlMs"].clone(),
            r2["result"]["cacheScope"].clone()
        ),
        (json!(0), json!("private")),
        "a result reached through a retry is not cacheable"
    );

    let fixtures = serve(genmcp_cli::fixtures::suite);
    let get = |id: i64, extra: Value| {
        let mut params =
            json!({"name": "test_input_required_result_prompt", "_meta": meta(all_caps())});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        post(
            fixtures.addr,
            &headers("prompts/get", Some("test_input_required_result_prompt")),
            &request(json!(id), "prompts/get", params),
        )
        .json()
    };
    let p1 = get(1, json!({}));
    assert_eq!(
        p1["result"]["inputRequests"]["user_context"]["method"],
        "elicitation/create"
    );
    let p2 = get(
        2,
        json!({"inputResponses": {"user_context": {"action": "accept", "content": {"context": "tests"}}}}),
    );
    assert_eq!(
        p2["result"]["messages"][0]["content"]["text"],
        "Prompt context: tests"
    );
}
