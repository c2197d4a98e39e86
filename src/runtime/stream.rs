use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use actix::prelude::*;

use super::connection::{Connection, StreamEnded, StreamSlot};
use super::conventions::{NetworkTransport, SessionLabels};
use super::inbox::Feed;
use super::{CloseReason, Limits, Server, StreamPermit};
use crate::mux::{Channel, ChannelError};
use crate::protocol::jsonrpc::encode_error;
use crate::protocol::{McpError, SubscriptionCapabilities, SubscriptionFilter};
use crate::pubsub::Inbox;
use crate::subscription::{Flow, Subscribe, SubscribeCx, SubscriptionHandler};

mod handoff;
mod uri_change;
pub(crate) use handoff::{Probe, Settle};
pub(crate) use uri_change::{ChangeUri, SessionStreamControl, UriOutcome};

/// Delivers one application message to a stream's `handle_message`, through
/// the actor's own mailbox. The runtime feeds streams through their bounded
/// inbox instead ([`crate::pubsub::Inbox`], `notify_self` and attached streams
/// included), which pauses while the stream waits for outbox room; a
/// `Deliver` sent to a paused stream is handled at once, so prefer the inbox.
pub struct Deliver<M>(pub M);

impl<M: Send + 'static> Message for Deliver<M> {
    type Result = ();
}

/// Asks a stream to end for `reason` (from its connection).
#[derive(Message, Clone, Copy, Debug)]
#[rtype(result = "()")]
pub struct StopStream(pub CloseReason);

/// Where a stream is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// `started` has not acknowledged yet.
    Starting,
    /// Acknowledged: events are handled.
    Open,
    /// Its one final frame is queued (completion result or error): once that
    /// frame is in the outbox the actor stops. Nothing else is handled.
    Closing,
    /// Stopping; nothing more is written.
    Done,
}

/// The span name of a 2025-era session's stream (the HTTP GET stream, or the
/// stdio session's).
const GET_STREAM_SPAN: &str = "session stream";

/// The span of one stream, for its life: the method, the subscription id
/// (the listen request's id), the principal when the server names one, and
/// the close reason and frame count, recorded when the stream stops; with the
/// OpenTelemetry MCP conventions' attributes and the caller's `traceparent`
/// as its parent (from the channel's `_meta`, where the HTTP transport
/// copies the `traceparent` header of a listen whose `_meta` has none, and of
/// a 2025-era GET). The honoured filter (`genmcp.stream.filter`) is recorded
/// as a summary once acknowledged (its kinds and how many URIs and task ids,
/// never the URIs themselves). A 2025-era GET stream's span is named
/// [`GET_STREAM_SPAN`], without `mcp.method.name` or `jsonrpc.request.id`.
fn stream_span(
    server: &Server,
    channel: &Channel,
    pipe: bool,
    kind: &'static str,
    version: &'static str,
) -> tracing::Span {
    let transport = if pipe {
        NetworkTransport::Pipe
    } else {
        NetworkTransport::Tcp
    };
    let span = tracing::info_span!(
        "stream",
        method = tracing::field::Empty,
        subscription_id = %channel.id(),
        principal = tracing::field::Empty,
        reason = tracing::field::Empty,
        frames = tracing::field::Empty,
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = tracing::field::Empty,
        mcp.protocol.version = version,
        jsonrpc.request.id = tracing::field::Empty,
        network.transport = transport.as_str(),
        genmcp.stream.filter = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    if !span.is_disabled() {
        if kind == "get" {
            // A 2025-era session's GET stream: no JSON-RPC request opened
            // it (its id is genmcp's own), so no method (genmcp's or the
            // conventions') or request id.
            span.record("otel.name", GET_STREAM_SPAN);
        } else {
            span.record("method", crate::protocol::methods::LISTEN);
            span.record("otel.name", crate::protocol::methods::LISTEN);
            span.record("mcp.method.name", crate::protocol::methods::LISTEN);
            span.record(
                "jsonrpc.request.id",
                tracing::field::display(super::operation::IdAttr(channel.id())),
            );
        }
        if let Some(principal) = server.principal(channel.assigns()) {
            span.record("principal", principal.as_str());
        }
        if let Some(trace) =
            crate::protocol::trace_context::TraceContext::from_meta(&channel.meta().extra)
        {
            super::operation::set_parent(&span, &trace);
        }
    }
    span
}

/// A bounded summary of a filter for a span: its kinds, and how many URIs
/// and task ids (never the URIs or ids themselves).
fn filter_summary(filter: &SubscriptionFilter) -> String {
    let mut parts: Vec<String> = Vec::new();
    if filter.tools_list_changed {
        parts.push("toolsListChanged".into());
    }
    if filter.prompts_list_changed {
        parts.push("promptsListChanged".into());
    }
    if filter.resources_list_changed {
        parts.push("resourcesListChanged".into());
    }
    if !filter.resource_subscriptions.is_empty() {
        parts.push(format!(
            "resourceSubscriptions:{}",
            filter.resource_subscriptions.len()
        ));
    }
    if !filter.task_ids.is_empty() {
        parts.push(format!("taskIds:{}", filter.task_ids.len()));
    }
    parts.join(",")
}

/// The actor of one `subscriptions/listen` stream.
///
/// | hook | runs |
/// |---|---|
/// | `started` | `subscribe`; on accept the acknowledgement is the first frame, on reject an error answers the listen |
/// | `Handler<Deliver<M>>` and the inbox feed | `handle_message` |
/// | `stopping` | `handle_close`, only for teardown from outside (see [`CloseReason::is_external`]) |
///
/// Every acknowledged stream ends with exactly one final frame (its completion
/// result or an error for the listen id) or, when the client has gone, with
/// none; nothing follows the final frame. While frames wait for outbox room the
/// stream stops taking events (back-pressure), but its mailbox stays open, so
/// a teardown is never held up behind a slow client.
pub struct Stream<H: SubscriptionHandler> {
    handler: Arc<H>,
    channel: Channel,
    requested: SubscriptionFilter,
    advertised: SubscriptionCapabilities,
    /// The completion result, encoded.
    completion: Box<[u8]>,
    /// Run once the stream is open.
    on_open: Option<OnOpen>,
    /// Boxed: actors must be `Unpin`, handler state need not be.
    state: Option<Box<H::State>>,
    /// The stream's inbox, for a handler joining a source after `subscribe`
    /// ([`SubscriptionHandler::change_uri`]); set once acknowledged.
    inbox: Option<Inbox<H::Message>>,
    /// The buses its inbox joined (for a handoff); set once acknowledged.
    taps: Option<Arc<crate::pubsub::Taps<H::Message>>>,
    handoff: handoff::Handoff,
    phase: Phase,
    close: Option<CloseReason>,
    /// A spill drain is running: no event is handled until it ends.
    draining: bool,
    connection: Addr<Connection>,
    generation: u64,
    pipe: bool,
    server: Server,
    limits: Limits,
    /// Method, subscription id, principal; the close reason once it ends.
    /// Entered around the lifecycle hooks (`subscribe`, a stop request,
    /// `handle_close`, the close log), not per event: the event path stays as
    /// cheap as it was.
    span: tracing::Span,
    /// When the stream started, for `mcp.server.session.duration`.
    opened: std::time::Instant,
    /// `listen`, or `get` for a 2025-era GET stream.
    kind: &'static str,
    /// The bounded protocol version label.
    version: &'static str,
    _permit: StreamPermit,
}

/// Run once a stream is acknowledged and open, with its channel (e.g. to make
/// it hear its honoured task ids).
pub(crate) type OnOpen = Box<dyn FnOnce(&Channel) + Send>;

/// Everything a stream needs besides its handler.
pub(crate) struct StreamSetup {
    pub(crate) channel: Channel,
    pub(crate) requested: SubscriptionFilter,
    pub(crate) advertised: SubscriptionCapabilities,
    /// The encoded completion result (`resultType`, `_meta` with the
    /// subscription id and server info); empty for a 2025-era GET stream.
    pub(crate) completion: Box<[u8]>,
    pub(crate) server: Server,
    /// Run once the stream is open.
    pub(crate) on_open: Option<OnOpen>,
    /// The bounded protocol version label of a 2025-era GET stream's
    /// session (its channel's `_meta` is the translated 2026-07-28 one);
    /// `None` for a listen (its channel's version).
    pub(crate) version: Option<&'static str>,
}

impl<H: SubscriptionHandler> Stream<H> {
    pub(crate) fn new(handler: Arc<H>, setup: StreamSetup, slot: StreamSlot) -> Self {
        let limits = setup.server.limits().clone();
        // A 2025-era GET stream (no completion frame) serves a translated
        // session: its negotiated version is the session's.
        let (kind, version) = if setup.completion.is_empty() {
            ("get", setup.version.unwrap_or(super::conventions::OTHER))
        } else {
            (
                "listen",
                super::conventions::version_label(&setup.channel.meta().protocol_version, &[]),
            )
        };
        let span = stream_span(&setup.server, &setup.channel, slot.pipe, kind, version);
        Stream {
            handler,
            channel: setup.channel,
            requested: setup.requested,
            advertised: setup.advertised,
            completion: setup.completion,
            on_open: setup.on_open,
            state: None,
            inbox: None,
            taps: None,
            handoff: handoff::Handoff::default(),
            phase: Phase::Starting,
            close: None,
            draining: false,
            connection: slot.connection,
            generation: slot.generation,
            pipe: slot.pipe,
            server: setup.server,
            limits,
            span,
            opened: std::time::Instant::now(),
            kind,
            version,
            _permit: slot.permit,
        }
    }

    pub(crate) fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Whether the feed may hand this stream another event.
    pub(crate) fn accepts_messages(&self) -> bool {
        self.phase == Phase::Open && !self.draining
    }

    /// Whether the feed can end.
    pub(crate) fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Closing | Phase::Done)
    }

    /// Ends the stream with `bytes` as its final frame: the completion result or
    /// an error for the listen id. A stream whose spill is full cannot queue it
    /// and is cut as `Overflow` instead (on a pipe that too ends the id).
    fn finish(&mut self, ctx: &mut Context<Self>, bytes: Vec<u8>, reason: CloseReason) {
        if self.phase == Phase::Done || self.phase == Phase::Closing {
            return;
        }
        match self.channel.finish(bytes) {
            Ok(()) => {
                self.phase = Phase::Closing;
                self.close = Some(reason);
                self.settle(ctx);
            }
            Err(ChannelError::Overflow) => self.cut(ctx, CloseReason::Overflow),
            Err(_) => self.cut(ctx, self.gone()),
        }
    }

    /// Records a listen's answer (its acknowledgement, or `error`) in
    /// `mcp.server.operation.duration`, from the stream's start. A 2025-era
    /// GET stream answers no request: nothing is recorded.
    fn record_answer(&self, error: Option<&McpError>) {
        if self.kind != "listen" {
            return;
        }
        let transport = if self.pipe {
            NetworkTransport::Pipe
        } else {
            NetworkTransport::Tcp
        };
        self.server.conventions().record_operation(
            super::conventions::OperationLabels {
                method: crate::protocol::methods::LISTEN,
                tool: std::borrow::Cow::Borrowed(""),
                error_type: error.map_or("", super::conventions::error_type),
                transport,
                version: self.version,
            },
            self.opened.elapsed(),
        );
    }

    /// Ends the stream with an error reply for the listen id (rejection, panic).
    fn fail(&mut self, ctx: &mut Context<Self>, error: McpError, reason: CloseReason) {
        let bytes = encode_error(Some(self.channel.id()), &error);
        self.finish(ctx, bytes, reason);
    }

    /// Ends the stream gracefully with the completion result.
    fn complete(&mut self, ctx: &mut Context<Self>, reason: CloseReason) {
        let bytes = std::mem::take(&mut self.completion).into_vec();
        self.finish(ctx, bytes, reason);
    }

    /// Ends the stream without a completion result. On HTTP the response body
    /// just ends (the client re-listens). On a pipe shared by many streams the
    /// client could not tell, so an overflow is announced with a final `-32603`
    /// error for the listen id, after the stream's queued frames are dropped;
    /// the id stays taken until that error is in the outbox.
    fn cut(&mut self, ctx: &mut Context<Self>, reason: CloseReason) {
        if self.phase == Phase::Done {
            return;
        }
        let reason = *self.close.get_or_insert(reason);
        if reason == CloseReason::Overflow && self.pipe && self.phase != Phase::Closing {
            let error = McpError::internal(
                "Subscription ended: the client did not keep up (overflow); listen again",
            );
            if self
                .channel
                .end_overflowed(encode_error(Some(self.channel.id()), &error))
                .is_ok()
            {
                self.phase = Phase::Closing;
                return self.settle(ctx);
            }
        }
        self.phase = Phase::Done;
        self.channel.close();
        ctx.stop();
    }

    /// The spill could not be drained: ends the stream for `reason`. A final
    /// frame still waiting there is lost with it, so the close is counted by
    /// what the client got (`reason`), not by the end the stream was heading
    /// for (a completion the client never saw is not `Completed`).
    fn lose_final(&mut self, ctx: &mut Context<Self>, reason: CloseReason) {
        if self.phase == Phase::Closing
            && let Some(meant) = self.close.replace(reason)
            && meant != reason
        {
            tracing::debug!(
                meant = meant.as_str(),
                "the final frame was dropped: it never reached the outbox"
            );
        }
        self.cut(ctx, reason);
    }

    /// Why the client side is gone: cancelled, or disconnected.
    fn gone(&self) -> CloseReason {
        if self.channel.is_revoked() {
            CloseReason::Cancelled
        } else {
            CloseReason::Disconnected
        }
    }

    /// After frames were queued: stop if the final frame is in the outbox, drain
    /// the spill if frames wait there.
    fn settle(&mut self, ctx: &mut Context<Self>) {
        if self.channel.has_pending() {
            self.start_drain(ctx);
        } else if self.phase == Phase::Closing {
            self.phase = Phase::Done;
            ctx.stop();
        }
    }

    /// Moves spilled frames into the outbox while the stream takes no events.
    /// Ordinary frames wait at most the stall timeout (then `Overflow`); the
    /// final frame on a pipe waits as long as the pipe lives, because the id
    /// must be ended there.
    fn start_drain(&mut self, ctx: &mut Context<Self>) {
        if self.draining {
            return;
        }
        self.draining = true;
        let channel = self.channel.clone();
        let stall = if self.phase == Phase::Closing && self.pipe {
            None
        } else {
            Some(self.limits.stall_timeout)
        };
        ctx.spawn(
            async move {
                match stall {
                    Some(stall) => tokio::time::timeout(stall, channel.flush())
                        .await
                        .unwrap_or(Err(ChannelError::Overflow)),
                    None => channel.flush().await,
                }
            }
            .into_actor(self)
            .map(|outcome, act, ctx| {
                act.draining = false;
                match outcome {
                    Ok(()) => {
                        act.settle(ctx);
                        // Events may be waiting: let the feed look again.
                        act.channel.wake_attention();
                    }
                    Err(ChannelError::Overflow) if act.phase == Phase::Closing && act.pipe => {
                        act.start_drain(ctx)
                    }
                    Err(ChannelError::Overflow) => act.lose_final(ctx, CloseReason::Overflow),
                    Err(_) => act.lose_final(ctx, act.gone()),
                }
            }),
        );
    }

    /// Called by the feed on every wake-up: frames spilled (from a background
    /// clone of the channel too) are drained now, not at the next event.
    pub(crate) fn on_attention(&mut self, ctx: &mut Context<Self>) {
        if self.phase == Phase::Open {
            self.after_send(ctx);
        }
    }

    /// Called by the feed when a sender found the mailbox full.
    pub(crate) fn on_inbox_overflow(&mut self, ctx: &mut Context<Self>) {
        if self.phase == Phase::Open {
            self.cut(ctx, CloseReason::Overflow);
        }
    }

    /// Called by the feed when the event source asked the stream to complete
    /// ([`Inbox::complete`]): the same end as a handler's `Flow::Stop`.
    pub(crate) fn on_inbox_completed(&mut self, ctx: &mut Context<Self>) {
        if self.phase == Phase::Open {
            tracing::debug!(id = %self.channel.id(), "event source completed the stream");
            self.state = None;
            self.complete(ctx, CloseReason::Completed);
        }
    }

    /// After a callback sent frames: notice overflow or a gone client, and wait for
    /// outbox room if frames spilled.
    #[inline]
    fn after_send(&mut self, ctx: &mut Context<Self>) {
        if self.channel.is_overflowed() {
            return self.cut(ctx, CloseReason::Overflow);
        }
        if self.channel.is_closed() {
            return self.cut(ctx, self.gone());
        }
        if self.channel.has_pending() {
            self.start_drain(ctx);
        }
    }

    pub(crate) fn on_message(&mut self, msg: H::Message, ctx: &mut Context<Self>) {
        if self.phase != Phase::Open {
            return;
        }
        let Some(state) = self.state.as_mut() else {
            return;
        };
        let handler = &self.handler;
        let channel = &self.channel;
        match catch_unwind(AssertUnwindSafe(|| {
            handler.handle_message(msg, channel, &mut **state)
        })) {
            Ok(Flow::Continue) => self.after_send(ctx),
            Ok(Flow::Stop(reason)) => {
                tracing::debug!(id = %self.channel.id(), reason = %reason.0, "handler stopped the stream");
                self.state = None;
                self.complete(ctx, CloseReason::Completed);
            }
            Err(_) => {
                tracing::error!(id = %self.channel.id(), "handle_message panicked; ending this stream");
                self.state = None;
                self.fail(
                    ctx,
                    McpError::internal("Internal error: subscription handler failed"),
                    CloseReason::Panicked,
                );
            }
        }
    }
}

impl<H: SubscriptionHandler> Actor for Stream<H> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _entered = span.enter();
        ctx.set_mailbox_capacity(self.limits.mailbox_capacity);
        // Application events arrive through a bounded channel fed to this actor
        // by its own future (not the actix mailbox): `Inbox::send` then waits
        // for room only, so a publisher can pipeline instead of waiting for
        // each handle_message, and a wake-up handles every ready event.
        let (inbox, rx, overflow, taps) = Inbox::channel(self.limits.mailbox_capacity);
        let mut cx = SubscribeCx::new(&self.channel, inbox.clone());
        let handler = &self.handler;
        // Only needed here: not kept for the stream's life. The task ids were
        // checked already (the caller's own, known tasks); they are the
        // runtime's, not the handler's, to honour.
        let mut requested = std::mem::take(&mut self.requested);
        let task_ids = std::mem::take(&mut requested.task_ids);
        let requested = &requested;
        let frames_before = self.channel.frames_queued();
        // A listen for task ids alone, or for nothing from a handler that
        // advertises nothing (a suite served for its tasks), asks nothing of
        // the handler: its `subscribe` is not called (nor `handle_message`).
        let outcome = if requested.is_empty() && (!task_ids.is_empty() || !self.advertised.any()) {
            Ok(None)
        } else {
            catch_unwind(AssertUnwindSafe(|| handler.subscribe(requested, &mut cx))).map(Some)
        };
        let SubscribeCx {
            self_messages,
            streams,
            ..
        } = cx;
        self.handoff.bus_only = self_messages.is_empty()
            && streams.is_empty()
            && self.channel.frames_queued() == frames_before;
        let (wanted, state) = match outcome {
            Ok(None) => (SubscriptionFilter::default(), None),
            Ok(Some(Subscribe::Accept(state))) => (requested.clone(), Some(state)),
            Ok(Some(Subscribe::Narrow(filter, state))) => {
                (filter.intersect(requested), Some(state))
            }
            Ok(Some(Subscribe::Reject(error))) => {
                tracing::debug!(%error, "listen rejected");
                self.record_answer(Some(&error));
                return self.fail(ctx, error, CloseReason::Rejected);
            }
            Err(_) => {
                tracing::error!("subscribe panicked; rejecting the listen");
                let error = McpError::internal("Internal error: subscription handler failed");
                self.record_answer(Some(&error));
                return self.fail(ctx, error, CloseReason::Panicked);
            }
        };
        let mut honoured = wanted.allowed_by(&self.advertised);
        honoured.task_ids = task_ids;
        let empty = honoured.is_empty();
        if !self.span.is_disabled() {
            self.span
                .record("genmcp.stream.filter", filter_summary(&honoured).as_str());
        }
        // The state joined the application's event source: from here on a
        // teardown from outside hands it to handle_close, even if the
        // acknowledgement cannot be written.
        self.state = state.map(Box::new);
        if self.channel.acknowledge(honoured).is_err() {
            return self.cut(ctx, self.gone());
        }
        self.record_answer(None);
        if empty {
            // Nothing to deliver: acknowledged, then completed at once.
            self.state = None;
            self.phase = Phase::Open;
            return self.complete(ctx, CloseReason::Completed);
        }
        self.phase = Phase::Open;
        self.inbox = Some(inbox);
        self.taps = Some(taps.clone());
        // `notify_self` messages and attached streams are fed by the same
        // future as the inbox, so they pause with it while the spill drains.
        ctx.spawn(Feed::new(rx, overflow, taps, self_messages, streams));
        if let Some(on_open) = self.on_open.take() {
            on_open(&self.channel);
        }
        // On a shared pipe the ack itself may have spilled: move it out now rather
        // than at the first event.
        self.after_send(ctx);
    }

    fn stopping(&mut self, _ctx: &mut Self::Context) -> Running {
        let span = self.span.clone();
        let _entered = span.enter();
        let reason = *self.close.get_or_insert(if self.server.is_shutting_down() {
            CloseReason::Shutdown
        } else {
            CloseReason::Disconnected
        });
        self.phase = Phase::Done;
        self.channel.close();
        if reason.is_external()
            && let Some(state) = self.state.take()
        {
            let handler = &self.handler;
            let channel = &self.channel;
            if catch_unwind(AssertUnwindSafe(|| handler.handle_close(channel, *state))).is_err() {
                tracing::error!("handle_close panicked");
            }
        }
        Running::Stop
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        let reason = self.close.unwrap_or(CloseReason::Disconnected);
        self.span.record("reason", reason.as_str());
        let error_type = match reason {
            CloseReason::Overflow | CloseReason::Panicked | CloseReason::Rejected => {
                reason.as_str()
            }
            _ => "",
        };
        if !self.span.is_disabled() {
            self.span.record("frames", self.channel.frames_queued());
            if !error_type.is_empty() {
                self.span.record("error.type", error_type);
                self.span.record("otel.status_code", "ERROR");
            }
        }
        self.server.conventions().record_session(
            SessionLabels {
                kind: self.kind,
                error_type,
                transport: if self.pipe {
                    NetworkTransport::Pipe
                } else {
                    NetworkTransport::Tcp
                },
                version: self.version,
            },
            self.opened.elapsed(),
        );
        let _entered = self.span.enter();
        if reason == CloseReason::Overflow {
            tracing::warn!("stream closed: client not keeping up (overflow)");
        } else {
            tracing::debug!("stream closed");
        }
        self.server.record_close(reason);
        self.connection.do_send(StreamEnded {
            id: self.channel.id().clone(),
            generation: self.generation,
        });
    }
}

impl<H: SubscriptionHandler> Handler<Deliver<H::Message>> for Stream<H> {
    type Result = ();

    fn handle(&mut self, msg: Deliver<H::Message>, ctx: &mut Self::Context) {
        self.on_message(msg.0, ctx);
    }
}

impl<H: SubscriptionHandler> Handler<StopStream> for Stream<H> {
    type Result = ();

    fn handle(&mut self, msg: StopStream, ctx: &mut Self::Context) {
        let span = self.span.clone();
        let _entered = span.enter();
        match (msg.0, self.phase) {
            (_, Phase::Done) => {}
            // The client is gone or cancelled: whatever was queued, stop now.
            (reason @ (CloseReason::Disconnected | CloseReason::Cancelled), _) => {
                self.close = Some(reason);
                self.phase = Phase::Done;
                self.channel.close();
                ctx.stop();
            }
            // Already ending with its final frame.
            (_, Phase::Closing) => {}
            // Graceful: completion result, then handle_close (the state is kept).
            (CloseReason::Shutdown, Phase::Open) => self.complete(ctx, CloseReason::Shutdown),
            (reason, _) => self.cut(ctx, reason),
        }
    }
}
