//! Request counters and durations, by method and outcome, with a bounded label
//! set: every method this server knows gets its own label, anything else is
//! counted under [`OTHER_METHOD`], so a client sending made-up method names
//! cannot grow what a scrape returns.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::histogram::Histogram;

use crate::protocol::methods;

/// The message of the `-32603` a unary request gets at its deadline.
pub const TIMED_OUT: &str = "Request timed out";

/// The label of every method not in [`METHOD_LABELS`].
pub const OTHER_METHOD: &str = "other";

/// The method labels, [`OTHER_METHOD`] last: the 2026-07-28 request methods and
/// the 2025-era ones the compatibility path serves.
pub const METHOD_LABELS: [&str; 14] = [
    methods::DISCOVER,
    methods::LISTEN,
    methods::TOOLS_LIST,
    methods::TOOLS_CALL,
    methods::RESOURCES_LIST,
    methods::RESOURCES_TEMPLATES_LIST,
    methods::RESOURCES_READ,
    methods::PROMPTS_LIST,
    methods::PROMPTS_GET,
    methods::COMPLETE,
    "initialize",
    "ping",
    "logging/setLevel",
    OTHER_METHOD,
];

/// The bounded label of `method`: itself when it is one of [`METHOD_LABELS`],
/// [`OTHER_METHOD`] otherwise.
///
/// ```
/// use genmcp::runtime::method_label;
/// assert_eq!(method_label("tools/call"), "tools/call");
/// assert_eq!(method_label("x/../../etc/passwd"), "other");
/// ```
pub fn method_label(method: &str) -> &'static str {
    METHOD_LABELS[method_index(method)]
}

fn method_index(method: &str) -> usize {
    METHOD_LABELS
        .iter()
        .position(|m| *m == method)
        .unwrap_or(METHOD_LABELS.len() - 1)
}

/// How a request ended, as counted in `genmcp_requests_total{outcome}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestOutcome {
    /// Answered with a result (a listen: its stream was opened).
    Ok,
    /// Answered with a JSON-RPC error by its handler (or a listen the runtime
    /// could not open: limits, duplicate id, shutdown).
    Error,
    /// Refused before it reached a handler: unknown or unadvertised method,
    /// invalid params, bad `_meta` or headers.
    Refused,
    /// Its handler ran past the request deadline.
    Timeout,
    /// Its handler panicked.
    Panicked,
    /// Refused on its HTTP head by authentication (401 / 403: no token, a bad
    /// token, a missing scope, or the application's assigns hook).
    Unauthorized,
    /// Refused by a limit with HTTP 429: the request rate, the open streams of
    /// one principal, or a full spent request-state record.
    Limited,
}

impl RequestOutcome {
    /// Every outcome, in a fixed order.
    pub const ALL: [RequestOutcome; 7] = [
        RequestOutcome::Ok,
        RequestOutcome::Error,
        RequestOutcome::Refused,
        RequestOutcome::Timeout,
        RequestOutcome::Panicked,
        RequestOutcome::Unauthorized,
        RequestOutcome::Limited,
    ];

    /// A stable lower-case name, for logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            RequestOutcome::Ok => "ok",
            RequestOutcome::Error => "error",
            RequestOutcome::Refused => "refused",
            RequestOutcome::Timeout => "timeout",
            RequestOutcome::Panicked => "panicked",
            RequestOutcome::Unauthorized => "unauthorized",
            RequestOutcome::Limited => "limited",
        }
    }

    /// How a request answered by its handler is counted: `ok`, `limited`
    /// for an error with a retry delay (a 429), `error` for any other.
    pub(crate) fn answered<T>(result: &Result<T, crate::protocol::McpError>) -> Self {
        match result {
            Ok(_) => RequestOutcome::Ok,
            Err(e) => RequestOutcome::of_error(e),
        }
    }

    /// How an error answered by a handler (or a runtime limit) is counted:
    /// `limited` with a retry delay (a 429), `error` otherwise.
    pub(crate) fn of_error(error: &crate::protocol::McpError) -> Self {
        if error.retry_after().is_some() {
            RequestOutcome::Limited
        } else {
            RequestOutcome::Error
        }
    }

    fn index(&self) -> usize {
        RequestOutcome::ALL
            .iter()
            .position(|o| o == self)
            .unwrap_or(0)
    }
}

/// Upper bounds (seconds) of the request duration histogram's buckets: 100 µs
/// to about 52 s, doubling (20 buckets; the default request deadline is 60 s,
/// so a timed-out request lands in `+Inf`).
pub fn duration_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.0001, 2.0, 20)
}

/// Requests by method and outcome, and how long the answered ones took, by
/// method. Fixed-size: one counter per (method label, outcome) and one
/// histogram per method label.
#[derive(Debug)]
pub(crate) struct RequestMetrics {
    counts: [[AtomicU64; RequestOutcome::ALL.len()]; METHOD_LABELS.len()],
    durations: [Histogram; METHOD_LABELS.len()],
    /// Whether each method's histogram has an observation (only those are
    /// exposed).
    timed: [AtomicBool; METHOD_LABELS.len()],
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            counts: Default::default(),
            durations: std::array::from_fn(|_| Histogram::new(duration_buckets())),
            timed: Default::default(),
        }
    }
}

impl RequestMetrics {
    /// Counts one request; `took` (when the request ran a handler) goes into the
    /// method's duration histogram.
    pub(crate) fn record(&self, method: &str, outcome: RequestOutcome, took: Option<Duration>) {
        let m = method_index(method);
        self.counts[m][outcome.index()].fetch_add(1, Ordering::Relaxed);
        if let Some(took) = took {
            self.durations[m].observe(took.as_secs_f64());
            if !self.timed[m].load(Ordering::Relaxed) {
                self.timed[m].store(true, Ordering::Relaxed);
            }
        }
    }

    /// Every non-zero counter: `(method label, outcome, count)`.
    pub(crate) fn counts(&self) -> Vec<(&'static str, RequestOutcome, u64)> {
        let mut out = Vec::new();
        for (m, row) in self.counts.iter().enumerate() {
            for (o, n) in row.iter().enumerate() {
                let n = n.load(Ordering::Relaxed);
                if n > 0 {
                    out.push((METHOD_LABELS[m], RequestOutcome::ALL[o], n));
                }
            }
        }
        out
    }

    /// The duration histograms of the methods that ran a handler at least once.
    pub(crate) fn durations(&self) -> impl Iterator<Item = (&'static str, &Histogram)> {
        self.durations
            .iter()
            .enumerate()
            .filter(|(m, _)| self.timed[*m].load(Ordering::Relaxed))
            .map(|(m, h)| (METHOD_LABELS[m], h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_method_maps_to_the_bounded_other_label() {
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("subscriptions/listen"), "subscriptions/listen");
        for hostile in ["", "tools/call ", "TOOLS/CALL", "x".repeat(10_000).as_str()] {
            assert_eq!(method_label(hostile), OTHER_METHOD, "{hostile:?}");
        }
        let metrics = RequestMetrics::default();
        for i in 0..1_000 {
            metrics.record(&format!("made/up/{i}"), RequestOutcome::Refused, None);
        }
        metrics.record(
            "tools/call",
            RequestOutcome::Ok,
            Some(Duration::from_millis(3)),
        );
        metrics.record("subscriptions/listen", RequestOutcome::Ok, None);
        assert_eq!(
            metrics.counts(),
            vec![
                ("subscriptions/listen", RequestOutcome::Ok, 1),
                ("tools/call", RequestOutcome::Ok, 1),
                (OTHER_METHOD, RequestOutcome::Refused, 1_000),
            ]
        );
        // Refused requests and listens ran no timed handler: no duration series.
        let timed: Vec<_> = metrics.durations().map(|(m, _)| m).collect();
        assert_eq!(timed, vec!["tools/call"]);
    }
}
