//! The per-request handle user code talks back to the client through.
//!
//! A [`Channel`] is created for every request. On a unary request it carries
//! request-scoped notifications (progress, log messages) ahead of the response; on
//! a `subscriptions/listen` stream it carries the subscription notifications,
//! stamped with the listen id and checked against the honoured filter. It never
//! writes to a socket: it puts encoded [`Frame`]s into the bounded outbox of its
//! connection, and the transport drains that.

mod assigns;
mod channel;
mod frame;
mod principal;
mod shared;

pub use assigns::Assigns;
pub use channel::{Channel, ChannelError};
pub use frame::Frame;
pub use principal::{ClientAddr, Principal};
pub(crate) use principal::{LimitKey, limit_key};

/// The sending side of a connection's bounded outbox of frames.
pub type Outbox = crate::queue::Sender<Frame>;
/// The receiving side of a connection's outbox: the transport's writer.
pub type OutboxReceiver = crate::queue::Receiver<Frame>;

/// A connection's outbox of at most `capacity` frames.
pub fn outbox(capacity: usize) -> (Outbox, OutboxReceiver) {
    crate::queue::bounded(capacity)
}
pub use shared::SharedNotification;
