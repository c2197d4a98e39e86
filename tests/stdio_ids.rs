//! Request ids on a stdio pipe (issue 15, point 2): a listen id stays taken
//! until its stream's final frame is written or dropped, a cancel suppresses
//! a final overflow error still queued, and a listen never takes the id of a
//! request in flight (nor the other way round).

mod common;
#[path = "common/scripted.rs"]
mod scripted;
#[path = "common/stdio_pipe.rs"]
mod stdio_pipe;

use std::sync::atomic::Ordering;
use std::time::Duration;

use genmcp::prelude::*;
use scripted::{Then, is_for, sub_id};
use serde_json::{Value, json};
use stdio_pipe::*;

fn is_ack_for(v: &Value, id: &Value) -> bool {
    v["method"] == "notifications/subscriptions/acknowledged" && sub_id(v) == id
}

/// A pipe with listen `dup` open, whose stream then overflowed with its final
/// `-32603` error for the id queued in the outbox, unwritten: the writer is
/// held on an earlier reply.
async fn overflowed_with_its_error_queued() -> (Pipe, std::sync::Arc<Gate>) {
    let gate = Gate::new(OPEN);
    let mut p = Pipe::start_with(limits(8, 8, Duration::from_secs(30)), gate.clone(), None);
    let id = json!("dup");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    gate.hold();
    p.send(&common::request(json!("warm"), "no/such/method", json!({})))
        .await;
    p.wait("the writer holding a reply", |_| {
        gate.waiting.load(Ordering::SeqCst)
    })
    .await;
    // 65 events at once into a mailbox of 64: the stream is cut as overflow,
    // and its error for the id goes into the (empty) outbox.
    for _ in 0..=Limits::default().mailbox_capacity {
        p.bus.publish("all", burst("dup", 0, Then::Continue));
    }
    p.wait("the overflow", |p| p.closed(CloseReason::Overflow) == 1)
        .await;
    (p, gate)
}

#[actix_rt::test]
async fn a_cancel_suppresses_an_overflow_error_still_queued_and_a_re_listen_gets_no_stale_error() {
    let (mut p, gate) = overflowed_with_its_error_queued().await;
    let id = json!("dup");
    p.cancel(id.clone()).await;
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.wait("the new stream", |p| {
        p.record
            .subscribed()
            .iter()
            .filter(|s| **s == RequestId::from("dup"))
            .count()
            == 2
    })
    .await;
    gate.open();
    let first = p.next().await;
    assert_eq!(first["id"], "warm");
    let v = p.next().await;
    assert!(
        is_ack_for(&v, &id),
        "the cancelled stream's error was written: {v}"
    );
    p.finish().await;
    assert!(
        !p.transcript.iter().any(|v| v["id"] == id),
        "no response for the cancelled id: {:#?}",
        p.transcript
    );
    assert_eq!(p.closed(CloseReason::Overflow), 1);
}

#[actix_rt::test]
async fn a_re_listen_while_the_old_streams_error_is_unwritten_is_refused_as_a_duplicate() {
    let (mut p, gate) = overflowed_with_its_error_queued().await;
    let id = json!("dup");
    // Sent before the client has read the old stream's end: still taken.
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    // Lines are handled in order: once the next listen has started, the
    // re-listen has been answered.
    p.listen(json!("probe"), json!({"toolsListChanged": true}))
        .await;
    p.wait("the probe listen", |p| {
        p.record.subscribed().contains(&RequestId::from("probe"))
    })
    .await;
    gate.open();
    let first = p.next().await;
    assert_eq!(first["id"], "warm");
    let old_end = p.until(|v| is_for(v, &id)).await;
    assert_eq!(old_end["id"], id, "{old_end}");
    assert_eq!(old_end["error"]["code"], -32603, "{old_end}");
    let answer = p.until(|v| is_for(v, &id)).await;
    assert!(
        !is_ack_for(&answer, &id),
        "the id was reused before the old stream's error was written"
    );
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    // Once the old error is out, the id is free.
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.until(|v| is_ack_for(v, &id)).await;
    p.finish().await;
}

#[actix_rt::test]
async fn a_listen_with_the_id_of_a_request_in_flight_is_refused_and_the_request_still_answers() {
    let mut p = Pipe::start(Limits::default());
    p.send(&common::request(
        json!(5),
        "tools/call",
        json!({"name": "wait", "arguments": {}}),
    ))
    .await;
    p.listen(json!(5), json!({"toolsListChanged": true})).await;
    let refused = p.next().await;
    assert_eq!(refused["id"], 5, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(p.record.subscribed().is_empty(), "no stream was opened");
    p.record.release.notify_one();
    let answer = p.next().await;
    assert_eq!(answer["id"], 5);
    assert_eq!(answer["result"]["content"][0]["text"], "released");
    p.finish().await;
}

#[actix_rt::test]
async fn a_request_with_the_id_of_an_open_listen_is_refused_and_the_stream_lives_on() {
    let mut p = Pipe::start(Limits::default());
    let id = json!(6);
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    p.send(&common::request(
        id.clone(),
        "tools/call",
        json!({"name": "label", "arguments": {"label": null}}),
    ))
    .await;
    let refused = p.next().await;
    assert_eq!(refused["id"], id, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_eq!(p.server.metrics().open_streams, 1);
    p.finish().await;
    assert_eq!(
        p.transcript.iter().filter(|v| v["id"] == id).count(),
        1,
        "one answer for the id: the refusal {:#?}",
        p.transcript
    );
}
