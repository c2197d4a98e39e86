//! [`TaskConfig`]: the lifetime and bounds of tasks (defaults in
//! `docs/security.md`).

use std::time::Duration;

/// Default time a task stays readable after it was created (`--task-ttl`).
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(60 * 60);
/// Default most unfinished tasks per principal (`--max-tasks-per-principal`).
pub const DEFAULT_MAX_TASKS_PER_PRINCIPAL: usize = 1_000;
/// Default most unfinished tasks in the process.
pub const DEFAULT_MAX_RUNNING_TASKS: usize = 10_000;
/// Default most task records kept (finished and unfinished).
pub const DEFAULT_MAX_RETAINED_TASKS: usize = 100_000;
/// Bytes of a task's status notification besides its result (fields,
/// JSON-RPC envelope, the bus's header): with tasks shared through Redis a
/// result may take the bus's `max_payload` less this.
pub const ANNOUNCE_RESERVE: usize = 16 * 1024;
/// Default largest encoded result one task may keep: 1 MiB less
/// [`ANNOUNCE_RESERVE`], so that with tasks shared through Redis a result's
/// status notification fits in one message of the bus's default
/// `max_payload` (1 MiB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024 - ANNOUNCE_RESERVE;
/// Default total bytes of kept results.
pub const DEFAULT_MAX_RETAINED_RESULT_BYTES: usize = 256 * 1024 * 1024;
/// Default time a cancelled task has to stop on its own before it is aborted.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);
/// Default [`TaskConfig::lease`]: how soon a task of a lost node reads `failed`.
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(30);
/// Default `pollIntervalMs` suggested to clients.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The lifetime and bounds of tasks. Build with `Default` and the setters.
///
/// ```
/// use std::time::Duration;
/// use genmcp::suite::TaskConfig;
/// let config = TaskConfig::default().ttl(Duration::from_secs(600)).max_tasks_per_principal(50);
/// assert_eq!(config.ttl, Duration::from_secs(600));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TaskConfig {
    /// How long a task stays readable after it was created (`ttlMs`). An
    /// unfinished task never expires while its work runs (it stays readable
    /// and counts against the bounds); a task that ends after its TTL ran
    /// out stays readable one more TTL from its end.
    pub ttl: Duration,
    /// `pollIntervalMs` suggested to clients.
    pub poll_interval: Duration,
    /// Most tasks one principal (or client address) may have whose work
    /// runs: a task counts until its work has stopped (a cancelled task,
    /// until it returns or is aborted after [`TaskConfig::cancel_grace`]).
    pub max_tasks_per_principal: usize,
    /// Most tasks whose work runs in the process (counted the same way).
    pub max_running_tasks: usize,
    /// Most task records kept, finished or not.
    pub max_retained_tasks: usize,
    /// Largest encoded result one task may keep (larger: the task fails).
    /// With tasks shared through Redis, see [`TaskConfig::fits_bus`].
    pub max_result_bytes: usize,
    /// Total bytes of kept results; over it new tasks are refused.
    pub max_retained_result_bytes: usize,
    /// How long a cancelled task may run on before it is aborted.
    pub cancel_grace: Duration,
    /// With tasks shared through Redis: how long a node's lease on its
    /// running tasks lasts without renewal (renewed every third of it, on a
    /// Redis permit of its own). When a node dies its unfinished tasks read
    /// `failed` at most this long after its last renewal.
    pub lease: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            ttl: DEFAULT_TASK_TTL,
            poll_interval: DEFAULT_POLL_INTERVAL,
            max_tasks_per_principal: DEFAULT_MAX_TASKS_PER_PRINCIPAL,
            max_running_tasks: DEFAULT_MAX_RUNNING_TASKS,
            max_retained_tasks: DEFAULT_MAX_RETAINED_TASKS,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            max_retained_result_bytes: DEFAULT_MAX_RETAINED_RESULT_BYTES,
            cancel_grace: DEFAULT_CANCEL_GRACE,
            lease: DEFAULT_TASK_LEASE,
        }
    }
}

impl TaskConfig {
    /// Sets [`TaskConfig::ttl`] (at least one second).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_secs(1));
        self
    }

    /// Sets [`TaskConfig::max_tasks_per_principal`] (at least 1).
    pub fn max_tasks_per_principal(mut self, n: usize) -> Self {
        self.max_tasks_per_principal = n.max(1);
        self
    }

    /// Sets [`TaskConfig::max_running_tasks`] (at least 1).
    pub fn max_running_tasks(mut self, n: usize) -> Self {
        self.max_running_tasks = n.max(1);
        self
    }

    /// Sets [`TaskConfig::max_retained_tasks`] (at least 1).
    pub fn max_retained_tasks(mut self, n: usize) -> Self {
        self.max_retained_tasks = n.max(1);
        self
    }

    /// Sets [`TaskConfig::max_result_bytes`].
    pub fn max_result_bytes(mut self, n: usize) -> Self {
        self.max_result_bytes = n;
        self
    }

    /// Sets [`TaskConfig::max_retained_result_bytes`].
    pub fn max_retained_result_bytes(mut self, n: usize) -> Self {
        self.max_retained_result_bytes = n;
        self
    }

    /// Sets [`TaskConfig::lease`] (at least one second).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// Whether a result of [`TaskConfig::max_result_bytes`] can be announced
    /// to the other nodes on a bus whose largest message is `max_payload`
    /// bytes (its status notification, with [`ANNOUNCE_RESERVE`] bytes for
    /// the rest, must fit in one); the error says why not.
    ///
    /// ```
    /// use genmcp::suite::TaskConfig;
    /// assert!(TaskConfig::default().fits_bus(1 << 20).is_ok());
    /// assert!(TaskConfig::default().max_result_bytes(1 << 20).fits_bus(1 << 20).is_err());
    /// ```
    pub fn fits_bus(&self, max_payload: usize) -> Result<(), String> {
        let room = max_payload.saturating_sub(ANNOUNCE_RESERVE);
        if self.max_result_bytes > room {
            return Err(format!(
                "task results of up to {} bytes (max_result_bytes) cannot be announced on the bus: its max_payload is {max_payload} bytes, which leaves {room} for a result ({ANNOUNCE_RESERVE} are kept for the rest of the status notification)",
                self.max_result_bytes
            ));
        }
        Ok(())
    }

    /// Sets [`TaskConfig::cancel_grace`].
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }
}
