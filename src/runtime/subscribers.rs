//! Streams fed by application actors: [`Subscriber`], one stream as an actor
//! sees it, and [`Subscribers`], the set an actor keeps in its own state.
//!
//! Why not an `actix::Recipient`: actix builds a `Recipient` only from an actor
//! address, so each stream would need a forwarding actor (a mailbox, a task and
//! its memory per stream), and `Recipient::do_send` ignores the mailbox bound.
//! A [`Subscriber`] is the stream's own bounded [`Inbox`] with the actix
//! vocabulary (`do_send`, `try_send`, `send`, `connected`): no extra actor, no
//! extra queue, the same overflow semantics as every other way into a stream.

use std::future::Future;

use crate::pubsub::{Inbox, InboxError};

/// Delivers to one listen stream, in the actix idiom; made from the stream's
/// [`Inbox`] (`Subscriber::from(cx.inbox())` in `subscribe`).
///
/// Delivery is bounded like the inbox's: [`Subscriber::try_send`] and
/// [`Subscriber::do_send`] never wait; when the stream's mailbox is full the
/// stream is ended as `Overflow` (its client did not keep up and re-listens)
/// and the sender gets [`InboxError::Full`], then [`InboxError::Closed`] from
/// then on, as for any stream that ended. Cheap to clone, `Send`.
///
/// A `Subscriber` is itself an actix message (result `()`), so an actor can be
/// handed one directly: `impl Handler<Subscriber<M>> for MyActor`.
///
/// ```
/// use actix::prelude::*;
/// use genmcp::runtime::{Subscriber, Subscribers};
///
/// /// An application actor that tells every listening stream about changes.
/// #[derive(Default)]
/// struct Room {
///     listeners: Subscribers<u64>,
///     version: u64,
/// }
///
/// impl Actor for Room {
///     type Context = Context<Self>;
/// }
///
/// // Registration: the subscription handler's `subscribe` sends
/// // `Subscriber::from(cx.inbox())` to the room.
/// impl Handler<Subscriber<u64>> for Room {
///     type Result = ();
///     fn handle(&mut self, subscriber: Subscriber<u64>, _: &mut Context<Self>) {
///         self.listeners.insert(subscriber);
///     }
/// }
///
/// #[derive(Message)]
/// #[rtype(result = "usize")]
/// struct Changed;
///
/// impl Handler<Changed> for Room {
///     type Result = usize;
///     fn handle(&mut self, _: Changed, _: &mut Context<Self>) -> usize {
///         self.version += 1;
///         // Never blocks the actor; streams that ended or overflowed are dropped.
///         self.listeners.publish(self.version)
///     }
/// }
/// ```
pub struct Subscriber<M> {
    inbox: Inbox<M>,
}

impl<M> Clone for Subscriber<M> {
    fn clone(&self) -> Self {
        Subscriber {
            inbox: self.inbox.clone(),
        }
    }
}

impl<M: Send + 'static> std::fmt::Debug for Subscriber<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("connected", &self.connected())
            .finish()
    }
}

impl<M: Send + 'static> From<Inbox<M>> for Subscriber<M> {
    fn from(inbox: Inbox<M>) -> Self {
        Subscriber { inbox }
    }
}

impl<M: Send + 'static> From<Subscriber<M>> for Inbox<M> {
    fn from(subscriber: Subscriber<M>) -> Self {
        subscriber.inbox
    }
}

impl<M: Send + 'static> actix::Message for Subscriber<M> {
    type Result = ();
}

impl<M: Send + 'static> Subscriber<M> {
    /// Delivers `msg` without waiting and without a result, like
    /// `actix::Addr::do_send`, but bounded: a full stream is ended as
    /// `Overflow` and `msg` is dropped; a stream that ended drops it too.
    pub fn do_send(&self, msg: M) {
        let _ = self.inbox.try_send(msg);
    }

    /// Delivers `msg` without waiting. `Err(Full)`: the mailbox was full, the
    /// stream is now ended as `Overflow`; `Err(Closed)`: the stream had ended.
    pub fn try_send(&self, msg: M) -> Result<(), InboxError> {
        self.inbox.try_send(msg)
    }

    /// Delivers `msg`, waiting for room in the stream's mailbox (back-pressure
    /// instead of overflow). The future owns what it needs (`'static`), so an
    /// actor can spawn it (`ctx.spawn(fut.into_actor(self))`) without waiting
    /// in its handler. `Err(Closed)` once the stream has ended.
    pub fn send(&self, msg: M) -> impl Future<Output = Result<(), InboxError>> + Send + 'static {
        let inbox = self.inbox.clone();
        async move { inbox.send(msg).await }
    }

    /// Whether the stream is still open (false once it ended for any reason,
    /// overflow included).
    pub fn connected(&self) -> bool {
        !self.inbox.is_closed()
    }

    /// The stream's inbox.
    pub fn inbox(&self) -> &Inbox<M> {
        &self.inbox
    }
}

/// Identifies one entry of a [`Subscribers`] set, for [`Subscribers::remove`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubscriberKey(u64);

/// The listening streams an application actor feeds, kept in the actor's own
/// state (no lock: `&mut self` from its handlers).
///
/// Entries are removed automatically once their stream has ended: at the next
/// [`Subscribers::publish`] (a full or ended stream is dropped there), and by
/// [`Subscribers::insert`], which sweeps out ended entries whenever the set has
/// doubled since the last sweep. So the set stays within about twice the
/// streams still open, whether or not anything is published. See
/// [`Subscriber`] for a complete actor.
pub struct Subscribers<M> {
    entries: Vec<(SubscriberKey, Subscriber<M>)>,
    next_key: u64,
    sweep_at: usize,
}

/// Entries below which [`Subscribers::insert`] does not sweep.
const MIN_SWEEP: usize = 16;

impl<M> Default for Subscribers<M> {
    fn default() -> Self {
        Subscribers {
            entries: Vec::new(),
            next_key: 0,
            sweep_at: MIN_SWEEP,
        }
    }
}

impl<M: Send + 'static> std::fmt::Debug for Subscribers<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscribers")
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl<M: Send + 'static> Subscribers<M> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a stream (a [`Subscriber`] or its [`Inbox`]); returns its key.
    pub fn insert(&mut self, subscriber: impl Into<Subscriber<M>>) -> SubscriberKey {
        if self.entries.len() >= self.sweep_at {
            self.prune();
            self.sweep_at = (self.entries.len() * 2).max(MIN_SWEEP);
        }
        let key = SubscriberKey(self.next_key);
        self.next_key += 1;
        self.entries.push((key, subscriber.into()));
        key
    }

    /// Removes the entry `key`; returns whether it was there.
    pub fn remove(&mut self, key: SubscriberKey) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| *k != key);
        self.entries.len() != before
    }

    /// Drops every entry whose stream has ended; returns how many remain.
    pub fn prune(&mut self) -> usize {
        self.entries.retain(|(_, s)| s.connected());
        self.entries.len()
    }

    /// Entries, including ended streams not yet swept out (see
    /// [`Subscribers::prune`]).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &Subscriber<M>> {
        self.entries.iter().map(|(_, s)| s)
    }

    /// Delivers a clone of `msg` to every stream without waiting. A stream
    /// whose mailbox is full is ended as `Overflow` and, like a stream that
    /// had ended, dropped from the set. Returns how many streams took `msg`.
    pub fn publish(&mut self, msg: M) -> usize
    where
        M: Clone,
    {
        let mut delivered = 0;
        self.entries.retain(|(_, s)| match s.try_send(msg.clone()) {
            Ok(()) => {
                delivered += 1;
                true
            }
            Err(_) => false,
        });
        delivered
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::pubsub::test_sink::{Recorder, recorder};

    fn mailbox(cap: usize) -> (Arc<Recorder>, Subscriber<u32>) {
        let m = recorder(cap);
        (m.clone(), Inbox::from_sink(m).into())
    }

    #[test]
    fn full_then_closed_and_dropped_from_the_set() {
        let (slow_box, slow) = mailbox(2);
        let (fast_box, fast) = mailbox(100);
        assert_eq!(slow.try_send(1), Ok(()));
        let mut set = Subscribers::new();
        set.insert(slow.clone());
        set.insert(fast);
        assert_eq!(set.publish(2), 2);
        assert_eq!(set.publish(3), 1); // slow is full: ended and dropped
        assert_eq!(slow.try_send(4), Err(InboxError::Closed));
        assert!(!slow.connected());
        assert_eq!(set.len(), 1);
        assert_eq!(*slow_box.got.lock().unwrap(), vec![1, 2]);
        assert_eq!(*fast_box.got.lock().unwrap(), vec![2, 3]);
    }

    #[test]
    fn insert_sweeps_ended_streams_without_a_publish() {
        let mut set = Subscribers::new();
        let mut boxes = Vec::new();
        for _ in 0..1000 {
            let (b, s) = mailbox(1);
            b.closed.store(true, Ordering::SeqCst); // ended at once
            boxes.push(b);
            set.insert(s);
            assert!(set.len() <= 2 * MIN_SWEEP);
        }
        let (_b, live) = mailbox(1);
        let key = set.insert(live);
        assert!(set.remove(key));
        assert_eq!(set.prune(), 0);
    }
}
