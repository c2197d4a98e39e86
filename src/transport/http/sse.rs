//! The SSE body of a streamed response: frames from the outbox, keep-alive
//! comments while idle, ending at the final frame or when the connection stops.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use crate::mux::{Frame, OutboxReceiver};
use crate::runtime::Server;

/// Ready frames coalesced into one write at most.
const MAX_FRAMES_PER_CHUNK: usize = 1024;
/// Bytes coalesced into one write at most.
const MAX_CHUNK_BYTES: usize = 256 * 1024;

const KEEPALIVE: &[u8] = b": keepalive\n\n";
const EVENT_HEAD: &[u8] = b"event: message\ndata: ";

/// Appends one frame as an SSE event.
pub(crate) fn encode_event(buf: &mut BytesMut, frame: &Frame) {
    buf.reserve(EVENT_HEAD.len() + frame.len() + 2);
    buf.extend_from_slice(EVENT_HEAD);
    frame.write_to(buf);
    buf.extend_from_slice(b"\n\n");
}

/// Aborts a spawned task when dropped (client gone: stop the work).
pub(crate) struct AbortOnDrop(pub(crate) Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// The body stream of an SSE response.
pub(crate) struct SseBody {
    rx: OutboxReceiver,
    /// Reused between writes: each write takes the filled part, and the
    /// capacity comes back once actix-web has sent it. It grows only as far as
    /// the frames written need (an idle stream keeps just its acknowledgement's
    /// worth, not a fixed reserve), then keeps that size.
    buf: BytesMut,
    first: Option<Frame>,
    done: Option<oneshot::Receiver<()>>,
    closing: bool,
    finished: bool,
    keepalive: Pin<Box<Sleep>>,
    interval: Duration,
    server: Server,
    _task: AbortOnDrop,
}

impl SseBody {
    pub(crate) fn new(
        first: Frame,
        rx: OutboxReceiver,
        done: Option<oneshot::Receiver<()>>,
        interval: Duration,
        server: Server,
        task: AbortOnDrop,
    ) -> Self {
        SseBody {
            rx,
            buf: BytesMut::new(),
            first: Some(first),
            done,
            closing: false,
            finished: false,
            keepalive: Box::pin(tokio::time::sleep(interval)),
            interval,
            server,
            _task: task,
        }
    }

    /// Appends a frame unless its stream was cancelled; returns whether it did.
    fn push(&mut self, frame: Frame) -> bool {
        if frame.is_revoked() {
            return false;
        }
        encode_event(&mut self.buf, &frame);
        if frame.last {
            self.finished = true;
        }
        true
    }
}

impl Stream for SseBody {
    type Item = Result<Bytes, Infallible>;

    /// One wake-up, one write: every ready frame (up to a bound) goes into the
    /// reused buffer and out as one chunk. Revoked frames are neither written
    /// nor counted, and an empty chunk (which would end a chunked body) is
    /// never yielded.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.finished {
            return Poll::Ready(None);
        }
        let mut frames = 0u64;
        if let Some(first) = this.first.take()
            && this.push(first)
        {
            frames += 1;
        }
        let mut taken = 0;
        let mut empty = false;
        while !this.finished && taken < MAX_FRAMES_PER_CHUNK && this.buf.len() < MAX_CHUNK_BYTES {
            match this.rx.poll_recv(cx) {
                Poll::Ready(Some(frame)) => {
                    taken += 1;
                    if this.push(frame) {
                        frames += 1;
                    }
                }
                Poll::Ready(None) => {
                    this.closing = true;
                    break;
                }
                Poll::Pending => {
                    empty = true;
                    break;
                }
            }
        }
        if !empty && !this.finished && !this.closing && frames == 0 {
            // A long run of revoked frames filled the budget: come back for the
            // rest before looking at the end signal or a keep-alive.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if frames > 0 {
            this.server.count_frames(frames);
            let interval = this.interval;
            this.keepalive.as_mut().reset(Instant::now() + interval);
            return Poll::Ready(Some(Ok(this.buf.split().freeze())));
        }
        if this.closing {
            return Poll::Ready(None);
        }
        if let Some(done) = this.done.as_mut()
            && Pin::new(done).poll(cx).is_ready()
        {
            // The connection stopped without a final frame (overflow, panic after
            // the stream was cut): end the body once nothing is left to read.
            this.done = None;
            this.closing = true;
            return Poll::Ready(None);
        }
        if this.keepalive.as_mut().poll(cx).is_ready() {
            let interval = this.interval;
            this.keepalive.as_mut().reset(Instant::now() + interval);
            return Poll::Ready(Some(Ok(Bytes::from_static(KEEPALIVE))));
        }
        Poll::Pending
    }
}

use std::future::Future as _;
