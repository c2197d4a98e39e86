//! The state one queue's senders and reader share: the queued items, the
//! slot count that bounds them, the parked reader and the senders waiting for
//! room, first come first served.

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use super::Closed;
use super::sync::{Arc, AtomicBool, AtomicUsize, Mutex, Ordering, lock};

/// Low bit of [`Shared::slots`]: senders are waiting for room.
const WAITERS: usize = 1;
/// One slot in [`Shared::slots`] (the count sits above the flag bit).
const SLOT: usize = 2;

pub(super) struct Shared<T> {
    pub(super) inner: Mutex<Inner<T>>,
    /// Slots in use (items queued, items in the reader's current batch and
    /// reserved permits) times [`SLOT`], plus [`WAITERS`] while senders wait.
    /// Only taken under `inner`'s lock; given back without it (the reader,
    /// once per item), and whoever gives one back while the flag is set hands
    /// it to the first waiting sender. Count and flag share one word so that
    /// a slot given back and a sender starting to wait cannot miss each other.
    slots: AtomicUsize,
    pub(super) capacity: usize,
    /// Storage (in items) the queue and the reader's batch each keep once
    /// idle: [`super::IDLE_FLOOR`], smaller in the loom models.
    pub(super) idle_floor: usize,
    pub(super) senders: AtomicUsize,
    /// Set once the reader has gone (also in `Inner::gone`, read without the lock).
    pub(super) reader_gone: AtomicBool,
}

pub(super) struct Inner<T> {
    pub(super) queue: VecDeque<T>,
    /// The reader's waker while it is parked (taken by the sender that wakes it).
    pub(super) reader: Option<Waker>,
    /// Senders waiting for room, in arrival order; each is handed a slot in turn.
    waiters: VecDeque<Arc<Waiter>>,
    /// Tasks waiting in `Sender::closed`.
    closers: VecDeque<Arc<Waiter>>,
    pub(super) gone: bool,
}

/// Which list a [`Waiter`] waits in.
#[derive(Clone, Copy)]
pub(super) enum List {
    /// For a slot (`reserve`, `send`).
    Room,
    /// For the reader to go (`closed`).
    Close,
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Waiting,
    /// A slot was counted for this waiter and is now its to use or give back.
    Granted,
    /// The reader went.
    Closed,
}

/// One waiting task: its place in a list and its waker.
pub(super) struct Waiter {
    state: Mutex<(Status, Option<Waker>)>,
}

/// Whether a slot could be taken at once.
pub(super) enum Acquire {
    Slot,
    Closed,
    /// Full, or other senders are already waiting: wait in line.
    Wait(Arc<Waiter>),
}

impl<T> Shared<T> {
    pub(super) fn new(capacity: usize, idle_floor: usize) -> Self {
        Shared {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                reader: None,
                waiters: VecDeque::new(),
                closers: VecDeque::new(),
                gone: false,
            }),
            slots: AtomicUsize::new(0),
            capacity: capacity.max(1),
            idle_floor,
            senders: AtomicUsize::new(1),
            reader_gone: AtomicBool::new(false),
        }
    }

    /// Slots in use.
    #[inline]
    pub(super) fn used(&self) -> usize {
        self.slots.load(Ordering::Acquire) / SLOT
    }

    /// Takes a slot if one is free and no sender waits before us. Under `inner`'s lock.
    #[inline]
    pub(super) fn take_slot(&self, inner: &Inner<T>) -> bool {
        if !inner.waiters.is_empty() || self.used() >= self.capacity {
            return false;
        }
        self.slots.fetch_add(SLOT, Ordering::AcqRel);
        true
    }

    /// Takes a slot, or joins the line of waiting senders.
    pub(super) fn acquire(&self) -> Acquire {
        let mut inner = lock(&self.inner);
        if inner.gone {
            return Acquire::Closed;
        }
        if self.take_slot(&inner) {
            return Acquire::Slot;
        }
        let waiter = Arc::new(Waiter {
            state: Mutex::new((Status::Waiting, None)),
        });
        inner.waiters.push_back(waiter.clone());
        self.slots.fetch_or(WAITERS, Ordering::AcqRel);
        // A slot given back between the look above and the flag did not see
        // the flag: hand out what is free now.
        let woken = self.dispatch(&mut inner);
        drop(inner);
        woken.wake();
        Acquire::Wait(waiter)
    }

    /// Gives `n` slots back (items handed to the reader, unused permits); a
    /// waiting sender gets each in turn.
    #[inline]
    pub(super) fn release(&self, n: usize) {
        let before = self.slots.fetch_sub(n * SLOT, Ordering::AcqRel);
        if before & WAITERS != 0 {
            let woken = self.dispatch(&mut lock(&self.inner));
            woken.wake();
        }
    }

    /// Hands free slots to waiting senders, first come first served; returns
    /// the wakers to call once the lock is released. Under `inner`'s lock.
    fn dispatch(&self, inner: &mut Inner<T>) -> Woken {
        let mut woken = Woken::default();
        while !inner.waiters.is_empty() && self.used() < self.capacity {
            // Slots are only taken under this lock: the free one stays free.
            self.slots.fetch_add(SLOT, Ordering::AcqRel);
            if let Some(waiter) = inner.waiters.pop_front() {
                woken.push(waiter.finish(Status::Granted));
            }
        }
        if inner.waiters.is_empty() {
            self.slots.fetch_and(!WAITERS, Ordering::AcqRel);
        }
        woken
    }

    /// Waits in the `Close` list for the reader to go; `None` if it has gone.
    pub(super) fn wait_close(&self) -> Option<Arc<Waiter>> {
        let mut inner = lock(&self.inner);
        if inner.gone {
            return None;
        }
        let waiter = Arc::new(Waiter {
            state: Mutex::new((Status::Waiting, None)),
        });
        inner.closers.push_back(waiter.clone());
        Some(waiter)
    }

    /// A wait ended before it was served (its future was dropped): leave the
    /// line, or give back the slot it was handed and did not use.
    pub(super) fn abandon(&self, waiter: &Arc<Waiter>, list: List) {
        let mut inner = lock(&self.inner);
        let status = lock(&waiter.state).0;
        match status {
            Status::Waiting => {
                let line = match list {
                    List::Room => &mut inner.waiters,
                    List::Close => &mut inner.closers,
                };
                if let Some(i) = line.iter().position(|w| Arc::ptr_eq(w, waiter)) {
                    line.remove(i);
                }
                if matches!(list, List::Room) {
                    // Leaving may unblock nobody, but clears the flag when the line is empty.
                    let woken = self.dispatch(&mut inner);
                    drop(inner);
                    woken.wake();
                }
            }
            Status::Granted => {
                drop(inner);
                self.release(1);
            }
            Status::Closed => {}
        }
    }

    /// The reader went: every waiter is told, queued items are dropped (after
    /// the lock is released).
    pub(super) fn close(&self) -> VecDeque<T> {
        let mut guard = lock(&self.inner);
        let (woken, items) = self.close_locked(&mut guard);
        drop(guard);
        woken.wake();
        items
    }

    fn close_locked(&self, inner: &mut Inner<T>) -> (Woken, VecDeque<T>) {
        inner.gone = true;
        self.reader_gone.store(true, Ordering::Release);
        let mut woken = Woken::default();
        for waiter in inner.waiters.drain(..).chain(inner.closers.drain(..)) {
            woken.push(waiter.finish(Status::Closed));
        }
        self.slots.fetch_and(!WAITERS, Ordering::AcqRel);
        (woken, std::mem::take(&mut inner.queue))
    }

    /// Senders waiting for room.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        let inner = lock(&self.inner);
        debug_assert_eq!(
            inner.waiters.is_empty(),
            self.slots.load(Ordering::Acquire) & WAITERS == 0,
            "the flag says whether senders wait"
        );
        inner.waiters.len()
    }
}

impl Waiter {
    /// Ends the wait with `status`; the waker to call.
    fn finish(&self, status: Status) -> Option<Waker> {
        let mut state = lock(&self.state);
        state.0 = status;
        state.1.take()
    }

    /// Ready once served: `Ok` with a slot (room) or when the reader went
    /// (close), `Err` when the reader went while waiting for room.
    pub(super) fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<(), Closed>> {
        let mut state = lock(&self.state);
        match state.0 {
            Status::Granted => Poll::Ready(Ok(())),
            Status::Closed => Poll::Ready(Err(Closed)),
            Status::Waiting => {
                if !state.1.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    state.1 = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// Wakers collected under a lock, called after it is released.
#[derive(Default)]
pub(super) struct Woken(Vec<Waker>);

impl Woken {
    fn push(&mut self, waker: Option<Waker>) {
        self.0.extend(waker);
    }

    pub(super) fn wake(self) {
        self.0.into_iter().for_each(Waker::wake);
    }
}
