//! The queue's behaviour, one rule per test (the interleavings are in `loom.rs`).

use std::task::{Context, Poll};

use super::*;

#[test]
fn bounded_in_order_and_closed_when_every_sender_goes() {
    let (tx, mut rx) = bounded(2);
    tx.try_send(1).unwrap();
    tx.clone().try_send(2).unwrap();
    assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
    assert_eq!(rx.try_recv(), Ok(1));
    tx.try_send(3).unwrap();
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.try_recv(), Ok(3));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    drop(tx);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

#[tokio::test]
async fn send_waits_for_room_and_fails_when_the_reader_goes() {
    let (tx, mut rx) = bounded(1);
    tx.try_send(1).unwrap();
    let tx2 = tx.clone();
    let waiter = tokio::spawn(async move { tx2.send(2).await });
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    assert_eq!(rx.recv().await, Some(1));
    waiter.await.unwrap().unwrap();
    assert_eq!(rx.recv().await, Some(2));
    tx.try_send(3).unwrap();
    let tx3 = tx.clone();
    let blocked = tokio::spawn(async move { tx3.send(4).await });
    tokio::task::yield_now().await;
    drop(rx);
    assert_eq!(blocked.await.unwrap(), Err(Closed));
    assert!(tx.is_closed());
    tx.closed().await;
}

fn poll_once<F: std::future::Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let waker = futures_util::task::noop_waker();
    fut.poll(&mut Context::from_waker(&waker))
}

#[tokio::test]
async fn a_cancelled_reserve_leaves_no_waiting_sender_behind() {
    let (tx, _rx) = bounded::<u32>(1);
    tx.try_send(1).unwrap();
    let waited = tokio::time::timeout(std::time::Duration::from_millis(5), tx.reserve()).await;
    assert!(waited.is_err(), "the queue stays full");
    assert_eq!(tx.waiting_senders(), 0);
}

#[test]
fn the_last_sender_pushing_and_dropping_while_the_reader_polls_is_seen_item_first() {
    let waker = futures_util::task::noop_waker();
    for _ in 0..1_000 {
        let (tx, mut rx) = bounded(4);
        std::thread::scope(|s| {
            s.spawn(move || {
                tx.try_send(7).unwrap();
                drop(tx);
            });
            let mut cx = Context::from_waker(&waker);
            let first = loop {
                if let Poll::Ready(got) = rx.poll_recv(&mut cx) {
                    break got;
                }
                std::hint::spin_loop();
            };
            assert_eq!(first, Some(7), "the end was seen before the item");
        });
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }
}

#[test]
fn room_freed_in_the_middle_of_a_batch_goes_to_a_waiting_sender() {
    let (tx, mut rx) = bounded(2);
    tx.try_send(1).unwrap();
    tx.try_send(2).unwrap();
    let mut waiter = std::pin::pin!(tx.reserve());
    assert!(poll_once(waiter.as_mut()).is_pending());
    // The reader takes both in one batch and hands out the first only.
    assert_eq!(rx.try_recv(), Ok(1));
    match poll_once(waiter.as_mut()) {
        Poll::Ready(Ok(permit)) => permit.send(3),
        _ => panic!("a slot is free but the waiting sender was not told"),
    }
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.try_recv(), Ok(3));
}

#[test]
fn a_waiting_sender_gets_room_only_when_there_is_some() {
    let (tx, mut rx) = bounded(2);
    tx.try_send(1).unwrap();
    tx.try_send(2).unwrap();
    let mut first = std::pin::pin!(tx.reserve());
    let mut second = std::pin::pin!(tx.reserve());
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(rx.try_recv(), Ok(1));
    let Poll::Ready(Ok(permit)) = poll_once(first.as_mut()) else {
        panic!("the first waiting sender gets the freed slot");
    };
    assert!(
        poll_once(second.as_mut()).is_pending(),
        "one slot, one sender"
    );
    // An unused permit passes its slot on.
    drop(permit);
    assert!(matches!(poll_once(second.as_mut()), Poll::Ready(Ok(_))));
}

#[test]
fn try_send_does_not_overtake_a_waiting_sender() {
    let (tx, mut rx) = bounded(1);
    tx.try_send(1).unwrap();
    let mut reply = std::pin::pin!(tx.reserve());
    assert!(poll_once(reply.as_mut()).is_pending());
    assert_eq!(rx.try_recv(), Ok(1));
    assert!(
        matches!(tx.try_send(2), Err(TrySendError::Full(2))),
        "the freed slot belongs to the sender that waited"
    );
    match poll_once(reply.as_mut()) {
        Poll::Ready(Ok(permit)) => permit.send(3),
        _ => panic!("the waiting sender lost its slot"),
    }
    assert_eq!(rx.try_recv(), Ok(3));
}

#[test]
fn waiting_senders_are_served_first_come_first_served() {
    let (tx, mut rx) = bounded(1);
    tx.try_send(0).unwrap();
    let mut early = std::pin::pin!(tx.send(1));
    let mut late = std::pin::pin!(tx.send(2));
    assert!(poll_once(early.as_mut()).is_pending());
    assert!(poll_once(late.as_mut()).is_pending());
    assert_eq!(rx.try_recv(), Ok(0));
    // The later sender is polled first: it must still wait its turn.
    assert!(poll_once(late.as_mut()).is_pending());
    assert!(matches!(poll_once(early.as_mut()), Poll::Ready(Ok(()))));
    assert_eq!(rx.try_recv(), Ok(1));
    assert!(matches!(poll_once(late.as_mut()), Poll::Ready(Ok(()))));
    assert_eq!(rx.try_recv(), Ok(2));
}

#[test]
fn a_cancelled_waiter_passes_on_the_slot_it_was_handed() {
    let (tx, mut rx) = bounded(1);
    tx.try_send(0).unwrap();
    let mut first = Box::pin(tx.send(1));
    let mut second = std::pin::pin!(tx.send(2));
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(rx.try_recv(), Ok(0));
    // The slot went to `first`, which is dropped before it used it.
    drop(first);
    assert!(matches!(poll_once(second.as_mut()), Poll::Ready(Ok(()))));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(tx.waiting_senders(), 0);
}

#[test]
fn the_reader_going_drops_queued_items_and_ends_every_wait() {
    let item = std::sync::Arc::new(());
    let (tx, rx) = bounded(1);
    tx.try_send(item.clone()).unwrap();
    let mut waiting = std::pin::pin!(tx.send(item.clone()));
    let mut closed = std::pin::pin!(tx.closed());
    assert!(poll_once(waiting.as_mut()).is_pending());
    assert!(poll_once(closed.as_mut()).is_pending());
    drop(rx);
    assert!(matches!(
        poll_once(waiting.as_mut()),
        Poll::Ready(Err(Closed))
    ));
    assert!(poll_once(closed.as_mut()).is_ready());
    assert_eq!(
        std::sync::Arc::strong_count(&item),
        1,
        "nothing is kept queued"
    );
    assert!(matches!(tx.try_send(item), Err(TrySendError::Closed(_))));
}

#[test]
fn storage_a_burst_grew_is_given_back_once_the_reader_finds_the_queue_empty() {
    let (tx, mut rx) = bounded(256);
    // Two full bursts: the first batch's storage goes back as the queue's
    // at the second take, so both sides hold a burst's worth.
    for _ in 0..2 {
        for i in 0..256 {
            tx.try_send(i).unwrap();
        }
        for i in 0..256 {
            assert_eq!(rx.try_recv(), Ok(i));
        }
    }
    assert!(rx.capacity_held() >= 2 * 256, "the burst grew both sides");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert!(
        rx.capacity_held() <= 2 * IDLE_FLOOR,
        "{}",
        rx.capacity_held()
    );

    // The same through a reader that parks, and the queue still works.
    for i in 0..256 {
        tx.try_send(i).unwrap();
    }
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    for i in 0..256 {
        assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(i)));
    }
    assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
    assert!(
        rx.capacity_held() <= 2 * IDLE_FLOOR,
        "{}",
        rx.capacity_held()
    );
    tx.try_send(7).unwrap();
    assert_eq!(rx.try_recv(), Ok(7));
}

#[test]
fn traffic_within_the_floor_keeps_its_storage() {
    let (tx, mut rx) = bounded(64);
    for round in 0..3 {
        for i in 0..IDLE_FLOOR {
            tx.try_send(i).unwrap();
        }
        for i in 0..IDLE_FLOOR {
            assert_eq!(rx.try_recv(), Ok(i));
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        let held = rx.capacity_held();
        assert!(held >= IDLE_FLOOR, "round {round}: storage is kept, {held}");
        assert!(held <= 2 * IDLE_FLOOR, "round {round}: {held}");
    }
}

/// Storage the sender side holds (the queue, not the reader's batch).
fn queued_capacity<T>(tx: &Sender<T>) -> usize {
    crate::queue::sync::lock(&tx.shared.inner).queue.capacity()
}

#[test]
fn a_burst_grows_storage_in_one_step_past_the_floor_and_never_past_the_capacity() {
    let (tx, mut rx) = bounded(256);
    for i in 0..=IDLE_FLOOR {
        tx.try_send(i).unwrap();
    }
    // One item past the floor: straight to the growth step, not to twice the floor.
    let grown = queued_capacity(&tx);
    assert!(grown >= sender::GROWTH_STEP, "grew to {grown}");
    for i in IDLE_FLOOR + 1..sender::GROWTH_STEP {
        tx.try_send(i).unwrap();
    }
    assert_eq!(
        queued_capacity(&tx),
        grown,
        "no second growth within the step"
    );
    // Past the step, growth doubles as a VecDeque's does.
    for i in sender::GROWTH_STEP..256 {
        tx.try_send(i).unwrap();
    }
    for i in 0..256 {
        assert_eq!(rx.try_recv(), Ok(i));
    }

    // A small queue grows to its capacity, no further.
    let (tx, _rx) = bounded(10);
    for i in 0..10 {
        tx.try_send(i).unwrap();
    }
    let held = queued_capacity(&tx);
    assert!((10..sender::GROWTH_STEP).contains(&held), "{held}");

    // Below the floor a queue grows as a VecDeque does: one reply takes no more.
    let (tx, _rx) = bounded(64);
    tx.try_send(1).unwrap();
    assert!(queued_capacity(&tx) <= IDLE_FLOOR);
}

#[test]
fn a_reader_that_tidies_on_call_keeps_a_bursts_storage_until_it_tidies() {
    let (tx, mut rx) = bounded(256);
    rx.tidy_on_call();
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..2 {
        for i in 0..256 {
            tx.try_send(i).unwrap();
        }
        for i in 0..256 {
            assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(i)));
        }
        // Parked between two batches of a burst: the storage stays.
        assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
        assert!(rx.capacity_held() >= 256, "{}", rx.capacity_held());
        assert!(rx.holds_grown_storage());
    }
    // Something queued: tidying waits for the queue to be idle, and says
    // "not grown" until the reader parks again (its owner does not retry
    // while the reader is busy).
    tx.try_send(7).unwrap();
    rx.tidy();
    assert!(rx.capacity_held() >= 256, "{}", rx.capacity_held());
    assert!(!rx.holds_grown_storage());
    assert_eq!(rx.try_recv(), Ok(7));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert!(rx.holds_grown_storage(), "the park says it again");
    rx.tidy();
    assert!(
        rx.capacity_held() <= 2 * IDLE_FLOOR,
        "{}",
        rx.capacity_held()
    );
    assert!(!rx.holds_grown_storage());
    tx.try_send(8).unwrap();
    assert_eq!(rx.try_recv(), Ok(8));
}
