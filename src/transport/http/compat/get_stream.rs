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
use tokio::sync::oneshot;

use super::session::{LiveGet, Reservation, SESSION_HEADER, Session};
use super::{AppState, Compat, LEGACY_VERSIONS, parse_meta, refusal, request_meta, session_of};
use crate::mux::{Assigns, Channel, outbox};
use crate::protocol::{RequestId, SubscriptionCapabilities, SubscriptionFilter};
use crate::runtime::{CloseReason, Connection, StopStream, spawn_legacy_stream};
use crate::subscription::SubscriptionHandler;
use crate::transport::http::headers::{self, PROTOCOL_VERSION};
use crate::transport::http::sse::SseBody;

fn not_allowed() -> HttpResponse {
    HttpResponse::MethodNotAllowed()
        .insert_header((header::ALLOW, "POST"))
        .finish()
}

/// What GET and DELETE check first: Host and Origin (403), a session header
/// (without one: 400 for a client naming a 2025 version, otherwise 405 as for
/// any 2026-07-28 client), authentication (401), the session (404).
async fn admit<H: SubscriptionHandler>(
    req: &HttpRequest,
    state: &AppState<H>,
) -> Result<(std::sync::Arc<Compat>, Session, Assigns), HttpResponse> {
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
    let assigns = crate::transport::http::auth::admit(req, state).await?;
    let session = session_of(req, state, &compat, &assigns)?;
    Ok((compat, session, assigns))
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
    let (compat, session, assigns) = match admit(&req, &state).await {
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
    let meta = match request_meta(&session, None, None).and_then(|m| parse_meta(&m)) {
        Ok(m) => m,
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
        Ok(Some(_)) => {}
        Ok(None) => {
            return refusal(
                StatusCode::CONFLICT,
                -32600,
                "Conflict: this session already has an open GET stream",
            );
        }
        Err(e) => {
            return refusal(StatusCode::SERVICE_UNAVAILABLE, e.code(), &e.to_string());
        }
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
    compat.sessions.commit_get(
        &session,
        generation,
        LiveGet {
            connection,
            outbox: tx,
            stop,
            meta,
            assigns,
        },
    );
    drop(reservation);
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
    let (compat, session, _assigns) = match admit(&req, &state).await {
        Ok(a) => a,
        Err(resp) => return resp,
    };
    let (_, live) = compat.sessions.delete(&session);
    if let Some(live) = live {
        let _ = live.stop.send(StopStream(CloseReason::Disconnected)).await;
    }
    HttpResponse::Ok().finish()
}

/// Restarts the session's GET stream actor with the session's current URIs:
/// the new actor first, then the old one is stopped (its `handle_close` runs;
/// frames it already queued still go out).
pub(super) async fn restart<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
    live: LiveGet,
) {
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
    match opened {
        Ok(stop) => {
            let old = compat
                .sessions
                .swap_get_stream(session, &live.connection, stop);
            let _ = old.send(StopStream(CloseReason::Cancelled)).await;
        }
        Err(error) => {
            tracing::debug!(%error, "GET stream not restarted; it keeps its earlier filter");
        }
    }
}
