//! The 2025 session worker: initialize, the GET stream, subscribe / change /
//! unsubscribe / change, a probe GET, DELETE, through the proxy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::Ctx;
use super::client::*;
use super::{LEGACY, TIMEOUT};
use crate::faults::history::{Kind, Outcome};
use crate::faults::http::{self};
use crate::faults::rng::Rng;

/// An open GET stream: its op id, the flag set when it ended, its node.
type OpenedGet = (u64, Arc<AtomicBool>, Option<usize>);

/// Opens the GET stream of `session` through the proxy (retrying a 409 a few
/// times); the op id and the flag set when it ended.
///
/// `elsewhere`: the node that held the session's last GET stream; the new
/// one is then asked of the next node directly, as a client behind a
/// balancer may land anywhere but there (its holder mark must have been let
/// go).
pub fn open_get(
    ctx: &Ctx,
    worker: &str,
    principal: &str,
    session: &str,
    kind: Kind,
    elsewhere: Option<usize>,
) -> Option<OpenedGet> {
    let tries = if kind == Kind::OpenGet { 10 } else { 1 };
    let direct = elsewhere.map(|held| (held + 1) % ctx.nodes.len());
    let addr = direct.map_or(ctx.proxy.addr, |n| ctx.nodes[n]);
    let node_of = |port: u16| direct.or_else(|| ctx.proxy.node_of(port));
    for _ in 0..tries {
        if ctx.stopped() {
            return None;
        }
        let mut p = ctx
            .rec
            .begin(worker, kind, direct, principal)
            .session(session);
        let h = vec![
            ("Accept".to_owned(), "text/event-stream".to_owned()),
            ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
            ("Mcp-Session-Id".to_owned(), session.to_owned()),
            bearer(principal),
        ];
        match http::open(addr, "GET", &h, b"", TIMEOUT) {
            Ok(stream) if stream.status == 200 => {
                let node = node_of(stream.local_port);
                p.set_node(node);
                let id = p.end(Outcome::Ok, json!({"status": 200}));
                let ended = ctx.follow(id, stream);
                return Some((id, ended, node));
            }
            Ok(mut stream) => {
                p.set_node(node_of(stream.local_port));
                let body = stream.read_to_end().unwrap_or_default();
                let status = stream.status;
                p.end(
                    Outcome::Failed,
                    json!({"status": status, "body": String::from_utf8_lossy(&body)}),
                );
                if status == 404 {
                    // The session is gone (a DELETE took effect though its
                    // answer was an error): no GET stream will open.
                    return None;
                }
            }
            Err(e) => {
                p.end(e.outcome(), json!({"http": e.to_string()}));
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// The session worker (see the module docs).
pub fn session_worker(ctx: Ctx, principal: &'static str, mut rng: Rng) {
    let worker = format!("sessions-{principal}");
    // A session is kept (and its GET stream opened again) until its DELETE
    // is answered ok: after an outage the same session must get its GET
    // stream back.
    let mut kept: Option<(String, Option<OpenedGet>)> = None;
    // The node that held the session's last GET stream.
    let mut held_on: Option<usize> = None;
    while !ctx.stopped() {
        let (session, get) = match kept.take() {
            Some(k) => k,
            None => match initialize(&ctx, &worker, principal) {
                Some(session) => {
                    held_on = None;
                    (session, None)
                }
                None => {
                    sleep_unless_stopped(&ctx, Duration::from_millis(500));
                    continue;
                }
            },
        };
        let mut get = get;
        for _cycle in 0..3 {
            if ctx.stopped() {
                break;
            }
            if get
                .as_ref()
                .is_none_or(|(_, ended, _)| ended.load(Ordering::SeqCst))
            {
                get = open_get(&ctx, &worker, principal, &session, Kind::OpenGet, held_on);
                if let Some((_, _, node)) = &get {
                    held_on = *node;
                }
            }
            let Some(uri) = new_note(&ctx, &worker, principal, &mut rng) else {
                sleep_unless_stopped(&ctx, Duration::from_millis(500));
                continue;
            };
            let p = ctx
                .rec
                .begin(&worker, Kind::Subscribe, None, principal)
                .session(&session)
                .uri(&uri);
            legacy_rpc(
                &ctx,
                p,
                principal,
                &session,
                "resources/subscribe",
                json!({"uri": uri}),
            );
            for _ in 0..2 {
                sleep_unless_stopped(&ctx, Duration::from_millis(600));
                publish(&ctx, &worker, principal, &uri, &mut rng);
            }
            // Room for the last update to arrive before the unsubscribe.
            sleep_unless_stopped(&ctx, Duration::from_millis(1000));
            let streaming = get
                .as_ref()
                .is_some_and(|(_, ended, _)| !ended.load(Ordering::SeqCst));
            if rng.chance(50)
                && streaming
                && let Some((probe, _, _)) =
                    open_get(&ctx, &worker, principal, &session, Kind::ProbeGet, None)
            {
                ctx.close_stream(probe);
            }
            let p = ctx
                .rec
                .begin(&worker, Kind::Unsubscribe, None, principal)
                .session(&session)
                .uri(&uri);
            legacy_rpc(
                &ctx,
                p,
                principal,
                &session,
                "resources/unsubscribe",
                json!({"uri": uri}),
            );
            sleep_unless_stopped(&ctx, Duration::from_millis(300));
            publish(&ctx, &worker, principal, &uri, &mut rng);
            sleep_unless_stopped(&ctx, Duration::from_millis(1000));
        }
        // DELETE, then the GET stream must end by itself.
        let mut p = ctx
            .rec
            .begin(&worker, Kind::Delete, None, principal)
            .session(&session);
        let h = vec![
            ("Mcp-Session-Id".to_owned(), session.clone()),
            ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
            bearer(principal),
        ];
        let deleted = match http::send(ctx.proxy.addr, "DELETE", &h, b"", TIMEOUT) {
            Ok((reply, port)) => {
                p.set_node(ctx.proxy.node_of(port));
                let o = if reply.status == 200 {
                    Outcome::Ok
                } else {
                    Outcome::Failed
                };
                p.end(
                    o,
                    json!({"status": reply.status, "body": String::from_utf8_lossy(&reply.body)}),
                );
                // 404: already gone (an earlier DELETE took effect though
                // its answer was an error): a new session is started.
                o == Outcome::Ok || reply.status == 404
            }
            Err(e) => {
                p.end(e.outcome(), json!({"http": e.to_string()}));
                false
            }
        };
        if !deleted && !ctx.stopped() {
            kept = Some((session, get));
            continue;
        }
        if let Some((id, ended, _)) = get {
            let deadline = Instant::now() + Duration::from_secs(8);
            while !ended.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            ctx.close_stream(id);
        }
    }
}

/// `initialize` and `notifications/initialized` through the proxy; the new
/// session.
pub fn initialize(ctx: &Ctx, worker: &str, principal: &str) -> Option<String> {
    let mut p = ctx.rec.begin(worker, Kind::Initialize, None, principal);
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "genmcp-faults", "version": "0"}}});
    let mut h = headers_2025(principal, None);
    h.retain(|(k, _)| k != "MCP-Protocol-Version");
    let sent = http::send(
        ctx.proxy.addr,
        "POST",
        &h,
        body.to_string().as_bytes(),
        TIMEOUT,
    );
    let session = match &sent {
        Ok((reply, port)) if reply.status == 200 => {
            p.set_node(ctx.proxy.node_of(*port));
            reply.header("mcp-session-id").map(str::to_owned)
        }
        _ => None,
    };
    let Some(session) = session else {
        let (o, v) = judge(&sent);
        p.end(if o == Outcome::Ok { Outcome::Failed } else { o }, v);
        return None;
    };
    p.set_session(&session);
    p.end(Outcome::Ok, json!({}));
    let _ = http::send(
        ctx.proxy.addr,
        "POST",
        &headers_2025(principal, Some(&session)),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
            .to_string()
            .as_bytes(),
        TIMEOUT,
    );
    Some(session)
}
