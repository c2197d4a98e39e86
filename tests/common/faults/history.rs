//! The recorded history of a run: every client operation with its invoke and
//! complete times (milliseconds since the run began), node and outcome; every
//! item a stream delivered; every nemesis event. The checker reads nothing
//! else.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How an operation ended, as the client saw it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Answered with success: its effect must show.
    Ok,
    /// Answered with an error (or refused before it was sent): no effect may show.
    Failed,
    /// No answer (a timeout, a cut connection): it may or may not have taken effect.
    Unknown,
}

/// What an operation was.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `tools/call` of a task tool (2026).
    CreateTask,
    /// `tasks/get` during the run; `value` is the result (or the error).
    GetTask,
    /// `tasks/get` after the run healed, on every node.
    FinalGet,
    /// `tasks/update` with an answer; `value` is what was sent.
    UpdateTask,
    /// `tasks/cancel`.
    CancelTask,
    /// 2025 `initialize` (through the proxy); `session` is the new session.
    Initialize,
    /// The session's GET stream; its items are [`Event`]s of this op's id.
    OpenGet,
    /// A second GET of a session whose stream is open (answered 409 unless
    /// the fleet lost track of the first); closed at once when answered 200.
    ProbeGet,
    /// 2025 `resources/subscribe` of `uri`.
    Subscribe,
    /// 2025 `resources/unsubscribe` of `uri`.
    Unsubscribe,
    /// A change of the note `uri` (its `notifications/resources/updated`).
    Publish,
    /// 2025 DELETE of the session.
    Delete,
    /// A 2026 listen; `value` holds what it asked for; its items are
    /// [`Event`]s of this op's id.
    Listen,
    /// A fault injected and healed; `value` names it.
    Nemesis,
}

/// One operation.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Op {
    /// Unique in the history; streams' events refer to it.
    pub id: u64,
    /// The client that ran it.
    pub worker: String,
    /// What it was.
    pub kind: Kind,
    /// The node it was sent to (`None`: through the proxy, node not known).
    pub node: Option<usize>,
    /// When it was sent (ms since the run began).
    pub invoke: u64,
    /// When its answer came (or the client gave up).
    pub complete: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// The principal it ran as.
    pub principal: String,
    /// The task it was about.
    pub task: Option<String>,
    /// The 2025 session it belonged to.
    pub session: Option<String>,
    /// The resource it was about.
    pub uri: Option<String>,
    /// What came back (a task's status, an error), or what was asked.
    pub value: Value,
}

/// An item of a stream (a GET stream, a listen).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum What {
    /// A JSON-RPC message.
    Message(Value),
    /// A keep-alive comment: the stream is alive.
    Alive,
    /// The stream ended: `by_harness` when the client closed it.
    End {
        /// The client closed it (the end of its period, or of the run).
        by_harness: bool,
    },
}

/// An item of the stream opened by op `stream`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Event {
    /// The id of the [`Kind::OpenGet`] / [`Kind::Listen`] / [`Kind::ProbeGet`] op.
    pub stream: u64,
    /// When it arrived (ms since the run began).
    pub at: u64,
    /// What it was.
    pub what: What,
}

/// The whole history of a run.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct History {
    /// The wall clock when the run began, in ms since the Unix epoch: an op's
    /// times plus this compare with the servers' timestamps.
    pub start_ms: u64,
    /// Operations, in the order they completed.
    pub ops: Vec<Op>,
    /// Stream items, in the order they arrived.
    pub events: Vec<Event>,
}

impl History {
    /// The events of stream `id`, in order.
    pub fn stream(&self, id: u64) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(move |e| e.stream == id)
    }

    /// The ops of `kind`.
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Op> {
        self.ops.iter().filter(move |o| o.kind == kind)
    }

    /// One line of JSON per op, then per event, sorted by time.
    pub fn to_jsonl(&self) -> String {
        let mut lines: Vec<(u64, String)> = Vec::new();
        for o in &self.ops {
            lines.push((o.invoke, serde_json::json!({"op": o}).to_string()));
        }
        for e in &self.events {
            lines.push((e.at, serde_json::json!({"event": e}).to_string()));
        }
        lines.sort_by_key(|(t, _)| *t);
        let mut out = String::new();
        for (_, l) in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }

    /// Operations counted by kind and outcome, and the nemesis events, as
    /// text lines (the run's summary).
    pub fn summary(&self) -> Vec<String> {
        let mut counts: BTreeMap<(Kind, Outcome), usize> = BTreeMap::new();
        for o in &self.ops {
            *counts.entry((o.kind, o.outcome)).or_default() += 1;
        }
        let mut by_kind: BTreeMap<Kind, [usize; 3]> = BTreeMap::new();
        for ((k, outcome), n) in counts {
            let slot = match outcome {
                Outcome::Ok => 0,
                Outcome::Failed => 1,
                Outcome::Unknown => 2,
            };
            by_kind.entry(k).or_default()[slot] = n;
        }
        let mut lines: Vec<String> = by_kind
            .iter()
            .filter(|(k, _)| **k != Kind::Nemesis)
            .map(|(k, [ok, failed, unknown])| {
                format!("{k:?}: ok {ok}, failed {failed}, unknown {unknown}")
            })
            .collect();
        let mut nemeses: BTreeMap<String, usize> = BTreeMap::new();
        for o in self.of(Kind::Nemesis) {
            *nemeses
                .entry(o.value["nemesis"].as_str().unwrap_or("?").to_owned())
                .or_default() += 1;
        }
        lines.push(format!(
            "nemesis events: {}",
            nemeses
                .iter()
                .map(|(k, n)| format!("{k} x{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        lines.push(format!("stream items: {}", self.events.len()));
        lines
    }
}

/// Where the workload and the nemeses write the history (shared by threads;
/// the lock is never held across a wait).
#[derive(Clone)]
pub struct Recorder {
    start: Instant,
    next: Arc<AtomicU64>,
    history: Arc<Mutex<History>>,
}

/// An operation sent and not yet answered.
pub struct Pending {
    recorder: Recorder,
    op: Op,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A history starting now.
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            next: Arc::new(AtomicU64::new(1)),
            history: Arc::new(Mutex::new(History {
                start_ms: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                ..History::default()
            })),
        }
    }

    /// Milliseconds since the run began.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Starts recording an op of `kind` by `worker` on `node` as `principal`.
    pub fn begin(&self, worker: &str, kind: Kind, node: Option<usize>, principal: &str) -> Pending {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let now = self.now();
        Pending {
            recorder: self.clone(),
            op: Op {
                id,
                worker: worker.to_owned(),
                kind,
                node,
                invoke: now,
                complete: now,
                outcome: Outcome::Unknown,
                principal: principal.to_owned(),
                task: None,
                session: None,
                uri: None,
                value: Value::Null,
            },
        }
    }

    /// Records an item of stream `stream`.
    pub fn event(&self, stream: u64, what: What) {
        let at = self.now();
        self.history
            .lock()
            .expect("history lock")
            .events
            .push(Event { stream, at, what });
    }

    /// A copy of the history so far.
    pub fn snapshot(&self) -> History {
        self.history.lock().expect("history lock").clone()
    }
}

impl Pending {
    /// This op's id (a stream's events refer to it).
    pub fn id(&self) -> u64 {
        self.op.id
    }

    /// The task it is about.
    pub fn task(mut self, task: &str) -> Pending {
        self.op.task = Some(task.to_owned());
        self
    }

    /// The session it belongs to.
    pub fn session(mut self, session: &str) -> Pending {
        self.op.session = Some(session.to_owned());
        self
    }

    /// The resource it is about.
    pub fn uri(mut self, uri: &str) -> Pending {
        self.op.uri = Some(uri.to_owned());
        self
    }

    /// Sets the node (learnt once answered, e.g. from the proxy).
    pub fn set_node(&mut self, node: Option<usize>) {
        self.op.node = node;
    }

    /// Sets the task (learnt once answered).
    pub fn set_task(&mut self, task: &str) {
        self.op.task = Some(task.to_owned());
    }

    /// Sets the session (learnt once answered).
    pub fn set_session(&mut self, session: &str) {
        self.op.session = Some(session.to_owned());
    }

    /// Records the op as answered now, with `outcome` and `value`; its id.
    pub fn end(mut self, outcome: Outcome, value: Value) -> u64 {
        self.op.complete = self.recorder.now();
        self.op.outcome = outcome;
        self.op.value = value;
        let id = self.op.id;
        self.recorder
            .history
            .lock()
            .expect("history lock")
            .ops
            .push(self.op);
        id
    }
}
