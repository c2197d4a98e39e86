//! The record of one task, as the store keeps it, and its wire shapes
//! (`CreateTaskResult`, `DetailedTask`).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::status::TaskStatus;
use crate::protocol::error::ErrorObject;

/// How a finished task ended, kept encoded (a result is written once and read
/// many times).
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    /// The `CallToolResult`, encoded JSON.
    Result(Arc<str>),
    /// The JSON-RPC error.
    Error(ErrorObject),
}

/// One task.
/// How long a finished task stays readable at the least (the tasks
/// extension's conformance timing: 500 ms after it finishes).
pub(crate) const MIN_READABLE_MS: u64 = 500;

#[derive(Clone, Debug)]
pub(crate) struct TaskRecord {
    pub id: String,
    /// Who may see it: the principal key (`p:<subject>`, `a:<ip>`, `local`).
    pub owner: String,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub ttl_ms: u64,
    pub poll_interval_ms: u64,
    /// Outstanding input requests: key -> `{method, params}`.
    pub input_requests: Map<String, Value>,
    pub outcome: Option<Outcome>,
    /// Bumped by every stored change.
    pub rev: u64,
}

impl TaskRecord {
    /// When the task's TTL from its creation runs out (milliseconds since
    /// the epoch).
    pub fn due_ms(&self) -> u64 {
        self.created_ms.saturating_add(self.ttl_ms)
    }

    /// When the record is gone: at [`TaskRecord::due_ms`], except that an
    /// unfinished task never expires (its work runs: `u64::MAX`), and a
    /// task that ended after its TTL ran out, or less than
    /// [`MIN_READABLE_MS`] before, stays one more TTL from its end (so its
    /// result can be read: a task stays readable at least that long after
    /// it finishes).
    pub fn expires_ms(&self) -> u64 {
        let due = self.due_ms();
        if !self.status.is_terminal() {
            u64::MAX
        } else if self.updated_ms.saturating_add(MIN_READABLE_MS) >= due {
            self.updated_ms.saturating_add(self.ttl_ms).max(due)
        } else {
            due
        }
    }

    /// Bytes the kept outcome holds.
    pub fn outcome_bytes(&self) -> usize {
        match &self.outcome {
            Some(Outcome::Result(r)) => r.len(),
            Some(Outcome::Error(e)) => e.message.len() + 64,
            None => 0,
        }
    }

    /// The `Task` fields.
    fn task(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("taskId".into(), Value::from(self.id.clone()));
        m.insert("status".into(), Value::from(self.status.as_str()));
        if let Some(msg) = &self.status_message {
            m.insert("statusMessage".into(), Value::from(msg.clone()));
        }
        m.insert("createdAt".into(), Value::from(iso8601(self.created_ms)));
        m.insert(
            "lastUpdatedAt".into(),
            Value::from(iso8601(self.updated_ms)),
        );
        m.insert("ttlMs".into(), Value::from(self.ttl_ms));
        m.insert("pollIntervalMs".into(), Value::from(self.poll_interval_ms));
        m
    }

    /// `CreateTaskResult`: `resultType: "task"` and the flat `Task`.
    pub fn create_result(&self) -> Map<String, Value> {
        let mut m = self.task();
        m.insert("resultType".into(), Value::from("task"));
        m
    }

    /// `DetailedTask`: the `Task` plus `inputRequests` (input_required),
    /// `result` (completed) or `error` (failed).
    pub fn detailed(&self) -> Map<String, Value> {
        let mut m = self.task();
        match self.status {
            TaskStatus::InputRequired => {
                m.insert(
                    "inputRequests".into(),
                    Value::Object(self.input_requests.clone()),
                );
            }
            TaskStatus::Completed => {
                if let Some(Outcome::Result(r)) = &self.outcome {
                    let v = serde_json::from_str(r).unwrap_or(Value::Null);
                    m.insert("result".into(), v);
                }
            }
            TaskStatus::Failed => {
                if let Some(Outcome::Error(e)) = &self.outcome {
                    m.insert(
                        "error".into(),
                        serde_json::to_value(e).unwrap_or(Value::Null),
                    );
                }
            }
            _ => {}
        }
        m
    }
}

/// `ms` since the epoch as ISO 8601 UTC with milliseconds
/// (`2026-12-01T10:30:00.000Z`), as task timestamps are written.
///
/// ```
/// assert_eq!(genmcp::suite::tasks::iso8601(0), "1970-01-01T00:00:00.000Z");
/// ```
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(created_ms: u64, updated_ms: u64, ttl_ms: u64) -> TaskRecord {
        TaskRecord {
            id: "t".into(),
            owner: "o".into(),
            status: TaskStatus::Completed,
            status_message: None,
            created_ms,
            updated_ms,
            ttl_ms,
            poll_interval_ms: 500,
            input_requests: Map::new(),
            outcome: None,
            rev: 1,
        }
    }

    #[test]
    fn a_finished_task_is_readable_at_least_half_a_second_after_its_end() {
        // Ended well within its TTL: until the TTL from its creation.
        assert_eq!(ended(0, 400, 1_000).expires_ms(), 1_000);
        // Ended 5 ms before its TTL ran out: one TTL from its end, not 5 ms.
        assert_eq!(ended(0, 995, 1_000).expires_ms(), 1_995);
        // Ended after it: one TTL from its end, as before.
        assert_eq!(ended(0, 1_500, 1_000).expires_ms(), 2_500);
        // Never before its TTL from creation, whatever the TTL.
        assert_eq!(ended(0, 900, 100).expires_ms(), 1_000);
    }

    #[test]
    fn timestamps_are_iso8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_796_121_000_123), "2026-12-01T10:30:00.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
