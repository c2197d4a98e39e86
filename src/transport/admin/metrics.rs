//! The Prometheus exposition: a collector that reads the runtime's counters at
//! scrape time (the frame path keeps its plain atomic adds; nothing is counted
//! twice) and the request metrics, encoded as Prometheus text (0.0.4).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use std::sync::Arc;

use super::health::{self, ReadinessCheck};
use crate::runtime::Server;
use crate::suite::SpentRefusals;

/// The `Content-Type` of `GET /metrics`: Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Reads a [`Server`]'s counters on each scrape.
#[derive(Debug)]
struct RuntimeCollector {
    server: Server,
}

impl Collector for RuntimeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = self.server.metrics();
        let open = ConstGauge::new(i64::try_from(m.open_streams).unwrap_or(i64::MAX));
        open.encode(encoder.encode_descriptor(
            "genmcp_streams_open",
            "Listen streams open now",
            None,
            MetricType::Gauge,
        )?)?;
        ConstCounter::new(m.streams_opened).encode(encoder.encode_descriptor(
            "genmcp_streams_opened",
            "Listen streams opened since start",
            None,
            MetricType::Counter,
        )?)?;
        let mut closed = encoder.encode_descriptor(
            "genmcp_streams_closed",
            "Listen streams closed since start, by reason",
            None,
            MetricType::Counter,
        )?;
        for (reason, n) in &m.closes {
            let labels = [("reason", reason.as_str())];
            ConstCounter::new(*n).encode(closed.encode_family(&labels)?)?;
        }
        ConstCounter::new(m.frames_sent).encode(encoder.encode_descriptor(
            "genmcp_frames_sent",
            "Frames written to clients since start",
            None,
            MetricType::Counter,
        )?)?;
        let draining = ConstGauge::new(i64::from(self.server.is_shutting_down()));
        draining.encode(encoder.encode_descriptor(
            "genmcp_draining",
            "1 while a graceful shutdown (drain) runs, else 0",
            None,
            MetricType::Gauge,
        )?)?;
        let requests = self.server.request_metrics();
        let mut counts = encoder.encode_descriptor(
            "genmcp_requests",
            "Requests since start, by method (unknown methods: \"other\") and outcome",
            None,
            MetricType::Counter,
        )?;
        for (method, outcome, n) in requests.counts() {
            let labels = [("method", method), ("outcome", outcome.as_str())];
            ConstCounter::new(n).encode(counts.encode_family(&labels)?)?;
        }
        let mut durations = encoder.encode_descriptor(
            "genmcp_request_duration",
            "Time from dispatch to the answer of requests that ran a handler, by method",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (method, histogram) in requests.durations() {
            let labels = [("method", method)];
            histogram.encode(durations.encode_family(&labels)?)?;
        }
        encode_conventions(&self.server, &mut encoder)?;
        #[cfg(feature = "redis")]
        encode_bus_drops(&mut encoder)?;
        Ok(())
    }
}

/// `genmcp_bus_messages_dropped_total`: only with the Redis bus.
#[cfg(feature = "redis")]
fn encode_bus_drops(encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut dropped = encoder.encode_descriptor(
        "genmcp_bus_messages_dropped",
        "Messages from Redis that the event bus refused since start, by reason \
         (forged, replayed, oversized, malformed, backlog)",
        None,
        MetricType::Counter,
    )?;
    for (reason, n) in crate::pubsub::redis::dropped_messages() {
        let labels = [("reason", reason.as_str())];
        ConstCounter::new(n).encode(dropped.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The OpenTelemetry MCP conventions' histograms, under their Prometheus
/// names (dots become underscores, the unit a `_seconds` suffix).
fn encode_conventions(
    server: &Server,
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let conventions = server.conventions();
    let mut operations = encoder.encode_descriptor(
        "mcp_server_operation_duration",
        "Duration of MCP requests handled by the server (mcp.server.operation.duration)",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for (l, histogram) in conventions.operations.snapshot() {
        let labels = [
            ("mcp_method_name", l.method),
            ("gen_ai_tool_name", &*l.tool),
            ("error_type", l.error_type),
            ("network_transport", l.transport.as_str()),
            ("mcp_protocol_version", l.version),
        ];
        histogram.encode(operations.encode_family(&labels)?)?;
    }
    let mut sessions = encoder.encode_descriptor(
        "mcp_server_session_duration",
        "Duration of listen streams and 2025-era GET streams (mcp.server.session.duration)",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for (l, histogram) in conventions.sessions.snapshot() {
        let labels = [
            ("genmcp_session_kind", l.kind),
            ("error_type", l.error_type),
            ("network_transport", l.transport.as_str()),
            ("mcp_protocol_version", l.version),
        ];
        histogram.encode(sessions.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Readiness as metrics, so alerts need not probe `/readyz`: asked at
/// scrape time exactly as `/readyz` asks.
struct ReadinessCollector {
    server: Server,
    checks: Arc<[(String, ReadinessCheck)]>,
}

impl std::fmt::Debug for ReadinessCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadinessCollector")
            .field(
                "checks",
                &self.checks.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Collector for ReadinessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let ready = health::readiness(&self.server, &self.checks).is_ready();
        ConstGauge::new(i64::from(ready)).encode(encoder.encode_descriptor(
            "genmcp_ready",
            "1 while GET /readyz answers 200 (not draining, every named check up), else 0",
            None,
            MetricType::Gauge,
        )?)?;
        let mut up = encoder.encode_descriptor(
            "genmcp_readiness_check_up",
            "1 while the named readiness check (e.g. \"bus\") passes, else 0",
            None,
            MetricType::Gauge,
        )?;
        for (name, check) in self.checks.iter() {
            let labels = [("check", name.as_str())];
            ConstGauge::new(i64::from(check())).encode(up.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The suite's refusals of replayed or uncheckable `requestState`s.
#[derive(Debug)]
struct SpentCollector {
    refusals: Arc<SpentRefusals>,
}

impl Collector for SpentCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "genmcp_spent_refusals",
            "Retries whose requestState the spent record refused, by reason (replayed, full, unavailable)",
            None,
            MetricType::Counter,
        )?;
        for (reason, n) in self.refusals.counts() {
            let labels = [("reason", reason)];
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// A registry holding every genmcp metric of `server`, its readiness
/// `checks` and, when known, its suite's spent-record refusals.
pub(super) fn registry(
    server: &Server,
    checks: &Arc<[(String, ReadinessCheck)]>,
    spent: Option<Arc<SpentRefusals>>,
) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(RuntimeCollector {
        server: server.clone(),
    }));
    registry.register_collector(Box::new(ReadinessCollector {
        server: server.clone(),
        checks: checks.clone(),
    }));
    if let Some(refusals) = spent {
        registry.register_collector(Box::new(SpentCollector { refusals }));
    }
    registry
}

/// Encodes `registry` as Prometheus text.
pub(super) fn encode(registry: &Registry) -> String {
    let mut out = String::with_capacity(4096);
    // Writing into a String cannot fail; an encoder error would be a bug in a
    // collector, and then the partial text is still the best answer.
    if prometheus_client::encoding::prometheus_text::encode(&mut out, registry).is_err() {
        tracing::error!("could not encode the metrics");
    }
    out
}
