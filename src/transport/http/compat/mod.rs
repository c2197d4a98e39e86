//! The 2025-era compatibility path (MCP 2025-11-25 and 2025-06-18) of the
//! Streamable HTTP transport: `initialize`, sessions, the GET stream, `ping`,
//! `logging/setLevel`, `resources/subscribe`, server-to-client requests.
//!
//! Everything is translated here, at the transport boundary: the suite and the
//! subscription handler only ever see 2026-07-28 shapes (a per-request
//! `_meta`, a listen filter, MRTR rounds). See `docs/compat-2025.md`.
//!
//! Routing: a POST whose body carries a 2026-07-28 `_meta` version is modern,
//! whatever its headers. Otherwise it is legacy when it carries an
//! `Mcp-Session-Id`, names a 2025 version in `MCP-Protocol-Version`, is an
//! `initialize`, or is a JSON-RPC response (an answer to a server-to-client
//! request). Modern requests always carry `Mcp-Method`, so they are decided
//! from the headers alone: the body is parsed here only for legacy candidates.

mod get_stream;
mod requests;
mod session;
mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Map, Value, json};
use tokio::sync::OwnedSemaphorePermit;

use super::headers::{self, METHOD, NAME, PROTOCOL_VERSION};
use super::post::AppState;
use crate::mux::{Assigns, Channel, Principal, limit_key, outbox};
use crate::protocol::error::ErrorObject;
use crate::protocol::jsonrpc::{MAX_ID_LEN, encode_result, parse_value};
use crate::protocol::types::MAX_RESOURCE_URI_LEN;
use crate::protocol::{LogLevel, McpError, RequestId, RequestMeta, methods};
use crate::runtime::{CloseReason, StopStream};
use crate::subscription::SubscriptionHandler;

pub(super) use get_stream::{delete, get};
use session::{SESSION_HEADER, Session};
use store::{SessionStore, StoreBounds};

pub use crate::compat::LEGACY_VERSIONS;

/// Settings of the 2025-era compatibility path (`HttpConfig::compat`; `None`
/// there serves 2026-07-28 only).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompatConfig {
    /// How long a session lives from its `initialize` (default 24 h); then its
    /// id answers 404 and the client initializes again.
    pub session_ttl: Duration,
    /// Sessions that hold state at once in the whole server (a log level,
    /// resource subscriptions, a GET stream, or the mark of a DELETE), default
    /// 100,000: the memory bound, reached only by many principals (see
    /// `max_session_states_per_principal`). Past it a `logging/setLevel` or
    /// `resources/subscribe` gets `-32603` "Server busy", a GET or DELETE 503;
    /// expired and empty entries are swept first, nothing else is evicted.
    pub max_session_states: usize,
    /// Sessions with state per principal (or per client address without one),
    /// default 1,000. Past it that principal's `logging/setLevel`,
    /// `resources/subscribe`, GET and DELETE of a session without state get
    /// HTTP 429 with `Retry-After` and `-32603`, `data.limit =
    /// "max_sessions_per_principal"`; other principals are not affected.
    pub max_session_states_per_principal: usize,
    /// `resources/subscribe` URIs per principal (or per client address without
    /// one) across its sessions, default 4,096. Past it: 429 with
    /// `Retry-After`, `data.limit = "max_subscribed_uris_per_principal"`.
    pub max_subscribed_uris_per_principal: usize,
    /// `resources/subscribe` URIs in the whole server, default 131,072 (each at
    /// most 2 KiB). Past it: `-32603` "Server busy".
    pub max_subscribed_uris: usize,
    /// Server-to-client requests waiting for the client's answer, in the whole
    /// server (default 1,024). Past it the tool call gets `-32603`.
    pub max_pending_requests: usize,
}

impl Default for CompatConfig {
    fn default() -> Self {
        CompatConfig {
            session_ttl: Duration::from_secs(24 * 60 * 60),
            max_session_states: 100_000,
            max_session_states_per_principal: 1_000,
            max_subscribed_uris_per_principal: 4_096,
            max_subscribed_uris: 131_072,
            max_pending_requests: 1_024,
        }
    }
}

/// The shared state of the compatibility path (one per server).
pub(super) struct Compat {
    config: CompatConfig,
    sessions: SessionStore,
    pending: requests::Pending,
    generation: AtomicU64,
}

impl Compat {
    pub(super) fn new(config: CompatConfig) -> Self {
        Compat {
            sessions: SessionStore::new(StoreBounds {
                max_sessions: config.max_session_states,
                max_uris: config.max_subscribed_uris,
                per_owner_sessions: config.max_session_states_per_principal,
                per_owner_uris: config.max_subscribed_uris_per_principal,
            }),
            pending: requests::Pending::new(config.max_pending_requests),
            generation: AtomicU64::new(0),
            config,
        }
    }

    fn next_generation(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// The parsed body of a POST that belongs to the compatibility path, or `None`
/// for the modern path (see the module documentation).
pub(super) fn legacy_body(req: &HttpRequest, body: &[u8]) -> Option<Value> {
    let head = req.headers();
    let session = head.contains_key(SESSION_HEADER);
    let legacy_version = head
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| LEGACY_VERSIONS.contains(&v.trim()));
    if !session && !legacy_version && head.contains_key(METHOD) {
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

/// Reads and checks the session of a request: missing → 400, forged, expired,
/// deleted or initialized by another principal → 404.
#[allow(clippy::result_large_err)]
fn session_of<H: SubscriptionHandler>(
    req: &HttpRequest,
    state: &AppState<H>,
    compat: &Compat,
    assigns: &Assigns,
) -> Result<Session, HttpResponse> {
    let Some(raw) = req.headers().get(SESSION_HEADER) else {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Bad Request: Mcp-Session-Id header is required",
        ));
    };
    // A session initialized by a principal is that principal's alone.
    let principal = assigns.get::<Principal>().map(Principal::subject);
    let session = raw
        .to_str()
        .ok()
        .and_then(|token| session::open(state.suite.sealer(), token.trim()))
        .filter(|s| s.principal.as_deref() == principal)
        .filter(|s| !compat.sessions.is_deleted(s))
        .map(|mut s| {
            s.owner = owner_of(assigns);
            s
        });
    session.ok_or_else(|| {
        refusal(
            StatusCode::NOT_FOUND,
            -32600,
            "Session not found: initialize a new session",
        )
    })
}

/// The 2026-07-28 `_meta` of a request of `session`, parsed and as the map
/// the suite gets (see [`crate::compat::request_meta`]; the client's `_meta`
/// is moved, never copied).
fn request_meta(
    session: &Session,
    log_level: Option<LogLevel>,
    client_meta: Option<Value>,
) -> Result<(RequestMeta, Map<String, Value>), McpError> {
    crate::compat::request_meta(
        &session.capabilities,
        session.client_info.as_ref(),
        log_level,
        client_meta,
    )
}

fn legacy_result(result: Map<String, Value>) -> Map<String, Value> {
    crate::compat::legacy_result(result)
}

fn legacy_error(method: &str, error: &McpError) -> ErrorObject {
    crate::compat::legacy_error(method, error)
}

fn encode_legacy_error(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    crate::compat::encode_legacy_error(id, error)
}

fn json_ok(body: Vec<u8>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body)
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
    super::auth::with_retry_after(resp, error)
}

/// A header that disagrees with the body (`-32020`): 400 with the request's
/// id, as on the 2026-07-28 path.
fn mismatch(id: Option<&RequestId>, error: &McpError) -> HttpResponse {
    HttpResponse::BadRequest()
        .content_type("application/json")
        .body(encode_legacy_error(id, &error.to_error_object()))
}

/// Serves one legacy POST (its body already parsed by [`legacy_body`]).
pub(super) async fn post<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Arc<Compat>,
    req: &HttpRequest,
    body: Value,
    assigns: Assigns,
    permit: OwnedSemaphorePermit,
) -> HttpResponse {
    let Value::Object(mut msg) = body else {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: one JSON-RPC message per POST (no batches)",
        );
    };
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: jsonrpc must be \"2.0\"",
        );
    }
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let raw_id = msg.remove("id");
    if let Some(Value::String(long)) = &raw_id
        && long.len() > MAX_ID_LEN
    {
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
            return refusal(
                StatusCode::BAD_REQUEST,
                -32600,
                "Invalid Request: initialize needs a string or integer id",
            );
        };
        if let Err(e) = headers::routing_header(head, METHOD)
            .and_then(|h| headers::check_method_header(h, "initialize"))
        {
            return mismatch(Some(&id), &e);
        }
        let params = match msg.remove("params") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        return initialize(state, compat, id, params, assigns).await;
    }
    if let Some(version) = req
        .headers()
        .get(PROTOCOL_VERSION)
        .map(|v| v.to_str().unwrap_or_default().trim())
        && !LEGACY_VERSIONS.contains(&version)
    {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            &format!(
                "Bad Request: unsupported MCP-Protocol-Version {version:?}; supported: {}",
                LEGACY_VERSIONS.join(", ")
            ),
        );
    }
    let session = match session_of(req, state, compat, &assigns) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let Some(method) = method else {
        // A response to a server-to-client request.
        if let Some(id) = raw_id.as_ref() {
            compat.pending.answer(&session, id, msg);
        }
        return HttpResponse::Accepted().finish();
    };
    let Some(raw_id) = raw_id else {
        // notifications/initialized, cancelled, roots/list_changed: nothing to do.
        return HttpResponse::Accepted().finish();
    };
    let Some(id) = RequestId::from_value(&raw_id) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: the id must be a string or an integer",
        );
    };
    if let Err(e) =
        headers::routing_header(head, METHOD).and_then(|h| headers::check_method_header(h, &method))
    {
        return mismatch(Some(&id), &e);
    }
    let mut params = match msg.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return error_response(
                Some(&id),
                &method,
                &McpError::invalid_params("Invalid params: params must be an object"),
            );
        }
    };
    // The same header/body agreement as a 2026-07-28 request, for the
    // headers a 2025 client sent (a gateway may route or authorize on them).
    if let Err(e) = headers::routing_header(head, NAME)
        .and_then(|h| headers::check_name_header(h, &method, &params, false))
    {
        return mismatch(Some(&id), &e);
    }
    // MRTR fields belong to the server's side of the translation.
    params.remove("inputResponses");
    params.remove("requestState");
    let log_level = compat.sessions.log_level(&session);
    let (parsed, meta) = match request_meta(&session, log_level, params.remove("_meta")) {
        Ok(m) => m,
        Err(e) => return error_response(Some(&id), &method, &e),
    };
    params.insert("_meta".into(), Value::Object(meta));
    let (tx, rx) = outbox(state.server.limits().outbox_capacity);
    let channel = Channel::for_request(id.clone(), parsed, assigns, tx.clone());
    let empty = Map::new;
    let done = |r: Result<(), McpError>| match r {
        Ok(()) => result_response(&id, empty()),
        Err(e) => error_response(Some(&id), &method, &e),
    };
    match method.as_str() {
        "ping" => result_response(&id, empty()),
        "logging/setLevel" => done(set_level(state, compat, &session, &params, &channel)),
        "resources/subscribe" | "resources/unsubscribe" => {
            let subscribe = method == "resources/subscribe";
            done(subscription(state, compat, &session, &params, &channel, subscribe).await)
        }
        methods::TOOLS_LIST
        | methods::TOOLS_CALL
        | methods::PROMPTS_LIST
        | methods::PROMPTS_GET
        | methods::RESOURCES_LIST
        | methods::RESOURCES_TEMPLATES_LIST
        | methods::RESOURCES_READ
        | methods::COMPLETE => {
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
            requests::unary(
                state,
                compat.clone(),
                session,
                requests::Call {
                    method,
                    params,
                    channel,
                    outbox: tx,
                },
                rx,
                permit,
            )
            .await
        }
        _ => error_response(
            Some(&id),
            &method,
            &McpError::MethodNotFound(method.clone()),
        ),
    }
}

fn set_level<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
    params: &Map<String, Value>,
    channel: &Channel,
) -> Result<(), McpError> {
    if state.suite.capabilities(channel).logging.is_none() {
        return Err(McpError::MethodNotFound("logging/setLevel".into()));
    }
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .and_then(LogLevel::parse)
        .ok_or_else(|| {
            McpError::invalid_params(
                "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency",
            )
        })?;
    compat.sessions.set_log_level(session, level)
}

async fn subscription<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    session: &Session,
    params: &Map<String, Value>,
    channel: &Channel,
    subscribe: bool,
) -> Result<(), McpError> {
    let method = if subscribe {
        "resources/subscribe"
    } else {
        "resources/unsubscribe"
    };
    if !state
        .suite
        .subscription_capabilities(channel)
        .resources_updated
    {
        return Err(McpError::MethodNotFound(method.into()));
    }
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty() && u.len() <= MAX_RESOURCE_URI_LEN)
        .ok_or_else(|| {
            McpError::invalid_params(format!(
                "Invalid params: uri must be a non-empty string of at most {MAX_RESOURCE_URI_LEN} bytes"
            ))
        })?;
    let max_uris = state.server.limits().max_resource_uris;
    let (_, live) = compat
        .sessions
        .change_uri(session, uri, subscribe, max_uris)?;
    let Some(live) = live else {
        return Ok(());
    };
    let Err(error) = get_stream::restart(state, compat, session, &live).await else {
        return Ok(());
    };
    // The live stream keeps its earlier filter: undo the change so the
    // session's set is still what the stream serves, and tell the client. If
    // the undo finds no room, the stream is ended (the client opens it again
    // with the session's set).
    let undone = compat
        .sessions
        .change_uri(session, uri, !subscribe, max_uris)
        .is_ok();
    if !undone {
        let _ = live.stop.send(StopStream(CloseReason::Disconnected)).await;
    }
    Err(error)
}

async fn initialize<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    id: RequestId,
    params: Map<String, Value>,
    assigns: Assigns,
) -> HttpResponse {
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = crate::compat::negotiate(requested);
    let capabilities = match params.get("capabilities") {
        Some(Value::Object(c)) => c.clone(),
        _ => Map::new(),
    };
    let client_info = params.get("clientInfo").filter(|i| i.is_object()).cloned();
    let (token, session) = match session::mint(
        state.suite.sealer(),
        compat.config.session_ttl,
        version,
        capabilities,
        client_info,
        assigns.get::<Principal>().map(Principal::subject),
    ) {
        Ok(s) => s,
        Err(e) => return error_response(Some(&id), "initialize", &e),
    };
    let meta = match request_meta(&session, None, None) {
        Ok((m, _)) => m,
        Err(e) => return error_response(Some(&id), "initialize", &e),
    };
    let (tx, _rx) = outbox(1);
    let channel = Channel::for_request(id.clone(), meta, assigns, tx);
    let result = crate::compat::initialize_result(&state.suite, version, channel).await;
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::HeaderName::from_static(SESSION_HEADER), token))
        .body(encode_result(&id, &result))
}
