//! The runtime side of [`crate::pubsub::Inbox`]: a bounded channel into a stream
//! actor, attached to it as a stream of messages.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use actix::prelude::*;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::CloseReason;
use super::stream::StopStream;
use crate::pubsub::{DeliverFuture, InboxError, InboxSink};

/// The sending side: what an [`crate::pubsub::Inbox`] wraps.
pub(crate) struct ChannelInbox<M: Send + 'static> {
    pub(crate) tx: mpsc::Sender<M>,
    pub(crate) control: Recipient<StopStream>,
    pub(crate) overflowed: Arc<AtomicBool>,
}

impl<M: Send + 'static> InboxSink<M> for ChannelInbox<M> {
    fn try_deliver(&self, msg: M) -> Result<(), InboxError> {
        if self.overflowed.load(Ordering::Acquire) {
            return Err(InboxError::Closed);
        }
        match self.tx.try_send(msg) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                if !self.overflowed.swap(true, Ordering::AcqRel) {
                    // Exactly one control message per overflow: bounded.
                    self.control.do_send(StopStream(CloseReason::Overflow));
                }
                Err(InboxError::Full)
            }
            Err(TrySendError::Closed(_)) => Err(InboxError::Closed),
        }
    }

    fn deliver(&self, msg: M) -> DeliverFuture {
        let tx = self.tx.clone();
        // Waits for room in the bounded inbox, not for the handler: pipelined.
        Box::pin(async move { tx.send(msg).await.map_err(|_| InboxError::Closed) })
    }

    fn is_closed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire) || self.tx.is_closed()
    }
}

/// The receiving side, attached to the stream actor with `add_stream`.
pub(crate) struct InboxStream<M>(pub(crate) mpsc::Receiver<M>);

impl<M> futures_util::Stream for InboxStream<M> {
    type Item = M;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<M>> {
        self.0.poll_recv(cx)
    }
}
