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
//! (topic `tasks-ctl/<node>`), and hear the status topic for their watching
//! streams. A node renews a lease (`<prefix>task-node:<node>`) while it
//! lives; a copy that is unfinished while its node's lease is gone reads
//! `failed` ("the node running this task was lost").

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

/// The method of a control message to a task's node.
pub(crate) const CONTROL: &str = "genmcp/tasks/control";

/// A record as stored in Redis. `rev` must stay the first field: the store
/// compares revisions by the value's first bytes.
#[derive(Serialize, Deserialize)]
struct Stored {
    rev: u64,
    node: String,
    id: String,
    owner: String,
    status: TaskStatus,
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
            node: node.to_owned(),
            id: record.id.clone(),
            owner: record.owner.clone(),
            status: record.status,
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

/// What a node asks of the node running a task.
pub(crate) enum Control {
    /// `tasks/cancel`.
    Cancel,
    /// `tasks/update` with these answers.
    Update(Map<String, Value>),
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

    /// Stores a copy of `record` (unless a newer one is there); returns
    /// whether it was stored.
    pub(crate) async fn put(&self, record: &TaskRecord) -> Result<bool, BusError> {
        let bytes = serde_json::to_vec(&Stored::of(record, &self.node))
            .map_err(|e| BusError::Config(format!("unencodable task record: {e}")))?;
        self.keys
            .put_newer(
                &format!("task:{}", record.id),
                record.rev,
                bytes,
                record.expires_ms(),
            )
            .await
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

    /// Renews this node's lease until `until_ms`.
    pub(crate) async fn renew(&self, until_ms: u64) -> Result<(), BusError> {
        self.keys
            .put(&format!("task-node:{}", self.node), b"1", until_ms)
            .await
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

    /// Asks `node` to apply `control` to its task `id` for `owner`.
    pub(crate) async fn send_control(
        &self,
        node: &str,
        id: &str,
        owner: &str,
        control: Control,
    ) -> Result<(), BusError> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::from(id));
        params.insert("owner".into(), Value::from(owner));
        match control {
            Control::Cancel => {
                params.insert("op".into(), Value::from("cancel"));
            }
            Control::Update(answers) => {
                params.insert("op".into(), Value::from("update"));
                params.insert("inputResponses".into(), Value::Object(answers));
            }
        }
        let msg = SharedNotification::new(Notification::new(CONTROL, params));
        self.bus
            .publish_remote_wait(&format!("tasks-ctl/{node}"), &[msg])
            .await
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

/// A control message's parts: task id, owner, what to do.
pub(crate) fn parse_control(msg: &SharedNotification) -> Option<(String, String, Control)> {
    if msg.method() != CONTROL {
        return None;
    }
    let message: Value = serde_json::from_slice(msg.legacy()).ok()?;
    let params = message.get("params")?;
    let id = params.get("taskId")?.as_str()?.to_owned();
    let owner = params.get("owner")?.as_str()?.to_owned();
    let control = match params.get("op")?.as_str()? {
        "cancel" => Control::Cancel,
        "update" => Control::Update(params.get("inputResponses")?.as_object()?.clone()),
        _ => return None,
    };
    Some((id, owner, control))
}
