//! The runtime side of [`crate::pubsub::Inbox`]: the future, spawned in a stream
//! actor's context, that feeds the stream's bounded mailbox to `handle_message`
//! and watches the signals that need the actor's attention outside its mailbox
//! (an inbox overflow or completion request, frames spilled by a background clone of the channel).
//!
//! Every source of events goes through it: the messages `subscribe` queued
//! with `notify_self` (first), the inbox, and the streams it attached (polled
//! in turn with the inbox, one item each, so neither starves the other). It
//! takes an event only while the stream accepts one, so all of them pause
//! while the stream drains its spill: an attached stream is pulled, never
//! pushed, and waits in place.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};

use actix::prelude::*;

use super::stream::Stream;
use crate::pubsub::{OverflowSignal, Taps};
use crate::queue;
use crate::subscription::{EventStream, SubscriptionHandler};

/// Messages handled per wake-up before the feed yields to the other tasks of its
/// thread (the HTTP writer of this very stream among them). Larger than the
/// default mailbox, so a full mailbox is emptied in one go.
const BUDGET: usize = 256;

/// Feeds a stream actor: its mailbox, its overflow signal, its spill signal.
pub(crate) struct Feed<M> {
    rx: queue::Receiver<M>,
    /// Every inbox was dropped: the mailbox has nothing more to give.
    rx_done: bool,
    /// Whether the inbox goes before the attached streams next time.
    inbox_turn: bool,
    /// `notify_self` messages not handled yet (as many as `subscribe` queued).
    queued: VecDeque<M>,
    /// Attached event streams still running.
    attached: Vec<EventStream<M>>,
    overflow: Arc<OverflowSignal>,
    /// Where a bus hands over the readers of the topic logs this stream is
    /// subscribed to; each becomes an attached stream.
    taps: Arc<Taps<M>>,
    /// The waker last registered with the signals: registering again costs
    /// atomics on every wake-up, and an actor's task keeps its waker.
    registered: Option<Waker>,
}

// The feed never pins its messages (the attached streams are boxed).
impl<M> Unpin for Feed<M> {}

impl<M> Drop for Feed<M> {
    fn drop(&mut self) {
        // Topic logs joined from now on are not read: their readers are
        // dropped, and their topics drop the subscriber.
        self.taps.close();
    }
}

impl<M> Feed<M> {
    pub(crate) fn new(
        rx: queue::Receiver<M>,
        overflow: Arc<OverflowSignal>,
        taps: Arc<Taps<M>>,
        queued: Vec<M>,
        attached: Vec<EventStream<M>>,
    ) -> Self {
        Feed {
            rx,
            rx_done: false,
            inbox_turn: true,
            queued: queued.into(),
            attached,
            overflow,
            taps,
            registered: None,
        }
    }

    /// The next event: a `notify_self` message while any is left, then the
    /// inbox and the attached streams in turn (one item each, so a busy inbox
    /// does not starve a stream, nor the other way round). `None`: nothing is
    /// ready, and every source has the task's waker.
    fn next_event(&mut self, task: &mut TaskContext<'_>) -> Option<M> {
        if let Some(msg) = self.queued.pop_front() {
            return Some(msg);
        }
        let inbox_first = self.inbox_turn;
        if inbox_first && let Some(msg) = self.poll_inbox(task) {
            self.inbox_turn = false;
            return Some(msg);
        }
        if let Some(msg) = self.poll_attached(task) {
            self.inbox_turn = true;
            return Some(msg);
        }
        if !inbox_first {
            return self.poll_inbox(task);
        }
        None
    }

    fn poll_inbox(&mut self, task: &mut TaskContext<'_>) -> Option<M> {
        if self.rx_done {
            return None;
        }
        match self.rx.poll_recv(task) {
            Poll::Ready(Some(msg)) => Some(msg),
            Poll::Ready(None) => {
                self.rx_done = true;
                None
            }
            Poll::Pending => None,
        }
    }

    /// One item of the first attached stream that has one; that stream then
    /// goes last.
    fn poll_attached(&mut self, task: &mut TaskContext<'_>) -> Option<M> {
        let mut i = 0;
        while i < self.attached.len() {
            match self.attached[i].as_mut().poll_next(task) {
                Poll::Ready(Some(msg)) => {
                    let polled = self.attached.remove(i);
                    self.attached.push(polled);
                    return Some(msg);
                }
                // It ended; the subscription does not.
                Poll::Ready(None) => drop(self.attached.remove(i)),
                Poll::Pending => i += 1,
            }
        }
        None
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
        } else if this.overflow.is_completed() {
            act.on_inbox_completed(ctx);
        }
        act.on_attention(ctx);
        for reader in this.taps.take() {
            this.attached.push(reader);
        }
        let mut handled = 0;
        while act.accepts_messages() {
            let msg = if this.attached.is_empty() && this.queued.is_empty() {
                // The usual case: the inbox alone.
                match this.rx.poll_recv(task) {
                    Poll::Ready(Some(msg)) => msg,
                    // Every inbox was dropped: no more events, the stream stays open.
                    Poll::Ready(None) | Poll::Pending => break,
                }
            } else {
                match this.next_event(task) {
                    Some(msg) => msg,
                    None => break,
                }
            };
            act.on_message(msg, ctx);
            handled += 1;
            if handled == BUDGET {
                task.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        if act.is_finished() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
