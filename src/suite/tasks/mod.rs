//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a
//! `tools/call` answered with a task handle, then polled (`tasks/get`),
//! answered (`tasks/update`) or cancelled (`tasks/cancel`).
//!
//! Files, by idea: `status` (the states and the one transition rule),
//! `record` (a task's record and its wire shapes), `store` (the `TaskStore`
//! trait and the in-process store with its bounds), `config` (lifetime and
//! bounds), `cx` ([`TaskCx`], the handler's side), `supervisor` (one
//! supervised future per running task), `live` (the running work, counted
//! for the bounds), `watch` (listen streams hearing `notifications/tasks`),
//! `wire` (the three methods). With tasks shared through Redis (the `redis`
//! feature): `shared` (the copies in Redis), `remote` (the supervisor's side
//! of them), `control` (forwarded changes, confirmed), `lease` (the node's
//! lease, and adopting what other nodes decided while it lapsed); without
//! it, `single` (the same entry points, answered from this process). See
//! `docs/tasks.md`.

mod config;
#[cfg(feature = "redis")]
mod control;
mod cx;
#[cfg(feature = "redis")]
mod lease;
mod live;
mod record;
#[cfg(feature = "redis")]
mod remote;
#[cfg(feature = "redis")]
mod shared;
#[cfg(not(feature = "redis"))]
mod single;

pub use record::iso8601;
mod status;
mod store;
mod supervisor;
mod watch;
mod wire;

pub use config::{
    ANNOUNCE_RESERVE, DEFAULT_CANCEL_GRACE, DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_RETAINED_RESULT_BYTES, DEFAULT_MAX_RETAINED_TASKS, DEFAULT_MAX_RUNNING_TASKS,
    DEFAULT_MAX_TASKS_PER_PRINCIPAL, DEFAULT_POLL_INTERVAL, DEFAULT_TASK_LEASE, DEFAULT_TASK_TTL,
    TaskConfig,
};
pub use cx::{InputAnswer, InputGone, TaskCx};
#[cfg(feature = "redis")]
pub(crate) use remote::Watchable;
#[cfg(feature = "redis")]
pub(crate) use shared::SharedTasks;
#[cfg(not(feature = "redis"))]
pub(crate) use single::{SharedTasks, Watchable};
pub use status::TaskStatus;
pub use store::TaskStats;
pub(crate) use supervisor::{Started, Tasks};
pub use wire::{METHOD_CANCEL, METHOD_GET, METHOD_UPDATE, NOTIFICATION, is_task_method};
pub(crate) use wire::{answer, declared, extension_required, owner_of};

/// The extension id, in `capabilities.extensions` and the client's
/// `clientCapabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Whether a tool never, may or must run as a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never a task (the default): always answered directly.
    #[default]
    Forbidden,
    /// A task when the request declares the extension (a handler that
    /// finishes at once still answers directly).
    Optional,
    /// Always a task: a request that does not declare the extension gets
    /// `-32021`.
    Required,
}
