//! The graceful drain of a mounted endpoint, triggered by the application when
//! it stops its own server: every open stream gets its completion result (and
//! `handle_close`) before the server stops, and no listen opens once the drain
//! has started.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix_web::middleware::Logger;
use actix_web::{App, HttpServer, web};
use common::quiet::Quiet;
use common::user_server::UserServer;
use common::{Exchange, headers, request};
use genmcp::http::Endpoint;
use genmcp::prelude::*;
use serde_json::{Value, json};

fn setup() -> (Endpoint<Quiet>, Arc<AtomicUsize>, UserServer) {
    let closed = Arc::new(AtomicUsize::new(0));
    let suite = Suite::builder(Implementation::new("drained", "1"))
        .subscriptions(Quiet {
            closed: closed.clone(),
        })
        .build();
    let mcp = Endpoint::new(suite, common::config());
    let mounted = mcp.clone();
    let srv = UserServer::spawn(move || {
        let drain = mounted.drain_handle();
        let http = HttpServer::new(move || {
            App::new()
                .wrap(Logger::default())
                .service(web::scope("/app").configure(genmcp::http::mount(&mounted)))
        })
        .workers(2)
        .disable_signals()
        .bind(("127.0.0.1", 0))?;
        let addr = http.addrs()[0];
        Ok((http.run(), addr, drain))
    });
    (mcp, closed, srv)
}

fn open_listen(addr: std::net::SocketAddr, id: &str) -> Exchange {
    let body = request(
        json!(id),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    Exchange::open_at(
        addr,
        "POST",
        "/app/mcp",
        &headers("subscriptions/listen", None),
        body.to_string().as_bytes(),
    )
}

fn completed(stream: &mut Exchange, id: &str) {
    let last: Value = stream.next_message().expect("completion result");
    assert_eq!(last["id"], id, "{last}");
    assert_eq!(last["result"]["resultType"], "complete");
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        id
    );
    assert_eq!(stream.next_message(), None, "nothing after the completion");
}

#[test]
fn stopping_the_apps_server_completes_every_open_stream_first() {
    let (mcp, closed, srv) = setup();
    let addr = srv.addr;
    let mut streams: Vec<(String, Exchange)> = (0..4)
        .map(|i| {
            let id = format!("s{i}");
            let mut s = open_listen(addr, &id);
            assert_eq!(s.status, 200);
            let ack = s.next_message().expect("ack");
            assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
            (id, s)
        })
        .collect();
    assert_eq!(mcp.metrics().open_streams, 4);

    let started = Instant::now();
    assert!(srv.stop(), "drained within drain_timeout");
    assert!(started.elapsed() < Duration::from_secs(4));
    for (id, stream) in &mut streams {
        completed(stream, id);
    }
    assert_eq!(closed.load(Ordering::SeqCst), 4);
    let metrics = mcp.metrics();
    assert_eq!(metrics.open_streams, 0);
    assert_eq!(metrics.closed(CloseReason::Shutdown), 4);
    // The server is really gone.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn no_listen_opens_once_the_drain_has_started() {
    let (mcp, _closed, srv) = setup();
    let mut open = open_listen(srv.addr, "before");
    assert_eq!(open.next_message().expect("ack")["id"], Value::Null);

    // The application drains first (the server still runs) ...
    let drain = mcp.drain_handle();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    assert!(rt.block_on(drain.drain(Duration::from_secs(5))));
    assert!(drain.is_draining());
    completed(&mut open, "before");

    // ... so a listen arriving now is refused, while unary requests still work.
    let refused = open_listen(srv.addr, "after").into_response();
    let body = refused.json();
    assert_eq!(body["id"], "after");
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{body}"
    );
    let discover = request(json!(1), "server/discover", json!({}));
    let ok = Exchange::open_at(
        srv.addr,
        "POST",
        "/app/mcp",
        &headers("server/discover", None),
        discover.to_string().as_bytes(),
    )
    .into_response();
    assert_eq!(ok.status, 200);
    assert!(srv.stop());
}

/// `_meta` declaring the tasks extension.
fn task_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": common::VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    })
}

#[test]
fn the_drain_ends_running_tasks_failed_and_their_watchers_hear_it() {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("forever")
            .description("runs until the server stops")
            .task_support(TaskSupport::Required)
            .handler(|_call| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(CallToolResult::text("never").into())
            }),
    );
    let suite = Suite::builder(Implementation::new("drained-tasks", "1"))
        .catalog(catalog)
        .build();
    let mcp = Endpoint::new(suite, common::config());
    let mounted = mcp.clone();
    let srv = UserServer::spawn(move || {
        let drain = mounted.drain_handle();
        let http = HttpServer::new(move || {
            App::new().service(web::scope("/app").configure(genmcp::http::mount(&mounted)))
        })
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))?;
        let addr = http.addrs()[0];
        Ok((http.run(), addr, drain))
    });
    let call = request(
        json!(1),
        "tools/call",
        json!({"name": "forever", "arguments": {}, "_meta": task_meta()}),
    );
    let created = Exchange::open_at(
        srv.addr,
        "POST",
        "/app/mcp",
        &headers("tools/call", Some("forever")),
        call.to_string().as_bytes(),
    )
    .into_response()
    .json();
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let listen = request(
        json!("w"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}, "_meta": task_meta()}),
    );
    let mut watch = Exchange::open_at(
        srv.addr,
        "POST",
        "/app/mcp",
        &headers("subscriptions/listen", None),
        listen.to_string().as_bytes(),
    );
    let ack = watch.next_message().expect("ack");
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));
    assert_eq!(
        watch.next_message().expect("its state")["params"]["status"],
        "working"
    );

    let drain = mcp.drain_handle();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    assert!(rt.block_on(drain.drain(Duration::from_secs(2))));
    let failed = watch.next_message().expect("the task's end");
    assert_eq!(failed["method"], "notifications/tasks");
    assert_eq!(failed["params"]["status"], "failed", "{failed}");
    assert_eq!(
        failed["params"]["error"]["message"],
        "Internal error: server shutting down"
    );
    completed(&mut watch, "w");
    assert!(srv.stop());
}
