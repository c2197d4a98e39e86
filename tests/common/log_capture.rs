//! Log lines written by a `tracing` JSON subscriber, captured in memory.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The log lines, captured: [`Capture::install`] makes one the process's
/// JSON subscriber.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}

impl Capture {
    /// A capture installed as this test process's global subscriber: JSON
    /// lines, filtered by `filter` (an `EnvFilter` directive such as
    /// `genmcp=debug`).
    pub fn install(filter: &str) -> Capture {
        let capture = Capture::default();
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(capture.clone())
            .init();
        capture
    }

    /// Every line so far, each parsed as JSON.
    pub fn lines(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON log line"))
            .collect()
    }
}
