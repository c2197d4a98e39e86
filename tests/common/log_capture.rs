//! Log lines written by a `tracing` JSON subscriber, captured in memory.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The log lines, captured: install with
/// `tracing_subscriber::fmt().json().with_writer(capture.clone())`.
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
    /// Every line so far, each parsed as JSON.
    pub fn lines(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON log line"))
            .collect()
    }
}
