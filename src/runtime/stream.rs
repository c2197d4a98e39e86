use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::prelude::*;
use serde_json::{Map, Value};

use super::connection::{Connection, StreamEnded, StreamSlot};
use super::inbox::{ChannelInbox, InboxStream};
use super::{CloseReason, Limits, Server, StreamPermit};
use crate::mux::Channel;
use tokio::sync::mpsc::error::TrySendError;

use crate::mux::Frame;
use crate::protocol::jsonrpc::{encode_error, encode_result};
use crate::protocol::{McpError, SubscriptionCapabilities, SubscriptionFilter};
use crate::pubsub::Inbox;
use crate::subscription::{Flow, Subscribe, SubscribeCx, SubscriptionHandler};

/// Delivers one application message to a stream's `handle_message`.
pub struct Deliver<M>(pub M);

impl<M: Send + 'static> Message for Deliver<M> {
    type Result = ();
}

/// Asks a stream to end for `reason` (from its connection or its inbox).
#[derive(Message, Clone, Copy, Debug)]
#[rtype(result = "()")]
pub struct StopStream(pub CloseReason);

/// The actor of one `subscriptions/listen` stream.
///
/// | hook | runs |
/// |---|---|
/// | `started` | `subscribe`; on accept the acknowledgement is the first frame, on reject an error answers the listen |
/// | `Handler<Deliver<M>>` | `handle_message` |
/// | `stopping` | `handle_close`, only for teardown from outside |
pub struct Stream<H: SubscriptionHandler> {
    handler: Arc<H>,
    channel: Channel,
    requested: SubscriptionFilter,
    advertised: SubscriptionCapabilities,
    completion: Map<String, Value>,
    /// Boxed: actors must be `Unpin`, handler state need not be.
    state: Option<Box<H::State>>,
    open: bool,
    close: Option<CloseReason>,
    overflowed: Arc<AtomicBool>,
    connection: Addr<Connection>,
    generation: u64,
    pipe: bool,
    server: Server,
    limits: Limits,
    _permit: StreamPermit,
}

/// Everything a stream needs besides its handler.
pub(crate) struct StreamSetup {
    pub(crate) channel: Channel,
    pub(crate) requested: SubscriptionFilter,
    pub(crate) advertised: SubscriptionCapabilities,
    /// The completion result body (`resultType`, `_meta` with the subscription id
    /// and server info).
    pub(crate) completion: Map<String, Value>,
    pub(crate) server: Server,
}

impl<H: SubscriptionHandler> Stream<H> {
    pub(crate) fn new(handler: Arc<H>, setup: StreamSetup, slot: StreamSlot) -> Self {
        let limits = setup.server.limits().clone();
        Stream {
            handler,
            channel: setup.channel,
            requested: setup.requested,
            advertised: setup.advertised,
            completion: setup.completion,
            state: None,
            open: false,
            close: None,
            overflowed: Arc::new(AtomicBool::new(false)),
            connection: slot.connection,
            generation: slot.generation,
            pipe: slot.pipe,
            server: setup.server,
            limits,
            _permit: slot.permit,
        }
    }

    /// Ends the stream with an error reply for the listen id (rejection, panic).
    fn fail(&mut self, ctx: &mut Context<Self>, error: McpError, reason: CloseReason) {
        self.open = false;
        self.close = Some(reason);
        let _ = self
            .channel
            .finish(encode_error(Some(self.channel.id()), &error));
        self.flush_then_stop(ctx);
    }

    /// Ends the stream gracefully with the completion result.
    fn complete(&mut self, ctx: &mut Context<Self>, reason: CloseReason) {
        self.open = false;
        self.close = Some(reason);
        let _ = self
            .channel
            .finish(encode_result(self.channel.id(), &self.completion));
        self.flush_then_stop(ctx);
    }

    /// Ends the stream without a completion result. On HTTP the response body
    /// just ends (the client re-listens). On a pipe shared by many streams the
    /// client could not tell, so an overflow is announced with a final `-32603`
    /// error for the listen id, after the stream's queued frames are dropped.
    fn cut(&mut self, ctx: &mut Context<Self>, reason: CloseReason) {
        self.open = false;
        let reason = *self.close.get_or_insert(reason);
        if reason == CloseReason::Overflow && self.pipe {
            self.channel.revoke();
            let error = McpError::internal(
                "Subscription ended: the client did not keep up (overflow); listen again",
            );
            let frame = Frame::last(encode_error(Some(self.channel.id()), &error));
            if let Err(TrySendError::Full(frame)) = self.channel.outbox().try_send(frame) {
                let (outbox, stall) = (self.channel.outbox().clone(), self.limits.stall_timeout);
                actix_rt::spawn(async move {
                    let _ = tokio::time::timeout(stall, outbox.send(frame)).await;
                });
            }
        } else {
            self.channel.close();
        }
        ctx.stop();
    }

    /// Why the client side is gone: cancelled, or disconnected.
    fn gone(&self) -> CloseReason {
        if self.channel.is_revoked() {
            CloseReason::Cancelled
        } else {
            CloseReason::Disconnected
        }
    }

    /// Moves spilled frames into the outbox, pausing the stream (no further
    /// message is handled) until there is room, for at most the stall timeout;
    /// then runs `then` with `Err(reason)` if the client went away (`Disconnected`)
    /// or did not make room in time (`Overflow`).
    fn drain_then(
        &mut self,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, &mut Context<Self>, Result<(), CloseReason>) + 'static,
    ) {
        if !self.channel.has_pending() {
            return then(self, ctx, Ok(()));
        }
        let channel = self.channel.clone();
        let stall = self.limits.stall_timeout;
        ctx.wait(
            async move { tokio::time::timeout(stall, channel.flush()).await }
                .into_actor(self)
                .map(move |res, act, ctx| {
                    let outcome = match res {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(_)) => Err(act.gone()),
                        Err(_elapsed) => Err(CloseReason::Overflow),
                    };
                    then(act, ctx, outcome)
                }),
        );
    }

    /// Ends the stream once its last frame is in the outbox.
    fn flush_then_stop(&mut self, ctx: &mut Context<Self>) {
        self.drain_then(ctx, |act, ctx, outcome| {
            if let Err(reason) = outcome {
                act.close = Some(reason);
            }
            ctx.stop();
        });
    }

    /// After a callback sent frames: notice overflow or a gone client, and wait for
    /// outbox room if frames spilled.
    fn after_send(&mut self, ctx: &mut Context<Self>) {
        if self.channel.is_overflowed() {
            return self.cut(ctx, CloseReason::Overflow);
        }
        if self.channel.is_closed() {
            return self.cut(ctx, self.gone());
        }
        self.drain_then(ctx, |act, ctx, outcome| {
            if let Err(reason) = outcome {
                act.cut(ctx, reason);
            }
        });
    }

    fn on_message(&mut self, msg: H::Message, ctx: &mut Context<Self>) {
        if !self.open {
            return;
        }
        if self.overflowed.load(Ordering::Acquire) {
            return self.cut(ctx, CloseReason::Overflow);
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
        ctx.set_mailbox_capacity(self.limits.mailbox_capacity);
        // Application events arrive through a bounded channel attached to this
        // actor as a stream (after the acknowledgement), not through the actix
        // mailbox: `Inbox::send` then waits for room only, so a publisher can
        // pipeline instead of waiting for each handle_message.
        let (tx, rx) = tokio::sync::mpsc::channel(self.limits.mailbox_capacity.max(1));
        let inbox = Inbox::from_sink(Arc::new(ChannelInbox {
            tx,
            control: ctx.address().recipient(),
            overflowed: self.overflowed.clone(),
        }));
        let mut cx = SubscribeCx::new(&self.channel, inbox);
        let handler = &self.handler;
        let requested = &self.requested;
        let outcome = catch_unwind(AssertUnwindSafe(|| handler.subscribe(requested, &mut cx)));
        let SubscribeCx {
            self_messages,
            streams,
            ..
        } = cx;
        let (wanted, state) = match outcome {
            Ok(Subscribe::Accept(state)) => (self.requested.clone(), state),
            Ok(Subscribe::Narrow(filter, state)) => (filter.intersect(&self.requested), state),
            Ok(Subscribe::Reject(error)) => {
                tracing::debug!(id = %self.channel.id(), %error, "listen rejected");
                return self.fail(ctx, error, CloseReason::Rejected);
            }
            Err(_) => {
                tracing::error!(id = %self.channel.id(), "subscribe panicked; rejecting the listen");
                return self.fail(
                    ctx,
                    McpError::internal("Internal error: subscription handler failed"),
                    CloseReason::Panicked,
                );
            }
        };
        let honoured = wanted.allowed_by(&self.advertised);
        let empty = honoured.is_empty();
        if self.channel.acknowledge(honoured).is_err() {
            return self.cut(ctx, CloseReason::Disconnected);
        }
        if empty {
            // Nothing to deliver: acknowledged, then completed at once.
            drop(state);
            return self.complete(ctx, CloseReason::Completed);
        }
        self.state = Some(Box::new(state));
        self.open = true;
        for msg in self_messages {
            ctx.notify(Deliver(msg));
        }
        ctx.add_stream(InboxStream(rx));
        for events in streams {
            ctx.add_stream(events);
        }
        // On a shared pipe the ack itself may have spilled: move it out now rather
        // than at the first event.
        self.after_send(ctx);
    }

    fn stopping(&mut self, _ctx: &mut Self::Context) -> Running {
        let reason = *self.close.get_or_insert(if self.server.is_shutting_down() {
            CloseReason::Shutdown
        } else {
            CloseReason::Disconnected
        });
        self.open = false;
        self.channel.close();
        if reason.is_external()
            && let Some(state) = self.state.take()
        {
            let handler = &self.handler;
            let channel = &self.channel;
            if catch_unwind(AssertUnwindSafe(|| handler.handle_close(channel, *state))).is_err() {
                tracing::error!(id = %self.channel.id(), "handle_close panicked");
            }
        }
        Running::Stop
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        let reason = self.close.unwrap_or(CloseReason::Disconnected);
        if reason == CloseReason::Overflow {
            tracing::warn!(id = %self.channel.id(), "stream closed: client not keeping up (overflow)");
        } else {
            tracing::debug!(id = %self.channel.id(), reason = reason.as_str(), "stream closed");
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

impl<H: SubscriptionHandler> StreamHandler<H::Message> for Stream<H> {
    fn handle(&mut self, msg: H::Message, ctx: &mut Self::Context) {
        self.on_message(msg, ctx);
    }

    fn finished(&mut self, _ctx: &mut Self::Context) {
        // An attached event stream ending does not end the subscription.
    }
}

impl<H: SubscriptionHandler> Handler<StopStream> for Stream<H> {
    type Result = ();

    fn handle(&mut self, msg: StopStream, ctx: &mut Self::Context) {
        if self.close.is_some() {
            return;
        }
        match msg.0 {
            CloseReason::Shutdown if self.open => {
                // Graceful: completion result, then handle_close (keep the state).
                self.open = false;
                self.close = Some(CloseReason::Shutdown);
                let _ = self
                    .channel
                    .finish(encode_result(self.channel.id(), &self.completion));
                self.flush_then_stop(ctx);
            }
            reason => self.cut(ctx, reason),
        }
    }
}
