//! The buses a subscription stream listens on, as a handoff of the stream
//! to another node needs them: each can be synced ([`super::Bus::sync`])
//! and counts this node's publishes. A stream's inbox records every bus it
//! joins ([`SyncedBuses`]); the process keeps the list of its Redis buses
//! ([`sync_all`]), for a node that must sync before it knows which buses a
//! stream it opens will join.

use std::sync::{Mutex, Weak};

use super::local::lock;
use super::{BoxFuture, BusError, BusInner};

/// One bus as a handoff sees it.
#[cfg_attr(
    not(feature = "redis"),
    allow(
        dead_code,
        reason = "only a handoff between the nodes of a Redis bus asks"
    )
)]
pub(crate) trait Synced: Send + Sync {
    /// [`super::Bus::sync`].
    fn sync(&self) -> BoxFuture<'static, Result<(), BusError>>;
    /// [`super::Bus::subscribed`].
    fn subscribed(&self) -> BoxFuture<'static, ()>;
    /// How many publishes this node has handed to the link to the other
    /// nodes so far.
    fn publishes(&self) -> u64;
    /// Whether it carries events between nodes.
    fn distributed(&self) -> bool;
}

impl<M: Clone + Send + 'static> Synced for BusInner<M> {
    fn sync(&self) -> BoxFuture<'static, Result<(), BusError>> {
        match &self.remote {
            Some(remote) => remote.sync(),
            None => Box::pin(async { Ok(()) }),
        }
    }

    fn subscribed(&self) -> BoxFuture<'static, ()> {
        match &self.remote {
            Some(remote) => remote.subscribed(),
            None => Box::pin(async {}),
        }
    }

    fn publishes(&self) -> u64 {
        self.published.load(std::sync::atomic::Ordering::Acquire)
    }

    fn distributed(&self) -> bool {
        self.remote.is_some()
    }
}

/// Buses a stream's inbox recorded at most; a stream that joined more is
/// never handed off.
const MAX_BUSES: usize = 16;

/// The buses one stream's inbox joined, and whether anything else sent it
/// a message.
#[derive(Default)]
pub(crate) struct SyncedBuses {
    buses: Mutex<(Vec<Weak<dyn Synced>>, bool)>,
    /// The application sent the inbox a message itself
    /// ([`super::Inbox::send`], [`super::Inbox::try_send`]).
    direct: std::sync::atomic::AtomicBool,
}

impl SyncedBuses {
    /// Records `bus` (once).
    pub(crate) fn note(&self, bus: Weak<dyn Synced>) {
        let mut guard = lock(&self.buses);
        let (buses, too_many) = &mut *guard;
        if buses.iter().any(|b| Weak::ptr_eq(b, &bus)) {
            return;
        }
        if buses.len() >= MAX_BUSES {
            *too_many = true;
            return;
        }
        buses.push(bus);
    }

    /// A message reached the inbox from elsewhere than a bus.
    pub(crate) fn sent_directly(&self) {
        // Called per message: written once, read after that.
        if !self.direct.load(std::sync::atomic::Ordering::Relaxed) {
            self.direct
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// The buses joined when every event came from one of them, or `None`:
    /// none was joined, one of them is gone, more than [`MAX_BUSES`] were
    /// joined, or the application sent the inbox a message itself.
    pub(crate) fn all(&self) -> Option<Vec<std::sync::Arc<dyn Synced>>> {
        if self.direct.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        let guard = lock(&self.buses);
        if guard.1 || guard.0.is_empty() {
            return None;
        }
        guard.0.iter().map(Weak::upgrade).collect()
    }
}

/// This process's Redis buses (on one server), pruned as they go.
#[cfg(feature = "redis")]
static REDIS_BUSES: Mutex<Vec<Weak<dyn Synced>>> = Mutex::new(Vec::new());

/// Adds a Redis bus to the process's list.
#[cfg(feature = "redis")]
pub(crate) fn register(bus: Weak<dyn Synced>) {
    let mut buses = lock(&REDIS_BUSES);
    buses.retain(|b| b.strong_count() > 0);
    buses.push(bus);
}

/// Syncs every live Redis bus of this process at once; the ones synced.
#[cfg(feature = "redis")]
pub(crate) async fn sync_all() -> Result<Vec<Weak<dyn Synced>>, BusError> {
    let buses: Vec<Weak<dyn Synced>> = lock(&REDIS_BUSES).clone();
    let mut waits = Vec::with_capacity(buses.len());
    for bus in &buses {
        if let Some(bus) = bus.upgrade() {
            waits.push(bus.sync());
        }
    }
    for result in futures_util::future::join_all(waits).await {
        result?;
    }
    Ok(buses)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::pubsub::{Bus, Inbox};

    /// A stream is offered for a handoff only while every event it got came
    /// through a bus: not before it joined one, not once the application
    /// sent its inbox a message itself, not once a bus it joined is gone.
    #[test]
    fn a_stream_is_covered_only_while_its_events_all_come_through_a_bus() {
        let (inbox, _rx, _signal, taps) = Inbox::<u32>::channel(8);
        assert!(taps.buses.all().is_none(), "no bus joined yet");
        let bus: Bus<u32> = Bus::new();
        let _sub = bus.subscribe("t", inbox.clone());
        let _again = bus.subscribe("u", inbox.clone());
        let buses = taps.buses.all().expect("one bus");
        assert_eq!(buses.len(), 1, "a bus is recorded once");
        bus.publish("t", 1);
        assert!(taps.buses.all().is_some(), "a publish keeps it covered");
        inbox.try_send(2).expect("room");
        assert!(taps.buses.all().is_none(), "a message sent directly");

        let (inbox, _rx, _signal, taps) = Inbox::<u32>::channel(8);
        let gone: Bus<u32> = Bus::new();
        let _sub = gone.subscribe("t", inbox.clone());
        let weak = Arc::downgrade(&gone.inner);
        drop(_sub);
        drop(gone);
        assert_eq!(weak.strong_count(), 0);
        assert!(taps.buses.all().is_none(), "a bus it joined is gone");
    }
}
