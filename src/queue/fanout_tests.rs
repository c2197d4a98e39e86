//! Unit tests of the topic log (`fanout.rs`): order, bounds, the end of a
//! reader and of a tap, wake-ups, and memory given back once read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use super::fanout::{Log, Offer, Reader, Tap};

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll(reader: &mut Reader<u32>, waker: &Waker) -> Poll<Option<u32>> {
    reader.poll_recv(&Context::from_waker(waker))
}

fn publish(log: &Log<u32>, msgs: &[u32], taps: &[&Tap]) -> Vec<Offer> {
    let appended = log.append(msgs);
    taps.iter().map(|tap| appended.offer(tap)).collect()
}

fn read_all(reader: &mut Reader<u32>) -> Vec<u32> {
    let waker = Waker::noop();
    let mut got = vec![];
    while let Poll::Ready(Some(m)) = poll(reader, waker) {
        got.push(m);
    }
    got
}

#[test]
fn every_reader_reads_each_message_it_took_once_in_order() {
    let log = Log::new();
    let (a_tap, mut a) = log.join(8);
    let (b_tap, mut b) = log.join(8);
    for m in 1..=3 {
        assert_eq!(publish(&log, &[m], &[&a_tap, &b_tap]), [Offer::Taken; 2]);
    }
    assert_eq!(read_all(&mut a), [1, 2, 3]);
    assert_eq!(publish(&log, &[4, 5], &[&a_tap, &b_tap]), [Offer::Taken; 2]);
    assert_eq!(read_all(&mut a), [4, 5]);
    assert_eq!(read_all(&mut b), [1, 2, 3, 4, 5]);
    assert_eq!(read_all(&mut b), [] as [u32; 0]);
}

#[test]
fn a_reader_joining_later_starts_at_the_end() {
    let log = Log::new();
    let (a_tap, mut a) = log.join(8);
    publish(&log, &[1, 2], &[&a_tap]);
    let (b_tap, mut b) = log.join(8);
    publish(&log, &[3], &[&a_tap, &b_tap]);
    assert_eq!(read_all(&mut b), [3]);
    assert_eq!(read_all(&mut a), [1, 2, 3]);
}

#[test]
fn a_full_backlog_refuses_the_whole_offer_and_every_later_one() {
    let log = Log::new();
    let (tap, mut reader) = log.join(2);
    let (other_tap, mut other) = log.join(2);
    assert_eq!(publish(&log, &[1], &[&tap, &other_tap]), [Offer::Taken; 2]);
    assert_eq!(read_all(&mut other), [1]);
    // One slot left: a burst of two does not fit, and none of it is taken
    // (the other reader, read up, takes it).
    assert_eq!(
        publish(&log, &[2, 3], &[&tap, &other_tap]),
        [Offer::Full, Offer::Taken]
    );
    assert_eq!(read_all(&mut other), [2, 3]);
    // Refused once, refused for good (its stream is ending as overflowed),
    // even with room again.
    assert_eq!(
        publish(&log, &[4], &[&tap, &other_tap]),
        [Offer::Full, Offer::Taken]
    );
    // What it took before was pushed out of the log by what it refused: it
    // ends rather than read anything else in its place.
    assert_eq!(poll(&mut reader, Waker::noop()), Poll::Ready(None));
    assert_eq!(read_all(&mut other), [4]);
}

#[test]
fn an_idle_reader_is_woken_once_per_burst() {
    let log = Log::new();
    let (tap, mut reader) = log.join(8);
    let count = Arc::new(Count::default());
    let waker = Waker::from(count.clone());
    assert_eq!(poll(&mut reader, &waker), Poll::Pending);
    publish(&log, &[1], &[&tap]);
    publish(&log, &[2], &[&tap]);
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken by the first only");
    assert_eq!(poll(&mut reader, &waker), Poll::Ready(Some(1)));
    assert_eq!(poll(&mut reader, &waker), Poll::Ready(Some(2)));
    assert_eq!(poll(&mut reader, &waker), Poll::Pending);
    publish(&log, &[3], &[&tap]);
    assert_eq!(count.0.load(Ordering::SeqCst), 2, "idle again: woken again");
}

#[test]
fn a_dropped_tap_ends_its_reader_after_what_it_took() {
    let log = Log::new();
    let (tap, mut reader) = log.join(8);
    let count = Arc::new(Count::default());
    let waker = Waker::from(count.clone());
    assert_eq!(poll(&mut reader, &waker), Poll::Pending);
    publish(&log, &[1, 2], &[&tap]);
    drop(tap);
    assert!(
        count.0.load(Ordering::SeqCst) >= 1,
        "the end wakes the reader"
    );
    assert_eq!(poll(&mut reader, &waker), Poll::Ready(Some(1)));
    assert_eq!(poll(&mut reader, &waker), Poll::Ready(Some(2)));
    assert_eq!(poll(&mut reader, &waker), Poll::Ready(None));
}

#[test]
fn a_dropped_reader_is_refused_and_leaves_nothing_held() {
    let log = Log::new();
    let (tap, reader) = log.join(8);
    let (other_tap, mut other) = log.join(8);
    publish(&log, &[1, 2], &[&tap, &other_tap]);
    drop(reader);
    assert_eq!(
        publish(&log, &[3], &[&tap, &other_tap]),
        [Offer::Gone, Offer::Taken]
    );
    assert_eq!(log.held().0, 3, "the other reader has not read yet");
    assert_eq!(read_all(&mut other), [1, 2, 3]);
    assert_eq!(log.held().0, 0, "read by every live reader: emptied");
}

#[test]
fn a_burst_is_given_back_once_read_down_to_the_floor() {
    let log = Log::new();
    let (tap, mut reader) = log.join(64);
    let burst: Vec<u32> = (0..64).collect();
    publish(&log, &burst, &[&tap]);
    assert_eq!(log.held().0, 64);
    assert_eq!(read_all(&mut reader), burst);
    let (len, capacity) = log.held();
    assert_eq!(len, 0);
    assert!(
        capacity <= 4,
        "storage back under the floor, was {capacity}"
    );
}

#[test]
fn the_log_keeps_no_more_than_the_largest_backlog() {
    let log = Log::new();
    let (tap, _reader) = log.join(4);
    let (_untaken, _other) = log.join(2);
    for m in 0..10 {
        // The first reader never reads: full after four, then refused.
        publish(&log, &[m], &[&tap]);
        assert!(log.held().0 <= 4, "held {} entries", log.held().0);
    }
}
