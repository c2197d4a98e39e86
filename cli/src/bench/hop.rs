//! The baseline with one actor hop (`genmcp bench-baseline --baseline
//! actor-hop` or `actor-hop-handler`): the raw
//! server of [`super::baseline`], except that each listen's frames pass
//! through an actix actor of their own on the way to the response body.
//!
//! It answers one question: what the shape genmcp is built on (an actor per
//! stream, between the event source and the writer) costs on its own, with
//! none of genmcp's work in it. The `burst` side hands pre-encoded frames to
//! a bounded inbox (a tokio channel of 64); the actor forwards each to a
//! bounded outbox (another channel of 64) read by the body. When the outbox
//! is full the actor waits for room and takes nothing from the inbox
//! meanwhile: nothing is dropped, every queue stays bounded, as in genmcp.
//!
//! Two ways to take the inbox ([`Style`]): the usual actix one, the inbox
//! added to the context as a stream (`StreamHandler`, which actix polls 16
//! items at a time), and a drain that takes everything ready, up to 256
//! items a wake-up, as genmcp's own feed does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use actix::prelude::*;
use bytes::Bytes;
use tokio::sync::mpsc;

/// Frames the drain forwards per wake-up before it lets the other tasks of
/// its thread run (genmcp's feed: 256).
const BUDGET: usize = 256;

/// How the hop's actor takes its inbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// The inbox added to the context as a stream (`StreamHandler`), the usual
    /// actix way.
    Handler,
    /// An `ActorFuture` that takes everything ready, up to 256 frames a
    /// wake-up, and calls the actor for each.
    Drain,
}

/// One listen's forwarding actor.
struct Hop {
    outbox: mpsc::Sender<Bytes>,
}

impl Actor for Hop {
    type Context = Context<Self>;
}

/// What became of a frame handed to the outbox.
enum Forward {
    Sent,
    /// No room: the frame is given back.
    Full(Bytes),
    /// The body has gone (the actor is stopping).
    Gone,
}

impl Hop {
    /// Forwards `frame` if the outbox has room; gives it back when full, and
    /// stops the actor when the body has gone.
    fn forward(&mut self, frame: Bytes, ctx: &mut Context<Self>) -> Forward {
        match self.outbox.try_send(frame) {
            Ok(()) => Forward::Sent,
            Err(mpsc::error::TrySendError::Full(frame)) => Forward::Full(frame),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                ctx.stop();
                Forward::Gone
            }
        }
    }
}

/// The usual way: actix polls the inbox, 16 frames at a time, and stops the
/// actor when it ends (`StreamHandler`'s default `finished`).
impl StreamHandler<Bytes> for Hop {
    fn handle(&mut self, frame: Bytes, ctx: &mut Context<Self>) {
        if let Forward::Full(frame) = self.forward(frame, ctx) {
            let outbox = self.outbox.clone();
            // Nothing else of this actor runs until there is room.
            ctx.wait(
                actix::fut::wrap_future(async move { outbox.send(frame).await.is_ok() }).map(
                    |sent, _: &mut Hop, ctx: &mut Context<Hop>| {
                        if !sent {
                            ctx.stop();
                        }
                    },
                ),
            );
        }
    }
}

type Room =
    Pin<Box<dyn Future<Output = Result<mpsc::OwnedPermit<Bytes>, mpsc::error::SendError<()>>>>>;

/// The drain: takes the inbox's ready frames and hands each to the actor; a
/// frame the full outbox gave back waits, with the inbox, for room.
struct Drain {
    inbox: mpsc::Receiver<Bytes>,
    /// The frame the outbox had no room for, and the wait for that room.
    held: Option<(Bytes, Room)>,
}

impl ActorFuture<Hop> for Drain {
    type Output = ();

    fn poll(
        self: Pin<&mut Self>,
        act: &mut Hop,
        ctx: &mut Context<Hop>,
        task: &mut TaskContext<'_>,
    ) -> Poll<()> {
        let this = self.get_mut();
        let mut handled = 0;
        loop {
            if let Some((frame, mut room)) = this.held.take() {
                match room.as_mut().poll(task) {
                    Poll::Pending => {
                        this.held = Some((frame, room));
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok(permit)) => {
                        permit.send(frame);
                    }
                    Poll::Ready(Err(_)) => {
                        ctx.stop();
                        return Poll::Ready(());
                    }
                }
            }
            if handled == BUDGET {
                task.waker().wake_by_ref();
                return Poll::Pending;
            }
            handled += 1;
            match this.inbox.poll_recv(task) {
                Poll::Ready(Some(frame)) => match act.forward(frame, ctx) {
                    Forward::Sent => {}
                    // Waits for room (polled at the top of the loop).
                    Forward::Full(frame) => {
                        this.held = Some((frame, Box::pin(act.outbox.clone().reserve_owned())));
                    }
                    Forward::Gone => return Poll::Ready(()),
                },
                Poll::Ready(None) => {
                    ctx.stop();
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Starts a forwarding actor of `style` in front of `outbox` on the current
/// arbiter and returns its inbox: frames sent there reach `outbox` in order.
/// The actor ends when its inbox ends or its body goes, whichever is first.
pub(super) fn start(outbox: mpsc::Sender<Bytes>, style: Style) -> mpsc::Sender<Bytes> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    Hop::create(move |ctx| {
        match style {
            Style::Handler => {
                ctx.add_stream(futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|frame| (frame, rx))
                }));
            }
            Style::Drain => {
                ctx.spawn(Drain {
                    inbox: rx,
                    held: None,
                });
            }
        }
        // A client that goes while no frame comes: the actor stops, and its
        // inbox closes, so `burst` no longer counts the stream.
        let body = outbox.clone();
        ctx.spawn(
            actix::fut::wrap_future(async move { body.closed().await })
                .map(|(), _: &mut Hop, ctx: &mut Context<Hop>| ctx.stop()),
        );
        Hop { outbox }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_full_outbox_holds_the_actor_back_and_every_frame_arrives_in_order() {
        for style in [Style::Handler, Style::Drain] {
            full_outbox_loses_nothing(style).await;
        }
    }

    async fn full_outbox_loses_nothing(style: Style) {
        // An outbox of one: nearly every frame finds it full.
        let (outbox, mut body) = mpsc::channel::<Bytes>(1);
        let inbox = start(outbox, style);
        let sender = actix_rt::spawn(async move {
            for i in 0..200u32 {
                if inbox.send(Bytes::from(i.to_string())).await.is_err() {
                    break;
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 200 {
            // A slow reader: the actor must wait for room, not drop.
            actix_rt::task::yield_now().await;
            match body.recv().await {
                Some(frame) => got.push(frame),
                None => break,
            }
        }
        let want: Vec<Bytes> = (0..200u32).map(|i| Bytes::from(i.to_string())).collect();
        assert_eq!(got, want, "{style:?}");
        assert!(sender.await.is_ok());
    }

    #[actix_rt::test]
    async fn a_body_that_goes_stops_the_actor_without_a_frame() {
        for style in [Style::Handler, Style::Drain] {
            let (outbox, body) = mpsc::channel::<Bytes>(4);
            let inbox = start(outbox, style);
            drop(body);
            // The inbox closes once the actor stops, with no frame sent.
            let stopped =
                tokio::time::timeout(std::time::Duration::from_secs(5), inbox.closed()).await;
            assert!(stopped.is_ok(), "{style:?}: the actor outlived its body");
        }
    }
}
