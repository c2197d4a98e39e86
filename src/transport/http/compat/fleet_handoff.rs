//! A shared session's GET stream moving off a draining node (see
//! `crate::compat::shared` `handoff` for the marks in Redis, and
//! `docs/compat-2025.md`).
//!
//! - The holder, as its node drains, offers the stream ([`offer`]): it
//!   notes this node's publishes on each bus the stream listens on, syncs
//!   those buses (so every publish of its own is in Redis's order before
//!   the offer) and marks the stream offered. Its readers end with a
//!   `retry` hint once they have written everything.
//! - A node the client resumes on takes it ([`take`]): it records the
//!   history's newest entry, syncs its own buses (every message Redis ran
//!   before that record has reached it), opens its own stream actor, whose
//!   frames wait in its outbox, waits until its topics are subscribed, and
//!   asks the holder to cut.
//! - The holder cuts ([`quiesce`], then the pump's flush and
//!   [`SharedSessions::cut_get`]): it syncs the buses (every message Redis
//!   ran before the request has reached its stream), waits until its stream
//!   handled them, appends their frames, and moves the mark to the taker
//!   only if nothing was appended after the taker's record, nothing of the
//!   session changed, and this node published nothing on those buses since
//!   the offer. The taker then appends its held frames and goes on.
//!
//! Why that loses and repeats nothing: an event Redis ran before the
//! taker's record reached the holder before its sync came back, so it was
//! handled and appended before the check (and an event appended after the
//! record fails the check); the taker's stream joined after its own sync,
//! so it sees only events Redis ran after the record, which the holder
//! appended none of (the check) and cannot append after the mark moved.
//! Any event in the window, a fault or a timeout: the handoff is refused,
//! the holder keeps the stream until its drain ends, and the resumption
//! after that is a 410 as without a handoff.

use std::sync::{Arc, Weak};
use std::time::Duration;

use actix::Actor as _;
use actix_web::web;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::fleet_pump::Pump;
use super::fleet_uris::restart;
use super::session::Session;
use super::{AppState, Compat};
use crate::compat::{LegacyStream, Prepared, SharedSessions, Taking};
use crate::mux::{Assigns, Outbox, OutboxReceiver};
use crate::protocol::{RequestId, RequestMeta};
use crate::pubsub::{Synced, sync_all};
use crate::runtime::{CloseReason, Connection, Probe, SessionStreamControl, Settle, StopStream};
use crate::subscription::SubscriptionHandler;

/// The bound on each step: a sync, a subscription, the stream settling.
const STEP: Duration = Duration::from_secs(2);
/// How long a taker waits for the holder's cut.
const CUT_WAIT: Duration = Duration::from_secs(3);
/// How often a taker looks at where it stands.
const CUT_POLL: Duration = Duration::from_millis(25);

/// What the holder noted when it offered the stream.
pub(super) struct Offer {
    /// Each bus the stream listens on, and this node's publishes on it then.
    buses: Vec<(Arc<dyn Synced>, u64)>,
    /// When the offer ends (the drain is ending): the stream then ends.
    pub(super) until: Instant,
}

impl Offer {
    /// Whether this node published on one of the stream's buses since the
    /// offer: such an event reached the stream here before Redis ordered
    /// it, and may reach a taker's stream too.
    pub(super) fn published_since(&self) -> bool {
        self.buses.iter().any(|(bus, n)| bus.publishes() != *n)
    }
}

/// Syncs every bus of `buses`, each within [`STEP`]: whether all did.
async fn sync_each(buses: &[Arc<dyn Synced>]) -> bool {
    for bus in buses {
        if !matches!(tokio::time::timeout(STEP, bus.sync()).await, Ok(Ok(()))) {
            return false;
        }
    }
    true
}

/// The holder's side as its node drains: offers the stream of reservation
/// `generation` (held as `holder`) until `until`. `None` when it cannot be
/// handed over (a source other than a distributed bus, Redis failing, no
/// longer held): it ends with the drain.
pub(super) async fn offer(
    shared: &SharedSessions,
    sid: &str,
    (holder, generation): (&str, u64),
    until: Instant,
) -> Option<Offer> {
    let running = shared.running_get(sid, generation)?;
    let buses = running.probe.send(Probe).await.ok().flatten()?;
    // Noted before the sync: a publish after this is counted as a change.
    let counts = buses.iter().map(|b| (b.clone(), b.publishes())).collect();
    if !sync_each(&buses).await {
        return None;
    }
    match shared.offer_get(sid, holder).await {
        Ok(true) => Some(Offer {
            buses: counts,
            until,
        }),
        _ => None,
    }
}

/// Where the holder's stream stands for a cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Quiesced {
    /// Its buses synced, and every event that reached it handled (their
    /// frames in its outbox).
    Ready,
    /// Not now (a sync or the settling failed or took too long).
    NotNow,
    /// Never: it no longer listens on the buses it was offered with only
    /// (or was sent a message outside them, or ended).
    Never,
}

/// Whether the holder's stream still listens on the buses it was offered
/// with, and nothing else fed it: its buses then.
async fn covered(
    shared: &SharedSessions,
    sid: &str,
    generation: u64,
    offer: &Offer,
) -> Option<(SessionStreamControl, Vec<Arc<dyn Synced>>)> {
    let running = shared.running_get(sid, generation)?;
    let buses = running.probe.send(Probe).await.ok().flatten()?;
    // A URI change may have joined another bus: its publishes were not
    // counted.
    buses
        .iter()
        .all(|b| offer.buses.iter().any(|(o, _)| Arc::ptr_eq(o, b)))
        .then_some((running, buses))
}

/// The holder's side of a cut request: its buses synced and its stream
/// settled.
pub(super) async fn quiesce(
    shared: &SharedSessions,
    sid: &str,
    generation: u64,
    offer: &Offer,
) -> Quiesced {
    let Some((running, buses)) = covered(shared, sid, generation, offer).await else {
        return Quiesced::Never;
    };
    if !sync_each(&buses).await {
        return Quiesced::NotNow;
    }
    let Ok(Some(settled)) = running.settle.send(Settle).await else {
        return Quiesced::NotNow;
    };
    match tokio::time::timeout(STEP, settled).await {
        Ok(Ok(())) => Quiesced::Ready,
        _ => Quiesced::NotNow,
    }
}

/// Whether the holder's stream is still covered after its flush (the
/// application may have sent it a message itself meanwhile).
pub(super) async fn still_covered(
    shared: &SharedSessions,
    sid: &str,
    generation: u64,
    offer: &Offer,
) -> bool {
    covered(shared, sid, generation, offer).await.is_some()
}

/// The taker's side: a client resumed on this node while `from` (another
/// node's holder) offers the session's stream. Opens this node's stream
/// actor for the session and takes the stream over; the holder name it is
/// known by in Redis then (its pump and watcher run), or `None` when the
/// holder refused or did not answer. Runs to its end even if the client
/// goes meanwhile (the holder may have cut for it).
pub(super) async fn take<H: SubscriptionHandler>(
    state: &web::Data<AppState<H>>,
    compat: &Arc<Compat>,
    session: &Session,
    request: (Assigns, RequestMeta),
    outbox: (Outbox, OutboxReceiver),
    from: &str,
) -> Option<String> {
    let (state, compat, session, from) = (
        state.clone(),
        compat.clone(),
        session.clone(),
        from.to_owned(),
    );
    actix_rt::spawn(
        async move { take_here(&state, &compat, &session, request, outbox, &from).await },
    )
    .await
    .ok()
    .flatten()
}

/// How long a taker keeps asking Redis whether the stream became its own
/// when Redis does not answer (a cut can no longer move it once the
/// preparation lapsed, 5 s after it was made).
const SETTLE_FOR: Duration = Duration::from_secs(30);

/// Whether the stream became the taker's: its preparation withdrawn (a
/// cut after this finds it gone) unless it did. Asked again, with a pause
/// that grows, until Redis answers (at most [`SETTLE_FOR`]); `None` when it
/// never did.
async fn settle_take(shared: &SharedSessions, sid: &str, token: &str, to: &str) -> Option<bool> {
    let deadline = Instant::now() + SETTLE_FOR;
    let mut pause = Duration::from_millis(100);
    loop {
        if let Ok(taken) = shared.withdraw_take(sid, token, to).await {
            return Some(taken);
        }
        if Instant::now() + pause >= deadline {
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

async fn take_here<H: SubscriptionHandler>(
    state: &web::Data<AppState<H>>,
    compat: &Arc<Compat>,
    session: &Session,
    (assigns, meta): (Assigns, RequestMeta),
    (tx, rx): (Outbox, OutboxReceiver),
    from: &str,
) -> Option<String> {
    let shared = compat.shared.as_ref()?;
    let sid = session.sid.as_str();
    let generation = compat.next_generation();
    let to = shared.holder(generation);
    let token = shared.take_token();
    if !matches!(
        shared.prepare_take(sid, from, &token, &to).await,
        Ok(Prepared::Ready(_))
    ) {
        return None;
    }
    let Some(opened) = open(state, session, (assigns, meta), tx, generation).await else {
        let _ = settle_take(shared, sid, &token, &to).await;
        return None;
    };
    let taken = ask(shared, sid, from, (&token, &to), &opened).await
        || settle_take(shared, sid, &token, &to).await == Some(true);
    let Opened {
        mut stream,
        started,
        done,
        uris,
        ..
    } = opened;
    if !taken {
        let _ = started
            .stop
            .send(StopStream(CloseReason::Disconnected))
            .await;
        return None;
    }
    stream.install(started);
    if let Some(replaced) = shared.adopt_get(sid, &session.owner, generation, stream.clone()) {
        let _ = replaced.stop.send(StopStream(CloseReason::Cancelled)).await;
    }
    super::fleet::watch_held(compat.clone(), session, generation, stream.clone());
    Pump {
        compat: compat.clone(),
        session: super::fleet::owned(session),
        generation,
        holder: to.clone(),
        server: state.server.clone(),
        offer_for: super::fleet::offer_window(compat, &state.config),
    }
    .spawn(rx, done);
    // DELETEd between the cut and the adoption (its control message found
    // no stream here yet): it ends now.
    if let Ok(Some(running)) = shared.end_if_lost(sid, generation).await {
        let _ = running
            .stop
            .send(StopStream(CloseReason::Disconnected))
            .await;
        return None;
    }
    // A URI changed after the cut and before the stream was adopted here
    // (its control message found no stream yet): open it again with the
    // session's set, in turn with the changes that come now.
    if let Some(turn) = shared.uri_turn(sid) {
        let _turn = turn.lock().await;
        if let Ok(now) = shared.uris(sid).await
            && now != uris
            && let Err(error) = restart(state, compat, sid, &stream).await
        {
            tracing::debug!(%error, "a taken-over GET stream kept the URIs it opened with");
        }
    }
    Some(to)
}

/// The taker's stream actor, opened and not installed yet.
struct Opened {
    stream: LegacyStream,
    started: SessionStreamControl,
    done: oneshot::Receiver<()>,
    /// The session's URIs it opened with.
    uris: Vec<String>,
    /// This process's Redis buses, synced before the actor opened.
    synced: Vec<Weak<dyn Synced>>,
}

/// Opens the taker's stream actor (its frames wait in its outbox) after a
/// sync of every Redis bus of this process: it sees only what Redis runs
/// after the taker's record.
async fn open<H: SubscriptionHandler>(
    state: &web::Data<AppState<H>>,
    session: &Session,
    (assigns, meta): (Assigns, RequestMeta),
    tx: Outbox,
    generation: u64,
) -> Option<Opened> {
    let shared = state.compat.as_ref()?.shared.as_ref()?;
    let synced = match tokio::time::timeout(STEP, sync_all()).await {
        Ok(Ok(synced)) => synced,
        _ => return None,
    };
    let uris = shared.uris(&session.sid).await.ok()?;
    let server = &state.server;
    let (done_tx, done) = oneshot::channel();
    let connection = Connection::exchange(server.clone(), tx.clone(), done_tx)
        .outliving_shutdown()
        .start();
    let version =
        crate::runtime::version_label(&session.init.version, crate::compat::LEGACY_VERSIONS);
    let stream = LegacyStream::new(connection, tx, meta, assigns, version);
    let id = RequestId::String(format!("get-{generation}"));
    let started = stream
        .start(&state.suite, server, uris.clone(), id)
        .await
        .ok()
        .flatten()?;
    Some(Opened {
        stream,
        started,
        done,
        uris,
        synced,
    })
}

/// Asks the holder to cut once the taker's stream listens on Redis (each
/// of its buses among those synced, its topics subscribed), and waits for
/// the answer: whether the stream is the taker's.
async fn ask(
    shared: &SharedSessions,
    sid: &str,
    from: &str,
    (token, to): (&str, &str),
    opened: &Opened,
) -> bool {
    let Ok(Some(buses)) = opened.started.probe.send(Probe).await else {
        return false;
    };
    let all_synced = buses.iter().all(|bus| {
        let bus = Arc::downgrade(bus);
        opened.synced.iter().any(|s| Weak::ptr_eq(s, &bus))
    });
    if !all_synced {
        return false;
    }
    for bus in &buses {
        if tokio::time::timeout(STEP, bus.subscribed()).await.is_err() {
            return false;
        }
    }
    // This node's publishes made before its stream joined (delivered here
    // before it did) reach Redis before the request: the holder hears them
    // before its own sync comes back, whichever bus carries the request.
    if !sync_each(&buses).await {
        return false;
    }
    if shared.ask_cut(from, sid, token).await.is_err() {
        return false;
    }
    let deadline = Instant::now() + CUT_WAIT;
    while Instant::now() < deadline {
        match shared.taking(sid, token, to).await {
            Ok(Taking::Taken) => return true,
            Ok(Taking::Refused) | Err(_) => return false,
            Ok(Taking::Pending) => tokio::time::sleep(CUT_POLL).await,
        }
    }
    false
}
