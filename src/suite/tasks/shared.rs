//! Tasks shared by the nodes of one Redis bus
//! ([`crate::suite::SuiteBuilder::shared_tasks`]).
//!
//! A task runs on the node that created it, and that node's store stays the
//! authority for it. Every stored change is copied to Redis
//! (`<prefix>task:<id>`, expiring with the task's TTL; a copy is stored only
//! when its revision is newer, so copies racing each other never leave an
//! older one last) and its `notifications/tasks` is published on the bus
//! topic `tasks/<id>`. Other nodes read the copy (`tasks/get`, `taskIds`),
//! forward `tasks/update` and `tasks/cancel` to the task's node over the bus
//! (topic `tasks-ctl/<node>`, each message with an acknowledgement key
//! `<prefix>task-ack:<ack>` that decides whether it is applied: see
//! [`SharedTasks::decide`]), and hear the status topic for their watching
//! streams. A node renews a lease (`<prefix>task-node:<node>`) while it
//! lives; a copy that is unfinished while its node's lease is gone reads
//! `failed` ("the node running this task was lost"). A terminal copy is
//! final: the write script refuses to overwrite it, whatever the revision,
//! and the task's node adopts it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::record::{Outcome, TaskRecord};
use super::status::TaskStatus;
use crate::mux::{Channel, ChannelError, SharedNotification};
use crate::protocol::error::ErrorObject;
use crate::protocol::{McpError, Notification};
use crate::pubsub::{
    Bus, BusError, BusSubscription, DeliverFuture, Inbox, InboxError, InboxSink, RedisOnce,
};

/// Stores a task copy unless it would replace a newer one or a terminal one
/// (a terminal status is final, whatever the revision); the same revision
/// again only extends its expiry. Answers 1 stored, 0 older, 2 terminal
/// there, 3 expiry extended.
const PUT_SCRIPT: &str = r#"
local cur = redis.call('GET', KEYS[1])
if cur then
  local rev, status = string.match(cur, '^{"rev":(%d+),"status":"([%a_]+)"')
  if status == 'completed' or status == 'failed' or status == 'cancelled' then
    return 2
  end
  if not rev then
    rev = string.match(cur, '^{"rev":(%d+),')
  end
  if rev then
    rev = tonumber(rev)
    local new = tonumber(ARGV[2])
    if rev > new then return 0 end
    if rev == new then
      redis.call('PEXPIREAT', KEYS[1], ARGV[3])
      return 3
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[3])
return 1
"#;

/// How a copy was written (see [`SharedTasks::put`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Put {
    /// Stored: announce it.
    Stored,
    /// A newer revision is there: nothing changed.
    Older,
    /// The same revision is there: its expiry was extended.
    Touched,
    /// A terminal copy is there (final): the task's node adopts it.
    Final,
}

impl Put {
    /// The write script's answer.
    fn of(answer: i64) -> Put {
        match answer {
            1 => Put::Stored,
            2 => Put::Final,
            3 => Put::Touched,
            _ => Put::Older,
        }
    }
}

/// A record as stored in Redis. `rev` and `status` must stay the first two
/// fields: the write script reads them from the value's first bytes.
#[derive(Serialize, Deserialize)]
struct Stored {
    rev: u64,
    status: TaskStatus,
    node: String,
    id: String,
    owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status_message: Option<String>,
    created_ms: u64,
    updated_ms: u64,
    ttl_ms: u64,
    poll_interval_ms: u64,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    input_requests: Map<String, Value>,
    /// The encoded `CallToolResult` of a completed task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject>,
}

impl Stored {
    fn of(record: &TaskRecord, node: &str) -> Stored {
        let (result, error) = match &record.outcome {
            Some(Outcome::Result(json)) => (Some(json.to_string()), None),
            Some(Outcome::Error(e)) => (None, Some(e.clone())),
            None => (None, None),
        };
        Stored {
            rev: record.rev,
            status: record.status,
            node: node.to_owned(),
            id: record.id.clone(),
            owner: record.owner.clone(),
            status_message: record.status_message.clone(),
            created_ms: record.created_ms,
            updated_ms: record.updated_ms,
            ttl_ms: record.ttl_ms,
            poll_interval_ms: record.poll_interval_ms,
            input_requests: record.input_requests.clone(),
            result,
            error,
        }
    }

    fn into_record(self) -> (TaskRecord, String) {
        let outcome = match (self.result, self.error) {
            (Some(json), _) => Some(Outcome::Result(Arc::from(json))),
            (None, Some(e)) => Some(Outcome::Error(e)),
            (None, None) => None,
        };
        let record = TaskRecord {
            id: self.id,
            owner: self.owner,
            status: self.status,
            status_message: self.status_message,
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
            input_requests: self.input_requests,
            outcome,
            rev: self.rev,
        };
        (record, self.node)
    }
}

/// The answer when Redis cannot be asked: reads and writes fail closed.
pub(crate) fn unavailable(e: &BusError) -> McpError {
    tracing::warn!(error = %e, "task store unavailable");
    McpError::internal("Internal error: the shared task store is unavailable; retry later")
}

/// `notifications/tasks` with the full `DetailedTask` of `record`.
pub(crate) fn status_notification(record: &TaskRecord) -> SharedNotification {
    SharedNotification::new(Notification::new(
        crate::protocol::methods::TASK_STATUS,
        record.detailed(),
    ))
}

/// The Redis side of a suite's tasks: record copies, leases, and the bus.
#[derive(Clone)]
pub(crate) struct SharedTasks {
    keys: RedisOnce,
    bus: Bus<SharedNotification>,
    node: String,
}

impl SharedTasks {
    pub(crate) fn new(keys: RedisOnce, bus: Bus<SharedNotification>) -> Self {
        let node = keys.node();
        SharedTasks { keys, bus, node }
    }

    /// Bytes a status notification may take to reach the other nodes (the
    /// bus's `max_payload`, less its header and framing).
    pub(crate) fn max_announce(&self) -> usize {
        self.keys.max_payload().saturating_sub(64)
    }

    /// This node's name.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// The bus's keys in Redis.
    pub(crate) fn keys(&self) -> &RedisOnce {
        &self.keys
    }

    /// The bus.
    pub(crate) fn bus(&self) -> &Bus<SharedNotification> {
        &self.bus
    }

    /// Stores a copy of `record` as this node's, unless a newer or a
    /// terminal one is there. An unfinished copy expires one TTL after this
    /// write (at the earliest the task's TTL): while its work runs the task
    /// never expires (see [`SharedTasks::touch`]).
    pub(crate) async fn put(&self, record: &TaskRecord) -> Result<Put, BusError> {
        self.put_as(record, &self.node).await
    }

    /// [`SharedTasks::put`] naming `node` as the task's node.
    pub(crate) async fn put_as(&self, record: &TaskRecord, node: &str) -> Result<Put, BusError> {
        let now = crate::suite::sealing::seal::now_ms();
        let expires = if record.status.is_terminal() {
            record.expires_ms()
        } else {
            record.due_ms().max(now.saturating_add(record.ttl_ms))
        };
        let eval = self.write(record, node, expires)?;
        Ok(Put::of(self.keys.query(eval).await?))
    }

    /// Extends the copy of the unfinished `record` (unchanged since its
    /// last write) by one TTL from now, on the lease's own permit.
    pub(crate) async fn touch(&self, record: &TaskRecord) -> Result<Put, BusError> {
        let now = crate::suite::sealing::seal::now_ms();
        let eval = self.write(record, &self.node, now.saturating_add(record.ttl_ms))?;
        Ok(Put::of(self.keys.query_reserved(eval).await?))
    }

    /// The write script for `record` as `node`'s, expiring at `expires_ms`.
    fn write(
        &self,
        record: &TaskRecord,
        node: &str,
        expires_ms: u64,
    ) -> Result<::redis::Cmd, BusError> {
        let bytes = serde_json::to_vec(&Stored::of(record, node))
            .map_err(|e| BusError::Config(format!("unencodable task record: {e}")))?;
        let mut eval = ::redis::cmd("EVAL");
        eval.arg(PUT_SCRIPT)
            .arg(1)
            .arg(self.keys.key(&format!("task:{}", record.id)))
            .arg(bytes)
            .arg(record.rev)
            .arg(expires_ms);
        Ok(eval)
    }

    /// The copy of task `id` and the node running it; `None` when unknown
    /// or expired (an undecodable copy reads as unknown).
    pub(crate) async fn get(&self, id: &str) -> Result<Option<(TaskRecord, String)>, BusError> {
        let Some(bytes) = self.keys.get(&format!("task:{id}")).await? else {
            return Ok(None);
        };
        Ok(serde_json::from_slice::<Stored>(&bytes)
            .ok()
            .filter(|s| s.id == id)
            .map(Stored::into_record))
    }

    /// Renews this node's lease until `until_ms`, on its own permit (client
    /// traffic cannot crowd it out); `Ok(false)` when the lease had lapsed
    /// (other nodes may have ended this node's tasks `failed` meanwhile).
    pub(crate) async fn renew(&self, until_ms: u64) -> Result<bool, BusError> {
        let mut set = ::redis::cmd("SET");
        set.arg(self.keys.key(&format!("task-node:{}", self.node)))
            .arg(1)
            .arg("PXAT")
            .arg(until_ms)
            .arg("GET");
        let held: Option<Vec<u8>> = self.keys.query_reserved(set).await?;
        Ok(held.is_some())
    }

    /// Whether `node` holds a lease.
    pub(crate) async fn alive(&self, node: &str) -> Result<bool, BusError> {
        Ok(self.keys.get(&format!("task-node:{node}")).await?.is_some())
    }

    /// Publishes `record`'s status for the other nodes' watchers.
    pub(crate) fn publish_status(&self, record: &TaskRecord) {
        let topic = format!("tasks/{}", record.id);
        if let Err((_, e)) = self.bus.try_publish(&topic, status_notification(record)) {
            tracing::warn!(task = %record.id, error = %e, "task status not published to the other nodes");
        }
    }

    /// Has `channel` hear the status topic of task `id`.
    pub(crate) fn watch_status(
        &self,
        id: &str,
        channel: Channel,
    ) -> BusSubscription<SharedNotification> {
        self.bus.subscribe(
            format!("tasks/{id}"),
            Inbox::from_sink(Arc::new(ChannelSink(channel))),
        )
    }

    /// Subscribes `inbox` to the control messages for this node's tasks.
    pub(crate) fn control_topic(
        &self,
        inbox: Inbox<SharedNotification>,
    ) -> BusSubscription<SharedNotification> {
        self.bus
            .subscribe(format!("tasks-ctl/{}", self.node), inbox)
    }
}

/// Forwards a status topic to one watching listen stream.
struct ChannelSink(Channel);

impl InboxSink<SharedNotification> for ChannelSink {
    fn try_deliver(&self, msg: SharedNotification) -> Result<(), InboxError> {
        self.0.send_shared(msg).map_err(|e| match e {
            ChannelError::Overflow => InboxError::Full,
            _ => InboxError::Closed,
        })
    }

    fn deliver(&self, msg: SharedNotification) -> DeliverFuture {
        let sent = self.try_deliver(msg);
        Box::pin(async move { sent })
    }

    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_copy_starts_with_its_revision_then_its_status() {
        let record = TaskRecord {
            id: "t".into(),
            owner: "o".into(),
            status: TaskStatus::Failed,
            status_message: None,
            created_ms: 1,
            updated_ms: 1,
            ttl_ms: 1,
            poll_interval_ms: 1,
            input_requests: Map::new(),
            outcome: None,
            rev: 12,
        };
        let bytes = serde_json::to_string(&Stored::of(&record, "n")).expect("encodes");
        assert!(
            bytes.starts_with(r#"{"rev":12,"status":"failed","#),
            "{bytes}"
        );
    }
}
