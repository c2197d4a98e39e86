//! Loom models of the queue: every interleaving of two or three threads, up
//! to `LOOM_MAX_PREEMPTIONS` preemptions. Run by `scripts/loom.sh`
//! (`cargo test --features loom --lib queue::loom`). A model
//! that leaves a thread parked for ever fails as a deadlock, so "the waiter
//! is woken" needs no assertion of its own.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use ::loom::future::block_on;
use ::loom::thread;

use super::*;

#[test]
fn the_reader_sees_the_last_senders_item_before_the_end() {
    ::loom::model(|| {
        let (tx, mut rx) = bounded(4);
        let sender = thread::spawn(move || {
            tx.try_send(1).unwrap();
            drop(tx);
        });
        assert_eq!(block_on(rx.recv()), Some(1));
        assert_eq!(block_on(rx.recv()), None);
        sender.join().unwrap();
    });
}

#[test]
fn senders_waiting_for_room_all_get_in_and_then_the_end_is_seen() {
    ::loom::model(|| {
        let (tx, mut rx) = bounded(1);
        let senders: Vec<_> = (1..=2)
            .map(|i| {
                let tx = tx.clone();
                thread::spawn(move || block_on(tx.send(i)).unwrap())
            })
            .collect();
        drop(tx);
        let mut got = vec![block_on(rx.recv()), block_on(rx.recv())];
        got.sort();
        assert_eq!(got, [Some(1), Some(2)]);
        assert_eq!(block_on(rx.recv()), None);
        for sender in senders {
            sender.join().unwrap();
        }
    });
}

#[test]
fn room_freed_in_the_middle_of_a_batch_reaches_a_waiting_sender() {
    ::loom::model(|| {
        let (tx, mut rx) = bounded(2);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        let tx2 = tx.clone();
        let sender = thread::spawn(move || block_on(tx2.send(3)).unwrap());
        assert_eq!(block_on(rx.recv()), Some(1));
        // The reader holds item 2 in its batch and takes nothing more until
        // the sender is in: the freed slot must have been announced.
        sender.join().unwrap();
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Ok(3));
    });
}

#[test]
fn a_cancelled_reserve_keeps_neither_a_place_in_line_nor_a_slot() {
    ::loom::model(|| {
        let (tx, mut rx) = bounded(1);
        tx.try_send(0).unwrap();
        let tx2 = tx.clone();
        let canceller = thread::spawn(move || {
            let waker = futures_util::task::noop_waker();
            let mut reserve = pin!(tx2.reserve());
            // Pending (full) or ready (the reader got there first): either
            // way the future is dropped without using its slot.
            let _ = reserve.as_mut().poll(&mut Context::from_waker(&waker));
        });
        assert_eq!(block_on(rx.recv()), Some(0));
        canceller.join().unwrap();
        assert_eq!(tx.waiting_senders(), 0);
        tx.try_send(1).expect("the slot was given back");
        assert_eq!(rx.try_recv(), Ok(1));
    });
}

#[test]
fn the_reader_going_ends_a_waiting_send_and_a_wait_for_close() {
    ::loom::model(|| {
        let (tx, rx) = bounded(1);
        tx.try_send(0).unwrap();
        let tx2 = tx.clone();
        let sender = thread::spawn(move || block_on(tx2.send(1)));
        let watcher = thread::spawn(move || block_on(tx.closed()));
        drop(rx);
        assert_eq!(sender.join().unwrap(), Err(Closed));
        watcher.join().unwrap();
    });
}

#[test]
fn a_reader_parked_on_an_empty_queue_is_woken_by_a_send() {
    ::loom::model(|| {
        let (tx, mut rx) = bounded(1);
        let sender = thread::spawn(move || {
            block_on(tx.send(1)).unwrap();
            block_on(tx.send(2)).unwrap();
        });
        let waker = futures_util::task::noop_waker();
        // A first poll may park the reader before the sender runs.
        if let Poll::Ready(got) = rx.poll_recv(&mut Context::from_waker(&waker)) {
            assert_eq!(got, Some(1));
            assert_eq!(block_on(rx.recv()), Some(2));
        } else {
            assert_eq!(block_on(rx.recv()), Some(1));
            assert_eq!(block_on(rx.recv()), Some(2));
        }
        assert_eq!(block_on(rx.recv()), None);
        sender.join().unwrap();
    });
}

#[test]
fn storage_is_given_back_when_idle_while_senders_race_the_reader() {
    ::loom::model(|| {
        // A floor of one item: every push grows past it (a VecDeque starts
        // at four), so each idle look of the reader shrinks, while the
        // sender may queue between its two locks.
        let (tx, mut rx) = with_idle_floor(1, 1);
        let tx2 = tx.clone();
        let sender = thread::spawn(move || {
            for i in 1..=3 {
                block_on(tx2.send(i)).unwrap();
            }
        });
        for i in 1..=3 {
            assert_eq!(block_on(rx.recv()), Some(i));
        }
        sender.join().unwrap();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert!(rx.capacity_held() <= 2, "{}", rx.capacity_held());
        tx.try_send(4).unwrap();
        assert_eq!(rx.try_recv(), Ok(4));
    });
}

#[test]
fn a_tidy_racing_a_sender_loses_no_item_and_keeps_the_queue_working() {
    ::loom::model(|| {
        // The owner's timer tidies while a sender queues: the tidy either
        // finds the queue busy and leaves it, or swaps storage while it is
        // empty; either way every item arrives, in order.
        let (tx, mut rx) = with_idle_floor(1, 1);
        rx.tidy_on_call();
        tx.try_send(1).unwrap();
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        let tx2 = tx.clone();
        let sender = thread::spawn(move || {
            block_on(tx2.send(2)).unwrap();
            block_on(tx2.send(3)).unwrap();
        });
        rx.tidy();
        assert_eq!(block_on(rx.recv()), Some(2));
        rx.tidy();
        assert_eq!(block_on(rx.recv()), Some(3));
        sender.join().unwrap();
        rx.tidy();
        assert!(rx.capacity_held() <= 2, "{}", rx.capacity_held());
        tx.try_send(4).unwrap();
        assert_eq!(rx.try_recv(), Ok(4));
    });
}

// The topic log (`fanout.rs`): a writer appending and offering while its
// reader reads, goes, or is unsubscribed.

fn recv_log(reader: &mut fanout::Reader<u32>) -> Option<u32> {
    block_on(std::future::poll_fn(|cx| reader.poll_recv(cx)))
}

#[test]
fn fanout_a_reader_reads_each_message_once_in_order_then_the_end() {
    ::loom::model(|| {
        let log = fanout::Log::new();
        let (tap, mut reader) = log.join(2);
        let writer_log = log.clone();
        let writer = thread::spawn(move || {
            for m in [1, 2] {
                let appended = writer_log.append(&[m]);
                assert_eq!(appended.offer(&tap), fanout::Offer::Taken);
            }
            drop(tap);
        });
        // A count raised while the reader parks wakes it (else: deadlock).
        assert_eq!(recv_log(&mut reader), Some(1));
        assert_eq!(recv_log(&mut reader), Some(2));
        assert_eq!(recv_log(&mut reader), None);
        writer.join().unwrap();
        assert_eq!(log.held().0, 0, "read to the end: the log emptied itself");
    });
}

#[test]
fn fanout_a_reader_going_during_an_offer_leaves_no_count_behind() {
    ::loom::model(|| {
        let log = fanout::Log::new();
        let (tap, reader) = log.join(2);
        let writer_log = log.clone();
        let writer = thread::spawn(move || {
            let appended = writer_log.append(&[1]);
            let offer = appended.offer(&tap);
            assert_ne!(offer, fanout::Offer::Full);
        });
        drop(reader);
        writer.join().unwrap();
        // Whichever side looked last gave the count back.
        assert_eq!(log.held().0, 0, "nothing is held for a reader that went");
    });
}

#[test]
fn fanout_the_log_empties_only_once_a_racing_reader_has_read() {
    ::loom::model(|| {
        let log = fanout::Log::new();
        let (tap, mut reader) = log.join(2);
        {
            let appended = log.append(&[1]);
            assert_eq!(appended.offer(&tap), fanout::Offer::Taken);
        }
        let writer_log = log.clone();
        let writer = thread::spawn(move || {
            // Appended while the reader gives back its last count: the
            // reader's emptying must not take this message with it.
            let appended = writer_log.append(&[2]);
            assert_eq!(appended.offer(&tap), fanout::Offer::Taken);
            tap
        });
        assert_eq!(recv_log(&mut reader), Some(1));
        assert_eq!(recv_log(&mut reader), Some(2));
        drop(writer.join().unwrap());
        assert_eq!(log.held().0, 0);
    });
}
