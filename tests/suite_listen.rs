//! Catalog changes delivered to `subscriptions/listen` streams over real HTTP:
//! tool / prompt / resource list changes that really change the lists, and
//! `notifications/resources/updated` filtered by the subscribed URIs.

mod common;

use std::time::Duration;

use common::{Exchange, call, listen};
use genmcp::http::ServerThread;
use genmcp::prelude::*;
use genmcp::suite::{GetPromptResult, PromptBuilder, Resource, ResourceSet};
use serde_json::{Value, json};

const SUB_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn serve<H: SubscriptionHandler>(make: impl FnOnce() -> Suite<H> + Send + 'static) -> ServerThread {
    ServerThread::spawn(make, common::probe::config()).expect("server starts")
}

fn open(addr: std::net::SocketAddr, id: Value, filter: Value) -> Exchange {
    let mut stream = listen(addr, id.clone(), filter.clone());
    assert_eq!(stream.status, 200);
    stream.set_timeout(Duration::from_secs(5));
    let ack = stream.next_message().expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"], filter,
        "everything asked for is honoured"
    );
    assert_eq!(ack["params"]["_meta"][SUB_ID], id);
    stream
}

/// Asserts nothing but keep-alives arrives within `within`. The stream cannot be
/// read afterwards (the test client does not survive a read timeout).
fn quiet(stream: &mut Exchange, within: Duration) {
    stream.set_timeout(within);
    loop {
        match stream.try_next_event() {
            Err(_) => return,
            Ok(Some(common::Event::Comment(_))) => continue,
            Ok(other) => panic!("expected silence, got {other:?}"),
        }
    }
}

fn trigger(addr: std::net::SocketAddr, id: i64, tool: &str, args: Value) -> Value {
    let r = call(
        addr,
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": args}),
    );
    assert_eq!(r.status, 200);
    r.json()["result"]["content"][0]["text"].clone()
}

fn names(addr: std::net::SocketAddr, method: &str, key: &str, field: &str) -> Vec<String> {
    let r = call(addr, json!(99), method, json!({})).json();
    r["result"][key]
        .as_array()
        .expect("list")
        .iter()
        .map(|x| x[field].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn resource_updates_reach_only_streams_subscribed_to_that_uri() {
    let srv = serve(genmcp_cli::fixtures::suite);
    let (a, b) = ("test://static-text", "test://static-binary");
    let mut on_a = open(
        srv.addr,
        json!("sub-a"),
        json!({"resourceSubscriptions": [a]}),
    );
    let mut on_b = open(srv.addr, json!(2), json!({"resourceSubscriptions": [b]}));
    let mut lists = open(srv.addr, json!(3), json!({"resourcesListChanged": true}));

    assert_eq!(
        trigger(
            srv.addr,
            10,
            "test_trigger_resource_update",
            json!({"uri": b})
        ),
        json!(format!("{b} updated"))
    );
    assert_eq!(
        trigger(
            srv.addr,
            11,
            "test_trigger_resource_update",
            json!({"uri": a})
        ),
        json!(format!("{a} updated"))
    );

    let first_on_a = on_a.next_message().unwrap();
    assert_eq!(first_on_a["method"], "notifications/resources/updated");
    assert_eq!(
        first_on_a["params"]["uri"], a,
        "the update for B was not delivered to A's stream"
    );
    assert_eq!(first_on_a["params"]["_meta"][SUB_ID], "sub-a");
    let first_on_b = on_b.next_message().unwrap();
    assert_eq!(first_on_b["params"]["uri"], b);
    assert_eq!(first_on_b["params"]["_meta"][SUB_ID], 2);
    quiet(&mut on_a, Duration::from_millis(300));
    quiet(&mut on_b, Duration::from_millis(100));
    quiet(&mut lists, Duration::from_millis(100));
}

#[test]
fn resource_list_changes_are_real_and_notified() {
    let srv = serve(genmcp_cli::fixtures::suite);
    let mut stream = open(
        srv.addr,
        json!("res"),
        json!({"resourcesListChanged": true}),
    );
    let mut tools_only = open(srv.addr, json!("tools"), json!({"toolsListChanged": true}));
    assert_eq!(
        trigger(srv.addr, 1, "test_trigger_resource_list_change", json!({})),
        json!("dynamic resources added")
    );
    let n = stream.next_message().unwrap();
    assert_eq!(n["method"], "notifications/resources/list_changed");
    assert_eq!(n["params"]["_meta"][SUB_ID], "res");
    assert!(
        names(srv.addr, "resources/list", "resources", "uri")
            .contains(&"test://dynamic/one".to_owned())
    );
    let read = call(
        srv.addr,
        json!(2),
        "resources/read",
        json!({"uri": "test://dynamic/one"}),
    )
    .json();
    assert_eq!(read["result"]["contents"][0]["text"], "A dynamic resource.");

    assert_eq!(
        trigger(srv.addr, 3, "test_trigger_resource_list_change", json!({})),
        json!("dynamic resources removed")
    );
    assert_eq!(
        stream.next_message().unwrap()["method"],
        "notifications/resources/list_changed"
    );
    assert!(
        !names(srv.addr, "resources/list", "resources", "uri")
            .contains(&"test://dynamic/one".to_owned())
    );
    quiet(&mut tools_only, Duration::from_millis(200));
}

#[test]
fn tool_and_prompt_triggers_really_change_the_lists() {
    let srv = serve(genmcp_cli::fixtures::suite);
    let mut prompts = open(srv.addr, json!(1), json!({"promptsListChanged": true}));
    let mut tools = open(srv.addr, json!(2), json!({"toolsListChanged": true}));

    let before = names(srv.addr, "tools/list", "tools", "name");
    trigger(srv.addr, 10, "test_trigger_tool_change", json!({}));
    let after = names(srv.addr, "tools/list", "tools", "name");
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after.last().map(String::as_str), Some("test_dynamic_tool"));
    assert_eq!(after[0], "test_simple_text", "the first tool stays first");
    assert_eq!(
        tools.next_message().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    let dynamic = call(
        srv.addr,
        json!(11),
        "tools/call",
        json!({"name": "test_dynamic_tool", "arguments": {}}),
    )
    .json();
    assert_eq!(
        dynamic["result"]["content"][0]["text"],
        "dynamic tool called"
    );

    trigger(srv.addr, 12, "test_trigger_prompt_change", json!({}));
    assert!(
        names(srv.addr, "prompts/list", "prompts", "name")
            .contains(&"test_dynamic_prompt".to_owned())
    );
    assert_eq!(
        prompts.next_message().unwrap()["method"],
        "notifications/prompts/list_changed"
    );

    trigger(srv.addr, 13, "test_trigger_tool_change", json!({}));
    assert_eq!(names(srv.addr, "tools/list", "tools", "name"), before);
    assert_eq!(
        tools.next_message().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    // Each stream got only its own kind. (A timed-out read leaves the test
    // client unusable, so silence is checked last.)
    quiet(&mut prompts, Duration::from_millis(200));
    quiet(&mut tools, Duration::from_millis(100));
}

#[test]
fn catalog_changes_from_the_application_are_published() {
    let catalog = Catalog::new();
    let served = catalog.clone();
    let srv = serve(move || {
        Suite::builder(Implementation::new("t", "1"))
            .catalog(served.clone())
            .resources(ResourceSet::new("app://").text(Resource::new("app://a", "a"), "a"))
            .subscriptions(CatalogSubscriptions::new(&served))
            .build()
    });
    let discover = call(srv.addr, json!(1), "server/discover", json!({})).json();
    assert_eq!(
        discover["result"]["capabilities"],
        json!({"resources": {"subscribe": true, "listChanged": true}}),
        "only what the catalog serves is advertised"
    );
    let mut all = open(
        srv.addr,
        json!("all"),
        json!({"resourcesListChanged": true, "resourceSubscriptions": ["app://a"]}),
    );
    catalog.add_prompt(
        PromptBuilder::new("late")
            .description("added at run time")
            .handler(|_| async { Ok(GetPromptResult::user_text("late").into()) }),
    );
    assert_eq!(names(srv.addr, "prompts/list", "prompts", "name"), ["late"]);
    catalog.resource_updated("app://b");
    catalog.resource_updated("app://a");
    let n = all.next_message().unwrap();
    assert_eq!(
        (n["method"].clone(), n["params"]["uri"].clone()),
        (json!("notifications/resources/updated"), json!("app://a"))
    );
    catalog.add_resources(ResourceSet::new("more://").text(Resource::new("more://x", "x"), "x"));
    assert_eq!(
        all.next_message().unwrap()["method"],
        "notifications/resources/list_changed"
    );
    assert!(catalog.remove_resources("more://"));
    assert_eq!(
        all.next_message().unwrap()["method"],
        "notifications/resources/list_changed"
    );
    assert!(
        !catalog.remove_resources("more://"),
        "removing twice changes nothing"
    );
    quiet(&mut all, Duration::from_millis(200));
}
