//! Unit tests of the suite dispatch (no transport: requests go straight to
//! [`Suite::call`] with an in-memory outbox).

use serde_json::json;
use tokio::sync::mpsc;

use super::*;
use crate::mux::{Assigns, Frame};
use crate::protocol::{ClientCapabilities, RequestId, RequestMeta};

fn channel_with(caps: Value) -> (Channel, mpsc::Receiver<Frame>) {
    let (tx, rx) = mpsc::channel(16);
    let mut meta = RequestMeta::current();
    meta.client_capabilities = ClientCapabilities(caps.as_object().cloned().unwrap_or_default());
    (
        Channel::for_request(RequestId::Number(1), meta, Assigns::new(), tx),
        rx,
    )
}

fn channel() -> Channel {
    channel_with(json!({})).0
}

fn params(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

async fn call<H: SubscriptionHandler>(
    suite: &Suite<H>,
    method: &str,
    p: Value,
) -> Result<Map<String, Value>, McpError> {
    suite.call(method, params(p), channel()).await
}

fn echo(name: &str) -> FnTool {
    ToolBuilder::new(name)
        .description("echo")
        .handler(|c| async move {
            Ok(CallToolResult::text(Value::Object(c.arguments).to_string()).into())
        })
}

fn suite_with_tools(n: usize, page: usize) -> Suite {
    let mut b = Suite::builder(Implementation::new("t", "1")).page_size(page);
    for i in 0..n {
        b = b.tool(echo(&format!("tool_{i:02}")));
    }
    b.build()
}

fn names(result: &Map<String, Value>, key: &str) -> Vec<String> {
    result[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn tools_are_listed_in_insertion_order_and_paginated() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .page_size(2)
        .tool(echo("zeta"))
        .tool(echo("alpha"))
        .tool(echo("mid"))
        .build();
    let first = call(&suite, "tools/list", json!({})).await.unwrap();
    assert_eq!(names(&first, "tools"), vec!["zeta", "alpha"]);
    assert_eq!(first["ttlMs"], 0);
    assert_eq!(first["cacheScope"], "public");
    let cursor = first["nextCursor"].clone();
    let second = call(&suite, "tools/list", json!({"cursor": cursor}))
        .await
        .unwrap();
    assert_eq!(names(&second, "tools"), vec!["mid"]);
    assert!(second.get("nextCursor").is_none());
    // Replacing keeps the place.
    suite.catalog().add_tool(echo("zeta"));
    assert_eq!(suite.catalog().tool_names(), vec!["zeta", "alpha", "mid"]);
    suite.catalog().remove_tool("alpha");
    assert_eq!(suite.catalog().tool_names(), vec!["zeta", "mid"]);
    assert!(suite.catalog().tool("mid").is_some());
}

#[tokio::test]
async fn cursors_are_bound_to_their_list_and_expire() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .page_size(1)
        .tool(echo("a"))
        .tool(echo("b"))
        .prompt(
            PromptBuilder::new("p1")
                .description("p")
                .handler(|_| async { Ok(GetPromptResult::user_text("x").into()) }),
        )
        .prompt(
            PromptBuilder::new("p2")
                .description("p")
                .handler(|_| async { Ok(GetPromptResult::user_text("x").into()) }),
        )
        .build();
    let tools = call(&suite, "tools/list", json!({})).await.unwrap();
    let cursor = tools["nextCursor"].as_str().unwrap().to_owned();
    let err = call(&suite, "prompts/list", json!({"cursor": cursor}))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.to_string().as_str()),
        (-32602, "Invalid cursor")
    );
    for bad in [
        json!(""),
        json!("abc"),
        json!(7),
        json!(format!("{cursor}x")),
    ] {
        let err = call(&suite, "tools/list", json!({"cursor": bad}))
            .await
            .unwrap_err();
        assert_eq!(err.code(), -32602, "{bad}");
    }
    let short = Suite::builder(Implementation::new("t", "1"))
        .page_size(1)
        .cursor_ttl(Duration::ZERO)
        .tool(echo("a"))
        .tool(echo("b"))
        .build();
    let page = call(&short, "tools/list", json!({})).await.unwrap();
    let err = call(&short, "tools/list", json!({"cursor": page["nextCursor"]}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Invalid cursor");
    // A cursor of another suite (another key) is refused.
    let other = suite_with_tools(3, 1);
    let err = call(&other, "tools/list", json!({"cursor": cursor}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), -32602);
}

#[tokio::test]
async fn a_shared_secret_makes_cursors_portable_between_replicas() {
    let make = || {
        Suite::builder(Implementation::new("t", "1"))
            .secret([9; 32])
            .page_size(1)
            .tool(echo("a"))
            .tool(echo("b"))
            .build()
    };
    let (one, two) = (make(), make());
    let page = call(&one, "tools/list", json!({})).await.unwrap();
    let next = call(&two, "tools/list", json!({"cursor": page["nextCursor"]}))
        .await
        .unwrap();
    assert_eq!(names(&next, "tools"), vec!["b"]);
}

#[tokio::test]
async fn capabilities_and_routes_follow_what_is_served() {
    let empty = Suite::builder(Implementation::new("t", "1")).build();
    let ch = channel();
    assert_eq!(
        serde_json::to_value(empty.capabilities(&ch)).unwrap(),
        json!({})
    );
    for m in [
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "completion/complete",
        "subscriptions/listen",
        "ping",
    ] {
        assert_eq!(empty.route(m, &ch).unwrap_err().code(), -32601, "{m}");
        assert_eq!(
            call(&empty, m, json!({})).await.unwrap_err().code(),
            -32601,
            "{m}"
        );
    }
    assert_eq!(empty.route("server/discover", &ch), Ok(Route::Unary));

    let catalog = Catalog::new();
    let full = Suite::builder(Implementation::new("t", "1"))
        .catalog(catalog.clone())
        .tool(echo("a"))
        .prompt(
            PromptBuilder::new("p")
                .description("p")
                .handler(|_| async { Ok(GetPromptResult::user_text("x").into()) }),
        )
        .resources(ResourceSet::new("x://"))
        .completer(Completions::new())
        .subscriptions(CatalogSubscriptions::new(&catalog))
        .build();
    assert_eq!(
        serde_json::to_value(full.capabilities(&ch)).unwrap(),
        json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true}, "completions": {}})
    );
    assert_eq!(full.route("subscriptions/listen", &ch), Ok(Route::Listen));
    assert_eq!(full.route("completion/complete", &ch), Ok(Route::Unary));
    let discover = call(&full, "server/discover", json!({})).await.unwrap();
    assert_eq!(discover["capabilities"]["completions"], json!({}));
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "t"
    );
}

#[tokio::test]
async fn arguments_are_validated_before_the_call() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .tool(
            ToolBuilder::new("typed")
                .description("d")
                .input_schema(
                    json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
                    "required": ["n"], "additionalProperties": false}),
                )
                .handler(|_| async { Ok(CallToolResult::text("ran").into()) }),
        )
        .build();
    let err = call(
        &suite,
        "tools/call",
        json!({"name": "typed", "arguments": {"n": 0, "x": 1}}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), -32602);
    let errors = err.to_error_object().data.unwrap()["errors"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().any(|e| e["instancePath"] == "/n"));
    let ok = call(
        &suite,
        "tools/call",
        json!({"name": "typed", "arguments": {"n": 2}}),
    )
    .await
    .unwrap();
    assert_eq!(ok["content"][0]["text"], "ran");
    assert_eq!(ok["resultType"], "complete");
    let err = call(&suite, "tools/call", json!({"name": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.to_string().as_str()),
        (-32602, "Unknown tool: nope")
    );
    let err = call(
        &suite,
        "tools/call",
        json!({"name": "typed", "arguments": [1]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), -32602);
}

#[tokio::test]
async fn a_tool_with_a_broken_schema_is_refused_or_answers_internal_error() {
    let broken = || {
        ToolBuilder::new("broken")
            .description("d")
            .input_schema(json!({"type": "object", "properties": {"a": {"type": 5}}}))
            .handler(|_| async { Ok(CallToolResult::text("never").into()) })
    };
    let catalog = Catalog::new();
    assert!(matches!(
        catalog.try_add_tool(broken()),
        Err(ToolError::InvalidSchema { .. })
    ));
    assert!(catalog.tool_names().is_empty());
    let bad_header = ToolBuilder::new("h")
        .input_schema(
            json!({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
        )
        .handler(|_| async { Ok(CallToolResult::text("never").into()) });
    assert!(matches!(
        catalog.try_add_tool(bad_header),
        Err(ToolError::InvalidHeaderAnnotation { .. })
    ));

    let suite = Suite::builder(Implementation::new("t", "1"))
        .tool(broken())
        .build();
    assert_eq!(suite.catalog().tool_names(), vec!["broken"]);
    let err = call(&suite, "tools/call", json!({"name": "broken"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), -32603);
    // The compiler's detail is logged, never sent.
    assert_eq!(err.to_string(), "Internal error: tool unavailable");
}

#[tokio::test]
async fn param_headers_mirror_annotated_arguments() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .tool(
            ToolBuilder::new("h")
                .description("d")
                .input_schema(json!({"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "n": {"type": "integer", "x-mcp-header": "N"},
                    "flag": {"type": "boolean", "x-mcp-header": "Flag"},
                    "nested": {"type": "object", "properties": {"id": {"type": "string", "x-mcp-header": "Id"}}}
                }}))
                .handler(|_| async { Ok(CallToolResult::text("ok").into()) }),
        )
        .build();
    let got = suite
        .param_headers(
            "tools/call",
            &params(json!({"name": "h", "arguments": {"region": "eu", "n": 3, "flag": null, "nested": {"id": "x"}}})),
        )
        .unwrap();
    assert_eq!(
        got,
        vec![
            ParamHeader {
                header: "Mcp-Param-Region".into(),
                value: json!("eu")
            },
            ParamHeader {
                header: "Mcp-Param-N".into(),
                value: json!(3)
            },
            ParamHeader {
                header: "Mcp-Param-Id".into(),
                value: json!("x")
            },
        ]
    );
    assert!(
        suite
            .param_headers("tools/list", &params(json!({"name": "h"})))
            .unwrap()
            .is_empty()
    );
    assert!(
        suite
            .param_headers(
                "tools/call",
                &params(json!({"name": "zz", "arguments": {"region": "x"}}))
            )
            .unwrap()
            .is_empty()
    );
    assert!(
        suite
            .param_headers("tools/call", &params(json!({"name": "h"})))
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn tool_progress_goes_to_the_request_outbox() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .tool(
            ToolBuilder::new("p")
                .description("d")
                .handler(|c| async move {
                    c.channel.send_progress(1.0, Some(2.0), None).ok();
                    Ok(CallToolResult::text("done").into())
                }),
        )
        .build();
    let (tx, mut rx) = mpsc::channel(4);
    let mut meta = RequestMeta::current();
    meta.progress_token = Some(crate::protocol::ProgressToken::String("tok".into()));
    let ch = Channel::for_request(RequestId::Number(3), meta, Assigns::new(), tx);
    suite
        .call("tools/call", params(json!({"name": "p"})), ch)
        .await
        .unwrap();
    let frame: Value = serde_json::from_slice(&rx.try_recv().unwrap().bytes).unwrap();
    assert_eq!(
        frame["params"],
        json!({"progressToken": "tok", "progress": 1, "total": 2})
    );
}

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
