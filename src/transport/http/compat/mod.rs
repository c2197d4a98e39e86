//! The 2025-era compatibility path (MCP 2025-11-25 and 2025-06-18) of the
//! Streamable HTTP transport: `initialize`, sessions, the GET stream, `ping`,
//! `logging/setLevel`, `resources/subscribe`, server-to-client requests.
//!
//! Only what is HTTP lives here: sessions as sealed `Mcp-Session-Id` headers,
//! the POST parsing and routing, GET and DELETE. Everything else (version
//! negotiation, `_meta`, result and error shapes, routing onto the suite, the
//! sessions' bounded state, MRTR rounds, the legacy stream) is
//! [`crate::compat`], shared with stdio: the suite and the subscription
//! handler only ever see 2026-07-28 shapes. See `docs/compat-2025.md`.
//!
//! Routing: a POST whose body carries a 2026-07-28 `_meta` version is modern,
//! whatever its headers. Otherwise it is legacy when it carries an
//! `Mcp-Session-Id`, names a 2025 version in `MCP-Protocol-Version`, is an
//! `initialize`, or is a JSON-RPC response (an answer to a server-to-client
//! request). Modern requests always carry `Mcp-Method`, so they are decided
//! from the headers alone: the body is parsed here only for legacy candidates.

mod expiry;
#[cfg(feature = "redis")]
mod fleet;
#[cfg(feature = "redis")]
mod fleet_events;
#[cfg(feature = "redis")]
mod fleet_handoff;
#[cfg(feature = "redis")]
mod fleet_post;
#[cfg(feature = "redis")]
mod fleet_pump;
#[cfg(feature = "redis")]
mod fleet_uris;
mod get_stream;
mod requests;
mod resumable;
mod session;

use std::sync::Arc;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Map, Value, json};
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument as _;

use super::headers::{self, METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER};
use super::refused::Seen;
use super::reply::with_retry_after;
use super::state::{AppState, Compat};
use crate::compat::{
    ClientInit, LEGACY_VERSIONS, LegacyRoute, encode_legacy_error, legacy_error, legacy_route,
};
use crate::mux::{Assigns, Channel, Principal, limit_key, outbox};
use crate::protocol::jsonrpc::{MAX_ID_LEN, encode_result, parse_value};
use crate::protocol::{McpError, RequestId, RequestMeta};
use crate::runtime::{CloseReason, RequestOutcome, StopStream, UriOutcome, version_label};
use crate::subscription::SubscriptionHandler;
use crate::transport::dispatch::operation;

pub(super) use expiry::SessionClock;
pub(super) use get_stream::{delete, get};
use session::{SESSION_HEADER, SESSION_HEADER_NAME, Session};

/// The parsed body of a POST that belongs to the compatibility path, or `None`
/// for the modern path (see the module documentation).
pub(super) fn legacy_body(req: &HttpRequest, body: &[u8]) -> Option<Value> {
    let head = req.headers();
    let session = head.contains_key(&SESSION_HEADER_NAME);
    let legacy_version = head
        .get(&PROTOCOL_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| LEGACY_VERSIONS.contains(&v.trim()));
    if !session && !legacy_version && head.contains_key(&METHOD_HEADER) {
        return None;
    }
    let value = parse_value(body).ok()?;
    let obj = value.as_object()?;
    let params = obj.get("params").and_then(Value::as_object);
    if RequestMeta::raw_version(params).is_some() {
        return None;
    }
    let method = obj.get("method").and_then(Value::as_str);
    let response = method.is_none()
        && obj.contains_key("id")
        && (obj.contains_key("result") || obj.contains_key("error"));
    (session || legacy_version || method == Some("initialize") || response).then_some(value)
}

/// A 4xx with an id-less JSON-RPC error body.
fn refusal(status: StatusCode, code: i64, message: &str) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
                .to_string(),
        )
}

/// The key a request's stored session state is counted under: its principal,
/// or its client address without one (one shared key when neither is known).
fn owner_of(assigns: &Assigns) -> String {
    limit_key(assigns).unwrap_or_else(|| "shared".to_owned())
}

/// Why a request's session could not be used.
enum SessionRefused {
    /// Missing (400), or forged, expired, deleted or another principal's
    /// (404).
    Http(HttpResponse),
    /// The shared session store cannot be asked (`-32603`).
    Unavailable(McpError),
}

/// Reads and checks the session of a request: missing → 400, forged, expired,
/// deleted or initialized by another principal → 404; with shared sessions,
/// its deleted mark and level are read from Redis (one round trip).
async fn session_of<H: SubscriptionHandler>(
    req: &HttpRequest,
    state: &AppState<H>,
    compat: &Compat,
    assigns: &Assigns,
) -> Result<Session, SessionRefused> {
    let Some(raw) = req.headers().get(&SESSION_HEADER_NAME) else {
        return Err(SessionRefused::Http(refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Bad Request: Mcp-Session-Id header is required",
        )));
    };
    let not_found = || {
        SessionRefused::Http(refusal(
            StatusCode::NOT_FOUND,
            -32600,
            "Session not found: initialize a new session",
        ))
    };
    // A session initialized by a principal is that principal's alone.
    let principal = assigns.get::<Principal>().map(Principal::subject);
    let mut session = raw
        .to_str()
        .ok()
        .and_then(|token| session::open(state.suite.sealer(), token.trim()))
        .filter(|s| s.principal.as_deref() == principal)
        .ok_or_else(not_found)?;
    session.owner = owner_of(assigns);
    let deleted = match &compat.shared {
        Some(shared) => {
            let loaded = shared
                .load(&session.sid)
                .await
                .map_err(SessionRefused::Unavailable)?;
            session.log_level = loaded.level;
            loaded.deleted
        }
        None => {
            session.log_level = compat.sessions.log_level(&session.key());
            compat.sessions.is_deleted(&session.key())
        }
    };
    if deleted {
        return Err(not_found());
    }
    Ok(session)
}

fn json_ok(body: impl Into<bytes::Bytes>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body.into())
}

fn result_response(id: &RequestId, result: Map<String, Value>) -> HttpResponse {
    json_ok(encode_result(id, &result))
}

/// A JSON-RPC error of a request: in-band (200) as 2025 clients expect, except
/// a limit per principal (429 with `Retry-After`, as everywhere).
fn error_response(id: Option<&RequestId>, method: &str, error: &McpError) -> HttpResponse {
    let body = encode_legacy_error(id, &legacy_error(method, error));
    if error.retry_after().is_none() {
        return json_ok(body);
    }
    let resp = HttpResponse::TooManyRequests()
        .content_type("application/json")
        .body(body);
    with_retry_after(resp, error)
}

/// A header that disagrees with the body (`-32020`): 400 with the request's
/// id, as on the 2026-07-28 path.
fn mismatch(id: Option<&RequestId>, error: &McpError) -> HttpResponse {
    HttpResponse::BadRequest()
        .content_type("application/json")
        .body(encode_legacy_error(id, &error.to_error_object()))
}

/// The 400 for a 2025 session's request naming a version the server does
/// not serve (`MCP-Protocol-Version`), on POST, GET and DELETE alike.
fn unsupported_legacy_version(version: &str) -> HttpResponse {
    refusal(
        StatusCode::BAD_REQUEST,
        -32600,
        &format!(
            "Bad Request: unsupported MCP-Protocol-Version {version:?}; supported: {}",
            LEGACY_VERSIONS.join(", ")
        ),
    )
}

/// Serves one legacy POST (its body already parsed by [`legacy_body`]).
pub(super) async fn post<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Arc<Compat>,
    req: &HttpRequest,
    body: Value,
    assigns: Assigns,
    permit: OwnedSemaphorePermit,
    seen: &mut Seen,
) -> HttpResponse {
    let Value::Object(mut msg) = body else {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: one JSON-RPC message per POST (no batches)",
        );
    };
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        seen.malformed();
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: jsonrpc must be \"2.0\"",
        );
    }
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let raw_id = msg.remove("id");
    if let Some(method) = &method {
        seen.read(method, msg.get("params").and_then(Value::as_object));
    }
    if let Some(id) = raw_id.as_ref().and_then(RequestId::from_value) {
        seen.id(&id);
    }
    if let Some(Value::String(long)) = &raw_id
        && long.len() > MAX_ID_LEN
    {
        seen.malformed();
        // Never echoed: the reply would carry it back.
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            &format!(
                "Invalid Request: id is {} bytes long; at most {MAX_ID_LEN} are allowed",
                long.len()
            ),
        );
    }
    let head = req.headers();
    if method.as_deref() == Some("initialize") {
        let Some(id) = raw_id.as_ref().and_then(RequestId::from_value) else {
            seen.malformed();
            return refusal(
                StatusCode::BAD_REQUEST,
                -32600,
                "Invalid Request: initialize needs a string or integer id",
            );
        };
        if let Err(e) = headers::routing_header(head, &METHOD_HEADER)
            .and_then(|h| headers::check_method_header(h, "initialize"))
        {
            return mismatch(Some(&id), &e);
        }
        let params = match msg.remove("params") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        return initialize(state, compat, req, id, params, assigns, seen).await;
    }
    if let Some(version) = req
        .headers()
        .get(&PROTOCOL_VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or_default().trim())
        && !LEGACY_VERSIONS.contains(&version)
    {
        return unsupported_legacy_version(version);
    }
    let session = match session_of(req, state, compat, &assigns).await {
        Ok(s) => {
            seen.version(&s.init.version);
            s
        }
        Err(SessionRefused::Http(resp)) => return resp,
        Err(SessionRefused::Unavailable(e)) => {
            let id = raw_id.as_ref().and_then(RequestId::from_value);
            return match (&method, id) {
                (Some(method), Some(id)) => error_response(Some(&id), method, &e),
                _ => get_stream::state_refusal(&e),
            };
        }
    };
    let Some(method) = method else {
        // A response to a server-to-client request.
        if let Some(id) = raw_id.as_ref() {
            compat.pending.answer(&session.sid, id, msg);
        }
        seen.taken();
        return HttpResponse::Accepted().finish();
    };
    let Some(raw_id) = raw_id else {
        // notifications/initialized, cancelled, roots/list_changed: nothing to do.
        seen.taken();
        return HttpResponse::Accepted().finish();
    };
    let Some(id) = RequestId::from_value(&raw_id) else {
        seen.malformed();
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: the id must be a string or an integer",
        );
    };
    if let Err(e) = headers::routing_header(head, &METHOD_HEADER)
        .and_then(|h| headers::check_method_header(h, &method))
    {
        return mismatch(Some(&id), &e);
    }
    let mut params = match msg.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => {
            seen.malformed();
            return error_response(
                Some(&id),
                &method,
                &McpError::invalid_params("Invalid params: params must be an object"),
            );
        }
    };
    // The same header/body agreement as a 2026-07-28 request, for the
    // headers a 2025 client sent (a gateway may route or authorize on them).
    if let Err(e) = headers::routing_header(head, &NAME_HEADER)
        .and_then(|h| headers::check_name_header(h, &method, &params, false))
    {
        return mismatch(Some(&id), &e);
    }
    // MRTR fields belong to the server's side of the translation.
    params.remove("inputResponses");
    params.remove("requestState");
    let (meta, parsed) = match session.init.meta(session.log_level, params.remove("_meta")) {
        Ok(m) => m,
        Err(e) => return error_response(Some(&id), &method, &e),
    };
    params.insert("_meta".into(), Value::Object(meta));
    let (tx, rx) = outbox(state.server.limits().outbox_capacity);
    let channel = Channel::for_request(id.clone(), parsed, assigns, tx.clone());
    let done = |r: Result<(), McpError>| match r {
        Ok(()) => result_response(&id, Map::new()),
        Err(e) => error_response(Some(&id), &method, &e),
    };
    let route = legacy_route(&method);
    match route {
        LegacyRoute::Ping | LegacyRoute::SetLevel | LegacyRoute::Subscription(_) => {
            // Answered here: their span and duration, as a suite's request.
            let op = operation(
                &state.suite,
                &state.server,
                &channel,
                &method,
                &params,
                super::post::http_origin(req),
                version_label(&session.init.version, LEGACY_VERSIONS),
            );
            seen.taken();
            let result = async {
                match route {
                    LegacyRoute::SetLevel => {
                        let level = crate::compat::set_level(&state.suite, &params, &channel)?;
                        match &compat.shared {
                            Some(shared) => shared.set_log_level(&session.key(), level).await,
                            None => compat.sessions.set_log_level(&session.key(), level),
                        }
                    }
                    LegacyRoute::Subscription(subscribe) => {
                        subscription(state, compat, &session, &params, &channel, subscribe).await
                    }
                    _ => Ok(()),
                }
            }
            .instrument(op.span().clone())
            .await;
            let empty = Map::new();
            let span = op.span().clone();
            let outcome = crate::compat::answered_outcome(&result);
            op.finish(&state.server, result.as_ref().map(|()| &empty), outcome);
            span.in_scope(|| tracing::debug!("request answered"));
            state.server.record_request(&method, outcome, None);
            done(result)
        }
        LegacyRoute::Unary => {
            if let Err(e) = state.suite.route(&method, &channel) {
                return error_response(Some(&id), &method, &e);
            }
            match state.suite.param_headers(&method, &params) {
                Ok(expected) => {
                    if let Err(e) = headers::check_param_headers(head, &expected, false) {
                        return mismatch(Some(&id), &e);
                    }
                }
                Err(e) => return error_response(Some(&id), &method, &e),
            }
            seen.taken();
            requests::unary(
                state,
                compat.clone(),
                session,
                requests::Call {
                    method,
                    params,
                    channel,
                    outbox: tx,
                    origin: super::post::http_origin(req),
                },
                rx,
                permit,
            )
            .await
        }
        LegacyRoute::NotRouted => error_response(
            Some(&id),
            &method,
            &McpError::MethodNotFound(method.clone()),
        ),
    }
}

async fn subscription<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
    params: &Map<String, Value>,
    channel: &Channel,
    subscribe: bool,
) -> Result<(), McpError> {
    let uri = crate::compat::subscription_uri(&state.suite, params, channel, subscribe)?;
    let max_uris = state.server.limits().max_resource_uris;
    let key = session.key();
    #[cfg(feature = "redis")]
    if compat.shared.is_some() {
        return fleet_uris::change_uri(state, compat, &key, uri, subscribe, max_uris).await;
    }
    let (_, live) = compat.sessions.change_uri(&key, uri, subscribe, max_uris)?;
    let Some(live) = live else {
        return Ok(());
    };
    // One URI in place when the stream's handler takes it; else the stream
    // is opened again with the session's set.
    let changed = match live.change(uri, subscribe).await {
        Ok(UriOutcome::Applied) => Ok(()),
        Ok(UriOutcome::Restart) => get_stream::restart(state, compat, session, &live).await,
        Err(error) => Err(error),
    };
    let Err(error) = changed else {
        return Ok(());
    };
    // The live stream keeps its earlier filter: undo the change so the
    // session's set is still what the stream serves, and tell the client. If
    // the undo finds no room, the stream is ended (the client opens it again
    // with the session's set).
    let undone = compat
        .sessions
        .change_uri(&key, uri, !subscribe, max_uris)
        .is_ok();
    if !undone && let Some(running) = live.running() {
        let _ = running
            .stop
            .send(StopStream(CloseReason::Disconnected))
            .await;
    }
    Err(error)
}

async fn initialize<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    req: &HttpRequest,
    id: RequestId,
    params: Map<String, Value>,
    assigns: Assigns,
    seen: &mut Seen,
) -> HttpResponse {
    let init = ClientInit::from_params(&params);
    seen.version(&init.version);
    let (token, session) = match session::mint(
        state.suite.sealer(),
        compat.config.session_ttl,
        init,
        assigns.get::<Principal>().map(Principal::subject),
    ) {
        Ok(s) => s,
        Err(e) => return error_response(Some(&id), "initialize", &e),
    };
    let meta = match session.init.meta(None, None) {
        Ok((_, m)) => m,
        Err(e) => return error_response(Some(&id), "initialize", &e),
    };
    let (tx, _rx) = outbox(1);
    let channel = Channel::for_request(id.clone(), meta, assigns, tx);
    compat.clock.start(
        &state.server,
        &session.sid,
        session.expires,
        version_label(&session.init.version, LEGACY_VERSIONS),
    );
    let op = operation(
        &state.suite,
        &state.server,
        &channel,
        "initialize",
        &params,
        super::post::http_origin(req),
        version_label(&session.init.version, LEGACY_VERSIONS),
    );
    seen.taken();
    let result = crate::compat::initialize_result(&state.suite, &session.init.version, channel)
        .instrument(op.span().clone())
        .await;
    let span = op.span().clone();
    op.finish(&state.server, Ok(&result), RequestOutcome::Ok);
    span.in_scope(|| tracing::debug!("request answered"));
    state
        .server
        .record_request("initialize", RequestOutcome::Ok, None);
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::HeaderName::from_static(SESSION_HEADER), token))
        .body(encode_result(&id, &result))
}
