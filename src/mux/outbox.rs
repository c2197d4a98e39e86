//! A connection's outbox: the bounded queue of encoded frames between the
//! channels that write and the one transport writer that reads.
//!
//! Built for the data path rather than taken from `tokio::sync::mpsc`: a send
//! is one uncontended lock and a counter, the reader takes everything queued in
//! one lock (a whole batch per wake-up) and a sender or reader wakes the other
//! side only when it is actually parked.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;
pub use tokio::sync::mpsc::error::{TryRecvError, TrySendError};

use super::Frame;

struct Shared {
    queue: Mutex<VecDeque<Frame>>,
    /// Frames queued or held by the reader's current batch, plus reserved slots.
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

impl Shared {
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

/// A bounded outbox of `capacity` frames: the sending side (cheap to clone) and
/// the one receiving side.
///
/// ```
/// use genmcp::mux::{Frame, outbox};
/// let (tx, mut rx) = outbox(2);
/// tx.try_send(Frame::message(&b"{}"[..])).unwrap();
/// assert!(rx.try_recv().is_ok());
/// ```
pub fn outbox(capacity: usize) -> (Outbox, OutboxReceiver) {
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
        Outbox {
            shared: shared.clone(),
        },
        OutboxReceiver {
            shared,
            batch: VecDeque::new(),
        },
    )
}

/// The sending side of a connection's bounded outbox.
pub struct Outbox {
    shared: Arc<Shared>,
}

impl Clone for Outbox {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::AcqRel);
        Outbox {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last sender: the reader sees the end once the queue is empty.
            self.shared.reader.wake();
        }
    }
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("queued", &self.shared.len.load(Ordering::Relaxed))
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

/// Room for one frame, reserved by [`Outbox::reserve`].
pub struct Permit<'a> {
    outbox: &'a Outbox,
    used: bool,
}

impl Permit<'_> {
    /// Queues `frame` in the reserved slot.
    pub fn send(mut self, frame: Frame) {
        self.used = true;
        let shared = &self.outbox.shared;
        lock(&shared.queue).push_back(frame);
        shared.wake_reader();
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.used {
            self.outbox.shared.free(1);
        }
    }
}

impl Outbox {
    /// Queues `frame` if there is room, without waiting.
    pub fn try_send(&self, frame: Frame) -> Result<(), TrySendError<Frame>> {
        let shared = &self.shared;
        if shared.reader_gone.load(Ordering::Acquire) {
            return Err(TrySendError::Closed(frame));
        }
        {
            let mut queue = lock(&shared.queue);
            if shared.len.load(Ordering::SeqCst) >= shared.capacity {
                return Err(TrySendError::Full(frame));
            }
            shared.len.fetch_add(1, Ordering::SeqCst);
            queue.push_back(frame);
        }
        shared.wake_reader();
        Ok(())
    }

    /// Waits for room for one frame; fails once the reader has gone.
    pub async fn reserve(&self) -> Result<Permit<'_>, Closed> {
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
                    outbox: self,
                    used: false,
                });
            }
            notified.await;
            shared.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Queues `frame`, waiting for room; fails once the reader has gone.
    pub async fn send(&self, frame: Frame) -> Result<(), Closed> {
        self.reserve().await?.send(frame);
        Ok(())
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

/// The outbox's reader has gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the outbox's reader has gone")]
pub struct Closed;

/// The receiving side of an outbox: the transport's writer.
pub struct OutboxReceiver {
    shared: Arc<Shared>,
    /// Frames taken from the queue in one lock, handed out one by one.
    batch: VecDeque<Frame>,
}

impl Drop for OutboxReceiver {
    fn drop(&mut self) {
        self.shared.reader_gone.store(true, Ordering::Release);
        self.shared.room.notify_waiters();
    }
}

impl OutboxReceiver {
    fn take(&mut self) -> Option<Frame> {
        if self.batch.is_empty() {
            let mut queue = lock(&self.shared.queue);
            std::mem::swap(&mut *queue, &mut self.batch);
        }
        let frame = self.batch.pop_front()?;
        self.shared.free(1);
        Some(frame)
    }

    /// The next frame, or `None` once every sender has gone and nothing is left.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        if let Some(frame) = self.take() {
            return Poll::Ready(Some(frame));
        }
        self.shared.reader.register(cx.waker());
        self.shared.reader_parked.store(true, Ordering::Release);
        // Re-check after parking, so a frame queued in between is not missed.
        if let Some(frame) = self.take() {
            self.shared.reader_parked.store(false, Ordering::Release);
            return Poll::Ready(Some(frame));
        }
        if self.shared.senders.load(Ordering::Acquire) == 0 {
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    /// Waits for the next frame; `None` once every sender has gone.
    pub async fn recv(&mut self) -> Option<Frame> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next frame if one is queued.
    pub fn try_recv(&mut self) -> Result<Frame, TryRecvError> {
        match self.take() {
            Some(frame) => Ok(frame),
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

    fn frame(n: u8) -> Frame {
        Frame::message(vec![n])
    }

    #[test]
    fn bounded_in_order_and_closed_when_every_sender_goes() {
        let (tx, mut rx) = outbox(2);
        tx.try_send(frame(1)).unwrap();
        tx.clone().try_send(frame(2)).unwrap();
        assert!(matches!(tx.try_send(frame(3)), Err(TrySendError::Full(_))));
        assert_eq!(&rx.try_recv().unwrap().to_bytes()[..], [1]);
        tx.try_send(frame(3)).unwrap();
        assert_eq!(&rx.try_recv().unwrap().to_bytes()[..], [2]);
        assert_eq!(&rx.try_recv().unwrap().to_bytes()[..], [3]);
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
        drop(tx);
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
    }

    #[tokio::test]
    async fn reserve_waits_for_room_and_fails_when_the_reader_goes() {
        let (tx, mut rx) = outbox(1);
        tx.try_send(frame(1)).unwrap();
        let tx2 = tx.clone();
        let waiter = tokio::spawn(async move { tx2.send(frame(2)).await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        assert!(rx.recv().await.is_some());
        waiter.await.unwrap().unwrap();
        assert_eq!(&rx.recv().await.unwrap().to_bytes()[..], [2]);
        tx.try_send(frame(3)).unwrap();
        let tx3 = tx.clone();
        let blocked = tokio::spawn(async move { tx3.send(frame(4)).await });
        tokio::task::yield_now().await;
        drop(rx);
        assert_eq!(blocked.await.unwrap(), Err(Closed));
        assert!(tx.is_closed());
        tx.closed().await;
    }
}
