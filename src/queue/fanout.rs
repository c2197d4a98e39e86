//! [`Log`]: one topic's messages, written once and read by every subscriber,
//! each with a bounded backlog of its own.
//!
//! A publish to a topic with thousands of subscribers used to queue the
//! message in each subscriber's mailbox: one lock and several cold cache
//! lines per subscriber and message. Here the message is appended once, and
//! each subscriber ([`Tap`], the writer's handle) only has its backlog count
//! raised: one atomic on one cache line, and a wake-up only when its reader
//! was idle. The reader ([`Reader`]) copies its backlog out of the log in one
//! lock, as the mailbox's reader takes a whole batch.
//!
//! The rules it keeps (model-checked with loom, `scripts/loom.sh`):
//!
//! - **Bounded.** A tap takes a message only while its backlog is under its
//!   capacity; the writer learns at once when it is full ([`Offer::Full`]),
//!   as a full mailbox tells it. The log keeps at most the largest capacity
//!   of its readers, and nothing once every backlog is read (memory comes
//!   back after a burst).
//! - **Each reader sees its messages in order, once.** A reader joins at the
//!   log's end and reads, in append order, every message a tap of it took.
//! - **No lost wake-up.** A message taken by an idle reader's tap wakes it.
//! - **Either side may go first.** A reader dropped while the writer offers
//!   leaves no count behind; an unsubscribed tap ([`Tap::close`]) lets its
//!   reader read what it took, then end.
//!
//! Callers serialise the writing side ([`Log::append`] and the offers that
//! follow it) under a lock of their own: one topic, one writer at a time.

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use super::WakeSlot;
use super::sync::{Arc, AtomicBool, AtomicUsize, Mutex, Ordering, lock};

/// Entries the log keeps once it has been read to the end.
const IDLE_FLOOR: usize = 4;

/// One topic's recent messages: a cheap handle (clones share the log).
pub(crate) struct Log<T> {
    state: Arc<LogState<T>>,
}

impl<T> Clone for Log<T> {
    fn clone(&self) -> Self {
        Log {
            state: self.state.clone(),
        }
    }
}

struct LogState<T> {
    entries: Mutex<Entries<T>>,
    /// Messages taken by taps and not read yet, summed over readers, plus one
    /// per append whose offers are under way: the log empties itself when
    /// this reaches zero.
    unread: AtomicUsize,
}

struct Entries<T> {
    /// Sequence number of `items[0]`.
    first: u64,
    items: VecDeque<T>,
    /// The largest backlog any reader may have: entries kept at most.
    keep: usize,
}

/// How an offer went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// The reader will read the message(s).
    Taken,
    /// The reader's backlog has no room: nothing was taken.
    Full,
    /// The reader has gone: nothing was taken.
    Gone,
}

/// What the writer and one reader share.
struct Backlog {
    /// Messages taken and not read yet.
    pending: AtomicUsize,
    capacity: usize,
    /// The reader has gone: offers are refused.
    reader_gone: AtomicBool,
    /// An offer found the backlog full: every later one is refused too (the
    /// reader has missed a message, so what it would read next is not its own).
    refused: AtomicBool,
    /// The tap was closed: the reader ends once its backlog is read.
    closed: AtomicBool,
    /// The reader's waker while it may be idle.
    waker: WakeSlot,
}

/// The writer's handle on one reader.
pub(crate) struct Tap {
    backlog: Arc<Backlog>,
}

/// The reading side: one subscriber's view of the log.
pub(crate) struct Reader<T> {
    log: Arc<LogState<T>>,
    backlog: Arc<Backlog>,
    /// Sequence number of the next message to read.
    next: u64,
    /// Messages copied out of the log, handed out one by one.
    batch: VecDeque<T>,
    /// The waker last registered.
    registered: Option<Waker>,
    /// Messages this reader took are no longer in the log (it was refused
    /// one, so its stream is ending): it reads no more.
    lost: bool,
}

// The reader never pins its messages.
impl<T> Unpin for Reader<T> {}

/// An append whose offers are under way; the log may empty itself again once
/// it is dropped.
pub(crate) struct Appended<'a, T> {
    log: &'a LogState<T>,
    count: usize,
}

impl<T> Log<T> {
    pub(crate) fn new() -> Self {
        Log {
            state: Arc::new(LogState {
                entries: Mutex::new(Entries {
                    first: 0,
                    items: VecDeque::new(),
                    keep: 0,
                }),
                unread: AtomicUsize::new(0),
            }),
        }
    }

    /// A new reader, at the log's end, with room for `capacity` messages.
    /// Under the writer's lock (no append in between).
    pub(crate) fn join(&self, capacity: usize) -> (Tap, Reader<T>) {
        let capacity = capacity.max(1);
        let next = {
            let mut entries = lock(&self.state.entries);
            entries.keep = entries.keep.max(capacity);
            entries.first + entries.items.len() as u64
        };
        let backlog = Arc::new(Backlog {
            pending: AtomicUsize::new(0),
            capacity,
            reader_gone: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            waker: WakeSlot::default(),
        });
        let reader = Reader {
            log: self.state.clone(),
            backlog: backlog.clone(),
            next,
            batch: VecDeque::new(),
            registered: None,
            lost: false,
        };
        (Tap { backlog }, reader)
    }

    /// Appends `msgs` at the end; then [`Appended::offer`] them to each tap.
    pub(crate) fn append(&self, msgs: &[T]) -> Appended<'_, T>
    where
        T: Clone,
    {
        let log = &*self.state;
        // Held until the offers are done: the log does not empty itself
        // between this append and the taps' counts.
        log.unread.fetch_add(1, Ordering::SeqCst);
        let mut entries = lock(&log.entries);
        entries.items.extend(msgs.iter().cloned());
        let excess = entries.items.len().saturating_sub(entries.keep);
        if excess > 0 {
            // Older than any reader's backlog may reach.
            entries.items.drain(..excess);
            entries.first += excess as u64;
        }
        drop(entries);
        Appended {
            log,
            count: msgs.len(),
        }
    }

    /// Entries held: how many, and the storage for how many.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let entries = lock(&self.state.entries);
        (entries.items.len(), entries.items.capacity())
    }
}

impl<T> LogState<T> {
    /// Gives back `n` counts of `unread`; the last one out empties the log.
    fn release(&self, n: usize) {
        if n > 0 && self.unread.fetch_sub(n, Ordering::SeqCst) == n {
            let mut entries = lock(&self.entries);
            // Re-checked under the lock: an append in between holds a count.
            if self.unread.load(Ordering::SeqCst) == 0 {
                entries.first += entries.items.len() as u64;
                entries.items.clear();
                entries.items.shrink_to(IDLE_FLOOR);
            }
        }
    }
}

impl<T> Appended<'_, T> {
    /// Offers the appended messages to `tap`'s reader: taken whole, or not at all.
    pub(crate) fn offer(&self, tap: &Tap) -> Offer {
        let backlog = &*tap.backlog;
        if backlog.reader_gone.load(Ordering::SeqCst) {
            return Offer::Gone;
        }
        if backlog.refused.load(Ordering::Relaxed)
            || backlog.pending.load(Ordering::SeqCst) + self.count > backlog.capacity
        {
            // Only the (serialised) writer reads and sets this flag.
            backlog.refused.store(true, Ordering::Relaxed);
            return Offer::Full;
        }
        // Counted in `unread` first: a reader never gives back more than was counted.
        self.log.unread.fetch_add(self.count, Ordering::SeqCst);
        let before = backlog.pending.fetch_add(self.count, Ordering::SeqCst);
        if backlog.reader_gone.load(Ordering::SeqCst) {
            // The reader went meanwhile and may not have seen this count:
            // whoever looks last gives it back.
            let left = backlog.pending.swap(0, Ordering::SeqCst);
            self.log.release(left);
            return Offer::Gone;
        }
        if before == 0 {
            backlog.waker.wake();
        }
        Offer::Taken
    }
}

impl<T> Drop for Appended<'_, T> {
    fn drop(&mut self) {
        self.log.release(1);
    }
}

impl Drop for Tap {
    /// Unsubscribes: no more offers come, and the reader ends once it has
    /// read what it took.
    fn drop(&mut self) {
        self.backlog.closed.store(true, Ordering::SeqCst);
        self.backlog.waker.wake();
    }
}

impl<T: Clone> Reader<T> {
    /// The next message; `None` once the tap is closed and everything it
    /// took was read.
    pub(crate) fn poll_recv(&mut self, cx: &Context<'_>) -> Poll<Option<T>> {
        if let Some(msg) = self.batch.pop_front() {
            return Poll::Ready(Some(msg));
        }
        if !self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            self.backlog.waker.register(cx.waker());
            self.registered = Some(cx.waker().clone());
        }
        // Looked at after registering: a count raised from zero after this
        // look wakes the waker just registered.
        let pending = self.backlog.pending.load(Ordering::SeqCst);
        if self.lost {
            return Poll::Ready(None);
        }
        if pending == 0 {
            // Closed before this look: nothing more is counted after it.
            if self.backlog.closed.load(Ordering::SeqCst)
                && self.backlog.pending.load(Ordering::SeqCst) == 0
            {
                return Poll::Ready(None);
            }
            if self.batch.capacity() > IDLE_FLOOR {
                self.batch.shrink_to(IDLE_FLOOR);
            }
            return Poll::Pending;
        }
        {
            let entries = lock(&self.log.entries);
            // Counted messages are still there (the log keeps as many as the
            // largest backlog, and empties only once all were read), unless
            // this reader was refused one (full) and the log moved on past
            // it: its stream is ending as overflowed, and it reads no more.
            match self.next.checked_sub(entries.first) {
                Some(start) => self.batch.extend(
                    entries
                        .items
                        .iter()
                        .skip(usize::try_from(start).unwrap_or(usize::MAX))
                        .take(pending)
                        .cloned(),
                ),
                None => self.lost = true,
            }
        }
        self.next += pending as u64;
        self.backlog.pending.fetch_sub(pending, Ordering::SeqCst);
        self.log.release(pending);
        match self.batch.pop_front() {
            Some(msg) => Poll::Ready(Some(msg)),
            // Unreachable while the counts hold; never a busy loop.
            None => Poll::Ready(None),
        }
    }
}

impl<T: Clone> futures_util::Stream for Reader<T> {
    type Item = T;

    fn poll_next(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_recv(cx)
    }
}

impl<T> Drop for Reader<T> {
    fn drop(&mut self) {
        self.backlog.reader_gone.store(true, Ordering::SeqCst);
        // An offer that counted before seeing `reader_gone` is given back
        // here; one that counted after gives it back itself.
        let left = self.backlog.pending.swap(0, Ordering::SeqCst);
        self.log.release(left);
    }
}
