//! Tests of the MRTR `requestState` round trip: binding, expiry, replay,
//! the capability gate and the spent record.

use super::*;
use crate::suite::common::BoxFuture;
use crate::suite::sealing::spent::{SpentError, SpentRecord, SpentStates, Store};

fn caps(v: Value) -> ClientCapabilities {
    ClientCapabilities(v.as_object().unwrap().clone())
}

fn params(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn spent() -> Spender {
    Spender::new(Store::Local(SpentStates::new(16)))
}

/// [`parse_retry`] run to completion (the in-memory record never waits).
fn parse(
    sealer: &Sealer,
    spent: &Spender,
    params: &Map<String, Value>,
    binding: &Binding,
) -> Result<Retry, McpError> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(parse_retry(sealer, spent, params, binding))
}

#[test]
fn state_round_trips_and_is_bound() {
    let sealer = Sealer::new([1; 32]);
    let args = json!({"a": 1});
    let binding = Binding::new("tools/call", "t", &args);
    let round = InputRequired::new()
        .list_roots("r")
        .with_state(json!({"step": 1}));
    let result = input_required_result(
        &sealer,
        Duration::from_secs(60),
        round.clone(),
        &caps(json!({"roots": {}})),
        &binding,
    )
    .unwrap();
    assert_eq!(result["resultType"], "input_required");
    assert!(result.get("ttlMs").is_none() && result.get("cacheScope").is_none());
    let token = result["requestState"].as_str().unwrap().to_owned();
    let retry = parse(
        &sealer,
        &spent(),
        &params(json!({"requestState": token})),
        &binding,
    )
    .unwrap();
    assert_eq!(retry.request_state, Some(json!({"step": 1})));
    assert!(retry.is_retry());

    // The same round twice seals two different tokens.
    let again = input_required_result(
        &sealer,
        Duration::from_secs(60),
        round,
        &caps(json!({"roots": {}})),
        &binding,
    )
    .unwrap();
    assert_ne!(again["requestState"], result["requestState"]);

    for other in [
        Binding::new("tools/call", "t", &json!({"a": 2})),
        Binding::new("tools/call", "u", &args),
        Binding::new("prompts/get", "t", &args),
    ] {
        let err = parse(
            &sealer,
            &spent(),
            &params(json!({"requestState": token})),
            &other,
        )
        .unwrap_err();
        assert_eq!(err.code(), -32602);
    }
    for bad in [json!(format!("{token}-TAMPERED")), json!(5), json!("x.y")] {
        let err = parse(
            &sealer,
            &spent(),
            &params(json!({"requestState": bad})),
            &binding,
        )
        .unwrap_err();
        assert_eq!(err.code(), -32602);
    }
}

/// A state is honoured once, and only for the principal it was issued to;
/// a replay and a stranger get the same error as a tampered state.
#[test]
fn state_is_spent_once_and_bound_to_its_principal() {
    let sealer = Sealer::new([2; 32]);
    let spent = spent();
    let ada = Principal::new("ada");
    let bob = Principal::new("bob");
    let binding = Binding::new("tools/call", "t", &json!({})).by(Some(&ada));
    let issue = || {
        input_required_result(
            &sealer,
            Duration::from_secs(60),
            InputRequired::new().with_state(json!(1)),
            &caps(json!({})),
            &binding,
        )
        .unwrap()["requestState"]
            .clone()
    };
    let tampered = parse(
        &sealer,
        &spent,
        &params(json!({"requestState": format!("{}x", issue().as_str().unwrap())})),
        &binding,
    )
    .unwrap_err();
    let token = issue();
    let p = params(json!({ "requestState": token }));
    for other in [
        Binding::new("tools/call", "t", &json!({})).by(Some(&bob)),
        Binding::new("tools/call", "t", &json!({})),
    ] {
        assert_eq!(parse(&sealer, &spent, &p, &other).unwrap_err(), tampered);
    }
    // Refusing the strangers did not spend it: its owner gets it once.
    assert!(parse(&sealer, &spent, &p, &binding).is_ok());
    assert_eq!(parse(&sealer, &spent, &p, &binding).unwrap_err(), tampered);
    // A state issued without a principal is refused to one.
    let anon = Binding::new("tools/call", "t", &json!({}));
    let token = input_required_result(
        &sealer,
        Duration::from_secs(60),
        InputRequired::new().with_state(json!(1)),
        &caps(json!({})),
        &anon,
    )
    .unwrap()["requestState"]
        .clone();
    let p = params(json!({ "requestState": token }));
    assert_eq!(parse(&sealer, &spent, &p, &binding).unwrap_err(), tampered);
    assert!(parse(&sealer, &spent, &p, &anon).is_ok());
}

/// A pluggable record that cannot be reached: the retry is refused with
/// `-32603` (not the tampered `-32602`), and the state is not honoured.
#[test]
fn an_unreachable_record_refuses_the_retry() {
    struct Down;
    impl SpentRecord for Down {
        fn spend(&self, _nonce: u64, _expires_at_ms: u64) -> BoxFuture<Result<Spend, SpentError>> {
            Box::pin(async { Err(SpentError::Unavailable("down".into())) })
        }
    }
    let sealer = Sealer::new([3; 32]);
    let binding = Binding::new("tools/call", "t", &json!({}));
    let token = input_required_result(
        &sealer,
        Duration::from_secs(60),
        InputRequired::new().with_state(json!(1)),
        &caps(json!({})),
        &binding,
    )
    .unwrap()["requestState"]
        .clone();
    let down = Spender::new(Store::Shared(std::sync::Arc::new(Down)));
    let err = parse(
        &sealer,
        &down,
        &params(json!({ "requestState": token })),
        &binding,
    )
    .unwrap_err();
    assert_eq!(err, unverifiable_state());
    assert_eq!(err.code(), -32603);
}

#[test]
fn expired_state_is_refused() {
    let sealer = Sealer::new([1; 32]);
    let binding = Binding::new("tools/call", "t", &json!({}));
    let result = input_required_result(
        &sealer,
        Duration::ZERO,
        InputRequired::new().with_state(json!(1)),
        &caps(json!({})),
        &binding,
    )
    .unwrap();
    let err = parse(
        &sealer,
        &spent(),
        &params(json!({"requestState": result["requestState"]})),
        &binding,
    )
    .unwrap_err();
    assert_eq!(
        err.to_error_object().data,
        Some(json!({"reason": "expired"}))
    );
}

#[test]
fn input_responses_must_be_objects_of_objects() {
    let sealer = Sealer::new([1; 32]);
    let b = Binding::new("tools/call", "t", &json!({}));
    for bad in [
        json!({"inputResponses": null}),
        json!({"inputResponses": {"k": 12345}}),
        json!({"inputResponses": []}),
    ] {
        assert_eq!(
            parse(&sealer, &spent(), &params(bad), &b)
                .unwrap_err()
                .code(),
            -32602
        );
    }
    let ok = parse(
        &sealer,
        &spent(),
        &params(json!({"inputResponses": {"k": {"action": "decline"}}})),
        &b,
    )
    .unwrap();
    assert_eq!(ok.input_responses.len(), 1);
    assert!(
        parse(&sealer, &spent(), &Map::new(), &b)
            .unwrap()
            .request_state
            .is_none()
    );
}

#[test]
fn capabilities_gate_every_request() {
    let round = InputRequired::new()
        .elicit(
            "e",
            "Name?",
            json!({"type": "object", "properties": {"n": {"type": "string"}}}),
        )
        .sample("s", "Hi", 10)
        .list_roots("r");
    let err = check_capabilities(&round, &caps(json!({"sampling": {}}))).unwrap_err();
    assert_eq!(err.code(), -32021);
    assert_eq!(
        err.to_error_object().data,
        Some(json!({"requiredCapabilities": {"elicitation": {}, "roots": {}}}))
    );
    check_capabilities(
        &round,
        &caps(json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})),
    )
    .unwrap();
    let url = InputRequired::new().request(
        "u",
        "elicitation/create",
        json!({"mode": "url", "url": "https://x", "message": "m"}),
    );
    let err = check_capabilities(&url, &caps(json!({"elicitation": {}}))).unwrap_err();
    assert_eq!(
        err.to_error_object().data,
        Some(json!({"requiredCapabilities": {"elicitation": {"url": {}}}}))
    );
    // A client that declared URL mode only gets no form-mode request.
    let form = InputRequired::new().elicit("f", "Name?", json!({"type": "object"}));
    let err = check_capabilities(&form, &caps(json!({"elicitation": {"url": {}}}))).unwrap_err();
    assert_eq!(
        err.to_error_object().data,
        Some(json!({"requiredCapabilities": {"elicitation": {"form": {}}}}))
    );
    check_capabilities(
        &form,
        &caps(json!({"elicitation": {"form": {}, "url": {}}})),
    )
    .unwrap();
    let bogus = InputRequired::new().request("x", "tools/call", json!({}));
    assert_eq!(
        check_capabilities(&bogus, &caps(json!({})))
            .unwrap_err()
            .code(),
        -32603
    );
}

#[test]
fn answers_are_read() {
    let r = params(json!({
        "e": {"action": "accept", "content": {"name": "Alice"}},
        "d": {"action": "decline"},
        "s": {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"},
        "r": {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]},
    }));
    assert_eq!(elicited(&r, "e").unwrap()["name"], "Alice");
    assert!(elicited(&r, "d").is_none());
    assert_eq!(sampled_text(&r, "s"), Some("Paris"));
    assert_eq!(roots(&r, "r"), Some(vec!["file:///a", "file:///b"]));
    assert!(roots(&r, "missing").is_none());
}
