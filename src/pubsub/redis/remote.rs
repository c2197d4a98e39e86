//! The publishing side: [`RedisRemote`] encodes a publish once and queues it
//! for the Redis thread. [`SharedNotification`]s are written from the text
//! they already hold, never parsed or re-encoded.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;
use tokio::sync::mpsc;

use super::RedisOnce;
use super::link::{Link, Outgoing};
use super::wire;
use crate::mux::SharedNotification;
use crate::pubsub::{BoxFuture, BusError, BusHealth, Remote};

/// The bus's side of the link. It alone holds the queue's sender: when the bus
/// is dropped the Redis thread sees the queue close and ends.
pub(super) struct RedisRemote<M> {
    link: Arc<Link>,
    queue: mpsc::Sender<Outgoing>,
    _messages: PhantomData<fn(M)>,
}

impl<M> RedisRemote<M> {
    /// The bus's side of `link`, the only sender of the queue `queue`.
    pub(super) fn new(link: Arc<Link>, queue: mpsc::Sender<Outgoing>) -> Self {
        RedisRemote {
            link,
            queue,
            _messages: PhantomData,
        }
    }
}

/// Appends `msgs` as a JSON array if they are [`SharedNotification`]s: each
/// one's text as it was encoded (the same JSON as its `Serialize`, without
/// parsing it again). `false` (nothing written) for any other message type.
fn put_shared<M: 'static>(payload: &mut Vec<u8>, msgs: &[M]) -> bool {
    let Some(first) = msgs.first() else {
        return false;
    };
    if !(first as &dyn Any).is::<SharedNotification>() {
        return false;
    }
    payload.push(b'[');
    for (i, msg) in msgs.iter().enumerate() {
        if let Some(shared) = (msg as &dyn Any).downcast_ref::<SharedNotification>() {
            if i > 0 {
                payload.push(b',');
            }
            payload.extend_from_slice(shared.legacy());
        }
    }
    payload.push(b']');
    true
}

impl<M: Serialize + 'static> RedisRemote<M> {
    fn outgoing(&self, topic: &str, msgs: &[M]) -> Result<Outgoing, BusError> {
        if !self.link.connected.load(Ordering::Acquire) {
            return Err(self.link.unavailable());
        }
        let mut payload = wire::buffer(64 * msgs.len());
        if !put_shared(&mut payload, msgs) {
            serde_json::to_writer(&mut payload, msgs)
                .map_err(|e| BusError::Encode(e.to_string()))?;
        }
        if payload.len() > self.link.max_payload {
            return Err(BusError::TooLarge {
                size: payload.len(),
                max: self.link.max_payload,
            });
        }
        Ok(Outgoing {
            channel: format!("{}{topic}", self.link.prefix),
            payload,
        })
    }
}

impl<M: Serialize + Send + 'static> Remote<M> for RedisRemote<M> {
    fn publish(&self, topic: &str, msgs: &[M]) -> Result<(), BusError> {
        let out = self.outgoing(topic, msgs)?;
        self.queue.try_send(out).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => BusError::Backlog {
                capacity: self.link.capacity,
            },
            mpsc::error::TrySendError::Closed(_) => self.link.unavailable(),
        })
    }

    fn publish_wait<'a>(
        &'a self,
        topic: &'a str,
        msgs: &'a [M],
    ) -> BoxFuture<'a, Result<(), BusError>> {
        let out = self.outgoing(topic, msgs);
        Box::pin(async move {
            let out = out?;
            self.queue
                .send(out)
                .await
                .map_err(|_| self.link.unavailable())
        })
    }

    fn topics_changed(&self) {
        self.link.topics_changed.notify_one();
    }

    fn once(&self) -> Option<RedisOnce> {
        Some(RedisOnce::new(self.link.clone()))
    }

    fn health(&self) -> BusHealth {
        if self.link.connected.load(Ordering::Acquire) {
            BusHealth::Connected
        } else {
            BusHealth::Disconnected
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Notification;

    #[test]
    fn shared_notifications_are_written_as_their_serialization_writes_them() {
        let msgs = [
            SharedNotification::new(Notification::resource_updated("a://\"x\"")),
            SharedNotification::new(Notification::tools_list_changed()),
        ];
        let mut fast = Vec::new();
        assert!(put_shared(&mut fast, &msgs));
        let slow = serde_json::to_vec(&msgs[..]).expect("serializes");
        assert_eq!(fast, slow);
        let back: Vec<SharedNotification> = serde_json::from_slice(&fast).expect("reads back");
        assert_eq!(back[0].uri(), Some("a://\"x\""));
        assert!(
            !put_shared(&mut fast, &[1u32]),
            "other messages go through serde"
        );
        assert!(!put_shared::<SharedNotification>(&mut fast, &[]));
    }
}
