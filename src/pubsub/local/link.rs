//! What a link to other nodes (the Redis engine) asks of this process's
//! topics: delivering what arrives from the other nodes with one shared wait
//! for room, and completing the subscribers that depended on a lost link.

use std::sync::Arc;
use std::time::Duration;

use super::super::Inbox;
use super::{Sub, Topic, Topics, lock, mark_if_empty, read};

impl<M> Topics<M> {
    /// Every topic with a subscriber.
    pub(crate) fn names(&self) -> Vec<String> {
        read(&self.map)
            .iter()
            .filter(|(_, t)| !t.is_removed())
            .map(|(name, _)| name.clone())
            .collect()
    }
}

impl<M: Clone + Send + 'static> Topics<M> {
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
            // `try_offer` never blocks, so the topic's lock is held only for
            // the walk; only the inboxes that were full are cloned out of it.
            let Some(t) = self.get(topic) else {
                return 0;
            };
            let subs = lock(&t.subs);
            for sub in subs.iter() {
                match offer_all(&sub.inbox, msgs) {
                    Offered::All => took_all += 1,
                    Offered::Ended => {}
                    Offered::FullAt(next, msg) => full.push((sub.inbox.clone(), next, msg)),
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
                    inbox.send_from_bus(msg).await?;
                    for msg in &msgs[next..] {
                        inbox.send_from_bus(msg.clone()).await?;
                    }
                    Ok::<(), super::super::InboxError>(())
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

    /// Asks every subscriber but the durable ones to complete
    /// ([`Inbox::complete`]) and forgets them: they depended on something
    /// that is gone.
    pub(crate) fn complete_all(&self) -> usize {
        self.complete_where(|_| true)
    }

    /// Asks the subscribers of every topic for which `lost` is true to
    /// complete ([`Inbox::complete`]) and forgets them, except the durable
    /// ones, which stay (so the next connection subscribes their topics
    /// again); a topic left without a subscriber leaves the map. The other
    /// topics keep going. Returns how many were asked.
    pub(crate) fn complete_where(&self, lost: impl Fn(&str) -> bool) -> usize {
        let hit: Vec<(String, Arc<Topic<M>>)> = read(&self.map)
            .iter()
            .filter(|(name, t)| !t.is_removed() && lost(name))
            .map(|(name, t)| (name.clone(), t.clone()))
            .collect();
        let mut n = 0;
        for (name, t) in hit {
            // Under its lock: a subscriber added before this is either kept
            // (durable) or completed here; once the topic is marked removed,
            // one added after goes to a fresh topic.
            let (ended, emptied) = {
                let mut subs = lock(&t.subs);
                let ended: Vec<Sub<M>> = subs.extract_if(.., |sub| !sub.durable).collect();
                let emptied = mark_if_empty(&t, &subs);
                (ended, emptied)
            };
            if emptied {
                self.forget(&name, &t);
            }
            for sub in &ended {
                sub.inbox.complete();
                n += 1;
            }
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
