//! The publishing side: [`RedisRemote`] encodes a publish once and queues it
//! for the Redis thread.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;
use tokio::sync::mpsc;

use super::RedisOnce;
use super::link::{Link, MAX_SYNCS, Outgoing};
use super::wire;
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

impl<M: Serialize> RedisRemote<M> {
    fn outgoing(&self, topic: &str, msgs: &[M]) -> Result<Outgoing, BusError> {
        if !self.link.connected.load(Ordering::Acquire) {
            return Err(self.link.unavailable());
        }
        let mut payload = wire::buffer(64 * msgs.len());
        serde_json::to_writer(&mut payload, msgs).map_err(|e| BusError::Encode(e.to_string()))?;
        if payload.len() > self.link.max_payload {
            return Err(BusError::TooLarge {
                size: payload.len(),
                max: self.link.max_payload,
            });
        }
        let channel = format!("{}{topic}", self.link.prefix);
        if self.link.shard_down(&channel) {
            return Err(self
                .link
                .unavailable_because(format!("the Redis Cluster shard of {channel} is lost")));
        }
        Ok(Outgoing {
            channel,
            payload,
            marker: false,
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

    fn subscribed(&self) -> BoxFuture<'static, ()> {
        // Taken after the caller's subscriptions were added: the pass that
        // answers it reads them.
        let ticket = self.link.requested.fetch_add(1, Ordering::SeqCst) + 1;
        let mut synced = self.link.synced.subscribe();
        self.link.topics_changed.notify_one();
        Box::pin(async move {
            // Err: the Redis thread has ended with its bus; nothing to wait for.
            let _ = synced.wait_for(|s| *s >= ticket).await;
        })
    }

    fn sync(&self) -> BoxFuture<'static, Result<(), BusError>> {
        let link = self.link.clone();
        let queued = if link.cluster {
            Err(BusError::Unsupported(
                "a bus on a Redis Cluster has no one order to sync with",
            ))
        } else if !link.connected.load(Ordering::Acquire) {
            Err(link.unavailable())
        } else {
            match link.new_sync() {
                None => Err(BusError::Busy {
                    capacity: MAX_SYNCS,
                }),
                Some((token, rx)) => {
                    // Behind every publish queued so far: Redis runs them first.
                    let out = Outgoing {
                        channel: link.sync_channel.clone(),
                        payload: token.to_le_bytes().to_vec(),
                        marker: true,
                    };
                    match self.queue.try_send(out) {
                        Ok(()) => Ok((token, rx)),
                        Err(e) => {
                            link.forget_sync(token);
                            Err(match e {
                                mpsc::error::TrySendError::Full(_) => BusError::Backlog {
                                    capacity: link.capacity,
                                },
                                mpsc::error::TrySendError::Closed(_) => link.unavailable(),
                            })
                        }
                    }
                }
            }
        };
        Box::pin(async move {
            let (token, rx) = queued?;
            // A PUBLISH, then its message read back: two round trips.
            match tokio::time::timeout(link.command_timeout * 2, rx).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) => Err(link.unavailable()),
                Err(_) => {
                    link.forget_sync(token);
                    Err(link.unavailable_because(format!(
                        "a sync marker did not come back within {:?}",
                        link.command_timeout * 2
                    )))
                }
            }
        })
    }

    fn health(&self) -> BusHealth {
        if self.link.connected.load(Ordering::Acquire) {
            BusHealth::Connected
        } else {
            BusHealth::Disconnected
        }
    }
}
