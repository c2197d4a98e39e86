use std::collections::HashMap;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::stream::StopStream;
use super::{CloseReason, Server, StreamPermit};
use crate::mux::Outbox;
use crate::protocol::{McpError, RequestId};

/// Spawns one stream actor under a connection: given the connection's address and
/// the stream's permit, starts the actor and returns its control recipient.
pub type SpawnStream =
    Box<dyn FnOnce(Addr<Connection>, StreamPermit) -> Recipient<StopStream> + Send>;

/// Asks a connection to open a stream for listen request `id`.
#[derive(Message)]
#[rtype(result = "Result<(), McpError>")]
pub struct OpenStream {
    /// The listen request id.
    pub id: RequestId,
    /// Starts the stream actor.
    pub spawn: SpawnStream,
}

/// Sent by a stream when it has stopped, for any reason.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StreamEnded {
    /// The listen request id.
    pub id: RequestId,
}

/// Cancels the stream of listen request `id` (stdio `notifications/cancelled`).
/// Unknown ids are ignored.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CancelStream {
    /// The listen request id.
    pub id: RequestId,
}

/// The transport has gone (stdin EOF, socket closed): every stream stops with
/// [`CloseReason::Disconnected`] and the connection ends.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CloseTransport;

/// The supervisor of one client connection's streams.
///
/// It spawns and registers its streams (keyed by listen id), deregisters each when
/// it stops for any reason, stops them all when the transport goes (its outbox
/// receiver is dropped) and drives them to their completion result on server
/// shutdown. An HTTP exchange connection ends with its last stream; a stdio
/// connection lives until [`CloseTransport`].
pub struct Connection {
    server: Server,
    outbox: Outbox,
    streams: HashMap<RequestId, Recipient<StopStream>>,
    ends_with_last_stream: bool,
    teardown: Option<CloseReason>,
    /// Dropped when the connection stops: tells the transport nothing more comes.
    _done: Option<oneshot::Sender<()>>,
}

impl Connection {
    /// A connection for one HTTP exchange: it ends when its stream ends. `done` is
    /// dropped when the connection stops.
    pub fn exchange(server: Server, outbox: Outbox, done: oneshot::Sender<()>) -> Self {
        Connection {
            server,
            outbox,
            streams: HashMap::new(),
            ends_with_last_stream: true,
            teardown: None,
            _done: Some(done),
        }
    }

    /// A long-lived connection (a stdio pipe) carrying many streams.
    pub fn pipe(server: Server, outbox: Outbox) -> Self {
        Connection {
            server,
            outbox,
            streams: HashMap::new(),
            ends_with_last_stream: false,
            teardown: None,
            _done: None,
        }
    }

    fn tear_down(&mut self, reason: CloseReason, ctx: &mut Context<Self>) {
        if self.teardown.is_none() {
            self.teardown = Some(reason);
            tracing::debug!(
                streams = self.streams.len(),
                reason = reason.as_str(),
                "connection teardown"
            );
        }
        for stop in self.streams.values() {
            // One control message per stream; bounded.
            stop.do_send(StopStream(reason));
        }
        if self.streams.is_empty() {
            ctx.stop();
        }
    }
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let outbox = self.outbox.clone();
        ctx.spawn(
            async move { outbox.closed().await }
                .into_actor(self)
                .map(|(), act, ctx| act.tear_down(CloseReason::Disconnected, ctx)),
        );
        ctx.spawn(
            self.server
                .shutdown_signal()
                .into_actor(self)
                .map(|(), act, ctx| act.tear_down(CloseReason::Shutdown, ctx)),
        );
    }
}

impl Handler<OpenStream> for Connection {
    type Result = Result<(), McpError>;

    fn handle(&mut self, msg: OpenStream, ctx: &mut Self::Context) -> Self::Result {
        if self.teardown.is_some() || self.server.is_shutting_down() {
            return Err(McpError::internal("Server is shutting down"));
        }
        if self.streams.contains_key(&msg.id) {
            return Err(McpError::InvalidRequest(format!(
                "a subscriptions/listen with id {} is already open",
                msg.id
            )));
        }
        if self.streams.len() >= self.server.limits().max_streams_per_connection {
            return Err(McpError::internal("Subscription limit reached"));
        }
        let permit = self.server.try_open_stream()?;
        let stop = (msg.spawn)(ctx.address(), permit);
        self.streams.insert(msg.id, stop);
        Ok(())
    }
}

impl Handler<StreamEnded> for Connection {
    type Result = ();

    fn handle(&mut self, msg: StreamEnded, ctx: &mut Self::Context) {
        self.streams.remove(&msg.id);
        if self.streams.is_empty() && (self.ends_with_last_stream || self.teardown.is_some()) {
            ctx.stop();
        }
    }
}

impl Handler<CancelStream> for Connection {
    type Result = ();

    fn handle(&mut self, msg: CancelStream, _ctx: &mut Self::Context) {
        if let Some(stop) = self.streams.get(&msg.id) {
            stop.do_send(StopStream(CloseReason::Cancelled));
        }
    }
}

impl Handler<CloseTransport> for Connection {
    type Result = ();

    fn handle(&mut self, _msg: CloseTransport, ctx: &mut Self::Context) {
        self.tear_down(CloseReason::Disconnected, ctx);
    }
}
