//! Unary requests of a 2025-era session, and the server-to-client requests of
//! their multi round-trip rounds.
//!
//! The rounds are [`crate::compat::rounds`]: each server-to-client request is
//! written on the POST's SSE response, and the client POSTs its answer (202),
//! handed to the endpoint's [`crate::compat::Pending`] (bounded by
//! `CompatConfig::max_pending_requests`, and per principal by
//! `CompatConfig::max_pending_requests_per_principal`) under the session's
//! id.

use std::sync::Arc;

use actix_web::HttpResponse;
use serde_json::{Map, Value};
use tokio::sync::OwnedSemaphorePermit;

use super::resumable::{self, OwnedKey};
use super::session::Session;
use super::{AppState, Compat, json_ok};
use crate::compat::{Asker, encode_legacy_error, legacy_error, legacy_result, rounds};
use crate::mux::{Channel, Frame, Outbox, OutboxReceiver};
use crate::protocol::McpError;
use crate::protocol::jsonrpc::encode_result;
use crate::runtime::version_label;
use crate::subscription::SubscriptionHandler;
use crate::transport::dispatch::{Origin, operation};
use crate::transport::http::sse::{AbortOnDrop, SseBody, sse_response};
use tracing::Instrument as _;

/// One unary request of a legacy session.
pub(super) struct Call {
    pub(super) method: String,
    pub(super) params: Map<String, Value>,
    pub(super) channel: Channel,
    pub(super) outbox: Outbox,
    /// The transport and the HTTP trace-context headers.
    pub(super) origin: Origin,
}

/// Runs the request (its MRTR rounds as server-to-client requests) and answers
/// with JSON, or with SSE once anything precedes the response.
pub(super) async fn unary<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: Arc<Compat>,
    session: Session,
    call: Call,
    mut rx: OutboxReceiver,
    permit: OwnedSemaphorePermit,
) -> HttpResponse {
    let suite = state.suite.clone();
    let session_sid = session.sid.clone();
    let session_principal = session.principal.clone();
    let session_expires = session.expires;
    let reader_config = super::get_stream::reply_config(state, &compat, &session);
    let events_compat = compat.clone();
    let timeout = state.config.request_timeout;
    let stall = state.server.limits().stall_timeout;
    let server = state.server.clone();
    let Call {
        method,
        params,
        channel,
        outbox,
        origin,
    } = call;
    let op = operation(
        &suite,
        &server,
        &channel,
        &method,
        &params,
        origin,
        version_label(&session.init.version, crate::compat::LEGACY_VERSIONS),
    );
    let span = op.span().clone();
    let started = std::time::Instant::now();
    let task = actix_rt::spawn(async move {
        let _permit = permit;
        let asker = Asker {
            pending: compat.pending.clone(),
            owner: session.sid,
            principal: session.owner,
            version: session.init.version,
        };
        let (outcome, counted) =
            rounds(&suite, &asker, &method, params, &channel, &outbox, timeout).await;
        server.record_request(&method, counted, Some(started.elapsed()));
        op.finish(&server, outcome.as_ref(), counted);
        let id = channel.id().clone();
        let bytes = match outcome {
            Ok(result) => encode_result(&id, &legacy_result(result)),
            Err(error) => encode_legacy_error(Some(&id), &legacy_error(&method, &error)),
        };
        drop(outbox);
        if tokio::time::timeout(stall, channel.respond(bytes))
            .await
            .is_err()
        {
            tracing::debug!(method = %method, "response dropped: the outbox stayed full past the stall timeout");
        }
        tracing::debug!("request answered");
    }.instrument(span));
    let mut task = AbortOnDrop(Some(task));
    let Some(first) = rx.recv().await else {
        task.0.take();
        return json_ok(encode_legacy_error(
            None,
            &McpError::internal("Internal error: no response").to_error_object(),
        ));
    };
    if first.last {
        state.server.count_frames(1);
        return json_ok(first.to_bytes());
    }
    // With shared sessions, the stream's frames go into the session's POST
    // history in Redis, so any node resumes it.
    #[cfg(feature = "redis")]
    let (first, rx) = if events_compat.shared.is_some() {
        let post = super::fleet_post::PostStream {
            tag: super::fleet_events::tag(&session_sid, session_principal.as_deref()),
            sid: session_sid,
            expires: session_expires,
            token: format!("{:016x}", state.suite.sealer().nonce()),
        };
        let served = super::fleet_post::serve(
            events_compat,
            post,
            (first, rx),
            reader_config,
            state.server.clone(),
        )
        .await;
        return match served {
            Ok(response) => {
                // The request is no longer stopped by its client's leaving.
                task.0.take();
                response
            }
            Err((first, rx)) => without_ids(state, (first, rx), task),
        };
    } else {
        (first, rx)
    };
    // A resumable stream: its frames go into the session's event log and
    // the response reads them from there; a client that loses it (or that
    // the server closes it on, for SSE polling) resumes it with GET and
    // `Last-Event-ID`. The request runs to its end meanwhile (a disconnect
    // is not a cancel in 2025).
    let events = events_compat.events.clone();
    let log = OwnedKey {
        sid: session_sid,
        principal: session_principal,
        expires: session_expires,
    };
    // DELETEd before this first frame came: the session's log is not made
    // again (DELETE marks the session before it drops the log, so either
    // this sees the mark, before or after opening, or the DELETE drops what
    // was just opened).
    let deleted = |log: &OwnedKey| {
        events_compat.sessions.is_deleted(&crate::compat::StateKey {
            sid: &log.sid,
            owner: "",
            expires: log.expires,
        })
    };
    if deleted(&log) {
        return without_ids(state, (first, rx), task);
    }
    let tag = format!("{:016x}", state.suite.sealer().nonce());
    let opened = events
        .open(&log.key(), None, tag)
        .and_then(|(stream, tag)| {
            let cursor = events.position(&log.key());
            let reader = events.attach(&log.key(), stream)?;
            Some(((stream, tag), reader, cursor))
        });
    let Some(((stream, tag), reader, cursor)) = opened else {
        // No room for another session's events: served without ids.
        tracing::warn!(
            "2025 stream served without event ids: max_session_states session logs are kept, none without a stream"
        );
        return without_ids(state, (first, rx), task);
    };
    if deleted(&log) {
        events.remove_session(&log.sid);
        return without_ids(state, (first, rx), task);
    }
    // The request is no longer stopped by its client's leaving.
    task.0.take();
    // 2025-06-18 has no SSE polling: its replies are not closed before
    // their response (a client given no id could not resume them).
    let polling = reader_config.prime;
    if first.is_empty() {
        if polling {
            events.close_reader(&log.key(), stream);
        }
    } else if !first.is_revoked() {
        events.append(&log.key(), stream, first.to_bytes(), false);
    }
    let reply = Some(state.server.hold_reply());
    resumable::spawn_pump(
        events.clone(),
        log.clone(),
        (stream, reply, polling),
        rx,
        None,
        None,
    );
    resumable::response(
        events,
        log,
        (stream, tag),
        reader,
        cursor,
        reader_config,
        state.server.clone(),
    )
}

/// The reply as a plain SSE body, without ids (nothing kept to resume it): its
/// request stops when its client leaves.
fn without_ids<H: SubscriptionHandler>(
    state: &AppState<H>,
    (first, rx): (Frame, OutboxReceiver),
    task: AbortOnDrop,
) -> HttpResponse {
    sse_response(SseBody::new(
        first,
        rx,
        None,
        state.config.keep_alive,
        state.server.clone(),
        task,
    ))
}
