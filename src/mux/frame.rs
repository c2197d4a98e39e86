use bytes::Bytes;

/// One encoded JSON-RPC message on its way to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The compact JSON text of exactly one message (no newline).
    pub bytes: Bytes,
    /// Whether this is the response that ends its request (and its HTTP exchange).
    pub last: bool,
}

impl Frame {
    /// A notification frame.
    pub fn message(bytes: impl Into<Bytes>) -> Self {
        Frame {
            bytes: bytes.into(),
            last: false,
        }
    }

    /// A final response frame.
    pub fn last(bytes: impl Into<Bytes>) -> Self {
        Frame {
            bytes: bytes.into(),
            last: true,
        }
    }
}

/// The sending side of a connection's bounded outbox.
pub type Outbox = tokio::sync::mpsc::Sender<Frame>;
