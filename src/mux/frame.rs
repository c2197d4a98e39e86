use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

/// One encoded JSON-RPC message on its way to the client.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The compact JSON text of exactly one message (no newline).
    pub bytes: Bytes,
    /// Whether this is the response that ends its request (and its HTTP exchange).
    pub last: bool,
    /// Set when the stream this frame belongs to was cancelled: writers skip it,
    /// so nothing more goes out for a cancelled subscription.
    pub(crate) revoked: Option<Arc<AtomicBool>>,
}

impl Frame {
    /// A notification frame.
    pub fn message(bytes: impl Into<Bytes>) -> Self {
        Frame {
            bytes: bytes.into(),
            last: false,
            revoked: None,
        }
    }

    /// A final response frame.
    pub fn last(bytes: impl Into<Bytes>) -> Self {
        Frame {
            bytes: bytes.into(),
            last: true,
            revoked: None,
        }
    }

    /// Whether the frame's stream was cancelled after the frame was queued.
    pub fn is_revoked(&self) -> bool {
        self.revoked
            .as_ref()
            .is_some_and(|r| r.load(Ordering::Acquire))
    }
}

/// The sending side of a connection's bounded outbox.
pub type Outbox = tokio::sync::mpsc::Sender<Frame>;
