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

use super::conventions::operation_method_label;
use super::conventions::{NetworkTransport, OTHER, OperationLabels, TOOL_ERROR, error_type};
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
    /// For `tools/call`: whether the catalog knows the named tool (an unknown
    /// name is labelled [`OTHER`] in the metric).
    pub(crate) tool_known: bool,
    /// The HTTP `traceparent`/`tracestate` headers, used when `_meta` has no
    /// valid `traceparent`.
    pub(crate) header_trace: Option<TraceContext>,
}

/// The target of a request: the tool or prompt name, or the resource URI.
fn target<'p>(method: &str, params: &'p Map<String, Value>) -> Option<(&'static str, &'p str)> {
    let (field, key) = match method {
        methods::TOOLS_CALL => ("gen_ai.tool.name", "name"),
        methods::PROMPTS_GET => ("gen_ai.prompt.name", "name"),
        methods::RESOURCES_READ | "resources/subscribe" | "resources/unsubscribe" => {
            ("mcp.resource.uri", "uri")
        }
        _ => return None,
    };
    let value = params.get(key)?.as_str()?;
    Some((
        field,
        crate::protocol::meta::truncate_str(value, MAX_TARGET_LEN),
    ))
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
pub(crate) struct Operation {
    span: tracing::Span,
    labels: OperationLabels,
    started: Instant,
}

impl Operation {
    /// Starts the operation of the request on `channel`: makes its span (a
    /// child of the caller's trace context when the `otel` feature is on).
    pub(crate) fn start(server: &Server, channel: &Channel, start: OperationStart<'_>) -> Self {
        let method = operation_method_label(start.method);
        let target = target(start.method, start.params);
        let tool: Cow<'static, str> = match (start.method, target) {
            (methods::TOOLS_CALL, Some((_, name)))
                if start.tool_known && name.len() <= super::conventions::MAX_TOOL_LABEL_LEN =>
            {
                Cow::Owned(name.to_owned())
            }
            (methods::TOOLS_CALL, _) => Cow::Borrowed(OTHER),
            _ => Cow::Borrowed(""),
        };
        let span = tracing::debug_span!(
            "request",
            method = super::requests::method_label(start.method),
            request_id = %channel.id(),
            principal = tracing::field::Empty,
            outcome = tracing::field::Empty,
            otel.name = tracing::field::Empty,
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            mcp.method.name = method,
            mcp.protocol.version = start.version,
            jsonrpc.request.id = %IdAttr(channel.id()),
            gen_ai.operation.name = tracing::field::Empty,
            gen_ai.tool.name = tracing::field::Empty,
            gen_ai.prompt.name = tracing::field::Empty,
            mcp.resource.uri = tracing::field::Empty,
            network.transport = start.transport.as_str(),
            error.type = tracing::field::Empty,
            rpc.response.status_code = tracing::field::Empty,
        );
        if !span.is_disabled() {
            if let Some(principal) = server.principal(channel.assigns()) {
                span.record("principal", principal.as_str());
            }
            match target {
                Some((field, value)) => {
                    span.record("otel.name", format!("{method} {value}").as_str());
                    span.record(field, value);
                }
                None => {
                    span.record("otel.name", method);
                }
            }
            if start.method == methods::TOOLS_CALL {
                span.record("gen_ai.operation.name", "execute_tool");
            }
            let trace = TraceContext::from_meta(&channel.meta().extra).or(start.header_trace);
            if let Some(trace) = trace {
                set_parent(&span, &trace);
            }
        }
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
        }
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
        server: &Server,
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
        server.conventions().record_operation(self.labels, took);
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
