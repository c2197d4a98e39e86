//! The checker: each invariant a function of the whole history, returning the
//! violations it finds (with the ops that show them, so they can be read back
//! in the history file). An operation answered ok must show its effect; an
//! unknown one may or may not; a failed one is not checked for effect.

mod listens;
mod sessions;
mod tasks;

pub use listens::{listen_ends_once, listen_hears_terminal};
pub use sessions::{
    get_released, nothing_after_unsubscribe, one_get_stream, subscribed_updates_arrive,
};
pub use tasks::{bounds_hold, cancel_took_effect, terminal_is_final, update_took_effect};

use crate::faults::history::{Event, History, Kind, Op, Outcome, What};

/// The tolerances of the checks (milliseconds) and the fleet's bounds.
#[derive(Clone, Debug)]
pub struct Params {
    /// `--task-lease`.
    pub lease_ms: u64,
    /// How long after an unsubscribe is answered an update already in flight
    /// may still arrive.
    pub window_ms: u64,
    /// How long after a DELETE is answered its GET stream may still run: the
    /// holder checks the session's mark every 5 s when the bus lost the
    /// DELETE's message (docs/compat-2025.md), plus a second.
    pub delete_window_ms: u64,
    /// How long a published update may take to arrive on a subscribed stream.
    pub horizon_ms: u64,
    /// How long after a fault healed the fleet may take to reconnect; an
    /// update published in a fault (or this long after it) may be lost.
    pub recovery_ms: u64,
    /// `--max-tasks-per-principal` (each node's own count).
    pub max_tasks: usize,
    /// Principals whose streams the server narrows (their subscribes honour
    /// nothing, by design: not checked for delivery).
    pub narrowed: Vec<String>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            lease_ms: 2000,
            window_ms: 2000,
            delete_window_ms: 6000,
            horizon_ms: 3000,
            recovery_ms: 3000,
            max_tasks: 4,
            narrowed: Vec::new(),
        }
    }
}

/// One broken promise.
#[derive(Clone, Debug)]
pub struct Violation {
    /// The invariant's name (see [`INVARIANTS`]).
    pub invariant: &'static str,
    /// What happened.
    pub detail: String,
    /// The ops that show it.
    pub ops: Vec<u64>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}] {} (ops {:?})",
            self.invariant, self.detail, self.ops
        )
    }
}

/// An invariant: its name and its check.
pub type Invariant = (&'static str, fn(&History, &Params) -> Vec<Violation>);

/// Every invariant, in the order of docs/faults.md.
pub const INVARIANTS: [Invariant; 10] = [
    ("cancel-took-effect", cancel_took_effect),
    ("update-took-effect", update_took_effect),
    ("terminal-is-final", terminal_is_final),
    ("subscribed-updates-arrive", subscribed_updates_arrive),
    ("nothing-after-unsubscribe", nothing_after_unsubscribe),
    ("one-get-stream", one_get_stream),
    ("get-released", get_released),
    ("listen-ends-once", listen_ends_once),
    ("listen-hears-terminal", listen_hears_terminal),
    ("bounds-hold", bounds_hold),
];

/// Every violation of every invariant.
pub fn check(h: &History, p: &Params) -> Vec<Violation> {
    INVARIANTS.iter().flat_map(|(_, f)| f(h, p)).collect()
}

pub fn v(invariant: &'static str, detail: String, ops: Vec<u64>) -> Violation {
    Violation {
        invariant,
        detail,
        ops,
    }
}

pub fn status(op: &Op) -> Option<&str> {
    op.value["result"]["status"].as_str()
}

/// The ok reads of `task` (during and after the run), by completion time.
pub fn reads<'a>(h: &'a History, task: &str) -> Vec<&'a Op> {
    let mut r: Vec<&Op> = h
        .ops
        .iter()
        .filter(|o| matches!(o.kind, Kind::GetTask | Kind::FinalGet))
        .filter(|o| o.outcome == Outcome::Ok && o.task.as_deref() == Some(task))
        .filter(|o| status(o).is_some())
        .collect();
    r.sort_by_key(|o| o.complete);
    r
}

pub fn finals<'a>(h: &'a History, task: &str) -> Vec<&'a Op> {
    h.of(Kind::FinalGet)
        .filter(|o| o.task.as_deref() == Some(task))
        .collect()
}

/// Nemesis windows: `[injected, healed + recovery]`, with the node they hit.
pub fn faults(h: &History, p: &Params) -> Vec<(u64, u64, String, Option<usize>)> {
    h.of(Kind::Nemesis)
        .map(|o| {
            (
                o.invoke,
                o.complete + p.recovery_ms,
                o.value["nemesis"].as_str().unwrap_or("?").to_owned(),
                o.node,
            )
        })
        .collect()
}

/// The fault windows that concern `involved` nodes: every Redis fault, and a
/// node's fault when that node is involved (or the node is not known).
pub fn faults_on(h: &History, p: &Params, involved: &[Option<usize>]) -> Vec<(u64, u64)> {
    faults(h, p)
        .into_iter()
        .filter(|(_, _, _, node)| {
            node.is_none() || involved.iter().any(|n| n.is_none() || n == node)
        })
        .map(|(a, b, _, _)| (a, b))
        .collect()
}

/// Whether a fault (or its recovery) concerning `involved` overlaps `[from, to]`.
pub fn disturbed(h: &History, p: &Params, from: u64, to: u64, involved: &[Option<usize>]) -> bool {
    faults_on(h, p, involved)
        .iter()
        .any(|(a, b)| *a <= to && from <= *b)
}

/// The end of the last fault window concerning `involved` that overlaps
/// `[from, to]`, or `to`.
pub fn calm_after(h: &History, p: &Params, from: u64, to: u64, involved: &[Option<usize>]) -> u64 {
    faults_on(h, p, involved)
        .iter()
        .filter(|(a, b)| *a <= to && from <= *b)
        .map(|(_, b)| *b)
        .fold(to, u64::max)
}

/// When stream `id` ended (`None`: never, as recorded) and whether the
/// harness closed it.
pub fn end_of(h: &History, id: u64) -> Option<(u64, bool)> {
    h.stream(id).find_map(|e| match e.what {
        What::End { by_harness } => Some((e.at, by_harness)),
        _ => None,
    })
}

pub fn updated_uri(e: &Event) -> Option<&str> {
    match &e.what {
        What::Message(m) if m["method"] == "notifications/resources/updated" => {
            m["params"]["uri"].as_str()
        }
        _ => None,
    }
}

pub fn session_streams<'a>(h: &'a History, session: &str) -> Vec<&'a Op> {
    h.of(Kind::OpenGet)
        .filter(|o| o.outcome == Outcome::Ok && o.session.as_deref() == Some(session))
        .collect()
}

pub fn short(session: &str) -> &str {
    &session[..session.len().min(12)]
}
