//! Streamable HTTP (2026-07-28) on actix-web: `POST /mcp` only, one JSON-RPC
//! message per POST, JSON or SSE replies, listen streams as SSE.
//!
//! Validation runs in the order the reference fixes (see `docs/http.md`): Host and
//! Origin (403), method (405), in-flight limit (503), Accept (406), Content-Type
//! (415), declared body size (413), the assigns hook on the head (401), body
//! (413 past the size, 408 past the body deadline), JSON (-32700), envelope
//! (-32600), notifications (202), header/body cross-checks (-32020), `_meta`
//! (-32602), version (-32022), required headers (-32020), method (-32601, 404),
//! params (-32602), dispatch. Every bound is listed in `docs/security.md`.

mod compat;
mod headers;
mod sse;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::http::{StatusCode, header};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use futures_util::StreamExt as _;
use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::dispatch::{Deadlines, ListenRequest, Routed, route, spawn_unary, validate_meta};
use crate::mux::{Assigns, Channel, Outbox, OutboxReceiver, outbox};
use crate::protocol::error::status_for_code;
use crate::protocol::jsonrpc::encode_error;
use crate::protocol::{
    Incoming, McpError, Phase, Request, RequestId, RequestMeta, SubscriptionFilter, methods,
};
use crate::runtime::{Connection, Limits, Server, spawn_listen};
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

pub use compat::{CompatConfig, LEGACY_VERSIONS};
pub use headers::decode_value as decode_header_value;
use sse::{AbortOnDrop, SseBody};

/// Builds the [`Assigns`] of a request from its HTTP head (e.g. an authenticated
/// principal from `Authorization`). Returning `Err(message)` answers 401. It runs
/// before the body is read, so an unauthenticated client cannot make the server
/// read and parse a body.
pub type AssignsHook = Arc<dyn Fn(&HttpRequest) -> Result<Assigns, String> + Send + Sync>;

/// Configuration of the HTTP transport. Every bound has a default.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// Address to bind (default `127.0.0.1`).
    pub host: String,
    /// Port to bind (default 8080; 0 picks a free port).
    pub port: u16,
    /// The MCP endpoint path (default `/mcp`).
    pub path: String,
    /// SSE keep-alive comment interval on idle streams (default 15 s). It is also
    /// how a dead client is noticed: within about two intervals.
    pub keep_alive: Duration,
    /// Largest request body (default 4 MiB); larger is 413.
    pub max_body: usize,
    /// How long reading a request body may take (default 10 s), from the end of
    /// the head; past it the request is answered 408 and the connection closed
    /// (a slow-drip body cannot hold a connection and a buffer).
    pub body_timeout: Duration,
    /// How long a unary request's handler may run (default 60 s); past it the
    /// handler's future is dropped and the client gets `-32603` "Request timed
    /// out".
    pub request_timeout: Duration,
    /// HTTP requests in flight at once (default 1,024): from the head until a
    /// unary request is answered, or until a listen stream is set up (an open
    /// stream then counts against `Limits::max_streams` instead). Past it: 503
    /// with `Retry-After` and a `-32603` body, without reading the body.
    pub max_in_flight: usize,
    /// Hostnames accepted in `Host` and `Origin` (default loopback only:
    /// `127.0.0.1`, `localhost`, `::1`); `"*"` accepts any. Others get 403.
    pub allowed_hosts: Vec<String>,
    /// Worker threads (default: the number of CPUs).
    pub workers: usize,
    /// How long a graceful shutdown waits for streams to finish (default 5 s).
    pub drain_timeout: Duration,
    /// Runtime limits.
    pub limits: Limits,
    /// Optional hook that attaches application data to each request.
    pub assigns: Option<AssignsHook>,
    /// The 2025-era compatibility path (`initialize`, sessions, the GET
    /// stream; see `docs/compat-2025.md`); `None` serves 2026-07-28 only.
    pub compat: Option<CompatConfig>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            host: "127.0.0.1".into(),
            port: 8080,
            path: "/mcp".into(),
            keep_alive: Duration::from_secs(15),
            max_body: 4 * 1024 * 1024,
            body_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_in_flight: 1_024,
            allowed_hosts: vec!["127.0.0.1".into(), "localhost".into(), "::1".into()],
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            drain_timeout: Duration::from_secs(5),
            limits: Limits::default(),
            assigns: None,
            compat: Some(CompatConfig::default()),
        }
    }
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("path", &self.path)
            .field("keep_alive", &self.keep_alive)
            .field("max_body", &self.max_body)
            .field("body_timeout", &self.body_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_in_flight", &self.max_in_flight)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("workers", &self.workers)
            .field("limits", &self.limits)
            .field("compat", &self.compat)
            .finish()
    }
}

struct AppState<H: SubscriptionHandler> {
    suite: Suite<H>,
    server: Server,
    config: HttpConfig,
    in_flight: Arc<Semaphore>,
    compat: Option<Arc<compat::Compat>>,
}

/// A started HTTP server.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// The runtime root: metrics, shutdown.
    pub server: Server,
    handle: ServerHandle,
    drain_timeout: Duration,
}

impl Running {
    /// Graceful stop: every open stream gets its completion result (and its
    /// `handle_close`), then the HTTP server stops.
    pub async fn stop(&self) {
        self.server.shutdown();
        self.server.drained(self.drain_timeout).await;
        self.handle.stop(true).await;
    }

    /// The actix-web handle (to await or stop the server directly).
    pub fn handle(&self) -> ServerHandle {
        self.handle.clone()
    }
}

/// Binds and starts the server on the current actix System, returning at once.
/// The server runs until [`Running::stop`].
pub fn start<H: SubscriptionHandler>(
    suite: Suite<H>,
    config: HttpConfig,
) -> io::Result<(Running, actix_web::dev::Server)> {
    let server = Server::new(config.limits.clone());
    let state = web::Data::new(AppState {
        suite,
        server: server.clone(),
        config: config.clone(),
        in_flight: Arc::new(Semaphore::new(config.max_in_flight.max(1))),
        compat: config
            .compat
            .clone()
            .map(|c| Arc::new(compat::Compat::new(c))),
    });
    let path = config.path.clone();
    let http = HttpServer::new(move || {
        App::new().app_data(state.clone()).service(
            web::resource(path.as_str())
                .route(web::post().to(post::<H>))
                .route(web::get().to(compat::get::<H>))
                .route(web::delete().to(compat::delete::<H>))
                .default_service(web::to(method_not_allowed)),
        )
    })
    .workers(config.workers.max(1))
    .disable_signals()
    .shutdown_timeout(1)
    .bind((config.host.as_str(), config.port))?;
    let addr = http
        .addrs()
        .first()
        .copied()
        .ok_or_else(|| io::Error::other("no address bound"))?;
    let running = http.run();
    Ok((
        Running {
            addr,
            server,
            handle: running.handle(),
            drain_timeout: config.drain_timeout,
        },
        running,
    ))
}

/// Serves `suite` until SIGINT or SIGTERM, then drains gracefully: every open
/// stream gets its completion result before the process exits.
pub async fn serve<H: SubscriptionHandler>(suite: Suite<H>, config: HttpConfig) -> io::Result<()> {
    let (running, http) = start(suite, config)?;
    tracing::info!(addr = %running.addr, "genmcp listening");
    let http = actix_rt::spawn(http);
    shutdown_signal().await;
    tracing::info!("shutting down: completing open streams");
    running.stop().await;
    let _ = http.await;
    Ok(())
}

pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A server running on its own thread with its own actix System: for tests,
/// benchmarks and embedding in non-actix programs.
pub struct ServerThread {
    /// The bound address.
    pub addr: SocketAddr,
    /// The runtime root: metrics, shutdown.
    pub server: Server,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    /// Starts `make_suite()` on a new thread (the suite is built there).
    pub fn spawn<H, F>(make_suite: F, config: HttpConfig) -> io::Result<ServerThread>
    where
        H: SubscriptionHandler,
        F: FnOnce() -> Suite<H> + Send + 'static,
    {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let system = actix_rt::System::new();
            system.block_on(async move {
                let (running, http) = match start(make_suite(), config) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((running.addr, running.server.clone())));
                let http = actix_rt::spawn(http);
                let (tx, rx) = oneshot::channel::<()>();
                std::thread::spawn(move || {
                    let _ = stop_rx.recv();
                    let _ = tx.send(());
                });
                let _ = rx.await;
                running.stop().await;
                let _ = http.await;
            });
        });
        let (addr, server) = ready_rx
            .recv()
            .map_err(|_| io::Error::other("server thread died"))??;
        Ok(ServerThread {
            addr,
            server,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The endpoint URL.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Graceful stop, waiting for the thread to end.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

async fn method_not_allowed() -> HttpResponse {
    HttpResponse::MethodNotAllowed()
        .insert_header((header::ALLOW, "POST"))
        .finish()
}

fn json_response(status: u16, body: Vec<u8>) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
        .content_type("application/json")
        .body(body)
}

fn error_response(id: Option<&RequestId>, error: &McpError, phase: Phase) -> HttpResponse {
    json_response(error.http_status(phase), encode_error(id, error))
}

/// A 4xx with an id-less JSON-RPC error body (transport-level refusals).
fn refusal(status: StatusCode, message: String) -> HttpResponse {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": message},
    });
    HttpResponse::build(status)
        .content_type("application/json")
        .body(body.to_string())
}

/// The message of a 503: stable, so clients can match it.
const OVERLOADED: &str = "Server overloaded: too many requests in flight; retry later";

fn overloaded() -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .insert_header((header::RETRY_AFTER, "1"))
        .content_type("application/json")
        .body(encode_error(None, &McpError::internal(OVERLOADED)))
}

fn too_large(limit: usize) -> HttpResponse {
    json_response(
        413,
        encode_error(
            None,
            &McpError::InvalidRequest(format!("request body larger than {limit} bytes")),
        ),
    )
}

/// Reads the body, at most `limit` bytes. A transport error is logged and
/// answered with a short stable message: its detail is the server's business.
/// `expected` is the declared `Content-Length` (already checked against `limit`);
/// at most 64 KiB are allocated up front on its word alone, so a client that
/// declares a large body and sends nothing costs little.
async fn read_body(
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
async fn read_body_within(
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

async fn post<H: SubscriptionHandler>(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState<H>>,
) -> HttpResponse {
    let config = &state.config;
    if let Err(why) = headers::check_host_and_origin(&req, &config.allowed_hosts) {
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
            "Not Acceptable: Accept must include application/json and text/event-stream".into(),
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
    // Authentication looks at the head only, before any body is read.
    let assigns = match &config.assigns {
        Some(hook) => match hook(&req) {
            Ok(a) => a,
            Err(why) => {
                let mut resp = refusal(StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}"));
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                resp.head_mut()
                    .set_connection_type(actix_web::http::ConnectionType::Close);
                return resp;
            }
        },
        None => Assigns::new(),
    };
    let body = match read_body_within(payload, config.max_body, declared, config.body_timeout).await
    {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    if let Some(compat) = &state.compat
        && let Some(legacy) = compat::legacy_body(&req, &body)
    {
        return compat::post(&state, compat, &req, legacy, assigns, permit).await;
    }
    let request = match Incoming::parse(&body) {
        Ok(Incoming::Request(r)) => r,
        Ok(Incoming::Notification(_)) => return HttpResponse::Accepted().finish(),
        Err(e) => return error_response(e.id.as_ref(), &e.error, Phase::Validation),
    };
    drop(body);
    let id = request.id.clone();
    let (tx, rx) = outbox(state.server.limits().outbox_capacity);
    match validate(&state.suite, &req, request, assigns, &state.server, tx) {
        Ok(Routed::Unary {
            method,
            params,
            channel,
        }) => unary(&state, method, params, channel, rx, permit).await,
        Ok(Routed::Listen(listen_request)) => {
            let ListenRequest {
                meta,
                assigns,
                filter,
            } = *listen_request;
            if !headers::accepts(req.headers(), "text/event-stream") {
                return refusal(
                    StatusCode::NOT_ACCEPTABLE,
                    "Not Acceptable: subscriptions/listen answers with text/event-stream".into(),
                );
            }
            let response = listen(&state, id, meta, assigns, filter).await;
            drop(permit);
            response
        }
        Err(error) => error_response(Some(&id), &error, Phase::Validation),
    }
}

fn validate<H: SubscriptionHandler>(
    suite: &Suite<H>,
    req: &HttpRequest,
    request: Request,
    assigns: Assigns,
    server: &Server,
    outbox: Outbox,
) -> Result<Routed, McpError> {
    let head = req.headers();
    let header_version = headers::routing_header(head, headers::PROTOCOL_VERSION)?;
    let header_method = headers::routing_header(head, headers::METHOD)?;
    let header_name = headers::routing_header(head, headers::NAME)?;
    let params = request.params;
    if let (Some(h), Some(body)) = (header_version, RequestMeta::raw_version(params.as_ref()))
        && h != body
    {
        return Err(McpError::HeaderMismatch(format!(
            "Header mismatch: MCP-Protocol-Version header value '{h}' does not match body value '{body}'"
        )));
    }
    if let Some(h) = header_method
        && h != request.method
    {
        return Err(McpError::HeaderMismatch(format!(
            "Header mismatch: Mcp-Method header value '{h}' does not match body value '{}'",
            request.method
        )));
    }
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
    let name_field = match request.method.as_str() {
        methods::TOOLS_CALL | methods::PROMPTS_GET => Some("name"),
        methods::RESOURCES_READ => Some("uri"),
        _ => None,
    };
    if let Some(field) = name_field {
        let raw = header_name.ok_or_else(|| {
            McpError::HeaderMismatch("Header mismatch: required Mcp-Name header is missing".into())
        })?;
        let decoded = headers::decode_value(raw)?;
        let body = params
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default();
        if decoded != body {
            return Err(McpError::HeaderMismatch(format!(
                "Header mismatch: Mcp-Name header value '{decoded}' does not match body value '{body}'"
            )));
        }
    }
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
        for expected in suite.param_headers(method, params)? {
            headers::check_param_header(head, &expected)?;
        }
    }
    Ok(routed)
}

async fn unary<H: SubscriptionHandler>(
    state: &AppState<H>,
    method: String,
    params: Map<String, Value>,
    channel: Channel,
    mut rx: OutboxReceiver,
    permit: OwnedSemaphorePermit,
) -> HttpResponse {
    let deadlines = Deadlines {
        request: state.config.request_timeout,
        stall: state.server.limits().stall_timeout,
    };
    let (task, status_rx) = spawn_unary(&state.suite, method, params, channel, deadlines, permit);
    let mut task = AbortOnDrop(Some(task));
    let Some(first) = rx.recv().await else {
        task.0.take();
        return error_response(
            None,
            &McpError::internal("Internal error: no response"),
            Phase::Dispatch,
        );
    };
    if first.last {
        let status = status_rx.await.unwrap_or(200);
        state.server.count_frames(1);
        return json_response(status, first.to_bytes().to_vec());
    }
    sse_response(SseBody::new(
        first,
        rx,
        None,
        state.config.keep_alive,
        state.server.clone(),
        task,
    ))
}

async fn listen<H: SubscriptionHandler>(
    state: &AppState<H>,
    id: RequestId,
    meta: RequestMeta,
    assigns: Assigns,
    filter: SubscriptionFilter,
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
        return error_response(Some(&id), &error, Phase::Dispatch);
    }
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
        return json_response(status, first.to_bytes().to_vec());
    }
    sse_response(SseBody::new(
        first,
        rx,
        Some(done_rx),
        state.config.keep_alive,
        server.clone(),
        AbortOnDrop(None),
    ))
}

fn sse_response(body: SseBody) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache, no-transform"))
        .insert_header(("X-Accel-Buffering", "no"))
        .insert_header((header::CONTENT_ENCODING, "identity"))
        .streaming(body)
}
