//! One request as the OpenTelemetry MCP conventions see it: its span (named
//! `{mcp.method.name} {target}` through `otel.name`, with the conventions'
//! attributes, child of the caller's `traceparent`) and its
//! `mcp.server.operation.duration` observation.
//!
//! The span is the `request` span of `tracing` at DEBUG: a subscriber at INFO
//! does not create it (and pays for none of its fields); an OpenTelemetry
//! layer enables it for itself. Arguments, results, tokens and session ids
//! never become attributes: only the method, the target (tool or prompt name,
//! resource URI), ids, the protocol version, the transport and the error code.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::conventions::{
    CANCELLED, NetworkTransport, OTHER, OperationLabels, TOOL_ERROR, code_label, error_type,
    operation_method_label, status_label,
};
use super::requests::RequestOutcome;
use super::server::Server;
use crate::mux::Channel;
use crate::protocol::trace_context::TraceContext;
use crate::protocol::{McpError, RequestId, methods};

/// The longest target (tool name, prompt name, resource URI) put in a span.
pub const MAX_TARGET_LEN: usize = 256;

/// What a transport knows of a request as it dispatches it.
pub(crate) struct OperationStart<'a> {
    /// The JSON-RPC method.
    pub(crate) method: &'a str,
    /// Its params (read for the target only).
    pub(crate) params: &'a Map<String, Value>,
    /// How the client reached the server.
    pub(crate) transport: NetworkTransport,
    /// The bounded protocol version label.
    pub(crate) version: &'static str,
    /// For `tools/call` and `prompts/get`: whether the catalog knows the
    /// named tool or prompt (an unknown name is labelled [`OTHER`] in the
    /// metric and left out of the span name).
    pub(crate) target_known: bool,
    /// The HTTP `traceparent`/`tracestate` headers, used when `_meta` has no
    /// valid `traceparent`.
    pub(crate) header_trace: Option<TraceContext>,
}

/// The target of a request: the tool or prompt name, or the resource URI
/// (without its userinfo, query or fragment: [`redacted_uri`]), at most
/// [`MAX_TARGET_LEN`] bytes.
fn target<'p>(
    method: &str,
    params: &'p Map<String, Value>,
) -> Option<(&'static str, Cow<'p, str>)> {
    let (field, key) = match method {
        methods::TOOLS_CALL => ("gen_ai.tool.name", "name"),
        methods::PROMPTS_GET => ("gen_ai.prompt.name", "name"),
        methods::RESOURCES_READ | "resources/subscribe" | "resources/unsubscribe" => {
            ("mcp.resource.uri", "uri")
        }
        _ => return None,
    };
    let value = params.get(key)?.as_str()?;
    let value = if key == "uri" {
        redacted_uri(value)
    } else {
        Cow::Borrowed(value)
    };
    let value = match value {
        Cow::Borrowed(v) => Cow::Borrowed(crate::protocol::meta::truncate_str(v, MAX_TARGET_LEN)),
        Cow::Owned(v) => {
            Cow::Owned(crate::protocol::meta::truncate_str(&v, MAX_TARGET_LEN).to_owned())
        }
    };
    Some((field, value))
}

/// A resource URI as a span carries it: without userinfo (`user:pass@`),
/// query (`?sig=...`) or fragment, which may hold credentials. A password
/// may hold `?`, `#` or `/` in a hand-written URI, so the userinfo is looked
/// for before the query is cut, and when the authority (up to the first
/// `/`) has a `:` but no `@`, an `@` anywhere after it counts as ending a
/// userinfo (`u:pa/ss@host`): when in doubt, more is dropped, never a
/// password kept.
pub(crate) fn redacted_uri(uri: &str) -> Cow<'_, str> {
    let cut = |u: &str| u.find(['?', '#']).unwrap_or(u.len());
    // `://` ends a scheme only when what precedes it is one (a `://` in a
    // query is not).
    let start = uri
        .find("://")
        .filter(|&i| is_scheme(&uri[..i]))
        .map(|i| i + 3);
    let Some(start) = start else {
        return Cow::Borrowed(&uri[..cut(uri)]);
    };
    let rest = &uri[start..];
    let first_slash = rest.find('/').unwrap_or(rest.len());
    let userinfo_end = match rest[..first_slash].rfind('@') {
        Some(at) => Some(at),
        None if rest[..first_slash].contains(':') => rest.rfind('@'),
        None => None,
    };
    match userinfo_end {
        Some(at) => {
            let host = &rest[at + 1..];
            Cow::Owned(format!("{}{}", &uri[..start], &host[..cut(host)]))
        }
        None => Cow::Borrowed(&uri[..start + cut(rest)]),
    }
}

/// Whether `s` is a URI scheme: a letter, then letters, digits, `+`, `-`
/// or `.`.
fn is_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// Whether the span name may carry the target: a tool or prompt the catalog
/// knows (never client text the server did not define; resource URIs never,
/// they are unbounded).
fn named_target(method: &str, known: bool) -> bool {
    known && matches!(method, methods::TOOLS_CALL | methods::PROMPTS_GET)
}

/// `jsonrpc.request.id`: the id as text, a string id without its quotes.
pub(crate) struct IdAttr<'a>(pub(crate) &'a RequestId);

impl std::fmt::Display for IdAttr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => f.write_str(s),
        }
    }
}

/// A request in progress: its span and the labels of its duration.
///
/// Dropped without [`Operation::finish`] (its task aborted: the HTTP client
/// went away, stdio `notifications/cancelled`, stdin closed), it records
/// itself as [`CANCELLED`]: `error.type = cancelled` on its span (status
/// error) and in `mcp.server.operation.duration`, with its duration so far.
pub(crate) struct Operation {
    span: tracing::Span,
    labels: OperationLabels,
    started: Instant,
    /// Where the duration is recorded, also when dropped unfinished.
    server: Server,
    /// [`Operation::finish`] ran: nothing to record on drop.
    finished: bool,
}

/// What is known of a request its transport refused before any handler saw
/// it (malformed JSON, headers, authentication, a limit, an unknown session, a
/// method not routed): whatever had been read when it was refused. Its
/// [`Operation::refused`] span and duration carry no more than that.
#[derive(Clone, Debug)]
pub(crate) struct Refused {
    /// `mcp.method.name`, bounded ([`operation_method_label`]); [`OTHER`]
    /// when the method was not read.
    pub(crate) method: &'static str,
    /// The `method` label of the logs ([`super::requests::method_label`]).
    pub(crate) log_method: &'static str,
    /// The request's id, when read.
    pub(crate) id: Option<RequestId>,
    /// The span attribute and value of the target (tool, prompt, URI).
    pub(crate) target: Option<(&'static str, String)>,
    /// `_meta`'s trace context, else the HTTP headers'.
    pub(crate) trace: Option<TraceContext>,
    /// The bounded protocol version label.
    pub(crate) version: &'static str,
    /// How the client reached the server.
    pub(crate) transport: NetworkTransport,
    /// The span's `outcome`: `refused` unless the runtime counted the
    /// request otherwise (`error` or `limited`: a listen it could not open,
    /// a stdio request past the in-flight limit), as
    /// `genmcp_requests_total` does.
    pub(crate) outcome: RequestOutcome,
}

impl Refused {
    /// A request of which nothing but its transport (and HTTP trace headers)
    /// is known yet.
    pub(crate) fn unread(transport: NetworkTransport, trace: Option<TraceContext>) -> Self {
        Refused {
            method: OTHER,
            log_method: super::requests::OTHER_METHOD,
            id: None,
            target: None,
            trace,
            version: OTHER,
            transport,
            outcome: RequestOutcome::Refused,
        }
    }

    /// Notes the request's id (not one longer than the envelope allows: it
    /// was refused for that, and is not repeated in a span).
    pub(crate) fn set_id(&mut self, id: &RequestId) {
        let fits = match id {
            RequestId::String(s) => s.len() <= crate::protocol::jsonrpc::MAX_ID_LEN,
            RequestId::Number(_) => true,
        };
        if fits {
            self.id = Some(id.clone());
        }
    }

    /// Notes what can be read of the JSON-RPC message `bytes` (a request
    /// refused after it was parsed, whose parsed form is gone): its method,
    /// target, `_meta` trace context, version and id. Anything unreadable
    /// is left as it was.
    pub(crate) fn read_message(&mut self, bytes: &[u8]) {
        let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(bytes) else {
            return;
        };
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            self.read(method, message.get("params").and_then(Value::as_object));
        }
        if let Some(id) = message.get("id").and_then(RequestId::from_value) {
            self.set_id(&id);
        }
    }

    /// Notes the method (and target, `_meta` trace context and protocol
    /// version) read from a request.
    pub(crate) fn read(&mut self, method: &str, params: Option<&Map<String, Value>>) {
        self.method = operation_method_label(method);
        self.log_method = super::requests::method_label(method);
        self.target = params
            .and_then(|p| target(method, p))
            .map(|(field, value)| (field, value.into_owned()));
        let meta = params
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object);
        if let Some(trace) = meta.and_then(TraceContext::from_meta) {
            self.trace = Some(trace);
        }
        // The `_meta` version is the 2026-07-28 key: a 2025-era version in
        // it is not served (`_OTHER`).
        if let Some(version) = crate::protocol::RequestMeta::raw_version(params) {
            self.version = super::conventions::version_label(version, &[]);
        }
    }
}

/// How a refused request was answered, for its `error.type` and
/// `rpc.response.status_code`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Refusal {
    /// A JSON-RPC error with this code (`error.type` is the code).
    Rpc(i64),
    /// An HTTP refusal saying why by its status (401, 403, 404, 413, 429...):
    /// `error.type` is the status; `code` is the JSON-RPC error code of its
    /// body, if it has one.
    Http {
        /// The HTTP status.
        status: u16,
        /// The body's JSON-RPC error code.
        code: Option<i64>,
    },
}

/// The `gen_ai.tool.name` label: the name of a tool the catalog knows,
/// [`OTHER`] for any other `tools/call`, empty for other methods.
fn tool_label(method: &str, target: Option<(&str, &str)>, tool_known: bool) -> Cow<'static, str> {
    match (method, target) {
        (methods::TOOLS_CALL, Some((_, name)))
            if tool_known && name.len() <= super::conventions::MAX_TOOL_LABEL_LEN =>
        {
            Cow::Owned(name.to_owned())
        }
        (methods::TOOLS_CALL, _) => Cow::Borrowed(OTHER),
        _ => Cow::Borrowed(""),
    }
}

/// The request span, at DEBUG (see the module documentation). `principal`
/// and `trace` are asked only when the span is enabled. `known`: whether the
/// catalog defines the target (a tool or prompt), so that it may name the span.
#[allow(clippy::too_many_arguments)]
fn request_span(
    log_method: &'static str,
    method: &'static str,
    id: Option<&RequestId>,
    principal: impl FnOnce() -> Option<String>,
    target: Option<(&'static str, &str)>,
    known: bool,
    transport: NetworkTransport,
    version: &'static str,
    trace: impl FnOnce() -> Option<TraceContext>,
) -> tracing::Span {
    let span = tracing::debug_span!(
        "request",
        method = log_method,
        request_id = id.map(tracing::field::display),
        principal = tracing::field::Empty,
        outcome = tracing::field::Empty,
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = method,
        mcp.protocol.version = version,
        jsonrpc.request.id = id.map(|id| tracing::field::display(IdAttr(id))),
        gen_ai.operation.name = tracing::field::Empty,
        gen_ai.tool.name = tracing::field::Empty,
        gen_ai.prompt.name = tracing::field::Empty,
        mcp.resource.uri = tracing::field::Empty,
        network.transport = transport.as_str(),
        error.type = tracing::field::Empty,
        rpc.response.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        if let Some(principal) = principal() {
            span.record("principal", principal.as_str());
        }
        match target {
            Some((_, value)) if named_target(method, known) => {
                span.record("otel.name", format!("{method} {value}").as_str());
            }
            _ => {
                span.record("otel.name", method);
            }
        }
        if let Some((field, value)) = target {
            span.record(field, value);
        }
        if method == methods::TOOLS_CALL {
            span.record("gen_ai.operation.name", "execute_tool");
        }
        if let Some(trace) = trace() {
            set_parent(&span, &trace);
        }
    }
    span
}

impl Operation {
    /// Starts the operation of the request on `channel`: makes its span (a
    /// child of the caller's trace context when the `otel` feature is on).
    pub(crate) fn start(server: &Server, channel: &Channel, start: OperationStart<'_>) -> Self {
        let method = operation_method_label(start.method);
        let target = target(start.method, start.params);
        let target = target.as_ref().map(|(f, v)| (*f, v.as_ref()));
        let tool = tool_label(start.method, target, start.target_known);
        let span = request_span(
            super::requests::method_label(start.method),
            method,
            Some(channel.id()),
            || server.principal(channel.assigns()),
            target,
            start.target_known,
            start.transport,
            start.version,
            || TraceContext::from_meta(&channel.meta().extra).or(start.header_trace),
        );
        Operation {
            span,
            labels: OperationLabels {
                method,
                tool,
                error_type: "",
                transport: start.transport,
                version: start.version,
            },
            started: Instant::now(),
            server: server.clone(),
            finished: false,
        }
    }

    /// Records a request refused before any handler saw it, as
    /// [`Operation::start`] and [`Operation::finish`] would have: its span
    /// (with `error.type`, `rpc.response.status_code` when the answer has a
    /// JSON-RPC code, `outcome = refused`) and its duration since `started`
    /// (when the transport began reading it). The span is made at the refusal.
    /// `known(method, name)`: whether the catalog has the tool or prompt
    /// named (asked of a `tools/call` or `prompts/get` only).
    pub(crate) fn refused(
        server: &Server,
        refused: Refused,
        how: Refusal,
        started: Instant,
        known: impl FnOnce(&str, &str) -> bool,
    ) {
        let Refused {
            method,
            log_method,
            id,
            target,
            trace,
            version,
            transport,
            outcome,
        } = refused;
        let target = target.as_ref().map(|(f, v)| (*f, v.as_str()));
        let known = matches!(method, methods::TOOLS_CALL | methods::PROMPTS_GET)
            && target.is_some_and(|(_, name)| known(method, name));
        let tool = tool_label(method, target, known);
        let span = request_span(
            log_method,
            method,
            id.as_ref(),
            || None,
            target,
            known,
            transport,
            version,
            || trace,
        );
        let (error_type, code) = match how {
            Refusal::Rpc(code) => (code_label(code), Some(code)),
            Refusal::Http { status, code } => (status_label(status), code),
        };
        if !span.is_disabled() {
            span.record("outcome", outcome.as_str());
            span.record("error.type", error_type);
            span.record("otel.status_code", "ERROR");
            if let Some(code) = code {
                span.record("rpc.response.status_code", code.to_string().as_str());
            }
            span.in_scope(|| tracing::debug!("request refused"));
        }
        server.conventions().record_operation(
            OperationLabels {
                method,
                tool,
                error_type,
                transport,
                version,
            },
            started.elapsed(),
        );
    }

    /// The span, to instrument the request's future with.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Records how the request ended: `error.type`, `rpc.response.status_code`
    /// and the span status on its span, and its duration (since
    /// [`Operation::start`]) in `mcp.server.operation.duration`. A result
    /// with `isError: true` is a `tool_error`.
    pub(crate) fn finish(
        self,
        server: &Server,
        result: Result<&Map<String, Value>, &McpError>,
        outcome: RequestOutcome,
    ) {
        let took = self.started.elapsed();
        self.finish_after(server, result, outcome, took);
    }

    fn finish_after(
        mut self,
        _server: &Server,
        result: Result<&Map<String, Value>, &McpError>,
        outcome: RequestOutcome,
        took: Duration,
    ) {
        let error_type = match result {
            Ok(result) if result.get("isError") == Some(&Value::Bool(true)) => Some(TOOL_ERROR),
            Ok(_) => None,
            Err(error) => Some(error_type(error)),
        };
        self.span.record("outcome", outcome.as_str());
        if let Some(error_type) = error_type {
            self.span.record("error.type", error_type);
            self.span.record("otel.status_code", "ERROR");
            if let Err(error) = result {
                self.span.record(
                    "rpc.response.status_code",
                    error.code().to_string().as_str(),
                );
            }
            self.labels.error_type = error_type;
        }
        self.finished = true;
        self.record(took);
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.span.record("outcome", CANCELLED);
        self.span.record("error.type", CANCELLED);
        self.span.record("otel.status_code", "ERROR");
        if !self.span.is_disabled() {
            self.span
                .in_scope(|| tracing::debug!("request cancelled before its answer"));
        }
        self.labels.error_type = CANCELLED;
        self.record(self.started.elapsed());
    }
}

impl Operation {
    /// Records the duration under the labels (taking the tool name, the one
    /// label that may own its text: no copy).
    fn record(&mut self, took: Duration) {
        let labels = OperationLabels {
            tool: std::mem::take(&mut self.labels.tool),
            ..self.labels.clone()
        };
        self.server.conventions().record_operation(labels, took);
    }
}

/// Makes the caller's span the parent of `span` (with the `otel` feature; a
/// no-op without it).
#[cfg(feature = "otel")]
pub(crate) fn set_parent(span: &tracing::Span, trace: &TraceContext) {
    crate::otel::set_parent(span, trace);
}

#[cfg(not(feature = "otel"))]
pub(crate) fn set_parent(_span: &tracing::Span, _trace: &TraceContext) {}

#[cfg(test)]
mod tests {
    use super::redacted_uri;

    #[test]
    fn resource_uris_lose_their_credentials() {
        for (uri, redacted) in [
            ("notes://1", "notes://1"),
            (
                "https://user:pw@host.example/a/b?sig=s3cret#frag",
                "https://host.example/a/b",
            ),
            ("file:///a/b?token=x", "file:///a/b"),
            ("s3://bucket/key@v2", "s3://bucket/key@v2"),
            ("db://u@h", "db://h"),
            // A password holding `#`, `?` or `/`.
            ("https://admin:hunter#2@db/x", "https://db/x"),
            ("https://u:p?w@h/", "https://h/"),
            ("https://u:pa/ss@h/x?k=v", "https://h/x"),
            // A `/` then a `?` or `#` in the password.
            ("https://u:pa/s?s@h/x", "https://h/x"),
            ("https://u:p#/x@h", "https://h"),
            // A port and an `@` in the path: more dropped, nothing kept.
            ("http://host:8080/users/@me", "http://me"),
            ("mailto:a@b?subject=x", "mailto:a@b"),
            // A `://` in the query is no scheme's: the query goes.
            ("app:res?sig=SECRET&next=https://x", "app:res"),
            ("a?b=c://d@e", "a"),
        ] {
            assert_eq!(redacted_uri(uri), redacted, "{uri}");
        }
    }
}
