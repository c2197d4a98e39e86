use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::queue::WakeSlot;
use serde_json::{Map, Value};

use super::frame::StreamTag;
use super::shared::Kind;
use super::{Assigns, Frame, Outbox, SharedNotification};
use crate::protocol::jsonrpc::encode_notification;
use crate::protocol::{
    LogLevel, Notification, ProgressToken, RequestId, RequestMeta, SubscriptionFilter, keys,
    methods,
};

mod lifecycle;

/// Frames of storage a listen stream's spill queue keeps once drained
/// (default 4).
///
/// A spill grows the queue up to `Limits::spill_limit` frames (64 by
/// default); once [`Channel`]'s flush has moved the last spilled frame into
/// the outbox, the queue is shrunk back to this, so a stream that is idle
/// again holds what an idle stream holds. A stream that never spills holds
/// none at all, and a short spill (a few frames while the outbox is full)
/// reuses these 4 (192 bytes) without allocating.
pub(crate) const SPILL_IDLE_FLOOR: usize = 4;

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
    /// On a 2025 session's stream the URIs live in `session_uris` instead.
    honoured: OnceLock<SubscriptionFilter>,
    /// A 2025 session's stream only: its `resources/subscribe` URIs, which
    /// change one at a time over the stream's life (`resources/subscribe` and
    /// `unsubscribe` while it runs). Locked for a lookup per
    /// `resources/updated` event, never across an `.await`.
    session_uris: Option<Mutex<HashSet<String>>>,
    /// Shared with every frame of the stream: the subscription id as JSON text,
    /// spliced into every notification, and the revocation flag, set on cancel
    /// (and on an overflow cut) so frames already queued are skipped.
    tag: Arc<StreamTag>,
    spill_limit: usize,
    /// Whether the spill queue holds frames (read without the lock).
    spilled: AtomicBool,
    /// Frames queued on the stream so far (acknowledgement and final frame
    /// included), for its span.
    frames: AtomicU64,
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
    /// `spill_limit`; storage back to [`SPILL_IDLE_FLOOR`] once drained);
    /// always empty for a request channel.
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
            cancelled: AtomicBool::new(false),
            legacy,
        });
        let listen = Listen {
            honoured: OnceLock::new(),
            session_uris: legacy.then(Mutex::default),
            tag,
            spill_limit,
            spilled: AtomicBool::new(false),
            frames: AtomicU64::new(0),
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
    ///
    /// On a 2025-era session's stream the subscribed URIs change over the
    /// stream's life, so they are not listed here: ask
    /// [`Channel::honours_uri`], which holds for every listen stream.
    pub fn honoured(&self) -> Option<&SubscriptionFilter> {
        self.inner.listen.as_ref()?.honoured.get()
    }

    /// Whether this listen stream delivers `notifications/resources/updated`
    /// for `uri` now (false before the acknowledgement and on request
    /// channels). A binary search on a `subscriptions/listen` stream, a set
    /// lookup on a 2025 session's stream.
    pub fn honours_uri(&self, uri: &str) -> bool {
        let Some(listen) = &self.inner.listen else {
            return false;
        };
        listen
            .honoured
            .get()
            .is_some_and(|honoured| listen.allows_uri(honoured, uri))
    }

    /// A 2025 session's stream: whether `uri` is one of its session's
    /// subscribed URIs now (false on any other channel).
    pub(crate) fn has_session_uri(&self, uri: &str) -> bool {
        self.inner
            .listen
            .as_ref()
            .and_then(|l| l.session_uris.as_ref())
            .is_some_and(|uris| lock(uris).contains(uri))
    }

    /// A 2025 session's stream: starts (`subscribed`) or stops delivering
    /// updates for `uri`. Returns whether the set changed; false on any other
    /// channel. Runtime only (a `resources/subscribe` or `unsubscribe`).
    pub(crate) fn change_session_uri(&self, uri: &str, subscribed: bool) -> bool {
        let Some(uris) = self
            .inner
            .listen
            .as_ref()
            .and_then(|l| l.session_uris.as_ref())
        else {
            return false;
        };
        let mut uris = lock(uris);
        if subscribed {
            uris.insert(uri.to_owned())
        } else {
            uris.remove(uri)
        }
    }

    /// Frames queued on a listen stream so far (0 for a request channel).
    pub(crate) fn frames_queued(&self) -> u64 {
        self.inner
            .listen
            .as_ref()
            .map_or(0, |l| l.frames.load(Ordering::Relaxed))
    }

    /// Whether nothing more can be sent.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) != OPEN
    }

    /// Whether the stream overflowed (its client did not keep up).
    #[inline]
    pub fn is_overflowed(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == OVERFLOW
    }

    /// Sends a notification.
    ///
    /// On a listen stream only the subscription notifications are accepted, each
    /// inside the honoured filter, and each is stamped with
    /// `_meta["io.modelcontextprotocol/subscriptionId"]`: the runtime owns that
    /// key, a value the caller put there is replaced. On a request channel the
    /// subscription notifications are refused, and the key is removed from a
    /// custom notification's `_meta` (only listen streams carry one). To send the same notification on
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
        let Notification { method, mut params } = notification;
        if methods::is_subscription(&method) {
            return Err(ChannelError::NotAListenStream(method));
        }
        // The runtime owns the subscription-id key: a request-scoped
        // notification carries none (on a pipe it would pass for a frame of
        // that listen stream).
        if let Some(Value::Object(meta)) = params.get_mut("_meta") {
            meta.shift_remove(keys::SUBSCRIPTION_ID);
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
    #[inline]
    pub fn send_shared(&self, notification: SharedNotification) -> Result<(), ChannelError> {
        let Some(listen) = &self.inner.listen else {
            return Err(ChannelError::NotAListenStream(
                notification.method().to_owned(),
            ));
        };
        let honoured = listen.honoured.get().ok_or(ChannelError::NotAcknowledged)?;
        if !listen.allows(honoured, notification.kind()) {
            if notification.method() == methods::ACKNOWLEDGED {
                return Err(ChannelError::Reserved);
            }
            if !methods::is_subscription(notification.method())
                && notification.method() != methods::TASK_STATUS
            {
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
    #[inline]
    pub fn honours(&self, notification: &SharedNotification) -> bool {
        let Some(listen) = &self.inner.listen else {
            return false;
        };
        listen
            .honoured
            .get()
            .is_some_and(|honoured| listen.allows(honoured, notification.kind()))
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

    /// SSE polling (2025-11-25, SEP-1699): asks the transport to close this
    /// request's SSE response now, with a `retry` hint. The request keeps
    /// running; what it sends afterwards, its response included, goes to the
    /// client when it reconnects with `Last-Event-ID`. Ignored on a listen
    /// stream, on a 2025-06-18 session's request (that revision has no SSE
    /// polling) and wherever the response is not a resumable 2025 SSE stream
    /// (2026-07-28 requests, stdio).
    pub fn close_sse_stream(&self) -> Result<(), ChannelError> {
        if self.inner.listen.is_some() {
            return Ok(());
        }
        self.push(self.frame(Vec::new(), false), false)
    }
}

impl Listen {
    /// Whether `honoured` (this stream's, URIs sorted) lets a notification of
    /// `kind` through.
    #[inline(always)]
    fn allows(&self, honoured: &SubscriptionFilter, kind: &Kind) -> bool {
        match kind {
            Kind::ToolsListChanged => honoured.tools_list_changed,
            Kind::PromptsListChanged => honoured.prompts_list_changed,
            Kind::ResourcesListChanged => honoured.resources_list_changed,
            Kind::ResourcesUpdated(uri) => self.allows_uri(honoured, uri),
            Kind::TaskStatus(id) => honoured
                .task_ids
                .binary_search_by(|s| s.as_str().cmp(id))
                .is_ok(),
            Kind::Other => false,
        }
    }

    fn allows_uri(&self, honoured: &SubscriptionFilter, uri: &str) -> bool {
        match &self.session_uris {
            Some(uris) => lock(uris).contains(uri),
            None => honoured
                .resource_subscriptions
                .binary_search_by(|s| s.as_str().cmp(uri))
                .is_ok(),
        }
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
mod tests;
