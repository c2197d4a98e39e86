//! The bounded many-to-one queue of the data path: a stream's inbox (events
//! into a stream actor) and a connection's outbox (frames out to the transport
//! writer) are both one of these.
//!
//! Built for the data path rather than taken from `tokio::sync::mpsc`: a send
//! is one short lock and a counter, the reader takes everything queued in one
//! lock (a whole batch per wake-up, then hands it out without locking), and a
//! sender or the reader wakes the other side only when it is actually parked.
//! Runtime-free apart from `tokio::sync::Notify`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;
pub use tokio::sync::mpsc::error::{TryRecvError, TrySendError};

struct Shared<T> {
    queue: Mutex<VecDeque<T>>,
    /// Items queued or held by the reader's current batch, plus reserved slots.
    len: AtomicUsize,
    capacity: usize,
    reader: AtomicWaker,
    /// Set by the reader before it parks; a sender that finds it set wakes it.
    reader_parked: AtomicBool,
    /// Senders waiting for room (`reserve`, counted in `waiting`), or for the
    /// reader to go (`closed`, woken when it drops).
    room: Notify,
    waiting: AtomicUsize,
    senders: AtomicUsize,
    reader_gone: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> Shared<T> {
    fn wake_reader(&self) {
        if self.reader_parked.load(Ordering::Acquire) {
            self.reader_parked.store(false, Ordering::Release);
            self.reader.wake();
        }
    }

    fn free(&self, n: usize) {
        self.len.fetch_sub(n, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.room.notify_waiters();
        }
    }
}

/// A waker that stays registered after it is woken (unlike `AtomicWaker`,
/// whose `wake` takes it): for rare signals to a task whose waker does not
/// change, so the task registers once instead of on every poll.
#[derive(Debug, Default)]
pub(crate) struct WakeSlot {
    waker: Mutex<Option<std::task::Waker>>,
}

impl WakeSlot {
    /// Registers `waker` unless an equivalent one is already there.
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        let mut slot = lock(&self.waker);
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    /// Wakes the registered task, if any; it stays registered.
    pub(crate) fn wake(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.wake_by_ref();
        }
    }
}

/// A bounded queue of `capacity` items: the sending side (cheap to clone) and
/// the one receiving side.
///
/// ```
/// let (tx, mut rx) = genmcp::queue::bounded(2);
/// tx.try_send("a").unwrap();
/// assert_eq!(rx.try_recv(), Ok("a"));
/// ```
pub fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(VecDeque::new()),
        len: AtomicUsize::new(0),
        capacity: capacity.max(1),
        reader: AtomicWaker::new(),
        reader_parked: AtomicBool::new(false),
        room: Notify::new(),
        waiting: AtomicUsize::new(0),
        senders: AtomicUsize::new(1),
        reader_gone: AtomicBool::new(false),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver {
            shared,
            batch: VecDeque::new(),
        },
    )
}

/// The sending side of a bounded queue.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::AcqRel);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last sender: the reader sees the end once the queue is empty.
            self.shared.reader.wake();
        }
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("queued", &self.shared.len.load(Ordering::Relaxed))
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

/// Room for one item, reserved by [`Sender::reserve`].
pub struct Permit<'a, T> {
    sender: &'a Sender<T>,
    used: bool,
}

impl<T> Permit<'_, T> {
    /// Queues `item` in the reserved slot.
    pub fn send(mut self, item: T) {
        self.used = true;
        let shared = &self.sender.shared;
        lock(&shared.queue).push_back(item);
        shared.wake_reader();
    }
}

impl<T> Drop for Permit<'_, T> {
    fn drop(&mut self) {
        if !self.used {
            self.sender.shared.free(1);
        }
    }
}

impl<T> Sender<T> {
    /// Queues `item` if there is room, without waiting.
    pub fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        let shared = &self.shared;
        if shared.reader_gone.load(Ordering::Acquire) {
            return Err(TrySendError::Closed(item));
        }
        {
            let mut queue = lock(&shared.queue);
            if shared.len.load(Ordering::SeqCst) >= shared.capacity {
                return Err(TrySendError::Full(item));
            }
            shared.len.fetch_add(1, Ordering::SeqCst);
            queue.push_back(item);
        }
        shared.wake_reader();
        Ok(())
    }

    /// Waits for room for one item; fails once the reader has gone.
    pub async fn reserve(&self) -> Result<Permit<'_, T>, Closed> {
        let shared = &self.shared;
        loop {
            let notified = shared.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Counted before looking, so a reader freeing room in between sees us.
            shared.waiting.fetch_add(1, Ordering::SeqCst);
            let outcome = if shared.reader_gone.load(Ordering::SeqCst) {
                Some(Err(Closed))
            } else {
                let _queue = lock(&shared.queue);
                (shared.len.load(Ordering::SeqCst) < shared.capacity).then(|| {
                    shared.len.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            };
            if let Some(outcome) = outcome {
                shared.waiting.fetch_sub(1, Ordering::SeqCst);
                return outcome.map(|()| Permit {
                    sender: self,
                    used: false,
                });
            }
            notified.await;
            shared.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Queues `item`, waiting for room (at once when there is some); fails
    /// once the reader has gone.
    pub async fn send(&self, item: T) -> Result<(), Closed> {
        match self.try_send(item) {
            Ok(()) => Ok(()),
            Err(TrySendError::Closed(_)) => Err(Closed),
            Err(TrySendError::Full(item)) => {
                self.reserve().await?.send(item);
                Ok(())
            }
        }
    }

    /// Completes when the reader has gone (the transport closed).
    pub async fn closed(&self) {
        let shared = &self.shared;
        loop {
            let notified = shared.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if shared.reader_gone.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    /// Whether the reader has gone.
    pub fn is_closed(&self) -> bool {
        self.shared.reader_gone.load(Ordering::Acquire)
    }
}

/// The queue's reader has gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the queue's reader has gone")]
pub struct Closed;

/// The receiving side of a bounded queue.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// Items taken from the queue in one lock, handed out one by one.
    batch: VecDeque<T>,
}

// The receiver never pins its items.
impl<T> Unpin for Receiver<T> {}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.reader_gone.store(true, Ordering::Release);
        self.shared.room.notify_waiters();
    }
}

impl<T> Receiver<T> {
    fn take(&mut self) -> Option<T> {
        if self.batch.is_empty() {
            let mut queue = lock(&self.shared.queue);
            std::mem::swap(&mut *queue, &mut self.batch);
        }
        let item = self.batch.pop_front()?;
        let shared = &self.shared;
        shared.len.fetch_sub(1, Ordering::SeqCst);
        // Waiting senders are told once per batch, when the batch is used up,
        // not once per item.
        if self.batch.is_empty() && shared.waiting.load(Ordering::SeqCst) > 0 {
            shared.room.notify_waiters();
        }
        Some(item)
    }

    /// The next item, or `None` once every sender has gone and nothing is left.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(item) = self.take() {
            return Poll::Ready(Some(item));
        }
        self.shared.reader.register(cx.waker());
        self.shared.reader_parked.store(true, Ordering::Release);
        // Re-check after parking, so a frame queued in between is not missed.
        if let Some(item) = self.take() {
            self.shared.reader_parked.store(false, Ordering::Release);
            return Poll::Ready(Some(item));
        }
        if self.shared.senders.load(Ordering::Acquire) == 0 {
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    /// Waits for the next item; `None` once every sender has gone.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next item if one is queued.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        match self.take() {
            Some(item) => Ok(item),
            None if self.shared.senders.load(Ordering::Acquire) == 0 => {
                Err(TryRecvError::Disconnected)
            }
            None => Err(TryRecvError::Empty),
        }
    }
}

#[cfg(test)]
mod tests {
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
}
