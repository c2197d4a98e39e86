//! The POST SSE replies of a shared session with event ids that any node
//! resumes: the node running the request appends each frame to the session's
//! POST history in Redis ([`SharedSessions::append_post`]); its own response,
//! and a resumption (`GET` with `Last-Event-ID`) on whichever node the
//! client reached, read that history after their cursor and write each event
//! with the `id:` `<tag>-<token>-<entry id>` (the tag derived from the
//! session and its principal, the token random per POST stream), the
//! response last, then the body ends.
//!
//! The request runs to its end after its client left (a disconnect is not a
//! cancel in 2025); its writer renews a lease while it runs, so a reader
//! whose writer's node died (or lost Redis) ends instead of waiting, and the
//! client's resumption then gets 410. Nothing is skipped silently: an event
//! that cannot be appended ends the history (the writer gives up), and a
//! reader whose read fails ends with a `retry` hint after the last id it
//! wrote.
//!
//! [`SharedSessions::append_post`]: crate::compat::SharedSessions::append_post

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use actix_web::HttpResponse;
use bytes::{Bytes, BytesMut};
use futures_util::stream::unfold;
use tokio::sync::{OwnedSemaphorePermit, watch};

use super::Compat;
use super::get_stream::{gone, not_ours, session_gone, state_refusal};
use super::resumable::{Pacing, ReaderConfig, burst, write_event};
use crate::compat::{PostBounds, PostCheck, PostFetched, PostKind, PostOpened, PostWrite, Writer};
use crate::mux::{Frame, OutboxReceiver};
use crate::runtime::{ReplyGuard, Server, StreamPermit};
use crate::transport::http::sse::sse_response_of;

/// How often a reader with nothing to write asks Redis again (the local
/// reader is also woken by each append).
const POLL: Duration = Duration::from_millis(100);
/// Entries scanned at once at most.
const MAX_ENTRIES_PER_READ: usize = 256;
/// Frames appended to Redis in one round trip at most.
const MAX_FRAMES_PER_APPEND: usize = 64;
/// How often the writer renews its lease while its request runs.
const RENEW: Duration = Duration::from_millis(500);

/// A POST stream of a shared session, as its writer and readers name it.
#[derive(Clone, Debug)]
pub(super) struct PostStream {
    /// The session's id.
    pub(super) sid: String,
    /// Its expiry (ms since the epoch): the history never outlives it.
    pub(super) expires: u64,
    /// The ids' tag (the session and its principal).
    pub(super) tag: String,
    /// The stream's random token.
    pub(super) token: String,
}

impl PostStream {
    fn id(&self, entry: &str) -> String {
        format!("{}-{}-{entry}", self.tag, self.token)
    }
}

/// The token and entry id a POST stream's `Last-Event-ID` names, when it
/// has the shape `<tag>-<token>-<ms>-<n>` with this session's `tag` and a
/// POST stream's token (16 hex digits).
pub(super) fn post_of<'a>(tag: &str, raw: &'a str) -> Option<(&'a str, String)> {
    let rest = raw.strip_prefix(tag)?.strip_prefix('-')?;
    let (token, entry) = rest.split_once('-')?;
    if token.len() != 16 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (ms, n) = entry.split_once('-')?;
    if ms.parse::<u64>().is_err() || n.parse::<u64>().is_err() {
        return None;
    }
    Some((token, format!("{ms}-{n}")))
}

/// The bounds of a session's POST history: the same as its in-memory log's.
fn bounds(compat: &Compat) -> PostBounds {
    let b = compat.events.bounds();
    PostBounds {
        max_events: b.per_session_events,
        max_bytes: b.per_session_bytes,
        resume_window: b.resume_window,
    }
}

/// Serves a POST's SSE reply through the session's history in Redis: opens
/// it, moves `first` and every later frame of `rx` into it, and answers with
/// a reader of it. The frames back when the history could not be opened
/// (Redis unreachable, the fleet's bound reached, the session deleted): the
/// caller answers without ids.
pub(super) async fn serve(
    compat: Arc<Compat>,
    post: PostStream,
    (first, rx): (Frame, OutboxReceiver),
    config: ReaderConfig,
    server: Server,
) -> Result<HttpResponse, (Frame, OutboxReceiver)> {
    let Some(shared) = compat.shared.as_ref() else {
        return Err((first, rx));
    };
    let writer = shared.writer_name(compat.next_generation());
    let opened = shared
        .open_post(&post.sid, &post.token, &writer, post.expires)
        .await;
    let cursor = match opened {
        Ok(PostOpened::Opened(cursor)) => cursor,
        Ok(PostOpened::Full) => {
            tracing::warn!(
                "2025 POST stream served without event ids: the fleet keeps max_session_states sessions' POST histories"
            );
            return Err((first, rx));
        }
        Ok(PostOpened::Deleted) => {
            tracing::debug!("2025 POST stream of a deleted session served without event ids");
            return Err((first, rx));
        }
        Err(error) => {
            tracing::warn!(%error, "2025 POST stream served without event ids: its history could not be kept in Redis");
            return Err((first, rx));
        }
    };
    let (wake_tx, wake_rx) = watch::channel(());
    let reply = server.hold_reply();
    // 2025-06-18 has no SSE polling: its replies are not closed before
    // their response (the priming event is 2025-11-25's too).
    spawn_pump(
        compat.clone(),
        post.clone(),
        (writer.clone(), reply, config.prime),
        (first, rx),
        wake_tx,
    );
    let reader = Reader {
        // The reply's own response reads as its writer (named so in OPEN).
        name: writer,
        wake: Some(wake_rx),
        _permit: None,
    };
    Ok(response(compat, post, cursor, config, server, reader))
}

/// What a frame becomes in the history (`None`: nothing, it was revoked,
/// or it asks for a close for SSE polling where there is none).
fn kind_of(frame: &Frame, polling: bool) -> Option<PostKind> {
    if frame.is_revoked() || (frame.is_empty() && !frame.last && !polling) {
        None
    } else if frame.last {
        Some(PostKind::Last)
    } else if frame.is_empty() {
        // SSE polling asked for by the request's handler.
        Some(PostKind::Close)
    } else {
        Some(PostKind::Message)
    }
}

/// Moves the stream's frames into its history as `writer` until its response
/// is appended, renewing the writer's lease meanwhile. When a frame cannot
/// be appended (Redis, a deleted session, a lapsed lease) or the request
/// ends without a response, the writer gives up: readers end and a
/// resumption is a gap. Each append wakes the local reader. A drain waits
/// for it (`reply`), so a request running when the drain began writes its
/// response for a client resuming it elsewhere.
fn spawn_pump(
    compat: Arc<Compat>,
    post: PostStream,
    (writer, reply, polling): (String, ReplyGuard, bool),
    (first, mut rx): (Frame, OutboxReceiver),
    wake: watch::Sender<()>,
) {
    actix_rt::spawn(async move {
        let Some(shared) = compat.shared.as_ref() else {
            return;
        };
        let bounds = bounds(&compat);
        let who = (post.sid.as_str(), post.token.as_str(), writer.as_str());
        let mut renew = tokio::time::interval(RENEW);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next = Some(first);
        let mut answered = false;
        'pump: loop {
            let frame = match next.take() {
                Some(frame) => frame,
                None => tokio::select! {
                    frame = rx.recv() => match frame {
                        Some(frame) => frame,
                        None => break,
                    },
                    _ = renew.tick() => {
                        match shared.tick_post(who, post.expires).await {
                            Ok(PostWrite::Kept) | Err(_) => continue,
                            Ok(PostWrite::Deleted | PostWrite::Lost) => break,
                        }
                    }
                },
            };
            // What is queued goes in one round trip (a burst keeps up), the
            // response last.
            let (batch, closed) = burst(frame, &mut rx, MAX_FRAMES_PER_APPEND, |frame| {
                kind_of(frame, polling)
                    .map(|kind| ((kind, frame.to_bytes()), kind == PostKind::Last))
            });
            if !batch.is_empty() {
                let last = batch.iter().any(|(k, _)| *k == PostKind::Last);
                match shared.append_post(who, post.expires, &batch, bounds).await {
                    Ok(PostWrite::Kept) => {
                        wake.send_replace(());
                        if last {
                            answered = true;
                            break 'pump;
                        }
                    }
                    Ok(PostWrite::Deleted) => {
                        tracing::debug!("POST stream of a deleted session: it ends");
                        break;
                    }
                    Ok(PostWrite::Lost) => {
                        tracing::warn!(
                            "POST stream's lease lapsed (Redis or this node stalled): it ends"
                        );
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "POST stream events not kept in Redis; the stream ends");
                        break;
                    }
                }
            }
            if closed {
                break;
            }
        }
        drop(rx);
        if !answered {
            shared.give_up_post(&post.sid, &post.token, &writer).await;
        }
        wake.send_replace(());
        drop(reply);
    });
}

/// How a reader is woken, and what it counts against.
struct Reader {
    /// Its name in Redis: the reply's one reader at a time (a newer one
    /// takes over, this one then ends with a `retry` hint).
    name: String,
    /// Each append on the writer's node (`None` elsewhere: it polls).
    wake: Option<watch::Receiver<()>>,
    /// A resumption's slot among the streams (the reply's own response is
    /// counted as its request).
    _permit: Option<StreamPermit>,
}

struct State {
    compat: Arc<Compat>,
    post: PostStream,
    cursor: String,
    pace: Pacing,
    server: Server,
    reader: Reader,
    done: bool,
}

/// The SSE response reading POST stream `post` after `cursor` (an entry id),
/// its priming event (2025-11-25) naming `cursor`.
fn response(
    compat: Arc<Compat>,
    post: PostStream,
    cursor: String,
    config: ReaderConfig,
    server: Server,
    reader: Reader,
) -> HttpResponse {
    let pace = config.pacing(&server, || post.id(&cursor));
    let state = State {
        compat,
        post,
        cursor,
        pace,
        server,
        reader,
        done: false,
    };
    sse_response_of(unfold(state, next))
}

fn end_with_retry(mut st: State) -> Option<(Result<Bytes, Infallible>, State)> {
    st.done = true;
    let retry = st.pace.retry();
    Some((Ok(retry), st))
}

async fn next(mut st: State) -> Option<(Result<Bytes, Infallible>, State)> {
    if st.done {
        return None;
    }
    if let Some(opening) = st.pace.opening.take() {
        return Some((Ok(opening), st));
    }
    loop {
        let shared = st.compat.shared.as_ref()?;
        let read = shared
            .read_post(
                (&st.post.sid, &st.post.token),
                (&st.cursor, &st.reader.name),
                MAX_ENTRIES_PER_READ,
            )
            .await;
        let (writer, last, events) = match read {
            // Redis cannot be read: end; the client resumes after the last
            // id it got (nothing is skipped). Or the client resumed the
            // reply elsewhere: this response ends.
            Err(_) | Ok(PostFetched::Superseded) => return end_with_retry(st),
            // Events this client has not seen were dropped: end; its
            // reconnection gets 410.
            Ok(PostFetched::Gone) => {
                st.done = true;
                return None;
            }
            Ok(PostFetched::Events {
                writer,
                last,
                events,
            }) => (writer, last, events),
        };
        if !events.is_empty() {
            let mut buf = BytesMut::new();
            let mut written = 0u64;
            let mut cursor = last;
            for e in &events {
                let id = [st.post.tag.as_str(), st.post.token.as_str(), e.id.as_str()];
                match e.kind {
                    PostKind::Message | PostKind::Last => {
                        write_event(&mut buf, &id, Some(&e.data));
                        written += 1;
                    }
                    PostKind::Close => {
                        // Closed for SSE polling: the client resumes after
                        // this id (an event with an id and no data).
                        write_event(&mut buf, &id, None);
                        buf.extend_from_slice(&st.pace.retry());
                    }
                }
                if e.kind != PostKind::Message {
                    // The response ends the body; so does a close.
                    st.done = true;
                    cursor.clone_from(&e.id);
                    break;
                }
            }
            st.cursor = cursor;
            st.server.count_frames(written);
            st.pace.wrote();
            return Some((Ok(buf.freeze()), st));
        }
        let scanned = last != st.cursor;
        st.cursor = last;
        if scanned {
            // Entries of the session's other POST streams: read on.
            continue;
        }
        match writer {
            Writer::Writing => {}
            // Everything of it was written before this cursor (the
            // response included), or its writer gave up: nothing more
            // comes; a resumption gets the documented answer.
            Writer::Ended | Writer::Lost => {
                st.done = true;
                return None;
            }
        }
        let deadline = st.pace.deadline;
        let wake = st.reader.wake.as_mut();
        let woken = async move {
            match wake {
                Some(wake) => wake.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            alive = woken => {
                if !alive {
                    // The writer is done: read what it left, then end.
                    st.reader.wake = None;
                }
            }
            () = tokio::time::sleep(POLL) => {}
            () = tokio::time::sleep_until(st.pace.keepalive_at) => {
                return Some((Ok(st.pace.keepalive()), st));
            }
            () = async { if let Some(at) = deadline { tokio::time::sleep_until(at).await } }, if deadline.is_some() => {
                return end_with_retry(st);
            }
            () = &mut st.pace.shutdown => {
                return end_with_retry(st);
            }
        }
    }
}

/// `GET` with the `Last-Event-ID` of a shared session's POST stream, on any
/// node: the rest of that stream, its response last. It opens with a
/// priming event naming that id (2025-11-25), so a client whose resumption
/// is closed before anything more came still has an id to resume from. The
/// reader takes a slot among `owner`'s streams (429 or 503 past the
/// limits).
pub(super) async fn resume(
    compat: Arc<Compat>,
    (post, entry): (PostStream, String),
    config: ReaderConfig,
    (server, owner): (Server, &str),
    permit: OwnedSemaphorePermit,
) -> HttpResponse {
    let Some(shared) = compat.shared.as_ref() else {
        return not_ours();
    };
    // Asked first (a bad id is refused whatever the limits), then the slot,
    // then taken over from the reply's reader (a refused resumption leaves
    // the reader that runs alone).
    let answer = |check| match check {
        Ok(PostCheck::Resumable) => None,
        Ok(PostCheck::Deleted) => Some(session_gone()),
        Ok(PostCheck::NotOurs) => Some(not_ours()),
        Ok(PostCheck::Gone) => Some(gone(&compat.events)),
        Err(e) => Some(state_refusal(&e)),
    };
    let asked = shared
        .check_post(&post.sid, &post.token, (&entry, ""))
        .await;
    if let Some(refused) = answer(asked) {
        return refused;
    }
    let slot = match server.try_open_stream_for(Some(owner)) {
        Ok(slot) => slot,
        Err(e) => return state_refusal(&e),
    };
    let name = shared.reader_name(compat.next_generation());
    let taken = shared
        .check_post(&post.sid, &post.token, (&entry, &name))
        .await;
    if let Some(refused) = answer(taken) {
        return refused;
    }
    drop(permit);
    let reader = Reader {
        name,
        wake: None,
        _permit: Some(slot),
    };
    response(compat, post, entry, config, server, reader)
}

#[cfg(test)]
mod tests {
    use super::post_of;

    #[test]
    fn a_post_streams_id_is_read_back_and_others_are_not() {
        let tag = "0123456789abcdef";
        let token = "fedcba9876543210";
        let raw = format!("{tag}-{token}-1700000000000-3");
        assert_eq!(
            post_of(tag, &raw),
            Some((token, "1700000000000-3".to_owned()))
        );
        // The GET stream's ids, another tag, a short token, a bad entry.
        assert_eq!(post_of(tag, &format!("{tag}-0-1-2")), None);
        assert_eq!(post_of("ffffffffffffffff", &raw), None);
        assert_eq!(post_of(tag, &format!("{tag}-abc-1-2")), None);
        assert_eq!(post_of(tag, &format!("{tag}-{token}-x-2")), None);
        assert_eq!(post_of(tag, &format!("{tag}-{token}-1")), None);
        assert_eq!(post_of(tag, &format!("{tag}-{token}-1-2-3")), None);
    }
}
