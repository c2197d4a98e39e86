//! Typed tools and prompts over real HTTP: schemas generated from Rust types,
//! arguments deserialized into them, typed results as `structuredContent`
//! validated against `outputSchema` (for hand-written tools too), the tool
//! looked up before its arguments are read, and schema compile errors kept
//! from the client.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::call;
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{CallError, GetPromptResult, NoArgs, PromptBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn serve<H: SubscriptionHandler>(make: impl FnOnce() -> Suite<H> + Send + 'static) -> ServerThread {
    ServerThread::spawn(make, common::probe::config()).expect("server starts")
}

/// How urgent a post is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Priority {
    Low,
    High,
}

/// A position on the board.
#[derive(Debug, Deserialize, JsonSchema)]
struct Point {
    x: i32,
    y: i32,
}

/// A room name: lowercase ASCII letters only. Its schema says only "string",
/// so a value with other characters passes the schema and fails to
/// deserialize.
#[derive(Debug)]
struct Slug(String);

impl<'de> Deserialize<'de> for Slug {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase()) {
            Ok(Slug(s))
        } else {
            Err(serde::de::Error::custom("a room is lowercase letters only"))
        }
    }
}

impl JsonSchema for Slug {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Slug".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }
}

/// Posts a message.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PostArgs {
    /// The message text.
    text: String,
    /// The room (the lobby when absent).
    room: Option<Slug>,
    /// How often to post it.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 10))]
    times: u8,
    /// Labels for the message.
    #[serde(default)]
    tags: Vec<String>,
    /// How urgent it is.
    priority: Priority,
    /// Where to pin it.
    at: Option<Point>,
}

fn one() -> u8 {
    1
}

/// What `post` answers.
#[derive(Serialize, JsonSchema)]
struct Posted {
    /// The room it went to.
    room: String,
    /// How many messages were posted.
    count: u32,
    /// Whether it was urgent.
    urgent: bool,
}

fn post_tool(runs: Arc<AtomicUsize>) -> impl Tool {
    ToolBuilder::new("post")
        .description("Posts a message to a room")
        .typed(move |args: PostArgs, _call| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                if args.text.is_empty() {
                    return Err(CallError::tool("an empty message cannot be posted"));
                }
                let pinned = args.at.map(|p| (p.x, p.y));
                let _ = (&args.tags, pinned);
                Ok(Posted {
                    room: args.room.map(|r| r.0).unwrap_or_else(|| "lobby".into()),
                    count: u32::from(args.times),
                    urgent: matches!(args.priority, Priority::High),
                })
            }
        })
}

fn post_server() -> (ServerThread, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = post_tool(runs.clone());
    let srv = serve(move || {
        Suite::builder(Implementation::new("typed", "1"))
            .tool(tool)
            .build()
    });
    (srv, runs)
}

fn listed_tool(srv: &ServerThread, name: &str) -> Value {
    let list = call(srv.addr, json!(1), "tools/list", json!({})).json();
    list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} listed"))
}

fn call_tool(srv: &ServerThread, id: i64, name: &str, arguments: Value) -> common::Response {
    call(
        srv.addr,
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

#[test]
fn a_typed_tools_input_schema_is_generated_as_the_fixture_says() {
    let (srv, _) = post_server();
    let tool = listed_tool(&srv, "post");
    let expected: Value =
        serde_json::from_str(include_str!("fixtures/typed_post_input_schema.json"))
            .expect("fixture is JSON");
    assert_eq!(
        tool["inputSchema"], expected,
        "generated: {}",
        tool["inputSchema"]
    );
    assert_eq!(
        tool["inputSchema"]["type"], "object",
        "MCP needs an object root"
    );
    assert_eq!(
        tool["outputSchema"],
        json!({
            "description": "What `post` answers.",
            "type": "object",
            "properties": {
                "room": {"description": "The room it went to.", "type": "string"},
                "count": {"description": "How many messages were posted.", "type": "integer",
                    "format": "uint32", "minimum": 0},
                "urgent": {"description": "Whether it was urgent.", "type": "boolean"}
            },
            "required": ["room", "count", "urgent"]
        })
    );
}

#[test]
fn bad_arguments_to_a_typed_tool_get_the_same_is_error_result_as_a_schema_failure() {
    let (srv, runs) = post_server();
    // Caught by the generated schema: the wrong type, out of range, unknown field.
    let schema_failure = call_tool(
        &srv,
        1,
        "post",
        json!({"text": 5, "priority": "low", "times": 11, "extra": 1}),
    );
    assert_eq!(schema_failure.status, 200);
    let schema_failure = schema_failure.json()["result"].clone();
    assert_eq!(schema_failure["isError"], true, "{schema_failure}");
    let text = |r: &Value| r["content"][0]["text"].as_str().unwrap_or("").to_owned();
    let listed = text(&schema_failure);
    assert!(
        listed.contains("\n- /text: ") && listed.contains("\n- /times: "),
        "{listed}"
    );

    // Passes the schema ("room" is a string), fails to deserialize.
    let r = call_tool(
        &srv,
        2,
        "post",
        json!({"text": "hi", "priority": "low", "room": "Not A Slug"}),
    );
    assert_eq!(r.status, 200, "in-band, like a schema failure");
    let failed = r.json()["result"].clone();
    assert_eq!(failed["isError"], true, "{failed}");
    let prefix = "Invalid params: arguments do not match the input schema of tool post: ";
    for r in [&failed, &schema_failure] {
        let message = text(r);
        assert!(message.starts_with(prefix), "{message}");
    }
    assert!(text(&failed).contains("lowercase letters only"), "{failed}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");

    let ok = call_tool(
        &srv,
        3,
        "post",
        json!({"text": "hi", "priority": "high", "room": "kitchen", "times": 3}),
    )
    .json();
    assert_eq!(
        ok["result"]["structuredContent"],
        json!({"room": "kitchen", "count": 3, "urgent": true})
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_typed_output_is_structured_content_mirrored_as_text() {
    let (srv, _) = post_server();
    let r = call_tool(&srv, 1, "post", json!({"text": "hi", "priority": "low"})).json();
    let result = &r["result"];
    let structured = json!({"room": "lobby", "count": 1, "urgent": false});
    assert_eq!(result["structuredContent"], structured);
    let text = result["content"][0]["text"].as_str().expect("a text block");
    assert_eq!(
        serde_json::from_str::<Value>(text).expect("the text is JSON"),
        structured
    );
    assert!(result.get("isError").is_none());
    // A CallError::tool is an isError result, not a protocol error.
    let failed = call_tool(&srv, 2, "post", json!({"text": "", "priority": "low"})).json();
    assert_eq!(failed["result"]["isError"], true);
    assert_eq!(
        failed["result"]["content"][0]["text"],
        "an empty message cannot be posted"
    );
    assert!(failed["result"].get("structuredContent").is_none());
}

#[test]
fn structured_content_that_violates_the_output_schema_is_refused_as_a_tool_error() {
    let srv = serve(|| {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        Suite::builder(Implementation::new("t", "1"))
            .tool(
                ToolBuilder::new("liar")
                    .description("declares an integer n, returns a string")
                    .output_schema(schema.clone())
                    .handler(|_| async {
                        let bad = json!({"n": "secret-ish internal value"});
                        Ok(CallToolResult::text(bad.to_string())
                            .with_structured(bad)
                            .into())
                    }),
            )
            .tool(
                ToolBuilder::new("silent")
                    .description("declares an output schema, returns no structuredContent")
                    .output_schema(schema.clone())
                    .handler(|_| async { Ok(CallToolResult::text("nothing structured").into()) }),
            )
            .tool(
                ToolBuilder::new("honest")
                    .description("conforms")
                    .output_schema(schema)
                    .handler(|_| async {
                        let good = json!({"n": 7});
                        Ok(CallToolResult::text(good.to_string())
                            .with_structured(good)
                            .into())
                    }),
            )
            .tool(
                ToolBuilder::new("typed_ok")
                    .description("a typed tool without arguments")
                    .typed(|_: NoArgs, _| async { Ok(json!({"any": "value"})) }),
            )
            .build()
    });
    let liar = call_tool(&srv, 1, "liar", json!({}));
    assert_eq!(liar.status, 200);
    let liar = liar.json();
    assert!(
        liar.get("error").is_none(),
        "a tool error, not a protocol error"
    );
    let result = &liar["result"];
    assert_eq!(result["isError"], true);
    assert!(
        result.get("structuredContent").is_none(),
        "non-conforming content is never sent"
    );
    let text = result["content"][0]["text"].as_str().expect("text");
    assert!(
        text.starts_with(
            "Output validation error: the structuredContent of tool liar does not match its outputSchema"
        ),
        "{text}"
    );
    assert_eq!(result["content"].as_array().map(Vec::len), Some(1));

    let silent = call_tool(&srv, 2, "silent", json!({})).json();
    assert_eq!(silent["result"]["isError"], true);
    assert!(
        silent["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("returned no structuredContent"))
    );

    let honest = call_tool(&srv, 3, "honest", json!({})).json();
    assert_eq!(honest["result"]["structuredContent"], json!({"n": 7}));
    assert!(honest["result"].get("isError").is_none());

    let typed = call_tool(&srv, 4, "typed_ok", json!({"ignored": true})).json();
    assert_eq!(
        typed["result"]["structuredContent"],
        json!({"any": "value"})
    );
}

/// Arguments of the review prompt.
#[derive(Deserialize, JsonSchema)]
struct ReviewArgs {
    /// The code to review.
    code: String,
    /// What to look at first.
    #[schemars(title = "Focus")]
    focus: Option<String>,
    /// The reviewer's language.
    #[serde(default)]
    language: Option<String>,
}

#[test]
fn a_typed_prompt_lists_its_arguments_and_requires_the_required_ones() {
    let srv = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .prompt(
                PromptBuilder::new("review")
                    .description("Reviews code")
                    .typed(|args: ReviewArgs, _get| async move {
                        Ok(GetPromptResult::user_text(format!(
                            "Review ({}, {}): {}",
                            args.focus.as_deref().unwrap_or("anything"),
                            args.language.as_deref().unwrap_or("en"),
                            args.code
                        ))
                        .into())
                    }),
            )
            .build()
    });
    let list = call(srv.addr, json!(1), "prompts/list", json!({})).json();
    assert_eq!(
        list["result"]["prompts"][0]["arguments"],
        json!([
            {"name": "code", "description": "The code to review.", "required": true},
            {"name": "focus", "title": "Focus", "description": "What to look at first."},
            {"name": "language", "description": "The reviewer's language."}
        ])
    );
    let missing = call(
        srv.addr,
        json!(2),
        "prompts/get",
        json!({"name": "review", "arguments": {"focus": "naming"}}),
    );
    assert_eq!(missing.status, 200);
    let missing = missing.json();
    assert_eq!(missing["error"]["code"], -32602);
    assert_eq!(missing["error"]["data"]["missing"], json!(["code"]));
    let ok = call(
        srv.addr,
        json!(3),
        "prompts/get",
        json!({"name": "review", "arguments": {"code": "fn main() {}", "focus": "naming"}}),
    )
    .json();
    assert_eq!(
        ok["result"]["messages"][0]["content"]["text"],
        "Review (naming, en): fn main() {}"
    );
}

#[test]
fn the_tool_is_looked_up_before_its_arguments_are_read() {
    let (srv, _) = post_server();
    // About 1 MiB of arguments, and not even an object: an unknown tool is
    // still answered as unknown, not as bad arguments.
    let huge: Vec<Value> = (0..100_000).map(|i| json!(format!("{i:08}"))).collect();
    let r = call_tool(&srv, 1, "no_such_tool", Value::Array(huge.clone()));
    assert_eq!(r.status, 200);
    let error = r.json()["error"].clone();
    assert_eq!(error["code"], -32602);
    assert_eq!(error["message"], "Unknown tool: no_such_tool");
    // The same arguments to a real tool are refused as arguments.
    let bad = call_tool(&srv, 2, "post", Value::Array(huge)).json();
    assert_eq!(
        bad["error"]["message"],
        "Invalid params: arguments must be an object"
    );
}

#[test]
fn a_schema_compile_error_is_not_revealed_to_the_client() {
    let srv = serve(|| {
        Suite::builder(Implementation::new("t", "1"))
            .tool(
                ToolBuilder::new("broken_in")
                    .description("an input pattern that does not compile")
                    .input_schema(json!({"type": "object",
                        "properties": {"a": {"type": "string", "pattern": "((secret_regex"}}}))
                    .handler(|_| async { Ok(CallToolResult::text("never").into()) }),
            )
            .tool(
                ToolBuilder::new("broken_out")
                    .description("an output schema that does not compile")
                    .output_schema(json!({"type": "object",
                        "properties": {"a": {"type": "string", "pattern": "((secret_regex"}}}))
                    .handler(|_| async { Ok(CallToolResult::text("never").into()) }),
            )
            .build()
    });
    for (id, name) in [(1, "broken_in"), (2, "broken_out")] {
        let r = call_tool(&srv, id, name, json!({"a": "x"}));
        let body = String::from_utf8_lossy(&r.body).into_owned();
        let json = r.json();
        assert_eq!(json["error"]["code"], -32603, "{body}");
        assert_eq!(json["error"]["message"], "Internal error: tool unavailable");
        assert!(json["error"].get("data").is_none(), "{body}");
        for leaked in ["secret_regex", "pattern", "regex", "schema"] {
            assert!(!body.contains(leaked), "{leaked} leaked: {body}");
        }
    }
}
