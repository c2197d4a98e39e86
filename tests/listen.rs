//! `subscriptions/listen` over real HTTP: acknowledgement, stamping, filter
//! clamping and enforcement, completion, rejections.

mod common;

use common::probe::{self, Mode, Msg, send, sub_id};
use common::{Event, headers, listen, post, request};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn caps_tools_resources() -> SubscriptionCapabilities {
    SubscriptionCapabilities::none()
        .with_tools_list_changed(true)
        .with_resources_updated(true)
}

#[test]
fn ack_is_first_and_every_frame_carries_the_listen_id_with_its_json_type() {
    let srv = probe::start(Mode::Accept, caps_tools_resources(), probe::config());
    let mut numeric = listen(srv.addr(), json!(7), json!({"toolsListChanged": true}));
    let mut string = listen(srv.addr(), json!("7"), json!({"toolsListChanged": true}));
    assert_eq!(numeric.status, 200);
    assert_eq!(numeric.header("content-type"), Some("text/event-stream"));
    assert_eq!(numeric.header("x-accel-buffering"), Some("no"));
    assert!(
        numeric
            .header("cache-control")
            .is_some_and(|v| v.contains("no-cache"))
    );

    for (stream, id) in [(&mut numeric, json!(7)), (&mut string, json!("7"))] {
        let ack = stream.next_message().unwrap();
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(sub_id(&ack), &id);
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
    }
    srv.wait_subscribers(2);
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    for (stream, id) in [(&mut numeric, json!(7)), (&mut string, json!("7"))] {
        let n = stream.next_message().unwrap();
        assert_eq!(n["method"], "notifications/tools/list_changed");
        assert_eq!(sub_id(&n), &id, "the id keeps its JSON type");
        assert!(n.get("id").is_none());
    }
}

#[test]
fn narrowing_is_clamped_to_request_and_capabilities_and_the_filter_is_enforced() {
    // The handler asks for tools + prompts + URIs a and c; the client asked for tools,
    // resources list and URIs a, b; the server advertises tools + resource updates.
    let narrow = SubscriptionFilter {
        tools_list_changed: true,
        prompts_list_changed: true,
        resource_subscriptions: vec!["res://a".into(), "res://c".into()],
        ..Default::default()
    };
    let srv = probe::start(
        Mode::Narrow(narrow),
        caps_tools_resources(),
        probe::config(),
    );
    let mut s = listen(
        srv.addr(),
        json!(1),
        json!({"toolsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": ["res://a", "res://b"]}),
    );
    let ack = s.next_message().unwrap();
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["res://a"]}),
        "never wider than requested ∩ advertised"
    );
    srv.wait_subscribers(1);
    for n in [
        Notification::prompts_list_changed(),      // not requested
        Notification::resources_list_changed(),    // requested, not advertised
        Notification::resource_updated("res://b"), // requested, narrowed away
        Notification::resource_updated("res://a"), // honoured
        Notification::tools_list_changed(),        // honoured
    ] {
        srv.bus.publish("all", send(n));
    }
    let first = s.next_message().unwrap();
    assert_eq!(first["method"], "notifications/resources/updated");
    assert_eq!(first["params"]["uri"], "res://a");
    assert_eq!(
        s.next_message().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    let refused = srv.refused();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(
        refused
            .iter()
            .all(|e| matches!(e, ChannelError::OutsideFilter { .. }))
    );
}

#[test]
fn an_empty_honoured_set_is_acknowledged_then_completed_at_once() {
    let srv = probe::start(Mode::Accept, caps_tools_resources(), probe::config());
    let mut s = listen(
        srv.addr(),
        json!("empty"),
        json!({"promptsListChanged": true}),
    );
    let ack = s.next_message().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"], json!({}));
    let done = s.next_message().unwrap();
    assert_eq!(done["id"], "empty");
    assert_eq!(done["result"]["resultType"], "complete");
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "empty"
    );
    assert!(
        s.next_event().is_none(),
        "the body ends after the completion result"
    );
    assert!(
        srv.closed().is_empty(),
        "handle_close is not called for a graceful end"
    );
}

#[test]
fn stop_sends_the_completion_result_last_and_skips_handle_close() {
    let srv = probe::start(Mode::Accept, caps_tools_resources(), probe::config());
    let mut s = listen(srv.addr(), json!(42), json!({"toolsListChanged": true}));
    s.next_message().unwrap();
    srv.wait_subscribers(1);
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    srv.bus.publish("all", Msg::Stop);
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    assert_eq!(
        s.next_message().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    let done = s.next_message().unwrap();
    assert_eq!(done["id"], 42);
    assert_eq!(done["result"]["resultType"], "complete");
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        42
    );
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "probe"
    );
    assert!(
        s.next_event().is_none(),
        "nothing after the completion result"
    );
    assert!(common::wait_until(
        std::time::Duration::from_secs(5),
        || srv.metrics().closed(CloseReason::Completed) == 1
    ));
    assert!(
        srv.closed().is_empty(),
        "handle_close must not run after Flow::Stop"
    );
}

fn expect_error(resp: &common::Response, id: Value, code: i64, status: u16) -> Value {
    assert_eq!(
        resp.status,
        status,
        "{}",
        String::from_utf8_lossy(&resp.body)
    );
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let body = resp.json();
    assert_eq!(body["id"], id);
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    body
}

#[test]
fn rejections_have_real_codes_and_statuses() {
    let srv = probe::start(
        Mode::Reject(McpError::invalid_params("only admins may listen")),
        caps_tools_resources(),
        probe::config(),
    );
    let resp = listen(srv.addr(), json!(1), json!({"toolsListChanged": true})).into_response();
    let body = expect_error(&resp, json!(1), -32602, 200);
    assert_eq!(body["error"]["message"], "only admins may listen");

    let srv = probe::start(
        Mode::Reject(McpError::missing_capability("elicitation")),
        caps_tools_resources(),
        probe::config(),
    );
    let resp = listen(srv.addr(), json!("x"), json!({"toolsListChanged": true})).into_response();
    let body = expect_error(&resp, json!("x"), -32021, 400);
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );

    let srv = probe::start(Mode::Accept, caps_tools_resources(), probe::config());
    // No `notifications` at all.
    let body = request(json!(5), "subscriptions/listen", json!({}));
    let resp = post(srv.addr(), &headers("subscriptions/listen", None), &body);
    expect_error(&resp, json!(5), -32602, 400);
    // A malformed filter.
    let resp = listen(srv.addr(), json!(6), json!({"toolsListChanged": "yes"})).into_response();
    expect_error(&resp, json!(6), -32602, 400);
    // Too many URIs.
    let uris: Vec<String> = (0..1025).map(|i| format!("res://{i}")).collect();
    let resp = listen(srv.addr(), json!(7), json!({"resourceSubscriptions": uris})).into_response();
    expect_error(&resp, json!(7), -32602, 400);
    // taskIds without the tasks extension.
    let resp = listen(srv.addr(), json!(8), json!({"taskIds": ["t1"]})).into_response();
    let body = expect_error(&resp, json!(8), -32021, 400);
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    assert_eq!(srv.metrics().open_streams, 0);
}

#[test]
fn a_panicking_subscribe_is_a_minus_32603_reply_and_the_worker_survives() {
    let srv = probe::start(Mode::Panic, caps_tools_resources(), probe::config());
    for id in 0..3 {
        let resp = listen(srv.addr(), json!(id), json!({"toolsListChanged": true})).into_response();
        expect_error(&resp, json!(id), -32603, 200);
    }
    // The single worker still serves requests.
    let resp = common::call(srv.addr(), json!(9), "server/discover", json!({}));
    assert_eq!(resp.status, 200);
    assert!(common::wait_until(
        std::time::Duration::from_secs(5),
        || srv.metrics().closed(CloseReason::Panicked) == 3
    ));
}

#[test]
fn listen_is_not_found_when_nothing_is_advertised() {
    let srv = probe::start(
        Mode::Accept,
        SubscriptionCapabilities::none(),
        probe::config(),
    );
    let resp = listen(srv.addr(), json!(1), json!({"toolsListChanged": true})).into_response();
    expect_error(&resp, json!(1), -32601, 404);
    let discover = common::call(srv.addr(), json!(2), "server/discover", json!({})).json();
    assert_eq!(discover["result"]["capabilities"], json!({}));
}

#[test]
fn discover_folds_handler_capabilities_and_stamps_server_info() {
    let srv = probe::start(Mode::Accept, caps_tools_resources(), probe::config());
    let resp = common::call(srv.addr(), json!("d"), "server/discover", json!({}));
    assert_eq!(resp.status, 200);
    let r = &resp.json()["result"];
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        r["capabilities"],
        json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}})
    );
    assert_eq!(r["instructions"], "probe server");
    assert_eq!(r["ttlMs"], 0);
    assert_eq!(r["cacheScope"], "public");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({"name": "probe", "version": "1.2.3"})
    );
    // What is advertised is served: the tools block comes from the handler alone,
    // and tools/list answers (with no tools) rather than -32601.
    let tools = common::call(srv.addr(), json!("t"), "tools/list", json!({}));
    assert_eq!(tools.status, 200);
    assert_eq!(tools.json()["result"]["tools"], json!([]));
    let prompts = common::call(srv.addr(), json!("p"), "prompts/list", json!({}));
    assert_eq!(prompts.status, 404, "prompts are not advertised");
    // No keep-alive or extra frames leak into a JSON reply.
    assert!(resp.header("content-type") == Some("application/json"));
    let _ = Event::Comment(String::new());
}
