//! The baseline with one actor hop (`genmcp bench-baseline --hop`): the raw
//! server of [`super::baseline`], except that each listen's frames pass
//! through an actix actor of their own on the way to the response body.
//!
//! It answers one question: what the shape genmcp is built on (an actor per
//! stream, between the event source and the writer) costs on its own, with
//! none of genmcp's work in it. The hop is the least an actor per stream can
//! be: the `burst` side hands pre-encoded frames to a bounded inbox (a tokio
//! channel of 64), the actor takes them as a stream added to its context and
//! forwards each to a bounded outbox (another channel of 64) read by the body.
//! When the outbox is full the actor waits for room (`ctx.wait`), which also
//! stops it taking from the inbox: nothing is dropped, every queue stays
//! bounded, as in genmcp.

use actix::prelude::*;
use bytes::Bytes;
use tokio::sync::mpsc;

/// One listen's forwarding actor.
struct Hop {
    outbox: mpsc::Sender<Bytes>,
}

impl Actor for Hop {
    type Context = Context<Self>;
}

impl StreamHandler<Bytes> for Hop {
    fn handle(&mut self, frame: Bytes, ctx: &mut Context<Self>) {
        match self.outbox.try_send(frame) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(frame)) => {
                let outbox = self.outbox.clone();
                // Nothing else of this actor runs until there is room.
                ctx.wait(actix::fut::wrap_future(async move {
                    let _ = outbox.send(frame).await;
                }));
            }
            Err(mpsc::error::TrySendError::Closed(_)) => ctx.stop(),
        }
    }

    /// The actor lives as long as its inbox: it ends once the inbox's every
    /// sender is gone (the listen was dropped from the registry).
    fn finished(&mut self, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// Starts a forwarding actor in front of `outbox` on the current arbiter and
/// returns its inbox: frames sent there reach `outbox` in order.
pub(super) fn start(outbox: mpsc::Sender<Bytes>) -> mpsc::Sender<Bytes> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    Hop::create(|ctx| {
        ctx.add_stream(frames);
        Hop { outbox }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_full_outbox_holds_the_actor_back_and_every_frame_arrives_in_order() {
        // An outbox of one: nearly every frame finds it full.
        let (outbox, mut body) = mpsc::channel::<Bytes>(1);
        let inbox = start(outbox);
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
        assert_eq!(got, want);
        assert!(sender.await.is_ok());
    }
}
