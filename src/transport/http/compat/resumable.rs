//! Resumable SSE responses of 2025 sessions: a pump moves a stream's frames
//! from its outbox into the session's event log ([`EventStore`]), and each
//! HTTP response is a reader of that log from a cursor on: a priming event
//! first (its id, a `retry` hint, empty data: 2025-11-25), then every event
//! with its `id:`. A reader ends with a `retry` hint when the server closes
//! the stream (`CompatConfig::max_stream_duration`, a drain, a tool asking
//! for SSE polling, a newer reader taking the stream over); the client
//! reconnects with `Last-Event-ID` and a new reader resumes after it.
//!
//! The stream outlives its responses: a GET stream's actor keeps running
//! without a reader for `CompatConfig::resume_window`, and a POST's request
//! runs to its end, its response kept for the same window.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use actix_web::HttpResponse;
use bytes::{Bytes, BytesMut};
use futures_util::stream::unfold;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::compat::{EventStore, LogKey, Read};
use crate::mux::OutboxReceiver;
use crate::runtime::{ReplyGuard, Server};
use crate::transport::http::sse::sse_response_of;

/// Events written in one chunk at most.
const MAX_EVENTS_PER_CHUNK: usize = 256;
/// How often a stream without a reader is checked against the resume window.
const IDLE_CHECK: Duration = Duration::from_millis(500);
const KEEPALIVE: &[u8] = b": keepalive\n\n";

/// A session's log key, owned (for tasks and bodies).
#[derive(Clone, Debug)]
pub(super) struct OwnedKey {
    pub(super) sid: String,
    pub(super) principal: Option<String>,
    pub(super) expires: u64,
}

impl OwnedKey {
    pub(super) fn key(&self) -> LogKey<'_> {
        LogKey {
            sid: &self.sid,
            principal: self.principal.as_deref(),
            expires: self.expires,
        }
    }
}

/// How a reader writes: the keep-alive interval, the `retry` hint, the
/// longest a response stays open, whether it opens with a priming event.
#[derive(Clone, Copy, Debug)]
pub(super) struct ReaderConfig {
    pub(super) keep_alive: Duration,
    pub(super) retry: Duration,
    pub(super) max_duration: Option<Duration>,
    /// 2025-11-25: a priming event (id, empty data); 2025-06-18 clients get
    /// an SSE comment instead.
    pub(super) prime: bool,
}

impl ReaderConfig {
    /// The pacing of one response: it opens with a priming event of id
    /// `priming_id` (or a comment), and ends with the `retry` hint.
    pub(super) fn pacing(&self, server: &Server, priming_id: impl FnOnce() -> String) -> Pacing {
        let retry_ms = self.retry.as_millis();
        let opening = if self.prime {
            Bytes::from(format!(
                "id: {}\nretry: {retry_ms}\ndata: \n\n",
                priming_id()
            ))
        } else {
            Bytes::from_static(b": stream open\n\n")
        };
        let now = Instant::now();
        Pacing {
            opening: Some(opening),
            retry: Bytes::from(format!("retry: {retry_ms}\n\n")),
            keepalive_at: now + self.keep_alive,
            keep_alive: self.keep_alive,
            deadline: self.max_duration.map(|d| now + d),
            shutdown: Box::pin(server.shutdown_signal()),
        }
    }
}

/// What paces a resumable response, whichever store it reads: its opening
/// frame, keep-alive comments, its longest life and the drain (both end it
/// with the `retry` hint).
pub(super) struct Pacing {
    /// The first frame, until it is sent.
    pub(super) opening: Option<Bytes>,
    retry: Bytes,
    /// When the next keep-alive comment is due.
    pub(super) keepalive_at: Instant,
    keep_alive: Duration,
    /// When the response ends with the `retry` hint (`--max-stream-duration`).
    pub(super) deadline: Option<Instant>,
    /// Resolves when the server drains.
    pub(super) shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Pacing {
    /// The `retry` hint that ends the response.
    pub(super) fn retry(&self) -> Bytes {
        self.retry.clone()
    }

    /// Something was written: the next keep-alive is a whole interval away.
    pub(super) fn wrote(&mut self) {
        self.keepalive_at = Instant::now() + self.keep_alive;
    }

    /// The keep-alive comment, due now (the next one a whole interval away).
    pub(super) fn keepalive(&mut self) -> Bytes {
        self.wrote();
        Bytes::from_static(KEEPALIVE)
    }
}

/// A burst of frames for one round trip to a store: `first`, then what is
/// already queued in `rx`, each mapped by `map` (`None`: skipped; `true`: the
/// burst ends after it), at most `max` of them. Also whether `rx` ended.
#[cfg(feature = "redis")]
pub(super) fn burst<T>(
    first: crate::mux::Frame,
    rx: &mut OutboxReceiver,
    max: usize,
    mut map: impl FnMut(&crate::mux::Frame) -> Option<(T, bool)>,
) -> (Vec<T>, bool) {
    use crate::queue::TryRecvError;
    let mut batch = Vec::new();
    let mut closed = false;
    let mut next = Some(first);
    while let Some(frame) = next.take() {
        if let Some((item, stop)) = map(&frame) {
            batch.push(item);
            if stop {
                break;
            }
        }
        if batch.len() >= max {
            break;
        }
        match rx.try_recv() {
            Ok(frame) => next = Some(frame),
            Err(TryRecvError::Disconnected) => closed = true,
            Err(TryRecvError::Empty) => {}
        }
    }
    (batch, closed)
}

/// Moves a stream's frames into the log until its outbox ends (a POST's
/// response, or `done` for a GET stream's connection), or, with `idle_limit`
/// (a GET stream), until it has had no reader that long: then the stream is
/// dropped from the log and the outbox receiver with it (the stream's actor
/// stops, its `handle_close` runs). A POST stream's response is kept for the
/// resume window once its request ended; a drain waits for its request
/// (`reply`) until then. Its handler's asking to close it for SSE polling
/// is honoured when `polling` (2025-11-25; a 2025-06-18 reply is not closed
/// before its response).
pub(super) fn spawn_pump(
    events: Arc<EventStore>,
    key: OwnedKey,
    (stream, reply, polling): (u64, Option<ReplyGuard>, bool),
    mut rx: OutboxReceiver,
    mut done: Option<oneshot::Receiver<()>>,
    idle_limit: Option<Duration>,
) {
    let window = events.bounds().resume_window;
    actix_rt::spawn(async move {
        let mut tick = tokio::time::interval(IDLE_CHECK);
        let mut ended = false;
        loop {
            tokio::select! {
                frame = rx.recv() => match frame {
                    Some(frame) if frame.is_revoked() => {}
                    // SSE polling asked for by the request's handler.
                    Some(frame) if frame.is_empty() && !frame.last => {
                        if polling {
                            events.close_reader(&key.key(), stream);
                        }
                    }
                    Some(frame) => {
                        let last = frame.last;
                        events.append(&key.key(), stream, frame.to_bytes(), last);
                        if last {
                            ended = true;
                            break;
                        }
                    }
                    None => break,
                },
                _ = async { if let Some(d) = done.as_mut() { let _ = d.await; } }, if done.is_some() => {
                    break;
                }
                _ = tick.tick() => {
                    if !events.holds(&key.key(), stream) {
                        break;
                    }
                    if let Some(limit) = idle_limit
                        && events.idle_for(&key.key(), stream).is_some_and(|d| d >= limit)
                    {
                        break;
                    }
                }
            }
        }
        drop(reply);
        if idle_limit.is_some() || !ended {
            // A GET stream (or a POST whose request gave no response): its
            // events go with it; its reader, if any, ends with a retry hint.
            events.remove(&key.key(), stream);
            drop(rx);
            return;
        }
        drop(rx);
        // The response stays for a reader until one wrote it (it then drops
        // the stream) or nobody came within the window.
        loop {
            tokio::time::sleep(IDLE_CHECK).await;
            let k = key.key();
            if !events.holds(&k, stream) {
                return;
            }
            if events.idle_for(&k, stream).is_some_and(|d| d >= window) {
                events.remove(&k, stream);
                return;
            }
        }
    });
}

/// One response reading a stream of the log; lets go of the stream when
/// dropped (the client left, or the body ended).
struct Reader {
    events: Arc<EventStore>,
    key: OwnedKey,
    stream: u64,
    reader: u64,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.events
            .detach(&self.key.key(), self.stream, self.reader);
    }
}

struct State {
    r: Reader,
    tag: String,
    cursor: u64,
    wake: watch::Receiver<u64>,
    pace: Pacing,
    server: Server,
    done: bool,
}

/// Writes one SSE event: its id (`id` joined by `-`), then `data` as an
/// `event: message` (no data: an event that only moves the client's
/// resumption point).
pub(super) fn write_event(buf: &mut BytesMut, id: &[&str], data: Option<&[u8]>) {
    buf.extend_from_slice(b"id: ");
    for (i, part) in id.iter().enumerate() {
        if i > 0 {
            buf.extend_from_slice(b"-");
        }
        buf.extend_from_slice(part.as_bytes());
    }
    match data {
        Some(data) => {
            buf.extend_from_slice(b"\nevent: message\ndata: ");
            buf.extend_from_slice(data);
        }
        None => buf.extend_from_slice(b"\ndata: "),
    }
    buf.extend_from_slice(b"\n\n");
}

/// The SSE response reading `stream` after `cursor` (the caller attached the
/// reader `reader` and holds its wake receiver `wake`).
#[allow(clippy::too_many_arguments)]
pub(super) fn response(
    events: Arc<EventStore>,
    key: OwnedKey,
    (stream, tag): (u64, String),
    (reader, wake): (u64, watch::Receiver<u64>),
    cursor: u64,
    config: ReaderConfig,
    server: Server,
) -> HttpResponse {
    let pace = config.pacing(&server, || EventStore::id(&tag, stream, cursor));
    let state = State {
        r: Reader {
            events,
            key,
            stream,
            reader,
        },
        tag,
        cursor,
        wake,
        pace,
        server,
        done: false,
    };
    sse_response_of(unfold(state, next))
}

/// The next chunk of a reader's response, or its end.
async fn next(mut st: State) -> Option<(Result<Bytes, Infallible>, State)> {
    if st.done {
        return None;
    }
    if let Some(opening) = st.pace.opening.take() {
        return Some((Ok(opening), st));
    }
    loop {
        let read = st.r.events.read(
            &st.r.key.key(),
            st.r.stream,
            st.r.reader,
            st.cursor,
            MAX_EVENTS_PER_CHUNK,
        );
        match read {
            // Events this client has not seen were dropped (it could not
            // keep up): end; its reconnection gets the documented answer.
            Err(_) => return None,
            Ok(Read::Events(list)) => {
                let mut buf = BytesMut::new();
                let mut finished = false;
                for e in &list {
                    let id = EventStore::id(&st.tag, st.r.stream, e.seq);
                    write_event(&mut buf, &[&id], Some(&e.data));
                    st.cursor = e.seq;
                    if e.last {
                        finished = true;
                        break;
                    }
                }
                st.server.count_frames(list.len() as u64);
                // The response ends the POST stream's body. It stays kept for
                // the resume window: this client may not have read it (a
                // write to a connection that is already gone succeeds).
                st.done |= finished;
                st.pace.wrote();
                return Some((Ok(buf.freeze()), st));
            }
            // Resumed at (or past) the response: the reply is complete.
            Ok(Read::Finished) => {
                st.done = true;
                return None;
            }
            Ok(Read::Superseded | Read::Ended) => {
                st.done = true;
                let retry = st.pace.retry();
                return Some((Ok(retry), st));
            }
            Ok(Read::Wait) => {}
        }
        let deadline = st.pace.deadline;
        tokio::select! {
            changed = st.wake.changed() => {
                if changed.is_err() {
                    // The stream was dropped (its session ended, or its GET
                    // stream stopped).
                    st.done = true;
                    let retry = st.pace.retry();
                    return Some((Ok(retry), st));
                }
            }
            () = tokio::time::sleep_until(st.pace.keepalive_at) => {
                return Some((Ok(st.pace.keepalive()), st));
            }
            () = async { if let Some(at) = deadline { tokio::time::sleep_until(at).await } }, if deadline.is_some() => {
                st.done = true;
                let retry = st.pace.retry();
                return Some((Ok(retry), st));
            }
            () = &mut st.pace.shutdown => {
                st.done = true;
                let retry = st.pace.retry();
                return Some((Ok(retry), st));
            }
        }
    }
}
