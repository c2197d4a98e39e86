//! Listen streams watching tasks: the channels that hear a task's
//! `notifications/tasks`, keyed by task id.
//!
//! A status change is encoded once ([`SharedNotification`]) and queued on
//! every watching channel, which checks its honoured `taskIds` and applies
//! the stream's back-pressure (spill, then overflow) like any other
//! notification. A channel is let go when its stream has ended (at the
//! task's next change), when the task reaches a terminal status (after that
//! one is sent) or when the task expires.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::record::TaskRecord;
use crate::mux::{Channel, SharedNotification};
use crate::protocol::Notification;

/// `notifications/tasks` with the full `DetailedTask` of `record`.
pub(crate) fn status_notification(record: &TaskRecord) -> SharedNotification {
    SharedNotification::new(Notification::new(
        crate::protocol::methods::TASK_STATUS,
        record.detailed(),
    ))
}

/// Who watches which task.
#[derive(Default)]
pub(crate) struct Watchers {
    map: Mutex<HashMap<String, Vec<Channel>>>,
}

impl Watchers {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Vec<Channel>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `channel` hear the tasks `ids`: each one's current state at once
    /// (a change made between the listen's check and now is not missed), then
    /// every change. `current` reads a task's record (`None`: gone).
    pub(crate) fn watch(
        &self,
        ids: &[String],
        channel: &Channel,
        current: impl Fn(&str) -> Option<TaskRecord>,
    ) {
        // Under the lock: a change announced meanwhile waits for this, so the
        // channel gets the state before it, then the change.
        let mut map = self.lock();
        for id in ids {
            let Some(record) = current(id) else { continue };
            let _ = channel.send_shared(status_notification(&record));
            if record.status.is_terminal() {
                continue;
            }
            let watching = map.entry(id.clone()).or_default();
            watching.retain(|c| !c.is_closed());
            watching.push(channel.clone());
        }
    }

    /// Tells the watchers of `id` its state now (`current`, read under the
    /// lock, so two changes racing each other are both announced with the
    /// later state, never the earlier one last); after a terminal state, or
    /// when the task is gone, nobody watches it any more. `current` runs only
    /// when someone watches `id` (a change nobody watches costs one lookup);
    /// returns what it read.
    pub(crate) fn announce(
        &self,
        id: &str,
        current: impl FnOnce() -> Option<TaskRecord>,
    ) -> Option<TaskRecord> {
        let mut map = self.lock();
        let watching = map.get_mut(id)?;
        let record = current();
        let Some(now) = &record else {
            map.remove(id);
            return None;
        };
        let notification = status_notification(now);
        watching.retain(|channel| {
            // A refused send (stream ended, overflowed) lets the channel go;
            // the stream notices an overflow itself.
            channel.send_shared(notification.clone()).is_ok()
        });
        if now.status.is_terminal() || watching.is_empty() {
            map.remove(id);
        }
        record
    }

    /// Forgets the watchers of tasks that are gone (expired).
    pub(crate) fn forget(&self, ids: &[String]) {
        let mut map = self.lock();
        for id in ids {
            map.remove(id);
        }
    }

    /// How many (task, channel) pairs are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};

    use super::*;
    use crate::mux::{Assigns, OutboxReceiver, outbox};
    use crate::protocol::{RequestId, RequestMeta, SubscriptionFilter};
    use crate::suite::tasks::TaskStatus;

    fn record(id: &str, status: TaskStatus, message: &str) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            owner: "o".into(),
            status,
            status_message: Some(message.into()),
            created_ms: 0,
            updated_ms: 0,
            ttl_ms: 1000,
            poll_interval_ms: 100,
            input_requests: Map::new(),
            outcome: None,
            rev: 0,
        }
    }

    /// An acknowledged listen honouring `ids`, its ack already read.
    fn listen(ids: &[&str]) -> (Channel, OutboxReceiver) {
        let (tx, mut rx) = outbox(16);
        let channel = Channel::for_listen(
            RequestId::Number(1),
            RequestMeta::current(),
            Assigns::new(),
            tx,
            4,
        );
        channel
            .acknowledge(SubscriptionFilter {
                task_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
                ..Default::default()
            })
            .unwrap();
        rx.try_recv().unwrap();
        (channel, rx)
    }

    fn next(rx: &mut OutboxReceiver) -> Option<Value> {
        let frame = rx.try_recv().ok()?;
        serde_json::from_slice::<Value>(&frame.to_bytes()).ok()
    }

    #[test]
    fn watchers_hear_the_current_state_then_changes_until_the_terminal_one() {
        let watchers = Watchers::default();
        let (a, mut rx) = listen(&["t1"]);
        watchers.watch(&["t1".into()], &a, |_| {
            Some(record("t1", TaskStatus::Working, "first"))
        });
        let first = next(&mut rx).unwrap();
        assert_eq!(first["method"], "notifications/tasks");
        assert_eq!(first["params"]["statusMessage"], "first");
        // A change is read when announced: the latest state goes out.
        watchers.announce("t1", || Some(record("t1", TaskStatus::Working, "later")));
        assert_eq!(next(&mut rx).unwrap()["params"]["statusMessage"], "later");
        // Another task's change reaches nobody here.
        watchers.announce("t2", || Some(record("t2", TaskStatus::Working, "x")));
        assert!(next(&mut rx).is_none());
        assert_eq!(watchers.len(), 1);
        watchers.announce("t1", || Some(record("t1", TaskStatus::Completed, "done")));
        assert_eq!(next(&mut rx).unwrap()["params"]["status"], "completed");
        // After the terminal state nobody watches the task.
        assert_eq!(watchers.len(), 0);
        watchers.announce("t1", || Some(record("t1", TaskStatus::Completed, "again")));
        assert!(next(&mut rx).is_none());
    }

    #[test]
    fn ended_streams_and_gone_tasks_are_let_go() {
        let watchers = Watchers::default();
        let (a, _rx_a) = listen(&["t1"]);
        let (b, mut rx_b) = listen(&["t1"]);
        let working = |_: &str| Some(record("t1", TaskStatus::Working, "w"));
        watchers.watch(&["t1".into()], &a, working);
        watchers.watch(&["t1".into()], &b, working);
        next(&mut rx_b).unwrap();
        assert_eq!(watchers.len(), 2);
        a.close();
        watchers.announce("t1", || Some(record("t1", TaskStatus::Working, "w2")));
        assert_eq!(watchers.len(), 1, "the ended stream was let go");
        assert_eq!(next(&mut rx_b).unwrap()["params"]["statusMessage"], "w2");
        // Gone (expired) between the change and its announcement.
        watchers.announce("t1", || None);
        assert_eq!(watchers.len(), 0);
        // A task that is gone or finished at watch time is not kept.
        watchers.watch(&["t1".into()], &b, |_| None);
        watchers.watch(&["t1".into()], &b, |_| {
            Some(record("t1", TaskStatus::Failed, "f"))
        });
        assert_eq!(watchers.len(), 0);
        assert_eq!(next(&mut rx_b).unwrap()["params"]["status"], "failed");
    }
}
