//! The HTTP side of 2025 sessions shared by the nodes of a Redis bus
//! ([`crate::compat::SharedSessions`]): the GET stream recorded in Redis as
//! held by this node (its URI changes: `fleet_uris`).

use std::sync::Arc;
use std::time::Duration;

use actix::Actor as _;
use actix_web::{HttpResponse, web};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::fleet_events;
use super::fleet_handoff;
use super::fleet_pump::Pump;
use super::fleet_uris::{control_loop, restart};
use super::get_stream::{gone, not_ours, not_reserved, session_gone, state_refusal};
use super::resumable::ReaderConfig;
use super::session::Session;
use super::{AppState, Compat};
use crate::compat::{Claim, LegacyStream, Reserve, SharedSessions};
use crate::mux::{Assigns, Outbox, OutboxReceiver};
use crate::protocol::{McpError, RequestId, RequestMeta};
use crate::runtime::{CloseReason, Connection, StopStream};
use crate::subscription::SubscriptionHandler;
use crate::transport::http::HttpConfig;

/// How often a held GET stream is checked for its end (to let go of it in
/// Redis).
const WATCH_EVERY: Duration = Duration::from_millis(200);
/// Every how many [`WATCH_EVERY`]s a held GET stream is checked against
/// Redis (5 s): a session DELETEd on another node whose control message was
/// lost (the bus delivers at most once) ends its stream within this.
const RECHECK_EVERY: u32 = 25;
pub(super) fn shared_of(compat: &Compat) -> Result<&SharedSessions, McpError> {
    compat
        .shared
        .as_ref()
        .ok_or_else(|| McpError::internal("Internal error: sessions are not shared"))
}

/// Lets go of a GET reservation in Redis unless disarmed (the stream opened
/// and is watched instead, or the client left while it was being set up).
struct Held {
    compat: Arc<Compat>,
    sid: String,
    /// The session's owner (counted for it, maybe, by a reservation whose
    /// answer was lost).
    owner: String,
    generation: u64,
    /// The session's expiry: the release is retried until then.
    expires: u64,
    armed: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (compat, sid, generation) = (self.compat.clone(), self.sid.clone(), self.generation);
        let (owner, expires) = (self.owner.clone(), self.expires);
        actix_rt::spawn(async move {
            if let Some(shared) = compat.shared.as_ref() {
                shared
                    .release_get((&sid, &owner), generation, expires)
                    .await;
            }
        });
    }
}

/// `GET` of a shared session: takes the session's one GET stream in Redis
/// for this node (409 while another node that holds its lease has it open),
/// opens it with the session's URIs from Redis, and hears the other nodes'
/// changes for it until it ends.
///
/// The stream's events are kept in the session's Redis stream
/// ([`fleet_events`]): a GET with `Last-Event-ID` on any node, while the
/// stream runs (on whichever node), replays what followed that id and goes
/// on live; a GET without one while the stream runs with no reader takes it
/// over from its head.
pub(super) async fn get<H: SubscriptionHandler>(
    state: &web::Data<AppState<H>>,
    compat: Arc<Compat>,
    session: &Session,
    (assigns, meta, config): (Assigns, RequestMeta, ReaderConfig),
    last_event_id: Option<String>,
    (tx, rx): (Outbox, OutboxReceiver),
    permit: OwnedSemaphorePermit,
) -> HttpResponse {
    let Some(shared) = compat.shared.as_ref() else {
        return state_refusal(&McpError::internal(
            "Internal error: sessions are not shared",
        ));
    };
    if let Err(e) = state.suite.hold_node_lease().await {
        return state_refusal(&e);
    }
    if let Some(controls) = shared.listen() {
        actix_rt::spawn(control_loop(state.clone(), compat.clone(), controls));
    }
    let tag = fleet_events::tag(&session.sid, session.principal.as_deref());
    let after = match last_event_id.as_deref() {
        None => None,
        Some(raw) => match fleet_events::entry_of(&tag, raw) {
            Some(entry) => Some(entry),
            None => return not_ours(),
        },
    };
    let key = session.key();
    let generation = compat.next_generation();
    // Armed before the reservation is asked for: a reply lost on its way
    // back from Redis (a timeout, or this request dropped meanwhile) may
    // have reserved the stream all the same, and the mark must not outlive
    // this request (a compare-and-delete: nothing if it is not ours).
    let mut held = Held {
        compat: compat.clone(),
        sid: session.sid.clone(),
        owner: session.owner.clone(),
        generation,
        expires: session.expires,
        armed: true,
    };
    let reserved = shared.reserve_get(&key, generation).await;
    if matches!(reserved, Ok(Reserve::Busy | Reserve::Deleted)) {
        held.armed = false;
    }
    if matches!(reserved, Ok(Reserve::Busy)) {
        // The stream runs (here or on another node): read it from Redis.
        drop(permit);
        let taker = Taker {
            request: (assigns, meta),
            outbox: (tx, rx),
        };
        return read(state, &compat, session, (&tag, after), config, taker).await;
    }
    if let Some(refused) = not_reserved(reserved) {
        return refused;
    }
    if after.is_some() {
        // The stream that id was of has ended: what followed it is gone (as
        // on one node). `held` lets go of the reservation.
        return gone(&compat.events);
    }
    let server = &state.server;
    let uris = match shared.uris(&session.sid).await {
        Ok(uris) => uris,
        Err(e) => return state_refusal(&e),
    };
    let (done_tx, done_rx) = oneshot::channel();
    let mut connection = Connection::exchange(server.clone(), tx.clone(), done_tx);
    if compat.config.handoff_on_drain {
        // A drain offers the stream to another node before it ends it.
        connection = connection.outliving_shutdown();
    }
    let connection = connection.start();
    let version =
        crate::runtime::version_label(&session.init.version, crate::compat::LEGACY_VERSIONS);
    let mut stream = LegacyStream::new(connection, tx, meta, assigns, version);
    let id = RequestId::String(format!("get-{generation}"));
    let started = match stream.start(&state.suite, server, uris.clone(), id).await {
        Ok(Some(started)) => started,
        Ok(None) => {
            return HttpResponse::MethodNotAllowed()
                .insert_header((actix_web::http::header::ALLOW, "POST"))
                .finish();
        }
        // A limit of the principal: 429 with `Retry-After`; else 503.
        Err(e) => return state_refusal(&e),
    };
    let stop = started.stop.clone();
    stream.install(started);
    let watched = stream.clone();
    let committed = shared.commit_get(&key, generation, stream).await;
    if !matches!(committed, Ok(true)) {
        // DELETEd (or taken over) while the stream was being opened, or
        // Redis cannot say: the stream must not outlive the session.
        let _ = stop.send(StopStream(CloseReason::Disconnected)).await;
        return match committed {
            Err(e) => state_refusal(&e),
            _ => session_gone(),
        };
    }
    // A URI changed elsewhere while the stream was being opened (its control
    // message found no stream yet): start again with the session's set, in
    // turn with the changes that come now.
    if let Some(turn) = shared.uri_turn(&session.sid) {
        let _turn = turn.lock().await;
        if let Ok(now) = shared.uris(&session.sid).await
            && now != uris
            && let Err(error) = restart(state, &compat, &session.sid, &watched).await
        {
            tracing::debug!(%error, "GET stream kept the URIs it opened with");
        }
    }
    held.armed = false;
    watch_held(compat.clone(), session, generation, watched);
    drop(permit);
    // The stream opens a new history and is read from its start here.
    let reader = shared.reader_name(compat.next_generation());
    let holder = shared.holder(generation);
    let claimed = shared
        .claim_events(&key, None, &reader, (false, true))
        .await;
    let head = match claimed {
        Ok(Claim::Claimed { head, .. }) => head,
        refused => {
            // The stream cannot be kept: it does not run unread.
            let _ = stop.send(StopStream(CloseReason::Disconnected)).await;
            return match refused {
                Err(e) => state_refusal(&e),
                _ => session_gone(),
            };
        }
    };
    let owned = owned(session);
    Pump {
        compat: compat.clone(),
        session: owned.clone(),
        generation,
        holder: holder.clone(),
        server: state.server.clone(),
        offer_for: offer_window(&compat, &state.config),
    }
    .spawn(rx, done_rx);
    fleet_events::response(
        compat.clone(),
        (owned, tag),
        (reader, holder),
        head,
        config,
        state.server.clone(),
    )
}

/// What a GET needs to take the session's stream over from a draining
/// node: its request's identity and an outbox for the stream.
struct Taker {
    request: (Assigns, RequestMeta),
    outbox: (Outbox, OutboxReceiver),
}

/// The response reading the session's Redis stream after `after` (an entry
/// id), or from its head when the stream has no reader; when the stream's
/// holder drains and offers it, this node takes it over first
/// (`fleet_handoff`).
async fn read<H: SubscriptionHandler>(
    state: &web::Data<AppState<H>>,
    compat: &Arc<Compat>,
    session: &Session,
    (tag, after): (&str, Option<String>),
    config: ReaderConfig,
    taker: Taker,
) -> HttpResponse {
    let Some(shared) = compat.shared.as_ref() else {
        return state_refusal(&McpError::internal(
            "Internal error: sessions are not shared",
        ));
    };
    let reader = shared.reader_name(compat.next_generation());
    let claimed = shared
        .claim_events(
            &session.key(),
            after.as_deref(),
            &reader,
            (after.is_none(), false),
        )
        .await;
    match claimed {
        Err(e) => state_refusal(&e),
        Ok(Claim::Deleted) => session_gone(),
        Ok(Claim::NotOurs) => not_ours(),
        Ok(Claim::Gone) => gone(&compat.events),
        Ok(Claim::Busy) => not_reserved(Ok(Reserve::Busy)).unwrap_or_else(session_gone),
        Ok(Claim::Claimed {
            head,
            holder,
            offered,
        }) => {
            // Refused: the response reads what the holder records, and
            // ends with a `retry` hint (everything written) while the
            // stream is still offered: the reconnection tries again.
            let holder =
                if offered && compat.config.handoff_on_drain && shared.elsewhere(&holder).is_some()
                {
                    let taker = (taker.request, taker.outbox);
                    fleet_handoff::take(state, compat, session, taker.0, taker.1, &holder)
                        .await
                        .unwrap_or(holder)
                } else {
                    holder
                };
            fleet_events::response(
                compat.clone(),
                (owned(session), tag.to_owned()),
                (reader, holder),
                after.unwrap_or(head),
                config,
                state.server.clone(),
            )
        }
    }
}

/// The session as the pump and its readers name it in Redis.
pub(super) fn owned(session: &Session) -> fleet_events::Owned {
    fleet_events::Owned {
        sid: session.sid.clone(),
        owner: session.owner.clone(),
        expires: session.expires,
    }
}

/// How long a draining node offers a GET stream to another node: the
/// drain's time less a second for the stream to end after it (`None`: no
/// handoff).
pub(super) fn offer_window(compat: &Compat, config: &HttpConfig) -> Option<Duration> {
    compat.config.handoff_on_drain.then(|| {
        config
            .drain_timeout
            .saturating_sub(Duration::from_secs(1))
            .max(Duration::from_millis(500))
    })
}

/// Watches the session's GET stream held here as reservation `generation`
/// until it ends: lets go of it in Redis then, and ends it when this node
/// no longer holds it there (DELETEd or taken over elsewhere, a control
/// message lost).
pub(super) fn watch_held(
    compat: Arc<Compat>,
    session: &Session,
    generation: u64,
    watched: LegacyStream,
) {
    let watcher = Held {
        compat,
        sid: session.sid.clone(),
        owner: session.owner.clone(),
        generation,
        expires: session.expires,
        armed: true,
    };
    actix_rt::spawn(async move {
        let mut ticks = 0u32;
        while watched.alive() {
            tokio::time::sleep(WATCH_EVERY).await;
            ticks = ticks.wrapping_add(1);
            if !ticks.is_multiple_of(RECHECK_EVERY) {
                continue;
            }
            let Some(shared) = watcher.compat.shared.as_ref() else {
                break;
            };
            // Redis unreachable: the stream keeps running (the bus ends
            // every stream itself when it loses Redis). The actor stopped is
            // the one running now (a restart replaces it in the table).
            if let Ok(Some(running)) = shared.end_if_lost(&watcher.sid, generation).await {
                let _ = running
                    .stop
                    .send(StopStream(CloseReason::Disconnected))
                    .await;
                break;
            }
        }
        drop(watcher);
    });
}
