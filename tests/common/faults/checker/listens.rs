//! The listens' invariants: one final frame, the terminal status heard.

use serde_json::Value;

use super::*;
use crate::faults::history::{Event, History, Kind, Outcome, What};
use crate::faults::workload::terminal;

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
