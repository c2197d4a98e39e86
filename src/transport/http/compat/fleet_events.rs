//! The GET stream of a shared session with event ids that any node resumes:
//! the holder's pump appends each event to the session's Redis stream
//! ([`SharedSessions::append_event`]); each response, on whichever node the
//! client reached, reads that stream after its cursor and writes each event
//! with the `id:` `<tag>-0-<entry id>` (the tag derived from the session and
//! its principal, so an id of another session or principal names nothing
//! here).
//!
//! Redis failing: the holder stops the stream (an event it could not append
//! would be a silent gap), so its readers end, and a reconnection with
//! `Last-Event-ID` gets 410; a reader that cannot read ends its response
//! with a `retry` hint, and the client resumes after the last id it got.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream::unfold;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Compat;
use super::resumable::ReaderConfig;
use crate::compat::Fetched;
use crate::mux::OutboxReceiver;
use crate::runtime::Server;
use crate::transport::http::sse::sse_response_of;

/// How often a reader with nothing to write asks Redis again.
const POLL: Duration = Duration::from_millis(100);
/// Every how many empty polls a reader checks that its holder's node lives.
const HOLDER_CHECK: u32 = 50;
/// Entries read at once at most.
const MAX_EVENTS_PER_READ: usize = 256;
/// How often the holder's pump checks that the stream has a reader.
const IDLE_CHECK: Duration = Duration::from_millis(500);
const KEEPALIVE: &[u8] = b": keepalive\n\n";

/// The tag of a shared session's GET stream ids: the same on every node,
/// different for another session or principal.
pub(super) fn tag(sid: &str, principal: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(b"genmcp-events\0");
    h.update(sid.as_bytes());
    h.update(b"\0");
    h.update(principal.unwrap_or("").as_bytes());
    let digest = h.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `raw` has the shape of a shared GET stream id (`<tag>-0-<ms>-<n>`).
pub(super) fn is_fleet_id(raw: &str) -> bool {
    raw.split('-').count() == 4
}

/// The Redis entry id named by `raw` when its tag is `tag`.
pub(super) fn entry_of(tag: &str, raw: &str) -> Option<String> {
    let rest = raw.strip_prefix(tag)?.strip_prefix("-0-")?;
    let (ms, n) = rest.split_once('-')?;
    if ms.parse::<u64>().is_err() || n.parse::<u64>().is_err() {
        return None;
    }
    Some(format!("{ms}-{n}"))
}

/// Moves the GET stream's frames into the session's Redis stream until its
/// connection ends (`done`), Redis refuses an event, or no reader held the
/// stream for the resume window: then the outbox receiver is dropped (the
/// stream's actor stops, its holder is let go).
pub(super) fn spawn_pump(
    compat: Arc<Compat>,
    sid: String,
    expires: u64,
    mut rx: OutboxReceiver,
    mut done: oneshot::Receiver<()>,
) {
    actix_rt::spawn(async move {
        let Some(shared) = compat.shared.as_ref() else {
            return;
        };
        let bounds = *compat.events.bounds();
        let mut tick = tokio::time::interval(IDLE_CHECK);
        let mut idle_since: Option<Instant> = None;
        loop {
            tokio::select! {
                frame = rx.recv() => match frame {
                    Some(frame) if frame.is_revoked() || frame.is_empty() => {}
                    Some(frame) => {
                        let data = frame.to_bytes();
                        if let Err(error) = shared
                            .append_event(&sid, expires, &data, bounds.per_session_events)
                            .await
                        {
                            tracing::warn!(%error, "GET stream event not kept in Redis; the stream ends");
                            break;
                        }
                    }
                    None => break,
                },
                _ = &mut done => break,
                _ = tick.tick() => {
                    match shared.has_event_reader(&sid).await {
                        Ok(true) => idle_since = None,
                        Ok(false) => {
                            let since = *idle_since.get_or_insert_with(Instant::now);
                            if since.elapsed() >= bounds.resume_window {
                                break;
                            }
                        }
                        // Redis unreachable: the next append decides.
                        Err(_) => {}
                    }
                }
            }
        }
        drop(rx);
    });
}

struct State {
    compat: Arc<Compat>,
    sid: String,
    tag: String,
    reader: String,
    holder: String,
    cursor: String,
    opening: Option<Bytes>,
    retry: Bytes,
    keepalive_at: Instant,
    keep_alive: Duration,
    deadline: Option<Instant>,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    server: Server,
    empty_polls: u32,
    done: bool,
}

/// The SSE response reading the session's Redis stream after `cursor` (an
/// entry id) as `reader`, which claimed it while `holder` held the GET
/// stream.
#[allow(clippy::too_many_arguments)]
pub(super) fn response(
    compat: Arc<Compat>,
    sid: String,
    tag: String,
    (reader, holder): (String, String),
    cursor: String,
    config: ReaderConfig,
    server: Server,
) -> actix_web::HttpResponse {
    let retry_ms = config.retry.as_millis();
    let opening = if config.prime {
        Bytes::from(format!(
            "id: {tag}-0-{cursor}\nretry: {retry_ms}\ndata: \n\n"
        ))
    } else {
        Bytes::from_static(b": stream open\n\n")
    };
    let now = Instant::now();
    let state = State {
        compat,
        sid,
        tag,
        reader,
        holder,
        cursor,
        opening: Some(opening),
        retry: Bytes::from(format!("retry: {retry_ms}\n\n")),
        keepalive_at: now + config.keep_alive,
        keep_alive: config.keep_alive,
        deadline: config.max_duration.map(|d| now + d),
        shutdown: Box::pin(server.shutdown_signal()),
        server,
        empty_polls: 0,
        done: false,
    };
    sse_response_of(unfold(state, next))
}

fn end_with_retry(mut st: State) -> Option<(Result<Bytes, Infallible>, State)> {
    st.done = true;
    let retry = st.retry.clone();
    Some((Ok(retry), st))
}

async fn next(mut st: State) -> Option<(Result<Bytes, Infallible>, State)> {
    if st.done {
        return None;
    }
    if let Some(opening) = st.opening.take() {
        return Some((Ok(opening), st));
    }
    loop {
        let shared = st.compat.shared.as_ref()?;
        let read = shared
            .read_events(&st.sid, &st.cursor, &st.reader, MAX_EVENTS_PER_READ)
            .await;
        match read {
            // Redis cannot be read: end; the client resumes after the last
            // id it got (nothing is skipped).
            Err(_) => return end_with_retry(st),
            Ok(Fetched::Superseded) => return end_with_retry(st),
            // Events this client has not seen were trimmed: end; its
            // reconnection gets 410.
            Ok(Fetched::Gone) => return None,
            Ok(Fetched::Events { events, .. }) if !events.is_empty() => {
                let mut buf = BytesMut::new();
                for (id, data) in &events {
                    buf.extend_from_slice(b"id: ");
                    buf.extend_from_slice(st.tag.as_bytes());
                    buf.extend_from_slice(b"-0-");
                    buf.extend_from_slice(id.as_bytes());
                    buf.extend_from_slice(b"\nevent: message\ndata: ");
                    buf.extend_from_slice(data);
                    buf.extend_from_slice(b"\n\n");
                }
                if let Some((id, _)) = events.last() {
                    st.cursor = id.clone();
                }
                st.server.count_frames(events.len() as u64);
                st.empty_polls = 0;
                st.keepalive_at = Instant::now() + st.keep_alive;
                return Some((Ok(buf.freeze()), st));
            }
            Ok(Fetched::Events { holder, .. }) => {
                // Everything written, and the stream's holder let go (the
                // stream ended) or its node is gone: nothing more comes.
                if holder != st.holder {
                    return end_with_retry(st);
                }
                st.empty_polls = st.empty_polls.wrapping_add(1);
                if st.empty_polls.is_multiple_of(HOLDER_CHECK)
                    && matches!(shared.holder_alive(&st.holder).await, Ok(false))
                {
                    return end_with_retry(st);
                }
            }
        }
        let deadline = st.deadline;
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = tokio::time::sleep_until(st.keepalive_at) => {
                st.keepalive_at = Instant::now() + st.keep_alive;
                return Some((Ok(Bytes::from_static(KEEPALIVE)), st));
            }
            () = async { if let Some(at) = deadline { tokio::time::sleep_until(at).await } }, if deadline.is_some() => {
                return end_with_retry(st);
            }
            () = &mut st.shutdown => {
                return end_with_retry(st);
            }
        }
    }
}
