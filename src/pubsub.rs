//! The embedded event bus: topics, `publish`, bounded delivery into [`Inbox`]es.
//!
//! An [`Inbox`] is how an application reaches one subscription stream. Delivery is
//! always bounded: [`Inbox::try_send`] fails at once when the stream's mailbox is
//! full, and the runtime then ends that stream with the close reason `Overflow`
//! (the client is not keeping up and must re-listen). [`Inbox::send`] waits for
//! room instead, for producers that want back-pressure rather than loss.
//!
//! ```
//! use genmcp::pubsub::Bus;
//! let bus: Bus<&'static str> = Bus::new();
//! // Nobody listens yet: the event reaches no one and is not kept.
//! assert_eq!(bus.publish("tools", "changed"), 0);
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::queue::{self, TrySendError};

/// Why a delivery into an [`Inbox`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The mailbox is full: the stream is ended as `Overflow`.
    #[error("inbox full: the subscription stream is not keeping up and was ended")]
    Full,
    /// The stream has ended.
    #[error("inbox closed: the subscription stream has ended")]
    Closed,
}

/// A boxed, `Send` future returned by [`InboxSink::deliver`].
pub type DeliverFuture = Pin<Box<dyn Future<Output = Result<(), InboxError>> + Send>>;

/// A receiving end of your own behind an [`Inbox`], for testing an event source
/// without a runtime. Stream actors use a built-in bounded channel instead.
pub trait InboxSink<M>: Send + Sync {
    /// Delivers without waiting. On a full mailbox the implementation must end the
    /// receiver as overflowed and return [`InboxError::Full`].
    fn try_deliver(&self, msg: M) -> Result<(), InboxError>;
    /// Delivers, waiting for room and for the receiver to take the message.
    fn deliver(&self, msg: M) -> DeliverFuture;
    /// Whether the receiver has ended.
    fn is_closed(&self) -> bool;
}

/// What the receiving stream watches besides its messages: set when a
/// [`Inbox::try_send`] found the mailbox full, with the waker to call then.
#[derive(Debug, Default)]
pub(crate) struct OverflowSignal {
    overflowed: AtomicBool,
    waker: queue::WakeSlot,
}

impl OverflowSignal {
    /// Whether a sender found the mailbox full.
    pub(crate) fn is_set(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    /// Registers the task to wake when the flag is set.
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        self.waker.register(waker);
    }

    fn set(&self) {
        if !self.overflowed.swap(true, Ordering::AcqRel) {
            self.waker.wake();
        }
    }
}

enum Target<M> {
    /// A stream actor's bounded mailbox.
    Channel {
        tx: queue::Sender<M>,
        signal: Arc<OverflowSignal>,
    },
    Sink(Arc<dyn InboxSink<M>>),
}

/// A cheap, cloneable, `Send` handle that delivers typed messages to one
/// subscription stream (its `handle_message`).
pub struct Inbox<M> {
    target: Target<M>,
}

impl<M> Clone for Inbox<M> {
    fn clone(&self) -> Self {
        Inbox {
            target: match &self.target {
                Target::Channel { tx, signal } => Target::Channel {
                    tx: tx.clone(),
                    signal: signal.clone(),
                },
                Target::Sink(sink) => Target::Sink(sink.clone()),
            },
        }
    }
}

impl<M: Send + 'static> std::fmt::Debug for Inbox<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<M: Send + 'static> Inbox<M> {
    /// An inbox backed by `sink`.
    pub fn from_sink(sink: Arc<dyn InboxSink<M>>) -> Self {
        Inbox {
            target: Target::Sink(sink),
        }
    }

    /// A bounded mailbox of `capacity` messages and its receiving side; the
    /// runtime attaches the receiver to a stream actor.
    pub(crate) fn channel(capacity: usize) -> (Self, queue::Receiver<M>, Arc<OverflowSignal>) {
        let (tx, rx) = queue::bounded(capacity);
        let signal = Arc::new(OverflowSignal::default());
        let inbox = Inbox {
            target: Target::Channel {
                tx,
                signal: signal.clone(),
            },
        };
        (inbox, rx, signal)
    }

    /// Delivers without waiting; a full mailbox ends the stream as `Overflow`.
    pub fn try_send(&self, msg: M) -> Result<(), InboxError> {
        match &self.target {
            Target::Channel { tx, signal } => {
                if signal.is_set() {
                    return Err(InboxError::Closed);
                }
                match tx.try_send(msg) {
                    Ok(()) => Ok(()),
                    Err(TrySendError::Full(_)) => {
                        signal.set();
                        Err(InboxError::Full)
                    }
                    Err(TrySendError::Closed(_)) => Err(InboxError::Closed),
                }
            }
            Target::Sink(sink) => sink.try_deliver(msg),
        }
    }

    /// Delivers, waiting for room in the stream's bounded mailbox (back-pressure
    /// instead of overflow). Fails with [`InboxError::Closed`] once the stream
    /// has ended.
    pub async fn send(&self, msg: M) -> Result<(), InboxError> {
        match &self.target {
            Target::Channel { tx, signal } => {
                if signal.is_set() {
                    return Err(InboxError::Closed);
                }
                tx.send(msg).await.map_err(|_| InboxError::Closed)
            }
            Target::Sink(sink) => sink.deliver(msg).await,
        }
    }

    /// Whether the stream has ended.
    pub fn is_closed(&self) -> bool {
        match &self.target {
            Target::Channel { tx, signal } => signal.is_set() || tx.is_closed(),
            Target::Sink(sink) => sink.is_closed(),
        }
    }
}

type Subscribers<M> = Vec<(u64, Inbox<M>)>;

struct BusInner<M> {
    topics: Mutex<HashMap<String, Subscribers<M>>>,
    next_id: AtomicU64,
}

/// An in-process publish/subscribe bus of typed messages, cheap to clone and `Send`.
pub struct Bus<M> {
    inner: Arc<BusInner<M>>,
}

impl<M> Clone for Bus<M> {
    fn clone(&self) -> Self {
        Bus {
            inner: self.inner.clone(),
        }
    }
}

impl<M: Clone + Send + 'static> Default for Bus<M> {
    fn default() -> Self {
        Self::new()
    }
}

/// Keeps an inbox subscribed to a topic; dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes at once"]
pub struct BusSubscription<M> {
    bus: Weak<BusInner<M>>,
    topic: String,
    id: u64,
}

impl<M> Drop for BusSubscription<M> {
    fn drop(&mut self) {
        if let Some(bus) = self.bus.upgrade() {
            let mut topics = lock(&bus.topics);
            if let Some(subs) = topics.get_mut(&self.topic) {
                subs.retain(|(id, _)| *id != self.id);
                if subs.is_empty() {
                    topics.remove(&self.topic);
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the map inconsistent
    // (every critical section is a single insert/retain), so poisoning is ignored.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<M: Clone + Send + 'static> Bus<M> {
    /// An empty bus.
    pub fn new() -> Self {
        Bus {
            inner: Arc::new(BusInner {
                topics: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// Subscribes `inbox` to `topic` until the returned guard is dropped.
    pub fn subscribe(&self, topic: impl Into<String>, inbox: Inbox<M>) -> BusSubscription<M> {
        let topic = topic.into();
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner.topics)
            .entry(topic.clone())
            .or_default()
            .push((id, inbox));
        BusSubscription {
            bus: Arc::downgrade(&self.inner),
            topic,
            id,
        }
    }

    /// How many topics have at least one subscriber. A topic is removed with
    /// its last subscription, so a bus whose streams have all ended has none.
    pub fn topic_count(&self) -> usize {
        lock(&self.inner.topics).len()
    }

    /// The live inboxes subscribed to `topic`.
    pub fn subscribers(&self, topic: &str) -> Vec<Inbox<M>> {
        lock(&self.inner.topics)
            .get(topic)
            .map(|subs| {
                subs.iter()
                    .filter(|(_, i)| !i.is_closed())
                    .map(|(_, i)| i.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Publishes without waiting: each subscriber gets `msg` or, if its mailbox is
    /// full, is ended as `Overflow` and dropped from the topic. Returns how many
    /// subscribers took the message. Nothing is allocated per subscriber: with
    /// a cheap-to-clone message (an `Arc`, a
    /// [`crate::mux::SharedNotification`]) a publish costs one clone and one
    /// bounded `try_send` per subscriber.
    pub fn publish(&self, topic: &str, msg: M) -> usize {
        let mut topics = lock(&self.inner.topics);
        let Some(subs) = topics.get_mut(topic) else {
            return 0;
        };
        let mut delivered = 0;
        // `try_send` never blocks, so holding the lock here is short.
        subs.retain(|(_, inbox)| match inbox.try_send(msg.clone()) {
            Ok(()) => {
                delivered += 1;
                true
            }
            Err(_) => false,
        });
        if subs.is_empty() {
            topics.remove(topic);
        }
        delivered
    }

    /// Publishes a burst without waiting: each subscriber gets every message of
    /// `msgs`, in order, before the next subscriber gets any. The result is the
    /// same as publishing them one by one (a subscriber whose mailbox fills is
    /// ended as `Overflow` and dropped from the topic), but each subscriber's
    /// mailbox is touched while it is hot: with thousands of subscribers this is
    /// several times faster. Returns how many subscribers took the whole burst.
    pub fn publish_batch(&self, topic: &str, msgs: &[M]) -> usize {
        let mut topics = lock(&self.inner.topics);
        let Some(subs) = topics.get_mut(topic) else {
            return 0;
        };
        let mut delivered = 0;
        subs.retain(|(_, inbox)| {
            let took_all = msgs.iter().all(|msg| inbox.try_send(msg.clone()).is_ok());
            delivered += usize::from(took_all);
            took_all
        });
        if subs.is_empty() {
            topics.remove(topic);
        }
        delivered
    }

    /// Publishes and waits until every live subscriber has taken `msg`
    /// (back-pressure instead of overflow). Returns how many took it.
    pub async fn publish_wait(&self, topic: &str, msg: M) -> usize {
        let subs = self.subscribers(topic);
        let results =
            futures_util::future::join_all(subs.iter().map(|inbox| inbox.send(msg.clone()))).await;
        results.iter().filter(|r| r.is_ok()).count()
    }
}

/// A recording [`InboxSink`] for the tests of event sources.
#[cfg(test)]
pub(crate) mod test_sink {
    use super::*;

    /// A mailbox of `cap` messages that ends as overflowed when full.
    pub(crate) struct Recorder {
        pub(crate) got: Mutex<Vec<u32>>,
        cap: usize,
        pub(crate) closed: AtomicBool,
    }

    impl InboxSink<u32> for Recorder {
        fn try_deliver(&self, msg: u32) -> Result<(), InboxError> {
            if self.closed.load(Ordering::SeqCst) {
                return Err(InboxError::Closed);
            }
            let mut got = lock(&self.got);
            if got.len() >= self.cap {
                self.closed.store(true, Ordering::SeqCst);
                return Err(InboxError::Full);
            }
            got.push(msg);
            Ok(())
        }
        fn deliver(&self, msg: u32) -> DeliverFuture {
            let r = self.try_deliver(msg);
            Box::pin(async move { r })
        }
        fn is_closed(&self) -> bool {
            self.closed.load(Ordering::SeqCst)
        }
    }

    pub(crate) fn recorder(cap: usize) -> Arc<Recorder> {
        Arc::new(Recorder {
            got: Mutex::new(vec![]),
            cap,
            closed: AtomicBool::new(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_sink::recorder;

    #[test]
    fn publish_reaches_subscribers_in_order_and_drop_unsubscribes() {
        let bus = Bus::new();
        let r = recorder(100);
        let sub = bus.subscribe("t", Inbox::from_sink(r.clone()));
        for i in 0..5 {
            assert_eq!(bus.publish("t", i), 1);
        }
        assert_eq!(*r.got.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(bus.topic_count(), 1);
        drop(sub);
        assert_eq!(bus.publish("t", 9), 0);
        assert!(bus.subscribers("t").is_empty());
        assert_eq!(bus.topic_count(), 0);
    }

    #[test]
    fn a_batch_reaches_each_subscriber_in_order() {
        let bus = Bus::new();
        let a = recorder(100);
        let slow = recorder(2);
        let _a = bus.subscribe("t", Inbox::from_sink(a.clone()));
        let _s = bus.subscribe("t", Inbox::from_sink(slow.clone()));
        assert_eq!(bus.publish_batch("t", &[1, 2, 3]), 1);
        assert_eq!(*a.got.lock().unwrap(), vec![1, 2, 3]);
        assert_eq!(*slow.got.lock().unwrap(), vec![1, 2]);
        assert_eq!(bus.subscribers("t").len(), 1, "the slow one was dropped");
        assert_eq!(bus.publish_batch("none", &[1]), 0);
    }

    #[test]
    fn a_full_subscriber_is_dropped_not_buffered() {
        let bus = Bus::new();
        let slow = recorder(2);
        let fast = recorder(100);
        let _a = bus.subscribe("t", Inbox::from_sink(slow.clone()));
        let _b = bus.subscribe("t", Inbox::from_sink(fast.clone()));
        for i in 0..10 {
            bus.publish("t", i);
        }
        assert_eq!(slow.got.lock().unwrap().len(), 2);
        assert_eq!(fast.got.lock().unwrap().len(), 10);
        assert_eq!(bus.subscribers("t").len(), 1);
    }
}
