//! The tasks' invariants: changes answered ok took effect, terminal statuses
//! final and agreed, the per-principal bound.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::faults::history::{History, Kind, Op, Outcome};
use crate::faults::workload::terminal;

/// A `tasks/cancel` answered ok: the task ends `cancelled` on every node,
/// unless a read before the cancel's answer already saw it end otherwise.
pub fn cancel_took_effect(h: &History, _p: &Params) -> Vec<Violation> {
    let mut out = Vec::new();
    for c in h.of(Kind::CancelTask).filter(|o| o.outcome == Outcome::Ok) {
        let Some(task) = c.task.as_deref() else {
            continue;
        };
        let rs = reads(h, task);
        // A cancel of a task that had already ended is answered ok and
        // changes nothing (the tasks extension): known from a read, or from
        // the final status's own time, at or before the cancel's answer.
        let answered_ms = h.start_ms + c.complete;
        let wrong: Vec<&Op> = finals(h, task)
            .into_iter()
            .filter(|f| {
                let s = status(f).unwrap_or("");
                let before = rs
                    .iter()
                    .any(|r| r.invoke < c.complete && status(r) == Some(s) && terminal(s));
                let ended_before = terminal(s) && updated_ms(f).is_some_and(|at| at <= answered_ms);
                s != "cancelled" && !before && !ended_before
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

/// When a read's task last changed (`lastUpdatedAt`, ms since the Unix
/// epoch).
fn updated_ms(read: &Op) -> Option<u64> {
    iso_ms(read.value["result"]["lastUpdatedAt"].as_str()?)
}

/// `2026-12-03T14:01:02.345Z` in ms since the Unix epoch.
fn iso_ms(s: &str) -> Option<u64> {
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, sec, ms) = (n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1_000 + ms).ok()
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

#[test]
fn server_timestamps_read_as_epoch_milliseconds() {
    assert_eq!(iso_ms("1970-01-01T00:00:00.000Z"), Some(0));
    assert_eq!(iso_ms("2026-12-01T10:30:00.123Z"), Some(1_796_121_000_123));
    assert_eq!(iso_ms("2024-02-29T00:00:01.000Z"), Some(1_709_164_801_000));
    assert_eq!(iso_ms("garbage"), None);
}
