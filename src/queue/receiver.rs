//! [`Receiver`]: the one reader, taking everything queued in one lock.

use std::collections::VecDeque;
use std::task::{Context, Poll};

use super::TryRecvError;
use super::shared::Shared;
use super::sync::{Arc, Ordering, lock};

/// The receiving side of a bounded queue.
pub struct Receiver<T> {
    pub(super) shared: Arc<Shared<T>>,
    /// Items taken from the queue in one lock, handed out one by one. Each
    /// keeps its slot until it is handed out.
    pub(super) batch: VecDeque<T>,
}

// The receiver never pins its items.
impl<T> Unpin for Receiver<T> {}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // Items still queued are dropped here, not when the last sender goes.
        drop(self.shared.close());
    }
}

/// What a look at the queue found.
enum Next<T> {
    Item(T),
    /// Nothing queued, and every sender has gone.
    End,
    /// Nothing queued yet (the lock is released; the caller may park).
    Empty,
}

impl<T> Receiver<T> {
    /// The next item: from the batch, else a new batch from the queue. When
    /// the queue is empty and `park` is given, registers it under the same
    /// lock, so that a sender queuing after the look wakes it.
    fn next(&mut self, park: Option<&Context<'_>>) -> Next<T> {
        if self.batch.is_empty() {
            let mut inner = lock(&self.shared.inner);
            if inner.queue.is_empty() {
                // Under the lock: a sender that queued before dropping has
                // queued before this look, so the end is never seen first.
                if self.shared.senders.load(Ordering::Acquire) == 0 {
                    return Next::End;
                }
                if let Some(cx) = park
                    && !inner
                        .reader
                        .as_ref()
                        .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    inner.reader = Some(cx.waker().clone());
                }
                return Next::Empty;
            }
            std::mem::swap(&mut inner.queue, &mut self.batch);
        }
        match self.batch.pop_front() {
            Some(item) => {
                // Each slot is given back as its item is handed out, so room
                // freed in the middle of a batch goes to a waiting sender at once.
                self.shared.release(1);
                Next::Item(item)
            }
            None => Next::Empty,
        }
    }

    /// The next item, or `None` once every sender has gone and nothing is left.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match self.next(Some(cx)) {
            Next::Item(item) => Poll::Ready(Some(item)),
            Next::End => Poll::Ready(None),
            Next::Empty => Poll::Pending,
        }
    }

    /// Waits for the next item; `None` once every sender has gone.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next item if one is queued.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        match self.next(None) {
            Next::Item(item) => Ok(item),
            Next::End => Err(TryRecvError::Disconnected),
            Next::Empty => Err(TryRecvError::Empty),
        }
    }
}
