//! The subscriptions' invariants: subscribed updates arrive, nothing after
//! an unsubscribe or a DELETE, one GET stream per session, its holder let go.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::faults::history::{History, Kind, Op, Outcome, What};

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
/// and the reconnect after that end (and after any fault around it, or
/// striking before the holder could let go), kept a stale holder mark.
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
        // A fault that strikes before that deadline (a Redis restart right
        // after an outage) starts the reconnect again: the deadline moves to
        // after it, until no fault falls before it.
        let faults = faults_on(h, p, &involved);
        let from = last_end.saturating_sub(1000);
        let mut deadline = last_end + grace;
        loop {
            let calm = faults
                .iter()
                .filter(|(a, b)| *a <= deadline && from <= *b)
                .map(|(_, b)| *b)
                .max();
            let next = match calm {
                Some(calm) if calm > last_end + grace => calm + p.lease_ms + 2000,
                _ => last_end + grace,
            };
            if next <= deadline {
                break;
            }
            deadline = next;
        }
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
