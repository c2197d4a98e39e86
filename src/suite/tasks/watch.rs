//! Who hears a task's status changes: bounded channels registered per task id
//! (the listen streams whose filter names the task). A watcher that does not
//! keep up is dropped, never queued for without bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::record::TaskRecord;

/// Most status changes waiting for one watcher; when full, the watcher is dropped.
pub const WATCH_BUFFER: usize = 64;

/// A status change: the `DetailedTask` at that moment, shared by every watcher.
pub type TaskUpdate = Arc<Map<String, Value>>;

/// The watchers of every task of a supervisor.
#[derive(Default)]
pub(crate) struct Watchers {
    by_task: Mutex<HashMap<String, Vec<mpsc::Sender<TaskUpdate>>>>,
}

impl Watchers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<mpsc::Sender<TaskUpdate>>>> {
        self.by_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `tx` for the changes of task `id`.
    pub(crate) fn watch(&self, id: &str, tx: mpsc::Sender<TaskUpdate>) {
        self.lock().entry(id.to_owned()).or_default().push(tx);
    }

    /// Sends `record`'s `DetailedTask` to its watchers (encoded once for all);
    /// a terminal status is the last they get.
    pub(crate) fn publish(&self, record: &TaskRecord) {
        let mut map = self.lock();
        let Some(list) = map.get_mut(&record.id) else {
            return;
        };
        let update: TaskUpdate = Arc::new(record.detailed());
        list.retain(|tx| tx.try_send(update.clone()).is_ok());
        if list.is_empty() || record.status.is_terminal() {
            map.remove(&record.id);
        }
    }
}
