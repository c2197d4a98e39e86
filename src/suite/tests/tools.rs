//! Tool calls: argument validation, broken schemas, `Mcp-Param-*` headers, progress.

use super::*;

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
    // Bad input: an `isError` result naming each error; the tool never runs.
    let refused = call(
        &suite,
        "tools/call",
        json!({"name": "typed", "arguments": {"n": 0, "x": 1}}),
    )
    .await
    .unwrap();
    assert_eq!(refused["isError"], true, "{refused:?}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert_eq!(text.matches("\n- ").count(), 2, "{text}");
    assert!(text.contains("\n- /n: "), "{text}");
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
    let (tx, mut rx) = crate::mux::outbox(4);
    let mut meta = RequestMeta::current();
    meta.progress_token = Some(crate::protocol::ProgressToken::String("tok".into()));
    let ch = Channel::for_request(RequestId::Number(3), meta, Assigns::new(), tx);
    suite
        .call("tools/call", params(json!({"name": "p"})), ch)
        .await
        .unwrap();
    let frame: Value = serde_json::from_slice(&rx.try_recv().unwrap().to_bytes()).unwrap();
    assert_eq!(
        frame["params"],
        json!({"progressToken": "tok", "progress": 1, "total": 2})
    );
}
