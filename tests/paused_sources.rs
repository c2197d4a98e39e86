//! Back-pressure for every source of events (issue 15, point 2): events from a
//! stream attached in `subscribe` and from `notify_self` pause while the stream
//! waits for outbox room, like the inbox's. A fast source against a slow
//! reader ends in delivery, in order, never in `Overflow`.

mod common;
#[path = "common/scripted.rs"]
mod scripted;
#[path = "common/stdio_pipe.rs"]
mod stdio_pipe;

use std::sync::atomic::Ordering;
use std::time::Duration;

use genmcp::prelude::*;
use scripted::{FED, seqs};
use serde_json::json;
use stdio_pipe::*;

/// Listens with `id` (fed [`FED`] events at once by `subscribe`) while stdout
/// is held, then reads everything.
async fn a_fast_source_waits_for_a_slow_reader(id: &str) {
    let gate = Gate::new(HOLD);
    // Outbox 4 and spill 4: far fewer frames than the source has ready.
    let mut p = Pipe::start_with(limits(4, 4, Duration::from_secs(30)), gate.clone(), None);
    let id = json!(id);
    p.listen(id.clone(), json!({"toolsListChanged": true}))
        .await;
    // The writer holds the acknowledgement: nothing reaches the reader.
    p.wait("the writer holding the acknowledgement", |_| {
        gate.waiting.load(Ordering::SeqCst)
    })
    .await;
    // The outbox fills, a frame spills, the stream pauses.
    p.wait("the first events", |p| p.handled() >= 5).await;
    // Time for a source that does not pause to run past the spill (not a
    // speed assertion: a correct stream stays paused however long this is).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(p.closed(CloseReason::Overflow), 0, "paused, not cut");
    assert!(p.handled() < FED, "the source was not paused");
    gate.open();
    p.acked(&id).await;
    for seq in 0..FED {
        let v = p.next().await;
        assert_eq!(v["params"]["_meta"]["seq"], seq, "{v}");
    }
    assert!(p.record.refused.lock().unwrap().is_empty());
    assert_eq!(p.closed(CloseReason::Overflow), 0);
    assert_eq!(
        p.server.metrics().open_streams,
        1,
        "the stream is still open"
    );
    p.finish().await;
    assert_eq!(
        seqs(&p.transcript, &id),
        (0..FED as u64).collect::<Vec<_>>()
    );
    assert_eq!(p.closed(CloseReason::Disconnected), 1);
}

#[actix_rt::test]
async fn a_fast_attached_stream_pauses_for_a_slow_reader_and_delivers_everything_in_order() {
    a_fast_source_waits_for_a_slow_reader("attach").await;
}

#[actix_rt::test]
async fn notify_self_messages_pause_for_a_slow_reader_and_are_delivered_in_order() {
    a_fast_source_waits_for_a_slow_reader("self").await;
}
