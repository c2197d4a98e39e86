//! The subscription handler: the application's side of a `subscriptions/listen` stream.
//!
//! A handler has four callbacks. [`SubscriptionHandler::subscribe`] accepts,
//! narrows or rejects a listen request and joins the application's event source;
//! [`SubscriptionHandler::handle_message`] turns each event into notifications;
//! [`SubscriptionHandler::handle_close`] cleans up when the stream is torn down
//! from the outside; [`SubscriptionHandler::subscription_capabilities`] declares
//! what `server/discover` advertises. The runtime, never the handler, sends the
//! acknowledgement first and the completion result last.
//!
//! ```
//! use genmcp::prelude::*;
//!
//! /// Forwards "tools changed" events from the app's bus to every listening client.
//! struct ToolChanges { bus: Bus<()> }
//!
//! impl SubscriptionHandler for ToolChanges {
//!     type Message = ();
//!     type State = Option<BusSubscription<()>>;
//!
//!     fn subscribe(&self, filter: &SubscriptionFilter, cx: &mut SubscribeCx<'_, ()>) -> Subscribe<Self::State> {
//!         if !filter.tools_list_changed {
//!             // Nothing we serve was asked for: acknowledged, then completed at once.
//!             return Subscribe::Accept(None);
//!         }
//!         Subscribe::Accept(Some(self.bus.subscribe("tools", cx.inbox())))
//!     }
//!
//!     fn handle_message(&self, _msg: (), channel: &Channel, _state: &mut Self::State) -> Flow {
//!         match channel.send_notification(Notification::tools_list_changed()) {
//!             Ok(()) => Flow::Continue,
//!             Err(_) => Flow::stop("client gone"),
//!         }
//!     }
//!
//!     fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
//!         SubscriptionCapabilities::none().with_tools_list_changed(true)
//!     }
//! }
//! ```

use std::pin::Pin;

use crate::mux::{Assigns, Channel};
use crate::protocol::{
    McpError, RequestId, RequestMeta, SubscriptionCapabilities, SubscriptionFilter,
};
use crate::pubsub::Inbox;

/// A boxed, local stream of messages attached to a subscription stream.
pub type EventStream<M> = Pin<Box<dyn futures_util::Stream<Item = M>>>;

/// What [`SubscriptionHandler::subscribe`] decided.
#[derive(Debug)]
#[non_exhaustive]
pub enum Subscribe<S> {
    /// Accept the request as asked (clamped to what the server advertises).
    Accept(S),
    /// Accept only this filter; it is clamped to the request and to what the
    /// server advertises, so it can narrow but never widen.
    Narrow(SubscriptionFilter, S),
    /// Refuse: no stream opens, no acknowledgement is sent, the client gets `error`.
    Reject(McpError),
}

/// A change of a 2025-era session's `resources/subscribe` set while its
/// stream runs; see [`SubscriptionHandler::change_uri`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UriChange<'a> {
    /// `resources/subscribe`: the session wants this URI's updates.
    Subscribed(&'a str),
    /// `resources/unsubscribe`: the stream no longer delivers this URI's updates.
    Unsubscribed(&'a str),
}

/// How [`SubscriptionHandler::change_uri`] took a change.
#[derive(Debug)]
#[non_exhaustive]
pub enum UriChanged {
    /// Taken in place: the stream now serves (or no longer serves) the URI.
    Applied,
    /// The stream does not serve this URI, as [`Subscribe::Narrow`] would
    /// decide: the request still succeeds, no update for it follows.
    Declined,
    /// Open a new stream with the session's whole set, then stop this one.
    Restart,
    /// Refuse the `resources/subscribe`: the client gets `error`, the
    /// session's set is left as it was.
    Reject(McpError),
}

/// Why a handler ended its stream. Goes to logs and metrics, never to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReason(pub String);

/// What [`SubscriptionHandler::handle_message`] wants next.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flow {
    /// Keep the stream open.
    Continue,
    /// End the stream gracefully: the runtime sends the completion result and
    /// `handle_close` does not run.
    Stop(StopReason),
}

impl Flow {
    /// `Flow::Stop` with a reason.
    pub fn stop(reason: impl Into<String>) -> Flow {
        Flow::Stop(StopReason(reason.into()))
    }
}

/// The application side of `subscriptions/listen` streams. One value serves every
/// stream; per-stream state lives in [`SubscriptionHandler::State`], owned by the
/// stream's actor (it need not be `Send`).
///
/// A panic in any callback is caught: it ends that stream only (with a `-32603`
/// error), never the worker thread, the connection or other streams.
pub trait SubscriptionHandler: Send + Sync + 'static {
    /// What the application's event source delivers to a stream.
    type Message: Send + 'static;
    /// Per-stream state.
    type State: 'static;

    /// Accepts, narrows or rejects a listen request and joins the event source
    /// (register [`SubscribeCx::inbox`] with it). No notification can be sent
    /// from here: the acknowledgement must come first.
    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, Self::Message>,
    ) -> Subscribe<Self::State>;

    /// Turns one event into notifications on `channel`, then continues or stops.
    fn handle_message(
        &self,
        msg: Self::Message,
        channel: &Channel,
        state: &mut Self::State,
    ) -> Flow;

    /// Cleans up when the stream is torn down from the outside (client gone,
    /// cancelled, connection closed, server shutdown). Not called after
    /// [`Flow::Stop`], a rejection or a panic. The channel is already closed.
    fn handle_close(&self, _channel: &Channel, _state: Self::State) {}

    /// A 2025-era session subscribed to or unsubscribed from one resource URI
    /// while its stream runs (`resources/subscribe`, `resources/unsubscribe`).
    /// `inbox` is the stream's, to join a source the stream did not need
    /// before.
    ///
    /// For [`UriChange::Subscribed`] the URI is served once this returns
    /// [`UriChanged::Applied`]. For [`UriChange::Unsubscribed`] the runtime has
    /// already stopped the URI's updates (the handler cannot keep them); this
    /// call is for leaving sources, and only a panic is heard.
    ///
    /// The default answers [`UriChanged::Restart`] to a subscribe: the runtime
    /// then opens a new stream with the session's whole set (`subscribe` runs
    /// with it) and stops the old one (its `handle_close` runs), which costs a
    /// copy of the set per change. Implement it to take one URI in place.
    fn change_uri(
        &self,
        change: UriChange<'_>,
        _channel: &Channel,
        _inbox: &Inbox<Self::Message>,
        _state: &mut Self::State,
    ) -> UriChanged {
        match change {
            UriChange::Subscribed(_) => UriChanged::Restart,
            UriChange::Unsubscribed(_) => UriChanged::Applied,
        }
    }

    /// The notification kinds this handler can emit; `server/discover` advertises
    /// them, and listen requests are clamped to them. Advertises nothing by default.
    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none()
    }
}

/// Setup-only context for [`SubscriptionHandler::subscribe`]: read-only request
/// data, the stream's [`Inbox`], and ways to queue work for after the acknowledgement.
pub struct SubscribeCx<'a, M> {
    id: &'a RequestId,
    meta: &'a RequestMeta,
    assigns: &'a Assigns,
    inbox: Inbox<M>,
    pub(crate) self_messages: Vec<M>,
    pub(crate) streams: Vec<EventStream<M>>,
}

impl<'a, M: Send + 'static> SubscribeCx<'a, M> {
    pub(crate) fn new(channel: &'a Channel, inbox: Inbox<M>) -> Self {
        SubscribeCx {
            id: channel.id(),
            meta: channel.meta(),
            assigns: channel.assigns(),
            inbox,
            self_messages: Vec::new(),
            streams: Vec::new(),
        }
    }

    /// The listen request id (the subscription id).
    pub fn id(&self) -> &RequestId {
        self.id
    }

    /// The request's validated `_meta` (client info, capabilities, version).
    pub fn meta(&self) -> &RequestMeta {
        self.meta
    }

    /// Application data attached to the request (e.g. the principal).
    pub fn assigns(&self) -> &Assigns {
        self.assigns
    }

    /// A `Send + Clone` handle that delivers messages to this stream's
    /// `handle_message`; register it with the event source.
    pub fn inbox(&self) -> Inbox<M> {
        self.inbox.clone()
    }

    /// Queues `msg` for `handle_message` right after the acknowledgement (for an
    /// initial notification).
    pub fn notify_self(&mut self, msg: M) {
        self.self_messages.push(msg);
    }

    /// Attaches a stream of events; each item goes to `handle_message`. The
    /// subscription stream does not end when this stream ends.
    pub fn attach(&mut self, events: impl futures_util::Stream<Item = M> + 'static) {
        self.streams.push(Box::pin(events));
    }
}

/// The handler of a suite without subscriptions: advertises nothing, so
/// `subscriptions/listen` answers `-32601`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSubscriptions;

impl SubscriptionHandler for NoSubscriptions {
    type Message = ();
    type State = ();

    fn subscribe(
        &self,
        _filter: &SubscriptionFilter,
        _cx: &mut SubscribeCx<'_, ()>,
    ) -> Subscribe<()> {
        Subscribe::Reject(McpError::MethodNotFound(
            crate::protocol::methods::LISTEN.into(),
        ))
    }

    fn handle_message(&self, _msg: (), _channel: &Channel, _state: &mut ()) -> Flow {
        Flow::Continue
    }
}
