//! Logging for the `genmcp` command (and any program that wants the same):
//! `tracing` events and the request and stream spans, on stderr, as text or
//! as JSON lines, filtered by `RUST_LOG` (default `genmcp=info`).

use std::io::IsTerminal;
use std::str::FromStr;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`
    /// (with `message`), and `span` / `spans` carrying the request's or
    /// stream's fields (`method`, `request_id`, `subscription_id`,
    /// `principal`, `outcome`, `reason`).
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("unknown log format {other:?} (text or json)")),
        }
    }
}

/// Installs the global subscriber: stderr, `format`, `RUST_LOG` or
/// `genmcp=info`. Colour codes only when stderr is a terminal, so a log file,
/// a journal or a desktop host's log pane gets plain text. Does nothing if a
/// global subscriber is already set.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("genmcp=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Whether the `OTEL_*` environment asks for OTLP export: an OTLP endpoint
/// (general, traces or metrics) is set and `OTEL_SDK_DISABLED` is not
/// `true`. (`--otlp` asks for it whatever these say.)
fn otlp_from_env() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    !disabled
        && (set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            || set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
}

/// The exporter [`init_with_otlp`] started, for [`shutdown_export`].
static EXPORT: std::sync::OnceLock<genmcp::otel::Otel> = std::sync::OnceLock::new();

/// [`init`], plus OTLP export (`genmcp::otel`) when `otlp` names a collector
/// or the `OTEL_*` environment sets an endpoint: the export layer sits beside
/// the log lines, which keep their own `RUST_LOG` filter. Returns whether
/// export is on; call [`shutdown_export`] before the process exits. Without
/// export this is exactly [`init`].
pub fn init_with_otlp(
    format: LogFormat,
    otlp: Option<&str>,
) -> Result<bool, genmcp::otel::OtelError> {
    if otlp.is_none() && !otlp_from_env() {
        init(format);
        return Ok(false);
    }
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let mut config = genmcp::otel::OtelConfig::from_env();
    if let Some(url) = otlp {
        config = config.endpoint(url);
    }
    let otel = genmcp::otel::Otel::init(config)?;
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("genmcp=info"))
    };
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .with_filter(filter())
    });
    let json = (format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_filter(filter())
    });
    let _ = tracing_subscriber::registry()
        .with(text)
        .with(json)
        .with(otel.layer())
        .try_init();
    let _ = EXPORT.set(otel);
    Ok(true)
}

/// Sends the spans and metrics still buffered and stops the export started
/// by [`init_with_otlp`] (nothing when none runs). Call it before exiting.
pub fn shutdown_export() {
    if let Some(otel) = EXPORT.get() {
        otel.shutdown();
    }
}
