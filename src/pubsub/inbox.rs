//! [`Inbox`]: the bounded handle through which anything reaches one
//! subscription stream, and the signals the stream watches besides it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::local::lock;
use crate::queue::fanout;
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
    /// Asks the receiver to end gracefully, as if its handler had returned
    /// [`crate::subscription::Flow::Stop`] (see [`Inbox::complete`]). The
    /// default does nothing.
    fn complete(&self) {}
}

/// What the receiving stream watches besides its messages: set when a
/// [`Inbox::try_send`] found the mailbox full, or when its event source asked
/// it to complete ([`Inbox::complete`]), with the waker to call then.
#[derive(Debug, Default)]
pub(crate) struct OverflowSignal {
    overflowed: AtomicBool,
    completed: AtomicBool,
    waker: queue::WakeSlot,
}

impl OverflowSignal {
    /// Whether a sender found the mailbox full.
    pub(crate) fn is_set(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    /// Whether the event source asked the stream to complete.
    pub(crate) fn is_completed(&self) -> bool {
        self.completed.load(Ordering::Acquire)
    }

    fn complete(&self) {
        if !self.completed.swap(true, Ordering::AcqRel) {
            self.waker.wake();
        }
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

/// The readers of topic logs ([`fanout::Log`]) a bus hands a stream when it
/// subscribes it to a topic; the stream's feed takes them on its next wake-up
/// and reads them beside its mailbox.
pub(crate) struct Taps<M> {
    /// `None` once the feed has gone: a reader handed over then is dropped
    /// (which its topic sees as the subscriber gone).
    readers: std::sync::Mutex<Option<Vec<TapReader<M>>>>,
    arrived: AtomicBool,
    /// The buses the stream joined (for a handoff of the stream).
    pub(crate) buses: super::SyncedBuses,
}

/// A topic log's reader, as the stream's feed polls it.
pub(crate) type TapReader<M> = Pin<Box<dyn futures_util::Stream<Item = M> + Send>>;

impl<M> Taps<M> {
    fn new() -> Self {
        Taps {
            readers: std::sync::Mutex::new(Some(Vec::new())),
            arrived: AtomicBool::new(false),
            buses: super::SyncedBuses::default(),
        }
    }

    /// Readers handed over since the last call.
    pub(crate) fn take(&self) -> Vec<TapReader<M>> {
        // Looked at on every wake-up of the stream: a load, and the swap
        // only when something arrived.
        if !self.arrived.load(Ordering::Acquire) || !self.arrived.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        lock(&self.readers)
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The feed has gone: readers still here, and any handed over later, are dropped.
    pub(crate) fn close(&self) {
        let readers = lock(&self.readers).take();
        drop(readers);
    }
}

enum Target<M> {
    /// A stream actor's bounded mailbox.
    Channel {
        tx: queue::Sender<M>,
        signal: Arc<OverflowSignal>,
        taps: Arc<Taps<M>>,
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
                Target::Channel { tx, signal, taps } => Target::Channel {
                    tx: tx.clone(),
                    signal: signal.clone(),
                    taps: taps.clone(),
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
    pub(crate) fn channel(
        capacity: usize,
    ) -> (Self, queue::Receiver<M>, Arc<OverflowSignal>, Arc<Taps<M>>) {
        let (tx, rx) = queue::bounded(capacity);
        let signal = Arc::new(OverflowSignal::default());
        let taps = Arc::new(Taps::new());
        let inbox = Inbox {
            target: Target::Channel {
                tx,
                signal: signal.clone(),
                taps: taps.clone(),
            },
        };
        (inbox, rx, signal, taps)
    }

    /// Records that this inbox's stream joined a topic of `bus`.
    pub(crate) fn note_bus(&self, bus: std::sync::Weak<dyn super::Synced>) {
        if let Target::Channel { taps, .. } = &self.target {
            taps.buses.note(bus);
        }
    }

    /// Joins `log` for this inbox's stream, which then reads it beside its
    /// mailbox, with a backlog as large as its mailbox: the tap to offer the
    /// log's messages to. `None` for an inbox backed by a custom sink (the
    /// caller sends to it instead).
    pub(crate) fn join(&self, log: &fanout::Log<M>) -> Option<fanout::Tap>
    where
        M: Clone,
    {
        let Target::Channel { tx, signal, taps } = &self.target else {
            return None;
        };
        let (tap, reader) = log.join(tx.capacity());
        let mut guard = lock(&taps.readers);
        if let Some(readers) = guard.as_mut() {
            readers.push(Box::pin(reader));
            taps.arrived.store(true, Ordering::Release);
            drop(guard);
            signal.waker.wake();
        }
        // Else the reader is dropped here: its stream has gone, and the
        // topic drops the tap at its next offer.
        Some(tap)
    }

    /// Delivers without waiting; a full mailbox ends the stream as `Overflow`.
    /// A 2025 session's GET stream sent a message this way (not through a
    /// [`super::Bus`]) is no longer handed over to another node when its
    /// node drains (`docs/compat-2025.md`).
    pub fn try_send(&self, msg: M) -> Result<(), InboxError> {
        self.mark_sent_directly();
        self.try_send_from_bus(msg)
    }

    /// A message sent by the application itself, not through a bus: the
    /// stream can no longer be handed over to another node.
    fn mark_sent_directly(&self) {
        if let Target::Channel { taps, .. } = &self.target {
            taps.buses.sent_directly();
        }
    }

    /// [`Inbox::try_send`] by a bus (the stream's handoff still covers it).
    pub(crate) fn try_send_from_bus(&self, msg: M) -> Result<(), InboxError> {
        match &self.target {
            Target::Channel { tx, signal, .. } => {
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

    /// Delivers if there is room at once, without ending the stream when there
    /// is none: `Err(Some(msg))` gives the message back (full, or a custom
    /// sink), `Err(None)` means the stream has ended. For what arrives from
    /// other nodes (the `redis` feature).
    #[cfg(feature = "redis")]
    pub(crate) fn try_offer(&self, msg: M) -> Result<(), Option<M>> {
        match &self.target {
            Target::Channel { tx, signal, .. } => {
                if signal.is_set() || signal.is_completed() {
                    return Err(None);
                }
                match tx.try_send(msg) {
                    Ok(()) => Ok(()),
                    Err(TrySendError::Full(msg)) => Err(Some(msg)),
                    Err(TrySendError::Closed(_)) => Err(None),
                }
            }
            Target::Sink(_) => Err(Some(msg)),
        }
    }

    /// Ends the stream as `Overflow`, as a full [`Inbox::try_send`] does.
    pub(crate) fn overflow(&self) {
        if let Target::Channel { signal, .. } = &self.target {
            signal.set();
        }
    }

    /// Delivers, waiting for room in the stream's bounded mailbox (back-pressure
    /// instead of overflow). Fails with [`InboxError::Closed`] once the stream
    /// has ended. As with [`Inbox::try_send`], such a stream is no longer
    /// handed over to another node when its node drains.
    pub async fn send(&self, msg: M) -> Result<(), InboxError> {
        self.mark_sent_directly();
        self.send_from_bus(msg).await
    }

    /// [`Inbox::send`] by a bus (the stream's handoff still covers it).
    pub(crate) async fn send_from_bus(&self, msg: M) -> Result<(), InboxError> {
        match &self.target {
            Target::Channel { tx, signal, .. } => {
                if signal.is_set() {
                    return Err(InboxError::Closed);
                }
                // `Sender::send` inlined: awaiting it would build its future
                // (and drop it) on every event, where a publisher usually
                // finds room at once.
                match tx.try_send(msg) {
                    Ok(()) => Ok(()),
                    Err(TrySendError::Closed(_)) => Err(InboxError::Closed),
                    Err(TrySendError::Full(msg)) => {
                        let permit = tx.reserve().await.map_err(|_| InboxError::Closed)?;
                        permit.send(msg);
                        Ok(())
                    }
                }
            }
            Target::Sink(sink) => sink.deliver(msg).await,
        }
    }

    /// Whether the stream has ended (or was asked to complete).
    pub fn is_closed(&self) -> bool {
        match &self.target {
            Target::Channel { tx, signal, .. } => {
                signal.is_set() || signal.is_completed() || tx.is_closed()
            }
            Target::Sink(sink) => sink.is_closed(),
        }
    }

    /// Asks the stream to end gracefully with its completion result, as if its
    /// handler had returned [`crate::subscription::Flow::Stop`]: the client
    /// sees a normal end and may listen again. Events still in its mailbox are
    /// dropped. A Redis-backed [`crate::pubsub::Bus`] does this to the streams
    /// that depended on a lost connection.
    pub fn complete(&self) {
        match &self.target {
            Target::Channel { signal, .. } => signal.complete(),
            Target::Sink(sink) => sink.complete(),
        }
    }
}
