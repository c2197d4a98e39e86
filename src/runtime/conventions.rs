//! The metrics of the OpenTelemetry MCP semantic conventions:
//! `mcp.server.operation.duration` and `mcp.server.session.duration`, kept
//! beside the `genmcp_*` ones and exposed under their Prometheus names
//! (`mcp_server_operation_duration_seconds`, `mcp_server_session_duration_seconds`).
//!
//! Every label value comes from a bounded set: methods outside
//! [`super::METHOD_LABELS`], tools the catalog does not know, protocol versions
//! this server does not serve and application error codes are each folded into
//! [`OTHER`]; and past [`MAX_SERIES`] label sets a new tool name is folded too.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use prometheus_client::metrics::histogram::Histogram;

use crate::protocol::McpError;

/// The value every unbounded label is folded into (the OpenTelemetry
/// convention's `_OTHER`).
pub const OTHER: &str = "_OTHER";

/// The `error.type` of a `tools/call` result with `isError: true`.
pub const TOOL_ERROR: &str = "tool_error";

/// The `error.type` (and span `outcome`) of a request whose task ended
/// before it was answered: the HTTP client went away, the stdio client sent
/// `notifications/cancelled`, or stdin closed.
pub const CANCELLED: &str = "cancelled";

/// The most label sets each convention histogram holds; past it, new
/// `gen_ai.tool.name` values are recorded as [`OTHER`].
pub const MAX_SERIES: usize = 1024;

/// The longest tool name used as a label (longer names are [`OTHER`]).
pub const MAX_TOOL_LABEL_LEN: usize = 128;

/// Bucket bounds (seconds) the conventions recommend for both histograms.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// `network.transport`: how the client reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NetworkTransport {
    /// Streamable HTTP (and 2025 sessions) over TCP.
    Tcp,
    /// stdio.
    Pipe,
}

impl NetworkTransport {
    /// The conventional value: `tcp` or `pipe`.
    pub fn as_str(&self) -> &'static str {
        match self {
            NetworkTransport::Tcp => "tcp",
            NetworkTransport::Pipe => "pipe",
        }
    }
}

/// `mcp.protocol.version` as a bounded label: `version` when it is one of
/// the modern versions this server serves or of `also` (the 2025-era ones,
/// passed by the transport that serves them), else [`OTHER`].
pub(crate) fn version_label(version: &str, also: &[&'static str]) -> &'static str {
    crate::protocol::SUPPORTED_VERSIONS
        .iter()
        .chain(also)
        .find(|v| **v == version)
        .copied()
        .unwrap_or(OTHER)
}

/// `mcp.method.name` as a bounded label: the method labels of
/// `genmcp_requests_total` ([`super::METHOD_LABELS`]) and the tasks
/// extension's methods, [`OTHER`] for anything else.
pub fn operation_method_label(method: &str) -> &'static str {
    use crate::suite::tasks::{METHOD_CANCEL, METHOD_GET, METHOD_UPDATE};
    match super::method_label(method) {
        super::OTHER_METHOD => [
            METHOD_GET,
            METHOD_UPDATE,
            METHOD_CANCEL,
            "resources/subscribe",
            "resources/unsubscribe",
        ]
        .into_iter()
        .find(|m| *m == method)
        .unwrap_or(OTHER),
        label => label,
    }
}

/// `error.type` of a protocol error: its JSON-RPC code as text for the codes
/// this crate answers with, [`OTHER`] for an application's own codes.
pub fn error_type(error: &McpError) -> &'static str {
    code_label(error.code())
}

/// The bounded text of a JSON-RPC error code.
pub fn code_label(code: i64) -> &'static str {
    match code {
        -32700 => "-32700",
        -32600 => "-32600",
        -32601 => "-32601",
        -32602 => "-32602",
        -32603 => "-32603",
        -32020 => "-32020",
        -32021 => "-32021",
        -32022 => "-32022",
        -32042 => "-32042",
        _ => OTHER,
    }
}

/// `error.type` of a request refused at the HTTP level (authentication, a
/// limit, a body too large, an unknown session...): its status as text for
/// the 4xx and 5xx statuses this crate answers with, [`OTHER`] for any other.
pub fn status_label(status: u16) -> &'static str {
    match status {
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        406 => "406",
        408 => "408",
        413 => "413",
        415 => "415",
        429 => "429",
        500 => "500",
        503 => "503",
        _ => OTHER,
    }
}

/// The labels of one `mcp.server.operation.duration` observation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperationLabels {
    /// `mcp.method.name`, bounded ([`operation_method_label`]).
    pub method: &'static str,
    /// `gen_ai.tool.name` for `tools/call` (a tool the catalog knows, else
    /// [`OTHER`]); empty for other methods.
    pub tool: Cow<'static, str>,
    /// `error.type`: empty on success, a JSON-RPC code, or [`TOOL_ERROR`].
    pub error_type: &'static str,
    /// `network.transport`.
    pub transport: NetworkTransport,
    /// `mcp.protocol.version`, bounded: a served version, else [`OTHER`].
    pub version: &'static str,
}

/// The labels of one `mcp.server.session.duration` observation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionLabels {
    /// `genmcp.session.kind` (genmcp's own): `listen` (a `subscriptions/listen`
    /// stream), `get` (a 2025-era session's GET stream) or `session` (a
    /// 2025-era HTTP session, from `initialize` to its `DELETE`).
    pub kind: &'static str,
    /// `error.type`: empty for a clean end, else the close reason
    /// (`overflow`, `panicked`, `rejected`).
    pub error_type: &'static str,
    /// `network.transport`.
    pub transport: NetworkTransport,
    /// `mcp.protocol.version`, bounded.
    pub version: &'static str,
}

/// A bounded map of label sets to histograms.
#[derive(Debug)]
pub(crate) struct Family<L> {
    series: Mutex<HashMap<L, Histogram>>,
}

impl<L> Default for Family<L> {
    fn default() -> Self {
        Family {
            series: Mutex::new(HashMap::new()),
        }
    }
}

impl<L: Clone + Eq + std::hash::Hash> Family<L> {
    fn lock(&self) -> MutexGuard<'_, HashMap<L, Histogram>> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Observes `took` under `labels`, or under `fold(labels)` when the
    /// family is full and `labels` is new; returns the labels used. The lock
    /// is held for the lookup only.
    fn observe(&self, labels: L, took: Duration, fold: impl FnOnce(L) -> L) -> L {
        let (histogram, labels) = {
            let mut series = self.lock();
            let labels = if series.len() >= MAX_SERIES && !series.contains_key(&labels) {
                fold(labels)
            } else {
                labels
            };
            let histogram = match series.get(&labels) {
                Some(histogram) => histogram.clone(),
                None => {
                    let histogram = Histogram::new(DURATION_BUCKETS.iter().copied());
                    series.insert(labels.clone(), histogram.clone());
                    histogram
                }
            };
            (histogram, labels)
        };
        histogram.observe(took.as_secs_f64());
        labels
    }

    /// Every series, for a scrape.
    pub(crate) fn snapshot(&self) -> Vec<(L, Histogram)> {
        self.lock()
            .iter()
            .map(|(l, h)| (l.clone(), h.clone()))
            .collect()
    }
}

/// The labels of a new series past [`MAX_SERIES`]: the tool name folded.
fn fold_tool(mut labels: OperationLabels) -> OperationLabels {
    if !labels.tool.is_empty() {
        labels.tool = Cow::Borrowed(OTHER);
    }
    labels
}

/// Both convention histograms of one server.
#[derive(Debug, Default)]
pub(crate) struct ConventionMetrics {
    pub(crate) operations: Family<OperationLabels>,
    pub(crate) sessions: Family<SessionLabels>,
}

impl ConventionMetrics {
    /// Records one request, on `/metrics` and (feature `otel`) over OTLP
    /// under the same labels, folded alike past [`MAX_SERIES`].
    pub(crate) fn record_operation(&self, labels: OperationLabels, took: Duration) {
        let _labels = self.operations.observe(labels, took, fold_tool);
        #[cfg(feature = "otel")]
        crate::otel::record_operation(&_labels, took.as_secs_f64());
    }

    pub(crate) fn record_session(&self, labels: SessionLabels, took: Duration) {
        #[cfg(feature = "otel")]
        crate::otel::record_session(&labels, took.as_secs_f64());
        // Every session label is from a fixed set: nothing to fold.
        self.sessions.observe(labels, took, |l| l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(tool: &str) -> OperationLabels {
        OperationLabels {
            method: "tools/call",
            tool: Cow::Owned(tool.to_owned()),
            error_type: "",
            transport: NetworkTransport::Tcp,
            version: "2026-07-28",
        }
    }

    #[test]
    fn labels_stay_bounded() {
        assert_eq!(version_label("2026-07-28", &[]), "2026-07-28");
        assert_eq!(version_label("2025-06-18", &["2025-06-18"]), "2025-06-18");
        assert_eq!(version_label("2025-06-18", &[]), OTHER);
        assert_eq!(version_label("1999-01-01", &["2025-06-18"]), OTHER);
        assert_eq!(code_label(-32602), "-32602");
        assert_eq!(code_label(42), OTHER);
        assert_eq!(operation_method_label("tools/call"), "tools/call");
        assert_eq!(operation_method_label("tasks/get"), "tasks/get");
        assert_eq!(operation_method_label("made/up"), OTHER);
        assert_eq!(
            operation_method_label("resources/subscribe"),
            "resources/subscribe"
        );
        assert_eq!(status_label(401), "401");
        assert_eq!(status_label(418), OTHER);
        let metrics = ConventionMetrics::default();
        for i in 0..(MAX_SERIES + 500) {
            metrics.record_operation(labels(&format!("t{i}")), Duration::from_millis(1));
        }
        let series = metrics.operations.snapshot();
        assert_eq!(series.len(), MAX_SERIES + 1);
        // What is exported over OTLP is the folded set too.
        let used = metrics
            .operations
            .observe(labels("late"), Duration::from_millis(1), fold_tool);
        assert_eq!(used.tool, OTHER);
        let used = metrics
            .operations
            .observe(labels("t0"), Duration::from_millis(1), fold_tool);
        assert_eq!(used.tool, "t0");
        assert!(series.iter().any(|(l, _)| &*l.tool == OTHER));
    }
}
