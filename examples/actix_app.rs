//! An ordinary actix-web application (its own `GET /health`, the `Logger`
//! middleware, a room actor holding messages) to which MCP was added by
//! mounting genmcp at `/mcp`:
//!
//! - the typed tool `post` (`{"text": string}`) sends the message to the room
//!   actor;
//! - the resource `room://messages` reads every message so far, one per line;
//! - a subscription handler registers each listen stream with the room actor,
//!   which notifies them after every post: a client listening with
//!   `resourceSubscriptions: ["room://messages"]` receives
//!   `notifications/resources/updated` for that URI.
//!
//! ```sh
//! cargo run --example actix_app -- --port 8080     # binds 127.0.0.1; --port 0 picks one
//! curl http://127.0.0.1:8080/health                # ok
//! ```
//!
//! SIGINT/SIGTERM drain the MCP endpoint first (every open listen stream gets
//! its completion result), then stop the server.

use std::io::Write as _;

use actix::prelude::*;
use actix_web::middleware::Logger;
use actix_web::{App, HttpServer, web};
use genmcp::prelude::*;
use genmcp::suite::{CallError, ResourceSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const ROOM: &str = "room://messages";

// ---------------------------------------------------------------------------
// The application as it was before MCP: a room actor.

/// Holds the room's messages and the listen streams to tell about new ones.
#[derive(Default)]
struct Room {
    messages: Vec<String>,
    /// The streams of clients listening to `room://messages`.
    listeners: Subscribers<Updated>,
}

impl Actor for Room {
    type Context = Context<Self>;
}

/// Adds a message; answers how many the room holds.
#[derive(Message)]
#[rtype(result = "usize")]
struct Post(String);

/// Every message so far, one per line.
#[derive(Message)]
#[rtype(result = "String")]
struct Transcript;

/// What the room tells its listeners: the messages changed.
#[derive(Clone, Copy, Debug)]
struct Updated;

impl Handler<Post> for Room {
    type Result = usize;

    fn handle(&mut self, Post(text): Post, _: &mut Context<Self>) -> usize {
        self.messages.push(text);
        // Never blocks the room: a stream that does not keep up is ended as
        // Overflow (its client re-listens), ended streams are dropped.
        self.listeners.publish(Updated);
        self.messages.len()
    }
}

impl Handler<Transcript> for Room {
    type Result = String;

    fn handle(&mut self, _: Transcript, _: &mut Context<Self>) -> String {
        self.messages.iter().map(|m| format!("{m}\n")).collect()
    }
}

/// A new listen stream, from the subscription handler.
impl Handler<Subscriber<Updated>> for Room {
    type Result = ();

    fn handle(&mut self, stream: Subscriber<Updated>, _: &mut Context<Self>) {
        self.listeners.insert(stream);
    }
}

// ---------------------------------------------------------------------------
// MCP: a tool, a resource and a subscription handler over the same actor.

#[derive(Deserialize, JsonSchema)]
struct PostArgs {
    /// The message (one line).
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Posted {
    /// Messages in the room now.
    messages: usize,
}

/// Registers every stream that listens to `room://messages` with the room.
struct RoomListeners {
    room: Addr<Room>,
}

impl SubscriptionHandler for RoomListeners {
    type Message = Updated;
    type State = ();

    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, Updated>,
    ) -> Subscribe<()> {
        if !filter.resource_subscriptions.iter().any(|uri| uri == ROOM) {
            // Nothing this server serves was asked for: acknowledged, then
            // completed at once.
            return Subscribe::Narrow(SubscriptionFilter::default(), ());
        }
        // `try_send`: bounded by the room's mailbox, never waits.
        if self.room.try_send(Subscriber::from(cx.inbox())).is_err() {
            return Subscribe::Reject(McpError::internal("the room is not available"));
        }
        let honoured = SubscriptionFilter {
            resource_subscriptions: vec![ROOM.to_owned()],
            ..Default::default()
        };
        Subscribe::Narrow(honoured, ())
    }

    fn handle_message(&self, _: Updated, channel: &Channel, _: &mut ()) -> Flow {
        match channel.send_notification(Notification::resource_updated(ROOM)) {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::stop("client gone"),
        }
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_resources_updated(true)
    }
}

fn mcp_suite(room: Addr<Room>) -> Suite<RoomListeners> {
    let poster = room.clone();
    let reader = room.clone();
    Suite::builder(Implementation::new("actix_app", env!("CARGO_PKG_VERSION")))
        .tool(
            ToolBuilder::new("post")
                .description("Posts a message to the room")
                .typed(move |args: PostArgs, _call| {
                    let room = poster.clone();
                    async move {
                        if args.text.contains(['\n', '\r']) {
                            return Err(CallError::tool("a message is one line"));
                        }
                        let messages = room
                            .send(Post(args.text))
                            .await
                            .map_err(|_| CallError::tool("the room is not available"))?;
                        Ok(Posted { messages })
                    }
                }),
        )
        .resources(
            ResourceSet::new("room://").dynamic(
                Resource::new(ROOM, "messages")
                    .description("Every message so far, one per line")
                    .mime_type("text/plain"),
                move |read| {
                    let room = reader.clone();
                    async move {
                        let text = room
                            .send(Transcript)
                            .await
                            .map_err(|_| McpError::internal("the room is not available"))?;
                        Ok(ResourceContents::text(read.uri, "text/plain", text).into())
                    }
                },
            ),
        )
        .subscriptions(RoomListeners { room })
        .build()
}

// ---------------------------------------------------------------------------
// The application's server, with genmcp mounted in it.

async fn health() -> &'static str {
    "ok"
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let port = port_from_args()?;
    init_logging();

    let room = Room::default().start();
    // Built once, outside the factory: every worker serves the same endpoint.
    let mcp = genmcp::http::Endpoint::new(mcp_suite(room), HttpConfig::default());
    let drain = mcp.drain_handle();

    let server = HttpServer::new(move || {
        App::new()
            .wrap(Logger::default())
            .route("/health", web::get().to(health))
            .configure(genmcp::http::mount(&mcp)) // POST /mcp
    })
    .disable_signals() // SIGINT/SIGTERM: drain first, below
    .bind(("127.0.0.1", port))?;
    let addr = server
        .addrs()
        .first()
        .copied()
        .ok_or_else(|| std::io::Error::other("no address bound"))?;
    let server = server.run();

    let handle = server.handle();
    actix_web::rt::spawn(async move {
        genmcp::http::shutdown_signal().await;
        log::info!("stopping: completing open MCP streams");
        drain.drain_and_stop(&handle).await;
    });

    println!("actix_app listening on http://{addr} (MCP endpoint http://{addr}/mcp)");
    std::io::stdout().flush()?;
    server.await
}

fn port_from_args() -> std::io::Result<u16> {
    let mut args = std::env::args().skip(1);
    let mut port = 8080;
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--port" => args.next(),
            other => other.strip_prefix("--port=").map(str::to_owned),
        };
        port = value.and_then(|v| v.parse().ok()).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "usage: actix_app [--port PORT]",
            )
        })?;
    }
    Ok(port)
}

/// `Logger` writes through the `log` facade; any backend works (env_logger,
/// tracing-log). This one prints info and above to stderr.
fn init_logging() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, meta: &log::Metadata<'_>) -> bool {
            meta.level() <= log::Level::Info
        }
        fn log(&self, record: &log::Record<'_>) {
            if self.enabled(record.metadata()) {
                eprintln!("[{} {}] {}", record.level(), record.target(), record.args());
            }
        }
        fn flush(&self) {}
    }
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}
