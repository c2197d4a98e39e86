use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use super::conventions::ConventionMetrics;
use super::requests::{RequestMetrics, RequestOutcome};
use super::{CloseReason, Limits};
use crate::mux::Assigns;
use crate::protocol::McpError;

/// Names the principal of a request from its [`Assigns`], for the `principal`
/// field of request and stream spans (logs). `None`: no principal (anonymous).
/// Called once per request and once per stream, never on the frame path.
/// Without one, the server names the subject of the [`crate::mux::Principal`]
/// an authenticator put in the assigns; set one for a principal type of the
/// application's own.
///
/// ```
/// use std::sync::Arc;
/// use genmcp::mux::Assigns;
/// struct User(String);
/// let principal_of: genmcp::runtime::PrincipalOf =
///     Arc::new(|a: &Assigns| a.get::<User>().map(|u| u.0.clone()));
/// let server = genmcp::runtime::Server::with_principal_of(Default::default(), Some(principal_of));
/// assert_eq!(server.principal(&Assigns::new().with(User("ada".into()))).as_deref(), Some("ada"));
/// ```
pub type PrincipalOf = Arc<dyn Fn(&Assigns) -> Option<String> + Send + Sync>;

struct Shared {
    limits: Limits,
    requests: RequestMetrics,
    /// `mcp.server.operation.duration` and `mcp.server.session.duration`.
    conventions: ConventionMetrics,
    principal_of: Option<PrincipalOf>,
    open: AtomicUsize,
    /// Resumable replies whose request still runs: a drain waits for them.
    replies: AtomicUsize,
    opened: AtomicU64,
    frames: AtomicU64,
    closes: [AtomicU64; CloseReason::ALL.len()],
    shutdown: watch::Sender<bool>,
    /// When the drain that shut the server down gives up on its streams
    /// (set by [`Server::shutdown_within`]).
    drain_deadline: std::sync::OnceLock<tokio::time::Instant>,
    /// Open streams per principal / client address, only while some are open:
    /// at most `max_streams` entries.
    owners: Mutex<HashMap<Arc<str>, usize>>,
}

/// `Retry-After` of a listen refused by `max_streams_per_principal`: streams
/// end at unknown times, so a short, fixed delay.
const STREAM_LIMIT_RETRY_AFTER_SECS: u64 = 1;

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

/// One open stream's slot in the global limit and in its principal's;
/// released exactly once, on drop.
#[derive(Debug)]
pub struct StreamPermit {
    server: Server,
    owner: Option<Arc<str>>,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            self.server.release_owner(&owner);
        }
        self.server.shared.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A resumable reply whose request still runs after its client may have
/// left (a 2025 POST answered with SSE): [`Server::drained`] waits until it
/// is dropped, so a drain lets the request write its response where a
/// client resuming it (on another node of a fleet) reads it.
#[derive(Debug)]
pub(crate) struct ReplyGuard {
    server: Server,
}

impl Drop for ReplyGuard {
    fn drop(&mut self) {
        self.server.shared.replies.fetch_sub(1, Ordering::AcqRel);
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
        Server::with_principal_of(limits, None)
    }

    /// A server root with these limits that names the principal of each request
    /// and stream in their spans with `principal_of`.
    pub fn with_principal_of(limits: Limits, principal_of: Option<PrincipalOf>) -> Self {
        Server {
            shared: Arc::new(Shared {
                limits,
                requests: RequestMetrics::default(),
                conventions: ConventionMetrics::default(),
                principal_of,
                open: AtomicUsize::new(0),
                replies: AtomicUsize::new(0),
                opened: AtomicU64::new(0),
                frames: AtomicU64::new(0),
                closes: Default::default(),
                shutdown: watch::channel(false).0,
                drain_deadline: std::sync::OnceLock::new(),
                owners: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Takes a slot for a new stream, or `-32603` "Subscription limit reached".
    pub fn try_open_stream(&self) -> Result<StreamPermit, McpError> {
        self.try_open_stream_for(None)
    }

    /// Takes a slot for a new stream of `owner` (a principal or client address
    /// key): `-32603` "Subscription limit reached" past `max_streams`, and
    /// [`McpError::LimitExceeded`] (HTTP 429) past
    /// `max_streams_per_principal`. The slot is released when the permit drops.
    pub fn try_open_stream_for(&self, owner: Option<&str>) -> Result<StreamPermit, McpError> {
        self.open_stream(owner, 0)
    }

    /// [`Server::try_open_stream_for`], with `slack` more streams allowed
    /// for `owner` (a replacement that briefly runs beside the stream it
    /// replaces).
    pub(crate) fn open_stream(
        &self,
        owner: Option<&str>,
        slack: usize,
    ) -> Result<StreamPermit, McpError> {
        let max = self.shared.limits.max_streams;
        self.shared
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| McpError::internal("Subscription limit reached"))?;
        // From here the permit owns the global slot: an early return drops it.
        let mut permit = StreamPermit {
            server: self.clone(),
            owner: None,
        };
        if let (Some(owner), Some(per)) = (owner, self.shared.limits.max_streams_per_principal) {
            let mut owners = self.owners();
            let open = owners.get(owner).copied().unwrap_or(0);
            if open >= per.saturating_add(slack) {
                return Err(McpError::limit_exceeded(
                    "max_streams_per_principal",
                    format!(
                        "Too many open streams: at most {per} per principal (or per client address without one)"
                    ),
                    STREAM_LIMIT_RETRY_AFTER_SECS,
                ));
            }
            let key: Arc<str> = Arc::from(owner);
            owners.insert(key.clone(), open + 1);
            permit.owner = Some(key);
        }
        self.shared.opened.fetch_add(1, Ordering::Relaxed);
        Ok(permit)
    }

    /// Streams open now for `owner` (0 when it has none, or when no
    /// `max_streams_per_principal` is set: then nobody is counted).
    pub fn open_streams_of(&self, owner: &str) -> usize {
        self.owners().get(owner).copied().unwrap_or(0)
    }

    /// Principals / addresses with a stream open now (counted only when
    /// `max_streams_per_principal` is set).
    pub fn stream_owners(&self) -> usize {
        self.owners().len()
    }

    fn owners(&self) -> MutexGuard<'_, HashMap<Arc<str>, usize>> {
        self.shared.owners.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release_owner(&self, owner: &str) {
        let mut owners = self.owners();
        match owners.get_mut(owner) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                owners.remove(owner);
            }
            None => {}
        }
    }

    /// Counts a stream's end.
    pub fn record_close(&self, reason: CloseReason) {
        self.shared.closes[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts frames written to clients.
    pub fn count_frames(&self, n: u64) {
        self.shared.frames.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one request by its method (bounded: see
    /// [`super::method_label`]) and outcome; `took`, when the request ran a
    /// handler, goes into the method's duration histogram.
    pub fn record_request(&self, method: &str, outcome: RequestOutcome, took: Option<Duration>) {
        self.shared.requests.record(method, outcome, took);
    }

    pub(crate) fn request_metrics(&self) -> &RequestMetrics {
        &self.shared.requests
    }

    /// The histograms of the OpenTelemetry MCP conventions.
    pub(crate) fn conventions(&self) -> &ConventionMetrics {
        &self.shared.conventions
    }

    /// Records one session's or stream's life in
    /// `mcp.server.session.duration`.
    pub(crate) fn record_session(&self, labels: super::SessionLabels, took: Duration) {
        self.shared.conventions.record_session(labels, took);
    }

    /// The principal of a request, as named by the configured [`PrincipalOf`],
    /// or else the subject of its [`crate::mux::Principal`].
    pub fn principal(&self, assigns: &Assigns) -> Option<String> {
        match &self.shared.principal_of {
            Some(f) => f(assigns),
            None => assigns
                .get::<crate::mux::Principal>()
                .map(|p| p.subject().to_owned()),
        }
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

    /// [`Server::shutdown`] for a drain that waits for its streams `timeout`
    /// from now: what a stream does on its way out (a 2025 GET stream
    /// offered to another node) is over a second before that. The first
    /// drain's deadline stands.
    pub fn shutdown_within(&self, timeout: Duration) {
        // A timeout past what an instant can hold sets no deadline: the
        // drain waits as long as it can.
        if let Some(deadline) = tokio::time::Instant::now().checked_add(timeout) {
            let _ = self.shared.drain_deadline.set(deadline);
        }
        self.shutdown();
    }

    /// When the drain under way gives up on its streams, if it said
    /// ([`Server::shutdown_within`]). Read by the fleet's GET stream pump.
    #[cfg(feature = "redis")]
    pub(crate) fn drain_deadline(&self) -> Option<tokio::time::Instant> {
        self.shared.drain_deadline.get().copied()
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

    /// Counts a resumable reply's request as running until the guard drops.
    pub(crate) fn hold_reply(&self) -> ReplyGuard {
        self.shared.replies.fetch_add(1, Ordering::AcqRel);
        ReplyGuard {
            server: self.clone(),
        }
    }

    /// Waits until no stream is open and no resumable reply's request runs,
    /// polling, for at most `timeout`. Returns whether the server drained.
    pub async fn drained(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.shared.open.load(Ordering::Acquire) == 0
                && self.shared.replies.load(Ordering::Acquire) == 0
            {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
