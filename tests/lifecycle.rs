//! Stream lifecycle over real HTTP: disconnects, panics, slow readers, fan-out
//! order, graceful shutdown.

mod common;

use std::time::Duration;

use common::probe::{self, Mode, Msg, send, sub_id};
use common::{listen, wait_until};
use genmcp::prelude::*;
use serde_json::{Value, json};

fn caps() -> SubscriptionCapabilities {
    SubscriptionCapabilities::none()
        .with_tools_list_changed(true)
        .with_resources_updated(true)
}

fn short_keepalive() -> HttpConfig {
    let mut c = probe::config();
    c.keep_alive = Duration::from_millis(200);
    c
}

#[test]
fn a_client_disconnect_mid_stream_runs_handle_close_exactly_once() {
    let srv = probe::start(Mode::Accept, caps(), short_keepalive());
    let mut s = listen(srv.addr(), json!("gone"), json!({"toolsListChanged": true}));
    s.next_message().unwrap();
    srv.wait_subscribers(1);
    srv.bus
        .publish("all", send(Notification::tools_list_changed()));
    s.next_message().unwrap();
    s.disconnect();
    // Keep events flowing: the failed write is how the server notices.
    assert!(wait_until(Duration::from_secs(10), || {
        srv.bus
            .publish("all", send(Notification::tools_list_changed()));
        !srv.closed().is_empty()
    }));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        srv.closed(),
        vec![RequestId::String("gone".into())],
        "exactly once"
    );
    assert!(wait_until(Duration::from_secs(5), || srv
        .metrics()
        .open_streams
        == 0));
    assert_eq!(srv.metrics().closed(CloseReason::Disconnected), 1);
    assert!(
        srv.bus.subscribers("all").is_empty(),
        "the state (and its bus subscription) was released"
    );
}

#[test]
fn an_idle_stream_whose_client_left_is_closed_within_two_keepalive_intervals() {
    let srv = probe::start(Mode::Accept, caps(), short_keepalive());
    let mut s = listen(srv.addr(), json!(1), json!({"toolsListChanged": true}));
    s.next_message().unwrap();
    // Keep-alive comments arrive while idle.
    assert_eq!(
        s.next_event(),
        Some(common::Event::Comment("keepalive".into()))
    );
    s.disconnect();
    // No events are published: only keep-alive writes can notice the dead client.
    // Two intervals is 400 ms; allow scheduling slack on a loaded machine.
    assert!(
        wait_until(Duration::from_secs(5), || !srv.closed().is_empty()),
        "handle_close was not called"
    );
    assert_eq!(srv.closed(), vec![RequestId::Number(1)]);
    assert_eq!(srv.metrics().open_streams, 0);
}

#[test]
fn a_panicking_handle_message_ends_only_its_stream() {
    // One worker: every stream lives on the same thread.
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let mut victim = listen(
        srv.addr(),
        json!("victim"),
        json!({"toolsListChanged": true}),
    );
    let mut other = listen(
        srv.addr(),
        json!("other"),
        json!({"toolsListChanged": true}),
    );
    victim.next_message().unwrap();
    other.next_message().unwrap();
    srv.wait_subscribers(2);
    srv.bus
        .publish("all", Msg::PanicFor(RequestId::from("victim")));
    let (mut dead, mut alive, dead_id) = (victim, other, json!("victim"));
    let end = dead.next_message().unwrap();
    assert_eq!(end["id"], dead_id);
    assert_eq!(end["error"]["code"], -32603);
    assert!(dead.next_event().is_none());
    // The other stream on the same worker keeps receiving.
    for _ in 0..3 {
        srv.bus
            .publish("all", send(Notification::tools_list_changed()));
        let n = alive.next_message().unwrap();
        assert_eq!(n["method"], "notifications/tools/list_changed");
        assert_ne!(sub_id(&n), &dead_id);
    }
    assert_eq!(srv.metrics().closed(CloseReason::Panicked), 1);
    assert!(srv.closed().is_empty(), "no handle_close after a panic");
    // The worker thread still serves requests.
    assert_eq!(
        common::call(srv.addr(), json!(1), "server/discover", json!({})).status,
        200
    );
}

#[test]
fn a_hundred_streams_each_get_every_event_in_publish_order() {
    let mut config = probe::config();
    config.workers = 2;
    let srv = probe::start(Mode::Accept, caps(), config);
    let uris: Vec<String> = (0..50).map(|i| format!("seq://{i}")).collect();
    let mut streams: Vec<_> = (0..100)
        .map(|i| listen(srv.addr(), json!(i), json!({"resourceSubscriptions": uris})))
        .collect();
    for s in &mut streams {
        assert_eq!(
            s.next_message().unwrap()["method"],
            "notifications/subscriptions/acknowledged"
        );
    }
    srv.wait_subscribers(100);
    for uri in &uris {
        assert_eq!(
            srv.bus
                .publish("all", send(Notification::resource_updated(uri.clone()))),
            100
        );
    }
    for (i, s) in streams.iter_mut().enumerate() {
        for uri in &uris {
            let n = s.next_message().unwrap();
            assert_eq!(n["params"]["uri"], Value::from(uri.as_str()), "stream {i}");
            assert_eq!(sub_id(&n), &json!(i));
        }
    }
}

#[test]
fn shutdown_completes_every_stream_and_runs_handle_close() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let mut a = listen(srv.addr(), json!("a"), json!({"toolsListChanged": true}));
    let mut b = listen(srv.addr(), json!("b"), json!({"toolsListChanged": true}));
    a.next_message().unwrap();
    b.next_message().unwrap();
    srv.wait_subscribers(2);
    let common::probe::ProbeServer { server, record, .. } = srv;
    let metrics = server.server.clone();
    server.stop();
    for (s, id) in [(&mut a, "a"), (&mut b, "b")] {
        let done = s.next_message().unwrap();
        assert_eq!(done["id"], id);
        assert_eq!(done["result"]["resultType"], "complete");
    }
    let mut closed = record.closed.lock().unwrap().clone();
    closed.sort_by_key(|id| id.to_string());
    assert_eq!(closed, vec![RequestId::from("a"), RequestId::from("b")]);
    assert_eq!(metrics.metrics().closed(CloseReason::Shutdown), 2);
    assert_eq!(metrics.metrics().open_streams, 0);
}

fn wide_events(
    srv: &common::probe::ProbeServer,
    uri: &str,
    n: usize,
) -> std::thread::JoinHandle<usize> {
    let bus = srv.bus.clone();
    let uri = uri.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut taken = 0;
            for _ in 0..n {
                taken += bus
                    .publish_wait("all", send(Notification::resource_updated(uri.clone())))
                    .await;
            }
            taken
        })
    })
}

#[test]
fn a_paused_reader_gets_back_pressure_not_overflow() {
    let srv = probe::start(Mode::Accept, caps(), probe::config());
    let uri = format!("res://{}", "y".repeat(1000));
    let mut s = listen(
        srv.addr(),
        json!("paused"),
        json!({"resourceSubscriptions": [uri.clone()]}),
    );
    s.next_message().unwrap();
    srv.wait_subscribers(1);
    // ~20 MiB of frames: more than the socket buffers, the outbox and the spill
    // queue hold, so the stream must pause and the publisher must wait.
    let publisher = wide_events(&srv, &uri, 20_000);
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        !publisher.is_finished(),
        "the publisher should be waiting for the reader"
    );
    for i in 0..20_000 {
        let n = s
            .next_message()
            .unwrap_or_else(|| panic!("stream ended at {i}"));
        assert_eq!(n["params"]["uri"], Value::from(uri.as_str()));
    }
    assert_eq!(publisher.join().unwrap(), 20_000);
    assert_eq!(srv.metrics().closed(CloseReason::Overflow), 0);
    assert_eq!(srv.metrics().open_streams, 1);
}

#[test]
fn a_reader_stalled_past_the_stall_timeout_is_cut_as_overflow() {
    let mut config = probe::config();
    config.limits.stall_timeout = Duration::from_millis(300);
    let srv = probe::start(Mode::Accept, caps(), config);
    let uri = format!("res://{}", "z".repeat(1000));
    let mut s = listen(
        srv.addr(),
        json!("stalled"),
        json!({"resourceSubscriptions": [uri.clone()]}),
    );
    s.next_message().unwrap();
    srv.wait_subscribers(1);
    let publisher = wide_events(&srv, &uri, 20_000);
    assert!(
        wait_until(Duration::from_secs(20), || srv
            .metrics()
            .closed(CloseReason::Overflow)
            == 1),
        "{:?}",
        srv.metrics()
    );
    let taken = publisher.join().unwrap();
    assert!(
        taken < 20_000,
        "the publisher stops being served once the stream is cut"
    );
    // Overflow is a teardown the handler did not choose: handle_close cleans up.
    assert!(wait_until(Duration::from_secs(5), || !srv
        .closed()
        .is_empty()));
    assert_eq!(srv.closed(), vec![RequestId::from("stalled")]);
}
