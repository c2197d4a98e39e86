//! The tasks whose work runs in this process ([`LiveTable`]): their cancel
//! signal, abort handle and waiting input requests, counted per principal
//! for the bounds on running work.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;

use super::config::TaskConfig;
use super::cx::CancelSignal;
use crate::protocol::McpError;

/// The in-process part of a running task: never stored, never shared.
pub(super) struct Live {
    /// Whose bound it counts against until its work has stopped.
    pub(super) owner: String,
    pub(super) cancel: Arc<CancelSignal>,
    pub(super) abort: Option<tokio::task::AbortHandle>,
    /// Outstanding input requests: key -> where the answer goes.
    pub(super) inputs: HashMap<String, oneshot::Sender<Value>>,
    /// Keys issued so far (keys are never reused).
    pub(super) issued: u64,
    /// A timer watches the task's TTL while it waits for input
    /// (`Tasks::watch_input_ttl`).
    pub(super) input_watched: bool,
    /// The span its work runs in (linked to the call that created it); a
    /// listen that follows the task links to it.
    pub(super) span: tracing::Span,
}

/// The tasks whose work runs in this process, counted per principal: what
/// `max_tasks_per_principal` and `max_running_tasks` bound. A task counts
/// from before its record exists until its work has stopped (after its
/// record went terminal, e.g. a cancelled task within its grace period).
#[derive(Default)]
pub(super) struct LiveTable {
    tasks: HashMap<String, Live>,
    by_owner: HashMap<String, usize>,
}

impl LiveTable {
    pub(super) fn get(&self, id: &str) -> Option<&Live> {
        self.tasks.get(id)
    }

    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut Live> {
        self.tasks.get_mut(id)
    }

    /// Counts `live` as `id`, unless a bound of `config` is hit.
    pub(super) fn admit(
        &mut self,
        id: String,
        live: Live,
        config: &TaskConfig,
    ) -> Result<(), McpError> {
        let retry = (config.poll_interval.as_millis() as u64).div_ceil(1000);
        if self.by_owner.get(&live.owner).copied().unwrap_or(0) >= config.max_tasks_per_principal {
            return Err(McpError::limit_exceeded(
                "max_tasks_per_principal",
                "Too many unfinished tasks for this principal; retry when one finishes",
                retry,
            ));
        }
        if self.tasks.len() >= config.max_running_tasks {
            return Err(McpError::limit_exceeded(
                "max_running_tasks",
                "Server busy: too many unfinished tasks; retry later",
                retry,
            ));
        }
        *self.by_owner.entry(live.owner.clone()).or_insert(0) += 1;
        self.tasks.insert(id, live);
        Ok(())
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<Live> {
        let live = self.tasks.remove(id)?;
        if let Some(n) = self.by_owner.get_mut(&live.owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_owner.remove(&live.owner);
            }
        }
        Some(live)
    }

    pub(super) fn ids(&self) -> Vec<String> {
        self.tasks.keys().cloned().collect()
    }

    pub(super) fn len(&self) -> usize {
        self.tasks.len()
    }
}

impl Live {
    /// Tells the work to stop and aborts it now.
    pub(super) fn stop_now(self) {
        self.cancel.cancel();
        if let Some(abort) = self.abort {
            abort.abort();
        }
    }
}
