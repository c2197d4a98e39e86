//! The embedded engine: this process's topics and the inboxes subscribed to
//! them. Every [`super::Bus`] delivers to its local subscribers through it,
//! whatever carries events between nodes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::Inbox;
use crate::queue::fanout::{Log, Offer, Tap};

/// What a link to other nodes asks of the topics (delivery with one shared
/// wait, completing subscribers when the link is lost): the `redis` feature.
#[cfg(feature = "redis")]
mod link;

/// One subscriber of a topic.
struct Sub<M> {
    id: u64,
    inbox: Inbox<M>,
    /// Its place in the topic's log; `None` for an inbox backed by a custom
    /// sink, which is sent each message instead. Dropped (the subscriber
    /// leaves the topic), its stream reads what it took, then stops reading
    /// the log.
    tap: Option<Tap>,
    /// Kept when the connection it depended on is lost
    /// (`Topics::complete_where`); read only there, never on a publish.
    #[cfg_attr(
        not(feature = "redis"),
        allow(dead_code, reason = "no link to lose without the redis feature")
    )]
    durable: bool,
}

type Subscribers<M> = Vec<Sub<M>>;

/// One topic: its subscribers, behind a lock of its own, so a fan-out on one
/// topic never waits for another's, and its log: a publish appends each
/// message once, and each subscriber's stream reads it from there (the
/// per-subscriber work is one count on one cache line).
struct Topic<M> {
    subs: Mutex<Subscribers<M>>,
    log: Log<M>,
    /// Set (under `subs`' lock) when the last subscriber went: the topic is
    /// leaving the map and takes no new subscriber; [`Topics::add`] makes a
    /// fresh one instead. Read without the lock by `add` under the map's lock.
    removed: AtomicBool,
}

impl<M: Clone + Send + 'static> Topic<M> {
    fn with(id: u64, inbox: Inbox<M>, durable: bool) -> Arc<Self> {
        let log = Log::new();
        let first = Sub::new(id, inbox, &log, durable);
        Arc::new(Topic {
            subs: Mutex::new(vec![first]),
            log,
            removed: AtomicBool::new(false),
        })
    }
}

impl<M: Clone + Send + 'static> Sub<M> {
    /// Joins `log` for `inbox` (under the topic's lock: no publish in between).
    fn new(id: u64, inbox: Inbox<M>, log: &Log<M>, durable: bool) -> Self {
        let tap = inbox.join(log);
        Sub {
            id,
            inbox,
            tap,
            durable,
        }
    }
}

impl<M> Topic<M> {
    fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }
}

/// Topics → subscribed inboxes. A topic exists while it has a subscriber.
///
/// Two levels of locks, never held together: the map's (`RwLock`, held only
/// to find, add or remove a topic) and each topic's own (`Mutex`, held for its
/// fan-out: `try_send`s, which never block). So a publish on one topic never
/// waits for another topic's fan-out, and no lock is held across an `.await`.
pub(crate) struct Topics<M> {
    map: RwLock<HashMap<String, Arc<Topic<M>>>>,
    next_id: AtomicU64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the state inconsistent
    // (every critical section is a single insert/retain), so poisoning is ignored.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

impl<M> Topics<M> {
    pub(crate) fn new() -> Self {
        Topics {
            map: RwLock::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// The topic `topic`, if it has subscribers; the map's lock is released
    /// on return.
    fn get(&self, topic: &str) -> Option<Arc<Topic<M>>> {
        read(&self.map).get(topic).cloned()
    }
}

impl<M> Topics<M> {
    /// Removes subscription `id`; whether that removed the topic.
    pub(crate) fn remove(&self, topic: &str, id: u64) -> bool {
        let Some(t) = self.get(topic) else {
            return false;
        };
        let emptied = {
            let mut subs = lock(&t.subs);
            subs.retain(|sub| sub.id != id);
            mark_if_empty(&t, &subs)
        };
        if emptied {
            self.forget(topic, &t);
        }
        emptied
    }

    /// Takes the emptied topic `t` out of the map, unless a fresh one already
    /// replaced it.
    fn forget(&self, topic: &str, t: &Arc<Topic<M>>) {
        let mut map = write(&self.map);
        if map.get(topic).is_some_and(|cur| Arc::ptr_eq(cur, t)) {
            map.remove(topic);
        }
    }

    /// How many topics have a subscriber.
    pub(crate) fn len(&self) -> usize {
        read(&self.map).values().filter(|t| !t.is_removed()).count()
    }
}

/// Marks `t` removed if `subs` (its subscribers, locked) is empty; whether it did.
fn mark_if_empty<M>(t: &Topic<M>, subs: &Subscribers<M>) -> bool {
    if subs.is_empty() && !t.is_removed() {
        t.removed.store(true, Ordering::Release);
        return true;
    }
    false
}

impl<M: Clone + Send + 'static> Topics<M> {
    /// Adds `inbox` to `topic` (`durable`: kept by [`Topics::complete_where`]):
    /// its subscription id, and whether the topic is new.
    pub(crate) fn add(&self, topic: &str, inbox: Inbox<M>, durable: bool) -> (u64, bool) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        loop {
            let existing = {
                let mut map = write(&self.map);
                match map.get(topic) {
                    Some(t) if !t.is_removed() => t.clone(),
                    // None, or one whose last subscriber just went (its
                    // remover takes it out of the map only if it is still
                    // this one): a fresh topic, made with its subscriber.
                    _ => {
                        map.insert(topic.to_owned(), Topic::with(id, inbox, durable));
                        return (id, true);
                    }
                }
            };
            // The topic's lock is taken without the map's (it may be held by
            // a fan-out).
            let mut subs = lock(&existing.subs);
            if !existing.is_removed() {
                subs.push(Sub::new(id, inbox, &existing.log, durable));
                return (id, false);
            }
            // Emptied meanwhile: try again, with a fresh topic.
        }
    }

    /// The live inboxes of `topic`.
    pub(crate) fn subscribers(&self, topic: &str) -> Vec<Inbox<M>> {
        let Some(t) = self.get(topic) else {
            return Vec::new();
        };
        lock(&t.subs)
            .iter()
            .filter(|sub| !sub.inbox.is_closed())
            .map(|sub| sub.inbox.clone())
            .collect()
    }

    /// Hands `msgs`, in order, to each subscriber without waiting; a subscriber
    /// that refuses them (full: ended as `Overflow`; or ended) is dropped.
    /// Returns how many took them all, and whether the topic went away.
    ///
    /// The messages are appended to the topic's log once; each subscriber's
    /// backlog count is raised (all of them, or none if they do not fit), and
    /// its stream copies them out of the log when it next runs.
    pub(crate) fn deliver(&self, topic: &str, msgs: &[M]) -> (usize, bool) {
        let Some(t) = self.get(topic) else {
            return (0, false);
        };
        let mut delivered = 0;
        let gone = {
            // Only this topic's lock (which orders its appends); nothing
            // here blocks.
            let mut subs = lock(&t.subs);
            let appended = t.log.append(msgs);
            subs.retain(|sub| {
                let took_all = match &sub.tap {
                    Some(tap) => match appended.offer(tap) {
                        Offer::Taken => true,
                        Offer::Full => {
                            sub.inbox.overflow();
                            false
                        }
                        Offer::Gone => false,
                    },
                    None => msgs
                        .iter()
                        .all(|msg| sub.inbox.try_send_from_bus(msg.clone()).is_ok()),
                };
                delivered += usize::from(took_all);
                took_all
            });
            drop(appended);
            mark_if_empty(&t, &subs)
        };
        if gone {
            self.forget(topic, &t);
        }
        (delivered, gone)
    }
}
