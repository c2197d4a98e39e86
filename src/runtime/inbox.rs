//! The actix side of [`crate::pubsub::Inbox`]: delivery into a stream's mailbox.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::prelude::*;

use super::CloseReason;
use super::stream::{Deliver, StopStream};
use crate::pubsub::{DeliverFuture, InboxError, InboxSink};

pub(crate) struct ActorInbox<M: Send + 'static> {
    pub(crate) deliver: Recipient<Deliver<M>>,
    pub(crate) control: Recipient<StopStream>,
    pub(crate) overflowed: Arc<AtomicBool>,
}

impl<M: Send + 'static> InboxSink<M> for ActorInbox<M> {
    fn try_deliver(&self, msg: M) -> Result<(), InboxError> {
        if self.overflowed.load(Ordering::Acquire) {
            return Err(InboxError::Closed);
        }
        match self.deliver.try_send(Deliver(msg)) {
            Ok(()) => Ok(()),
            Err(SendError::Full(_)) => {
                if !self.overflowed.swap(true, Ordering::AcqRel) {
                    // Exactly one control message per overflow: bounded.
                    self.control.do_send(StopStream(CloseReason::Overflow));
                }
                Err(InboxError::Full)
            }
            Err(SendError::Closed(_)) => Err(InboxError::Closed),
        }
    }

    fn deliver(&self, msg: M) -> DeliverFuture {
        let request = self.deliver.send(Deliver(msg));
        Box::pin(async move { request.await.map_err(|_| InboxError::Closed) })
    }

    fn is_closed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire) || !self.deliver.connected()
    }
}
