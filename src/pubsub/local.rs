//! The embedded engine: this process's topics and the inboxes subscribed to
//! them. Every [`super::Bus`] delivers to its local subscribers through it,
//! whatever carries events between nodes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Inbox;

type Subscribers<M> = Vec<(u64, Inbox<M>)>;

/// Topics → subscribed inboxes. A topic exists while it has a subscriber.
pub(crate) struct Topics<M> {
    map: Mutex<HashMap<String, Subscribers<M>>>,
    next_id: AtomicU64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the map inconsistent
    // (every critical section is a single insert/retain), so poisoning is ignored.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<M> Topics<M> {
    pub(crate) fn new() -> Self {
        Topics {
            map: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Adds `inbox` to `topic`: its subscription id, and whether the topic is new.
    pub(crate) fn add(&self, topic: &str, inbox: Inbox<M>) -> (u64, bool) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut map = lock(&self.map);
        let subs = map.entry(topic.to_owned()).or_default();
        let new = subs.is_empty();
        subs.push((id, inbox));
        (id, new)
    }

    /// Removes subscription `id`; whether that removed the topic.
    pub(crate) fn remove(&self, topic: &str, id: u64) -> bool {
        let mut map = lock(&self.map);
        let Some(subs) = map.get_mut(topic) else {
            return false;
        };
        subs.retain(|(i, _)| *i != id);
        if subs.is_empty() {
            map.remove(topic);
            return true;
        }
        false
    }

    /// How many topics have a subscriber.
    pub(crate) fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// Every topic with a subscriber.
    pub(crate) fn names(&self) -> Vec<String> {
        lock(&self.map).keys().cloned().collect()
    }
}

impl<M: Clone + Send + 'static> Topics<M> {
    /// The live inboxes of `topic`.
    pub(crate) fn subscribers(&self, topic: &str) -> Vec<Inbox<M>> {
        lock(&self.map)
            .get(topic)
            .map(|subs| {
                subs.iter()
                    .filter(|(_, i)| !i.is_closed())
                    .map(|(_, i)| i.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Hands `msgs`, in order, to each subscriber without waiting; a subscriber
    /// that refuses one (full: ended as `Overflow`; or ended) is dropped. Returns
    /// how many took them all, and whether the topic went away.
    pub(crate) fn deliver(&self, topic: &str, msgs: &[M]) -> (usize, bool) {
        let mut map = lock(&self.map);
        let Some(subs) = map.get_mut(topic) else {
            return (0, false);
        };
        let mut delivered = 0;
        // `try_send` never blocks, so holding the lock here is short.
        subs.retain(|(_, inbox)| {
            let took_all = msgs.iter().all(|msg| inbox.try_send(msg.clone()).is_ok());
            delivered += usize::from(took_all);
            took_all
        });
        let gone = subs.is_empty();
        if gone {
            map.remove(topic);
        }
        (delivered, gone)
    }

    /// Hands `msgs`, in order, to each subscriber, waiting for mailbox room
    /// **at most `stall` in all** for this call, whatever the number of
    /// subscribers and messages: every subscriber is first offered the
    /// messages without waiting; those that were full are then waited on
    /// together against one deadline, and those still full at the deadline are
    /// ended as `Overflow` (never waited on again: an ended inbox refuses at
    /// once). The lock is not held while waiting. Returns how many took them all.
    pub(crate) async fn deliver_wait(&self, topic: &str, msgs: &[M], stall: Duration) -> usize {
        let mut took_all = 0;
        let mut full = Vec::new();
        {
            // `try_offer` never blocks, so the lock is held only for the walk;
            // only the inboxes that were full are cloned out of it.
            let map = lock(&self.map);
            for (_, inbox) in map.get(topic).into_iter().flatten() {
                match offer_all(inbox, msgs) {
                    Offered::All => took_all += 1,
                    Offered::Ended => {}
                    Offered::FullAt(next, msg) => full.push((inbox.clone(), next, msg)),
                }
            }
        }
        if full.is_empty() {
            return took_all;
        }
        let deadline = tokio::time::Instant::now() + stall;
        let waited =
            futures_util::future::join_all(full.into_iter().map(|(inbox, next, msg)| async move {
                let rest = async {
                    inbox.send(msg).await?;
                    for msg in &msgs[next..] {
                        inbox.send(msg.clone()).await?;
                    }
                    Ok::<(), super::InboxError>(())
                };
                match tokio::time::timeout_at(deadline, rest).await {
                    Ok(Ok(())) => true,
                    Ok(Err(_)) => false,
                    Err(_) => {
                        inbox.overflow();
                        false
                    }
                }
            }))
            .await;
        took_all + waited.into_iter().filter(|ok| *ok).count()
    }

    /// Asks every subscriber to complete ([`Inbox::complete`]) and forgets
    /// them all: they depended on something that is gone.
    pub(crate) fn complete_all(&self) -> usize {
        let drained: Vec<Subscribers<M>> = lock(&self.map).drain().map(|(_, s)| s).collect();
        let mut n = 0;
        for (_, inbox) in drained.iter().flatten() {
            inbox.complete();
            n += 1;
        }
        n
    }
}

/// How far [`offer_all`] got.
enum Offered<M> {
    /// The inbox took every message.
    All,
    /// The inbox has ended.
    Ended,
    /// The mailbox was full: this message, then `msgs[.0..]`, remain.
    FullAt(usize, M),
}

/// Offers `msgs`, in order, to `inbox` without waiting or ending it.
fn offer_all<M: Clone + Send + 'static>(inbox: &Inbox<M>, msgs: &[M]) -> Offered<M> {
    for (i, msg) in msgs.iter().enumerate() {
        match inbox.try_offer(msg.clone()) {
            Ok(()) => {}
            Err(Some(msg)) => return Offered::FullAt(i + 1, msg),
            Err(None) => return Offered::Ended,
        }
    }
    Offered::All
}
