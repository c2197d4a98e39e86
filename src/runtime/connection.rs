use std::collections::HashMap;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::stream::StopStream;
use super::{CloseReason, Server, StreamPermit};
use crate::mux::{Channel, Outbox};
use crate::protocol::{McpError, RequestId};

/// What a stream gets from the connection that spawns it.
pub struct StreamSlot {
    /// The supervising connection.
    pub connection: Addr<Connection>,
    /// The stream's place in the global limit, released when the stream is dropped.
    pub permit: StreamPermit,
    /// Tells this stream's [`StreamEnded`] from a later stream with the same id.
    pub generation: u64,
    /// Whether the connection is a pipe shared by many streams (stdio), where a
    /// stream cut for overflow must say so with a final error frame.
    pub pipe: bool,
}

/// Spawns one stream actor under a connection and returns its control recipient.
pub type SpawnStream = Box<dyn FnOnce(StreamSlot) -> Recipient<StopStream> + Send>;

/// Asks a connection to open a stream for listen request `id`.
#[derive(Message)]
#[rtype(result = "Result<(), McpError>")]
pub struct OpenStream {
    /// The listen request id.
    pub id: RequestId,
    /// The stream's channel (the connection revokes it on cancel).
    pub channel: Channel,
    /// Starts the stream actor.
    pub spawn: SpawnStream,
    /// The new stream replaces one of the same owner that is stopped as soon
    /// as this one runs (a 2025 GET stream restarted with a new filter): the
    /// per-principal limit allows one more while both run.
    pub replaces: bool,
}

/// Sent by a stream when it has stopped, for any reason.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StreamEnded {
    /// The listen request id.
    pub id: RequestId,
    /// The stream's [`StreamSlot::generation`].
    pub generation: u64,
}

struct Entry {
    generation: u64,
    stop: Recipient<StopStream>,
    channel: Channel,
}

/// Cancels the stream of listen request `id` (stdio `notifications/cancelled`).
/// Unknown ids are ignored.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CancelStream {
    /// The listen request id.
    pub id: RequestId,
}

/// Asks whether listen request `id` holds its id on this connection: its
/// stream is open, or ended with frames still queued. A pipe refuses a request
/// that would reuse it (its answer would pass for the stream's final frame).
#[derive(Message)]
#[rtype(result = "bool")]
pub struct HoldsId {
    /// The request id to look up.
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
///
/// A listen id stays taken until the stream's final frame has been written or
/// dropped, not merely queued: a stream that ended with frames still in the
/// outbox keeps its id (a re-listen is refused as a duplicate, a cancel still
/// suppresses them), so a client never reads an old stream's end after the
/// acknowledgement of a new one with the same id.
pub struct Connection {
    server: Server,
    outbox: Outbox,
    streams: HashMap<RequestId, Entry>,
    /// Ended streams whose frames are still in the outbox (or the writer's
    /// hands), by id. Each holds at least one queued frame, so there are at
    /// most as many as the outbox and one writer batch hold; swept whenever
    /// a stream opens or ends.
    retiring: HashMap<RequestId, Channel>,
    next_generation: u64,
    ends_with_last_stream: bool,
    teardown: Option<CloseReason>,
    /// Whether a server shutdown drives its streams to their end (else its
    /// owner ends them: a fleet GET stream offered to another node).
    ends_on_shutdown: bool,
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
            retiring: HashMap::new(),
            next_generation: 0,
            ends_with_last_stream: true,
            teardown: None,
            ends_on_shutdown: true,
            _done: Some(done),
        }
    }

    /// A server shutdown leaves this connection's streams running: the
    /// caller ends them (a 2025 session's GET stream handed to another node
    /// on a drain).
    #[cfg(feature = "redis")]
    pub(crate) fn outliving_shutdown(mut self) -> Self {
        self.ends_on_shutdown = false;
        self
    }

    /// A long-lived connection (a stdio pipe) carrying many streams.
    pub fn pipe(server: Server, outbox: Outbox) -> Self {
        Connection {
            server,
            outbox,
            streams: HashMap::new(),
            retiring: HashMap::new(),
            next_generation: 0,
            ends_with_last_stream: false,
            teardown: None,
            ends_on_shutdown: true,
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
        for entry in self.streams.values() {
            // One control message per stream; bounded.
            entry.stop.do_send(StopStream(reason));
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
        if self.ends_on_shutdown {
            ctx.spawn(
                self.server
                    .shutdown_signal()
                    .into_actor(self)
                    .map(|(), act, ctx| act.tear_down(CloseReason::Shutdown, ctx)),
            );
        }
    }
}

impl Handler<OpenStream> for Connection {
    type Result = Result<(), McpError>;

    fn handle(&mut self, msg: OpenStream, ctx: &mut Self::Context) -> Self::Result {
        if self.teardown.is_some() || self.server.is_shutting_down() {
            return Err(McpError::internal("Server is shutting down"));
        }
        self.retiring
            .retain(|_, channel| channel.frames_in_flight());
        if self.streams.contains_key(&msg.id) || self.retiring.contains_key(&msg.id) {
            return Err(McpError::InvalidRequest(format!(
                "a subscriptions/listen with id {} is already open",
                msg.id
            )));
        }
        if self.streams.len() >= self.server.limits().max_streams_per_connection {
            return Err(McpError::internal("Subscription limit reached"));
        }
        let owner = crate::mux::limit_key(msg.channel.assigns());
        let permit = self
            .server
            .open_stream(owner.as_deref(), usize::from(msg.replaces))?;
        self.next_generation += 1;
        let generation = self.next_generation;
        let stop = (msg.spawn)(StreamSlot {
            connection: ctx.address(),
            permit,
            generation,
            pipe: !self.ends_with_last_stream,
        });
        self.streams.insert(
            msg.id,
            Entry {
                generation,
                stop,
                channel: msg.channel,
            },
        );
        Ok(())
    }
}

impl Handler<StreamEnded> for Connection {
    type Result = ();

    fn handle(&mut self, msg: StreamEnded, ctx: &mut Self::Context) {
        if self
            .streams
            .get(&msg.id)
            .is_some_and(|e| e.generation == msg.generation)
            && let Some(entry) = self.streams.remove(&msg.id)
        {
            self.retiring
                .retain(|_, channel| channel.frames_in_flight());
            if entry.channel.frames_in_flight() {
                self.retiring.insert(msg.id, entry.channel);
            }
        }
        if self.streams.is_empty() && (self.ends_with_last_stream || self.teardown.is_some()) {
            ctx.stop();
        }
    }
}

impl Handler<CancelStream> for Connection {
    type Result = ();

    fn handle(&mut self, msg: CancelStream, ctx: &mut Self::Context) {
        // Revoke first (outside the stream's mailbox, which may be paused waiting
        // for outbox room): nothing more goes out for this id from now on, and the
        // id is free for a new listen at once. A stream that already ended may
        // still have its final frame queued: revoked too.
        if let Some(entry) = self.streams.remove(&msg.id) {
            entry.channel.revoke();
            entry.stop.do_send(StopStream(CloseReason::Cancelled));
        } else if let Some(channel) = self.retiring.remove(&msg.id) {
            channel.revoke();
        }
        if self.streams.is_empty() && self.teardown.is_some() {
            ctx.stop();
        }
    }
}

impl Handler<HoldsId> for Connection {
    type Result = bool;

    fn handle(&mut self, msg: HoldsId, _ctx: &mut Self::Context) -> bool {
        self.streams.contains_key(&msg.id)
            || self
                .retiring
                .get(&msg.id)
                .is_some_and(Channel::frames_in_flight)
    }
}

impl Handler<CloseTransport> for Connection {
    type Result = ();

    fn handle(&mut self, _msg: CloseTransport, ctx: &mut Self::Context) {
        self.tear_down(CloseReason::Disconnected, ctx);
    }
}
