//! OpenTelemetry export over OTLP/HTTP (protobuf), feature `otel`.
//!
//! The request and stream spans stay `tracing` spans (named and attributed by
//! the OpenTelemetry MCP semantic conventions, see `docs/operations.md`);
//! [`Otel::layer`] is a `tracing-subscriber` layer that turns them into
//! OpenTelemetry spans, parented on the caller's `traceparent`, so a user's own
//! subscriber (formatting, filtering) keeps working beside it. The histograms
//! `mcp.server.operation.duration` and `mcp.server.session.duration` are
//! exported too, beside their Prometheus form on `/metrics`.
//!
//! Configuration is the standard one: `OTEL_EXPORTER_OTLP_ENDPOINT` (or the
//! per-signal `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
//! `..._METRICS_ENDPOINT`), `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME` (default `genmcp`),
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
//! `OTEL_METRIC_EXPORT_INTERVAL`; an endpoint given in code
//! ([`OtelConfig::endpoint`], `genmcp serve --otlp URL`) wins over them.
//! With only per-signal endpoints set, only those signals are exported. An
//! endpoint that is not `http://`, or an `OTEL_EXPORTER_OTLP_PROTOCOL` other
//! than `http/protobuf`, is refused by [`Otel::init`].
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! let otel = genmcp::otel::Otel::init(genmcp::otel::OtelConfig::from_env())
//!     .expect("OTLP exporter");
//! tracing_subscriber::registry().with(otel.layer()).init();
//! // ... serve; at exit:
//! otel.shutdown();
//! ```

use std::sync::OnceLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

use crate::protocol::trace_context::TraceContext;
use crate::runtime::{DURATION_BUCKETS, OperationLabels, SessionLabels};

/// What could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// An OTLP exporter could not be built (a bad endpoint, header or
    /// protocol in the configuration or the environment).
    #[error("OTLP exporter: {0}")]
    Exporter(String),
    /// An endpoint this build cannot reach: not `http://` (OTLP over TLS,
    /// `https://`, is not compiled in: put a collector or a TLS-terminating
    /// proxy on the node and send to it over `http://`).
    #[error(
        "OTLP endpoint {url:?} (from {source_name}): only http:// is supported \
         (this build has no TLS; send to a local collector over http://)"
    )]
    Endpoint {
        /// The endpoint as configured.
        url: String,
        /// Where it was configured: `--otlp`/[`OtelConfig::endpoint`] or
        /// the name of the `OTEL_*` variable.
        source_name: &'static str,
    },
    /// An OTLP protocol other than `http/protobuf` was asked for.
    #[error("OTLP protocol {protocol:?} (from {source_name}): only http/protobuf is supported")]
    Protocol {
        /// The protocol as configured.
        protocol: String,
        /// The variable that asked for it.
        source_name: &'static str,
    },
}

/// Where and how to export.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct OtelConfig {
    /// The collector's base URL (`http://host:4318`): traces go to
    /// `{url}/v1/traces`, metrics to `{url}/v1/metrics`. `None`: the `OTEL_*`
    /// variables, else `http://localhost:4318`.
    pub endpoint: Option<String>,
    /// Export genmcp's `principal` span field (the authenticated subject: a
    /// user's identity), as `genmcp.principal`. Off by default: it stays in
    /// the log lines, and leaves the process only when asked for.
    pub export_principal: bool,
}

impl OtelConfig {
    /// The configuration of the `OTEL_*` environment variables alone.
    pub fn from_env() -> Self {
        OtelConfig::default()
    }

    /// Sends to the collector at `url` (its base URL), whatever the
    /// environment says.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// Refuses a protocol other than `http/protobuf` in
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` (or its per-signal forms): this build
    /// speaks nothing else, and would send protobuf to a gRPC port.
    fn check_protocols() -> Result<(), OtelError> {
        for name in [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
        ] {
            if let Ok(value) = std::env::var(name)
                && !value.trim().is_empty()
                && value.trim() != "http/protobuf"
            {
                return Err(OtelError::Protocol {
                    protocol: value,
                    source_name: name,
                });
            }
        }
        Ok(())
    }

    /// Refuses any endpoint that is not `http://`: the one given in code,
    /// else those of the `OTEL_*` variables (an https endpoint would be
    /// accepted by the exporter and then fail every export, silently).
    fn check_endpoints(&self) -> Result<(), OtelError> {
        let check = |url: &str, source_name: &'static str| {
            let plain = url
                .trim()
                .get(..7)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
            if plain {
                Ok(())
            } else {
                Err(OtelError::Endpoint {
                    url: url.to_owned(),
                    source_name,
                })
            }
        };
        if let Some(url) = &self.endpoint {
            return check(url, "the configured endpoint (--otlp)");
        }
        for name in [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        ] {
            if let Ok(url) = std::env::var(name)
                && !url.trim().is_empty()
            {
                check(&url, name)?;
            }
        }
        Ok(())
    }

    /// Exports the `principal` field of request and stream spans, as
    /// `genmcp.principal` (off by default).
    pub fn export_principal(mut self, on: bool) -> Self {
        self.export_principal = on;
        self
    }

    fn signal_url(&self, path: &str) -> Option<String> {
        self.endpoint
            .as_deref()
            .map(|base| format!("{}{path}", base.trim_end_matches('/')))
    }
}

/// Whether the variable `name` is set to something.
fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Which signals to export (traces, metrics): both with an endpoint given in
/// code or `OTEL_EXPORTER_OTLP_ENDPOINT`; else those whose per-signal
/// endpoint variable is set; with none set at all, both (to
/// `http://localhost:4318`).
fn signals(in_code: bool, set: impl Fn(&str) -> bool) -> (bool, bool) {
    let traces = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let metrics = set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    if in_code || set("OTEL_EXPORTER_OTLP_ENDPOINT") || !(traces || metrics) {
        (true, true)
    } else {
        (traces, metrics)
    }
}

/// The exporting tracer and meter providers. Keep it for the life of the
/// process and call [`Otel::shutdown`] at exit (it sends what is buffered).
#[derive(Debug)]
pub struct Otel {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
}

/// The convention histograms, once [`Otel::init`] ran.
struct Instruments {
    operation: Histogram<f64>,
    session: Histogram<f64>,
}

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

fn resource() -> Resource {
    let mut builder = Resource::builder();
    let attributes = std::env::var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    // `OTEL_SERVICE_NAME` (read by the builder) wins; else this crate's name.
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.is_empty())
        || attributes.contains("service.name=");
    if !named {
        builder = builder.with_service_name("genmcp");
    }
    // Each process its own series: without it, the nodes of a fleet export
    // the same attribute sets and a collector merges their metrics.
    if !attributes.contains("service.instance.id=") {
        builder = builder.with_attribute(KeyValue::new("service.instance.id", instance_id()));
    }
    builder.build()
}

/// A `service.instance.id` for this process: 128 random bits in hex (the
/// process id if the system has no randomness to give).
fn instance_id() -> String {
    let mut bytes = [0u8; 16];
    match getrandom::fill(&mut bytes) {
        Ok(()) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        Err(_) => format!("pid-{}", std::process::id()),
    }
}

impl Otel {
    /// Builds the OTLP/HTTP exporters (protobuf) and their providers: a batch
    /// span processor and a periodic metric reader, each on a thread of its
    /// own. The convention histograms are recorded from then on. Call once.
    /// An endpoint that is not `http://` is refused
    /// ([`OtelError::Endpoint`]): no TLS is compiled in.
    pub fn init(config: OtelConfig) -> Result<Otel, OtelError> {
        config.check_endpoints()?;
        OtelConfig::check_protocols()?;
        let resource = resource();
        let (traces_on, metrics_on) = signals(config.endpoint.is_some(), env_set);
        let mut tracer = SdkTracerProvider::builder().with_resource(resource.clone());
        if traces_on {
            let mut spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
            if let Some(url) = config.signal_url("/v1/traces") {
                spans = spans.with_endpoint(url);
            }
            let spans = spans
                .build()
                .map_err(|e| OtelError::Exporter(e.to_string()))?;
            let batch = opentelemetry_sdk::trace::BatchSpanProcessor::builder(spans).build();
            tracer = tracer.with_span_processor(Exported {
                inner: batch,
                principal: config.export_principal,
            });
        } else {
            // No span is recorded: the layer's cost stays small.
            tracer = tracer.with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOff);
        }
        let tracer = tracer.build();
        let mut meter = SdkMeterProvider::builder().with_resource(resource);
        if metrics_on {
            let mut metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
            if let Some(url) = config.signal_url("/v1/metrics") {
                metrics = metrics.with_endpoint(url);
            }
            let metrics = metrics
                .build()
                .map_err(|e| OtelError::Exporter(e.to_string()))?;
            meter = meter.with_periodic_exporter(metrics);
        }
        let meter = meter.build();
        if !metrics_on {
            return Ok(Otel { tracer, meter });
        }
        let m = meter.meter("genmcp");
        let bounds = DURATION_BUCKETS.to_vec();
        let _ = INSTRUMENTS.set(Instruments {
            operation: m
                .f64_histogram("mcp.server.operation.duration")
                .with_unit("s")
                .with_description("Duration of MCP requests handled by the server")
                .with_boundaries(bounds.clone())
                .build(),
            session: m
                .f64_histogram("mcp.server.session.duration")
                .with_unit("s")
                .with_description("Duration of listen streams and 2025-era GET streams")
                .with_boundaries(bounds)
                .build(),
        });
        Ok(Otel { tracer, meter })
    }

    /// The `tracing-subscriber` layer exporting genmcp's request and stream
    /// spans (the request spans are at DEBUG: this layer enables them for
    /// itself, whatever the other layers' filters), without the log lines
    /// inside them. Other crates' spans are not exported.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        let tracer = self.tracer.tracer("genmcp");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            // The `tracing` target (a module path) is no attribute of the
            // conventions, and says nothing the span name does not.
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(
                // Spans only: a log line's fields are no convention's and may
                // carry a tool's data or an error's text (logs go to the
                // other layers).
                filter_fn(|meta| meta.target().starts_with("genmcp") && meta.is_span())
                    // Nothing below DEBUG: `trace!` call sites everywhere stay
                    // off at the global level check (no per-call lookup).
                    .with_max_level_hint(tracing::level_filters::LevelFilter::DEBUG),
            )
    }

    /// Sends whatever is buffered (spans and metrics) now.
    pub fn flush(&self) {
        let _ = self.tracer.force_flush();
        let _ = self.meter.force_flush();
    }

    /// Sends what is buffered and stops the exporters.
    pub fn shutdown(&self) {
        let _ = self.tracer.shutdown();
        let _ = self.meter.shutdown();
    }
}

/// genmcp's own span fields (not names of the OpenTelemetry conventions), as
/// they are exported: under the `genmcp.` namespace, as the conventions ask of
/// custom attributes. The log lines keep the short names.
const GENMCP_ATTRIBUTES: [(&str, &str); 7] = [
    ("method", "genmcp.method"),
    ("request_id", "genmcp.request_id"),
    ("outcome", "genmcp.request.outcome"),
    ("subscription_id", "genmcp.stream.subscription_id"),
    ("reason", "genmcp.stream.close_reason"),
    ("frames", "genmcp.stream.frames"),
    (PRINCIPAL, "genmcp.principal"),
];

/// The span field of the authenticated subject.
const PRINCIPAL: &str = "principal";

/// A span processor passing spans on with genmcp's own attributes under
/// their exported names ([`GENMCP_ATTRIBUTES`]), and without `principal`
/// unless it was asked for.
#[derive(Debug)]
struct Exported<P> {
    inner: P,
    principal: bool,
}

impl<P: opentelemetry_sdk::trace::SpanProcessor> opentelemetry_sdk::trace::SpanProcessor
    for Exported<P>
{
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, mut span: opentelemetry_sdk::trace::SpanData) {
        if !self.principal {
            span.attributes.retain(|kv| kv.key.as_str() != PRINCIPAL);
        }
        for kv in &mut span.attributes {
            if let Some((_, exported)) = GENMCP_ATTRIBUTES
                .iter()
                .find(|(field, _)| *field == kv.key.as_str())
            {
                kv.key = opentelemetry::Key::from_static_str(exported);
            }
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Makes the caller's span (`trace`) the parent of `span`.
pub(crate) fn set_parent(span: &tracing::Span, trace: &TraceContext) {
    let state = trace
        .state
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let remote = SpanContext::new(
        TraceId::from_bytes(trace.parent.trace_id),
        SpanId::from_bytes(trace.parent.parent_id),
        TraceFlags::new(trace.parent.flags),
        true,
        state,
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}

/// Records one request in `mcp.server.operation.duration` (once [`Otel::init`] ran).
pub(crate) fn record_operation(labels: &OperationLabels, secs: f64) {
    if let Some(i) = INSTRUMENTS.get() {
        let mut attrs = vec![
            KeyValue::new("mcp.method.name", labels.method),
            KeyValue::new("network.transport", labels.transport.as_str()),
            KeyValue::new("mcp.protocol.version", labels.version),
        ];
        if !labels.tool.is_empty() {
            attrs.push(KeyValue::new("gen_ai.tool.name", labels.tool.to_string()));
        }
        if !labels.error_type.is_empty() {
            attrs.push(KeyValue::new("error.type", labels.error_type));
        }
        i.operation.record(secs, &attrs);
    }
}

/// Records one stream's life in `mcp.server.session.duration` (once
/// [`Otel::init`] ran).
pub(crate) fn record_session(labels: &SessionLabels, secs: f64) {
    if let Some(i) = INSTRUMENTS.get() {
        let mut attrs = vec![
            KeyValue::new("genmcp.session.kind", labels.kind),
            KeyValue::new("network.transport", labels.transport.as_str()),
            KeyValue::new("mcp.protocol.version", labels.version),
        ];
        if !labels.error_type.is_empty() {
            attrs.push(KeyValue::new("error.type", labels.error_type));
        }
        i.session.record(secs, &attrs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_other_than_http_is_refused() {
        for url in ["https://collector.example:4318", "grpc://c:4317", "c:4318"] {
            let refused = OtelConfig::from_env().endpoint(url).check_endpoints();
            assert!(
                matches!(&refused, Err(OtelError::Endpoint { url: u, .. }) if u == url),
                "{url}: {refused:?}"
            );
        }
        assert!(
            OtelConfig::from_env()
                .endpoint("HTTP://127.0.0.1:4318")
                .check_endpoints()
                .is_ok()
        );
    }

    #[test]
    fn only_the_signals_given_an_endpoint_are_exported() {
        let with = |names: &'static [&'static str]| move |n: &str| names.contains(&n);
        assert_eq!(signals(true, with(&[])), (true, true));
        assert_eq!(signals(false, with(&[])), (true, true));
        assert_eq!(
            signals(false, with(&["OTEL_EXPORTER_OTLP_ENDPOINT"])),
            (true, true)
        );
        assert_eq!(
            signals(false, with(&["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])),
            (true, false)
        );
        assert_eq!(
            signals(false, with(&["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"])),
            (false, true)
        );
    }
}
