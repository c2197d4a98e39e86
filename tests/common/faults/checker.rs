//! The checker: each invariant a function of the whole history, returning the
//! violations it finds (with the ops that show them, so they can be read back
//! in the history file). An operation answered ok must show its effect; an
//! unknown one may or may not; a failed one is not checked for effect.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::history::{Event, History, Kind, Op, Outcome, What};
use super::workload::terminal;

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

fn v(invariant: &'static str, detail: String, ops: Vec<u64>) -> Violation {
    Violation {
        invariant,
        detail,
        ops,
    }
}

fn status(op: &Op) -> Option<&str> {
    op.value["result"]["status"].as_str()
}

/// The ok reads of `task` (during and after the run), by completion time.
fn reads<'a>(h: &'a History, task: &str) -> Vec<&'a Op> {
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

fn finals<'a>(h: &'a History, task: &str) -> Vec<&'a Op> {
    h.of(Kind::FinalGet)
        .filter(|o| o.task.as_deref() == Some(task))
        .collect()
}

/// Nemesis windows: `[injected, healed + recovery]`, with the node they hit.
fn faults(h: &History, p: &Params) -> Vec<(u64, u64, String, Option<usize>)> {
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
fn faults_on(h: &History, p: &Params, involved: &[Option<usize>]) -> Vec<(u64, u64)> {
    faults(h, p)
        .into_iter()
        .filter(|(_, _, _, node)| {
            node.is_none() || involved.iter().any(|n| n.is_none() || n == node)
        })
        .map(|(a, b, _, _)| (a, b))
        .collect()
}

/// Whether a fault (or its recovery) concerning `involved` overlaps `[from, to]`.
fn disturbed(h: &History, p: &Params, from: u64, to: u64, involved: &[Option<usize>]) -> bool {
    faults_on(h, p, involved)
        .iter()
        .any(|(a, b)| *a <= to && from <= *b)
}

/// The end of the last fault window concerning `involved` that overlaps
/// `[from, to]`, or `to`.
fn calm_after(h: &History, p: &Params, from: u64, to: u64, involved: &[Option<usize>]) -> u64 {
    faults_on(h, p, involved)
        .iter()
        .filter(|(a, b)| *a <= to && from <= *b)
        .map(|(_, b)| *b)
        .fold(to, u64::max)
}

/// When stream `id` ended (`None`: never, as recorded) and whether the
/// harness closed it.
fn end_of(h: &History, id: u64) -> Option<(u64, bool)> {
    h.stream(id).find_map(|e| match e.what {
        What::End { by_harness } => Some((e.at, by_harness)),
        _ => None,
    })
}

fn updated_uri(e: &Event) -> Option<&str> {
    match &e.what {
        What::Message(m) if m["method"] == "notifications/resources/updated" => {
            m["params"]["uri"].as_str()
        }
        _ => None,
    }
}

fn session_streams<'a>(h: &'a History, session: &str) -> Vec<&'a Op> {
    h.of(Kind::OpenGet)
        .filter(|o| o.outcome == Outcome::Ok && o.session.as_deref() == Some(session))
        .collect()
}

/// A `tasks/cancel` answered ok: the task ends `cancelled` on every node,
/// unless a read before the cancel's answer already saw it end otherwise.
pub fn cancel_took_effect(h: &History, _p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    for c in h.of(Kind::CancelTask).filter(|o| o.outcome == Outcome::Ok) {
        let Some(task) = c.task.as_deref() else {
            continue;
        };
        let rs = reads(h, task);
        let wrong: Vec<&Op> = finals(h, task)
            .into_iter()
            .filter(|f| {
                let s = status(f).unwrap_or("");
                let before = rs
                    .iter()
                    .any(|r| r.invoke < c.complete && status(r) == Some(s) && terminal(s));
                s != "cancelled" && !before
            })
            .collect();
        if !wrong.is_empty() {
            out.push(v(
                "cancel-took-effect",
                format!(
                    "task {task}: cancel answered ok on node {:?} at {} ms; at the end {}",
                    c.node,
                    c.complete,
                    reads_at_end(&wrong)
                ),
                std::iter::once(c.id)
                    .chain(wrong.iter().map(|f| f.id))
                    .collect(),
            ));
        }
    }
    out
}

/// "node 0 reads input_required, node 1 reads ..." for final reads.
fn reads_at_end(finals: &[&Op]) -> String {
    finals
        .iter()
        .map(|f| {
            let what = match status(f) {
                Some(s) => s.to_owned(),
                None => f.value.to_string(),
            };
            format!(
                "node {} reads {what}",
                f.node.map_or("?".into(), |n| n.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A `tasks/update` answered ok: the task saw the answer (it is not still
/// waiting for it at the end, nor finished as if it never came).
pub fn update_took_effect(h: &History, _p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    for u in h.of(Kind::UpdateTask).filter(|o| o.outcome == Outcome::Ok) {
        let Some(task) = u.task.as_deref() else {
            continue;
        };
        let wrong: Vec<&Op> = finals(h, task)
            .into_iter()
            .filter(|f| {
                let s = status(f).unwrap_or("");
                s == "input_required"
                    || (s == "completed" && f.value.to_string().contains("cancelled by the user"))
            })
            .collect();
        if !wrong.is_empty() {
            out.push(v(
                "update-took-effect",
                format!(
                    "task {task}: update answered ok on node {:?} at {} ms; the answer never arrived: at the end {}",
                    u.node,
                    u.complete,
                    reads_at_end(&wrong)
                ),
                std::iter::once(u.id).chain(wrong.iter().map(|f| f.id)).collect(),
            ));
        }
    }
    out
}

/// A terminal status never changes, and after the run every node reads the
/// same status for every task.
pub fn terminal_is_final(h: &History, _p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    let tasks: BTreeSet<&str> = h.ops.iter().filter_map(|o| o.task.as_deref()).collect();
    for task in tasks {
        let rs = reads(h, task);
        'pairs: for (i, r1) in rs.iter().enumerate() {
            let s1 = status(r1).unwrap_or("");
            if !terminal(s1) {
                continue;
            }
            for r2 in &rs[i + 1..] {
                if r2.invoke > r1.complete && status(r2) != Some(s1) {
                    out.push(v(
                        "terminal-is-final",
                        format!(
                            "task {task}: node {:?} read {s1} at {} ms, then node {:?} read {} at {} ms",
                            r1.node,
                            r1.complete,
                            r2.node,
                            status(r2).unwrap_or(""),
                            r2.complete
                        ),
                        vec![r1.id, r2.id],
                    ));
                    break 'pairs;
                }
            }
        }
        let fs = finals(h, task);
        let seen: BTreeMap<String, Vec<u64>> = fs.iter().fold(BTreeMap::new(), |mut m, f| {
            let key = match (f.outcome, status(f)) {
                (Outcome::Ok, Some(s)) => s.to_owned(),
                _ => format!(
                    "error {}",
                    f.value["error"]["message"].as_str().unwrap_or("?")
                ),
            };
            m.entry(key).or_default().push(f.id);
            m
        });
        if seen.len() > 1 {
            out.push(v(
                "terminal-is-final",
                format!(
                    "task {task}: the nodes disagree at the end: {:?}",
                    seen.keys().collect::<Vec<_>>()
                ),
                seen.values().flatten().copied().collect(),
            ));
        }
    }
    out
}

/// A subscription answered ok (a 2025 `resources/subscribe`, a 2026 listen's
/// acknowledged `resourceSubscriptions`): an update published after it, while
/// its stream is open and no fault is in the way, arrives on the stream.
pub fn subscribed_updates_arrive(h: &History, p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    let publishes: Vec<&Op> = h
        .of(Kind::Publish)
        .filter(|o| o.outcome == Outcome::Ok)
        .collect();
    // 2025 sessions.
    for sub in h
        .of(Kind::Subscribe)
        .filter(|o| o.outcome == Outcome::Ok && !p.narrowed.contains(&o.principal))
    {
        let (Some(session), Some(uri)) = (sub.session.as_deref(), sub.uri.as_deref()) else {
            continue;
        };
        let until = h
            .ops
            .iter()
            .filter(|o| o.session.as_deref() == Some(session))
            .filter(|o| {
                (o.kind == Kind::Unsubscribe && o.uri.as_deref() == Some(uri))
                    || o.kind == Kind::Delete
            })
            .filter(|o| o.invoke > sub.complete)
            .map(|o| o.invoke)
            .min()
            .unwrap_or(u64::MAX);
        let streams = session_streams(h, session);
        for pb in publishes.iter().filter(|o| o.uri.as_deref() == Some(uri)) {
            if pb.invoke <= sub.complete || pb.complete + 500 > until {
                continue;
            }
            let window_end = pb.complete + p.horizon_ms;
            let mut involved = vec![sub.node, pb.node];
            involved.extend(streams.iter().map(|g| g.node));
            if disturbed(h, p, pb.invoke, window_end, &involved) {
                continue;
            }
            // A stream open when it was published, until the horizon (or
            // until the session's own unsubscribe / DELETE ended it).
            let open = streams.iter().any(|g| {
                g.complete < pb.invoke
                    && end_of(h, g.id).is_none_or(|(at, _)| at > window_end.min(until))
            });
            if !open {
                continue;
            }
            let arrived = streams.iter().any(|g| {
                h.stream(g.id)
                    .any(|e| e.at >= pb.invoke && updated_uri(e) == Some(uri))
            });
            if !arrived {
                out.push(v(
                    "subscribed-updates-arrive",
                    format!(
                        "session {}: subscribe of {uri} answered ok on node {:?} at {} ms; the update published at {} ms never arrived on its GET stream",
                        short(session),
                        sub.node,
                        sub.complete,
                        pb.invoke
                    ),
                    vec![sub.id, pb.id],
                ));
            }
        }
    }
    // 2026 listens.
    for l in h.of(Kind::Listen).filter(|o| o.outcome == Outcome::Ok) {
        let uris: Vec<&str> = l.value["acknowledged"]["resourceSubscriptions"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let end = end_of(h, l.id).map_or(u64::MAX, |(at, _)| at);
        for uri in uris {
            for pb in publishes.iter().filter(|o| o.uri.as_deref() == Some(uri)) {
                let window_end = pb.complete + p.horizon_ms;
                if pb.invoke <= l.complete || window_end > end {
                    continue;
                }
                if disturbed(h, p, pb.invoke, window_end, &[l.node, pb.node]) {
                    continue;
                }
                let arrived = h
                    .stream(l.id)
                    .any(|e| e.at >= pb.invoke && updated_uri(e) == Some(uri));
                if !arrived {
                    out.push(v(
                        "subscribed-updates-arrive",
                        format!(
                            "listen {} on node {:?} acknowledged {uri} at {} ms; the update published at {} ms never arrived",
                            l.value["id"], l.node, l.complete, pb.invoke
                        ),
                        vec![l.id, pb.id],
                    ));
                }
            }
        }
    }
    out
}

/// After an unsubscribe or a DELETE answered ok (and the in-flight window),
/// nothing more is delivered: no update of the URI; for a DELETE, nothing at
/// all, and the session's GET stream ends within the window by itself.
pub fn nothing_after_unsubscribe(h: &History, p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    for u in h.of(Kind::Unsubscribe).filter(|o| o.outcome == Outcome::Ok) {
        let (Some(session), Some(uri)) = (u.session.as_deref(), u.uri.as_deref()) else {
            continue;
        };
        for g in session_streams(h, session) {
            let deadline = calm_after(h, p, u.invoke, u.complete + p.window_ms, &[u.node, g.node]);
            if let Some(e) = h
                .stream(g.id)
                .find(|e| e.at > deadline && updated_uri(e) == Some(uri))
            {
                out.push(v(
                    "nothing-after-unsubscribe",
                    format!(
                        "session {}: unsubscribe of {uri} answered ok on node {:?} at {} ms; an update arrived at {} ms on the GET stream of node {:?}",
                        short(session),
                        u.node,
                        u.complete,
                        e.at,
                        g.node
                    ),
                    vec![u.id, g.id],
                ));
            }
        }
    }
    for d in h.of(Kind::Delete).filter(|o| o.outcome == Outcome::Ok) {
        let Some(session) = d.session.as_deref() else {
            continue;
        };
        for g in session_streams(h, session) {
            let deadline = calm_after(
                h,
                p,
                d.invoke,
                d.complete + p.delete_window_ms,
                &[d.node, g.node],
            );
            let end = end_of(h, g.id);
            if g.complete > d.complete || end.is_some_and(|(at, _)| at < d.invoke) {
                continue;
            }
            if let Some(e) = h
                .stream(g.id)
                .find(|e| e.at > deadline && matches!(e.what, What::Message(_)))
            {
                out.push(v(
                    "nothing-after-unsubscribe",
                    format!(
                        "session {}: DELETE answered ok on node {:?} at {} ms; a message arrived at {} ms on the GET stream of node {:?}",
                        short(session),
                        d.node,
                        d.complete,
                        e.at,
                        g.node
                    ),
                    vec![d.id, g.id],
                ));
            }
            let ended_in_time = end.is_some_and(|(at, by_harness)| at <= deadline && !by_harness);
            if !ended_in_time {
                out.push(v(
                    "nothing-after-unsubscribe",
                    format!(
                        "session {}: DELETE answered ok on node {:?} at {} ms; its GET stream on node {:?} was still open at {} ms ({})",
                        short(session),
                        d.node,
                        d.complete,
                        g.node,
                        deadline,
                        match end {
                            Some((at, true)) => format!("closed by the harness at {at} ms"),
                            Some((at, false)) => format!("ended at {at} ms"),
                            None => "never ended".into(),
                        }
                    ),
                    vec![d.id, g.id],
                ));
            }
        }
    }
    out
}

/// At most one GET stream per session: a second GET answered 200 while the
/// first still streams, or one update delivered more often than it was
/// published, is a second stream.
pub fn one_get_stream(h: &History, p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    for probe in h.of(Kind::ProbeGet).filter(|o| o.outcome == Outcome::Ok) {
        let Some(session) = probe.session.as_deref() else {
            continue;
        };
        for g in session_streams(h, session) {
            let from = probe.invoke.saturating_sub(p.lease_ms + 2000);
            if disturbed(h, p, from, probe.complete, &[probe.node, g.node]) {
                continue;
            }
            let end = end_of(h, g.id).map_or(u64::MAX, |(at, _)| at);
            if g.complete >= probe.invoke || end <= probe.complete {
                continue;
            }
            let alive = h
                .stream(g.id)
                .any(|e| e.at > probe.complete + 1000 && !matches!(e.what, What::End { .. }));
            if alive {
                out.push(v(
                    "one-get-stream",
                    format!(
                        "session {}: a second GET answered 200 on node {:?} at {} ms while its GET stream on node {:?} still streamed",
                        short(session),
                        probe.node,
                        probe.complete,
                        g.node
                    ),
                    vec![probe.id, g.id],
                ));
            }
        }
    }
    // Duplicates: more updates of a URI on one session's (or listen's)
    // streams than changes of it.
    let mut published: BTreeMap<&str, usize> = BTreeMap::new();
    for pb in h.of(Kind::Publish) {
        if let Some(u) = pb.uri.as_deref() {
            *published.entry(u).or_default() += 1;
        }
    }
    let mut delivered: BTreeMap<(String, String), (usize, Vec<u64>)> = BTreeMap::new();
    for g in h.ops.iter().filter(|o| o.outcome == Outcome::Ok) {
        let owner = match g.kind {
            Kind::OpenGet | Kind::ProbeGet => match &g.session {
                Some(s) => format!("session {}", short(s)),
                None => continue,
            },
            Kind::Listen => format!("listen {}", g.value["id"]),
            _ => continue,
        };
        for e in h.stream(g.id) {
            if let Some(uri) = updated_uri(e) {
                let entry = delivered
                    .entry((owner.clone(), uri.to_owned()))
                    .or_default();
                entry.0 += 1;
                if !entry.1.contains(&g.id) {
                    entry.1.push(g.id);
                }
            }
        }
    }
    for ((owner, uri), (n, ids)) in delivered {
        let max = published.get(uri.as_str()).copied().unwrap_or(0);
        if n > max {
            out.push(v(
                "one-get-stream",
                format!("{owner}: {n} updates of {uri} delivered, {max} published (duplicated)"),
                ids,
            ));
        }
    }
    out
}

/// A GET stream that ended lets go of the session: a GET refused with 409
/// while every earlier stream of the session had ended, later than the lease
/// and the reconnect after that end (and after any fault around it), kept a
/// stale holder mark.
pub fn get_released(h: &History, p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    let grace = p.lease_ms + p.recovery_ms + 2000;
    for g in h
        .of(Kind::OpenGet)
        .filter(|o| o.outcome == Outcome::Failed && o.value["status"] == 409)
    {
        let Some(session) = g.session.as_deref() else {
            continue;
        };
        let earlier: Vec<&Op> = h
            .ops
            .iter()
            .filter(|o| matches!(o.kind, Kind::OpenGet | Kind::ProbeGet))
            .filter(|o| o.outcome == Outcome::Ok && o.session.as_deref() == Some(session))
            .filter(|o| o.complete < g.invoke)
            .collect();
        let ends: Vec<Option<u64>> = earlier
            .iter()
            .map(|o| {
                end_of(h, o.id)
                    .map(|(at, _)| at)
                    .filter(|at| *at < g.invoke)
            })
            .collect();
        if earlier.is_empty() || ends.iter().any(Option::is_none) {
            continue;
        }
        let last_end = ends.iter().flatten().copied().max().unwrap_or(0);
        let mut involved: Vec<Option<usize>> = earlier.iter().map(|o| o.node).collect();
        involved.push(g.node);
        // After a fault around the end, the nodes reconnect first: the lease
        // and 2 s more from the end of its window.
        let calm = calm_after(
            h,
            p,
            last_end.saturating_sub(1000),
            last_end + grace,
            &involved,
        );
        let deadline = if calm > last_end + grace {
            calm + p.lease_ms + 2000
        } else {
            calm
        };
        if g.invoke > deadline {
            out.push(v(
                "get-released",
                format!(
                    "session {}: GET refused with 409 on node {:?} at {} ms; its last GET stream ended at {last_end} ms",
                    short(session),
                    g.node,
                    g.invoke
                ),
                earlier.iter().map(|o| o.id).chain([g.id]).collect(),
            ));
        }
    }
    out
}

/// Every acknowledged listen ends with exactly one final frame (a response
/// with its id, complete or error), nothing after it; or it was still open
/// when the harness closed it; or its node was killed.
pub fn listen_ends_once(h: &History, p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    for l in h.of(Kind::Listen).filter(|o| o.outcome == Outcome::Ok) {
        let id = &l.value["id"];
        let items: Vec<&Event> = h.stream(l.id).collect();
        let finals: Vec<usize> = items
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(&e.what, What::Message(m) if &m["id"] == id))
            .map(|(i, _)| i)
            .collect();
        if finals.len() > 1 {
            out.push(v(
                "listen-ends-once",
                format!(
                    "listen {id} on node {:?}: {} final frames",
                    l.node,
                    finals.len()
                ),
                vec![l.id],
            ));
        }
        if let Some(&first) = finals.first()
            && items[first + 1..]
                .iter()
                .any(|e| matches!(e.what, What::Message(_)))
        {
            out.push(v(
                "listen-ends-once",
                format!(
                    "listen {id} on node {:?}: a message after its final frame",
                    l.node
                ),
                vec![l.id],
            ));
        }
        if let Some((at, false)) = end_of(h, l.id)
            && finals.is_empty()
        {
            let killed = faults(h, p).iter().any(|(a, b, name, node)| {
                name == "kill-node" && *node == l.node && *a <= at && l.invoke <= *b
            });
            if !killed {
                out.push(v(
                    "listen-ends-once",
                    format!(
                        "listen {id} on node {:?}: the stream ended at {at} ms without a final frame",
                        l.node
                    ),
                    vec![l.id],
                ));
            }
        }
    }
    out
}

/// A listen naming a task hears its terminal status: once any node read the
/// task terminal (outside a fault) and the listen stayed open the horizon
/// after, the listen has heard it.
pub fn listen_hears_terminal(h: &History, p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    for l in h.of(Kind::Listen).filter(|o| o.outcome == Outcome::Ok) {
        let end = end_of(h, l.id).map_or(u64::MAX, |(at, _)| at);
        let tasks: Vec<&str> = l.value["acknowledged"]["taskIds"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for task in tasks {
            let Some(first) = reads(h, task)
                .into_iter()
                .find(|r| status(r).is_some_and(terminal))
            else {
                continue;
            };
            let owner = h
                .of(Kind::CreateTask)
                .find(|c| c.task.as_deref() == Some(task))
                .and_then(|c| c.node);
            let from = first.invoke.saturating_sub(1000);
            let to = first.complete + p.horizon_ms;
            if to > end || disturbed(h, p, from, to, &[l.node, first.node, owner]) {
                continue;
            }
            let heard = h.stream(l.id).any(|e| match &e.what {
                What::Message(m) => {
                    m["method"] == "notifications/tasks"
                        && m["params"]["taskId"] == task
                        && m["params"]["status"].as_str().is_some_and(terminal)
                }
                _ => false,
            });
            if !heard {
                out.push(v(
                    "listen-hears-terminal",
                    format!(
                        "listen {} on node {:?} (open {}..{end} ms) never heard task {task} end ({} read on node {:?} at {} ms)",
                        l.value["id"],
                        l.node,
                        l.complete,
                        status(first).unwrap_or(""),
                        first.node,
                        first.complete
                    ),
                    vec![l.id, first.id],
                ));
            }
        }
    }
    out
}

/// No bound is exceeded: a task created ok on a node while that node already
/// held `max_tasks` unfinished tasks of the principal (each proven
/// unfinished by a read on that node begun after the create was answered)
/// broke `--max-tasks-per-principal`.
pub fn bounds_hold(h: &History, p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    let creates: Vec<&Op> = h
        .of(Kind::CreateTask)
        .filter(|o| o.outcome == Outcome::Ok && o.task.is_some())
        .collect();
    // The node that runs each task: its store is the authority (another
    // node's copy may lag behind it).
    let owner: BTreeMap<&str, Option<usize>> = creates
        .iter()
        .filter_map(|c| c.task.as_deref().map(|t| (t, c.node)))
        .collect();
    // For each task, when the last read on its node that found it
    // unfinished began.
    let mut last_unfinished: BTreeMap<&str, u64> = BTreeMap::new();
    for r in h
        .ops
        .iter()
        .filter(|o| matches!(o.kind, Kind::GetTask | Kind::FinalGet) && o.outcome == Outcome::Ok)
    {
        if let (Some(task), Some(s)) = (r.task.as_deref(), status(r))
            && !terminal(s)
            && owner.get(task) == Some(&r.node)
        {
            let at = last_unfinished.entry(task).or_default();
            *at = (*at).max(r.invoke);
        }
    }
    for c in &creates {
        let unfinished: Vec<u64> = creates
            .iter()
            .filter(|t| t.id != c.id && t.principal == c.principal && t.node == c.node)
            .filter(|t| t.complete < c.invoke)
            .filter(|t| {
                t.task
                    .as_deref()
                    .and_then(|task| last_unfinished.get(task))
                    .is_some_and(|at| *at > c.complete)
            })
            .map(|t| t.id)
            .collect();
        if unfinished.len() >= p.max_tasks {
            let mut ops = vec![c.id];
            ops.extend(&unfinished);
            out.push(v(
                "bounds-hold",
                format!(
                    "{} created a task on node {:?} at {} ms while {} of its tasks there were unfinished (bound {})",
                    c.principal,
                    c.node,
                    c.complete,
                    unfinished.len(),
                    p.max_tasks
                ),
                ops,
            ));
        }
    }
    out
}

fn short(session: &str) -> &str {
    &session[..session.len().min(12)]
}
