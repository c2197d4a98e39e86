use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{BufMut, Bytes};

use super::SharedNotification;

/// What every frame of one listen stream shares: its subscription id as JSON
/// text, and the flags that revoke its queued frames.
///
/// Every frame of the stream holds a reference to its tag, so the tag's
/// reference count tells whether frames of the stream are still queued (see
/// `Channel::frames_in_flight`).
#[derive(Debug)]
pub(crate) struct StreamTag {
    pub(crate) id_json: Box<[u8]>,
    /// Set on a cancel and on an overflow cut: the stream's queued
    /// notifications are skipped by the writer.
    pub(crate) revoked: AtomicBool,
    /// Set on a cancel only: its final frame (completion result or error) is
    /// skipped too. An overflow cut keeps its final error: the client must
    /// learn that the id ended, unless it cancelled it.
    pub(crate) cancelled: AtomicBool,
    /// A 2025-era GET stream: notifications go out without a subscription id.
    pub(crate) legacy: bool,
}

#[derive(Clone, Debug)]
enum Body {
    /// One whole message; tagged when it belongs to a listen stream.
    Whole(Bytes, Option<Arc<StreamTag>>),
    /// A fanned-out notification: its shared head, the stream's id, its tail.
    /// The tag is not optional: without the id in between, head and tail are
    /// not JSON.
    Shared(SharedNotification, Arc<StreamTag>),
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
            body: Body::Whole(bytes, None),
            last,
        }
    }

    /// A notification frame of a listen stream: `notification`'s text with the
    /// stream's id spliced in.
    pub(crate) fn shared(notification: SharedNotification, tag: Arc<StreamTag>) -> Self {
        Frame {
            body: Body::Shared(notification, tag),
            last: false,
        }
    }

    /// Tags the frame with its stream (so a cancel can revoke it).
    pub(crate) fn tagged(mut self, tag: &Arc<StreamTag>) -> Self {
        match &mut self.body {
            Body::Whole(_, slot) => *slot = Some(tag.clone()),
            Body::Shared(_, slot) => *slot = tag.clone(),
        }
        self
    }

    fn tag(&self) -> Option<&Arc<StreamTag>> {
        match &self.body {
            Body::Whole(_, tag) => tag.as_ref(),
            Body::Shared(_, tag) => Some(tag),
        }
    }

    /// The encoded length in bytes (the compact JSON text, no newline).
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Whole(bytes, _) => bytes.len(),
            Body::Shared(n, tag) if tag.legacy => n.legacy().len(),
            Body::Shared(n, tag) => {
                let (head, tail) = n.parts();
                head.len() + tag.id_json.len() + tail.len()
            }
        }
    }

    /// Whether the frame holds no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the message's JSON text to `buf`.
    #[inline]
    pub fn write_to(&self, buf: &mut impl BufMut) {
        match &self.body {
            Body::Whole(bytes, _) => buf.put_slice(bytes),
            Body::Shared(n, tag) if tag.legacy => buf.put_slice(n.legacy()),
            Body::Shared(n, tag) => {
                let (head, tail) = n.parts();
                buf.put_slice(head);
                buf.put_slice(&tag.id_json);
                buf.put_slice(tail);
            }
        }
    }

    /// The message's JSON text as one contiguous buffer (copies only when the
    /// frame is spliced).
    pub fn to_bytes(&self) -> Bytes {
        if let Body::Whole(bytes, _) = &self.body {
            return bytes.clone();
        }
        let mut out = Vec::with_capacity(self.len());
        self.write_to(&mut out);
        out.into()
    }

    /// Whether the writer must skip this frame: its stream was cancelled after
    /// it was queued, or (for a notification) cut for overflow.
    pub fn is_revoked(&self) -> bool {
        self.tag().is_some_and(|t| {
            if self.last {
                t.cancelled.load(Ordering::Acquire)
            } else {
                t.revoked.load(Ordering::Acquire)
            }
        })
    }
}
