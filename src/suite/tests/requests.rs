//! MRTR rounds, resources, prompts, completion and logging.

use super::*;

#[tokio::test]
async fn mrtr_rounds_are_sealed_gated_and_verified() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .tool(
            ToolBuilder::new("ask")
                .description("d")
                .handler(|c| async move {
                    match (c.request_state.clone(), c.elicited("name")) {
                        (Some(state), Some(answer)) => Ok(CallToolResult::text(format!(
                            "{state} {}",
                            Value::Object(answer.clone())
                        ))
                        .into()),
                        _ => Ok(InputRequired::new()
                            .elicit(
                                "name",
                                "Name?",
                                json!({"type": "object", "properties": {"n": {"type": "string"}}}),
                            )
                            .with_state(json!({"round": 1}))
                            .into()),
                    }
                }),
        )
        .build();
    let (ch, _rx) = channel_with(json!({"elicitation": {}}));
    let round = suite
        .call(
            "tools/call",
            params(json!({"name": "ask", "arguments": {"a": 1}})),
            ch.clone(),
        )
        .await
        .unwrap();
    assert_eq!(round["resultType"], "input_required");
    assert_eq!(
        round["inputRequests"]["name"]["method"],
        "elicitation/create"
    );
    assert!(round.get("ttlMs").is_none());
    let state = round["requestState"].clone();
    let retry = json!({"name": "ask", "arguments": {"a": 1}, "requestState": state,
        "inputResponses": {"name": {"action": "accept", "content": {"n": "Ada"}}}});
    let done = suite
        .call("tools/call", params(retry.clone()), ch.clone())
        .await
        .unwrap();
    assert_eq!(done["content"][0]["text"], r#"{"round":1} {"n":"Ada"}"#);
    let mut other = retry.clone();
    other["arguments"] = json!({"a": 2});
    let err = suite
        .call("tools/call", params(other), ch.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), -32602);
    // Undeclared capability.
    let err = call(&suite, "tools/call", json!({"name": "ask"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), -32021);
    assert_eq!(
        err.to_error_object().data,
        Some(json!({"requiredCapabilities": {"elicitation": {}}}))
    );
}

#[tokio::test]
async fn resources_are_read_by_the_longest_prefix_and_not_found_names_the_uri() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .read_cache(CacheHint::new(5, CacheScope::Public))
        .resources(
            ResourceSet::new("x://")
                .text(Resource::new("x://a/1", "outer"), "outer")
                .template(ResourceTemplate::new("x://t/{id}", "t"), |r| async move {
                    Ok(ResourceContents::text(
                        r.uri.clone(),
                        "text/plain",
                        format!("id={}", r.var("id").unwrap_or("?")),
                    )
                    .into())
                }),
        )
        .resources(
            ResourceSet::new("x://a/")
                .cache(CacheHint::new(60_000, CacheScope::Private))
                .text(Resource::new("x://a/1", "inner"), "inner")
                .dynamic(Resource::new("x://a/empty", "empty"), |_| async {
                    Ok(ReadOutcome::from(Vec::new()))
                }),
        )
        .build();
    let r = call(&suite, "resources/read", json!({"uri": "x://a/1"}))
        .await
        .unwrap();
    assert_eq!(r["contents"][0]["text"], "inner");
    assert_eq!(
        (r["ttlMs"].clone(), r["cacheScope"].clone()),
        (json!(60_000), json!("private"))
    );
    let r = call(&suite, "resources/read", json!({"uri": "x://t/42"}))
        .await
        .unwrap();
    assert_eq!(r["contents"][0]["text"], "id=42");
    assert_eq!(r["ttlMs"], 5);
    for uri in ["x://a/empty", "x://none", "y://a/1"] {
        let err = call(&suite, "resources/read", json!({"uri": uri}))
            .await
            .unwrap_err();
        assert_eq!(err.code(), -32602);
        assert_eq!(
            err.to_error_object().data,
            Some(json!({"uri": uri})),
            "{uri}"
        );
    }
    let list = call(&suite, "resources/list", json!({})).await.unwrap();
    assert_eq!(names(&list, "resources"), vec!["outer", "inner", "empty"]);
    // The list hint combines the providers: smallest TTL, private if any is.
    assert_eq!(
        (list["ttlMs"].clone(), list["cacheScope"].clone()),
        (json!(0), json!("private"))
    );
    let t = call(&suite, "resources/templates/list", json!({}))
        .await
        .unwrap();
    assert_eq!(
        t["resourceTemplates"],
        json!([{"uriTemplate": "x://t/{id}", "name": "t"}])
    );
}

#[tokio::test]
async fn prompts_and_completion_check_their_references() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .prompt(
            PromptBuilder::new("greet")
                .description("d")
                .argument("who", "whom", true)
                .handler(|g| async move {
                    Ok(
                        GetPromptResult::user_text(format!("hi {}", g.arg("who").unwrap_or("?")))
                            .into(),
                    )
                }),
        )
        .resources(
            ResourceSet::new("x://").template(ResourceTemplate::new("x://{id}", "t"), |_| async {
                Ok(ReadOutcome::NotFound)
            }),
        )
        .completer(
            Completions::new()
                .prompt_argument("greet", "who", ["Ada", "Alan", "Grace"])
                .template_variable("x://{id}", "id", ["1", "2"]),
        )
        .build();
    let r = call(
        &suite,
        "prompts/get",
        json!({"name": "greet", "arguments": {"who": "Ada"}}),
    )
    .await
    .unwrap();
    assert_eq!(r["messages"][0]["content"]["text"], "hi Ada");
    let err = call(&suite, "prompts/get", json!({"name": "greet"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), -32602);
    let err = call(&suite, "prompts/get", json!({"name": "zz"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), -32602);
    let c = call(&suite, "completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "A"}})).await.unwrap();
    assert_eq!(c["completion"], json!({"values": ["Ada", "Alan"]}));
    let c = call(&suite, "completion/complete", json!({"ref": {"type": "ref/resource", "uri": "x://{id}"}, "argument": {"name": "id", "value": ""}})).await.unwrap();
    assert_eq!(c["completion"]["values"], json!(["1", "2"]));
    for bad in [
        json!({"ref": {"type": "ref/prompt", "name": "zz"}, "argument": {"name": "who", "value": ""}}),
        json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "zz", "value": ""}}),
        json!({"ref": {"type": "ref/resource", "uri": "x://other"}, "argument": {"name": "id", "value": ""}}),
        json!({"ref": {"type": "ref/resource", "uri": "x://{id}"}, "argument": {"name": "zz", "value": ""}}),
    ] {
        assert_eq!(
            call(&suite, "completion/complete", bad.clone())
                .await
                .unwrap_err()
                .code(),
            -32602,
            "{bad}"
        );
    }
}

#[test]
fn logging_is_advertised_only_when_enabled() {
    let quiet = Suite::builder(Implementation::new("q", "1")).build();
    assert!(quiet.capabilities(&channel()).logging.is_none());
    let loud = Suite::builder(Implementation::new("l", "1"))
        .logging()
        .build();
    assert_eq!(loud.capabilities(&channel()).logging, Some(Map::new()));
}
