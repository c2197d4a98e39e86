//! The actor runtime: the only layer that knows actix.
//!
//! - [`Server`]: one per process; global limits, counters, the shutdown signal.
//! - [`Connection`]: one supervisor actor per client connection (for HTTP: the
//!   exchange whose response is the stream; for stdio: the pipe). It spawns,
//!   registers and deregisters its streams and stops them when the transport goes.
//! - [`Stream`]: one actor per `subscriptions/listen`; `started` runs
//!   `subscribe`, its message handler runs `handle_message`, `stopping` runs
//!   `handle_close` for teardown from the outside.
//! - [`Subscriber`] / [`Subscribers`]: streams fed by application actors (a
//!   stream's bounded inbox in the actix idiom, and the set an actor keeps).

mod connection;
mod conventions;
mod inbox;
mod listen;
mod operation;
mod requests;
mod server;
mod stream;
mod subscribers;

use std::time::Duration;

pub use connection::{
    CancelStream, CloseTransport, Connection, HoldsId, OpenStream, SpawnStream, StreamEnded,
    StreamSlot,
};
pub(crate) use conventions::version_label;
pub use conventions::{
    CANCELLED, DURATION_BUCKETS, MAX_SERIES, MAX_TOOL_LABEL_LEN, NetworkTransport, OTHER,
    OperationLabels, SessionLabels, TOOL_ERROR, code_label, error_type, operation_method_label,
    status_label,
};
pub(crate) use listen::spawn_legacy_stream;
pub use listen::{listen_filter, spawn_listen};
pub use operation::MAX_TARGET_LEN;
pub(crate) use operation::{Operation, OperationStart, Refusal, Refused};
pub use requests::{
    METHOD_LABELS, OTHER_METHOD, RequestOutcome, TIMED_OUT, duration_buckets, method_label,
};
pub(crate) use server::ReplyGuard;
pub use server::{Metrics, PrincipalOf, Server, StreamPermit};
pub(crate) use stream::{ChangeUri, SessionStreamControl, UriOutcome};
pub use stream::{Deliver, StopStream, Stream};
#[cfg(feature = "redis")]
pub(crate) use stream::{Probe, Settle};
pub use subscribers::{Subscriber, SubscriberKey, Subscribers};

/// Why a subscription stream ended. Counted per reason in [`Metrics`], by what
/// the client got: a final frame (completion result or error) that never left
/// the stream's spill counts as `Overflow` (the stall timeout) or as
/// `Disconnected` / `Cancelled`, not as the end the stream was heading for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseReason {
    /// The handler returned `Flow::Stop`, or nothing could be honoured: the client
    /// got the completion result.
    Completed,
    /// `subscribe` rejected the request: the client got an error, no stream opened.
    Rejected,
    /// The client went away (HTTP disconnect, stdin EOF).
    Disconnected,
    /// The client cancelled the listen (stdio `notifications/cancelled`).
    Cancelled,
    /// The server shut down: the client got the completion result.
    Shutdown,
    /// The client did not keep up (mailbox, outbox or spill full, or the outbox
    /// stayed full past the stall timeout): the stream was cut without a
    /// completion result, so the client knows to re-listen.
    Overflow,
    /// A handler callback panicked: the client got a `-32603` error.
    Panicked,
}

impl CloseReason {
    /// Every reason, in a fixed order.
    pub const ALL: [CloseReason; 7] = [
        CloseReason::Completed,
        CloseReason::Rejected,
        CloseReason::Disconnected,
        CloseReason::Cancelled,
        CloseReason::Shutdown,
        CloseReason::Overflow,
        CloseReason::Panicked,
    ];

    /// A stable lower-case name, for logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            CloseReason::Completed => "completed",
            CloseReason::Rejected => "rejected",
            CloseReason::Disconnected => "disconnected",
            CloseReason::Cancelled => "cancelled",
            CloseReason::Shutdown => "shutdown",
            CloseReason::Overflow => "overflow",
            CloseReason::Panicked => "panicked",
        }
    }

    /// Whether the teardown came from outside the handler, so `handle_close` runs:
    /// the client went away, cancelled or did not keep up (`Overflow`: the
    /// handler did not choose that end, and the state it joined to an event
    /// source needs the same cleanup), or the server shut down. A handler's own
    /// `Flow::Stop`, a rejection and a panic do not run it (the state is
    /// dropped).
    pub fn is_external(&self) -> bool {
        matches!(
            self,
            CloseReason::Disconnected
                | CloseReason::Cancelled
                | CloseReason::Shutdown
                | CloseReason::Overflow
        )
    }

    fn index(&self) -> usize {
        CloseReason::ALL.iter().position(|r| r == self).unwrap_or(0)
    }
}

/// The runtime's bounds. Every queue is bounded; each field says what happens when
/// its bound is hit.
///
/// ```
/// let limits = genmcp::runtime::Limits::default();
/// assert_eq!(limits.max_streams, 10_000);
/// assert_eq!(limits.mailbox_capacity, 64);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Limits {
    /// Open listen streams in the whole server (default 10,000). Past it a listen
    /// gets `-32603` "Subscription limit reached".
    pub max_streams: usize,
    /// Open listen streams per connection (default 256; matters for stdio, where
    /// one pipe carries many). Past it: `-32603` "Subscription limit reached".
    pub max_streams_per_connection: usize,
    /// Open listen streams (and 2025-era GET streams) per principal, or per
    /// client address for requests without one (default `None`: no limit
    /// besides `max_streams`; off by default because behind a proxy every
    /// anonymous client shares one address). Past it: HTTP 429 with
    /// `Retry-After: 1` and `-32603` "Too many open streams", `data.limit =
    /// "max_streams_per_principal"`; other principals are unaffected. The
    /// count drops when the stream ends, whatever ends it.
    pub max_streams_per_principal: Option<usize>,
    /// URIs in one `resourceSubscriptions` (default 1,024). Past it: `-32602`.
    pub max_resource_uris: usize,
    /// A stream's mailbox (default 64 messages). When an [`crate::pubsub::Inbox::try_send`]
    /// finds it full, the stream ends with [`CloseReason::Overflow`].
    pub mailbox_capacity: usize,
    /// A connection's outbox of encoded frames (default 64). A stream that finds it
    /// full spills into its own queue and pauses its mailbox until there is room.
    pub outbox_capacity: usize,
    /// A stream's spill queue (default 64 frames). Full: [`CloseReason::Overflow`].
    pub spill_limit: usize,
    /// How long a stream waits for outbox room before it gives up on the client
    /// (default 10 s): [`CloseReason::Overflow`].
    pub stall_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_streams: 10_000,
            max_streams_per_connection: 256,
            max_streams_per_principal: None,
            max_resource_uris: 1_024,
            mailbox_capacity: 64,
            outbox_capacity: 64,
            spill_limit: 64,
            stall_timeout: Duration::from_secs(10),
        }
    }
}
