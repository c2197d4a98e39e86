//! `GET` and `DELETE` of a 2025-era session.
//!
//! `GET` opens the session's notification stream: the same [`Stream`] actor a
//! `subscriptions/listen` gets, under its own connection supervisor, with the
//! filter "everything this server advertises" plus the session's
//! `resources/subscribe` URIs, on a channel that sends no acknowledgement, no
//! subscription ids and no completion result. One GET stream per session: a
//! second one, while the first is open, gets 409 (as the TypeScript SDK does),
//! so every notification goes out on exactly one stream.
//!
//! The stream is a [`LegacyStream`] kept in the session's store entry.
//! `resources/subscribe` / `unsubscribe` restart its actor in place (the HTTP
//! response stays open): the new actor is started with the new filter, so the
//! handler's `subscribe` sees the exact URI set, and then the old one is
//! stopped (its `handle_close` runs). `DELETE` stops the stream (its
//! `handle_close` runs) and ends the session.
//!
//! [`Stream`]: crate::runtime::Stream

use actix::Actor as _;
use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::resumable::{self, OwnedKey};
use super::session::{SESSION_HEADER_NAME, Session};
use super::{AppState, Compat, LEGACY_VERSIONS, SessionRefused, refusal, session_of};
#[cfg(feature = "redis")]
use super::{fleet_events, fleet_post};
use crate::compat::{
    EventId, EventStore, GET_STREAM, LegacyStream, Reservation, Reserve, Resume,
    encode_legacy_error,
};
use crate::mux::{Assigns, Channel, outbox};
use crate::protocol::{McpError, RequestId};
use crate::runtime::{CloseReason, Connection, StopStream};
use crate::subscription::SubscriptionHandler;
use crate::transport::http::headers::{self, PROTOCOL_VERSION_HEADER};
use crate::transport::http::reply::{overloaded, with_retry_after};
use crate::transport::http::sse::{SseBody, sse_response};

fn not_allowed() -> HttpResponse {
    HttpResponse::MethodNotAllowed()
        .insert_header((header::ALLOW, "POST"))
        .finish()
}

/// What GET and DELETE pass, as a POST does: the server's admission.
struct Admitted {
    compat: std::sync::Arc<Compat>,
    session: Session,
    assigns: Assigns,
    /// Held until the GET's stream is set up (an open stream then counts
    /// against the stream limits instead), or until the DELETE is done.
    permit: OwnedSemaphorePermit,
}

/// A refusal for a session-state error: 429 with `Retry-After` for a limit
/// of the principal, 503 otherwise.
pub(super) fn state_refusal(error: &McpError) -> HttpResponse {
    let status = if error.retry_after().is_some() {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let resp = HttpResponse::build(status)
        .content_type("application/json")
        .body(encode_legacy_error(None, &error.to_error_object()));
    with_retry_after(resp, error)
}

/// The refusal of a GET whose session's stream could not be reserved (409
/// while it is open elsewhere, 404 once DELETEd), or `None` when reserved.
pub(super) fn not_reserved(reserved: Result<Reserve, McpError>) -> Option<HttpResponse> {
    match reserved {
        Ok(Reserve::Reserved) => None,
        Ok(Reserve::Busy) => Some(refusal(
            StatusCode::CONFLICT,
            -32600,
            "Conflict: this session already has an open GET stream",
        )),
        Ok(Reserve::Deleted) => Some(session_gone()),
        Err(e) => Some(state_refusal(&e)),
    }
}

pub(super) fn session_gone() -> HttpResponse {
    refusal(
        StatusCode::NOT_FOUND,
        -32600,
        "Session not found: initialize a new session",
    )
}

/// What GET and DELETE check first, in the POST's order: Host and Origin
/// (403), a session header (without one: 400 for a client naming a 2025
/// version, otherwise 405 as for any 2026-07-28 client), the in-flight limit
/// (503), authentication (401), the version it names (400), the session
/// (404).
async fn admit<H: SubscriptionHandler>(
    req: &HttpRequest,
    state: &AppState<H>,
) -> Result<Admitted, HttpResponse> {
    let config = &state.config;
    if let Err(why) = headers::check_host_and_origin(req, &config.allowed_hosts) {
        return Err(refusal(
            StatusCode::FORBIDDEN,
            -32600,
            &format!("Forbidden: {why}"),
        ));
    }
    let Some(compat) = state.compat.clone() else {
        return Err(not_allowed());
    };
    if !req.headers().contains_key(&SESSION_HEADER_NAME) {
        let legacy = req
            .headers()
            .get(&PROTOCOL_VERSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| LEGACY_VERSIONS.contains(&v.trim()));
        return Err(if legacy {
            refusal(
                StatusCode::BAD_REQUEST,
                -32600,
                "Bad Request: Mcp-Session-Id header is required",
            )
        } else {
            not_allowed()
        });
    }
    let Ok(permit) = state.in_flight.clone().try_acquire_owned() else {
        return Err(overloaded());
    };
    let assigns = crate::transport::http::auth::admit(req, state).await?;
    // Every request after `initialize` names a version the server serves
    // (none: 2025-03-26 is assumed, as the 2025 rules say), as on POST.
    if let Some(version) = req
        .headers()
        .get(&PROTOCOL_VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or_default().trim())
        && !LEGACY_VERSIONS.contains(&version)
    {
        return Err(super::unsupported_legacy_version(version));
    }
    let session = match session_of(req, state, &compat, &assigns).await {
        Ok(s) => s,
        Err(SessionRefused::Http(resp)) => return Err(resp),
        Err(SessionRefused::Unavailable(e)) => return Err(state_refusal(&e)),
    };
    Ok(Admitted {
        compat,
        session,
        assigns,
        permit,
    })
}

/// `GET /mcp` with a session: the session's notification stream.
pub(in crate::transport::http) async fn get<H: SubscriptionHandler>(
    req: HttpRequest,
    state: web::Data<AppState<H>>,
) -> HttpResponse {
    let Admitted {
        compat,
        session,
        assigns,
        permit,
    } = match admit(&req, &state).await {
        Ok(a) => a,
        Err(resp) => return resp,
    };
    if !headers::accepts(req.headers(), "text/event-stream") {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            -32600,
            "Not Acceptable: the GET stream answers with text/event-stream",
        );
    }
    let last_event_id = match req.headers().get(LAST_EVENT_ID) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(v) => Some(v.trim().to_owned()),
            Err(_) => return not_ours(),
        },
    };
    let log = OwnedKey {
        sid: session.sid.clone(),
        principal: session.principal.clone(),
        expires: session.expires,
    };
    let events = compat.events.clone();
    // A POST stream's resumption (its rest, its response last) whatever the
    // GET stream offers: a server with nothing to stream on GET (405) still
    // resumes the replies of its tool calls.
    #[cfg(feature = "redis")]
    if compat.shared.is_some() {
        let tag = fleet_events::tag(&session.sid, session.principal.as_deref());
        if let Some((token, entry)) = last_event_id
            .as_deref()
            .and_then(|raw| fleet_post::post_of(&tag, raw))
        {
            let post = fleet_post::PostStream {
                sid: session.sid.clone(),
                expires: session.expires,
                tag,
                token: token.to_owned(),
            };
            return fleet_post::resume(
                compat.clone(),
                (post, entry),
                reply_config(&state, &compat, &session),
                (state.server.clone(), &session.owner),
                permit,
            )
            .await;
        }
    }
    if let Some(Resume::At(at)) = last_event_id
        .as_deref()
        .map(|raw| events.resolve(&log.key(), raw))
        && at.stream != GET_STREAM
    {
        return resume(&state, &compat, &session, log, at, permit);
    }
    let mut meta = match session.init.meta(None, None) {
        Ok((_, m)) => m,
        Err(e) => return refusal(StatusCode::BAD_REQUEST, e.code(), &e.to_string()),
    };
    // The stream's span takes its parent from the GET's `traceparent` and
    // `tracestate` headers (as a listen's does when its `_meta` has none).
    headers::trace_into_meta(&req, &mut meta.extra);
    let server = &state.server;
    let (tx, rx) = outbox(server.limits().outbox_capacity);
    let probe = Channel::for_request(
        RequestId::Number(0),
        meta.clone(),
        assigns.clone(),
        tx.clone(),
    );
    let advertised = state.suite.subscription_capabilities(&probe).any();
    drop(probe);
    if !advertised {
        // Nothing to stream: 2025-11-25 allows 405 for GET.
        return not_allowed();
    }
    // With a bus, every id is the fleet's: any node resumes the GET stream
    // and the POST streams from Redis.
    #[cfg(feature = "redis")]
    if compat.shared.is_some() {
        let config = reader_config(&state, &compat, &session);
        if !last_event_id
            .as_deref()
            .is_none_or(fleet_events::is_fleet_id)
        {
            return not_ours();
        }
        return super::fleet::get(
            &state,
            compat,
            &session,
            (assigns, meta, config),
            last_event_id,
            (tx, rx),
            permit,
        )
        .await;
    }
    let resume_from = match last_event_id.as_deref() {
        None => None,
        Some(raw) => match events.resolve(&log.key(), raw) {
            Resume::NotOurs => return not_ours(),
            Resume::Gone => return gone(&events),
            // A POST stream's (handled above, unless it just went).
            Resume::At(at) if at.stream != GET_STREAM => return gone(&events),
            Resume::At(at) => Some(at.seq),
        },
    };
    let key = session.key();
    let generation = compat.next_generation();
    match compat.sessions.reserve_get(&key, generation) {
        Ok(Reserve::Busy) => {
            // The session's stream runs on: a reader takes it over when the
            // client resumes it, or when it has none (its client went away).
            if resume_from.is_none() && events.has_reader(&log.key(), GET_STREAM) {
                return not_reserved(Ok(Reserve::Busy)).unwrap_or_else(session_gone);
            }
            let Some(tag) = events.tag(&log.key()) else {
                return not_reserved(Ok(Reserve::Busy)).unwrap_or_else(session_gone);
            };
            let cursor = resume_from.unwrap_or_else(|| events.position(&log.key()));
            let Some(reader) = events.attach(&log.key(), GET_STREAM) else {
                return not_reserved(Ok(Reserve::Busy)).unwrap_or_else(session_gone);
            };
            drop(permit);
            return resumable::response(
                events,
                log,
                (GET_STREAM, tag),
                reader,
                cursor,
                reader_config(&state, &compat, &session),
                server.clone(),
            );
        }
        Ok(Reserve::Reserved) if resume_from.is_some() => {
            // The stream that id was of has ended: what followed it is gone.
            compat.sessions.release_get(&key, generation);
            return gone(&events);
        }
        reserved => {
            if let Some(refused) = not_reserved(reserved) {
                return refused;
            }
        }
    }
    let reservation = Reservation {
        store: &compat.sessions,
        session: key,
        generation,
    };
    let (done_tx, done_rx) = oneshot::channel();
    let connection = Connection::exchange(server.clone(), tx.clone(), done_tx).start();
    let version =
        crate::runtime::version_label(&session.init.version, crate::compat::LEGACY_VERSIONS);
    let mut stream = LegacyStream::new(connection, tx, meta, assigns, version);
    let uris = compat.sessions.uris(&key);
    let id = RequestId::String(format!("get-{generation}"));
    let started = match stream.start(&state.suite, server, uris, id).await {
        Ok(Some(started)) => started,
        Ok(None) => return not_allowed(),
        // A limit of the principal: 429 with `Retry-After`; else 503.
        Err(e) => return state_refusal(&e),
    };
    let stop = started.stop.clone();
    stream.install(started);
    let committed = compat.sessions.commit_get(&key, generation, stream);
    drop(reservation);
    if !committed {
        // DELETEd while the stream was being opened: the stream must not
        // outlive the session (its handle_close runs, as for a DELETE).
        let _ = stop.send(StopStream(CloseReason::Disconnected)).await;
        return session_gone();
    }
    drop(permit);
    // The session's previous GET stream may still be being let go (its
    // connection ended, its pump not yet past it): its events and ids must
    // not carry over into this one.
    let previous = events.until_dropped(&log.key(), GET_STREAM);
    if tokio::time::timeout(PREVIOUS_STREAM_WAIT, previous)
        .await
        .is_err()
    {
        tracing::warn!(
            "the session's previous GET stream is still kept; this one is served without event ids"
        );
    }
    let tag = format!("{:016x}", state.suite.sealer().nonce());
    let opened = events
        .open(&log.key(), Some(GET_STREAM), tag)
        .and_then(|opened| {
            let cursor = events.position(&log.key());
            events
                .attach(&log.key(), GET_STREAM)
                .map(|r| (opened, r, cursor))
        });
    let Some((opened, reader, cursor)) = opened else {
        // No room for another session's events: served without ids (a
        // reconnection opens the stream again).
        tracing::warn!(
            "2025 stream served without event ids: max_session_states session logs are kept, none without a stream"
        );
        return sse_response(SseBody::opened(
            rx,
            Some(done_rx),
            state.config.keep_alive,
            server.clone(),
        ));
    };
    resumable::spawn_pump(
        events.clone(),
        log.clone(),
        (GET_STREAM, None, false),
        rx,
        Some(done_rx),
        Some(events.bounds().resume_window),
    );
    resumable::response(
        events,
        log,
        opened,
        reader,
        cursor,
        reader_config(&state, &compat, &session),
        server.clone(),
    )
}

/// The `Last-Event-ID` header.
const LAST_EVENT_ID: &str = "last-event-id";

/// How long a new GET stream waits for the session's previous one, whose
/// connection ended, to be let go (its pump does at its next turn).
const PREVIOUS_STREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How the responses of `session` are written.
pub(super) fn reader_config<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
) -> resumable::ReaderConfig {
    resumable::ReaderConfig {
        keep_alive: state.config.keep_alive,
        retry: compat.config.retry,
        max_duration: compat.config.max_stream_duration,
        prime: session.init.version.as_str() >= "2025-11-25",
    }
}

/// How the POST replies of `session` are written, first or resumed: as
/// [`reader_config`], but a 2025-06-18 reply is not closed at the longest
/// stream duration (the server should not close it before its response).
pub(super) fn reply_config<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
) -> resumable::ReaderConfig {
    let mut config = reader_config(state, compat, session);
    if !config.prime {
        config.max_duration = None;
    }
    config
}

/// A `Last-Event-ID` that names no event of this session's streams.
pub(super) fn not_ours() -> HttpResponse {
    refusal(
        StatusCode::BAD_REQUEST,
        -32600,
        "Bad Request: Last-Event-ID does not name an event of this session's streams; \
         nothing is replayed (open the GET stream without it)",
    )
}

/// A `Last-Event-ID` of this session whose events are no longer all kept.
pub(super) fn gone(events: &EventStore) -> HttpResponse {
    let b = events.bounds();
    refusal(
        StatusCode::GONE,
        -32600,
        &format!(
            "Gone: the events after this Last-Event-ID are no longer kept (at most {} events \
             and {} bytes per session, for {} s after a stream's client left); open the GET \
             stream without Last-Event-ID and read the state again",
            b.per_session_events,
            b.per_session_bytes,
            b.resume_window.as_secs()
        ),
    )
}

/// GET with the `Last-Event-ID` of a POST stream: its remaining events,
/// ending with its response.
fn resume<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
    log: OwnedKey,
    at: EventId,
    permit: OwnedSemaphorePermit,
) -> HttpResponse {
    let events = compat.events.clone();
    let stream = at.stream;
    let Some(tag) = events.tag(&log.key()) else {
        return gone(&events);
    };
    let Some(reader) = events.attach(&log.key(), stream) else {
        return gone(&events);
    };
    drop(permit);
    // Primed with the id it resumes from (2025-11-25): a client whose
    // resumption is closed before anything more came can resume again.
    let config = reply_config(state, compat, session);
    resumable::response(
        events,
        log,
        (stream, tag),
        reader,
        at.seq,
        config,
        state.server.clone(),
    )
}

/// `DELETE /mcp` with a session: ends its GET stream (`handle_close` runs) and
/// the session (its id answers 404 from now on).
pub(in crate::transport::http) async fn delete<H: SubscriptionHandler>(
    req: HttpRequest,
    state: web::Data<AppState<H>>,
) -> HttpResponse {
    let Admitted {
        compat,
        session,
        permit,
        ..
    } = match admit(&req, &state).await {
        Ok(a) => a,
        Err(resp) => return resp,
    };
    // With shared sessions the end is recorded by whichever of this DELETE
    // (or another one) and the session's expiry claims it first (the DELETE
    // claims it in the same step as it deletes).
    let deleted = match &compat.shared {
        Some(shared) => shared
            .delete(&session.key())
            .await
            .map(|d| (d.local, d.ends, d.confirmed)),
        None => compat
            .sessions
            .delete(&session.key())
            // Only the DELETE that deleted it records its end (another one,
            // racing, finds it deleted already).
            .map(|(first, live)| (live, first, Ok(()))),
    };
    let (live, ends, confirmed) = match deleted {
        Ok(d) => d,
        Err(e) => return state_refusal(&e),
    };
    compat.events.remove_session(&session.sid);
    // On one node the clock decides between this DELETE and the expiry;
    // shared, the claim in Redis did.
    let clocked = compat.clock.ended(&session.sid, session.expires);
    if ends && (clocked || compat.shared.is_some()) {
        record_session_end(&state.server, &compat.config.session_ttl, &session);
    }
    // A stream held here ends whatever another node confirmed.
    if let Some(running) = live.as_ref().and_then(LegacyStream::running) {
        let _ = running
            .stop
            .send(StopStream(CloseReason::Disconnected))
            .await;
    }
    if let Err(e) = confirmed {
        return state_refusal(&e);
    }
    drop(permit);
    HttpResponse::Ok().finish()
}

/// `mcp.server.session.duration` of a session its client ended: from its
/// `initialize` (its token's expiry less the session TTL) to now. A session
/// left to expire is recorded by the endpoint's `SessionClock` instead (with
/// shared sessions, the one of the two that claims the end first records it).
fn record_session_end(
    server: &crate::runtime::Server,
    ttl: &std::time::Duration,
    session: &Session,
) {
    let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let started = session.expires.saturating_sub(ttl);
    let took = crate::suite::sealing::seal::now_ms().saturating_sub(started);
    server.record_session(
        crate::runtime::SessionLabels {
            kind: "session",
            error_type: "",
            transport: crate::runtime::NetworkTransport::Tcp,
            version: crate::runtime::version_label(
                &session.init.version,
                crate::compat::LEGACY_VERSIONS,
            ),
        },
        std::time::Duration::from_millis(took),
    );
}

/// Restarts the session's GET stream actor with the session's current URIs:
/// the new actor first, then the old one is stopped (its `handle_close` runs;
/// frames it already queued still go out). An error when the new actor could
/// not be opened: the old one keeps running with its earlier filter.
pub(super) async fn restart<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
    live: &LegacyStream,
) -> Result<(), McpError> {
    let key = session.key();
    let uris = compat.sessions.uris(&key);
    let id = RequestId::String(format!("get-{}", compat.next_generation()));
    let started = live.start(&state.suite, &state.server, uris, id).await;
    let stop = started.inspect_err(|error| {
        tracing::debug!(%error, "GET stream not restarted; it keeps its earlier filter");
    })?;
    if let Some(old) = stop.and_then(|stop| compat.sessions.swap_get_stream(&key, live, stop)) {
        let _ = old.stop.send(StopStream(CloseReason::Cancelled)).await;
    }
    Ok(())
}
