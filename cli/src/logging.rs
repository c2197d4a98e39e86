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
