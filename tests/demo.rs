//! The notes demo (`genmcp serve`) over real HTTP: its tools drive real
//! notifications, and `burst` delivers K frames to every stream, in order.

mod common;

use common::{call, listen};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn demo() -> ServerThread {
    let mut config = HttpConfig::default();
    config.port = 0;
    config.workers = 2;
    ServerThread::spawn(|| genmcp_cli::demo::suite().0, config).expect("server starts")
}

fn tool(srv: &ServerThread, id: i64, name: &str, args: Value) -> Value {
    let resp = call(
        srv.addr,
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": args}),
    );
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    resp.json()["result"].clone()
}

fn wait_streams(srv: &ServerThread, n: usize) {
    assert!(common::wait_until(
        std::time::Duration::from_secs(10),
        || srv.server.metrics().open_streams == n
    ));
}

#[test]
fn burst_delivers_k_frames_in_order_to_every_stream() {
    let srv = demo();
    let mut streams: Vec<_> = (0..3)
        .map(|i| listen(srv.addr, json!(i), json!({"toolsListChanged": true})))
        .collect();
    for s in &mut streams {
        s.next_message().unwrap();
    }
    wait_streams(&srv, 3);
    // Read concurrently: burst returns only once every frame was handed over,
    // which needs readers when K exceeds the buffers.
    let readers: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            std::thread::spawn(move || {
                for k in 0..2000 {
                    let n = s
                        .next_message()
                        .unwrap_or_else(|| panic!("stream {i} ended at {k}"));
                    assert_eq!(n["method"], "notifications/tools/list_changed");
                    assert_eq!(
                        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
                        json!(i)
                    );
                }
                s
            })
        })
        .collect();
    let result = tool(&srv, 10, "burst", json!({"count": 2000}));
    assert_eq!(
        result["structuredContent"],
        json!({"streams": 3, "count": 2000})
    );
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(
        srv.server.metrics().closed(CloseReason::Overflow),
        0,
        "back-pressure, not overflow"
    );
}

#[test]
fn burst_of_resource_updates_reaches_only_streams_subscribed_to_the_uri() {
    let srv = demo();
    let mut mine = listen(
        srv.addr,
        json!("mine"),
        json!({"resourceSubscriptions": ["note://42"]}),
    );
    let mut other = listen(
        srv.addr,
        json!("other"),
        json!({"resourceSubscriptions": ["note://7"], "toolsListChanged": true}),
    );
    mine.next_message().unwrap();
    other.next_message().unwrap();
    wait_streams(&srv, 2);
    let result = tool(
        &srv,
        1,
        "burst",
        json!({"count": 5, "kind": "resources", "uri": "note://42"}),
    );
    assert_eq!(result["structuredContent"]["count"], 5);
    for _ in 0..5 {
        let n = mine.next_message().unwrap();
        assert_eq!(n["method"], "notifications/resources/updated");
        assert_eq!(n["params"]["uri"], "note://42");
    }
    // The other stream got none of them: the next thing it sees is a tool change.
    tool(&srv, 2, "toggle_extra_tool", json!({}));
    assert_eq!(
        other.next_message().unwrap()["method"],
        "notifications/tools/list_changed"
    );
}

#[test]
fn notes_tools_publish_list_and_update_notifications() {
    let srv = demo();
    let mut lists = listen(srv.addr, json!(1), json!({"resourcesListChanged": true}));
    let mut updates = listen(
        srv.addr,
        json!(2),
        json!({"resourceSubscriptions": ["note://1"]}),
    );
    lists.next_message().unwrap();
    updates.next_message().unwrap();
    wait_streams(&srv, 2);
    let added = tool(&srv, 3, "add_note", json!({"text": "hello"}));
    assert_eq!(added["content"][0]["text"], "note://1");
    assert_eq!(
        lists.next_message().unwrap()["method"],
        "notifications/resources/list_changed"
    );
    let u = updates.next_message().unwrap();
    assert_eq!(
        (u["method"].as_str(), u["params"]["uri"].as_str()),
        (Some("notifications/resources/updated"), Some("note://1"))
    );
    tool(
        &srv,
        4,
        "add_note",
        json!({"uri": "note://1", "text": "edited"}),
    );
    assert_eq!(updates.next_message().unwrap()["params"]["uri"], "note://1");
    let deleted = tool(&srv, 5, "delete_note", json!({"uri": "note://1"}));
    assert_eq!(deleted["content"][0]["text"], "deleted note://1");
    assert_eq!(
        lists.next_message().unwrap()["method"],
        "notifications/resources/list_changed"
    );
    let missing = tool(&srv, 6, "delete_note", json!({"uri": "note://1"}));
    assert_eq!(missing["isError"], true);
    let gone = call(
        srv.addr,
        json!(42),
        "resources/read",
        json!({"uri": "note://1"}),
    )
    .json();
    assert_eq!(gone["error"]["code"], -32602);
    assert_eq!(gone["error"]["data"]["uri"], "note://1");
}

#[test]
fn toggle_extra_tool_changes_the_tool_list() {
    let srv = demo();
    let names = |srv: &ServerThread| -> Vec<String> {
        call(srv.addr, json!("l"), "tools/list", json!({})).json()["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!names(&srv).contains(&"extra_tool".to_owned()));
    let mut s = listen(srv.addr, json!(1), json!({"toolsListChanged": true}));
    s.next_message().unwrap();
    wait_streams(&srv, 1);
    tool(&srv, 2, "toggle_extra_tool", json!({}));
    assert_eq!(
        s.next_message().unwrap()["method"],
        "notifications/tools/list_changed"
    );
    assert!(names(&srv).contains(&"extra_tool".to_owned()));
    tool(&srv, 3, "toggle_extra_tool", json!({}));
    assert!(!names(&srv).contains(&"extra_tool".to_owned()));
}

/// Issue 11.8, memory under churn: a finished listen leaves nothing behind. After
/// many listens over real HTTP, each dropped by the client while open (as the
/// churn soak does, `scripts/churn-soak.py`), the bus has no topic left, no
/// stream is open and every close was counted.
#[test]
fn churned_listens_leave_no_topic_subscriber_or_open_stream_behind() {
    let (suite, bus) = genmcp_cli::demo::suite();
    let mut config = HttpConfig::default();
    config.port = 0;
    config.workers = 2;
    // A client that closed its socket is noticed at the next write: a short
    // keep-alive makes that write come soon.
    config.keep_alive = std::time::Duration::from_millis(100);
    let srv = ServerThread::spawn(move || suite, config).expect("server starts");
    const ROUNDS: usize = 10;
    const PER_ROUND: usize = 20;
    for round in 0..ROUNDS {
        let mut streams: Vec<_> = (0..PER_ROUND)
            .map(|i| {
                listen(
                    srv.addr,
                    json!(format!("r{round}-{i}")),
                    json!({
                        "toolsListChanged": true,
                        "resourcesListChanged": true,
                        "resourceSubscriptions": ["note://1"],
                    }),
                )
            })
            .collect();
        for s in &mut streams {
            let ack = s.next_message().expect("acknowledged");
            assert_eq!(
                ack["method"], "notifications/subscriptions/acknowledged",
                "{ack}"
            );
        }
        assert_eq!(bus.topic_count(), 3, "tools, notes, note-updates");
        // Half go away with a shutdown, half by closing the socket.
        for (i, s) in streams.into_iter().enumerate() {
            if i % 2 == 0 {
                s.disconnect();
            } else {
                drop(s);
            }
        }
    }
    let n = (ROUNDS * PER_ROUND) as u64;
    assert!(
        common::wait_until(std::time::Duration::from_secs(10), || {
            let m = srv.server.metrics();
            m.open_streams == 0 && m.closed(CloseReason::Disconnected) == n
        }),
        "{:?}",
        srv.server.metrics()
    );
    assert_eq!(srv.server.metrics().streams_opened, n);
    assert!(
        common::wait_until(std::time::Duration::from_secs(5), || bus.topic_count() == 0),
        "topics left: {}",
        bus.topic_count()
    );
}
