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
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::record::{Outcome, TaskRecord};
use super::status::TaskStatus;
pub(crate) use super::watch::status_notification;
use crate::mux::{Channel, ChannelError, SharedNotification};
use crate::protocol::McpError;
use crate::protocol::error::ErrorObject;
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
    store_unavailable()
}

/// The answer while the shared task store cannot be reached or has not yet
/// taken a change: retryable, with no detail of the cause.
pub(crate) fn store_unavailable() -> McpError {
    McpError::internal("Internal error: the shared task store is unavailable; retry later")
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

    /// Renews this node's lease for `lease` from when Redis runs the command
    /// (relative, so no clock of this node's sets its end: the lease never
    /// ends in Redis before `lease` after the renewal was sent), on its own
    /// permit (client traffic cannot crowd it out); `Ok(false)` when the
    /// lease had lapsed (other nodes may have ended this node's tasks
    /// `failed` meanwhile).
    pub(crate) async fn renew(&self, lease: Duration) -> Result<bool, BusError> {
        let ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut set = ::redis::cmd("SET");
        set.arg(self.keys.key(&format!("task-node:{}", self.node)))
            .arg(1)
            .arg("PX")
            .arg(ms)
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

    /// Subscribes `inbox` to the control messages for this node's tasks,
    /// durably: the subscription outlives every lost Redis session.
    pub(crate) fn control_topic(
        &self,
        inbox: Inbox<SharedNotification>,
    ) -> BusSubscription<SharedNotification> {
        self.bus
            .subscribe_durable(format!("tasks-ctl/{}", self.node), inbox)
    }
}

/// Watches task `id` for `sink`: subscribes its status topic on `bus` first
/// (durably), and returns that subscription with the future that then, once
/// the subscription has reached Redis (at most `wait`), reads the record
/// (`read`) and offers it to `sink`. In that order nothing is missed: a
/// change made before the subscription took effect is in the record, one
/// made after comes on the topic (a re-read answering with an older state is
/// not sent).
pub(crate) fn watch_then_read<F>(
    bus: &Bus<SharedNotification>,
    id: &str,
    sink: Arc<WatchSink>,
    wait: std::time::Duration,
    read: F,
) -> (
    BusSubscription<SharedNotification>,
    impl std::future::Future<Output = ()> + Send + 'static,
)
where
    F: std::future::Future<Output = Option<TaskRecord>> + Send + 'static,
{
    let topic = bus.subscribe_durable(format!("tasks/{id}"), Inbox::from_sink(sink.clone()));
    let subscribed = bus.subscribed();
    let then = async move {
        // Not subscribed within `wait` (Redis lost): read anyway; the
        // reconnection subscribes the topic and its new epoch reads again.
        let _ = tokio::time::timeout(wait, subscribed).await;
        if let Some(record) = read.await {
            sink.offer_record(&record);
        }
    };
    (topic, then)
}

/// Forwards another node's task status to one watching listen stream, from
/// its status topic and from re-reads of its record, each state at most once
/// and never an older one after a newer: the two ways race (a re-read may
/// answer with the state before the one the topic just brought), so a state
/// is sent only when it was updated later than the last one sent (or at the
/// same millisecond with another status), and nothing after a terminal one.
pub(crate) struct WatchSink {
    channel: Channel,
    last: std::sync::Mutex<Option<Seen>>,
}

/// The state last sent to a watching stream.
#[derive(Clone, PartialEq, Eq)]
struct Seen {
    /// `lastUpdatedAt` (ISO 8601 of fixed width: ordered as text).
    updated: String,
    status: String,
    terminal: bool,
}

/// The parts of a `notifications/tasks` a watch compares.
#[derive(Deserialize)]
struct StatusHead {
    params: StatusParams,
}

#[derive(Deserialize)]
struct StatusParams {
    status: TaskStatus,
    #[serde(rename = "lastUpdatedAt")]
    updated: String,
}

impl WatchSink {
    /// A watch for `channel` that has sent nothing yet.
    pub(crate) fn new(channel: Channel) -> Self {
        WatchSink {
            channel,
            last: std::sync::Mutex::new(None),
        }
    }

    /// Sends `record`'s state, unless the stream already has it or a later one.
    pub(crate) fn offer_record(&self, record: &TaskRecord) {
        let seen = Seen {
            updated: super::record::iso8601(record.updated_ms),
            status: record.status.as_str().to_owned(),
            terminal: record.status.is_terminal(),
        };
        let _ = self.offer(Some(seen), status_notification(record));
    }

    /// Whether the watch has nothing more to do: its stream has ended, or
    /// it was sent a terminal state.
    pub(crate) fn is_done(&self) -> bool {
        self.channel.is_closed() || lock(&self.last).as_ref().is_some_and(|seen| seen.terminal)
    }

    fn offer(&self, seen: Option<Seen>, msg: SharedNotification) -> Result<(), ChannelError> {
        // Under the lock, so the check and the send are one step; sending
        // never waits.
        let mut last = lock(&self.last);
        if let (Some(new), Some(old)) = (&seen, last.as_ref())
            && (old.terminal
                || new.updated < old.updated
                || (new.updated == old.updated && new.status == old.status))
        {
            return Ok(());
        }
        let sent = self.channel.send_shared(msg);
        if seen.is_some() {
            *last = seen;
        }
        sent
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl InboxSink<SharedNotification> for WatchSink {
    fn try_deliver(&self, msg: SharedNotification) -> Result<(), InboxError> {
        // A status this node cannot read is passed on as it is.
        let seen = serde_json::from_slice::<StatusHead>(msg.legacy())
            .ok()
            .map(|head| Seen {
                terminal: head.params.status.is_terminal(),
                status: head.params.status.as_str().to_owned(),
                updated: head.params.updated,
            });
        self.offer(seen, msg).map_err(|e| match e {
            ChannelError::Overflow => InboxError::Full,
            _ => InboxError::Closed,
        })
    }

    fn deliver(&self, msg: SharedNotification) -> DeliverFuture {
        let sent = self.try_deliver(msg);
        Box::pin(async move { sent })
    }

    fn is_closed(&self) -> bool {
        self.channel.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::{Assigns, OutboxReceiver, outbox};
    use crate::protocol::{RequestId, RequestMeta, SubscriptionFilter};
    use crate::pubsub::redis_child::{RedisChild, block_on};

    /// An acknowledged listen stream honouring task `id`.
    fn watching(id: &str) -> (Channel, OutboxReceiver) {
        let (tx, rx) = outbox(16);
        let channel = Channel::for_listen(
            RequestId::Number(1),
            RequestMeta::current(),
            Assigns::new(),
            tx,
            16,
        );
        let honoured = SubscriptionFilter {
            task_ids: vec![id.to_owned()],
            ..Default::default()
        };
        channel.acknowledge(honoured).expect("acknowledged");
        (channel, rx)
    }

    /// The statuses the stream was sent, in order (the acknowledgement
    /// skipped).
    fn statuses(rx: &mut OutboxReceiver) -> Vec<String> {
        let mut got = Vec::new();
        while let Ok(frame) = rx.try_recv() {
            let v: Value = serde_json::from_slice(&frame.to_bytes()).expect("JSON");
            if let Some(s) = v["params"]["status"].as_str() {
                got.push(s.to_owned());
            }
        }
        got
    }

    fn record(status: TaskStatus, updated_ms: u64) -> TaskRecord {
        TaskRecord {
            id: "t1".into(),
            owner: "local".into(),
            status,
            status_message: None,
            created_ms: 1_000,
            updated_ms,
            ttl_ms: 60_000,
            poll_interval_ms: 1_000,
            input_requests: Map::new(),
            outcome: None,
            rev: updated_ms,
        }
    }

    const WAIT: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn a_task_that_ends_between_the_read_and_the_subscription_is_seen_ended() {
        let bus: Bus<SharedNotification> = Bus::new();
        let (channel, mut rx) = watching("t1");
        let sink = Arc::new(WatchSink::new(channel));
        // The listen read the task working...
        sink.offer_record(&record(TaskStatus::Working, 2_000));
        // ...then it ended, announced before the watch subscribed: heard by
        // nobody.
        let ended = record(TaskStatus::Cancelled, 3_000);
        assert_eq!(bus.publish("tasks/t1", status_notification(&ended)), 0);
        let read = async move { Some(ended) };
        let (_topic, then) = watch_then_read(&bus, "t1", sink.clone(), WAIT, read);
        then.await;
        assert_eq!(statuses(&mut rx), ["working", "cancelled"]);
        assert!(sink.is_done(), "a terminal state ends the watch");
    }

    #[tokio::test]
    async fn a_change_made_while_the_record_is_read_comes_on_the_topic_and_a_stale_read_is_not_sent()
     {
        let bus: Bus<SharedNotification> = Bus::new();
        let (channel, mut rx) = watching("t1");
        let sink = Arc::new(WatchSink::new(channel));
        sink.offer_record(&record(TaskStatus::Working, 2_000));
        // The task ends while the record is being read; the read answers
        // with the state before.
        let publisher = bus.clone();
        let read = async move {
            let ended = record(TaskStatus::Completed, 3_000);
            publisher.publish("tasks/t1", status_notification(&ended));
            Some(record(TaskStatus::Working, 2_000))
        };
        let (_topic, then) = watch_then_read(&bus, "t1", sink.clone(), WAIT, read);
        then.await;
        assert_eq!(statuses(&mut rx), ["working", "completed"]);
        // Nothing after a terminal state, nothing older than the last.
        sink.offer_record(&record(TaskStatus::Working, 4_000));
        assert!(statuses(&mut rx).is_empty());
    }

    #[test]
    fn a_watch_sends_each_state_once_and_never_an_older_one() {
        let (channel, mut rx) = watching("t1");
        let sink = WatchSink::new(channel);
        sink.offer_record(&record(TaskStatus::Working, 2_000));
        sink.offer_record(&record(TaskStatus::Working, 2_000));
        sink.offer_record(&record(TaskStatus::InputRequired, 2_000));
        sink.offer_record(&record(TaskStatus::Working, 1_500));
        sink.offer_record(&record(TaskStatus::Working, 2_500));
        assert_eq!(
            statuses(&mut rx),
            ["working", "input_required", "working"],
            "the same state once; another status in the same millisecond; not an older one"
        );
        // From the topic: the same rules.
        let stale = status_notification(&record(TaskStatus::InputRequired, 2_100));
        assert!(sink.try_deliver(stale).is_ok());
        assert!(statuses(&mut rx).is_empty());
        let end = status_notification(&record(TaskStatus::Failed, 2_600));
        assert!(sink.try_deliver(end).is_ok());
        assert_eq!(statuses(&mut rx), ["failed"]);
        assert!(sink.is_done());
    }

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

    #[test]
    fn the_lease_is_renewed_while_client_traffic_holds_every_redis_permit() {
        let redis = RedisChild::start();
        block_on(async {
            let mut config =
                crate::pubsub::RedisBusConfig::new(format!("redis://127.0.0.1:{}", redis.1));
            config.max_claims = 4;
            let bus: Bus<SharedNotification> = Bus::redis(config).await.expect("connected");
            let keys = bus.once().expect("a Redis bus");
            let shared = SharedTasks::new(keys.clone(), bus.clone());
            let lease = Duration::from_secs(30);
            let until = crate::suite::sealing::seal::expiry(lease);
            assert_eq!(
                shared.renew(lease).await,
                Ok(false),
                "taken: not held before"
            );
            // Client traffic (spent request states, task records) waits on
            // Redis with every permit: its own next command is refused...
            let _held = keys.hold_every_permit();
            assert!(matches!(
                keys.claim("some-state", until).await,
                Err(BusError::Busy { .. })
            ));
            // ...and the lease is renewed all the same.
            assert_eq!(shared.renew(lease).await, Ok(true), "renewed, still held");
        });
    }

    #[test]
    fn a_lost_copy_decided_before_the_node_wrote_again_is_fenced_off() {
        let redis = RedisChild::start();
        block_on(async {
            let config =
                crate::pubsub::RedisBusConfig::new(format!("redis://127.0.0.1:{}", redis.1));
            let bus: Bus<SharedNotification> = Bus::redis(config).await.expect("connected");
            let shared = SharedTasks::new(bus.once().expect("a Redis bus"), bus.clone());
            let now = crate::suite::sealing::seal::now_ms();
            let mut working = record(TaskStatus::Working, now);
            working.rev = 5;
            assert_eq!(shared.put(&working).await, Ok(Put::Stored));
            // Another node read revision 5 while the lease was gone and
            // decided the task lost (revision 6)...
            let mut lost = working.clone();
            lost.status = TaskStatus::Failed;
            lost.rev = 6;
            // ...but the node, back, settled first: its copy at a new revision.
            let mut again = working.clone();
            again.rev = 6;
            assert_eq!(shared.put(&again).await, Ok(Put::Stored));
            let late = shared.put_as(&lost, "elsewhere").await;
            assert_ne!(late, Ok(Put::Stored), "the late lost copy was taken");
            let copy = shared.get("t1").await.expect("read").expect("a copy");
            assert_eq!(copy.0.status, TaskStatus::Working);
            // The other order: the lost copy first, and the node adopts it.
            lost.rev = 7;
            assert_eq!(shared.put_as(&lost, "elsewhere").await, Ok(Put::Stored));
            again.rev = 7;
            assert_eq!(shared.put(&again).await, Ok(Put::Final));
        });
    }
}
