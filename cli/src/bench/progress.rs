//! What a long run says on stderr while it runs: on a terminal, one line
//! rewritten four times a second (listens opened, frames counted); the bench
//! also prints one plain line per finished round (terminal or not).

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::load::Progress;

/// Rewrites the progress line until dropped, then clears it.
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts the line for `label`: `streams` listens to open, then `frames`
    /// frames to count (0: none).
    pub fn start(label: String, progress: Arc<Progress>, streams: usize, frames: u64) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-progress".into())
            .spawn(move || {
                let mut err = std::io::stderr();
                while !flag.load(Ordering::Relaxed) {
                    let opened = progress.opened.load(Ordering::Relaxed);
                    let counted = progress.frames.load(Ordering::Relaxed);
                    let line = if frames > 0 && opened as usize >= streams {
                        format!("{label}: frames {counted}/{frames}")
                    } else {
                        format!("{label}: listens {opened}/{streams}")
                    };
                    let _ = write!(err, "\r\x1b[K{line}");
                    let _ = err.flush();
                    std::thread::sleep(Duration::from_millis(250));
                }
                let _ = write!(err, "\r\x1b[K");
                let _ = err.flush();
            })
            .ok();
        Ticker { stop, thread }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
