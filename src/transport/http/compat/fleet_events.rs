//! The GET stream of a shared session with event ids that any node resumes:
//! the holder's pump (`fleet_pump`) appends each event to the session's
//! Redis stream; each response, on whichever node the
//! client reached, reads that stream after its cursor and writes each event
//! with the `id:` `<tag>-0-<entry id>` (the tag derived from the session and
//! its principal, so an id of another session or principal names nothing
//! here).
//!
//! A response that ends (its client left, or it closed with a `retry` hint)
//! lets go of the stream at once; the pump then counts the session against
//! no bound for its stream (it is history being recorded, not a live
//! stream) and stops it after the resume window unless a reader claims it
//! again (counting it again).
//!
//! Redis failing: the holder stops the stream (an event it could not append
//! would be a silent gap), so its readers end, and a reconnection with
//! `Last-Event-ID` gets 410; a reader that cannot read ends its response
//! with a `retry` hint, and the client resumes after the last id it got.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream::unfold;
use sha2::{Digest, Sha256};

use super::Compat;
use super::resumable::{Pacing, ReaderConfig, write_event};
use crate::compat::{Claim, Fetched, StateKey};
use crate::runtime::Server;
use crate::transport::http::sse::sse_response_of;

/// How often a reader with nothing to write asks Redis again.
const POLL: Duration = Duration::from_millis(100);
/// Every how many empty polls a reader checks that its holder's node lives.
const HOLDER_CHECK: u32 = 50;
/// Entries read at once at most.
const MAX_EVENTS_PER_READ: usize = 256;

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

/// A session as the pump and its readers name it in Redis.
#[derive(Clone)]
pub(super) struct Owned {
    pub(super) sid: String,
    pub(super) owner: String,
    pub(super) expires: u64,
}

impl Owned {
    pub(super) fn key(&self) -> StateKey<'_> {
        StateKey {
            sid: &self.sid,
            owner: &self.owner,
            expires: self.expires,
        }
    }
}

struct State {
    compat: Arc<Compat>,
    session: Owned,
    tag: String,
    reader: String,
    holder: String,
    cursor: String,
    pace: Pacing,
    server: Server,
    empty_polls: u32,
    done: bool,
}

impl Drop for State {
    /// The response is over (its client left, or it ended): the reader lets
    /// go of the stream at once, so that the session stops counting for it.
    fn drop(&mut self) {
        let (compat, sid, reader) = (
            self.compat.clone(),
            self.session.sid.clone(),
            self.reader.clone(),
        );
        actix_rt::spawn(async move {
            if let Some(shared) = compat.shared.as_ref() {
                shared.leave_events(&sid, &reader).await;
            }
        });
    }
}

/// The SSE response reading the session's Redis stream after `cursor` (an
/// entry id) as `reader`, which claimed it while `holder` held the GET
/// stream. It ends with a `retry` hint once the holder offers the stream
/// (its node drains) and everything was written: the client's
/// reconnection takes the stream over.
pub(super) fn response(
    compat: Arc<Compat>,
    (session, tag): (Owned, String),
    (reader, holder): (String, String),
    cursor: String,
    config: ReaderConfig,
    server: Server,
) -> actix_web::HttpResponse {
    let pace = config.pacing(&server, || format!("{tag}-0-{cursor}"));
    let state = State {
        compat,
        session,
        tag,
        reader,
        holder,
        cursor,
        pace,
        server,
        empty_polls: 0,
        done: false,
    };
    sse_response_of(unfold(state, next))
}

fn end_with_retry(mut st: State) -> Option<(Result<Bytes, Infallible>, State)> {
    st.done = true;
    let retry = st.pace.retry();
    Some((Ok(retry), st))
}

/// A reader whose hold lapsed claims the stream again from its cursor:
/// whether it may go on.
async fn reclaim(st: &State) -> bool {
    let Some(shared) = st.compat.shared.as_ref() else {
        return false;
    };
    let claimed = shared
        .claim_events(
            &st.session.key(),
            Some(&st.cursor),
            &st.reader,
            (true, false),
        )
        .await;
    matches!(claimed, Ok(Claim::Claimed { .. }))
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
            .read_events(&st.session.sid, &st.cursor, &st.reader, MAX_EVENTS_PER_READ)
            .await;
        match read {
            // Redis cannot be read: end; the client resumes after the last
            // id it got (nothing is skipped).
            Err(_) | Ok(Fetched::Superseded) => return end_with_retry(st),
            // This node was paused past the hold: take it again (or end, and
            // the client's reconnection gets the answer).
            Ok(Fetched::Lapsed) => {
                if !reclaim(&st).await {
                    return end_with_retry(st);
                }
                continue;
            }
            // Events this client has not seen were dropped: end; its
            // reconnection gets 410.
            Ok(Fetched::Gone) => {
                st.done = true;
                return None;
            }
            Ok(Fetched::Events { events, last, .. }) if !events.is_empty() => {
                let mut buf = BytesMut::new();
                for (id, data) in &events {
                    write_event(&mut buf, &[&st.tag, "0", id], Some(data));
                }
                st.cursor = last;
                st.server.count_frames(events.len() as u64);
                st.empty_polls = 0;
                st.pace.wrote();
                return Some((Ok(buf.freeze()), st));
            }
            Ok(Fetched::Events {
                holder,
                last,
                offered,
                ..
            }) => {
                st.cursor = last;
                // Everything written, and the stream's holder let go (the
                // stream ended) or its node is gone: nothing more comes.
                // Or it drains: the reconnection takes the stream over.
                if holder != st.holder || offered {
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
        let deadline = st.pace.deadline;
        tokio::select! {
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
