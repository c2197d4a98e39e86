use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::queue::{TrySendError, WakeSlot};
use serde_json::{Map, Value};

use super::frame::StreamTag;
use super::shared::Kind;
use super::{Assigns, Frame, Outbox, SharedNotification};
use crate::protocol::jsonrpc::encode_notification;
use crate::protocol::{
    LogLevel, Notification, ProgressToken, RequestId, RequestMeta, SubscriptionFilter, keys,
    methods,
};

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const OVERFLOW: u8 = 2;

/// Why a send on a [`Channel`] was refused. Nothing refused is written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// The request has ended or the client has gone.
    #[error("channel closed: the request has ended or the client has gone")]
    Closed,
    /// The stream's outbox and its spill queue are full: the stream is being ended
    /// with the close reason `Overflow`.
    #[error("channel overflowed: the client is not reading fast enough")]
    Overflow,
    /// The outbox of a unary request is full; request-scoped notifications are
    /// best-effort and this one was dropped.
    #[error("outbox full: the request-scoped notification was dropped")]
    Full,
    /// A subscription notification before the stream was acknowledged.
    #[error("the subscription is not acknowledged yet")]
    NotAcknowledged,
    /// The notification is outside the honoured filter of this stream.
    #[error("{method} is outside the honoured subscription filter{}", uri.as_ref().map(|u| format!(" (uri {u})")).unwrap_or_default())]
    OutsideFilter {
        /// The refused method.
        method: String,
        /// The refused resource URI, for `notifications/resources/updated`.
        uri: Option<String>,
    },
    /// A subscription notification on a channel that is not a listen stream.
    #[error("{0} belongs on a subscriptions/listen stream")]
    NotAListenStream(String),
    /// A request-scoped notification (progress, log, custom) on a listen stream.
    #[error("{0} is request-scoped and never goes on a subscriptions/listen stream")]
    NotRequestScoped(String),
    /// The acknowledgement is sent by the runtime, never by user code.
    #[error("notifications/subscriptions/acknowledged is sent by the runtime")]
    Reserved,
    /// Progress must increase with each notification.
    #[error("progress must increase with each notification")]
    ProgressNotIncreasing,
}

struct Listen {
    /// The honoured filter; its URIs sorted, for a binary search per event.
    honoured: OnceLock<SubscriptionFilter>,
    /// Shared with every frame of the stream: the subscription id as JSON text,
    /// spliced into every notification, and the revocation flag, set on cancel
    /// (and on an overflow cut) so frames already queued are skipped.
    tag: Arc<StreamTag>,
    spill_limit: usize,
    /// Set by a cancel: nothing more goes out, not even a final frame.
    cancelled: AtomicBool,
    /// Whether the spill queue holds frames (read without the lock).
    spilled: AtomicBool,
    /// The stream actor's task, woken when a frame spills (from any thread) so
    /// that the actor drains the spill at once, not at its next event.
    attention: WakeSlot,
}

struct Inner {
    id: RequestId,
    meta: RequestMeta,
    assigns: Assigns,
    outbox: Outbox,
    listen: Option<Listen>,
    /// Read without the lock for quick checks; changed only under `pending`'s
    /// lock, so a send and a close (or the final frame) never interleave.
    state: AtomicU8,
    /// Frames of a listen stream waiting for outbox room, in order (bounded by
    /// `spill_limit`); always empty for a request channel.
    pending: Mutex<VecDeque<Frame>>,
    last_progress: Mutex<Option<f64>>,
}

/// The handle user code talks back to the client through; cheap to clone, `Send`.
///
/// Read-only request data is at hand ([`Channel::meta`], [`Channel::assigns`]); sends
/// never panic and never block: a refused send returns a [`ChannelError`] and
/// writes nothing.
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.inner.id)
            .field("listen", &self.inner.listen.is_some())
            .field("state", &self.inner.state.load(Ordering::Relaxed))
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Channel {
    /// The channel of a unary request (`tools/call`, `resources/read`, ...).
    pub fn for_request(id: RequestId, meta: RequestMeta, assigns: Assigns, outbox: Outbox) -> Self {
        Self::new(id, meta, assigns, outbox, None)
    }

    /// The channel of a `subscriptions/listen` stream. Frames that find the outbox
    /// full wait in a spill queue of at most `spill_limit` frames, drained by
    /// the stream actor; past that the stream overflows.
    pub fn for_listen(
        id: RequestId,
        meta: RequestMeta,
        assigns: Assigns,
        outbox: Outbox,
        spill_limit: usize,
    ) -> Self {
        Self::listen_channel(id, meta, assigns, outbox, spill_limit, false)
    }

    /// The channel of a 2025-era GET stream: like [`Channel::for_listen`], but
    /// nothing of the listen protocol reaches the client: no acknowledgement, no
    /// subscription id on notifications, no final frame (the stream just ends).
    pub(crate) fn for_legacy_listen(
        id: RequestId,
        meta: RequestMeta,
        assigns: Assigns,
        outbox: Outbox,
        spill_limit: usize,
    ) -> Self {
        Self::listen_channel(id, meta, assigns, outbox, spill_limit, true)
    }

    fn listen_channel(
        id: RequestId,
        meta: RequestMeta,
        assigns: Assigns,
        outbox: Outbox,
        spill_limit: usize,
        legacy: bool,
    ) -> Self {
        let tag = Arc::new(StreamTag {
            id_json: serde_json::to_vec(&id).unwrap_or_default().into(),
            revoked: AtomicBool::new(false),
            legacy,
        });
        let listen = Listen {
            honoured: OnceLock::new(),
            tag,
            spill_limit,
            cancelled: AtomicBool::new(false),
            spilled: AtomicBool::new(false),
            attention: WakeSlot::default(),
        };
        Self::new(id, meta, assigns, outbox, Some(listen))
    }

    fn new(
        id: RequestId,
        meta: RequestMeta,
        assigns: Assigns,
        outbox: Outbox,
        listen: Option<Listen>,
    ) -> Self {
        Channel {
            inner: Arc::new(Inner {
                id,
                meta,
                assigns,
                outbox,
                listen,
                state: AtomicU8::new(OPEN),
                pending: Mutex::new(VecDeque::new()),
                last_progress: Mutex::new(None),
            }),
        }
    }

    /// The request id (for a listen stream: the subscription id).
    pub fn id(&self) -> &RequestId {
        &self.inner.id
    }

    /// The validated `_meta` of the request: client info, client capabilities,
    /// protocol version, log level, progress token.
    pub fn meta(&self) -> &RequestMeta {
        &self.inner.meta
    }

    /// Application data attached to the request (e.g. the authenticated principal).
    pub fn assigns(&self) -> &Assigns {
        &self.inner.assigns
    }

    /// Whether this channel belongs to a `subscriptions/listen` stream.
    pub fn is_listen(&self) -> bool {
        self.inner.listen.is_some()
    }

    /// The honoured filter of a listen stream, once acknowledged.
    pub fn honoured(&self) -> Option<&SubscriptionFilter> {
        self.inner.listen.as_ref()?.honoured.get()
    }

    /// Whether nothing more can be sent.
    pub fn is_closed(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) != OPEN
    }

    /// Whether the stream overflowed (its client did not keep up).
    pub fn is_overflowed(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == OVERFLOW
    }

    /// Sends a notification.
    ///
    /// On a listen stream only the subscription notifications are accepted, each
    /// inside the honoured filter, and each is stamped with
    /// `_meta["io.modelcontextprotocol/subscriptionId"]`: the runtime owns that
    /// key, a value the caller put there is replaced. On a request channel the
    /// subscription notifications are refused. To send the same notification on
    /// many streams, encode it once with [`SharedNotification`] and use
    /// [`Channel::send_shared`].
    pub fn send_notification(&self, notification: Notification) -> Result<(), ChannelError> {
        if notification.method == methods::ACKNOWLEDGED {
            return Err(ChannelError::Reserved);
        }
        if self.inner.listen.is_some() {
            if !methods::is_subscription(&notification.method) {
                return Err(ChannelError::NotRequestScoped(notification.method));
            }
            return self.send_shared(SharedNotification::new(notification));
        }
        let Notification { method, params } = notification;
        if methods::is_subscription(&method) {
            return Err(ChannelError::NotAListenStream(method));
        }
        self.push(
            self.frame(encode_notification(&method, &params), false),
            false,
        )
    }

    /// Sends a notification encoded once for many streams: the fan-out form of
    /// [`Channel::send_notification`] for listen streams. Only the filter check
    /// (a binary search for `resources/updated`) and the queueing happen per
    /// stream; the frame shares its bytes with every other stream's. It takes
    /// the notification by value: pass on the one the stream received rather
    /// than a clone (each clone is a reference count other threads touch too).
    ///
    /// ```
    /// use genmcp::mux::{Channel, SharedNotification};
    /// use genmcp::protocol::Notification;
    /// // Built once by the publisher, cloned cheaply into every stream's inbox:
    /// let changed = SharedNotification::new(Notification::tools_list_changed());
    /// fn forward(channel: &Channel, event: SharedNotification) {
    ///     // Refused sends (outside the filter, client gone) write nothing.
    ///     let _ = channel.send_shared(event);
    /// }
    /// # let _ = (changed, forward);
    /// ```
    pub fn send_shared(&self, notification: SharedNotification) -> Result<(), ChannelError> {
        let Some(listen) = &self.inner.listen else {
            return Err(ChannelError::NotAListenStream(
                notification.method().to_owned(),
            ));
        };
        let honoured = listen.honoured.get().ok_or(ChannelError::NotAcknowledged)?;
        if !allows(honoured, notification.kind()) {
            if notification.method() == methods::ACKNOWLEDGED {
                return Err(ChannelError::Reserved);
            }
            if !methods::is_subscription(notification.method()) {
                return Err(ChannelError::NotRequestScoped(
                    notification.method().to_owned(),
                ));
            }
            return Err(ChannelError::OutsideFilter {
                method: notification.method().to_owned(),
                uri: notification.uri().map(str::to_owned),
            });
        }
        self.push(Frame::shared(notification, listen.tag.clone()), false)
    }

    /// Whether this listen stream's honoured filter lets `notification` through
    /// (false before the acknowledgement and on request channels): a cheap check
    /// for handlers that want to skip work for events the client did not ask for.
    pub fn honours(&self, notification: &SharedNotification) -> bool {
        self.honoured()
            .is_some_and(|honoured| allows(honoured, notification.kind()))
    }

    /// Sends `notifications/progress` for this request. Does nothing when the
    /// request carried no progress token; `progress` must increase.
    pub fn send_progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), ChannelError> {
        if self.inner.listen.is_some() {
            return Err(ChannelError::NotRequestScoped(methods::PROGRESS.into()));
        }
        let Some(token) = &self.inner.meta.progress_token else {
            return Ok(());
        };
        {
            let mut last = lock(&self.inner.last_progress);
            if last.is_some_and(|l| progress <= l) {
                return Err(ChannelError::ProgressNotIncreasing);
            }
            *last = Some(progress);
        }
        let mut params = Map::new();
        params.insert(
            "progressToken".into(),
            match token {
                ProgressToken::Number(n) => Value::from(*n),
                ProgressToken::String(s) => Value::from(s.clone()),
            },
        );
        params.insert("progress".into(), number(progress));
        if let Some(total) = total {
            params.insert("total".into(), number(total));
        }
        if let Some(message) = message {
            params.insert("message".into(), Value::from(message));
        }
        self.push(
            self.frame(encode_notification(methods::PROGRESS, &params), false),
            false,
        )
    }

    /// Sends `notifications/message` for this request. Does nothing unless the
    /// request set `io.modelcontextprotocol/logLevel` at or below `level`.
    pub fn send_log(
        &self,
        level: LogLevel,
        logger: Option<&str>,
        data: Value,
    ) -> Result<(), ChannelError> {
        if self.inner.listen.is_some() {
            return Err(ChannelError::NotRequestScoped(methods::LOG_MESSAGE.into()));
        }
        match self.inner.meta.log_level {
            Some(min) if level >= min => {}
            _ => return Ok(()),
        }
        let mut params = Map::new();
        params.insert(
            "level".into(),
            serde_json::to_value(level).unwrap_or(Value::Null),
        );
        if let Some(logger) = logger {
            params.insert("logger".into(), Value::from(logger));
        }
        params.insert("data".into(), data);
        self.push(
            self.frame(encode_notification(methods::LOG_MESSAGE, &params), false),
            false,
        )
    }

    /// Writes the acknowledgement for `honoured` and opens the stream for
    /// subscription notifications. Runtime only.
    pub(crate) fn acknowledge(&self, honoured: SubscriptionFilter) -> Result<(), ChannelError> {
        let listen = self
            .inner
            .listen
            .as_ref()
            .ok_or(ChannelError::NotAListenStream(methods::ACKNOWLEDGED.into()))?;
        if !listen.tag.legacy {
            let mut meta = Map::new();
            meta.insert(keys::SUBSCRIPTION_ID.into(), self.inner.id.to_value());
            let mut params = Map::new();
            params.insert("_meta".into(), Value::Object(meta));
            params.insert(
                "notifications".into(),
                serde_json::to_value(&honoured).unwrap_or_default(),
            );
            // The ack is queued before the stream opens for other notifications.
            self.push(
                self.frame(encode_notification(methods::ACKNOWLEDGED, &params), false),
                false,
            )?;
        } else if self.is_closed() {
            return Err(ChannelError::Closed);
        }
        let mut honoured = honoured;
        honoured.resource_subscriptions.sort_unstable();
        honoured.resource_subscriptions.dedup();
        let _ = listen.honoured.set(honoured);
        Ok(())
    }

    /// Queues the response that ends a listen stream (completion result or error)
    /// after every frame already queued, and closes the channel in the same step.
    /// The final frame may use one spill slot past the limit. Runtime only.
    pub(crate) fn finish(&self, bytes: Vec<u8>) -> Result<(), ChannelError> {
        if self.inner.listen.as_ref().is_some_and(|l| l.tag.legacy) {
            // A 2025-era GET stream has no final frame: it just ends once its
            // queued frames are out.
            let _gate = lock(&self.inner.pending);
            return match self.inner.state.load(Ordering::Acquire) {
                OVERFLOW => Err(ChannelError::Overflow),
                CLOSED => Err(ChannelError::Closed),
                _ => {
                    self.inner.state.store(CLOSED, Ordering::Release);
                    Ok(())
                }
            };
        }
        self.push(self.frame(bytes, true), true)
    }

    /// Sends the response of a unary request after every notification it sent,
    /// waiting for outbox room, and closes the channel in the same step: a clone
    /// used elsewhere cannot slip a frame in after it. Runtime only.
    pub(crate) async fn respond(&self, bytes: Vec<u8>) -> Result<(), ChannelError> {
        let permit = self
            .inner
            .outbox
            .reserve()
            .await
            .map_err(|_| ChannelError::Closed)?;
        let _gate = lock(&self.inner.pending);
        self.inner.state.store(CLOSED, Ordering::Release);
        permit.send(Frame::last(bytes));
        Ok(())
    }

    /// Closes the channel: later sends fail with [`ChannelError::Closed`].
    pub(crate) fn close(&self) {
        let _gate = lock(&self.inner.pending);
        let _ =
            self.inner
                .state
                .compare_exchange(OPEN, CLOSED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Cancels a listen stream: closes the channel, drops its spill queue and
    /// revokes its frames still in the outbox, so nothing more goes out for it.
    pub(crate) fn revoke(&self) {
        let mut pending = lock(&self.inner.pending);
        self.inner.state.store(CLOSED, Ordering::Release);
        pending.clear();
        if let Some(listen) = &self.inner.listen {
            listen.cancelled.store(true, Ordering::Release);
            listen.tag.revoked.store(true, Ordering::Release);
            listen.spilled.store(false, Ordering::Release);
        }
    }

    /// Ends a listen stream that overflowed on a shared pipe: its frames still
    /// queued are dropped (revoked) and `bytes` (an error for the listen id)
    /// becomes its one final frame, in the outbox or, when that is full, alone
    /// in the spill queue for [`Channel::flush`]. Runtime only.
    pub(crate) fn end_overflowed(&self, bytes: Vec<u8>) -> Result<(), ChannelError> {
        let Some(listen) = &self.inner.listen else {
            return Err(ChannelError::NotAListenStream(methods::ACKNOWLEDGED.into()));
        };
        let mut pending = lock(&self.inner.pending);
        if listen.cancelled.load(Ordering::Acquire) {
            return Err(ChannelError::Closed);
        }
        self.inner.state.store(CLOSED, Ordering::Release);
        listen.tag.revoked.store(true, Ordering::Release);
        pending.clear();
        // Not tagged with the revocation flag: this one must go out.
        match self.inner.outbox.try_send(Frame::last(bytes)) {
            Ok(()) => {
                listen.spilled.store(false, Ordering::Release);
                Ok(())
            }
            Err(TrySendError::Full(frame)) => {
                pending.push_back(frame);
                listen.spilled.store(true, Ordering::Release);
                Ok(())
            }
            Err(TrySendError::Closed(_)) => Err(ChannelError::Closed),
        }
    }

    /// Whether the stream was cancelled ([`Channel::revoke`]).
    pub(crate) fn is_revoked(&self) -> bool {
        self.inner
            .listen
            .as_ref()
            .is_some_and(|l| l.cancelled.load(Ordering::Acquire))
    }

    /// Whether frames wait in the spill queue for outbox room.
    pub(crate) fn has_pending(&self) -> bool {
        self.inner
            .listen
            .as_ref()
            .is_some_and(|l| l.spilled.load(Ordering::Acquire))
    }

    /// Registers the stream actor's task, woken when a frame spills.
    pub(crate) fn register_attention(&self, waker: &std::task::Waker) {
        if let Some(listen) = &self.inner.listen {
            listen.attention.register(waker);
        }
    }

    /// Wakes the stream actor's task (it then looks at the spill and its mailbox).
    pub(crate) fn wake_attention(&self) {
        if let Some(listen) = &self.inner.listen {
            listen.attention.wake();
        }
    }

    /// Moves spilled frames into the outbox, waiting for room, in order. Stops
    /// (with [`ChannelError::Closed`]) if the client goes or the stream is
    /// cancelled.
    pub(crate) async fn flush(&self) -> Result<(), ChannelError> {
        let Some(listen) = &self.inner.listen else {
            return Ok(());
        };
        loop {
            if !listen.spilled.load(Ordering::Acquire) {
                return Ok(());
            }
            let permit = match self.inner.outbox.reserve().await {
                Ok(p) => p,
                Err(_) => {
                    self.inner.state.store(CLOSED, Ordering::Release);
                    return Err(ChannelError::Closed);
                }
            };
            // Pop and send under the lock, so a concurrent sender cannot overtake.
            let mut pending = lock(&self.inner.pending);
            if listen.cancelled.load(Ordering::Acquire) {
                pending.clear();
                return Err(ChannelError::Closed);
            }
            if let Some(frame) = pending.pop_front() {
                permit.send(frame);
            }
            if pending.is_empty() {
                listen.spilled.store(false, Ordering::Release);
                return Ok(());
            }
        }
    }

    /// A frame of this channel (tagged with the stream's revocation flag).
    fn frame(&self, bytes: Vec<u8>, last: bool) -> Frame {
        let frame = if last {
            Frame::last(bytes)
        } else {
            Frame::message(bytes)
        };
        match &self.inner.listen {
            Some(listen) => frame.tagged(&listen.tag),
            None => frame,
        }
    }

    /// Queues a frame. Checks and state changes happen under one lock, so a
    /// frame never lands after the final one. `last` closes the channel.
    fn push(&self, frame: Frame, last: bool) -> Result<(), ChannelError> {
        let mut pending = lock(&self.inner.pending);
        match self.inner.state.load(Ordering::Acquire) {
            CLOSED => return Err(ChannelError::Closed),
            OVERFLOW => return Err(ChannelError::Overflow),
            _ => {}
        }
        let result = match &self.inner.listen {
            None => match self.inner.outbox.try_send(frame) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(_)) => Err(ChannelError::Full),
                Err(TrySendError::Closed(_)) => {
                    self.inner.state.store(CLOSED, Ordering::Release);
                    Err(ChannelError::Closed)
                }
            },
            Some(listen) => {
                let limit = listen.spill_limit + usize::from(last);
                if pending.is_empty() {
                    match self.inner.outbox.try_send(frame) {
                        Ok(()) => Ok(()),
                        Err(TrySendError::Full(frame)) => {
                            pending.push_back(frame);
                            listen.spilled.store(true, Ordering::Release);
                            // A background sender has no actor behind it:
                            // wake the stream so it drains the spill now.
                            listen.attention.wake();
                            Ok(())
                        }
                        Err(TrySendError::Closed(_)) => {
                            self.inner.state.store(CLOSED, Ordering::Release);
                            Err(ChannelError::Closed)
                        }
                    }
                } else if pending.len() < limit {
                    pending.push_back(frame);
                    Ok(())
                } else {
                    self.inner.state.store(OVERFLOW, Ordering::Release);
                    listen.attention.wake();
                    Err(ChannelError::Overflow)
                }
            }
        };
        if last && result.is_ok() {
            self.inner.state.store(CLOSED, Ordering::Release);
        }
        result
    }
}

/// Whether `honoured` (URIs sorted) lets a notification of `kind` through.
fn allows(honoured: &SubscriptionFilter, kind: &Kind) -> bool {
    match kind {
        Kind::ToolsListChanged => honoured.tools_list_changed,
        Kind::PromptsListChanged => honoured.prompts_list_changed,
        Kind::ResourcesListChanged => honoured.resources_list_changed,
        Kind::ResourcesUpdated(uri) => honoured
            .resource_subscriptions
            .binary_search_by(|s| s.as_str().cmp(uri))
            .is_ok(),
        Kind::Other => false,
    }
}

fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::{OutboxReceiver, outbox};
    use serde_json::json;

    fn recv_json(rx: &mut OutboxReceiver) -> Value {
        serde_json::from_slice(&rx.try_recv().expect("a frame").to_bytes()).unwrap()
    }

    fn listen(id: RequestId, cap: usize, spill: usize) -> (Channel, OutboxReceiver) {
        let (tx, rx) = outbox(cap);
        (
            Channel::for_listen(id, RequestMeta::current(), Assigns::new(), tx, spill),
            rx,
        )
    }

    #[test]
    fn listen_stamps_ids_with_their_json_type_and_enforces_the_filter() {
        for id in [RequestId::Number(7), RequestId::String("7".into())] {
            let (ch, mut rx) = listen(id.clone(), 8, 8);
            assert_eq!(
                ch.send_notification(Notification::tools_list_changed()),
                Err(ChannelError::NotAcknowledged)
            );
            ch.acknowledge(SubscriptionFilter {
                tools_list_changed: true,
                resource_subscriptions: vec!["a://x".into()],
                ..Default::default()
            })
            .unwrap();
            let ack = recv_json(&mut rx);
            assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
            assert_eq!(ack["params"]["_meta"][keys::SUBSCRIPTION_ID], id.to_value());
            assert_eq!(
                ack["params"]["notifications"],
                json!({"toolsListChanged": true, "resourceSubscriptions": ["a://x"]})
            );
            ch.send_notification(Notification::tools_list_changed())
                .unwrap();
            assert_eq!(
                recv_json(&mut rx)["params"]["_meta"][keys::SUBSCRIPTION_ID],
                id.to_value()
            );
            assert!(matches!(
                ch.send_notification(Notification::prompts_list_changed()),
                Err(ChannelError::OutsideFilter { .. })
            ));
            assert!(matches!(
                ch.send_notification(Notification::resource_updated("a://y")),
                Err(ChannelError::OutsideFilter { .. })
            ));
            ch.send_notification(Notification::resource_updated("a://x"))
                .unwrap();
            assert_eq!(recv_json(&mut rx)["params"]["uri"], "a://x");
            assert!(matches!(
                ch.send_progress(1.0, None, None),
                Err(ChannelError::NotRequestScoped(_))
            ));
            assert!(rx.try_recv().is_err(), "refused sends write nothing");
        }
    }

    #[test]
    fn a_caller_supplied_subscription_id_is_replaced_by_the_streams_own() {
        let (ch, mut rx) = listen(RequestId::Number(1), 8, 8);
        ch.acknowledge(SubscriptionFilter::tools()).unwrap();
        let _ = recv_json(&mut rx);
        let mut params = Map::new();
        params.insert(
            "_meta".into(),
            json!({keys::SUBSCRIPTION_ID: "mine", "other": 1}),
        );
        ch.send_notification(Notification::new(methods::TOOLS_LIST_CHANGED, params))
            .unwrap();
        let n = recv_json(&mut rx);
        assert_eq!(
            n["params"]["_meta"],
            json!({keys::SUBSCRIPTION_ID: 1, "other": 1})
        );
    }

    #[test]
    fn progress_and_logs_only_when_asked_and_without_nulls() {
        let (tx, mut rx) = outbox(8);
        let ch = Channel::for_request(
            RequestId::Number(1),
            RequestMeta::current(),
            Assigns::new(),
            tx.clone(),
        );
        ch.send_progress(1.0, None, None).unwrap();
        ch.send_log(LogLevel::Emergency, None, json!("x")).unwrap();
        assert!(rx.try_recv().is_err());

        let mut meta = RequestMeta::current();
        meta.progress_token = Some(ProgressToken::String("tok".into()));
        meta.log_level = Some(LogLevel::Warning);
        let ch = Channel::for_request(RequestId::Number(2), meta, Assigns::new(), tx);
        ch.send_progress(50.0, None, None).unwrap();
        assert_eq!(
            recv_json(&mut rx)["params"],
            json!({"progressToken": "tok", "progress": 50})
        );
        assert_eq!(
            ch.send_progress(50.0, None, None),
            Err(ChannelError::ProgressNotIncreasing)
        );
        ch.send_log(LogLevel::Info, None, json!("quiet")).unwrap();
        ch.send_log(LogLevel::Error, Some("db"), json!("loud"))
            .unwrap();
        assert_eq!(
            recv_json(&mut rx)["params"],
            json!({"level": "error", "logger": "db", "data": "loud"})
        );
        assert!(rx.try_recv().is_err());
        assert!(matches!(
            ch.send_notification(Notification::tools_list_changed()),
            Err(ChannelError::NotAListenStream(_))
        ));
    }

    #[test]
    fn a_closed_channel_refuses_and_never_panics() {
        let (ch, rx) = listen(RequestId::Number(1), 1, 1);
        ch.acknowledge(SubscriptionFilter::tools()).unwrap();
        drop(rx);
        assert_eq!(
            ch.send_notification(Notification::tools_list_changed()),
            Err(ChannelError::Closed)
        );
        assert!(ch.is_closed());
    }

    #[test]
    fn the_final_frame_has_a_spare_slot_and_nothing_follows_it() {
        let (ch, mut rx) = listen(RequestId::Number(1), 1, 1);
        ch.acknowledge(SubscriptionFilter::tools()).unwrap(); // fills the outbox
        ch.send_notification(Notification::tools_list_changed())
            .unwrap(); // fills the spill
        ch.finish(b"{}".to_vec()).unwrap(); // still queued
        assert!(ch.is_closed());
        assert_eq!(
            ch.send_notification(Notification::tools_list_changed()),
            Err(ChannelError::Closed)
        );
        let _ = rx.try_recv();
        assert!(
            rx.try_recv().is_err(),
            "the rest waits in the spill, in order"
        );
    }

    #[test]
    fn revoked_frames_are_marked_and_the_spill_is_dropped() {
        let (ch, mut rx) = listen(RequestId::Number(1), 2, 8);
        ch.acknowledge(SubscriptionFilter::tools()).unwrap();
        ch.send_notification(Notification::tools_list_changed())
            .unwrap();
        ch.send_notification(Notification::tools_list_changed())
            .unwrap(); // spilled
        ch.revoke();
        assert!(!ch.has_pending());
        assert!(rx.try_recv().unwrap().is_revoked());
        assert!(rx.try_recv().unwrap().is_revoked());
        assert_eq!(
            ch.send_notification(Notification::tools_list_changed()),
            Err(ChannelError::Closed)
        );
    }

    #[test]
    fn spill_is_bounded_and_then_overflows() {
        let (ch, mut rx) = listen(RequestId::Number(1), 1, 2);
        ch.acknowledge(SubscriptionFilter::tools()).unwrap(); // fills the outbox
        ch.send_notification(Notification::tools_list_changed())
            .unwrap(); // spill 1
        ch.send_notification(Notification::tools_list_changed())
            .unwrap(); // spill 2
        assert_eq!(
            ch.send_notification(Notification::tools_list_changed()),
            Err(ChannelError::Overflow)
        );
        assert!(ch.is_overflowed());
        assert!(ch.has_pending());
        let _ = rx.try_recv();
    }
}
