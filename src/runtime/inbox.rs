//! The runtime side of [`crate::pubsub::Inbox`]: the future, spawned in a stream
//! actor's context, that feeds the stream's bounded mailbox to `handle_message`
//! and watches the signals that need the actor's attention outside its mailbox
//! (an inbox overflow or completion request, frames spilled by a background clone of the channel).
//!
//! Every source of events goes through it: the messages `subscribe` queued
//! with `notify_self` (first), the inbox, and the streams it attached (taking
//! turns with the inbox, up to [`TURN`] items a turn, so neither starves the
//! other). It
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

/// Items the inbox, or the attached streams together, hand out in one turn
/// before the other side's turn. One item a turn polled every idle attached
/// stream (the topic logs a handler subscribed to) once per inbox event; with
/// turns of 32 they are looked at once per 32 events, and a source with
/// items ready still waits at most 32 items for its turn.
const TURN: usize = 32;

/// Feeds a stream actor: its mailbox, its overflow signal, its spill signal.
pub(crate) struct Feed<M> {
    rx: queue::Receiver<M>,
    /// Every inbox was dropped: the mailbox has nothing more to give.
    rx_done: bool,
    /// Whose turn it is: the inbox's, or the attached streams'.
    inbox_turn: bool,
    /// Items the source whose turn it is may still hand out this turn.
    turn_left: usize,
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
    /// Started when the inbox parks holding storage a burst grew: the storage
    /// is given back once no event came for [`queue::TIDY_AFTER`].
    tidy: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Events were handled since the tidy timer was (re)started.
    busy: bool,
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
        let mut rx = rx;
        // The feed gives a burst's storage back on its own timer (`tidy`).
        rx.tidy_on_call();
        Feed {
            rx,
            rx_done: false,
            inbox_turn: true,
            turn_left: TURN,
            queued: queued.into(),
            attached,
            overflow,
            taps,
            registered: None,
            tidy: None,
            busy: false,
        }
    }

    /// Gives the inbox's grown storage back once no event has come for
    /// [`queue::TIDY_AFTER`]: the timer is started at the first park that
    /// finds storage grown and is not moved by later ones (a reset per batch
    /// would cost more than it saves); when it fires after events came, it
    /// waits once more instead. So storage goes back between `TIDY_AFTER`
    /// and twice that after the last event, and a long burst keeps it.
    fn tidy(&mut self, task: &mut TaskContext<'_>) {
        if let Some(timer) = self.tidy.as_mut() {
            if timer.as_mut().poll(task).is_pending() {
                return;
            }
            if std::mem::take(&mut self.busy) {
                timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + queue::TIDY_AFTER);
                if timer.as_mut().poll(task).is_pending() {
                    return;
                }
            }
            self.tidy = None;
            self.rx.tidy();
        }
        if self.rx.holds_grown_storage() {
            let mut timer = Box::pin(tokio::time::sleep(queue::TIDY_AFTER));
            if timer.as_mut().poll(task).is_pending() {
                self.tidy = Some(timer);
            }
        }
    }

    /// The next event: a `notify_self` message while any is left, then the
    /// inbox and the attached streams in turns of up to [`TURN`] items (so a
    /// busy inbox does not starve a stream, nor the other way round). A turn
    /// ends early when its side has nothing ready. `None`: nothing is ready,
    /// and every source was polled and has the task's waker.
    fn next_event(&mut self, task: &mut TaskContext<'_>) -> Option<M> {
        if let Some(msg) = self.queued.pop_front() {
            return Some(msg);
        }
        // At most: the current side (unless its turn is used up), the other
        // side, the current side again with a fresh turn. Returning `None`
        // needs both polled since they were last ready.
        for _ in 0..3 {
            if self.turn_left == 0 {
                self.switch_turn();
            }
            let msg = if self.inbox_turn {
                self.poll_inbox(task)
            } else {
                self.poll_attached(task)
            };
            match msg {
                Some(msg) => {
                    self.turn_left -= 1;
                    return Some(msg);
                }
                None => self.switch_turn(),
            }
        }
        None
    }

    fn switch_turn(&mut self) {
        self.inbox_turn = !self.inbox_turn;
        self.turn_left = TURN;
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
        // Whether the loop ended because no event was ready.
        let mut idle = false;
        while act.accepts_messages() {
            let msg = if this.attached.is_empty() && this.queued.is_empty() {
                // The usual case: the inbox alone.
                match this.rx.poll_recv(task) {
                    Poll::Ready(Some(msg)) => msg,
                    // Every inbox was dropped: no more events, the stream stays open.
                    Poll::Ready(None) | Poll::Pending => {
                        idle = true;
                        break;
                    }
                }
            } else {
                match this.next_event(task) {
                    Some(msg) => msg,
                    None => {
                        idle = true;
                        break;
                    }
                }
            };
            act.on_message(msg, ctx);
            this.busy = true;
            handled += 1;
            if handled == BUDGET {
                task.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        if idle {
            act.on_idle();
        }
        if act.is_finished() {
            Poll::Ready(())
        } else {
            this.tidy(task);
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::Inbox;
    use std::cell::Cell;
    use std::rc::Rc;

    /// An attached stream that counts how often it is polled: `items` first,
    /// then nothing ready.
    fn counted(items: Vec<u32>, polls: Rc<Cell<usize>>) -> EventStream<u32> {
        let mut items = VecDeque::from(items);
        Box::pin(futures_util::stream::poll_fn(move |_| {
            polls.set(polls.get() + 1);
            match items.pop_front() {
                Some(item) => Poll::Ready(Some(item)),
                None => Poll::Pending,
            }
        }))
    }

    fn feed(attached: Vec<EventStream<u32>>) -> (Inbox<u32>, Feed<u32>) {
        let (inbox, rx, overflow, taps) = Inbox::channel(64);
        (inbox, Feed::new(rx, overflow, taps, Vec::new(), attached))
    }

    fn drain(feed: &mut Feed<u32>) -> Vec<u32> {
        let mut task = TaskContext::from_waker(futures_util::task::noop_waker_ref());
        std::iter::from_fn(|| feed.next_event(&mut task)).collect()
    }

    #[test]
    fn the_inbox_and_an_attached_stream_take_turns_of_at_most_turn_items() {
        let polls = Rc::new(Cell::new(0));
        let (inbox, mut feed) = feed(vec![counted((1000..1100).collect(), polls)]);
        for n in 0..64 {
            inbox.try_send(n).expect("room");
        }
        let got = drain(&mut feed);
        assert_eq!(got.len(), 164, "every item of both sources: {got:?}");
        let from_inbox = |n: &u32| *n < 1000;
        // The inbox goes first, then turns of TURN alternate while both have items.
        let runs: Vec<(bool, usize)> = got
            .chunk_by(|a, b| from_inbox(a) == from_inbox(b))
            .map(|run| (from_inbox(&run[0]), run.len()))
            .collect();
        assert_eq!(
            runs,
            vec![
                (true, TURN),
                (false, TURN),
                (true, TURN),
                (false, 100 - TURN)
            ],
            "{got:?}"
        );
        // Each source's items in their own order.
        assert!(got.iter().filter(|n| from_inbox(n)).is_sorted());
        assert!(got.iter().filter(|n| !from_inbox(n)).is_sorted());
    }

    #[actix_rt::test]
    async fn an_inbox_keeps_a_bursts_storage_while_busy_and_gives_it_back_once_idle() {
        let (inbox, mut feed) = feed(Vec::new());
        let waker = futures_util::task::noop_waker();
        let mut task = TaskContext::from_waker(&waker);
        for round in 0..2 {
            for n in 0..64 {
                inbox.try_send(round * 64 + n).expect("room");
            }
            assert_eq!(drain(&mut feed).len(), 64);
            feed.tidy(&mut task);
            assert!(feed.rx.holds_grown_storage(), "kept between batches");
        }
        assert!(feed.tidy.is_some(), "the give-back is timed");
        let wait = queue::TIDY_AFTER + std::time::Duration::from_millis(50);
        // Events came since the timer started: it waits once more.
        feed.busy = true;
        tokio::time::sleep(wait).await;
        feed.tidy(&mut task);
        assert!(feed.rx.holds_grown_storage(), "busy: kept");
        assert!(feed.tidy.is_some(), "busy: timed again");
        tokio::time::sleep(wait).await;
        feed.tidy(&mut task);
        assert!(!feed.rx.holds_grown_storage(), "given back once idle");
        assert!(feed.tidy.is_none(), "no timer once nothing is grown");
    }

    #[test]
    fn an_idle_attached_stream_is_polled_once_a_turn_not_once_an_event() {
        let polls = Rc::new(Cell::new(0));
        let (inbox, mut feed) = feed(vec![counted(Vec::new(), polls.clone())]);
        let mut handled = 0;
        for round in 0..10 {
            for n in 0..64 {
                inbox.try_send(round * 64 + n).expect("room");
            }
            handled += drain(&mut feed).len();
        }
        assert_eq!(handled, 640);
        // One look per turn of the inbox, and one when both have nothing.
        assert!(
            polls.get() <= 640 / TURN + 2 * 10,
            "the idle attached stream was polled {} times for 640 inbox events",
            polls.get()
        );
    }
}
