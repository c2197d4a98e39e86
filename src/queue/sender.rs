//! [`Sender`] and [`Permit`]: queuing an item, at once or after waiting in line.

use super::shared::{Acquire, List, Shared, Waiter};
use super::sync::{Arc, Ordering, lock};
use super::{Closed, TrySendError};

/// The sending side of a bounded queue.
pub struct Sender<T> {
    pub(super) shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last sender: a parked reader looks again and sees the end
            // once the queue is empty.
            let reader = lock(&self.shared.inner).reader.take();
            if let Some(reader) = reader {
                reader.wake();
            }
        }
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("queued", &self.shared.used())
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

/// Room for one item, reserved by [`Sender::reserve`]. Dropped unused, the
/// room goes to the next waiting sender.
pub struct Permit<'a, T> {
    sender: &'a Sender<T>,
    used: bool,
}

impl<T> Permit<'_, T> {
    /// Queues `item` in the reserved slot (dropped if the reader has gone).
    pub fn send(mut self, item: T) {
        self.used = true;
        self.sender.push(item);
    }
}

impl<T> Drop for Permit<'_, T> {
    fn drop(&mut self) {
        if !self.used {
            self.sender.shared.release(1);
        }
    }
}

/// A sender waiting in line; dropped before it is served (a `timeout` around
/// `reserve`, `send` or `closed`), it leaves the line or passes on the slot
/// it was handed.
struct InLine<'a, T> {
    shared: &'a Shared<T>,
    waiter: Arc<Waiter>,
    list: List,
    served: bool,
}

impl<T> InLine<'_, T> {
    async fn served(&mut self) -> Result<(), Closed> {
        let outcome = std::future::poll_fn(|cx| self.waiter.poll(cx)).await;
        self.served = true;
        outcome
    }
}

impl<T> Drop for InLine<'_, T> {
    fn drop(&mut self) {
        if !self.served {
            self.shared.abandon(&self.waiter, self.list);
        }
    }
}

impl<T> Sender<T> {
    /// Queues `item` if there is room and no sender waits for it, without waiting.
    #[inline]
    pub fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        let shared = &*self.shared;
        let mut inner = lock(&shared.inner);
        if inner.gone {
            return Err(TrySendError::Closed(item));
        }
        if !shared.take_slot(&inner) {
            return Err(TrySendError::Full(item));
        }
        grow_then_push(&mut inner.queue, item, shared);
        let reader = inner.reader.take();
        drop(inner);
        if let Some(reader) = reader {
            reader.wake();
        }
        Ok(())
    }

    /// Queues `item` in a slot already counted for it.
    fn push(&self, item: T) {
        let mut inner = lock(&self.shared.inner);
        if inner.gone {
            drop(inner);
            return;
        }
        grow_then_push(&mut inner.queue, item, &self.shared);
        let reader = inner.reader.take();
        drop(inner);
        if let Some(reader) = reader {
            reader.wake();
        }
    }

    /// Waits for room for one item, after the senders already waiting; fails
    /// once the reader has gone.
    pub async fn reserve(&self) -> Result<Permit<'_, T>, Closed> {
        let waiter = match self.shared.acquire() {
            Acquire::Slot => None,
            Acquire::Closed => return Err(Closed),
            Acquire::Wait(waiter) => Some(waiter),
        };
        if let Some(waiter) = waiter {
            InLine {
                shared: &self.shared,
                waiter,
                list: List::Room,
                served: false,
            }
            .served()
            .await?;
        }
        Ok(Permit {
            sender: self,
            used: false,
        })
    }

    /// Queues `item`, waiting for room (at once when there is some and no
    /// sender waits before it); fails once the reader has gone.
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
        if let Some(waiter) = self.shared.wait_close() {
            let _ = InLine {
                shared: &self.shared,
                waiter,
                list: List::Close,
                served: false,
            }
            .served()
            .await;
        }
    }

    /// Whether the reader has gone.
    pub fn is_closed(&self) -> bool {
        self.shared.reader_gone.load(Ordering::Acquire)
    }

    /// The most items the queue holds.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Senders waiting for room.
    #[cfg(test)]
    pub(super) fn waiting_senders(&self) -> usize {
        self.shared.waiting()
    }
}

/// Storage a full queue grows to in one step from its idle floor (no more
/// than the queue's capacity): 64 items, a default queue's whole capacity.
///
/// The reader gives storage back down to the floor whenever it finds the
/// queue empty, which in a burst is once per batch it takes. Grown by doubling
/// from a floor of 4, every batch cost four reallocations (8, 16, 32, 64) and
/// the give-back a fifth; grown in one step it costs one and the give-back.
/// Never more than the queue may hold, so the memory bound is the one the
/// capacity sets already; below the floor the queue grows as a `VecDeque`
/// does, so a queue that carries one reply never takes more.
pub(super) const GROWTH_STEP: usize = 64;

/// Pushes `item`, first growing a full `queue` straight to [`GROWTH_STEP`]
/// items when it holds between its idle floor and that.
#[inline]
fn grow_then_push<T>(queue: &mut std::collections::VecDeque<T>, item: T, shared: &Shared<T>) {
    let len = queue.len();
    if len == queue.capacity() && len >= shared.idle_floor && len < GROWTH_STEP {
        let target = GROWTH_STEP.min(shared.capacity).max(len + 1);
        queue.reserve_exact(target - len);
    }
    queue.push_back(item);
}
