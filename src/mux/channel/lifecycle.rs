//! The runtime's side of a [`Channel`]: the acknowledgement, unary replies,
//! the one final frame, closing and revoking, the spill and its flush. The
//! application's side (sending notifications, progress, logs) is in the
//! parent module.

use std::sync::atomic::Ordering;

use crate::queue::TrySendError;

use serde_json::{Map, Value};

use super::{CLOSED, Channel, ChannelError, Frame, OPEN, OVERFLOW, SPILL_IDLE_FLOOR, lock};
use crate::protocol::jsonrpc::encode_notification;
use crate::protocol::{SubscriptionFilter, keys, methods};

impl Channel {
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
        honoured.task_ids.sort_unstable();
        honoured.task_ids.dedup();
        if let Some(uris) = &listen.session_uris {
            // A 2025 session's URIs change one at a time: kept in a set.
            lock(uris).extend(std::mem::take(&mut honoured.resource_subscriptions));
        } else {
            honoured.resource_subscriptions.sort_unstable();
            honoured.resource_subscriptions.dedup();
        }
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
            listen.tag.cancelled.store(true, Ordering::Release);
            listen.tag.revoked.store(true, Ordering::Release);
            listen.spilled.store(false, Ordering::Release);
        }
    }

    /// Ends a listen stream that overflowed on a shared pipe: its frames still
    /// queued are dropped (revoked) and `bytes` (an error for the listen id)
    /// becomes its one final frame, in the outbox or, when that is full, alone
    /// in the spill queue for [`Channel::flush`]. The error is tagged like
    /// every frame of the stream: a cancel still suppresses it. A 2025
    /// session's stream (no id the client knows) gets no final frame:
    /// `Closed`. Runtime only.
    pub(crate) fn end_overflowed(&self, bytes: Vec<u8>) -> Result<(), ChannelError> {
        let Some(listen) = &self.inner.listen else {
            return Err(ChannelError::NotAListenStream(methods::ACKNOWLEDGED.into()));
        };
        let mut pending = lock(&self.inner.pending);
        if listen.tag.cancelled.load(Ordering::Acquire) {
            return Err(ChannelError::Closed);
        }
        self.inner.state.store(CLOSED, Ordering::Release);
        // Revokes the queued notifications; a final frame is skipped only
        // once the stream is cancelled (see `Frame::is_revoked`).
        listen.tag.revoked.store(true, Ordering::Release);
        pending.clear();
        if listen.tag.legacy {
            // A 2025 session's stream has no id the client knows: it just
            // ends (the transport opens it again).
            return Err(ChannelError::Closed);
        }
        match self.inner.outbox.try_send(self.frame(bytes, true)) {
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
            .is_some_and(|l| l.tag.cancelled.load(Ordering::Acquire))
    }

    /// Whether frames of this listen stream are still in the outbox or in the
    /// writer's hands: neither written nor dropped yet (frames left in its
    /// spill queue do not count: they can no longer go out once the stream
    /// has ended). Every frame holds a reference to the stream's tag, so this
    /// is a look at its reference count: nothing is counted per frame.
    /// Runtime only, once the stream has ended (then the count only falls).
    pub(crate) fn frames_in_flight(&self) -> bool {
        let Some(listen) = &self.inner.listen else {
            return false;
        };
        let pending = lock(&self.inner.pending);
        // One reference is the channel's own.
        std::sync::Arc::strong_count(&listen.tag) > 1 + pending.len()
    }

    /// Storage the spill queue holds, in frames.
    #[cfg(test)]
    pub(crate) fn spill_capacity(&self) -> usize {
        lock(&self.inner.pending).capacity()
    }

    /// Whether frames wait in the spill queue for outbox room.
    #[inline]
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
            if listen.tag.cancelled.load(Ordering::Acquire) {
                pending.clear();
                return Err(ChannelError::Closed);
            }
            if let Some(frame) = pending.pop_front() {
                permit.send(frame);
            }
            if pending.is_empty() {
                listen.spilled.store(false, Ordering::Release);
                // The spill is over: give back what it grew (a short
                // reallocation under this lock, once per spill past the floor).
                pending.shrink_to(SPILL_IDLE_FLOOR);
                return Ok(());
            }
        }
    }

    /// A frame of this channel (tagged with the stream's revocation flag).
    pub(super) fn frame(&self, bytes: Vec<u8>, last: bool) -> Frame {
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
    pub(super) fn push(&self, frame: Frame, last: bool) -> Result<(), ChannelError> {
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
        if result.is_ok()
            && let Some(listen) = &self.inner.listen
        {
            listen.frames.fetch_add(1, Ordering::Relaxed);
        }
        if last && result.is_ok() {
            self.inner.state.store(CLOSED, Ordering::Release);
        }
        result
    }
}
