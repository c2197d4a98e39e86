use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{BufMut, Bytes};

use super::SharedNotification;

/// What every frame of one listen stream shares: its subscription id as JSON
/// text, and the flag that revokes its queued frames (cancel).
#[derive(Debug)]
pub(crate) struct StreamTag {
    pub(crate) id_json: Box<[u8]>,
    pub(crate) revoked: AtomicBool,
    /// A 2025-era GET stream: notifications go out without a subscription id.
    pub(crate) legacy: bool,
}

#[derive(Clone, Debug)]
enum Body {
    Whole(Bytes),
    /// A fanned-out notification: its shared head, the stream's id, its tail.
    Shared(SharedNotification),
}

/// One encoded JSON-RPC message on its way to the client.
///
/// A frame of a fanned-out notification shares its encoded text with every
/// other stream that receives it and adds only its stream's pre-encoded
/// subscription id, written in between: queueing it allocates nothing and
/// costs two reference-count increments (the notification's and the stream's).
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
    body: Body,
    /// Whether this is the response that ends its request (and its HTTP exchange).
    pub last: bool,
    /// The stream's id and revocation flag (listen streams only).
    tag: Option<Arc<StreamTag>>,
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

    fn whole(bytes: Bytes, last: bool) -> Self {
        Frame {
            body: Body::Whole(bytes),
            last,
            tag: None,
        }
    }

    /// A notification frame of a listen stream: `notification`'s text with the
    /// stream's id spliced in.
    pub(crate) fn shared(notification: SharedNotification, tag: Arc<StreamTag>) -> Self {
        Frame {
            body: Body::Shared(notification),
            last: false,
            tag: Some(tag),
        }
    }

    /// Tags the frame with its stream (so a cancel can revoke it).
    pub(crate) fn tagged(mut self, tag: &Arc<StreamTag>) -> Self {
        self.tag = Some(tag.clone());
        self
    }

    /// The encoded length in bytes (the compact JSON text, no newline).
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Whole(bytes) => bytes.len(),
            Body::Shared(n) => match &self.tag {
                Some(tag) if tag.legacy => n.legacy().len(),
                tag => {
                    let (head, tail) = n.parts();
                    head.len() + tail.len() + tag.as_ref().map_or(0, |t| t.id_json.len())
                }
            },
        }
    }

    /// Whether the frame holds no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the message's JSON text to `buf`.
    pub fn write_to(&self, buf: &mut impl BufMut) {
        match &self.body {
            Body::Whole(bytes) => buf.put_slice(bytes),
            Body::Shared(n) => match &self.tag {
                Some(tag) if tag.legacy => buf.put_slice(n.legacy()),
                tag => {
                    let (head, tail) = n.parts();
                    buf.put_slice(head);
                    if let Some(tag) = tag {
                        buf.put_slice(&tag.id_json);
                    }
                    buf.put_slice(tail);
                }
            },
        }
    }

    /// The message's JSON text as one contiguous buffer (copies only when the
    /// frame is spliced).
    pub fn to_bytes(&self) -> Bytes {
        if let Body::Whole(bytes) = &self.body {
            return bytes.clone();
        }
        let mut out = Vec::with_capacity(self.len());
        self.write_to(&mut out);
        out.into()
    }

    /// Whether the frame's stream was cancelled after the frame was queued.
    pub fn is_revoked(&self) -> bool {
        self.tag
            .as_ref()
            .is_some_and(|t| t.revoked.load(Ordering::Acquire))
    }
}
