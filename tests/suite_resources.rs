//! Resources, templates, prompts and completion over real HTTP: not-found
//! errors, template matching, prompt arguments, completion references,
//! pagination of resources and prompts, and cache hints.

mod common;

use common::call;
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{GetPromptResult, PromptBuilder, Resource, ResourceSet, ResourceTemplate};
use serde_json::{Value, json};

fn serve<H: SubscriptionHandler>(make: impl FnOnce() -> Suite<H> + Send + 'static) -> ServerThread {
    ServerThread::spawn(make, common::probe::config()).expect("server starts")
}

fn fixtures() -> ServerThread {
    serve(genmcp_cli::fixtures::suite)
}

fn field_list(result: &Value, key: &str, field: &str) -> Vec<String> {
    result[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} array in {result}"))
        .iter()
        .map(|t| t[field].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn reading_an_unknown_resource_is_invalid_params_naming_the_uri() {
    let srv = fixtures();
    for (id, uri) in [
        (1, "test://nope"),
        (2, "test://template/1/2/data"),
        (3, "other://static-text"),
    ] {
        let r = call(srv.addr, json!(id), "resources/read", json!({"uri": uri}));
        assert_eq!(r.status, 200);
        let body = r.json();
        assert_eq!(body["error"]["code"], -32602, "{uri}");
        assert_eq!(body["error"]["message"], "Resource not found");
        assert_eq!(body["error"]["data"], json!({"uri": uri}));
        assert!(body.get("result").is_none(), "never empty contents");
    }
}

#[test]
fn templates_are_listed_and_matched_on_read() {
    let srv = fixtures();
    let t = call(srv.addr, json!(1), "resources/templates/list", json!({})).json();
    assert_eq!(
        t["result"]["resourceTemplates"],
        json!([{"uriTemplate": "test://template/{id}/data", "name": "template-data",
            "description": "A templated JSON resource", "mimeType": "application/json"}])
    );
    assert!(t["result"]["ttlMs"].is_u64() && t["result"]["cacheScope"].is_string());
    let r = call(
        srv.addr,
        json!(2),
        "resources/read",
        json!({"uri": "test://template/a%20b/data"}),
    )
    .json();
    let contents = &r["result"]["contents"][0];
    assert_eq!(contents["uri"], "test://template/a%20b/data");
    let data: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        data,
        json!({"id": "a b", "templateTest": true, "data": "Data for ID: a b"})
    );
    let list = call(srv.addr, json!(3), "resources/list", json!({})).json();
    assert_eq!(
        field_list(&list["result"], "resources", "uri"),
        ["test://static-text", "test://static-binary"]
    );
    let bin = call(
        srv.addr,
        json!(4),
        "resources/read",
        json!({"uri": "test://static-binary"}),
    )
    .json();
    assert_eq!(bin["result"]["contents"][0]["mimeType"], "image/png");
    assert!(
        bin["result"]["contents"][0]["blob"]
            .as_str()
            .is_some_and(|b| b.starts_with("iVBORw0KGgo"))
    );
}

#[test]
fn prompt_arguments_are_checked() {
    let srv = fixtures();
    let get = |id: i64, params: Value| call(srv.addr, json!(id), "prompts/get", params).json();
    let ok = get(
        1,
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
    );
    assert_eq!(
        ok["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='hello', arg2='world'"}}])
    );
    let missing = get(
        2,
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello"}}),
    );
    assert_eq!(missing["error"]["code"], -32602);
    assert_eq!(missing["error"]["data"]["missing"], json!(["arg2"]));
    let typed = get(
        3,
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": 2}}),
    );
    assert_eq!(typed["error"]["code"], -32602);
    let unknown = get(4, json!({"name": "no_such_prompt"}));
    assert_eq!(unknown["error"]["code"], -32602);
    let embedded = get(
        5,
        json!({"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://x"}}),
    );
    assert_eq!(
        embedded["result"]["messages"][0]["content"]["resource"]["uri"],
        "test://x"
    );
    let list = call(srv.addr, json!(6), "prompts/list", json!({})).json();
    let args = list["result"]["prompts"][1]["arguments"].clone();
    assert_eq!(
        args[0],
        json!({"name": "arg1", "description": "First test argument", "required": true})
    );
}

#[test]
fn completion_covers_prompt_arguments_and_template_variables() {
    let srv = fixtures();
    let complete = |id: i64, r: Value, name: &str, value: &str| {
        call(
            srv.addr,
            json!(id),
            "completion/complete",
            json!({"ref": r, "argument": {"name": name, "value": value}}),
        )
        .json()
    };
    let p = complete(
        1,
        json!({"type": "ref/prompt", "name": "test_prompt_with_arguments"}),
        "arg1",
        "te",
    );
    assert_eq!(
        p["result"]["completion"]["values"],
        json!(["test", "testing", "test-value-1"])
    );
    assert_eq!(p["result"]["resultType"], "complete");
    let t = complete(
        2,
        json!({"type": "ref/resource", "uri": "test://template/{id}/data"}),
        "id",
        "12",
    );
    assert_eq!(t["result"]["completion"]["values"], json!(["123", "124"]));
    let none = complete(
        3,
        json!({"type": "ref/prompt", "name": "test_prompt_with_arguments"}),
        "arg1",
        "zzz",
    );
    assert_eq!(none["result"]["completion"]["values"], json!([]));
    for (id, r, name) in [
        (4, json!({"type": "ref/prompt", "name": "nope"}), "arg1"),
        (
            5,
            json!({"type": "ref/prompt", "name": "test_prompt_with_arguments"}),
            "arg9",
        ),
        (
            6,
            json!({"type": "ref/resource", "uri": "test://template/{id}"}),
            "id",
        ),
        (7, json!({"type": "ref/tool", "name": "x"}), "a"),
    ] {
        assert_eq!(
            complete(id, r.clone(), name, "")["error"]["code"],
            -32602,
            "{r}"
        );
    }
    // Without a completer: not advertised, -32601 / 404.
    let bare = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .prompt(
                PromptBuilder::new("p")
                    .description("d")
                    .argument("a", "a", false)
                    .handler(|_| async { Ok(GetPromptResult::user_text("x").into()) }),
            )
            .build()
    });
    let d = call(bare.addr, json!(1), "server/discover", json!({})).json();
    assert!(d["result"]["capabilities"].get("completions").is_none());
    let r = call(
        bare.addr,
        json!(2),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}}),
    );
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (404, json!(-32601))
    );
}

#[test]
fn resources_and_prompts_paginate_and_carry_their_cache_hints() {
    let srv = serve(|| {
        let mut set = ResourceSet::new("mem://").cache(CacheHint::new(30_000, CacheScope::Private));
        for i in 0..5 {
            set = set.text(
                Resource::new(format!("mem://{i}"), format!("r{i}")),
                format!("body {i}"),
            );
        }
        set = set.template(ResourceTemplate::new("mem://t/{x}", "t"), |_| async {
            Ok(genmcp::suite::ReadOutcome::NotFound)
        });
        let mut b = Suite::builder(Implementation::new("t", "1"))
            .page_size(2)
            .prompts_cache(CacheHint::new(120_000, CacheScope::Public))
            .discover_cache(CacheHint::new(3_600_000, CacheScope::Public))
            .resources(set);
        for name in ["p0", "p1", "p2"] {
            b = b.prompt(
                PromptBuilder::new(name)
                    .description("d")
                    .handler(|_| async { Ok(GetPromptResult::user_text("x").into()) }),
            );
        }
        b.build()
    });
    let walk = |method: &str, key: &str, field: &str| {
        let mut out = Vec::new();
        let mut cursor: Option<Value> = None;
        for id in 0..10 {
            let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
            let r = call(srv.addr, json!(id), method, params).json();
            out.push((
                field_list(&r["result"], key, field),
                r["result"]["ttlMs"].clone(),
                r["result"]["cacheScope"].clone(),
            ));
            match r["result"].get("nextCursor") {
                Some(c) => cursor = Some(c.clone()),
                None => break,
            }
        }
        out
    };
    let private = (json!(30_000), json!("private"));
    let resources = walk("resources/list", "resources", "uri");
    assert_eq!(
        resources
            .iter()
            .map(|(n, _, _)| n.clone())
            .collect::<Vec<_>>(),
        vec![
            vec!["mem://0", "mem://1"],
            vec!["mem://2", "mem://3"],
            vec!["mem://4"]
        ]
    );
    assert!(
        resources
            .iter()
            .all(|(_, t, s)| (t.clone(), s.clone()) == private)
    );
    let prompts = walk("prompts/list", "prompts", "name");
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts
            .iter()
            .all(|(_, t, s)| *t == json!(120_000) && *s == json!("public"))
    );
    let read = call(
        srv.addr,
        json!(20),
        "resources/read",
        json!({"uri": "mem://3"}),
    )
    .json();
    assert_eq!(read["result"]["contents"][0]["text"], "body 3");
    assert_eq!(
        (
            read["result"]["ttlMs"].clone(),
            read["result"]["cacheScope"].clone()
        ),
        private
    );
    let d = call(srv.addr, json!(21), "server/discover", json!({})).json();
    assert_eq!(d["result"]["ttlMs"], 3_600_000);
    let tools = call(srv.addr, json!(22), "tools/list", json!({}));
    assert_eq!(tools.status, 404, "no tools were added");
}
