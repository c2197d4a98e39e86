//! The SSE body of a streamed response: frames from the outbox, keep-alive
//! comments while idle, ending at the final frame or when the connection stops.

use std::convert::Infallible;
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::http::header;
use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use crate::mux::{Frame, OutboxReceiver};
use crate::queue::TIDY_AFTER;
use crate::runtime::Server;

/// Ready frames coalesced into one write at most.
const MAX_FRAMES_PER_CHUNK: usize = 1024;
/// Bytes coalesced into one write at most.
const MAX_CHUNK_BYTES: usize = 256 * 1024;

/// Capacity an idle stream's write buffer may keep between writes. A burst
/// grows the buffer up to `MAX_CHUNK_BYTES`; once the stream has had nothing
/// ready for [`TIDY_AFTER`], a buffer larger than this is let go (the
/// next write allocates afresh), and so is the storage the burst grew in the
/// outbox: memory comes back after a burst, while a stream that sends a frame
/// now and then keeps reusing one small buffer without allocating, and a
/// burst, whose writer parks between batches, reuses its buffer instead of
/// growing a new one each batch.
pub(crate) const IDLE_BUFFER_FLOOR: usize = 4 * 1024;

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
    /// capacity comes back once actix-web has sent it. It grows with what is
    /// ready rather than being reserved up front, so an idle stream holds
    /// next to nothing.
    buf: BytesMut,
    first: Option<Frame>,
    /// Written before anything else (a stream that has no first frame).
    greeting: Option<&'static [u8]>,
    done: Option<oneshot::Receiver<()>>,
    closing: bool,
    finished: bool,
    /// The keep-alive deadline, or, after a write that left grown storage,
    /// the time to give it back ([`TIDY_AFTER`] later; `tidy_due`).
    keepalive: Pin<Box<Sleep>>,
    tidy_due: bool,
    /// When the keep-alive is due: `interval` after the last write.
    keepalive_at: Instant,
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
        Self::start(Some(first), None, rx, done, interval, server, task)
    }

    /// A body with no first frame (a 2025-era GET stream): it opens with an SSE
    /// comment so the client sees the response head at once.
    pub(crate) fn opened(
        rx: OutboxReceiver,
        done: Option<oneshot::Receiver<()>>,
        interval: Duration,
        server: Server,
    ) -> Self {
        let greeting: &'static [u8] = b": stream open\n\n";
        Self::start(
            None,
            Some(greeting),
            rx,
            done,
            interval,
            server,
            AbortOnDrop(None),
        )
    }

    fn start(
        first: Option<Frame>,
        greeting: Option<&'static [u8]>,
        mut rx: OutboxReceiver,
        done: Option<oneshot::Receiver<()>>,
        interval: Duration,
        server: Server,
        task: AbortOnDrop,
    ) -> Self {
        // The body gives a burst's storage back on its own timer (`tidy`).
        rx.tidy_on_call();
        let keepalive_at = Instant::now() + interval;
        SseBody {
            rx,
            buf: BytesMut::new(),
            first,
            greeting,
            done,
            closing: false,
            finished: false,
            keepalive: Box::pin(tokio::time::sleep_until(keepalive_at)),
            tidy_due: false,
            keepalive_at,
            interval,
            server,
            _task: task,
        }
    }

    /// Appends a frame unless its stream was cancelled; returns whether it did.
    fn push(&mut self, frame: Frame) -> bool {
        // An empty frame asks a resumable 2025 stream to close for SSE
        // polling (`Channel::close_sse_stream`): nothing to write here.
        if frame.is_revoked() || (frame.is_empty() && !frame.last) {
            return false;
        }
        encode_event(&mut self.buf, &frame);
        if frame.last {
            self.finished = true;
        }
        true
    }

    /// Whether a burst left storage to give back.
    fn holds_grown(&self) -> bool {
        self.buf.capacity() > IDLE_BUFFER_FLOOR || self.rx.holds_grown_storage()
    }

    /// Gives back what a burst grew, once the stream is idle: the write
    /// buffer (the bytes still in flight keep their own share of it until
    /// they are sent) and the outbox's storage.
    fn tidy(&mut self) {
        if self.buf.capacity() > IDLE_BUFFER_FLOOR {
            self.buf = BytesMut::new();
        }
        self.rx.tidy();
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
        if let Some(greeting) = this.greeting.take() {
            return Poll::Ready(Some(Ok(Bytes::from_static(greeting))));
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
            let chunk = this.buf.split().freeze();
            // Storage left grown is given back once the stream has been idle
            // for TIDY_AFTER; a burst keeps moving that deadline on.
            let now = Instant::now();
            this.keepalive_at = now + this.interval;
            this.tidy_due = this.holds_grown() && TIDY_AFTER < this.interval;
            let at = if this.tidy_due {
                now + TIDY_AFTER
            } else {
                this.keepalive_at
            };
            this.keepalive.as_mut().reset(at);
            return Poll::Ready(Some(Ok(chunk)));
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
            this.tidy();
            if std::mem::take(&mut this.tidy_due) {
                // The keep-alive is still counted from the last write.
                let at = this.keepalive_at;
                this.keepalive.as_mut().reset(at);
                if this.keepalive.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            this.keepalive_at = Instant::now() + this.interval;
            let at = this.keepalive_at;
            this.keepalive.as_mut().reset(at);
            return Poll::Ready(Some(Ok(Bytes::from_static(KEEPALIVE))));
        }
        if !this.tidy_due && TIDY_AFTER < this.interval && this.holds_grown() {
            // Grown without a write that saw it (a chunk cut at its budget
            // just as the outbox emptied, a run of revoked frames): time the
            // give-back from now.
            let at = Instant::now() + TIDY_AFTER;
            if at < this.keepalive_at {
                this.tidy_due = true;
                this.keepalive.as_mut().reset(at);
                if this.keepalive.as_mut().poll(cx).is_ready() {
                    cx.waker().wake_by_ref();
                }
            }
        }
        Poll::Pending
    }
}

/// The HTTP response streaming `body` as Server-Sent Events.
pub(crate) fn sse_response(body: SseBody) -> HttpResponse {
    sse_response_of(body)
}

/// The HTTP response streaming any SSE byte stream.
pub(crate) fn sse_response_of<S>(body: S) -> HttpResponse
where
    S: Stream<Item = Result<Bytes, Infallible>> + 'static,
{
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache, no-transform"))
        .insert_header(("X-Accel-Buffering", "no"))
        .insert_header((header::CONTENT_ENCODING, "identity"))
        .streaming(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::outbox;
    use crate::runtime::Limits;
    use futures_util::{FutureExt, StreamExt};

    fn frame(n: usize) -> Frame {
        Frame::message(format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"n\":{n},\"pad\":\"{}\"}}}}",
            "x".repeat(256)
        ))
    }

    /// A body whose first frame is `frame(0)`, reading `rx`.
    fn body(rx: OutboxReceiver) -> SseBody {
        SseBody::new(
            frame(0),
            rx,
            None,
            Duration::from_secs(60),
            Server::new(Limits::default()),
            AbortOnDrop(None),
        )
    }

    #[actix_rt::test]
    async fn the_write_buffer_shrinks_back_to_the_floor_once_a_burst_is_written() {
        let (tx, rx) = outbox(2048);
        let mut body = body(rx);
        for n in 1..=1000 {
            tx.try_send(frame(n)).expect("room");
        }
        let mut written = 0;
        while written < 1001 {
            let chunk = body.next().await.expect("a chunk").expect("bytes");
            written += chunk.windows(6).filter(|w| w == b"data: ").count();
        }
        assert_eq!(written, 1001);
        assert!(
            body.buf.capacity() > IDLE_BUFFER_FLOOR,
            "the burst grew the buffer ({} bytes)",
            body.buf.capacity()
        );
        // Nothing ready: the body parks, keeping what the burst grew for the
        // burst's next batch.
        assert!(body.next().now_or_never().is_none(), "nothing is ready");
        assert!(body.rx.holds_grown_storage(), "the outbox grew");
        // Idle for TIDY_AFTER: the buffer and the outbox's storage go back.
        tokio::time::sleep(TIDY_AFTER + Duration::from_millis(50)).await;
        assert!(body.next().now_or_never().is_none(), "still nothing ready");
        assert!(
            body.buf.capacity() <= IDLE_BUFFER_FLOOR,
            "an idle stream keeps {} bytes of write buffer",
            body.buf.capacity()
        );
        assert!(!body.rx.holds_grown_storage(), "the outbox was tidied");
        // A lone frame later is written from a small buffer, which it keeps.
        tx.try_send(frame(2000)).expect("room");
        let chunk = body.next().await.expect("a chunk").expect("bytes");
        assert!(chunk.starts_with(b"event: message\ndata: "));
        assert!(body.next().now_or_never().is_none());
        assert!(body.buf.capacity() <= IDLE_BUFFER_FLOOR);
    }
}
