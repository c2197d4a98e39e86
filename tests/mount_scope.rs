//! genmcp mounted in an application's own `App`, inside a `web::scope`, behind
//! the application's middleware, on the application's own `HttpServer`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, HttpMessage as _, HttpResponse, HttpServer, web};
use common::quiet::Quiet;
use common::user_server::UserServer;
use common::{Event, Exchange, headers, request};
use genmcp::http::{Endpoint, HttpConfig};
use genmcp::prelude::*;
use serde_json::{Value, json};

/// Who the application's middleware authenticated.
#[derive(Clone, Debug)]
struct User(String);

/// The application's middleware: no `X-Api-Key: secret`, no entry (401 from the
/// middleware itself); otherwise it leaves the user in the request extensions.
async fn require_key(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let key = req.headers().get("x-api-key").and_then(|v| v.to_str().ok());
    if key != Some("secret") {
        let denied = HttpResponse::Unauthorized().body("denied by the app");
        return Ok(req.into_response(denied).map_into_right_body());
    }
    req.extensions_mut().insert(User("alice".into()));
    next.call(req)
        .await
        .map(ServiceResponse::map_into_left_body)
}

struct Counters {
    hook: Arc<AtomicUsize>,
    tool: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

/// The endpoint: a `whoami` tool, the quiet handler, an assigns hook that reads
/// what the middleware left.
fn endpoint(config: HttpConfig) -> (Endpoint<Quiet>, Counters) {
    let counters = Counters {
        hook: Arc::new(AtomicUsize::new(0)),
        tool: Arc::new(AtomicUsize::new(0)),
        closed: Arc::new(AtomicUsize::new(0)),
    };
    let mut config = config;
    let hook = counters.hook.clone();
    config.assigns = Some(Arc::new(move |req: &actix_web::HttpRequest| {
        hook.fetch_add(1, Ordering::SeqCst);
        let user = req.extensions().get::<User>().cloned();
        Ok(user.map_or_else(Assigns::new, |u| Assigns::new().with(u)))
    }));
    let tool = counters.tool.clone();
    let suite = Suite::builder(Implementation::new("mounted", "1"))
        .tool(
            ToolBuilder::new("whoami")
                .input_schema(json!({"type": "object"}))
                .handler(move |call| {
                    tool.fetch_add(1, Ordering::SeqCst);
                    let who = call
                        .channel
                        .assigns()
                        .get::<User>()
                        .map_or("nobody".to_owned(), |u| u.0.clone());
                    async move { Ok(CallToolResult::text(who).into()) }
                }),
        )
        .subscriptions(Quiet {
            closed: counters.closed.clone(),
        })
        .build();
    (Endpoint::new(suite, config), counters)
}

/// The application: its own route, and genmcp under `/api` behind its middleware.
fn app_server(mcp: Endpoint<Quiet>) -> UserServer {
    UserServer::spawn(move || {
        let drain = mcp.drain_handle();
        let http = HttpServer::new(move || {
            App::new()
                .route("/health", web::get().to(|| async { "ok" }))
                .service(
                    web::scope("/api")
                        .wrap(from_fn(require_key))
                        .service(mcp.service()),
                )
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(2)
        .bind(("127.0.0.1", 0))?;
        let addr = http.addrs()[0];
        Ok((http.run(), addr, drain))
    })
}

fn with_key(mut h: Vec<(String, String)>) -> Vec<(String, String)> {
    h.push(("X-Api-Key".into(), "secret".into()));
    h
}

fn call_at(
    addr: std::net::SocketAddr,
    path: &str,
    h: &[(String, String)],
    body: &Value,
) -> common::Response {
    Exchange::open_at(addr, "POST", path, h, body.to_string().as_bytes()).into_response()
}

#[test]
fn mounted_in_a_scope_behind_the_apps_middleware() {
    let mut config = common::config();
    config.max_body = 4096;
    let (mcp, counters) = endpoint(config);
    let srv = app_server(mcp.clone());
    let whoami = request(json!(1), "tools/call", json!({"name": "whoami"}));
    let tool_headers = headers("tools/call", Some("whoami"));

    // Rejected by the application's middleware: the handler never runs.
    let denied = call_at(srv.addr, "/api/mcp", &tool_headers, &whoami);
    assert_eq!(denied.status, 401);
    assert_eq!(denied.body, b"denied by the app");
    let discover = request(json!(2), "server/discover", json!({}));
    let denied = call_at(
        srv.addr,
        "/api/mcp",
        &headers("server/discover", None),
        &discover,
    );
    assert_eq!(denied.status, 401);
    assert_eq!(counters.hook.load(Ordering::SeqCst), 0, "hook ran");
    assert_eq!(counters.tool.load(Ordering::SeqCst), 0, "tool ran");

    // Let through: the endpoint answers under the scope, and the assigns hook
    // sees what the middleware left in the request.
    let ok = call_at(
        srv.addr,
        "/api/mcp",
        &with_key(headers("server/discover", None)),
        &discover,
    );
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(ok.json()["result"]["resultType"], "complete");
    let me = call_at(
        srv.addr,
        "/api/mcp",
        &with_key(tool_headers.clone()),
        &whoami,
    );
    assert_eq!(me.status, 200);
    assert_eq!(me.json()["result"]["content"][0]["text"], "alice");
    assert_eq!(counters.tool.load(Ordering::SeqCst), 1);
    assert_eq!(counters.hook.load(Ordering::SeqCst), 2);

    // Everything the endpoint checks still holds when mounted.
    let mut evil = with_key(headers("server/discover", None));
    evil.push(("Host".into(), "evil.example".into()));
    assert_eq!(call_at(srv.addr, "/api/mcp", &evil, &discover).status, 403);
    let big = request(
        json!(3),
        "server/discover",
        json!({"pad": "x".repeat(8192)}),
    );
    let too_large = call_at(
        srv.addr,
        "/api/mcp",
        &with_key(headers("server/discover", None)),
        &big,
    );
    assert_eq!(too_large.status, 413);
    let get =
        Exchange::open_at(srv.addr, "GET", "/api/mcp", &with_key(vec![]), b"").into_response();
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));

    // Only where it was mounted; the application's own routes are untouched.
    let unmounted = call_at(
        srv.addr,
        "/mcp",
        &with_key(headers("server/discover", None)),
        &discover,
    );
    assert_eq!(unmounted.status, 404);
    let health = Exchange::open_at(srv.addr, "GET", "/health", &[], b"").into_response();
    assert_eq!((health.status, health.body.as_slice()), (200, &b"ok"[..]));
    assert!(srv.stop());
}

#[test]
fn a_mounted_listen_gets_keepalives_metrics_and_the_drain() {
    let mut config = common::config();
    config.keep_alive = Duration::from_millis(100);
    let (mcp, counters) = endpoint(config);
    let srv = app_server(mcp.clone());
    let body = request(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut stream = Exchange::open_at(
        srv.addr,
        "POST",
        "/api/mcp",
        &with_key(headers("subscriptions/listen", None)),
        body.to_string().as_bytes(),
    );
    assert_eq!(stream.status, 200);
    let ack = stream.next_message().expect("ack");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        stream.next_event(),
        Some(Event::Comment("keepalive".into()))
    );
    assert_eq!(mcp.metrics().open_streams, 1);

    // The application stops its server: drain first, then stop.
    assert!(srv.stop(), "drained in time");
    let last = stream.next_message().expect("completion result");
    assert_eq!(last["id"], "L");
    assert_eq!(last["result"]["resultType"], "complete");
    assert_eq!(stream.next_message(), None);
    assert_eq!(
        counters.closed.load(Ordering::SeqCst),
        1,
        "handle_close ran"
    );
    let metrics = mcp.metrics();
    assert_eq!(metrics.open_streams, 0);
    assert_eq!(metrics.closed(CloseReason::Shutdown), 1);
}

#[test]
fn configure_and_service_mount_one_endpoint_twice() {
    let (mcp, counters) = endpoint(common::config());
    let srv = UserServer::spawn(move || {
        let drain = mcp.drain_handle();
        let http = HttpServer::new(move || {
            App::new()
                .configure(genmcp::http::mount(&mcp))
                .service(web::scope("/v2").service(mcp.service_at("/rpc")))
        })
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))?;
        let addr = http.addrs()[0];
        Ok((http.run(), addr, drain))
    });
    let whoami = request(json!(1), "tools/call", json!({"name": "whoami"}));
    for path in ["/mcp", "/v2/rpc"] {
        let r = call_at(
            srv.addr,
            path,
            &headers("tools/call", Some("whoami")),
            &whoami,
        );
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.json()["result"]["content"][0]["text"], "nobody");
    }
    // One endpoint, one state: both mounts count in the same place.
    assert_eq!(counters.tool.load(Ordering::SeqCst), 2);
    assert!(srv.stop());
}
