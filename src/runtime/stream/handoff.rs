//! A 2025 session's stream as another node takes it over (the fleet's GET
//! stream when its node drains): what the stream listens on ([`Probe`]) and
//! a wait until it has handled every event queued for it ([`Settle`]).
//!
//! A stream can be handed over only when every event it handles comes from
//! a bus that carries events between nodes: it opened without writing a
//! frame, without `notify_self` messages and without attached streams, and
//! each bus its inbox joined is distributed. Events an application sends
//! its inbox itself ([`crate::pubsub::Inbox::send`]) are not seen here: an
//! application doing that turns the handoff off
//! (`CompatConfig::handoff_on_drain`).

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
