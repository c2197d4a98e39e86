//! The 2026 listen worker: listens with `taskIds` and a resource filter.

use std::time::Duration;

use serde_json::{Value, json};

use super::Ctx;
use super::TIMEOUT;
use super::client::*;
use crate::faults::history::{Kind, Outcome};
use crate::faults::http::{self, Item};
use crate::faults::rng::Rng;

/// Opens listen `id` on `node` asking for `asked`; once acknowledged, its
/// op id (the stream followed); `None` when refused or not acknowledged.
pub fn open_listen(
    ctx: &Ctx,
    worker: &str,
    principal: &str,
    node: usize,
    id: &str,
    asked: Value,
) -> Option<u64> {
    let mut p = ctx.rec.begin(worker, Kind::Listen, Some(node), principal);
    if let Some(uri) = asked["resourceSubscriptions"][0].as_str() {
        p = p.uri(uri);
    }
    let mut params = json!({"notifications": asked});
    params["_meta"] = meta();
    let body =
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params});
    let opened = http::open(
        ctx.nodes[node],
        "POST",
        &headers_2026(principal, "subscriptions/listen", None),
        body.to_string().as_bytes(),
        TIMEOUT,
    );
    let mut stream = match opened {
        Ok(s) if s.status == 200 => s,
        Ok(mut s) => {
            let b = s.read_to_end().unwrap_or_default();
            p.end(
                Outcome::Failed,
                json!({"id": id, "asked": asked, "status": s.status, "body": String::from_utf8_lossy(&b)}),
            );
            return None;
        }
        Err(e) => {
            p.end(
                e.outcome(),
                json!({"id": id, "asked": asked, "http": e.to_string()}),
            );
            return None;
        }
    };
    // The acknowledgement first.
    let ack = loop {
        match stream.next_item() {
            Ok(Some(Item::Comment)) => continue,
            Ok(Some(Item::Message(m))) => break Some(m),
            _ => break None,
        }
    };
    let acked = ack
        .as_ref()
        .is_some_and(|m| m["method"] == "notifications/subscriptions/acknowledged");
    if !acked {
        p.end(
            Outcome::Failed,
            json!({"id": id, "asked": asked, "first": ack}),
        );
        stream.close();
        return None;
    }
    let ack = ack.unwrap_or_default();
    let sid = p.id();
    p.end(
        Outcome::Ok,
        json!({"id": id, "asked": asked, "acknowledged": ack["params"]["notifications"]}),
    );
    ctx.follow(sid, stream);
    Some(sid)
}

/// The listen worker (see the module docs).
pub fn listen_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("listens-{principal}");
    let mut k = 0u64;
    while !ctx.stopped() {
        k += 1;
        let Some(uri) = new_note(&ctx, &worker, principal, &mut rng) else {
            sleep_unless_stopped(&ctx, Duration::from_millis(500));
            continue;
        };
        let tasks: Vec<String> = {
            let recent = ctx.alice_tasks.lock().expect("tasks lock");
            recent.iter().rev().take(3).cloned().collect()
        };
        let node = rng.below(ctx.nodes.len());
        let asked = json!({"taskIds": tasks, "resourceSubscriptions": [uri]});
        let Some(sid) = open_listen(&ctx, &worker, principal, node, &format!("L{k}"), asked) else {
            sleep_unless_stopped(&ctx, Duration::from_millis(500));
            continue;
        };
        for _ in 0..2 {
            sleep_unless_stopped(&ctx, Duration::from_millis(800));
            publish(&ctx, &worker, principal, &uri, &mut rng);
        }
        sleep_unless_stopped(&ctx, Duration::from_secs(4));
        ctx.close_stream(sid);
    }
}
