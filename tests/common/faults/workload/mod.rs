//! The workload: clients on their own threads, each operation recorded.
//!
//! - a **task worker** per principal (`alice`, `bob`): creates `export_notes`
//!   tasks (about 2 s `working`, then `input_required` until answered) on a
//!   random node, reads them on every node, then answers (`tasks/update`) or
//!   cancels them on another node, or leaves them waiting (so the
//!   per-principal bound is reached; a refused create cancels the oldest);
//! - two **session workers** (`carol`, and `dave` whose streams the demo
//!   narrows; 2025-11-25 through the round-robin proxy): initialize, the GET
//!   stream, subscribe / publish / unsubscribe / publish on a fresh note each
//!   cycle, a second GET as a probe, DELETE;
//! - a **race worker** (`carol`, 2026): a waiting task cancelled on its node
//!   while a listen naming it opens on another, a few milliseconds apart;
//! - a **reader**: `tasks/get` of a recent task on a random node, every 150 ms;
//! - a **listen worker** (`alice`, 2026): a listen on a random node naming
//!   recent tasks (`taskIds`) and a fresh note (`resourceSubscriptions`), two
//!   publishes, closed after a few seconds.
//!
//! Workers check `stop` between operations; every request has a timeout, so
//! they end by themselves.

mod client;
mod ctx;
mod listens;
mod sessions;
mod tasks;

use std::time::Duration;

pub use client::{read_everywhere, terminal};
pub use ctx::Ctx;
pub use listens::listen_worker;
pub use sessions::session_worker;
pub use tasks::{race_worker, reader, task_worker};

/// The 2026 protocol version.
pub const VERSION: &str = "2026-07-28";
/// The 2025 protocol version.
pub const LEGACY: &str = "2025-11-25";
/// The tasks extension.
pub const EXT: &str = "io.modelcontextprotocol/tasks";
/// How long a request may take before its outcome is unknown.
pub const TIMEOUT: Duration = Duration::from_secs(10);
