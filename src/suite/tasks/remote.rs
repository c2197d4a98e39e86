//! The supervisor's side of tasks shared through Redis (see `shared`): the
//! lease, the copy writer, the control topic, and the methods that answer
//! for tasks running on another node.
//!
//! A forwarded `tasks/update` or `tasks/cancel` is answered with success only
//! once the task's node has taken its acknowledgement key (it then applies
//! the change); when it has not within [`FORWARD_WAIT`] the sender takes the
//! key itself and answers a retryable error, and the task's node, reading
//! the message later, finds the key taken and applies nothing.
//!
//! A terminal copy in Redis is final (see `shared`): a node whose copy went
//! terminal elsewhere (its lease lapsed while it was paused, and another
//! node ended its task `failed`) adopts that status and stops the work.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Map, Value};

use super::record::{Outcome, TaskRecord};
use super::shared::{
    ACK_LIFE, Control, ControlMsg, Decided, Put, SharedTasks, parse_control, status_notification,
    unavailable,
};
use super::status::TaskStatus;
use super::supervisor::{Shared, Tasks, not_found, random_id};
use crate::mux::{Channel, SharedNotification};
use crate::protocol::McpError;
use crate::pubsub::{DeliverFuture, Inbox, InboxError, InboxSink};
use crate::suite::sealing::seal;

/// Copies of stored changes waiting for Redis (one writer, in order); past
/// it a copy is written on its own (revisions keep the newest).
const MIRROR_QUEUE: usize = 4_096;
/// How long a `tasks/update` or `tasks/cancel` forwarded to another node
/// waits for that node to take the change (then the sender decides: not
/// applied, a retryable error).
pub(crate) const FORWARD_WAIT: Duration = Duration::from_secs(2);
/// How long, once the task's node took a forwarded change, the sender waits
/// more for the change to show in the shared copy (so that a `tasks/get` on
/// the sender's node right after shows it).
const COPY_WAIT: Duration = Duration::from_secs(2);
/// Control messages from other nodes waiting for this node's worker; past
/// it a message is dropped (its sender answers a retryable error).
const CONTROL_QUEUE: usize = 1_024;

/// The error of a forwarded change that was not confirmed (nothing applied).
fn not_confirmed() -> McpError {
    McpError::internal(
        "Internal error: the task's node did not confirm the change in time; nothing was applied; retry later",
    )
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The tasks a listen may watch: its own known tasks, here and elsewhere.
#[derive(Default)]
pub(crate) struct Watchable {
    local: Vec<String>,
    remote: Vec<TaskRecord>,
}

impl Watchable {
    /// Every accepted id, sorted.
    pub(crate) fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.local.clone();
        ids.extend(self.remote.iter().map(|r| r.id.clone()));
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

impl Tasks {
    /// Shares this supervisor's tasks through `remote` (set once). A result
    /// limit the bus cannot carry is logged here (`genmcp serve` refuses to
    /// start with it); such a result then fails its task.
    pub(crate) fn share(&self, remote: SharedTasks) {
        let max_payload = remote.max_announce().saturating_add(64);
        if let Err(e) = self.shared.config.fits_bus(max_payload) {
            tracing::error!("{e}");
        }
        let _ = self.shared.remote.set(remote);
    }

    fn remote(&self) -> Option<&SharedTasks> {
        self.shared.remote.get()
    }

    /// The shared side, for the other things a node shares (2025 sessions).
    pub(crate) fn remote_handle(&self) -> Option<SharedTasks> {
        self.remote().cloned()
    }

    /// This node's lease, taken and renewed as for the first shared task.
    pub(crate) async fn hold_lease(&self) -> Result<(), McpError> {
        self.start_sharing().await
    }

    /// Once, before the first task: takes this node's lease (a failure is the
    /// caller's error: no task is created), then starts renewing it, the copy
    /// writer and the control topic.
    pub(super) async fn start_sharing(&self) -> Result<(), McpError> {
        let Some(remote) = self.remote().cloned() else {
            return Ok(());
        };
        let shared = &self.shared;
        let lease = shared.config.lease;
        shared
            .started
            .get_or_try_init(|| async {
                remote
                    .renew(seal::expiry(lease))
                    .await
                    .map_err(|e| unavailable(&e))?;
                let (tx, rx) = tokio::sync::mpsc::channel(MIRROR_QUEUE);
                let _ = shared.mirror.set(tx);
                tokio::spawn(write_copies(remote.clone(), Arc::downgrade(shared), rx));
                let (tx, rx) = tokio::sync::mpsc::channel(CONTROL_QUEUE);
                let _ = shared.controls.set(tx);
                tokio::spawn(apply_controls(remote.clone(), Arc::downgrade(shared), rx));
                tokio::spawn(renew_lease(remote.clone(), Arc::downgrade(shared), lease));
                let sink = ControlSink(Arc::downgrade(shared));
                *lock(&shared.control) =
                    Some(remote.control_topic(Inbox::from_sink(Arc::new(sink))));
                Ok(())
            })
            .await
            .map(drop)
    }

    /// A new task's first copy, awaited: the task exists for every node
    /// before its `CreateTaskResult` is sent.
    pub(super) async fn share_created(&self, record: &TaskRecord) -> Result<(), McpError> {
        let Some(remote) = self.remote() else {
            return Ok(());
        };
        remote.put(record).await.map_err(|e| unavailable(&e))?;
        Ok(())
    }

    /// Queues a copy of a stored change for Redis (and the other nodes'
    /// watchers).
    pub(super) fn mirror(&self, record: TaskRecord) {
        let Some(tx) = self.shared.mirror.get() else {
            return;
        };
        if let Err(tokio::sync::mpsc::error::TrySendError::Full(record)) = tx.try_send(record)
            && let Some(remote) = self.remote().cloned()
        {
            tracing::warn!(task = %record.id, "task copy queue full; writing this one on its own");
            let tasks = self.clone();
            tokio::spawn(async move {
                tasks.write_copy(&remote, &record).await;
            });
        }
    }

    /// Writes one copy and acts on the answer: a stored one is announced, a
    /// terminal one found in Redis is adopted.
    async fn write_copy(&self, remote: &SharedTasks, record: &TaskRecord) {
        match remote.put(record).await {
            Ok(Put::Stored) => remote.publish_status(record),
            Ok(Put::Final) => self.adopt_shared(remote, &record.id).await,
            Ok(Put::Older | Put::Touched) => {}
            Err(e) => tracing::warn!(task = %record.id, error = %e, "task copy not stored"),
        }
    }

    /// Reads task `id`'s copy and, when it is terminal, adopts it.
    async fn adopt_shared(&self, remote: &SharedTasks, id: &str) {
        match remote.get(id).await {
            Ok(Some((copy, _))) if copy.status.is_terminal() => self.adopt(&copy),
            Ok(_) => {}
            Err(e) => tracing::warn!(task = %id, error = %e, "final task copy not read"),
        }
    }

    /// Takes the terminal status of the shared `copy` of a task of this
    /// node (the one exception to "a terminal status never changes": the
    /// shared copy is the fleet's answer, so every node agrees) and stops
    /// the task's work.
    fn adopt(&self, copy: &TaskRecord) {
        let now = seal::now_ms();
        let adopted = self.shared.store.modify(&copy.id, now, &mut |r| {
            if r.status == copy.status || !copy.status.is_terminal() {
                return false;
            }
            r.status = copy.status;
            r.status_message.clone_from(&copy.status_message);
            r.outcome.clone_from(&copy.outcome);
            r.input_requests.clear();
            r.updated_ms = copy.updated_ms;
            r.rev = r.rev.max(copy.rev);
            true
        });
        if adopted.is_none() {
            return;
        }
        tracing::warn!(task = %copy.id, status = copy.status.as_str(), "task ended elsewhere (this node's lease lapsed); adopted, its work stopped");
        // Its watchers hear it; no copy is written (Redis has it).
        let store = &self.shared.store;
        self.shared
            .watchers
            .announce(&copy.id, || store.get(&copy.id, seal::now_ms()));
        self.stop(&copy.id, Duration::ZERO);
    }

    /// After this node's lease lapsed: adopts every terminal copy of a task
    /// whose work runs here.
    async fn reconcile(&self, remote: &SharedTasks) {
        let ids = self.live().ids();
        for id in ids {
            self.adopt_shared(remote, &id).await;
        }
    }

    /// Extends the copies of this node's unfinished tasks that would expire
    /// within `margin` (a task never expires while its work runs).
    async fn touch_copies(&self, remote: &SharedTasks, margin: Duration) {
        let now = seal::now_ms();
        let margin = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX);
        let ids = self.live().ids();
        for id in ids {
            let Some(record) = self.shared.store.get(&id, now) else {
                continue;
            };
            let copy_until = record
                .due_ms()
                .max(record.updated_ms.saturating_add(record.ttl_ms));
            if record.status.is_terminal() || copy_until > now.saturating_add(margin) {
                continue;
            }
            match remote.touch(&record).await {
                Ok(Put::Final) => self.adopt_shared(remote, &id).await,
                Ok(_) => {}
                Err(e) => tracing::warn!(task = %id, error = %e, "task copy not extended"),
            }
        }
    }

    /// Copies task `id`'s record to Redis now (and announces it to the
    /// other nodes), awaited.
    pub(super) async fn copy_now(&self, id: &str) {
        let (Some(remote), Some(record)) =
            (self.remote(), self.shared.store.get(id, seal::now_ms()))
        else {
            return;
        };
        self.write_copy(remote, &record).await;
    }

    /// Whether task `id` lives in this process (running or finished).
    fn is_local(&self, id: &str) -> bool {
        self.shared.store.get(id, seal::now_ms()).is_some()
    }

    /// Another node's task `id` for `owner`, with that node; a task whose
    /// node lost its lease while it was unfinished is ended `failed` here.
    async fn remote_record(&self, id: &str, owner: &str) -> Result<(TaskRecord, String), McpError> {
        let Some(remote) = self.remote() else {
            return Err(not_found());
        };
        let found = remote.get(id).await.map_err(|e| unavailable(&e))?;
        let Some((record, node)) = found else {
            return Err(not_found());
        };
        if record.owner != owner || record.expires_ms() <= seal::now_ms() {
            return Err(not_found());
        }
        if !record.status.is_terminal()
            && node != remote.node()
            && !remote.alive(&node).await.map_err(|e| unavailable(&e))?
        {
            return Ok((lost(remote, record, &node).await, node));
        }
        Ok((record, node))
    }

    /// `tasks/get` on any node.
    pub(crate) async fn get_any(
        &self,
        id: &str,
        owner: &str,
    ) -> Result<Map<String, Value>, McpError> {
        if self.remote().is_none() || self.is_local(id) {
            return self.get(id, owner);
        }
        Ok(self.remote_record(id, owner).await?.0.detailed())
    }

    /// `tasks/update` on any node: another node's task gets the answers over
    /// the bus, confirmed by that node (see [`Tasks::forward`]).
    pub(crate) async fn update_any(
        &self,
        id: &str,
        owner: &str,
        responses: &Map<String, Value>,
    ) -> Result<(), McpError> {
        if self.remote().is_none() || self.is_local(id) {
            return self.update(id, owner, responses);
        }
        let (record, node) = self.remote_record(id, owner).await?;
        if record.status != TaskStatus::InputRequired {
            return Ok(());
        }
        let answers: Map<String, Value> = responses
            .iter()
            .filter(|(k, _)| record.input_requests.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if answers.is_empty() {
            return Ok(());
        }
        self.forward(&node, &record, owner, Control::Update(answers))
            .await
    }

    /// `tasks/cancel` on any node: another node's task is cancelled over the
    /// bus, confirmed by that node (see [`Tasks::forward`]).
    pub(crate) async fn cancel_any(&self, id: &str, owner: &str) -> Result<(), McpError> {
        if self.remote().is_none() || self.is_local(id) {
            return self.cancel(id, owner);
        }
        let (record, node) = self.remote_record(id, owner).await?;
        if record.status.is_terminal() {
            return Ok(());
        }
        self.forward(&node, &record, owner, Control::Cancel).await
    }

    /// Sends `control` for `record` to its `node` and answers once it is
    /// decided: `Ok` when that node took the acknowledgement key (it applies
    /// the change; this then waits, at most [`COPY_WAIT`], for the copy to
    /// show it), a retryable error when it did not within [`FORWARD_WAIT`]
    /// (this node takes the key: the change is never applied) or Redis
    /// could not be asked.
    async fn forward(
        &self,
        node: &str,
        record: &TaskRecord,
        owner: &str,
        control: Control,
    ) -> Result<(), McpError> {
        let Some(remote) = self.remote() else {
            return Err(not_found());
        };
        let ack = random_id();
        remote.open_ack(&ack).await.map_err(|e| unavailable(&e))?;
        let sent = remote
            .send_control(node, &record.id, owner, control, &ack)
            .await;
        let mut decided = None;
        if let Err(e) = &sent {
            // Maybe sent all the same: decided at once, as after a timeout.
            tracing::warn!(task = %record.id, error = %e, "control message not sent");
        } else {
            let until = tokio::time::Instant::now() + FORWARD_WAIT;
            while decided.is_none() && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
                decided = remote.ack_state(&ack).await.ok().flatten();
            }
        }
        let decided = match decided {
            Some(d) => d,
            None => match remote.decide(&ack, false).await {
                Ok(d) => d,
                Err(e) => {
                    // Unknown whether the owner took it: an error (a retry is
                    // harmless: cancel and update are idempotent).
                    tracing::warn!(task = %record.id, error = %e, "forwarded task change undecided");
                    return Err(McpError::internal(
                        "Internal error: the shared task store is unavailable; the change may not have been applied; retry later",
                    ));
                }
            },
        };
        if decided != Decided::Owner {
            tracing::info!(task = %record.id, node = %node, "forwarded task change not confirmed; not applied");
            return Err(match sent {
                Err(e) => unavailable(&e),
                Ok(()) => not_confirmed(),
            });
        }
        let until = tokio::time::Instant::now() + COPY_WAIT;
        while tokio::time::Instant::now() < until {
            match remote.get(&record.id).await {
                Ok(Some((now, _))) if now.rev > record.rev => break,
                Ok(None) => break,
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// The ids of `ids` a listen by `owner` may watch, here or on another
    /// node (with their current state). Redis unreachable: other nodes'
    /// tasks are left out (closed).
    pub(crate) async fn watchable_any(&self, ids: &[String], owner: &str) -> Watchable {
        let local = self.watchable(ids, owner);
        let mut remote = Vec::new();
        if self.remote().is_some() {
            for id in ids {
                if local.binary_search(id).is_ok() || self.is_local(id) {
                    continue;
                }
                if let Ok((record, _)) = self.remote_record(id, owner).await {
                    remote.push(record);
                }
            }
        }
        Watchable { local, remote }
    }

    /// Makes the acknowledged listen `channel` hear the tasks of `watchable`:
    /// this node's through its watchers, other nodes' through their status
    /// topics (each one's state at the listen first).
    pub(crate) fn watch_all(&self, watchable: &Watchable, channel: &Channel) {
        self.watch(&watchable.local, channel);
        let Some(remote) = self.remote() else {
            return;
        };
        let mut subs = lock(&self.shared.remote_watch);
        subs.retain(|(watching, _)| !watching.is_closed());
        for record in &watchable.remote {
            let _ = channel.send_shared(status_notification(record));
            if !record.status.is_terminal() {
                subs.push((
                    channel.clone(),
                    remote.watch_status(&record.id, channel.clone()),
                ));
            }
        }
    }
}

/// Ends another node's (`node`) unfinished task `failed`: its node lost its
/// lease. When the copy is already terminal, that is the answer.
async fn lost(remote: &SharedTasks, mut record: TaskRecord, node: &str) -> TaskRecord {
    let error = McpError::internal("Internal error: the node running this task was lost");
    record.status = TaskStatus::Failed;
    record.outcome = Some(Outcome::Error(error.to_error_object()));
    record.input_requests.clear();
    record.updated_ms = seal::now_ms();
    record.rev += 1;
    match remote.put_as(&record, node).await {
        Ok(Put::Stored) => remote.publish_status(&record),
        Ok(_) => {
            // Another answer is there already (a terminal one is final): that
            // is the task's status, on every node.
            if let Ok(Some((copy, _))) = remote.get(&record.id).await {
                return copy;
            }
        }
        Err(e) => tracing::warn!(task = %record.id, error = %e, "lost task not recorded"),
    }
    tracing::warn!(task = %record.id, "task ended failed: its node was lost");
    record
}

/// Writes the copies in order, publishes each stored one's status, and
/// adopts a terminal copy found in Redis.
async fn write_copies(
    remote: SharedTasks,
    shared: Weak<Shared>,
    mut rx: tokio::sync::mpsc::Receiver<TaskRecord>,
) {
    while let Some(record) = rx.recv().await {
        match remote.put(&record).await {
            Ok(Put::Stored) => remote.publish_status(&record),
            Ok(Put::Final) => {
                if let Some(shared) = shared.upgrade() {
                    Tasks { shared }.adopt_shared(&remote, &record.id).await;
                }
            }
            Ok(Put::Older | Put::Touched) => {}
            Err(e) => tracing::warn!(task = %record.id, error = %e, "task copy not stored"),
        }
    }
}

/// Renews this node's lease every third of it (a failed renewal is retried
/// after a tenth), on its own permit, for as long as the supervisor lives.
/// A renewal that finds the lease lapsed (the process was paused, or Redis
/// unreachable, past the lease) adopts the terminal copies other nodes
/// wrote meanwhile. Each round also extends the copies of long-running
/// tasks.
async fn renew_lease(remote: SharedTasks, shared: Weak<Shared>, lease: Duration) {
    let mut wait = lease / 3;
    loop {
        tokio::time::sleep(wait).await;
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let tasks = Tasks { shared: strong };
        match remote.renew(seal::expiry(lease)).await {
            Ok(held) => {
                wait = lease / 3;
                if !held {
                    tracing::warn!(
                        "task lease had lapsed; adopting how other nodes ended this node's tasks"
                    );
                    tasks.reconcile(&remote).await;
                }
            }
            Err(e) => {
                wait = lease / 10;
                tracing::warn!(error = %e, "task lease not renewed");
                continue;
            }
        }
        tasks.touch_copies(&remote, lease).await;
    }
}

/// Hands the control messages other nodes send for this node's tasks to the
/// one worker that decides and applies them (a full queue drops one: its
/// sender answers a retryable error).
struct ControlSink(Weak<Shared>);

impl InboxSink<SharedNotification> for ControlSink {
    fn try_deliver(&self, msg: SharedNotification) -> Result<(), InboxError> {
        let Some(shared) = self.0.upgrade() else {
            return Err(InboxError::Closed);
        };
        if let Some(tx) = shared.controls.get()
            && tx.try_send(msg).is_err()
        {
            tracing::warn!("task control queue full; a forwarded change was dropped");
        }
        Ok(())
    }

    fn deliver(&self, msg: SharedNotification) -> DeliverFuture {
        let done = self.try_deliver(msg);
        Box::pin(async move { done })
    }

    fn is_closed(&self) -> bool {
        self.0.strong_count() == 0
    }
}

/// Applies the control messages, one at a time: each is checked (shape,
/// sizes, a task of this node's, its owner), then its acknowledgement key is
/// taken, and only when this node took it is the change applied.
async fn apply_controls(
    remote: SharedTasks,
    shared: Weak<Shared>,
    mut rx: tokio::sync::mpsc::Receiver<SharedNotification>,
) {
    while let Some(msg) = rx.recv().await {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let tasks = Tasks { shared: strong };
        let Some(control) = parse_control(&msg) else {
            tracing::debug!("malformed task control message ignored");
            continue;
        };
        tasks.apply_control(&remote, control).await;
    }
}

impl Tasks {
    /// Whether this node took `ack` (its claim was not answered): reads the
    /// key until Redis answers, at most as long as the key lives.
    async fn learn_ack(&self, remote: &SharedTasks, ack: &str) -> bool {
        let until = tokio::time::Instant::now() + ACK_LIFE;
        while tokio::time::Instant::now() < until {
            match remote.ack_state(ack).await {
                Ok(Some(decided)) => return decided == Decided::Owner,
                // Still open: nobody took it; take it now.
                Ok(None) => return matches!(remote.decide(ack, true).await, Ok(Decided::Owner)),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        false
    }

    async fn apply_control(&self, remote: &SharedTasks, msg: ControlMsg) {
        let ControlMsg {
            id,
            owner,
            control,
            ack,
        } = msg;
        // The sender checked the owner against the copy; checked again here,
        // before anything is decided.
        let Some(record) = self.shared.store.get(&id, seal::now_ms()) else {
            tracing::debug!(task = %id, "control message for an unknown task ignored");
            return;
        };
        if record.owner != owner {
            tracing::debug!(task = %id, "control message for another principal's task ignored");
            return;
        }
        match remote.decide(&ack, true).await {
            Ok(Decided::Owner) => {}
            Ok(_) => {
                tracing::info!(task = %id, "forwarded task change arrived after its sender gave up; not applied");
                return;
            }
            Err(e) => {
                // Unknown whether it was taken; the sender reads the same key
                // (when it reads "owner" it answers success): read it again
                // until Redis answers, for as long as the key can live.
                tracing::warn!(task = %id, error = %e, "forwarded task change not decided");
                if !self.learn_ack(remote, &ack).await {
                    return;
                }
            }
        }
        let applied = match control {
            Control::Cancel => self.cancel(&id, &owner),
            Control::Update(answers) => self.update(&id, &owner, &answers),
        };
        if let Err(e) = applied {
            tracing::debug!(task = %id, error = %e, "control message for a task not applied");
        }
        // The sender waits for the copy to show the change.
        self.copy_now(&id).await;
    }
}
