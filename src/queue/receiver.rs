//! [`Receiver`]: the one reader, taking everything queued in one lock.

use std::collections::VecDeque;
use std::task::{Context, Poll};

use super::TryRecvError;
use super::shared::{Inner, Shared};
use super::sync::{Arc, MutexGuard, Ordering, lock};

/// The receiving side of a bounded queue.
pub struct Receiver<T> {
    pub(super) shared: Arc<Shared<T>>,
    /// Items taken from the queue in one lock, handed out one by one. Each
    /// keeps its slot until it is handed out.
    pub(super) batch: VecDeque<T>,
    /// Set by [`Receiver::tidy_on_call`]: storage is given back only by
    /// [`Receiver::tidy`], not each time the reader parks.
    pub(super) tidy_on_call: bool,
    /// Whether either side held more than the idle floor when the reader
    /// last parked (kept up to date only with `tidy_on_call`).
    pub(super) grown: bool,
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
    #[inline]
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
                if self.tidy_on_call {
                    let floor = self.shared.idle_floor;
                    self.grown = inner.queue.capacity() > floor || self.batch.capacity() > floor;
                } else {
                    shrink_when_idle(&self.shared, &mut self.batch, inner);
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

    /// Storage held for items: the queue's and the batch's, in items.
    #[cfg(test)]
    pub(super) fn capacity_held(&self) -> usize {
        lock(&self.shared.inner).queue.capacity() + self.batch.capacity()
    }

    /// Leaves storage a burst grew in place when the reader parks, until
    /// [`Receiver::tidy`] gives it back. For a reader that parks after every
    /// batch of a long burst (a stream's writer, its event feed): giving
    /// storage back at each park made every batch reallocate. Its owner calls
    /// `tidy` once the queue has been idle for a while (a timer it already
    /// has, or one it starts when [`Receiver::holds_grown_storage`] says so).
    pub fn tidy_on_call(&mut self) {
        self.tidy_on_call = true;
    }

    /// Whether either side held more storage than the idle floor when the
    /// reader last parked (with [`Receiver::tidy_on_call`]; always false
    /// otherwise, since each park gives it back).
    pub fn holds_grown_storage(&self) -> bool {
        self.grown
    }

    /// Gives storage back down to the idle floor if nothing is queued or
    /// waiting in the reader's batch; otherwise does nothing (the next park
    /// says again whether storage is grown).
    pub fn tidy(&mut self) {
        // Until the next park says otherwise: an owner that tidies when this
        // is set does not come back every TIDY_AFTER while the reader is busy.
        self.grown = false;
        if !self.batch.is_empty() {
            return;
        }
        let inner = lock(&self.shared.inner);
        if !inner.queue.is_empty() {
            return;
        }
        shrink_when_idle(&self.shared, &mut self.batch, inner);
    }

    /// The next item, or `None` once every sender has gone and nothing is left.
    #[inline]
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

/// Nothing is queued and the batch is empty (`inner` is locked): gives
/// back the storage a burst grew (the queue's and the reader's batch), down
/// to [`IDLE_FLOOR`](super::IDLE_FLOOR) items each. No allocator call
/// happens under the lock: the batch (the reader's own) is shrunk outside
/// it, then swapped in for the queue's storage if that is still empty (a
/// pointer swap), and the queue's old storage is shrunk in turn. A sender queuing in between keeps its item and wakes the reader
/// as usual; the queue's storage is then left for the next idle look.
fn shrink_when_idle<T>(
    shared: &Shared<T>,
    batch: &mut VecDeque<T>,
    inner: MutexGuard<'_, Inner<T>>,
) {
    let floor = shared.idle_floor;
    let queue_grown = inner.queue.capacity() > floor;
    if !queue_grown && batch.capacity() <= floor {
        return;
    }
    drop(inner);
    batch.shrink_to(floor);
    if queue_grown {
        let mut inner = lock(&shared.inner);
        if inner.queue.is_empty() {
            std::mem::swap(&mut inner.queue, batch);
        }
        drop(inner);
        batch.shrink_to(floor);
    }
}
