//! The runtime side of [`crate::pubsub::Inbox`]: the future, spawned in a stream
//! actor's context, that feeds the stream's bounded mailbox to `handle_message`
//! and watches the signals that need the actor's attention outside its mailbox
//! (an inbox overflow, frames spilled by a background clone of the channel).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};

use actix::prelude::*;

use super::stream::Stream;
use crate::pubsub::OverflowSignal;
use crate::queue;
use crate::subscription::SubscriptionHandler;

/// Messages handled per wake-up before the feed yields to the other tasks of its
/// thread (the HTTP writer of this very stream among them). Larger than the
/// default mailbox, so a full mailbox is emptied in one go.
const BUDGET: usize = 256;

/// Feeds a stream actor: its mailbox, its overflow signal, its spill signal.
pub(crate) struct Feed<M> {
    rx: queue::Receiver<M>,
    overflow: Arc<OverflowSignal>,
    /// The waker last registered with the signals: registering again costs
    /// atomics on every wake-up, and an actor's task keeps its waker.
    registered: Option<Waker>,
}

impl<M> Feed<M> {
    pub(crate) fn new(rx: queue::Receiver<M>, overflow: Arc<OverflowSignal>) -> Self {
        Feed {
            rx,
            overflow,
            registered: None,
        }
    }
}

impl<H: SubscriptionHandler> ActorFuture<Stream<H>> for Feed<H::Message> {
    type Output = ();

    fn poll(
        self: Pin<&mut Self>,
        act: &mut Stream<H>,
        ctx: &mut Context<Stream<H>>,
        task: &mut TaskContext<'_>,
    ) -> Poll<()> {
        let this = self.get_mut();
        if !this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(task.waker()))
        {
            this.overflow.register(task.waker());
            act.channel().register_attention(task.waker());
            this.registered = Some(task.waker().clone());
        }
        if this.overflow.is_set() {
            act.on_inbox_overflow(ctx);
        }
        act.on_attention(ctx);
        let mut handled = 0;
        while act.accepts_messages() {
            match this.rx.poll_recv(task) {
                Poll::Ready(Some(msg)) => {
                    act.on_message(msg, ctx);
                    handled += 1;
                    if handled == BUDGET {
                        task.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                // Every inbox was dropped: no more events, the stream stays open.
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if act.is_finished() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
