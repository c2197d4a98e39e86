use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{BufMut, Bytes};

/// One encoded JSON-RPC message on its way to the client.
///
/// A frame is up to three shared byte slices written back to back: a frame of
/// a fanned-out notification shares its head and tail with every other stream
/// that receives it and adds only its own pre-encoded subscription id, so
/// queueing it allocates nothing (three reference-count increments).
///
/// ```
/// use genmcp::mux::Frame;
/// let frame = Frame::message(&b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}"[..]);
/// let mut out = Vec::new();
/// frame.write_to(&mut out);
/// assert_eq!(out, frame.to_bytes());
/// assert!(!frame.last);
/// ```
#[derive(Clone, Debug)]
pub struct Frame {
    head: Bytes,
    id: Bytes,
    tail: Bytes,
    /// Whether this is the response that ends its request (and its HTTP exchange).
    pub last: bool,
    /// Set when the stream this frame belongs to was cancelled: writers skip it,
    /// so nothing more goes out for a cancelled subscription.
    pub(crate) revoked: Option<Arc<AtomicBool>>,
}

impl Frame {
    /// A notification frame holding one whole message.
    pub fn message(bytes: impl Into<Bytes>) -> Self {
        Frame::whole(bytes.into(), false)
    }

    /// A final response frame holding one whole message.
    pub fn last(bytes: impl Into<Bytes>) -> Self {
        Frame::whole(bytes.into(), true)
    }

    fn whole(head: Bytes, last: bool) -> Self {
        Frame {
            head,
            id: Bytes::new(),
            tail: Bytes::new(),
            last,
            revoked: None,
        }
    }

    /// A notification frame spliced from a shared head, a stream's id and a
    /// shared tail.
    pub(crate) fn spliced(head: Bytes, id: Bytes, tail: Bytes) -> Self {
        Frame {
            head,
            id,
            tail,
            last: false,
            revoked: None,
        }
    }

    /// The encoded length in bytes (the compact JSON text, no newline).
    pub fn len(&self) -> usize {
        self.head.len() + self.id.len() + self.tail.len()
    }

    /// Whether the frame holds no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the message's JSON text to `buf`.
    pub fn write_to(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.head);
        buf.put_slice(&self.id);
        buf.put_slice(&self.tail);
    }

    /// The message's JSON text as one contiguous buffer (copies only when the
    /// frame is spliced).
    pub fn to_bytes(&self) -> Bytes {
        if self.id.is_empty() && self.tail.is_empty() {
            return self.head.clone();
        }
        let mut out = Vec::with_capacity(self.len());
        self.write_to(&mut out);
        out.into()
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
