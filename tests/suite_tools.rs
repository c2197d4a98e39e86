//! The suite's tools over real HTTP: argument validation against the input
//! schema, `x-mcp-header` → `Mcp-Param-*`, `tools/list` pagination with sealed
//! cursors, and capability gating of unserved kinds.

mod common;

use std::time::Duration;

use common::{call, headers, post, request};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{GetPromptResult, PromptBuilder};
use serde_json::{Value, json};

fn serve<H: SubscriptionHandler>(make: impl FnOnce() -> Suite<H> + Send + 'static) -> ServerThread {
    ServerThread::spawn(make, common::probe::config()).expect("server starts")
}

fn fixtures() -> ServerThread {
    serve(genmcp_cli::fixtures::suite)
}

fn echo(name: &str) -> impl Tool {
    ToolBuilder::new(name)
        .description("echoes its arguments")
        .handler(|c| async move {
            Ok(CallToolResult::text(Value::Object(c.arguments).to_string()).into())
        })
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
/// Arguments the input schema refuses are a tool execution error the model
/// can correct (SEP-1303): a result with `isError` naming each error, and the
/// tool never runs; a request without its name is still a protocol error.
fn schema_invalid_arguments_are_an_is_error_result_naming_the_errors() {
    let srv = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .tool(
                ToolBuilder::new("typed")
                    .description("needs a positive integer n")
                    .input_schema(json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
                        "required": ["n"], "additionalProperties": false}))
                    .handler(|c| async move { Ok(CallToolResult::text(format!("n={}", c.arguments["n"])).into()) }),
            )
            .build()
    });
    let r = call(
        srv.addr,
        json!(1),
        "tools/call",
        json!({"name": "typed", "arguments": {"n": "three", "extra": true}}),
    );
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["id"], 1);
    assert!(body.get("error").is_none(), "{body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"]
        .as_str()
        .expect("a text block");
    assert!(
        text.starts_with("Invalid params: arguments do not match the input schema of tool typed"),
        "{text}"
    );
    assert!(text.contains("\n- /n: "), "the error at /n: {text}");
    assert!(
        text.contains("\n- /: "),
        "the additional property, at the root: {text}"
    );

    let missing = call(srv.addr, json!(2), "tools/call", json!({"name": "typed"})).json();
    assert_eq!(missing["result"]["isError"], true, "{missing}");
    let ok = call(
        srv.addr,
        json!(3),
        "tools/call",
        json!({"name": "typed", "arguments": {"n": 4}}),
    )
    .json();
    assert_eq!(ok["result"]["content"][0]["text"], "n=4");
}

#[test]
fn the_2020_12_fixture_schema_is_served_verbatim_and_enforced() {
    let srv = fixtures();
    let list = call(srv.addr, json!(1), "tools/list", json!({})).json();
    let tool = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .expect("fixture listed")
        .clone();
    let schema = &tool["inputSchema"];
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema["else"], json!({"required": ["email"]}));
    let keys: Vec<&str> = schema
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "$schema",
            "type",
            "$defs",
            "properties",
            "allOf",
            "if",
            "then",
            "else",
            "additionalProperties"
        ],
        "key order is kept"
    );
    let call_with = |id: i64, args: Value| {
        call(
            srv.addr,
            json!(id),
            "tools/call",
            json!({"name": "json_schema_2020_12_tool", "arguments": args}),
        )
        .json()
    };
    // anyOf phone/email unmet; then-branch (phone) unmet; additionalProperties
    // false: bad input is a tool execution error the model can correct
    // (SEP-1303), a result with `isError`, not a protocol error.
    let refused = |r: Value| {
        assert!(r.get("error").is_none(), "{r}");
        assert_eq!(r["result"]["isError"], true, "{r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(text.contains("do not match the input schema"), "{r}");
    };
    refused(call_with(2, json!({})));
    refused(call_with(
        3,
        json!({"contactMethod": "phone", "email": "a@b"}),
    ));
    refused(call_with(4, json!({"email": "a@b", "zip": 1})));
    refused(call_with(
        5,
        json!({"email": "a@b", "address": {"city": 5}}),
    ));
    let ok = call_with(
        6,
        json!({"name": "Ada", "email": "a@b", "address": {"city": "Paris"}}),
    );
    assert_eq!(
        ok["result"]["content"][0]["text"],
        "Contact details accepted for Ada"
    );
}

fn custom_header_call(
    addr: std::net::SocketAddr,
    id: i64,
    region: Value,
    header: Option<&str>,
) -> common::Response {
    let mut h = headers("tools/call", Some("test_custom_header"));
    if let Some(v) = header {
        h.push(("Mcp-Param-Region".into(), v.into()));
    }
    post(
        addr,
        &h,
        &request(
            json!(id),
            "tools/call",
            json!({"name": "test_custom_header", "arguments": {"region": region}}),
        ),
    )
}

#[test]
fn x_mcp_header_arguments_need_a_matching_param_header() {
    let srv = fixtures();
    let ok = custom_header_call(srv.addr, 1, json!("eu-west"), Some("eu-west"));
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["result"]["content"][0]["text"], "region=eu-west");
    let b64 = custom_header_call(srv.addr, 2, json!("Grüße"), Some("=?base64?R3LDvMOfZQ==?="));
    assert_eq!(
        (
            b64.status,
            b64.json()["result"]["content"][0]["text"].clone()
        ),
        (200, json!("region=Grüße"))
    );
    for (id, header) in [
        (3, None),
        (4, Some("us-east")),
        (5, Some("=?base64?ZXUtd2VzdA?=")),
    ] {
        let r = custom_header_call(srv.addr, id, json!("eu-west"), header);
        assert_eq!(r.status, 400, "{header:?}");
        assert_eq!(r.json()["error"]["code"], -32020, "{header:?}");
        assert_eq!(r.json()["id"], id);
    }
    // A null or absent argument needs no header (and then fails validation:
    // region is required, a tool execution error).
    let r = custom_header_call(srv.addr, 6, Value::Null, None);
    assert_eq!(
        (r.status, r.json()["result"]["isError"].clone()),
        (200, json!(true))
    );
}

#[test]
fn integer_and_boolean_header_arguments_compare_by_value() {
    let srv = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .tool(
                ToolBuilder::new("typed_headers")
                    .description("integer and boolean header parameters")
                    .input_schema(json!({"type": "object", "properties": {
                        "n": {"type": "integer", "x-mcp-header": "N"},
                        "on": {"type": "boolean", "x-mcp-header": "On"}}}))
                    .handler(|_| async { Ok(CallToolResult::text("ok").into()) }),
            )
            .build()
    });
    let send = |id: i64, extra: &[(&str, &str)]| {
        let mut h = headers("tools/call", Some("typed_headers"));
        for (k, v) in extra {
            h.push(((*k).into(), (*v).into()));
        }
        post(
            srv.addr,
            &h,
            &request(
                json!(id),
                "tools/call",
                json!({"name": "typed_headers", "arguments": {"n": 42, "on": true}}),
            ),
        )
    };
    assert_eq!(
        send(1, &[("Mcp-Param-N", "42"), ("Mcp-Param-On", "true")]).status,
        200
    );
    assert_eq!(
        send(2, &[("Mcp-Param-N", "43"), ("Mcp-Param-On", "true")]).status,
        400
    );
    assert_eq!(send(3, &[("Mcp-Param-N", "42")]).status, 400);
    assert_eq!(
        send(4, &[("Mcp-Param-N", "42"), ("Mcp-Param-On", "false")]).status,
        400
    );
}

#[test]
fn tools_list_paginates_over_several_pages_in_insertion_order() {
    let srv = serve(|| {
        let mut b = Suite::builder(Implementation::new("t", "1")).page_size(3);
        for name in ["g", "f", "e", "d", "c", "b", "a"] {
            b = b.tool(echo(name));
        }
        b.build()
    });
    let mut cursor: Option<Value> = None;
    let mut pages = Vec::new();
    for id in 0..10 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = call(srv.addr, json!(id), "tools/list", params).json();
        let result = &r["result"];
        assert_eq!(result["ttlMs"], 0);
        assert_eq!(
            result["cacheScope"], "public",
            "every page has the same scope"
        );
        pages.push(tool_names(result));
        match result.get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    assert_eq!(
        pages,
        vec![vec!["g", "f", "e"], vec!["d", "c", "b"], vec!["a"]]
    );
}

#[test]
fn tampered_garbage_foreign_and_expired_cursors_are_invalid() {
    let srv = serve(|| {
        let mut b = Suite::builder(Implementation::new("t", "1"))
            .page_size(1)
            .cursor_ttl(Duration::from_secs(3))
            .prompt(
                PromptBuilder::new("p")
                    .description("p")
                    .handler(|_| async { Ok(GetPromptResult::user_text("x").into()) }),
            );
        for name in ["a", "b", "c"] {
            b = b.tool(echo(name));
        }
        b.build()
    });
    let first = call(srv.addr, json!(1), "tools/list", json!({})).json();
    let cursor = first["result"]["nextCursor"]
        .as_str()
        .expect("a next cursor")
        .to_owned();
    let mut flipped = cursor.clone().into_bytes();
    flipped[2] = if flipped[2] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    let invalid = |id: i64, method: &str, cursor: Value| {
        let r = call(srv.addr, json!(id), method, json!({"cursor": cursor}));
        assert_eq!(r.status, 200, "{cursor}");
        let body = r.json();
        assert_eq!(body["error"]["code"], -32602, "{cursor}");
        assert_eq!(body["error"]["message"], "Invalid cursor", "{cursor}");
    };
    invalid(2, "tools/list", json!(flipped));
    invalid(3, "tools/list", json!(format!("{cursor}-TAMPERED")));
    invalid(4, "tools/list", json!("not-a-cursor"));
    invalid(5, "tools/list", json!(""));
    invalid(6, "tools/list", json!(12));
    invalid(7, "prompts/list", json!(cursor.clone()));
    // Still valid now...
    let second = call(srv.addr, json!(8), "tools/list", json!({"cursor": cursor})).json();
    assert_eq!(tool_names(&second["result"]), vec!["b"]);
    // ...and expired later.
    std::thread::sleep(Duration::from_millis(3_100));
    invalid(9, "tools/list", json!(cursor));
}

#[test]
fn unserved_kinds_are_not_advertised_and_answer_404() {
    let srv = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .tool(echo("only"))
            .build()
    });
    let discover = call(srv.addr, json!(1), "server/discover", json!({})).json();
    assert_eq!(discover["result"]["capabilities"], json!({"tools": {}}));
    for (id, method, params) in [
        (2, "prompts/list", json!({})),
        (3, "prompts/get", json!({"name": "x"})),
        (4, "resources/list", json!({})),
        (5, "resources/templates/list", json!({})),
        (6, "resources/read", json!({"uri": "x://y"})),
        (
            7,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}}),
        ),
        (
            8,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        ),
    ] {
        let r = call(srv.addr, json!(id), method, params);
        assert_eq!(r.status, 404, "{method}");
        assert_eq!(r.json()["error"]["code"], -32601, "{method}");
    }
    assert_eq!(
        call(srv.addr, json!(9), "tools/list", json!({})).status,
        200
    );
}

#[test]
fn resource_links_and_structured_content_are_served() {
    let srv = fixtures();
    let link = call(
        srv.addr,
        json!(1),
        "tools/call",
        json!({"name": "test_resource_link", "arguments": {}}),
    )
    .json();
    assert_eq!(
        link["result"]["content"][0],
        json!({"type": "resource_link", "uri": "test://static-text", "name": "static-text"})
    );
    let structured = call(
        srv.addr,
        json!(2),
        "tools/call",
        json!({"name": "test_structured_content", "arguments": {}}),
    )
    .json();
    assert_eq!(
        structured["result"]["structuredContent"],
        json!({"temperature": 21.5, "unit": "celsius"})
    );
    assert_eq!(structured["result"]["resultType"], "complete");
    let error = call(
        srv.addr,
        json!(3),
        "tools/call",
        json!({"name": "test_error_handling", "arguments": {}}),
    )
    .json();
    assert_eq!(error["result"]["isError"], true);
    let unknown = call(
        srv.addr,
        json!(4),
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    )
    .json();
    assert_eq!(
        unknown["error"]["code"], -32602,
        "an unknown tool is a protocol error, not isError"
    );
}
