use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use super::{CloseReason, Limits};
use crate::protocol::McpError;

struct Shared {
    limits: Limits,
    open: AtomicUsize,
    opened: AtomicU64,
    frames: AtomicU64,
    closes: [AtomicU64; CloseReason::ALL.len()],
    shutdown: watch::Sender<bool>,
}

/// The runtime root, one per process: global limits, counters and the shutdown
/// signal. Cheap to clone and `Send`; every stream holds a [`StreamPermit`] from it.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("metrics", &self.metrics())
            .finish()
    }
}

/// A snapshot of the server's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// Listen streams open now.
    pub open_streams: usize,
    /// Listen streams opened since start.
    pub streams_opened: u64,
    /// Frames written to clients since start.
    pub frames_sent: u64,
    /// Closed streams per reason, in [`CloseReason::ALL`] order.
    pub closes: Vec<(CloseReason, u64)>,
}

impl Metrics {
    /// How many streams closed for `reason`.
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.closes
            .iter()
            .find(|(r, _)| *r == reason)
            .map(|(_, n)| *n)
            .unwrap_or(0)
    }
}

/// One open stream's slot in the global limit; released on drop.
#[derive(Debug)]
pub struct StreamPermit {
    server: Server,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.server.shared.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Default for Server {
    fn default() -> Self {
        Server::new(Limits::default())
    }
}

impl Server {
    /// A server root with these limits.
    pub fn new(limits: Limits) -> Self {
        Server {
            shared: Arc::new(Shared {
                limits,
                open: AtomicUsize::new(0),
                opened: AtomicU64::new(0),
                frames: AtomicU64::new(0),
                closes: Default::default(),
                shutdown: watch::channel(false).0,
            }),
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Takes a slot for a new stream, or `-32603` "Subscription limit reached".
    pub fn try_open_stream(&self) -> Result<StreamPermit, McpError> {
        let max = self.shared.limits.max_streams;
        self.shared
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| McpError::internal("Subscription limit reached"))?;
        self.shared.opened.fetch_add(1, Ordering::Relaxed);
        Ok(StreamPermit {
            server: self.clone(),
        })
    }

    /// Counts a stream's end.
    pub fn record_close(&self, reason: CloseReason) {
        self.shared.closes[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts frames written to clients.
    pub fn count_frames(&self, n: u64) {
        self.shared.frames.fetch_add(n, Ordering::Relaxed);
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> Metrics {
        Metrics {
            open_streams: self.shared.open.load(Ordering::Acquire),
            streams_opened: self.shared.opened.load(Ordering::Relaxed),
            frames_sent: self.shared.frames.load(Ordering::Relaxed),
            closes: CloseReason::ALL
                .iter()
                .map(|r| (*r, self.shared.closes[r.index()].load(Ordering::Relaxed)))
                .collect(),
        }
    }

    /// Starts a graceful shutdown: every connection drives its streams to their
    /// completion result. New listens are refused from now on.
    pub fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
    }

    /// Whether shutdown has started.
    pub fn is_shutting_down(&self) -> bool {
        *self.shared.shutdown.borrow()
    }

    /// Resolves when shutdown starts.
    pub fn shutdown_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shared.shutdown.subscribe();
        async move {
            // The sender lives in `Shared`, which this future does not keep alive; if
            // it is gone the server is gone, which counts as shut down.
            let _ = rx.wait_for(|down| *down).await;
        }
    }

    /// Waits until no stream is open, polling, for at most `timeout`. Returns
    /// whether the server drained.
    pub async fn drained(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.shared.open.load(Ordering::Acquire) == 0 {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
