//! Listing, pagination cursors and capability routing.

use super::*;

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

#[test]
fn every_result_is_stamped_with_server_info_beside_its_own_meta() {
    let suite = Suite::builder(Implementation::new("stamped", "2")).build();
    let info = json!({"name": "stamped", "version": "2"});
    let mut bare = Map::new();
    suite.stamp_result(&mut bare);
    assert_eq!(
        Value::Object(bare),
        json!({"_meta": {"io.modelcontextprotocol/serverInfo": info}})
    );
    let mut own = json!({"_meta": {"app/x": 1}}).as_object().unwrap().clone();
    suite.stamp_result(&mut own);
    assert_eq!(
        Value::Object(own),
        json!({"_meta": {"app/x": 1, "io.modelcontextprotocol/serverInfo": info}})
    );
    // A `_meta` that is not an object is the handler's business: left as is.
    let mut odd = json!({"_meta": 5}).as_object().unwrap().clone();
    suite.stamp_result(&mut odd);
    assert_eq!(Value::Object(odd), json!({"_meta": 5}));
}

#[tokio::test]
async fn every_page_of_a_list_has_its_first_pages_cache_scope() {
    let suite = Suite::builder(Implementation::new("t", "1"))
        .page_size(1)
        .resources(
            ResourceSet::new("x://")
                .text(Resource::new("x://1", "one"), "1")
                .text(Resource::new("x://2", "two"), "2"),
        )
        .build();
    let first = call(&suite, "resources/list", json!({})).await.unwrap();
    assert_eq!(first["cacheScope"], "public");
    // A private provider added between the pages.
    suite.catalog().add_resources(
        ResourceSet::new("y://")
            .cache(CacheHint::new(0, CacheScope::Private))
            .text(Resource::new("y://1", "mine"), "m"),
    );
    let next = call(
        &suite,
        "resources/list",
        json!({"cursor": first["nextCursor"]}),
    )
    .await
    .unwrap();
    assert_eq!(next["cacheScope"], "public", "{next:?}");
    // A list started now is private throughout.
    let fresh = call(&suite, "resources/list", json!({})).await.unwrap();
    assert_eq!(fresh["cacheScope"], "private");
}
