use super::*;
use crate::mux::{OutboxReceiver, outbox};
use crate::protocol::keys;
use serde_json::json;

fn recv_json(rx: &mut OutboxReceiver) -> Value {
    serde_json::from_slice(&rx.try_recv().expect("a frame").to_bytes()).unwrap()
}

fn listen(id: RequestId, cap: usize, spill: usize) -> (Channel, OutboxReceiver) {
    let (tx, rx) = outbox(cap);
    (
        Channel::for_listen(id, RequestMeta::current(), Assigns::new(), tx, spill),
        rx,
    )
}

#[test]
fn listen_stamps_ids_with_their_json_type_and_enforces_the_filter() {
    for id in [RequestId::Number(7), RequestId::String("7".into())] {
        let (ch, mut rx) = listen(id.clone(), 8, 8);
        assert_eq!(
            ch.send_notification(Notification::tools_list_changed()),
            Err(ChannelError::NotAcknowledged)
        );
        ch.acknowledge(SubscriptionFilter {
            tools_list_changed: true,
            resource_subscriptions: vec!["a://x".into()],
            ..Default::default()
        })
        .unwrap();
        let ack = recv_json(&mut rx);
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(ack["params"]["_meta"][keys::SUBSCRIPTION_ID], id.to_value());
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true, "resourceSubscriptions": ["a://x"]})
        );
        ch.send_notification(Notification::tools_list_changed())
            .unwrap();
        assert_eq!(
            recv_json(&mut rx)["params"]["_meta"][keys::SUBSCRIPTION_ID],
            id.to_value()
        );
        assert!(matches!(
            ch.send_notification(Notification::prompts_list_changed()),
            Err(ChannelError::OutsideFilter { .. })
        ));
        assert!(matches!(
            ch.send_notification(Notification::resource_updated("a://y")),
            Err(ChannelError::OutsideFilter { .. })
        ));
        ch.send_notification(Notification::resource_updated("a://x"))
            .unwrap();
        assert_eq!(recv_json(&mut rx)["params"]["uri"], "a://x");
        assert!(matches!(
            ch.send_progress(1.0, None, None),
            Err(ChannelError::NotRequestScoped(_))
        ));
        assert!(rx.try_recv().is_err(), "refused sends write nothing");
    }
}

#[test]
fn a_caller_supplied_subscription_id_is_replaced_by_the_streams_own() {
    let (ch, mut rx) = listen(RequestId::Number(1), 8, 8);
    ch.acknowledge(SubscriptionFilter::tools()).unwrap();
    let _ = recv_json(&mut rx);
    let mut params = Map::new();
    params.insert(
        "_meta".into(),
        json!({keys::SUBSCRIPTION_ID: "mine", "other": 1}),
    );
    ch.send_notification(Notification::new(methods::TOOLS_LIST_CHANGED, params))
        .unwrap();
    let n = recv_json(&mut rx);
    assert_eq!(
        n["params"]["_meta"],
        json!({keys::SUBSCRIPTION_ID: 1, "other": 1})
    );
}

#[test]
fn progress_and_logs_only_when_asked_and_without_nulls() {
    let (tx, mut rx) = outbox(8);
    let ch = Channel::for_request(
        RequestId::Number(1),
        RequestMeta::current(),
        Assigns::new(),
        tx.clone(),
    );
    ch.send_progress(1.0, None, None).unwrap();
    ch.send_log(LogLevel::Emergency, None, json!("x")).unwrap();
    assert!(rx.try_recv().is_err());

    let mut meta = RequestMeta::current();
    meta.progress_token = Some(ProgressToken::String("tok".into()));
    meta.log_level = Some(LogLevel::Warning);
    let ch = Channel::for_request(RequestId::Number(2), meta, Assigns::new(), tx);
    ch.send_progress(50.0, None, None).unwrap();
    assert_eq!(
        recv_json(&mut rx)["params"],
        json!({"progressToken": "tok", "progress": 50})
    );
    assert_eq!(
        ch.send_progress(50.0, None, None),
        Err(ChannelError::ProgressNotIncreasing)
    );
    ch.send_log(LogLevel::Info, None, json!("quiet")).unwrap();
    ch.send_log(LogLevel::Error, Some("db"), json!("loud"))
        .unwrap();
    assert_eq!(
        recv_json(&mut rx)["params"],
        json!({"level": "error", "logger": "db", "data": "loud"})
    );
    assert!(rx.try_recv().is_err());
    assert!(matches!(
        ch.send_notification(Notification::tools_list_changed()),
        Err(ChannelError::NotAListenStream(_))
    ));
}

#[test]
fn a_closed_channel_refuses_and_never_panics() {
    let (ch, rx) = listen(RequestId::Number(1), 1, 1);
    ch.acknowledge(SubscriptionFilter::tools()).unwrap();
    drop(rx);
    assert_eq!(
        ch.send_notification(Notification::tools_list_changed()),
        Err(ChannelError::Closed)
    );
    assert!(ch.is_closed());
}

#[test]
fn the_final_frame_has_a_spare_slot_and_nothing_follows_it() {
    let (ch, mut rx) = listen(RequestId::Number(1), 1, 1);
    ch.acknowledge(SubscriptionFilter::tools()).unwrap(); // fills the outbox
    ch.send_notification(Notification::tools_list_changed())
        .unwrap(); // fills the spill
    ch.finish(b"{}".to_vec()).unwrap(); // still queued
    assert!(ch.is_closed());
    assert_eq!(
        ch.send_notification(Notification::tools_list_changed()),
        Err(ChannelError::Closed)
    );
    let _ = rx.try_recv();
    assert!(
        rx.try_recv().is_err(),
        "the rest waits in the spill, in order"
    );
}

#[test]
fn revoked_frames_are_marked_and_the_spill_is_dropped() {
    let (ch, mut rx) = listen(RequestId::Number(1), 2, 8);
    ch.acknowledge(SubscriptionFilter::tools()).unwrap();
    ch.send_notification(Notification::tools_list_changed())
        .unwrap();
    ch.send_notification(Notification::tools_list_changed())
        .unwrap(); // spilled
    ch.revoke();
    assert!(!ch.has_pending());
    assert!(rx.try_recv().unwrap().is_revoked());
    assert!(rx.try_recv().unwrap().is_revoked());
    assert_eq!(
        ch.send_notification(Notification::tools_list_changed()),
        Err(ChannelError::Closed)
    );
}

#[test]
fn spill_is_bounded_and_then_overflows() {
    let (ch, mut rx) = listen(RequestId::Number(1), 1, 2);
    ch.acknowledge(SubscriptionFilter::tools()).unwrap(); // fills the outbox
    ch.send_notification(Notification::tools_list_changed())
        .unwrap(); // spill 1
    ch.send_notification(Notification::tools_list_changed())
        .unwrap(); // spill 2
    assert_eq!(
        ch.send_notification(Notification::tools_list_changed()),
        Err(ChannelError::Overflow)
    );
    assert!(ch.is_overflowed());
    assert!(ch.has_pending());
    let _ = rx.try_recv();
}

#[test]
fn an_overflow_error_is_kept_by_an_overflow_cut_and_suppressed_by_a_cancel() {
    for cancel in [false, true] {
        let (ch, mut rx) = listen(RequestId::Number(1), 4, 4);
        ch.acknowledge(SubscriptionFilter::tools()).unwrap();
        ch.send_notification(Notification::tools_list_changed())
            .unwrap();
        ch.end_overflowed(b"{\"error\":1}".to_vec()).unwrap();
        if cancel {
            ch.revoke();
        }
        let ack = rx.try_recv().unwrap();
        let note = rx.try_recv().unwrap();
        let end = rx.try_recv().unwrap();
        assert!(
            ack.is_revoked() && note.is_revoked(),
            "queued frames dropped"
        );
        assert!(end.last);
        assert_eq!(end.is_revoked(), cancel, "cancel: {cancel}");
    }
}

#[test]
fn frames_are_in_flight_until_the_writer_drops_them() {
    let (ch, mut rx) = listen(RequestId::Number(1), 1, 4);
    assert!(!ch.frames_in_flight());
    ch.acknowledge(SubscriptionFilter::tools()).unwrap();
    ch.send_notification(Notification::tools_list_changed())
        .unwrap(); // spilled: not in flight
    ch.close();
    assert!(
        ch.frames_in_flight(),
        "the acknowledgement is in the outbox"
    );
    let ack = rx.try_recv().unwrap();
    assert!(ch.frames_in_flight(), "the writer holds it");
    drop(ack);
    assert!(!ch.frames_in_flight(), "only the spill is left");
}

#[test]
fn request_scoped_notifications_carry_no_subscription_id() {
    let (tx, mut rx) = outbox(4);
    let ch = Channel::for_request(
        RequestId::Number(3),
        RequestMeta::current(),
        Assigns::new(),
        tx,
    );
    let mut params = Map::new();
    params.insert(
        "_meta".into(),
        json!({keys::SUBSCRIPTION_ID: "other", "trace": 1}),
    );
    ch.send_notification(Notification::new("notifications/custom", params))
        .unwrap();
    let sent = recv_json(&mut rx);
    assert_eq!(sent["params"]["_meta"], json!({"trace": 1}));
}

#[test]
fn a_shared_frame_always_carries_its_streams_id() {
    let (ch, mut rx) = listen(RequestId::String("s-1".into()), 4, 4);
    ch.acknowledge(SubscriptionFilter::tools()).unwrap();
    let _ = rx.try_recv();
    ch.send_shared(SharedNotification::new(Notification::tools_list_changed()))
        .unwrap();
    let frame = rx.try_recv().unwrap();
    let mut out = Vec::new();
    frame.write_to(&mut out);
    assert_eq!(out.len(), frame.len());
    let v: Value = serde_json::from_slice(&out).expect("valid JSON");
    assert_eq!(v["params"]["_meta"][keys::SUBSCRIPTION_ID], "s-1");
}

#[tokio::test]
async fn a_drained_spill_gives_its_storage_back() {
    let (ch, mut rx) = listen(RequestId::Number(1), 64, 64);
    ch.acknowledge(SubscriptionFilter::tools()).unwrap();
    // The acknowledgement and 63 notifications fill the outbox; 50 spill.
    for _ in 0..113 {
        ch.send_notification(Notification::tools_list_changed())
            .unwrap();
    }
    assert!(ch.has_pending());
    assert!(ch.spill_capacity() >= 50);
    for _ in 0..64 {
        rx.try_recv().expect("a frame");
    }
    ch.flush().await.unwrap();
    assert!(!ch.has_pending());
    assert!(
        ch.spill_capacity() <= SPILL_IDLE_FLOOR,
        "a drained spill keeps {} frames of storage",
        ch.spill_capacity()
    );
    for _ in 0..50 {
        rx.try_recv().expect("a spilled frame");
    }
    assert!(rx.try_recv().is_err());
}
