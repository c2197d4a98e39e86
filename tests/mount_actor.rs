//! Streams fed by an application actor through `Subscriber`/`Subscribers`: a
//! stream that does not keep up is ended as `Overflow`, the actor is never
//! blocked and keeps running, and the sender sees `Full`, then `Closed`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web::{App, HttpResponse, HttpServer, web};
use common::user_server::UserServer;
use common::{Exchange, wait_until};
use genmcp::http::Endpoint;
use genmcp::prelude::*;
use serde_json::{Value, json};

const URI: &str = "feed://numbers";

/// The application's actor: it feeds every registered stream.
#[derive(Default)]
struct Feeder {
    listeners: Subscribers<u32>,
    next: u32,
}

impl Actor for Feeder {
    type Context = Context<Self>;
}

impl Handler<Subscriber<u32>> for Feeder {
    type Result = ();

    fn handle(&mut self, stream: Subscriber<u32>, _: &mut Context<Self>) {
        self.listeners.insert(stream);
    }
}

/// Sends `n` numbers to every stream, one `try_send` each, and reports.
#[derive(Message)]
#[rtype(result = "Value")]
struct Burst(u32);

impl Handler<Burst> for Feeder {
    type Result = MessageResult<Burst>;

    fn handle(&mut self, Burst(n): Burst, _: &mut Context<Self>) -> MessageResult<Burst> {
        let started = Instant::now();
        let (mut ok, mut full, mut closed) = (0, 0, 0);
        for _ in 0..n {
            self.next += 1;
            for stream in self.listeners.iter() {
                match stream.try_send(self.next) {
                    Ok(()) => ok += 1,
                    Err(InboxError::Full) => full += 1,
                    Err(_) => closed += 1,
                }
            }
        }
        let remaining = self.listeners.prune();
        MessageResult(json!({
            "ok": ok, "full": full, "closed": closed, "remaining": remaining,
            "micros": started.elapsed().as_micros() as u64,
        }))
    }
}

/// How many streams the feeder holds.
#[derive(Message)]
#[rtype(result = "usize")]
struct Count;

impl Handler<Count> for Feeder {
    type Result = usize;

    fn handle(&mut self, _: Count, _: &mut Context<Self>) -> usize {
        self.listeners.len()
    }
}

/// Registers each stream with the feeder; slow on purpose (20 ms a message).
struct Fed {
    feeder: Addr<Feeder>,
    handled: Arc<AtomicUsize>,
}

impl SubscriptionHandler for Fed {
    type Message = u32;
    type State = ();

    fn subscribe(&self, _f: &SubscriptionFilter, cx: &mut SubscribeCx<'_, u32>) -> Subscribe<()> {
        match self.feeder.try_send(Subscriber::from(cx.inbox())) {
            Ok(()) => Subscribe::Accept(()),
            Err(_) => Subscribe::Reject(McpError::internal("feeder unavailable")),
        }
    }

    fn handle_message(&self, _n: u32, channel: &Channel, _state: &mut ()) -> Flow {
        std::thread::sleep(Duration::from_millis(20));
        self.handled.fetch_add(1, Ordering::SeqCst);
        match channel.send_notification(Notification::resource_updated(URI)) {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::stop("client gone"),
        }
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_resources_updated(true)
    }
}

async fn burst(feeder: web::Data<Addr<Feeder>>, n: web::Path<u32>) -> HttpResponse {
    match feeder.send(Burst(n.into_inner())).await {
        Ok(report) => HttpResponse::Ok().json(report),
        Err(_) => HttpResponse::ServiceUnavailable().finish(),
    }
}

async fn count(feeder: web::Data<Addr<Feeder>>) -> HttpResponse {
    match feeder.send(Count).await {
        Ok(n) => HttpResponse::Ok().body(n.to_string()),
        Err(_) => HttpResponse::ServiceUnavailable().finish(),
    }
}

fn get(addr: std::net::SocketAddr, method: &str, path: &str) -> common::Response {
    Exchange::open_at(addr, method, path, &[], b"").into_response()
}

fn listen(addr: std::net::SocketAddr, id: &str) -> Exchange {
    let mut stream = common::listen(addr, json!(id), json!({"resourceSubscriptions": [URI]}));
    let ack = stream.next_message().expect("ack");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    stream
}

#[test]
fn an_actor_fed_stream_that_overflows_ends_as_overflow_and_the_actor_goes_on() {
    let mut config = common::config();
    config.limits.mailbox_capacity = 4;
    let handled = Arc::new(AtomicUsize::new(0));
    let counted = handled.clone();
    let (endpoint_tx, endpoint_rx) = std::sync::mpsc::channel();
    let srv = UserServer::spawn(move || {
        let feeder = Feeder::default().start();
        let suite = Suite::builder(Implementation::new("fed", "1"))
            .subscriptions(Fed {
                feeder: feeder.clone(),
                handled: counted,
            })
            .build();
        let mcp = Endpoint::new(suite, config);
        let _ = endpoint_tx.send(mcp.clone());
        let drain = mcp.drain_handle();
        let feeder = web::Data::new(feeder);
        let http = HttpServer::new(move || {
            App::new()
                .app_data(feeder.clone())
                .route("/burst/{n}", web::post().to(burst))
                .route("/listeners", web::get().to(count))
                .configure(genmcp::http::mount(&mcp))
        })
        .workers(2)
        .disable_signals()
        .bind(("127.0.0.1", 0))?;
        let addr = http.addrs()[0];
        Ok((http.run(), addr, drain))
    });
    let mcp = endpoint_rx.recv().expect("endpoint");
    let addr = srv.addr;

    let mut slow = listen(addr, "slow");
    assert!(wait_until(Duration::from_secs(5), || {
        get(addr, "GET", "/listeners").body == b"1"
    }));

    // A burst far past the mailbox (4): the stream is ended as Overflow; the
    // sender gets Full once, then Closed; the actor never waits.
    let report = get(addr, "POST", "/burst/50").json();
    let (ok, full, closed) = (
        report["ok"].as_u64().unwrap_or(0),
        report["full"].as_u64().unwrap_or(0),
        report["closed"].as_u64().unwrap_or(0),
    );
    assert_eq!(full, 1, "{report}");
    assert!((4..=8).contains(&ok), "{report}");
    assert_eq!(ok + full + closed, 50, "{report}");
    assert_eq!(
        report["remaining"], 0,
        "the ended stream was dropped: {report}"
    );
    assert!(
        report["micros"].as_u64().unwrap_or(u64::MAX) < 500_000,
        "the actor was held up: {report}"
    );

    // The client sees the notifications taken before the overflow, then the
    // stream is cut without a completion result (it must re-listen).
    let mut seen = 0;
    while let Some(msg) = slow.next_message() {
        assert_eq!(msg["method"], "notifications/resources/updated", "{msg}");
        seen += 1;
    }
    assert!(seen as u64 <= ok);
    assert!(wait_until(Duration::from_secs(5), || {
        mcp.metrics().closed(CloseReason::Overflow) == 1
    }));
    assert_eq!(mcp.metrics().open_streams, 0);

    // The actor keeps running: later bursts reach nobody ...
    let report = get(addr, "POST", "/burst/3").json();
    assert_eq!(
        (report["ok"].as_u64(), report["closed"].as_u64()),
        (Some(0), Some(0))
    );
    // ... and a new stream is fed as before.
    let mut fresh = listen(addr, "fresh");
    assert!(wait_until(Duration::from_secs(5), || {
        get(addr, "GET", "/listeners").body == b"1"
    }));
    let before = handled.load(Ordering::SeqCst);
    assert_eq!(get(addr, "POST", "/burst/1").json()["ok"], 1);
    let msg = fresh.next_message().expect("notification");
    assert_eq!(msg["method"], "notifications/resources/updated");
    assert_eq!(msg["params"]["uri"], URI);
    assert_eq!(handled.load(Ordering::SeqCst), before + 1);

    assert!(srv.stop());
    let last = fresh.next_message().expect("completion result");
    assert_eq!(last["result"]["resultType"], "complete");
}
