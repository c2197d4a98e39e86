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
use super::fleet_handoff::{self, Offer};
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

    /// Appends what `first` and the frames queued behind it hold: whether
    /// the stream goes on.
    async fn append_burst(
        &self,
        shared: &SharedSessions,
        first: crate::mux::Frame,
        rx: &mut OutboxReceiver,
    ) -> bool {
        let (batch, closed) = burst(first, rx, MAX_EVENTS_PER_APPEND, |frame| {
            (!frame.is_revoked() && !frame.is_empty()).then(|| (frame.to_bytes(), false))
        });
        (batch.is_empty() || self.append(shared, &batch).await) && !closed
    }

    /// Appends the frames queued now, at most [`MAX_FLUSH`] of them.
    async fn flush(&self, shared: &SharedSessions, rx: &mut OutboxReceiver) -> Flushed {
        let mut taken = 0;
        while taken < MAX_FLUSH {
            match rx.try_recv() {
                Ok(frame) => {
                    taken += 1;
                    if !self.append_burst(shared, frame, rx).await {
                        return Flushed::Lost;
                    }
                }
                Err(crate::queue::TryRecvError::Empty) => return Flushed::All,
                Err(crate::queue::TryRecvError::Disconnected) => return Flushed::Lost,
            }
        }
        Flushed::Partly
    }

    /// A taker's cut request, answered within the offer (`until`): whether
    /// the stream goes on here, or went to the taker, or must end (frames
    /// taken out of the outbox could not be appended: going on would hide
    /// a gap).
    async fn cut(
        &self,
        shared: &SharedSessions,
        rx: &mut OutboxReceiver,
        offer: &Offer,
        token: &str,
    ) -> Option<End> {
        let sid = self.session.sid.as_str();
        let quiesced = fleet_handoff::quiesce(shared, sid, self.generation, offer);
        let ready = matches!(
            tokio::time::timeout_at(offer.until, quiesced).await,
            Ok(true)
        );
        // Every frame of what was handled before the request goes to
        // Redis before the check.
        let flushed = if ready {
            self.flush(shared, rx).await
        } else {
            Flushed::Partly
        };
        if flushed == Flushed::Lost {
            return Some(End::Over);
        }
        let refuse =
            flushed != Flushed::All || offer.published_since() || Instant::now() >= offer.until;
        match shared.cut_get(sid, &self.holder, token, refuse).await {
            Ok(Cut::Moved) => Some(End::HandedOver),
            Ok(outcome) => {
                tracing::debug!(?outcome, "GET stream not handed over");
                None
            }
            Err(error) => {
                tracing::debug!(%error, "GET stream not handed over");
                None
            }
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
        let mut offer: Option<Offer> = None;
        loop {
            tokio::select! {
                frame = rx.recv() => {
                    let Some(frame) = frame else { return End::Over };
                    // What is queued goes in one round trip (a burst keeps up).
                    if !self.append_burst(shared, frame, rx).await {
                        return End::Over;
                    }
                },
                _ = &mut done => return End::Over,
                () = &mut shutdown, if !draining => {
                    draining = true;
                    offer = match self.offer_for {
                        // From the drain's start, whatever the offer takes.
                        Some(window) => {
                            let until = Instant::now() + window;
                            let holder = (self.holder.as_str(), self.generation);
                            let offered = fleet_handoff::offer(shared, sid, holder, until);
                            tokio::time::timeout_at(until, offered).await.ok().flatten()
                        }
                        None => None,
                    };
                    if offer.is_none() {
                        // Ended as a drain ends every stream; its last
                        // frames are still appended.
                        self.stop(shared, CloseReason::Shutdown).await;
                    }
                },
                Some(token) = cuts.recv(), if offer.is_some() => {
                    let Some(offer) = offer.as_ref() else { continue };
                    if let Some(end) = self.cut(shared, rx, offer, &token).await {
                        return end;
                    }
                },
                _ = tick.tick() => {
                    if offer.as_ref().is_some_and(|o| Instant::now() >= o.until) {
                        // Nobody took it over in time: it ends with the drain.
                        offer = None;
                        self.stop(shared, CloseReason::Shutdown).await;
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
