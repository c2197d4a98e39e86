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
mod outbox;
mod shared;

pub use assigns::Assigns;
pub use channel::{Channel, ChannelError};
pub use frame::Frame;
pub use outbox::{Closed as OutboxClosed, Outbox, OutboxReceiver, Permit, outbox};
pub use shared::SharedNotification;
