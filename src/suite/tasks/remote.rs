//! The supervisor's side of tasks shared through Redis (see `shared`): the
//! copy writer, the control topic, and the methods that answer for tasks
//! running on another node (a forwarded change is confirmed: see `control`;
//! the lease and adopting terminal copies: see `lease`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Map, Value};

use super::control::{CONTROL_QUEUE, Control, ControlSink, apply_controls};
use super::lease::renew_lease;
use super::record::{Outcome, TaskRecord};
use super::shared::{Put, SharedTasks, WatchSink, store_unavailable, unavailable, watch_then_read};
use super::status::TaskStatus;
use super::supervisor::{Shared, Tasks, not_found};
use super::watch::status_notification;
use crate::mux::{Channel, SharedNotification};
use crate::protocol::McpError;
use crate::pubsub::{BusEpochs, BusSubscription, Inbox};
use crate::suite::sealing::seal;

/// Copies of stored changes waiting for Redis (one writer, in order); past
/// it a copy is written on its own (revisions keep the newest).
const MIRROR_QUEUE: usize = 4_096;
/// How often the copy writer writes again the copies Redis did not take.
const UNWRITTEN_RETRY: Duration = Duration::from_millis(500);
/// How long a new watch of another node's task waits for its status topic
/// to reach Redis before it reads the task's record anyway (a bus that is
/// disconnected subscribes the topic when it reconnects, and that new epoch
/// has every watched record read again).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(10);

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a supervisor keeps to share its tasks through Redis (its field
/// `fleet`); empty until [`Tasks::share`].
#[derive(Default)]
pub(crate) struct Fleet {
    /// Tasks shared through Redis, when set.
    pub(super) remote: std::sync::OnceLock<SharedTasks>,
    /// With `remote`: the copies of stored changes on their way to Redis.
    pub(super) mirror: std::sync::OnceLock<tokio::sync::mpsc::Sender<TaskRecord>>,
    /// With `remote`: the ids of this node's tasks whose latest copy could
    /// not be written to Redis; the copy writer writes them again.
    pub(super) unwritten: std::sync::Mutex<std::collections::HashSet<String>>,
    /// With `remote`: the ids of this node's tasks with a copy on its way
    /// to Redis, and the newest revision sent (bounded like `unwritten`, by
    /// the store's bound); until Redis took it, the task's node does not
    /// show that change (see `shown_to_all`).
    pub(super) pending: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// With `remote`: what this node knows of its lease.
    pub(super) lease: super::lease::LeaseClock,
    /// With `remote`: this node's lease, copy writer and control topic run.
    pub(super) started: tokio::sync::OnceCell<()>,
    /// With `remote`: the control topic of this node's tasks.
    pub(super) control: std::sync::Mutex<Option<BusSubscription<SharedNotification>>>,
    /// With `remote`: local streams watching other nodes' tasks.
    pub(super) remote_watch: std::sync::Mutex<RemoteWatches>,
    /// With `remote`: control messages from other nodes, on their way to
    /// the one worker that decides and applies them (bounded: see `remote`).
    pub(super) controls: std::sync::OnceLock<tokio::sync::mpsc::Sender<SharedNotification>>,
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
        let _ = self.shared.fleet.remote.set(remote);
    }

    pub(super) fn remote(&self) -> Option<&SharedTasks> {
        self.shared.fleet.remote.get()
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
            .fleet
            .started
            .get_or_try_init(|| async {
                let sent = std::time::Instant::now();
                remote.renew(lease).await.map_err(|e| unavailable(&e))?;
                // The first take is no lapse: nothing of this node ran before.
                shared.fleet.lease.renewed(sent, lease, true);
                let (tx, rx) = tokio::sync::mpsc::channel(MIRROR_QUEUE);
                let _ = shared.fleet.mirror.set(tx);
                tokio::spawn(write_copies(remote.clone(), Arc::downgrade(shared), rx));
                let (tx, rx) = tokio::sync::mpsc::channel(CONTROL_QUEUE);
                let _ = shared.fleet.controls.set(tx);
                tokio::spawn(apply_controls(remote.clone(), Arc::downgrade(shared), rx));
                tokio::spawn(renew_lease(remote.clone(), Arc::downgrade(shared), lease));
                let sink = ControlSink(Arc::downgrade(shared));
                *lock(&shared.fleet.control) =
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

    /// With tasks shared: queues a copy of task `id`'s change just sent to
    /// this node's watchers (`watched`: the record they were sent, if any).
    pub(super) fn mirror_announced(&self, id: &str, watched: Option<TaskRecord>) {
        if self.shared.fleet.mirror.get().is_none() {
            return;
        }
        if let Some(record) = watched.or_else(|| self.shared.store.get(id, seal::now_ms())) {
            self.mirror(record);
        }
    }

    /// `json` as task `id`'s result, unless (tasks shared through Redis) its
    /// status notification would not fit in one bus message: then the task
    /// fails with a clear error rather than be stored and never announced.
    pub(super) fn announceable(&self, id: &str, json: Arc<str>) -> Result<Arc<str>, McpError> {
        let Some(remote) = self.shared.fleet.remote.get() else {
            return Ok(json);
        };
        let Some(mut record) = self.shared.store.get(id, seal::now_ms()) else {
            return Ok(json);
        };
        record.status = TaskStatus::Completed;
        record.input_requests.clear();
        record.outcome = Some(Outcome::Result(json.clone()));
        let size = status_notification(&record).legacy().len();
        if size > remote.max_announce() {
            tracing::warn!(task = %id, bytes = size, max = remote.max_announce(), "task result too large for the bus");
            return Err(McpError::internal(
                "Internal error: the task's result is larger than the bus carries to the other nodes",
            ));
        }
        Ok(json)
    }

    /// Queues a copy of a stored change for Redis (and the other nodes'
    /// watchers).
    fn mirror(&self, record: TaskRecord) {
        let Some(tx) = self.shared.fleet.mirror.get() else {
            return;
        };
        {
            let mut pending = lock(&self.shared.fleet.pending);
            if pending.len() < self.shared.config.max_retained_tasks
                || pending.contains_key(&record.id)
            {
                let rev = pending.entry(record.id.clone()).or_insert(record.rev);
                *rev = (*rev).max(record.rev);
            }
        }
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
        let put = remote.put(record).await;
        if put.is_ok() {
            lock(&self.shared.fleet.unwritten).remove(&record.id);
            let mut pending = lock(&self.shared.fleet.pending);
            if pending
                .get(&record.id)
                .is_some_and(|rev| *rev <= record.rev)
            {
                pending.remove(&record.id);
            }
        }
        match put {
            Ok(Put::Stored) => remote.publish_status(record),
            Ok(Put::Final) => {
                // Until the terminal copy is adopted, this node's answer is
                // not the fleet's: written (and read) again until it is.
                if let Err(e) = self.adopt_shared(remote, &record.id).await {
                    self.unwritten(record, &e);
                }
            }
            Ok(Put::Older | Put::Touched) => {}
            Err(e) => self.unwritten(record, &e),
        }
    }

    /// Fails closed while task `id`'s latest copy is not in Redis (written
    /// again once first): this node does not show a state the other nodes
    /// cannot read, so no client sees a task end here and then read it
    /// `working` on another node.
    async fn shown_to_all(&self, id: &str) -> Result<(), McpError> {
        if !self.unconfirmed(id) {
            return Ok(());
        }
        self.copy_now(id).await;
        if self.unconfirmed(id) {
            return Err(store_unavailable());
        }
        Ok(())
    }

    /// Whether task `id`'s latest change is not confirmed in Redis: its copy
    /// failed, or is still on its way.
    fn unconfirmed(&self, id: &str) -> bool {
        lock(&self.shared.fleet.unwritten).contains(id)
            || lock(&self.shared.fleet.pending).contains_key(id)
    }

    /// Remembers that task `record`'s latest copy is not in Redis: the copy
    /// writer writes the task's record again until Redis takes it.
    pub(super) fn unwritten(&self, record: &TaskRecord, error: &crate::pubsub::BusError) {
        tracing::warn!(task = %record.id, error = %error, "task copy not stored; written again once Redis answers");
        let mut unwritten = lock(&self.shared.fleet.unwritten);
        // This node's own tasks only, so at most its store's bound.
        if unwritten.len() < self.shared.config.max_retained_tasks {
            unwritten.insert(record.id.clone());
        }
    }

    /// Writes again the copies that Redis did not take, each task's record
    /// as it is now (a newer copy replaces the one that failed); those that
    /// fail again wait for the next turn.
    async fn write_unwritten(&self, remote: &SharedTasks) {
        let ids: Vec<String> = lock(&self.shared.fleet.unwritten).drain().collect();
        let mut ids = ids.into_iter();
        while let Some(id) = ids.next() {
            let Some(record) = self.shared.store.get(&id, seal::now_ms()) else {
                lock(&self.shared.fleet.pending).remove(&id);
                continue;
            };
            self.write_copy(remote, &record).await;
            if lock(&self.shared.fleet.unwritten).contains(&id) {
                // Redis still refuses: the rest wait for the next turn.
                lock(&self.shared.fleet.unwritten).extend(ids);
                return;
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
            return Ok((lost(remote, record, &node).await?, node));
        }
        Ok((record, node))
    }

    /// `tasks/get` on any node.
    pub(crate) async fn get_any(
        &self,
        id: &str,
        owner: &str,
    ) -> Result<Map<String, Value>, McpError> {
        if self.remote().is_none() {
            return self.get(id, owner);
        }
        if self.is_local(id) {
            self.check_own(id).await?;
            self.shown_to_all(id).await?;
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
        if self.remote().is_none() {
            return self.update(id, owner, responses);
        }
        if self.is_local(id) {
            self.check_own(id).await?;
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
        if self.remote().is_none() {
            return self.cancel(id, owner);
        }
        if self.is_local(id) {
            self.check_own(id).await?;
            return self.cancel(id, owner);
        }
        let (record, node) = self.remote_record(id, owner).await?;
        if record.status.is_terminal() {
            return Ok(());
        }
        self.forward(&node, &record, owner, Control::Cancel).await
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
    /// topics (each one's state at the listen first). An other node's task
    /// is watched by a durable subscription to its status topic, made
    /// before its record is read again (a change made between the listen's
    /// read and the subscription is not missed), and its record is read
    /// again on each new bus epoch (a change published while the bus was
    /// disconnected is not missed either); the watch goes with its stream,
    /// or once it has sent a terminal status.
    pub(crate) fn watch_all(&self, watchable: &Watchable, channel: &Channel) {
        self.watch(&watchable.local, channel);
        let Some(remote) = self.remote() else {
            return;
        };
        let mut added = Vec::new();
        let mut reads = Vec::new();
        for record in &watchable.remote {
            let sink = Arc::new(WatchSink::new(channel.clone()));
            sink.offer_record(record);
            if record.status.is_terminal() {
                continue;
            }
            let (id, owner) = (record.id.clone(), record.owner.clone());
            let tasks = self.clone();
            let read = async move { tasks.reread(&id, &owner).await };
            let (topic, then) =
                watch_then_read(remote.bus(), &record.id, sink.clone(), SUBSCRIBE_WAIT, read);
            reads.push(then);
            added.push(RemoteWatch {
                id: record.id.clone(),
                owner: record.owner.clone(),
                sink,
                _topic: topic,
            });
        }
        if added.is_empty() {
            return;
        }
        let start_refreshing = {
            let mut watches = lock(&self.shared.fleet.remote_watch);
            watches.list.retain(|w| !w.sink.is_done());
            watches.list.extend(added);
            !std::mem::replace(&mut watches.refreshing, true)
        };
        if start_refreshing {
            let epochs = remote.bus().epochs();
            tokio::spawn(refresh_on_epochs(Arc::downgrade(&self.shared), epochs));
        }
        tokio::spawn(futures_util::future::join_all(reads));
    }

    /// Another node's task `id` read again for a watch (`None`: unreadable
    /// now; the next epoch reads it again).
    async fn reread(&self, id: &str, owner: &str) -> Option<TaskRecord> {
        match self.remote_record(id, owner).await {
            Ok((record, _)) => Some(record),
            Err(e) => {
                tracing::debug!(task = %id, error = ?e, "watched task not read again");
                None
            }
        }
    }
}

/// Local listen streams watching other nodes' tasks.
#[derive(Default)]
pub(crate) struct RemoteWatches {
    list: Vec<RemoteWatch>,
    /// Whether the task that reads them again on each new bus epoch runs.
    refreshing: bool,
}

/// One stream watching one task of another node.
struct RemoteWatch {
    id: String,
    owner: String,
    sink: Arc<WatchSink>,
    /// Its status topic, durable while the watch lives.
    _topic: BusSubscription<SharedNotification>,
}

/// On each new bus epoch (a Redis session that subscribed the status topics
/// again), and every third of the task lease, reads every live watch's
/// record again and sends its state if it changed: what was published while
/// the bus was disconnected is lost, and a task whose node died publishes
/// nothing more (the read ends it `failed` once its node's lease lapsed, as
/// `tasks/get` would). Ends with the supervisor or the bus.
async fn refresh_on_epochs(shared: Weak<Shared>, mut epochs: BusEpochs) {
    let every = match shared.upgrade() {
        Some(s) => (s.config.lease / 3).max(std::time::Duration::from_millis(100)),
        None => return,
    };
    let mut recheck = tokio::time::interval(every);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    recheck.tick().await;
    loop {
        tokio::select! {
            epoch = epochs.changed() => if epoch.is_none() {
                return;
            },
            _ = recheck.tick() => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let tasks = Tasks { shared };
        let due: Vec<(String, String, Arc<WatchSink>)> = {
            let mut watches = lock(&tasks.shared.fleet.remote_watch);
            watches.list.retain(|w| !w.sink.is_done());
            watches
                .list
                .iter()
                .map(|w| (w.id.clone(), w.owner.clone(), w.sink.clone()))
                .collect()
        };
        for (id, owner, sink) in due {
            if let Some(record) = tasks.reread(&id, &owner).await {
                sink.offer_record(&record);
            }
        }
    }
}

/// Ends another node's (`node`) unfinished task `failed`: its node lost its
/// lease. When another copy is there already (a terminal one, or the node's
/// own, written at a newer revision once it was back: it fences this one
/// off), that is the answer. A "lost" copy Redis did not take is an error
/// (retry later), never an answer: no client reads `failed` that the fleet
/// does not hold.
async fn lost(
    remote: &SharedTasks,
    mut record: TaskRecord,
    node: &str,
) -> Result<TaskRecord, McpError> {
    let error = McpError::internal("Internal error: the node running this task was lost");
    record.status = TaskStatus::Failed;
    record.outcome = Some(Outcome::Error(error.to_error_object()));
    record.input_requests.clear();
    record.updated_ms = seal::now_ms();
    record.rev += 1;
    match remote.put_as(&record, node).await {
        Ok(Put::Stored) => {
            remote.publish_status(&record);
            tracing::warn!(task = %record.id, "task ended failed: its node was lost");
            Ok(record)
        }
        Ok(_) => {
            // Another answer is there already: that is the task's status,
            // on every node.
            match remote.get(&record.id).await {
                Ok(Some((copy, _))) => Ok(copy),
                Ok(None) => Err(not_found()),
                Err(e) => Err(unavailable(&e)),
            }
        }
        Err(e) => {
            tracing::warn!(task = %record.id, error = %e, "lost task not recorded");
            Err(unavailable(&e))
        }
    }
}

/// Writes the copies in order, publishes each stored one's status, and
/// adopts a terminal copy found in Redis. A copy Redis did not take is
/// written again (the task's record as it is then) every
/// [`UNWRITTEN_RETRY`] until Redis takes it, so a task that ended while
/// Redis was unreachable reads ended on every node once it is back.
async fn write_copies(
    remote: SharedTasks,
    shared: Weak<Shared>,
    mut rx: tokio::sync::mpsc::Receiver<TaskRecord>,
) {
    let mut retry = tokio::time::interval(UNWRITTEN_RETRY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            record = rx.recv() => {
                let (Some(record), Some(shared)) = (record, shared.upgrade()) else {
                    return;
                };
                Tasks { shared }.write_copy(&remote, &record).await;
            }
            _ = retry.tick() => {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                if !lock(&shared.fleet.unwritten).is_empty() {
                    Tasks { shared }.write_unwritten(&remote).await;
                }
            }
        }
    }
}
