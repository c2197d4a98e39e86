//! The POST handler: validation in the reference's order, then a unary reply
//! (JSON, or SSE once the handler streams) or a listen stream (SSE).

use std::time::Duration;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};

use crate::protocol::trace_context::TraceContext;
use futures_util::StreamExt as _;
use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::headers;
use super::refused::Seen;
use super::reply::{error_response, json_response, overloaded, refusal, too_large};
use super::sse::{AbortOnDrop, SseBody};
use super::state::AppState;
use crate::mux::{Assigns, Channel, Outbox, OutboxReceiver, outbox};
use crate::protocol::error::status_for_code;
use crate::protocol::{
    Incoming, McpError, Phase, Request, RequestId, RequestMeta, SubscriptionFilter, methods,
};
use crate::runtime::{Connection, RequestOutcome, Server, method_label, spawn_listen};
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;
use crate::transport::dispatch::{
    Deadlines, ListenRequest, Origin, ReplyStatus, Routed, route, run_or_spawn, unary_future,
    validate_meta,
};

/// Reads the body, at most `limit` bytes. A transport error is logged and
/// answered with a short stable message: its detail is the server's business.
/// `expected` is the declared `Content-Length` (already checked against `limit`);
/// at most 64 KiB are allocated up front on its word alone, so a client that
/// declares a large body and sends nothing costs little.
pub(super) async fn read_body(
    mut payload: web::Payload,
    limit: usize,
    expected: Option<usize>,
) -> Result<Vec<u8>, HttpResponse> {
    let mut body = Vec::with_capacity(expected.unwrap_or(0).min(limit).min(64 * 1024));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            tracing::debug!(error = %e, "could not read a request body");
            let mut resp = refusal(
                StatusCode::BAD_REQUEST,
                "Bad Request: could not read the body".into(),
            );
            resp.head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
            resp
        })?;
        if body.len() + chunk.len() > limit {
            return Err(too_large(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// [`read_body`] within `deadline`: past it, 408 and the connection is closed.
pub(super) async fn read_body_within(
    payload: web::Payload,
    limit: usize,
    expected: Option<usize>,
    deadline: Duration,
) -> Result<Vec<u8>, HttpResponse> {
    match tokio::time::timeout(deadline, read_body(payload, limit, expected)).await {
        Ok(result) => result,
        Err(_) => {
            tracing::debug!(?deadline, "request body not received in time");
            let mut resp = refusal(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "Request Timeout: the body was not received within {} ms",
                    deadline.as_millis()
                ),
            );
            resp.head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
            Err(resp)
        }
    }
}

/// The POST handler: [`serve`], and the span and duration metric of a
/// request it refused before dispatch ([`Seen`]).
pub(crate) async fn post<H: SubscriptionHandler>(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState<H>>,
) -> HttpResponse {
    let mut seen = Seen::new(&req);
    let resp = serve(&req, payload, &state, &mut seen).await;
    seen.finish(
        &state.server,
        |method, name| crate::transport::dispatch::target_known(&state.suite, method, name),
        resp,
    )
}

async fn serve<H: SubscriptionHandler>(
    req: &HttpRequest,
    payload: web::Payload,
    state: &web::Data<AppState<H>>,
    seen: &mut Seen,
) -> HttpResponse {
    let config = &state.config;
    if let Err(why) = headers::check_host_and_origin(req, &config.allowed_hosts) {
        return refusal(StatusCode::FORBIDDEN, format!("Forbidden: {why}"));
    }
    // Held until a unary request is answered, or until a listen is set up.
    let Ok(permit) = state.in_flight.clone().try_acquire_owned() else {
        return overloaded();
    };
    let head = req.headers();
    if !headers::accepts(head, "application/json") {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: Accept must include application/json (and text/event-stream for streamed replies)".into(),
        );
    }
    if !headers::is_json(head) {
        return refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json".into(),
        );
    }
    let declared = head
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > config.max_body) {
        return too_large(config.max_body);
    }
    // Authentication and the rate limit look at the head only, before any
    // body is read.
    let assigns = match super::auth::admit(req, state).await {
        Ok(a) => a,
        Err(resp) => return resp,
    };
    let body = match read_body_within(payload, config.max_body, declared, config.body_timeout).await
    {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    if let Some(compat) = &state.compat
        && let Some(legacy) = super::compat::legacy_body(req, &body)
    {
        let method = legacy
            .get("id")
            .and(legacy.get("method"))
            .and_then(Value::as_str)
            .map(crate::runtime::method_label);
        let resp = super::compat::post(state, compat, req, legacy, assigns, permit, seen).await;
        // A 2025 request refused before it ran counts as refused, as a 2026
        // one and stdio's do.
        if let Some(method) = method.filter(|_| seen.counts_as_refused()) {
            state
                .server
                .record_request(method, RequestOutcome::Refused, None);
        }
        return resp;
    }
    let request = match Incoming::parse(&body) {
        Ok(Incoming::Request(r)) => r,
        Ok(Incoming::Notification(_)) => {
            seen.taken();
            // Accepted, unless its header names a version the server does
            // not serve (400, `-32022`, as a request would get).
            if let Ok(Some(version)) =
                headers::routing_header(req.headers(), &headers::PROTOCOL_VERSION_HEADER)
                && !crate::protocol::SUPPORTED_VERSIONS.contains(&version)
            {
                return error_response(
                    None,
                    &McpError::unsupported_version(version.to_owned()),
                    Phase::Validation,
                );
            }
            return HttpResponse::Accepted().finish();
        }
        Err(e) => {
            seen.read_message(&body);
            if let Some(id) = &e.id {
                seen.id(id);
            }
            return error_response(e.id.as_ref(), &e.error, Phase::Validation);
        }
    };
    let id = request.id.clone();
    let method = method_label(&request.method);
    let (tx, rx) = outbox(state.server.limits().outbox_capacity);
    let routed = validate(&state.suite, req, request, assigns, &state.server, tx);
    if routed.is_err() {
        // Read again for its span: the parsed request went into `validate`.
        seen.read_message(&body);
    }
    drop(body);
    match routed {
        Ok(Routed::Unary {
            method,
            params,
            channel,
        }) => {
            let origin = http_origin(req);
            seen.taken();
            let sse = headers::accepts(req.headers(), "text/event-stream");
            let request = UnaryRequest {
                method,
                params,
                channel,
                sse,
            };
            unary(state, request, rx, permit, origin).await
        }
        Ok(Routed::Listen(listen_request)) => {
            let ListenRequest {
                mut meta,
                assigns,
                filter,
            } = *listen_request;
            // The stream's span takes its parent from `_meta`, else from
            // the HTTP `traceparent` header, as a unary request's does.
            headers::trace_into_meta(req, &mut meta.extra);
            // Noted in case the stream is refused before it opens (listens
            // are few: this costs nothing on the unary path).
            seen.read(methods::LISTEN, None);
            seen.id(&id);
            if let Some(trace) = TraceContext::from_meta(&meta.extra) {
                seen.trace(trace);
            }
            if !headers::accepts(req.headers(), "text/event-stream") {
                return refusal(
                    StatusCode::NOT_ACCEPTABLE,
                    "Not Acceptable: subscriptions/listen answers with text/event-stream".into(),
                );
            }
            let response = listen(state, id, meta, assigns, filter, seen).await;
            drop(permit);
            response
        }
        Err(error) => {
            state
                .server
                .record_request(method, RequestOutcome::Refused, None);
            error_response(Some(&id), &error, Phase::Validation)
        }
    }
}

/// The [`Origin`] of an HTTP request: TCP, and the W3C `traceparent` /
/// `tracestate` headers when valid (a request's `_meta` wins over them).
pub(super) fn http_origin(req: &HttpRequest) -> Origin {
    Origin {
        transport: crate::runtime::NetworkTransport::Tcp,
        header_trace: headers::header_trace(req.headers()).map(|(_, cx)| cx),
    }
}

pub(super) fn validate<H: SubscriptionHandler>(
    suite: &Suite<H>,
    req: &HttpRequest,
    request: Request,
    assigns: Assigns,
    server: &Server,
    outbox: Outbox,
) -> Result<Routed, McpError> {
    let head = req.headers();
    let header_version = headers::routing_header(head, &headers::PROTOCOL_VERSION_HEADER)?;
    let header_method = headers::routing_header(head, &headers::METHOD_HEADER)?;
    let header_name = headers::routing_header(head, &headers::NAME_HEADER)?;
    let params = request.params;
    if let (Some(h), Some(body)) = (header_version, RequestMeta::raw_version(params.as_ref()))
        && h != body
    {
        return Err(McpError::HeaderMismatch(format!(
            "Header mismatch: MCP-Protocol-Version header value '{h}' does not match body value '{body}'"
        )));
    }
    headers::check_method_header(header_method, &request.method)?;
    let meta = validate_meta(&request.method, params.as_ref())?;
    if header_version.is_none() {
        return Err(McpError::HeaderMismatch(
            "Header mismatch: required MCP-Protocol-Version header is missing".into(),
        ));
    }
    if header_method.is_none() {
        return Err(McpError::HeaderMismatch(
            "Header mismatch: required Mcp-Method header is missing".into(),
        ));
    }
    let params = params.unwrap_or_default();
    headers::check_name_header(header_name, &request.method, &params, true)?;
    let routed = route(
        suite,
        server,
        request.id,
        request.method,
        params,
        meta,
        assigns,
        outbox,
    )?;
    if let Routed::Unary { method, params, .. } = &routed {
        headers::check_param_headers(head, &suite.param_headers(method, params)?, true)?;
    }
    Ok(routed)
}

/// A unary request as routed, and whether its client takes an SSE reply.
pub(super) struct UnaryRequest {
    pub(super) method: String,
    pub(super) params: Map<String, Value>,
    pub(super) channel: Channel,
    /// `Accept` admits `text/event-stream`. When it does not, the reply is
    /// always the response alone, as JSON: the request-scoped notifications
    /// sent before it (progress, logs) are dropped.
    pub(super) sse: bool,
}

pub(super) async fn unary<H: SubscriptionHandler>(
    state: &AppState<H>,
    request: UnaryRequest,
    mut rx: OutboxReceiver,
    permit: OwnedSemaphorePermit,
    origin: Origin,
) -> HttpResponse {
    let UnaryRequest {
        method,
        params,
        channel,
        sse,
    } = request;
    let deadlines = Deadlines {
        request: state.config.request_timeout,
        stall: state.server.limits().stall_timeout,
    };
    let id = channel.id().clone();
    let (future, status_rx) = unary_future(
        &state.suite,
        &state.server,
        method,
        params,
        channel,
        deadlines,
        permit,
        origin,
    );
    let mut task = AbortOnDrop(run_or_spawn(Box::pin(future)).await);
    let no_response = || {
        error_response(
            Some(&id),
            &McpError::internal("Internal error: no response"),
            Phase::Dispatch,
        )
    };
    let Some(mut first) = rx.recv().await else {
        task.0.take();
        return no_response();
    };
    while !sse && !first.last {
        let Some(next) = rx.recv().await else {
            task.0.take();
            return no_response();
        };
        first = next;
    }
    if first.last {
        let status = status_rx.await.unwrap_or(ReplyStatus::OK);
        state.server.count_frames(1);
        let mut resp = json_response(status.code, first.to_bytes());
        if let Some(secs) = status.retry_after {
            // A limit hit inside the handler (spent request states): say when
            // to retry, as every other 429 does.
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        return resp;
    }
    super::sse::sse_response(SseBody::new(
        first,
        rx,
        None,
        state.config.keep_alive,
        state.server.clone(),
        task,
    ))
}

pub(super) async fn listen<H: SubscriptionHandler>(
    state: &AppState<H>,
    id: RequestId,
    meta: RequestMeta,
    assigns: Assigns,
    filter: SubscriptionFilter,
    seen: &mut Seen,
) -> HttpResponse {
    let server = &state.server;
    let (tx, mut rx) = outbox(server.limits().outbox_capacity);
    let (done_tx, done_rx) = oneshot::channel();
    let connection = actix::Actor::start(Connection::exchange(server.clone(), tx.clone(), done_tx));
    if let Err(error) = spawn_listen(
        &state.suite,
        server,
        &connection,
        tx,
        id.clone(),
        meta,
        assigns,
        filter,
    )
    .await
    {
        let outcome = RequestOutcome::of_error(&error);
        server.record_request(methods::LISTEN, outcome, None);
        seen.outcome(outcome);
        return error_response(Some(&id), &error, Phase::Dispatch);
    }
    server.record_request(methods::LISTEN, RequestOutcome::Ok, None);
    // The stream's span and session duration from here on.
    seen.taken();
    drop(connection);
    let Some(first) = rx.recv().await else {
        return error_response(
            Some(&id),
            &McpError::internal("Internal error: stream ended before its acknowledgement"),
            Phase::Dispatch,
        );
    };
    if first.last {
        // Rejected before the acknowledgement: a plain JSON error reply.
        let status = serde_json::from_slice::<Value>(&first.to_bytes())
            .ok()
            .and_then(|v| v.pointer("/error/code").and_then(Value::as_i64))
            .map_or(200, |code| status_for_code(code, Phase::Dispatch));
        server.count_frames(1);
        return json_response(status, first.to_bytes());
    }
    super::sse::sse_response(SseBody::new(
        first,
        rx,
        Some(done_rx),
        state.config.keep_alive,
        server.clone(),
        AbortOnDrop(None),
    ))
}
