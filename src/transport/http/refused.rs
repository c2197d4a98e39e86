//! The span and `mcp.server.operation.duration` of an HTTP request refused
//! before any handler saw it (Host, overload, Accept, Content-Type, size,
//! authentication, rate, body, JSON, headers, `_meta`, version, routing, an
//! unknown 2025 session...): every POST that is a request gets them, as
//! the ones dispatched do (see `crate::runtime::Operation`).
//!
//! [`Seen`] gathers what the handler read before it refused (the routing
//! headers, then what the body says: method, id, target, `_meta` trace
//! context, version); [`Seen::finish`] records the refusal from the answer
//! the client got: its status and its JSON-RPC error code. Nothing is read
//! for a request that a handler takes: the dispatch path pays one clock read
//! and a reference count.

use std::time::Instant;

use actix_web::HttpRequest;
use actix_web::HttpResponse;
use actix_web::body::{BoxBody, MessageBody as _};
use serde_json::{Map, Value};

use super::headers::{METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER};
use crate::protocol::RequestId;
use crate::runtime::{NetworkTransport, Operation, Refusal, Refused, Server, version_label};

/// What is known of one POST, until a handler's own operation takes it over.
pub(crate) struct Seen {
    req: HttpRequest,
    /// Read on the first note, from the head.
    refused: Option<Refused>,
    started: Instant,
    /// The request's own operation (a handler's, or a listen's stream) or
    /// nothing (a notification, a client's response) records it.
    taken: bool,
    /// Not a well-formed JSON-RPC request (a 2025 body checked by hand):
    /// not counted in `genmcp_requests_total`, as a 2026 body that does not
    /// parse is not.
    malformed: bool,
}

/// What the head says of a request: the HTTP trace context and the routing
/// headers (`Mcp-Method`, `Mcp-Name`, `MCP-Protocol-Version`).
fn from_head(req: &HttpRequest) -> Refused {
    let origin = super::post::http_origin(req);
    let mut refused = Refused::unread(NetworkTransport::Tcp, origin.header_trace);
    let head = req.headers();
    let value = |name| head.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(method) = value(&METHOD_HEADER) {
        let params = value(&NAME_HEADER).map(|name| {
            let mut p = Map::new();
            p.insert("name".into(), Value::from(name));
            p.insert("uri".into(), Value::from(name));
            p
        });
        refused.read(method, params.as_ref());
    }
    if let Some(version) = value(&PROTOCOL_VERSION_HEADER) {
        refused.version = version_label(version, crate::compat::LEGACY_VERSIONS);
    }
    refused
}

impl Seen {
    /// Starts timing the POST `req`.
    pub(crate) fn new(req: &HttpRequest) -> Self {
        Seen {
            req: req.clone(),
            refused: None,
            started: Instant::now(),
            taken: false,
            malformed: false,
        }
    }

    fn refused(&mut self) -> &mut Refused {
        let req = &self.req;
        self.refused.get_or_insert_with(|| from_head(req))
    }

    /// Notes the body's method, target, `_meta` trace context and version.
    pub(crate) fn read(&mut self, method: &str, params: Option<&Map<String, Value>>) {
        self.refused().read(method, params);
    }

    /// Notes what can be read of the body `bytes` (see
    /// [`Refused::read_message`]).
    pub(crate) fn read_message(&mut self, bytes: &[u8]) {
        self.refused().read_message(bytes);
    }

    /// Notes the caller's trace context (from the request's `_meta`).
    pub(crate) fn trace(&mut self, trace: crate::protocol::trace_context::TraceContext) {
        self.refused().trace = Some(trace);
    }

    /// Notes the request's id.
    pub(crate) fn id(&mut self, id: &RequestId) {
        self.refused().set_id(id);
    }

    /// Notes how the runtime counted the request, when not `refused` (a
    /// listen it could not open): its span says the same.
    pub(crate) fn outcome(&mut self, outcome: crate::runtime::RequestOutcome) {
        self.refused().outcome = outcome;
    }

    /// Notes that the body is not a well-formed JSON-RPC request.
    pub(crate) fn malformed(&mut self) {
        self.malformed = true;
    }

    /// Whether it is counted as a request refused before it ran: neither
    /// taken by its own operation nor malformed.
    pub(crate) fn counts_as_refused(&self) -> bool {
        !self.taken && !self.malformed
    }

    /// Notes the protocol version (a 2025 session's negotiated one).
    pub(crate) fn version(&mut self, version: &str) {
        self.refused().version = version_label(version, crate::compat::LEGACY_VERSIONS);
    }

    /// The request's own operation records it from here on (or it is not a
    /// request: a notification, a client's response).
    pub(crate) fn taken(&mut self) {
        self.taken = true;
    }

    /// Records the request as refused with `resp` (unless [`Seen::taken`])
    /// and gives `resp` back.
    pub(crate) fn finish(
        mut self,
        server: &Server,
        known: impl FnOnce(&str, &str) -> bool,
        resp: HttpResponse,
    ) -> HttpResponse {
        if self.taken {
            return resp;
        }
        let status = resp.status().as_u16();
        let (head, body) = resp.into_parts();
        // Refusals are small JSON bodies: read the error code out of it.
        let (code, body) = match body.try_into_bytes() {
            Ok(bytes) => (error_code(&bytes), BoxBody::new(bytes)),
            Err(body) => (None, body),
        };
        let resp = head.set_body(body);
        let how = match code {
            // The status says why (401, 403, 404, 413, 429, 503...), the body
            // only that the request was not taken.
            Some(-32600 | -32603) | None if !matches!(status, 200 | 400) => {
                Refusal::Http { status, code }
            }
            Some(code) => Refusal::Rpc(code),
            None => Refusal::Http { status, code },
        };
        self.refused();
        if let Some(refused) = self.refused.take() {
            Operation::refused(server, refused, how, self.started, known);
        }
        resp
    }
}

/// The `error.code` of a JSON-RPC error body.
fn error_code(body: &[u8]) -> Option<i64> {
    serde_json::from_slice::<Value>(body)
        .ok()?
        .pointer("/error/code")?
        .as_i64()
}
