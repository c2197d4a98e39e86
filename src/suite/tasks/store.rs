//! Where task records live: the [`TaskStore`] trait (so a shared store, e.g.
//! Redis, can come later) and the in-process [`MemoryStore`] with its bounds.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::config::TaskConfig;
use super::record::TaskRecord;
use crate::protocol::McpError;

/// Counts a store reports (for metrics and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskStats {
    /// Records kept (unfinished and finished, not yet expired).
    pub retained: usize,
    /// Records not yet in a terminal status.
    pub unfinished: usize,
    /// Bytes of kept results and errors.
    pub result_bytes: usize,
}

/// A store of task records. Every change of a record goes through
/// [`TaskStore::modify`]; the caller decides (see `status::allows`) whether
/// the change is legal.
pub(crate) trait TaskStore: Send + Sync + 'static {
    /// Adds a new record, or refuses it when a bound of `config` on kept
    /// records is hit (`McpError::LimitExceeded`). It does not purge: the
    /// supervisor purges first (and stops the work of what it drops). The
    /// bounds on unfinished work are the supervisor's too (they count a
    /// task until its work has stopped).
    fn insert(&self, record: TaskRecord, config: &TaskConfig, now_ms: u64) -> Result<(), McpError>;
    /// The record `id`, unless unknown or expired.
    fn get(&self, id: &str, now_ms: u64) -> Option<TaskRecord>;
    /// Applies `change` to record `id`; when it returns `true` the record is
    /// stored and returned.
    fn modify(
        &self,
        id: &str,
        now_ms: u64,
        change: &mut dyn FnMut(&mut TaskRecord) -> bool,
    ) -> Option<TaskRecord>;
    /// Forgets record `id`.
    fn remove(&self, id: &str);
    /// Drops expired records (never an unfinished one:
    /// [`TaskRecord::expires_ms`]); returns their ids (work of theirs still
    /// running, e.g. a cancelled task's within its grace, must stop).
    fn purge_expired(&self, now_ms: u64) -> Vec<String>;
    /// Current counts.
    fn stats(&self) -> TaskStats;
}

#[derive(Default)]
struct Table {
    records: HashMap<String, TaskRecord>,
    /// `(when, id)`: each record's `due_ms` in insertion order, and again
    /// its `expires_ms` when it ended after that. The TTL is the same for
    /// every record of a store, so this is also expiry order. An entry whose
    /// record expires later (unfinished, or ended late) is skipped.
    expiry: VecDeque<(u64, String)>,
    unfinished: usize,
    result_bytes: usize,
}

impl Table {
    fn forget(&mut self, id: &str) -> Option<TaskRecord> {
        let record = self.records.remove(id)?;
        if record.status.is_terminal() {
            self.result_bytes = self.result_bytes.saturating_sub(record.outcome_bytes());
        } else {
            self.unfinished = self.unfinished.saturating_sub(1);
        }
        Some(record)
    }

    fn purge(&mut self, now_ms: u64) -> Vec<String> {
        let mut dropped = Vec::new();
        while let Some((exp, _)) = self.expiry.front() {
            if *exp > now_ms {
                break;
            }
            let Some((_, id)) = self.expiry.pop_front() else {
                break;
            };
            let expired = self
                .records
                .get(&id)
                .is_some_and(|r| r.expires_ms() <= now_ms);
            if expired {
                self.forget(&id);
                dropped.push(id);
            }
        }
        dropped
    }

    /// Seconds until the oldest record expires (at least 1).
    fn retry_after(&self, now_ms: u64) -> u64 {
        self.expiry
            .front()
            .map_or(1, |(exp, _)| exp.saturating_sub(now_ms).div_ceil(1000))
            .max(1)
    }
}

/// The in-process store: one mutex over a map, never held across `.await`.
#[derive(Default)]
pub(crate) struct MemoryStore {
    table: Mutex<Table>,
}

impl MemoryStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TaskStore for MemoryStore {
    fn insert(&self, record: TaskRecord, config: &TaskConfig, now_ms: u64) -> Result<(), McpError> {
        let mut t = self.lock();
        if t.records.len() >= config.max_retained_tasks
            || t.result_bytes >= config.max_retained_result_bytes
        {
            let wait = t.retry_after(now_ms);
            return Err(McpError::limit_exceeded(
                "max_retained_tasks",
                "Server busy: too many finished tasks kept; retry later",
                wait,
            ));
        }
        if t.expiry.len() > 2 * t.records.len() + 1024 {
            // Records removed early (MRTR rounds, direct answers) leave their
            // expiry entries behind: drop them so the queue stays bounded.
            let Table {
                expiry, records, ..
            } = &mut *t;
            expiry.retain(|(_, id)| records.contains_key(id));
        }
        t.unfinished += 1;
        t.expiry.push_back((record.due_ms(), record.id.clone()));
        t.records.insert(record.id.clone(), record);
        Ok(())
    }

    fn get(&self, id: &str, now_ms: u64) -> Option<TaskRecord> {
        let t = self.lock();
        t.records
            .get(id)
            .filter(|r| r.expires_ms() > now_ms)
            .cloned()
    }

    fn modify(
        &self,
        id: &str,
        now_ms: u64,
        change: &mut dyn FnMut(&mut TaskRecord) -> bool,
    ) -> Option<TaskRecord> {
        let mut t = self.lock();
        let record = t.records.get_mut(id).filter(|r| r.expires_ms() > now_ms)?;
        let was_terminal = record.status.is_terminal();
        let mut next = record.clone();
        if !change(&mut next) {
            return None;
        }
        // Every stored change is a new revision (what a shared copy orders by).
        next.rev += 1;
        let before = std::mem::replace(record, next.clone());
        if !was_terminal && next.status.is_terminal() {
            t.unfinished = t.unfinished.saturating_sub(1);
            t.result_bytes += next.outcome_bytes();
        } else if was_terminal {
            // A terminal record adopted from the shared copy (another outcome).
            t.result_bytes =
                t.result_bytes.saturating_sub(before.outcome_bytes()) + next.outcome_bytes();
        }
        let expires = next.expires_ms();
        if next.status.is_terminal()
            && expires > next.due_ms()
            && (!was_terminal || expires != before.expires_ms())
        {
            // Ended after its TTL ran out: due again one TTL from its end
            // (later than every entry queued before).
            t.expiry.push_back((expires, next.id.clone()));
        }
        Some(next)
    }

    fn remove(&self, id: &str) {
        let mut t = self.lock();
        t.forget(id);
        // Its expiry entry stays until it comes due; `forget` ignores a gone id.
    }

    fn purge_expired(&self, now_ms: u64) -> Vec<String> {
        self.lock().purge(now_ms)
    }

    fn stats(&self) -> TaskStats {
        let t = self.lock();
        TaskStats {
            retained: t.records.len(),
            unfinished: t.unfinished,
            result_bytes: t.result_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::suite::tasks::status::TaskStatus;

    fn record(id: &str, owner: &str, created_ms: u64) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            owner: owner.into(),
            status: TaskStatus::Working,
            status_message: None,
            created_ms,
            updated_ms: created_ms,
            ttl_ms: 1_000,
            poll_interval_ms: 500,
            input_requests: Map::new(),
            outcome: None,
            rev: 0,
        }
    }

    fn finish(store: &MemoryStore, id: &str, now: u64) {
        store.modify(id, now, &mut |r| {
            r.status = TaskStatus::Completed;
            r.updated_ms = now;
            r.outcome = Some(super::super::record::Outcome::Result("{}".into()));
            true
        });
    }

    #[test]
    fn retained_records_are_bounded_and_expiry_frees_them() {
        let store = MemoryStore::default();
        let config = TaskConfig::default().max_retained_tasks(2);
        store.insert(record("a", "p", 0), &config, 0).unwrap();
        store.insert(record("b", "p", 10), &config, 10).unwrap();
        finish(&store, "a", 20);
        let refused = store.insert(record("c", "p", 20), &config, 20).unwrap_err();
        assert_eq!(refused.retry_after(), Some(1));
        assert_eq!(store.stats().unfinished, 1);
        assert_eq!(store.stats().result_bytes, 2);
        // "a" expires at 1000 (finished within its TTL).
        assert_eq!(store.purge_expired(1_000), vec!["a".to_owned()]);
        assert!(store.get("a", 1_000).is_none());
        // "b" is due at 1010 but unfinished: it never expires while its work
        // runs, and still counts.
        assert!(store.purge_expired(1_010).is_empty());
        assert!(store.get("b", 5_000).is_some());
        assert_eq!(store.stats().unfinished, 1);
        // It ends at 5000, after its TTL: kept one more TTL from its end.
        finish(&store, "b", 5_000);
        assert!(store.purge_expired(5_999).is_empty());
        assert!(store.get("b", 5_999).is_some());
        assert_eq!(store.purge_expired(6_000), vec!["b".to_owned()]);
        assert_eq!(store.stats(), TaskStats::default());
        store
            .insert(record("c", "p", 6_000), &config, 6_000)
            .unwrap();
        finish(&store, "c", 6_100);
        assert!(store.get("c", 6_999).is_some());
        assert!(store.get("c", 7_000).is_none());
    }

    #[test]
    fn records_removed_early_do_not_grow_the_expiry_queue() {
        let store = MemoryStore::default();
        let config = TaskConfig::default();
        for i in 0..10_000 {
            let id = format!("t{i}");
            store.insert(record(&id, "p", 0), &config, 0).unwrap();
            store.remove(&id);
        }
        assert!(store.lock().expiry.len() <= 1_025);
        assert_eq!(store.stats(), TaskStats::default());
    }
}
