//! The task worker, the reader and the race worker.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Ctx;
use super::client::*;
use super::listens::open_listen;
use crate::faults::history::{Kind, Outcome};
use crate::faults::rng::Rng;

/// The task worker of `principal` (see the module docs).
pub fn task_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("tasks-{principal}");
    let n = ctx.nodes.len();
    let mut parked: Vec<(String, usize)> = Vec::new();
    while !ctx.stopped() {
        let node = rng.below(n);
        let p = ctx
            .rec
            .begin(&worker, Kind::CreateTask, Some(node), principal);
        let (outcome, created) = {
            let (o, v) = rpc(
                ctx.nodes[node],
                principal,
                "tools/call",
                Some("export_notes"),
                json!({"name": "export_notes", "arguments": {}}),
            );
            let mut p = p;
            if let Some(id) = v["result"]["taskId"].as_str() {
                p.set_task(id);
            }
            p.end(o, v.clone());
            (o, v)
        };
        let Some(task) = created["result"]["taskId"].as_str().map(str::to_owned) else {
            if outcome == Outcome::Failed && created["httpStatus"] == 429 && !parked.is_empty() {
                // The bound: cancel the oldest waiting task on any node.
                let (old, _) = parked.remove(0);
                let at = rng.below(n);
                let p = ctx
                    .rec
                    .begin(&worker, Kind::CancelTask, Some(at), principal)
                    .task(&old);
                record_rpc(
                    &ctx,
                    p,
                    at,
                    principal,
                    "tasks/cancel",
                    Some(&old),
                    json!({"taskId": old}),
                );
            }
            sleep_unless_stopped(&ctx, Duration::from_millis(300));
            continue;
        };
        {
            let mut recent = ctx.recent_tasks.lock().expect("tasks lock");
            recent.push((task.clone(), principal));
            let len = recent.len();
            if len > 16 {
                recent.drain(..len - 16);
            }
        }
        if principal == "alice" {
            let mut recent = ctx.alice_tasks.lock().expect("tasks lock");
            recent.push(task.clone());
            let len = recent.len();
            if len > 8 {
                recent.drain(..len - 8);
            }
        }
        // Until it asks its question (about 2 s), reading on random nodes.
        let deadline = Instant::now() + Duration::from_secs(8);
        let mut asked: Option<Value> = None;
        while Instant::now() < deadline && !ctx.stopped() {
            let (o, v) = get_task(&ctx, &worker, principal, rng.below(n), &task);
            if o == Outcome::Ok && status(&v) == "input_required" {
                asked = Some(v);
                break;
            }
            if o == Outcome::Ok && terminal(status(&v)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let other = (node + 1 + rng.below(n - 1)) % n;
        let roll = rng.below(100);
        match asked {
            Some(v) if roll < 40 => {
                let key = v["result"]["inputRequests"]
                    .as_object()
                    .and_then(|m| m.keys().next().cloned())
                    .unwrap_or_default();
                let params = json!({"taskId": task, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}});
                let p = ctx
                    .rec
                    .begin(&worker, Kind::UpdateTask, Some(other), principal)
                    .task(&task);
                record_rpc(
                    &ctx,
                    p,
                    other,
                    principal,
                    "tasks/update",
                    Some(&task),
                    params,
                );
            }
            Some(_) if roll < 80 => {
                let p = ctx
                    .rec
                    .begin(&worker, Kind::CancelTask, Some(other), principal)
                    .task(&task);
                record_rpc(
                    &ctx,
                    p,
                    other,
                    principal,
                    "tasks/cancel",
                    Some(&task),
                    json!({"taskId": task}),
                );
            }
            Some(_) => parked.push((task.clone(), node)),
            None => {}
        }
        sleep_unless_stopped(&ctx, Duration::from_millis(200));
        read_everywhere(&ctx, &worker, principal, &task, Kind::GetTask);
    }
}

/// The reader: a recent task of any principal on a random node, every
/// 150 ms (a lapsed lease is noticed by the node that reads the task).
pub fn reader(ctx: Ctx, mut rng: Rng) {
    while !ctx.stopped() {
        let picked = {
            let recent = ctx.recent_tasks.lock().expect("tasks lock");
            (!recent.is_empty()).then(|| recent[rng.below(recent.len())].clone())
        };
        if let Some((task, principal)) = picked {
            // A short wait: a stopped node must not hold the reader up.
            let node = rng.below(ctx.nodes.len());
            let p = ctx
                .rec
                .begin("reader", Kind::GetTask, Some(node), principal)
                .task(&task);
            let (o, v) = rpc_within(
                ctx.nodes[node],
                principal,
                "tasks/get",
                Some(&task),
                json!({"taskId": task}),
                Duration::from_millis(1500),
            );
            p.end(o, v);
        }
        sleep_unless_stopped(&ctx, Duration::from_millis(150));
    }
}

/// The race worker: a task of `principal` waiting on node A is cancelled on
/// A while a listen naming it opens on node B, the two 0-5 ms apart (a
/// listen that reads the task before it watches it can miss its end).
pub fn race_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("race-{principal}");
    let n = ctx.nodes.len();
    let mut k = 0u64;
    while !ctx.stopped() {
        k += 1;
        let owner = rng.below(n);
        let p = ctx
            .rec
            .begin(&worker, Kind::CreateTask, Some(owner), principal);
        let (o, created) = rpc(
            ctx.nodes[owner],
            principal,
            "tools/call",
            Some("export_notes"),
            json!({"name": "export_notes", "arguments": {}}),
        );
        let mut p = p;
        let task = created["result"]["taskId"].as_str().map(str::to_owned);
        if let Some(t) = &task {
            p.set_task(t);
        }
        p.end(o, created);
        let Some(task) = task else {
            sleep_unless_stopped(&ctx, Duration::from_millis(500));
            continue;
        };
        // Until it waits for its answer (about 2 s).
        let deadline = Instant::now() + Duration::from_secs(6);
        let mut waiting = false;
        while !waiting && Instant::now() < deadline && !ctx.stopped() {
            std::thread::sleep(Duration::from_millis(250));
            let (o, v) = get_task(&ctx, &worker, principal, owner, &task);
            waiting = o == Outcome::Ok && status(&v) == "input_required";
        }
        if !waiting {
            continue;
        }
        let other = (owner + 1 + rng.below(n - 1)) % n;
        // The two start 0-5 ms apart, either first.
        let delay = Duration::from_millis(rng.below(6) as u64);
        let listen_delay = Duration::from_millis(rng.below(6) as u64);
        let canceller = {
            let (ctx, worker, task) = (ctx.clone(), worker.clone(), task.clone());
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let p = ctx
                    .rec
                    .begin(&worker, Kind::CancelTask, Some(owner), principal)
                    .task(&task);
                record_rpc(
                    &ctx,
                    p,
                    owner,
                    principal,
                    "tasks/cancel",
                    Some(&task),
                    json!({"taskId": task}),
                );
                get_task(&ctx, &worker, principal, owner, &task);
            })
        };
        let asked = json!({"taskIds": [task]});
        std::thread::sleep(listen_delay);
        let listen = open_listen(&ctx, &worker, principal, other, &format!("R{k}"), asked);
        let _ = canceller.join();
        sleep_unless_stopped(&ctx, Duration::from_secs(4));
        if let Some(sid) = listen {
            ctx.close_stream(sid);
        }
    }
}
