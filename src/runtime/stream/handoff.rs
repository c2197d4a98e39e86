//! A 2025 session's stream as another node takes it over (the fleet's GET
//! stream when its node drains): what the stream listens on ([`Probe`]) and
//! a wait until it has handled every event queued for it ([`Settle`]).
//!
//! A stream can be handed over only when every event it handles comes from
//! a bus that carries events between nodes: it opened without writing a
//! frame, without `notify_self` messages and without attached streams, its
//! inbox joined at least one bus, each of them distributed, and the
//! application never sent the inbox a message itself
//! ([`crate::pubsub::Inbox::send`]). Sources the runtime cannot see call
//! for `CompatConfig::handoff_on_drain: false`.

use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::{Phase, Stream};
use crate::pubsub::Synced;
use crate::subscription::SubscriptionHandler;

/// Waiters of [`Settle`] at most per stream.
const MAX_SETTLE_WAITERS: usize = 8;

/// Runtime only: the buses the stream listens on, when it can be handed
/// over (`None`: it cannot, or it is not open).
pub(crate) struct Probe;

impl Message for Probe {
    type Result = Option<Vec<Arc<dyn Synced>>>;
}

/// Runtime only: answered once the stream has handled every event queued
/// for it when this arrives and has no frame waiting for outbox room
/// (`None`: it is not open, or too many wait already).
pub(crate) struct Settle;

impl Message for Settle {
    type Result = Option<oneshot::Receiver<()>>;
}

/// The stream's side of a handoff.
#[derive(Default)]
pub(super) struct Handoff {
    /// Every event comes from its inbox's buses (see the module docs).
    pub(super) bus_only: bool,
    settled: Vec<oneshot::Sender<()>>,
}

impl<H: SubscriptionHandler> Stream<H> {
    /// Called by the feed when no event was ready: the waiters of
    /// [`Settle`] are answered (unless frames wait for outbox room).
    pub(crate) fn on_idle(&mut self) {
        if self.handoff.settled.is_empty() || self.channel.has_pending() {
            return;
        }
        for waiter in self.handoff.settled.drain(..) {
            let _ = waiter.send(());
        }
    }
}

impl<H: SubscriptionHandler> Handler<Probe> for Stream<H> {
    type Result = Option<Vec<Arc<dyn Synced>>>;

    fn handle(&mut self, _: Probe, _: &mut Self::Context) -> Self::Result {
        if self.phase != Phase::Open || !self.handoff.bus_only {
            return None;
        }
        let buses = self.taps.as_ref()?.buses.all()?;
        buses.iter().all(|b| b.distributed()).then_some(buses)
    }
}

impl<H: SubscriptionHandler> Handler<Settle> for Stream<H> {
    type Result = Option<oneshot::Receiver<()>>;

    fn handle(&mut self, _: Settle, _: &mut Self::Context) -> Self::Result {
        if self.phase != Phase::Open || self.handoff.settled.len() >= MAX_SETTLE_WAITERS {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.handoff.settled.push(tx);
        // The feed looks again, and answers once nothing is ready.
        self.channel.wake_attention();
        Some(rx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::mux::{Assigns, Channel, outbox};
    use crate::protocol::{
        Implementation, Notification, RequestId, RequestMeta, SubscriptionCapabilities,
        SubscriptionFilter,
    };
    use crate::pubsub::{Bus, BusSubscription};
    use crate::runtime::{Connection, Limits, Server, spawn_legacy_stream};
    use crate::subscription::{Flow, Subscribe, SubscribeCx};
    use crate::suite::Suite;

    /// Takes 1 ms per event, each turned into one notification.
    struct Slow {
        bus: Bus<u32>,
    }

    impl SubscriptionHandler for Slow {
        type Message = u32;
        type State = BusSubscription<u32>;

        fn subscribe(
            &self,
            _filter: &SubscriptionFilter,
            cx: &mut SubscribeCx<'_, u32>,
        ) -> Subscribe<Self::State> {
            Subscribe::Accept(self.bus.subscribe("t", cx.inbox()))
        }

        fn handle_message(&self, _n: u32, channel: &Channel, _state: &mut Self::State) -> Flow {
            std::thread::sleep(Duration::from_millis(1));
            match channel.send_notification(Notification::tools_list_changed()) {
                Ok(()) => Flow::Continue,
                Err(_) => Flow::stop("gone"),
            }
        }

        fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
            SubscriptionCapabilities::none().with_tools_list_changed(true)
        }
    }

    /// A stream settles only once it has handled every event queued for it
    /// when asked: their frames are all in its outbox then. On an embedded
    /// bus it cannot be handed over (its events never cross nodes). The
    /// stream runs on a thread of its own, as it would beside the pump that
    /// asks: the answer is looked at while the stream may still be busy.
    #[test]
    fn a_stream_settles_once_every_queued_event_is_handled() {
        let (found_tx, found_rx) = std::sync::mpsc::channel();
        let (finish_tx, finish_rx) = oneshot::channel::<()>();
        let actors = std::thread::spawn(move || {
            actix_rt::System::new().block_on(async move {
                let bus: Bus<u32> = Bus::new();
                let suite = Suite::builder(Implementation::new("t", "1"))
                    .subscriptions(Slow { bus: bus.clone() })
                    .build();
                // More events than the feed handles per wake-up (256):
                // settling spans several turns of the actor.
                let limits = Limits {
                    mailbox_capacity: 1024,
                    ..Limits::default()
                };
                let server = Server::new(limits);
                let (tx, rx) = outbox(4096);
                let (done_tx, _done) = oneshot::channel();
                let connection = Connection::exchange(server.clone(), tx.clone(), done_tx).start();
                let filter = SubscriptionFilter {
                    tools_list_changed: true,
                    ..SubscriptionFilter::default()
                };
                let stream = spawn_legacy_stream(
                    &suite,
                    &server,
                    &connection,
                    tx,
                    RequestId::Number(1),
                    RequestMeta::current(),
                    Assigns::new(),
                    filter,
                    false,
                    "2025-11-25",
                )
                .await
                .expect("opened");
                for n in 0..600 {
                    assert_eq!(bus.publish("t", n), 1);
                }
                // Asked before the stream ran (every event is queued), from
                // a task of its own, as the pump asks: it hands the answer
                // over as soon as it comes.
                let settle = stream.settle.clone();
                actix_rt::spawn(async move {
                    let settled = settle.send(Settle).await.expect("sent");
                    found_tx.send((settled, rx)).expect("the test waits");
                });
                let _ = finish_rx.await;
                stream.probe.send(Probe).await.expect("sent").is_none()
            })
        });
        let (settled, mut rx) = found_rx.recv().expect("the stream opened");
        let settled = settled.expect("an open stream settles");
        let waited = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), settled).await });
        waited.expect("settled in time").expect("answered");
        let mut frames = 0;
        while rx.try_recv().is_ok() {
            frames += 1;
        }
        assert_eq!(frames, 600, "settled before every event was handled");
        let _ = finish_tx.send(());
        let not_handed_over = actors.join().expect("the actors' thread ended");
        assert!(
            not_handed_over,
            "an embedded bus's stream was offered for a handoff"
        );
    }
}
