//! Exactly one final frame per acknowledged listen, on a stdio pipe (issue 9,
//! point 4): `serve_io` in process over a real in-memory duplex pipe whose
//! reading end the test controls, so a stalled reader is a reader that does not
//! read.

mod common;
#[path = "common/scripted.rs"]
mod scripted;
#[path = "common/stdio_pipe.rs"]
mod stdio_pipe;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use genmcp::prelude::*;
use scripted::{CapsHook, Cmd, Then, is_final_for, seqs, sub_id, the_one_final_frame};
use serde_json::{Value, json};
use stdio_pipe::*;
use tokio::io::AsyncWriteExt;

// 1. A handler overflows its outbox and ends the stream in the same callback.

async fn overflow_then(then: Then) {
    let mut p = Pipe::start(limits(4, 4, Duration::from_secs(30)));
    let id = json!("o");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    // One callback: 4 frames fill the outbox, 4 the spill, the rest overflow;
    // then the handler stops (or panics).
    p.bus.publish("all", burst("o", 50, then));
    p.wait("the burst", |p| p.handled() == 1).await;
    assert!(p.record.refused_overflow(&RequestId::from("o")));
    let end = p.until(|v| is_final_for(v, &id)).await;
    assert_eq!(end["error"]["code"], -32603, "{end}");
    p.wait("the stream's end", |p| p.server.metrics().open_streams == 0)
        .await;
    p.finish().await;
    let last = the_one_final_frame(&p.transcript, &id);
    assert_eq!(last["error"]["code"], -32603);
    let got = seqs(&p.transcript, &id);
    assert!(is_prefix(&got) && got.len() < 50, "{got:?}");
    assert_eq!(p.closed(CloseReason::Overflow), 1);
    assert_eq!(p.closed(CloseReason::Completed), 0);
    assert_eq!(p.closed(CloseReason::Panicked), 0);
}

#[actix_rt::test]
async fn a_handler_that_overflows_and_stops_in_one_callback_ends_its_id_with_one_overflow_error() {
    overflow_then(Then::Stop).await;
}

#[actix_rt::test]
async fn a_handler_that_overflows_and_panics_in_one_callback_ends_its_id_with_one_overflow_error() {
    overflow_then(Then::Panic).await;
}

// 2. A completion or a rejection waits in the spill queue while the reader
//    stalls past the stall timeout.

const SHORT_STALL: Duration = Duration::from_millis(150);

/// Waits well past the stall timeout: the point of the test is time passing.
async fn stall_past_the_timeout() {
    tokio::time::sleep(SHORT_STALL * 5).await;
}

#[actix_rt::test]
async fn a_completion_spilled_while_the_reader_stalls_past_the_stall_timeout_arrives_once_it_reads()
{
    let mut p = Pipe::start(limits(4, 8, SHORT_STALL));
    let id = json!("c");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    // 10 frames: 4 in the outbox, 6 spilled, and the completion behind them.
    p.bus.publish("all", burst("c", 10, Then::Stop));
    p.wait("the burst", |p| p.handled() == 1).await;
    stall_past_the_timeout().await;
    assert_eq!(
        p.server.metrics().open_streams,
        1,
        "the stream still waits to deliver its completion"
    );
    p.until(|v| is_final_for(v, &id)).await;
    p.wait("the stream's end", |p| p.server.metrics().open_streams == 0)
        .await;
    p.finish().await;
    let end = the_one_final_frame(&p.transcript, &id);
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert_eq!(seqs(&p.transcript, &id), (0..10).collect::<Vec<_>>());
    assert_eq!(p.closed(CloseReason::Completed), 1);
    assert_eq!(p.closed(CloseReason::Overflow), 0);
}

#[actix_rt::test]
async fn a_rejection_spilled_while_the_reader_stalls_past_the_stall_timeout_arrives_once_it_reads()
{
    let mut p = Pipe::start(limits(4, 8, SHORT_STALL));
    let full = json!("full");
    p.listen(full.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&full).await;
    // "full" fills the outbox (and ends, its completion queued behind its frames).
    p.bus.publish("all", burst("full", 10, Then::Stop));
    p.wait("the burst", |p| p.handled() == 1).await;
    // The rejection of this listen finds the outbox full: it spills.
    let rejected = json!("reject-me");
    p.listen(rejected.clone(), json!({"toolsListChanged": true}))
        .await;
    p.wait("subscribe", |p| {
        p.record
            .subscribed()
            .contains(&RequestId::from("reject-me"))
    })
    .await;
    stall_past_the_timeout().await;
    assert_eq!(
        p.server.metrics().open_streams,
        2,
        "both final frames still wait in their spill queues"
    );
    let mut saw = None;
    while saw.is_none() {
        let v = p.next().await;
        if is_final_for(&v, &rejected) {
            saw = Some(v);
        }
    }
    p.wait("both streams' end", |p| {
        p.server.metrics().open_streams == 0
    })
    .await;
    p.finish().await;
    let errors: Vec<&Value> = p
        .transcript
        .iter()
        .filter(|v| v["id"] == rejected)
        .collect();
    assert_eq!(errors.len(), 1, "exactly one error for the rejected id");
    assert_eq!(errors[0]["error"]["code"], -32602, "{}", errors[0]);
    assert!(
        !p.transcript
            .iter()
            .any(|v| v.get("method").is_some() && sub_id(v) == &rejected),
        "a rejected listen gets no acknowledgement"
    );
    the_one_final_frame(&p.transcript, &full);
    assert_eq!(p.closed(CloseReason::Rejected), 1);
    assert_eq!(p.closed(CloseReason::Completed), 1);
    assert_eq!(p.closed(CloseReason::Overflow), 0);
}

// 3. stdin EOF or a shutdown while a stream waits for outbox room.

#[actix_rt::test]
async fn stdin_eof_while_a_stream_waits_for_outbox_room_tears_it_down_promptly_and_runs_handle_close()
 {
    // A stall timeout far longer than the bound below: only a prompt teardown
    // passes.
    let mut p = Pipe::start(limits(4, 64, Duration::from_secs(30)));
    let id = json!("p");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    p.bus.publish("all", burst("p", 20, Then::Continue));
    p.wait("the burst", |p| p.handled() == 1).await;
    // The reader has not read: the stream is paused with frames in its spill.
    let started = Instant::now();
    p.write.shutdown().await.unwrap();
    p.wait("handle_close", |p| !p.record.closed().is_empty())
        .await;
    assert_eq!(p.record.closed(), vec![RequestId::from("p")]);
    p.drain().await.expect("serve_io ends cleanly");
    assert!(
        started.elapsed() < BOUND,
        "teardown took {:?}",
        started.elapsed()
    );
    assert_eq!(p.record.closed_count(&RequestId::from("p")), 1);
    assert_eq!(p.closed(CloseReason::Disconnected), 1);
    at_most_one_final(&p.transcript, &id);
    assert!(is_prefix(&seqs(&p.transcript, &id)));
    assert!(
        p.bus.subscribers("all").is_empty(),
        "the state was released"
    );
}

#[actix_rt::test]
async fn shutdown_while_a_stream_waits_for_outbox_room_ends_it_promptly_with_the_completion_last() {
    let mut p = Pipe::start(limits(4, 64, Duration::from_secs(30)));
    let id = json!("s");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    p.bus.publish("all", burst("s", 20, Then::Continue));
    p.wait("the burst", |p| p.handled() == 1).await;
    let started = Instant::now();
    p.server.shutdown();
    // Events published now are never handled after the completion is queued.
    p.bus.publish("all", burst("s", 5, Then::Continue));
    p.drain().await.expect("serve_io ends cleanly");
    assert!(
        started.elapsed() < BOUND,
        "teardown took {:?}",
        started.elapsed()
    );
    let end = the_one_final_frame(&p.transcript, &id);
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    // The shutdown is handled at once although the stream is paused: the
    // completion is queued behind the 20 frames already queued, and the events
    // published after it are never delivered ahead of it.
    assert_eq!(
        seqs(&p.transcript, &id),
        (0..20).collect::<Vec<_>>(),
        "exactly the frames queued before the shutdown come before the completion"
    );
    assert_eq!(p.closed(CloseReason::Shutdown), 1);
    assert_eq!(
        p.record.closed(),
        vec![RequestId::from("s")],
        "shutdown is external: handle_close runs once"
    );
}

// 4. The acknowledgement cannot be written: stdout closed under the server.

#[actix_rt::test]
async fn a_listen_whose_acknowledgement_finds_stdout_closed_still_runs_handle_close() {
    let gate = Gate::new(HOLD);
    // Called while the listen is being opened (before `subscribe`): stdout
    // fails now, so the writer is gone when the acknowledgement is queued.
    let hook: CapsHook = Arc::new({
        let gate = gate.clone();
        move |_channel: &Channel| gate.fail()
    });
    let mut p = Pipe::start_with(
        limits(4, 4, Duration::from_secs(30)),
        gate.clone(),
        Some(hook),
    );
    // An error reply the writer holds: stdout is stuck, not yet failed.
    p.send(&common::request(json!("warm"), "no/such/method", json!({})))
        .await;
    p.wait("the writer holding a frame", |_| {
        gate.waiting.load(Ordering::SeqCst)
    })
    .await;
    p.listen(json!("late"), json!({"toolsListChanged": true}))
        .await;
    p.wait("handle_close", |p| !p.record.closed().is_empty())
        .await;
    assert_eq!(p.record.subscribed(), vec![RequestId::from("late")]);
    p.wait("the stream's end", |p| p.server.metrics().open_streams == 0)
        .await;
    assert_eq!(
        p.record.closed(),
        vec![RequestId::from("late")],
        "exactly once"
    );
    assert!(
        p.bus.subscribers("all").is_empty(),
        "the state was released"
    );
    assert_eq!(p.closed(CloseReason::Disconnected), 1);
    let result = p.drain().await;
    assert!(result.is_err(), "stdout failed: {result:?}");
    assert!(p.transcript.is_empty(), "nothing could be written");
}

// 5. A re-listen with the id of a stream that overflowed.

#[actix_rt::test]
async fn a_re_listen_after_an_overflow_never_receives_the_old_streams_error() {
    let mut p = Pipe::start(limits(4, 4, Duration::from_secs(30)));
    let id = json!("dup");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    let filler = json!("filler");
    p.listen(filler.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&filler).await;
    // "filler" stalls the pipe: the writer holds its frames, the outbox is full
    // of them, its completion waits behind (on a pipe, with no stall timeout).
    p.bus.publish("all", burst("filler", 8, Then::Stop));
    p.wait("the filler", |p| p.handled() == 2).await;
    // "dup" overflows: its error for the id queues behind the filler's frames.
    p.bus.publish("all", burst("dup", 50, Then::Continue));
    p.wait("the overflow", |p| {
        p.record.refused_overflow(&RequestId::from("dup"))
    })
    .await;
    // While the overflow error still waits for outbox room: listen again.
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    // Read until the same id is acknowledged again, listening again whenever the
    // previous attempt was refused (the old stream still held the id).
    let mut acks = 0;
    while acks == 0 {
        let v = p.next().await;
        if v["method"] == "notifications/subscriptions/acknowledged" && sub_id(&v) == &id {
            acks += 1;
        } else if v["error"]["code"] == -32600 && v["id"] == id {
            p.wait("the old stream's end", |p| {
                p.closed(CloseReason::Overflow) == 1
            })
            .await;
            p.listen(id.clone(), json!({"toolsListChanged": true}))
                .await;
        }
    }
    // The new stream works, and gets nothing of the old one.
    p.wait("the new stream alone on the bus", |p| {
        p.bus.subscribers("all").len() == 1 && p.closed(CloseReason::Overflow) == 1
    })
    .await;
    p.bus.publish("all", burst("dup", 1, Then::Continue));
    let n = p.next().await;
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
    assert_eq!(sub_id(&n), &id);
    p.finish().await;
    let second_ack = p
        .transcript
        .iter()
        .rposition(|v| {
            v["method"] == "notifications/subscriptions/acknowledged" && sub_id(v) == &id
        })
        .unwrap();
    let errors: Vec<usize> = p
        .transcript
        .iter()
        .enumerate()
        .filter(|(_, v)| v["id"] == id && v.get("error").is_some())
        .map(|(i, _)| i)
        .collect();
    let overflow_errors = p
        .transcript
        .iter()
        .filter(|v| v["id"] == id && v["error"]["code"] == -32603)
        .count();
    assert_eq!(overflow_errors, 1, "{:#?}", p.transcript);
    // The first re-listen came while the old stream still held the id (its
    // error could not be written yet): refused, after the old stream's error.
    let overflow_error = p
        .transcript
        .iter()
        .position(|v| v["id"] == id && v["error"]["code"] == -32603)
        .unwrap();
    let refusal = p
        .transcript
        .iter()
        .position(|v| v["id"] == id && v["error"]["code"] == -32600)
        .unwrap_or_else(|| {
            for v in &p.transcript {
                eprintln!("{} {} {} {}", v["id"], v["method"], v["error"], sub_id(v));
            }
            panic!("the re-listen was refused while the id was held")
        });
    assert!(overflow_error < refusal, "{:#?}", p.transcript);
    assert!(
        errors.iter().all(|i| *i < second_ack),
        "every error for the id comes before the new acknowledgement: {:#?}",
        p.transcript
    );
    assert_eq!(p.record.closed_count(&RequestId::from("dup")), 2);
    the_one_final_frame(&p.transcript, &filler);
}

// 6. A caller-supplied subscription id on a shared pipe.

#[actix_rt::test]
async fn a_stream_cannot_label_its_frames_with_another_streams_subscription_id() {
    let mut p = Pipe::start(Limits::default());
    let (a, b) = (json!("a"), json!("b"));
    p.listen(a.clone(), json!({"toolsListChanged": true})).await;
    p.acked(&a).await;
    p.listen(b.clone(), json!({"toolsListChanged": true})).await;
    p.acked(&b).await;
    p.bus.publish(
        "all",
        Cmd::Forge {
            from: RequestId::from("a"),
            label: b.clone(),
        },
    );
    for seq in 0..2 {
        let n = p.next().await;
        assert_eq!(n["method"], "notifications/tools/list_changed");
        assert_eq!(sub_id(&n), &a, "{n}");
        assert_eq!(n["params"]["_meta"]["seq"], seq);
        // serde_json keeps the last of duplicate keys: count them in the text.
        let line = p.raw.last().unwrap();
        assert_eq!(
            line.matches("io.modelcontextprotocol/subscriptionId")
                .count(),
            1,
            "{line}"
        );
    }
    assert!(p.record.refused.lock().unwrap().is_empty());
    p.finish().await;
    let for_b: Vec<&Value> = p
        .transcript
        .iter()
        .filter(|v| v.get("method").is_some() && sub_id(v) == &b)
        .collect();
    assert_eq!(for_b.len(), 1, "only b's acknowledgement: {for_b:#?}");
}

// 7. Revoked frames (a cancel with frames queued) on a pipe.

#[actix_rt::test]
async fn revoked_frames_on_a_pipe_are_neither_written_nor_counted() {
    let gate = Gate::new(OPEN);
    let mut p = Pipe::start_with(limits(8, 64, Duration::from_secs(30)), gate.clone(), None);
    let (x, y) = (json!("x"), json!("y"));
    p.listen(x.clone(), json!({"toolsListChanged": true})).await;
    p.acked(&x).await;
    p.listen(y.clone(), json!({"toolsListChanged": true})).await;
    p.acked(&y).await;
    // stdout stuck: the writer holds y's first frame.
    gate.hold();
    p.bus.publish("all", burst("y", 1, Then::Continue));
    p.wait("the writer holding a frame", |_| {
        gate.waiting.load(Ordering::SeqCst)
    })
    .await;
    // Two frames of each stream queued side by side in the outbox.
    p.bus.publish(
        "all",
        Cmd::Burst {
            to: None,
            n: 2,
            pad: PAD,
            then: Then::Continue,
        },
    );
    // Each publish reaches both streams: 2 + 2 callbacks.
    p.wait("the bursts", |p| p.handled() == 4).await;
    // x is cancelled with its frames in the outbox: they are revoked, and the
    // writer's next batch mixes them with y's.
    p.cancel(x.clone()).await;
    p.wait("handle_close", |p| !p.record.closed().is_empty())
        .await;
    gate.open();
    p.finish().await;
    assert_eq!(
        seqs(&p.transcript, &x),
        Vec::<u64>::new(),
        "x's queued frames were revoked"
    );
    assert_eq!(seqs(&p.transcript, &y), vec![0, 0, 1]);
    assert!(!p.transcript.iter().any(|v| is_final_for(v, &x)));
    assert_eq!(
        p.server.metrics().frames_sent,
        p.transcript.len() as u64,
        "frames_sent counts exactly the lines written: {:#?}",
        p.transcript
    );
    assert_eq!(p.closed(CloseReason::Cancelled), 1);
}

// 8. Frames sent from a background clone of a channel while the outbox is full.

#[actix_rt::test]
async fn frames_spilled_by_a_background_channel_clone_arrive_when_the_reader_reads_without_another_event()
 {
    let mut p = Pipe::start(limits(4, 64, Duration::from_secs(30)));
    let id = json!("bg");
    let n = 40;
    let uris: Vec<String> = (0..n).map(|i| format!("bg://{i}")).collect();
    p.listen(id.clone(), json!({"resourceSubscriptions": uris}))
        .await;
    p.acked(&id).await;
    p.bus.publish(
        "all",
        Cmd::Background {
            to: RequestId::from("bg"),
            n,
            pad: PAD,
        },
    );
    // The thread sends all of them while the reader does not read: far more than
    // the pipe, the writer and the outbox hold, so most wait in the spill.
    p.wait("the background sends", |p| {
        p.record.background_sent.load(Ordering::SeqCst)
            + p.record.background_refused.lock().unwrap().len()
            == n
    })
    .await;
    assert!(p.record.background_refused.lock().unwrap().is_empty());
    // No event is published from here on: reading alone must bring them all.
    for uri in &uris {
        let v = p.next().await;
        assert_eq!(v["params"]["uri"], Value::from(uri.as_str()), "{v}");
        assert_eq!(sub_id(&v), &id);
    }
    assert_eq!(p.handled(), 1, "no further event was handled");
    p.finish().await;
}

// Overflow is external: handle_close runs, once.

#[actix_rt::test]
async fn an_overflow_on_a_pipe_runs_handle_close_exactly_once() {
    let mut p = Pipe::start(limits(4, 4, Duration::from_secs(30)));
    let id = json!("of");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    p.bus.publish("all", burst("of", 50, Then::Continue));
    let end = p.until(|v| is_final_for(v, &id)).await;
    assert_eq!(end["error"]["code"], -32603);
    p.wait("the stream's end", |p| p.closed(CloseReason::Overflow) == 1)
        .await;
    assert_eq!(p.record.closed(), vec![RequestId::from("of")]);
    // A later teardown of the pipe does not run it again.
    p.finish().await;
    assert_eq!(p.record.closed(), vec![RequestId::from("of")]);
    assert_eq!(p.closed(CloseReason::Disconnected), 0);
    the_one_final_frame(&p.transcript, &id);
    assert!(p.bus.subscribers("all").is_empty());
}

// A request-scoped notification labelled with a listen's subscription id.

#[actix_rt::test]
async fn a_request_scoped_notification_cannot_pass_for_a_frame_of_a_listen_stream() {
    let mut p = Pipe::start(Limits::default());
    let a = json!("a");
    p.listen(a.clone(), json!({"toolsListChanged": true})).await;
    p.acked(&a).await;
    p.send(&common::request(
        json!(3),
        "tools/call",
        json!({"name": "label", "arguments": {"label": "a"}}),
    ))
    .await;
    let n = p.next().await;
    assert_eq!(n["method"], "notifications/custom", "{n}");
    assert_eq!(
        n["params"]["_meta"],
        json!({"trace": 1}),
        "only listen streams carry a subscription id: {n}"
    );
    let answer = p.next().await;
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["content"][0]["text"], "sent");
    p.finish().await;
    let for_a: Vec<&Value> = p.transcript.iter().filter(|v| sub_id(v) == &a).collect();
    assert_eq!(for_a.len(), 1, "only a's acknowledgement: {for_a:#?}");
}

// A completion that never reaches stdout is not counted as completed.

#[actix_rt::test]
async fn a_completion_lost_with_stdout_is_counted_as_disconnected_not_completed() {
    let gate = Gate::new(OPEN);
    let mut p = Pipe::start_with(limits(4, 8, Duration::from_secs(30)), gate.clone(), None);
    let id = json!("lost");
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    p.acked(&id).await;
    gate.hold();
    // 10 frames then the completion: 4 in the outbox, the rest (the completion
    // last) in the spill, while stdout is held.
    p.bus.publish("all", burst("lost", 10, Then::Stop));
    p.wait("the burst", |p| p.handled() == 1).await;
    p.wait("the writer holding frames", |_| {
        gate.waiting.load(Ordering::SeqCst)
    })
    .await;
    gate.fail();
    p.wait("the stream's end", |p| p.server.metrics().open_streams == 0)
        .await;
    assert_eq!(
        p.closed(CloseReason::Completed),
        0,
        "the client never got it"
    );
    assert_eq!(p.closed(CloseReason::Disconnected), 1);
    let result = p.drain().await;
    assert!(result.is_err(), "stdout failed: {result:?}");
    assert!(!p.transcript.iter().any(|v| is_final_for(v, &id)));
}
