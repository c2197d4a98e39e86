//! The task supervisor: one supervised future per running task, the one place
//! status changes go through, and the answers to `tasks/get|update|cancel`.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tracing::Instrument as _;

use super::config::TaskConfig;
use super::cx::{CancelSignal, TaskCx};
use super::live::{Live, LiveTable};
use super::record::{Outcome, TaskRecord};
use super::status::{TaskStatus, allows};
use super::store::{MemoryStore, TaskStats, TaskStore};
use super::watch::Watchers;
use crate::mux::Channel;
use crate::protocol::McpError;
use crate::protocol::error::ErrorObject;
use crate::suite::common::{BoxFuture, CallToolResult, InputRequired, ToolOutcome};
use crate::suite::sealing::seal;

/// What a supervised task's future yields: the tool's answer, or a panic.
type Settled = Result<Result<ToolOutcome, McpError>, Box<dyn std::any::Any + Send>>;

pub(super) struct Shared {
    pub(super) config: TaskConfig,
    pub(super) store: Arc<dyn TaskStore>,
    live: Mutex<LiveTable>,
    /// Set by [`Tasks::drain`]: no new task starts.
    draining: AtomicBool,
    /// Listen streams hearing `notifications/tasks`.
    pub(super) watchers: Watchers,
    /// What sharing tasks through Redis keeps (see `remote`).
    #[cfg(feature = "redis")]
    pub(super) fleet: super::remote::Fleet,
}

/// How a `tools/call` that may become a task was answered.
pub(crate) enum Started {
    /// The handler asked for input before doing any task work: an ordinary
    /// MRTR round, answered synchronously; no task exists.
    Mrtr(InputRequired),
    /// The handler finished at once and the tool does not require a task:
    /// the plain result, no task exists.
    Direct(CallToolResult),
    /// A task exists (durably): its `CreateTaskResult`.
    Task(Map<String, Value>),
}

/// The task supervisor of a suite. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Tasks {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("running", &self.running())
            .finish_non_exhaustive()
    }
}

pub(super) fn not_found() -> McpError {
    // The same answer for unknown, expired and another principal's tasks.
    McpError::invalid_params("Invalid params: unknown taskId")
}

pub(super) fn random_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to the sealer's nonce source, which
        // never repeats in a process (ids stay unique, if less secret).
        let n = seal::now_ms().to_be_bytes();
        bytes[..8].copy_from_slice(&n);
    }
    data_encoding::HEXLOWER.encode(&bytes)
}

impl Tasks {
    pub(crate) fn new(config: TaskConfig) -> Self {
        Tasks {
            shared: Arc::new(Shared {
                config,
                store: Arc::new(MemoryStore::default()),
                live: Mutex::new(LiveTable::default()),
                draining: AtomicBool::new(false),
                watchers: Watchers::default(),
                #[cfg(feature = "redis")]
                fleet: Default::default(),
            }),
        }
    }

    /// Counts of the store.
    pub(crate) fn stats(&self) -> TaskStats {
        self.shared.store.stats()
    }

    pub(super) fn live(&self) -> std::sync::MutexGuard<'_, LiveTable> {
        self.shared
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops expired records (only finished tasks expire) and stops any
    /// work of theirs still running (a cancelled task's within its grace).
    fn purge(&self, now: u64) {
        let dropped = self.shared.store.purge_expired(now);
        self.shared.watchers.forget(&dropped);
        for id in dropped {
            let live = self.live().remove(&id);
            if let Some(live) = live {
                tracing::debug!(task = %id, "expired task's work stopped");
                live.stop_now();
            }
        }
    }

    /// The one place a task's status changes: applies `edit` and moves to
    /// `to` only when [`allows`] the move. Returns the new record, or `None`
    /// when the change was refused (terminal already, unknown, expired).
    fn transition(
        &self,
        id: &str,
        to: TaskStatus,
        edit: impl FnMut(&mut TaskRecord),
    ) -> Option<TaskRecord> {
        self.transition_from(id, None, to, edit)
    }

    /// [`Self::transition`], only while the task's status is `from`.
    fn transition_if(
        &self,
        id: &str,
        from: TaskStatus,
        to: TaskStatus,
        edit: impl FnMut(&mut TaskRecord),
    ) -> Option<TaskRecord> {
        self.transition_from(id, Some(from), to, edit)
    }

    fn transition_from(
        &self,
        id: &str,
        from: Option<TaskStatus>,
        to: TaskStatus,
        mut edit: impl FnMut(&mut TaskRecord),
    ) -> Option<TaskRecord> {
        let now = seal::now_ms();
        let record = self.shared.store.modify(id, now, &mut |r| {
            if from.is_some_and(|from| r.status != from) || !allows(r.status, to) {
                return false;
            }
            edit(r);
            r.status = to;
            r.updated_ms = now;
            if to != TaskStatus::InputRequired {
                r.input_requests.clear();
            }
            true
        })?;
        if to.is_terminal()
            && let Some(live) = self.live().get_mut(id)
        {
            // Waiting input requests will never be answered now.
            live.inputs.clear();
        }
        self.announce(id);
        Some(record)
    }

    /// Sends the task's state now to the listen streams watching it, and
    /// with tasks shared through Redis, to the other nodes.
    fn announce(&self, id: &str) {
        let store = &self.shared.store;
        let watched = self
            .shared
            .watchers
            .announce(id, || store.get(id, seal::now_ms()));
        self.mirror_announced(id, watched);
    }

    /// The ids of `ids` a listen by `owner` may watch: known, unexpired and
    /// its own (another principal's look unknown), sorted.
    pub(crate) fn watchable(&self, ids: &[String], owner: &str) -> Vec<String> {
        let now = seal::now_ms();
        self.purge(now);
        let mut ok: Vec<String> = ids
            .iter()
            .filter(|id| {
                self.shared
                    .store
                    .get(id, now)
                    .is_some_and(|r| r.owner == owner)
            })
            .cloned()
            .collect();
        ok.sort_unstable();
        ok.dedup();
        ok
    }

    /// Makes the acknowledged listen `channel` hear `ids` (from
    /// [`Tasks::watchable`]): each task's current state first, then its
    /// changes, ending with its terminal one.
    /// Called in the listen stream's span: that span links to the span of
    /// each watched task whose work runs here.
    pub(crate) fn watch(&self, ids: &[String], channel: &Channel) {
        let current = tracing::Span::current();
        if !current.is_disabled() {
            let live = self.live();
            for id in ids {
                if let Some(task) = live.get(id) {
                    current.follows_from(&task.span);
                }
            }
        }
        let store = &self.shared.store;
        self.shared
            .watchers
            .watch(ids, channel, |id| store.get(id, seal::now_ms()));
    }

    /// Starts the call `run` (a tool's handler given its [`TaskCx`]) as a
    /// task owned by `owner`. The handler is polled once here: a round that
    /// asks for input at once is an MRTR round (no task); a handler that
    /// finishes at once answers directly unless `required`; otherwise the task
    /// record exists before this returns its `CreateTaskResult`, and the work
    /// goes on under the supervisor.
    pub(crate) async fn start(
        &self,
        owner: String,
        required: bool,
        run: impl FnOnce(TaskCx) -> BoxFuture<Result<ToolOutcome, McpError>>,
        finish: impl FnOnce(CallToolResult) -> CallToolResult + Send + 'static,
    ) -> Result<Started, McpError> {
        self.start_sharing().await?;
        if self.shared.draining.load(Ordering::SeqCst) {
            return Err(McpError::internal(
                "Internal error: server shutting down; no new task starts",
            ));
        }
        let now = seal::now_ms();
        self.purge(now);
        let config = &self.shared.config;
        let id = random_id();
        let record = TaskRecord {
            id: id.clone(),
            owner,
            status: TaskStatus::Working,
            status_message: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: u64::try_from(config.ttl.as_millis()).unwrap_or(u64::MAX),
            poll_interval_ms: u64::try_from(config.poll_interval.as_millis())
                .unwrap_or(1000)
                .max(1),
            input_requests: Map::new(),
            outcome: None,
            rev: 0,
        };
        let cancel = Arc::new(CancelSignal::default());
        // The work's own span, not a child of the call's (it outlives the
        // call's answer): linked to it instead, as the OpenTelemetry
        // conventions model work a request started.
        let span = tracing::info_span!(
            parent: None,
            "task",
            otel.name = "task",
            otel.kind = "internal",
            mcp.method.name = crate::protocol::methods::TOOLS_CALL,
        );
        span.follows_from(tracing::Span::current());
        // Counted before the record exists, so concurrent calls cannot pass
        // the bound together; a refused call counts nothing.
        self.live().admit(
            id.clone(),
            Live {
                owner: record.owner.clone(),
                cancel: cancel.clone(),
                abort: None,
                inputs: HashMap::new(),
                issued: 0,
                input_watched: false,
                span: span.clone(),
            },
            config,
        )?;
        if let Err(e) = self.shared.store.insert(record, config, now) {
            self.live().remove(&id);
            return Err(e);
        }
        let cx = TaskCx {
            id: id.clone(),
            tasks: self.clone(),
            cancel,
        };
        let mut work: BoxFuture<Settled> =
            Box::pin(AssertUnwindSafe(run(cx)).catch_unwind().instrument(span));
        match (&mut work).now_or_never() {
            Some(settled) => {
                let untouched = self.live().get(&id).is_some_and(|l| l.issued == 0);
                match settled {
                    Ok(Ok(ToolOutcome::InputRequired(round))) if untouched => {
                        self.discard(&id);
                        return Ok(Started::Mrtr(round));
                    }
                    Ok(Ok(ToolOutcome::Complete(result))) if untouched && !required => {
                        self.discard(&id);
                        return Ok(Started::Direct(finish(result)));
                    }
                    Ok(Err(e)) if untouched && !required => {
                        self.discard(&id);
                        return Err(e);
                    }
                    settled => self.settle(&id, settled, finish),
                }
            }
            None => {
                let tasks = self.clone();
                let task_id = id.clone();
                let handle = tokio::spawn(async move {
                    let settled = work.await;
                    tasks.settle(&task_id, settled, finish);
                });
                if let Some(live) = self.live().get_mut(&id) {
                    live.abort = Some(handle.abort_handle());
                }
            }
        }
        let record = self
            .shared
            .store
            .get(&id, seal::now_ms())
            .ok_or_else(|| McpError::internal("Internal error: the task expired at once"))?;
        // Shared: durable in Redis before the client hears of it.
        if let Err(error) = self.share_created(&record).await {
            self.stop(&id, std::time::Duration::ZERO);
            self.discard(&id);
            return Err(error);
        }
        Ok(Started::Task(record.create_result()))
    }

    /// Forgets a task that never became one (MRTR round, direct answer).
    fn discard(&self, id: &str) {
        self.live().remove(id);
        self.shared.store.remove(id);
    }

    /// Records how the work ended (if nothing terminal came first) and lets
    /// go of the in-process part.
    fn settle(
        &self,
        id: &str,
        settled: Settled,
        finish: impl FnOnce(CallToolResult) -> CallToolResult,
    ) {
        let outcome = match settled {
            Ok(Ok(ToolOutcome::Complete(result))) => {
                let result = finish(result);
                match serde_json::to_string(&Value::Object(result.into_map())) {
                    Ok(json) if json.len() <= self.shared.config.max_result_bytes => {
                        self.announceable(id, Arc::<str>::from(json))
                    }
                    Ok(json) => {
                        tracing::warn!(task = %id, bytes = json.len(), "task result over max_result_bytes");
                        Err(McpError::internal(
                            "Internal error: the task's result is larger than the server keeps",
                        ))
                    }
                    Err(_) => Err(McpError::internal("Internal error: unencodable result")),
                }
            }
            Ok(Ok(ToolOutcome::InputRequired(_))) => Err(McpError::internal(
                "Internal error: a running task cannot return input_required (use TaskCx::request_input)",
            )),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                tracing::error!(task = %id, "a task's handler panicked");
                Err(McpError::internal(
                    "Internal error: the task's handler panicked",
                ))
            }
        };
        match outcome {
            Ok(json) => {
                self.transition(id, TaskStatus::Completed, |r| {
                    r.outcome = Some(Outcome::Result(json.clone()));
                });
            }
            Err(e) => {
                self.fail(id, e.to_error_object());
            }
        }
        self.live().remove(id);
    }

    /// Ends `id` `failed` with `error`; the new record, or `None` when it had
    /// ended already.
    fn fail(&self, id: &str, error: ErrorObject) -> Option<TaskRecord> {
        self.transition(id, TaskStatus::Failed, |r| {
            r.outcome = Some(Outcome::Error(error.clone()));
        })
    }

    pub(crate) fn set_message(&self, id: &str, message: String) {
        let now = seal::now_ms();
        let updated = self.shared.store.modify(id, now, &mut |r| {
            if r.status.is_terminal() {
                return false;
            }
            r.status_message = Some(message.clone());
            r.updated_ms = now;
            true
        });
        if updated.is_none() {
            tracing::debug!(task = %id, "status message of a finished or gone task ignored");
        } else {
            self.announce(id);
        }
    }

    pub(crate) fn request_input(
        &self,
        id: &str,
        request: Value,
    ) -> Option<oneshot::Receiver<Value>> {
        let (tx, rx) = oneshot::channel();
        let key = {
            let mut live = self.live();
            let live = live.get_mut(id)?;
            live.issued += 1;
            let key = format!("input-{}", live.issued);
            live.inputs.insert(key.clone(), tx);
            key
        };
        let record = self.transition(id, TaskStatus::InputRequired, |r| {
            r.input_requests.insert(key.clone(), request.clone());
        });
        let mut live = self.live();
        let Some(live) = live.get_mut(id) else {
            return Some(rx);
        };
        match record {
            None => {
                live.inputs.remove(&key);
            }
            Some(record) if !std::mem::replace(&mut live.input_watched, true) => {
                self.watch_input_ttl(id, record.due_ms());
            }
            Some(_) => {}
        }
        Some(rx)
    }

    /// A task still waiting for input when its TTL runs out (`due_ms`) ends
    /// `failed` and its work is stopped (after `cancel_grace`): nobody is
    /// left to answer, and its slot of `max_tasks_per_principal` and
    /// `max_running_tasks` must come back. One that is working then is left
    /// to run; it is watched again when it next asks for input.
    fn watch_input_ttl(&self, id: &str, due_ms: u64) {
        let tasks = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let wait = due_ms.saturating_sub(seal::now_ms());
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            let failed =
                tasks.transition_if(&id, TaskStatus::InputRequired, TaskStatus::Failed, |r| {
                    r.outcome = Some(Outcome::Error(
                        McpError::internal("Task failed: input was not provided within its TTL")
                            .to_error_object(),
                    ));
                });
            if failed.is_some() {
                tracing::info!(task = %id, "task waited for input past its TTL; failed");
                tasks.stop(&id, tasks.shared.config.cancel_grace);
            } else if let Some(live) = tasks.live().get_mut(&id) {
                live.input_watched = false;
            }
        });
    }

    fn owned(&self, id: &str, owner: &str) -> Result<TaskRecord, McpError> {
        let now = seal::now_ms();
        self.purge(now);
        self.shared
            .store
            .get(id, now)
            .filter(|r| r.owner == owner)
            .ok_or_else(not_found)
    }

    /// `tasks/get`: the `DetailedTask`.
    pub(crate) fn get(&self, id: &str, owner: &str) -> Result<Map<String, Value>, McpError> {
        Ok(self.owned(id, owner)?.detailed())
    }

    /// `tasks/update`: answers the outstanding input requests named in
    /// `responses` (other keys are ignored); the task goes back to `working`
    /// when none is left. The record reflects the answers before this returns.
    pub(crate) fn update(
        &self,
        id: &str,
        owner: &str,
        responses: &Map<String, Value>,
    ) -> Result<(), McpError> {
        let record = self.owned(id, owner)?;
        if record.status != TaskStatus::InputRequired {
            return Ok(());
        }
        let answered: Vec<String> = responses
            .keys()
            .filter(|k| record.input_requests.contains_key(*k))
            .cloned()
            .collect();
        if answered.is_empty() {
            return Ok(());
        }
        let now = seal::now_ms();
        let updated = self.shared.store.modify(id, now, &mut |r| {
            if r.status != TaskStatus::InputRequired {
                return false;
            }
            for k in &answered {
                r.input_requests.remove(k);
            }
            if r.input_requests.is_empty() && allows(r.status, TaskStatus::Working) {
                r.status = TaskStatus::Working;
            }
            r.updated_ms = now;
            true
        });
        if updated.is_none() {
            return Ok(());
        }
        self.announce(id);
        let senders: Vec<(oneshot::Sender<Value>, Value)> = {
            let mut live = self.live();
            let Some(live) = live.get_mut(id) else {
                return Ok(());
            };
            answered
                .iter()
                .filter_map(|k| {
                    let tx = live.inputs.remove(k)?;
                    Some((tx, responses.get(k).cloned().unwrap_or(Value::Null)))
                })
                .collect()
        };
        for (tx, value) in senders {
            let _ = tx.send(value);
        }
        Ok(())
    }

    /// `tasks/cancel`: `cancelled` unless the task already ended (then
    /// nothing changes); the work is told, then aborted after the grace period.
    pub(crate) fn cancel(&self, id: &str, owner: &str) -> Result<(), McpError> {
        self.owned(id, owner)?;
        if self
            .transition(id, TaskStatus::Cancelled, |r| r.outcome = None)
            .is_none()
        {
            return Ok(());
        }
        self.stop(id, self.shared.config.cancel_grace);
        Ok(())
    }

    /// Tells the work of `id` to stop and aborts it after `grace`.
    pub(super) fn stop(&self, id: &str, grace: std::time::Duration) {
        let abort = {
            let live = self.live();
            let Some(live) = live.get(id) else {
                return;
            };
            live.cancel.cancel();
            live.abort.clone()
        };
        if let Some(abort) = abort {
            let tasks = self.clone();
            let id = id.to_owned();
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                if !abort.is_finished() {
                    tracing::info!(task = %id, "cancelled task did not stop in time; aborted");
                    abort.abort();
                }
                tasks.live().remove(&id);
            });
        }
    }

    /// Number of tasks whose work is still running in this process.
    pub(crate) fn running(&self) -> usize {
        self.live().len()
    }

    /// Server shutdown: no new task starts; waits up to `deadline` for running
    /// tasks to finish, then ends those still running `failed` ("server
    /// shutting down") and aborts their work.
    pub(crate) async fn drain(&self, deadline: std::time::Duration) {
        self.shared.draining.store(true, Ordering::SeqCst);
        let until = tokio::time::Instant::now() + deadline;
        while self.running() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let ids: Vec<String> = self.live().ids();
        for id in ids {
            let error = McpError::internal("Internal error: server shutting down");
            // Logged once the status is recorded (what the drain test reads).
            if self.fail(&id, error.to_error_object()).is_some() {
                // Shared: in Redis before the process exits, not left to
                // the copy writer (other nodes would wait out the lease).
                self.copy_now(&id).await;
                tracing::warn!(task = %id, "task ended failed: server shutting down");
            }
            let live = self.live().remove(&id);
            if let Some(live) = live {
                live.stop_now();
            }
        }
    }
}
