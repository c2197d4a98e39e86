//! The pump of a shared session's GET stream on the node holding it: it
//! appends each frame to the session's Redis stream
//! ([`SharedSessions::append_events`], a burst in one round trip), and on a
//! drain offers the stream to the node its client resumes on
//! (`fleet_handoff`).
//!
//! While no reader holds the stream the session is counted against no
//! bound for it (it is history being recorded, not a live stream); the
//! stream stops after the resume window unless a reader claims it again.
//! Redis failing: the holder stops the stream (an event it could not
//! append would be a silent gap), so its readers end, and a reconnection
//! with `Last-Event-ID` gets 410.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::Compat;
use super::fleet_events::Owned;
use super::fleet_handoff::{self, Offer, Quiesced};
use super::resumable::burst;
use crate::compat::{Cut, SharedSessions};
use crate::mux::OutboxReceiver;
use crate::runtime::{CloseReason, Server, StopStream};

/// Events appended to Redis in one round trip at most.
const MAX_EVENTS_PER_APPEND: usize = 64;
/// How often the holder's pump checks that the stream has a reader.
const IDLE_CHECK: Duration = Duration::from_millis(500);
/// Cut requests waiting for the pump at most (more: the taker gives up).
const CUTS_QUEUED: usize = 4;
/// Frames a cut appends at most before its check (more queued: the cut is
/// refused, and they are appended as usual).
const MAX_FLUSH: usize = 1_024;

/// What the pump does after a cut request.
enum AfterCut {
    /// Goes on, the stream still offered.
    Offered,
    /// Goes on, the offer withdrawn (a cut can no longer succeed).
    Unoffer,
    /// Ends.
    End(End),
}

/// What a cut's flush did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flushed {
    /// Every frame queued is in Redis.
    All,
    /// Frames are still queued (none lost).
    Partly,
    /// A frame taken out could not be appended (or the stream ended).
    Lost,
}

/// A GET stream's pump: whose stream, as which holder.
pub(super) struct Pump {
    pub(super) compat: Arc<Compat>,
    pub(super) session: Owned,
    /// Its reservation on this node, and the holder name Redis knows it by.
    pub(super) generation: u64,
    pub(super) holder: String,
    pub(super) server: Server,
    /// How long a draining node offers the stream to another node (`None`:
    /// no handoff; the stream ends with the drain).
    pub(super) offer_for: Option<Duration>,
}

/// Why the pump ended.
enum End {
    /// The stream ended, or it cannot be kept: let go of it.
    Over,
    /// Another node took the stream over: nothing more is appended here.
    HandedOver,
}

impl Pump {
    /// Moves the GET stream's frames into Redis until its connection ends
    /// (`done`), Redis refuses an event, another holder took the stream, no
    /// reader held it for the resume window, or a drain ends it (handed
    /// over, or not); then the outbox receiver is dropped (the stream's
    /// actor stops) and, unless it was handed over, its history expires
    /// after a drain delay.
    pub(super) fn spawn(self, rx: OutboxReceiver, done: oneshot::Receiver<()>) {
        actix_rt::spawn(async move {
            let Some(shared) = self.compat.shared.as_ref() else {
                return;
            };
            let (cuts_tx, cuts) = mpsc::channel(CUTS_QUEUED);
            shared.set_cuts(&self.session.sid, self.generation, cuts_tx);
            let mut rx = rx;
            let end = self.run(shared, &mut rx, done, cuts).await;
            drop(rx);
            match end {
                End::Over => shared.end_events(&self.session.sid, &self.holder).await,
                End::HandedOver => self.stop(shared, CloseReason::Shutdown).await,
            }
        });
    }

    async fn stop(&self, shared: &SharedSessions, reason: CloseReason) {
        if let Some(running) = shared.running_get(&self.session.sid, self.generation) {
            let _ = running.stop.send(StopStream(reason)).await;
        }
    }

    /// Appends `batch`: whether the stream goes on.
    async fn append(&self, shared: &SharedSessions, batch: &[bytes::Bytes]) -> bool {
        let bounds = *self.compat.events.bounds();
        let limits = (bounds.per_session_events, bounds.per_session_bytes);
        let (sid, expires) = (self.session.sid.as_str(), self.session.expires);
        match shared
            .append_events(sid, &self.holder, expires, batch, limits)
            .await
        {
            Ok(true) => true,
            Ok(false) => {
                tracing::debug!("GET stream no longer held here; it ends");
                false
            }
            Err(error) => {
                tracing::warn!(%error, "GET stream events not kept in Redis; the stream ends");
                false
            }
        }
    }

    /// Appends what `first` and the frames queued behind it hold (at most
    /// [`MAX_EVENTS_PER_APPEND`]): how many frames it took, and whether the
    /// stream goes on.
    async fn append_burst(
        &self,
        shared: &SharedSessions,
        first: crate::mux::Frame,
        rx: &mut OutboxReceiver,
    ) -> (usize, bool) {
        let mut taken = 0;
        let (batch, closed) = burst(first, rx, MAX_EVENTS_PER_APPEND, |frame| {
            taken += 1;
            (!frame.is_revoked() && !frame.is_empty()).then(|| (frame.to_bytes(), false))
        });
        let kept = batch.is_empty() || self.append(shared, &batch).await;
        (taken, kept && !closed)
    }

    /// Appends the frames queued now, at most [`MAX_FLUSH`] of them and
    /// until `until`.
    async fn flush(
        &self,
        shared: &SharedSessions,
        rx: &mut OutboxReceiver,
        until: Instant,
    ) -> Flushed {
        let mut taken = 0;
        while taken < MAX_FLUSH && Instant::now() < until {
            match rx.try_recv() {
                Ok(frame) => {
                    let (n, goes_on) = self.append_burst(shared, frame, rx).await;
                    taken += n;
                    if !goes_on {
                        return Flushed::Lost;
                    }
                }
                Err(crate::queue::TryRecvError::Empty) => return Flushed::All,
                Err(crate::queue::TryRecvError::Disconnected) => return Flushed::Lost,
            }
        }
        Flushed::Partly
    }

    /// A taker's cut request, answered within the offer: the stream goes
    /// on here (and stays offered, or no longer), went to the taker, or
    /// must end (frames taken out of the outbox could not be appended:
    /// going on would hide a gap).
    async fn cut(
        &self,
        shared: &SharedSessions,
        rx: &mut OutboxReceiver,
        offer: &Offer,
        token: &str,
    ) -> AfterCut {
        let sid = self.session.sid.as_str();
        let refuse = |permanent: bool| async move {
            let _ = shared.cut_get(sid, &self.holder, token, true).await;
            if permanent {
                AfterCut::Unoffer
            } else {
                AfterCut::Offered
            }
        };
        if offer.published_since() {
            return refuse(true).await;
        }
        let quiesced = fleet_handoff::quiesce(shared, sid, self.generation, offer);
        match tokio::time::timeout_at(offer.until, quiesced).await {
            Ok(Quiesced::Ready) => {}
            Ok(Quiesced::Never) => return refuse(true).await,
            Ok(Quiesced::NotNow) | Err(_) => return refuse(false).await,
        }
        // Every frame of what was handled before the request goes to
        // Redis before the check.
        match self.flush(shared, rx, offer.until).await {
            Flushed::All => {}
            Flushed::Partly => return refuse(false).await,
            Flushed::Lost => {
                let _ = refuse(false).await;
                return AfterCut::End(End::Over);
            }
        }
        if offer.published_since()
            || !fleet_handoff::still_covered(shared, sid, self.generation, offer).await
        {
            return refuse(true).await;
        }
        match shared.cut_get(sid, &self.holder, token, false).await {
            Ok(Cut::Moved) => AfterCut::End(End::HandedOver),
            Ok(outcome) => {
                tracing::debug!(?outcome, "GET stream not handed over");
                AfterCut::Offered
            }
            Err(error) => {
                tracing::debug!(%error, "GET stream not handed over");
                AfterCut::Offered
            }
        }
    }

    /// Until when a draining node offers this stream to another node, from
    /// the drain's start whatever the offer takes: the configured window,
    /// cut to a second before the drain's own deadline when the drain said
    /// one ([`Server::shutdown_within`]); `None`: no offer (too late, or
    /// handoff off).
    fn offer_until(&self) -> Option<Instant> {
        let window = self.offer_for?;
        let now = Instant::now();
        let mut until = now.checked_add(window).unwrap_or(now);
        if let Some(deadline) = self.server.drain_deadline() {
            let last = deadline.checked_sub(Duration::from_secs(1))?;
            until = until.min(last);
        }
        (until > now).then_some(until)
    }

    /// The offer cannot succeed any more: withdrawn (readers stop ending
    /// for it, takers stop trying); the stream ends with the drain.
    async fn unoffer(&self, shared: &SharedSessions) {
        if let Err(error) = shared.unoffer_get(&self.session.sid, &self.holder).await {
            tracing::debug!(%error, "a GET stream's offer left to its drain's end");
        }
    }

    async fn run(
        &self,
        shared: &SharedSessions,
        rx: &mut OutboxReceiver,
        mut done: oneshot::Receiver<()>,
        mut cuts: mpsc::Receiver<String>,
    ) -> End {
        let bounds = *self.compat.events.bounds();
        let (sid, expires) = (self.session.sid.as_str(), self.session.expires);
        let mut tick = tokio::time::interval(IDLE_CHECK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut idle_since: Option<Instant> = None;
        let mut uncounted = false;
        let mut shutdown = Box::pin(self.server.shutdown_signal());
        let mut draining = false;
        // While the node drains and offers the stream: when the offer ends.
        let mut drain_until: Option<Instant> = None;
        let mut offer: Option<Offer> = None;
        loop {
            tokio::select! {
                frame = rx.recv() => {
                    let Some(frame) = frame else { return End::Over };
                    // What is queued goes in one round trip (a burst keeps up).
                    if !self.append_burst(shared, frame, rx).await.1 {
                        return End::Over;
                    }
                },
                _ = &mut done => return End::Over,
                () = &mut shutdown, if !draining => {
                    draining = true;
                    if let Some(until) = self.offer_until() {
                        let holder = (self.holder.as_str(), self.generation);
                        let offered = fleet_handoff::offer(shared, sid, holder, until);
                        offer = tokio::time::timeout_at(until, offered).await.ok().flatten();
                    }
                    if offer.is_some() {
                        drain_until = offer.as_ref().map(|o| o.until);
                    } else {
                        // Ended as a drain ends every stream; its last
                        // frames are still appended.
                        self.stop(shared, CloseReason::Shutdown).await;
                    }
                },
                Some(token) = cuts.recv(), if offer.is_some() => {
                    let Some(current) = offer.as_ref() else { continue };
                    match self.cut(shared, rx, current, &token).await {
                        AfterCut::Offered => {}
                        AfterCut::Unoffer => {
                            offer = None;
                            self.unoffer(shared).await;
                        }
                        AfterCut::End(end) => return end,
                    }
                },
                () = sleep_until_some(drain_until), if drain_until.is_some() => {
                    // Nobody took it over in time: it ends with the drain
                    // (at the offer's end, not at the next tick).
                    drain_until = None;
                    offer = None;
                    self.stop(shared, CloseReason::Shutdown).await;
                },
                _ = tick.tick() => {
                    if offer.as_ref().is_some_and(Offer::published_since) {
                        offer = None;
                        self.unoffer(shared).await;
                    }
                    let read = match shared.tick_events(sid, expires).await {
                        Ok(false) if !uncounted => match shared.uncount_idle(&self.session.key()).await {
                            Ok(read) => {
                                uncounted = !read;
                                Ok(read)
                            }
                            Err(e) => Err(e),
                        },
                        other => other,
                    };
                    match read {
                        Ok(true) => {
                            idle_since = None;
                            uncounted = false;
                        }
                        Ok(false) => {
                            let since = *idle_since.get_or_insert_with(Instant::now);
                            if since.elapsed() >= bounds.resume_window && offer.is_none() {
                                return End::Over;
                            }
                        }
                        // Redis unreachable: the next append decides.
                        Err(_) => {}
                    }
                }
            }
        }
    }
}

/// Sleeps until `until`; never ends when it is `None` (the `select!` arm
/// that awaits it is disabled then anyway).
async fn sleep_until_some(until: Option<Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until).await,
        None => std::future::pending().await,
    }
}
