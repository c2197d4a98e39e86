//! MCP Apps over real HTTP: the notes demo's view (`genmcp serve --apps`) is
//! declared, listed and read with its MIME type and `_meta.ui`, its tool names
//! it in `_meta.ui` and the flat `ui/resourceUri`, a 2025 `initialize`
//! declares the extension, and a tool with a view always answers with a text
//! block.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::{call, legacy};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::pubsub::Bus;
use genmcp::suite::apps::{self, ToolUi, UiMeta, UiResource, UiResources, Visibility};
use serde_json::{Value, json};

fn demo() -> ServerThread {
    ServerThread::spawn(
        || genmcp_cli::demo::suite_with_options(Bus::new(), None, Default::default(), None, true).0,
        common::config(),
    )
    .expect("server starts")
}

fn result(srv: &ServerThread, method: &str, params: Value) -> Value {
    let body = call(srv.addr, json!(1), method, params).json();
    assert!(body.get("error").is_none(), "{method}: {body}");
    body["result"].clone()
}

#[test]
fn the_notes_view_is_declared_listed_read_and_named_by_its_tool() {
    let srv = demo();
    let discover = result(&srv, "server/discover", json!({}));
    assert_eq!(
        discover["capabilities"]["extensions"]["io.modelcontextprotocol/ui"],
        json!({})
    );

    let tools = result(&srv, "tools/list", json!({}));
    let show = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "show_notes")
        .expect("show_notes is listed")
        .clone();
    assert_eq!(
        show["_meta"],
        json!({"ui": {"resourceUri": "ui://notes/board", "visibility": ["model", "app"]},
               "ui/resourceUri": "ui://notes/board"})
    );

    let listed = result(&srv, "resources/list", json!({}));
    let view = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"] == "ui://notes/board")
        .expect("the view is listed")
        .clone();
    assert_eq!(view["mimeType"], "text/html;profile=mcp-app");
    assert_eq!(view["_meta"], json!({"ui": {"prefersBorder": true}}));

    let read = result(&srv, "resources/read", json!({"uri": "ui://notes/board"}));
    let contents = &read["contents"][0];
    assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
    assert_eq!(contents["_meta"], json!({"ui": {"prefersBorder": true}}));
    assert!(
        contents["text"]
            .as_str()
            .unwrap()
            .starts_with("<!doctype html>")
    );

    // The tool's result: text for hosts without the view, structured for it.
    result(
        &srv,
        "tools/call",
        json!({"name": "add_note", "arguments": {"text": "buy milk"}}),
    );
    let shown = result(
        &srv,
        "tools/call",
        json!({"name": "show_notes", "arguments": {}}),
    );
    assert!(
        shown["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("buy milk")
    );
    assert_eq!(shown["structuredContent"]["notes"][0]["text"], "buy milk");

    // A 2025 session is told about the extension in initialize.
    let init = legacy::initialize_with(srv.addr, legacy::LEGACY, json!({})).json();
    assert_eq!(
        init["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/ui": {}})
    );
}

#[test]
fn a_tool_with_a_view_always_answers_with_text() {
    let srv = ServerThread::spawn(
        || {
            let mut meta = UiMeta::default();
            meta.domain = Some("https://views.example.com".into());
            let mut csp = apps::Csp::default();
            csp.connect_domains = vec!["https://api.example.com".into()];
            meta.csp = Some(csp);
            Suite::builder(Implementation::new("apps", "1.0.0"))
                .apps(
                    UiResources::new()
                        .view(
                            UiResource::new("ui://v/main", "main", "<p>hi</p>").meta(meta.clone()),
                        )
                        .view(
                            UiResource::blob("ui://v/bytes", "bytes", b"<p>\xe9t\xe9</p>".to_vec())
                                .meta(meta),
                        ),
                )
                .tool(
                    ToolBuilder::new("structured_only")
                        .description("no text of its own")
                        .ui(ToolUi::new("ui://v/main").visibility([Visibility::App]))
                        .handler(|_call| async {
                            Ok(CallToolResult::new(Vec::new())
                                .with_structured(json!({"n": 1}))
                                .into())
                        }),
                )
                .tool(
                    ToolBuilder::new("plain")
                        .description("no view")
                        .handler(|_call| async { Ok(CallToolResult::new(Vec::new()).into()) }),
                )
                .build()
        },
        common::config(),
    )
    .expect("server starts");
    let r = result(
        &srv,
        "tools/call",
        json!({"name": "structured_only", "arguments": {}}),
    );
    assert_eq!(r["content"], json!([{"type": "text", "text": "{\"n\":1}"}]));
    let plain = result(
        &srv,
        "tools/call",
        json!({"name": "plain", "arguments": {}}),
    );
    assert_eq!(
        plain["content"],
        json!([]),
        "tools without a view are left alone"
    );
    let read = result(&srv, "resources/read", json!({"uri": "ui://v/main"}));
    assert_eq!(
        read["contents"][0]["_meta"]["ui"],
        json!({"csp": {"connectDomains": ["https://api.example.com"]}, "domain": "https://views.example.com"})
    );
    // A view kept as bytes (here Latin-1, not UTF-8) is read as a blob, with
    // the same MIME type and _meta.ui.
    let read = result(&srv, "resources/read", json!({"uri": "ui://v/bytes"}));
    let c = &read["contents"][0];
    assert_eq!(c["blob"], "PHA+6XTpPC9wPg==", "{read}");
    assert!(c.get("text").is_none(), "{read}");
    assert_eq!(c["mimeType"], apps::MIME_TYPE);
    assert_eq!(c["_meta"]["ui"]["domain"], "https://views.example.com");
    let list = result(&srv, "resources/list", json!({}));
    assert!(
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["uri"] == "ui://v/bytes" && r["mimeType"] == apps::MIME_TYPE),
        "{list}"
    );
    let tools = result(&srv, "tools/list", json!({}));
    assert_eq!(
        tools["tools"][0]["_meta"]["ui"]["visibility"],
        json!(["app"])
    );
}
