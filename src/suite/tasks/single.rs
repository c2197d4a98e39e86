//! Tasks on one node: without the `redis` feature every task lives in this
//! process and nothing is shared. The same entry points as the shared side
//! (`remote`), each answering from the local store; the types the rest of
//! the crate names exist here too, empty.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::record::TaskRecord;
use super::supervisor::Tasks;
use crate::mux::Channel;
use crate::protocol::McpError;

/// Tasks shared through Redis: none without the `redis` feature (no value
/// of this type exists).
#[derive(Clone)]
pub(crate) enum SharedTasks {}

/// The tasks a listen may watch: its own known tasks.
#[derive(Default)]
pub(crate) struct Watchable {
    local: Vec<String>,
}

impl Watchable {
    /// Every accepted id, sorted.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.local.clone()
    }
}

impl Tasks {
    /// Never called: no [`SharedTasks`] exists.
    pub(crate) fn share(&self, remote: SharedTasks) {
        match remote {}
    }

    /// No shared side.
    pub(crate) fn remote_handle(&self) -> Option<SharedTasks> {
        None
    }

    /// Nothing to start on one node.
    pub(super) async fn start_sharing(&self) -> Result<(), McpError> {
        Ok(())
    }

    /// Nothing to copy on one node.
    pub(super) async fn share_created(&self, _record: &TaskRecord) -> Result<(), McpError> {
        Ok(())
    }

    /// Nothing to copy on one node.
    pub(super) fn mirror_announced(&self, _id: &str, _watched: Option<TaskRecord>) {}

    /// Any result that fits the store fits: there is no bus to carry it.
    pub(super) fn announceable(&self, _id: &str, json: Arc<str>) -> Result<Arc<str>, McpError> {
        Ok(json)
    }

    /// Nothing to copy on one node.
    pub(super) async fn copy_now(&self, _id: &str) {}

    /// `tasks/get`.
    pub(crate) async fn get_any(
        &self,
        id: &str,
        owner: &str,
    ) -> Result<Map<String, Value>, McpError> {
        self.get(id, owner)
    }

    /// `tasks/update`.
    pub(crate) async fn update_any(
        &self,
        id: &str,
        owner: &str,
        responses: &Map<String, Value>,
    ) -> Result<(), McpError> {
        self.update(id, owner, responses)
    }

    /// `tasks/cancel`.
    pub(crate) async fn cancel_any(&self, id: &str, owner: &str) -> Result<(), McpError> {
        self.cancel(id, owner)
    }

    /// The ids of `ids` a listen by `owner` may watch.
    pub(crate) async fn watchable_any(&self, ids: &[String], owner: &str) -> Watchable {
        Watchable {
            local: self.watchable(ids, owner),
        }
    }

    /// Makes the acknowledged listen `channel` hear the tasks of `watchable`.
    pub(crate) fn watch_all(&self, watchable: &Watchable, channel: &Channel) {
        self.watch(&watchable.local, channel);
    }
}
