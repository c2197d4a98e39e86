//! The baseline: a raw actix-web SSE server implementing the `burst` contract
//! with nothing in the way. Each listen gets a bounded channel of pre-encoded
//! frames written straight into its response body; `burst` hands every open
//! stream `count` copies of its frame (waiting for room, like the demo's
//! `burst`). No actors, no handler, no filter, no per-event encoding: the floor
//! for "SSE over actix-web on this machine". With an actor-hop `--baseline` each listen's
//! frames pass through an actor of their own (`hop.rs`): the floor for
//! an actor per stream.

use std::sync::{Arc, Mutex};

use actix_web::{App, HttpResponse, HttpServer, web};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Baseline;

struct Listener {
    id: Value,
    tx: mpsc::Sender<Bytes>,
}

type Registry = Arc<Mutex<Vec<Listener>>>;

fn event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

fn notification(id: &Value, method: &str, uri: Option<&str>) -> Bytes {
    let mut params = json!({"_meta": {"io.modelcontextprotocol/subscriptionId": id}});
    if let Some(uri) = uri {
        params["uri"] = Value::from(uri);
    }
    event(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
}

async fn post(
    body: web::Bytes,
    registry: web::Data<Registry>,
    kind: web::Data<Baseline>,
) -> HttpResponse {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return HttpResponse::BadRequest().finish();
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    match request.get("method").and_then(Value::as_str) {
        Some("subscriptions/listen") => {
            let (tx, rx) = mpsc::channel::<Bytes>(64);
            let ack = notification(&id, "notifications/subscriptions/acknowledged", None);
            let _ = tx.try_send(ack);
            // An actor-hop baseline: an actor between `burst` and the body.
            let tx = match kind.hop() {
                Some(style) => super::hop::start(tx, style),
                None => tx,
            };
            if let Ok(mut r) = registry.lock() {
                r.push(Listener { id, tx });
            }
            // Every ready frame goes out in one chunk, as a careful hand-written
            // SSE endpoint would do: the baseline is the floor, not a straw man.
            let body = futures_util::stream::unfold(rx, |mut rx| async move {
                let first = rx.recv().await?;
                let mut chunk = bytes::BytesMut::from(&first[..]);
                while chunk.len() < 256 * 1024 {
                    match rx.try_recv() {
                        Ok(more) => chunk.extend_from_slice(&more),
                        Err(_) => break,
                    }
                }
                Some((Ok::<_, std::convert::Infallible>(chunk.freeze()), rx))
            });
            HttpResponse::Ok()
                .content_type("text/event-stream")
                .streaming(body)
        }
        Some("tools/call") => {
            let args = request.pointer("/params/arguments");
            let arg = |k: &str| args.and_then(|a| a.get(k));
            let count = arg("count").and_then(Value::as_u64).unwrap_or(0);
            let uri = arg("uri").and_then(Value::as_str).map(str::to_owned);
            let resources = arg("kind").and_then(Value::as_str) == Some("resources");
            let streams: Vec<(Bytes, mpsc::Sender<Bytes>)> = match registry.lock() {
                Ok(mut r) => {
                    r.retain(|l| !l.tx.is_closed());
                    r.iter()
                        .map(|l| {
                            let frame = if resources {
                                notification(
                                    &l.id,
                                    "notifications/resources/updated",
                                    uri.as_deref(),
                                )
                            } else {
                                notification(&l.id, "notifications/tools/list_changed", None)
                            };
                            (frame, l.tx.clone())
                        })
                        .collect()
                }
                Err(_) => Vec::new(),
            };
            let n = streams.len();
            futures_util::future::join_all(streams.into_iter().map(|(frame, tx)| async move {
                for _ in 0..count {
                    // Room at once is the common case (as in genmcp's Inbox::send).
                    let sent = match tx.try_send(frame.clone()) {
                        Ok(()) => Ok(()),
                        Err(mpsc::error::TrySendError::Full(f)) => tx.send(f).await.map_err(|_| ()),
                        Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
                    };
                    if sent.is_err() {
                        break;
                    }
                }
            }))
            .await;
            let summary = json!({"streams": n, "count": count});
            HttpResponse::Ok().content_type("application/json").body(
                json!({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": summary.to_string()}],
                    "structuredContent": summary}})
                .to_string(),
            )
        }
        _ => HttpResponse::Ok()
            .content_type("application/json")
            .body(json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string()),
    }
}

/// The baseline's `/mcp` route, with a registry of listen streams of its own,
/// for an `App` of the caller's (as `benches/unary.rs` drives it in-process).
pub fn configure(cfg: &mut web::ServiceConfig) {
    let registry: Registry = Arc::new(Mutex::new(Vec::new()));
    routes(cfg, registry, Baseline::Raw);
}

fn routes(cfg: &mut web::ServiceConfig, registry: Registry, kind: Baseline) {
    cfg.app_data(web::Data::new(registry))
        .app_data(web::Data::new(kind))
        .app_data(web::PayloadConfig::new(1 << 20))
        .route("/mcp", web::post().to(post));
}

/// Serves the baseline on `127.0.0.1:port` with `workers` threads until the
/// process is killed; with an actor-hop `kind`, each listen's frames pass
/// through an actor of their own.
pub fn serve(port: u16, workers: usize, kind: Baseline) -> std::io::Result<()> {
    let registry: Registry = Arc::new(Mutex::new(Vec::new()));
    actix_rt::System::new().block_on(async move {
        HttpServer::new(move || {
            let registry = registry.clone();
            App::new().configure(move |cfg| routes(cfg, registry, kind))
        })
        .workers(workers.max(1))
        // The bench decides how many streams to open (up to 100,000 and
        // more): actix-web's default cap of 25,000 per worker is not part of
        // what it measures.
        .max_connections(1 << 20)
        .bind(("127.0.0.1", port))?
        .run()
        .await
    })
}
