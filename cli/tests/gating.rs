//! Methods are gated by what is advertised: a method of a capability or
//! extension the server does not declare is refused with `-32601` (HTTP 404 on
//! 2026-07-28), and one it declares is served, on both eras (2026-07-28
//! requests and 2025 sessions) and every transport (Streamable HTTP, stdio),
//! checked against what `server/discover` (2026) or `initialize` (2025) said.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::legacy;
use common::stdio_child::Peer;
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{Skill, Skills};
use serde_json::{Value, json};

/// Whether `caps` declares what `method` needs on this era (`legacy`: a 2025
/// session), as the table of docs/suite.md says.
fn advertised(caps: &Value, method: &str, legacy: bool) -> bool {
    let ext = |id: &str| caps["extensions"].get(id).is_some();
    let subscribe = caps["resources"]["subscribe"] == true;
    match method {
        "tools/list" | "tools/call" => caps.get("tools").is_some(),
        "subscriptions/listen" => {
            !legacy
                && (caps["tools"]["listChanged"] == true
                    || caps["prompts"]["listChanged"] == true
                    || caps["resources"]["listChanged"] == true
                    || subscribe
                    || ext("io.modelcontextprotocol/tasks"))
        }
        "resources/subscribe" | "resources/unsubscribe" => legacy && subscribe,
        "prompts/list" | "prompts/get" => caps.get("prompts").is_some(),
        "resources/list" | "resources/templates/list" | "resources/read" => {
            caps.get("resources").is_some()
        }
        "completion/complete" => caps.get("completions").is_some(),
        "logging/setLevel" => caps.get("logging").is_some(),
        "skills/list" | "skills/get" => ext("io.modelcontextprotocol/skills"),
        "resources/directory/read" => {
            caps["extensions"]["io.modelcontextprotocol/skills"]["directoryRead"] == true
        }
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            !legacy && ext("io.modelcontextprotocol/tasks")
        }
        other => panic!("no rule for {other}"),
    }
}

/// The gated methods of an era, with params that are valid in shape.
fn methods(legacy: bool) -> Vec<(&'static str, Value)> {
    let mut m = vec![
        ("tools/list", json!({})),
        ("tools/call", json!({"name": "nope", "arguments": {}})),
        ("subscriptions/listen", json!({"notifications": {}})),
        (
            "resources/subscribe",
            json!({"uri": "skill://nope/SKILL.md"}),
        ),
        (
            "resources/unsubscribe",
            json!({"uri": "skill://nope/SKILL.md"}),
        ),
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "nope"})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "skill://nope/SKILL.md"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}}),
        ),
        ("skills/list", json!({})),
        ("skills/get", json!({"uri": "skill://nope/SKILL.md"})),
        ("resources/directory/read", json!({"uri": "skill://nope"})),
    ];
    if legacy {
        m.push(("logging/setLevel", json!({"level": "info"})));
    } else {
        m.push(("tasks/get", json!({"taskId": "nope"})));
        m.push((
            "tasks/update",
            json!({"taskId": "nope", "inputResponses": {}}),
        ));
        m.push(("tasks/cancel", json!({"taskId": "nope"})));
    }
    m
}

/// Checks every gated method against `caps`: refused with -32601 (and, when
/// `status` is given, HTTP 404) iff not advertised. Returns how many were
/// refused, so a caller can tell both sides were exercised.
fn check(
    label: &str,
    caps: &Value,
    legacy: bool,
    mut send: impl FnMut(i64, &str, Value) -> (Option<u16>, Value),
) -> usize {
    let mut refused = 0;
    for (i, (method, params)) in methods(legacy).into_iter().enumerate() {
        let served = advertised(caps, method, legacy);
        if served && method == "subscriptions/listen" {
            // Served, it opens a stream rather than answering: its serving
            // side is tested with the streams; here only its refusal.
            continue;
        }
        let (status, reply) = send(i as i64 + 10, method, params);
        let code = &reply["error"]["code"];
        if served {
            assert_ne!(code, -32601, "{label}: {method} is advertised: {reply}");
        } else {
            refused += 1;
            assert_eq!(code, -32601, "{label}: {method} is not advertised: {reply}");
            if let Some(status) = status {
                assert_eq!(status, 404, "{label}: {method}");
            }
        }
    }
    refused
}

fn http_2026(srv: &ServerThread, label: &str) -> usize {
    let discover = common::call(srv.addr, json!(1), "server/discover", json!({})).json();
    let caps = discover["result"]["capabilities"].clone();
    check(label, &caps, false, |id, method, params| {
        // tools/call and tasks/* name their tool or task in Mcp-Name (header
        // checks come first).
        let name = params["taskId"]
            .as_str()
            .or(params["name"].as_str())
            .map(str::to_owned);
        let r = match name {
            Some(name) => common::post(
                srv.addr,
                &common::headers(method, Some(&name)),
                &common::request(json!(id), method, params),
            ),
            None => common::call(srv.addr, json!(id), method, params),
        };
        (Some(r.status), r.json())
    })
}

fn http_2025(srv: &ServerThread, label: &str) -> usize {
    let init = legacy::initialize_with(srv.addr, legacy::LEGACY, json!({})).json();
    let caps = init["result"]["capabilities"].clone();
    let session = legacy::initialize(srv.addr);
    check(label, &caps, true, |id, method, params| {
        let r = legacy::request(srv.addr, &session, json!(id), method, params);
        let body = match r.sse_messages().into_iter().last() {
            Some(last) => last,
            None => r.json(),
        };
        (None, body)
    })
}

fn serve<H: SubscriptionHandler>(make: impl FnOnce() -> Suite<H> + Send + 'static) -> ServerThread {
    ServerThread::spawn(make, common::config()).expect("server starts")
}

/// One tool and nothing else: every other gated method is refused.
fn bare() -> Suite {
    Suite::builder(Implementation::new("bare", "1.0.0"))
        .tool(
            ToolBuilder::new("hello")
                .description("Says hello")
                .handler(|_call| async { Ok(CallToolResult::text("hello").into()) }),
        )
        .build()
}

fn one_skill() -> Skills {
    let skills = Skills::new();
    skills
        .add(Skill::new("a").file("SKILL.md", "---\nname: a\ndescription: A\n---\n"))
        .unwrap();
    skills
}

#[test]
fn http_refuses_what_is_not_advertised_and_serves_what_is_on_both_eras() {
    let srv = serve(bare);
    // Everything but tools/list and tools/call.
    assert_eq!(http_2026(&srv, "bare 2026"), 15);
    assert_eq!(http_2025(&srv, "bare 2025"), 13);

    // The fixtures with skills, without directoryRead.
    let srv = serve(|| {
        genmcp_cli::fixtures::suite_for_node_with_skills(
            None,
            None,
            Default::default(),
            None,
            Some(one_skill()),
        )
    });
    // Directory reads; on 2026 the removed resources/(un)subscribe; on 2025
    // subscriptions/listen (not a 2025 method).
    assert_eq!(http_2026(&srv, "fixtures 2026"), 3);
    assert_eq!(http_2025(&srv, "fixtures 2025"), 2);
}

/// The 2025 `initialize` declares the extensions a 2025 session is served
/// (skills), not the 2026-only tasks extension.
#[test]
fn a_2025_initialize_declares_skills_but_not_tasks() {
    let srv = serve(|| {
        genmcp_cli::fixtures::suite_for_node_with_skills(
            None,
            None,
            Default::default(),
            None,
            Some(one_skill().directory_read(true)),
        )
    });
    let init = legacy::initialize_with(srv.addr, legacy::LEGACY, json!({})).json();
    assert_eq!(
        init["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/skills": {"directoryRead": true}})
    );
    let discover = common::call(srv.addr, json!(1), "server/discover", json!({})).json();
    assert!(
        discover["result"]["capabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some()
    );
}

fn stdio_2026(p: &mut Peer, label: &str) -> usize {
    p.request(json!(1), "server/discover", json!({}));
    let caps = p.until(|v| v["id"] == 1).0["result"]["capabilities"].clone();
    check(label, &caps, false, |id, method, params| {
        p.request(json!(id), method, params);
        (None, p.until(|v| v["id"] == id).0)
    })
}

fn stdio_2025(p: &mut Peer, label: &str) -> usize {
    p.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": legacy::LEGACY, "capabilities": {},
        "clientInfo": {"name": "gating", "version": "1"}}}),
    );
    let caps = p.until(|v| v["id"] == 1).0["result"]["capabilities"].clone();
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    check(label, &caps, true, |id, method, params| {
        p.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        (None, p.until(|v| v["id"] == id).0)
    })
}

#[test]
fn stdio_refuses_what_is_not_advertised_and_serves_what_is_on_both_eras() {
    // The demo: no prompts, completions or skills.
    let mut p = Peer::start();
    assert!(stdio_2026(&mut p, "demo stdio 2026") >= 5);
    let mut p = Peer::start();
    assert!(stdio_2025(&mut p, "demo stdio 2025") >= 5);

    // The conformance fixtures: everything, skills with directoryRead.
    let mut p = Peer::start_with(&["serve", "--stdio", "--conformance"]);
    // Only what the era removed or lacks: resources/(un)subscribe on 2026,
    // subscriptions/listen on 2025.
    assert_eq!(stdio_2026(&mut p, "fixtures stdio 2026"), 2);
    let mut p = Peer::start_with(&["serve", "--stdio", "--conformance"]);
    assert_eq!(stdio_2025(&mut p, "fixtures stdio 2025"), 1);
}
