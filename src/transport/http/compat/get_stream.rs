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
//! `resources/subscribe` / `unsubscribe` restart the stream actor in place (the
//! HTTP response stays open): the new actor is started with the new filter,
//! so the handler's `subscribe` sees the exact URI set, and then the old one is
//! stopped (its `handle_close` runs). `DELETE` stops the stream (its
//! `handle_close` runs) and ends the session.
//!
//! [`Stream`]: crate::runtime::Stream

use actix::Actor as _;
use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::session::{SESSION_HEADER, Session};
use super::store::{LiveGet, Reservation, Reserve};
use super::{AppState, Compat, LEGACY_VERSIONS, refusal, request_meta, session_of};
use crate::mux::{Assigns, Channel, outbox};
use crate::protocol::{McpError, RequestId, SubscriptionCapabilities, SubscriptionFilter};
use crate::runtime::{CloseReason, Connection, StopStream, spawn_legacy_stream};
use crate::subscription::SubscriptionHandler;
use crate::transport::http::headers::{self, PROTOCOL_VERSION};
use crate::transport::http::sse::SseBody;

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
fn state_refusal(error: &McpError) -> HttpResponse {
    let status = if error.retry_after().is_some() {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let resp = HttpResponse::build(status)
        .content_type("application/json")
        .body(super::encode_legacy_error(None, &error.to_error_object()));
    crate::transport::http::auth::with_retry_after(resp, error)
}

fn session_gone() -> HttpResponse {
    refusal(
        StatusCode::NOT_FOUND,
        -32600,
        "Session not found: initialize a new session",
    )
}

/// What GET and DELETE check first, in the POST's order: Host and Origin
/// (403), a session header (without one: 400 for a client naming a 2025
/// version, otherwise 405 as for any 2026-07-28 client), the in-flight limit
/// (503), authentication (401), the session (404).
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
    if !req.headers().contains_key(SESSION_HEADER) {
        let legacy = req
            .headers()
            .get(PROTOCOL_VERSION)
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
        return Err(crate::transport::http::post::overloaded());
    };
    let assigns = crate::transport::http::auth::admit(req, state).await?;
    let session = session_of(req, state, &compat, &assigns)?;
    Ok(Admitted {
        compat,
        session,
        assigns,
        permit,
    })
}

/// The GET stream's filter: every kind the server advertises, plus the
/// session's subscribed URIs when resource updates are advertised.
fn filter(caps: &SubscriptionCapabilities, uris: Vec<String>) -> SubscriptionFilter {
    crate::compat::legacy_filter(caps, uris)
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
    let meta = match request_meta(&session, None, None) {
        Ok((m, _)) => m,
        Err(e) => return refusal(StatusCode::BAD_REQUEST, e.code(), &e.to_string()),
    };
    let server = &state.server;
    let (tx, rx) = outbox(server.limits().outbox_capacity);
    let probe = Channel::for_request(
        RequestId::Number(0),
        meta.clone(),
        assigns.clone(),
        tx.clone(),
    );
    let caps = state.suite.subscription_capabilities(&probe);
    drop(probe);
    if !caps.any() {
        // Nothing to stream: 2025-11-25 allows 405 for GET.
        return not_allowed();
    }
    let generation = compat.next_generation();
    match compat.sessions.reserve_get(&session, generation) {
        Ok(Reserve::Reserved) => {}
        Ok(Reserve::Busy) => {
            return refusal(
                StatusCode::CONFLICT,
                -32600,
                "Conflict: this session already has an open GET stream",
            );
        }
        Ok(Reserve::Deleted) => return session_gone(),
        Err(e) => return state_refusal(&e),
    }
    let reservation = Reservation {
        store: &compat.sessions,
        session: &session,
        generation,
    };
    let (done_tx, done_rx) = oneshot::channel();
    let connection = Connection::exchange(server.clone(), tx.clone(), done_tx).start();
    let uris = compat.sessions.uris(&session);
    let opened = spawn_legacy_stream(
        &state.suite,
        server,
        &connection,
        tx.clone(),
        RequestId::String(format!("get-{generation}")),
        meta.clone(),
        assigns.clone(),
        filter(&caps, uris),
        false,
    )
    .await;
    let stop = match opened {
        Ok(stop) => stop,
        Err(e) => {
            let status = if e.retry_after().is_some() {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            let resp = refusal(status, e.code(), &e.to_string());
            return crate::transport::http::auth::with_retry_after(resp, &e);
        }
    };
    let committed = compat.sessions.commit_get(
        &session,
        generation,
        LiveGet {
            connection,
            outbox: tx,
            stop: stop.clone(),
            meta,
            assigns,
        },
    );
    drop(reservation);
    if !committed {
        // DELETEd while the stream was being opened: the stream must not
        // outlive the session (its handle_close runs, as for a DELETE).
        let _ = stop.send(StopStream(CloseReason::Disconnected)).await;
        return session_gone();
    }
    drop(permit);
    crate::transport::http::post::sse_response(SseBody::opened(
        rx,
        Some(done_rx),
        state.config.keep_alive,
        server.clone(),
    ))
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
    let live = match compat.sessions.delete(&session) {
        Ok((_, live)) => live,
        Err(e) => return state_refusal(&e),
    };
    if let Some(live) = live {
        let _ = live.stop.send(StopStream(CloseReason::Disconnected)).await;
    }
    drop(permit);
    HttpResponse::Ok().finish()
}

/// Restarts the session's GET stream actor with the session's current URIs:
/// the new actor first, then the old one is stopped (its `handle_close` runs;
/// frames it already queued still go out). An error when the new actor could
/// not be opened: the old one keeps running with its earlier filter.
pub(super) async fn restart<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
    live: &LiveGet,
) -> Result<(), McpError> {
    let probe = Channel::for_request(
        RequestId::Number(0),
        live.meta.clone(),
        live.assigns.clone(),
        live.outbox.clone(),
    );
    let caps = state.suite.subscription_capabilities(&probe);
    drop(probe);
    let uris = compat.sessions.uris(session);
    let generation = compat.next_generation();
    let opened = spawn_legacy_stream(
        &state.suite,
        &state.server,
        &live.connection,
        live.outbox.clone(),
        RequestId::String(format!("get-{generation}")),
        live.meta.clone(),
        live.assigns.clone(),
        filter(&caps, uris),
        true,
    )
    .await;
    let stop = opened.inspect_err(|error| {
        tracing::debug!(%error, "GET stream not restarted; it keeps its earlier filter");
    })?;
    let old = compat
        .sessions
        .swap_get_stream(session, &live.connection, stop);
    let _ = old.send(StopStream(CloseReason::Cancelled)).await;
    Ok(())
}
